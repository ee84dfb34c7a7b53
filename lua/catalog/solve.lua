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
local panels = {"auto", "cluster", "fused", "columns"}
local DEFAULT_BLOCK = 64        -- panel width where lu_block does not say otherwise
local MAXBLOCK = 128            -- kernels/solve.cu's MAXBLOCK
local PANEL_THREADS = 256       -- kernels/solve.cu's PANEL_WARPS * 32
local CPANEL_THREADS = 512      -- kernels/solve.cu's CPANEL_THREADS
local CLUSTER_MAX = 16          -- the largest cluster (non-portable; 8 is portable)
local PANEL_SLOT = 2 + MAXBLOCK -- kernels/solve.cu's PANEL_SLOT
local BARRIER_WORDS = 2176      -- culua/barrier.cuh's CULUA_BARRIER_WORDS
local TRSV_ROWS = 64            -- kernels/solve.cu's TRSV_ROWS (rows a block of the substitutions)
local TRSV_THREADS = 256        -- kernels/solve.cu's TRSV_THREADS
local TRSV_COLS = 4             -- kernels/solve.cu's TRSV_COLS (right-hand sides a column group)
local TRSV_SYNC = 32            -- kernels/solve.cu's TRSV_SYNC (words of sync a column group)
local NSTEP_ROWS = 64           -- kernels/solve.cu's NSTEP_ROWS (rows a block of narrow_step)
local NSTEP_US = 72             -- and NSTEP_US (its U's row stride)

-- scratch (core.scratch): the status word (first bad pivot, or bad input), zero
-- between calls; the column panel kernel's ticket counter, zero between launches;
-- the fused panel's grid barrier, zero between launches; the panel kernels'
-- per-block candidates; the permutation and the gathered right-hand sides of lu_solve;
-- the substitutions' tickets and counters, zero between launches
core.scratch_kind("solve_status", "int32", true)
core.scratch_kind("solve_counter", "uint32", true)
core.scratch_kind("solve_barrier", "uint32", true)
core.scratch_kind("solve_partial", "float64")
core.scratch_kind("solve_perm", "int32")
core.scratch_kind("solve_rhs_float32", "float32")
core.scratch_kind("solve_rhs_float64", "float64")
core.scratch_kind("solve_trsv", "uint32", true)
core.scratch_kind("solve_inv_float32", "float32")     -- trsm_product's inverse triangle
core.scratch_kind("solve_inv_float64", "float64")
core.scratch_kind("solve_aside_float32", "float32")   -- and its copy of X
core.scratch_kind("solve_aside_float64", "float64")
core.scratch_kind("solve_held_float32", "float32")    -- narrow_step's rows that go up
core.scratch_kind("solve_held_float64", "float64")
core.scratch_kind("solve_ticket", "uint32", true)      -- and its tickets, a column group
core.scratch_kind("solve_absmax", "float64", true)     -- absmax's word (a double's bits)


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

-- opts.block, else dflt (lu's: lu_block), else DEFAULT_BLOCK
local function check_block(fname, opts, dflt)
  local nb = opts.block or dflt or DEFAULT_BLOCK
  if math.type(nb) ~= "integer" or nb < 1 or nb > MAXBLOCK then
    fail(fname, "block must be an integer 1..%d, got %s", MAXBLOCK, tostring(nb))
  end
  return nb
end

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

-- }======================================================


-- {====================================================== launches

-- the family's kernel files (kernels/<file>.cu, a file a part), and the file of each
-- kernel, read from their instances: an `extern "C" __global__` line names
-- culua_solve_<name>_##t (or culua_solve_<name>, untyped). So a kernel moved between
-- files needs no change here. Read on the first launch, once a state.
local FILES = {"solve", "lu", "lu_panel", "lu_multi", "triangular", "seed"}
local file_of
local function kernel_file(name)
  if not file_of then
    local found = {}
    for _, f in ipairs(FILES) do
      for line in C.source(f):gmatch("[^\n]*__global__[^\n]*") do
        local k = line:match("culua_solve_([%w_]+)")
        if k then
          k = k:gsub("_$", "")
          assert(found[k] == nil or found[k] == f, "culua_solve_" .. k .. " in two kernel files")
          found[k] = f
        end
      end
    end
    file_of = found
  end
  return file_of[name] or error("cuda.catalog: no solve kernel " .. name, 2)
end

local function kernels(dev, dt)
  local t = tname(dt)
  return function (name, typed)
    return core.kernel(kernel_file(name), "culua_solve_" .. name .. (typed == false and "" or "_" .. t), nil, dev)
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
local function pivot_verdict(fname, s)
  if s == 0 then return end
  if s > 0 then fail(fname, "the matrix is singular: pivot %d is zero", s) end
  fail(fname, "the factorization overflowed: pivot %d is not finite", -s)
end

-- a status word read back (the stream waited for) and cleared for the next call
local function take_status(status, stream)
  local s = core.read_word(status, stream)
  if s ~= 0 then status:fill(0, stream) end
  return s
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
-- dimension: cuda.catalog.matmul's default variant (float32: fast, through TMA on an H100 when
-- the blocks start and are strided on 16 bytes; float64: dmma, on tensor cores) on views that
-- start at the offsets and end with the blocks' last elements. K and dt are unused (the
-- family's own GEMM took them).
local function gemm_sub(K, dt, stream, m, nn, k, A, aoff, lda, B, boff, ldb, Cm, coff, ldc)
  if m <= 0 or nn <= 0 or k <= 0 then return end
  matmul(view(A, aoff, (m - 1) * lda + k), view(B, boff, (k - 1) * ldb + nn), view(Cm, coff, (m - 1) * ldc + nn),
         {m = m, n = nn, k = k, lda = lda, ldb = ldb, ldc = ldc, alpha = -1, beta = 1, stream = stream})
end

local function esize(dt) return dt == "float32" and 4 or 8 end

-- X (jb x ncols) = inv(Tr) * X for Tr's unit lower (which = "lower") or upper triangle;
-- the kernel keeps the triangle in the launch's shared memory (up to MAXBLOCK^2 elements)
local function trsm(K, which, stream, jb, ncols, Tr, toff, ldt, X, xoff, ldx)
  if ncols <= 0 then return end
  local k, size = K("trsm_" .. which), esize(X.dtype)
  core.allow_shared(k, MAXBLOCK * MAXBLOCK * size)
  k:launch({grid = ceil_div(ncols, 32), block = {32, 8}, shared = jb * jb * size, stream = stream},
           jb, ncols, Tr, toff, ldt, X, xoff, ldx)
end

-- X (jb x ncols) = inv(Tr) * X for Tr's unit lower triangle as a product, LU's full-width
-- block row of U: Tr's inverse (trsm's kernel on the identity, jb x jb), X copied aside, and
-- one matmul (float64: on tensor cores). MAGMA solves with inverted diagonal blocks too; the
-- inverse of a unit lower triangle whose entries are at most 1 in magnitude (partial
-- pivoting) can grow with jb in contrived cases, and t/030's residuals check ours. Where
-- trsm_how says: float64 from 2048 columns on compute capability 8.0 and later (M.tune.trsm:
-- "kernel" or "product" forces one). trsm's kernel takes a column of X a thread, through
-- FFMA: float64 LU at n = 16384 on an H100 took 175.9 ms with it, 170.3 with the product.
local function trsm_product(K, dev, stream, jb, ncols, Tr, toff, ldt, X, xoff, ldx)
  if ncols <= 0 then return end
  local dt = X.dtype
  local inv = core.scratch("solve_inv_" .. dt, dev, stream, jb * jb)
  local aside = core.scratch("solve_aside_" .. dt, dev, stream, jb * ncols)
  K("eye"):launch({grid = grid_for(jb * jb, 256, dev), block = 256, stream = stream}, jb, inv)
  trsm(K, "lower", stream, jb, jb, Tr, toff, ldt, inv, 0, jb)
  K("copy2d"):launch({grid = grid_for(jb * ncols, 256, dev), block = 256, stream = stream},
                     jb, ncols, X, xoff, ldx, aside, 0, ncols)
  matmul(inv, aside, view(X, xoff, (jb - 1) * ldx + ncols),
         {m = jb, n = ncols, k = jb, lda = jb, ldb = ncols, ldc = ldx, stream = stream})
end

local function trsm_lower(K, _, stream, ...) return trsm(K, "lower", stream, ...) end

