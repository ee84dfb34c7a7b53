-- culua.catalog.sort: cuda.catalog.sort and argsort, stable LSD radix sorts of
-- 8-, 16-, 32- and 64-bit keys with values carried along (kernels/sort.cu, the tile kernels;
-- kernels/sort_counts.cu, the digit counts, copies and the warp sort; what they share,
-- kernels/culua/sort.cuh).
--
-- A sort is in place from the user's view: the passes move keys (and values)
-- between the user's arrays and the catalog's scratch memory, and end in the
-- user's. Three variants: onesweep (the default: one histogram kernel, then
-- one kernel a pass with decoupled look-back; a sort of at most one tile in
-- a single block, and of up to a tile a multiprocessor in one launch with grid
-- barriers between the passes), lsd (three kernels a pass) and warp (seed
-- 003's teaching sort of at most 32 uint32 keys).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local C = cuda._catalog

local fail, one_of, check_array, ceil_div = core.fail, core.one_of, core.check_array, core.ceil_div

local M = {}

-- {====================================================== plans

local variants = {"onesweep", "lsd", "warp"}
local key_dtypes = {"uint32", "int32", "float32", "uint64", "int64", "float64", "uint16", "int16", "float16",
                    "bfloat16", "uint8", "int8", "float8_e4m3", "float8_e5m2"}
local value_dtypes = {"int32", "uint32", "float32", "int64", "uint64", "float64", "int16", "uint16", "float16",
                      "bfloat16", "int8", "uint8", "float8_e4m3", "float8_e5m2"}
local elem_bytes = core.dtype_bytes
local key_bits = {}
for _, dt in ipairs(key_dtypes) do key_bits[dt] = 8 * elem_bytes[dt] end
local options = {"descending", "begin_bit", "end_bit", "variant", "stream", "items", "threads", "min_blocks",
                 "window", "fused", "portion", "upfront"}

-- the kernels' numbers, read from their sources (core.constants): a pass's flags, the
-- histogram kernels' blocks (SORT_RADIX) and the look-back words' limits from
-- <culua/sort.cuh>; from kernels/sort.cu, a tile's block as prebuilt (SORT_THREADS), its
-- keys a thread by key width, the small sorts' fused tiles, a tile's shared memory
local H, K = core.constants("culua/sort.cuh"), core.constants("sort")
local FIRST, LAST, IOTA, NOKEYS, DESC = H.SORT_FIRST, H.SORT_LAST, H.SORT_IOTA, H.SORT_NOKEYS, H.SORT_DESC
-- how a key's bits become radix bits (<culua/sort.cuh>'s to_radix): bfloat16 and float8_e4m3
-- are the formats whose NaNs lie elsewhere than float16's and float8_e5m2's
local U, S, F, FA = H.SORT_UNSIGNED, H.SORT_SIGNED, H.SORT_FLOAT, H.SORT_FLOAT_ALT
local key_kind = {uint8 = U, uint16 = U, uint32 = U, uint64 = U, int8 = S, int16 = S, int32 = S, int64 = S,
                  float8_e5m2 = F, float16 = F, float32 = F, float64 = F, float8_e4m3 = FA, bfloat16 = FA}

local RADIX = H.SORT_RADIX
local THREADS = K.SORT_THREADS
local default_items = {[1] = K.SORT_ITEMS32, [2] = K.SORT_ITEMS32, [4] = K.SORT_ITEMS32, [8] = K.SORT_ITEMS64}
-- a width's name in the kernels' names, by bytes
local wname = {[1] = "u8", [2] = "u16", [4] = "u32", [8] = "u64"}
-- the default shapes other than 256 threads (kernels/sort.cu's SORT_WIDE_*), threads and
-- keys a thread by "<key>_<value>"
local wide = {}
for _, k in ipairs{"u8", "u16", "u32", "u64"} do
  for _, v in ipairs{"keys", "u8", "u16", "u32", "u64"} do
    local case = k .. "_" .. v
    local threads = K["SORT_WIDE_" .. case:upper() .. "_THREADS"]
    if threads then wide[case] = {threads, K["SORT_WIDE_" .. case:upper() .. "_ITEMS"]} end
  end
end
local FUSED_ITEMS, FUSED_WINDOW = K.SORT_FUSED_ITEMS, K.SORT_FUSED_WINDOW   -- small sorts' fused tiles
local MAX_ITEMS = 32   -- keys a thread; 64 for 8- and 16-bit keys (a tile's keys in 48 KiB: below 2^16)
local SHARED = K.SORT_SHARED                -- a tile's static shared memory, at most
-- look-back words loaded at once (SORT_MAX_WINDOW at most): four for keys alone, one
-- when values come along. A pass of pairs took 5% longer with four (2^28 uint32 pairs
-- 9.56 against 9.08 ms on an H100; every key and value width alike, bench/RESULTS.md,
-- session 23), keys alone 16% longer with one (5.44 against 6.23). 16- and 8-bit keys
-- take four with values too: argsort of 2^28 float16 keys 3.69 ms against 4.04 with one
-- (H100, bench/RESULTS.md, session 26)
local WINDOW_KEYS, WINDOW_VALUES, MAX_WINDOW = 4, 1, H.SORT_MAX_WINDOW
local MAX_COUNT = H.SORT_COUNT              -- the look-back words' 30-bit counts
local WARP_MAX = 32

-- Scratch (core.scratch): "sort_state", uint32 words: the upfront histogram and
-- its ticket at fixed places (zero between sorts: the histogram kernel's last
-- block leaves them so; the kind is zeroed when made), the passes' skip marks,
-- then what a sort lays out afresh: digit offsets, tile tickets and look-back
-- words (zeroed by the kernels before use). "sort_keys", "sort_keys2",
-- "sort_values": the passes' other buffers, in 8-byte words.
core.scratch_kind("sort_state", "uint32", true)
core.scratch_kind("sort_keys", "uint64")
core.scratch_kind("sort_keys2", "uint64")
core.scratch_kind("sort_values", "uint64")

-- every scratch array a sort asks for and every launch it makes go through its plans
-- (culua.catalog.plans), which note them while a call is recorded for replays
local plans = require("culua.catalog.plans").new()
local function scratch(kind, dev, stream, size) return plans:scratch(kind, dev, stream, size) end
local function launch(k, cfg, ...) plans:launch(k, cfg, ...) end

local function pad64(words) return ceil_div(words, 64) * 64 end
-- word offsets in sort_state: onesweep's (8 passes of u64 counts a digit, the ticket, a skip
-- mark a pass), fused's (u32 counts, the ticket), a grid barrier's words
local HIST = 0
local DONE = HIST + 8 * RADIX * 2
local SKIP = DONE + 8
local FHIST = pad64(SKIP + 8)
local FDONE = FHIST + 8 * RADIX
local BAR = pad64(FDONE + 1)
-- the first word past the flat grid barrier's (its pair: <culua/barrier.cuh>'s CULUA_GRID_PAIR, + 1)
local FREE = pad64(BAR + core.constants("culua/barrier.cuh").CULUA_GRID_PAIR + 2)

-- the tile kernels' file (the one NVRTC builds other shapes of: tile_kernel), and a
-- kernel of the others by its stem (culua_sort_<stem><suffix>), in the file that holds it
local TILES = "sort"
local file_of = core.kernel_files("culua_sort_", {"sort", "sort_counts"})
local function kernel(stem, suffix, dev) return core.kernel(file_of(stem), "culua_sort_" .. stem .. suffix, nil, dev) end

-- "<key>_<value>" of a sort's arrays: u32_keys, u64_u32, u16_u32, ...
local function case_of(kb, has_values, vb)
  return wname[kb] .. "_" .. (has_values and wname[vb] or "keys")
end

-- the default shape of a sort, threads and keys a thread: the wider tiles where
-- they are prebuilt (bench/RESULTS.md, the sweeps of sessions 7 and 15), else 256
-- threads at the default items
local function default_shape(kb, has_values, vb)
  local w = wide[case_of(kb, has_values, vb)]
  if w then return w[1], w[2] end
  return THREADS, default_items[kb]
end

-- a tile kernel (onesweep, small, fused, lsd) of a's shape: prebuilt for the
-- default shapes of the cases of 32- and 64-bit keys, of 16-bit keys alone and
-- with 4-byte values, and their small sorts' fused tiles; else built by NVRTC
-- (-D values: the shape and that case alone; names say the shape). The -D
-- values are made once a name: a small sort's host time is a few microseconds.
local defines_of = {}
local function tile_kernel(what, a)
  local name = ("culua_sort_%s_%s_%d%s%s"):format(what, case_of(a.kb, a.has_values, a.vb), a.items,
                                                 a.threads ~= THREADS and "_t" .. a.threads or "",
                                                 a.min_blocks and "_b" .. a.min_blocks or "")
  local defines = defines_of[name]
  if not defines then
    defines = {"CULUA_SORT_ITEMS=" .. a.items, "CULUA_SORT_KEY=" .. 8 * a.kb,
               "CULUA_SORT_VALUE=" .. (a.has_values and 8 * a.vb or 0)}
    if a.threads ~= THREADS then defines[#defines + 1] = "CULUA_SORT_THREADS=" .. a.threads end
    if a.min_blocks then defines[#defines + 1] = "CULUA_SORT_MINBLOCKS=" .. a.min_blocks end
    defines_of[name] = defines
  end
  return core.kernel(TILES, name, defines, a.dev)
end

-- the buffers of each pass: keys from the user's array back to it (sort), or
-- from it into scratch and never written at the end (argsort: `out` gets the
-- 1-based positions); {kin, kout, vin, vout} a pass, and .copy: the buffers to
-- copy back when the passes end in scratch
local function chain(passes, n, keys, values, out, dev, stream, kb, vb)
  local plan = {}
  if out then
    local sa = scratch("sort_keys", dev, stream, ceil_div(n * kb, 8))
    local sb = passes > 2 and scratch("sort_keys2", dev, stream, ceil_div(n * kb, 8)) or sa
    local sv = passes > 1 and scratch("sort_values", dev, stream, ceil_div(n * vb, 8)) or out
    local kin, vin = keys, 0
    for p = 0, passes - 1 do
      local kout = p % 2 == 0 and sa or sb   -- the last pass writes no keys
      local vout = (passes - 1 - p) % 2 == 0 and out or sv
      plan[p + 1] = {kin, kout, vin, vout}
      kin, vin = kout, vout
    end
    return plan
  end
  local sk = scratch("sort_keys", dev, stream, ceil_div(n * kb, 8))
  local sv = values and scratch("sort_values", dev, stream, ceil_div(n * vb, 8))
  local kin, vin = keys, values or 0
  for p = 0, passes - 1 do
    local kout, vout = keys, values or 0
    if p % 2 == 0 then kout, vout = sk, sv or 0 end
    plan[p + 1] = {kin, kout, vin, vout}
    kin, vin = kout, vout
  end
  if passes % 2 == 1 then plan.copy = {sk, keys, sv, values} end
  return plan
end

-- odd passes end in scratch: copy the keys (and values) back to the user's arrays
local function copy_back(c, n, kb, vb, dev, stream)
  local cfg = {grid = math.min(ceil_div(n, 256), 4 * core.sm_count(dev)), block = 256, stream = stream}
  launch(kernel("copy" .. 8 * kb, "", dev), cfg, c[1], c[2], n)
  if c[4] then launch(kernel("copy" .. 8 * vb, "", dev), cfg, c[3], c[4], n) end
end

local function pass_flags(p, passes, desc, out)
  local f = desc and DESC or 0
  if p == 0 then f = f | FIRST end
  if p == passes - 1 then f = f | LAST end
  if out and p == 0 then f = f | IOTA end
  if out and p == passes - 1 then f = f | NOKEYS end
  return f
end

-- a sort of at most one tile: every pass in one block, one launch, no scratch
local function run_small(a)
  local k = tile_kernel("small", a)
  local flags = (a.desc and DESC or 0) | (a.out and (IOTA | NOKEYS) or 0)
  launch(k, {grid = 1, block = a.threads, stream = a.stream}, a.keys, a.keys, a.values or 0, a.values or a.out or 0,
           a.n, a.begin_bit, a.end_bit, a.kind, flags)
end

-- fused: every pass in one launch of one block a tile, all resident at once (a
-- cooperative launch), the passes apart by grid barriers. The buffers: pass 0 reads
-- k0, pass p writes ka (p even) or kb (p odd), and the next pass reads what it wrote;
-- they are chosen so that the last pass writes the user's array (a sort: pass 0 in
-- place when the passes are odd), or `out` (argsort: keys only ever in scratch).
local function run_fused(a, k, tiles)
  local n, dev, stream, passes = a.n, a.dev, a.stream, a.passes
  local kbytes, vbytes = ceil_div(n * a.kb, 8), a.vb and ceil_div(n * a.vb, 8) or 0   -- vb: nil for keys alone
  local k0, ka, kb, v0, va, vb
  if a.out then
    local s1 = scratch("sort_keys", dev, stream, kbytes)
    local sv = passes > 1 and scratch("sort_values", dev, stream, vbytes) or a.out
    k0, ka, kb = a.keys, s1, passes > 2 and scratch("sort_keys2", dev, stream, kbytes) or s1
    v0 = 0
    if passes % 2 == 1 then va, vb = a.out, sv else va, vb = sv, a.out end
  else
    local sk = scratch("sort_keys", dev, stream, kbytes)
    local sv = a.values and scratch("sort_values", dev, stream, vbytes) or 0
    local vals = a.values or 0
    k0, v0 = a.keys, vals
    if passes % 2 == 0 then ka, kb, va, vb = sk, a.keys, sv, vals else ka, kb, va, vb = a.keys, sk, vals, sv end
  end
  local state = scratch("sort_state", dev, stream, FREE + RADIX * passes * tiles)
  local base = state.ptr
  local flags = (a.desc and DESC or 0) | (a.out and (IOTA | NOKEYS) or 0)
  launch(k, {grid = tiles, block = a.threads, stream = stream, cooperative = true},
           k0, ka, kb, v0, va, vb, n, base + 4 * FHIST, base + 4 * FDONE, base + 4 * FREE, base + 4 * BAR,
           a.begin_bit, a.end_bit, a.kind, flags, a.window)
end

-- the most tiles the fused path takes: one block a multiprocessor at most (the barriers
-- are cheapest there), fewer if the kernel's blocks cannot all be resident (kept a kernel)
local fused_cap = setmetatable({}, {__mode = "k"})
local function fused_tiles(k, a)
  local cap = fused_cap[k]
  if not cap then
    cap = math.min(core.sm_count(a.dev), k:max_cooperative_grid(a.threads))
    fused_cap[k] = cap
  end
  return cap
end

-- the upfront histogram with a column of counters a lane (kernels/sort_counts.cu,
-- upfront_lanes): one block of 1024 threads a multiprocessor and 128 KiB of shared
-- memory; false where the device cannot give a block that much (the rows of
-- upfront then, as `upfront = "rows"` asks). 2^28 uint32 keys sorted in 5.27-5.28
-- ms so against 5.35-5.41, pairs 9.08-9.13 against 9.20-9.23, 2^27 uint64 keys
-- 8.02-8.04 against 8.18 (H100, bench/RESULTS.md, session 24).
local KC = core.constants("sort_counts")
local LANES_THREADS, LANES_LOADS = KC.SORT_LANES_THREADS, KC.SORT_LANES_LOADS
local LANES_SHARED = KC.SORT_LANES_COUNTERS * RADIX * 4   -- its counters, 128 KiB
local lanes_fit = setmetatable({}, {__mode = "k"})
local function lanes_upfront(dev, plain, kb)
  local k = kernel("upfront_lanes", (plain and "_plain" or "") .. "_" .. wname[kb], dev)
  local fit = lanes_fit[k]
  if fit == nil then
    fit = dev:attribute("max_shared_memory_per_block_optin") - k:attributes().shared_size_bytes >= LANES_SHARED
    lanes_fit[k] = fit
  end
  if not fit then return false end
  core.allow_shared(k, LANES_SHARED)
  return k
end

-- onesweep: the histogram of every pass at once, then a kernel a pass and
-- portion (a portion: at most 2^30 - 1 keys, a whole number of tiles). Each is
-- launched as a programmatic dependent where its device and driver can
-- (k.programmatic): the next launch's blocks are scheduled as the last of the
-- one before start, and wait there for its end (kernels/sort*.cu). A sort of
-- 2^20 uint32 pairs took 0.099 ms so against 0.104, 2^22 keys 0.143 against
-- 0.148, 2^28 pairs 0.3% less (H100, bench/RESULTS.md, session 23).
local function run_onesweep(a)
  local n, dev, stream, passes = a.n, a.dev, a.stream, a.passes
  local tile = a.threads * a.items
  local portion = (a.portion or MAX_COUNT) // tile * tile
  if portion < tile then portion = tile end
  local portions = ceil_div(n, portion)
  local max_tiles = ceil_div(math.min(n, portion), tile)
  local launches = passes * portions
  local ctr = FREE + 2 * RADIX * portions * passes   -- after the digit offsets (8-byte words)
  local lb0 = ctr + pad64(launches)
  local lb1 = lb0 + RADIX * max_tiles
  local state = scratch("sort_state", dev, stream, lb1 + RADIX * max_tiles)
  local base = state.ptr
  local function at(word) return base + 4 * word end
  -- unsigned keys ascending over all their bits take the upfront kernel's plain copy
  local plain = a.kind == U and not a.desc and a.begin_bit == 0 and a.end_bit == 8 * a.kb
  local lanes = a.upfront ~= "rows" and lanes_upfront(dev, plain, a.kb)
  if lanes then
    local grid = math.max(1, math.min(ceil_div(n, LANES_THREADS * LANES_LOADS), core.sm_count(dev)))
    launch(lanes, {grid = grid, block = LANES_THREADS, shared = LANES_SHARED, stream = stream,
                  programmatic = lanes.programmatic},
                 a.keys, n, at(HIST), at(DONE), at(FREE), RADIX * portions, at(SKIP), at(ctr), lb1 - ctr,
                 passes, a.begin_bit, a.end_bit, a.kind, a.desc and DESC or 0)
  else
    local up = kernel(plain and "upfront_plain" or "upfront", "_" .. wname[a.kb], dev)
    -- eight blocks a multiprocessor of eight loads in flight a thread: 64 KiB of 32-bit keys
    -- on the way to each multiprocessor, which the read of every key at full bandwidth needs
    local grid = math.max(1, math.min(ceil_div(n, RADIX * 8), 8 * core.sm_count(dev)))
    launch(up, {grid = grid, block = RADIX, stream = stream, programmatic = up.programmatic},
              a.keys, n, at(HIST), at(DONE), at(FREE), RADIX * portions, at(SKIP), at(ctr), lb1 - ctr,
              passes, a.begin_bit, a.end_bit, a.kind, a.desc and DESC or 0)
  end
  local k = tile_kernel("onesweep", a)
  local L = 0
  for p = 0, passes - 1 do
    local shift = a.begin_bit + 8 * p
    local bits = math.min(8, a.end_bit - shift)
    local flags = pass_flags(p, passes, a.desc, a.out)
    local bufs = a.plan[p + 1]
    for q = 0, portions - 1 do
      local first = q * portion
      local count = math.min(portion, n - first)
      local lb, lb_next = L % 2 == 0 and lb0 or lb1, L % 2 == 0 and lb1 or lb0
      local bins_in = FREE + 2 * RADIX * (p * portions + q)
      local bins_out = q < portions - 1 and at(bins_in + 2 * RADIX) or 0
      launch(k, {grid = ceil_div(count, tile), block = a.threads, stream = stream, programmatic = k.programmatic},
               bufs[1], bufs[2], bufs[3], bufs[4], first, count, at(bins_in), bins_out,
               at(lb), at(lb_next), L < launches - 1 and max_tiles or 0, at(ctr + L), at(SKIP + p),
               shift, bits, a.kind, flags, a.window)
      L = L + 1
    end
  end
end

-- lsd: per pass, each block's digit counts, one scan of them, a stable scatter
local function run_lsd(a)
  local n, dev, stream, passes = a.n, a.dev, a.stream, a.passes
  local tile = a.threads * a.items
  local tiles = ceil_div(n, tile)
  local blocks = math.min(tiles, 8 * core.sm_count(dev))
  local chunk = ceil_div(tiles, blocks) * tile
  blocks = ceil_div(n, chunk)
  local state = scratch("sort_state", dev, stream, FREE + 2 * RADIX * blocks)
  local counts = state.ptr + 4 * FREE
  local count = kernel("lsd_count", "_" .. wname[a.kb], dev)
  local scan = kernel("lsd_scan", "", dev)
  local scatter = tile_kernel("lsd", a)
  local cfg = {grid = blocks, block = RADIX, stream = stream}
  local one = {grid = 1, block = RADIX, stream = stream}
  local wide = {grid = blocks, block = a.threads, stream = stream}
  for p = 0, passes - 1 do
    local shift = a.begin_bit + 8 * p
    local bits = math.min(8, a.end_bit - shift)
    local flags = pass_flags(p, passes, a.desc, a.out)
    local bufs = a.plan[p + 1]
    launch(count, cfg, bufs[1], n, chunk, counts, shift, bits, a.kind, flags)
    launch(scan, one, counts, RADIX * blocks)
    launch(scatter, wide, bufs[1], bufs[2], bufs[3], bufs[4], n, chunk, counts, shift, bits, a.kind, flags)
  end
end

-- }======================================================


-- {====================================================== argument checks

local KEYS_VALUES = {"keys", "values"}
local array_info = C.array

-- an open cuda.array: its element count, dtype and device (what C.array tells in one
-- crossing into C; a reset array is refused as a closed one, as ever)
local function check_open(fname, what, x)
  local dt, n, dev, _, pitched = array_info(x)
  if not dt then
    check_array(fname, what, x)
    fail(fname, "%s is a closed cuda.array", what)
  end
  if pitched then   -- its rows are apart: the kernels read elements one after another
    fail(fname, "%s is a pitched array (copy it to a packed array first)", what)
  end
  return n, dt, dev
end

local function check_keys(fname, keys)
  local n, dt, dev = check_open(fname, "keys", keys)
  if not key_kind[dt] then
    fail(fname, "keys has dtype %s; expected one of %s", dt, table.concat(key_dtypes, ", "))
  end
  return n, dt, dev
end

-- values' bytes an element, and its device
local function check_values(fname, values, n)
  local nv, dt, dev = check_open(fname, "values", values)
  if not elem_bytes[dt] then
    fail(fname, "values has dtype %s; expected one of %s", dt, table.concat(value_dtypes, ", "))
  end
  if nv ~= n then fail(fname, "values has %d elements but keys has %d", nv, n) end
  return elem_bytes[dt], dev
end

-- opts already passed core.options
local function check_opts(fname, opts, width)
  local o = {}
  o.variant = one_of(fname, "variant", opts.variant or "onesweep", variants)
  if opts.descending ~= nil and type(opts.descending) ~= "boolean" then
    fail(fname, "descending must be a boolean, got %s", type(opts.descending))
  end
  o.desc = opts.descending == true
  local b0, b1 = opts.begin_bit or 0, opts.end_bit or width
  if math.type(b0) ~= "integer" or b0 < 0 or b0 >= width then
    fail(fname, "begin_bit must be an integer 0..%d, got %s", width - 1, tostring(opts.begin_bit))
  end
  if math.type(b1) ~= "integer" or b1 < 1 or b1 > width then
    fail(fname, "end_bit must be an integer 1..%d, got %s", width, tostring(opts.end_bit))
  end
  if b0 >= b1 then fail(fname, "begin_bit (%d) must be less than end_bit (%d)", b0, b1) end
  o.begin_bit, o.end_bit = b0, b1
  local items, max_items = opts.items, width < 32 and 2 * MAX_ITEMS or MAX_ITEMS
  if items ~= nil and (math.type(items) ~= "integer" or items < 1 or items > max_items) then
    fail(fname, "items must be an integer 1..%d, got %s", max_items, tostring(items))
  end
  o.items = items
  local threads = opts.threads
  if threads ~= nil and (math.type(threads) ~= "integer" or threads < RADIX or threads > 1024 or threads % 32 ~= 0) then
    fail(fname, "threads must be a multiple of 32 in %d..1024, got %s", RADIX,
         tostring(threads))
  end
  o.threads = threads
  local mb = opts.min_blocks
  if mb ~= nil and (math.type(mb) ~= "integer" or mb < 1 or mb > 8) then
    fail(fname, "min_blocks must be an integer 1..8, got %s", tostring(mb))
  end
  o.min_blocks = mb
  local window = opts.window
  if window ~= nil and (math.type(window) ~= "integer" or window < 1 or window > MAX_WINDOW) then
    fail(fname, "window must be an integer 1..%d, got %s", MAX_WINDOW, tostring(window))
  end
  o.window = window
  if opts.fused ~= nil and type(opts.fused) ~= "boolean" then
    fail(fname, "fused must be a boolean, got %s", type(opts.fused))
  end
  o.fused = opts.fused
  local portion = opts.portion
  if portion ~= nil and (math.type(portion) ~= "integer" or portion < 1 or portion > MAX_COUNT) then
    fail(fname, "portion must be an integer 1..%d, got %s", MAX_COUNT, tostring(portion))
  end
  o.portion = portion
  if opts.upfront ~= nil then o.upfront = one_of(fname, "upfront", opts.upfront, {"lanes", "rows"}) end
  o.stream = opts.stream
  return o
end

-- }======================================================


-- {====================================================== sort and argsort

-- the sort of keys (and values) by o; `out`: argsort's result array instead of values
local function run(fname, keys, values, out, n, kdt, vb, o, dev)
  local kb = key_bits[kdt] // 8
  local stream = core.check_stream(fname, o.stream, dev)
  if o.variant == "warp" then
    if kdt ~= "uint32" then fail(fname, "variant 'warp' sorts uint32 keys only, got %s", kdt) end
    if n > WARP_MAX then fail(fname, "variant 'warp' sorts at most %d keys (one warp), got %d", WARP_MAX, n) end
    local vs = (values or out) and (vb == 4 and "u32" or "u64") or "keys"
    local k = kernel("warp", "_" .. vs, dev)
    local flags = o.desc and DESC or 0
    if out then flags = flags | IOTA | NOKEYS end
    launch(k, {grid = 1, block = 32, stream = stream}, keys, keys, values or 0, values or out or 0,
             n, o.begin_bit, o.end_bit, flags)
    return
  end
  local passes = ceil_div(o.end_bit - o.begin_bit, 8)
  local has_values = values ~= nil or out ~= nil
  -- no shape asked for: the case's default (wider tiles but for 32-bit keys with
  -- 8-byte values); else what is not asked is 256 x the items
  local threads, items = o.threads, o.items
  if not threads and not items then threads, items = default_shape(kb, has_values, vb) end
  local a = {n = n, dev = dev, stream = stream, passes = passes, kb = kb, vb = vb, keys = keys, values = values,
             has_values = has_values, out = out, desc = o.desc, kind = key_kind[kdt],
             begin_bit = o.begin_bit, end_bit = o.end_bit, items = items or default_items[kb],
             threads = threads or THREADS, min_blocks = o.min_blocks, window = o.window or (has_values and kb > 2 and WINDOW_VALUES or WINDOW_KEYS),
             portion = o.portion, upfront = o.upfront}
  -- <culua/sort.cuh>'s TileShared by its formula (SORT_TILE_*, which the kernels hold
  -- to the struct's size): the larger of the warps' counters and the tile's keys or
  -- values, then the digits' places, the warps' sums and the tile's ticket
  local tile = a.threads * a.items
  local bytes = math.max(H.SORT_TILE_COUNTERS(a.threads), H.SORT_TILE_ITEMS(a.threads, a.items, math.max(kb, a.has_values and vb or 0)))
                + H.SORT_TILE_REST(a.threads)
  if bytes > SHARED then
    fail(fname, "items x threads (%d x %d) need %d bytes of shared memory for %d-byte %s; at most %d",
         a.items, a.threads, bytes, math.max(kb, a.has_values and vb or 0), a.has_values and "keys or values" or "keys",
         SHARED)
  end
  if o.variant == "onesweep" and not o.portion and n <= tile then
    run_small(a)
    return
  end
  if o.variant == "onesweep" and not o.portion and o.fused ~= false then
    -- the prebuilt small tiles first, where no shape is asked for: more blocks for
    -- the same keys (2^16 uint32 keys: 21 us a call against 30 at 15 a thread); then a's
    local shapes = {a}
    if not o.items and not o.threads and not o.min_blocks then
      shapes = {setmetatable({threads = THREADS, items = FUSED_ITEMS, window = o.window or FUSED_WINDOW},
                             {__index = a}), a}
    end
    for _, sh in ipairs(shapes) do
      local tiles = ceil_div(n, sh.threads * sh.items)
      if tiles <= core.sm_count(dev) then
        local k = tile_kernel("fused", sh)
        if tiles <= fused_tiles(k, sh) then
          run_fused(sh, k, tiles)
          return
        end
      end
    end
  end
  a.plan = chain(passes, n, keys, values, out, dev, stream, kb, vb)
  if o.variant == "lsd" then run_lsd(a) else run_onesweep(a) end
  if a.plan.copy then copy_back(a.plan.copy, n, kb, vb, dev, stream) end
end

-- cuda.catalog.sort(keys [, values] [, opts]) -> keys, values
--   keys: any integer or float dtype of 1, 2, 4 or 8 bytes (key_dtypes); values: any of those
--   opts: descending (false), begin_bit (0), end_bit (the key's width), variant ("onesweep",
--         "lsd", "warp"), stream; tuning: items (keys a thread), threads (a tile's block),
--         min_blocks (blocks a multiprocessor the registers are bounded for), window (look-back
--         words loaded at once: 4 for keys alone, 1 with values), fused (false: no one-launch path for sorts of up to a
--         tile a multiprocessor), portion (keys a launch of onesweep; also turns off the
--         one-block and one-launch paths), upfront ("lanes" or "rows": the upfront
--         histogram's counters). Without items and threads: 384 x 20 for keys
--         alone of up to 32 bits, 512 x 13 for them with values of up to 4 bytes, 512 x 10 for
--         64-bit keys, else 256 x 18; with either, the other is 256 or 18 (16 for 64-bit keys)
function M.sort(keys, values, opts)
  -- a sort with no options, again on the arrays of an earlier one: its replay
  local p = opts == nil and plans:get(keys, values)
  if p then
    plans:replay(p)
    return keys, values
  end
  local o = opts or values   -- over several GPUs (a list of keys a part) or ranks: sort_multi.lua
  if type(keys) == "table" or (type(o) == "table" and (o.devices ~= nil or o.comm ~= nil)) then
    return require("culua.catalog.sort_multi").sort(keys, values, opts)
  end
  local fname = "sort"
  if opts == nil and type(values) == "table" then values, opts = nil, values end
  opts = core.options(fname, opts, options)   -- a misspelt option first, before any other check
  local n, kdt, dev = check_keys(fname, keys)
  local vb, vdev
  if values ~= nil then vb, vdev = check_values(fname, values, n) end
  local o = check_opts(fname, opts, key_bits[kdt])
  if vdev and vdev ~= dev then core.same_device(fname, KEYS_VALUES, keys, values) end   -- raises, naming both
  if n == 0 then return keys, values end   -- nothing: sorted
  local plain = opts == core.no_options
  plans:start(keys, plain)
  run(fname, keys, values, nil, n, kdt, vb, o, dev)
  plans:finish(keys, values, dev, plain)
  return keys, values
end

-- cuda.catalog.argsort(keys [, opts]) -> a new array of the 1-based positions of
-- keys in their stable sorted order (uint32; uint64 from 2^32 keys); keys are not changed
function M.argsort(keys, opts)
  local fname = "argsort"
  plans:start(keys, false)
  opts = core.options(fname, opts, options)
  local n, kdt, dev = check_keys(fname, keys)
  local o = check_opts(fname, opts, key_bits[kdt])
  local idt = n < (1 << 32) and "uint32" or "uint64"
  local out = cuda.array(idt, n, {device = dev.ordinal})
  if n > 0 then run(fname, keys, nil, out, n, kdt, elem_bytes[idt], o, dev) end
  return out
end

-- }======================================================

-- on host arrays, in C: the same order (stable, -0.0 before +0.0, NaNs last
-- in either order and written as the canonical quiet NaN)
local ref_options = {"descending", "begin_bit", "end_bit"}
local ref_sort_c = {["reference.sort"] = core.reference("reference.sort", C.ref_sort),
                    ["reference.argsort"] = core.reference("reference.argsort", C.ref_sort)}
local function ref_sort(hkeys, hvalues, opts, fname)
  if opts == nil and type(hvalues) == "table" then hvalues, opts = nil, hvalues end
  opts = core.options(fname or "reference.sort", opts, ref_options)
  local width = 8 * (elem_bytes[hkeys.dtype] or 4)
  return ref_sort_c[fname or "reference.sort"](hkeys, hvalues, opts.descending, opts.begin_bit or 0, opts.end_bit or width)
end

M.reference = {
  sort = ref_sort,
  -- a new host array of the 1-based positions in sorted order
  argsort = function (hkeys, opts)
    core.options("reference.argsort", opts, ref_options)   -- before any work
    local n = #hkeys
    local idx = cuda.host_array(n < (1 << 32) and "uint32" or "uint64", n):iota(1)
    local copy = cuda.host_array(hkeys.dtype, n):copy_from(hkeys)
    ref_sort(copy, idx, opts, "reference.argsort")
    return idx
  end,
}

M.info = {
  variants = variants,
  default = "onesweep",
  key_dtypes = key_dtypes,
  value_dtypes = value_dtypes,
  limits = {warp = WARP_MAX},
  knobs = {descending = "stable descending order (NaNs still last)", begin_bit = "first bit of the radix bits sorted",
           end_bit = "one past the last bit sorted", items = "onesweep and lsd: keys a thread (1.." .. MAX_ITEMS .. "; 1.."
                                                     .. 2 * MAX_ITEMS .. " for 8- and 16-bit keys)",
           threads = "onesweep and lsd: a tile's block (a multiple of 32 in 256..1024)",
           min_blocks = "onesweep and lsd: blocks a multiprocessor the registers are bounded for (1..8)",
           window = "onesweep: look-back words loaded at once (1.." .. MAX_WINDOW .. ")",
           fused = "onesweep: false turns off the one-launch path (a tile a multiprocessor at most)",
           portion = "onesweep: keys a launch of a pass (at most 2^30 - 1)",
           upfront = "onesweep: the upfront histogram's counters, \"lanes\" (a column a lane: 128 KiB of shared "
                     .. "memory, the default where a block may have it) or \"rows\" (a row a block)",
           warp = "at most " .. WARP_MAX .. " uint32 keys"},
}

return M
