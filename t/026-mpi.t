-- cuda.mpi under `mpirun -np 2`: Lua values, host arrays and (with a GPU) device
-- arrays through point-to-point calls and collectives, the refusals, and a rank
-- that fails taking the job down instead of leaving the other one waiting.
local T = require "culua.tap"
local cuda = require "cuda"

local skip = os.getenv("CULUA_TEST_SKIP_MPI")
if skip and skip ~= "" then T.skip_all("MPI tests skipped in this pass: " .. skip) end
local have, why = cuda.mpi.available()
if not have then T.skip_all("cuda.mpi not built: " .. tostring(why)) end
local mpirun = T.mpirun()
if not mpirun then T.skip_all("no mpirun on PATH") end
-- root may run the ranks (CI and the GPU machines run as root); never hang
local launch = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " ..
               "timeout 120 " .. mpirun .. " -np 2 " .. T.culua .. " "

local function script(text)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  f:write(text)
  f:close()
  return name
end

-- every check in the child prints "R name: ok" or "R name: FAIL ..." on rank R
local child = script([=[
local cuda = require "cuda"
local mpi = cuda.mpi
local me, other = mpi.rank, 1 - mpi.rank
local function check(name, cond, detail)
  io.write(("%d %s: %s\n"):format(me, name, cond and "ok" or ("FAIL " .. tostring(detail))))
  io.flush()
end
local function raises(name, fn, pattern)
  local ok, err = pcall(fn)
  check(name, not ok and tostring(err):find(pattern), err)
end

check("rank and size", mpi.size == 2 and (me == 0 or me == 1), mpi.size)
check("local rank", mpi.local_rank == me, mpi.local_rank)
check("path", mpi.path == "cuda-aware" or mpi.path == "host-staged", mpi.path)

-- Lua values, point to point, tags and any_source
if me == 0 then
  mpi.send(42, 1, {tag = 7}); mpi.send(2.5, 1); mpi.send("text\0with nul", 1); mpi.send(true, 1); mpi.send(nil, 1)
  local v, st = mpi.recv(mpi.any_source, {tag = 3})
  check("recv from any_source", v == "back" and st.source == 1 and st.tag == 3, v)
else
  local v, st = mpi.recv(0, {tag = 7})
  check("integer with a tag", v == 42 and math.type(v) == "integer" and st.tag == 7 and st.source == 0, v)
  check("float", mpi.recv(0) == 2.5)
  check("string with a NUL", mpi.recv(0) == "text\0with nul")
  check("boolean", mpi.recv(0) == true)
  local n = table.pack(mpi.recv(0))
  check("nil", n[1] == nil and n.n == 2)
  mpi.send("back", 0, {tag = 3})
end

-- host arrays
local h = cuda.host_array("float64", 1000):iota()
local got = cuda.host_array("float64", 1000):fill(0 / 0)
if me == 0 then mpi.send(h, 1) else
  local _, st = mpi.recv(got, 0)
  check("host array", got[1] == h[1] and got[1000] == h[1000] and st.count == 1000, got[1000])
end
local hi = cuda.host_array("int32", 16):fill(me + 10)
local hr = cuda.host_array("int32", 16):fill(0)
local rq = mpi.irecv(hr, other, {tag = 5})
local sq = mpi.isend(hi, other, {tag = 5})
sq:wait()
local arr, st = rq:wait()
check("isend and irecv", rawequal(arr, hr) and hr[16] == other + 10 and st.tag == 5, hr[16])
check("a completed request tests true", rq:test())
raises("waiting twice", function () rq:wait() end, "already completed")
local vq = mpi.irecv(other)
mpi.isend("from " .. me, other):wait()
check("irecv of a value", vq:wait() == "from " .. other)

-- collectives
check("bcast of a value", mpi.bcast(me == 0 and "root's" or "mine") == "root's")
local b = cuda.host_array("uint8", 8):fill(me == 1 and 9 or 0)
mpi.bcast(b, {root = 1})
check("bcast of an array from root 1", b[1] == 9 and b[8] == 9, b[1])
local s = mpi.reduce(me + 1, {op = "sum"})
check("reduce at root", (me == 0 and s == 3) or (me == 1 and s == nil), s)
check("allreduce max", mpi.allreduce(me * 1.5, {op = "max"}) == 1.5)
check("allreduce of an integer stays one", math.type(mpi.allreduce(me + 1)) == "integer")
local x = cuda.host_array("float32", 100):fill(me + 1)
mpi.allreduce(x, {op = "prod"})
check("allreduce of an array in place", x[1] == 2 and x[100] == 2, x[1])
local y = cuda.host_array("float32", 100):fill(0)
mpi.allreduce(x, y, {op = "sum"})
check("allreduce into recv", y[50] == 4, y[50])
local counts = {3, 5}
local whole = cuda.host_array("int64", 8):iota()
local part = cuda.host_array("int64", 5):fill(-1)
mpi.scatterv(whole, counts, part, {root = 0})
check("scatterv", (me == 0 and part[3] == whole[3] and part[4] == -1) or (me == 1 and part[1] == whole[4] and part[5] == whole[8]), part[1])
local back = cuda.host_array("int64", 8):fill(0)
mpi.gatherv(part, back, counts, {root = 0})
check("gatherv", me == 1 or (back[1] == whole[1] and back[8] == whole[8]), back[8])
local mine = cuda.host_array("int32", 3):fill(me)
local all = cuda.host_array("int32", 6):fill(-1)
mpi.allgather(mine, all)
check("allgather", all[1] == 0 and all[3] == 0 and all[4] == 1 and all[6] == 1, all[4])
mpi.barrier()

-- refusals, each on both ranks (none reaches MPI, so neither waits on the other)
raises("dest past the ranks", function () mpi.send(1, 5) end, "dest must be a rank 0%.%.1, got 5")
raises("a table cannot be sent", function () mpi.send({}, other) end, "cannot send a table")
raises("unknown op", function () mpi.allreduce(1, {op = "mean"}) end, "op must be one of sum, prod, min, max, got 'mean'")
raises("misspelt option", function () mpi.bcast(1, {rot = 0}) end, "unknown option 'rot' %(known: root%)")
raises("root past the ranks", function () mpi.bcast(1, {root = 2}) end, "root must be a rank 0%.%.1, got 2")
raises("a tag not an integer", function () mpi.send(1, other, {tag = 1.5}) end, "cuda%.mpi%.send: tag must be an integer, got 1%.5")
raises("a root not an integer", function () mpi.bcast(1, {root = "0"}) end, "cuda%.mpi%.bcast: root must be an integer, got string")
raises("counts of the wrong length", function () mpi.gatherv(part, back, {1}) end, "counts must have one entry a rank %(2%), got 1")
raises("allgather sizes", function () mpi.allgather(mine, cuda.host_array("int32", 5)) end, "recv must hold size x send")
raises("send and recv differ", function () mpi.allreduce(x, cuda.host_array("float32", 3)) end, "differ in length or dtype")

-- device arrays, where there is a GPU
if cuda.device_count() > 0 then
  local d = cuda.array("float32", 4096):fill(me + 1)
  mpi.allreduce(d, {op = "sum"})
  local t = d:totable()
  check("allreduce of a device array (" .. mpi.path .. ")", t[1] == 3 and t[4096] == 3, t[1])
  local e = cuda.array("float64", 1000):fill(0)
  if me == 0 then mpi.send(cuda.array("float64", 1000):fill(7), 1) else mpi.recv(e, 0) end
  check("send and recv of a device array", me == 0 or e:totable()[1000] == 7)
  mpi.bcast(e, {root = 1})
  check("bcast of a device array", e:totable()[1] == 7)
end
io.write(me, " done\n")
]=])

