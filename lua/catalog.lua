-- culua.catalog: cuda.catalog, the prebuilt kernel families.
--
-- Kernels come from the fatbin that nvcc built (loaded once per device, on
-- first use); a variant that is not prebuilt (another tile, unroll factor or
-- block shape) is compiled by NVRTC from the same embedded source with -D
-- values, through the disk cache. Catalog functions check shapes, dtypes and
-- devices, take an optional stream, and never synchronize.

local cuda = require "cuda"
local C = cuda._catalog

local catalog = {}

-- {====================================================== kernels

-- per state, per device ordinal: loaded family modules and kernels by name
local cache = {}

-- forget every loaded module (cuda.reset() calls this: they are gone)
function catalog.clear()
  cache = {}
end

local function device_cache(dev)
  local c = cache[dev.ordinal]
  if not c then
    c = {modules = {}, kernels = {}}
    cache[dev.ordinal] = c
  end
  return c
end

local families = {}
for _, f in ipairs(C.families()) do families[f] = true end

-- the kernel `name` of `family` on `dev` (default: the current device): prebuilt,
-- or compiled for that device with `defines` ({"A=1", ...})
function catalog.kernel(family, name, defines, dev)
  if not families[family] then error(("cuda.catalog: no kernel family '%s'"):format(tostring(family)), 2) end
  dev = dev or cuda.device()
  local c = device_cache(dev)
  local k = c.kernels[name]
  if k then return k end
  local mod = c.modules[family]
  if mod == nil then
    mod = cuda.load(C.fatbin(family), {device = dev.ordinal})
    c.modules[family] = mod
  end
  local ok, res = pcall(mod.kernel, mod, name)
  if ok then
    k = res
  elseif defines and tostring(res):find("no kernel", 1, true) then
    local opts = {"-std=c++17", ("-arch=compute_%d%d"):format(dev.major, dev.minor)}
    for _, d in ipairs(defines) do opts[#opts + 1] = "-D" .. d end
    local prog = cuda.compile(C.source(family), {options = opts, name = family .. ".cu", file = "kernels/" .. family .. ".cu", line = 1})
    k = prog:module({device = dev.ordinal}):kernel(name)
  else
    error(res, 2)
  end
  c.kernels[name] = k
  return k
end

-- }======================================================


-- {====================================================== argument checks

local function fail(fname, fmt, ...)
  error(("cuda.catalog.%s: " .. fmt):format(fname, ...), 3)
end

local function check_array(fname, what, x)
  if cuda.type(x) ~= "cuda.array" then fail(fname, "%s must be a cuda.array, got %s", what, cuda.type(x) or type(x)) end
  return x
end

-- rows, cols of a 2-D array, or of a 1-D array with the dims given
local function dims(fname, what, x, rows, cols)
  local shape = x.shape
  if #shape == 2 then
    if (rows and rows ~= shape[1]) or (cols and cols ~= shape[2]) then
      fail(fname, "%s is %dx%d, expected %dx%d", what, shape[1], shape[2], rows or shape[1], cols or shape[2])
    end
    return shape[1], shape[2]
  end
  if not (rows and cols) then
    fail(fname, "%s is 1-D (%d elements): make it 2-D, or give m, n and k", what, #x)
  end
  if #x < rows * cols then
    fail(fname, "%s has %d elements, fewer than %dx%d", what, #x, rows, cols)
  end
  return rows, cols
end

local function ceil_div(a, b) return (a + b - 1) // b end

local function one_of(fname, what, v, allowed)
  for _, a in ipairs(allowed) do if v == a then return v end end
  local s = {}
  for _, a in ipairs(allowed) do s[#s + 1] = tostring(a) end
  fail(fname, "%s must be one of %s, got %s", what, table.concat(s, ", "), tostring(v))
end

-- }======================================================


-- {====================================================== matmul

local matmul_variants = {"naive", "row", "column", "tiled", "fast", "tf32"}
local unrolls = {1, 2, 4, 8}

-- kernel name, -D values, grid and block for one variant
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
  -- fast, tf32: 16-byte loads when rows are whole float4s and the bases aligned
  local vec = (opts.k % 4 == 0) and (n % 4 == 0) and (A.ptr % 16 == 0) and (B.ptr % 16 == 0) and (opts.cptr % 16 == 0)
  if variant == "tf32" then
    if t ~= "f32" then fail(fname, "variant 'tf32' is float32 only") end
    return vec and "culua_matmul_tf32_vec" or "culua_matmul_tf32", nil, {ceil_div(n, 128), ceil_div(m, 128)}, {256}
  end
  if t == "f64" then
    return "culua_matmul_fast_f64", nil, {ceil_div(n, 64), ceil_div(m, 64)}, {256}
  end
  return vec and "culua_matmul_fast_f32_vec" or "culua_matmul_fast_f32", nil, {ceil_div(n, 128), ceil_div(m, 128)}, {256}
end

-- fast and tf32 in float32 on compute capability 9.0: kernels/matmul_sm90_fast.cu
-- and matmul_sm90.cu (TMA-fed, warp-specialized; tf32 on wgmma), when TMA can address the
-- operands: 2-D arrays, K and N multiples of 4, 16-byte aligned bases.
-- Elsewhere they are matmul.cu's kernels.
local function sm90_shared(bm, bn, bk, stages)   -- CULUA_SM90_SHARED(BM, BN, BK, STAGES)
  return stages * (bm * bk * 4 + bk * bn * 4) + 2 * stages * 8 + 1024
end
local sm90 = {
  tf32 = {family = "matmul_sm90", kernel = "culua_matmul_tf32_wgmma", bm = 256, bn = 128,
          abox = {256, 32, 128}, bbox = {32, 32, 128}, shared = sm90_shared(256, 128, 32, 4), rate = 2.8e12,
          streamk = {0.1}},
  fast = {family = "matmul_sm90_fast", kernel = "culua_matmul_fast_tma", bm = 128, bn = 256,
          abox = {128, 16, 64}, bbox = {16, 128, 0}, shared = sm90_shared(128, 256, 16, 8), rate = 0.35e12,
          streamk = {0, 0.1}},
}
local sm90_ready = setmetatable({}, {__mode = "k"})

local function use_sm90(variant, t, A, B, m, n, k, opts)
  local dev = A.device
  return sm90[variant] and t == "f32" and opts.tma ~= false and dev.major == 9 and dev.minor == 0
         and #A.shape == 2 and #B.shape == 2 and m > 0 and k % 4 == 0 and n % 4 == 0
         and A.ptr % 16 == 0 and B.ptr % 16 == 0
end

-- multiprocessors, asked of the driver once a device
local sm_counts = {}
local function sm_count(dev)
  sm_counts[dev.ordinal] = sm_counts[dev.ordinal] or dev:attribute("multiprocessor_count")
  return sm_counts[dev.ordinal]
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

-- a stream's (or, for the default stream, a device's) scratch array of a kind: a stream's
-- work is ordered, two streams' is not. They go with the garbage collector. "partials":
-- float32, split-K's slices or stream-K's partial tiles; "counts": uint32, stream-K's
-- counts, zero between launches (the kernel leaves them so).
local scratch = {partials = {dtype = "float32", streams = setmetatable({}, {__mode = "k"}), devices = setmetatable({}, {__mode = "v"})},
                 counts = {dtype = "uint32", zero = true, streams = setmetatable({}, {__mode = "k"}), devices = setmetatable({}, {__mode = "v"})}}
local function sm90_scratch(kind, dev, stream, n)
  local sc = scratch[kind]
  local w
  if stream then w = sc.streams[stream] else w = sc.devices[dev.ordinal] end
  if not w or #w < n then
    w = cuda.array(sc.dtype, n, {device = dev.ordinal})
    if sc.zero then w:fill(0, stream) end   -- on the stream, ahead of the kernel; the default stream's waits, once
    if stream then sc.streams[stream] = w else sc.devices[dev.ordinal] = w end
  end
  return w
end

local function matmul_sm90(plan, A, B, Cm, m, n, k, alpha, beta, opts)
  local dev = A.device
  local kern = catalog.kernel(plan.family, plan.kernel, nil, dev)
  if not sm90_ready[kern] then
    kern:set_max_dynamic_shared(plan.shared)
    sm90_ready[kern] = true
  end
  local tiles = ceil_div(m, plan.bm) * ceil_div(n, plan.bn)
  local sk, sk_tiles = 0, 0
  if (opts.splits or 1) == 1 then sk, sk_tiles = sm90_streamk(plan, dev, tiles, opts) end
  local splits = opts.splits or (sk > 0 and 1) or sm90_splits(plan, dev, m, n, k, tiles)
  local W, counts = 0, 0
  if splits > 1 then W = sm90_scratch("partials", dev, opts.stream, splits * m * n) end
  if sk > 0 then
    W = sm90_scratch("partials", dev, opts.stream, 2 * sk * plan.bm * plan.bn)
    counts = sm90_scratch("counts", dev, opts.stream, sk_tiles)
  end
  kern:launch({grid = (tiles - sk_tiles) * splits + sk, block = 384, shared = plan.shared, stream = opts.stream},
              m, n, k, alpha, A:tensor_map(table.unpack(plan.abox)), B:tensor_map(table.unpack(plan.bbox)),
              beta, Cm, W, splits, sk, counts)
  if splits > 1 then
    local sum = catalog.kernel("matmul_sm90", "culua_matmul_splitk", nil, dev)
    sum:launch({grid = math.min(ceil_div(m * n, 256), 1024), block = 256, stream = opts.stream},
               m * n, splits, alpha, W, beta, Cm)
  end
  return Cm
end

-- cuda.catalog.matmul(A, B, C [, opts]) -> C = alpha*A*B + beta*C
--   opts: variant ("fast"), alpha (1), beta (0), unroll, tile, block, threads,
--         m, n, k (for 1-D arrays), stream, tma (false: not the sm_90a kernels),
--         splits (1..64: split-K on the sm_90a kernels; by default chosen by size),
--         streamk (false, true or a count of blocks: stream-K on the sm_90a kernels; by default
--         chosen by size)
function catalog.matmul(A, B, Cm, opts)
  local fname = "matmul"
  opts = opts or {}
  if type(opts) ~= "table" then fail(fname, "opts must be a table, got %s", type(opts)) end
  check_array(fname, "A", A); check_array(fname, "B", B); check_array(fname, "C", Cm)
  local dt = A.dtype
  if dt ~= "float32" and dt ~= "float64" then fail(fname, "A must be float32 or float64, got %s", dt) end
  if B.dtype ~= dt or Cm.dtype ~= dt then
    fail(fname, "dtypes differ (A %s, B %s, C %s)", dt, B.dtype, Cm.dtype)
  end
  if A.device.ordinal ~= B.device.ordinal or A.device.ordinal ~= Cm.device.ordinal then
    fail(fname, "A, B and C must be on one device (%d, %d, %d)", A.device.ordinal, B.device.ordinal, Cm.device.ordinal)
  end
  local m, k = dims(fname, "A", A, opts.m, opts.k)
  local k2, n = dims(fname, "B", B, k, opts.n)
  if k2 ~= k then fail(fname, "A is %dx%d but B is %dx%d: inner dimensions differ", m, k, k2, n) end
  dims(fname, "C", Cm, m, n)
  local variant = one_of(fname, "variant", opts.variant or "fast", matmul_variants)
  local t = dt == "float32" and "f32" or "f64"
  if t == "f64" and not (variant == "naive" or variant == "tiled" or variant == "fast") then
    fail(fname, "variant '%s' is float32 only (float64: naive, tiled, fast)", variant)
  end
  if opts.tma ~= nil and type(opts.tma) ~= "boolean" then fail(fname, "tma must be a boolean, got %s", type(opts.tma)) end
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
  if use_sm90(variant, t, A, B, m, n, k, opts) then
    return matmul_sm90(sm90[variant], A, B, Cm, m, n, k, alpha, beta, opts)
  end
  local name, defines, grid, block = matmul_plan(fname, variant, t, m, n, A, B, {unroll = opts.unroll, tile = opts.tile, block = opts.block, threads = opts.threads, k = k, cptr = Cm.ptr})
  local kern = catalog.kernel("matmul", name, defines, A.device)
  kern:launch({grid = grid, block = block, stream = opts.stream}, m, n, k, alpha, A, B, beta, Cm)
  return Cm
end

-- }======================================================


-- {====================================================== grid barrier

local barrier = {}
catalog.barrier = barrier

barrier.kinds = {"seed", "seed_asm", "sense", "grid", "coop"}
barrier.words = 2176   -- CULUA_BARRIER_WORDS of <culua/barrier.cuh>

-- the barrier state: CULUA_BARRIER_WORDS words, zeroed before each launch
function barrier.state(device)
  return cuda.array("uint32", barrier.words, device and {device = device} or nil)
end

-- the most blocks of `block` threads that are all resident at once
function barrier.max_grid(kern, block, shared)
  return kern:max_cooperative_grid(block, shared or 0)
end

-- barrier.launch(kernel, {grid =, block =, shared =, stream =, state =, cooperative =}, ...)
-- sizes the grid from occupancy when grid is not given, refuses a grid that cannot
-- be co-resident (it would hang at the first barrier), zeroes state, launches.
function barrier.launch(kern, cfg, ...)
  local fname = "barrier.launch"
  if type(cfg) ~= "table" then fail(fname, "config must be a table, got %s", type(cfg)) end
  local block = cfg.block
  if math.type(block) ~= "integer" then fail(fname, "block must be a thread count (1-D), got %s", tostring(block)) end
  local max = barrier.max_grid(kern, block, cfg.shared)
  local grid = cfg.grid or max
  if math.type(grid) ~= "integer" or grid < 1 then fail(fname, "grid must be a positive block count, got %s", tostring(grid)) end
  if grid > max then
    fail(fname, "a grid of %d blocks of %d threads cannot be co-resident on %s (at most %d); " ..
         "the barrier would wait forever", grid, block, cuda.device().name, max)
  end
  if cfg.state then cfg.state:fill(0, cfg.stream) end
  kern:launch({grid = grid, block = block, shared = cfg.shared, stream = cfg.stream, cooperative = cfg.cooperative}, ...)
  return grid
end

local xpx_kinds = {"none", "block", "seed", "seed_asm", "sense", "grid", "coop"}
local xpx_phases = {"shared", "global"}

-- the experiment's common options: blocks, threads, phase; the kernel's name suffix
local function xpx_opts(fname, X, P, opts)
  check_array(fname, "X", X); check_array(fname, "P", P)
  opts = opts or {}
  if type(opts) ~= "table" then fail(fname, "opts must be a table, got %s", type(opts)) end
  local blocks, threads = opts.blocks, opts.threads
  if math.type(blocks) ~= "integer" or math.type(threads) ~= "integer" then fail(fname, "opts.blocks and opts.threads are required integers") end
  local n = blocks * threads
  if X.dtype ~= "float32" or P.dtype ~= "float32" then fail(fname, "X and P must be float32") end
  if #X < n or #P < n then fail(fname, "X and P need %d elements (blocks x threads), have %d and %d", n, #X, #P) end
  local phase = one_of(fname, "phase", opts.phase or "shared", xpx_phases)
  return opts, blocks, threads, n, phase == "global" and "_global" or ""
end

-- seed 001's experiment: `transforms` X -> P -> X transforms in one launch (SKL).
-- opts: blocks, threads, transforms (1), phase ("shared": X staged in shared
-- memory; "global": read from global memory as the seed's kernel does), state, stream.
-- X and P hold blocks*threads floats.
function barrier.xpx(kind, X, P, opts)
  local fname = "barrier.xpx"
  one_of(fname, "kind", kind, xpx_kinds)
  local blocks, threads, n, suffix
  opts, blocks, threads, n, suffix = xpx_opts(fname, X, P, opts)
  local state = opts.state or barrier.state(X.device.ordinal)
  local kern = catalog.kernel("barrier", "culua_xpx_" .. kind .. suffix, nil, X.device)
  local args = {X, P, n, state, 2 * (opts.transforms or 1)}
  if kind == "none" or kind == "block" then
    kern:launch({grid = blocks, block = threads, stream = opts.stream}, table.unpack(args))
  else
    barrier.launch(kern, {grid = blocks, block = threads, state = state, stream = opts.stream, cooperative = kind == "coop"},
                   table.unpack(args))
  end
  return X
end

-- the words MKL's launches pass (their one phase meets no barrier), one array a device
local mkl_state = setmetatable({}, {__mode = "v"})

-- the same transforms as two launches each (MKL): the kernel boundary is the barrier.
-- opts as for xpx, and kind ("none"): whose kernel to launch once a phase, so that
-- SKL with that kind and MKL run the same machine code
function barrier.mkl(X, P, opts)
  local fname = "barrier.mkl"
  local blocks, threads, n, suffix
  opts, blocks, threads, n, suffix = xpx_opts(fname, X, P, opts)
  local kind = one_of(fname, "kind", opts.kind or "none", xpx_kinds)
  local dev = X.device.ordinal
  local state = mkl_state[dev] or barrier.state(dev)   -- held here: the table's hold is weak
  mkl_state[dev] = state
  local kern = catalog.kernel("barrier", "culua_xpx_" .. kind .. suffix, nil, X.device)
  local cfg = {grid = blocks, block = threads, stream = opts.stream}
  for _ = 1, opts.transforms or 1 do
    kern:launch(cfg, X, P, n, state, 1)
    kern:launch(cfg, P, X, n, state, 1)
  end
  return X
end

-- }======================================================


-- {====================================================== CPU references

-- in double precision, on host arrays, for checking the GPU's results
catalog.reference = {
  -- C = alpha*A*B + beta*C; A, B, C 2-D host arrays of any dtypes
  matmul = function (A, B, Cm, alpha, beta) return C.ref_matmul(A, B, Cm, alpha, beta) end,
}

-- }======================================================


-- cuda.catalog.list() -> what is there
function catalog.list()
  return {
    families = C.families(),
    headers = (function () local h = {} for name in pairs(C.headers()) do h[#h + 1] = name end table.sort(h) return h end)(),
    matmul = {
      variants = matmul_variants,
      dtypes = {float32 = matmul_variants, float64 = {"naive", "tiled", "fast"}},
      knobs = {unroll = unrolls, tile = {8, 16, 32}, block = "naive: square side 1..32", threads = "row/column: 1..1024",
               tma = "fast and tf32 (float32) on compute capability 9.0: false keeps the kernels of other devices",
               splits = "with tma: blocks a tile of C, each over a share of K (split-K); chosen by size when not given",
               streamk = "with tma: false, true or a block count: blocks share the last tiles' k-tiles equally (stream-K); chosen by size when not given"},
      default = "fast",
    },
    barrier = {kinds = barrier.kinds, experiment = xpx_kinds, phases = xpx_phases},
  }
end

return catalog
