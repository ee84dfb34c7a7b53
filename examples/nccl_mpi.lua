-- nccl_mpi.lua: how multi-node NCCL programs start, as a culua script. Each MPI
-- rank drives one GPU (cuda.mpi picks it from the node-local rank); rank 0 makes
-- the NCCL id and MPI broadcasts it; every rank joins the communicator and the
-- ranks all-reduce a vector, checked against the sum MPI computes on the host.
--
--   mpirun -np 2 culua examples/nccl_mpi.lua [ELEMENTS]
--   mpirun -H host1,host2 -np 2 culua examples/nccl_mpi.lua      (two nodes)

local cuda = require "cuda"
local mpi, nccl = cuda.mpi, cuda.nccl
local n = math.tointeger(tonumber(arg[1] or "")) or (1 << 24)

local me, size = mpi.rank, mpi.size
require("culua.bench").need_devices(1, {quiet = me ~= 0})
local dev = cuda.device()     -- the node-local rank's GPU
local id = mpi.bcast(me == 0 and nccl.unique_id() or nil, {root = 0})
local comm <close> = nccl.comm(id, size, me, {device = dev.ordinal})
if me == 0 then
  local major, minor, patch = nccl.version()
  print(("%d ranks, NCCL %d.%d.%d, MPI path %s"):format(size, major, minor, patch, mpi.path))
end
print(("rank %d of %d on %s (device %d), local rank %d"):format(me, size, dev.name, dev.ordinal, mpi.local_rank))

local x = cuda.array("float32", n):fill(me + 1)
local s = cuda.stream()
local e0, e1 = cuda.event(), cuda.event()
comm:all_reduce(x, {op = "sum", stream = s})      -- a warm-up, and the value to check
s:synchronize()
local want = mpi.allreduce(me + 1)                -- the same sum through MPI, on the host
local t = x:view(n, 1):totable()[1]
local bad = mpi.allreduce(t == want and 0 or 1)
e0:record(s)
comm:all_reduce(x:fill(1, s), {stream = s})
e1:record(s)
local ms = mpi.allreduce(e0:elapsed(e1), {op = "max"})
if me == 0 then
  print(bad == 0 and ("all-reduce of %d floats: every rank holds %g: SUCCESS"):format(n, want)
        or ("all-reduce FAILED on %d rank(s)"):format(bad))
  local algbw = 4 * n / (ms * 1e-3) / 1e9
  print(("%.3f ms, algbw %.1f GB/s, busbw %.1f GB/s"):format(ms, algbw, algbw * 2 * (size - 1) / size))
end
