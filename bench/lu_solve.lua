-- bench/lu_solve.lua: cuda.catalog.lu_solve alone, both ways: by substitution (one
-- launch a triangle, kernels/triangular.cu's substitutions) and by blocks (a trsm launch and a
-- matmul a block row each way), against cuSOLVER's getrs (one right-hand side).
--   culua bench/lu_solve.lua [ANCHOR [SIZES [KS [STREAM]]]]
-- ANCHOR: bench/anchor_cusolver (as bench/solve.lua's; "" for none); SIZES "1000,8192"
-- (default 8192); KS, the right-hand sides, "1,2,4,8,16,17,32,64,128" (the default);
-- STREAM "stream" times the calls on a stream of their own (the default stream
-- otherwise). A line a dtype, n and k: the median of REPS lu_solve calls on one
-- factorization (B put back before each, not timed), each way, the ratio (which says
-- where solve.tune.trsv_max, the most right-hand sides substituted, should be) and the
-- residual ratio ||B - A X|| / (||A|| ||X|| n eps) of each way's last solve.
-- Both ways include lu_solve's read-back of the input check, which synchronizes.
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local tune = require("culua.catalog.solve").tune
local run_anchor = require "culua.anchor"

local ANCHOR = arg[1]
if ANCHOR == "" then ANCHOR = nil end
local SIZES, KS = {}, {}
for s in (arg[2] or "8192"):gmatch("%d+") do SIZES[#SIZES + 1] = math.tointeger(tonumber(s)) end
for k in (arg[3] or "1,2,4,8,16,17,32,64,128"):gmatch("%d+") do KS[#KS + 1] = math.tointeger(tonumber(k)) end
local stream = arg[4] == "stream" and cuda.stream() or nil
local REPS = 9
local MAX0 = tune.trsv_max   -- the default, put back at the end
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end
print(("cuda.catalog lu_solve on %s, median of %d%s; solve.tune.trsv_max = %d"):format(cuda.device().name, REPS,
      stream and ", on a stream" or "", MAX0))

-- the median time (ms) of lu_solve(LU, piv, B) with B = B0 again before each (not timed), after a warm-up
local function time(LU, piv, B0, B)
  return cuda.bench(function () cat.lu_solve(LU, piv, B, {stream = stream}) end,
                    {warmup = 1, reps = REPS, stream = stream, setup = function () B:copy_from(B0, stream) end}).median
end

local function residual(hA, B, hB, dt, n)
  local hX = cuda.host_array(dt, hB.shape)
  B:copy_to(hX)
  return cat.reference.lu_residual(hA, hX, hB) / (n * (dt == "float32" and 2.0 ^ -24 or 2.0 ^ -53))
end

for _, dt in ipairs{"float32", "float64"} do
  local t = dt == "float32" and "f32" or "f64"
  for _, n in ipairs(SIZES) do
    local hA = cuda.host_array(dt, {n, n}):random(1, -1, 1)
    local LU = cuda.array(dt, {n, n}):copy_from(hA)
    local piv = cat.lu(LU)
    local getrs = ANCHOR and run_anchor(ANCHOR, ("%s %d %d"):format(t, n, REPS), "getrs_ms")
    for _, k in ipairs(KS) do
      local hB = cuda.host_array(dt, {n, k}):random(2, -1, 1)
      local B0, B = cuda.array(dt, {n, k}):copy_from(hB), cuda.array(dt, {n, k})
      tune.trsv_max = math.maxinteger
      local sub = time(LU, piv, B0, B)
      local rsub = residual(hA, B, hB, dt, n)
      tune.trsv_max = 0
      local blk = time(LU, piv, B0, B)
      local rblk = residual(hA, B, hB, dt, n)
      tune.trsv_max = MAX0
      local s = ("%s n = %5d k = %3d: substitution %8.3f ms, blocks %8.3f ms (%5.1fx)   ratios %.2f, %.2f%s"):format(
        dt, n, k, sub, blk, blk / sub, rsub, rblk, (rsub > 10 or rblk > 10) and "  WRONG" or "")
      if k == 1 and getrs then s = s .. ("   cuSOLVER getrs %.3f ms (%.2fx ours)"):format(getrs, getrs / sub) end
      print(s)
      B0:close(); B:close()
    end
    LU:close(); piv:close()
    hA = nil
    collectgarbage()
  end
end
tune.trsv_max = MAX0
