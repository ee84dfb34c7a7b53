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
             "cuda.host_array: 65520 overflows float16 %(largest 65504%.0%)", "float16: 65520 rounds to inf: raises")
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
  T.like(tostring(h), "^cuda%.host_array%(" .. dt .. ", {3, 4}%): {1%.0, 2%.0, 3%.0", dt .. ": tostring")
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

-- {====================================================== kernels take the types: headers, signatures, scalars

-- a kernel that takes each low-precision type by value and writes back its bits
local BYVALUE = [[
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
extern "C" __global__ void byvalue(__half h, __nv_bfloat16 b, __nv_fp8_e4m3 e4, __nv_fp8_e5m2 e5,
                                   unsigned short *out16, unsigned char *out8) {
  out16[0] = __half_as_ushort(h);
  out16[1] = __bfloat16_as_ushort(b);
  out8[0] = e4.__x;
  out8[1] = e5.__x;
}
]]
local prog = cuda.compile(BYVALUE)
T.ok(prog.ptx:find(".entry byvalue", 1, true), "<cuda_fp16.h>, <cuda_bf16.h> and <cuda_fp8.h> compile with no flags")
do   -- where the toolkit's headers are not found, the error says so and says how
  local f = io.popen("CULUA_CUDA_INCLUDE= " .. T.culua .. [[ -e "require'cuda'.compile('#include <cuda_fp8.h>')" 2>&1]])
  local out = f:read("a")
  f:close()
  T.like(out, "cuda_fp8%.h.*NVRTC does not bring the CUDA toolkit's headers.*set empty: none", "no headers: said plainly")
end
local sig = cuda.signature(prog.ptx, "byvalue")
T.is_deeply(sig, {"b8[2]", "b8[2]", "b8", "b8", "u64", "u64"}, "by value, __half and __nv_bfloat16 are b8[2], the fp8 types b8")

local s = cuda.scalar("float16", 0.1)
T.ok(s.dtype == "float16" and s.value == 0x1.998p-4 and s.bits == 0x2e66, "cuda.scalar: dtype, exact value, bits")
T.is(tostring(s), "cuda.scalar(float16, 0.0999755859375)", "cuda.scalar: tostring")
T.is(cuda.type(s), "cuda.scalar", "cuda.type knows it")
T.is(cuda.scalar("float8_e5m2", -3).bits, 0xc2, "cuda.scalar: e5m2 bits")
T.ok(cuda.check_args(sig, cuda.scalar("float16", 1.5), cuda.scalar("bfloat16", -2), cuda.scalar("float8_e4m3", 448),
                     cuda.scalar("float8_e5m2", 0.25), 0, 0), "scalars pass for b8[2] and b8 parameters")
T.ok(cuda.check_args({"b16", "b8"}, cuda.scalar("uint16", 0x3c00), 0x38), "raw bits: a uint16 scalar, an integer into b8")
T.ok(cuda.check_args({"f16"}, 2.5), "a number for an f16 parameter converts as float16")
local refusals = {
  {{"b8[2]"}, {1.5}, "launch: argument 1 is a number but parameter 1 is b8%[2%], a __half or __nv_bfloat16 %(PTX does not tell them apart%): pass cuda%.scalar%(\"float16\", x%) or cuda%.scalar%(\"bfloat16\", x%)"},
  {{"b8[2]"}, {1}, "argument 1 is a number but parameter 1 is b8%[2%]"},
  {{"u64", "b8"}, {0, 0.5}, "argument 2 is a number but parameter 2 is b8, an __nv_fp8_e4m3 or __nv_fp8_e5m2 %(PTX does not tell them apart%): pass cuda%.scalar%(\"float8_e4m3\", x%) or cuda%.scalar%(\"float8_e5m2\", x%)"},
  {{"b16"}, {0.5}, "argument 1 is a number but parameter 1 is b16, a __half or __nv_bfloat16"},
  {{"f32"}, {cuda.scalar("float16", 1)}, "launch: argument 1 is a cuda%.scalar of float16 but parameter 1 is f32"},
  {{"b8"}, {cuda.scalar("bfloat16", 1)}, "argument 1 is a cuda%.scalar of bfloat16 but parameter 1 is b8"},
  {{"u64"}, {cuda.scalar("float64", 1)}, "argument 1 is a cuda%.scalar of float64 but parameter 1 is u64"},
  {{"f16"}, {70000}, "launch: argument 1: 70000 overflows float16 %(largest 65504%.0%)"},
}
for _, c in ipairs(refusals) do
  T.error_like(function () cuda.check_args(c[1], table.unpack(c[2])) end, c[3], "refused: " .. c[3]:sub(1, 60))
end
T.error_like(function () cuda.scalar("float8_e4m3", 1000) end, "cuda%.scalar: 1000 would saturate to 448%.0 in float8_e4m3",
             "cuda.scalar: the dtype's write rule")
T.error_like(function () cuda.scalar("half", 1) end, "unknown dtype 'half'", "cuda.scalar: an unknown dtype")

-- }======================================================

