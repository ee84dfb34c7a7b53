-- bench/growth.lua: what lu's growth = true costs, and how random matrices grow.
--   culua bench/growth.lua [SIZES [DTYPES]]
-- For each size (default "1000,8192,16384") and dtype (default "float32,float64"):
-- lu on a random matrix (uniform in [-1, 1)) without and with growth = true, timed
-- with events by cuda.bench (a warm-up, then the median of 5; each call on a fresh
-- copy, the copy not timed), beside the growth factor max|U| / max|A| it returns.
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local SIZES, DTYPES = {}, {}
for s in (arg[1] or "1000,8192,16384"):gmatch("%d+") do SIZES[#SIZES + 1] = math.tointeger(tonumber(s)) end
for d in (arg[2] or "float32,float64"):gmatch("float%d+") do DTYPES[#DTYPES + 1] = d end
local REPS = 5

print(("cuda.catalog.lu, growth = true, on %s, median of %d"):format(cuda.device().name, REPS))
for _, dt in ipairs(DTYPES) do
  for _, n in ipairs(SIZES) do
    local A0 = cuda.array(dt, {n, n}):copy_from(cuda.host_array(dt, {n, n}):random(n, -1, 1))
    local A = cuda.array(dt, {n, n})
    local growth
    local function time(opts)
      return cuda.bench(function () local _, info = cat.lu(A, opts); growth = info.growth end,
                        {warmup = 1, reps = REPS, setup = function () A:copy_from(A0) end}).median
    end
    local plain, with = time(nil), time({growth = true})
    print(("%-7s n = %5d   lu %9.3f ms   with growth %9.3f ms   %+6.2f%%   growth %.2f"):format(
      dt, n, plain, with, 100 * (with - plain) / plain, growth))
    A:close(); A0:close()
    collectgarbage()
  end
end
