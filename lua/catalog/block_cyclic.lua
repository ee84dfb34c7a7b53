-- culua.catalog.block_cyclic: cuda.catalog.block_cyclic(n, ranks, block), the
-- descriptor of an n x n matrix whose columns are dealt out to ranks in blocks
-- (the layout lu and solve over ranks work in, lua/catalog/ranks.lua): which
-- columns a rank holds, an array for them, a fill from a line of CUDA C, and the
-- columns moved between a whole matrix on one rank and the ranks (NCCL sends and
-- receives, kernels/lu_multi.cu's cyclic packing), which the root layout takes too.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"

local fail, ceil_div = core.fail, core.ceil_div
local kernels, grid_for = S.kernels, S.grid_for
local MAXBLOCK = S.shapes.MAXBLOCK

local D = {}
D.__index = D
D.__name = "cuda.catalog.block_cyclic"

-- the columns rank r (0-based) of G holds when n columns are dealt out in blocks of nb:
-- panel q (columns q nb .. q nb + nb - 1) to rank q % G, in order
local function columns_of(n, nb, G, r)
  local nloc = 0
  for q = r, ceil_div(n, nb) - 1, G do nloc = nloc + math.min(nb, n - q * nb) end
  return nloc
end

local function whole(fname, what, v, lo)
  if math.type(v) ~= "integer" or v < lo then
    fail(fname, "%s must be an integer >= %d, got %s", what, lo, tostring(v))
  end
  return v
end

-- cuda.catalog.block_cyclic(n, ranks, block) -> d: columns 1..n in blocks of `block`
-- (1..MAXBLOCK), block q (from 0) to rank q % ranks; every rank holds one block at least
local function new(n, ranks, block)
  local fname = "block_cyclic"
  whole(fname, "n", n, 1)
  whole(fname, "ranks", ranks, 1)
  if math.type(block) ~= "integer" or block < 1 or block > MAXBLOCK then
    fail(fname, "block must be an integer 1..%d, got %s", MAXBLOCK, tostring(block))
  end
  local P = ceil_div(n, block)
  if P < ranks then
    fail(fname, "n = %d in blocks of %d makes %d block%s, fewer than the %d ranks: every rank needs one " ..
         "(a narrower block, or fewer ranks)",
         n, block, P, P == 1 and "" or "s", ranks)
  end
  return setmetatable({n = n, ranks = ranks, block = block, panels = P}, D)
end

local function is(d) return getmetatable(d) == D end

local function check_rank(fname, d, r)
  if math.type(r) ~= "integer" or r < 0 or r >= d.ranks then
    fail(fname, "rank must be an integer 0..%d, got %s", d.ranks - 1, tostring(r))
  end
  return r
end

function D:__tostring()
  return ("cuda.catalog.block_cyclic: n = %d, %d rank%s, blocks of %d"):format(self.n, self.ranks,
                                                                              self.ranks == 1 and "" or "s", self.block)
end

-- d:columns(rank) -> how many columns rank holds (its array is n x that)
function D:columns(r)
  check_rank("block_cyclic.columns", self, r)
  return columns_of(self.n, self.block, self.ranks, r)
end

-- d:owner(j) -> rank, lc: global column j (1..n) is rank's local column lc (1-based)
function D:owner(j)
  if math.type(j) ~= "integer" or j < 1 or j > self.n then
    fail("block_cyclic.owner", "column must be an integer 1..%d, got %s", self.n, tostring(j))
  end
  local q, nb = (j - 1) // self.block, self.block
  return q % self.ranks, (q // self.ranks) * nb + (j - 1) % nb + 1
end

-- d:column(rank, lc) -> the global column (1..n) of rank's local column lc (1-based)
function D:column(r, lc)
  check_rank("block_cyclic.column", self, r)
  local nloc = columns_of(self.n, self.block, self.ranks, r)
  if math.type(lc) ~= "integer" or lc < 1 or lc > nloc then
    fail("block_cyclic.column", "rank %d holds columns 1..%d, got %s", r, nloc, tostring(lc))
  end
  local c, nb = lc - 1, self.block
  return ((c // nb) * self.ranks + r) * nb + c % nb + 1
end

-- d:array(dtype, rank [, opts]) -> a cuda.array of n x d:columns(rank) (opts as cuda.array's)
function D:array(dt, r, opts)
  check_rank("block_cyclic.array", self, r)
  return cuda.array(dt, {self.n, columns_of(self.n, self.block, self.ranks, r)}, opts)
end

-- X (named `what`): rank r's columns (n x nloc, or a 1-D array of that many elements),
-- else an error; returns nloc
local function check_local(fname, what, d, X, r)
  core.check_array(fname, what, X)
  local nloc = columns_of(d.n, d.block, d.ranks, r)
  if X.pitched then fail(fname, "%s is pitched: the catalog expects packed arrays", what) end
  local shape = X.shape
  if (#shape == 2 and (shape[1] ~= d.n or shape[2] ~= nloc)) or (#shape ~= 2 and #X ~= d.n * nloc) then
    fail(fname, "%s must be rank %d's columns, %dx%d (d:columns(%d) = %d), got %s", what, r, d.n, nloc, r, nloc,
         #shape == 2 and ("%dx%d"):format(shape[1], shape[2]) or (#X .. " elements"))
  end
  return nloc
end

--[=[
** d:fill(X, rank, body [, values [, opts]]) -> X: rank's columns from a line of CUDA C
** (cuda.map's), which assigns `a`, the element at global row `row` and column `col`
** (0-based, long long), of the n x n matrix of order `N`; values names more inputs
** (numbers or arrays, as cuda.map takes), opts = {stream =}. Every rank that runs the same
** body holds its part of one matrix, which no GPU need hold whole:
**   d:fill(X, rank, "a = (row == col) ? N : sin(0.1 * row + 0.37 * col)")
]=]
function D:fill(X, r, body, values, opts)
  local fname = "block_cyclic.fill"
  check_rank(fname, self, r)
  local nloc = check_local(fname, "X", self, X, r)
  if type(body) ~= "string" then fail(fname, "body must be a string of CUDA C, got %s", type(body)) end
  local args = {a = X, N = self.n, cyc_nloc_ = nloc, cyc_nb_ = self.block, cyc_ranks_ = self.ranks, cyc_rank_ = r}
  if values ~= nil then
    if type(values) ~= "table" then fail(fname, "values must be a table of names, got %s", type(values)) end
    for k, v in pairs(values) do
      if args[k] ~= nil then fail(fname, "values may not name '%s': fill gives it", tostring(k)) end
      args[k] = v
    end
  end
  local index = "const long long row = i / cyc_nloc_, cyc_lc_ = i % cyc_nloc_; " ..
                "const long long col = (cyc_lc_ / cyc_nb_ * cyc_ranks_ + cyc_rank_) * cyc_nb_ + cyc_lc_ % cyc_nb_; "
  cuda.map(index .. body, args, opts)
  return X
end


-- {====================================================== moving columns

-- the cyclic kernel on stream st: rank r's columns out of A (back = 0) into X, or back
local function cyclic(d, dev, dt, st, r, A, X, back)
  local nloc = columns_of(d.n, d.block, d.ranks, r)
  kernels(dev, dt)("cyclic"):launch({grid = grid_for(d.n * nloc, 256, dev), block = 256, stream = st},
                                    d.n, d.n, d.block, d.ranks, r, nloc, 0, nloc, A, X, back)
end

--[[
** From A (n x n, on rank `root`) to every rank's columns X, queued on stream st: root packs
** each other rank's columns into W[r] (made here unless given; make(dt, count) makes an
** array of root's device) and sends them all in one NCCL group, and packs its own into its X
** on stream `own` (st by default); the others receive. Returns W (root), for the way back.
** The bytes that left or reached this rank are added to moved[1] when moved is given
]]
local function scatter(d, comm, root, A, X, dt, st, make, own, W, moved)
  local me, dev = comm.rank, comm.device
  local esz = S.esize(dt)
  if me ~= root then
    comm:recv(X, root, {stream = st})
    if moved then moved[1] = moved[1] + #X * esz end
    return nil
  end
  cyclic(d, dev, dt, own or st, me, A, X, 0)
  W = W or {}
  for r = 0, d.ranks - 1 do
    if r ~= me then
      W[r] = W[r] or make(dt, d.n * columns_of(d.n, d.block, d.ranks, r))
      cyclic(d, dev, dt, st, r, A, W[r], 0)
    end
  end
  cuda.nccl.group(function ()
    for r = 0, d.ranks - 1 do
      if r ~= me then
        comm:send(W[r], r, {stream = st})
        if moved then moved[1] = moved[1] + #W[r] * esz end
      end
    end
  end)
  return W
end

-- the way back: every rank's columns X into A on root (W as scatter's), queued on st
local function gather(d, comm, root, X, A, dt, st, make, W, moved)
  local me, dev = comm.rank, comm.device
  local esz = S.esize(dt)
  if me ~= root then
    comm:send(X, root, {stream = st})
    if moved then moved[1] = moved[1] + #X * esz end
    return
  end
  W = W or {}
  cuda.nccl.group(function ()
    for r = 0, d.ranks - 1 do
      if r ~= me then
        W[r] = W[r] or make(dt, d.n * columns_of(d.n, d.block, d.ranks, r))
        comm:recv(W[r], r, {stream = st})
        if moved then moved[1] = moved[1] + #W[r] * esz end
      end
    end
  end)
  for r = 0, d.ranks - 1 do
    if r ~= me then cyclic(d, dev, dt, st, r, A, W[r], 1) end
  end
  cyclic(d, dev, dt, st, me, A, X, 1)
end

-- the checks of d:scatter and d:gather: comm one of d's ranks, root, A on root (n x n), X
-- this rank's columns, all on comm's device and of one dtype; the stream
local function check_move(fname, d, comm, X, A, opts)
  if cuda.type(comm) ~= "cuda.nccl.comm" then
    fail(fname, "comm must be a cuda.nccl.comm, got %s", cuda.type(comm) or type(comm))
  end
  if comm.size ~= d.ranks then fail(fname, "comm has %d ranks but d deals columns to %d", comm.size, d.ranks) end
  opts = core.options(fname, opts, {"root", "stream"})
  local root = opts.root or 0
  if math.type(root) ~= "integer" or root < 0 or root >= d.ranks then
    fail(fname, "root must be a rank 0..%d, got %s", d.ranks - 1, tostring(root))
  end
  local me, dev = comm.rank, comm.device
  check_local(fname, "X", d, X, me)
  local dt = core.dtype_of(fname, "X", X, {"float32", "float64"})
  if X.device.ordinal ~= dev.ordinal then
    fail(fname, "X is on device %d but comm is on device %d", X.device.ordinal, dev.ordinal)
  end
  if me == root then
    core.check_array(fname, "A", A)
    if A.dtype ~= dt then fail(fname, "A has dtype %s but X has %s", A.dtype, dt) end
    if #A ~= d.n * d.n or A.pitched then fail(fname, "A must be the whole %dx%d matrix (packed) on root", d.n, d.n) end
    if A.device.ordinal ~= dev.ordinal then
      fail(fname, "A is on device %d but comm is on device %d", A.device.ordinal, dev.ordinal)
    end
  end
  return root, dt, core.check_stream(fname, opts.stream, dev)
end

local function maker(dev) return function (dt, count) return cuda.array(dt, count, {device = dev.ordinal}) end end

local function close_all(W) for _, w in pairs(W or {}) do w:close() end end

-- d:scatter(A, X, comm [, {root = 0, stream =}]) -> X: A (n x n on root; nil elsewhere) dealt
-- out, every rank's columns into its X. Collective: every rank calls it; it returns when done
function D:scatter(A, X, comm, opts)
  local root, dt, st = check_move("block_cyclic.scatter", self, comm, X, A, opts)
  local W = scatter(self, comm, root, A, X, dt, st, maker(comm.device))
  if st then st:synchronize() else comm.device:synchronize() end
  close_all(W)
  return X
end

-- d:gather(X, A, comm [, {root = 0, stream =}]) -> A on root (nil elsewhere): every rank's
-- columns X back into the whole matrix. Collective, as scatter
function D:gather(X, A, comm, opts)
  local root, dt, st = check_move("block_cyclic.gather", self, comm, X, A, opts)
  local W = {}
  gather(self, comm, root, X, A, dt, st, maker(comm.device), W)
  if st then st:synchronize() else comm.device:synchronize() end
  close_all(W)
  return comm.rank == root and A or nil
end

-- }======================================================

return {new = new, is = is, columns_of = columns_of, check_local = check_local, scatter = scatter, gather = gather,
        cyclic = cyclic}
