-- cuda.catalog.sort and argsort. Without a GPU: the listing, argument checks that need no
-- device memory, the kernels compiled by NVRTC (and the argument lists the module launches
-- them with), the C reference on hand-made keys (NaN, -0.0, stability). With one: every key
-- dtype, pairs, orders, bit ranges, lengths from 1 to past 2^24 against the reference byte
-- for byte, every variant and path, views, streams, poisoned scratch, and the refusals.
local T = require "culua.tap"
local cuda = require "cuda"
local sort, argsort = cuda.catalog.sort, cuda.catalog.argsort
local ref = cuda.catalog.reference
-- the options the reference takes, of a sort's (it refuses the GPU's tuning knobs)
local function ref_opts(o)
  return {descending = o.descending, begin_bit = o.begin_bit, end_bit = o.end_bit}
end

-- {====================================================== without a GPU

local info = cuda.catalog.list().sort
T.is_deeply(info.variants, {"onesweep", "lsd", "warp"}, "sort variants")
T.is(info.default, "onesweep", "onesweep is the default")
T.is_deeply(info.key_dtypes, {"uint32", "int32", "float32", "uint64", "int64", "float64", "uint16", "int16", "float16",
                              "bfloat16", "uint8", "int8", "float8_e4m3", "float8_e5m2"},
            "key dtypes (the 16- and 8-bit ones: t/040-sort-narrow.t)")
T.is(info.limits.warp, 32, "the warp variant's limit")

T.error_like(function () sort(1) end, "cuda%.catalog%.sort: keys must be a cuda%.array, got number", "keys not an array")
T.error_like(function () sort(cuda.host_array("uint32", 4)) end, "cuda%.catalog%.sort: keys must be a cuda%.array, got cuda%.host_array",
             "a host array is not a device array")
T.error_like(function () argsort("x") end, "cuda%.catalog%.argsort: keys must be a cuda%.array, got string", "argsort: keys not an array")
T.error_like(function () sort(nil, {decending = true}) end, "cuda%.catalog%.sort: unknown option 'decending' %(known: descending",
             "a misspelt option, before anything else")
T.error_like(function () argsort(nil, {foo = 1}) end, "cuda%.catalog%.argsort: unknown option 'foo'", "argsort: unknown option")
T.error_like(function () sort(nil, nil, "fast") end, "cuda%.catalog%.sort: opts must be a table, got string", "opts not a table")

-- the embedded source compiles by NVRTC, and the argument lists lua/catalog/sort.lua
-- launches with (pointers as integers here) fit its entry points. compiled(file): the kernel
-- file's source and its program as NVRTC builds it (nil if it does not), and whether a
-- kernel of it takes an argument list
local big = (1 << 40) + 3
local function compiled(file)
  local text, prog = cuda._catalog.source(file), nil
  T.lives_ok(function () prog = cuda.compile(text, {options = {"-std=c++17", "-arch=compute_90"}, name = file .. ".cu"}) end,
             "kernels/" .. file .. ".cu compiles under NVRTC")
  return text, prog, function (name, ...) return cuda.check_args(cuda.signature(prog.ptx, name), ...) end
end
local src, p, fits = compiled("sort")
if p then
  -- 256 threads at the default items: prebuilt for 32-bit keys with 8-byte values,
  -- whose default it is; the other cases' are built by NVRTC when asked for, as
  -- lua/catalog/sort.lua asks (-DCULUA_SORT_ITEMS, every case at that count)
  local variants = {}
  for _, items in ipairs{18, 16} do
    T.lives_ok(function ()
      variants[items] = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_90", "-DCULUA_SORT_ITEMS=" .. items},
                                           name = "sort.cu"})
    end, "kernels/sort.cu compiles under NVRTC at " .. items .. " keys a thread")
  end
  for _, e in ipairs{"u32_keys_18", "u32_u32_18", "u32_u64_18", "u64_keys_16", "u64_u32_16", "u64_u64_16"} do
    local v = variants[tonumber(e:match("%d+$"))]
    local function fits_v(name, ...) return v and cuda.check_args(cuda.signature(v.ptx, name), ...) end
    T.ok(fits_v("culua_sort_onesweep_" .. e, 1, 2, 3, 4, big, (1 << 30) - 1, 5, 0, 6, 7, 70000, 8, 9, 56, 8, 2, 31, 4),
         "onesweep_" .. e .. "'s arguments")
    T.ok(fits_v("culua_sort_small_" .. e, 1, 1, 0, 2, 4608, 0, 64, 1, 30), "small_" .. e .. "'s arguments")
    T.ok(fits_v("culua_sort_fused_" .. e, 1, 2, 1, 0, 0, 0, 500000, 3, 4, 5, 6, 0, 64, 2, 28, 4), "fused_" .. e .. "'s arguments")
    T.ok(fits_v("culua_sort_lsd_" .. e, 1, 2, 3, 4, big, 4608 * 5, 5, 24, 8, 2, 3), "lsd_" .. e .. "'s arguments")
  end
  T.ok(fits("culua_sort_onesweep_u32_u64_18", 1, 2, 3, 4, big, (1 << 30) - 1, 5, 0, 6, 7, 70000, 8, 9, 56, 8, 2, 31, 4),
       "onesweep_u32_u64_18 is prebuilt")
  T.unlike(p.ptx, "culua_sort_onesweep_u32_keys_18", "256-thread tiles of cases with wider defaults are not prebuilt")
  -- the wide tiles, prebuilt: the defaults of 32-bit keys alone (384 threads), of pairs of
  -- 32-bit keys and 4-byte values and of 64-bit keys (512)
  for _, e in ipairs{"u32_keys_20_t384", "u32_u32_13_t512", "u64_keys_10_t512", "u64_u32_10_t512", "u64_u64_10_t512"} do
    T.ok(fits("culua_sort_onesweep_" .. e, 1, 2, 3, 4, big, (1 << 30) - 1, 5, 0, 6, 7, 70000, 8, 9, 56, 8, 2, 31, 4),
         "onesweep_" .. e .. "'s arguments")
    T.ok(fits("culua_sort_small_" .. e, 1, 1, 0, 2, 6144, 0, 64, 1, 30), "small_" .. e .. "'s arguments")
    T.ok(fits("culua_sort_fused_" .. e, 1, 2, 1, 0, 0, 0, 500000, 3, 4, 5, 6, 0, 64, 2, 28, 4), "fused_" .. e .. "'s arguments")
    T.ok(fits("culua_sort_lsd_" .. e, 1, 2, 3, 4, big, 6144 * 5, 5, 24, 8, 2, 3), "lsd_" .. e .. "'s arguments")
  end
  T.unlike(p.ptx, "culua_sort_onesweep_u32_u64_12_t512", "no wide tile for 32-bit keys with 8-byte values (48 KiB)")
  for _, e in ipairs{"u32_keys_4", "u32_u32_4", "u32_u64_4", "u64_keys_4", "u64_u32_4", "u64_u64_4"} do
    T.ok(fits("culua_sort_fused_" .. e, 1, 2, 1, 0, 0, 0, 100000, 3, 4, 5, 6, 0, 64, 2, 28, 8), "fused_" .. e .. "'s arguments (small sorts' tiles)")
  end
