-- culua.catalog.solve: cuda.catalog.lu, lu_solve and solve: LU factorization
-- with partial pivoting (LAPACK's getrf, on the GPU) and the solves with it,
-- on row-major float32 and float64 matrices.
--
-- A matrix is what culua's 2-D arrays are: row-major, A[i][j] at i*n + j, so
-- "row i" is row i of A as printed. LAPACK is column-major; the factors here
-- are those of A itself (P*A = L*U, L unit lower, U upper, both in A), and the
-- pivots are LAPACK's ipiv, 1-based: at step i, row i was swapped with row
-- ipiv[i].
--
-- This file is the family's entry: its calls, their checks, and which part
-- does the work. The parts, each with its kernels (kernels/<part>.cu):
--   lu.lua          LU on one GPU: blocked, the look-ahead, the default block
--   lu_panel.lua    the panel factorizations (cluster, fused, columns)
--   lu_multi.lua    LU spread over shares: the algorithm, over a transport
--   shares.lua      its transport over the GPUs of one process (devices =)
--   ranks.lua       lu and solve over ranks (comm =): the ranks' agreement, the calls
--   ranks_transport.lua  its transport there (NCCL), on a communicator of its own
--   block_cyclic.lua  the columns a rank holds (distribution =), moved by NCCL
--   triangular.lua  trsm and lu_solve's substitutions
--   seed.lua        the seed's method, on one GPU or several
--   solve_common.lua  what they share: the kernels' shapes (kernels/culua/solve.cuh),
--                   the knobs (solve.tune), views, the GEMM, small launches

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"
local lu = require "culua.catalog.lu"
local lu_devices = require("culua.catalog.lu_multi").devices
local seed = require "culua.catalog.seed"
local triangular = require "culua.catalog.triangular"
local C = cuda._catalog

local fail, check_array = core.fail, core.check_array
local kernels, grid_for, take_status, check_block, copy = S.kernels, S.grid_for, S.take_status, S.check_block, S.copy
local lu_blocked, lu_block, solve_factored = lu.lu_blocked, lu.lu_block, triangular.solve_factored
local seed_run, transpose = seed.seed_run, seed.transpose
local new_info = require("culua.catalog.shares").new_info
local ranks = require "culua.catalog.ranks"
local MAXBLOCK = S.shapes.MAXBLOCK
local square, rhs, check_inputs, pivot_verdict = S.square, S.rhs, S.check_inputs, S.pivot_verdict

local M = {}

local methods = {"lu", "seed"}
local panels = {"auto", "cluster", "fused", "columns"}

-- the knobs of every part (solve_common.lua says what each does), and the panel
-- factorization of a kind for bench/solve_profile.lua (lu_panel.lua)
M.tune = S.tune
M.panel_factor = require("culua.catalog.lu_panel").panel_factor


-- {====================================================== checks

local function check_method(fname, opts)
  return core.one_of(fname, "method", opts.method or "lu", methods)
end

local function check_panel(fname, opts)
  return core.one_of(fname, "panel", opts.panel or "auto", panels)
end

-- devices = {...} and peer: checked before the arrays (so that misuse fails alike without a
-- GPU). A list of device ordinals, each an existing device; an ordinal may repeat: each entry
-- is a share of the work, so {0, 0} runs the several-GPU path as two shares of device 0.
-- The arrays' device need not be listed: it holds A and the results, the listed ones work.
local function check_devices(fname, opts)
  core.flag(fname, opts, "peer")
  local d = opts.devices
  if d == nil then return nil end
  if type(d) ~= "table" then fail(fname, "devices must be a list of device ordinals, got %s", type(d)) end
  local count = #d
  if count == 0 then fail(fname, "devices is an empty list: give at least one device ordinal") end
  for key in pairs(d) do
    if math.type(key) ~= "integer" or key < 1 or key > count then
      fail(fname, "devices must be a list of device ordinals, got a key %s", tostring(key))
    end
  end
  local present = cuda.device_count()
  local list = {}
  for i = 1, count do
    local o = d[i]
    if math.type(o) ~= "integer" then
      fail(fname, "devices[%d] must be an integer device ordinal, got %s", i,
           type(o) == "number" and tostring(o) or type(o))
    end
    if o < 0 or o >= present then
      fail(fname, "devices[%d] is %d, but there is no device %d (%d device%s present)", i, o, o, present,
           present == 1 and "" or "s")
    end
    list[i] = o
  end
  return list
end

local function check_pivots(fname, stream, status)
  pivot_verdict(fname, take_status(status, stream))
end

-- the largest magnitude of X's n x n elements (upper: of those on and above the diagonal,
-- U's), read back and its word cleared: for the growth factor max|U| / max|A|
local function absmax(K, dev, stream, n, X, upper)
  local w = core.scratch("solve_absmax", dev, stream, 1)
  K("absmax"):launch({grid = grid_for(n, 1, dev), block = 256, stream = stream}, n, X, upper and 1 or 0, w)   -- a block a row
  local m = core.read_word(w, stream)
  w:fill(0, stream)
  return m
end

-- }======================================================


-- {====================================================== lu, lu_solve, solve

local lu_options = {"stream", "method", "block", "panel", "devices", "peer", "growth", "comm", "root", "distribution"}

-- root and distribution are comm's (ranks.lua); without it, refused
local function check_ranks_only(fname, opts)
  for _, k in ipairs{"root", "distribution"} do
    if opts[k] ~= nil then fail(fname, "%s goes with comm (lu and solve over ranks)", k) end
  end
end

-- blocked LU of A in place, on its device or spread over the listed ones; raises on a
-- bad pivot
local function factor(fname, K, dev, stream, n, nb, A, ipiv, status, pk, multi, list, peer, info, taper)
  if multi then
    pivot_verdict(fname, lu_devices(fname, dev, stream, n, nb, A.dtype, A, ipiv, pk, list, peer, info))
  else
    lu_blocked(fname, K, dev, stream, n, nb, A, ipiv, status, pk, taper, info)
    check_pivots(fname, stream, status)
  end
end

-- the devices list (checked), whether it asks for the several-GPU path (anything but
-- the arrays' device alone), and the info result
local function devices_plan(list, dev)
  local multi = list ~= nil and not (#list == 1 and list[1] == dev.ordinal)
  return multi, new_info(list or {dev.ordinal})
end

-- cuda.catalog.lu(A [, opts]) -> ipiv (int32, n, 1-based), info: P*A = L*U in place
--   opts: method ("lu" | "seed"), block (panel width 1..128), panel ("auto", the default:
--         "cluster" where the device has clusters, else "fused" | "cluster": a panel in one
--         thread-block cluster | "fused": one cooperative launch a panel | "columns": a
--         launch a column), stream,
--         devices (a list of ordinals: several GPUs), peer (false: stage through the host),
--         growth (true: measure the growth factor; two more passes, each read back)
--   info: devices (the list), shares, transfer ("local" | "peer" | "host"), pairs, why;
--         growth = max|U| / max|A| when asked; block (method lu: the panel width), and
--         narrow_columns when the default block narrowed to 64 for that many last columns
-- Over ranks (ranks.lua; every rank of the communicator calls it):
--   opts: comm (a cuda.nccl.comm, one GPU a rank: the arrays on its device), and either
--         root (the rank that holds A whole, 0 by default: A there, nil elsewhere, or an
--         array of A's n and dtype, left as it was) or distribution (a block_cyclic
--         descriptor: A is this rank's columns, n x d:columns(rank), factored in place);
--         block, panel, stream as above
--   ipiv on every rank; info: ranks, rank, shares, transfer ("nccl"), panels_by, layout ("root" |
--         "distributed"), root, block, gathered_by ("rows" | "end": root layout), moved =
--         {start =, panels =, finish =} (the bytes that left or reached this rank by NCCL)
function M.lu(A, opts)
  local fname = "lu"
  if type(opts) == "table" and opts.comm ~= nil then return ranks.lu(A, opts) end
  opts = core.options(fname, opts, lu_options)
  check_ranks_only(fname, opts)
  local growth = core.flag(fname, opts, "growth")
  local list = check_devices(fname, opts)
  local n = square(fname, "A", A)
  local dev = A.device
  local stream = core.check_stream(fname, opts.stream, dev)
  local method, pk = check_method(fname, opts), check_panel(fname, opts)
  local multi, info = devices_plan(list, dev)
  local nb, taper = lu_block(fname, opts, n, A.dtype, dev, pk, multi)
  local dt = A.dtype
  local K = kernels(dev, dt)
  local ipiv = cuda.array("int32", math.max(n, 1), {device = dev.ordinal})
  if n == 0 then
    info.growth = growth and 1.0 or nil
    return ipiv, info
  end
  local status = core.scratch("solve_status", dev, stream, 1)
  check_inputs(fname, K, dev, stream, status, "A", A, n * n)
  local amax = growth and absmax(K, dev, stream, n, A, false)
  if method == "seed" then
    local ABT = cuda.array(dt, n * n, {device = dev.ordinal})
    transpose(K, stream, n, n, A, 0, n, ABT, 0, n)
    local bad = seed_run(K, dev, stream, n, n, dt, ABT, ipiv, status, 1, multi, list, opts.peer, info)
    transpose(K, stream, n, n, ABT, 0, n, A, 0, n)
    ABT:close()
    pivot_verdict(fname, bad)
  else
    info.block = nb
    factor(fname, K, dev, stream, n, nb, A, ipiv, status, pk, multi, list, opts.peer, info, taper)
  end
  -- (a matrix that factors has a nonzero element: amax > 0)
  if growth then info.growth = absmax(K, dev, stream, n, A, true) / amax end
  return ipiv, info
end

local lu_solve_options = {"stream", "block"}

-- cuda.catalog.lu_solve(LU, ipiv, B [, opts]) -> B, overwritten with X: A X = B from lu's factors
--   opts: block (1..128), stream
function M.lu_solve(LU, ipiv, B, opts)
  local fname = "lu_solve"
  opts = core.options(fname, opts, lu_solve_options)
  local n = square(fname, "LU", LU)
  check_array(fname, "ipiv", ipiv)
  if ipiv.dtype ~= "int32" then fail(fname, "ipiv has dtype %s; expected int32", ipiv.dtype) end
  if #ipiv < n then fail(fname, "ipiv has %d elements, fewer than n = %d", #ipiv, n) end
  local k = rhs(fname, B, n, LU.dtype)
  local dev = core.same_device(fname, {"LU", "ipiv", "B"}, LU, ipiv, B)
  local stream = core.check_stream(fname, opts.stream, dev)
  local nb = check_block(fname, opts)
  if n == 0 then return B end
  local K = kernels(dev, LU.dtype)
  local status = core.scratch("solve_status", dev, stream, 1)
  check_inputs(fname, K, dev, stream, status, "B", B, n * k, ipiv, n)
  solve_factored(K, dev, stream, n, k, nb, LU, ipiv, B)
  return B
end

local solve_options = {"stream", "method", "block", "panel", "overwrite", "devices", "peer", "growth", "comm", "root",
                       "distribution"}

-- cuda.catalog.solve(A, B [, opts]) -> X, ipiv, info: A X = B. A and B are left as they were
-- (X is a new array shaped as B) unless overwrite = true: then A holds the factors and X is B.
--   opts: method ("lu" | "seed": the seed's Gauss-Jordan on [A | B], no ipiv), block, panel
--         (as lu's), stream, overwrite, devices and peer (as lu's: the factorization, or the
--         seed's elimination, spread over them; lu_solve's substitutions on the arrays' device),
--         growth (as lu's; method lu only: the seed's Gauss-Jordan keeps no U)
-- Over ranks (comm =, as lu's): with root, A and B on root (nil elsewhere), the factors
-- gathered there and lu_solve's substitutions run there: X on root, nil elsewhere; with
-- distribution, A is this rank's columns (a copy factored, unless overwrite) and B (n x k)
-- is on every rank, root's (0 by default) taken: the triangular solves run over the ranks'
-- columns and X is on every rank
function M.solve(A, B, opts)
  local fname = "solve"
  if type(opts) == "table" and opts.comm ~= nil then return ranks.solve(A, B, opts) end
  opts = core.options(fname, opts, solve_options)
  check_ranks_only(fname, opts)
  local growth = core.flag(fname, opts, "growth")
  local list = check_devices(fname, opts)
  local n = square(fname, "A", A)
  local k = rhs(fname, B, n, A.dtype)
  local dev = core.same_device(fname, {"A", "B"}, A, B)
  local stream = core.check_stream(fname, opts.stream, dev)
  local method, pk = check_method(fname, opts), check_panel(fname, opts)
  local multi, info = devices_plan(list, dev)
  local nb, taper = lu_block(fname, opts, n, A.dtype, dev, pk, multi)
  core.flag(fname, opts, "overwrite")
  if growth and method == "seed" then
    fail(fname, "growth needs method lu: the seed's Gauss-Jordan keeps no U to measure")
  end
  local dt = A.dtype
  local K = kernels(dev, dt)
  local X = B
  if not opts.overwrite then X = cuda.array(dt, #B.shape == 2 and B.shape or #B, {device = dev.ordinal}) end
  local ipiv = cuda.array("int32", math.max(n, 1), {device = dev.ordinal})
  if n == 0 then
    info.growth = growth and 1.0 or nil
    return X, ipiv, info
  end
  local status = core.scratch("solve_status", dev, stream, 1)
  check_inputs(fname, K, dev, stream, status, "A", A, n * n)
  check_inputs(fname, K, dev, stream, status, "B", B, n * k)
  local amax = growth and absmax(K, dev, stream, n, A, false)
  if method == "seed" then
    local ncols = n + k
    local ABT = cuda.array(dt, ncols * n, {device = dev.ordinal})
    transpose(K, stream, n, n, A, 0, n, ABT, 0, n)
    transpose(K, stream, n, k, B, 0, k, ABT, n * n, n)
    local bad = seed_run(K, dev, stream, n, ncols, dt, ABT, ipiv, status, 0, multi, list, opts.peer, info)
    K("seed_divide"):launch({grid = grid_for(n * k, 256, dev), block = 256, stream = stream}, n, k, ABT, X)
    ABT:close()
    pivot_verdict(fname, bad)
    return X, ipiv, info
  end
  local LU = A
  if not opts.overwrite then
    LU = cuda.array(dt, {n, n}, {device = dev.ordinal})
    copy(K, dev, stream, n * n, A, LU)
    copy(K, dev, stream, n * k, B, X)
  end
  info.block = nb
  factor(fname, K, dev, stream, n, nb, LU, ipiv, status, pk, multi, list, opts.peer, info, taper)
  if growth then info.growth = absmax(K, dev, stream, n, LU, true) / amax end
  solve_factored(K, dev, stream, n, k, nb, LU, ipiv, X)
  return X, ipiv, info
end

-- }======================================================

-- cuda.catalog.block_cyclic(n, ranks, block) -> the descriptor of columns dealt out to ranks
-- (lua/catalog/block_cyclic.lua): d:columns(rank), d:owner(j), d:column(rank, lc),
-- d:array(dtype, rank), d:fill(X, rank, body), d:scatter(A, X, comm), d:gather(X, A, comm)
M.block_cyclic = require("culua.catalog.block_cyclic").new

-- on host arrays, in double precision, in C (src/catalog.c)
M.reference = {
  -- lu(hA, hipiv) -> info: hA (n x n, float32/float64) factored in place, hipiv (int32, n) the
  -- 1-based pivots; info = 0, or the first zero pivot (1-based), as LAPACK's getrf
  lu = function (hA, hipiv) return C.ref_lu(hA, hipiv) end,
  -- lu_solve(hLU, hipiv, hB): hB (n x k, or n) overwritten with X
  lu_solve = function (hLU, hipiv, hB) return C.ref_lu_solve(hLU, hipiv, hB) end,
  -- lu_residual(hA, hX, hB) -> ||B - A X|| / (||A|| ||X||), infinity norms, in double
  lu_residual = function (hA, hX, hB) return C.ref_lu_residual(hA, hX, hB) end,
}

M.info = {
  methods = methods,
  dtypes = {"float32", "float64"},
  knobs = {block = "panel width 1.." .. MAXBLOCK .. " (default: 64; with the cluster panel 128 from n = 8192 in float32, from n = 12288 in float64)",
           panel = "auto (cluster where the device has thread-block clusters, else fused; the default) | cluster (a panel in one cluster, its rows in shared memory) | fused (one cooperative launch a panel) | columns (a launch a column)",
           devices = "a list of device ordinals (repeats: shares of one GPU); peer = false stages through the host",
           comm = "a cuda.nccl.comm: over ranks, one GPU a rank; root = the rank holding A, or distribution = a block_cyclic descriptor"},
  default = "lu",
}

return M
