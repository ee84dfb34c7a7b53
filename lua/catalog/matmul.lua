-- culua.catalog.matmul: cuda.catalog.matmul, C = alpha*A*B + beta*C on float32 and
-- float64 arrays, from the lab's teaching kernels (kernels/matmul.cu) to the
-- Hopper kernels that stand beside cuBLAS (kernels/matmul_sm90*.cu).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local C = cuda._catalog

local fail, dims, ceil_div, one_of, check_array = core.fail, core.dims, core.ceil_div, core.one_of, core.check_array
local sm_count = core.sm_count

local M = {}

-- {====================================================== matmul

local matmul_variants = {"naive", "row", "column", "tiled", "fast", "tf32", "dmma"}
local unrolls = {1, 2, 4, 8}

-- kernels/matmul.cu's shapes (fast's and tf32's tiles and threads), and float32's fast
-- kernel with C staged: its shared memory (16 chunks of 16 bytes a thread, 256 threads)
local MK = core.constants("matmul")
local STAGE_C_BYTES = MK.CULUA_MATMUL_STAGE_C_BYTES

-- the most blocks a grid may have in y (the plain kernels' tiles of rows)
local MAX_GRID_Y = 65535

-- kernel name, -D values, grid and block for one variant (and the launch's shared memory)
local function matmul_plan(fname, variant, t, m, n, A, B, opts)
  local unroll = one_of(fname, "unroll", opts.unroll or 1, unrolls)
  if variant == "naive" then
    local bs = opts.block or 16
    if math.type(bs) ~= "integer" or bs < 1 or bs * bs > 1024 then fail(fname, "block must be a side of 1..32 (a square block), got %s", tostring(bs)) end
    return ("culua_matmul_naive_%s_%d_%d"):format(t, bs, unroll), {"CULUA_ALGO=naive", "CULUA_T=" .. t, "CULUA_P1=" .. bs, "CULUA_P2=" .. unroll},
           {ceil_div(n, bs), ceil_div(m, bs)}, {bs, bs}
  elseif variant == "row" or variant == "column" then
    if t ~= "f32" then fail(fname, "variant '%s' is float32 only", variant) end
    local nt = opts.threads or 256
    if math.type(nt) ~= "integer" or nt < 1 or nt > 1024 then fail(fname, "threads must be 1..1024, got %s", tostring(nt)) end
    local grid = variant == "row" and {ceil_div(n, nt), m} or {ceil_div(m, nt), n}
    return ("culua_matmul_%s_%s_%d_%d"):format(variant, t, nt, unroll), {"CULUA_ALGO=" .. variant, "CULUA_T=" .. t, "CULUA_P1=" .. nt, "CULUA_P2=" .. unroll},
           grid, {nt}
  elseif variant == "tiled" then
    local s = one_of(fname, "tile", opts.tile or 16, {8, 16, 32})
    return ("culua_matmul_tiled_%s_%d_%d"):format(t, s, unroll), {"CULUA_ALGO=tiled", "CULUA_T=" .. t, "CULUA_P1=" .. s, "CULUA_P2=" .. unroll},
           {ceil_div(n, s), ceil_div(m, s)}, {s, s}
  end
  -- fast, tf32: 16-byte loads when rows are whole float4s, 16 bytes apart, and the bases aligned
  local vec = (opts.k % 4 == 0) and (n % 4 == 0) and (opts.lda % 4 == 0) and (opts.ldb % 4 == 0)
              and (A.ptr % 16 == 0) and (B.ptr % 16 == 0) and (opts.cptr % 16 == 0)
  if variant == "tf32" then
    if t ~= "f32" then fail(fname, "variant 'tf32' is float32 only") end
    return vec and "culua_matmul_tf32_vec" or "culua_matmul_tf32", nil,
           {ceil_div(n, MK.CULUA_TF32_TILE), ceil_div(m, MK.CULUA_TF32_TILE)}, {MK.CULUA_TF32_THREADS}
  end
  local tile = t == "f64" and MK.CULUA_FAST_F64_TILE or MK.CULUA_FAST_F32_TILE
  local grid, block = {ceil_div(n, tile), ceil_div(m, tile)}, {MK.CULUA_FAST_THREADS}
  if t == "f64" then return "culua_matmul_fast_f64", nil, grid, block end
  if vec and opts.stage_c then   -- C staged in shared memory (kernels/matmul.cu's fast, CS)
    return "culua_matmul_fast_f32_vec_cs", nil, grid, block, STAGE_C_BYTES
  end
  return vec and "culua_matmul_fast_f32_vec" or "culua_matmul_fast_f32", nil, grid, block
end

-- fast and tf32 in float32 on compute capability 9.0: kernels/matmul_sm90_fast.cu
-- and matmul_sm90.cu (TMA-fed, warp-specialized; tf32 on wgmma), when TMA can address the
-- operands: 16-byte aligned bases and rows 16 bytes apart (lda and ldb multiples of 4; the
-- tensor maps give the sizes, so K and N need not be). Elsewhere, and for blocks that
-- start or are strided off that grain, they are matmul.cu's kernels.
-- Their shapes (tiles, stages, TMA boxes and swizzles) are read from the kernel
-- files, their shared memory from <culua/sm90.cuh>'s CULUA_SM90_SHARED.
local sm90_shared = core.constants("culua/sm90.cuh").CULUA_SM90_SHARED
local T9, F9 = core.constants("matmul_sm90"), core.constants("matmul_sm90_fast")
local sm90 = {
  tf32 = {family = "matmul_sm90", kernel = "culua_matmul_tf32_wgmma", bm = T9.CULUA_TF32_BM, bn = T9.CULUA_TF32_BN,
          abox = {T9.CULUA_TF32_BM, T9.CULUA_TF32_BK, T9.CULUA_TF32_SWIZZLE},
          bbox = {T9.CULUA_TF32_BK, T9.CULUA_TF32_BPANEL, T9.CULUA_TF32_SWIZZLE},
          shared = sm90_shared(T9.CULUA_TF32_BM, T9.CULUA_TF32_BN, T9.CULUA_TF32_BK, T9.CULUA_TF32_STAGES)
                   + T9.CULUA_TF32_CSTAGE,
          rate = 2.8e12, streamk = {0.1}, min_k = 0, c_rows = T9.CULUA_TF32_CROWS},
  fast = {family = "matmul_sm90_fast", kernel = "culua_matmul_fast_tma", bm = F9.CULUA_FAST_BM, bn = F9.CULUA_FAST_BN,
          abox = {F9.CULUA_FAST_BM, F9.CULUA_FAST_BK, F9.CULUA_FAST_SWIZZLE},
          bbox = {F9.CULUA_FAST_BK, F9.CULUA_FAST_BHALF, 0},
          shared = sm90_shared(F9.CULUA_FAST_BM, F9.CULUA_FAST_BN, F9.CULUA_FAST_BK, F9.CULUA_FAST_STAGES),
          rate = 0.35e12, streamk = {0, 0.1}, min_k = 2048},
}

-- Where C has two waves of tiles or more, the fast TMA kernel loses to matmul.cu's
-- below plan.min_k: on an H100, C -= A*B on an 8192-wide matrix's blocks
-- (bench/matmul_ld.lua, session 8) took, TMA against not, 0.88 / 0.47 ms at
-- k = 64, 1.18 / 0.57 at 128, 1.35 / 0.93 at 256, 1.89 / 1.56 at 512 and
-- 2.67 / 2.60 at 1024: its 8-stage k-pipeline hardly fills and its C epilogue
-- weighs more. With fewer tiles its split-K and stream-K keep it ahead (the
-- squares of bench/matmul.lua). tma = true, splits or streamk take it at any k.
local function use_sm90(variant, t, dev, A, B, m, n, k, lda, ldb, opts)
  local plan = sm90[variant]
  if not (plan and t == "f32" and opts.tma ~= false and dev.major == 9 and dev.minor == 0
          and m > 0 and n > 0 and k > 0 and lda % 4 == 0 and ldb % 4 == 0
          and A.ptr % 16 == 0 and B.ptr % 16 == 0) then
    return false
  end
  return k >= plan.min_k or opts.tma == true or opts.splits ~= nil or opts.streamk ~= nil
         or ceil_div(m, plan.bm) * ceil_div(n, plan.bn) < 2 * sm_count(dev)
end

-- stream-K (kernels/culua/sm90.cuh): when the tiles do not make whole waves, sk blocks share
-- the last tiles' k-tiles equally instead of leaving the last wave part idle: the remainder
-- (when it is at least half a wave), or the remainder and one wave before it, so that a
-- block has half a tile's work to two. Returns the stream-K blocks (0: none) and tiles.
-- opts.streamk: false (none), true (sk = the multiprocessors), a count of blocks, or nil: by
-- the share of the waves it saves, at least plan.streamk[1] beyond a wave and
-- plan.streamk[2] under one (nil: never). Measured on an H100 (bench/RESULTS.md):
-- - fast gains wherever it saves (0.80x -> 0.95-0.98x cuBLAS at n = 2560, 0.91x -> 1.06x at
--   3072, split-K's 0.75x -> 1.00x at 1536, +0.5% at 4096 and 8192), except under a wave
--   when it saves little: at 2048, 128 tiles, it lost 1%;
-- - tf32 runs its stream-K tiles slower (its 4-stage ring waits on memory when the blocks
--   read apart): it gains where it saves a tenth or more (2560, 3072), not where the
--   remainder is 3% of the waves (4096 and over), and under a wave it did not gain.
local function sm90_streamk(plan, dev, tiles, opts)
  if opts.streamk == false then return 0, 0 end
  local sk = math.type(opts.streamk) == "integer" and opts.streamk or sm_count(dev)
  local r = tiles % sk
  if r == 0 or (tiles < sk and r < sk / 2) then return 0, 0 end
  if opts.streamk == nil then
    local least = plan.streamk[tiles < sk and 2 or 1]
    if not least or (1 - r / sk) / ceil_div(tiles, sk) < least then return 0, 0 end
  end
  return sk, r >= sk / 2 and r or r + sk
end

-- split-K, where there is no stream-K: how many blocks share a tile's k-tiles. A wave is one
-- block on each multiprocessor; s splits take ceil(tiles * s / sms) waves of 1/s of a tile's
-- work plus a block's fixed cost, and the second kernel reads s slices of C and writes C. That
-- estimate picks s (at most 16, and at least 128 of k a block); a split must save a tenth.
-- plan.rate (a multiprocessor's FLOP/s), the 24 us a block and 2.5 TB/s were fitted to H100
-- timings of n = 1024..3072, where they pick the best of the splits measured (fast: 2 at
-- 1280, 3 at 1536 and 3072, 1 at 2048).
local function sm90_splits(plan, dev, m, n, k, tiles)
  local sms = sm_count(dev)
  local tile_s = 2 * plan.bm * plan.bn * k / plan.rate          -- one tile on one multiprocessor
  local function cost(s)
    return ceil_div(tiles * s, sms) * (tile_s / s + 24e-6) + (s > 1 and (s + 2) * 4 * m * n / 2.5e12 or 0)
  end
  local one = cost(1)
  local best, best_cost = 1, one
  for s = 2, math.min(16, ceil_div(k, 128)) do
    local c = cost(s)
    if c < best_cost then best, best_cost = s, c end
  end
  return best_cost < 0.9 * one and best or 1
end

-- scratch arrays (core.scratch): "partials", float32, split-K's slices or stream-K's
-- partial tiles; "counts", uint32, stream-K's counts, zero between launches (the
-- kernel leaves them so)
core.scratch_kind("partials", "float32")
core.scratch_kind("counts", "uint32", true)

local lowp_c_map   -- matmul_lowp.lua's c_map (C's map for TMA stores), set below
local function matmul_sm90(plan, dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  local kern = core.kernel(plan.family, plan.kernel, nil, dev)
  core.allow_shared(kern, plan.shared)
  local tiles = ceil_div(m, plan.bm) * ceil_div(n, plan.bn)
  local sk, sk_tiles = 0, 0
  if (opts.splits or 1) == 1 then sk, sk_tiles = sm90_streamk(plan, dev, tiles, opts) end
  local splits = opts.splits or (sk > 0 and 1) or sm90_splits(plan, dev, m, n, k, tiles)
  local W, counts = 0, 0
  if splits > 1 then W = core.scratch("partials", dev, opts.stream, splits * m * n) end
  if sk > 0 then
    W = core.scratch("partials", dev, opts.stream, 2 * sk * plan.bm * plan.bn)
    counts = core.scratch("counts", dev, opts.stream, sk_tiles)
  end
  local abox, bbox = plan.abox, plan.bbox
  local amap = A:tensor_map(abox[1], abox[2], abox[3], {rows = m, cols = k, stride = lda * 4})
  local bmap = B:tensor_map(bbox[1], bbox[2], bbox[3], {rows = k, cols = n, stride = ldb * 4})
  local launch = {grid = (tiles - sk_tiles) * splits + sk, block = 384, shared = plan.shared, stream = opts.stream}
  if plan.c_rows then   -- (tf32 writes C by TMA stores where it can, boxes of plan.c_rows rows)
    local cmap, tmac = amap, 0
    if splits == 1 then cmap, tmac = lowp_c_map(Cm, m, n, ldc, amap, plan.c_rows) end
    kern:launch(launch, m, n, k, alpha, amap, bmap, beta, Cm, W, splits, sk, counts, ldc, cmap, tmac)
  else
    kern:launch(launch, m, n, k, alpha, amap, bmap, beta, Cm, W, splits, sk, counts, ldc)
  end
  if splits > 1 then
    local sum = core.kernel("matmul_sm90", "culua_matmul_splitk", nil, dev)
    sum:launch({grid = math.min(ceil_div(m * n, 256), 1024), block = 256, stream = opts.stream},
               m * n, splits, alpha, W, beta, Cm, n, ldc)
  end
  return Cm
end

-- dmma, float64 on tensor cores (compute capability 8.0 and later; kernels/matmul.cu): the
-- tile shapes built, {rows, columns, threads, shared memory}, read from the file's
-- CULUA_DMMA(NAME, BM, BN, WM, WN, STAGES, MINB, EB, BK, BULK) lines and its CULUA_DMMA_SHARED;
-- require("culua.catalog.matmul").tune.dmma_tile (nil: by k, dmma_tile below) picks one.
local dmma_tiles, dmma_names = {}, {}
for _, d in ipairs(core.instances("matmul", "CULUA_DMMA")) do
  local name, bm, bn, wm, wn, stages, _, _, bk = table.unpack(d)
  dmma_tiles[name] = {bm, bn, wm * wn * 32, MK.CULUA_DMMA_SHARED(bm, bn, stages, bk)}
  dmma_names[#dmma_names + 1] = name
end
table.sort(dmma_names)
M.tune = {dmma_tile = nil, dmma_group = nil, dmma_tma = nil, dmma_persistent = nil, stage_c = nil, lowp_sm90 = nil,
          lowp_persistent = nil, tma_store = nil, fp8_tile = nil, fp8_persistent = nil, fp8_programmatic = nil}

-- 128 x 64 for k under 1024 (LU's update; 8 warps until session 29, 128x64b since: below),
-- in 4 warps past it, unless M.tune.dmma_tile says otherwise. On an H100 (bench/matmul.lua, session 13), TFLOP/s,
-- 128x64 / 128x64w8 / 128x128 / 64x128 (cuBLAS DGEMM):
--   4096^3           51.3 / 41.1 / 45.4 / 50.3 (59.1)
--   8192^3           46.9 / 45.3 / 44.6 / 42.2 (56.5)
--   8192^2 x 128     22.7 / 27.5 / 19.7 / 22.7 (29.7)
--   16384^2 x 128    20.6 / 23.9 / 18.8 / 19.5 (26.7)
--   16384^2 x 256    27.5 / 32.1 / 23.5 / 23.4 (47.2)
--
-- Below k = 1024 the tile is 128x64b (session 29, bench/matmul.lua's float64 lu rows, H100,
-- in groups of 8 tile rows, against cuBLAS DGEMM): 8192^2 x 128 / 256 1.00x / 0.99x and
-- 16384^2 x 128 / 256 1.25x / 0.99x, where 128x64w8 gave 0.86x / 0.79x and 1.06x / 0.81x.
-- Its tiles inside C with beta 0 or 1 go out by bulk copies on 9.0, added to C in L2 (no
-- read of C in the block); elsewhere it reads C in batches (kernels/matmul.cu's EB).
local function dmma_tile(k)
  return M.tune.dmma_tile or (k < 1024 and "128x64b" or "128x64")
end

-- dmma on compute capability 9.0 fed by TMA (kernels/matmul_sm90.cu's culua_matmul_dmma_tma:
-- 128 x 128 tiles, a producer warpgroup and two consumer warpgroups, persistent), where TMA
-- can address A and B (v16: 16-byte aligned bases, rows 16 bytes apart) and M.tune.dmma_tma
-- is true, or by default (`auto` below) where k >= 1024.
-- The defaults, where none of M.tune.dmma_tile, dmma_group and dmma_tma is set, are from
-- bench/matmul.lua's sweep on the H100 (bench/RESULTS.md, session 27): k >= 1024, the TMA
-- kernel (0.89x / 0.92x cuBLAS at 4096 / 8192 then, against 0.86x / 0.83x for the tiles by k;
-- with stream-K and its stages released one k-tile late, session 32, 0.92-1.04x / 1.00-1.03x);
-- k < 1024, LU's updates, the tiles by k in groups of 8 tile rows (1.00x against 0.82x at
-- 16384 x 16384 x 128, 0.78x against 0.69x at k = 256; the same at 8192 x 8192 x 128).
-- M.tune.dmma_persistent: nil or true, a block a multiprocessor; false, a block a tile; a
-- count, at most that many blocks (the tests take a few, so that each runs several tiles).
-- Stream-K (culua/sm90.cuh; opts.streamk as for float32): where the tiles leave the last
-- wave part empty, sk = a block a multiprocessor share the last tiles' k-tiles (sm90_streamk
-- above), after the whole waves of the persistent (or a-tile) blocks. By default where it
-- saves at least DMMA_STREAMK[1] of the waves (DMMA_STREAMK[2] under a wave): see
-- bench/RESULTS.md, session 32 (4096 and 8192 on an H100, where the last wave was 0.76 and
-- 0.03 full).
local DMMA_STREAMK = {streamk = {0.02, 0.1}}
core.scratch_kind("partials64", "float64")
local D9 = nil
local function dmma_tma(dev, k, v16, auto)
  return (M.tune.dmma_tma == true or auto and k >= 1024) and dev.major == 9 and dev.minor == 0 and k > 0 and v16
end

local function matmul_dmma_tma(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  D9 = D9 or core.constants("matmul_sm90")
  local bm, bn, bk, panel, swz = D9.CULUA_DMMA_TMA_BM, D9.CULUA_DMMA_TMA_BN, D9.CULUA_DMMA_TMA_BK,
                                 D9.CULUA_DMMA_TMA_PANEL, D9.CULUA_DMMA_TMA_SWIZZLE
  local shared = D9.CULUA_DMMA_TMA_SHARED(D9.CULUA_DMMA_TMA_STAGES)
  local kern = core.kernel("matmul_sm90", "culua_matmul_dmma_tma", nil, dev)
  core.allow_shared(kern, shared)
  local amap = A:tensor_map(bm, bk, swz, {rows = m, cols = k, stride = lda * 8})
  local bmap = B:tensor_map(bk, panel, swz, {rows = k, cols = n, stride = ldb * 8})
  local tiles = ceil_div(m, bm) * ceil_div(n, bn)
  local sk, sk_tiles = sm90_streamk(DMMA_STREAMK, dev, tiles, opts)
  local W, counts = 0, 0
  if sk > 0 then
    W = core.scratch("partials64", dev, opts.stream, 2 * sk * bm * bn)
    counts = core.scratch("counts", dev, opts.stream, sk_tiles)
  end
  local p = core.block_count("matmul", "tune.dmma_persistent", M.tune.dmma_persistent)
  local dp_tiles = tiles - sk_tiles
  local dp = p == false and dp_tiles or math.min(dp_tiles, math.type(p) == "integer" and p or sm_count(dev))
  kern:launch({grid = dp + sk, block = 384, shared = shared, stream = opts.stream},
              m, n, k, alpha, amap, bmap, beta, Cm, ldc, W, sk, sk_tiles, counts)
  return Cm
end

-- M.tune.dmma_group = G (nil or 1: off) launches the mma.sync kernels' grid G times as
-- wide, which the kernel reads as groups of G tile rows walking C's columns together
-- (kernels/matmul.cu's dmma): B is read from memory once a group, not once a tile row.
local function matmul_dmma(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  local t = M.tune
  local auto = t.dmma_tile == nil and t.dmma_group == nil and t.dmma_tma == nil
  local group = t.dmma_group or (auto and k < 1024 and 8 or 1)
  if math.type(group) ~= "integer" or group < 1 then
    fail("matmul", "tune.dmma_group must be a positive integer, got %s", tostring(group))
  end
  core.block_count("matmul", "tune.dmma_persistent", t.dmma_persistent)
  -- A's and B's rows whole 16 bytes from 16-byte aligned bases: TMA's grain, and the
  -- mma.sync tiles' 16-byte copies (_v16)
  local v16 = lda % 2 == 0 and ldb % 2 == 0 and A.ptr % 16 == 0 and B.ptr % 16 == 0
  if dmma_tma(dev, k, v16, auto) then
    return matmul_dmma_tma(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  end
  local shape = dmma_tile(k)
  local tile = dmma_tiles[shape]
  if not tile then one_of("matmul", "tune.dmma_tile", shape, dmma_names) end   -- (raises)
  local kern = core.kernel("matmul", "culua_matmul_dmma_" .. shape .. (v16 and "_v16" or ""), nil, dev)
  core.allow_shared(kern, tile[4])
  local tn, tm = ceil_div(n, tile[2]), ceil_div(m, tile[1])
  group = math.min(group, tm)
  local grid = {tn, tm}
  if group > 1 then grid = {group * tn, ceil_div(tm, group)} end
  kern:launch({grid = grid, block = tile[3], shared = tile[4], stream = opts.stream},
              m, n, k, alpha, A, B, beta, Cm, lda, ldb, ldc)
  return Cm
end

-- whether float32's fast kernel stages C in shared memory (read at the start by cp.async,
-- not at the end): where C is read (beta ~= 0) with its rows 16 bytes apart, on compute
-- capability 9.0, where it was measured (two 80 KiB blocks a multiprocessor fit);
-- M.tune.stage_c = false turns it off. LU's trailing update on an H100, C -= A * B with
-- k = 128: see bench/RESULTS.md, session 21.
local function stage_c(dev, beta, ldc)
  if M.tune.stage_c == false then return false end
  -- (beta as the kernel gets it, a float: one that rounds to 0 there must not read C, whose
  -- NaN would come through 0 * C; the kernels without staging test it themselves)
  return string.unpack("f", string.pack("f", beta)) ~= 0 and ldc % 4 == 0 and dev.major == 9
end

local matmul_options = {"variant", "alpha", "beta", "unroll", "tile", "block", "threads", "m", "n", "k",
                        "lda", "ldb", "ldc", "stream", "tma", "splits", "streamk", "scale_a", "scale_b", "transb"}

-- low precision: float16, bfloat16 and fp8 on tensor cores (matmul_lowp.lua)
local L = require("culua.catalog.matmul_lowp").use(M.tune)
lowp_c_map = L.c_map
M._fp8_plans = L.fp8_plans   -- (the tests and the bench read the tiles built)


-- m, n and k, when given, are integers 0 or more (a product with a zero dimension is
-- ordinary, as in NumPy), the leading dimensions positive integers: checked before the
-- arrays, so that these checks need no GPU
local function check_sizes(fname, opts)
  for _, o in ipairs{"m", "n", "k", "lda", "ldb", "ldc"} do
    local v, least = opts[o], #o == 1 and 0 or 1
    if v ~= nil and (math.type(v) ~= "integer" or v < least) then
      fail(fname, "%s must be %s, got %s", o, least == 0 and "an integer 0 or more" or "a positive integer", tostring(v))
    end
  end
end

-- transb: B is given as B^T (cuBLAS's op(B) = B^T), N x K. fp8 on compute capability 9.0
-- reads it as it is (L.run_bt); every other kernel reads a row-major B, which it gets from
-- a scratch array (per stream, of B's dtype) that B^T is transposed into first, its rows
-- padded to 16 bytes (so that the paths which want whole 16-byte rows can take it)
local bt_kind = {}
for _, dt in ipairs{"float64", "float32", "float16", "bfloat16", "float8_e4m3", "float8_e5m2"} do
  bt_kind[dt] = "transb_" .. dt
  core.scratch_kind(bt_kind[dt], dt)
end
local function b_of_bt(dev, Bt, n, k, ldbt, stream)
  local es = core.dtype_bytes[Bt.dtype]
  local ld = ceil_div(n * es, 16) * 16 // es
  local B = core.scratch(bt_kind[Bt.dtype], dev, stream, k * ld)
  L.transpose(dev, es, Bt, n, k, ldbt, B, ld, stream)
  return B, ld
end

-- rows, cols and leading dimension of operand x. Without ld, as core.dims: a 2-D
-- array is the matrix, a 1-D one needs its sizes given, rows are cols apart. With
-- ld, x (1-D or 2-D) holds a rows x cols matrix from its first element, rows ld
-- apart: a block of a larger matrix, whose sizes must be given (m, n, k).
local function operand(fname, what, x, rows, cols, ld, ldname, rname, cname)
  if x.pitched then fail(fname, "%s is pitched: the catalog expects packed arrays", what) end
  if ld == nil then
    rows, cols = dims(fname, what, x, rows, cols)
    return rows, cols, cols
  end
  if not (rows and cols) then fail(fname, "%s has %s: give its sizes, %s and %s", what, ldname, rname, cname) end
  if ld < cols then fail(fname, "%s = %d is less than %s's rows of %d (%s)", ldname, ld, what, cols, cname) end
  local need = (rows - 1) * ld + cols
  if #x < need then
    fail(fname, "%s has %d elements, fewer than %dx%d with %s = %d needs (%d)", what, #x, rows, cols, ldname, ld, need)
  end
  return rows, cols, ld
end

-- cuda.catalog.matmul(A, B, C [, opts]) -> C = alpha*A*B + beta*C (transb: alpha*A*B^T + beta*C)
--   opts: variant ("fast"), alpha (1), beta (0), unroll, tile, block, threads,
--         m, n, k (for 1-D arrays, and with leading dimensions), lda, ldb, ldc (elements
--         from row to row: A, B, C blocks of larger matrices), stream, tma (false: not the
--         sm_90a kernels),
--         splits (1..64: split-K on the sm_90a kernels; by default chosen by size),
--         streamk (false, true or a count of blocks: stream-K on the sm_90a kernels, float64's too; by default
--         chosen by size), scale_a, scale_b (fp8 A and B: alpha * scale_a * scale_b * A*B),
--         transb (true: B is given as B^T, N x K, rows ldb apart)
--   float16, bfloat16 and fp8 A and B: kernels/matmul_lowp.cu (matmul_lowp.lua's L.check)
function M.matmul(A, B, Cm, opts)
  local fname = "matmul"
  opts = core.options(fname, opts, matmul_options)
  check_sizes(fname, opts)
  local ts = M.tune.tma_store   -- (checked here for every kernel, not only those that write C so)
  if ts ~= nil and type(ts) ~= "boolean" then fail(fname, "tune.tma_store must be a boolean, got %s", tostring(ts)) end
  local transb = core.flag(fname, opts, "transb")
  check_array(fname, "A", A); check_array(fname, "B", B); check_array(fname, "C", Cm)
  local dt = A.dtype
  local lowp = L.inputs[dt] ~= nil
  if dt ~= "float32" and dt ~= "float64" and not lowp then
    fail(fname, "A must be float32, float64, float16, bfloat16, float8_e4m3 or float8_e5m2, got %s", dt)
  end
  if not lowp and (B.dtype ~= dt or Cm.dtype ~= dt) then
    fail(fname, "dtypes differ (A %s, B %s, C %s)", dt, B.dtype, Cm.dtype)
  end
  -- the device asked once: LU calls matmul once a block column, so its overhead counts
  local dev = A.device
  local ao, bo, co = dev.ordinal, B.device.ordinal, Cm.device.ordinal
  if ao ~= bo or ao ~= co then
    fail(fname, "A, B and C must be on one device (%d, %d, %d)", ao, bo, co)
  end
  local m, k, lda = operand(fname, "A", A, opts.m, opts.k, opts.lda, "lda", "m", "k")
  local n, ldb, _
  if transb then
    -- B^T, N x K: messages of its own where a K x N B would pass or mislead
    local shape = opts.ldb == nil and B.shape
    if shape and #shape == 2 and (shape[2] ~= k or (opts.n and shape[1] ~= opts.n)) then
      if opts.n then fail(fname, "B is %dx%d but transb wants N x K = %dx%d", shape[1], shape[2], opts.n, k) end
      fail(fname, "B is %dx%d but transb wants N x K with K = %d (A's columns)", shape[1], shape[2], k)
    end
    if opts.ldb and opts.ldb < k then
      fail(fname, "ldb = %d is less than K = %d: with transb, B is N x K, its rows ldb apart", opts.ldb, k)
    end
    n, _, ldb = operand(fname, "B", B, opts.n, k, opts.ldb, "ldb", "n", "k")
  else
    local k2
    k2, n, ldb = operand(fname, "B", B, k, opts.n, opts.ldb, "ldb", "k", "n")
    if k2 ~= k then fail(fname, "A is %dx%d but B is %dx%d: inner dimensions differ", m, k, k2, n) end
  end
  local _, _, ldc = operand(fname, "C", Cm, m, n, opts.ldc, "ldc", "m", "n")
  if lowp then
    L.check(fname, dev, A, B, Cm, opts)
    for _, o in ipairs{"alpha", "beta"} do
      if opts[o] ~= nil and type(opts[o]) ~= "number" then fail(fname, "%s must be a number, got %s", o, type(opts[o])) end
    end
    if m == 0 or n == 0 then return Cm end
    -- fp8's scales as cuBLASLt's: D = scale_a * scale_b * alpha * A*B + beta * C, folded
    -- into alpha (in double, then the kernel's float)
    local alpha, beta = (opts.alpha or 1) * (opts.scale_a or 1) * (opts.scale_b or 1) + 0.0, (opts.beta or 0) + 0.0
    if transb and k > 0 then
      if L.run_bt(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts) then return Cm end
      B, ldb = b_of_bt(dev, B, n, k, ldb, opts.stream)
    end
    return L.run(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  end
  if opts.scale_a ~= nil or opts.scale_b ~= nil then
    fail(fname, "%s is for fp8 A and B, not %s", opts.scale_a ~= nil and "scale_a" or "scale_b", dt)
  end
  local t = dt == "float32" and "f32" or "f64"
  local variant = one_of(fname, "variant", opts.variant or (core.dmma_for(dt, dev) and "dmma" or "fast"), matmul_variants)
  if t == "f64" and not (variant == "naive" or variant == "tiled" or variant == "fast" or variant == "dmma") then
    fail(fname, "variant '%s' is float32 only (float64: naive, tiled, fast, dmma)", variant)
  end
  if variant == "dmma" then
    if t ~= "f64" then fail(fname, "variant 'dmma' is float64 only") end
    if dev.major < 8 then fail(fname, "variant 'dmma' needs compute capability 8.0 or later, %s has %d.%d", dev.name, dev.major, dev.minor) end
  end
  core.flag(fname, opts, "tma")
  if opts.splits ~= nil and (math.type(opts.splits) ~= "integer" or opts.splits < 1 or opts.splits > 64) then
    fail(fname, "splits must be an integer 1..64, got %s", tostring(opts.splits))
  end
  if opts.streamk ~= nil and type(opts.streamk) ~= "boolean"
     and (math.type(opts.streamk) ~= "integer" or opts.streamk < 1 or opts.streamk > 1024) then
    fail(fname, "streamk must be a boolean or a block count 1..1024, got %s", tostring(opts.streamk))
  end
  if opts.streamk and opts.splits and opts.splits > 1 then
    fail(fname, "streamk and splits > 1 exclude each other (splits %d)", opts.splits)
  end
  for _, o in ipairs{"alpha", "beta"} do
    if opts[o] ~= nil and type(opts[o]) ~= "number" then fail(fname, "%s must be a number, got %s", o, type(opts[o])) end
  end
  -- as floats: to the driver a prebuilt kernel's parameters are only sizes, and an
  -- integer would go as an integer's bits (alpha = 2 would be a denormal)
  local alpha, beta = (opts.alpha or 1) + 0.0, (opts.beta or 0) + 0.0
  if m == 0 or n == 0 then return Cm end   -- C holds nothing: no launch
  -- k == 0: C = beta*C, with no A or B to read (their arrays hold no memory); the
  -- naive kernel's sums over k are then 0, and it reads neither
  if k == 0 then variant = "naive" end
  if transb and k > 0 then B, ldb = b_of_bt(dev, B, n, k, ldb, opts.stream) end
  if use_sm90(variant, t, dev, A, B, m, n, k, lda, ldb, opts) then
    return matmul_sm90(sm90[variant], dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  end
  if variant == "dmma" then
    return matmul_dmma(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  end
  -- the kernel of a product of mm x nn on these arrays, and its launch
  local function plan(mm, nn, a, b, c)
    return matmul_plan(fname, variant, t, mm, nn, a, b,
      {unroll = opts.unroll, tile = opts.tile, block = opts.block, threads = opts.threads, k = k, cptr = c.ptr, lda = lda, ldb = ldb,
       stage_c = variant == "fast" and t == "f32" and stage_c(dev, beta, ldc)})
  end
  local function go(mm, nn, a, b, c, name, defines, grid, block, shared)
    local kern = core.kernel("matmul", name, defines, dev)
    if shared then core.allow_shared(kern, shared) end
    kern:launch({grid = grid, block = block, shared = shared, stream = opts.stream}, mm, nn, k, alpha, a, b, beta, c, lda, ldb, ldc)
  end
  local name, defines, grid, block, shared = plan(m, n, A, B, Cm)
  if grid[2] <= MAX_GRID_Y then
    go(m, n, A, B, Cm, name, defines, grid, block, shared)
    return Cm
  end
  -- grid.y counts tiles of rows ("column": columns), at most 65535 (gridDim.y's limit): past
  -- that, slices of them, each y-block still at least ceil(total / grid.y) of them, on views
  -- of A and C (B and C), each with its own plan (the views' alignment may differ)
  local cols = variant == "column"
  local total = cols and n or m
  local per = MAX_GRID_Y * ceil_div(total, grid[2])
  for s0 = 0, total - 1, per do
    local c = math.min(per, total - s0)
    local a, b, cm, mm, nn = A, B, nil, c, n
    if cols then
      mm, nn = m, c
      if k > 0 then b = B:view(s0 + 1, (k - 1) * ldb + c) end
      cm = Cm:view(s0 + 1, (m - 1) * ldc + c)
    else
      if k > 0 then a = A:view(s0 * lda + 1, (c - 1) * lda + k) end
      cm = Cm:view(s0 * ldc + 1, (c - 1) * ldc + n)
    end
    go(mm, nn, a, b, cm, plan(mm, nn, a, b, cm))
  end
  return Cm
end

-- }======================================================

-- in double precision, on host arrays: C = alpha*A*B + beta*C; A, B, C 2-D host arrays of any dtypes
M.reference = {
  matmul = core.reference("reference.matmul", C.ref_matmul),
}

-- the low-precision checks alone (lowp_check: dtypes, options, the device's compute
-- capability), for the tests: dev and the arrays need only their fields
M._check_lowp = function (dev, A, B, Cm, opts) return L.check("matmul", dev, A, B, Cm, opts or {}) end

M.info = {
  variants = matmul_variants,
  dtypes = {float32 = {"naive", "row", "column", "tiled", "fast", "tf32"}, float64 = {"naive", "tiled", "fast", "dmma"},
            float16 = {"mma"}, bfloat16 = {"mma"}, float8_e4m3 = {"mma"}, float8_e5m2 = {"mma"}},
  knobs = {unroll = unrolls, tile = {8, 16, 32}, block = "naive: square side 1..32", threads = "row/column: 1..1024",
           tma = "fast and tf32 (float32) on compute capability 9.0: false keeps the kernels of other devices; fast takes them from k = 2048 or under two waves of tiles (true: always)",
           splits = "with tma: blocks a tile of C, each over a share of K (split-K); chosen by size when not given",
           streamk = "with tma (and float64's TMA kernel on 9.0): false, true or a block count: blocks share the last tiles' k-tiles equally (stream-K); chosen by size when not given",
           lda = "elements from one row of A to the next (k when packed); with m and k: A a block of a larger matrix",
           ldb = "elements from one row of B to the next (n when packed); with k and n",
           ldc = "elements from one row of C to the next (n when packed); with m and n",
           scale_a = "fp8 A and B: D = alpha * scale_a * scale_b * A*B + beta * C, as cuBLASLt's (default 1)",
           scale_b = "fp8 A and B: see scale_a",
           transb = "true: B is given as B^T, N x K (rows ldb apart, ldb >= k), C = alpha*A*B^T + beta*C, as cuBLAS's op(B) = B^T; fp8 on compute capability 9.0 reads it as it is where TMA can address it (cuBLASLt's TN form, its fast form there), every other path from a scratch B that B^T is transposed into",
           mma = "float16, bfloat16 (compute capability 8.0 and later) and fp8 (8.9 and later) on tensor cores, float32 sums; C in A's dtype or float32 (fp8: bfloat16, float16 or float32); float16 and bfloat16 on 9.0: wgmma fed by TMA where A and B rows are 16-byte aligned (tma = false: mma.sync; require('culua.catalog.matmul').tune.lowp_sm90 = 'ss' (the default) takes the kernel with both operands in shared memory, 'rs' B^T's fragments through registers; tune.lowp_persistent: true, false or a block count, blocks that take tile after tile; ss writes C by TMA stores where C's first element, ldc and rows are whole 16 bytes, tune.tma_store = false: from registers); fp8 on 9.0 likewise, B transposed into scratch first unless given as B^T (transb; tune.fp8_tile, fp8_persistent, fp8_programmatic: see doc/matmul.md)",
           dmma = "float64 on tensor cores (compute capability 8.0 and later): 128 x 64 tiles (below k = 1024 '128x64b'); require('culua.catalog.matmul').tune.dmma_tile = '128x128', '128x64', '64x128' or '128x64w8' fixes the shape, or one of the tiles for LU's updates (C read, k = 128 and 256) whose reads of C go in batches, '128x64w8e1', '128x64w8e2' and '128x64e2', '128x64w8k32' (the same in k-tiles of 32), and '128x64w8b', '128x64b' and '128x64w8k32b', whose tiles inside C, where beta is 0 or 1, go out by bulk copies from shared memory on 9.0 (beta = 1: added to C in L2); tune.dmma_group = G runs the tiles in groups of G tile rows (L2 reuse of B; by default 8 where k < 1024); on 9.0, tune.dmma_tma = true takes the TMA-fed kernel of 128 x 128 tiles (A and B rows 16-byte aligned; by default where k >= 1024; false: never; tune.dmma_persistent = false: a block a tile, a count: that many blocks)"},
  default = "fast (float64: dmma on compute capability 8.0 and later; float16, bfloat16 and fp8: mma, tensor cores with float32 sums)",
}

return M
