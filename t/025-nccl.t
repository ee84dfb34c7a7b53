-- cuda.nccl: the library opened at run time, argument checks, and on GPUs the
-- collectives against sums computed here (two GPUs for the ones between ranks).
local T = require "culua.tap"
local cuda = require "cuda"
local nccl = cuda.nccl

T.is(type(nccl), "table", "cuda.nccl is there without NCCL being loaded")
for _, f in ipairs{"version", "available", "unique_id", "comm", "comm_all", "group"} do
  T.is(type(nccl[f]), "function", "cuda.nccl." .. f)
end

-- without NCCL: require works, the probe says why, the first call raises naming it
local out = T.run("CULUA_LIBNCCL=/nonexistent/libnccl.so.2 " .. T.culua ..
                  [[ -e "local cuda = require 'cuda'; print(cuda.nccl.available()); print(pcall(cuda.nccl.unique_id))"]])
T.like(out, "^nil\t/nonexistent/libnccl%.so%.2 not found", "available() is fail and why")
T.like(out, "false\tcuda%.nccl%.unique_id: NCCL not available: /nonexistent/libnccl%.so%.2 not found",
       "the first call raises 'NCCL not available'")

local have, where = nccl.available()
if not have then
  T.diag("NCCL not here: " .. tostring(where))
  T.skip("no NCCL: " .. tostring(where), 1)
  T.done_testing()
  return
end
local major, minor = nccl.version()
T.ok(major >= 2 and minor >= 0, ("NCCL %d.%d from %s"):format(major, minor, where))
local id = nccl.unique_id()
T.is(#id, 128, "unique_id is 128 bytes")
T.isnt(nccl.unique_id(), id, "two ids differ")

-- argument checks that come before any device work
T.error_like(function () nccl.comm("short", 1, 0) end, "cuda%.nccl%.comm: bad argument #1 %(an id from cuda%.nccl%.unique_id%(%) is 128 bytes, got 5%)", "a bad id")
T.error_like(function () nccl.comm(id, 0, 0) end, "cuda%.nccl%.comm: bad argument #2 %(nranks must be 1%.%.1048576, got 0%)", "nranks 0")
T.error_like(function () nccl.comm(id, 2, 2) end, "cuda%.nccl%.comm: bad argument #3 %(rank must be 0%.%.1 %(nranks %- 1%), got 2%)", "rank past the end")
T.error_like(function () nccl.comm(id, 2, -1) end, "rank must be 0%.%.1", "negative rank")
T.error_like(function () nccl.comm(id, 1, 0, {devcie = 0}) end,
             "cuda%.nccl%.comm: unknown option 'devcie' %(known: device, max_ctas, min_ctas, cga_cluster_size%)", "misspelt option")
-- the communicator's options (NCCL's ncclConfig_t), checked before it is made
T.error_like(function () nccl.comm(id, 1, 0, {max_ctas = 0}) end, "cuda%.nccl%.comm: max_ctas must be 1%.%.1024, got 0", "max_ctas 0")
T.error_like(function () nccl.comm(id, 1, 0, {max_ctas = 2.5}) end, "cuda%.nccl%.comm: max_ctas must be an integer, got number", "max_ctas 2.5")
T.error_like(function () nccl.comm(id, 1, 0, {min_ctas = "4"}) end, "min_ctas must be an integer, got string", "min_ctas a string")
T.error_like(function () nccl.comm(id, 1, 0, {min_ctas = 4}) end, "cuda%.nccl%.comm: min_ctas needs max_ctas beside it", "min_ctas alone")
T.error_like(function () nccl.comm(id, 1, 0, {min_ctas = 8, max_ctas = 4}) end, "cuda%.nccl%.comm: min_ctas %(8%) is more than max_ctas %(4%)", "min_ctas over max_ctas")
T.error_like(function () nccl.comm(id, 1, 0, {cga_cluster_size = 9}) end, "cga_cluster_size must be 0%.%.8, got 9", "cga_cluster_size 9")
T.error_like(function () nccl.comm_all({}) end, "cuda%.nccl%.comm_all: bad argument #1 %(1%.%.64 device ordinals expected, got 0%)", "no devices")
T.error_like(function () nccl.comm_all({0, 0}) end, "device 0 is listed twice", "a device twice")
T.error_like(function () nccl.comm_all({"0"}) end, "devices%[1%] must be a device ordinal, got string", "a string ordinal")
T.error_like(function () nccl.group(42) end, "cuda%.nccl%.group: bad argument #1 %(function expected, got number%)", "group takes a function")

