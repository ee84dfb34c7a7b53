-- solve_scale.lua: one script and one catalog call, from one GPU to the GPUs of this
-- process to one GPU a rank under MPI: cuda.catalog.solve on an n x n float32 system,
-- timed (the second call: the first loads kernels and sets NCCL up), checked by
-- LAPACK's residual ratio ||b - A x|| / (||A|| ||x|| n eps), which must stay below 10.
--
--   culua examples/solve_scale.lua [N]                     one GPU
--   culua examples/solve_scale.lua [N] devices             every GPU here (devices = {...})
--   mpirun -np 4 culua examples/solve_scale.lua [N] ranks  four ranks (comm =, NCCL)
--
-- Over ranks, A and b are on rank 0 (root), which gets x; the catalog deals the columns
-- out, every rank factors its own, and the panels travel by NCCL broadcasts.

local cuda = require "cuda"
local n = math.tointeger(tonumber(arg[1] or "")) or 8192
local mode = arg[2] or "one"
assert(mode == "one" or mode == "devices" or mode == "ranks", "mode: one, devices or ranks, got " .. mode)

local opts, me, mpi = {}, 0, nil
if mode == "ranks" then
  mpi = cuda.mpi                                  -- each rank's GPU: its node-local rank
  me = mpi.rank
end
require("culua.bench").need_devices(1, {quiet = me ~= 0})
if mode == "ranks" then
  local id = mpi.bcast(me == 0 and cuda.nccl.unique_id() or nil, {root = 0})
  opts.comm = cuda.nccl.comm(id, mpi.size, me, {device = cuda.device().ordinal})
elseif mode == "devices" then
  opts.devices = {}
  for d = 0, cuda.device_count() - 1 do opts.devices[#opts.devices + 1] = d end
end

-- the system, whole on rank 0 (the one process, without MPI)
local hA, hb, A, b
if me == 0 then
  hA = cuda.host_array("float32", {n, n}):random(1, -1, 1)
  hb = cuda.host_array("float32", n):random(2, -1, 1)
  A, b = cuda.array("float32", {n, n}):copy_from(hA), cuda.array("float32", n):copy_from(hb)
end

local x, info, s
for _rep = 1, 2 do
  if mpi then mpi.barrier() end
  local t0 = cuda.clock()
  x, _, info = cuda.catalog.solve(A, b, opts)   -- x on rank 0 (nil elsewhere)
  cuda.device():synchronize()
  s = cuda.clock() - t0
  if mpi then s = mpi.allreduce(s, {op = "max"}) end
end

if me == 0 then
  local hx = cuda.host_array("float32", n)
  x:copy_to(hx)
  local ratio = cuda.catalog.reference.lu_residual(hA, hx, hb) / (n * 2.0 ^ -24)
  local how = mode == "one" and "one GPU" or mode == "devices" and ("devices {" .. table.concat(opts.devices, ", ") .. "}")
              or ("%d ranks"):format(info.ranks)
  print(("solve n = %d, %s: %.1f ms, %.1f TFLOP/s; residual ratio %.2f%s; data by %s"):format(n, how, s * 1e3,
        2 / 3 * n ^ 3 / s / 1e12, ratio, ratio < 10 and "" or " (WRONG)", info.transfer))
end
if opts.comm then opts.comm:close() end
