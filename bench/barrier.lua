-- bench/barrier.lua: latency of each grid barrier against cooperative groups'
-- grid.sync(), at the full co-resident grid and at one block per SM, in the same run.
--   culua bench/barrier.lua [ROUNDS] [REPS]
local cuda = require "cuda"
local bar = cuda.catalog.barrier
local ROUNDS, REPS = tonumber(arg[1]) or 2000, tonumber(arg[2]) or 9
local dev = cuda.device()
local sms = dev:attribute("multiprocessor_count")
local state = bar.state()

local function per_barrier(kind, blocks, threads)
  local loop = cuda.catalog.kernel("barrier", "culua_barrier_loop_" .. kind)
  local run = function ()
    bar.launch(loop, {grid = blocks, block = threads, state = state, cooperative = kind == "coop"}, state, ROUNDS)
  end
  local base = cuda.bench(function () -- the same launch with one round: launch cost, subtracted
    bar.launch(loop, {grid = blocks, block = threads, state = state, cooperative = kind == "coop"}, state, 1)
  end, {warmup = 2, reps = REPS}).median
  local r = cuda.bench(run, {warmup = 2, reps = REPS}).median
  return (r - base) * 1000 / (ROUNDS - 1)
end

print(("grid barrier latency on %s, %d barriers per launch, median of %d, launch cost subtracted"):format(dev.name, ROUNDS, REPS))
print(("%-22s %12s %12s"):format("barrier", ("%d blocks"):format(8 * sms), ("%d blocks"):format(sms)))
local res = {}
for _, kind in ipairs{"coop", "grid", "sense", "seed"} do
  local full, one = per_barrier(kind, 8 * sms, 128), per_barrier(kind, sms, 128)
  res[kind] = {full, one}
  print(("%-22s %9.3f us %9.3f us"):format(kind == "coop" and "grid.sync() (anchor)" or kind, full, one))
end
local best, bestk = math.huge, nil
for _, k in ipairs{"grid", "sense", "seed"} do if res[k][1] < best then best, bestk = res[k][1], k end end
local ratio = best / res.coop[1]
print(("best: %s at %.2fx the latency of grid.sync() at %d blocks; target <= 0.80x: %s")
      :format(bestk, ratio, 8 * sms, ratio <= 0.8 and "met" or "NOT met"))
