-- cuda.catalog.lu and solve over ranks (comm = a cuda.nccl communicator): lua/catalog/ranks.lua.
-- First without a GPU: the ranks as coroutines of this process on t/solve-mock.lua's mock,
-- with a mock NCCL that pairs each rank's calls as NCCL does (a communicator's calls run in
-- the order a rank makes them; a collective completes when every rank has made it, a send
-- when its receive is made, a group when all its calls are), so that calls made in an order
-- that would hang NCCL hang here too, and are reported. Pivots, factors and solutions equal
-- one device's, in both layouts (A whole on a root; the columns dealt out by
-- cuda.catalog.block_cyclic), on 1 to 4 ranks over shares of one device and over three;
-- the refusals every rank gives alike. Then, with GPUs, NCCL and mpirun: the same under
-- `mpirun -np 2` and `-np 4`, ranks sharing GPU 0 (NCCL_HOSTID a rank, so that NCCL takes
-- them for ranks of several nodes: it refuses two ranks of one node on one GPU), and one GPU
-- a rank where there are enough; and a rank that fails mid-call ending the job.
local T = require "culua.tap"
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local mock = dofile(srcdir .. "/t/solve-mock.lua")
local M, cuda, device, Arr, E = mock.M, mock.cuda, mock.device, mock.Arr, mock.E
local rand_matrix, mkA, differ = mock.rand_matrix, mock.mkA, mock.differ

-- {====================================================== the mock ranks and NCCL

-- host arrays indexed as cuda.host_arrays are (1-based), for the ranks' agreement
Arr.__index = function (a, k)
  if math.type(k) == "integer" then
    assert(k >= 1 and k <= a.n, "host index " .. k .. " outside 1.." .. a.n)
    return a.data[a.off + k - 1]
  end
  return Arr[k]
end
Arr.__newindex = function (a, k, v)
  if math.type(k) == "integer" then a.data[a.off + k - 1] = v else rawset(a, k, v) end
end
for o = 0, 2 do device(o).synchronize = function () end end

-- the world of G ranks: each rank's calls in flight (pending[r], a list, done when every
-- item is), its collectives and sends and receives to each peer counted (to pair them), the
-- calls of a group gathered until its end, and a log of the calls each rank made
local W
local cur   -- the rank whose coroutine runs
local function all_done(items)
  for _, it in ipairs(items) do if not it.done then return false end end
  return true
end

-- pair what can be paired; true if something completed
local function progress()
  local did = false
  -- collectives: every rank's first pending item a collective of the same number
  local first = W.pending[0] and W.pending[0][1]
  if first and first.coll and not first.done then
    local all = true
    for r = 0, W.G - 1 do
      local it = W.pending[r] and W.pending[r][1]
      if not (it and it.coll and not it.done and it.seq == first.seq) then all = false; break end
    end
    if all then
      local its = {}
      for r = 0, W.G - 1 do its[r] = W.pending[r][1] end
      for r = 1, W.G - 1 do
        local a, b = its[0], its[r]
        assert(a.name == b.name and a.root == b.root and a.send.n == b.send.n and a.cid == b.cid,
               ("collective %d: rank 0 made %s (root %s, %d elements, on %s), rank %d %s (root %s, %d elements, on %s)"):format(
               a.seq, a.name, tostring(a.root), a.send.n, a.cid, r, b.name, tostring(b.root), b.send.n, b.cid))
      end
      if first.name == "broadcast" then
        local src = its[first.root].send
        local vals = {}
        for i = 0, src.n - 1 do vals[i] = E(src, i) end
        for r = 0, W.G - 1 do for i = 0, src.n - 1 do mock.S(its[r].recv, i, vals[i]) end end
      elseif first.name == "reduce" or first.name == "all_reduce" then
        local n, sum = first.send.n, {}
        for i = 0, n - 1 do
          sum[i] = 0
          for r = 0, W.G - 1 do sum[i] = sum[i] + E(its[r].send, i) end
        end
        for r = 0, W.G - 1 do
          if first.name == "all_reduce" or r == first.root then for i = 0, n - 1 do mock.S(its[r].recv, i, sum[i]) end end
        end
      elseif first.name == "all_gather" then
        for r = 0, W.G - 1 do
          local n = its[r].send.n
          for q = 0, W.G - 1 do for i = 0, n - 1 do mock.S(its[q].recv, r * n + i, E(its[r].send, i)) end end
        end
      end
      for r = 0, W.G - 1 do its[r].done = true end
      did = true
    end
  end
  -- sends and receives: the k-th send from r to p pairs with p's k-th receive from r
  for r = 0, W.G - 1 do
    for _, it in ipairs(W.pending[r] or {}) do
      if it.p2p == "send" and not it.done then
        for _, jt in ipairs(W.pending[it.peer] or {}) do
          if jt.p2p == "recv" and not jt.done and jt.peer == r and jt.seq == it.seq and jt.cid == it.cid then
            assert(it.buf.n == jt.buf.n, ("rank %d sends %d elements to rank %d, which receives %d"):format(
                   r, it.buf.n, it.peer, jt.buf.n))
            for i = 0, it.buf.n - 1 do mock.S(jt.buf, i, E(it.buf, i)) end
            it.done, jt.done, did = true, true, true
          end
        end
      end
    end
  end
  return did
end

