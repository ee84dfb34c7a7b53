-- bench/barrier.lua: latency of each grid barrier against cooperative groups'
-- grid.sync(), at the full co-resident grid and at one block per SM, in the same run.
--   culua bench/barrier.lua [ROUNDS] [REPS]
local cuda = require "cuda"
require("culua.bench").need_devices()
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
-- full grids (every multiprocessor as full as the block size allows) and one block per SM
local shapes = {{8 * sms, 256, "8/SM x 256 (full)"}, {16 * sms, 128, "16/SM x 128 (full)"}, {8 * sms, 128, "8/SM x 128"}, {sms, 128, "1/SM x 128"}}
io.write(("%-22s"):format("barrier"))
for _, sh in ipairs(shapes) do io.write(("%20s"):format(sh[3])) end
io.write("\n")
local res = {}
for _, kind in ipairs{"coop", "grid", "sense", "seed"} do
  res[kind] = {}
  io.write(("%-22s"):format(kind == "coop" and "grid.sync() (anchor)" or kind))
  for i, sh in ipairs(shapes) do
    res[kind][i] = per_barrier(kind, sh[1], sh[2])
    io.write(("%17.3f us"):format(res[kind][i]))
  end
  io.write("\n")
end
for i, sh in ipairs(shapes) do
  local best, bestk = math.huge, nil
  for _, k in ipairs{"grid", "sense", "seed"} do if res[k][i] < best then best, bestk = res[k][i], k end end
  local ratio = best / res.coop[i]
  print(("%-20s best: %-5s %.2fx the latency of grid.sync(); target <= 0.80x: %s"):format(sh[3], bestk, ratio,
        ratio <= 0.8 and "met" or "NOT met"))
end
