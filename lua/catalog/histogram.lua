-- culua.catalog.histogram: cuda.catalog.histogram (kernels/histogram.cu):
-- equal-width bins over [lo, hi) for 1-, 2-, 4- and 8-byte input (float16,
-- bfloat16 and fp8 too, as floats) counted into uint32 or uint64 counts, from seed 003's shared-memory histogram to
-- one that aggregates equal values within a warp before any atomic.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local C = cuda._catalog

local fail, one_of, ceil_div = core.fail, core.one_of, core.ceil_div

local M = {}

local dtypes = {"uint8", "uint16", "int32", "uint32", "float32", "float64",
                "float16", "bfloat16", "float8_e4m3", "float8_e5m2"}
local count_dtypes = {"uint32", "uint64"}
local short = {uint8 = "u8", uint16 = "u16", int32 = "i32", uint32 = "u32", float32 = "f32",
               float64 = "f64", uint64 = "u64", float16 = "f16", bfloat16 = "bf16",
               float8_e4m3 = "e4m3", float8_e5m2 = "e5m2"}
-- the low-precision floats' kernels are built by NVRTC on first use (-DCULUA_LOWP)
local lowp = {float16 = true, bfloat16 = true, float8_e4m3 = true, float8_e5m2 = true}
local DEFINES = {[false] = {[false] = nil, [true] = {"CULUA_HIST_COUNT64=1"}},
                 [true] = {[false] = {"CULUA_LOWP=1"}, [true] = {"CULUA_LOWP=1", "CULUA_HIST_COUNT64=1"}}}
local variants = {"default", "seed"}

local HC = core.constants("histogram")
local THREADS = HC.HIST_WARPS * 32   -- kernels/histogram.cu: a copy of the bins a warp
-- bins a block keeps in shared memory (4-byte words): 48 KiB, what a launch
-- may ask for without opting in; beyond it the default variant counts in
-- global memory and the seed's is refused
local SHARED_BINS = 48 * 1024 // 4
-- the default keeps a copy of the bins a lane up to LANE_BINS (32 KiB), else a copy a
-- warp where they fit (kernels/histogram.cu says why)
local LANE_BINS = HC.HIST_LANE_BINS
local COPIES = THREADS // 32
local MAX_BINS = 1 << 30   -- keeps (v - lo) * bins within 64 bits (below)
-- integer lo and hi: within these, v - lo < 2^34 and (v - lo) * bins < 2^64
local INT_LO, INT_HI = -(1 << 32), 1 << 33

-- {====================================================== checks

local open_dtype = core.open_dtype

local function is_float(dt) return dt == "float32" or dt == "float64" or lowp[dt] == true end

-- bins, lo and hi from the options, checked; counts holds `ncounts` elements
local function range(fname, dt, ncounts, opts)
  local bins = opts.bins
  if bins == nil then bins = ncounts
  elseif math.type(bins) ~= "integer" then
    fail(fname, "bins must be an integer, got %s", tostring(bins))
  end
  if bins < 1 then fail(fname, "bins must be at least 1, got %d", bins) end
  if bins > MAX_BINS then fail(fname, "bins must be at most %d, got %d", MAX_BINS, bins) end
  if bins > ncounts then fail(fname, "counts has %d elements, fewer than bins (%d)", ncounts, bins) end
  local lo, hi = opts.lo, opts.hi
  if is_float(dt) then
    if lo == nil then fail(fname, "lo is required for %s input", dt) end
    if hi == nil then fail(fname, "hi is required for %s input", dt) end
  end
  lo, hi = lo or 0, hi or bins
  for what, v in pairs{lo = lo, hi = hi} do
    if type(v) ~= "number" then fail(fname, "%s must be a number, got %s", what, type(v)) end
    if v ~= v then fail(fname, "%s is NaN", what) end
  end
  if is_float(dt) then
    lo, hi = lo + 0.0, hi + 0.0
    if lo == -math.huge or hi == math.huge then fail(fname, "lo and hi must be finite") end
  else
    local ilo, ihi = math.tointeger(lo), math.tointeger(hi)
    if not ilo then fail(fname, "lo must be an integer for %s input, got %s", dt, tostring(lo)) end
    if not ihi then fail(fname, "hi must be an integer for %s input, got %s", dt, tostring(hi)) end
    if ilo < INT_LO or ilo > INT_HI then fail(fname, "lo must be within [%d, %d], got %d", INT_LO, INT_HI, ilo) end
    if ihi < INT_LO or ihi > INT_HI then fail(fname, "hi must be within [%d, %d], got %d", INT_LO, INT_HI, ihi) end
    lo, hi = ilo, ihi
  end
  if not (lo < hi) then fail(fname, "lo (%s) must be below hi (%s)", tostring(lo), tostring(hi)) end
  return bins, lo, hi
end

-- }======================================================