-- rank r's calls: in a group they wait for its end; else each waits until it completes
local function post(r, item)
  W.log[r][#W.log[r] + 1] = item.name or item.p2p
  if W.group[r] then W.group[r][#W.group[r] + 1] = item; return end
  W.pending[r] = {item}
  coroutine.yield()
end

local function counter(t, a, b)
  t[a] = t[a] or {}
  t[a][b] = (t[a][b] or 0) + 1
  return t[a][b]
end

-- cid names the communicator (every rank's part of one has the same): a collective that
-- ranks make on different ones is reported
local function new_comm(r, ordinal, cid)
  local c = {rank = r, size = W.G, device = device(ordinal), kind = "cuda.nccl.comm", closed = false,
             cid = cid or "comm"}
  local function coll(name, send, recv, opts)
    if recv ~= nil and recv.data == nil then recv, opts = nil, recv end
    W.colls[r] = (W.colls[r] or 0) + 1
    assert(recv == nil or recv.device.ordinal == ordinal, name .. ": recv on another device")
    post(r, {coll = true, seq = W.colls[r], name = name, send = send, recv = recv or send, root = opts and opts.root,
             cid = c.cid})
    return c
  end
  function c:broadcast(send, recv, opts) return coll("broadcast", send, recv, opts) end
  function c:reduce(send, recv, opts)
    assert(opts == nil or opts.op == nil or opts.op == "sum", "reduce: sums only")
    return coll("reduce", send, recv, opts)
  end
  function c:all_reduce(send, recv, opts)
    local o = recv ~= nil and recv.data == nil and recv or opts
    assert(o == nil or o.op == nil or o.op == "sum", "all_reduce: sums only")
    return coll("all_reduce", send, recv, opts)
  end
  function c:all_gather(send, recv, opts)
    assert(recv.n == send.n * W.G, "all_gather: recv must hold size x send")
    return coll("all_gather", send, recv, opts)
  end
  -- a collective that makes another communicator: its color compared as a root, so that a
  -- rank that splits when another does not (or by another color) hangs here too
  function c:split(color, key, opts)
    coll("split", {n = 0}, nil, {root = color})
    local s = new_comm(r, ordinal, c.cid .. "/" .. tostring(color) .. ":" .. tostring(opts and opts.max_ctas))
    s.max_ctas = opts and opts.max_ctas
    W.splits = (W.splits or 0) + 1
    return s
  end
  function c:send(buf, peer, opts)
    post(r, {p2p = "send", peer = peer, buf = buf, seq = counter(W.sent, r, peer), cid = c.cid})
    return c
  end
  function c:recv(buf, peer, opts)
    post(r, {p2p = "recv", peer = peer, buf = buf, seq = counter(W.recvd, peer, r), cid = c.cid})
    return c
  end
  return c
end

local nccl_minor = 28   -- the mock NCCL's version: 2.<this>.3
cuda.nccl = {version = function () return 2, nccl_minor, 3 end, group = function (f, ...)
  local r = cur
  W.group[r] = {}
  local res = table.pack(pcall(f, ...))
  local items = W.group[r]
  W.group[r] = nil
  if #items > 0 then W.pending[r] = items; coroutine.yield() end
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end}

-- body(r, comm) on ranks 0..G-1 (rank r on device ordinals[r + 1]); returns each rank's
-- results {ok, ...} and the calls each made; raises where the ranks hang
local function ranks(G, ordinals, body)
  W = {G = G, pending = {}, group = {}, colls = {}, sent = {}, recvd = {}, log = {}}
  local cos, results, alive = {}, {}, G
  for r = 0, G - 1 do
    W.log[r] = {}
    local comm = new_comm(r, ordinals[r % #ordinals + 1])
    cos[r] = coroutine.create(function () return body(r, comm) end)
  end
  while alive > 0 do
    local ran = false
    progress()
    for r = 0, G - 1 do
      if cos[r] and (W.pending[r] == nil or all_done(W.pending[r])) then
        W.pending[r] = nil
        cur = r
        local res = table.pack(coroutine.resume(cos[r]))
        ran = true
        if coroutine.status(cos[r]) == "dead" then
          results[r] = res
          cos[r] = nil
          alive = alive - 1
        end
      end
    end
    if not ran and not progress() then
      local why = {}
      for r = 0, G - 1 do
        if cos[r] then
          local it = W.pending[r][1]
          why[#why + 1] = ("rank %d waits in %s"):format(r, it.coll and (it.name .. " #" .. it.seq) or
                                                        (it.p2p .. " with rank " .. it.peer))
        end
      end
      for r = 0, G - 1 do
        if results[r] and not results[r][1] then why[#why + 1] = ("rank %d raised %s"):format(r, tostring(results[r][2])) end
      end
      error("the ranks hang: " .. table.concat(why, "; "), 0)
    end
  end
  return results
end

-- }======================================================


-- {====================================================== layouts, against one device

-- rank r's columns of the n x n matrix t (values by index), as the block_cyclic descriptor
-- d deals them: an n x nloc mock array
local function columns(d, r, t, ordinal)
  local nloc = d:columns(r)
  local X = cuda.array("float64", {d.n, nloc}, {device = ordinal})
  for lc = 1, nloc do
    local gc = d:column(r, lc) - 1
    for i = 0, d.n - 1 do X.data[i * nloc + lc - 1] = t[i * d.n + gc] end
  end
  return X
end

-- the n x n values of A's factors held in rank r's columns X, compared with one device's A1
local function columns_differ(d, r, X, A1)
  local nloc, worst = d:columns(r), 0
  for lc = 1, nloc do
    local gc = d:column(r, lc) - 1
    for i = 0, d.n - 1 do worst = math.max(worst, math.abs(X.data[i * nloc + lc - 1] - A1.data[i * d.n + gc])) end
  end
  return worst > 1e-9 and ("rank %d's columns differ by %g"):format(r, worst) or false
end

local function same_pivots(p1, p2, n)
  for i = 0, n - 1 do if p1.data[i] ~= p2.data[i] then return ("ipiv[%d] %s vs %s"):format(i, p1.data[i], p2.data[i]) end end
  return false
end

local function rhs_of(n, k, ordinal)
  local B = cuda.array("float64", {n, k}, {device = ordinal})
  for i = 0, n * k - 1 do B.data[i] = (i % 7) / 7 - 0.3 end
  return B
end

local function x_differ(X1, X2)
  local d = 0
  for i = 0, X1.n - 1 do d = math.max(d, math.abs(X1.data[i] - X2.data[i])) end
  return d > 1e-8 and ("X differs by " .. d) or false
end

-- lu and solve with root = (root's A), and with the columns dealt out, over G ranks
local function check(n, nb, G, ordinals, root, nrhs)
  nrhs = nrhs or 2
  local t = rand_matrix(n, n * 3 + nb + G)
  local A1 = mkA(n, t)
  local p1 = M.lu(A1, {block = nb})
  local B1 = rhs_of(n, nrhs, 0)
  local X1 = M.solve(mkA(n, t), B1, {block = nb})
  local where = ("n %d block %d, %d rank%s on device%s %s, %d right-hand side%s"):format(n, nb, G, G == 1 and "" or "s",
                 #ordinals == 1 and "" or "s", table.concat(ordinals, ","), nrhs, nrhs == 1 and "" or "s")
  -- root layout: A on root, nil elsewhere
  local As = {}
  local res = ranks(G, ordinals, function (r, comm)
    local A = r == root and mkA(n, t) or nil
    if A then A.device = comm.device end
    As[r] = A
    return M.lu(A, {comm = comm, root = root, block = nb})
  end)
  local bad
  for r = 0, G - 1 do
    if not res[r][1] then bad = ("rank %d: %s"):format(r, tostring(res[r][2])); break end
    bad = same_pivots(p1, res[r][2], n)
    if bad then bad = ("rank %d: %s"):format(r, bad); break end
  end
  bad = bad or differ(n, p1, A1, res[root][2], As[root])
  local info = res[root][3]
  if not bad and not (info and info.transfer == "nccl" and info.layout == "root" and info.root == root and
                      info.ranks == G and info.block == nb and (G == 1 or info.moved.panels > 0) and
                      info.gathered_by == (mock.M.tune.rank_gather == "end" and "end" or "rows") and
                      (G == 1 or (info.moved.start > 0 and info.moved.finish > 0))) then
    bad = "info: " .. tostring(info and info.layout)
  end
  if not T.ok(not bad, "lu, root " .. root .. ": " .. where) then T.diag(bad) end
  -- solve, root layout: X on root
  res = ranks(G, ordinals, function (r, comm)
    local A = r == root and mkA(n, t) or nil
    local B = r == root and rhs_of(n, nrhs, comm.device.ordinal) or nil
    if A then A.device = comm.device end
    return M.solve(A, B, {comm = comm, root = root, block = nb})
  end)
  bad = nil
  for r = 0, G - 1 do
    if not res[r][1] then bad = ("rank %d: %s"):format(r, tostring(res[r][2])); break end
    if (r == root) ~= (res[r][2] ~= nil) then bad = ("rank %d: X is %s"):format(r, tostring(res[r][2])); break end
  end
  bad = bad or x_differ(X1, res[root][2])
  if not T.ok(not bad, "solve, root " .. root .. ": " .. where) then T.diag(bad) end
  -- distributed: each rank's columns, factored in place
  local d = M.block_cyclic(n, G, nb)
  local Xs = {}
  res = ranks(G, ordinals, function (r, comm)
    Xs[r] = columns(d, r, t, comm.device.ordinal)
    return M.lu(Xs[r], {comm = comm, distribution = d})
  end)
  bad = nil
  for r = 0, G - 1 do
    if not res[r][1] then bad = ("rank %d: %s"):format(r, tostring(res[r][2])); break end
    bad = same_pivots(p1, res[r][2], n) or columns_differ(d, r, Xs[r], A1)
    if bad then break end
    if res[r][3].layout ~= "distributed" or res[r][3].moved.start ~= 0 then bad = "info: " .. res[r][3].layout; break end
  end
  if not T.ok(not bad, "lu, distributed: " .. where) then T.diag(bad) end
  -- solve, distributed: B on every rank (root's taken), X on every rank; A's columns untouched
  res = ranks(G, ordinals, function (r, comm)
    Xs[r] = columns(d, r, t, comm.device.ordinal)
    local B = rhs_of(n, nrhs, comm.device.ordinal)
    if r ~= root then B:fill(99) end   -- root's are the ones solved for
    return M.solve(Xs[r], B, {comm = comm, distribution = d, root = root})
  end)
  bad = nil
  for r = 0, G - 1 do
    if not res[r][1] then bad = ("rank %d: %s"):format(r, tostring(res[r][2])); break end
    bad = x_differ(X1, res[r][2]) or same_pivots(p1, res[r][3], n)
    if not bad then
      local t2 = columns(d, r, t, 0)
      for i = 0, t2.n - 1 do if t2.data[i] ~= Xs[r].data[i] then bad = "A's columns changed"; break end end
    end
    if bad then bad = ("rank %d: %s"):format(r, bad); break end
  end
  if not T.ok(not bad, "solve, distributed: " .. where) then T.diag(bad) end
end

check(12, 4, 1, {0}, 0)
-- one rank and the start in chunks (start_chunks 8, the default): no chunk to deal out
check(40, 4, 1, {0}, 0)
check(13, 4, 2, {0}, 0)
check(20, 3, 3, {0, 1, 2}, 1)
check(23, 2, 4, {0, 1}, 3)
check(17, 5, 2, {1, 2}, 1)
check(9, 4, 3, {0}, 2)
check(40, 8, 4, {0, 1, 2}, 0)
-- one right-hand side, and nine: past bstep's eight, the solve over ranks' steps by trsm and
-- matmul; and two where bstep's triangle does not fit a block's shared memory (the same way)
check(29, 4, 3, {0, 1, 2}, 1, 1)
check(29, 4, 3, {0, 1, 2}, 2, 9)
mock.st.bstep_full = true
check(29, 4, 3, {0, 1, 2}, 0, 2)
mock.st.bstep_full = nil
-- the look-ahead's step in three launches, and on the update's stream
mock.M.tune.narrow = "kernel"
check(20, 3, 3, {0, 1, 2}, 0)
mock.M.tune.narrow = nil
mock.M.tune.step_on = "S"
check(23, 4, 2, {0, 1}, 1)
mock.M.tune.step_on = "Q"
-- the panels sent to each rank (solve.tune.rank_panels = "send") rather than broadcast
mock.M.tune.rank_panels = "send"
check(20, 3, 3, {0, 1, 2}, 1)
check(40, 8, 4, {0}, 2)
mock.M.tune.rank_panels = "broadcast"
-- the root layout's columns dealt out in one piece (start_chunks 1) and in chunks of a
-- panel (many: 8 chunks of 4 columns a rank at n = 64, 5 or 6 at 61), and gathered after the
-- last step rather than a block row at a time (rank_gather = "end")
check(64, 4, 2, {0, 1}, 0)
check(61, 4, 3, {0, 1, 2}, 2)
mock.M.tune.start_chunks = 1
check(40, 8, 4, {0, 1, 2}, 1)
mock.M.tune.rank_gather = "end"
check(23, 2, 4, {0, 1}, 3)
mock.M.tune.start_chunks = 8
check(61, 4, 3, {0, 1, 2}, 0)
mock.M.tune.rank_gather = "rows"
-- the chunks sent to their ranks alone rather than broadcast (rank_scatter = "send")
mock.M.tune.rank_scatter = "send"
check(64, 4, 2, {0, 1}, 1)
check(61, 4, 4, {0, 1, 2}, 2)
mock.M.tune.rank_scatter = "broadcast"

-- block_cyclic: the columns a rank holds, both ways, and its moves as the root layout's
do
  local d = M.block_cyclic(23, 3, 4)
  local seen, ok = {}, true
  for r = 0, 2 do
    for lc = 1, d:columns(r) do
      local j = d:column(r, lc)
      local r2, lc2 = d:owner(j)
      ok = ok and r2 == r and lc2 == lc and not seen[j]
      seen[j] = true
    end
  end
  for j = 1, 23 do ok = ok and seen[j] end
  T.ok(ok and d:columns(0) + d:columns(1) + d:columns(2) == 23 and d:columns(0) == 8 and d:columns(2) == 7,
       "block_cyclic(23, 3, 4): every column once, owner and column inverse")
  T.like(tostring(d), "^cuda%.catalog%.block_cyclic: n = 23, 3 ranks, blocks of 4$", "__tostring")
  local t = rand_matrix(23, 5)
  local back = mkA(23, {})
  local res = ranks(3, {0, 1}, function (r, comm)
    local X = d:array("float64", r, {device = comm.device.ordinal})
    local A = r == 1 and mkA(23, t) or nil
    if A then A.device = comm.device; back.device = comm.device end
    d:scatter(A, X, comm, {root = 1})
    local want = columns(d, r, t, 0)
    for i = 0, want.n - 1 do assert(want.data[i] == X.data[i], "scatter: rank " .. r .. " element " .. i) end
    return d:gather(X, r == 1 and back or nil, comm, {root = 1})
  end)
  local good = res[0][1] and res[1][1] and res[2][1] and res[0][2] == nil and res[1][2] == back
  for i = 0, 23 * 23 - 1 do good = good and back.data[i] == t[i] end
  if not T.ok(good, "block_cyclic: scatter from root 1, gather back") then
    for r = 0, 2 do if not res[r][1] then T.diag(res[r][2]) end end
  end
end

-- }======================================================


-- {====================================================== refusals, alike on every rank

-- every rank's error, or the results
local function errors_of(G, ordinals, body)
  local res = ranks(G, ordinals, body)
  local e = {}
  for r = 0, G - 1 do e[r] = not res[r][1] and tostring(res[r][2]) or "no error" end
  return e
end

local function all_like(e, G, pattern, what)
  local bad = {}
  for r = 0, G - 1 do if not e[r]:find(pattern) then bad[#bad + 1] = ("rank %d: %s"):format(r, e[r]) end end
  if not T.ok(#bad == 0, what) then T.diag(table.concat(bad, "\n")) end
end

local t = rand_matrix(16, 3)
-- ranks that disagree on n: a descriptor of another n on rank 1
local e = errors_of(2, {0}, function (r, comm)
  local d = M.block_cyclic(r == 1 and 12 or 16, 2, 4)
  return M.lu(columns(d, r, rand_matrix(d.n, 1), 0), {comm = comm, distribution = d})
end)
all_like(e, 2, "cuda%.catalog%.lu: the ranks disagree on n: rank 0 has 16, rank 1 has 12", "ranks that disagree on n: each raises")
-- on the dtype: root's A float64, rank 1's float32
e = errors_of(3, {0}, function (r, comm)
  local A = mkA(16, t)
  if r == 2 then A.dtype = "float32" end
  return M.lu(A, {comm = comm, block = 4})
end)
all_like(e, 3, "the ranks disagree on the dtype: rank 0 has float64, rank 2 has float32", "ranks that disagree on the dtype: each raises")
-- on the block, on the layout, on the call, on root
e = errors_of(2, {0}, function (r, comm) return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = 4 * (r + 1)}) end)
all_like(e, 2, "the ranks disagree on block: rank 0 has 4, rank 1 has 8", "ranks that disagree on the block: each raises")
e = errors_of(2, {0}, function (r, comm)
  local d = M.block_cyclic(16, 2, 4)
  if r == 0 then return M.lu(mkA(16, t), {comm = comm, block = 4}) end
  return M.lu(columns(d, r, t, 0), {comm = comm, distribution = d})
end)
all_like(e, 2, "the ranks disagree on the layout: rank 0 has root, rank 1 has distributed", "one layout a rank: each raises")
e = errors_of(2, {0}, function (r, comm)
  if r == 0 then return M.lu(mkA(16, t), {comm = comm, block = 4}) end
  return M.solve(nil, nil, {comm = comm, block = 4})
end)
all_like(e, 2, "the ranks disagree on the call: rank 0 has lu, rank 1 has solve", "lu on one rank, solve on another: each raises")
e = errors_of(2, {0}, function (r, comm) return M.lu(mkA(16, t), {comm = comm, block = 4, root = r}) end)
all_like(e, 2, "the ranks disagree on root: rank 0 has 0, rank 1 has 1", "ranks that disagree on root: each raises")
-- on solve.tune's knobs that decide a rank's NCCL calls (a rank of this mock sets its own
-- before its call), and a knob no rank can take
e = errors_of(2, {0}, function (r, comm)
  M.tune.rank_scatter = r == 1 and "send" or "broadcast"
  return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = 4})
end)
M.tune.rank_scatter = "broadcast"
all_like(e, 2, "the ranks disagree on solve%.tune's knobs: rank 0 has start_chunks = 8, rank_scatter = broadcast, " ..
         "rank_gather = rows, rank_panels = broadcast, step_on = Q, rank_ctas = 8, rank 1 has start_chunks = 8, rank_scatter = send,",
         "ranks that disagree on solve.tune.rank_scatter: each raises")
e = errors_of(2, {0}, function (r, comm)
  M.tune.start_chunks = 8 + r
  return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = 4})
end)
M.tune.start_chunks = 8
all_like(e, 2, "the ranks disagree on solve%.tune's knobs: rank 0 has start_chunks = 8, .*rank 1 has start_chunks = 9",
         "ranks that disagree on solve.tune.start_chunks: each raises")
-- solve.tune.rank_ctas: the transfers on a communicator split from comm with NCCL's blocks
-- capped, once for comm and the cap (a second call on it splits no more); by ranks in a table
do
  local n = 16
  local res = ranks(2, {0}, function (r, comm)
    M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4})
    return select(2, M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4}))
  end)
  T.is_deeply({W.splits, res[0][2].ctas, res[1][2].ctas}, {2, 8, 8},
              "two ranks: a split communicator with NCCL's blocks capped at 8, made once, named by info.ctas")
  M.tune.rank_ctas = {[2] = 8, [3] = 5}
  res = ranks(3, {0}, function (r, comm) return select(2, M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4})) end)
  T.is_deeply({res[0][2].ctas, res[2][2].ctas, W.splits}, {5, 5, 3}, "rank_ctas by the number of ranks: 3 ranks, 5")
  M.tune.rank_ctas = false
  res = ranks(2, {0}, function (r, comm) return select(2, M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4})) end)
  T.is_deeply({res[0][2].ctas, W.splits}, {false, nil}, "rank_ctas false: comm as it is, no split")
  M.tune.rank_ctas, nccl_minor = 8, 17
  res = ranks(2, {0}, function (r, comm) return select(2, M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4})) end)
  T.is_deeply({res[0][2].ctas, W.splits}, {false, nil}, "NCCL 2.17 (no ncclCommSplit): comm as it is, no split")
  nccl_minor = 28
  for _, v in ipairs{0, 2.5, "8", 1025} do
    M.tune.rank_ctas = v
    e = errors_of(2, {0}, function (r, comm) return M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4}) end)
    all_like(e, 2, "solve%.tune%.rank_ctas must be an integer 1%.%.1024 or false %(a table of them by ranks%), got " ..
             tostring(v):gsub("%.", "%%."), "rank_ctas " .. tostring(v) .. ": each raises")
  end
  e = errors_of(2, {0}, function (r, comm)
    M.tune.rank_ctas = r == 1 and 16 or 8
    return M.lu(r == 0 and mkA(n, t) or nil, {comm = comm, block = 4})
  end)
  all_like(e, 2, "the ranks disagree on solve%.tune's knobs: rank 0 has .*rank_ctas = 8, rank 1 has .*rank_ctas = 16",
           "ranks that disagree on solve.tune.rank_ctas: each raises")
  M.tune.rank_ctas = {[2] = 8}
