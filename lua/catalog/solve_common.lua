-- culua.catalog.solve_common: what the parts of the solve family share (its
-- entry, lua/catalog/solve.lua, says which part is where): the kernels' shapes,
-- read from kernels/culua/solve.cuh; finding a kernel's file; the knobs
-- (solve.tune); the scratch kinds; views, the GEMM and other small launches;
-- streams and events of a device; the checks of a matrix, its right-hand sides,
-- their values and the pivots.

local cuda = require "cuda"
local core = require "culua.catalog.core"

local ceil_div = core.ceil_div
local fail = core.fail
local matmul = require("culua.catalog.matmul").matmul

local S = {}

-- the kernels' shapes that launches follow (MAXBLOCK, the panels' threads, the
-- substitutions' rows...), from the one place the kernels take them too; and the grid
-- barrier's words, from <culua/barrier.cuh>
S.shapes = core.constants("culua/solve.cuh")
S.BARRIER_WORDS = core.constants("culua/barrier.cuh").CULUA_BARRIER_WORDS
S.DEFAULT_BLOCK = 64            -- panel width where lu_block does not say otherwise
local MAXBLOCK, DEFAULT_BLOCK = S.shapes.MAXBLOCK, S.DEFAULT_BLOCK

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
core.scratch_kind("solve_plan", "int32")               -- row_plan's plans of swaps, two slots
core.scratch_kind("solve_held_float32", "float32")    -- narrow_step's rows that go up
core.scratch_kind("solve_held_float64", "float64")
core.scratch_kind("solve_ticket", "uint32", true)      -- and its tickets, a column group
core.scratch_kind("solve_absmax", "float64", true)     -- absmax's word (a double's bits)


