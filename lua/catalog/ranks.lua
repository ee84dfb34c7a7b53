-- culua.catalog.ranks: cuda.catalog.lu and solve over ranks (comm = a cuda.nccl
-- communicator, one GPU a rank: a process a rank under mpirun or srun). The ranks
-- first agree on the call: each states what it was asked and whether its own checks
-- passed, in one all-gather, so that a refusal is every rank's and none waits on
-- another. Then lu_multi.lua's algorithm runs on ranks_transport.lua's transport: a
-- panel goes from its owner to every rank by an NCCL broadcast, on streams; the columns
-- are dealt out from root in chunks and come back to it a block row at a time where A
-- is whole on one rank (root =), or are the ranks' own (distribution =), where solve's
-- triangular solves run over them too: the forward one within the factorization on root
-- (lu_multi's rhs), the backward one here.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"
local sh_ = require "culua.catalog.shares"
local lu = require "culua.catalog.lu"
local lu_multi = require("culua.catalog.lu_multi").lu_multi
local triangular = require "culua.catalog.triangular"
local bc = require "culua.catalog.block_cyclic"
local rt = require "culua.catalog.ranks_transport"

local fail, ceil_div = core.fail, core.ceil_div
local kernels, view, copy, check_block = S.kernels, S.view, S.copy, S.check_block
local square, rhs, check_inputs, pivot_verdict = S.square, S.rhs, S.check_inputs, S.pivot_verdict
local close_all, share_on, stream_on = sh_.close_all, sh_.share_on, S.stream_on
local block_step, solve_factored = triangular.block_step, triangular.solve_factored
local transport, transport_comm = rt.transport, rt.comm

local M = {}


-- {====================================================== the ranks' word on a call

-- what every rank states (-1: it does not say): whether its own checks failed, the call,
-- the layout, the root, n, the dtype, an explicit block, the block root would take,
-- solve's right-hand sides and its solve.tune knobs (knobs_of); and, where its checks
-- failed, why (MSG bytes of it)
local FIELDS = {"failed", "call", "layout", "root", "n", "dtype", "block", "nb", "k", "knobs"}
local CODES = {call = {"lu", "solve"}, layout = {"root", "distributed"}, dtype = {"float32", "float64"}}
local SHOWN = {call = "the call", layout = "the layout", root = "root", n = "n", dtype = "the dtype",
               block = "block", k = "the right-hand sides (B's columns)", knobs = "solve.tune's knobs"}

-- solve.tune's knobs that decide which NCCL calls a rank makes, or on which stream (ranks
-- that differ could pair calls that do not match, and hang; the layout that does not use
-- a knob still compares it): checked, and stated as one word (knobs_of)
local KNOBS = {{"rank_scatter", {"broadcast", "send"}}, {"rank_gather", {"rows", "end"}},
               {"rank_panels", {"broadcast", "send"}}, {"step_on", {"Q", "S"}}}

-- rank_ctas: the cap on NCCL's blocks (CTAs) for the transfers (transport_comm): an
-- integer 1..1024, a table of them by the number of ranks, or false (none). NCCL before
-- 2.18 cannot split a communicator: none there (every rank loads the same library)
local function ctas_of(fname, G)
  local v = S.tune.rank_ctas
  if type(v) == "table" then v = v[G] end
  if v and (math.type(v) ~= "integer" or v < 1 or v > 1024) then
    fail(fname, "solve.tune.rank_ctas must be an integer 1..1024 or false (a table of them by ranks), got %s", tostring(v))
  end
  local major, minor = cuda.nccl.version()
  return v and (major > 2 or major == 2 and minor >= 18) and v or false
end

-- the word and the cap on NCCL's blocks
local function knobs_of(fname, G)
  local t = S.tune
  local c = t.start_chunks or 1
  if math.type(c) ~= "integer" or c < 1 then
    fail(fname, "solve.tune.start_chunks must be an integer >= 1, got %s", tostring(c))
  end
  local ctas = ctas_of(fname, G)
  local word = c * 1025 + (ctas or 0)
  for _, k in ipairs(KNOBS) do
    local v = t[k[1]] or k[2][1]
    core.one_of(fname, "solve.tune." .. k[1], v, k[2])
    word = word * 2 + (v == k[2][1] and 0 or 1)
  end
  return word, ctas
end

-- a knobs word as its knobs say it
local function knobs_shown(word)
  local parts = {}
  for i = #KNOBS, 1, -1 do
    local k = KNOBS[i]
    parts[i] = ("%s = %s"):format(k[1], k[2][word % 2 + 1])
    word = word // 2
  end
  local ctas = word % 1025
  return ("start_chunks = %d, %s, rank_ctas = %s"):format(word // 1025, table.concat(parts, ", "),
                                                            ctas == 0 and "false" or tostring(ctas))
end
local MSG = 240

local function code(f, v)
  if v == nil then return -1 end
  local list = CODES[f]
  if not list then return v end
  for i, x in ipairs(list) do if x == v then return i end end
  return -1
end

-- the stream the agreement travels on, kept a device
local function agree_stream(dev)
  local st = core.device_state("solve_ranks", dev)
  st.stream = st.stream or stream_on(dev)
  return st.stream
end

--[[
** Every rank's word, gathered on each (two NCCL all-gathers on a stream of the rank's own,
** read back), then one verdict that every rank reaches alike: the rank whose checks failed
** raises its own error, the others that it refused (with its reason); ranks that disagree
** on the call, the layout, root, n, the dtype, the block, the right-hand sides or the knobs
** all raise naming the first two that differ. Returns the words, by rank.
]]
local function agree(fname, comm, word, err)
  local G, dev = comm.size, comm.device
  local F = #FIELDS
  word.failed = err and 1 or 0
  local hv, hm = cuda.host_array("int64", F), cuda.host_array("uint8", MSG):fill(0)
  for i, f in ipairs(FIELDS) do hv[i] = code(f, word[f]) end
  local text = err and (tostring(err):match("cuda%.catalog%.[%w_.]+: (.*)$") or tostring(err)) or ""
  for i = 1, math.min(#text, MSG - 1) do hm[i] = text:byte(i) end
  local st = agree_stream(dev)
  local o = {device = dev.ordinal}
  local dv, dm = cuda.array("int64", F, o), cuda.array("uint8", MSG, o)
  local rv, rm = cuda.array("int64", F * G, o), cuda.array("uint8", MSG * G, o)
  dv:copy_from(hv, st)
  dm:copy_from(hm, st)
  comm:all_gather(dv, rv, {stream = st})
  comm:all_gather(dm, rm, {stream = st})
  local hrv, hrm = cuda.host_array("int64", F * G), cuda.host_array("uint8", MSG * G)
  rv:copy_to(hrv, st)
  rm:copy_to(hrm, st)
  st:synchronize()
  close_all{dv, dm, rv, rm}
  local words = {}
  for r = 0, G - 1 do
    local w, t = {}, {}
    for i, f in ipairs(FIELDS) do
      local c = math.tointeger(hrv[r * F + i])
      if c ~= -1 then w[f] = CODES[f] and CODES[f][c] or c end
    end
    for i = 1, MSG do
      local b = math.tointeger(hrm[r * MSG + i])
      if b == 0 then break end
      t[i] = string.char(b)
    end
    w.msg = table.concat(t)
    words[r] = w
  end
  if err then error(err, 0) end
  for r = 0, G - 1 do
    if words[r].failed == 1 then fail(fname, "rank %d of %d refused the call: %s", r, G, words[r].msg) end
  end
  for _, f in ipairs{"call", "layout", "root", "n", "dtype", "block", "k", "knobs"} do
    local first, fr
    for r = 0, G - 1 do
      local v = words[r][f]
      if v ~= nil then
        if first == nil then first, fr = v, r
        elseif v ~= first then
          local show = f == "knobs" and knobs_shown or tostring
          fail(fname, "the ranks disagree on %s: rank %d has %s, rank %d has %s", SHOWN[f], fr, show(first), r, show(v))
        end
      end
    end
  end
  return words
end

-- the first stated value of field f, by rank (0 .. G - 1)
local function stated(words, G, f)
  for r = 0, G - 1 do if words[r][f] ~= nil then return words[r][f] end end
end

-- }======================================================