end
M.tune.rank_gather = "later"
e = errors_of(2, {0}, function (r, comm) return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = 4}) end)
M.tune.rank_gather = "rows"
all_like(e, 2, "solve%.tune%.rank_gather must be one of rows, end, got later", "a rank_gather no rank takes: each raises")
-- a rank whose own checks fail: its own error; the others name it
e = errors_of(3, {0}, function (r, comm) return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = r == 1 and 0 or nil}) end)
T.like(e[1], "cuda%.catalog%.lu: block must be an integer 1%.%.128, got 0", "a rank with a bad block: its own error")
all_like({[0] = e[0], e[2]}, 2, "cuda%.catalog%.lu: rank 1 of 3 refused the call: block must be an integer 1%.%.128, got 0",
         "  and the others name it")
for _, c in ipairs{
  {"A nil on root", function (r, comm) return M.lu(nil, {comm = comm}) end, "A is nil on rank 0, the root"},
  {"B without A off root", function (r, comm)
     return M.solve(r == 0 and mkA(16, t) or nil, rhs_of(16, 1, 0), {comm = comm, block = 4}) end,
   "B is given but A is not: give both %(root%) or neither"},
  {"devices and comm", function (r, comm) return M.lu(mkA(16, t), {comm = comm, devices = {0}}) end,
   "devices %(or peer%) and comm are two ways to spread a call: give one"},
  {"method seed", function (r, comm) return M.lu(mkA(16, t), {comm = comm, method = "seed"}) end,
   "method seed does not run over ranks"},
  {"growth", function (r, comm) return M.lu(mkA(16, t), {comm = comm, growth = true}) end, "growth is not measured over ranks"},
  {"root past the ranks", function (r, comm) return M.lu(mkA(16, t), {comm = comm, root = 2}) end,
   "root must be a rank 0%.%.1, got 2"},
  {"a distribution of other ranks", function (r, comm)
     return M.lu(mkA(16, t), {comm = comm, distribution = M.block_cyclic(16, 4, 4)}) end,
   "distribution deals columns to 4 ranks but comm has 2"},
  {"a distribution not a descriptor", function (r, comm) return M.lu(mkA(16, t), {comm = comm, distribution = {}}) end,
   "distribution must be a cuda%.catalog%.block_cyclic, got table"},
  {"columns of the wrong shape", function (r, comm)
     local d = M.block_cyclic(16, 2, 4)
     return M.lu(mkA(16, t), {comm = comm, distribution = d}) end, "A must be rank %d's columns, 16x8"},
  {"root with a distribution", function (r, comm)
     local d = M.block_cyclic(16, 2, 4)
     return M.lu(columns(d, r, t, 0), {comm = comm, distribution = d, root = 0}) end, "a distributed A is whole nowhere"},
  {"B nil on root", function (r, comm) return M.solve(r == 0 and mkA(16, t) or nil, nil, {comm = comm}) end,
   "B is nil on rank 0, the root"},
  {"fewer blocks than ranks", function (r, comm) return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = 16}) end,
   "n = 16 in blocks of 16 makes 1 block, fewer than the 2 ranks"},
} do
  e = errors_of(2, {0}, c[2])
  all_like(e, 2, c[3], "every rank refuses: " .. c[1])
