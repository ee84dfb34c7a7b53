-- The low-precision dtypes (float16, bfloat16, float8_e4m3, float8_e5m2): the host's
-- conversions against known bit patterns (specials, ties to even, saturation, subnormals)
-- and properties over every pattern, with no GPU; then, on a GPU, every pattern and a
-- large float32 sample converted by CUDA's intrinsics and by culua's casts, bit for bit.
-- doc/dtypes.md states the rules.
local T = require "culua.tap"
local cuda = require "cuda"

local LOWP = {"float16", "bfloat16", "float8_e4m3", "float8_e5m2"}
local width = {float16 = 2, bfloat16 = 2, float8_e4m3 = 1, float8_e5m2 = 1}
local fmt = {[1] = "<I1", [2] = "<I2", [4] = "<I4", [8] = "<I8"}
local INF, NAN = 1 / 0, 0 / 0

-- a host array's elements as their bits
local function bits (h)
  local s, w, out = h:bytes(), h.nbytes // h.size, {}
  for i = 1, h.size do out[i] = string.unpack(fmt[w], s, (i - 1) * w + 1) end
  return out
end

-- a host array of dtype holding these bit patterns
local function from_bits (dt, list)
  local w, parts = width[dt] or ({float32 = 4, float64 = 8})[dt], {}
  for i, b in ipairs(list) do parts[i] = string.pack(fmt[w], b) end
  return cuda.host_array(dt, #list):copy_from(table.concat(parts))
end

-- every pattern of a low-precision dtype
local function all_patterns (dt)
  local list = {}
  for b = 0, (1 << (8 * width[dt])) - 1 do list[#list + 1] = b end
  return from_bits(dt, list)
end

-- {====================================================== known patterns, from Lua numbers

-- {value, bits} per dtype: what a Lua number becomes
local known = {
  float16 = {
    {1, 0x3c00}, {-2, 0xc000}, {0.1, 0x2e66}, {65504, 0x7bff}, {65519.99, 0x7bff},
    {INF, 0x7c00}, {-INF, 0xfc00}, {NAN, 0x7fff}, {-NAN, 0x7fff}, {0.0, 0x0000}, {-0.0, 0x8000},
    {2^-14, 0x0400}, {2^-24, 0x0001}, {1023 * 2^-24, 0x03ff},
    {2^-25, 0x0000},                    -- half the least subnormal: a tie, to even (zero)
    {2^-25 * (1 + 2^-40), 0x0001},      -- just past it
    {3 * 2^-25, 0x0002},                -- 1.5 subnormal steps: a tie, to even (2)
    {-2^-26, 0x8000},                   -- rounds to zero, keeps its sign
    {1 + 2^-11, 0x3c00},                -- a tie between 0x3c00 and 0x3c01: even
    {1 + 3 * 2^-11, 0x3c02},            -- a tie between 0x3c01 and 0x3c02: even
    {1 + 2^-11 + 2^-40, 0x3c01},        -- past the tie by less than float32 can say: one rounding
    {2048 + 1, 0x6800}, {2048 + 3, 0x6802},
  },
  bfloat16 = {
    {1, 0x3f80}, {-2, 0xc000}, {0.1, 0x3dcd}, {3.3895313892515355e38, 0x7f7f},
    {INF, 0x7f80}, {-INF, 0xff80}, {NAN, 0x7fff}, {-0.0, 0x8000},
    {2^-126, 0x0080}, {2^-133, 0x0001}, {2^-134, 0x0000}, {3 * 2^-134, 0x0002},
    {1 + 2^-8, 0x3f80}, {1 + 3 * 2^-8, 0x3f82}, {1 + 2^-8 + 2^-40, 0x3f81},
    {256 + 1, 0x4380}, {65536 * 1.00390625, 0x4780},
  },
  float8_e4m3 = {
    {1, 0x38}, {-2, 0xc0}, {0.1, 0x1d}, {448, 0x7e}, {-448, 0xfe},
    {464, 0x7e},                        -- halfway to the missing 480: even, 448
    {NAN, 0x7f}, {-NAN, 0x7f}, {-0.0, 0x80},
    {2^-6, 0x08}, {2^-9, 0x01}, {7 * 2^-9, 0x07}, {2^-10, 0x00}, {3 * 2^-10, 0x02},
    {1.0625, 0x38}, {1.1875, 0x3a}, {1.0625 + 2^-30, 0x39},
  },
  float8_e5m2 = {
    {1, 0x3c}, {-2, 0xc0}, {0.1, 0x2e}, {57344, 0x7b}, {-57344, 0xfb},
    {NAN, 0x7f}, {-0.0, 0x80}, {INF, nil}, {61440, nil}, {-61439, 0xfb},
    {2^-14, 0x04}, {2^-16, 0x01}, {2^-17, 0x00}, {3 * 2^-17, 0x02},
    {1.125, 0x3c}, {1.375, 0x3e},
  },
}

for _, dt in ipairs(LOWP) do
  for _, c in ipairs(known[dt]) do
    local x, want = c[1], c[2]
    local h = cuda.host_array(dt, 1)
    if want then
      h[1] = x
      T.is(("0x%x"):format(bits(h)[1]), ("0x%x"):format(want), ("%s: %.17g -> 0x%x"):format(dt, x, want))
    else
      T.error_like(function () h[1] = x end, "would saturate to %-?57344%.0 in float8_e5m2",
                   ("%s: %.17g saturates, and a write raises"):format(dt, x))
    end
  end
end

-- }======================================================

-- {====================================================== writes that raise, reads that are exact

T.error_like(function () cuda.host_array("float16", 1)[1] = 65520 end,
             "cuda.hostarray: 65520 overflows float16 %(largest 65504%.0%)", "float16: 65520 rounds to inf: raises")
T.error_like(function () cuda.host_array("float16", 2):fill(-1e6) end, "fill: %-1000000%.0 overflows float16",
             "float16: fill past the range")
T.error_like(function () cuda.host_array("bfloat16", 2):copy_from{1, 1e39} end, "copy_from: 1e%+39 overflows bfloat16",
             "bfloat16: a table value past the range")
T.error_like(function () cuda.host_array("float8_e4m3", 1)[1] = 465 end,
             "465 would saturate to 448%.0 in float8_e4m3 %(fp8 conversions are SATFINITE%)", "e4m3: past 464 raises")
T.error_like(function () cuda.host_array("float8_e4m3", 1)[1] = -INF end,
             "%-inf would saturate to %-448%.0 in float8_e4m3", "e4m3: no infinity")
T.error_like(function () cuda.host_array("float16", 1)[1] = "x" end, "number expected for float16, got string",
             "float16: a string")
T.error_like(function () cuda.host_array("float16", 4):iota(65500, 10) end, "iota: 65530 overflows float16", "iota: the last value overflows")
T.error_like(function () cuda.host_array("float8_e4m3", 4):random(1, 0, 1000) end,
             "random: 1000 would saturate", "random: hi past the range")

-- reading back: the exact value as a Lua float
do
  local h = from_bits("float16", {0x3555, 0x0001, 0x7bff, 0xfc00, 0x8000, 0x7e00})
  local t = h:totable()
  T.ok(t[1] == 0x1.554p-2 and t[2] == 2^-24 and t[3] == 65504 and t[4] == -INF, "float16: exact values read back")
  T.ok(1 / t[5] == -INF and t[6] ~= t[6], "float16: -0.0 and NaN read back")
  T.ok(math.type(h[1]) == "float", "an element is a Lua float")
  local e = from_bits("float8_e4m3", {0x7f, 0xff, 0x7e, 0x01, 0x7c})
  T.ok(e[1] ~= e[1] and e[2] ~= e[2] and e[3] == 448 and e[4] == 2^-9 and e[5] == 384, "e4m3: NaNs, 448, subnormal, 384")
  local f = from_bits("float8_e5m2", {0x7c, 0xfc, 0x7d, 0x7e, 0x7f, 0x03})
  T.ok(f[1] == INF and f[2] == -INF and f[3] ~= f[3] and f[4] ~= f[4] and f[5] ~= f[5] and f[6] == 3 * 2^-16,
       "e5m2: infinities, NaNs, a subnormal")
end

-- every host operation takes the new dtypes
for _, dt in ipairs(LOWP) do
  local h = cuda.host_array(dt, {3, 4})
  T.ok(h.dtype == dt and h.nbytes == 12 * width[dt] and #h == 12, dt .. ": dtype, nbytes, size")
  h:iota(0, 0.5)
  T.is(h[8], 3.5, dt .. ": iota by halves")
  T.is_deeply(h:totable()[2], {2, 2.5, 3, 3.5}, dt .. ": totable by rows")
  h:fill(-1.5)
  T.is(h[7], -1.5, dt .. ": fill")
  h:copy_from{{1, 2, 3, 4}, {5, 6, 7, 8}, {0.25, -0.25, 0, -0.0}}
  T.is(h[9], 0.25, dt .. ": copy_from rows")
  T.like(tostring(h), "^cuda%.hostarray%(" .. dt .. ", {3, 4}%): {1%.0, 2%.0, 3%.0", dt .. ": tostring")
  local r = cuda.host_array(dt, 1000):random(7, -2, 2)
  local lo, hi = math.huge, -math.huge
  for i = 1, #r do lo, hi = math.min(lo, r[i]), math.max(hi, r[i]) end
  T.ok(lo >= -2 and hi <= 2 and hi > lo, dt .. ": random within [lo, hi]")
  local a, b = cuda.host_array(dt, 3):copy_from{1, 2, 4}, cuda.host_array("float64", 3):copy_from{1, 2, 4.5}
  local mabs = cuda.compare(a, b)
  T.is(mabs, 0.5, dt .. ": cuda.compare against float64")
end

-- }======================================================

-- {====================================================== every pattern, on the host

-- widening is exact and rounding it back gives the same bits (but NaNs, which
-- become the canonical one, and e5m2's infinities, which saturate)
local canonical = {float16 = 0x7fff, bfloat16 = 0x7fff, float8_e4m3 = 0x7f, float8_e5m2 = 0x7f}
for _, dt in ipairs(LOWP) do
  local h = all_patterns(dt)
  local d = h:astype("float64")
  local back = bits(d:astype(dt))
  local orig, bad, nans = bits(h), 0, 0
  for i = 1, #orig do
    local x = d[i]
    local want = orig[i]
    if x ~= x then want = canonical[dt]; nans = nans + 1
    elseif dt == "float8_e5m2" and (x == INF or x == -INF) then want = x > 0 and 0x7b or 0xfb end
    if back[i] ~= want then
      bad = bad + 1
      if bad <= 3 then T.diag(("%s 0x%x -> %.17g -> 0x%x"):format(dt, orig[i], x, back[i])) end
    end
  end
  T.is(bad, 0, ("%s: all %d patterns widen and round back (%d NaNs to 0x%x)"):format(dt, #orig, nans, canonical[dt]))
  -- the positive patterns below the first NaN or inf increase, so widening lost nothing
  local up = true
  for i = 2, #orig // 2 do
    local x, y = d[i - 1], d[i]
    if y ~= y or y == INF then break end
    up = up and y > x
  end
  T.ok(up, dt .. ": positive patterns widen to increasing values")
  -- float32 holds every value of every low-precision dtype: the same through it
  T.is_deeply(bits(h:astype("float32"):astype(dt)), bits(d:astype(dt)), dt .. ": through float32, the same bits")
end

-- between low-precision dtypes, one rounding from the exact value
do
  local h = from_bits("float16", {0x3c01, 0x7bff, 0x0001, 0xfc00, 0x7e00, 0x3c00 + 0x80})
  T.is_deeply(bits(h:astype("bfloat16")), {0x3f80, 0x4780, 0x3380, 0xff80, 0x7fff, 0x3f90},
              "float16 -> bfloat16")
  T.is_deeply(bits(h:astype("float8_e4m3")), {0x38, 0x7e, 0x00, 0xfe, 0x7f, 0x39}, "float16 -> e4m3 (saturating)")
  T.is_deeply(bits(h:astype("float8_e5m2")), {0x3c, 0x7b, 0x00, 0xfb, 0x7f, 0x3c}, "float16 -> e5m2 (saturating)")
end

-- casts never raise: overflow follows CUDA
do
  local f = cuda.host_array("float64", 7):copy_from{70000, 1e300, -INF, 480, 61440, NAN, -1e-300}
  T.is_deeply(bits(f:astype("float16")), {0x7c00, 0x7c00, 0xfc00, 0x5f80, 0x7b80, 0x7fff, 0x8000}, "float64 -> float16")
  T.is_deeply(bits(f:astype("bfloat16")), {0x4789, 0x7f80, 0xff80, 0x43f0, 0x4770, 0x7fff, 0x8000}, "float64 -> bfloat16")
  T.is_deeply(bits(f:astype("float8_e4m3")), {0x7e, 0x7e, 0xfe, 0x7e, 0x7e, 0x7f, 0x80}, "float64 -> e4m3")
  T.is_deeply(bits(f:astype("float8_e5m2")), {0x7b, 0x7b, 0xfb, 0x60, 0x7b, 0x7f, 0x80}, "float64 -> e5m2")
  T.is_deeply(f:astype("int16"):totable(), {32767, 32767, -32768, 480, 32767, 0, 0}, "float64 -> int16 saturates, NaN is 0")
  T.is_deeply(f:astype("uint8"):totable(), {255, 255, 0, 255, 255, 0, 0}, "float64 -> uint8")
  local i = cuda.host_array("int32", 3):copy_from{-1, 65535, 70000}
  T.is_deeply(i:astype("uint8"):totable(), {255, 255, 112}, "int32 -> uint8 keeps the low bits")
  T.is_deeply(bits(i:astype("float16")), {0xbc00, 0x7c00, 0x7c00}, "int32 -> float16")
  local big = cuda.host_array("int64", 2):copy_from{math.maxinteger, math.mininteger}
  T.is_deeply(big:astype("float64"):astype("int64"):totable(), {math.maxinteger, math.mininteger},
              "int64 extremes through float64 saturate back")
end

-- }======================================================
