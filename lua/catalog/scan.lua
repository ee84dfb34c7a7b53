-- culua.catalog.scan: cuda.catalog.scan, reduce, compact and split
-- (kernels/scan.cu): prefix scans of add, min and max over 4- and 8-byte
-- integers and floats (and float16, bfloat16 summed in float32), from seed
-- 003's one-block scans to a single pass with decoupled look-back, and stream
-- compaction on the same single pass.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local C = cuda._catalog

local fail, one_of, ceil_div = core.fail, core.one_of, core.ceil_div

local M = {}

local dtypes = {"int32", "uint32", "int64", "uint64", "float32", "float64", "float16", "bfloat16"}
local short = {int32 = "i32", uint32 = "u32", int64 = "i64", uint64 = "u64", float32 = "f32", float64 = "f64",
               float16 = "f16", bfloat16 = "bf16"}
local ctypes = {int32 = "int", uint32 = "unsigned", int64 = "long long", uint64 = "u64", float32 = "float", float64 = "double",
                float16 = "__half", bfloat16 = "__nv_bfloat16"}
-- float16 and bfloat16 run in float32 (kernels/scan.cu's NVRTC variants): read
-- widened, summed, compared and started (init) in float32; `accumulate` names the
-- result's dtype, x's or float32 (other dtypes: only their own)
local lowp = {float16 = true, bfloat16 = true}
local function run_dtype(dt) return lowp[dt] and "float32" or dt end
local accumulates = {}
for _, dt in ipairs(dtypes) do accumulates[dt] = lowp[dt] and {dt, "float32"} or {dt} end
local ops = {"add", "min", "max"}
local variants = {"lookback", "naive", "blelloch", "global"}
local flag_dtypes = {"uint8", "int32"}

-- {====================================================== values as bits

-- a Lua number as the 64-bit word of a dtype's value (kernels take init as bits)
local function to_bits(dt, v)
  if dt == "float32" then return (string.unpack("<I4", string.pack("<f", v))) end
  if dt == "float64" then return (string.unpack("<i8", string.pack("<d", v))) end
  if dt == "int32" or dt == "uint32" then return math.tointeger(v) & 0xffffffff end
  return math.tointeger(v)
end

-- the value of a dtype held in the low bytes of a 64-bit word: integers as Lua
-- integers (uint64 with its bits: above 2^63-1 it reads negative), floats as floats
local function from_bits(dt, b)
  if dt == "float32" then return (string.unpack("<f", string.pack("<I4", b & 0xffffffff))) end
  if dt == "float64" then return (string.unpack("<d", string.pack("<i8", b))) end
  if dt == "int32" then return ((b & 0xffffffff) ~ 0x80000000) - 0x80000000 end
  if dt == "uint32" then return b & 0xffffffff end
  return b
end

-- the identities: 0 for add, the dtype's largest for min and lowest for max
-- (for floats: +inf and -inf, the true identities)
local limits = {
  int32 = {-0x80000000, 0x7fffffff}, uint32 = {0, 0xffffffff},
  int64 = {math.mininteger, math.maxinteger}, uint64 = {0, -1},   -- uint64's largest: all bits set
  float32 = {-math.huge, math.huge}, float64 = {-math.huge, math.huge},
}
local function identity_bits(dt, op)
  if op == "add" then return 0 end
  return to_bits(dt, limits[dt][op == "min" and 2 or 1])
end

-- }======================================================


-- {====================================================== checks

local open_dtype = core.open_dtype

local function check_init(fname, dt, init)
  if init == nil then return nil end
  if type(init) ~= "number" then fail(fname, "init must be a number, got %s", type(init)) end
  if dt:find("int", 1, true) and math.tointeger(init) == nil then
    fail(fname, "init must be an integer for %s, got %s", dt, tostring(init))
  end
  return init
end

-- }======================================================


-- {====================================================== tile state

-- The look-back kernels' scratch (kernels/scan.cu): word 0 a tile counter that
-- is never reset (each launch is told its value before: `base`), then a status
-- word a tile, valid for one launch's epoch. Both advance here, per scratch
-- array. 8-byte values go to a second array, two words a tile.
core.scratch_kind("scan_tiles", "uint64", true)
core.scratch_kind("scan_values", "uint64")
core.scratch_kind("scan_word", "int64", true)   -- read back as a Lua integer: the bits
local tile_state = setmetatable({}, {__mode = "k"})
local EPOCHS = 1 << 30   -- a 4-byte value's status holds epoch << 2 | flag in 32 bits

-- scratch, base and epoch for a launch of `ntiles` tiles on dev/stream
local function tiles_for(dev, stream, ntiles)
  local w = core.scratch("scan_tiles", dev, stream, 1 + ntiles)
  local values = core.scratch("scan_values", dev, stream, 2 * ntiles)
  local st = tile_state[w]
  if not st then st = {count = 0, epoch = 0}; tile_state[w] = st end
  st.epoch = st.epoch + 1
  if st.epoch >= EPOCHS then   -- wrapped: clear the old statuses once
    w:fill(0, stream)
    st.count, st.epoch = 0, 1
  end
  local base = st.count
  st.count = st.count + ntiles
  return w, values, base, st.epoch
end


-- }======================================================


-- {====================================================== scan

-- the prebuilt kernels' shapes, read from kernels/scan.cu (core.constants)
local SK = core.constants("scan")
-- a look-back tile (CULUA_THREADS, CULUA_ADD4_THREADS, CULUA_ITEMS4): 128 threads x
-- 32 4-byte or 16 8-byte elements, but 256 x 32 for sums of 4-byte values past
-- SMALL_SUM elements (below, the _small kernels' 128 x 32 leave the GPU less to do
-- than the host); threads, elements and the kernel name's suffix
local SMALL_SUM = 1 << 21
-- seed 003's one-block scans (CULUA_SEED_THREADS): naive an element a thread, blelloch two
local SEED_THREADS = SK.CULUA_SEED_THREADS
local THREADS, ADD4_THREADS, ITEMS4 = SK.CULUA_THREADS, SK.CULUA_ADD4_THREADS, SK.CULUA_ITEMS4
local function lookback_shape(es, op, n)
  if es == 4 and op == "add" then
    if n > SMALL_SUM then return ADD4_THREADS, ADD4_THREADS * ITEMS4, "" end
    return THREADS, THREADS * ITEMS4, "_small"
  end
  return THREADS, THREADS * (es == 4 and ITEMS4 or ITEMS4 // 2), ""
end
-- compact and split (CULUA_SELECT_THREADS, CULUA_SELECT_ITEMS4, CULUA_SELECT_MINB): the
-- prebuilt kernels (flags) take 128 threads a tile; an expression's kernel on 4-byte
-- values is built with 256 and a register bound (kernels/scan.cu says why)
local SELECT_ITEMS4 = SK.CULUA_SELECT_ITEMS4
local SELECT_THREADS = SK.CULUA_SELECT_THREADS
local SELECT_TILE = {[4] = SELECT_THREADS * SELECT_ITEMS4, [8] = SELECT_THREADS * SELECT_ITEMS4 // 2}
local PRED4_THREADS, PRED4_MINB = 256, 5   -- the 4-byte expression kernel's variant (-D, this file's)
local PRED_THREADS = {[4] = PRED4_THREADS, [8] = SELECT_THREADS}
local PRED_TILE = {[4] = PRED_THREADS[4] * SELECT_ITEMS4, [8] = PRED_THREADS[8] * SELECT_ITEMS4 // 2}
local PRED_DEFINES = {[4] = {"CULUA_SELECT_THREADS=" .. PRED4_THREADS, "CULUA_SELECT_MINB=" .. PRED4_MINB}, [8] = {}}
-- 2-byte elements (float16, bfloat16) take as many items a thread as 4-byte ones
SELECT_TILE[2], PRED_THREADS[2], PRED_TILE[2], PRED_DEFINES[2] = SELECT_TILE[4], PRED_THREADS[4], PRED_TILE[4], PRED_DEFINES[4]
local function elem_size(dt) return (dt == "int64" or dt == "uint64" or dt == "float64") and 8 or lowp[dt] and 2 or 4 end

-- the look-back kernels' names by dtype and op, formatted once
local lookback_names = {}
local function lookback_name(dt, op, suffix)
  local t = lookback_names[dt]
  if not t then t = {}; lookback_names[dt] = t end
  local key = op .. suffix
  local name = t[key]
  if not name then name = ("culua_scan_lookback_%s_%s%s"):format(short[dt], op, suffix); t[key] = name end
  return name
end

-- A small scan is bound by the host (a 2^16 scan is 3 us on an H100's side, and
-- its launch alone 4 us of host time), so the default stream's launches of up
-- to SMALL tiles go through prepared launchers, kept a kernel and grid; other
-- launches refill one configuration (launch reads it at once).
local SMALL = 256
local prepared = setmetatable({}, {__mode = "k"})
local lookback_cfg = {}

-- a float16 or bfloat16 scan's kernel (x dt, y ydt), built by NVRTC in float32's
-- shape on first use: its name and defines, made once
local lowp_kernels = {}
local OP_NUMBER = {add = 0, min = 1, max = 2}
local function lowp_lookback(dt, ydt, op, suffix, dev)
  local key = dt .. "\0" .. ydt .. "\0" .. op .. suffix
  local k = lowp_kernels[key]
  if not k then
    local name = ("culua_scan_lookback_%s_%s%s_%s"):format(short[dt], op, suffix, short[ydt])
    k = {name, {"CULUA_LOWP=1", "CULUA_LOWP_SCAN=" .. name, "CULUA_LOWP_X=" .. ctypes[dt], "CULUA_LOWP_Y=" .. ctypes[ydt],
                "CULUA_LOWP_OP=" .. OP_NUMBER[op], "CULUA_LOWP_SMALL=" .. (suffix == "_small" and 1 or 0)}}
    lowp_kernels[key] = k
  end
  return core.kernel("scan", k[1], k[2], dev)
end

-- y of dtype ydt: dt's own, or float32 for float16 and bfloat16 x. (The kernels also
-- take y = 0 and a word for the total, reduce's way before it ran the reduction
-- kernels; no call here asks for either now: 0 for the word.)
local function lookback(x, y, n, exclusive, initb, dt, op, stream, dev, ydt)
  local threads, tile, suffix = lookback_shape(elem_size(run_dtype(dt)), op, n)
  local ntiles = ceil_div(n, tile)
  local kern
  if lowp[dt] then kern = lowp_lookback(dt, ydt, op, suffix, dev)
  else kern = core.kernel("scan", lookback_name(dt, op, suffix), nil, dev) end
  local w, values, base, epoch = tiles_for(dev, stream, ntiles)
  if stream == nil and ntiles <= SMALL then
    local by = prepared[kern]
    if not by then by = {}; prepared[kern] = by end
    local go = by[ntiles]
    if not go then go = kern:prepare({grid = ntiles, block = threads}); by[ntiles] = go end
    go(x, y, n, exclusive and 1 or 0, initb, w, values, base, epoch, ntiles, 0)
    return kern, threads, ntiles   -- for a plan (M.scan)
  end
  local cfg = lookback_cfg
  cfg.grid, cfg.block, cfg.stream = ntiles, threads, stream
  kern:launch(cfg, x, y, n, exclusive and 1 or 0, initb, w, values, base, epoch, ntiles, 0)
  cfg.stream = nil   -- the table outlives the call: it must not keep the stream alive
end

-- seed 003's scans: naive and blelloch in one block; global as block scans, a
-- scan of the blocks' totals (the same, recursively) and a propagation
local function seed_scan(fname, variant, x, y, n, exclusive, initb, dt, op, stream)
  local dev = x.device
  local suffix = ("%s_%s"):format(short[dt], op)
  if variant == "naive" then
    if n > SEED_THREADS then
      fail(fname, "variant 'naive' handles at most %d elements (one block), got %d", SEED_THREADS, n)
    end
    local kern = core.kernel("scan", "culua_scan_naive_" .. suffix, nil, dev)
    kern:launch({grid = 1, block = ceil_div(n, 32) * 32, stream = stream}, x, y, n, exclusive and 1 or 0, initb)
    return
  end
  local blelloch = core.kernel("scan", "culua_scan_blelloch_" .. suffix, nil, dev)
  if variant == "blelloch" and n > 2 * SEED_THREADS then
    fail(fname, "variant 'blelloch' handles at most %d elements (one block of %d threads), got %d", 2 * SEED_THREADS,
         SEED_THREADS, n)
  end
  local function global(a, b, len, excl, init)
    local blocks = ceil_div(len, 2 * SEED_THREADS)
    if blocks == 1 then
      blelloch:launch({grid = 1, block = SEED_THREADS, stream = stream}, a, b, len, excl and 1 or 0, init, 0)
      return
    end
    local sums = cuda.array(dt, blocks, {device = dev.ordinal})
    blelloch:launch({grid = blocks, block = SEED_THREADS, stream = stream}, a, b, len, excl and 1 or 0, init, sums)
    global(sums, sums, blocks, true, init)   -- block b's prefix: init and the totals before it
    local prop = core.kernel("scan", "culua_scan_propagate_" .. suffix, nil, dev)
    prop:launch({grid = math.min(ceil_div(len, 256), 65535), block = 256, stream = stream}, b, len, sums)
  end
  global(x, y, n, exclusive, initb)
end

local XY = {"x", "y"}
local SCAN_OPTIONS = {"exclusive", "op", "init", "accumulate", "variant", "stream"}

-- A scan with no options called again on the arrays of an earlier one that took a
-- prepared launch (the default stream, up to SMALL tiles) replays it (culua.catalog.plans):
-- its launcher with the arrays' addresses, the length and init bound, the tile state still
-- taken a call (tiles_for).
local plans = require("culua.catalog.plans").new()

-- cuda.catalog.scan(x [, y] [, opts]) -> y (x when y is omitted: in place)
--   opts: exclusive (false), op ("add" | "min" | "max"), init (exclusive or
--   not: the value the scan starts from; the op's identity by default),
--   variant ("lookback" | "naive" | "blelloch" | "global"), stream;
--   accumulate: y's dtype, said again (float16 and bfloat16 x: theirs or float32)
function M.scan(x, y, opts)
  local p = opts == nil and plans:get(x, y)
  if p then
    local w, values, base, epoch = tiles_for(p.dev, nil, p.ntiles)
    p.go(w, values, base, epoch, p.ntiles, 0)
    return p.y
  end
  local fname = "scan"
  if opts == nil and type(y) == "table" and cuda.type(y) == nil then y, opts = nil, y end
  opts = core.options(fname, opts, SCAN_OPTIONS)
  local dt, n, dev, xptr = open_dtype(fname, "x", x, dtypes)
  local ydt, yptr = dt, xptr
  if y == nil then y = x end
  if not rawequal(y, x) then   -- in place: nothing more to check of y
    local yn, ydev
    ydt, yn, ydev, yptr = open_dtype(fname, "y", y)
    if ydt ~= dt and not (lowp[dt] and ydt == "float32") then
      fail(fname, "y has dtype %s but x has %s%s", ydt, dt, lowp[dt] and " (y may be float32)" or "")
    end
    if yn ~= n then fail(fname, "y has %d elements but x has %d", yn, n) end
    if ydev ~= dev then core.same_device(fname, XY, x, y) end   -- raises, naming both
  end
  local stream = core.check_stream(fname, opts.stream, dev)
  local op = opts.op == nil and "add" or one_of(fname, "op", opts.op, ops)
  local variant = opts.variant == nil and "lookback" or one_of(fname, "variant", opts.variant, variants)
  if lowp[dt] and variant ~= "lookback" then
    fail(fname, "variant '%s' takes no %s (float16 and bfloat16 scan with 'lookback')", variant, dt)
  end
  if opts.accumulate ~= nil and one_of(fname, "accumulate", opts.accumulate, accumulates[dt]) ~= ydt then
    fail(fname, "accumulate is %s but y has dtype %s%s", opts.accumulate, ydt, rawequal(y, x) and " (in place: x's)" or "")
  end
  core.flag(fname, opts, "exclusive")
  local rdt = run_dtype(dt)
  local init = check_init(fname, dt, opts.init)
  local initb = init ~= nil and to_bits(rdt, init) or identity_bits(rdt, op)
  if n == 0 then return y end   -- a scan of nothing: no launch
  if variant == "lookback" then
    local kern, threads, ntiles = lookback(x, y, n, opts.exclusive == true, initb, dt, op, stream, dev, ydt)
    if kern and opts == core.no_options then
      if plans:again(x) then   -- (scanned once: a plan the next time)
        plans:keep(x, y, {version = core.version, dev = dev, scratch = {}, y = y, ntiles = ntiles,
                          go = kern:prepare({grid = ntiles, block = threads}, xptr, yptr, n, 0, initb)})
      end
    end
  else
    seed_scan(fname, variant, x, y, n, opts.exclusive == true, initb, dt, op, stream)
  end
  return y
end

-- a float32 value rounded to float16 or bfloat16 as a cast does (never raising:
-- past the largest finite value it is infinity)
local round_from
local function rounded(dt, v)
  round_from = round_from or cuda.host_array("float32", 1)
  round_from[1] = v
  return round_from:astype(dt)[1]
end

-- cuda.catalog.reduce(x [, opts]) -> the sum, min or max of x as a Lua number
-- (an integer for integer dtypes); opts: op, stream, accumulate (float16 and
-- bfloat16 x: float32, the float32 sum, by default, or x's dtype: that sum
-- rounded to it). Waits for the caller's stream (only that one) to read the result.
-- The kernels are the reduction kernels of lua/elementwise.lua (one pass, a last
-- block's finish), the same that x:sum(), x:min() and x:max() run: one
-- implementation of a reduction. A min or max with a NaN in x is NaN.
local reductions
function M.reduce(x, opts)
  local fname = "reduce"
  opts = core.options(fname, opts, {"op", "accumulate", "stream"})
  local dt, n, dev = open_dtype(fname, "x", x, dtypes)
  local stream = core.check_stream(fname, opts.stream, dev)
  local op = one_of(fname, "op", opts.op or "add", ops)
  local rdt = run_dtype(dt)
  local acc = opts.accumulate == nil and rdt or one_of(fname, "accumulate", opts.accumulate, accumulates[dt])
  if n == 0 then   -- a sum of nothing is 0; a min or max of nothing is no number
    if op ~= "add" then fail(fname, "the %s of an empty x is undefined", op) end
    return from_bits(rdt, identity_bits(rdt, op))
  end
  reductions = reductions or require("culua.elementwise").catalog_reduction
  local r = reductions(op, rdt)
  local v
  if stream then v = r(x, {stream = stream}) else v = r(x) end
  if acc ~= rdt then return rounded(acc, v) end
  return v
end

-- }======================================================


-- {====================================================== compact and split

-- FNV-1a, 32 bits, twice (two offsets): a name for an expression's kernel
local function hash(s)
  local h1, h2 = 0x811c9dc5, 0x050c5d1f
  for i = 1, #s do
    local b = s:byte(i)
    h1 = ((h1 ~ b) * 0x01000193) & 0xffffffff
    h2 = ((h2 ~ b) * 0x01000193) & 0xffffffff
  end
  return ("%08x%08x"):format(h1, h2)
end

-- the kernel for an expression predicate on dtype dt, compiled once a device
-- (names are kept per device with their expressions: a hash collision gets
-- another name, never another's kernel; and the kernels by expression, so that
-- a call again finds its kernel in one look-up)
local function pred_kernel(fname, expr, dt, dev, c32, es)
  local key = dt .. (c32 and "\0c32\0" or "\0") .. expr
  local kernels = core.device_state("scan_pred_kernels", dev)
  if kernels[key] then return kernels[key] end
  if not expr:find("%S") then fail(fname, "pred expression is empty") end
  local names = core.device_state("scan_pred", dev)
  local name = names[key]
  if not name then
    local base = ("culua_scan_pred_%s_%s%s"):format(short[dt], hash(key), c32 and "_c32" or "")
    name = base
    local taken = {}
    for _, v in pairs(names) do taken[v] = true end
    local i = 1
    while taken[name] do name = base .. "_" .. i; i = i + 1 end
    names[key] = name
  end
  local prelude = ("#define CULUA_PRED(x) (%s)"):format(expr)
  local defines = {"CULUA_PRED_T=" .. ctypes[dt], "CULUA_PRED_C=" .. (c32 and "unsigned" or "u64"), "CULUA_PRED_NAME=" .. name}
  if lowp[dt] then defines[#defines + 1] = "CULUA_LOWP=1" end   -- x: the element widened to float
  table.move(PRED_DEFINES[es], 1, #PRED_DEFINES[es], #defines + 1, defines)
  local ok, k = pcall(core.kernel, "scan", name, defines, dev, prelude)
  if not ok then
    names[key] = nil
    fail(fname, "pred expression %q does not compile: %s", expr, tostring(k))
  end
  kernels[key] = k
  return k
end

local SELECT_OPTIONS, SELECT_NAMES = {"stream", "count"}, {"x", "y", "pred", "count"}
local SELECT16 = {"CULUA_SELECT16=1"}

local function select_common(fname, x, y, pred, opts, split)
  opts = core.options(fname, opts, SELECT_OPTIONS)
  local dt, n, dev, xs = open_dtype(fname, "x", x, dtypes)
  local ydt, yn, ydev, ys = open_dtype(fname, "y", y)
  if ydt ~= dt then fail(fname, "y has dtype %s but x has %s", ydt, dt) end
  if yn < n then fail(fname, "y has %d elements, fewer than x's %d", yn, n) end
  if ydev ~= dev then core.same_device(fname, SELECT_NAMES, x, y) end   -- raises, naming both
  local flags, fdt
  if type(pred) ~= "string" then
    if cuda.type(pred) ~= "cuda.array" then
      fail(fname, "pred must be a flags cuda.array or an expression string, got %s", cuda.type(pred) or type(pred))
    end
    local pn, pdev
    fdt, pn, pdev = open_dtype(fname, "pred", pred, flag_dtypes)
    if pn ~= n then fail(fname, "pred has %d elements but x has %d", pn, n) end
    flags = pred
    if pdev ~= dev then core.same_device(fname, SELECT_NAMES, x, y, flags) end
  end
  local out, cs = opts.count, nil
  if out ~= nil then
    if cuda.type(out) ~= "cuda.array" then
      fail(fname, "count must be a cuda.array (int64 or uint64), got %s", cuda.type(out) or type(out))
    end
    local cdt, cn, cdev
    cdt, cn, cdev, cs = open_dtype(fname, "count", out)
    if cdt ~= "int64" and cdt ~= "uint64" then fail(fname, "count has dtype %s; expected int64 or uint64", cdt) end
    if cn < 1 then fail(fname, "count is empty") end
    if cdev ~= dev then core.same_device(fname, SELECT_NAMES, x, y, flags, out) end
  end
  local stream = core.check_stream(fname, opts.stream, dev)
  -- a block writes only at or before its own elements, so compact in place
  -- is safe; any other overlap (and split in place) is not
  local es = elem_size(dt)
  if (xs ~= ys or split) and xs < ys + yn * es and ys < xs + n * es then
    fail(fname, "y overlaps x%s", split and "" or " (only y == x, in place, is allowed)")
  end
  -- the count is written (and, for split, read back) while the tiles write y
  if out then
    for _, a in ipairs{{"x", xs, n * es}, {"y", ys, yn * es}} do
      if cs < a[2] + a[3] and a[2] < cs + 8 then fail(fname, "count overlaps %s", a[1]) end
    end
  end
  if n == 0 then   -- nothing to select: a count of 0, with no launch
    if out then out:view(1, 1):fill(0, stream); return out end
    return 0
  end
  -- counts in 32 bits below 2^32 elements: the look-back's one-word path
  local c32 = n < (1 << 32)
  local kern, threads, tile
  if flags then   -- float16 and bfloat16 moved as their bits, by NVRTC's u16 kernels
    kern = core.kernel("scan", ("culua_scan_select_%s_%s%s"):format(lowp[dt] and "u16" or short[dt],
                                                                    fdt == "uint8" and "u8" or "i32", c32 and "_c32" or ""),
                       lowp[dt] and SELECT16 or nil, dev)
    threads, tile = SELECT_THREADS, SELECT_TILE[es]
  else
    kern = pred_kernel(fname, pred, dt, dev, c32, es)
    threads, tile = PRED_THREADS[es], PRED_TILE[es]
  end
  local ntiles = ceil_div(n, tile)
  local word = out or core.scratch("scan_word", dev, stream, 1)
  local cfg = {grid = ntiles, block = threads, stream = stream}
  local function pass(mode)
    local w, values, base, epoch = tiles_for(dev, stream, ntiles)
    kern:launch(cfg, x, flags or x, y, n, mode, word, word, w, values, base, epoch, ntiles)
  end
  if split then pass(2) end   -- the kept count first: the rest start there
  pass(split and 1 or 0)
  if out then return out end   -- no wait: the count is on the device, in out[1]
  return core.read_word(word, stream)
end

-- cuda.catalog.compact(x, y, pred [, opts]) -> count: the elements of x for which
-- pred holds, in order, to y[1 .. count]. pred: a uint8 or int32 flags array
-- (nonzero keeps) of x's length, or a CUDA C expression in x ("x > 0.5f").
-- opts: stream; count (an int64 or uint64 cuda.array): the count goes to
-- count[1] on the device and the call returns count without waiting (the
-- default reads it back, which waits for the stream).
function M.compact(x, y, pred, opts)
  return select_common("compact", x, y, pred, opts, false)
end

-- cuda.catalog.split(x, y, pred [, opts]) -> count: those for which pred holds,
-- in order, then the others, in order; opts as compact's
function M.split(x, y, pred, opts)
  return select_common("split", x, y, pred, opts, true)
end

-- }======================================================

-- on host arrays, in C: ints exact (wrapping), floats accumulated in float64
local ref_scan = core.reference("reference.scan", C.ref_scan)
M.reference = {
  scan = function (hx, hy, opts)
    opts = core.options("reference.scan", opts, {"op", "exclusive", "init"})
    return ref_scan(hx, hy or hx, opts.op or "add", opts.exclusive == true, opts.init)
  end,
}

M.info = {
  variants = variants,
  ops = ops,
  dtypes = dtypes,
  default = "lookback",
  limits = {naive = SEED_THREADS, blelloch = 2 * SEED_THREADS},
  pred = "a uint8 or int32 flags array, or a CUDA C expression in x (a float for float16 and bfloat16)",
  accumulate = "float32 for float16 and bfloat16 x (reduce's default), or x's dtype (scan's default)",
}

return M