-- {====================================================== knobs

-- the family's knobs (solve.tune), for benchmarks and tests. The cluster panel's: rows a
-- block at most (until the cluster has 16 blocks; fewer rows take fewer blocks), a cap on
-- the shared memory of rows a block (nil: all there is; a small cap leaves most rows in
-- A), the share of a panel's rows in A past which the fused panel takes it, the
-- look-ahead (false: one stream), and the widest panel the cluster panel factors in one
-- launch (a wider block is split in halves; nil: 64 in float32 (32 for a block of 64 from
-- n = 8192), 48 in float64: split_width); and the
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
-- full-width triangular solve by its kernel ("kernel"), as a product ("product"), or with
-- the row swaps in one launch ("fused": lu.lua's block_row); nil picks by dtype (lu.lua's
-- one_launch, trsm_how): one launch in the dtypes fused_from names, from fused_from[dtype]
-- columns of the block row (lu.lua's fuse). tall_split: the narrowest panel split_panel
-- splits a panel down to while the cluster panel could not keep more than 1 - tall_spill of
-- its rows (false: split past split_width alone). tall_spill 0, the default: split while any
-- row would stay in A (session 20, float32 16384 on an H100: 146.81 ms against 149.05 with
-- 0.25, which it was until then, cluster_spill's share past which a panel goes to the fused
-- kernel; 32768 on an H200: 867.4 against 883.7).
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
-- rank_panels: how a panel goes from its owner to the other ranks over comm (ranks_transport.lua):
-- "broadcast" (the default: one NCCL broadcast, a ring, each rank's part forwarding it) or
-- "send" (the owner sends it to each rank in one NCCL group: more of the owner's bandwidth,
-- but a rank takes it without waiting for the ranks after it in the ring). Not measured yet.
-- start_chunks: the first distribution to a peer (devices =) or a rank (comm =, root
-- layout) in that many chunks, which the first step takes as they come.
-- rank_scatter: over ranks with A on root, how the columns go out at the start: "broadcast"
-- (the default: an NCCL broadcast a chunk, taken by its rank, dropped by the others) or
-- "send" (each chunk sent to its rank alone).
-- rank_gather: over ranks with A on root, how the factors come back: "rows" (the default: a
-- block row of every rank's columns as soon as it is final, beside the steps that follow)
-- or "end" (all of them after the last step).
-- rank_ctas: over ranks, the transfers run on a communicator split from comm's with NCCL's
-- blocks (CTAs, a multiprocessor each, taken from the trailing update beside them) capped
-- at this many: an integer, a table of them by the number of ranks (ranks absent: none),
-- or false (comm's own, as it was made).
local tune = {cluster_rows = 256, cluster_bytes = nil, cluster_spill = 0.25, lookahead = true, split_at = nil,
          trsv_max = 16, fused_keep = true, fused_rows = 16, narrow = nil, trsm = nil, fused_from = {float32 = 8192}, tall_split = 16,
          tall_spill = 0, cluster_whole = nil, step_on = "Q", wide_from = {float32 = 8192, float64 = 8192},
          taper = {float32 = 6656, float64 = 6656}, programmatic = nil, start_chunks = 8, rank_panels = "broadcast",
          rank_scatter = "broadcast", rank_gather = "rows", rank_ctas = {[2] = 8}}
S.tune = tune

-- }======================================================


-- {====================================================== kernels and launches

local function tname(dt) return dt == "float32" and "f32" or "f64" end

-- the family's kernel files (kernels/<file>.cu, a file a part), and the file of each
-- kernel, read from their instances (core.kernel_files): an `extern "C" __global__`
-- line names culua_solve_<name>_##t (or culua_solve_<name>, untyped)
local FILES = {"solve", "lu", "lu_panel", "lu_multi", "triangular", "seed"}
local kernel_file = core.kernel_files("culua_solve_", FILES)

local function kernels(dev, dt)
  local t = tname(dt)
  return function (name, typed)
    return core.kernel(kernel_file(name), "culua_solve_" .. name .. (typed == false and "" or "_" .. t), nil, dev)
  end
end

local function grid_for(count, threads, dev)
  return math.max(1, math.min(ceil_div(count, threads), core.sm_count(dev) * 8))
end

-- a status word read back (the stream waited for) and cleared for the next call
local function take_status(status, stream)
  local s = core.read_word(status, stream)
  if s ~= 0 then status:fill(0, stream) end
  return s
end

-- opts.block, else dflt (lu's: lu_block), else DEFAULT_BLOCK
local function check_block(fname, opts, dflt)
  local nb = opts.block or dflt or DEFAULT_BLOCK
  if math.type(nb) ~= "integer" or nb < 1 or nb > MAXBLOCK then
    fail(fname, "block must be an integer 1..%d, got %s", MAXBLOCK, tostring(nb))
  end
  return nb
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

local function copy(K, dev, stream, count, src, dst)
  K("copy"):launch({grid = grid_for(count, 256, dev), block = 256, stream = stream}, count, src, dst)
end

-- whether lu's chain kernel k (the cluster panel, row_plan, narrow_step, laswp) is launched as a
-- programmatic dependent (culua_dep_wait and culua_dep_release, kernels/culua/common.cuh): each may be
-- scheduled while the kernel before it on its stream finishes, where k.programmatic says
-- its device and driver can (compute capability 9.0, cuLaunchKernelEx); tune.programmatic
-- = false: not
local function dependent(k)
  return k.programmatic and tune.programmatic ~= false
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

local event_on = core.event_on   -- an event of device dev, the current device kept

-- a stream of dev; priority -1 (above the default 0) where the device has priorities
local function stream_on(dev, priority)
  local ok, st = pcall(cuda.stream, {device = dev.ordinal, non_blocking = true, priority = priority})
  if ok then return st end
  return cuda.stream{device = dev.ordinal, non_blocking = true}
end

-- }======================================================

-- {====================================================== checks (the family's entry's and ranks.lua's)

-- n of a square matrix: a 2-D n x n array, or a 1-D array (a view) of n*n elements
local function square(fname, what, A)
  core.check_array(fname, what, A)
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
  core.check_array(fname, "B", B)
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

-- raise unless the arrays are finite: one pass, read back (so that A is untouched when it raises)
-- (and with ipiv, lu_solve's n pivots, 1..n each: the first outside is named; they share
-- the one read-back)
local function check_inputs(fname, K, dev, stream, status, what, X, count, ipiv, n)
  K("check"):launch({grid = grid_for(count, 256, dev), block = 256, stream = stream}, count, X, status)
  if ipiv then
    K("check_pivots", false):launch({grid = grid_for(n, 256, dev), block = 256, stream = stream}, n, ipiv, status)
  end
  local s = core.read_word(status, stream)
  if s == 0 then return end
  status:fill(0, stream)
  if s == 1 or not ipiv then fail(fname, "%s contains NaN or inf", what) end
  local i = n - 1 - (s - 2)
  fail(fname, "ipiv[%d] = %d is out of 1..%d", i + 1, core.read_word(ipiv:view(i + 1, 1), stream), n)
end

-- the status word after a factorization: raise on a zero or non-finite pivot
local function pivot_verdict(fname, s)
  if s == 0 then return end
  if s > 0 then fail(fname, "the matrix is singular: pivot %d is zero", s) end
  fail(fname, "the factorization overflowed: pivot %d is not finite", -s)
end

-- }======================================================

S.tname, S.kernels, S.grid_for, S.take_status, S.check_block = tname, kernels, grid_for, take_status, check_block
S.view, S.gemm_sub, S.esize, S.copy = view, gemm_sub, esize, copy
S.dependent, S.shared_room, S.event_on, S.stream_on = dependent, shared_room, event_on, stream_on
S.square, S.rhs, S.check_inputs, S.pivot_verdict = square, rhs, check_inputs, pivot_verdict

return S
