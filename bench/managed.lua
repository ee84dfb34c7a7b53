-- Managed memory against device memory (issue 38's target: a kernel over a
-- prefetched managed array runs at >= 0.97x the same kernel over device memory).
-- One kernel, y = a*x + y (cuda.elementwise), over 2^28 float32 (12 bytes an
-- element moved), on four kinds of memory:
--   device       cuda.array: the reference
--   prefetched   managed arrays prefetched to the device: the target's figure
--   first touch  managed arrays whose pages are on the host (prefetched there
--                before each run, outside the events): the kernel faults them over
--   fresh        managed arrays made before each run and never touched: the
--                kernel's faults populate them on the device
--   mapped       mapped host arrays (zero-copy): every access crosses the bus
-- Event-timed medians after warm-up (culua.bench); first touch, fresh and mapped
-- take fewer runs, each one costing a migration or a trip over the bus.
--
--   culua bench/managed.lua [LOG2N]

local cuda = require "cuda"
local bench = require "culua.bench"
bench.need_devices(1)

local log2n = math.tointeger(tonumber(arg and arg[1] or "28"))
local n = 1 << log2n
local bytes = 12 * n
local axpy = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "axpy"}
local dev = cuda.device(0)
local function gbs(r) return bytes / r.median / 1e6 end

local rows = {}
local function row(what, r) rows[#rows + 1] = {what, r} end

do   -- device memory
  local x <close> = cuda.array("float32", n):fill(1)
  local y <close> = cuda.array("float32", n):fill(2)
  row("device (cuda.array)", bench(function () axpy(2, x, y) end, {name = "device"}))
end

do   -- managed, prefetched to the device: where its pages will be used
  local x <close> = cuda.array("float32", n, {managed = true}):fill(1)
  local y <close> = cuda.array("float32", n, {managed = true}):fill(2)
  x:prefetch(dev)
  y:prefetch(dev)
  cuda.synchronize()
  row("managed, prefetched to the device", bench(function () axpy(2, x, y) end, {name = "prefetched"}))
end

do   -- managed, its pages on the host before each run: the kernel's first touch faults them over
  local x <close> = cuda.array("float32", n, {managed = true}):fill(1)
  local y <close> = cuda.array("float32", n, {managed = true}):fill(2)
  local function to_host()
    x:prefetch("host")
    y:prefetch("host")
    cuda.synchronize()
  end
  row("managed, first touch (pages on the host)", bench(function () axpy(2, x, y) end,
      {name = "first touch", setup = to_host, warmup = 1, reps = 5}))
end

do   -- managed, never touched: the kernel's faults populate fresh pages on the device
  local x, y
  local function fresh()
    if x then x:close(); y:close() end
    x = cuda.array("float32", n, {managed = true})
    y = cuda.array("float32", n, {managed = true})
  end
  row("managed, first touch (fresh pages)", bench(function () axpy(2, x, y) end,
      {name = "fresh", setup = fresh, warmup = 1, reps = 5}))
  x:close(); y:close()
end

do   -- mapped host memory: zero-copy over the bus
  local x <close> = cuda.host_array("float32", n, {mapped = true}):fill(1)
  local y <close> = cuda.host_array("float32", n, {mapped = true}):fill(2)
  row("mapped host memory (zero-copy)", bench(function () axpy(2, x, y) end, {name = "mapped", warmup = 1, reps = 3}))
end

print(("y = a*x + y over 2^%d float32 (%d MiB an array), %s"):format(log2n, 4 * n >> 20, dev.name))
print(("%-42s %10s %9s %10s"):format("memory", "median ms", "GB/s", "vs device"))
local base = rows[1][2].median
for i, r in ipairs(rows) do
  local ratio = base / r[2].median
  local note = i == 2 and (ratio >= 0.97 and "  (target >= 0.97x: met)" or "  (target >= 0.97x: missed)") or ""
  print(("%-42s %10.3f %9.1f %9.2fx%s"):format(r[1], r[2].median, gbs(r[2]), ratio, note))
end
