-- cuda.catalog.histogram: the C reference on hand-made inputs, the kernels'
-- source under NVRTC and the argument checks everywhere; with a GPU, every
-- input and counts dtype against the reference (counts and the left-out
-- count, exactly) on random, equal, few-valued, edge and special inputs at
-- odd lengths, bin counts from 1 to the global-atomics path, accumulation,
-- views, a stream, poisoned counts, and the seed's variant and its limit.
local T = require "culua.tap"
local cuda = require "cuda"
local cat = cuda.catalog
local ref = cat.reference.histogram

local dtypes = {"uint8", "uint16", "int32", "uint32", "float32", "float64"}
local cdtypes = {"uint32", "uint64"}
local is_float = {float32 = true, float64 = true}

-- {====================================================== without a GPU

local function host(dt, t) return cuda.host_array(dt, #t):copy_from(t) end
local function counted(dt, t, bins, opts, cdt)
  local hc = cuda.host_array(cdt or "uint32", bins)
  local left = ref(host(dt, t), hc, opts)
  return hc:totable(), left
end

do
  local c, left = counted("uint8", {0, 1, 1, 3, 255}, 4)
  T.is_deeply(c, {1, 2, 0, 1}, "reference: uint8, lo = 0 and hi = bins by default")
  T.is(left, 1, "  255 left out")
  c, left = counted("int32", {-10, -5, 0, 4, 5, 9, 10, 11}, 2, {lo = -5, hi = 10})
  T.is_deeply(c, {2, 3}, "reference: int32 over [-5, 10): 4 is bin 2 (9 * 2 // 15 = 1), hi is out")
  T.is(left, 3, "  -10, 10 and 11 left out")
  c = counted("uint32", {0, 0xffffffff, 0xfffffffe}, 3, {lo = 0, hi = 0xffffffff})
  T.is_deeply(c, {1, 0, 1}, "reference: uint32 near 2^32 in 64-bit arithmetic")
  c, left = counted("uint16", {7, 7, 7}, 1, {lo = 7, hi = 8}, "uint64")
  T.is_deeply(c, {3}, "reference: one bin, uint64 counts")
  T.is(left, 0, "  none left out")
  local nan, inf = 0 / 0, math.huge
  c, left = counted("float32", {0.0, -0.0, 0.5, 0.99999994, 1.0, nan, inf, -inf, -1e-30}, 2, {lo = 0, hi = 1})
  T.is_deeply(c, {2, 2}, "reference: float32 with -0.0 in bin 1 and the float below hi in the last")
  T.is(left, 5, "  hi, NaN, +-inf and a tiny negative left out")
  -- a v just below hi whose product rounds to bins is clamped to the last bin:
  -- 0.1 - 2^-56 times 10 / 0.1 is 10.0 in double
  c, left = counted("float64", {1 - 2 ^ -53}, 3, {lo = 0, hi = 1})
  T.is_deeply(c, {0, 0, 1}, "reference: float64 just below hi lands in the last bin")
  c, left = counted("float64", {0.1 - 2 ^ -56, 0.05}, 10, {lo = 0, hi = 0.1})
  T.is_deeply(c, {0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, "reference: a product rounding up to bins is clamped to the last bin")
  T.is(left, 0, "  and not left out")
  local hc = cuda.host_array("uint32", 3):copy_from({5, 6, 7})
  ref(host("uint8", {0, 2}), hc, {accumulate = true})
  T.is_deeply(hc:totable(), {6, 6, 8}, "reference: accumulate adds")
end
T.error_like(function () ref(host("int8", {1}), cuda.host_array("uint32", 2), {lo = 0, hi = 2}) end,
             "reference%.histogram: hx has dtype int8", "reference refuses int8")
T.error_like(function () ref(host("uint8", {1}), cuda.host_array("int32", 2)) end,
             "reference%.histogram: hcounts has dtype int32", "reference refuses int32 counts")
T.error_like(function () ref(host("float32", {1}), cuda.host_array("uint32", 2)) end,
             "cuda%.catalog%.reference%.histogram: lo is required for float32 input", "reference: lo required for floats")
T.error_like(function () ref(host("uint8", {1}), cuda.host_array("uint32", 2), {bins = 3}) end,
             "counts has 2 elements, fewer than bins %(3%)", "reference: bins beyond counts")

-- the kernels' source compiles under NVRTC, and the launch arguments fit
local src = cuda._catalog.source("histogram")
local prog
T.lives_ok(function () prog = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_80"}}) end,
           "kernels/histogram.cu compiles under NVRTC")
if prog then
  local function fits(name, ...) return cuda.check_args(cuda.signature(prog.ptx, name), ...) end
  local big = (1 << 40) + 3
  T.ok(fits("culua_histogram_u8_u32", 1, big, 2, 256, 0, 256, 0.0, 1.0, 1.0, 3, 0), "u8/u32 arguments")
  T.unlike(prog.ptx, "culua_histogram_f64_u64", "64-bit counters are not prebuilt")
  -- 64-bit counters: built by NVRTC when asked for, as lua/catalog/histogram.lua asks
  local wide
  T.lives_ok(function ()
    wide = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_80", "-DCULUA_HIST_COUNT64=1"}})
  end, "kernels/histogram.cu compiles under NVRTC with 64-bit counters")
  T.ok(wide and cuda.check_args(cuda.signature(wide.ptx, "culua_histogram_f64_u64"), 1, big, 2, 5000, 0, 1, -1.5,
                                2.5, 1250.0, 3, 1), "f64/u64 arguments")
end

local info = cat.list().histogram
T.is(info.default, "default", "list(): the default variant")
T.is_deeply(info.dtypes, {"uint8", "uint16", "int32", "uint32", "float32", "float64",
                          "float16", "bfloat16", "float8_e4m3", "float8_e5m2"},
            "list(): dtypes (the low-precision ones: t/037)")
T.is_deeply(info.counts, cdtypes, "list(): counts dtypes")

T.error_like(function () cat.histogram("x", nil) end,
             "cuda%.catalog%.histogram: x must be a cuda%.array, got string", "x not an array")
T.error_like(function () cat.histogram(nil, nil, {bogus = 1}) end,
             "cuda%.catalog%.histogram: unknown option 'bogus'", "unknown option")
T.error_like(function () cat.histogram(nil, nil, 5) end,
             "cuda%.catalog%.histogram: opts must be a table, got number", "opts not a table")

-- }======================================================


-- {====================================================== with a GPU

local function gpu_tests()
  -- data ranges a little wider than [lo, hi), so that some are left out
  local data = {uint8 = {0, 255}, uint16 = {0, 65535}, int32 = {-1000, 101000},
                uint32 = {0, 4000000000}, float32 = {-0.1, 1.1}, float64 = {-0.1, 1.1}}
  local bounds = {uint8 = {10, 250}, uint16 = {100, 60000}, int32 = {-500, 100000},
                  uint32 = {1000, 3000000000}, float32 = {0.0, 1.0}, float64 = {0.0, 1.0}}
  local POISON = 0xdeadbeef

  -- histogram of hx on the GPU against the reference: counts (poisoned, two
  -- more than bins: the tail must stay) and the left-out count
  local function check(what, hx, cdt, opts, extra)
    extra = extra or {}
    local bins = opts.bins
    local hc = cuda.host_array(cdt, bins + 2):fill(POISON)
    if opts.accumulate then hc:random(9, 0, 1000) end
    local x = cuda.array(hx.dtype, #hx):copy_from(hx)
    local c = cuda.array(cdt, bins + 2):copy_from(hc)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.variant, o.stream = extra.variant, extra.stream
    local left = cat.histogram(x, c, o)
    local want_left = ref(hx, hc, opts)
    local got = cuda.host_array(cdt, bins + 2)
    c:copy_to(got)
    local ok = got:bytes() == hc:bytes() and left == want_left
    if not ok then
      local g, w = got:totable(), hc:totable()
      for i = 1, #w do
        if g[i] ~= w[i] then T.diag(("  first difference: counts[%d] = %s, want %s"):format(i, g[i], w[i])); break end
      end
      T.diag(("  left out %s, want %s"):format(left, want_left))
    end
    T.ok(ok, what)
  end

  local function opts_for(dt, bins)
    local b = bounds[dt]
    return {bins = bins, lo = b[1], hi = b[2]}
  end

  local sizes = {1, 2, 31, 32, 33, 1000, 4097, (1 << 20) + 1}
  local binss = {1, 7, 256, 1024, 5000}
  for _, dt in ipairs(dtypes) do
    for _, cdt in ipairs(cdtypes) do
      for i, n in ipairs(sizes) do
        local bins = binss[(i - 1) % #binss + 1]
        local hx = cuda.host_array(dt, n):random(i, data[dt][1], data[dt][2])
        check(("%s/%s random n=%d bins=%d"):format(dt, cdt, n, bins), hx, cdt, opts_for(dt, bins))
      end
      local n = 4097
      local b = bounds[dt]
      local mid = is_float[dt] and 0.5 or (b[1] + b[2]) // 2
      check(("%s/%s all equal"):format(dt, cdt), cuda.host_array(dt, (1 << 20) + 1):fill(mid), cdt, opts_for(dt, 256))
      check(("%s/%s all equal, left out"):format(dt, cdt), cuda.host_array(dt, n):fill(data[dt][1]), cdt, opts_for(dt, 7))
      local few = cuda.host_array(dt, n)
      for k = 1, n do few[k] = ({b[1], mid, b[2] - (is_float[dt] and 0.25 or 1)})[k % 3 + 1] end
      check(("%s/%s few distinct"):format(dt, cdt), few, cdt, opts_for(dt, 1024))
      -- bin edges: lo, hi - 1 (or below hi), hi, below lo, and exact bin starts
      local edges = {b[1], b[2]}
      if is_float[dt] then
        for _, v in ipairs{0.99999994, 1 - 2 ^ -53, 1 / 7, 2 / 7, 3 / 7, 0 / 0, math.huge, -math.huge, -0.0, -1e-30, 1e30} do
          edges[#edges + 1] = v
        end
      else
        edges[#edges + 1] = b[2] - 1
        if b[1] > 0 then edges[#edges + 1] = b[1] - 1 end
        for k = 1, 6 do edges[#edges + 1] = b[1] + (b[2] - b[1]) * k // 7 end
        for k = 1, 6 do edges[#edges + 1] = b[1] + (b[2] - b[1]) * k // 7 - 1 end
      end
      local he = cuda.host_array(dt, #edges)
      for k, v in ipairs(edges) do he[k] = v end
      check(("%s/%s bin edges and specials"):format(dt, cdt), he, cdt, opts_for(dt, 7))
      check(("%s/%s bin edges, 1 bin"):format(dt, cdt), he, cdt, opts_for(dt, 1))
      -- accumulate, the seed's variant, the global path
      local hx = cuda.host_array(dt, 100003):random(77, data[dt][1], data[dt][2])
      local acc = opts_for(dt, 1024); acc.accumulate = true
      check(("%s/%s accumulate"):format(dt, cdt), hx, cdt, acc)
      check(("%s/%s seed variant"):format(dt, cdt), hx, cdt, opts_for(dt, 256), {variant = "seed"})
      check(("%s/%s global atomics (20000 bins)"):format(dt, cdt), hx, cdt, opts_for(dt, 20000))
    end
  end

  -- integer defaults: lo = 0, hi = bins
  do
    local hx = cuda.host_array("uint8", 100001):random(5, 0, 255)
    check("uint8 default range, 256 bins", hx, "uint32", {bins = 256})
    check("uint8 default range, 100 bins", hx, "uint64", {bins = 100})
  end

  -- beyond 2^24 elements
  local N = (1 << 24) + 7
  check("uint8 n = 2^24 + 7", cuda.host_array("uint8", N):random(11, 0, 255), "uint32", {bins = 256})
  check("float32 n = 2^24 + 7", cuda.host_array("float32", N):random(12, 0, 1), "uint64", {bins = 1024, lo = 0, hi = 1})

  -- views at odd offsets (scalar loads), counts a view too, on a stream
  for _, dt in ipairs(dtypes) do
    local n = 100003
    local hx = cuda.host_array(dt, n):random(21, data[dt][1], data[dt][2])
    local x = cuda.array(dt, n):copy_from(hx)
    local xv = x:view(4, n - 10)            -- starts 3 elements in
    local hv = cuda.host_array(dt, n - 10)
    xv:copy_to(hv)
    local c = cuda.array("uint32", 1100):fill(POISON)
    local cv = c:view(2, 1025)
    local s = cuda.stream()
    local o = opts_for(dt, 1024)
    o.stream = s
    local left = cat.histogram(xv, cv, o)
    s:synchronize()
    local hc = cuda.host_array("uint32", 1025):fill(POISON)
    local want_left = ref(hv, hc, opts_for(dt, 1024))
    local got = cuda.host_array("uint32", 1100)
    c:copy_to(got)
    local g, w = got:totable(), hc:totable()
    local ok = g[1] == POISON and left == want_left
    for k = 1, 1025 do if g[k + 1] ~= w[k] then ok = false end end
    T.ok(ok, ("%s view at an odd offset, counts a view, on a stream"):format(dt))
  end

  -- refusals that need arrays
  local x8 = cuda.array("uint8", 100)
  local xf = cuda.array("float32", 100)
  local c = cuda.array("uint32", 256)
  T.error_like(function () cat.histogram(cuda.array("int8", 4), c) end, "histogram: x has dtype int8; expected one of", "int8 input")
  T.error_like(function () cat.histogram(x8, cuda.array("int32", 4)) end, "histogram: counts has dtype int32; expected one of uint32, uint64", "int32 counts")
  T.error_like(function () cat.histogram(x8, c, {bins = 257}) end, "histogram: counts has 256 elements, fewer than bins %(257%)", "counts too short")
  T.error_like(function () cat.histogram(x8, c, {bins = 0}) end, "histogram: bins must be at least 1, got 0", "bins < 1")
  T.error_like(function () cat.histogram(x8, c, {lo = 5, hi = 5}) end, "histogram: lo %(5%) must be below hi %(5%)", "lo >= hi")
  T.error_like(function () cat.histogram(xf, c, {lo = 0 / 0, hi = 1}) end, "histogram: lo is NaN", "NaN lo")
  T.error_like(function () cat.histogram(xf, c, {lo = 0, hi = 0 / 0}) end, "histogram: hi is NaN", "NaN hi")
  T.error_like(function () cat.histogram(xf, c, {hi = 1}) end, "histogram: lo is required for float32 input", "lo missing for floats")
  T.error_like(function () cat.histogram(xf, c, {lo = 0}) end, "histogram: hi is required for float32 input", "hi missing for floats")
  T.error_like(function () cat.histogram(x8, c, {variant = "fast"}) end, "histogram: variant must be one of default, seed", "bad variant")
  T.error_like(function () cat.histogram(x8, c, {accumulate = 1}) end, "histogram: accumulate must be a boolean", "bad accumulate")
  T.error_like(function () cat.histogram(x8, cuda.array("uint32", 20000), {variant = "seed"}) end,
               "histogram: variant 'seed' keeps the bins in shared memory: at most 12288 bins, got 20000", "seed refused beyond its limit")
  local closed = cuda.array("uint8", 4)
  closed:close()
  T.error_like(function () cat.histogram(closed, c) end, "histogram: x is closed", "closed x")
  local cc = cuda.array("uint32", 4)
  cc:close()
  T.error_like(function () cat.histogram(x8, cc) end, "histogram: counts is closed", "closed counts")
  if cuda.device_count() > 1 then
    local other = cuda.array("uint32", 256, {device = 1})
    T.error_like(function () cat.histogram(x8, other) end, "histogram: counts is on device 1 but x is on device 0", "different devices")
  else
    T.skip("one device: arrays on different devices", 1)
  end
end

T.gpu_part(gpu_tests, "the GPU part")

-- }======================================================

T.done_testing()