end
-- the kernels outside the tiles (kernels/sort_counts.cu): no shape of theirs varies
local _, pc, cfits = compiled("sort_counts")
if pc then
  local fits = cfits
  for _, k in ipairs{"u32", "u64"} do
    T.ok(fits("culua_sort_upfront_" .. k, 1, big, 2, 3, 4, 512, 5, 6, big, 8, 0, 64, 2, 16), "upfront_" .. k .. "'s arguments")
    T.ok(fits("culua_sort_lsd_count_" .. k, 1, big, 4608, 2, 56, 8, 1, 3), "lsd_count_" .. k .. "'s arguments")
  end
  T.ok(fits("culua_sort_lsd_scan", 1, big), "lsd_scan's arguments")
  T.ok(fits("culua_sort_copy32", 1, 2, big) and fits("culua_sort_copy64", 1, 2, big), "the copies' arguments")
  for _, v in ipairs{"keys", "u32", "u64"} do
    T.ok(fits("culua_sort_warp_" .. v, 1, 1, 0, 2, 32, 0, 32, 20), "warp_" .. v .. "'s arguments")
  end
end
local p7 = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_80", "-DCULUA_SORT_ITEMS=7"}, name = "sort.cu"})
T.like(p7.ptx, "%.entry culua_sort_onesweep_u64_u32_7%(", "items = 7 compiles (-DCULUA_SORT_ITEMS=7)")
T.unlike(p7.ptx, "culua_sort_onesweep_u32_keys_18", "and only that count")
-- other block shapes: their names say so, and a shape too big for some dtype's tile still
-- builds (that entry point traps; the module refuses the shape before launching it)
local p384 = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_90", "-DCULUA_SORT_ITEMS=20",
                                           "-DCULUA_SORT_THREADS=384", "-DCULUA_SORT_MINBLOCKS=2"}, name = "sort.cu"})
T.like(p384.ptx, "%.entry culua_sort_onesweep_u32_keys_20_t384_b2%(", "threads = 384, min_blocks = 2 compile, named _t384_b2")
T.like(p384.ptx, "%.entry culua_sort_small_u64_u64_20_t384_b2%(", "and the shape's u64 pairs (a trap: 60 KiB)")
T.ok(cuda.check_args(cuda.signature(p384.ptx, "culua_sort_onesweep_u32_u32_20_t384_b2"),
                     1, 2, 3, 4, 0, 7680, 5, 0, 6, 7, 0, 8, 9, 0, 8, 0, 3, 8), "the shape's onesweep arguments")
local p512 = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_80", "-DCULUA_SORT_ITEMS=12",
                                           "-DCULUA_SORT_THREADS=512"}, name = "sort.cu"})
T.like(p512.ptx, "%.entry culua_sort_lsd_u64_u32_12_t512%(", "threads = 512 compiles, named _t512")

-- which file holds a kernel outside the tiles: read from the files' own entry points
local sort_files = require("culua.catalog.core").kernel_files("culua_sort_", {"sort", "sort_counts"})
T.ok(sort_files("upfront_lanes") == "sort_counts" and sort_files("lsd_scan") == "sort_counts"
     and sort_files("warp") == "sort_counts" and sort_files("copy64") == "sort_counts",
     "core.kernel_files: the upfront, scan, warp and copy kernels are kernels/sort_counts.cu's")
T.error_like(function () sort_files("nope") end, "no kernel culua_sort_nope", "core.kernel_files: an unknown kernel")