end
-- and after the refusals the ranks agree and factor again
do
  local res = ranks(2, {0}, function (r, comm) return M.lu(r == 0 and mkA(16, t) or nil, {comm = comm, block = 4}) end)
  T.ok(res[0][1] and res[1][1], "after the refusals a call runs")
end
-- a singular matrix: every rank raises the same error, whichever rank's panel found it
do
  local z = rand_matrix(16, 4)
  for i = 0, 15 do z[i * 16 + 9] = 0 end   -- column 10 (rank 0's, in blocks of 4 over 2 ranks: its third) zero
  e = errors_of(2, {0}, function (r, comm) return M.lu(r == 1 and mkA(16, z) or nil, {comm = comm, block = 4, root = 1}) end)
  all_like(e, 2, "cuda%.catalog%.lu: the matrix is singular: pivot 10 is zero", "a singular matrix: every rank raises")
end
-- the comm option itself is checked before the ranks can agree: the rank raises alone
T.error_like(function () M.lu(nil, {comm = 3}) end, "cuda%.catalog%.lu: comm must be a cuda%.nccl%.comm, got number",
             "comm a number")
T.error_like(function () M.lu(nil, {comm = {kind = "cuda.nccl.comm", closed = true}}) end, "cuda%.catalog%.lu: comm is closed",
             "a closed comm")
-- a mock that catches the orders NCCL would hang in: a rank that receives from a rank that
-- broadcasts first
do
  local ok, err = pcall(ranks, 2, {0}, function (r, comm)
    local x = cuda.array("float64", 4, {device = 0})
    if r == 0 then comm:broadcast(x, {root = 0}); comm:send(x, 1)
    else comm:recv(x, 0); comm:broadcast(x, {root = 0}) end
  end)
  T.ok(not ok and tostring(err):find("the ranks hang: rank 0 waits in broadcast #1; rank 1 waits in recv with rank 0", 1, true),
       "the mock NCCL reports calls made in an order that hangs", tostring(err))
end

-- }======================================================