local function trsm_how(dev, dt, ncols)
  local how = M.tune.trsm
  if how == "product" or (how == nil and core.dmma_for(dt, dev) and ncols >= 2048) then
    return trsm_product
  end
  return trsm_lower
end

-- C (m x nc) -= L (m x kb) * U (kb x nc) for nc, kb <= MAXBLOCK: the update of the next
-- panel's columns when the look-ahead's step takes three launches (M.tune.narrow "kernel"
-- or "matmul", or where narrow_step's shared memory does not fit). By the kernel of its own (kernels/solve.cu
-- says why not matmul's float32 tiles), except in float64 where matmul takes tensor cores
-- (dmma, compute capability 8.0 on): on an H100 (session 13) float64 LU took 49.74 ms at
-- n = 8192 so, 50.33 by the kernel; at 16384, 198.57 against 200.12. (narrow_step, one
-- launch, took 43.9 and 173.4 in session 16.)
local function update_narrow(K, stream, m, nc, kb, L, loff, ldl, U, uoff, ldu, Cm, coff, ldc)
  if m <= 0 or nc <= 0 or kb <= 0 then return end
  local how = M.tune.narrow
  if how == "matmul" or (how == nil and core.dmma_for(Cm.dtype, Cm.device)) then
    return gemm_sub(K, Cm.dtype, stream, m, nc, kb, L, loff, ldl, U, uoff, ldu, Cm, coff, ldc)
  end
  K("update_narrow"):launch({grid = {ceil_div(m, 64), ceil_div(nc, 64)}, block = 256, stream = stream},
                            m, nc, kb, L, loff, ldl, U, uoff, ldu, Cm, coff, ldc)
end

-- whether lu's chain kernel k (the cluster panel, narrow_step, laswp) is launched as a
-- programmatic dependent (culua_dep_wait and culua_dep_release, kernels/culua/common.cuh): each may be
-- scheduled while the kernel before it on its stream finishes, where k.programmatic says
-- its device and driver can (compute capability 9.0, cuLaunchKernelEx); M.tune.programmatic
-- = false: not
local function dependent(k)
  return k.programmatic and M.tune.programmatic ~= false
end

-- the dynamic shared memory kernel k (of device dev) may ask for: the device's opt-in
-- limit a block less k's static shared memory, asked of the driver once a kernel
local room_of = setmetatable({}, {__mode = "k"})
local function shared_room(k, dev)
  local room = room_of[k]
  if not room then
    room = dev:attribute("max_shared_memory_per_block_optin") - k:attributes().shared_size_bytes
    room_of[k] = room
  end
  return room
end

-- the swaps of pivots i0..i0+kb-1 on A's columns [c0, c0 + nc) (nc <= MAXBLOCK), their
-- block row of U and the update of the rows below, in one launch (kernels/solve.cu says how
-- its blocks keep out of each other's way). The panel's rows i0.. (the triangle, then L21)
-- are at L's element loff, a row every ldl. Its shared memory holds the triangle and U:
-- false when that is more than the device gives a block (kb = 128 in float64 takes 201 KiB;
-- an H100 gives 227), when M.tune.narrow asks for three launches, or when no rows lie below
-- the panel (its grid would be empty, the swaps and U still owed), and the caller takes the
-- three launches; true when done (or nothing to do)
local function narrow_step(K, dev, stream, n, ld, i0, kb, c0, nc, A, ipiv, L, loff, ldl)
  if M.tune.narrow ~= nil and M.tune.narrow ~= "step" then return false end
  if nc <= 0 or kb <= 0 then return true end
  if n - i0 - kb <= 0 then return false end
  local k, size = K("narrow_step"), esize(A.dtype)
  local bytes = (kb * (kb + 1) + kb * NSTEP_US) * size
  if bytes > shared_room(k, dev) then return false end
  core.allow_shared(k, bytes)
  local held = core.scratch("solve_held_" .. A.dtype, dev, stream, kb * nc)
  local ticket = core.scratch("solve_ticket", dev, stream, ceil_div(MAXBLOCK, 64))
  k:launch({grid = {ceil_div(n - i0 - kb, NSTEP_ROWS), ceil_div(nc, 64)}, block = 256, shared = bytes, stream = stream,
            programmatic = dependent(k)},
           n, i0, kb, L, loff, ldl, c0, nc, A, ld, ipiv, held, ticket)
  return true
end

-- the swaps of pivots i0..i1-1 on the columns [0, ncols) of X (leading dimension ld) outside
-- [lo, hi): a block composes them once and moves 128 bytes of each row a turn (SWAP_COLS)
local function swaps(K, dev, stream, ncols, ld, lo, hi, i0, i1, ipiv, X)
  local width = ncols - (hi - lo)
  if width <= 0 or i1 <= i0 then return end
  local k = K("laswp")
  k:launch({grid = grid_for(width, 128 // esize(X.dtype), dev), block = 256, stream = stream,
            programmatic = dependent(k)},
           ncols, ld, lo, hi, i0, i1, ipiv, X)
end

-- the same on the columns [c0, c1) alone of the n rows of A (leading dimension ld)
local function column_swaps(K, dev, stream, n, ld, c0, c1, i0, i1, ipiv, A)
  swaps(K, dev, stream, c1 - c0, ld, 0, 0, i0, i1, ipiv, view(A, c0, (n - 1) * ld + (c1 - c0)))
end

-- the look-ahead's step between panels (one GPU's and the several-GPU LU's): narrow_step,
-- or where it says false the three launches, the swaps, the block row of U and the update
-- of the rows below by update_narrow (L21 follows the triangle in L: row i0 + kb at loff + kb ldl)
local function lookahead_step(K, dev, stream, n, ld, i0, kb, c0, nc, A, ipiv, L, loff, ldl)
  if narrow_step(K, dev, stream, n, ld, i0, kb, c0, nc, A, ipiv, L, loff, ldl) then return end
  local i1 = i0 + kb
  column_swaps(K, dev, stream, n, ld, c0, c0 + nc, i0, i1, ipiv, A)
  trsm(K, "lower", stream, kb, nc, L, loff, ldl, A, i0 * ld + c0, ld)
  update_narrow(K, stream, n - i1, nc, kb, L, loff + kb * ldl, ldl, A, i0 * ld + c0, ld, A, i1 * ld + c0, ld)
end

-- panel = "columns": a launch a column of the panel (and one for the first search),
-- the blocks' pivot candidates combined by the last block to finish
-- (A's leading dimension is ld, n by default; column c of the panel is at c + coff in its rows)
local function panel_columns(K, dev, stream, n, A, ipiv, status, ld)
  local cap = core.sm_count(dev) * 4
  local part = core.scratch("solve_partial", dev, stream, 2 * cap)
  local counter = core.scratch("solve_counter", dev, stream, 1)
  local panel = K("panel")
  ld = ld or n
  return function (j0, jb, coff)
    coff = coff or 0
    local jend = j0 + jb
    -- ju = j0 - 1: only the search of column j0; then each column's elimination and the next one's search
    for ju = j0 - 1, jend - 1 do
      local search = ju + 1 < jend
      local rows = n - (ju + 1)
      if search or rows > 0 then
        panel:launch({grid = math.min(ceil_div(rows, 8), cap), block = 256, stream = stream},
                     n, j0, jb, ju, search and 1 or 0, A, ld, coff, ipiv, status, part, counter)
      end
    end
  end
end

-- the fused panel's most blocks: one a multiprocessor at most (a flat grid barrier,
-- cheapest there), fewer if they cannot all be resident; and for the kernel that keeps
-- its rows in shared memory, the bytes a block may take and its most blocks with them
-- (kept a kernel)
local fused_cap = setmetatable({}, {__mode = "k"})
local kept_fit = setmetatable({}, {__mode = "k"})

local function kept_limits(kk, dev)
  local fit = kept_fit[kk]
  if not fit then
    local room = shared_room(kk, dev)
    kk:set_max_dynamic_shared(room)
    fit = {room = room, cap = kk:max_cooperative_grid(PANEL_THREADS, room)}
    kept_fit[kk] = fit
  end
  return fit
end

-- panel = "fused": the whole panel in one cooperative launch, a grid barrier a
-- column; about 16 rows a block (a small panel takes one block: no barrier waits).
-- Each warp keeps its rows in shared memory when they fit (M.tune.fused_keep: false
-- leaves them in A)
local function panel_fused(K, dev, stream, n, A, ipiv, status, ld)
  local k, kk = K("panel_fused"), K("panel_fused_kept")
  ld = ld or n
  local cap = fused_cap[k]
  if not cap then
    cap = math.max(1, math.min(core.sm_count(dev), k:max_cooperative_grid(PANEL_THREADS)))
    fused_cap[k] = cap
  end
  local fit = kept_limits(kk, dev)
  local size, warps = esize(A.dtype), PANEL_THREADS // 32
  local part = core.scratch("solve_partial", dev, stream, 2 * (cap + 1) * PANEL_SLOT)
  local bar = core.scratch("solve_barrier", dev, stream, BARRIER_WORDS)
  return function (j0, jb, coff)
    local m = n - j0
    if M.tune.fused_keep ~= false then
      -- about M.tune.fused_rows rows a block, more blocks where a block's rows would not fit
      local most = fit.room // (warps * jb * size)   -- rows a warp can keep
      local grid = math.min(cap, fit.cap, math.max(ceil_div(m, M.tune.fused_rows), ceil_div(m, warps * math.max(most, 1))))
      local rows = ceil_div(m, grid * warps)           -- the most rows a warp has
      if rows <= most then
        kk:launch({grid = grid, block = PANEL_THREADS, stream = stream, cooperative = true, shared = warps * rows * jb * size},
                  n, j0, jb, A, ld, coff or 0, ipiv, status, part, bar, rows)
        return
      end
    end
    k:launch({grid = math.min(cap, ceil_div(m, 16)), block = PANEL_THREADS, stream = stream, cooperative = true},
             n, j0, jb, A, ld, coff or 0, ipiv, status, part, bar)
  end
end

-- the cluster panel's limits on a device, per kernel (dtype): the largest cluster that
-- fits with every block's shared memory at its most, and the bytes of rows a block
-- keeps; false where clusters cannot run (before compute capability 9.0, or a driver
-- without cuLaunchKernelEx)
local cluster_limits = setmetatable({}, {__mode = "k"})
local function cluster_fit(K, dev)
  if dev.major < 9 then return false end
  local k = K("panel_cluster")
  local lim = cluster_limits[k]
  if lim ~= nil then return lim end
  lim = false
  local bytes = shared_room(k, dev)
  k:set_max_dynamic_shared(bytes)
  for _, c in ipairs{CLUSTER_MAX, 8} do
    local ok, most = pcall(k.max_active_clusters, k, {block = CPANEL_THREADS, cluster = c, shared = bytes})
    if ok and most >= 1 then lim = {cluster = c, bytes = bytes}; break end
  end
  cluster_limits[k] = lim
  return lim
end

-- the cluster panel's knobs, for benchmarks and tests: rows a block at most (until the
-- cluster has 16 blocks; fewer rows take fewer blocks), a cap on the shared memory of rows
-- a block (nil: all there is; a small cap leaves most rows in A), the share of a panel's
-- rows in A past which the fused panel takes it, the look-ahead (false: one stream), and the widest
-- panel the cluster panel factors in one launch (a wider block is split in halves; nil: 64
-- in float32 (32 for a block of 64 from n = 8192), 48 in float64: split_width); and the
-- most right-hand sides lu_solve substitutes in one launch a triangle (substitute; more go
-- by blocks, trsm and matmul); whether the fused panel keeps its rows in shared memory
-- where they fit (fused_keep; false: in A, as before session 12), and about how many rows a
-- block it takes then (fused_rows: fewer blocks leave more multiprocessors to the update
-- beside it). 16 is four column groups: each triangle read four times at
-- most, and at n = 8192 the groups' 4 x 128 blocks of threads within two waves of an
-- H100's resident ones (two a multiprocessor), so that the groups' chains of block rows
-- mostly overlap. Past that the re-reads and the waves grow with k while the blocked
-- path's cost (about 4 n / nb launches, latency-bound) hardly does; where the two cross
-- has not been measured (bench/lu_solve.lua sweeps k both ways). narrow: the look-ahead's
-- step between panels (the next panel's columns' swaps, block row of U and update), and the
-- halves' step in a split panel, in one launch (nil or "step": narrow_step) or three, the
-- update by its kernel ("kernel") or through matmul ("matmul"): update_narrow. trsm: the
-- full-width triangular solve by its kernel ("kernel") or as a product ("product"); nil
-- picks by dtype (trsm_how). tall_split: the narrowest panel split_panel splits a panel down
-- to while the cluster panel could not keep more than 1 - tall_spill of its rows (false:
-- split past split_width alone). tall_spill 0, the default: split while any row would stay
-- in A (session 20, float32 16384 on an H100: 146.81 ms against 149.05 with 0.25, which it
-- was until then, cluster_spill's share past which a panel goes to the fused kernel; 32768
-- on an H200: 867.4 against 883.7).
-- cluster_whole: the cluster panel's blocks ask for all the shared memory a block may have,
-- so that no block of the update runs beside them on their multiprocessors (false: only
-- their rows'; nil, the default: all of it where the block is split in panels, only the
-- rows' elsewhere). Measured on an H100 (session 19, bench/solve.lua's "+whole1"): float32
-- 16384 (block 128 in 64s) 152.2 ms against 155.3, float64 8192 (96 in 48s) 43.6 against
-- 44.1, 16384 171.5 against 172.3; but float32 8192 (block 64, unsplit) 41.4 against 41.1.
-- Two H200s (session 20), float32 32768, block 128 then in 32s: 515.7 ms against 528.7.
-- step_on: where the look-ahead (one GPU's and the several-GPU one) puts its step between
-- panels: "Q" (the default), on the panels' stream after the panel, once S's last
-- full-width update is done (when S is ahead, no hop between the streams on the panels'
-- chain); "S", on the update's stream, which Q then waits for (as before session 20, on an
-- H100: float32 8192 block 64 41.03 ms against 40.30 on Q, 16384 152.3 against 148.5;
-- float64 8192 43.5 against 41.9, 16384 171.7 against 166.8).
-- programmatic: false launches lu's chain kernels as plain launches (dependent says how).
-- wide_from, taper: lu_block's default block on one GPU, per dtype: 128 from n = wide_from,
-- narrowed to 64 by the look-ahead once at most taper columns are left (taper false or 0:
-- never; lu_block says why).
M.tune = {cluster_rows = 256, cluster_bytes = nil, cluster_spill = 0.25, lookahead = true, split_at = nil,
          trsv_max = 16, fused_keep = true, fused_rows = 16, narrow = nil, trsm = nil, tall_split = 16, tall_spill = 0,
          cluster_whole = nil, step_on = "Q", wide_from = {float32 = 8192, float64 = 8192},
          taper = {float32 = 6656, float64 = 6656}, programmatic = nil, start_chunks = 8}

-- panel = "cluster": the whole panel in one thread-block cluster, its rows in the blocks'
-- shared memory (those that do not fit stay in A), a cluster barrier a column
-- (a second result: spills(j0, jb), true when the cluster panel would leave more than
-- M.tune.tall_spill of the rows of the panel of columns [j0, j0 + jb) in A, for split_panel)
local function panel_cluster(K, dev, stream, n, A, ipiv, status, ld, whole)
  local k = K("panel_cluster")
  local lim = cluster_fit(K, dev)
  local size = esize(A.dtype)
  local fused
  ld = ld or n
  -- the cluster's blocks for the panel's m rows, the rows a block keeps in shared memory
  -- (ks of each block's rows), their bytes a row, and whether the panel goes to the fused
  -- kernel: a panel whose rows are over a quarter in A (L2's speed) does, which is as fast
  -- there (measured: float64 16384 x 64, 58% of the rows in A: 38 us a column, fused 14.5;
  -- float32, 18%: 13.7 and 13.9)
  local function shape(m, jb)
    local c = math.max(1, math.min(lim.cluster, ceil_div(m, M.tune.cluster_rows)))
    local rowbytes = ((jb + 3) // 4 * 4) * size + 16   -- kernels/solve.cu's jst values
    local rows = ceil_div(m, c)
    local ks = math.min(rows, math.min(lim.bytes, M.tune.cluster_bytes or lim.bytes) // rowbytes)
    return c, ks, rowbytes, ks < (1 - M.tune.cluster_spill) * rows, rows
  end
  return function (j0, jb, coff)
    local c, ks, rowbytes, spill = shape(n - j0, jb)
    if spill then
      fused = fused or panel_fused(K, dev, stream, n, A, ipiv, status, ld)
      return fused(j0, jb, coff)
    end
    local bytes = whole and lim.bytes or ks * rowbytes
    k:launch({grid = c, block = CPANEL_THREADS, cluster = c, shared = bytes, stream = stream, programmatic = dependent(k)},
             n, j0, jb, A, ld, coff or 0, ipiv, status, ks)
  end, function (j0, jb)   -- split_panel's question: more than tall_spill of the rows in A
    local _, ks, _, _, rows = shape(n - j0, jb)
    return ks < (1 - M.tune.tall_spill) * rows
  end
end

-- the panel factorization a kind names, for a device: "auto" is the cluster panel where
-- clusters run, else the fused one
local function panel_maker(fname, kind, K, dev)
  if kind == "columns" then return panel_columns end
  if kind == "fused" then return panel_fused end
  if cluster_fit(K, dev) then return panel_cluster end
  if kind == "cluster" then
    fail(fname, "panel = 'cluster' needs thread-block clusters (compute capability 9.0 and a driver with cuLaunchKernelEx); device %d is %d.%d",
         dev.ordinal, dev.major, dev.minor)
  end
  return panel_fused
end

-- lu's and solve's panel width: opts.block, else what measured fastest on an H100
-- (bench/solve.lua, bench/RESULTS.md's sessions 11, 13, 20, 21 and 22): with the cluster
-- panel (the one panel_maker takes), 128 from n = 8192 (M.tune.wide_from; float32 splits it
-- in 64s, float64 in 32s: split_width), otherwise DEFAULT_BLOCK (float64 splits it in 32s,
-- float32 from n = 8192). The second result: where the default is 128, the columns left
-- (M.tune.taper, 6656) at or below which the look-ahead narrows it to DEFAULT_BLOCK. A step's
-- update runs faster at k = 128 (matmul: 30.8 TFLOP/s against 23.7 at n = 8064), and early on
-- the update bounds the time; later the chain of panels does, which is shorter at 64. The
-- crossover depends on the columns left, not on n. The several-GPU LU deals out blocks of
-- one width and keeps the thresholds measured before the taper (`several`: 128 from n =
-- SEVERAL_WIDE_FROM, no taper). (Session 22, against 128 throughout and 64
-- throughout: float64 lu 8192 38.80-38.83 ms, 41.76-41.94, 40.24-40.29; 16384 164.84-164.89,
-- 167.71-167.88, 204.8; float32 lu + lu_solve 8192 37.98-38.05, 38.39-38.47, 37.96-37.99;
-- 10240 53.18, 53.94; 12288 73.50, 73.92; 16384 135.88-136.34, 136.27-136.52, 149.8-150.2.)
-- (Session 21, float32's update with C staged, lu + lu_solve:
-- 8192 64 in 32s 37.64-37.84 ms, 128 in 64s 38.24-38.46; 10240 64 in 32s 54.72, 128 53.66;
-- 12288 64 in 32s 77.80, 128 74.34; 16384 64 in 32s 150.0, 128 137.2-138.5.)
-- (Session 20, the look-ahead's step on Q, lu + lu_solve: float32 6144 64: 26.56 ms, 128:
-- 27.13; 8192 64: 39.90, 96: 39.55, 128: 38.28; 16384 96: 158.2, 128: 148.7. float64 lu
-- 4096 64: 15.40, 96: 16.92, 128: 17.65; 8192 64: 40.60, 96: 42.06, 128: 42.28; 16384 64:
-- 204.7, 96: 185.0, 128: 167.7.)
local SEVERAL_WIDE_FROM = {float32 = 10240, float64 = 12288}
local function lu_block(fname, opts, n, dt, dev, pk, several)
  local dflt
  if opts.block == nil and pk ~= "fused" and pk ~= "columns" and n >= (several and SEVERAL_WIDE_FROM or M.tune.wide_from)[dt]
     and cluster_fit(kernels(dev, dt), dev) then
    dflt = 128
  end
  local nb = check_block(fname, opts, dflt)
  local taper = dflt and not several and M.tune.taper[dt]
  return nb, taper and taper > 0 and taper or nil
end

-- for bench/solve_profile.lua: the panel factorization of a kind, factor(j0, jb [, coff])
-- (rows j0..n-1 of A, leading dimension ld, n by default)
function M.panel_factor(kind, dev, stream, n, A, ipiv, status, ld)
  local K = kernels(dev, A.dtype)
  return panel_maker("lu", kind, K, dev)(K, dev, stream, n, A, ipiv, status, ld, M.tune.cluster_whole)
end

-- an event of device dev (cuda.event makes them on the current device, which stays as it was)
local function event_on(dev)
  local cur = cuda.device()
  if cur.ordinal == dev.ordinal then return cuda.event{timing = false} end
  dev:use()
  local ok, e = pcall(cuda.event, {timing = false})
  cur:use()
  if not ok then error(e, 0) end
  return e
end

-- a stream of dev; priority -1 (above the default 0) where the device has priorities
local function stream_on(dev, priority)
  local ok, st = pcall(cuda.stream, {device = dev.ordinal, non_blocking = true, priority = priority})
  if ok then return st end
  return cuda.stream{device = dev.ordinal, non_blocking = true}
end

-- the one-GPU look-ahead's streams and events, kept a device: S (the swaps, the triangular
-- solves, the updates) and Q (the panels, at a higher priority)
local function lookahead_state(dev)
  local st = core.device_state("solve_lookahead", dev)
  if not st.S then
    st.S, st.Q = stream_on(dev), stream_on(dev, -1)
    st.start, st.ready, st.u, st.done = event_on(dev), event_on(dev), event_on(dev), event_on(dev)
  end
  return st
end

--[[
** A panel of columns [j0, j0 + jb) wider than `base`, factored as two halves (LAPACK's
** recursive getrf2, one level a call): the left half; its swaps on the right half's
** columns, the right half's block row of U (trsm) and its update below (matmul); the
** right half; its swaps on the left half's columns. The trailing update then runs with
** k = the whole block (matmul's speed grows with k), each panel launch at a half's width.
** A has leading dimension ld (n by default); column c of the panel is at c + coff in its
** rows, as for the panel kernels (a share's columns, in the several-GPU LU).
** A panel no wider than `base` is split as well, down to M.tune.tall_split columns, while
** spills(j0, jb) says that the cluster panel could not keep its rows (all of them, by
** default: M.tune.tall_spill): a narrower panel's rows take less shared memory (rows in A
** run at L2's speed), and the cluster panel leaves the update beside it most
** multiprocessors, where the fused kernel, which takes a panel with over a quarter of its
** rows in A, takes them all (float32 at n = 32768 on an H200, block 128: 64-column leaves
** 951.8 ms and 596.7 on two GPUs; split down to 32 columns where over a quarter of the rows
** do not fit, 895.9 and 525.8)
]]
local function split_panel(K, dev, stream, n, A, ipiv, factor, base, ld, spills)
  ld, base = ld or n, math.max(base, 1)
  local tall = M.tune.tall_split and math.max(M.tune.tall_split, 1)   -- halves of one column at least
  local function split(j0, jb, coff)
    coff = coff or 0
    if jb <= base and not (tall and spills and jb >= 2 * tall and spills(j0, jb)) then
      return factor(j0, jb, coff)
    end
    local h = jb // 2
    local mid, jend = j0 + h, j0 + jb
    split(j0, h, coff)
    if not narrow_step(K, dev, stream, n, ld, j0, h, mid + coff, jend - mid, A, ipiv, A, j0 * ld + j0 + coff, ld) then
      column_swaps(K, dev, stream, n, ld, mid + coff, jend + coff, j0, mid, ipiv, A)
      trsm(K, "lower", stream, h, jend - mid, A, j0 * ld + j0 + coff, ld, A, j0 * ld + mid + coff, ld)
      gemm_sub(K, A.dtype, stream, n - mid, jend - mid, h, A, mid * ld + j0 + coff, ld, A, j0 * ld + mid + coff, ld,
               A, mid * ld + mid + coff, ld)
    end
    split(mid, jend - mid, coff)
    column_swaps(K, dev, stream, n, ld, j0 + coff, mid + coff, mid, jend, ipiv, A)
  end
  return split
end

-- the panel factorization that `make` (panel_maker's) builds on a stream, split in halves
-- past M.tune.split_at columns when it is the cluster panel (whose launches are cheapest narrow)
-- (float64: 48, so that a block of 96 goes in two panels of 48 and one of 128 in four of 32).
-- In float32 64, on one GPU and on several (two H200s, block 128, session 21: 32768 504.3 ms
-- against 508.5 in 32s, 16384 117.2 against 122.3; session 18 had measured 32s the faster
-- there, 525.8 against 539.2, before tall panels split to fit and the cluster's blocks took
-- whole multiprocessors); but a block of 64 in 32s from n = 8192 (lu_block's figures: at
-- 8192 it beats 128 in 64s; 4096: 16.27 ms unsplit, 16.67 in 32s; 6144: 26.52, 26.32)
local function split_width(dt, n, nb)
  return M.tune.split_at or (dt == "float32" and (nb == 64 and n >= 8192 and 32 or 64) or 48)
end

-- (nb: the block's width, which the panels' shared memory follows: cluster_whole)
local function panel_factory(make, K, dev, stream, n, A, ipiv, status, ld, nb)
  local width = split_width(A.dtype, n, nb)
  local whole = M.tune.cluster_whole
  if whole == nil then whole = nb > width end
  local factor, spills = make(K, dev, stream, n, A, ipiv, status, ld, whole)
  if make ~= panel_cluster then return factor end
  return split_panel(K, dev, stream, n, A, ipiv, factor, width, ld, spills)
end

--[[
** Blocked LU with look-ahead (the cluster panel's, which leaves most multiprocessors
** free; a panel it hands to the fused kernel does not, and then waits its turn): panel
** k + 1 is factored on Q as soon as its columns have step k's swaps and update, while S
** goes on with the rest of step k. The chain from one panel to the next is then: panel
** k + 1's columns' swaps, their block of U, their update (lookahead_step, at the panel's
** width), on Q right after panel k (step_on = "Q"), once S has finished step k - 1's
** full-width launches, which updated those columns too; S waits for panel k and then runs
** step k's full-width launches. So the chain crosses between the streams only where S is
** behind. Q and S touch disjoint columns between the events; the caller's stream waits
** for the end (with no stream given, the host does: lu reads its status then).
]]
local function lu_lookahead(K, dev, stream, n, nb, A, ipiv, status, make, taper, info)
  local st = lookahead_state(dev)
  local S, Q = st.S, st.Q
  st.start:record(stream)
  S:wait(st.start)
  Q:wait(st.start)
  -- the block at column j0: nb, then DEFAULT_BLOCK once at most taper columns are left
  local small = taper and nb > DEFAULT_BLOCK and DEFAULT_BLOCK
  local wide = panel_factory(make, K, dev, Q, n, A, ipiv, status, nil, nb)
  local narrow = small and panel_factory(make, K, dev, Q, n, A, ipiv, status, nil, small)
  local function tapered(j0) return small and n - j0 <= taper end
  local function width(j0) return math.min(tapered(j0) and small or nb, n - j0) end
  local function factor(j0, jb)
    if tapered(j0) then
      info.narrow_columns = info.narrow_columns or n - j0   -- the first narrow block: what the user sees
      return narrow(j0, jb)
    end
    return wide(j0, jb)
  end
  local j0, jb = 0, width(0)
  factor(0, jb)
  st.ready:record(Q)
  local onQ = M.tune.step_on ~= "S"
  while j0 < n do
    local jend = j0 + jb
    local nxt = jend < n and width(jend)
    S:wait(st.ready)
    if nxt then
      local rest = n - jend
      local c1 = jend + nxt
      if onQ then
        -- the step on Q after the panel, once S's last full-width update (of these columns
        -- too) is done: no hop between the streams on the chain when S is ahead
        if j0 > 0 then Q:wait(st.u) end
        lookahead_step(K, dev, Q, n, n, j0, jb, jend, nxt, A, ipiv, A, j0 * n + j0, n)
      else
        lookahead_step(K, dev, S, n, n, j0, jb, jend, nxt, A, ipiv, A, j0 * n + j0, n)
        st.u:record(S)
        Q:wait(st.u)
      end
      factor(jend, nxt)
      st.ready:record(Q)
      swaps(K, dev, S, n, n, j0, c1, j0, jend, ipiv, A)
      trsm_how(dev, A.dtype, n - c1)(K, dev, S, jb, n - c1, A, j0 * n + j0, n, A, j0 * n + c1, n)
      gemm_sub(K, A.dtype, S, rest, n - c1, jb, A, jend * n + j0, n, A, j0 * n + c1, n, A, jend * n + c1, n)
      if onQ then st.u:record(S) end
    else
      swaps(K, dev, S, n, n, j0, jend, j0, jend, ipiv, A)
    end
    j0, jb = jend, nxt
  end
  st.done:record(S)
  if stream then stream:wait(st.done) else st.done:synchronize() end
end

-- blocked right-looking LU of the n x n A in place, pivots into ipiv (0-based rows, 1-based values)
local function lu_blocked(fname, K, dev, stream, n, nb, A, ipiv, status, panel_kind, taper, info)
  local make = panel_maker(fname, panel_kind, K, dev)
  if make == panel_cluster and n > nb and M.tune.lookahead ~= false then
    return lu_lookahead(K, dev, stream, n, nb, A, ipiv, status, make, taper, info)
  end
  local factor = panel_factory(make, K, dev, stream, n, A, ipiv, status, nil, nb)
  for j0 = 0, n - 1, nb do
    local jb = math.min(nb, n - j0)
    local jend = j0 + jb
    factor(j0, jb)
    swaps(K, dev, stream, n, n, j0, jend, j0, jend, ipiv, A)
    if jend < n then
      local rest = n - jend
      trsm_how(dev, A.dtype, rest)(K, dev, stream, jb, rest, A, j0 * n + j0, n, A, j0 * n + jend, n)
      gemm_sub(K, A.dtype, stream, rest, rest, jb, A, jend * n + j0, n, A, j0 * n + jend, n, A, jend * n + jend, n)
    end
  end
end

-- the seed's elimination on ABT ((n + k) x n, the transposed augmented matrix): lu = 1 keeps
-- the multipliers below the pivots (getrf unblocked), lu = 0 is Gauss-Jordan
local function seed_eliminate(K, dev, stream, n, ncols, ABT, ipiv, status, lu, mult, prow)
  local pivot, extract, elim = K("seed_pivot"), K("seed_extract"), K("seed_eliminate")
  for p = 0, n - 1 do
    pivot:launch({grid = 1, block = 1024, stream = stream}, n, 0, p, lu, ABT, ipiv, mult, status)
    extract:launch({grid = grid_for(ncols, 256, dev), block = 256, stream = stream}, n, ncols, p, ipiv, ABT, prow)
    local lo = lu == 1 and p + 1 or 0
    if n - lo > 0 and ncols - p > 0 then
      elim:launch({grid = {ceil_div(n - lo, 256), math.min(ncols - p, 65535)}, block = 256, stream = stream},
                  n, ncols, 0, p, lu, ABT, mult, prow)
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


-- {====================================================== several GPUs

-- the result's info: the devices and how data travelled between them
local function new_info(list)
  local l = {}
  for i, o in ipairs(list) do l[i] = o end
  return {devices = l, shares = #l, transfer = "local", pairs = {}}
end

-- how data goes between devices a and b: "local" (a copy within one device), "peer" (peer
-- access, enabled here both ways) or "host" (staged through pinned host memory: the pair has
-- no peer access, or peer = false, which stages every transfer, within one device too, so
-- that shares of one GPU run the staging path); noted in info.pairs["a-b"], and
-- info.transfer says the slowest way used, info.why why the host was
local function transport(info, peer, a, b)
  local key = math.min(a, b) .. "-" .. math.max(a, b)
  local t = info.pairs[key]
  if t then return t end
  if peer == false then
    t = "host"
    info.why = "peer = false"
  elseif a == b then
    t = "local"
  else
    local da, db = cuda.device(a), cuda.device(b)
    if da:can_access_peer(db) and db:can_access_peer(da) then
      da:enable_peer_access(db)
      db:enable_peer_access(da)
      t = "peer"
    else
      t = "host"
      info.why = info.why or ("devices %d and %d have no peer access"):format(a, b)
    end
  end
  info.pairs[key] = t
  if t == "host" or (t == "peer" and info.transfer == "local") then info.transfer = t end
  return t
end

-- src (on stream sa) to dst (on stream sb, after sa's work so far): peer or local copies,
-- or through hbuf (pinned, as many elements as dst) by the host
local function move(t, src, sa, ev, dst, sb, hbuf)
  if t == "host" then src:copy_to(hbuf, sa) end
  ev:record(sa)
  sb:wait(ev)
  if t == "host" then dst:copy_from(hbuf, sb) else dst:copy_from(src, sb) end
end

local function pinned(dt, count) return cuda.host_array(dt, count, {pinned = true}) end

-- the first bad pivot of several status words (each share's first), then cleared
local function first_bad(words)
  local first = 0
  for _, w in ipairs(words) do
    local s = take_status(w[1], w[2])
    if s ~= 0 and (first == 0 or math.abs(s) < math.abs(first)) then first = s end
  end
  return first
end

local function close_all(t)
  for _, x in ipairs(t) do if x then x:close() end end
end

-- x, noted in `owned` (the arrays and pinned buffers a several-GPU call closes)
local function keep(owned, x)
  owned[#owned + 1] = x
  return x
end

-- a several-GPU driver f(owned, ...) that closes what it kept at its end; when it raises
-- (an allocation that fails halfway, say) what it had kept is closed here, not left held
-- until the collector runs
local function closing(f)
  return function (...)
    local owned = {}
    local r = table.pack(pcall(f, owned, ...))
    if not r[1] then close_all(owned); error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
end

-- shares set up on the listed devices: each with its device, kernels and streams, the
-- transport from the arrays' device, and the events it records
-- (kept a device for the next call: the streams, their events and so the catalog's
-- scratch memory a stream are made once, not each call; a device listed twice has two)
local function shares_on(list, G, dev0, dt, info, peer)
  local sh = {}
  local used = {}
  for g = 1, G do
    local d = cuda.device(list[g])
    local slots = core.device_state("solve_shares", d)
    used[d.ordinal] = (used[d.ordinal] or 0) + 1
    local k = slots[used[d.ordinal]]
    if not k then
      k = {S = stream_on(d), Q = stream_on(d, -1), G = stream_on(d), ready = event_on(d), u = event_on(d),
           done = event_on(d), recv = event_on(d), w = event_on(d), freed = {event_on(d), event_on(d)}}
      slots[used[d.ordinal]] = k
    end
    local s = {g = g, dev = d, K = kernels(d, dt), S = k.S, Q = k.Q, G = k.G, ready = k.ready, u = k.u,
               done = k.done, recv = k.recv, w = k.w, freed = k.freed}
    s.home = transport(info, peer, dev0.ordinal, d.ordinal)
    sh[g] = s
  end
  for g = 1, G do for h = 1, G do transport(info, peer, sh[g].dev.ordinal, sh[h].dev.ordinal) end end
  return sh
end

-- the start: the home stream (ours, on the arrays' device, kept as the shares' are) after
-- the caller's stream
local function home_stream(dev0, ustream)
  local home = core.device_state("solve_home", dev0)
  if not home.HS then home.HS, home.ev = stream_on(dev0), event_on(dev0) end
  local HS, ev = home.HS, home.ev
  ev:record(ustream)
  HS:wait(ev)
  return HS, ev
end

-- the i-th event of the arrays' device for the chunks of the first distribution (kept with
-- the home stream; a call waits for its last before it returns, so the next may record them)
local function chunk_event(dev0, i)
  local home = core.device_state("solve_home", dev0)
  home.chunks = home.chunks or {}
  home.chunks[i] = home.chunks[i] or event_on(dev0)
  return home.chunks[i]
end

-- the end: the caller's stream after the home stream, which is waited for
local function home_done(HS, ev, ustream)
  ev:record(HS)
  if ustream then ustream:wait(ev) end
  HS:synchronize()
end

-- the end of a several-GPU call: the pivots home from the first share (its event u), the
-- caller's stream after the home stream, the shares' arrays closed, and the first bad
-- pivot of any share (its status read on its stream `which`, "Q" or "S")
local function finish(sh, n, ipiv, ipiv_hbuf, HS, hev, ustream, owned, which)
  move(sh[1].home, sh[1].ipiv, sh[1].S, sh[1].u, ipiv:view(1, n), HS, ipiv_hbuf)
  home_done(HS, hev, ustream)
  local words = {}
  for _, s in ipairs(sh) do words[#words + 1] = {s.status, s[which]} end
  close_all(owned)   -- ipiv_hbuf among them
  return first_bad(words)
end

--[[
** Blocked right-looking LU over G shares (MAGMA's multi-GPU getrf, one process): panel q
** (nb columns) belongs to share q % G; each share keeps its columns in an n x nloc array L
** (leading dimension nloc). For panel k, owned by o:
**   Q_o (o's second stream) has factored it and packed it with its pivots into a send buffer
**   (two, alternating), and recorded `ready`;
**   each share's stream S waits for `ready`, copies the buffer (peer, local, or from o's
**   pinned host copy), takes the pivots into its ipiv, applies the swaps to its columns (the
**   owner: all but the panel's), solves its block row of U (trsm) and updates its trailing
**   columns (gemm_sub);
**   the owner of panel k + 1 updates that panel's columns first, records `u`, and its Q
**   (after `u`) factors panel k + 1 and sends it while S goes on with the rest of step k:
**   the look-ahead.
** Every share waits for every panel, so a send buffer is written again (panel k + 2G) only
** after every share took panel k (each owner between factored after its S took k; o's S
** waited for them all, and o's Q waits for o's S); the pinned copy likewise (k + G).
]]
local lu_multi = closing(function (owned, fname, dev0, ustream, n, nb, dt, A, ipiv, pk, list, peer, info)
  local P = ceil_div(n, nb)
  local G = math.min(#list, P)   -- a share beyond the panels would have no columns
  info.shares = G
  local sh = shares_on(list, G, dev0, dt, info, peer)
  local HS, hev = home_stream(dev0, ustream)
  local buf_size = nb + n * nb
  for g = 1, G do
    local s = sh[g]
    local nloc = 0
    for q = g - 1, P - 1, G do nloc = nloc + math.min(nb, n - q * nb) end
    s.nloc = nloc
    s.status = core.scratch("solve_status", s.dev, s.Q, 1)
    local o = {device = s.dev.ordinal}
    s.L = keep(owned, cuda.array(dt, n * nloc, o))
    s.ipiv = keep(owned, cuda.array("int32", n, o))
    s.SB = {keep(owned, cuda.array(dt, buf_size, o)), keep(owned, cuda.array(dt, buf_size, o))}
    s.RB = {keep(owned, cuda.array(dt, buf_size, o)), keep(owned, cuda.array(dt, buf_size, o))}
    s.recvd = 0   -- panels received: the receive buffers alternate
    s.factor = panel_factory(panel_maker(fname, pk, s.K, s.dev), s.K, s.dev, s.Q, n, s.L, s.ipiv, s.status, nloc, nb)
    for h = 1, G do
      if transport(info, peer, s.dev.ordinal, sh[h].dev.ordinal) == "host" then
        s.HB = s.HB or keep(owned, pinned(dt, buf_size))
      end
    end
  end
  -- local columns of share s in the panels before panel q
  local function lstart(s, q)
    if q >= P then return s.nloc end
    local c = q - (s.g - 1)
    return c <= 0 and 0 or ceil_div(c, G) * nb
  end

  -- rows [j0, j0 + rows) of share s's columns into A, on its gather stream G (a peer writes
  -- into A over peer access)
  local function gather(s, j0, rows)
    s.K("cyclic"):launch({grid = grid_for(rows * s.nloc, 256, s.dev), block = 256, stream = s.G}, n, rows, nb, G,
                         s.g - 1, s.nloc, 0, s.nloc, view(A, j0 * n, rows * n), view(s.L, j0 * s.nloc, rows * s.nloc), 1)
  end

  -- distribute: each share's columns packed out of A into its L. A share on the arrays'
  -- device packs its own on its S; the arrays' device writes a peer's straight into the
  -- peer's L over peer access (writes over the link), in M.tune.start_chunks chunks of whole
  -- panels, each with an event (s.chunks), so that the peer's first step takes each as it
  -- comes rather than idle until all of its columns are there (two H200s at 32768: 2.1 GB,
  -- 5.5 ms of NVLink; session 22: 455.25 and 451.89 ms against 456.21 and 454.91 in one
  -- piece); the first chunk holds the columns its Q works on in that step. A share
  -- reached through the host gets them packed on the arrays' device (W), staged and copied
  local cyclic = kernels(dev0, dt)("cyclic")
  hev:record(HS)   -- the start, after the caller's stream
  local nev = 0
  for _, s in ipairs(sh) do
    local count = n * s.nloc
    local grid = {grid = grid_for(count, 256, dev0), block = 256, stream = HS}
    if s.home == "local" then
      s.S:wait(hev)
      grid.stream = s.S
      cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, 0, s.nloc, A, s.L, 0)
    elseif s.home == "peer" then
      s.chunks = {}
      local per = ceil_div(ceil_div(s.nloc, math.max(M.tune.start_chunks or 1, 1)), nb) * nb
      local c0 = 0
      while c0 < s.nloc do
        local c1 = math.min(s.nloc, c0 == 0 and math.max(per, lstart(s, 2)) or c0 + per)
        grid.grid = grid_for(n * (c1 - c0), 256, dev0)
        cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, c0, c1 - c0, A, s.L, 0)
        nev = nev + 1
        local ev = chunk_event(dev0, nev)
        ev:record(HS)
        s.chunks[#s.chunks + 1] = {c0 = c0, c1 = c1, ev = ev}
        c0 = c1
      end
      s.S:wait(s.chunks[1].ev)
    else
      s.W = keep(owned, cuda.array(dt, count, {device = dev0.ordinal}))
      s.HW = keep(owned, pinned(dt, count))
      cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, 0, s.nloc, A, s.W, 0)
      move(s.home, s.W, HS, hev, s.L, s.S, s.HW)
    end
    s.u:record(s.S)
    s.Q:wait(s.u)
  end

  -- panel k on its owner's second stream: factored, packed with its pivots, sent to the host if need be
  local function factor_and_send(k)
    local o = sh[k % G + 1]
    local j0 = k * nb
    local jb = math.min(nb, n - j0)
    local lc = lstart(o, k)
    local buf = o.SB[(k // G) % 2 + 1]
    o.factor(j0, jb, lc - j0)
    local cnt = jb + (n - j0) * jb
    o.K("panel_pack"):launch({grid = grid_for(cnt, 256, o.dev), block = 256, stream = o.Q},
                             n, j0, jb, o.L, lc, o.nloc, o.ipiv, buf)
    if o.HB then buf:view(1, cnt):copy_to(o.HB, o.Q) end
    o.ready:record(o.Q)
  end

  factor_and_send(0)
  local onQ = M.tune.step_on ~= "S"
  for k = 0, P - 1 do
    local o = sh[k % G + 1]
    local j0 = k * nb
    local jb = math.min(nb, n - j0)
    local jend = j0 + jb
    local cnt = jb + (n - j0) * jb
    local nxt = k + 1 < P and sh[(k + 1) % G + 1] or nil
    for _, s in ipairs(sh) do
      local S, K, ld = s.S, s.K, s.nloc
      -- the next panel's owner receives panel k on Q (step_on = "Q", as lu_lookahead), into
      -- the receive buffer S read two receives ago (freed: that step's end), not waiting for
      -- S's step k - 1, which reads the other (else S idles for each copy and its pivots)
      local R = s == nxt and onQ and s.Q or S
      R:wait(o.ready)
      local buf, bi
      if s == o then buf = o.SB[(k // G) % 2 + 1]
      else
        local t = transport(info, peer, o.dev.ordinal, s.dev.ordinal)
        s.recvd = s.recvd + 1
        bi = s.recvd % 2 + 1
        buf = s.RB[bi]
        if R ~= S then R:wait(s.freed[bi]) end
        if t == "host" then buf:copy_from(o.HB, R)
        else buf:view(1, cnt):copy_from(o.SB[(k // G) % 2 + 1]:view(1, cnt), R) end
        K("panel_pivots"):launch({grid = 1, block = 128, stream = R}, j0, jb, buf, s.ipiv)
      end
      if R ~= S then
        s.u:record(R)
        S:wait(s.u)
        -- and the step on Q after S's step k - 1, which updated the next panel's columns too
        if k > 0 then R:wait(s.w) end
      end
      local lo, hi = 0, 0
      if s == o then lo = lstart(o, k); hi = lo + jb end
      -- local columns [c0, c1): U's block row, then the trailing update
      local function update(c0, c1)
        if c1 <= c0 then return end
        trsm(K, "lower", S, jb, c1 - c0, buf, jb, jb, s.L, j0 * ld + c0, ld)
        gemm_sub(K, dt, S, n - jend, c1 - c0, jb, buf, jb + jb * jb, jb, s.L, j0 * ld + c0, ld,
                 s.L, jend * ld + c0, ld)
      end
      -- the row swaps on the local columns but [skip_lo, skip_hi), and the update of those
      -- from `from` on; in the first step, a chunk of the distribution at a time as it comes
      local function swaps_update(skip_lo, skip_hi, from)
        if not (k == 0 and s.chunks) then
          swaps(K, s.dev, S, ld, ld, skip_lo, skip_hi, j0, jend, s.ipiv, s.L)
          return update(from, ld)
        end
        for _, ch in ipairs(s.chunks) do
          local a, b = ch.c0, ch.c1
          S:wait(ch.ev)
          if skip_lo > a then column_swaps(K, s.dev, S, n, ld, a, math.min(b, skip_lo), j0, jend, s.ipiv, s.L) end
          if skip_hi < b then column_swaps(K, s.dev, S, n, ld, math.max(a, skip_hi), b, j0, jend, s.ipiv, s.L) end
          update(math.max(a, from), b)
        end
      end
      local lt = lstart(s, k + 1)
      if s == nxt then
        -- the next panel's owner: as lu_lookahead, panel k + 1's columns [lt, lt1) first
        -- (their swaps, U block and update, at their own width: narrow_step, its L the
        -- panel as it came, in buf) so that Q can factor it,
        -- then the rest of the row swaps and the update (every transfer of a panel waits
        -- for this chain: on two GPUs it is the critical path's every other step). The
        -- rest skips [lt, lt1), and panel k's columns [lo, hi) too when this share owns
        -- it as well (one share owns every panel): they lie just left, hi == lt
        local lt1 = lstart(s, k + 2)
        lookahead_step(K, s.dev, R, n, ld, j0, jb, lt, lt1 - lt, s.L, s.ipiv, buf, jb, jb)
        if R == S then
          s.u:record(S)
          s.Q:wait(s.u)
        end
        factor_and_send(k + 1)
        swaps_update(s == o and lo or lt, lt1, lt1)
      else
        swaps_update(lo, hi, lt)
      end
      s.w:record(S)
      if bi then s.freed[bi]:record(S) end
      -- rows [j0, jend) of this share's columns are final now (every later step works on the
      -- rows below): into A on G, beside the steps that follow, rather than all at the end
      -- (two H200s, float32 32768: 5.5 ms of NVLink for a share's 2.1 GB). The next panel's
      -- owner wrote those rows of its columns on Q, before it recorded `ready`
      if s.home ~= "host" then
        s.G:wait(s.w)
        if s == nxt then s.G:wait(s.ready) end
        gather(s, j0, jb)
      end
    end
  end

  -- the columns back into A (a share's rows went on its G as they became final; one reached
  -- through the host stages them all now, into W, and the arrays' device unpacks them), and
  -- share 1's pivots (every share has them all)
  local ipiv_hbuf = sh[1].home == "host" and keep(owned, pinned("int32", n)) or nil
  for _, s in ipairs(sh) do
    if s.home == "host" then
      move(s.home, s.L, s.S, s.done, s.W, HS, s.HW)
      cyclic:launch({grid = grid_for(n * s.nloc, 256, dev0), block = 256, stream = HS}, n, n, nb, G, s.g - 1, s.nloc,
                    0, s.nloc, A, s.W, 1)
    else
      s.done:record(s.G)
      HS:wait(s.done)
    end
  end
  return finish(sh, n, ipiv, ipiv_hbuf, HS, hev, ustream, owned, "Q")
end)


--[[
** Seed 003's P2P program: the transposed augmented matrix ABT's rows (the columns of
** [A | B]) split in contiguous parts, one a share. For each column p the share that holds
** it finds the pivot and the multipliers (seed_pivot) and broadcasts them, the pivot row's
** number and the n multipliers, to the others by peer copies (or the host); every share
** then swaps and eliminates its own columns. The owner waits until the others took the
** last step's broadcast before it writes the next one (the seed's cudaMemcpyPeer, which
** waits too). ABT (ncols x n, on the arrays' device) is reduced in place, the pivots into ipiv.
]]
local seed_multi = closing(function (owned, dev0, ustream, n, ncols, dt, ABT, ipiv, lu, list, peer, info)
  local G = math.min(#list, ncols)
  info.shares = G
  local sh = shares_on(list, G, dev0, dt, info, peer)
  local HS, hev = home_stream(dev0, ustream)
  for g = 1, G do
    local s = sh[g]
    local o = s.dev.ordinal
    s.c0, s.c1 = (g - 1) * ncols // G, g * ncols // G
    local w = s.c1 - s.c0
    s.w = w
    s.X = keep(owned, cuda.array(dt, w * n, {device = o}))
    s.ipiv = keep(owned, cuda.array("int32", n, {device = o}))
    -- zeroed: seed_pivot writes rows p+1.. of it (lu), and the whole of it travels
    s.mult = keep(owned, cuda.array(dt, n, {device = o})):fill(0, s.S)
    s.prow = keep(owned, cuda.array(dt, w, {device = o}))
    s.status = core.scratch("solve_status", s.dev, s.S, 1)
    if s.home == "host" then s.HW = keep(owned, pinned(dt, w * n)) end
    for h = 1, G do
      if transport(info, peer, o, sh[h].dev.ordinal) == "host" then
        s.HI = s.HI or keep(owned, pinned("int32", 1))
        s.HM = s.HM or keep(owned, pinned(dt, n))
      end
    end
  end
  for _, s in ipairs(sh) do
    move(s.home, ABT:view(s.c0 * n + 1, s.w * n), HS, hev, s.X, s.S, s.HW)
  end
  local owner = 1
  for p = 0, n - 1 do
    while p >= sh[owner].c1 do owner = owner + 1 end
    local o = sh[owner]
    if p > 0 then
      for _, s in ipairs(sh) do if s ~= o then o.S:wait(s.recv) end end
    end
    o.K("seed_pivot"):launch({grid = 1, block = 1024, stream = o.S}, n, o.c0, p, lu, o.X, o.ipiv, o.mult, o.status)
    if o.HI then
      o.ipiv:view(p + 1, 1):copy_to(o.HI, o.S)
      o.mult:copy_to(o.HM, o.S)
    end
    o.ready:record(o.S)
    for _, s in ipairs(sh) do
      if s ~= o then
        s.S:wait(o.ready)
        if transport(info, peer, o.dev.ordinal, s.dev.ordinal) == "host" then
          s.ipiv:view(p + 1, 1):copy_from(o.HI, s.S)
          s.mult:copy_from(o.HM, s.S)
        else
          s.ipiv:view(p + 1, 1):copy_from(o.ipiv:view(p + 1, 1), s.S)
          s.mult:copy_from(o.mult, s.S)
        end
        s.recv:record(s.S)
      end
    end
    local lo = lu == 1 and p + 1 or 0
    for _, s in ipairs(sh) do
      s.K("seed_extract"):launch({grid = grid_for(s.w, 256, s.dev), block = 256, stream = s.S},
                                 n, s.w, p, s.ipiv, s.X, s.prow)
      local first = math.max(p - s.c0, 0)
      if n - lo > 0 and s.w - first > 0 then
        s.K("seed_eliminate"):launch({grid = {ceil_div(n - lo, 256), math.min(s.w - first, 65535)}, block = 256, stream = s.S},
                                     n, s.w, s.c0, p, lu, s.X, s.mult, s.prow)
      end
    end
  end
  for _, s in ipairs(sh) do
    move(s.home, s.X, s.S, s.done, ABT:view(s.c0 * n + 1, s.w * n), HS, s.HW)
  end
  local ipiv_hbuf = sh[1].home == "host" and keep(owned, pinned("int32", n)) or nil
  return finish(sh, n, ipiv, ipiv_hbuf, HS, hev, ustream, owned, "S")
end)

-- }======================================================


-- {====================================================== lu, lu_solve, solve

local lu_options = {"stream", "method", "block", "panel", "devices", "peer", "growth"}

-- the seed's elimination of ABT (ncols x n, lu as seed_eliminate's) on the arrays'
-- device or spread over the listed ones: returns the first bad pivot (0: none), the
-- stream waited for and the work arrays closed; ABT is the caller's, closed here only
-- when this raises
local function seed_run(K, dev, stream, n, ncols, dt, ABT, ipiv, status, lu, multi, list, peer, info)
  if multi then
    local ok, bad = pcall(seed_multi, dev, stream, n, ncols, dt, ABT, ipiv, lu, list, peer, info)
    if not ok then ABT:close(); error(bad, 0) end
    return bad
  end
  local mult, prow = cuda.array(dt, n, {device = dev.ordinal}), cuda.array(dt, ncols, {device = dev.ordinal})
  seed_eliminate(K, dev, stream, n, ncols, ABT, ipiv, status, lu, mult, prow)
  local bad = take_status(status, stream)
  close_all{mult, prow}
  return bad
end

-- blocked LU of A in place, on its device or spread over the listed ones; raises on a
-- bad pivot
local function factor(fname, K, dev, stream, n, nb, A, ipiv, status, pk, multi, list, peer, info, taper)
  if multi then
    pivot_verdict(fname, lu_multi(fname, dev, stream, n, nb, A.dtype, A, ipiv, pk, list, peer, info))
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
function M.lu(A, opts)
  local fname = "lu"
  opts = core.options(fname, opts, lu_options)
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
  check_finite(fname, K, dev, stream, status, "A", A, n * n)
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

--[[
** L y = P b, then U x = y, in one launch a triangle (kernels/solve.cu's substitutions):
** a block of threads a block of TRSV_ROWS rows and a group of TRSV_COLS right-hand
** sides (one for k = 1, which has kernels of its own: a quarter of the registers and
** of the shuffles a step). The blocks of a group take tickets and publish the block
** rows they solve through TRSV_SYNC words of scratch (the upper solve's after the
** lower's), which the kernels leave at zero: no fill a call (a fill without a stream
** would wait for the device).
]]
local function substitute(K, dev, stream, n, k, LU, B)
  local cols = k == 1 and 1 or TRSV_COLS
  local groups = ceil_div(k, cols)
  local words = groups * TRSV_SYNC
  local sync = core.scratch("solve_trsv", dev, stream, 2 * words)
  local name = k == 1 and "trsv1_" or "trsv_"
  local cfg = {grid = {ceil_div(n, TRSV_ROWS), groups}, block = TRSV_THREADS, stream = stream}
  K(name .. "lower"):launch(cfg, n, k, LU, B, view(sync, 0, words))
  K(name .. "upper"):launch(cfg, n, k, LU, B, view(sync, words, words))
end

-- permute B's rows by the pivots, then the two triangular solves: for at most
-- M.tune.trsv_max right-hand sides by substitute, else by blocks (a trsm launch and
-- a matmul a block row each way: about 4 n / nb launches)
local function solve_factored(K, dev, stream, n, k, nb, LU, ipiv, B)
  local dt = LU.dtype
  local perm = core.scratch("solve_perm", dev, stream, n)
  local pk = K("permutation", false)
  local shared = n * 4 <= 96 * 1024
  if shared and n * 4 > 48 * 1024 then core.allow_shared(pk, 96 * 1024) end
  pk:launch({grid = 1, block = 1024, shared = shared and n * 4 or 0, stream = stream}, n, ipiv, perm, shared and 1 or 0)
  local W = core.scratch("solve_rhs_" .. dt, dev, stream, n * k)
  K("gather"):launch({grid = grid_for(n * k, 256, dev), block = 256, stream = stream}, n, k, perm, B, W)
  copy(K, dev, stream, n * k, W, B)
  -- (gridDim.y, the column groups, is at most 65535)
  if k <= math.min(M.tune.trsv_max, 65535 * TRSV_COLS) then return substitute(K, dev, stream, n, k, LU, B) end
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

local solve_options = {"stream", "method", "block", "panel", "overwrite", "devices", "peer", "growth"}

-- cuda.catalog.solve(A, B [, opts]) -> X, ipiv, info: A X = B. A and B are left as they were
-- (X is a new array shaped as B) unless overwrite = true: then A holds the factors and X is B.
--   opts: method ("lu" | "seed": the seed's Gauss-Jordan on [A | B], no ipiv), block, panel
--         (as lu's), stream, overwrite, devices and peer (as lu's: the factorization, or the
--         seed's elimination, spread over them; lu_solve's substitutions on the arrays' device),
--         growth (as lu's; method lu only: the seed's Gauss-Jordan keeps no U)
function M.solve(A, B, opts)
  local fname = "solve"
  opts = core.options(fname, opts, solve_options)
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
  check_finite(fname, K, dev, stream, status, "A", A, n * n)
  check_finite(fname, K, dev, stream, status, "B", B, n * k)
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
           devices = "a list of device ordinals (repeats: shares of one GPU); peer = false stages through the host"},
  default = "lu",
}

return M
