-- bench/sort_multi.lua: cuda.catalog.sort over several GPUs against one GPU sorting all
-- the keys, in the same run: uniform random uint32 keys (every bit pattern), 2^30 by
-- default, already on their GPUs before the call and on them after it.
--   culua bench/sort_multi.lua [LOG2N [GPUS]]      devices = {0, ..., GPUS - 1} (default:
--                                                 every GPU, at most 4); each holds N / GPUS
--   mpirun -np 4 culua bench/sort_multi.lua [LOG2N]  comm = c over the ranks, a GPU a rank
--                                                 (mpirun -np 2 on two GPUs); rank 0 prints
--   ... items=N search=N phased=0|1 direct=0|1    the sort's knobs (sort_multi_run.lua's tune);
--       timeline=1                                each part's steps on its GPU, the last call
-- A call is timed by the host clock from the moment every GPU (every rank: after a barrier)
-- is idle until it returns, which the sort does once every part holds its slice; the keys
-- are restored from pristine copies before each call. One GPU's figure is the one-GPU sort
-- of all N keys on device 0 (over ranks: rank 0's GPU, the ranks' keys gathered there),
-- timed between events, and of N / GPUS keys, the local sort each part starts with. Median
-- of REPS after two warm-up calls. Target (issue 39): 2^30 keys on 4 GPUs >= 2.5x one GPU.
-- Keep NCCL_NVLS_ENABLE=0.
local cuda = require "cuda"
-- knobs of the sort (its .tune) as words among the arguments: items=16 search=1024 phased=0 direct=0
local tune = require("culua.catalog.sort_multi").tune
local args = {[0] = arg[0], [-1] = arg[-1]}
for _, a in ipairs(arg) do
  local k, v = a:match("^(%a+)=(%d+)$")
  if k then
    if tune[k] == nil then error("bench/sort_multi.lua: no knob " .. k) end
    if type(tune[k]) == "boolean" then tune[k] = v ~= "0" else tune[k] = math.tointeger(tonumber(v)) end
  else
    args[#args + 1] = a
  end
end
arg = args
local LOG2N = tonumber(arg[1]) or 30
local N = 1 << LOG2N
local REPS = 7

local ranks = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMI_SIZE") or os.getenv("SLURM_NTASKS") or "1") > 1
local mpi = ranks and cuda.mpi or nil
local me = mpi and mpi.rank or 0
require("culua.bench").need_devices(ranks and 1 or 2, {quiet = me ~= 0})
local G = ranks and mpi.size or math.min(tonumber(arg[2]) or cuda.device_count(), cuda.device_count(), 4)
if not ranks and tonumber(arg[2]) and tonumber(arg[2]) > cuda.device_count() then
  print(("bench/sort_multi.lua: skipped: needs %s CUDA devices, found %d"):format(arg[2], cuda.device_count()))
  os.exit(77)
end
local function say(...) if me == 0 then print(...) end end

local median = require("culua.bench").median

-- part r's keys (0-based), n of them, on device d: pristine and working copies
local function part_keys(r, n, d)
  local h = cuda.host_array("uint32", n):random(1000 + r, 0, 0xffffffff)
  local pristine = cuda.array("uint32", n, {device = d}):copy_from(h)
  return pristine, cuda.array("uint32", n, {device = d})
end

-- the one-GPU sort of `pristine`'s keys on its device, median ms between events
local function one_gpu(pristine)
  local d = pristine.device
  local k = cuda.array("uint32", #pristine, {device = d.ordinal})
  local cur = cuda.device()
  d:use()
  local s = cuda.stream()
  local e0, e1 = cuda.event(), cuda.event()
  cur:use()
  local t = {}
  for r = -1, REPS do
    k:copy_from(pristine, s)
    e0:record(s)
    cuda.catalog.sort(k, {stream = s})
    e1:record(s)
    local ms = e0:elapsed(e1)
    if r >= 1 then t[#t + 1] = ms end
  end
  k:close()
  return median(t)
end

-- the sort's own account of a call (sort_multi.lua's M.stats), medians
local stats = setmetatable({}, {__index = function (_, k) return require("culua.catalog.sort_multi").stats[k] end})
local function where(parts)
  local s = ("  where it went (medians): local sorts %.3f ms, boundaries %.3f ms (%d rounds), pieces and merges %.3f ms")
            :format(median(parts.sort), median(parts.search), stats.rounds or 0, median(parts.exchange))
  -- each round of the search, host ms: the candidates' copies and launches + the wait for the counts
  local r = {}
  for i = 1, #(parts.round_launch[1] or {}) do
    local l, w = {}, {}
    for j = 1, #parts.round_launch do l[j], w[j] = parts.round_launch[j][i] or 0, parts.round_wait[j][i] or 0 end
    r[i] = ("%.3f + %.3f"):format(median(l), median(w))
  end
  if #r > 0 then s = s .. "\n  the search's rounds (host ms, launches + wait): " .. table.concat(r, ", ") end
  -- timeline=1: the last call's steps on each part's GPU, ms from the call's start
  for i, row in ipairs(stats.timeline or {}) do
    local marks = {}
    for k, m in ipairs(row) do marks[k] = ("%s %.3f"):format(m[1], m[2]) end
    s = s .. ("\n  part %d (GPU ms from the start): %s"):format(i, table.concat(marks, ", "))
  end
  return s
end

local n = N // G
local label = ranks and ("comm = c over %d ranks"):format(G) or ("devices = {0%s}"):format(G > 1 and (", ..., " .. (G - 1)) or "")
say(("cuda.catalog.sort of 2^%d uint32 keys (%s), %s, 2^%.4g a GPU, median of %d; tune: items=%d search=%d phased=%s direct=%s")
    :format(LOG2N, cuda.device(0).name, label, math.log(n, 2), REPS, tune.items, tune.search, tostring(tune.phased),
            tostring(tune.direct)))

if not ranks then
  local devs, pristine, keys = {}, {}, {}
  for r = 1, G do
    devs[r] = r - 1
    pristine[r], keys[r] = part_keys(r - 1, n, r - 1)
  end
  local peer = "peer to peer"
  for a = 0, G - 1 do
    for b = 0, G - 1 do
      if a ~= b and not cuda.device(a):can_access_peer(cuda.device(b)) then peer = "staged by the driver" end
    end
  end
  -- the one GPU's keys: the parts' gathered on device 0
  local all = cuda.array("uint32", N, {device = 0})
  for r = 1, G do all:view((r - 1) * n + 1, n):copy_from(pristine[r]) end
  local base = one_gpu(all)
  all:close()
  local local_ms = one_gpu(pristine[1])
  local t, parts = {}, {sort = {}, search = {}, exchange = {}, round_launch = {}, round_wait = {}}
  for r = -1, REPS do
    for i = 1, G do keys[i]:copy_from(pristine[i]) end
    for i = 1, G do cuda.device(i - 1):synchronize() end
    local t0 = cuda.clock()
    cuda.catalog.sort(keys, {devices = devs})
    local ms = (cuda.clock() - t0) * 1e3
    if r >= 1 then
      t[#t + 1] = ms
      for k, l in pairs(parts) do l[#l + 1] = stats[k] end
    end
  end
  local ms = median(t)
  print(("one GPU, all 2^%d keys:            %9.3f ms, %7.2f Gkeys/s"):format(LOG2N, base, N / base / 1e6))
  print(("one GPU, 2^%.4g keys (a part's local sort): %9.3f ms"):format(math.log(n, 2), local_ms))
  print(("%d GPUs, pieces %s (%s):  %9.3f ms, %7.2f Gkeys/s, %.2fx one GPU%s"):format(G, stats.transport, peer, ms, N / ms / 1e6, base / ms,
        G == 4 and LOG2N == 30 and ("  (target >= 2.5x: %s)"):format(base / ms >= 2.5 and "met" or "NOT met") or ""))
  print(where(parts))
  return
end

-- over ranks: each rank's keys on its GPU; rank 0 gathers them all for the one-GPU figure
local nccl = cuda.nccl
local d = me % cuda.device_count()
local comm = nccl.comm(mpi.bcast(me == 0 and nccl.unique_id() or ""), G, me, {device = d})
local pristine, keys = part_keys(me, n, d)
local all = cuda.array("uint32", N, {device = d})
comm:all_gather(pristine, all)
cuda.device(d):synchronize()
local base, local_ms
if me == 0 then base, local_ms = one_gpu(all), one_gpu(pristine) end
all:close()
mpi.barrier()
local t, parts = {}, {sort = {}, search = {}, exchange = {}, round_launch = {}, round_wait = {}}
for r = -1, REPS do
  keys:copy_from(pristine)
  cuda.device(d):synchronize()
  mpi.barrier()
  local t0 = cuda.clock()
  cuda.catalog.sort(keys, {comm = comm})
  local ms = mpi.allreduce((cuda.clock() - t0) * 1e3, {op = "max"})   -- the slowest rank's
  if r >= 1 then
    t[#t + 1] = ms
    for k, l in pairs(parts) do l[#l + 1] = stats[k] end
  end
end
local ms = median(t)
say(("one GPU, all 2^%d keys:            %9.3f ms, %7.2f Gkeys/s"):format(LOG2N, base or 0, N / (base or 1) / 1e6))
say(("one GPU, 2^%.4g keys (a rank's local sort): %9.3f ms"):format(math.log(n, 2), local_ms or 0))
if me == 0 then
  print(("%d ranks, NCCL:  %9.3f ms (the slowest rank), %7.2f Gkeys/s, %.2fx one GPU%s"):format(G, ms, N / ms / 1e6, base / ms,
        G == 4 and LOG2N == 30 and ("  (target >= 2.5x, as over devices: %s)"):format(base / ms >= 2.5 and "met" or "NOT met") or ""))
  print(where(parts) .. " (rank 0's)")
end
comm:close()
