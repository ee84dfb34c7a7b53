-- culua.catalog.matmul_lowp: cuda.catalog.matmul's low precision, float16, bfloat16 and
-- fp8 on tensor cores: mma.sync (kernels/matmul_lowp.cu, compute capability 8.0 on), wgmma
-- fed by TMA on 9.0 (kernels/matmul_lowp_sm90.cu; fp8: kernels/matmul_lowp_fp8.cu, after a
-- transpose of B). matmul.lua's M.matmul hands such operands here (L.check, then L.run),
-- and gives its tune table (L.use), whose lowp_sm90, lowp_persistent and fp8_* knobs are read here.

local core = require "culua.catalog.core"

local fail, ceil_div, sm_count = core.fail, core.ceil_div, core.sm_count

local L = {}
local M = {}   -- M.tune: matmul.lua's, from L.use

function L.use(tune)
  M.tune = tune
  return L
end


-- the kernels' names for A's and B's dtypes, and C's
local lowp_in = {float16 = "f16", bfloat16 = "bf16", float8_e4m3 = "e4m3", float8_e5m2 = "e5m2"}
local lowp_out = {float16 = "f16", bfloat16 = "bf16", float32 = "f32"}
local function lowp_size(dt) return lowp_in[dt] and core.dtype_bytes[dt] end
-- the options of the float32 and float64 kernels, which the low-precision one has not
local lowp_refused = {"unroll", "tile", "block", "threads", "splits", "streamk"}

local function is_fp8(dt) return lowp_size(dt) == 1 end

-- A and B of one 16-bit dtype with C in it or in float32, or fp8 A and B (e4m3 and
-- e5m2, any pair) with C in bfloat16, float16 or float32; refused otherwise, and on
-- devices without the instructions (mma.sync f16/bf16: 8.0; e4m3/e5m2: 8.9)
local function lowp_check(fname, dev, A, B, Cm, opts)
  local da, db, dc = A.dtype, B.dtype, Cm.dtype
  if is_fp8(da) then
    if not is_fp8(db) then fail(fname, "A is %s but B is %s: fp8 A takes fp8 B (float8_e4m3 or float8_e5m2)", da, db) end
    if not lowp_out[dc] then fail(fname, "C is %s: with fp8 A and B, C is bfloat16, float16 or float32", dc) end
  else
    if db ~= da then fail(fname, "dtypes differ (A %s, B %s, C %s): %s A takes %s B", da, db, dc, da, da) end
    if dc ~= da and dc ~= "float32" then fail(fname, "C is %s: with %s A and B, C is %s or float32", dc, da, da) end
  end
  if opts.variant ~= nil and opts.variant ~= "mma" then
    fail(fname, "variant '%s' is for float32 and float64; %s takes 'mma' (the default)", tostring(opts.variant), da)
  end
  for _, o in ipairs(lowp_refused) do
    if opts[o] ~= nil then fail(fname, "%s is for float32 and float64, not %s", o, da) end
  end
  core.flag(fname, opts, "tma")
  for _, o in ipairs{"scale_a", "scale_b"} do
    local v = opts[o]
    if v ~= nil then
      if not is_fp8(da) then fail(fname, "%s is for fp8 A and B, not %s", o, da) end
      if type(v) ~= "number" then fail(fname, "%s must be a number, got %s", o, type(v)) end
    end
  end
  local need = is_fp8(da) and 89 or 80
  if dev.major * 10 + dev.minor < need then
    fail(fname, "%s needs compute capability %d.%d or later (tensor-core %s), %s has %d.%d", da, need // 10, need % 10,
         is_fp8(da) and "fp8" or "16-bit", dev.name, dev.major, dev.minor)
  end
end

-- C's dtype as the wgmma kernels take it (culua/matmul_lowp.cuh's codes), read once; and
-- that header's constants
local function lowp_consts() return core.constants("culua/matmul_lowp.cuh") end
local lowp_ctype = nil
local function lowp_codes()
  if not lowp_ctype then
    local codes = lowp_consts()
    lowp_ctype = {float16 = codes.CULUA_F16, bfloat16 = codes.CULUA_BF16, float32 = codes.CULUA_F32}
  end
  return lowp_ctype