if cuda.device_count() == 0 then
  T.skip("no CUDA device: the collectives need one", 1)
  T.done_testing()
  return
end

-- {====================================================== one GPU: one rank

local function filled(dtype, n, v) return cuda.array(dtype, n):fill(v) end

local c = nccl.comm_all{0}[1]
T.like(tostring(c), "^cuda%.nccl%.comm: rank 0 of 1 on device 0$", "__tostring")
T.is(cuda.type(c), "cuda.nccl.comm", "cuda.type names it (the catalog's comm = option checks so)")
T.is(c.rank, 0, "rank")
T.is(c.size, 1, "size")
T.is(c.device.ordinal, 0, "device")
for _, dt in ipairs{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64"} do
  local x, y = filled(dt, 1000, 3), filled(dt, 1000, 0)
  c:all_reduce(x, y, {op = "sum"})
  T.is_deeply(y:totable()[1000], 3, dt .. ": all_reduce over one rank copies")
end
local x, y = filled("float32", 4097, 2.5), filled("float32", 4097, 0 / 0)
for _, op in ipairs{"sum", "prod", "max", "min", "avg"} do
  c:all_reduce(x, y, {op = op})
  local t = y:totable()
  T.ok(t[1] == 2.5 and t[4097] == 2.5, "op " .. op)
end
T.ok(rawequal(c:all_reduce(x), c), "in place, returns the comm")
local s = cuda.stream()
c:broadcast(x, y:fill(0), {root = 0, stream = s}); s:synchronize()
T.is(y:totable()[7], 2.5, "broadcast on a stream")
c:reduce(x, y:fill(0), {root = 0, op = "max"})
T.is(y:totable()[7], 2.5, "reduce")
c:all_gather(x, y:fill(0))
T.is(y:totable()[4097], 2.5, "all_gather with one rank")
c:reduce_scatter(x, y:fill(0))
T.is(y:totable()[4097], 2.5, "reduce_scatter with one rank")
local r = table.pack(nccl.group(function (a, b) c:all_reduce(x, y); return a + b, "two" end, 1, 2))
T.is_deeply({r[1], r[2], r.n}, {3, "two", 2}, "group returns fn's results")
T.error_like(function () nccl.group(function () error("inside") end) end, "inside", "an error inside a group goes on")
c:all_reduce(x, y:fill(0)); cuda.synchronize()
T.is(y:totable()[1], 2.5, "the group was ended: later calls work")

-- comm:split: a communicator of the ranks of one color (here the one rank), with options
local sc = c:split(0)
T.is_deeply({cuda.type(sc), sc.rank, sc.size, sc.device.ordinal}, {"cuda.nccl.comm", 0, 1, 0}, "split(0): a communicator of one rank")
sc:all_reduce(x, y:fill(0)); cuda.synchronize()
T.is(y:totable()[4097], 2.5, "the split communicator reduces")
sc:close()
local capped = c:split(7, 0, {max_ctas = 2, min_ctas = 1})
capped:broadcast(x, y:fill(0), {root = 0}); cuda.synchronize()
T.is(y:totable()[4097], 2.5, "split with max_ctas = 2: its broadcast")
capped:close()
T.is(c:split(nil), nil, "split(nil): this rank takes no part, nil")
T.error_like(function () nccl.group(function () c:split(0) end) end,
             "split: not inside cuda%.nccl%.group %(NCCL would make the communicator at the group's end%)", "no split inside a group")
T.is(c:split(0).size, 1, "after the refused split's group: split works")
T.error_like(function () c:split(0, 2^40) end, "split: bad argument #2 %(key must be a C int, got 1099511627776%)", "a key past int")
T.error_like(function () c:split(-2) end, "split: bad argument #1 %(color must be 0%.%.2147483647 or nil, got %-2%)", "a negative color")
T.error_like(function () c:split(0, 0, {device = 0}) end, "split: unknown option 'device' %(known: max_ctas, min_ctas, cga_cluster_size%)", "split takes no device")
T.error_like(function () c:split(0, 0, {max_ctas = 0}) end, "split: max_ctas must be 1%.%.1024, got 0", "split's max_ctas checked")
local c2 = nccl.comm(nccl.unique_id(), 1, 0, {max_ctas = 4})
c2:all_reduce(x, y:fill(0)); cuda.synchronize()
T.is(y:totable()[1], 2.5, "comm(id, 1, 0, {max_ctas = 4}) is made (ncclCommInitRankConfig) and reduces")
c2:close()

-- refusals
T.error_like(function () c:all_reduce(x, filled("float32", 10, 0)) end, "all_reduce: send has 4097 elements and recv 10; they must be equal", "lengths differ")
T.error_like(function () c:all_reduce(x, filled("float64", 4097, 0)) end, "all_reduce: send is float32 but recv is float64", "dtypes differ")
T.error_like(function () c:all_reduce(filled("int16", 4, 0)) end, "all_reduce: NCCL has no int16 %(int8, uint8, int32", "int16 refused")
T.error_like(function () c:all_reduce(x, y, {op = "mean"}) end, "op must be one of sum, prod, max, min, avg, got 'mean'", "unknown op")
T.error_like(function () c:all_reduce(x, y, {root = 0}) end, "all_reduce: unknown option 'root' %(known: op, stream%)", "root is not an all_reduce option")
T.error_like(function () c:broadcast(x, y, {root = 1}) end, "broadcast: root must be a rank 0%.%.0, got 1", "root past the ranks")
T.error_like(function () c:broadcast(x, y, {op = "sum"}) end, "broadcast: unknown option 'op' %(known: root, stream%)", "op is not a broadcast option")
T.error_like(function () c:send(x, 1) end, "send: bad argument #2 %(send: peer must be a rank 0%.%.0, got 1%)", "peer past the ranks")
T.error_like(function () c:all_reduce(cuda.host_array("float32", 4)) end, "send must be a cuda%.array, got", "host arrays are refused")
T.error_like(function () c:all_reduce(x, y, {stream = 3}) end, "cuda%.stream expected, got number", "a bad stream")
T.error_like(function () c:all_gather(x, filled("float32", 4096, 0)) end, "all_gather: send has 4097 elements and recv 4096; recv must hold size x send", "all_gather lengths checked")
local closed = cuda.array("float32", 4); closed:close()
T.error_like(function () c:all_reduce(closed) end, "attempt to use a closed cuda%.array", "a closed array")
local c1 = nccl.comm(nccl.unique_id(), 1, 0)
T.is(c1.size, 1, "comm(id, 1, 0) makes a one-rank communicator")
c1:all_reduce(x, y:fill(0)); cuda.synchronize()
T.is(y:totable()[9], 2.5, "and it reduces")
c1:close(); c1:close()
T.ok(c1.closed, "close twice is harmless")
T.error_like(function () c1:all_reduce(x) end, "attempt to use a closed cuda%.nccl%.comm", "a closed comm")
c:close()
x, y, closed = nil, nil, nil

-- }======================================================

-- {====================================================== two GPUs: two ranks

if cuda.device_count() < 2 then
  T.skip("one GPU: the two-rank collectives need two", 1)
else
  local n = 1 << 20
  local comms = nccl.comm_all{0, 1}
  T.is_deeply({comms[1].rank, comms[2].rank, comms[1].size, comms[2].device.ordinal}, {0, 1, 2, 1}, "comm_all over two GPUs")
  local xs, ys = {}, {}
  for i = 1, 2 do
    xs[i] = cuda.array("float32", n, {device = i - 1}):copy_from(cuda.host_array("float32", n):random(i, -1, 1))
    ys[i] = cuda.array("float32", n, {device = i - 1}):fill(0 / 0)
  end
  local h1, h2 = cuda.host_array("float32", n), cuda.host_array("float32", n)
  xs[1]:copy_to(h1); xs[2]:copy_to(h2)
  local function expect(fn, what)
    local bad = 0
    local hy = {cuda.host_array("float32", n), cuda.host_array("float32", n)}
    ys[1]:copy_to(hy[1]); ys[2]:copy_to(hy[2])
    for i = 1, n, 997 do
      local want = fn(h1[i], h2[i], i)
      for r = 1, 2 do if math.abs(hy[r][i] - want) > 1e-6 * (1 + math.abs(want)) then bad = bad + 1 end end
    end
    T.is(bad, 0, what)
  end
  nccl.group(function () for i = 1, 2 do comms[i]:all_reduce(xs[i], ys[i], {op = "sum"}) end end)
  cuda.device(0):synchronize(); cuda.device(1):synchronize()
  expect(function (a, b) return a + b end, "all_reduce sum over two GPUs")
  nccl.group(function () for i = 1, 2 do comms[i]:all_reduce(xs[i], ys[i], {op = "max"}) end end)
  cuda.device(0):synchronize(); cuda.device(1):synchronize()
  expect(function (a, b) return math.max(a, b) end, "all_reduce max over two GPUs")
  nccl.group(function () for i = 1, 2 do comms[i]:broadcast(xs[i], ys[i], {root = 1}) end end)
  cuda.device(0):synchronize(); cuda.device(1):synchronize()
  expect(function (_, b) return b end, "broadcast from rank 1")
  nccl.group(function () comms[1]:send(xs[1], 1); comms[2]:recv(ys[2], 0); comms[2]:send(xs[2], 0); comms[1]:recv(ys[1], 1) end)
  local hy1 = cuda.host_array("float32", n); ys[1]:copy_to(hy1)
  local hy2 = cuda.host_array("float32", n); ys[2]:copy_to(hy2)
  T.ok(hy1[n] == h2[n] and hy2[1] == h1[1], "send and recv swap the arrays")
  local g = {cuda.array("float32", 2 * n, {device = 0}), cuda.array("float32", 2 * n, {device = 1})}
  nccl.group(function () for i = 1, 2 do comms[i]:all_gather(xs[i], g[i]) end end)
  local hg = cuda.host_array("float32", 2 * n); g[2]:copy_to(hg)
  T.ok(hg[1] == h1[1] and hg[n + 1] == h2[1] and hg[2 * n] == h2[n], "all_gather puts rank r's block r-th")
  local half = {cuda.array("float32", n // 2, {device = 0}), cuda.array("float32", n // 2, {device = 1})}
  nccl.group(function () for i = 1, 2 do comms[i]:reduce_scatter(xs[i], half[i]) end end)
  local hh = cuda.host_array("float32", n // 2); half[2]:copy_to(hh)
  T.near(hh[1], h1[n // 2 + 1] + h2[n // 2 + 1], 1e-6, "reduce_scatter gives rank 1 the second half of the sum")
  T.error_like(function () comms[1]:all_reduce(xs[2]) end, "all_reduce: send is on device 1 but the communicator is on device 0", "an array of the other GPU")
  T.diag("closing the two communicators of comm_all")
  for i = 1, 2 do comms[i]:close() end
  T.ok(comms[1].closed and comms[2].closed, "comm_all's communicators close one after the other")

  -- two processes, one rank each, from one id (as ranks under MPI start). Both are
  -- children under a timeout: a rank that dies leaves the other waiting in NCCL's
  -- init, and this test must end all the same
  local uid = nccl.unique_id()
  local hex = uid:gsub(".", function (ch) return ("%02x"):format(ch:byte()) end)
  local function rank(r)
    return io.popen(("timeout 90 %s -e \"local cuda = require 'cuda'\n" ..
      "local id = ('%s'):gsub('..', function (h) return string.char(tonumber(h, 16)) end)\n" ..
      "local c = cuda.nccl.comm(id, 2, %d, {device = %d})\n" ..
      "local x = cuda.array('float64', 1000, {device = %d}):fill(%d + 1)\n" ..
      "c:all_reduce(x); cuda.device(%d):synchronize()\n" ..
      "local own, capped = c:split(c.rank), c:split(0, 1 - c.rank, {max_ctas = 4})\n" ..
      "capped:all_reduce(x); cuda.device(%d):synchronize()\n" ..
      "print('rank', c.rank, x:totable()[1000], own.size, capped.rank); c:close()\" 2>&1"):format(T.culua, hex, r, r, r, r, r, r))
  end
  local p0, p1 = rank(0), rank(1)
  local said0, said1 = p0:read("a"), p1:read("a")
  p0:close(); p1:close()
  T.like(said0, "rank\t0\t6[.0]*\t1\t1", "two processes: rank 0's sum, twice (on a split communicator with max_ctas = 4, where it is rank 1)")
  T.like(said1, "rank\t1\t6[.0]*\t1\t0", "two processes: rank 1's sum, twice; split by its rank, a communicator of one")
end

-- }======================================================

collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