local out, status = T.run(launch .. child)
os.remove(child)
T.is(status, 0, "two ranks ran the checks and exited 0")
local seen, checks = {}, {}
for rank, name, verdict in out:gmatch("\n?(%d) ([^\n:]+): ([^\n]+)") do
  if not seen[name] then checks[#checks + 1] = name end
  seen[name] = seen[name] or {}
  seen[name][tonumber(rank)] = verdict
end
for _, name in ipairs(checks) do
  local v = seen[name]
  local bad = {}
  for r = 0, 1 do if v[r] and v[r] ~= "ok" then bad[#bad + 1] = ("rank %d: %s"):format(r, v[r]) end end
  T.ok(#bad == 0, name, #bad > 0 and ("    " .. table.concat(bad, "\n    ")) or nil)
end
T.ok(#checks >= 30, ("%d checks reported (of at least 30)"):format(#checks))
T.like(out, "0 done", "rank 0 finished")
T.like(out, "1 done", "rank 1 finished")

-- a rank that fails while the other waits in a barrier takes the job down, naming itself
local failing = script([[
local mpi = require("cuda").mpi
if mpi.rank == 1 then error("rank one gives up") end
mpi.barrier()
print("rank 0 passed the barrier")
]])
local t0 = cuda.clock()
out, status = T.run(launch .. failing)
os.remove(failing)
T.isnt(status, 0, "the job fails")
T.like(out, "culua: rank 1 of 2 failed: [^\n]*rank one gives up", "the failing rank is named")
T.unlike(out, "passed the barrier", "rank 0 never passed the barrier")
T.ok(cuda.clock() - t0 < 60, ("and nothing hung (%.1f s)"):format(cuda.clock() - t0))

-- without mpirun: one rank of its own (a singleton)
out, status = T.run("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 " .. T.culua ..
                    [[ -e "local mpi = require('cuda').mpi; print(mpi.rank, mpi.size, mpi.allreduce(5))"]])
T.like(out, "^0\t1\t5", "a plain culua is rank 0 of 1")

-- {====================================================== seed 003's elimination over ranks

-- examples/gauss_mpi.lua under mpirun -np 2, the panels broadcast by NCCL and staged
-- through the host (both), each against rank 0's GPU alone: the solutions must be the
-- same to the bit. With one GPU the two ranks share it, each with an NCCL_HOSTID of its
-- own (NCCL refuses two ranks of one node on one GPU) and NCCL's socket transport.
-- Without NCCL the example says so and runs the host's way.
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local gauss = srcdir .. "/examples/gauss_mpi.lua"
local cases = {
  {"300 both block=16 reps=1", "panels of 16, the last one short, the seed's update"},
  {"97 both block=1 reps=1", "block=1: the seed's broadcast a column"},
  {"200 both block=64 update=gemm onestream reps=1", "the product update, one stream"},
}
if cuda.device_count() == 0 then
  T.skip("no CUDA device: examples/gauss_mpi.lua runs on GPUs", 5 * #cases + 2)
else
  local have_nccl = cuda.nccl.available()
  local shared = cuda.device_count() < 2
  local env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " ..
              "NCCL_NVLS_ENABLE=0 "
  if shared then
    env = env .. "CULUA_DEVICE=0 NCCL_MNNVL_ENABLE=0 NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "
  end
  for _, case in ipairs(cases) do
    local args, what = case[1], case[2]
    local cmd = T.culua .. " " .. gauss .. " " .. args
    if shared then cmd = "sh -c 'NCCL_HOSTID=culua-rank-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} exec " .. cmd .. "'" end
    out, status = T.run(env .. "timeout 300 " .. mpirun .. " -np 2 " .. cmd)
    T.is(status, 0, ("gauss_mpi.lua %s under mpirun -np 2 exits 0 (%s)"):format(args, what))
    if status ~= 0 then T.diag(out:sub(-3000)) end
    if have_nccl then
      T.like(out, "\nnccl, 2 ranks: [%d.]+ s %(elimination [%d.]+ s%), [%d.]+x one GPU; panels broadcast by NCCL",
             "  NCCL's time beside one GPU's")
      T.like(out, "\nnccl, 2 ranks: residual ratio [^\n]*identical to the one%-GPU solution: SUCCESS",
             "  NCCL's solution is one GPU's, to the bit")
    else
      T.like(out, "\nnccl: not available here %([^\n]+%); the host%-staged way runs instead", "  no NCCL: it says so")
      T.unlike(out, "nccl, 2 ranks", "  and runs no NCCL")
    end
    T.like(out, "\nhost, 2 ranks: residual ratio [^\n]*identical to the one%-GPU solution: SUCCESS",
           "  the host-staged solution is one GPU's, to the bit")
    T.like(out, "\nSUCCESS\n", "  and the run says SUCCESS")
  end
  -- one rank, without mpirun: the same script, nothing to broadcast
  out, status = T.run("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 " .. T.culua .. " " ..
                      gauss .. " 150 both block=8 reps=1")
  T.is(status, 0, "gauss_mpi.lua without mpirun exits 0")
  T.like(out, "on 1 rank: .-\n1 rank: [%d.]+ s .-nothing to broadcast\n.-identical to the one%-GPU solution: SUCCESS",
         "  one rank, nothing to broadcast, the one GPU's solution")
end

-- }======================================================

T.done_testing()