end

-- float16 and bfloat16 on compute capability 9.0: kernels/matmul_lowp_sm90.cu (wgmma fed by
-- TMA) where TMA can address A and B (16-byte aligned first elements, rows a multiple of 16
-- bytes apart), unless tma = false; C's dtype goes as a code (culua/matmul_lowp.cuh's CULUA_F16 ...).
-- Two kernels, M.tune.lowp_sm90 picks one (nil: "ss"):
--   rs  B^T's fragments through registers (ldmatrix.trans), 256 x 128 tiles of C
--   ss  both operands from shared memory (B N-major by wgmma's transpose bit), 128 x 256
-- (bench/matmul_lowp.lua sweep times both beside cuBLAS). ss is the default: float16 at
-- n = 4096 / 8192 0.215 / 1.509 ms against rs's 0.259 / 1.654 (0.87x / 0.94x cuBLAS
-- against 0.70x / 0.86x; bfloat16 0.84x / 0.97x), the same results (two H200s' run,
-- bench/RESULTS.md, session 26); both a block a tile then.
-- M.tune.lowp_persistent, for both: true, at most a block a multiprocessor, each taking
-- tiles b, b + grid, ... (the ring runs on from tile to tile, so the next tile's stages
-- fill while C is written); false, a block a tile; an integer, at most that many blocks;
-- nil (the default), true up to 8 waves of tiles and false beyond, as fp8's
-- (fp8_persistent). The H100 sweep (bench/RESULTS.md, session 28) did not choose between
-- them: ss at n = 4096 persistent 0.80x / 0.92x cuBLAS (float16 / bfloat16), a block a
-- tile 0.85x / 0.90x; at 8192 0.92x-0.93x both ways, run to run within 3%.
local function lowp_grid(dev, tiles)
  local pers = core.block_count("matmul", "tune.lowp_persistent", M.tune.lowp_persistent)
  if pers == nil then pers = tiles <= 8 * sm_count(dev) end
  if pers == false then return tiles end
  return math.min(tiles, pers == true and sm_count(dev) or pers)