-- the C reference: its order, stability and NaNs
local function host(dtype, t) return cuda.host_array(dtype, #t):copy_from(t) end
local function bits32(x) return (string.unpack("<I4", string.pack("<f", x))) end

do
  local k = host("uint32", {5, 3, 5, 1, 3, 0xffffffff, 0})
  local v = host("int32", {1, 2, 3, 4, 5, 6, 7})
  ref.sort(k, v)
  T.is_deeply(k:totable(), {0, 1, 3, 3, 5, 5, 0xffffffff}, "reference: uint32 ascending")
  T.is_deeply(v:totable(), {7, 4, 2, 5, 1, 3, 6}, "reference: equal keys keep their order")
  ref.sort(k, v, {descending = true})
  T.is_deeply(k:totable(), {0xffffffff, 5, 5, 3, 3, 1, 0}, "reference: descending")
  T.is_deeply(v:totable(), {6, 1, 3, 2, 5, 4, 7}, "reference: descending is stable")
end
do
  local k = host("int32", {3, -1, 0, -2147483648, 2147483647, -1})
  ref.sort(k)
  T.is_deeply(k:totable(), {-2147483648, -1, -1, 0, 3, 2147483647}, "reference: int32 with negatives")
  local k64 = host("int64", {3, -1, math.mininteger, math.maxinteger, 0})
  ref.sort(k64)
  T.is_deeply(k64:totable(), {math.mininteger, -1, 0, 3, math.maxinteger}, "reference: int64")
  local u64 = cuda.host_array("uint64", 4):copy_from(host("int64", {-1, 5, 0, math.mininteger}):bytes())   -- 2^64-1, 5, 0, 2^63
  ref.sort(u64)
  T.is_deeply(cuda.host_array("int64", 4):copy_from(u64:bytes()):totable(), {0, 5, math.mininteger, -1},
              "reference: uint64 above 2^63")
end
do
  local inf, nan = math.huge, 0 / 0
  local keys = {1.5, nan, -0.0, 0.0, -inf, inf, -nan, 1e-45, -1e-45, -2.5, 0.0, -0.0}
  for _, dt in ipairs{"float32", "float64"} do
    local k, v = host(dt, keys), cuda.host_array("uint32", #keys):iota(1)
    ref.sort(k, v)
    local got = k:totable()
    T.is_deeply(v:totable(), {5, 10, 9, 3, 12, 4, 11, 8, 1, 6, 2, 7},
                dt .. " reference: -inf < -2.5 < -denormal < -0.0 < +0.0 < denormal < 1.5 < inf < NaNs, stable")
    T.ok(got[11] ~= got[11] and got[12] ~= got[12], dt .. " reference: NaNs of both signs last")
    T.ok(1 / got[4] == -inf and 1 / got[5] == -inf and 1 / got[6] == inf, dt .. " reference: -0.0 before +0.0")
    if dt == "float32" then
      T.is(string.unpack("<I4", k:bytes(), 41), 0x7fc00000, "float32 reference: a NaN comes out as 0x7fc00000")
    else
      T.is(string.unpack("<i8", k:bytes(), 89), 0x7ff8000000000000, "float64 reference: a NaN comes out as 0x7ff8000000000000")
    end
    ref.sort(k, v, {descending = true})
    T.is_deeply(v:totable(), {6, 1, 8, 4, 11, 3, 12, 9, 10, 5, 2, 7},
                dt .. " reference: descending, +0.0 before -0.0, NaNs still last, stable")
  end
  T.is(bits32(-0.0), 0x80000000, "(-0.0 is negative zero here)")
end
do   -- bits 4..7 only: the low nibble is ignored, order kept
  local k = host("uint32", {0x13, 0x21, 0x12, 0x11, 0x02})
  ref.sort(k, {begin_bit = 4, end_bit = 8})
  T.is_deeply(k:totable(), {0x02, 0x13, 0x12, 0x11, 0x21}, "reference: begin_bit/end_bit")
  local idx = ref.argsort(host("float32", {2, -1, 2, 0}))
  T.is(idx.dtype, "uint32", "reference argsort: uint32")
  T.is_deeply(idx:totable(), {2, 4, 1, 3}, "reference argsort: 1-based, stable")
end
T.error_like(function () ref.sort(host("int32", {1, 2}), {end_bit = 33}) end, "bits 0%.%.33 are not within 0%.%.32",
             "reference refuses a bit past the key")
T.error_like(function () ref.sort(host("int32", {1, 2}), host("int32", {1})) end, "hvalues has 1 elements but hkeys has 2",
             "reference refuses values of another length")

-- }======================================================

if cuda.device_count() == 0 then
  T.skip("no CUDA device: the GPU tests", 1)
  T.done_testing()
  return
end

-- {====================================================== with a GPU

local core = require "culua.catalog.core"
local dev = cuda.device()
local kbits = {uint32 = 32, int32 = 32, float32 = 32, uint64 = 64, int64 = 64, float64 = 64}
local POISON = 0x5a5a5a5a5a5a5a5a

-- host keys of dtype dt: "random" (every bit pattern, NaNs and denormals among the floats),
-- "sorted", "reversed", "equal", "few" (four values), "small" (uniform in 0..255)
local function make_keys(dt, n, how, seed)
  local h = cuda.host_array(dt, n)
  if how == "equal" then return h:fill(dt:find("float") and -3.25 or 7) end
  if how == "few" or how == "small" then
    local hi = how == "few" and 3 or 255
    local i = cuda.host_array(kbits[dt] == 32 and "int32" or "int64", n):random(seed, 0, hi)
    if dt:find("float") then
      for j = 1, n do h[j] = i[j] - 1.5 end
      return h
    end
    return h:copy_from(i:bytes())
  end
  local bits = kbits[dt] == 32 and cuda.host_array("int32", n):random(seed, -2147483648, 2147483647)
                                or cuda.host_array("int64", n):random(seed, math.mininteger, math.maxinteger)
  h:copy_from(bits:bytes())
  if how == "sorted" then ref.sort(h) elseif how == "reversed" then ref.sort(h, {descending = true}) end
  return h
end

local function device_of(h)
  return cuda.array(h.dtype, #h):copy_from(h)
end

-- the scratch buffers the sort's passes go through, filled with a pattern, so that a
-- place no pass writes shows
local function poison_scratch(n, stream)
  for _, kind in ipairs{"sort_keys", "sort_keys2", "sort_values"} do
    core.scratch(kind, dev, stream, n):fill(POISON, stream)
  end
end

-- the first place where two host arrays differ, for the diagnostics
local function first_difference(a, b)
  local sa, sb = a:bytes(), b:bytes()
  if sa == sb then return nil end
  local es = #sa // #a
  for i = 1, #a do
    if sa:sub((i - 1) * es + 1, i * es) ~= sb:sub((i - 1) * es + 1, i * es) then
      return ("first difference at %d: got %s, expected %s"):format(i, tostring(a[i]), tostring(b[i]))
    end
  end
end

local function same(d, h, what)
  local got = d:copy_to(cuda.host_array(d.dtype, #d))
  local diff = first_difference(got, h)
  return T.ok(diff == nil, what, diff)
end

-- sort keys of dtype dt (and their positions as values of vdt), compare with the reference
local function check(dt, n, how, opts, vdt, tag)
  if not T.share() then return end   -- CULUA_TEST_SHARE: another run's case
  opts = opts or {}
  local hk = make_keys(dt, n, how, n + #how)
  local hv = vdt and cuda.host_array(vdt, n):iota(1)
  local dk, dv = device_of(hk), hv and device_of(hv)
  local name = ("%s n=%d %s%s%s"):format(dt, n, how, vdt and (" +" .. vdt) or "", tag or "")
  poison_scratch(n, opts.stream)
  local ok, err = pcall(sort, dk, dv, opts)
  if not T.ok(ok, name .. ": sorts", err) then return end
  ref.sort(hk, hv, ref_opts(opts))
  if opts.stream then opts.stream:synchronize() end
  same(dk, hk, name .. ": keys as the reference")
  if hv then same(dv, hv, name .. ": values as the reference (stable)") end
end

-- portion = 2^29 keeps the multi-block onesweep for sorts of one tile or less, which
-- the one-block path takes otherwise (and for sorts of up to a tile a multiprocessor,
-- which the one-launch path, fused, takes otherwise)
local multi = {portion = 1 << 29}
-- (2^17 + 1 under compute-sanitizer: 22 tiles a pass, the same kernels, minutes less)
local lengths = {1, 2, 31, 32, 33, 1000, 4097, (T.sanitizer and 1 << 17 or 1 << 20) + 1}
for _, dt in ipairs{"uint32", "int32", "float32", "uint64", "int64", "float64"} do
  for _, n in ipairs(lengths) do check(dt, n, "random") end
  for _, n in ipairs{1, 2, 33, 3000, 4096, 4608} do
    check(dt, n, "random", nil, "uint32", " one block")
    check(dt, n, "few", multi, "uint32", " multi-block")
  end
  for _, n in ipairs{5120, 5121, 6656, 6657, 7680, 7681} do   -- the wide tiles' lengths (512 x 10, 512 x 13, 384 x 20)
    check(dt, n, "random", nil, "uint32", " about a wide tile")
  end
  for _, how in ipairs{"sorted", "reversed", "equal", "few", "small"} do
    check(dt, 1000, how, nil, "uint32")
    check(dt, 40000, how, nil, "uint32")
  end
  check(dt, 100000, "few", nil, "int64")
  check(dt, 100000, "random", nil, "uint64")
  check(dt, 100000, "random", nil, "float32")
  check(dt, 33, "few", {descending = true}, "int32", " descending")
  check(dt, 100000, "few", {descending = true}, "uint32", " descending")
  check(dt, 100000, "random", {descending = true}, "float64", " descending")
  check(dt, 100000, "random", {variant = "lsd"}, "uint32", " lsd")
  check(dt, 1000, "random", {variant = "lsd"}, nil, " lsd")
  check(dt, 5000, "few", {variant = "lsd", descending = true}, "uint64", " lsd descending")
end
if T.sanitizer then   -- every access checked: minutes, for the kernels of 2^17 + 1
  T.skip("2^24 + 3 under compute-sanitizer " .. T.sanitizer .. ": 2^17 + 1 runs the same kernels", 2)
else
  check("uint32", (1 << 24) + 3, "random", nil, nil, " (past 2^24)")
  check("uint32", (1 << 24) + 3, "few", nil, "uint32", " (past 2^24)")
end

-- float keys with every special value in a run of ordinary ones, each path
for _, dt in ipairs{"float32", "float64"} do
  local specials = {0 / 0, -(0 / 0), math.huge, -math.huge, -0.0, 0.0, 1e-45, -1e-45, 1e-310, -1e-310, 2.5, -2.5,
                    string.unpack("<f", string.pack("<I4", 0x7f800001)), string.unpack("<f", string.pack("<I4", 0xffc00001))}
  for _, c in ipairs{{3000, {}}, {3000, multi}, {50000, {}}, {50000, {descending = true}}, {50000, {variant = "lsd"}}} do
    if T.share() then
      local n, o = c[1], c[2]
      local h = cuda.host_array(dt, n):random(9, -4, 4)
      for i = 1, n, 7 do h[i] = specials[(i // 7) % #specials + 1] end
      local hv = cuda.host_array("uint32", n):iota(1)
      local dk, dv = device_of(h), device_of(hv)
      sort(dk, dv, o)
      ref.sort(h, hv, ref_opts(o))
      local tag = ("%s n=%d%s%s"):format(dt, n, o.descending and " descending" or "", o.variant and " lsd" or o.portion and " multi-block" or "")
      same(dk, h, tag .. " NaN, inf, -0.0, denormals: keys")
      same(dv, hv, tag .. " NaN, inf, -0.0, denormals: values")
      local got = dk:copy_to(cuda.host_array(dt, n))
      T.ok(got[n] ~= got[n] and got[1] == (o.descending and math.huge or -math.huge), tag .. ": NaNs last")
    end
  end
end

-- begin_bit/end_bit: one pass, three (odd: the passes end in scratch), a range within a digit
for _, r in ipairs{{0, 8}, {0, 24}, {4, 12}, {3, 29}, {31, 32}, {16, 32}} do
  check("uint32", 50000, "random", {begin_bit = r[1], end_bit = r[2]}, "uint32", (" bits %d..%d"):format(r[1], r[2]))
  check("float32", 2000, "random", {begin_bit = r[1], end_bit = r[2], descending = true}, "uint64",
        (" bits %d..%d descending, one block"):format(r[1], r[2]))
end
for _, r in ipairs{{0, 40}, {32, 64}, {60, 64}, {5, 63}} do
  check("int64", 50000, "random", {begin_bit = r[1], end_bit = r[2]}, "uint64", (" bits %d..%d"):format(r[1], r[2]))
  check("float64", 20000, "random", {begin_bit = r[1], end_bit = r[2], variant = "lsd"}, "int32",
        (" lsd bits %d..%d"):format(r[1], r[2]))
end

-- onesweep over several launches a pass (portions), and other tile sizes (NVRTC)
check("uint32", 100003, "random", {portion = 4608 * 3}, "uint32", " in portions of 3 tiles")
check("float64", 70001, "random", {portion = 5120 * 2, descending = true}, "uint64", " in portions of 2 tiles, descending")
check("int32", 100003, "few", {portion = 4608}, "int32", " few, in portions of 1 tile")
check("uint64", 100003, "equal", {portion = 5120 * 5}, "float32", " equal (every pass a copy), in portions")
check("uint32", 100003, "random", {items = 7}, "uint32", " items 7")
check("uint64", 100003, "random", {items = 18}, "uint64", " items 18")
check("float32", 2000, "random", {items = 9}, "uint64", " items 9, one block")
check("float32", 100003, "random", {items = 1, variant = "lsd"}, "float32", " lsd items 1")
-- the one-launch path (fused) against onesweep's launch a pass: odd and even passes (pass
-- 0 in place or not), values of both widths, argsort, and the most tiles it takes
local sms = dev:attribute("multiprocessor_count")
check("uint32", 1024 + 1, "random", nil, "uint32", " fused small tiles (4 keys a thread), the second of one key")
check("uint64", 1024 * sms, "random", nil, "uint64", " fused small tiles, a tile a multiprocessor")
check("int32", 1024 * sms + 1, "random", nil, nil, " one past: fused with the default tiles")
check("uint32", 4608 + 1, "random", {items = 18}, "uint32", " fused, two tiles, the second of one key")
check("uint32", 4608 * sms, "random", nil, "uint64", " fused, a tile a multiprocessor")
check("uint32", 4608 * sms + 1, "random", nil, "uint64", " one tile (256 x 18, 8-byte values) past fused")
check("uint32", 6656 * sms, "random", nil, "int32", " fused, a wide tile (512 x 13 pairs) a multiprocessor")
check("uint32", 6656 * sms + 1, "random", nil, "uint32", " one wide tile past fused")
check("uint32", 7680 * sms, "random", nil, nil, " fused, a wide tile (384 x 20 keys alone) a multiprocessor")
check("float32", 7680 * sms + 1, "random", nil, nil, " one wide tile past fused, keys alone")
check("uint64", 5120 * sms + 1, "random", nil, "uint32", " one wide tile (512 x 10) past fused, 64-bit keys")
check("float32", 50000, "random", {fused = false}, "uint32", " not fused")
check("int64", 30001, "few", {fused = false, descending = true}, "int32", " not fused, descending")
check("float64", 30001, "random", {begin_bit = 3, end_bit = 27}, "uint64", " fused, bits 3..27 (odd: pass 0 in place)")
check("uint32", 30001, "random", {end_bit = 8}, "float64", " fused, one pass in place")
check("int32", 65536, "small", {descending = true}, nil, " fused, 2^16 descending keys")
check("uint32", 65536, "random", {window = 1}, "uint32", " fused, window 1")
for _, c in ipairs{{"float32", 65536, {}}, {"int64", 20000, {end_bit = 24}}, {"uint32", 9000, {end_bit = 8}}} do
  local dt, n, o = c[1], c[2], c[3]
  local hk = make_keys(dt, n, "few", n)
  local dk = device_of(hk)
  local idx = argsort(dk, o)
  same(idx, ref.argsort(hk, ref_opts(o)), ("argsort %s n=%d fused: positions as the reference"):format(dt, n))
  same(dk, hk, ("argsort %s n=%d fused: keys untouched"):format(dt, n))
end

-- other block shapes (NVRTC) and look-back windows
-- (three shapes: each is an NVRTC build of the whole file)
local b2 = {threads = 384, items = 20, min_blocks = 2}
check("uint32", 300007, "random", b2, nil, " threads 384 items 20 min_blocks 2")
check("uint32", 300007, "random", b2, "uint32", " threads 384 items 20 min_blocks 2")
-- (not fused by size: 10x fewer keys with fused = false under compute-sanitizer, the same kernels)
if T.sanitizer then
  check("uint32", 300007, "random", {threads = 384, items = 20, min_blocks = 2, fused = false}, "uint32",
        " threads 384 items 20 min_blocks 2, not fused")
else
  check("uint32", 3000007, "random", b2, "uint32", " threads 384 items 20 min_blocks 2, not fused")
end
check("float64", 200003, "random", {threads = 512, items = 9, descending = true}, "uint32", " threads 512 items 9, descending")
local o9 = {threads = 512, items = 9}
if T.sanitizer then o9.fused = false end
check("float64", T.sanitizer and 200003 or 2000003, "few", o9, "int32", " threads 512 items 9, not fused")
check("int32", 4000, "random", {threads = 512, items = 9}, "uint32", " threads 512 items 9, one block")
check("int64", 100003, "few", {threads = 288, items = 7, variant = "lsd"}, "uint32", " lsd threads 288 items 7")
check("uint32", 100003, "random", {window = 1}, nil, " keys alone, look-back window 1")
check("uint32", 100003, "random", {window = 4}, "uint32", " pairs, look-back window 4")
check("uint64", 100003, "random", {window = 8, portion = 5120 * 7}, "uint64", " look-back window 8, in portions")

-- the upfront histogram's counters: a column a lane (the default where a block may have
-- 128 KiB of shared memory) and a row a block, every key dtype, bit ranges, skipped passes
for _, dt in ipairs{"uint32", "int32", "float32", "uint64", "int64", "float64"} do
  check(dt, 300007, "few", {fused = false, upfront = "rows"}, "uint32", " upfront rows")
  check(dt, 300007, "random", {fused = false, upfront = "lanes", descending = true}, nil, " upfront lanes, descending")
end
check("uint32", 300007, "random", {fused = false, upfront = "rows", begin_bit = 5, end_bit = 29}, "uint32",
      " upfront rows, bits 5..29")
check("uint64", 300007, "random", {fused = false, upfront = "lanes", begin_bit = 3, end_bit = 45}, nil,
      " upfront lanes, bits 3..45")
check("uint32", 300007, "equal", {fused = false, upfront = "lanes"}, "uint32", " upfront lanes, equal (every pass a copy)")

-- the warp variant: seed 003's sort of at most 32 uint32 keys
for _, n in ipairs{1, 2, 7, 31, 32} do
  check("uint32", n, "random", {variant = "warp"}, nil, " warp")
  check("uint32", n, "few", {variant = "warp"}, "uint32", " warp")
end
check("uint32", 32, "few", {variant = "warp", descending = true}, "uint64", " warp descending")
check("uint32", 32, "random", {variant = "warp", begin_bit = 28, end_bit = 32}, "int32", " warp bits 28..32")
do   -- the seed's example: 7, 14, 4, 1 on four bits
  local k = cuda.array("uint32", 4):copy_from{7, 14, 4, 1}
  sort(k, {variant = "warp", end_bit = 4})
  T.is_deeply(k:totable(), {1, 4, 7, 14}, "warp: the seed's example")
end

-- on a stream, not synchronized by the call
do
  local s = cuda.stream()
  check("float32", 200000, "random", {stream = s}, "uint32", " on a stream")
  check("uint64", 200000, "random", {stream = s, variant = "lsd"}, "float64", " lsd on a stream")
  check("int32", 2000, "random", {stream = s}, "int64", " one block on a stream")
  check("uint32", 20, "random", {stream = s, variant = "warp"}, "uint32", " warp on a stream")
end

-- views: only the viewed elements move
do
  local n = 10000
  local hk = make_keys("int32", n, "random", 5)
  local dk = device_of(hk)
  local v = dk:view(101, 5000)
  sort(v)
  local part = cuda.host_array("int32", 5000):copy_from(hk:bytes():sub(401, 400 + 20000))
  ref.sort(part)
  same(v, part, "a view is sorted")
  local all = dk:copy_to(cuda.host_array("int32", n)):bytes()
  T.ok(all:sub(1, 400) == hk:bytes():sub(1, 400) and all:sub(20401) == hk:bytes():sub(20401), "outside the view nothing moved")
  local vals = cuda.array("float64", 7000):fill(0 / 0)
  local hv = cuda.host_array("float64", 5000):iota(1)
  local vv = vals:view(2001, 5000):copy_from(hv)
  local dk2 = device_of(make_keys("float32", 5000, "few", 6))
  local hk2 = dk2:copy_to(cuda.host_array("float32", 5000))
  sort(dk2, vv)
  ref.sort(hk2, hv)
  same(vv, hv, "values in a view")
  local head = vals:view(1, 2000):copy_to(cuda.host_array("float64", 2000))
  T.ok(head[1] ~= head[1] and head[2000] ~= head[2000], "values before the view untouched")
  local small = dk:view(3, 999)   -- the one-block path on a view at an odd offset
  local hs = small:copy_to(cuda.host_array("int32", 999))
  sort(small, {descending = true})
  ref.sort(hs, {descending = true})
  same(small, hs, "a view of 999 keys, one block, descending")
end

-- argsort: 1-based positions, keys untouched, every variant and path
for _, c in ipairs{{"float32", 100000, {}}, {"int64", 4097, {descending = true}}, {"int64", 3000, {descending = true}},
                   {"uint32", 1, {}}, {"uint32", 3, multi}, {"uint32", 30, {variant = "warp"}},
                   {"float64", 33333, {variant = "lsd"}}, {"uint32", 50000, {begin_bit = 0, end_bit = 16}},
                   {"int32", 50000, {end_bit = 8}}, {"int32", 50000, {end_bit = 24}}, {"uint64", 60000, {portion = 5120 * 4}}} do
  local dt, n, o = c[1], c[2], c[3]
  local hk = make_keys(dt, n, "few", n)
  local dk = device_of(hk)
  poison_scratch(n)
  local idx = argsort(dk, o)
  local want = ref.argsort(hk, ref_opts(o))
  local tag = ("argsort %s n=%d %s%s"):format(dt, n, o.variant or "", o.descending and " descending" or "")
  T.is(idx.dtype, "uint32", tag .. ": uint32 positions")
  same(idx, want, tag .. ": positions as the reference")
  same(dk, hk, tag .. ": keys untouched")
end

-- several sorts on two streams at once: each stream has its own scratch
do
  local s1, s2 = cuda.stream(), cuda.stream()
  local h1, h2 = make_keys("uint32", 300000, "random", 1), make_keys("float64", 200000, "random", 2)
  local d1, d2 = device_of(h1), device_of(h2)
  for _ = 1, 3 do
    sort(d1, {stream = s1})
    sort(d2, {stream = s2, descending = true})
  end
  s1:synchronize(); s2:synchronize()
  ref.sort(h1); ref.sort(h2, {descending = true})
  same(d1, h1, "two streams: the first")
  same(d2, h2, "two streams: the second")
end

-- a sort with no options called again on the same arrays replays its first call's plan
-- (lua/catalog/sort.lua): new keys each round, scratch poisoned, a larger sort between
-- (whose scratch replaces the plan's), the scratch given back, and every path (one block,
-- fused, onesweep with even and odd passes, pairs); a closed array is refused as before
do
  local cases = {{"uint32", 3000}, {"uint32", 1 << 16}, {"uint32", 100003, "uint32"}, {"float64", 70001, "int32"},
                 {"uint32", (1 << 22) + 3}, {"int64", 300007, "uint64"}, {"uint16", 200001}, {"uint8", 50001, "uint16"}}
  for _, c in ipairs(cases) do
    local dt, n, vdt = c[1], c[2], c[3]
    local dk, dv = cuda.array(dt, n), vdt and cuda.array(vdt, n)
    local name = ("replayed %s n=%d%s"):format(dt, n, vdt and (" +" .. vdt) or "")
    local good = true
    for round = 1, 5 do
      local hk = kbits[dt] and make_keys(dt, n, round == 4 and "few" or "random", 31 * round + n)
                 or cuda.host_array(dt, n):random(31 * round + n, 0, round == 4 and 3 or dt == "uint8" and 255 or 65535)
      local hv = vdt and cuda.host_array(vdt, n):iota(round)
      dk:copy_from(hk)
      if dv then dv:copy_from(hv) end
      if round == 2 then poison_scratch(n) end
      if round == 3 then sort(cuda.array(dt, 3 * n):fill(1)) end   -- larger: new scratch
      if round == 5 then cuda.catalog.free_scratch() end
      sort(dk, dv)
      ref.sort(hk, hv)
      local got = dk:copy_to(cuda.host_array(dt, n))
      local diff = first_difference(got, hk) or hv and first_difference(dv:copy_to(cuda.host_array(vdt, n)), hv)
      if diff then T.ok(false, ("%s: round %d"):format(name, round), diff); good = false; break end
    end
    if good then T.ok(true, name .. ": five rounds as the reference") end
  end
  local k, v = cuda.array("uint32", 5000):fill(3), cuda.array("uint32", 5000)
  sort(k, v)
  sort(k, v)
  v:close()
  T.error_like(function () sort(k, v) end, "values is a closed cuda%.array", "replayed: values closed since")
  k:close()
  T.error_like(function () sort(k) end, "keys is a closed cuda%.array", "replayed: keys closed since")
end

-- refusals
do
  local k = cuda.array("uint32", 10)
  local bad = {
    {function () sort(cuda.array("int16", 4), {end_bit = 17}) end, "end_bit must be an integer 1%.%.16, got 17", "int16 keys: end_bit 17"},
    {function () sort(cuda.array("uint8", 4), {begin_bit = 8}) end, "begin_bit must be an integer 0%.%.7, got 8", "uint8 keys: begin_bit 8"},
    {function () sort(k, cuda.array("uint32", 9)) end, "values has 9 elements but keys has 10", "values of another length"},
    {function () sort(k, cuda.array("uint16", 9)) end, "values has 9 elements but keys has 10", "2-byte values of another length"},
    {function () sort(cuda.array("float16", 10), {items = 65}) end, "items must be an integer 1%.%.64, got 65", "float16: items 65"},
    {function () sort(k, 5) end, "values must be a cuda%.array, got number", "values a number"},
    {function () sort(k, {begin_bit = 32}) end, "begin_bit must be an integer 0%.%.31, got 32", "begin_bit too big"},
    {function () sort(k, {begin_bit = -1}) end, "begin_bit must be an integer 0%.%.31, got %-1", "negative begin_bit"},
    {function () sort(k, {end_bit = 33}) end, "end_bit must be an integer 1%.%.32, got 33", "end_bit too big"},
    {function () sort(k, {end_bit = 0}) end, "end_bit must be an integer 1%.%.32, got 0", "end_bit zero"},
    {function () sort(cuda.array("int64", 4), {end_bit = 65}) end, "end_bit must be an integer 1%.%.64, got 65", "64-bit end_bit too big"},
    {function () sort(k, {begin_bit = 8, end_bit = 8}) end, "begin_bit %(8%) must be less than end_bit %(8%)", "empty bit range"},
    {function () sort(k, {begin_bit = 9, end_bit = 4}) end, "begin_bit %(9%) must be less than end_bit %(4%)", "reversed bit range"},
    {function () sort(k, {begin_bit = 1.5}) end, "begin_bit must be an integer", "fractional begin_bit"},
    {function () sort(k, {descending = 1}) end, "descending must be a boolean, got number", "descending a number"},
    {function () sort(k, {variant = "bitonic"}) end, "variant must be one of onesweep, lsd, warp, got bitonic", "unknown variant"},
    {function () sort(k, {decending = true}) end, "unknown option 'decending'", "misspelt option"},
    {function () sort(k, nil, 3) end, "opts must be a table, got number", "opts a number"},
    {function () sort(k, {stream = 1}) end, "stream must be a cuda%.stream, got number", "stream a number"},
    {function () sort(k, {items = 33}) end, "items must be an integer 1%.%.32, got 33", "too many items"},
    {function () sort(k, {threads = 320.0}) end, "threads must be a multiple of 32 in 256%.%.1024, got 320%.0", "fractional threads"},
    {function () sort(k, {threads = 300}) end, "threads must be a multiple of 32 in 256%.%.1024, got 300", "threads not a multiple of 32"},
    {function () sort(k, {threads = 128}) end, "threads must be a multiple of 32 in 256%.%.1024, got 128", "too few threads"},
    {function () sort(k, {min_blocks = 0}) end, "min_blocks must be an integer 1%.%.8, got 0", "min_blocks zero"},
    {function () sort(k, {window = 9}) end, "window must be an integer 1%.%.8, got 9", "window too wide"},
    {function () sort(k, {fused = 1}) end, "fused must be a boolean, got number", "fused a number"},
    {function () sort(k, {upfront = "cols"}) end, "upfront must be one of lanes, rows, got cols", "unknown upfront"},
    {function () sort(k, {upfront = false}) end, "upfront must be one of lanes, rows, got false", "upfront false"},
    {function () sort(cuda.array("uint64", 10), cuda.array("uint32", 10), {items = 24}) end,
     "items x threads %(24 x 256%) need 51304 bytes of shared memory for 8%-byte keys or values; at most 49152", "a tile too big"},
    {function () sort(k, {portion = 0}) end, "portion must be an integer", "empty portion"},
    {function () sort(cuda.array("uint32", 33), {variant = "warp"}) end, "variant 'warp' sorts at most 32 keys %(one warp%), got 33", "warp: 33 keys"},
    {function () sort(cuda.array("int32", 8), {variant = "warp"}) end, "variant 'warp' sorts uint32 keys only, got int32", "warp: int32 keys"},
    {function () sort(cuda.array("uint64", 8), {variant = "warp"}) end, "variant 'warp' sorts uint32 keys only, got uint64", "warp: uint64 keys"},
    {function () argsort(cuda.array("float64", 40), {variant = "warp"}) end, "cuda%.catalog%.argsort: variant 'warp'", "argsort warp refusal"},
    {function () argsort(k, {foo = 1}) end, "cuda%.catalog%.argsort: unknown option 'foo'", "argsort: unknown option"},
    {function () argsort(k, {end_bit = 40}) end, "cuda%.catalog%.argsort: end_bit must be an integer 1%.%.32", "argsort: bad end_bit"},
    {function () local c = cuda.array("uint32", 4); c:close(); sort(c) end, "keys is a closed cuda%.array", "closed keys"},
    {function () local c = cuda.array("uint32", 10); c:close(); sort(k, c) end, "values is a closed cuda%.array", "closed values"},
    {function () local c = cuda.array("uint32", 4); c:close(); argsort(c) end, "argsort: keys is a closed cuda%.array", "argsort: closed keys"},
  }
  for _, b in ipairs(bad) do
    local ok, err = pcall(b[1])
    T.ok(not ok and tostring(err):find(b[2]) ~= nil and tostring(err):find("cuda.catalog.", 1, true) ~= nil,
         "refused: " .. b[3], err)
  end
  if cuda.device_count() > 1 then
    local other = cuda.array("uint32", 10, {device = 1})
    T.error_like(function () sort(k, other) end, "values is on device 1 but keys is on device 0", "arrays on two devices")
  else
    T.skip("one device: arrays on two devices", 1)
  end
end

-- }======================================================

collectgarbage()
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file (scratch included)")
T.done_testing()