-- {====================================================== the calls

local PANELS = {"auto", "cluster", "fused", "columns"}

-- the comm option, which must be usable before the ranks can agree on anything: a rank
-- given something else raises at once (and, under cuda.mpi, its failure ends the job)
local function check_comm(fname, comm)
  if cuda.type(comm) ~= "cuda.nccl.comm" then
    fail(fname, "comm must be a cuda.nccl.comm, got %s", cuda.type(comm) or type(comm))
  end
  if comm.closed then fail(fname, "comm is closed") end
  return comm
end

--[[
** This rank's own checks of a call (lu or solve) over comm: the options, the layout and
** its arrays, their values (finite). Returns the plan: the word it states (agree) and what
** it keeps. A raised error is caught by `plan`'s caller and becomes this rank's refusal.
]]
local function plan_of(fname, call, comm, A, B, opts, keys)
  opts = core.options(fname, opts, keys)
  if opts.devices ~= nil or opts.peer ~= nil then
    fail(fname, "devices (or peer) and comm are two ways to spread a call: give one")
  end
  if opts.growth ~= nil then fail(fname, "growth is not measured over ranks") end
  if (opts.method or "lu") ~= "lu" then fail(fname, "method %s does not run over ranks: lu does", tostring(opts.method)) end
  local G, me, dev = comm.size, comm.rank, comm.device
  local knobs, ctas = knobs_of(fname, G)
  local p = {word = {call = call, knobs = knobs}, ctas = ctas, dev = dev, overwrite = core.flag(fname, opts, "overwrite")}
  p.stream = core.check_stream(fname, opts.stream, dev)
  p.pk = core.one_of(fname, "panel", opts.panel or "auto", PANELS)
  local function here(what, X)
    if X.device.ordinal ~= dev.ordinal then
      fail(fname, "%s is on device %d but comm is on device %d", what, X.device.ordinal, dev.ordinal)
    end
  end
  local root = opts.root or 0
  if math.type(root) ~= "integer" or root < 0 or root >= G then
    fail(fname, "root must be a rank 0..%d, got %s", G - 1, tostring(root))
  end
  local d, w = opts.distribution, p.word
  local status
  local function finite(what, X, count)
    local K = kernels(dev, X.dtype)
    status = status or core.scratch("solve_status", dev, p.stream, 1)
    check_inputs(fname, K, dev, p.stream, status, what, X, count)
  end
  if d ~= nil then
    if not bc.is(d) then fail(fname, "distribution must be a cuda.catalog.block_cyclic, got %s", cuda.type(d) or type(d)) end
    if d.ranks ~= G then fail(fname, "distribution deals columns to %d ranks but comm has %d", d.ranks, G) end
    if opts.block ~= nil and opts.block ~= d.block then
      fail(fname, "block %s differs from the distribution's %d", tostring(opts.block), d.block)
    end
    if call == "lu" and opts.root ~= nil then
      fail(fname, "root names the rank that holds A whole; a distributed A is whole nowhere")
    end
    local nloc = bc.check_local(fname, "A", d, A, me)
    w.dtype = core.dtype_of(fname, "A", A, {"float32", "float64"})
    here("A", A)
    w.layout, w.n, w.block, w.nb = "distributed", d.n, d.block, d.block
    finite("A", A, d.n * nloc)
    if call == "solve" then
      w.root = root
      w.k = rhs(fname, B, d.n, w.dtype)
      here("B", B)
      -- (only root's values are solved for: another rank's B is overwritten, whatever it held)
      if me == root then finite("B", B, d.n * w.k) end
    end
    p.d = d
  else
    w.layout, w.root = "root", root
    if opts.block ~= nil then w.block = check_block(fname, opts) end
    if A ~= nil then
      w.n = square(fname, "A", A)
      w.dtype = A.dtype
      here("A", A)
    elseif me == root then
      fail(fname, "A is nil on rank %d, the root: the matrix is whole there", me)
    end
    if call == "solve" then
      if B ~= nil then
        if A == nil then fail(fname, "B is given but A is not: give both (root) or neither") end
        w.k = rhs(fname, B, w.n, w.dtype)
        here("B", B)
      elseif me == root then
        fail(fname, "B is nil on rank %d, the root", me)
      end
    end
    if me == root then
      w.nb = lu.lu_block(fname, opts, w.n, w.dtype, dev, p.pk, true)
      finite("A", A, w.n * w.n)
      if call == "solve" then finite("B", B, w.n * w.k) end
    end
  end
  return p
end

-- this rank's plan, agreed with the others: n, dtype, block, k as every rank takes them
local function plan(fname, call, comm, A, B, opts, keys)
  check_comm(fname, comm)
  local ok, p = pcall(plan_of, fname, call, comm, A, B, opts, keys)
  local words = agree(fname, comm, ok and p.word or {call = call}, not ok and p or nil)
  local G = comm.size
  p.n, p.dt, p.k = stated(words, G, "n"), stated(words, G, "dtype"), stated(words, G, "k")
  p.layout, p.root = p.word.layout, p.word.root or 0
  p.nb = stated(words, G, "block") or (p.layout == "root" and words[p.root].nb) or p.word.nb
  local P = ceil_div(p.n, p.nb)
  if p.n > 0 and P < G then
    fail(fname, "n = %d in blocks of %d makes %d block%s, fewer than the %d ranks: every rank needs one " ..
         "(a narrower block, or fewer ranks)",
         p.n, p.nb, P, P == 1 and "" or "s", G)
  end
  return p
end

-- the factorization over the ranks (A: root's matrix, or this rank's columns L), pivots
-- into ipiv; raises on a bad pivot, on every rank alike. What it made is closed at its
-- end; when it raises midway it is left to the collector, not closed here: an array
-- closed under an NCCL call that waits for a rank that failed would wait too, and the
-- job is ending (cuda.mpi's report of the failing rank aborts it)
local function factor(fname, comm, p, A, L, ipiv, info, sides)
  local owned = {}
  local s = share_on(comm.rank + 1, p.dev, 1, p.dt, true)   -- (with C, at the panels' priority)
  s.L = L
  local ok, bad = pcall(function ()
    local tp = transport(owned, comm, s, p.stream, p.n, p.nb, p.dt, p.layout, A, p.root, ipiv, info)
    return lu_multi(owned, fname, p.n, p.nb, p.dt, p.pk, tp, sides)
  end)
  if not ok then error(bad, 0) end
  close_all(owned)
  pivot_verdict(fname, bad)
  return s
end

local function new_info(comm, p)
  return {ranks = comm.size, rank = comm.rank, shares = comm.size, transfer = "nccl", layout = p.layout,
          root = p.layout == "root" and p.root or nil, block = p.nb, ctas = p.ctas,
          moved = {start = 0, panels = 0, finish = 0}}
end

local lu_keys = {"stream", "method", "block", "panel", "devices", "peer", "growth", "comm", "root", "distribution"}

-- cuda.catalog.lu(A, {comm = c, ...}) -> ipiv, info (solve.lua documents it)
function M.lu(A, opts)
  local fname = "lu"
  local comm = opts.comm
  local p = plan(fname, "lu", comm, A, nil, opts, lu_keys)
  local info = new_info(comm, p)
  local ipiv = cuda.array("int32", math.max(p.n, 1), {device = p.dev.ordinal})
  if p.n == 0 then return ipiv, info end
  comm = transport_comm(comm, p.ctas)
  if p.layout == "root" then
    factor(fname, comm, p, comm.rank == p.root and A or nil, nil, ipiv, info)
  else
    factor(fname, comm, p, nil, A, ipiv, info)
  end
  return ipiv, info
end

--[[
** X (n x k, on every rank) from the factors in the ranks' columns L (share s), after the
** factorization folded in the forward solve on root (lu_multi's rhs): there R holds
** y = inv(L) P b, elsewhere zero. U x = y by fan-in: the solve's chain is a block at a
** time, and what travels between ranks each step is one block of rows (jb x k), not the
** rest of X. R takes from its rows what this rank's blocks of x contribute (R -= U(:, q)
** x_q): block q's rows of R, summed over the ranks by a reduce to q's owner (into its
** inbox), are y_q less every contribution from the blocks below; the owner solves x_q
** with its triangle into X (zeroed: its rows were spent) and takes x_q's contribution from
** the rows above. A sum over the ranks puts x together on every rank. Each step is a
** reduce of jb x k values and, on the owner, one launch for a few right-hand sides
** (triangular.lua's block_step), all on the rank's stream C, where the factorization ran.
** (The forward solve went the same way, fan-in after the factorization, until the
** factorization took it: on two ranks at 32768 its 256 steps took about 12 ms.)
]]
local function solve_columns(comm, s, n, nb, k, X, R)
  local G, me, C, K, dev = comm.size, comm.rank, s.C, s.K, s.dev
  local ld, P = s.nloc, ceil_div(n, nb)
  local inbox = cuda.array(X.dtype, nb * k, {device = dev.ordinal})   -- a block's rows, reduced
  X:fill(0, C)   -- (tp.finish put C after S, which waited for root's forward solve on V)
  for q = P - 1, 0, -1 do
    local j0 = q * nb
    local jb, o = math.min(nb, n - j0), q % G
    comm:reduce(view(R, j0 * k, jb * k), view(inbox, 0, jb * k), {root = o, stream = C})
    if o == me then
      local lc = (q // G) * nb
      block_step(K, dev, C, "upper", jb, k, s.L, j0 * ld + lc, ld, inbox, 0, X, j0 * k, j0, lc, R, 0)
    end
  end
  comm:all_reduce(X, {op = "sum", stream = C})
  return inbox   -- (closed by the caller once C is done with it)
end

local solve_keys = {"stream", "method", "block", "panel", "overwrite", "devices", "peer", "growth", "comm", "root",
                    "distribution"}

-- cuda.catalog.solve(A, B, {comm = c, ...}) -> X, ipiv, info (solve.lua documents it)
function M.solve(A, B, opts)
  local fname = "solve"
  local comm = opts.comm
  local p = plan(fname, "solve", comm, A, B, opts, solve_keys)
  local info = new_info(comm, p)
  local me, dev, dt, n, k = comm.rank, p.dev, p.dt, p.n, p.k
  local o = {device = dev.ordinal}
  comm = transport_comm(comm, p.ctas)
  local ipiv = cuda.array("int32", n, o)
  local K = kernels(dev, dt)
  if p.layout == "root" then
    if me ~= p.root then
      factor(fname, comm, p, nil, nil, ipiv, info)
      return nil, ipiv, info
    end
    local LU, X = A, B
    if not p.overwrite then
      LU, X = cuda.array(dt, {n, n}, o), cuda.array(dt, #B.shape == 2 and B.shape or #B, o)
      copy(K, dev, p.stream, n * n, A, LU)
      copy(K, dev, p.stream, n * k, B, X)
    end
    factor(fname, comm, p, LU, nil, ipiv, info)
    solve_factored(K, dev, p.stream, n, k, p.nb, LU, ipiv, X)
    if LU ~= A then LU:close() end
    return X, ipiv, info
  end
  -- distributed: the factors in this rank's columns (a copy unless overwrite), X on every rank
  local L, X = A, B
  if not p.overwrite then
    L, X = cuda.array(dt, A.shape, o), cuda.array(dt, #B.shape == 2 and B.shape or #B, o)
    copy(K, dev, p.stream, #A, A, L)
    if me == p.root then copy(K, dev, p.stream, n * k, B, X) end   -- (elsewhere B is not read)
  end
  -- y = inv(L) P b into R on root, with the factorization; zero elsewhere
  local R = cuda.array(dt, n * k, o)
  local sides   -- (lu_multi's rhs; not `rhs`, solve_common's check of B, above)
  if me == p.root then sides = {X = X, Y = R, k = k} else R:fill(0, p.stream) end
  local s = factor(fname, comm, p, nil, L, ipiv, info, sides)
  -- U x = y, on C (which did the factorization)
  local inbox = solve_columns(comm, s, n, p.nb, k, X, R)
  s.done:record(s.C)
  if p.stream then p.stream:wait(s.done) end
  s.C:synchronize()
  R:close()
  inbox:close()
  if L ~= A then L:close() end
  return X, ipiv, info
end

-- }======================================================

return M