end
-- C's map for the wgmma kernels' TMA stores (boxes of `rows` x 128 bytes, TMA's 128-byte
-- swizzle: culua/matmul_lowp.cuh's LOWP_C_ROWS for lowp_ss_store_tma, matmul_sm90.cu's
-- CULUA_TF32_CROWS for tf32) where TMA can address C (its first element and rows 16-byte
-- aligned; rows at most 2^32 bytes apart, as x:tensor_map takes them), a row of C is whole
-- 16 bytes, and M.tune.tma_store is not false: the map and 1; else `other` (any map: it
-- stands in, unread) and 0, and the kernel writes C from registers. (A row that ends inside
-- 16 bytes had the elements after its end written by the stores on an H100: t/038's views,
-- session 33.) There the direct stores kept the tensor cores idle for 19k of every 65k
-- cycles of a 128 x 256 float16 tile at n = 4096 (ncu, bench/RESULTS.md, session 33).
-- matmul.lua's tf32 takes it as L.c_map.
local function c_map(Cm, m, n, ldc, other, rows)   -- (matmul.lua's M.matmul checked tune.tma_store)
  local es = core.dtype_bytes[Cm.dtype]
  if M.tune.tma_store == false or Cm.ptr % 16 ~= 0 or ldc * es % 16 ~= 0 or n * es % 16 ~= 0 or ldc * es > 1 << 32 then
    return other, 0
  end
  return Cm:tensor_map(rows, 128 // es, 128, {rows = m, cols = n, stride = ldc * es}), 1
end
L.c_map = c_map

local LOWP90 = nil
local lowp_sm90_kernels = nil
local function matmul_lowp_sm90(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  if not LOWP90 then
    LOWP90 = core.constants("matmul_lowp_sm90")
    lowp_sm90_kernels = {
      rs = {prefix = "culua_matmul_lowp_wgmma_", bm = LOWP90.LOWP_SM90_BM, bn = LOWP90.LOWP_SM90_BN,
            bk = LOWP90.LOWP_SM90_BK, shared = LOWP90.LOWP_SM90_SHARED},
      ss = {prefix = "culua_matmul_lowp_wgmma_ss_", bm = LOWP90.LOWP_SS_BM, bn = LOWP90.LOWP_SS_BN,
            bk = LOWP90.LOWP_SS_BK, shared = LOWP90.LOWP_SS_SHARED},
    }
  end
  local which = M.tune.lowp_sm90 or "ss"
  local plan = lowp_sm90_kernels[which]
  if not plan then fail("matmul", "tune.lowp_sm90 must be 'rs' or 'ss', got %s", tostring(which)) end
  local bm, bn, bk = plan.bm, plan.bn, plan.bk
  local kern = core.kernel("matmul_lowp_sm90", plan.prefix .. lowp_in[A.dtype], nil, dev)
  core.allow_shared(kern, plan.shared)
  -- A in bm x bk boxes, B in bk x 64 panels: a row of 64 16-bit elements is one 128-byte swizzle
  local amap = A:tensor_map(bm, bk, 128, {rows = m, cols = k, stride = lda * 2})
  local bmap = B:tensor_map(bk, 64, 128, {rows = k, cols = n, stride = ldb * 2})
  local launch = {grid = lowp_grid(dev, ceil_div(m, bm) * ceil_div(n, bn)), block = 384, shared = plan.shared, stream = opts.stream}
  if which == "ss" then   -- (ss writes C through TMA stores where it can)
    local cmap, tmac = c_map(Cm, m, n, ldc, amap, lowp_consts().LOWP_C_ROWS)
    kern:launch(launch, m, n, k, alpha, amap, bmap, beta, Cm, ldc, lowp_codes()[Cm.dtype], cmap, tmac)
  else
    kern:launch(launch, m, n, k, alpha, amap, bmap, beta, Cm, ldc, lowp_codes()[Cm.dtype])
  end
  return Cm
end

-- fp8 on compute capability 9.0: kernels/matmul_lowp_fp8.cu, where TMA can address A and B
-- as for 16-bit. fp8 wgmma reads B K-major, so the product (wgmma fed by TMA, 128 x BN tiles,
-- S stages of 128 of K) reads A and B^T: B^T written first into a scratch array (rows 16
-- bytes apart) by L.transpose, or the caller's own where it gives B^T (matmul's transb:
-- L.run_bt below). Its tiles are the file's LOWP_FP8 lines:
-- every pair of e4m3 and e5m2 in the first line's tile (the default), e4m3 x e4m3 in a
-- few more, and in clusters of two blocks that share B^T's tile (LOWP_FP8_CLUSTER lines:
-- TMA multicast, tiles taken two above each other). Knobs (bench/matmul_lowp.lua sweep
-- times them), in M.tune:
--   fp8_tile          "n256s4" (nil: FP8_DEFAULT below), "n256s3", "n128s4", "n128s6",
--                     "n256s4c2" (clusters of two)
--   fp8_persistent    true: at most a block a multiprocessor (clusters: as many as
--                     fit at once), each taking tiles b, b + grid, ... (the ring runs on
--                     from tile to tile); false: a block a tile; an integer: at most that
--                     many blocks; nil (the default): true up to 8 waves of tiles, false beyond
--   fp8_programmatic  nil or true: the product a programmatic dependent of the transpose
--                     where the device can (its blocks set up while the transpose ends); false: not

-- Y = X^T, bit for bit (kernels/matmul_transpose.cu, the kernel of es-byte elements): X is
-- rows x cols, rows ldx elements apart; Y is cols x rows, rows ldy apart, with its base
-- 16-byte aligned and ldy * es a multiple of 16 at least rows * es (each row of Y is written
-- to the next 16 bytes, zeros past rows). fp8's B^T below, and matmul.lua's transb (B from
-- the B^T given).
local TR = nil
local transpose_kernels = {[1] = "culua_matmul_transpose_1", [2] = "culua_matmul_transpose_2",
                           [4] = "culua_matmul_transpose_4", [8] = "culua_matmul_transpose_8"}
function L.transpose(dev, es, X, rows, cols, ldx, Y, ldy, stream)
  TR = TR or core.constants("matmul_transpose")
  local tile = es == 1 and TR.MATMUL_T_TILE1 or TR.MATMUL_T_TILE(es)
  local tr = core.kernel("matmul_transpose", transpose_kernels[es], nil, dev)
  tr:launch({grid = {ceil_div(cols, tile), math.min(ceil_div(rows, tile), 65535)}, block = TR.MATMUL_T_THREADS, stream = stream},
            rows, cols, X, ldx, Y, ldy)
end

-- fp8's B^T, uint8: a scratch array per stream (core.scratch)
core.scratch_kind("fp8_bt", "uint8")
-- the default tile, where the pair has it built (else the pair's first)
local FP8_DEFAULT = "n256s4"
local FP8 = nil
local function fp8_plans()
  if FP8 then return FP8 end
  local K8 = core.constants("matmul_lowp_fp8")
  FP8 = {bm = K8.LOWP_FP8_BM, bk = K8.LOWP_FP8_BK, pairs = {}}
  local lines = core.instances("matmul_lowp_fp8", "LOWP_FP8")
  for _, l in ipairs(core.instances("matmul_lowp_fp8", "LOWP_FP8_CLUSTER")) do lines[#lines + 1] = l end
  for _, l in ipairs(lines) do
    local a, b, bn, stages, cl = table.unpack(l)
    local name = ("n%ds%d"):format(bn, stages) .. (cl and "c" .. cl or "")
    local pair = FP8.pairs[a .. "_" .. b] or {default = name, tiles = {}, names = {}}
    FP8.pairs[a .. "_" .. b] = pair
    pair.tiles[name] = {bn = bn, stages = stages, cluster = cl or 1, shared = K8.LOWP_FP8_SHARED(bn, stages)}
    pair.names[#pair.names + 1] = name
  end
  for _, pair in pairs(FP8.pairs) do
    if pair.tiles[FP8_DEFAULT] then pair.default = FP8_DEFAULT end
  end
  return FP8
end
L.fp8_plans = fp8_plans   -- (the tests and the bench read the tiles built)

-- the most clusters of kernel k's (a plan's) that fit on the device at once, asked once
local clusters_fit = setmetatable({}, {__mode = "k"})
local function fp8_clusters(k, plan)
  local c = clusters_fit[k]
  if not c then
    c = k:max_active_clusters({block = 384, shared = plan.shared, cluster = plan.cluster})
    if c < 1 then fail("matmul", "no cluster of %d blocks of %d bytes of shared memory fits this device", plan.cluster, plan.shared) end
    clusters_fit[k] = c
  end
  return c
end

-- given_bt: B is B^T already (N x K, rows ldb apart; L.run_bt), read as it is
local function matmul_fp8_sm90(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts, given_bt)
  local P = fp8_plans()
  local a, b = lowp_in[A.dtype], lowp_in[B.dtype]
  local pair = P.pairs[a .. "_" .. b]
  local tile = M.tune.fp8_tile or pair.default
  local plan = pair.tiles[tile]
  if not plan then
    fail("matmul", "tune.fp8_tile is %s: %s x %s is built in %s", tostring(tile), A.dtype, B.dtype, table.concat(pair.names, ", "))
  end
  local pers = core.block_count("matmul", "tune.fp8_persistent", M.tune.fp8_persistent)
  local Bt, ldt = B, ldb
  if not given_bt then
    ldt = ceil_div(k, 16) * 16
    Bt = core.scratch("fp8_bt", dev, opts.stream, n * ldt)
    L.transpose(dev, 1, B, k, n, ldb, Bt, ldt, opts.stream)
  end
  local kern = core.kernel("matmul_lowp_fp8", ("culua_matmul_lowp_fp8_%s_%s_%s"):format(a, b, tile), nil, dev)
  core.allow_shared(kern, plan.shared)
  -- A in 128 x 128 boxes, B^T in BN x 128: a row of 128 fp8 elements is one 128-byte swizzle
  -- (in clusters of two, each block copies half of B^T's tile into both)
  local cl = plan.cluster
  local amap = A:tensor_map(P.bm, P.bk, 128, {rows = m, cols = k, stride = lda})
  local bmap = Bt:tensor_map(plan.bn // cl, P.bk, 128, {rows = n, cols = k, stride = ldt})
  -- units: a tile a block, or cl tiles one above the other a cluster
  local units = ceil_div(m, P.bm * cl) * ceil_div(n, plan.bn)
  -- by default, persistent up to 8 waves of tiles, a block a tile beyond: the H100 sweep
  -- (RESULTS, session 27) gave 0.77x cuBLASLt persistent and 0.67x a block a tile at 4096
  -- (512 tiles), 0.81x and 0.88x at 8192 (2048 tiles)
  if pers == nil then pers = units <= 8 * sm_count(dev) end
  local most = math.type(pers) == "integer" and math.max(1, pers // cl)
               or cl > 1 and fp8_clusters(kern, plan) or sm_count(dev)
  local grid = cl * (pers == false and units or math.min(units, most))
  kern:launch({grid = grid, block = 384, shared = plan.shared, stream = opts.stream, cluster = cl > 1 and cl or nil,
               programmatic = not given_bt and M.tune.fp8_programmatic ~= false and kern.programmatic},
              m, n, k, alpha, amap, bmap, beta, Cm, ldc, lowp_codes()[Cm.dtype],
              c_map(Cm, m, n, ldc, amap, lowp_consts().LOWP_C_ROWS))
  return Cm
end

-- matmul's transb: Bt is B^T (N x K, rows ldb apart), k > 0. fp8 on 9.0 reads it as it is,
-- with no transpose, where TMA can address A and Bt (the test L.run makes of A and B, and
-- cuBLASLt's "TN" form); nil elsewhere, where the caller makes B of it for L.run.
function L.run_bt(dev, A, Bt, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  if lowp_size(A.dtype) == 1 and opts.tma ~= false and dev.major == 9 and dev.minor == 0
     and lda % 16 == 0 and ldb % 16 == 0 and A.ptr % 16 == 0 and Bt.ptr % 16 == 0 then
    return matmul_fp8_sm90(dev, A, Bt, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts, true)
  end
end

local LOWP = nil   -- kernels/matmul_lowp.cu's tile and shared memory, read once
local function matmul_lowp(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  local es = lowp_size(A.dtype)
  if opts.tma ~= false and dev.major == 9 and dev.minor == 0 and k > 0
     and (lda * es) % 16 == 0 and (ldb * es) % 16 == 0 and A.ptr % 16 == 0 and B.ptr % 16 == 0 then
    if es == 2 then return matmul_lowp_sm90(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts) end
    return matmul_fp8_sm90(dev, A, B, Cm, m, n, k, lda, ldb, ldc, alpha, beta, opts)
  end
  LOWP = LOWP or core.constants("matmul_lowp")
  local bm, bn = LOWP.LOWP_BM, LOWP.LOWP_BN
  if ceil_div(m, bm) > 65535 then fail("matmul", "m = %d is more than %d rows of tiles (%d rows)", m, 65535, 65535 * bm) end
  -- 16-byte copies where every row starts on 16 bytes
  local vec = (lda * es) % 16 == 0 and (ldb * es) % 16 == 0 and A.ptr % 16 == 0 and B.ptr % 16 == 0
  local a, b, c = lowp_in[A.dtype], lowp_in[B.dtype], lowp_out[Cm.dtype]
  local name = ("culua_matmul_lowp_%s_%s_%s%s"):format(a, b, c, vec and "_vec" or "")
  local kern = core.kernel("matmul_lowp", name, {"CULUA_LOWP_A=" .. a, "CULUA_LOWP_B=" .. b, "CULUA_LOWP_C=" .. c}, dev)
  core.allow_shared(kern, LOWP.LOWP_SHARED)
  kern:launch({grid = {ceil_div(n, bn), ceil_div(m, bm)}, block = LOWP.LOWP_THREADS, shared = LOWP.LOWP_SHARED, stream = opts.stream},
              m, n, k, alpha, A, B, beta, Cm, lda, ldb, ldc)
  return Cm
end

L.inputs, L.check, L.run = lowp_in, lowp_check, matmul_lowp

return L
