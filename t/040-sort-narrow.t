-- cuda.catalog.sort and argsort of 16- and 8-bit keys (issue 37): float16, bfloat16, int16,
-- uint16, float8_e4m3, float8_e5m2, int8, uint8, with values of 1, 2, 4 and 8 bytes. Without
-- a GPU: the listing, the C reference against an order worked out here from the keys' values
-- (NaN, infinities, -0.0, subnormals, stability, descending), its NaNs as the GPU writes them,
-- the narrow kernels compiled by NVRTC case by case and the argument lists the module
-- launches them with, the prebuilt ones in the fatbin. With one: every dtype at odd lengths
-- with specials, pairs, descending, bit ranges, argsort, every path (one block, one launch,
-- onesweep, portions, lsd, the upfront's rows), views, other shapes, against the reference
-- byte for byte with the scratch poisoned first; and the refusals.
local T = require "culua.tap"
local cuda = require "cuda"
local sort, argsort = cuda.catalog.sort, cuda.catalog.argsort
local ref = cuda.catalog.reference

local narrow = {"float16", "bfloat16", "int16", "uint16", "float8_e4m3", "float8_e5m2", "int8", "uint8"}
local width = {float16 = 16, bfloat16 = 16, int16 = 16, uint16 = 16, float8_e4m3 = 8, float8_e5m2 = 8, int8 = 8,
               uint8 = 8}
local isfloat = {float16 = true, bfloat16 = true, float8_e4m3 = true, float8_e5m2 = true}
-- the NaN the sort writes back (doc/dtypes.md: the NaN culua's conversions make)
local qnan = {float16 = 0x7fff, bfloat16 = 0x7fff, float8_e4m3 = 0x7f, float8_e5m2 = 0x7f}
-- bit patterns of each dtype's specials: NaNs of both signs and other payloads, infinities
-- (none in float8_e4m3, whose exponent of all ones holds 256..448), zeros of both signs, the
-- least and largest subnormals, the largest finite values, one
local specials = {
  float16 = {0x7e00, 0xfe00, 0x7c01, 0xffff, 0x7c00, 0xfc00, 0x8000, 0x0000, 0x0001, 0x8001, 0x03ff, 0x7bff, 0xfbff, 0x3c00},
  bfloat16 = {0x7fc0, 0xffc0, 0x7f81, 0xffff, 0x7f80, 0xff80, 0x8000, 0x0000, 0x0001, 0x8001, 0x007f, 0x7f7f, 0xff7f, 0x3f80},
  float8_e4m3 = {0x7f, 0xff, 0x7e, 0xfe, 0x80, 0x00, 0x01, 0x81, 0x07, 0x78, 0x79, 0xf8, 0x38},
  float8_e5m2 = {0x7f, 0xff, 0x7d, 0xfd, 0x7e, 0x7c, 0xfc, 0x80, 0x00, 0x01, 0x81, 0x7b, 0xfb, 0x3c},
  int16 = {0x8000, 0x7fff, 0xffff, 0x0000, 0x0001, 0x8001},
  uint16 = {0x0000, 0xffff, 0x8000, 0x7fff, 0x0001},
  int8 = {0x80, 0x7f, 0xff, 0x00, 0x01, 0x81},
  uint8 = {0x00, 0xff, 0x80, 0x7f, 0x01},
}
local NAN, INF = 0 / 0, math.huge

-- a host array of dtype dt from bit patterns
local function from_bits(dt, bits)
  local u = cuda.host_array(width[dt] == 16 and "uint16" or "uint8", #bits):copy_from(bits)
  return cuda.host_array(dt, #bits):copy_from(u:bytes())
end
local function bits_of(h)
  return cuda.host_array(width[h.dtype] == 16 and "uint16" or "uint8", #h):copy_from(h:bytes()):totable()
end


-- {====================================================== without a GPU

local info = cuda.catalog.list().sort
for _, dt in ipairs(narrow) do
  local k, v = false, false
  for _, d in ipairs(info.key_dtypes) do k = k or d == dt end
  for _, d in ipairs(info.value_dtypes) do v = v or d == dt end
  T.ok(k and v, dt .. ": listed as keys and as values")
end

-- the order worked out here from the values the keys hold: NaNs last (in either order),
-- -0.0 before +0.0, equal keys in their input order; descending the exact reverse but for
-- the NaNs, still last, and equal keys still in their input order
local function order(h, desc)
  local n, vals, idx = #h, h:totable(), {}
  for i = 1, n do idx[i] = i end
  local function rank(x)   -- NaN after everything; a zero's sign breaks the tie of the zeros
    if x ~= x then return 2, 0, 0 end
    return 1, x, (x == 0 and 1 / x < 0) and -1 or 0
  end
  table.sort(idx, function (i, j)
    local ca, xa, za = rank(vals[i])
    local cb, xb, zb = rank(vals[j])
    if ca ~= cb then return ca < cb end
    if xa ~= xb then if desc then return xa > xb else return xa < xb end end
    if za ~= zb then if desc then return za > zb else return za < zb end end
    return i < j
  end)
  return idx
end

for _, dt in ipairs(narrow) do
  local sp = specials[dt]
  -- the specials, twice over in another order, among a few ordinary values
  local bits = {}
  for i = 1, #sp do bits[#bits + 1] = sp[i] end
  for i = #sp, 1, -1 do bits[#bits + 1] = sp[i] end
  for _, b in ipairs{0x11, 0x91, 0x23, 0x23} do bits[#bits + 1] = b end
  local h = from_bits(dt, bits)
  for _, desc in ipairs{false, true} do
    local k = cuda.host_array(dt, #h):copy_from(h)
    local v = cuda.host_array("uint32", #h):iota(1)
    ref.sort(k, v, {descending = desc})
    local what = ("reference %s%s"):format(dt, desc and " descending" or "")
    T.is_deeply(v:totable(), order(h, desc), what .. ": the order of the values, stable, NaNs last")
    local kb, nans = bits_of(k), 0
    for i = 1, #h do if h[i] ~= h[i] then nans = nans + 1 end end
    if isfloat[dt] then
      local ok = nans > 0
      for i = #kb - nans + 1, #kb do ok = ok and kb[i] == qnan[dt] end
      T.ok(ok, ("%s: %d NaNs last, each written as 0x%x"):format(what, nans, qnan[dt]))
    end
    -- the keys moved with their positions: each is the key it came from (NaNs aside)
    local same = true
    for i, p in ipairs(v:totable()) do
      if kb[i] ~= bits[p] and not (isfloat[dt] and kb[i] == qnan[dt]) then same = false end
    end
    T.ok(same, what .. ": keys and positions move together")
  end
end

-- argsort, a bit range, the reference's refusals
do
  local h = from_bits("uint16", {0x1234, 0x0035, 0x1225, 0xff30, 0x0034})
  ref.sort(h, {begin_bit = 4, end_bit = 12})   -- 0x23, 0x03, 0x22, 0xf3, 0x03
  T.is_deeply(bits_of(h), {0x0035, 0x0034, 0x1225, 0x1234, 0xff30}, "reference uint16: bits 4..11 only, stable")
  local e = from_bits("float8_e4m3", {0x38, 0xb8, 0x7f, 0x00, 0xb8})   -- 1, -1, NaN, 0, -1
  T.is_deeply(ref.argsort(e):totable(), {2, 5, 4, 1, 3}, "reference argsort float8_e4m3: 1-based, stable, NaN last")
  T.is_deeply(ref.argsort(e, {descending = true}):totable(), {1, 4, 2, 5, 3}, "reference argsort descending")
  local i8 = from_bits("int8", {0x80, 0x7f, 0xff, 0x00})
  ref.sort(i8, {descending = true})
  T.is_deeply(i8:totable(), {127, 0, -1, -128}, "reference int8 descending")
  T.error_like(function () ref.sort(cuda.host_array("float16", 2), {end_bit = 17}) end,
               "cuda%.catalog%.reference%.sort: bits 0%.%.17 are not within 0%.%.16", "reference: a bit past a 16-bit key")
  T.error_like(function () ref.sort(cuda.host_array("uint8", 2), cuda.host_array("uint8", 3)) end,
               "hvalues has 3 elements but hkeys has 2", "reference: values of another length")
end

-- the kernels: each narrow case alone by NVRTC, as lua/catalog/sort.lua asks for a shape not
-- prebuilt (-DCULUA_SORT_KEY, -DCULUA_SORT_VALUE: widths in bits, 0 for keys alone), and the
-- argument lists the module launches them with
local big = (1 << 40) + 3
local src = cuda._catalog.source("sort")
local function build(defines)
  local opts = {"-std=c++17", "-arch=compute_90"}
  for _, d in ipairs(defines) do opts[#opts + 1] = "-D" .. d end
  local ok, p = pcall(cuda.compile, src, {options = opts, name = "sort.cu"})
  return ok and p or nil, not ok and tostring(p) or nil
end
local function fits(prog, name, ...) return prog ~= nil and cuda.check_args(cuda.signature(prog.ptx, name), ...) end
-- (each narrow key width with values of every width, and wide keys with narrow values: a
-- compile each, a second or so)
local cases = {{8, 0}, {8, 16}, {8, 64}, {16, 8}, {16, 16}, {16, 32}, {32, 8}, {64, 16}}
local wn = {[0] = "keys", [8] = "u8", [16] = "u16", [32] = "u32", [64] = "u64"}
for _, c in ipairs(cases) do
  local kb, vb = c[1], c[2]
  local prog, err = build{"CULUA_SORT_ITEMS=11", "CULUA_SORT_KEY=" .. kb, "CULUA_SORT_VALUE=" .. vb, "CULUA_SORT_THREADS=288"}
  local e = ("%s_%s_11_t288"):format(wn[kb], wn[vb])
  T.ok(prog, "kernels/sort.cu builds case " .. e .. " alone under NVRTC", err)
  T.ok(fits(prog, "culua_sort_onesweep_" .. e, 1, 2, 3, 4, big, (1 << 30) - 1, 5, 0, 6, 7, 70000, 8, 9, 8, 8, 2, 31, 4)
       and fits(prog, "culua_sort_small_" .. e, 1, 1, 0, 2, 3168, 0, kb, 3, 30)
       and fits(prog, "culua_sort_fused_" .. e, 1, 2, 1, 0, 0, 0, 500000, 3, 4, 5, 6, 0, kb, 2, 28, 4)
       and fits(prog, "culua_sort_lsd_" .. e, 1, 2, 3, 4, big, 3168 * 5, 5, 8, 8, 2, 3), e .. ": the four kernels' arguments")
  if prog then
    local others = 0
    for name in prog.ptx:gmatch("%.entry (culua_sort_[%w_]+)%(") do if not name:find(e, 1, true) then others = others + 1 end end
    T.is(others, 0, e .. ": that case alone")
  end
end
do   -- a case alone at the 256 threads of no suffix, and with min_blocks
  local prog = build{"CULUA_SORT_ITEMS=38", "CULUA_SORT_KEY=16", "CULUA_SORT_VALUE=0", "CULUA_SORT_THREADS=512",
                     "CULUA_SORT_MINBLOCKS=1"}
  T.like(prog and prog.ptx or "", "%.entry culua_sort_onesweep_u16_keys_38_t512_b1%(", "16-bit keys at 512 x 38, min_blocks 1")
  prog = build{"CULUA_SORT_ITEMS=64", "CULUA_SORT_KEY=8", "CULUA_SORT_VALUE=0"}
  T.like(prog and prog.ptx or "", "%.entry culua_sort_small_u8_keys_64%(", "8-bit keys at 256 x 64")
end
-- prebuilt: 16-bit keys alone and with 4-byte values at their default shapes, and the small
-- sorts' fused tiles; the lsd scatter and the other narrow cases are NVRTC's
do
  local K = require("culua.catalog.core").constants("sort")
  local entries = cuda._catalog.entries("sort")
  local k16 = ("u16_keys_%d_t%d"):format(K.SORT_WIDE_U16_KEYS_ITEMS, K.SORT_WIDE_U16_KEYS_THREADS)
  local p16 = ("u16_u32_%d_t%d"):format(K.SORT_WIDE_U16_U32_ITEMS, K.SORT_WIDE_U16_U32_THREADS)
  for _, name in ipairs{"onesweep_" .. k16, "small_" .. k16, "fused_" .. k16, "fused_u16_keys_4",
                        "onesweep_" .. p16, "small_" .. p16, "fused_" .. p16, "fused_u16_u32_4"} do
    T.like(entries, "%.entry culua_sort_" .. name .. "%(", name .. " is prebuilt")
  end
  T.unlike(entries, "culua_sort_lsd_u16", "no narrow lsd scatter prebuilt")
  T.unlike(entries, "culua_sort_onesweep_u8_", "no 8-bit keys prebuilt")
end
-- the kernels outside the tiles (kernels/sort_counts.cu), for both narrow widths
do
  local prog = cuda.compile(cuda._catalog.source("sort_counts"), {options = {"-std=c++17", "-arch=compute_90"},
                                                                   name = "sort_counts.cu"})
  for _, k in ipairs{"u8", "u16"} do
    for _, up in ipairs{"upfront_", "upfront_plain_", "upfront_lanes_", "upfront_lanes_plain_"} do
      T.ok(fits(prog, "culua_sort_" .. up .. k, 1, big, 2, 3, 4, 512, 5, 6, big, 2, 0, 16, 2, 16), up .. k .. "'s arguments")
    end
    T.ok(fits(prog, "culua_sort_lsd_count_" .. k, 1, big, 4608, 2, 8, 8, 3, 16), "lsd_count_" .. k .. "'s arguments")
  end
  T.ok(fits(prog, "culua_sort_copy16", 1, 2, big) and fits(prog, "culua_sort_copy8", 1, 2, big), "copy16's and copy8's arguments")
end
-- the kinds the module passes are the header's
do
  local H = require("culua.catalog.core").constants("culua/sort.cuh")
  T.ok(H.SORT_UNSIGNED == 0 and H.SORT_SIGNED == 1 and H.SORT_FLOAT == 2 and H.SORT_FLOAT_ALT == 3,
       "<culua/sort.cuh>'s kinds: unsigned, signed, float, the width's other float format")
end

-- }======================================================


-- {====================================================== with a GPU

local function gpu_tests()
  local core = require "culua.catalog.core"
  local dev = cuda.device()
  local sms = core.sm_count(dev)
  local POISON = 0x5a5a5a5a5a5a5a5a
  local BIG = T.sanitizer and (1 << 17) + 3 or (1 << 20) + 7
  local sizes = {1, 31, 3000, (1 << 16) + 3, BIG}
  local MID = T.sanitizer and 70001 or 300007   -- (the same kernels as 300007 keys under compute-sanitizer)

  -- n keys of dtype dt: every bit pattern, the specials sprinkled among them; "few": four values
  local function make_keys(dt, n, seed, how)
    local hi = width[dt] == 16 and 0xffff or 0xff
    local u = cuda.host_array(width[dt] == 16 and "uint16" or "uint8", n):random(seed, 0, how == "few" and 3 or hi)
    if how == "few" then
      local sp = specials[dt]
      for i = 1, n do u[i] = sp[u[i] + 1] end
    else
      local sp = specials[dt]
      for i = 1, n, 5 do u[i] = sp[(i // 5) % #sp + 1] end
    end
    return cuda.host_array(dt, n):copy_from(u:bytes())
  end
  local function device_of(h) return cuda.array(h.dtype, #h):copy_from(h) end
  local function poison_scratch(n, stream)
    for _, kind in ipairs{"sort_keys", "sort_keys2", "sort_values"} do
      core.scratch(kind, dev, stream, n):fill(POISON, stream)
    end
  end
  local function same(d, h, what)
    local got = d:copy_to(cuda.host_array(d.dtype, #d))
    local a, b = got:bytes(), h:bytes()
    local diff
    if a ~= b then
      local es = #a // #got
      for i = 1, #got do
        if a:sub((i - 1) * es + 1, i * es) ~= b:sub((i - 1) * es + 1, i * es) then
          diff = ("first difference at %d of %d: got %s, expected %s"):format(i, #got, tostring(got[i]), tostring(h[i]))
          break
        end
      end
    end
    return T.ok(diff == nil, what, diff)
  end
  -- values of dtype vdt: their positions where they fit, else random bits
  local value_bits = {int8 = {"uint8", 0, 0xff}, uint8 = {"uint8", 0, 0xff}, float8_e4m3 = {"uint8", 0, 0xff},
                      float8_e5m2 = {"uint8", 0, 0xff}, int16 = {"uint16", 0, 0xffff}, uint16 = {"uint16", 0, 0xffff},
                      float16 = {"uint16", 0, 0xffff}, bfloat16 = {"uint16", 0, 0xffff},
                      int32 = {"uint32", 0, 0xffffffff}, float32 = {"uint32", 0, 0xffffffff},
                      float64 = {"int64", math.mininteger, math.maxinteger}}
  local function make_values(vdt, n, seed)
    local h = cuda.host_array(vdt, n)
    if vdt == "uint32" or vdt == "uint64" or vdt == "int64" then return h:iota(1) end
    local b = value_bits[vdt]
    return h:copy_from(cuda.host_array(b[1], n):random(seed, b[2], b[3]):bytes())
  end

  local function ref_opts(o) return {descending = o.descending, begin_bit = o.begin_bit, end_bit = o.end_bit} end

  -- sort keys of dtype dt (values of vdt with them), against the reference
  local function check(dt, n, opts, vdt, how, tag)
    if not T.share() then return end   -- CULUA_TEST_SHARE: another run's case
    opts = opts or {}
    local hk = make_keys(dt, n, n + width[dt], how)
    local hv = vdt and make_values(vdt, n, n + 1)
    local dk, dv = device_of(hk), hv and device_of(hv)
    local name = ("%s n=%d%s%s%s"):format(dt, n, vdt and (" +" .. vdt) or "", how and (" " .. how) or "", tag or "")
    poison_scratch(n, opts.stream)
    local ok, err = pcall(sort, dk, dv, opts)
    if not T.ok(ok, name .. ": sorts", err) then return end
    ref.sort(hk, hv, ref_opts(opts))
    if opts.stream then opts.stream:synchronize() end
    same(dk, hk, name .. ": keys as the reference")
    if hv then same(dv, hv, name .. ": values as the reference (stable)") end
  end

  local function check_argsort(dt, n, opts, how, tag)
    if not T.share() then return end
    local hk = make_keys(dt, n, n + 3, how)
    local dk = device_of(hk)
    poison_scratch(n)
    local ok, idx = pcall(argsort, dk, opts)
    local name = ("argsort %s n=%d%s%s"):format(dt, n, how and (" " .. how) or "", tag or "")
    if not T.ok(ok, name .. ": runs", idx) then return end
    T.is(idx.dtype, "uint32", name .. ": uint32 positions")
    same(idx, ref.argsort(hk, ref_opts(opts or {})), name .. ": positions as the reference")
    same(dk, hk, name .. ": keys untouched")
  end

  local value_cycle = {"uint32", "float16", "int8", "uint64", "bfloat16", "float32", "uint8", "int16"}
  for d, dt in ipairs(narrow) do
    local w = width[dt]
    for s, n in ipairs(sizes) do
      check(dt, n)
      check(dt, n, nil, value_cycle[(d + s) % #value_cycle + 1])
      check(dt, n, {descending = true}, "uint32", nil, " descending")
      check_argsort(dt, n)
    end
    check(dt, 3000, nil, "uint32", "few", " (few values)")
    check(dt, (1 << 16) + 3, {descending = true}, "int16", "few", " descending (few values)")
    -- bit ranges: one pass of a 16-bit key, a range within a digit, the high byte
    check(dt, 50001, {begin_bit = 0, end_bit = 8}, "uint32", nil, " bits 0..7")
    check(dt, 50001, {begin_bit = w - 5, end_bit = w, descending = true}, "float32", nil, (" bits %d..%d descending"):format(w - 5, w - 1))
    check(dt, 3000, {begin_bit = 3, end_bit = w - 1}, "uint16", nil, (" bits 3..%d, one block"):format(w - 2))
    check_argsort(dt, 50001, {begin_bit = 1, end_bit = w}, nil, " bits 1..")
    check_argsort(dt, 3000, {descending = true}, "few", " descending, one block")
    -- the other paths: onesweep where fused would run, in portions, lsd, the upfront's rows
    check(dt, 100003, {fused = false}, "uint32", nil, " not fused")
    check(dt, 100003, {portion = 7680 * 3}, nil, nil, " in portions of 3 tiles")
    check(dt, 100003, {portion = 6656 * 2, descending = true}, "uint64", nil, " in portions, descending")
    check(dt, 100003, {variant = "lsd"}, "uint32", nil, " lsd")
    check(dt, 30001, {variant = "lsd", descending = true}, nil, nil, " lsd descending")
    check(dt, MID, {fused = false, upfront = "rows"}, "uint32", nil, " upfront rows")
    check(dt, MID, {fused = false, upfront = "lanes", descending = true}, nil, nil, " upfront lanes, descending")
    check(dt, MID, {fused = false}, nil, "few", " few values (skipped passes)")
  end
  -- all keys equal: every pass a copy; the fused path at its edges
  check("float16", 100003, {portion = 7680 * 5}, "uint32", "equal", " equal, in portions")
  local hz = cuda.host_array("bfloat16", 200003):fill(-0.0)
  local dz = device_of(hz)
  sort(dz)
  same(dz, hz, "bfloat16: 200003 equal keys (-0.0) stay")
  check("float16", 7680 * sms, nil, nil, nil, " fused, a tile (384 x 20) a multiprocessor")
  check("float16", 7680 * sms + 1, nil, nil, nil, " one tile past fused")
  check("uint16", 6656 * sms, nil, "uint32", nil, " fused, a tile (512 x 13) a multiprocessor")
  check("uint16", 6656 * sms + 1, nil, "uint32", nil, " one tile past fused")
  check("int8", 1024 * sms + 1, nil, "uint8", nil, " one past the small sorts' fused tiles")
  -- values of every width with 8- and 16-bit keys, and narrow values with wide keys
  for _, vdt in ipairs{"uint8", "float8_e5m2", "uint16", "bfloat16", "int32", "float64"} do
    check("float8_e4m3", 70001, nil, vdt)
    check("bfloat16", 70001, {descending = true}, vdt)
  end
  for _, kdt in ipairs{"uint32", "float32", "int64", "float64"} do
    check(kdt == "float32" and "float16" or "int16", 1000, nil, kdt)   -- (16-bit keys, wide values)
  end
  do   -- wide keys with 1- and 2-byte values
    local function wide(kdt, n, vdt, opts)
      if not T.share() then return end
      local bits = kdt:find("64") and cuda.host_array("int64", n):random(n, math.mininteger, math.maxinteger)
                   or cuda.host_array("int32", n):random(n, -2147483648, 2147483647)
      local hk = cuda.host_array(kdt, n):copy_from(bits:bytes())
      local hv = make_values(vdt, n, n + 5)
      local dk, dv = device_of(hk), device_of(hv)
      sort(dk, dv, opts)
      ref.sort(hk, hv, ref_opts(opts or {}))
      same(dk, hk, ("%s n=%d +%s: keys"):format(kdt, n, vdt))
      same(dv, hv, ("%s n=%d +%s: values"):format(kdt, n, vdt))
    end
    for _, n in ipairs{31, 3000, 70001, BIG} do
      wide("float32", n, "float16", nil)
      wide("uint32", n, "int8", {descending = true})
      wide("float64", n, "bfloat16", nil)
      wide("int64", n, "uint8", {variant = n > 100 and "lsd" or nil})
    end
  end
  -- other shapes (NVRTC): CUB's 512 x 38 of 2-byte keys, 64 keys a thread, small tiles
  check("float16", 200003, {threads = 512, items = 38, min_blocks = 1}, nil, nil, " 512 x 38 b1")
  check("uint8", 200003, {threads = 256, items = 64}, nil, nil, " 256 x 64")
  check("int16", 100003, {threads = 288, items = 7, variant = "lsd"}, "uint32", nil, " lsd 288 x 7")
  check("bfloat16", 5000, {items = 40}, "uint16", nil, " 256 x 40, one block")
  check("float16", 65536, {window = 1}, "uint32", nil, " fused, window 1")

  -- views at odd offsets: only the viewed elements move
  do
    local n = 10001
    local hk = make_keys("float16", n, 5)
    local dk = device_of(hk)
    local v = dk:view(3, 6000)
    local part = cuda.host_array("float16", 6000):copy_from(hk:bytes():sub(5, 4 + 12000))
    sort(v, {descending = true})
    ref.sort(part, {descending = true})
    same(v, part, "float16: a view at an odd offset")
    local all = dk:copy_to(cuda.host_array("float16", n)):bytes()
    T.ok(all:sub(1, 4) == hk:bytes():sub(1, 4) and all:sub(12005) == hk:bytes():sub(12005), "float16: nothing outside the view moved")
    local h8 = make_keys("uint8", 5001, 6)
    local d8 = device_of(h8)
    local v8 = d8:view(2, 4999)
    local vals = cuda.array("uint16", 5003):fill(0xabcd)
    local vv = vals:view(3, 4999)
    local hv = make_values("uint16", 4999, 7)
    vv:copy_from(hv)
    local p8 = cuda.host_array("uint8", 4999):copy_from(h8:bytes():sub(2, 5000))
    sort(v8, vv)
    ref.sort(p8, hv)
    same(v8, p8, "uint8: a view of 4999 keys at an odd offset")
    same(vv, hv, "uint16 values in a view")
    local edges = vals:copy_to(cuda.host_array("uint16", 5003))
    T.ok(edges[1] == 0xabcd and edges[2] == 0xabcd and edges[5003] == 0xabcd, "values outside the view untouched")
  end

  -- on a stream
  do
    local s = cuda.stream()
    check("bfloat16", 200000, {stream = s}, "uint32", nil, " on a stream")
    check("int8", 2000, {stream = s}, "int64", nil, " one block on a stream")
  end

  -- refusals
  do
    local h = cuda.array("float16", 10)
    local bad = {
      {function () sort(h, {end_bit = 17}) end, "end_bit must be an integer 1%.%.16, got 17", "float16: end_bit 17"},
      {function () sort(cuda.array("uint8", 4), {begin_bit = 8}) end, "begin_bit must be an integer 0%.%.7, got 8", "uint8: begin_bit 8"},
      {function () argsort(cuda.array("int8", 4), {end_bit = 9}) end, "argsort: end_bit must be an integer 1%.%.8, got 9", "argsort int8: end_bit 9"},
      {function () sort(h, {items = 65}) end, "items must be an integer 1%.%.64, got 65", "float16: items 65"},
      {function () sort(cuda.array("float32", 4), {items = 33}) end, "items must be an integer 1%.%.32, got 33", "float32: still 32 at most"},
      {function () sort(h, cuda.array("uint64", 10), {items = 64}) end,
       "items x threads %(64 x 256%) need %d+ bytes of shared memory for 8%-byte keys or values; at most 49152", "a tile too big"},
      {function () sort(h, {variant = "warp"}) end, "variant 'warp' sorts uint32 keys only, got float16", "warp: float16"},
      {function () sort(h, cuda.array("bfloat16", 9)) end, "values has 9 elements but keys has 10", "values of another length"},
    }
    for _, b in ipairs(bad) do
      local ok, err = pcall(b[1])
      T.ok(not ok and tostring(err):find(b[2]) ~= nil and tostring(err):find("cuda.catalog.", 1, true) ~= nil,
           "refused: " .. b[3], err)
    end
  end
end

T.gpu_part(gpu_tests, "the GPU part")

-- }======================================================

T.done_testing()
