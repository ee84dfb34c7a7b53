-- bench/call_overhead.lua: where the host time of a small catalog call goes.
--   culua bench/call_overhead.lua [CALLS] [ROUNDS]
-- A scan of 2^16 float32 elements is bound by the host: its kernel is a few
-- microseconds, its launch a few more, and the rest is Lua and the checks.
-- Each line is the median over ROUNDS of a loop of CALLS, timed with
-- cuda.clock() (host, monotonic) after a warm-up; the GPU work the loops queue
-- is waited for outside the timing. The last lines are the issue's figure: a
-- call in a loop of 100 between two events (as bench/scan.lua times it).
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local CALLS, ROUNDS = tonumber(arg[1]) or 10000, tonumber(arg[2]) or 7

local median = require("culua.bench").median

-- us a call of f, median of ROUNDS loops of `calls`
local function per_call(f, calls)
  calls = calls or CALLS
  for _ = 1, calls // 10 do f() end
  cuda.synchronize()
  local t = {}
  for r = 1, ROUNDS do
    local t0 = cuda.clock()
    for _ = 1, calls do f() end
    t[r] = (cuda.clock() - t0) * 1e6 / calls
    cuda.synchronize()
  end
  return median(t)
end

local n = 1 << 16
local x, y = cuda.array("float32", n):fill(1), cuda.array("float32", n)
local keys = cuda.array("uint32", n):fill(7)
local dev = x.device
local rows = {}
local function row(what, us) rows[#rows + 1] = ("%-52s %8.3f us"):format(what, us) end

row("x.dtype", per_call(function () return x.dtype end, 10 * CALLS))
row("#x", per_call(function () return #x end, 10 * CALLS))
row("x.device", per_call(function () return x.device end, 10 * CALLS))
row("x.ptr", per_call(function () return x.ptr end, 10 * CALLS))
row("dev.ordinal", per_call(function () return dev.ordinal end, 10 * CALLS))
row("cuda.type(x)", per_call(function () return cuda.type(x) end, 10 * CALLS))
local function nothing() end
row("cuda.nvtx.range around an empty function", per_call(function () return cuda.nvtx.range("r", nothing) end, 10 * CALLS))

-- the look-back kernel alone, with a scan's 11 arguments (kernels/scan.cu)
local kern = cat.kernel("scan", "culua_scan_lookback_f32_add")
local w = cuda.array("uint64", 1 + 16):fill(0)
local v = cuda.array("uint64", 32)
local base, epoch = 0, 0
local cfg = {grid = 16, block = 128}
row("kernel:launch, the scan kernel's 11 arguments", per_call(function ()
  epoch = epoch + 1
  kern:launch(cfg, x, y, n, 0, 0, w, v, base, epoch, 16, 0)
  base = base + 16
end))
local go = kern:prepare(cfg)
row("the same through k:prepare", per_call(function ()
  epoch = epoch + 1
  go(x, y, n, 0, 0, w, v, base, epoch, 16, 0)
  base = base + 16
end))

local rk = cuda.bench(function ()
  for _ = 1, 100 do
    epoch = epoch + 1
    go(x, y, n, 0, 0, w, v, base, epoch, 16, 0)
    base = base + 16
  end
end, {warmup = 2, reps = 21})
row("the prepared launch in a loop of 100, events", rk.median * 1000 / 100)

row("cuda.catalog.scan(x, y), 2^16 float32", per_call(function () cat.scan(x, y) end))
row("cuda.catalog.scan(x), in place", per_call(function () cat.scan(x) end))
row("cuda.catalog.scan(x, y, {exclusive = true})", per_call(function () cat.scan(x, y, {exclusive = true}) end))
local c = cuda.array("int64", 1)
local copts = {count = c}
row("cuda.catalog.compact(x, y, \"x > 0.5f\", {count = c})", per_call(function () cat.compact(x, y, "x > 0.5f", copts) end))
row("cuda.catalog.reduce(x), the sum read back", per_call(function () return cat.reduce(x) end, CALLS // 10))
row("cuda.catalog.sort(keys), 2^16 uint32", per_call(function () cat.sort(keys) end, CALLS // 10))
x:fill(1)

-- the issue's figure: a call in a loop of 100 between two events
local calls = 100
local r = cuda.bench(function () for _ = 1, calls do cat.scan(x, y) end end, {warmup = 2, reps = 21})
row("scan 2^16, a call in a loop of 100, events", r.median * 1000 / calls)
local rs = cuda.bench(function () for _ = 1, calls do cat.sort(keys) end end, {warmup = 2, reps = 21})
row("sort 2^16, a call in a loop of 100, events", rs.median * 1000 / calls)

print(("host time of small calls on %s, median of %d rounds"):format(dev.name, ROUNDS))
for _, l in ipairs(rows) do print(l) end
