-- cuda.catalog.scan, reduce, compact and split: the C reference, the kernels'
-- source under NVRTC and the argument checks everywhere; with a GPU, every
-- dtype, op and mode against the reference at odd lengths, in place, views,
-- streams, the seed's variants and their limits, compaction with flags and
-- expressions.
local T = require "culua.tap"
-- the largest length: 257 tiles, or 33 under compute-sanitizer (T.sanitizer), where
-- every access is checked and 2^20 in each dtype, op and mode takes many minutes
local BIG = T.sanitizer and (1 << 17) + 1 or (1 << 20) + 1
local cuda = require "cuda"
local cat = cuda.catalog
local ref = cat.reference.scan

local dtypes = {"int32", "uint32", "int64", "uint64", "float32", "float64"}
local ops = {"add", "min", "max"}
local is_float = {float32 = true, float64 = true}

-- {====================================================== without a GPU

-- the reference on small host arrays
local function host(dt, t) return cuda.host_array(dt, #t):copy_from(t) end
local function scanned(dt, t, opts)
  local hx = host(dt, t)
  local hy = cuda.host_array(dt, #t)
  ref(hx, hy, opts)
  return hy:totable()
end
T.is_deeply(scanned("int32", {1, 2, 3, 4}), {1, 3, 6, 10}, "reference: inclusive add")
T.is_deeply(scanned("int32", {1, 2, 3, 4}, {exclusive = true}), {0, 1, 3, 6}, "reference: exclusive add")
T.is_deeply(scanned("int32", {1, 2, 3, 4}, {exclusive = true, init = 10}), {10, 11, 13, 16}, "reference: exclusive with init")
T.is_deeply(scanned("int64", {5, 3, 7, 1}, {op = "min"}), {5, 3, 3, 1}, "reference: min")
T.is_deeply(scanned("float64", {5, 3, 7, 1}, {op = "max", exclusive = true}), {-math.huge, 5, 5, 7},
            "reference: exclusive max starts at -inf for floats")
T.is_deeply(scanned("int32", {5, 3}, {op = "min", exclusive = true}), {0x7fffffff, 5}, "reference: exclusive min starts at the dtype's largest")
T.is_deeply(scanned("int32", {0x7fffffff, 1}), {0x7fffffff, -0x80000000}, "reference: int32 wraps two's complement")
T.is_deeply(scanned("uint32", {0xffffffff, 2}), {0xffffffff, 1}, "reference: uint32 wraps")
T.is_deeply(scanned("int64", {math.maxinteger, 1}), {math.maxinteger, math.mininteger}, "reference: int64 wraps")
do
  local h = host("float32", {0.1, 0.2, 0.3})
  ref(h, nil)   -- in place
  T.near(h[3], 0.6, 1e-6, "reference: in place, float32")
end
T.error_like(function () ref(host("int8", {1}), cuda.host_array("int8", 1)) end, "dtype int8 is not scanned", "reference refuses int8")
T.error_like(function () ref(host("int32", {1}), cuda.host_array("int32", 2)) end, "hx is int32%[1%] but hy is int32%[2%]",
             "reference refuses a length mismatch")

-- the kernels' source compiles under NVRTC, prebuilt part and predicate part
local src = cuda._catalog.source("scan")
local prog
T.lives_ok(function () prog = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_80"}}) end, "kernels/scan.cu compiles under NVRTC")
-- the argument lists lua/catalog/scan.lua launches with (pointers as integers here) fit the kernels
if prog then
  local function fits(name, ...) return cuda.check_args(cuda.signature(prog.ptx, name), ...) end
  local big = (1 << 40) + 3
  T.ok(fits("culua_scan_lookback_f64_min", 1, 2, big, 1, -1, 3, 4, big, 1073741823, big, 0), "lookback's arguments")
  T.ok(fits("culua_scan_naive_i32_add", 1, 1, 1024, 0, 0xffffffff), "naive's arguments")
  T.ok(fits("culua_scan_blelloch_u64_max", 1, 2, big, 1, -1, 0), "blelloch's arguments")
  T.ok(fits("culua_scan_propagate_f32_add", 1, big, 2), "propagate's arguments")
  T.ok(fits("culua_scan_select_i64_u8", 1, 2, 3, big, 2, 4, 4, 5, 6, big, 7, big), "select's arguments")
  T.ok(fits("culua_scan_select_f32_i32", 1, 2, 3, big, 0, 4, 4, 5, 6, big, 7, big), "select's arguments, int32 flags")
  T.ok(fits("culua_scan_select_u32_u8_c32", 1, 2, 3, 1000, 1, 4, 4, 5, 6, big, 7, big), "select's arguments, 32-bit counts")
end
T.lives_ok(function ()
  cuda.compile("#define CULUA_PRED(x) (x > 0.5f)\n" .. src,
               {options = {"-std=c++17", "-arch=compute_90", "-DCULUA_PRED_T=long long", "-DCULUA_PRED_NAME=p"}})
end, "the predicate kernel compiles with an expression")
T.error_like(function ()
  cuda.compile("#define CULUA_PRED(x) (x >>> 1)\n" .. src,
               {options = {"-std=c++17", "-arch=compute_90", "-DCULUA_PRED_T=float", "-DCULUA_PRED_NAME=p"}})
end, "expected an expression", "a malformed expression gives NVRTC's message")

local info = cat.list().scan
T.is(info.default, "lookback", "list(): the default variant")
T.is_deeply(info.ops, ops, "list(): ops")
T.is_deeply(info.dtypes, {"int32", "uint32", "int64", "uint64", "float32", "float64", "float16", "bfloat16"},
            "list(): dtypes (the low-precision ones: t/037)")

-- argument checks that need no device memory
T.error_like(function () cat.scan("x") end, "cuda%.catalog%.scan: x must be a cuda%.array, got string", "scan: x not an array")
T.error_like(function () cat.scan(nil, {bogus = 1}) end, "cuda%.catalog%.scan: unknown option 'bogus'", "scan: unknown option")
T.error_like(function () cat.scan(nil, nil, "fast") end, "cuda%.catalog%.scan: opts must be a table, got string", "scan: opts not a table")
T.error_like(function () cat.reduce(42) end, "cuda%.catalog%.reduce: x must be a cuda%.array, got number", "reduce: x not an array")
T.error_like(function () cat.reduce(nil, {exclusive = true}) end, "cuda%.catalog%.reduce: unknown option 'exclusive'", "reduce: unknown option")
T.error_like(function () cat.compact({}, nil, "x > 0") end, "cuda%.catalog%.compact: x must be a cuda%.array, got table", "compact: x not an array")
T.error_like(function () cat.split(nil, nil, "x", {init = 0}) end, "cuda%.catalog%.split: unknown option 'init'", "split: unknown option")

-- }======================================================


-- {====================================================== with a GPU

local function gpu_tests()
  local sizes = {1, 2, 31, 32, 33, 1000, 4097, BIG}
  local ranges = {int32 = {-50, 50}, uint32 = {0, 100}, int64 = {-50, 50}, uint64 = {0, 100}, float32 = {0, 1}, float64 = {0, 1}}

  local function input(dt, n, seed)
    local r = ranges[dt]
    return cuda.host_array(dt, n):random(seed, r[1], r[2])
  end

  -- y (device) against the reference of hx: exact for integers and for min/max,
  -- within a relative tolerance for float sums (inputs in [0, 1): no cancellation;
  -- float32 adds in another order than the float64 reference)
  local function same(y, want, dt, op)
    local got = cuda.host_array(dt, #want)
    y:copy_to(got)
    if not is_float[dt] or op ~= "add" then return got:bytes() == want:bytes() end   -- min, max: copies
    local _, rel = cuda.compare(got, want)
    return rel <= (dt == "float32" and 1e-4 or 1e-12), ("max relative error %.3g"):format(rel)
  end

  local function expect(hx, opts)
    local want = cuda.host_array(hx.dtype, #hx)
    ref(hx, want, opts)
    return want
  end

  local function poison(y)
    return y:fill(is_float[y.dtype] and 0 / 0 or 0x5a)
  end

  local modes = {{}, {exclusive = true}, {exclusive = true, init = 7}, {init = 3}}
  local function mode_name(m)
    return (m.exclusive and "exclusive" or "inclusive") .. (m.init and (" init " .. m.init) or "")
  end

  -- every dtype, op, mode and length
  for _, dt in ipairs(dtypes) do
    for _, n in ipairs(sizes) do
      local hx = input(dt, n, n)
      local x = cuda.array(dt, n):copy_from(hx)
      local y = cuda.array(dt, n)
      for _, op in ipairs(ops) do
        for _, m in ipairs(modes) do
          local want = expect(hx, {op = op, exclusive = m.exclusive, init = m.init})
          poison(y)
          local r = cat.scan(x, y, {op = op, exclusive = m.exclusive, init = m.init})
          local ok, why = same(y, want, dt, op)
          T.ok(ok and r == y, ("%s %s %s n=%d"):format(dt, op, mode_name(m), n), why)
        end
      end
    end
  end

  -- one beyond 2^24 (float32 sums there round: the tolerance is relative); not under
  -- compute-sanitizer (the kernels are those of the lengths above)
  if T.sanitizer then T.skip("2^24 + 3 under compute-sanitizer " .. T.sanitizer .. ": the lengths above run the same kernels", 6) end
  for _, dt in ipairs(T.sanitizer and {} or {"int32", "float32"}) do
    local n = (1 << 24) + 3
    local hx = input(dt, n, 24)
    local x = cuda.array(dt, n):copy_from(hx)
    for _, m in ipairs{{}, {exclusive = true}} do
      local y = poison(cuda.array(dt, n))
      cat.scan(x, y, m)
      local ok, why = same(y, expect(hx, m), dt, "add")
      T.ok(ok, ("%s add %s n=2^24+3"):format(dt, mode_name(m)), why)
    end
    local want = expect(hx)[n]
    T.near(cat.reduce(x), want, dt == "float32" and want * 1e-5 or 0, dt .. " reduce n=2^24+3")
  end

  -- integer wrap-around: int64 and uint64 values near the top
  do
    local n = 5000
    local h = cuda.host_array("int64", n)
    for i = 1, n do h[i] = math.maxinteger - (i % 7) * 1000 end
    local x = cuda.array("int64", n):copy_from(h)
    local y = poison(cuda.array("int64", n))
    cat.scan(x, y)
    T.ok(same(y, expect(h), "int64", "add"), "int64 sums wrap exactly (two's complement)")
    T.is(cat.reduce(x), expect(h)[n], "int64 reduce wraps as the reference")
    local hu = cuda.host_array("uint64", n)
    for i = 1, n do hu[i] = math.maxinteger - (i % 5) end
    local xu = cuda.array("uint64", n):copy_from(hu)
    cat.scan(xu)   -- in place
    T.ok(same(xu, expect(hu), "uint64", "add"), "uint64 sums wrap exactly, in place")
    local hi = cuda.host_array("int32", n):fill(0x7ffffff0)
    local xi = cuda.array("int32", n):copy_from(hi)
    T.is(cat.reduce(xi), expect(hi)[n], "int32 reduce wraps")
  end

  -- reduce, every dtype and op
  for _, dt in ipairs(dtypes) do
    for _, op in ipairs(ops) do
      local n = 100003
      local hx = input(dt, n, 99)
      local x = cuda.array(dt, n):copy_from(hx)
      local got, want = cat.reduce(x, {op = op}), expect(hx, {op = op})[n]
      if is_float[dt] and op == "add" then
        T.near(got, want, want * (dt == "float32" and 1e-5 or 1e-12), ("reduce %s %s"):format(dt, op))
      else
        T.is(got, want, ("reduce %s %s"):format(dt, op))
      end
      T.is(math.type(got), is_float[dt] and "float" or "integer", ("reduce %s %s returns a Lua %s"):format(dt, op, math.type(want)))
    end
  end

  -- in place, views at odd offsets (not 16-byte aligned), a stream
  for _, dt in ipairs{"float32", "int32", "int64", "float64"} do
    for _, n in ipairs{33, 4097, BIG} do
      local hx = input(dt, n, 5)
      local want = expect(hx, {})
      local x = cuda.array(dt, n):copy_from(hx)
      cat.scan(x)
      T.ok(same(x, want, dt, "add"), ("%s in place n=%d"):format(dt, n))
      local big, out = cuda.array(dt, n + 8), poison(cuda.array(dt, n + 8))
      local xv, yv = big:view(3, n):copy_from(hx), out:view(2, n)
      cat.scan(xv, yv, {})
      T.ok(same(yv, want, dt, "add"), ("%s views at offsets 2 and 1 n=%d"):format(dt, n))
      cat.scan(xv, {exclusive = true})
      T.ok(same(xv, expect(hx, {exclusive = true}), dt, "add"), ("%s view in place, exclusive n=%d"):format(dt, n))
      local s = cuda.stream()
      local xs, ys = cuda.array(dt, n):copy_from(hx), poison(cuda.array(dt, n))
      cat.scan(xs, ys, {stream = s})
      s:synchronize()
      T.ok(same(ys, want, dt, "add"), ("%s on a stream n=%d"):format(dt, n))
      T.is(cat.reduce(xs, {stream = s, op = "max"}), expect(hx, {op = "max"})[n], ("%s reduce on a stream"):format(dt))
    end
  end

  -- seed 003's variants within their limits, and their refusals
  local limits = {naive = 1024, blelloch = 2048, global = math.huge}
  for _, variant in ipairs{"naive", "blelloch", "global"} do
    for _, dt in ipairs{"float32", "int64", "uint32"} do
      for _, n in ipairs{1, 31, 33, 1000, 1024, 2048, 4097, BIG} do
        if n <= limits[variant] then
          local hx = input(dt, n, n + 1)
          local x = cuda.array(dt, n):copy_from(hx)
          for _, op in ipairs{"add", "max"} do
            for _, m in ipairs{{}, {exclusive = true, init = 5}} do
              local y = poison(cuda.array(dt, n))
              cat.scan(x, y, {variant = variant, op = op, exclusive = m.exclusive, init = m.init})
              local ok, why = same(y, expect(hx, {op = op, exclusive = m.exclusive, init = m.init}), dt, op)
              T.ok(ok, ("variant %s %s %s %s n=%d"):format(variant, dt, op, mode_name(m), n), why)
            end
          end
        end
      end
    end
  end
  local x5000 = cuda.array("float32", 5000)
  T.error_like(function () cat.scan(x5000, {variant = "naive"}) end,
               "cuda%.catalog%.scan: variant 'naive' handles at most 1024 elements %(one block%), got 5000", "naive refuses 5000")
  T.error_like(function () cat.scan(x5000, {variant = "blelloch"}) end,
               "cuda%.catalog%.scan: variant 'blelloch' handles at most 2048 elements", "blelloch refuses 5000")

  -- argument errors on device arrays
  local xi = cuda.array("int32", 10)
  T.error_like(function () cat.scan(cuda.array("int8", 4)) end, "scan: x has dtype int8; expected one of int32", "scan refuses int8")
  T.error_like(function () cat.scan(xi, cuda.array("float32", 10)) end, "scan: y has dtype float32 but x has int32", "dtype mismatch")
  T.error_like(function () cat.scan(xi, cuda.array("int32", 9)) end, "scan: y has 9 elements but x has 10", "length mismatch")
  T.error_like(function () cat.scan(xi, {op = "mul"}) end, "scan: op must be one of add, min, max, got mul", "bad op")
  T.error_like(function () cat.scan(xi, {variant = "fast"}) end, "scan: variant must be one of lookback, naive, blelloch, global, got fast", "bad variant")
  T.error_like(function () cat.scan(xi, {init = 0.5}) end, "scan: init must be an integer for int32, got 0.5", "fractional init for ints")
  T.error_like(function () cat.scan(xi, {exclusive = 1}) end, "scan: exclusive must be a boolean, got number", "exclusive not a boolean")
  T.error_like(function () cat.scan(xi, {stream = 3}) end, "scan: stream must be a cuda%.stream, got number", "bad stream")
  do
    local c = cuda.array("int32", 10)
    c:close()
    T.error_like(function () cat.scan(c) end, "cuda%.catalog%.scan: x is closed", "closed array")
  end
  if cuda.device_count() > 1 then
    local other = cuda.array("int32", 10, {device = 1})
    T.error_like(function () cat.scan(xi, other) end, "scan: y is on device 1 but x is on device 0", "arrays on two devices")
  end

  -- compact and split: flags arrays and expressions, against Lua references
  local function select_ref(hx, keep)
    local kept, rest = {}, {}
    for i = 1, #hx do
      if keep(i, hx[i]) then kept[#kept + 1] = hx[i] else rest[#rest + 1] = hx[i] end
    end
    return kept, rest
  end
  local function prefix_equal(y, t, first)
    local got = y:totable()
    for i = 1, #t do
      if got[first + i - 1] ~= t[i] then return false, ("element %d: %s, expected %s"):format(first + i - 1, got[first + i - 1], t[i]) end
    end
    return true
  end
  for _, dt in ipairs{"float32", "int32", "float64", "uint64"} do
    for _, n in ipairs{1, 33, 4097, BIG} do
      local hx = is_float[dt] and cuda.host_array(dt, n):random(n, 0, 1) or cuda.host_array(dt, n):random(n, 0, 99)
      local x = cuda.array(dt, n):copy_from(hx)
      local y = cuda.array(dt, n)
      for _, fdt in ipairs{"uint8", "int32"} do
        local hf = cuda.host_array(fdt, n):random(n + 7, 0, 2)   -- a third zeros
        local f = cuda.array(fdt, n):copy_from(hf)
        local kept, rest = select_ref(hx, function (i) return hf[i] ~= 0 end)
        poison(y)
        local c = cat.compact(x, y, f)
        T.ok(c == #kept and prefix_equal(y, kept, 1), ("compact %s with %s flags n=%d: %d kept"):format(dt, fdt, n, c))
        poison(y)
        c = cat.split(x, y, f)
        T.ok(c == #kept and prefix_equal(y, kept, 1) and prefix_equal(y, rest, #kept + 1),
             ("split %s with %s flags n=%d"):format(dt, fdt, n))
      end
      local expr = is_float[dt] and "x > 0.5" or "x % 3 == 0"
      local keep = is_float[dt] and function (_, v) return v > 0.5 end or function (_, v) return v % 3 == 0 end
      local kept, rest = select_ref(hx, keep)
      poison(y)
      local c = cat.compact(x, y, expr)
      local ok, why = prefix_equal(y, kept, 1)
      T.ok(c == #kept and ok, ("compact %s '%s' n=%d: %d kept"):format(dt, expr, n, c), why)
      poison(y)
      c = cat.split(x, y, expr)
      T.ok(c == #kept and prefix_equal(y, kept, 1) and prefix_equal(y, rest, #kept + 1), ("split %s '%s' n=%d"):format(dt, expr, n))
      T.is(cat.compact(x, poison(y), "true"), n, ("compact %s n=%d: all kept"):format(dt, n))
      T.ok(prefix_equal(y, hx:totable(), 1), "  and in order")
      T.is(cat.compact(x, poison(y), "false"), 0, ("compact %s n=%d: none kept"):format(dt, n))
      T.is(cat.split(x, poison(y), "false"), 0, ("split %s n=%d: none kept"):format(dt, n))
      T.ok(prefix_equal(y, hx:totable(), 1), "  and the rest in order")
    end
  end
  -- into views at every offset from a 128-byte line (the warps' runs are written from
  -- aligned places, kernels/scan.cu's write_run): nothing before the view is touched
  for _, dt in ipairs{"float32", "float64"} do
    local n = 70001
    local hx = cuda.host_array(dt, n):random(11, 0, 1)
    local kept, rest = select_ref(hx, function (_, v) return v > 0.3 end)
    local hf = cuda.host_array("uint8", n):random(12, 0, 2)
    local kf, rf = select_ref(hx, function (i) return hf[i] ~= 0 end)
    local f = cuda.array("uint8", n):copy_from(hf)
    local parent = cuda.array(dt, n + 40)
    local x = cuda.array(dt, n + 3)
    local bad, line = {}, 128 // (dt == "float32" and 4 or 8)   -- elements a 128-byte line
    for off = 0, line - 1, 3 do
      local xv, yv = x:view(1 + off % 4, n):copy_from(hx), parent:view(1 + off, n)
      poison(parent)
      local c = cat.compact(xv, yv, "x > 0.3")
      local got = parent:totable()
      local whole = c == #kept and prefix_equal(yv, kept, 1)
      for i = 1, off do whole = whole and got[i] ~= got[i] end   -- still NaN
      for i = off + #kept + 1, n + 40 do whole = whole and got[i] ~= got[i] end
      poison(parent)
      c = cat.split(xv, yv, f)
      got = parent:totable()
      whole = whole and c == #kf and prefix_equal(yv, kf, 1) and prefix_equal(yv, rf, #kf + 1)
      for i = 1, off do whole = whole and got[i] ~= got[i] end
      for i = off + n + 1, n + 40 do whole = whole and got[i] ~= got[i] end
      if not whole then bad[#bad + 1] = off end
    end
    T.ok(#bad == 0, ("compact and split %s into views at offsets 0..%d: right, nothing outside written"):format(dt, line - 1),
         #bad > 0 and ("wrong at offsets " .. table.concat(bad, ", ")) or nil)
  end
  do   -- compact in place, on a stream, into a longer y
    local n = 100001
    local hx = cuda.host_array("float32", n):random(3, 0, 1)
    local kept = select_ref(hx, function (_, v) return v < 0.25 end)
    local x = cuda.array("float32", n):copy_from(hx)
    local s = cuda.stream()
    T.is(cat.compact(x, x, "x < 0.25f", {stream = s}), #kept, "compact in place on a stream: the count")
    T.ok(prefix_equal(x, kept, 1), "  and the elements")
    local long = poison(cuda.array("float32", 2 * n))
    x:copy_from(hx)
    T.is(cat.compact(x, long, "x < 0.25f"), #kept, "compact into a longer y")
    local c = cuda.array("int64", 1):fill(-1)
    poison(long)
    T.ok(cat.compact(x, long, "x < 0.25f", {count = c}) == c and c:totable()[1] == #kept and prefix_equal(long, kept, 1),
         "compact with a count array: the count on the device, no read-back")
    local hf = cuda.host_array("uint8", n):random(4, 0, 2)
    local kf, rf = select_ref(hx, function (i) return hf[i] ~= 0 end)
    poison(long)
    T.ok(cat.split(x, long, cuda.array("uint8", n):copy_from(hf), {count = c}) == c and c:totable()[1] == #kf
         and prefix_equal(long, kf, 1) and prefix_equal(long, rf, #kf + 1), "split with a count array")
    T.error_like(function () cat.compact(x, long, "x < 0.25f", {count = cuda.array("int32", 1)}) end,
                 "compact: count has dtype int32; expected int64 or uint64", "compact: a count array of another dtype")
    T.error_like(function () cat.compact(x, long, "x < 0.25f", {count = 5}) end,
                 "compact: count must be a cuda.array %(int64 or uint64%), got number", "compact: a count that is not an array")
    do
      local x64 = cuda.array("int64", 100):fill(1)
      local y64 = cuda.array("int64", 100)
      T.error_like(function () cat.compact(x64, y64, "x > 0", {count = y64:view(100, 1)}) end,
                   "compact: count overlaps y", "compact: a count inside y")
      T.error_like(function () cat.split(x64, y64, "x > 0", {count = x64:view(1, 1)}) end,
                   "split: count overlaps x", "split: a count inside x")
    end
  end
  local xf = cuda.array("float32", 100)
  T.error_like(function () cat.compact(xf, cuda.array("float32", 100), "x >>> 1") end,
               "cuda%.catalog%.compact: pred expression \"x >>> 1\" does not compile: .*expected an expression", "malformed expression")
  T.error_like(function () cat.compact(xf, cuda.array("float32", 50), "x > 0") end,
               "compact: y has 50 elements, fewer than x's 100", "compact: y too short")
  T.error_like(function () cat.compact(xf, cuda.array("float32", 100), cuda.array("float32", 100)) end,
               "compact: pred has dtype float32; expected one of uint8, int32", "compact: float flags")
  T.error_like(function () cat.compact(xf, cuda.array("float32", 100), cuda.array("uint8", 99)) end,
               "compact: pred has 99 elements but x has 100", "compact: flags of another length")
  T.error_like(function () cat.split(xf, xf, "x > 0") end, "split: y overlaps x", "split refuses in place")
  T.error_like(function () cat.compact(xf, cuda.array("int32", 100), "x > 0") end, "compact: y has dtype int32 but x has float32", "compact: dtype mismatch")
  T.error_like(function () cat.compact(xf, cuda.array("float32", 100), 5) end,
               "compact: pred must be a flags cuda%.array or an expression string, got number", "compact: bad pred")

  -- a scan without options called again on the same arrays replays a plan
  -- (lua/catalog/scan.lua): new values each round, y and in place, a larger scan between
  -- (its scratch replaces the plan's), the scratch given back
  for _, c in ipairs{{"float32", 1 << 16}, {"int32", 100001}, {"float64", 4097}, {"uint32", 33}} do
    local dt, n = c[1], c[2]
    local x, y = cuda.array(dt, n), cuda.array(dt, n)
    local name, good = ("replayed scan %s n=%d"):format(dt, n), true
    for round = 1, 5 do
      local hx = input(dt, n, 100 * round + n)
      local want = expect(hx, {op = "add"})
      if round == 3 then cat.scan(cuda.array(dt, 300 * n):fill(1)) end
      if round == 5 then cat.free_scratch() end
      x:copy_from(hx)
      poison(y)
      local r = cat.scan(x, y)
      local ok, why = same(y, want, dt, "add")
      if ok and r == y then
        r = cat.scan(x)
        ok, why = same(x, want, dt, "add")
        ok = ok and r == x
      end
      if not ok then T.ok(false, ("%s: round %d"):format(name, round), why); good = false; break end
    end
    if good then T.ok(true, name .. ": five rounds as the reference, y and in place") end
  end
  local x, y = cuda.array("float32", 1000):fill(1), cuda.array("float32", 1000)
  cat.scan(x, y)
  cat.scan(x, y)
  y:close()
  T.error_like(function () cat.scan(x, y) end, "y is closed", "replayed scan: y closed since")

  -- the scratch the catalog keeps for reuse (here a stream's look-back state) is given
  -- back by free_scratch, and the next call makes it anew
  local n = (1 << 20) + 3
  local s = cuda.stream()
  local xs = cuda.array("int32", n):fill(1)
  cat.scan(xs, {stream = s})
  s:synchronize()
  collectgarbage()   -- the file's earlier arrays go first, so that only free_scratch frees below
  collectgarbage()
  collectgarbage("stop")
  local held = cuda.memory_in_use()
  local freed = cat.free_scratch()
  local after = cuda.memory_in_use()
  collectgarbage("restart")
  T.ok(freed > 0, ("free_scratch gives back the stream's scan scratch (%d bytes)"):format(freed))
  T.is(after, held - freed, "free_scratch: the memory in use falls by what it returns")
  T.is(cat.free_scratch(), 0, "free_scratch again: nothing left to give back")
  xs:fill(1)
  cat.scan(xs, {stream = s})
  s:synchronize()
  T.is(xs:view(n, 1):totable()[1], n, "a scan after free_scratch makes new scratch and is right")
end

T.gpu_part(gpu_tests, "the GPU part")

-- }======================================================

T.done_testing()
