-- cuda.host_array: host memory, bulk fills, reproducible random data, compare. No GPU needed
-- (pinned memory needs one).
local T = require "culua.tap"
local cuda = require "cuda"

local dtypes = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"}
local sizes = {int8 = 1, uint8 = 1, int16 = 2, uint16 = 2, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8,
               float32 = 4, float64 = 8}
for _, dt in ipairs(dtypes) do
  local h = cuda.host_array(dt, 37)
  T.ok(#h == 37 and h.dtype == dt and h.nbytes == 37 * sizes[dt] and h.size == 37,
       dt .. ": length, dtype, nbytes")
  h:iota()
  T.ok(h[1] == 1 and h[37] == 37, dt .. ": iota 1..37")
  h:fill(5)
  local all = true
  for i = 1, #h do all = all and h[i] == 5 end
  T.ok(all, dt .. ": fill(5) reaches every element")
end

-- ranges are checked, nothing silently truncates
T.error_like(function () cuda.host_array("int8", 2):fill(128) end, "128 out of range for int8", "int8 overflow")
T.error_like(function () cuda.host_array("uint8", 2):fill(-1) end, "%-1 out of range for uint8", "uint8 negative")
T.error_like(function () cuda.host_array("uint32", 2)[1] = 2^32 end, "out of range for uint32", "uint32 overflow")
T.error_like(function () cuda.host_array("int32", 2)[1] = 1.5 end, "1%.5 has no exact int32 representation",
             "fraction into an integer array")
T.error_like(function () cuda.host_array("float32", 2)[1] = "x" end, "number expected for float32, got string",
             "string into a float array")
local h = cuda.host_array("float64", 4)
T.error_like(function () return h[0] end, "index 0 outside 1%.%.4", "index 0")
T.error_like(function () h[5] = 1 end, "index 5 outside 1%.%.4", "index past the end")
T.error_like(function () cuda.host_array("float128", 4) end, "cuda%.host_array: bad argument #1 %(unknown dtype 'float128'; expected one of int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64, float16, bfloat16, float8_e4m3, float8_e5m2%)",
             "unknown dtype")
