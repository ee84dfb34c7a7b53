-- bench/scan.lua: cuda.catalog.scan and compact against CUB, in the same run.
--   culua bench/scan.lua [ANCHOR]
-- ANCHOR (bench/anchor_cub) times the CUB call alone with events, median:
--   ANCHOR scan f32|i32 N REPS   -> "scan_ms X"    (DeviceScan::InclusiveSum)
--   ANCHOR select f32 N REPS     -> "select_ms X"  (DeviceSelect::If, x > 0.5f, uniform [0, 1))
-- Without it, ours alone. Figures: scan of 2^28 float32 and int32 (GB/s with
-- 8 bytes an element moved; target >= 1.0x CUB), a scan of 2^16 a call timed
-- from Lua (target <= 10 us), compact of 2^28 float32 with half kept (target
-- >= 1.0x CUB), as a whole call (reading the count back, which waits) and between two
-- events with the count left on the device (opts.count), comparable to CUB's.
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local ANCHOR = arg[1]
local REPS = 20
local N = 1 << 28
local dev = cuda.device()

local run_anchor = require "culua.anchor"
local function anchor(args, key) return run_anchor(ANCHOR, args, key) end

local function line(what, ms, bytes, cub_ms)
  local s = ("%-36s %9.3f ms %8.1f GB/s"):format(what, ms, bytes / ms / 1e6)
  if cub_ms then
    s = s .. ("   CUB %9.3f ms %8.1f GB/s   %.2fx CUB"):format(cub_ms, bytes / cub_ms / 1e6, cub_ms / ms)
  end
  print(s)
end

print(("cuda.catalog scan and compact on %s, median of %d%s"):format(dev.name, REPS,
      ANCHOR and (", anchor " .. ANCHOR) or " (no anchor given: ours alone)"))
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end

-- scan, float32 and int32, 2^28
for _, t in ipairs{{"float32", "f32", 0, 1}, {"int32", "i32", 0, 9}} do
  local h = cuda.host_array(t[1], N):random(28, t[3], t[4])
  local x, y = cuda.array(t[1], N):copy_from(h), cuda.array(t[1], N)
  h = nil
  collectgarbage()
  cat.scan(x, y)
  local sum, last = cat.reduce(x), y:view(N, 1):totable()[1]
  if t[1] == "int32" and sum ~= last then print(("WRONG: int32 scan's last %d, reduce %d"):format(last, sum)) end
  local r = cuda.bench(function () cat.scan(x, y) end, {warmup = 3, reps = REPS})
  line(("scan %s n = 2^28 (inclusive add)"):format(t[1]), r.median, 8 * N, anchor(("scan %s %d %d"):format(t[2], N, REPS), "scan_ms"))
  local r2 = cuda.bench(function () cat.scan(x) end, {warmup = 3, reps = REPS})
  line(("scan %s n = 2^28 in place"):format(t[1]), r2.median, 8 * N)
  x, y = nil, nil
  collectgarbage()
end

-- a small scan, one call from Lua as a user makes it (launch and checks included)
do
  local n = 1 << 16
  local x, y = cuda.array("float32", n):fill(1), cuda.array("float32", n)
  local calls = 100
  local r = cuda.bench(function () for _ = 1, calls do cat.scan(x, y) end end, {warmup = 2, reps = REPS})
  print(("%-36s %9.2f us a call (target <= 10 us)"):format("scan float32 n = 2^16 from Lua", r.median * 1000 / calls))
  local r1 = cuda.bench(function () cat.scan(x, y) end, {warmup = 10, reps = 50})
  print(("%-36s %9.2f us"):format("  one call between two events", r1.median * 1000))
end

-- compact float32 2^28, x > 0.5f of uniform [0, 1): half kept
do
  local h = cuda.host_array("float32", N):random(5, 0, 1)
  local x, y = cuda.array("float32", N):copy_from(h), cuda.array("float32", N)
  h = nil
  collectgarbage()
  local kept = cat.compact(x, y, "x > 0.5f")
  local cub = anchor(("select f32 %d %d"):format(N, REPS), "select_ms")
  local r = cuda.bench(function () cat.compact(x, y, "x > 0.5f") end, {warmup = 3, reps = REPS})
  line(("compact float32 n = 2^28 (%.1f%% kept)"):format(100 * kept / N), r.median, 4 * N + 4 * kept, cub)
  -- the same between two events with the count left on the device (no read-back, no
  -- wait in the call): the kernel's time, as CUB's figure is
  local c = cuda.array("int64", 1)
  local rk = cuda.bench(function () cat.compact(x, y, "x > 0.5f", {count = c}) end, {warmup = 3, reps = REPS})
  if c:totable()[1] ~= kept then print(("WRONG: compact's count on the device %d, read back %d"):format(c:totable()[1], kept)) end
  line("  the same, kernel alone (no read-back)", rk.median, 4 * N + 4 * kept, cub)
  local f = cuda.array("uint8", N):fill(1)
  r = cuda.bench(function () cat.compact(x, y, f) end, {warmup = 3, reps = REPS})
  line("compact float32 n = 2^28, uint8 flags", r.median, 5 * N + 4 * N)
end