-- {====================================================== on a GPU: CUDA's intrinsics and culua's casts

-- what CUDA's own conversions give, each pattern or value a thread
local INTRINSICS = [[
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
typedef unsigned long long u64;
#define EACH for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
extern "C" __global__ void narrow_f(const float *x, unsigned short *h, unsigned short *b,
                                    unsigned char *e4, unsigned char *e5, u64 n) {
  EACH {
    h[i] = __half_as_ushort(__float2half_rn(x[i]));
    b[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    e4[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
    e5[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E5M2);
  }
}
extern "C" __global__ void narrow_d(const double *x, unsigned short *h, unsigned short *b,
                                    unsigned char *e4, unsigned char *e5, u64 n) {
  EACH {
    h[i] = __half_as_ushort(__double2half(x[i]));
    b[i] = __bfloat16_as_ushort(__double2bfloat16(x[i]));
    e4[i] = __nv_cvt_double_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
    e5[i] = __nv_cvt_double_to_fp8(x[i], __NV_SATFINITE, __NV_E5M2);
  }
}
extern "C" __global__ void widen16(const unsigned short *x, float *h, float *b, u64 n) {
  EACH {
    h[i] = __half2float(__ushort_as_half(x[i]));
    b[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
  }
}
extern "C" __global__ void widen8(const unsigned char *x, float *e4, float *e5, u64 n) {
  EACH {
    e4[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(x[i], __NV_E4M3)));
    e5[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(x[i], __NV_E5M2)));
  }
}
]]

local DTYPES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64",
                "float16", "bfloat16", "float8_e4m3", "float8_e5m2"}

-- a host array's bytes as another dtype of the same width, and the values x
-- whose elements are NaN (their indices), for comparisons that set NaN inputs apart
local function reinterpret (h, dt) return cuda.host_array(dt, h.nbytes // ({float32 = 4, float64 = 8})[dt]):copy_from(h:bytes()) end
local function first_diff (a, b, w)
  for i = 1, #a // w do
    if a:sub((i - 1) * w + 1, i * w) ~= b:sub((i - 1) * w + 1, i * w) then return i end
  end
end

T.gpu_part(function ()
  local N = T.sanitizer and (1 << 16) or (1 << 22)
  -- the float32 sample: every value of every low-precision dtype, the midpoints
  -- between neighbours (the ties), random bit patterns (NaNs, infinities, subnormals among them)
  local values = {}
  for _, dt in ipairs(LOWP) do
    local d = all_patterns(dt):astype("float64")
    for i = 1, #d do
      values[#values + 1] = d[i]
      if i < #d and d[i] == d[i] and d[i + 1] == d[i + 1] then values[#values + 1] = (d[i] + d[i + 1]) / 2 end
    end
  end
  for _, v in ipairs{0.0, -0.0, INF, -INF, 464, 61440, 65520, 3.3961e38, 2^-25, 2^-134, 2^-10, 2^-17} do
    values[#values + 1] = v
  end
  local rnd = cuda.host_array("uint32", N):random(37, 0, 0xffffffff)
  local fx = cuda.host_array("float32", #values + N)
  -- the fixed values (all of them float32 values), then the random patterns
  local fixed = cuda.host_array("float32", #values):copy_from(values)
  fx:copy_from(fixed:bytes() .. rnd:bytes())
  local dx = fx:astype("float64")
  -- a float64 sample of its own: the fixed values a double's ulp below and above
  -- (a tie missed by 2^-53 must round as a single rounding does, not as two), and
  -- random patterns (most far outside every format's range)
  local below = cuda.host_array("int64", #values):copy_from(fixed:astype("float64"):bytes())
  local above = cuda.host_array("int64", #values):copy_from(below:bytes())
  for i = 1, #below do below[i] = below[i] - 1; above[i] = above[i] + 1 end
  local drnd = reinterpret(cuda.host_array("int64", N):random(41, math.mininteger, math.maxinteger), "float64")
  drnd = reinterpret(cuda.host_array("int64", 2 * #values + N):copy_from(below:bytes() .. above:bytes() .. drnd:bytes()),
                     "float64")

  local prog = cuda.compile(INTRINSICS)
  local mod = prog:module()
  local grid, block = 1024, 256
  local function device_narrow (kname, hx)
    local x = cuda.array(hx.dtype, #hx):copy_from(hx)
    local outs = {}
    for i, dt in ipairs(LOWP) do outs[i] = cuda.array(dt, #hx) end
    mod:kernel(kname):launch({grid = grid, block = block}, x, outs[1], outs[2], outs[3], outs[4], #hx)
    return outs
  end

  -- CUDA's intrinsics and culua's host conversions, bit for bit; NaN inputs apart
  for _, case in ipairs{{"narrow_f", fx, "float32"}, {"narrow_d", dx, "float64 (the float32 sample)"},
                        {"narrow_d", drnd, "float64 (an ulp off the sample, random patterns)"}} do
    local kname, hx, what = case[1], case[2], case[3]
    local outs = device_narrow(kname, hx)
    for i, dt in ipairs(LOWP) do
      local dev, host = outs[i]:bytes(), hx:astype(dt):bytes()
      local w = width[dt]
      local bad, nanbad, first = 0, 0, nil
      if dev ~= host then
        for k = 1, #hx do
          if dev:sub((k - 1) * w + 1, k * w) ~= host:sub((k - 1) * w + 1, k * w) then
            if hx[k] ~= hx[k] then nanbad = nanbad + 1 else bad = bad + 1; first = first or k end
          end
        end
      end
      T.is(bad, 0, ("%s: %s -> %s, %d values: CUDA's intrinsic and the host agree bit for bit"):format(kname, what, dt, #hx))
      if first then
        T.diag(("first: %.17g -> device 0x%x, host 0x%x"):format(hx[first],
          string.unpack(fmt[w], dev, (first - 1) * w + 1), string.unpack(fmt[w], host, (first - 1) * w + 1)))
      end
      if kname == "narrow_f" then
        T.is(nanbad, 0, ("%s: %s -> %s: NaN inputs give the canonical NaN on the device too"):format(kname, what, dt))
      else
        -- CUDA's double paths keep a NaN's sign, where culua (as the float paths) drops
        -- it (doc/dtypes.md): a NaN all the same
        local got, notnan = outs[i]:copy_to(cuda.host_array(dt, #hx)), 0
        for k = 1, #hx do
          if hx[k] ~= hx[k] and got[k] == got[k] then notnan = notnan + 1 end
        end
        T.is(notnan, 0, ("%s: %s -> %s: NaN inputs give a NaN on the device too (%d of another sign than culua's)")
                        :format(kname, what, dt, nanbad))
      end
    end
    for _, o in ipairs(outs) do o:close() end
  end

  -- widening every pattern: the values agree (NaN with NaN)
  for _, case in ipairs{{"widen16", "uint16", {"float16", "bfloat16"}}, {"widen8", "uint8", {"float8_e4m3", "float8_e5m2"}}} do
    local kname, raw, pair = case[1], case[2], case[3]
    local pats = all_patterns(pair[1])
    local x = cuda.array(raw, #pats):copy_from(cuda.host_array(raw, #pats):copy_from(pats:bytes()))
    local o1, o2 = cuda.array("float32", #pats), cuda.array("float32", #pats)
    mod:kernel(kname):launch({grid = grid, block = block}, x, o1, o2, #pats)
    for j, o in ipairs{o1, o2} do
      local got = o:totable()
      local want = from_bits(pair[j], bits(pats)):totable()
      local bad = 0
      for k = 1, #got do
        local a, b = got[k], want[k]
        if not ((a ~= a and b ~= b) or (a == b and 1 / a == 1 / b)) then bad = bad + 1 end
      end
      T.is(bad, 0, ("%s: every %s pattern widens to the host's value"):format(kname, pair[j]))
    end
    x:close(); o1:close(); o2:close()
  end
  mod:close()

  -- culua's device casts against its host casts: every ordered pair, bit for bit
  local sources = {
    float32 = fx, float64 = cuda.host_array("float64", #dx + #drnd):copy_from(dx:bytes() .. drnd:bytes()),
  }
  for _, dt in ipairs(LOWP) do sources[dt] = all_patterns(dt) end
  local lims = {int8 = {-128, 127}, uint8 = {0, 255}, int16 = {-32768, 32767}, uint16 = {0, 65535},
                int32 = {-2^31, 2^31 - 1}, uint32 = {0, 2^32 - 1}, int64 = {math.mininteger, math.maxinteger},
                uint64 = {math.mininteger, math.maxinteger}}
  for dt, l in pairs(lims) do
    local raw = dt == "uint64" and "int64" or dt
    local h = cuda.host_array(raw, 1 << 16):random(43, l[1], l[2])
    sources[dt] = cuda.host_array(dt, #h):copy_from(h:bytes())
  end
  for _, from in ipairs(DTYPES) do
    local h = sources[from]
    local x = cuda.array(from, #h):copy_from(h)
    local bad = {}
    for _, to in ipairs(DTYPES) do
      local y = x:astype(to)
      local dev, host = y:bytes(), h:astype(to):bytes()
      if dev ~= host then
        local w = host:len() // #h
        local k = first_diff(dev, host, w)
        bad[#bad + 1] = ("%s (element %d = %.17g: device 0x%x, host 0x%x)"):format(to, k, h[k],
          string.unpack(fmt[w], dev, (k - 1) * w + 1), string.unpack(fmt[w], host, (k - 1) * w + 1))
      end
      y:close()
    end
    T.is(#bad, 0, ("astype from %s, %d values, into every dtype: device and host agree bit for bit"):format(from, #h))
    for _, b in ipairs(bad) do T.diag("  into " .. b) end
    x:close()
  end

  -- views, 2-D and pitched arrays, streams
  local m = cuda.array("float32", {3, 5}, {pitched = true}):copy_from(cuda.host_array("float32", {3, 5}):iota(-7, 1.25))
  local mh = m:astype("float16")
  T.is_deeply(mh.shape, {3, 5}, "astype keeps a 2-D shape")
  T.is_deeply(mh:totable(), cuda.host_array("float32", {3, 5}):iota(-7, 1.25):astype("float16"):totable(),
              "astype of a pitched array reads its rows")
  local s = cuda.stream()
  local v = cuda.array("float64", 100):copy_from(cuda.host_array("float64", 100):iota(0, 0.1)):view(11, 10)
  local vb = v:astype("bfloat16", {stream = s})
  s:synchronize()
  local whole = cuda.host_array("float64", 100):iota(0, 0.1):astype("bfloat16"):totable()
  T.is_deeply(vb:totable(), table.move(whole, 11, 20, 1, {}), "astype of a view, on a stream")
  T.is(v:astype("float64"):totable()[1], 1.0, "astype to the same dtype copies")
  T.error_like(function () v:astype("float128") end, "astype: bad argument #1 %(unknown dtype 'float128'", "astype: an unknown dtype")
  T.error_like(function () v:astype("float16", {strem = s}) end, "unknown option 'strem'", "astype: a misspelt option")
  m:close(); mh:close(); vb:close()
  s:close()

  -- scalars reach a kernel as their bits
  do
    local bmod = cuda.compile(BYVALUE):module()
    local o16, o8 = cuda.array("uint16", 2), cuda.array("uint8", 2)
    bmod:kernel("byvalue"):launch({grid = 1, block = 1}, cuda.scalar("float16", 0.1), cuda.scalar("bfloat16", 0.1),
                                  cuda.scalar("float8_e4m3", 0.1), cuda.scalar("float8_e5m2", -0.1), o16, o8)
    T.is_deeply(o16:totable(), {0x2e66, 0x3dcd}, "a kernel reads float16 and bfloat16 scalars")
    T.is_deeply(o8:totable(), {0x1d, 0xae}, "a kernel reads fp8 scalars")
    o16:close(); o8:close(); bmod:close()
  end

  -- device arrays of every new dtype: fill, copy, index, totable, compare, tostring
  for _, dt in ipairs(LOWP) do
    local a = cuda.array(dt, 7):fill(-0.5)
    T.is_deeply(a:totable(), {-0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5}, dt .. ": device fill")
    a:copy_from{1, 2, 3, 0.25, -0.0, NAN, 4}
    local t = a:totable()
    T.ok(t[4] == 0.25 and 1 / t[5] == -INF and t[6] ~= t[6], dt .. ": copy_from a table and back")
    T.like(tostring(a), "^cuda%.array%(" .. dt .. ", 7%)", dt .. ": tostring")
    T.is(cuda.compare(a:view(1, 4), cuda.host_array("float64", 4):copy_from{1, 2, 3, 0.25}), 0, dt .. ": compare")
    a:close()
  end
end, "low-precision conversions against CUDA's intrinsics, device casts")

T.done_testing()
