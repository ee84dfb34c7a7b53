-- bench/histogram.lua: cuda.catalog.histogram against CUB, in the same run.
--   culua bench/histogram.lua [ANCHOR]
-- ANCHOR (bench/anchor_cub) times DeviceHistogram::HistogramEven alone with
-- events, median:
--   ANCHOR histogram u8 N BINS REPS uniform|equal  -> "histogram_ms X"
--     (uniform random bytes, or all 7; levels over [0, 256))
--   ANCHOR histogram f32 N BINS REPS uniform       -> "histogram_ms X"
--     (uniform [0, 1), levels over [0, 1))
-- Without it (or when it is missing), ours alone. GB/s counts the input read
-- once. Targets on the H100: uint8 256 bins 2^30 uniform >= 1.1x CUB, all
-- equal >= 1.0x; float32 1024 bins 2^28 >= 3x CUB. Ours includes reading the
-- left-out count back (a pinned word, the stream synchronized).
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local ANCHOR = arg[1]
local REPS = 20
local dev = cuda.device()

local run_anchor = require "culua.anchor"
local function anchor(args, key) return run_anchor(ANCHOR, args, key) end

local function line(what, ms, bytes, cub_ms, target)
  local s = ("%-40s %9.3f ms %8.1f GB/s"):format(what, ms, bytes / ms / 1e6)
  if cub_ms then
    s = s .. ("   CUB %9.3f ms %8.1f GB/s   %.2fx CUB (target >= %.1fx)"):format(cub_ms, bytes / cub_ms / 1e6,
                                                                             cub_ms / ms, target)
  end
  print(s)
end

print(("cuda.catalog histogram on %s, median of %d%s"):format(dev.name, REPS,
      ANCHOR and (", anchor " .. ANCHOR) or " (no anchor given: ours alone)"))
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end

-- uint8, 256 bins, 2^30: uniform bytes, then all 7
do
  local N = 1 << 30
  local x = cuda.array("uint8", N)
  local chunk = 1 << 26
  local h = cuda.host_array("uint8", chunk)
  for i = 0, N // chunk - 1 do
    h:random(30 + i, 0, 255)
    x:view(i * chunk + 1, chunk):copy_from(h)
  end
  h = nil
  collectgarbage()
  local counts = cuda.array("uint32", 256)
  for _, kind in ipairs{"uniform", "equal"} do
    if kind == "equal" then x:fill(7) end
    local left = cat.histogram(x, counts)
    if left ~= 0 then print(("WRONG: uint8 %s left out %d"):format(kind, left)) end
    local r = cuda.bench(function () cat.histogram(x, counts) end, {warmup = 3, reps = REPS})
    line(("uint8 256 bins n = 2^30 %s"):format(kind), r.median, N,
         anchor(("histogram u8 %d 256 %d %s"):format(N, REPS, kind), "histogram_ms"), kind == "uniform" and 1.1 or 1.0)
    local rs = cuda.bench(function () cat.histogram(x, counts, {variant = "seed"}) end, {warmup = 1, reps = 5})
    line(("  seed variant, %s"):format(kind), rs.median, N)
  end
end
collectgarbage()

-- float32, 1024 bins over [0, 1), 2^28 uniform
do
  local N = 1 << 28
  local x = cuda.array("float32", N)
  local chunk = 1 << 24
  local h = cuda.host_array("float32", chunk)
  for i = 0, N // chunk - 1 do
    h:random(60 + i, 0, 0.999)   -- below 1: a double near 1 rounds to 1.0f, out of [0, 1)
    x:view(i * chunk + 1, chunk):copy_from(h)
  end
  h = nil
  collectgarbage()
  local counts = cuda.array("uint32", 1024)
  local o = {lo = 0.0, hi = 1.0}
  local left = cat.histogram(x, counts, o)
  if left ~= 0 then print(("WRONG: float32 left out %d"):format(left)) end
  local r = cuda.bench(function () cat.histogram(x, counts, o) end, {warmup = 3, reps = REPS})
  line("float32 1024 bins n = 2^28 uniform", r.median, 4 * N,
       anchor(("histogram f32 %d 1024 %d uniform"):format(N, REPS), "histogram_ms"), 3.0)
end
