-- culua.catalog.solve: cuda.catalog.lu, lu_solve and solve: LU factorization
-- with partial pivoting (LAPACK's getrf, on the GPU) and the solves with it,
-- on row-major float32 and float64 matrices (kernels/solve.cu).
--
-- A matrix is what culua's 2-D arrays are: row-major, A[i][j] at i*n + j, so
-- "row i" is row i of A as printed. LAPACK is column-major; the factors here
-- are those of A itself (P*A = L*U, L unit lower, U upper, both in A), and the
-- pivots are LAPACK's ipiv, 1-based: at step i, row i was swapped with row
-- ipiv[i].

local cuda = require "cuda"
local core = require "culua.catalog.core"
local C = cuda._catalog

local fail, ceil_div, check_array = core.fail, core.ceil_div, core.check_array
local matmul = require("culua.catalog.matmul").matmul

local M = {}

local methods = {"lu", "seed"}
local panels = {"fused", "columns"}
local DEFAULT_BLOCK = 64        -- panel width: not yet measured (bench/solve.lua sweeps it)
local MAXBLOCK = 128            -- kernels/solve.cu's MAXBLOCK
local PANEL_THREADS = 256       -- kernels/solve.cu's PANEL_WARPS * 32
local PANEL_SLOT = 2 + MAXBLOCK -- kernels/solve.cu's PANEL_SLOT
local BARRIER_WORDS = 2176      -- culua/barrier.cuh's CULUA_BARRIER_WORDS

-- scratch (core.scratch): the status word (first bad pivot, or bad input), zero
-- between calls; the column panel kernel's ticket counter, zero between launches;
-- the fused panel's grid barrier, zero between launches; the panel kernels'
-- per-block candidates; the permutation and the gathered right-hand sides of lu_solve
core.scratch_kind("solve_status", "int32", true)
core.scratch_kind("solve_counter", "uint32", true)
core.scratch_kind("solve_barrier", "uint32", true)
core.scratch_kind("solve_partial", "float64")
core.scratch_kind("solve_perm", "int32")
core.scratch_kind("solve_rhs_float32", "float32")
core.scratch_kind("solve_rhs_float64", "float64")


-- {====================================================== checks

local function tname(dt) return dt == "float32" and "f32" or "f64" end

-- n of a square matrix: a 2-D n x n array, or a 1-D array (a view) of n*n elements
local function square(fname, what, A)
  check_array(fname, what, A)
  core.dtype_of(fname, what, A, {"float32", "float64"})
  if A.pitched then fail(fname, "%s is pitched: the catalog expects packed arrays", what) end
  local shape = A.shape
  if #shape == 2 then
    if shape[1] ~= shape[2] then fail(fname, "%s must be square, got %dx%d", what, shape[1], shape[2]) end
    return shape[1]
  end
  local n = math.tointeger(math.floor(math.sqrt(#A) + 0.5))
  if n * n ~= #A then fail(fname, "%s is 1-D with %d elements, not a square number (n*n)", what, #A) end
  return n
end

-- k, the right-hand sides of B (n x k, or a vector / 1-D array of n*k elements)
local function rhs(fname, B, n, dt)
  check_array(fname, "B", B)
  if B.dtype ~= dt then fail(fname, "B has dtype %s but A has %s", B.dtype, dt) end
  if B.pitched then fail(fname, "B is pitched: the catalog expects packed arrays") end
  local shape = B.shape
  if #shape == 2 then
    if shape[1] ~= n then fail(fname, "B is %dx%d but A is %dx%d: B must have %d rows", shape[1], shape[2], n, n, n) end
    return shape[2]
  end
  if #B == 0 or #B % n ~= 0 then
    fail(fname, "B is 1-D with %d elements, not a multiple of n = %d", #B, n)
  end
  return #B // n
end

local function check_block(fname, opts)
  local nb = opts.block or DEFAULT_BLOCK
  if math.type(nb) ~= "integer" or nb < 1 or nb > MAXBLOCK then
    fail(fname, "block must be an integer 1..%d, got %s", MAXBLOCK, tostring(nb))
  end
  return nb
end

local function check_method(fname, opts)
  return core.one_of(fname, "method", opts.method or "lu", methods)
end

local function check_panel(fname, opts)
  return core.one_of(fname, "panel", opts.panel or "fused", panels)
end

-- devices = {...}: the multi-GPU path is not written yet; one device, the arrays', is accepted
local function check_devices(fname, opts, dev)
  local d = opts.devices
  if d == nil then return end
  if type(d) ~= "table" then fail(fname, "devices must be a list of device ordinals, got %s", type(d)) end
  if #d > 1 then fail(fname, "devices: several GPUs are not yet supported (got %d)", #d) end
  if #d == 1 and d[1] ~= dev.ordinal then
    fail(fname, "devices = {%s} but the arrays are on device %d", tostring(d[1]), dev.ordinal)
  end
end

-- }======================================================


-- {====================================================== launches

local function kernels(dev, dt)
  local t = tname(dt)
  return function (name, typed)
    return core.kernel("solve", "culua_solve_" .. name .. (typed == false and "" or "_" .. t), nil, dev)
  end
end

local function grid_for(count, threads, dev)
  return math.max(1, math.min(ceil_div(count, threads), core.sm_count(dev) * 8))
end

-- raise unless the arrays are finite: one pass, read back (so that A is untouched when it raises)
local function check_finite(fname, K, dev, stream, status, what, X, count)
  K("check"):launch({grid = grid_for(count, 256, dev), block = 256, stream = stream}, count, X, status)
  if core.read_word(status, stream) ~= 0 then
    status:fill(0, stream)
    fail(fname, "%s contains NaN or inf", what)
  end
end

-- the status word after a factorization: raise on a zero or non-finite pivot
local function check_pivots(fname, stream, status)
  local s = core.read_word(status, stream)
  if s == 0 then return end
  status:fill(0, stream)
  if s > 0 then fail(fname, "the matrix is singular: pivot %d is zero", s) end
  fail(fname, "the factorization overflowed: pivot %d is not finite", -s)
end

-- the view of X's elements off + 1 .. off + count, kept while X lives (the table's keys
-- are weak): lu_solve, and each factorization of one matrix, ask for the same ones again
local views = setmetatable({}, {__mode = "k"})
local function view(X, off, count)
  local byoff = views[X]
  if not byoff then byoff = {}; views[X] = byoff end
  local bycount = byoff[off]
  if not bycount then bycount = {}; byoff[off] = bycount end
  local v = bycount[count]
  if not v then v = X:view(off + 1, count); bycount[count] = v end
  return v
end

-- C (M x N) -= A (M x K) * B (K x N), each an array with an element offset and a leading
-- dimension: cuda.catalog.matmul's fast variant (on an H100, float32 goes through TMA when
-- the blocks start and are strided on 16 bytes) on views that start at the offsets and
-- end with the blocks' last elements. K and dt are unused (the family's own GEMM took them).
local function gemm_sub(K, dt, stream, m, nn, k, A, aoff, lda, B, boff, ldb, Cm, coff, ldc)
  if m <= 0 or nn <= 0 or k <= 0 then return end
  matmul(view(A, aoff, (m - 1) * lda + k), view(B, boff, (k - 1) * ldb + nn), view(Cm, coff, (m - 1) * ldc + nn),
         {variant = "fast", m = m, n = nn, k = k, lda = lda, ldb = ldb, ldc = ldc, alpha = -1, beta = 1, stream = stream})
end

local function trsm(K, which, stream, jb, ncols, Tr, toff, ldt, X, xoff, ldx)
  if ncols <= 0 then return end
  K("trsm_" .. which):launch({grid = ceil_div(ncols, 32), block = {32, 8}, stream = stream},
                             jb, ncols, Tr, toff, ldt, X, xoff, ldx)
end

-- panel = "columns": a launch a column of the panel (and one for the first search),
-- the blocks' pivot candidates combined by the last block to finish
local function panel_columns(K, dev, stream, n, A, ipiv, status)
  local cap = core.sm_count(dev) * 4
  local part = core.scratch("solve_partial", dev, stream, 2 * cap)
  local counter = core.scratch("solve_counter", dev, stream, 1)
  local panel = K("panel")
  return function (j0, jb)
    local jend = j0 + jb
    -- ju = j0 - 1: only the search of column j0; then each column's elimination and the next one's search
    for ju = j0 - 1, jend - 1 do
      local search = ju + 1 < jend
      local rows = n - (ju + 1)
      if search or rows > 0 then
        panel:launch({grid = math.min(ceil_div(rows, 8), cap), block = 256, stream = stream},
                     n, j0, jb, ju, search and 1 or 0, A, ipiv, status, part, counter)
      end
    end
  end
end

-- the fused panel's most blocks: one a multiprocessor at most (a flat grid barrier,
-- cheapest there), fewer if they cannot all be resident (kept a kernel)
local fused_cap = setmetatable({}, {__mode = "k"})

-- panel = "fused": the whole panel in one cooperative launch, a grid barrier a
-- column; about 16 rows a block (a small panel takes one block: no barrier waits)
local function panel_fused(K, dev, stream, n, A, ipiv, status)
  local k = K("panel_fused")
  local cap = fused_cap[k]
  if not cap then
    cap = math.max(1, math.min(core.sm_count(dev), k:max_cooperative_grid(PANEL_THREADS)))
    fused_cap[k] = cap
  end
  local part = core.scratch("solve_partial", dev, stream, 2 * (cap + 1) * PANEL_SLOT)
  local bar = core.scratch("solve_barrier", dev, stream, BARRIER_WORDS)
  return function (j0, jb)
    local grid = math.min(cap, ceil_div(n - j0, 16))
    k:launch({grid = grid, block = PANEL_THREADS, stream = stream, cooperative = true},
             n, j0, jb, A, ipiv, status, part, bar)
  end
end

-- blocked right-looking LU of the n x n A in place, pivots into ipiv (0-based rows, 1-based values)
local function lu_blocked(K, dev, stream, n, nb, A, ipiv, status, panel_kind)
  local factor = (panel_kind == "columns" and panel_columns or panel_fused)(K, dev, stream, n, A, ipiv, status)
  local laswp = K("laswp")
  for j0 = 0, n - 1, nb do
    local jb = math.min(nb, n - j0)
    local jend = j0 + jb
    factor(j0, jb)
    if n > jb then
      laswp:launch({grid = grid_for(n - jb, 256, dev), block = 256, stream = stream},
                   n, n, j0, jend, j0, jend, ipiv, A)
    end
    if jend < n then
      local rest = n - jend
      trsm(K, "lower", stream, jb, rest, A, j0 * n + j0, n, A, j0 * n + jend, n)
      gemm_sub(K, A.dtype, stream, rest, rest, jb, A, jend * n + j0, n, A, j0 * n + jend, n, A, jend * n + jend, n)
    end
  end
end

-- the seed's elimination on ABT ((n + k) x n, the transposed augmented matrix): lu = 1 keeps
-- the multipliers below the pivots (getrf unblocked), lu = 0 is Gauss-Jordan
local function seed_eliminate(K, dev, stream, n, ncols, ABT, ipiv, status, lu, mult, prow)
  local pivot, extract, elim = K("seed_pivot"), K("seed_extract"), K("seed_eliminate")
  for p = 0, n - 1 do
    pivot:launch({grid = 1, block = 1024, stream = stream}, n, p, lu, ABT, ipiv, mult, status)
    extract:launch({grid = grid_for(ncols, 256, dev), block = 256, stream = stream}, n, ncols, p, ipiv, ABT, prow)
    local lo = lu == 1 and p + 1 or 0
    if n - lo > 0 and ncols - p > 0 then
      elim:launch({grid = {ceil_div(n - lo, 256), math.min(ncols - p, 65535)}, block = 256, stream = stream},
                  n, ncols, p, lu, ABT, mult, prow)
    end
  end
end

local function transpose(K, stream, rows, cols, src, soff, lds, dst, doff, ldd)
  K("transpose"):launch({grid = {ceil_div(cols, 32), ceil_div(rows, 32)}, block = {32, 8}, stream = stream},
                        rows, cols, src, soff, lds, dst, doff, ldd)
end

local function copy(K, dev, stream, count, src, dst)
  K("copy"):launch({grid = grid_for(count, 256, dev), block = 256, stream = stream}, count, src, dst)
end

-- }======================================================


-- {====================================================== lu, lu_solve, solve

local lu_options = {"stream", "method", "block", "panel", "devices"}

-- cuda.catalog.lu(A [, opts]) -> ipiv (int32, n, 1-based): P*A = L*U in place
--   opts: method ("lu" | "seed"), block (panel width 1..128), panel ("fused": one
--         launch a panel, the default | "columns": a launch a column), stream, devices
function M.lu(A, opts)
  local fname = "lu"
  opts = core.options(fname, opts, lu_options)
  local n = square(fname, "A", A)
  local dev = A.device
  local stream = core.check_stream(fname, opts.stream, dev)
  local method, nb, pk = check_method(fname, opts), check_block(fname, opts), check_panel(fname, opts)
  check_devices(fname, opts, dev)
  local dt = A.dtype
  local K = kernels(dev, dt)
  local ipiv = cuda.array("int32", math.max(n, 1), {device = dev.ordinal})
  if n == 0 then return ipiv end
  local status = core.scratch("solve_status", dev, stream, 1)
  check_finite(fname, K, dev, stream, status, "A", A, n * n)
  if method == "seed" then
    local ABT = cuda.array(dt, n * n, {device = dev.ordinal})
    local mult, prow = cuda.array(dt, n, {device = dev.ordinal}), cuda.array(dt, n, {device = dev.ordinal})
    transpose(K, stream, n, n, A, 0, n, ABT, 0, n)
    seed_eliminate(K, dev, stream, n, n, ABT, ipiv, status, 1, mult, prow)
    transpose(K, stream, n, n, ABT, 0, n, A, 0, n)
  else
    lu_blocked(K, dev, stream, n, nb, A, ipiv, status, pk)
  end
  check_pivots(fname, stream, status)
  return ipiv
end

-- permute B's rows by the pivots, then the two blocked triangular solves
local function solve_factored(K, dev, stream, n, k, nb, LU, ipiv, B)
  local dt = LU.dtype
  local perm = core.scratch("solve_perm", dev, stream, n)
  local pk = K("permutation", false)
  local shared = n * 4 <= 96 * 1024
  if shared and n * 4 > 48 * 1024 then
    local st = core.device_state("solve_perm_shared", dev)
    if not st[pk] then pk:set_max_dynamic_shared(96 * 1024); st[pk] = true end
  end
  pk:launch({grid = 1, block = 1024, shared = shared and n * 4 or 0, stream = stream}, n, ipiv, perm, shared and 1 or 0)
  local W = core.scratch("solve_rhs_" .. dt, dev, stream, n * k)
  K("gather"):launch({grid = grid_for(n * k, 256, dev), block = 256, stream = stream}, n, k, perm, B, W)
  copy(K, dev, stream, n * k, W, B)
  -- L y = P b: each block row solved, then taken from the rows below
  for i0 = 0, n - 1, nb do
    local jb = math.min(nb, n - i0)
    trsm(K, "lower", stream, jb, k, LU, i0 * n + i0, n, B, i0 * k, k)
    gemm_sub(K, dt, stream, n - i0 - jb, k, jb, LU, (i0 + jb) * n + i0, n, B, i0 * k, k, B, (i0 + jb) * k, k)
  end
  -- U x = y, from the last block row up
  local i0 = ((n - 1) // nb) * nb
  while i0 >= 0 do
    local jb = math.min(nb, n - i0)
    trsm(K, "upper", stream, jb, k, LU, i0 * n + i0, n, B, i0 * k, k)
    gemm_sub(K, dt, stream, i0, k, jb, LU, i0, n, B, i0 * k, k, B, 0, k)
    i0 = i0 - nb
  end
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
  check_finite(fname, K, dev, stream, status, "B", B, n * k)
  solve_factored(K, dev, stream, n, k, nb, LU, ipiv, B)
  return B
end

local solve_options = {"stream", "method", "block", "panel", "overwrite", "devices"}

-- cuda.catalog.solve(A, B [, opts]) -> X, ipiv: A X = B. A and B are left as they were (X is a
-- new array shaped as B) unless overwrite = true: then A holds the factors and X is B.
--   opts: method ("lu" | "seed": the seed's Gauss-Jordan on [A | B], no ipiv), block, panel
--         (as lu's), stream, overwrite, devices
function M.solve(A, B, opts)
  local fname = "solve"
  opts = core.options(fname, opts, solve_options)
  local n = square(fname, "A", A)
  local k = rhs(fname, B, n, A.dtype)
  local dev = core.same_device(fname, {"A", "B"}, A, B)
  local stream = core.check_stream(fname, opts.stream, dev)
  local method, nb, pk = check_method(fname, opts), check_block(fname, opts), check_panel(fname, opts)
  check_devices(fname, opts, dev)
  if opts.overwrite ~= nil and type(opts.overwrite) ~= "boolean" then
    fail(fname, "overwrite must be a boolean, got %s", type(opts.overwrite))
  end
  local dt = A.dtype
  local K = kernels(dev, dt)
  local X = B
  if not opts.overwrite then X = cuda.array(dt, #B.shape == 2 and B.shape or #B, {device = dev.ordinal}) end
  local ipiv = cuda.array("int32", math.max(n, 1), {device = dev.ordinal})
  if n == 0 then return X, ipiv end
  local status = core.scratch("solve_status", dev, stream, 1)
  check_finite(fname, K, dev, stream, status, "A", A, n * n)
  check_finite(fname, K, dev, stream, status, "B", B, n * k)
  if method == "seed" then
    local ncols = n + k
    local ABT = cuda.array(dt, ncols * n, {device = dev.ordinal})
    local mult, prow = cuda.array(dt, n, {device = dev.ordinal}), cuda.array(dt, ncols, {device = dev.ordinal})
    transpose(K, stream, n, n, A, 0, n, ABT, 0, n)
    transpose(K, stream, n, k, B, 0, k, ABT, n * n, n)
    seed_eliminate(K, dev, stream, n, ncols, ABT, ipiv, status, 0, mult, prow)
    K("seed_divide"):launch({grid = grid_for(n * k, 256, dev), block = 256, stream = stream}, n, k, ABT, X)
    check_pivots(fname, stream, status)
    return X, ipiv
  end
  local LU = A
  if not opts.overwrite then
    LU = cuda.array(dt, {n, n}, {device = dev.ordinal})
    copy(K, dev, stream, n * n, A, LU)
    copy(K, dev, stream, n * k, B, X)
  end
  lu_blocked(K, dev, stream, n, nb, LU, ipiv, status, pk)
  check_pivots(fname, stream, status)
  solve_factored(K, dev, stream, n, k, nb, LU, ipiv, X)
  return X, ipiv
end

-- }======================================================

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
  knobs = {block = "panel width 1.." .. MAXBLOCK .. " (default " .. DEFAULT_BLOCK .. ")",
           panel = "fused (one launch a panel, the default) | columns (a launch a column)",
           devices = "one device only, for now"},
  default = "lu",
}

return M
