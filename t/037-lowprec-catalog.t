-- float16, bfloat16 and fp8 in the catalog (issue 37): scan, reduce, compact
-- and split of float16 and bfloat16 (summed in float32, `accumulate` the
-- result's dtype), histogram of the four as floats. Without a GPU: the C
-- references on the new dtypes (through half.c), the NVRTC variants compile
-- and the argument lists lua/catalog/scan.lua and histogram.lua launch them
-- with fit; with a GPU: every case against the float64 references at odd
-- lengths, specials, views, outputs poisoned before each run.
local T = require "culua.tap"
local cuda = require "cuda"
local cat = cuda.catalog
local ref, ref_hist = cat.reference.scan, cat.reference.histogram

local BIG = T.sanitizer and (1 << 17) + 3 or (1 << 20) + 3
local scan_dtypes = {"float16", "bfloat16"}
local hist_dtypes = {"float16", "bfloat16", "float8_e4m3", "float8_e5m2"}
local ops = {"add", "min", "max"}
local NAN, INF = 0 / 0, math.huge
-- the least subnormal of each format (doc/dtypes.md)
local tiny = {float16 = 2^-24, bfloat16 = 2^-133, float8_e4m3 = 2^-9, float8_e5m2 = 2^-16}

local function host(dt, t) return cuda.host_array(dt, #t):copy_from(t) end
-- a == b for Lua numbers, NaN equal to NaN and -0.0 apart from 0.0
local function same_value(a, b)
  if a ~= a then return b ~= b end
  return a == b and (a ~= 0 or 1 / a == 1 / b)
end
local function same_list(got, want)
  if #got ~= #want then return false, ("%d values, expected %d"):format(#got, #want) end
  for i = 1, #want do
    if not same_value(got[i], want[i]) then
      return false, ("element %d: %s, expected %s"):format(i, tostring(got[i]), tostring(want[i]))
    end
  end
  return true
end


-- {====================================================== without a GPU

-- the scan reference: float16 and bfloat16 read exactly, summed in double, rounded
-- once into hy (their dtype or float32)
do
  local hx = host("float16", {1, 2, 0.1, 65504, -0.0})
  local h16, h32 = cuda.host_array("float16", 5), cuda.host_array("float32", 5)
  ref(hx, h16)
  ref(hx, h32)
  local x3 = hx[3]   -- 0.1 as float16: 0.0999755859375
  T.ok(same_list(h16:totable(), {1, 3, 3.099609375, 65504, 65504}), "reference: float16 into float16 (rounded once)")
  local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end
  T.ok(same_list(h32:totable(), {1, 3, 3 + x3, f32(65507 + x3), f32(65507 + x3)}), "reference: float16 into float32")
  ref(hx, h16, {op = "min", exclusive = true})
  T.ok(same_list(h16:totable(), {INF, 1, 1, 0.0999755859375, 0.0999755859375}), "reference: exclusive min from +inf")
  local hb = host("bfloat16", {3e38, 3e38, NAN, 1})
  local hbf = cuda.host_array("bfloat16", 4)
  ref(hb, hbf)
  T.ok(same_list(hbf:totable(), {hb[1], INF, NAN, NAN}), "reference: bfloat16 past its range is inf, NaN stays")
  ref(hb, hbf, {op = "max", init = 0.5})
  T.is(hbf[1], hb[1], "reference: max with init")
  T.error_like(function () ref(hx, cuda.host_array("float64", 5)) end, "hx is float16%[5%] but hy is float64%[5%]",
               "reference: float16 into float64 refused")
  T.error_like(function () ref(host("float8_e4m3", {1}), cuda.host_array("float8_e4m3", 1)) end,
               "dtype float8_e4m3 is not scanned", "reference: fp8 is not scanned")
end

-- the histogram reference on each format: the exact stored value, NaN and values
-- outside [lo, hi) left out, -0.0 and subnormals in the first bin of [0, hi)
for _, dt in ipairs(hist_dtypes) do
  local fp8 = dt:find("float8", 1, true) ~= nil
  local hx = host(dt, {-0.0, tiny[dt], 0.5, 1, 1.5, 3.5, 4, -1, NAN})
  if not fp8 then hx = host(dt, {-0.0, tiny[dt], 0.5, 1, 1.5, 3.5, 4, -1, NAN, INF, -INF}) end
  local hc = cuda.host_array("uint32", 4)
  local out = ref_hist(hx, hc, {lo = 0, hi = 4})
  T.ok(same_list(hc:totable(), {3, 2, 0, 1}) and out == (fp8 and 3 or 5),
       dt .. ": reference histogram", table.concat(hc:totable(), " ") .. " left out " .. out)
  T.error_like(function () ref_hist(hx, hc, {bins = 4}) end, "lo is required for " .. dt .. " input",
               dt .. ": reference histogram wants lo")
end

-- the NVRTC variants compile (each is one program, as core.kernel builds it), and
-- the argument lists the families launch with fit their PTX signatures
local big = (1 << 40) + 3
local function variant(file, defines, prelude)
  local opts = {"-std=c++17", "-arch=compute_80"}
  for _, d in ipairs(defines) do opts[#opts + 1] = "-D" .. d end
  local ok, prog = pcall(cuda.compile, (prelude or "") .. cuda._catalog.source(file), {options = opts})
  return ok and prog or nil, not ok and tostring(prog) or nil
end
local function fits(prog, name, ...) return prog ~= nil and cuda.check_args(cuda.signature(prog.ptx, name), ...) end

for _, c in ipairs{{"__half", "float", 0, 1}, {"__nv_bfloat16", "__nv_bfloat16", 0, 0}, {"__half", "__half", 1, 0},
                   {"__nv_bfloat16", "float", 2, 0}} do
  local name = "culua_scan_lookback_t"
  local prog, err = variant("scan", {"CULUA_LOWP=1", "CULUA_LOWP_SCAN=" .. name, "CULUA_LOWP_X=" .. c[1],
                                     "CULUA_LOWP_Y=" .. c[2], "CULUA_LOWP_OP=" .. c[3], "CULUA_LOWP_SMALL=" .. c[4]})
  local what = ("scan variant %s -> %s, op %d%s"):format(c[1], c[2], c[3], c[4] == 1 and ", small" or "")
  T.ok(prog, what .. " compiles under NVRTC", err)
  -- x, y, n, exclusive, init (bits), scratch, values, base, epoch, ntiles, out
  T.ok(fits(prog, name, 1, 2, big, 1, 0xff800000, 3, 4, big, 1073741823, big, 0), what .. ": lookback's arguments")
end
do
  local prog, err = variant("scan", {"CULUA_SELECT16=1"})
  T.ok(prog, "select of 2-byte elements with flags compiles", err)
  T.ok(fits(prog, "culua_scan_select_u16_i32_c32", 1, 2, 3, 1000, 1, 4, 4, 5, 6, big, 7, big)
       and fits(prog, "culua_scan_select_u16_u8", 1, 2, 3, big, 2, 4, 4, 5, 6, big, 7, big), "select u16's arguments")
  for _, t in ipairs{"__half", "__nv_bfloat16"} do
    prog, err = variant("scan", {"CULUA_PRED_T=" .. t, "CULUA_PRED_C=unsigned", "CULUA_PRED_NAME=p", "CULUA_LOWP=1",
                                 "CULUA_SELECT_THREADS=256", "CULUA_SELECT_MINB=5"},
                        "#define CULUA_PRED(x) (x > 0.5f && !isnan(x) && fabsf(x) < 1e4f)\n")
    T.ok(prog, "a predicate over " .. t .. " (x a float) compiles", err)
    T.ok(fits(prog, "p", 1, 2, 3, 1000, 0, 4, 4, 5, 6, big, 7, big), t .. " predicate's arguments")
  end
  prog = variant("scan", {"CULUA_PRED_T=__half", "CULUA_PRED_NAME=p", "CULUA_LOWP=1"}, "#define CULUA_PRED(x) (x.y > 0)\n")
  T.ok(prog == nil, "a predicate's x is a float, not a __half (no members)")
end
for _, c64 in ipairs{false, true} do
  local prog, err = variant("histogram", c64 and {"CULUA_LOWP=1", "CULUA_HIST_COUNT64=1"} or {"CULUA_LOWP=1"})
  local cn = c64 and "u64" or "u32"
  T.ok(prog, "histogram's low-precision variant compiles (" .. cn .. " counts)", err)
  for _, tn in ipairs{"f16", "bf16", "e4m3", "e5m2"} do
    -- x, n, counts, bins, ilo, ihi, flo, fhi, scale, left, mode
    T.ok(fits(prog, ("culua_histogram_%s_%s"):format(tn, cn), 1, big, 2, 100, 0, 1, -2.5, 3.5, 100 / 6, 3, 4 | 16),
         ("histogram %s %s's arguments"):format(tn, cn))
  end
end

local info = cat.list()
T.is_deeply({info.scan.dtypes[7], info.scan.dtypes[8]}, scan_dtypes, "list(): scan takes float16 and bfloat16")
T.is_deeply({table.unpack(info.histogram.dtypes, 7)}, hist_dtypes, "list(): histogram takes the four")

-- }======================================================


-- {====================================================== with a GPU

local function gpu_tests()
  local sizes = {1, 31, 4099, BIG}
  -- values in [0, 1/32): sums of 2^20 stay below float16's 65504; the smallest
  -- are subnormal in float16
  local function input(dt, n, seed) return cuda.host_array(dt, n):random(seed, 0, 1 / 32) end
  local function poison(y) return y:fill(NAN) end
  -- the result's tolerance: one rounding of the output format past the float32 sum's error
  local tol = {float32 = 1e-4, float16 = 1.5 * 2^-10 + 1e-4, bfloat16 = 1.5 * 2^-7 + 1e-4}

  local function expect(hx, ydt, opts)
    local want = cuda.host_array(ydt, #hx)
    ref(hx, want, opts)
    return want
  end
  local function check(y, want, op)
    if op ~= "add" then   -- min and max: input elements, exact
      local got = cuda.host_array(y.dtype, #y)
      y:copy_to(got)
      return got:bytes() == want:bytes(), "not the reference's elements"
    end
    local _, rel = cuda.compare(y, want)
    return rel <= tol[y.dtype], ("max relative error %.3g"):format(rel)
  end

  local modes = {{}, {exclusive = true}, {exclusive = true, init = 0.5}, {init = 0.25}}
  local function mode_name(m)
    return (m.exclusive and "exclusive" or "inclusive") .. (m.init and (" init " .. m.init) or "")
  end

  -- scan: x float16 / bfloat16, y in x's dtype or float32, every op and mode
  for _, dt in ipairs(scan_dtypes) do
    for _, n in ipairs(sizes) do
      local hx = input(dt, n, n)
      local x = cuda.array(dt, n):copy_from(hx)
      for _, ydt in ipairs{dt, "float32"} do
        local y = cuda.array(ydt, n)
        for _, op in ipairs(ops) do
          for _, m in ipairs(modes) do
            local want = expect(hx, ydt, {op = op, exclusive = m.exclusive, init = m.init})
            poison(y)
            local r = cat.scan(x, y, {op = op, exclusive = m.exclusive, init = m.init})
            local ok, why = check(y, want, op)
            T.ok(ok and r == y, ("scan %s -> %s %s %s n=%d"):format(dt, ydt, op, mode_name(m), n), why)
          end
        end
      end
      -- in place, and accumulate said explicitly
      local want = expect(hx, dt)
      local xi = cuda.array(dt, n):copy_from(hx)
      cat.scan(xi, {accumulate = dt})
      T.ok(check(xi, want, "add"), ("scan %s in place n=%d"):format(dt, n))
      -- reduce: the float32 sum by default, rounded to x's dtype when asked
      local sum = expect(hx, "float32")[n]
      T.near(cat.reduce(x), sum, sum * 1e-5, ("reduce %s n=%d: the float32 sum"):format(dt, n))
      local r16 = cat.reduce(x, {accumulate = dt})
      T.near(r16, sum, sum * tol[dt], ("reduce %s n=%d, accumulate %s"):format(dt, n, dt))
      T.is(cuda.host_array(dt, 1):fill(r16)[1], r16, ("reduce %s n=%d, accumulate %s: a %s value"):format(dt, n, dt, dt))
      T.is(cat.reduce(x, {op = "max"}), expect(hx, dt, {op = "max"})[n], ("reduce %s max n=%d"):format(dt, n))
      T.is(cat.reduce(x, {op = "min", accumulate = dt}), expect(hx, dt, {op = "min"})[n], ("reduce %s min n=%d"):format(dt, n))
    end
  end

  -- specials: inf, NaN, -0.0, subnormals, the largest finite values, overflow of the output
  do
    local cases = {
      {"float16", {1, INF, 2}, {1, INF, INF}, "inf"},
      {"float16", {1, NAN, 2}, {1, NAN, NAN}, "NaN"},
      {"float16", {INF, -INF, 1}, {INF, NAN, NAN}, "inf - inf"},
      {"float16", {65504, 65504}, {65504, INF}, "past 65504: inf in float16"},
      {"float16", {2^-24, 2^-24, -0.0}, {2^-24, 2^-23, 2^-23}, "subnormals"},
      {"bfloat16", {3e38, 3e38}, nil, "past bfloat16's range"},
      {"bfloat16", {2^-133, 2^-133, 1}, {2^-133, 2^-132, 1}, "bfloat16 subnormals (float32 keeps them)"},
    }
    for _, c in ipairs(cases) do
      local dt, values, want, what = c[1], c[2], c[3], c[4]
      local hx = host(dt, values)
      local x = cuda.array(dt, #values):copy_from(hx)
      for _, ydt in ipairs{dt, "float32"} do
        local y = poison(cuda.array(ydt, #values))
        cat.scan(x, y)
        local w = want and ydt == dt and want or expect(hx, ydt):totable()
        T.ok(same_list(y:totable(), w), ("scan %s -> %s: %s"):format(dt, ydt, what), table.concat(y:totable(), " "))
      end
    end
    local hx = host("float16", {-0.0, 1, -2, 2^-24})
    local x = cuda.array("float16", 4):copy_from(hx)
    T.is(cat.reduce(x, {op = "min"}), -2, "reduce float16 min")
    T.is(cat.reduce(x, {op = "max"}), 1, "reduce float16 max")
    T.ok(same_value(cat.reduce(cuda.array("float16", 2):copy_from{1, NAN}), NAN), "reduce float16: NaN")
    T.is(cat.reduce(cuda.array("float16", 2):fill(65504), {accumulate = "float16"}), INF,
         "reduce float16, accumulate float16: past 65504 is inf (as a cast)")
    T.is(cat.reduce(cuda.array("float16", 2):fill(65504)), 131008.0, "reduce float16: the float32 sum is not bound by float16")
    T.is(cat.reduce(cuda.array("bfloat16", 0)), 0.0, "reduce of an empty bfloat16 array: 0.0")
  end

  -- views at odd offsets (element loads, not vectors), into a view of float32
  for _, dt in ipairs(scan_dtypes) do
    local n = 4099
    local hx = input(dt, n + 3, 9)
    local base = cuda.array(dt, n + 3):copy_from(hx)
    local x = base:view(2, n)
    local hv = cuda.host_array(dt, n)
    x:copy_to(hv)
    local ybase = poison(cuda.array("float32", n + 5))
    local y = ybase:view(3, n)
    cat.scan(x, y, {exclusive = true, accumulate = "float32"})
    T.ok(check(y, expect(hv, "float32", {exclusive = true}), "add"), dt .. ": a view into a view")
    local edge = cuda.host_array("float32", n + 5)
    ybase:copy_to(edge)
    T.ok(edge[1] ~= edge[1] and edge[2] ~= edge[2] and edge[n + 3] ~= edge[n + 3], dt .. ": nothing written outside the view")
    T.near(cat.reduce(x), expect(hv, "float32")[n], expect(hv, "float32")[n] * 1e-5, dt .. ": reduce of a view")
  end

  -- compact and split: a predicate in x (a float), uint8 and int32 flags; bits kept
  for _, dt in ipairs(scan_dtypes) do
    for _, n in ipairs(sizes) do
      local hx = cuda.host_array(dt, n):random(n + 1, 0, 1)
      hx[1] = NAN
      if n > 2 then hx[2], hx[3] = -0.0, 0.75 end
      local x = cuda.array(dt, n):copy_from(hx)
      local xs = hx:totable()
      local hu8 = cuda.host_array("uint8", n):random(n + 2, 0, 1)
      local hi32 = cuda.host_array("int32", n):random(n + 3, 0, 1)
      local preds = {
        {"x > 0.5f", function (i) return xs[i] > 0.5 end},
        {cuda.array("uint8", n):copy_from(hu8), function (i) return hu8[i] ~= 0 end, "uint8 flags"},
        {cuda.array("int32", n):copy_from(hi32), function (i) return hi32[i] ~= 0 end, "int32 flags"},
      }
      for _, p in ipairs(preds) do
        local kept, rest = {}, {}
        for i = 1, n do
          if p[2](i) then kept[#kept + 1] = i else rest[#rest + 1] = i end
        end
        local order = table.move(rest, 1, #rest, #kept + 1, table.move(kept, 1, #kept, 1, {}))
        local want = cuda.host_array(dt, n)
        for j, i in ipairs(order) do want[j] = xs[i] end   -- the values of x: its NaN is canonical
        local y = poison(cuda.array(dt, n))
        local what = ("%s n=%d, %s"):format(dt, n, p[3] or p[1])
        local count = cat.compact(x, y, p[1])
        local got = cuda.host_array(dt, n)
        y:copy_to(got)
        T.ok(count == #kept and (count == 0 or got:bytes():sub(1, 2 * count) == want:bytes():sub(1, 2 * count)),
             "compact " .. what, ("count %d, expected %d"):format(count, #kept))
        poison(y)
        count = cat.split(x, y, p[1])
        y:copy_to(got)
        T.ok(count == #kept and got:bytes() == want:bytes(), "split " .. what, ("count %d, expected %d"):format(count, #kept))
      end
    end
  end

  -- histogram of the four formats: random values around [lo, hi), specials, views,
  -- shared (100 bins) and global (20000 bins) counting, uint32 and uint64 counts
  for _, dt in ipairs(hist_dtypes) do
    local fp8 = dt:find("float8", 1, true) ~= nil
    for _, n in ipairs(sizes) do
      local hx = cuda.host_array(dt, n):random(n + 7, -3, 4)
      local specials = fp8 and {NAN, -0.0, tiny[dt], -tiny[dt]} or {NAN, INF, -INF, -0.0, tiny[dt], -tiny[dt]}
      for i, v in ipairs(specials) do if i <= n then hx[(i * 997) % n + 1] = v end end
      local x = cuda.array(dt, n):copy_from(hx)
      for _, c in ipairs{{"uint32", 100, 0, 3}, {"uint64", 100, -2.5, 3.5}, {"uint32", 20000, -3, 4}} do
        local cdt, bins, lo, hi = c[1], c[2], c[3], c[4]
        local want = cuda.host_array(cdt, bins)
        local wout = ref_hist(hx, want, {lo = lo, hi = hi})
        local counts = cuda.array(cdt, bins):fill(0xdeadbeef)
        local out = cat.histogram(x, counts, {lo = lo, hi = hi})
        local got = cuda.host_array(cdt, bins)
        counts:copy_to(got)
        T.ok(out == wout and got:bytes() == want:bytes(),
             ("histogram %s n=%d, %d bins over [%s, %s), %s"):format(dt, n, bins, lo, hi, cdt),
             ("left out %d, expected %d"):format(out, wout))
      end
    end
    -- a view at an odd offset: element loads
    local hx = cuda.host_array(dt, 5001):random(3, -1, 2)
    local x = cuda.array(dt, 5001):copy_from(hx):view(2, 4999)
    local hv = cuda.host_array(dt, 4999)
    x:copy_to(hv)
    local want = cuda.host_array("uint32", 7)
    local wout = ref_hist(hv, want, {lo = -1, hi = 2})
    local counts = cuda.array("uint32", 7):fill(0xdeadbeef)
    local out = cat.histogram(x, counts, {lo = -1, hi = 2})
    local got = cuda.host_array("uint32", 7)
    counts:copy_to(got)
    T.ok(out == wout and got:bytes() == want:bytes(), dt .. ": histogram of a view")
  end
end

T.gpu_part(gpu_tests, "the GPU part")

-- }======================================================

T.done_testing()