T.error_like(function () cuda.host_array("float32", -1) end, "cuda%.host_array: bad argument #2 %(element count must be 0 or more, got %-1%)", "negative size")
T.error_like(function () cuda.host_array("float32", {-1, 3}) end, "cuda%.host_array: bad argument #2 %(rows and cols must be integers 0 or more%)", "negative rows")
-- {0, cols} and {rows, 0} are 2-D shapes of nothing, as NumPy's (0, 3) and (2, 0)
do
  local e = cuda.host_array("float32", {0, 3})
  T.is(#e, 0, "{0, 3} holds nothing")
  T.is_deeply(e.shape, {0, 3}, "and keeps its shape")
  T.is(tostring(e), "cuda.host_array(float32, {0, 3}): {}", "tostring says the shape")
  T.is_deeply(e:totable(), {}, "totable: no rows")
  T.is_deeply(e:astype("float16").shape, {0, 3}, "astype keeps the shape")
  local f = cuda.host_array("int32", {2, 0})
  T.is_deeply(f:totable(), {{}, {}}, "{2, 0}: two empty rows")
  T.is_deeply(cuda.host_array("uint8", {0, 0}).shape, {0, 0}, "{0, 0}")
  local C = cuda.host_array("float64", {2, 2}):fill(5)
  cuda.catalog.reference.matmul(cuda.host_array("float64", {2, 0}), cuda.host_array("float64", {0, 2}), C)
  T.is_deeply(C:totable(), {{0, 0}, {0, 0}}, "reference matmul with k = 0: C = 0")
end

-- zero-length host arrays are ordinary, as in NumPy
do
  local z = cuda.host_array("float32", 0)
  T.is(#z, 0, "a zero-length host array")
  T.is(z.nbytes, 0, "holds no bytes")
  T.is_deeply(z.shape, {0}, "its shape is {0}")
  T.is(tostring(z), "cuda.host_array(float32, 0): {}", "tostring shows it empty")
  T.is_deeply(z:totable(), {}, "totable is {}")
  T.ok(z:fill(1) == z and z:iota() == z and z:random(1) == z, "fill, iota and random do nothing")
  T.ok(z:copy_from({}) == z, "copy_from({}) fits")
  T.ok(z:copy_from(cuda.host_array("float32", 0)) == z, "copy_from another empty one")
  T.ok(z:copy_from("") == z, "copy_from an empty string")
  T.is(select("#", cuda.compare(z, cuda.host_array("float32", 0))), 3, "compare of two empty ones")
  T.is(select(1, cuda.compare(z, cuda.host_array("float32", 0))), 0.0, "differs by nothing")
  T.error_like(function () return z[1] end, "index 1 outside 1%.%.0", "z[1] is past the end")
  local w = cuda.host_array("int32", {3, 0})
  T.is_deeply(w.shape, {3, 0}, "a {3, 0} host array")
  T.is(#w, 0, "has no elements")
  T.is_deeply(w:totable(), {{}, {}, {}}, "totable: three empty rows")
  T.is(#cuda.host_array("uint8", 0, {pinned = false}), 0, "an empty pageable one by option")
  z:close(); z:close()
  T.ok(true, "closing an empty one twice is harmless")
  local ref = cuda.catalog.reference
  local e = cuda.host_array("uint32", 0)
  T.ok(ref.sort(e) == nil or true, "reference.sort of nothing")
  T.is(#ref.argsort(e), 0, "reference.argsort of nothing is empty")
  T.is(ref.histogram(e, cuda.host_array("uint32", 4):fill(7)), 0, "reference.histogram of nothing leaves out 0")
  ref.scan(cuda.host_array("int32", 0))
  T.ok(true, "reference.scan of nothing")
end
T.error_like(function () cuda.host_array("float32", {2}) end, "shape must be {rows, cols}", "bad shape")
T.error_like(function () cuda.host_array("float64", 2^62) end, "shape too large", "absurd size")

-- 2-D
local m = cuda.host_array("int32", {3, 4}):iota(0)
T.is_deeply(m.shape, {3, 4}, "2-D shape")
T.is_deeply(m:totable(), {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}, "2-D totable gives rows")
m:copy_from({{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}})
T.is(m[9], 3, "2-D copy_from rows")
T.error_like(function () m:copy_from({{1, 2}, {3}}) end, "row 1 has 2 values, expected 4",
             "ragged rows are refused")

-- copies between host buffers
local a = cuda.host_array("float32", 5):copy_from({1.5, 2.5, 3.5})
T.is_deeply(a:totable(), {1.5, 2.5, 3.5, 0.0, 0.0}, "copy_from a table; new arrays start zeroed")
local b = cuda.host_array("float32", 5):copy_from(a)
T.is(b[3], 3.5, "copy_from another host array")
T.is(cuda.host_array("float32", 5):copy_from(a:bytes())[2], 2.5, "copy_from bytes")
T.error_like(function () cuda.host_array("float32", 2):copy_from({1, 2, 3}) end, "3 values do not fit in 2 elements",
             "too many values")
T.error_like(function () cuda.host_array("float64", 5):copy_from(a) end, "dtype mismatch %(float64 and float32%)",
             "copies do not convert")
T.error_like(function () a:copy_from("abc") end, "string of 3 bytes does not fit", "odd byte count")

-- random: reproducible, in range, different per seed
local r1 = cuda.host_array("float64", 1000):random(7)
local r2 = cuda.host_array("float64", 1000):random(7)
local r3 = cuda.host_array("float64", 1000):random(8)
T.is_deeply(r1:totable(), r2:totable(), "same seed, same numbers")
T.ok(r1[1] ~= r3[1], "another seed, other numbers")
local lo, hi, sum = math.huge, -math.huge, 0
for i = 1, #r1 do lo = math.min(lo, r1[i]); hi = math.max(hi, r1[i]); sum = sum + r1[i] end
T.ok(lo >= 0 and hi < 1 and math.abs(sum / #r1 - 0.5) < 0.05, ("uniform [0,1): min %.3f max %.3f mean %.3f"):format(lo, hi, sum / #r1))
local ri = cuda.host_array("int16", 5000):random(1, -3, 3)
local seen = {}
for i = 1, #ri do seen[ri[i]] = true end
local all = true
for v = -3, 3 do all = all and seen[v] end
T.ok(all and not seen[4] and not seen[-4], "integers cover [lo, hi] inclusive and nothing else")
T.error_like(function () cuda.host_array("uint8", 3):random(1, 0, 300) end, "300 out of range for uint8", "random range beyond dtype")

-- compare
local x = cuda.host_array("float64", 3):copy_from({1, 2, 4})
local y = cuda.host_array("float32", 3):copy_from({1, 2.5, 4})
local maxabs, maxrel, normrel = cuda.compare(y, x)
T.near(maxabs, 0.5, 1e-12, "max abs error")
T.near(maxrel, 0.25, 1e-12, "max rel error")
T.near(normrel, 0.5 / math.sqrt(21), 1e-12, "norm-wise relative error")
local z = cuda.host_array("float32", 3):copy_from({1, 0/0, 4})
T.is(cuda.compare(z, x), math.huge, "a NaN the reference lacks is infinitely wrong")
T.error_like(function () cuda.compare(x, cuda.host_array("float64", 4)) end, "sizes differ %(3 and 4 elements%)", "size mismatch")
T.error_like(function () cuda.compare(x, {}) end, "cuda.host_array or cuda.array expected, got table", "not an array")

-- text and lifetime
T.like(tostring(cuda.host_array("int32", 20):iota()), "^cuda%.host_array%(int32, 20%): {1, 2, 3, 4, 5, 6, 7, 8, %.%.%.}$", "__tostring")
do
  local c <close> = cuda.host_array("uint8", 4)
  c:close()
  T.is(tostring(c), "cuda.host_array (closed)", "closed __tostring")
  T.error_like(function () return c[1] end, "attempt to use a closed cuda%.host_array", "use after close raises")
  T.lives_ok(function () c:close() end, "closing twice is harmless")
end

if cuda.device_count() > 0 then
  local p = cuda.host_array("float32", 1024, {pinned = true}):iota()
  T.ok(p.pinned and p[1024] == 1024, "pinned host memory")
  p:close()
  T.error_like(function () return p[1] end, "closed", "closed pinned array")
else
  T.error_like(function () cuda.host_array("float32", 4, {pinned = true}) end, "cuda%.host_array: no CUDA",
               "pinned memory needs a GPU")
end
-- one rule for values a dtype cannot hold: they raise; NaN and the infinities are float values
local f = cuda.host_array("float32", 3)
f[1] = 1 / 0; f[2] = -1 / 0; f[3] = 0 / 0
T.ok(f[1] == math.huge and f[2] == -math.huge and f[3] ~= f[3], "inf, -inf and NaN go into float32 as they are")
f[1] = 3.4028235e38
T.ok(f[1] > 3.4e38, "float32's largest value fits")
T.error_like(function () f[1] = 1e39 end, "1e%+39 overflows float32", "a finite value past float32 raises instead of becoming inf")
T.is(cuda.host_array("float64", 1):fill(1e300)[1], 1e300, "float64 holds it")
T.done_testing()