-- {====================================================== GPUs, NCCL and mpirun

local real = require "cuda"
local function skip(why) T.skip(why, 1); T.done_testing(); os.exit(0) end
local skip_mpi = os.getenv("CULUA_TEST_SKIP_MPI")
if skip_mpi and skip_mpi ~= "" then skip("MPI tests skipped in this pass: " .. skip_mpi) end
if real.device_count() == 0 then skip("no CUDA device: the ranks' runs need one") end
local have_nccl, nccl_why = real.nccl.available()
if not have_nccl then skip("no NCCL: " .. tostring(nccl_why)) end
local have_mpi, mpi_why = real.mpi.available()
if not have_mpi then skip("cuda.mpi not built: " .. tostring(mpi_why)) end
local mpirun = T.mpirun()
if not mpirun then skip("no mpirun on PATH") end

-- N ranks under mpirun: on one GPU (each rank its own NCCL_HOSTID, GPU 0: NCCL then takes the
-- ranks for nodes of their own and joins them by its socket transport, the only one that
-- needs no second GPU; NVLink across nodes, IB, P2P and shared memory off), or one GPU a rank
local function launch(np, shared, script, args)
  local env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " ..
              "NCCL_NVLS_ENABLE=0 "
  local cmd = T.culua .. " " .. script .. " " .. (args or "")
  if shared then
    env = env .. "CULUA_DEVICE=0 NCCL_MNNVL_ENABLE=0 NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "
    cmd = "sh -c 'NCCL_HOSTID=culua-rank-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} exec " .. cmd .. "'"
  end
  return T.run(env .. "timeout 600 " .. mpirun .. " -np " .. np .. " " .. cmd)
end

local function script(text)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  f:write(text)
  f:close()
  return name
end

-- the ranks' checks: each prints "R name: ok" or "R name: FAIL ..."
local child = script([=[
local cuda = require "cuda"
local cat = cuda.catalog
local mpi, nccl = cuda.mpi, cuda.nccl
local me, size = mpi.rank, mpi.size
local dev = cuda.device()
local id = mpi.bcast(me == 0 and nccl.unique_id() or nil, {root = 0})
local comm <close> = nccl.comm(id, size, me, {device = dev.ordinal})
local function check(name, cond, detail)
  io.write(("%d %s: %s\n"):format(me, name, cond and "ok" or ("FAIL " .. tostring(detail))))
  io.flush()
end
local function host(x)
  local h = cuda.host_array(x.dtype, #x.shape == 2 and x.shape or #x)
  x:copy_to(h)
  return h
end
local EPS = {float32 = 2.0 ^ -24, float64 = 2.0 ^ -53}
local function max_diff(a, b)
  local ta, tb = host(a):totable(), host(b):totable()
  local d, m = 0, 0
  for i = 1, #ta do
    local x, y = ta[i], tb[i]
    if type(x) == "table" then
      for j = 1, #x do d = math.max(d, math.abs(x[j] - y[j])); m = math.max(m, math.abs(x[j])) end
    else d = math.max(d, math.abs(x - y)); m = math.max(m, math.abs(x)) end
  end
  return d, m
end
-- whether b is a within tol epsilons of dt (times a's largest magnitude, at least 1), and
-- the largest difference
local function near(a, b, dt, tol)
  local d, m = max_diff(a, b)
  return d <= tol * EPS[dt] * math.max(m, 1), d
end
-- rank r's pivots as a string, the same on every rank when they agree
local function pivots_everywhere(p, n)
  local s = host(p):bytes():sub(1, 4 * n)
  local root = mpi.bcast(s, {root = 0})
  return mpi.allreduce(s == root and 0 or 1) == 0
end

for _, c in ipairs{{"float64", 200, 16}, {"float32", 333, 32}, {"float64", 515, 64}, {"float32", 520, 128},
                   {"float64", 450, 100}} do
  local dt, n, nb = c[1], c[2], c[3]
  local what = ("%s n %d block %d"):format(dt, n, nb)
  local hA = cuda.host_array(dt, {n, n}):random(7 + n, -1, 1)
  local hB = cuda.host_array(dt, {n, 3}):random(8 + n, -1, 1)
  -- one GPU's factors, on every rank (the same)
  local A1 = cuda.array(dt, {n, n}):copy_from(hA)
  local p1 = cat.lu(A1, {block = nb})
  local X1 = cat.solve(cuda.array(dt, {n, n}):copy_from(hA), cuda.array(dt, {n, 3}):copy_from(hB), {block = nb})
  -- root layout, root 0 and root size - 1
  for _, root in ipairs{0, size - 1} do
    local A = me == root and cuda.array(dt, {n, n}):copy_from(hA) or nil
    local p, info = cat.lu(A, {comm = comm, root = root, block = nb})
    check(what .. ", root " .. root .. ": pivots as one GPU's", host(p):bytes() == host(p1):bytes())
    check(what .. ", root " .. root .. ": the same pivots on every rank", pivots_everywhere(p, n))
    if me == root then
      check(what .. ", root " .. root .. ": factors as one GPU's", near(A1, A, dt, 64))
    end
    check(what .. ", root " .. root .. ": info", info.transfer == "nccl" and info.layout == "root" and info.ranks == size
          and info.rank == me and info.moved.panels > 0 and (size == 1 or info.moved.start > 0 and info.moved.finish > 0)
          and info.gathered_by == "rows", info.layout)
    local B = me == root and cuda.array(dt, {n, 3}):copy_from(hB) or nil
    local X = cat.solve(A and cuda.array(dt, {n, n}):copy_from(hA), B, {comm = comm, root = root, block = nb})
    if me == root then
      check(what .. ", root " .. root .. ": solve as one GPU's", near(X1, X, dt, 1e3))
    else check(what .. ", root " .. root .. ": no X off root", X == nil) end
  end
  -- distributed: each rank packs its columns of hA, factors them, and they come together on 0
  local d = cat.block_cyclic(n, size, nb)
  local nloc = d:columns(me)
  local hX = cuda.host_array(dt, {n, nloc})
  local ta = hA:totable()
  local rows = {}
  for i = 1, n do
    local row = {}
    for lc = 1, nloc do row[lc] = ta[i][d:column(me, lc)] end
    rows[i] = row
  end
  hX:copy_from(rows)
  local X = cuda.array(dt, {n, nloc}):copy_from(hX)
  local p, info = cat.lu(X, {comm = comm, distribution = d})
  check(what .. ", distributed: pivots as one GPU's", host(p):bytes() == host(p1):bytes())
  check(what .. ", distributed: info", info.layout == "distributed" and info.moved.start == 0)
  local G = me == 0 and cuda.array(dt, {n, n}) or nil
  d:gather(X, G, comm)
  if me == 0 then
    check(what .. ", distributed: factors as one GPU's", near(A1, G, dt, 64))
  end
  X:copy_from(hX)
  -- (root's B is solved for: another rank's is not read, NaN here)
  local B = cuda.array(dt, {n, 3}):copy_from(hB)
  if me ~= 0 then B:fill(0 / 0) end
  local Xs = cat.solve(X, B, {comm = comm, distribution = d})
  check(what .. ", distributed: solve as one GPU's, on every rank (NaN in B off root)", near(X1, Xs, dt, 1e3))
  check(what .. ", distributed: solve left A's columns", host(X):bytes() == hX:bytes())
  -- one right-hand side, a vector, eight (bstep's most) and nine (past them: trsm and matmul
  -- a step), with blocks of 16, 32 and 100 (triangles of 100 rows: three parts of 32 and one of
  -- 4; and a last block of 50)
  if n == 200 or n == 333 or n == 450 then
    for _, kk in ipairs{1, 8, 9} do
      local shape = kk == 1 and n or {n, kk}
      local hBk = cuda.host_array(dt, shape):random(9 + kk, -1, 1)
      local Xk1 = cat.solve(cuda.array(dt, {n, n}):copy_from(hA), cuda.array(dt, shape):copy_from(hBk), {block = nb})
      X:copy_from(hX)
      local Bk = cuda.array(dt, shape):copy_from(hBk)
      if me ~= 0 then Bk:fill(0 / 0) end
      local Xk = cat.solve(X, Bk, {comm = comm, distribution = d})
      check(what .. (", distributed: solve of %d right-hand side%s as one GPU's"):format(kk, kk == 1 and "" or "s"),
            near(Xk1, Xk, dt, 1e3))
    end
  end
end

-- the look-ahead's step on the transport's stream (solve.tune.step_on = "S": over ranks on C,
-- which waits for S's step before, as Q does), distributed, three right-hand sides
do
  local tune = require("culua.catalog.solve").tune
  local n, nb = 333, 16
  local hA = cuda.host_array("float64", {n, n}):random(41, -1, 1)
  local hB = cuda.host_array("float64", {n, 3}):random(42, -1, 1)
  local X1 = cat.solve(cuda.array("float64", {n, n}):copy_from(hA), cuda.array("float64", {n, 3}):copy_from(hB),
                       {block = nb})
  local d = cat.block_cyclic(n, size, nb)
  local X = d:array("float64", me)
  d:scatter(me == 0 and cuda.array("float64", {n, n}):copy_from(hA) or nil, X, comm)
  tune.step_on = "S"
  local Xs = cat.solve(X, cuda.array("float64", {n, 3}):copy_from(hB), {comm = comm, distribution = d})
  tune.step_on = "Q"
  check("step_on = S, distributed: solve as one GPU's", near(X1, Xs, "float64", 1e3))
end

-- d:fill from a line of CUDA C, then gathered: the global row and column of each element
do
  local n = 300
  local d = cat.block_cyclic(n, size, 16)
  local X = d:array("float64", me)
  d:fill(X, me, "a = row * 1000.0 + col + s", {s = 0.5})
  local A = me == 0 and cuda.array("float64", {n, n}) or nil
  d:gather(X, A, comm)
  if me == 0 then
    local t, ok = host(A):totable(), true
    for i = 1, n do for j = 1, n do ok = ok and t[i][j] == (i - 1) * 1000 + (j - 1) + 0.5 end end
    check("block_cyclic: fill, then gather", ok)
  end
  local Y = d:array("float64", me)
  d:scatter(A, Y, comm)
  check("block_cyclic: scatter gives back each rank's fill", host(Y):bytes() == host(X):bytes())
end

-- refusals: every rank raises, none hangs, and the communicator works after
local function raises(name, fn, pattern)
  local ok, err = pcall(fn)
  check(name, not ok and tostring(err):find(pattern), err)
end
local hA = cuda.host_array("float64", {64, 64}):random(3, -1, 1)
raises("ranks that disagree on n", function ()
  local d = cat.block_cyclic(me == 1 and 48 or 64, size, 8)
  cat.lu(d:array("float64", me):fill(1), {comm = comm, distribution = d})
end, "the ranks disagree on n: rank 0 has 64, rank 1 has 48")
raises("ranks that disagree on the dtype", function ()
  cat.lu(cuda.array(me == 1 and "float32" or "float64", {64, 64}):fill(1), {comm = comm})
end, "the ranks disagree on the dtype: rank 0 has float64, rank 1 has float32")
raises("a rank that refuses", function ()
  cat.lu(me == 0 and cuda.array("float64", {64, 64}):copy_from(hA) or nil, {comm = comm, block = me == 1 and 0 or 8})
end, me == 1 and "block must be an integer" or "rank 1 of %d+ refused the call")
raises("a singular matrix", function ()
  local A = me == 0 and cuda.array("float64", {64, 64}):copy_from(hA) or nil
  if A then A:fill(0) end
  cat.lu(A, {comm = comm, block = 8})
end, "the matrix is singular: pivot 1 is zero")
local A = me == 0 and cuda.array("float64", {64, 64}):copy_from(hA) or nil
local ok = pcall(cat.lu, A, {comm = comm, block = 8})
check("after the refusals a call runs", ok)
collectgarbage()
io.write(me, " done\n")
]=])

local function report(out, np, what)
  local seen, names = {}, {}
  -- "R name: ok" or "R name: FAIL detail"; names may hold ": " themselves
  for line in out:gmatch("[^\n]+") do
    local rank, rest = line:match("^(%d+) (.+)$")
    local name, verdict
    if rest then
      name = rest:match("^(.-): ok$")
      if name then verdict = "ok" else name, verdict = rest:match("^(.-): (FAIL.*)$") end
    end
    if name then
      if not seen[name] then names[#names + 1] = name; seen[name] = {} end
      seen[name][tonumber(rank)] = verdict
    end
  end
  for _, name in ipairs(names) do
    local bad = {}
    for r, v in pairs(seen[name]) do if v ~= "ok" then bad[#bad + 1] = ("rank %d: %s"):format(r, v) end end
    T.ok(#bad == 0, what .. ": " .. name, #bad > 0 and ("    " .. table.concat(bad, "\n    ")) or nil)
  end
  T.ok(#names >= 20, ("%s: %d checks reported"):format(what, #names))
  for r = 0, np - 1 do T.like(out, "\n?" .. r .. " done", ("%s: rank %d finished"):format(what, r)) end
end

for _, np in ipairs{2, 4} do
  local out, status = launch(np, true, child)
  T.is(status, 0, ("mpirun -np %d, ranks sharing GPU 0: exit 0"):format(np))
  if status ~= 0 then T.diag(out:sub(-3000)) end
  report(out, np, ("%d ranks on GPU 0"):format(np))
  if real.device_count() >= np then
    out, status = launch(np, false, child)
    T.is(status, 0, ("mpirun -np %d, one GPU a rank: exit 0"):format(np))
    if status ~= 0 then T.diag(out:sub(-3000)) end
    report(out, np, ("%d ranks, a GPU each"):format(np))
  else
    T.skip(("%d GPUs: one GPU a rank needs %d"):format(real.device_count(), np), 1)
  end
end

-- the manual's one script, over two ranks sharing GPU 0
do
  local out, status = launch(2, true, srcdir .. "/examples/solve_scale.lua", "600 ranks")
  T.is(status, 0, "examples/solve_scale.lua 600 ranks under mpirun -np 2 exits 0")
  T.like(out, "solve n = 600, 2 ranks: .-residual ratio %d+%.%d+; data by nccl\n", "  and solves, within LAPACK's ratio")
end

-- a rank that fails mid-call (its panels' buffer cannot be made) ends the job, named
local failing = script([[
local cuda = require "cuda"
local mpi, nccl = cuda.mpi, cuda.nccl
local me, size = mpi.rank, mpi.size
local id = mpi.bcast(me == 0 and nccl.unique_id() or nil, {root = 0})
local comm = nccl.comm(id, size, me, {device = cuda.device().ordinal})
local n, nb = 256, 16
if me == 1 then
  local array = cuda.array
  cuda.array = function (dt, shape, o)
    if shape == nb + n * nb then error("rank one cannot make its panel buffer") end
    return array(dt, shape, o)
  end
end
local A = me == 0 and cuda.array("float64", {n, n}):copy_from(cuda.host_array("float64", {n, n}):random(1, -1, 1)) or nil
cuda.catalog.lu(A, {comm = comm, block = nb})
print("rank " .. me .. " finished the call")
]])
local t0 = real.clock()
local out, status = launch(2, true, failing)
T.isnt(status, 0, "a rank that fails mid-call: the job fails")
T.like(out, "culua: rank 1 of 2 failed: [^\n]*rank one cannot make its panel buffer", "  naming the rank")
T.unlike(out, "rank 0 finished the call", "  rank 0 never finished the call")
T.ok(real.clock() - t0 < 300, ("  and nothing hung (%.1f s)"):format(real.clock() - t0))
os.remove(child)
os.remove(failing)

-- }======================================================

T.done_testing()