-- the left-out count, read back through core.read_word
core.scratch_kind("histogram_word", "int64")   -- zeroed by each call, on its stream


-- {====================================================== histogram

-- the grid: as many blocks as are resident at once (at most one an 8 KiB of
-- input a thread block would read in one sweep), so each reads a grid-stride
local grids = setmetatable({}, {__mode = "k"})   -- kernel -> shared bytes -> blocks resident
local function grid_for(kern, dev, n, shared)
  local g = grids[kern] or {}
  grids[kern] = g
  local per = g[shared]
  if not per then   -- a driver call: asked once a kernel and size
    per = math.max(1, kern:max_active_blocks(THREADS, shared))
    g[shared] = per
  end
  return math.max(1, math.min(per * core.sm_count(dev), ceil_div(n, THREADS * 4)))
end

-- cuda.catalog.histogram(x, counts [, opts]) -> how many of x were left out
--   opts: bins (#counts), lo and hi (0 and bins for integer input; required
--   for floats), accumulate (false: counts[1 .. bins] are zeroed first),
--   variant ("default" | "seed"), stream
function M.histogram(x, counts, opts)
  local fname = "histogram"
  opts = core.options(fname, opts, {"bins", "lo", "hi", "accumulate", "variant", "stream"})
  local dt = open_dtype(fname, "x", x, dtypes)
  local cdt = open_dtype(fname, "counts", counts, count_dtypes)
  local dev = core.same_device(fname, {"x", "counts"}, x, counts)
  local stream = core.check_stream(fname, opts.stream, dev)
  local variant = one_of(fname, "variant", opts.variant or "default", variants)
  core.flag(fname, opts, "accumulate")
  local bins, lo, hi = range(fname, dt, #counts, opts)
  if variant == "seed" and bins > SHARED_BINS then
    fail(fname, "variant 'seed' keeps the bins in shared memory: at most %d bins, got %d", SHARED_BINS, bins)
  end
  local n = #x
  if not opts.accumulate then (bins == #counts and counts or counts:view(1, bins)):fill(0, stream) end
  if n == 0 then return 0 end   -- nothing binned, nothing left out: no launch, no wait
  local word = core.scratch("histogram_word", dev, stream, 1):view(1, 1)
  word:fill(0, stream)
  do
    -- 64-bit counters are built by NVRTC on first use (then cached on disk):
    -- prebuilding them doubled the family's build time for a rare case
    -- (the two keys go through locals: Lua 5.4.4's code for t[a == b][c == d] indexes
    -- the boolean a == b, not t's entry, and raised "attempt to index a boolean value")
    local lp, wide = lowp[dt] == true, cdt == "uint64"
    local kern = core.kernel("histogram", ("culua_histogram_%s_%s"):format(short[dt], short[cdt]),
                             DEFINES[lp][wide], dev)
    local mode = variant == "seed" and 2 or (bins <= SHARED_BINS and 0 or 1)
    local shared = mode == 1 and 0 or 4 * bins
    if mode == 0 and bins <= LANE_BINS then   -- a copy of the bins a lane
      mode, shared = mode | 16, 4 * bins * 32
    elseif mode == 0 and bins * COPIES <= SHARED_BINS then   -- a copy a warp
      mode, shared = mode | 8, 4 * bins * COPIES
    end
    -- 16-byte vector loads where x starts on 16 bytes (the seed reads one by one)
    if mode ~= 2 and x.ptr % 16 == 0 then mode = mode | 4 end
    local ilo, ihi, flo, fhi, scale = 0, 1, 0.0, 1.0, 1.0
    if is_float(dt) then flo, fhi, scale = lo, hi, bins / (hi - lo) else ilo, ihi = lo, hi end
    kern:launch({grid = grid_for(kern, dev, n, shared), block = THREADS, shared = shared, stream = stream},
                x, n, counts, bins, ilo, ihi, flo, fhi, scale, word, mode)
  end
  return core.read_word(word, stream)
end

-- }======================================================

-- on host arrays, in C: the same binning rule; returns the left-out count
local ref_histogram = core.reference("reference.histogram", C.ref_histogram)
M.reference = {
  histogram = function (hx, hcounts, opts)
    local fname = "reference.histogram"
    opts = core.options(fname, opts, {"bins", "lo", "hi", "accumulate"})
    local bins, lo, hi = range(fname, hx.dtype, #hcounts, opts)
    return ref_histogram(hx, hcounts, bins, lo, hi, opts.accumulate == true)
  end,
}

M.info = {
  variants = variants,
  dtypes = dtypes,
  counts = count_dtypes,
  default = "default",
  limits = {seed = SHARED_BINS, shared = SHARED_BINS},
}

return M
