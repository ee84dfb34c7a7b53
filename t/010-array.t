-- cuda.array: device memory, copies in every direction, fill, views, errors, accounting.
local T = require "culua.tap"
local cuda = require "cuda"
if cuda.device_count() == 0 then
  T.error_like(function () cuda.array("float32", 4) end, "^.-cuda%.array: ", "no GPU: cuda.array raises")
  T.done_testing()
  return
end
local dev = T.need_gpu()

local dtypes = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"}
for _, dt in ipairs(dtypes) do
  for _, n in ipairs{1, 17, 1000, 65537} do
    local h = cuda.host_array(dt, n):random(n, 0, dt:match("int8") and 100 or 1000)
    local x = cuda.array(dt, n):fill(dt:match("float") and -1 or 77)   -- poison
    x:copy_from(h)
    local back = cuda.host_array(dt, n)
    x:copy_to(back)
    T.is(select(1, cuda.compare(back, h)), 0.0, ("%s[%d]: host -> device -> host round trip"):format(dt, n))
  end
  local x = cuda.array(dt, 1001)
  local v = dt:match("int8") and 99 or dt:match("int16") and 12345 or (dt:match("float") and 2.5 or 123456)
  x:fill(v)
  local t = x:totable()
  T.ok(#t == 1001 and t[1] == v and t[1001] == v and t[500] == v, dt .. ": fill " .. v)
end
-- 8-byte fill patterns land in both halves
local w = cuda.array("int64", 3):fill(-2)
T.is_deeply(w:totable(), {-2, -2, -2}, "int64 fill of a negative number")
T.is_deeply(cuda.array("float64", 2):fill(1 / 3):totable(), {1 / 3, 1 / 3}, "float64 fill is exact")

-- fields and text
local x = cuda.array("float32", {3, 5})
T.is(x.dtype, "float32", "dtype")
T.is_deeply(x.shape, {3, 5}, "shape")
T.is(#x, 15, "#x")
T.is(x.nbytes, 60, "nbytes")
T.ok(rawequal(x.device, dev), "device")
T.ok(math.type(x.ptr) == "integer" and x.ptr ~= 0, "ptr")
x:copy_from({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}})
T.is_deeply(x:totable(), {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}}, "2-D table in and out")
T.like(tostring(x), "^cuda%.array%(float32, {3, 5}%): {1%.0, 2%.0, 3%.0, 4%.0, 5%.0, 6%.0, 7%.0, 8%.0, %.%.%.}$", "__tostring")

-- strings
local s = cuda.array("int32", 4):copy_from(string.pack("<i4i4i4i4", 1, -2, 3, -4))
T.is_deeply(s:totable(), {1, -2, 3, -4}, "copy_from a byte string")
T.is(s:bytes(), string.pack("<i4i4i4i4", 1, -2, 3, -4), "bytes() gives them back")

-- device to device, views
local a = cuda.array("float64", 100)
local ha = cuda.host_array("float64", 100):iota()
a:copy_from(ha)
local b = cuda.array("float64", 100):fill(0)
b:copy_from(a)
T.is_deeply(b:totable(), ha:totable(), "device to device copy")
local v = a:view(11, 5)
T.is_deeply(v:totable(), {11, 12, 13, 14, 15}, "view(11, 5)")
v:fill(-1)
T.is_deeply(a:view(10, 7):totable(), {10, -1, -1, -1, -1, -1, 16}, "writing a view writes its parent only there")
T.is(#a:view(91), 10, "view(first) runs to the end")
T.error_like(function () a:view(0, 1) end, "first element 0 outside 1%.%.100", "view before the start")
T.error_like(function () a:view(95, 10) end, "count 10 runs past the end", "view past the end")

-- async copies on a stream with pinned memory
local st = cuda.stream()
local hp = cuda.host_array("float32", 1 << 20, {pinned = true}):random(3)
local d = cuda.array("float32", 1 << 20)
d:copy_from(hp, st)
local hb = cuda.host_array("float32", 1 << 20, {pinned = true}):fill(-7)
d:copy_to(hb, st)
st:synchronize()
T.is(select(1, cuda.compare(hb, hp)), 0.0, "async pinned copies on a stream")
T.is(select(1, cuda.compare(d, hp)), 0.0, "cuda.compare reads device arrays too")

-- bounds and types: nothing truncates silently
T.error_like(function () cuda.array("float32", 4):copy_from({1, 2, 3, 4, 5}) end, "5 values do not fit in 4 elements", "too many values")
T.error_like(function () cuda.array("float32", 4):copy_from(cuda.host_array("float32", 5)) end, "5 elements do not fit in 4", "host array too big")
T.error_like(function () cuda.array("float32", 4):copy_to(cuda.host_array("float32", 3)) end, "4 elements do not fit in 3", "destination too small")
T.error_like(function () cuda.array("float32", 4):copy_from(cuda.array("float64", 4)) end, "dtype mismatch %(float32 and float64%)", "dtype mismatch")
T.error_like(function () cuda.array("int16", 4):copy_from("abc") end, "string of 3 bytes is not a whole number of int16", "odd string")
T.error_like(function () cuda.array("uint8", 4):copy_from({1, 2, 300}) end, "300 out of range for uint8", "value out of range")
T.error_like(function () cuda.array("float32", 4):copy_from(42) end, "copy_from: bad argument #1 %(cuda%.array, cuda%.host_array, string or table expected, got number%)", "bad source")
T.error_like(function () cuda.array("float32", 4):copy_to({}) end, "cuda%.array or cuda%.host_array expected, got table", "bad destination")
T.error_like(function () cuda.array("float32", 4):copy_from({1}, 5) end, "cuda%.stream expected, got number", "bad stream")
T.error_like(function () cuda.array("int32", 2):fill(1.5) end, "1%.5 has no exact int32 representation", "fill with a fraction")
T.error_like(function () cuda.array("float32", -1) end, "element count must be 0 or more", "negative size")

-- out of memory: clear message, after a collection and one retry
local okay, err = pcall(cuda.array, "uint8", 1 << 40)
T.ok(not okay, "1 TiB cannot be allocated")
T.like(err, "cuda%.array: CUDA_ERROR_OUT_OF_MEMORY allocating 1%.00 TiB on device 0", "OOM names the error, size and device")
do   -- unreachable arrays are collected to make room
  -- 4 x 30% of free memory needs the collection (the fourth, or sooner when other
  -- processes on the GPU take some meanwhile, as under prove -j8: the retry covers both)
  local free = dev:memory_info()
  local chunk = math.floor(free * 0.3)
  for _ = 1, 4 do local _ = cuda.array("uint8", chunk) end   -- each loses its last reference
  T.ok(true, "allocating 4 x 30% of free memory succeeds: OOM runs the GC and retries")
end

-- lifetime
local c = cuda.array("float32", 8)
local cv = c:view(2, 3)
c:close()
T.error_like(function () c:fill(1) end, "attempt to use a closed cuda%.array", "use after close")
T.error_like(function () cv:fill(1) end, "closed cuda%.array %(its parent was closed%)", "a view of a closed array")
T.lives_ok(function () c:close(); c:close() end, "closing twice is harmless")
T.is(tostring(c), "cuda.array (closed)", "closed __tostring")
do
  local scoped <close> = cuda.array("float32", 1024)
  T.ok(cuda.memory_in_use() >= 4096, "memory_in_use counts live arrays")
end

a, b, d, v, x, s, w, st, hp, hb = nil
collectgarbage()
collectgarbage()
-- tensor maps for TMA: 128 bytes, checked before the driver sees them
do
  local m = cuda.array("float32", {100, 64})
  local ok, map = pcall(m.tensor_map, m, 32, 32, 128)
  T.ok(ok and #map == 128, "tensor_map: a 128-byte CUtensorMap (encoded on the host)", not ok and map or nil)
  T.error_like(function () cuda.array("float32", 64):tensor_map(1, 16) end, "tensor_map.-2%-D cuda.array expected", "tensor_map: 1-D refused")
  T.error_like(function () m:tensor_map(0, 32) end, "tensor_map.-box rows must be 1%.%.256", "tensor_map: box rows")
  T.error_like(function () m:tensor_map(8, 3) end, "tensor_map.-multiple of 16 bytes", "tensor_map: box row not 16 bytes")
  T.error_like(function () m:tensor_map(8, 64, 128) end, "tensor_map.-fit the swizzle span", "tensor_map: box wider than the swizzle")
  T.error_like(function () m:tensor_map(8, 32, 100) end, "tensor_map.-swizzle must be 0, 32, 64 or 128", "tensor_map: bad swizzle")
  T.error_like(function () cuda.array("float32", {4, 5}):tensor_map(4, 4) end, "tensor_map: the array's base and rows must be 16%-byte aligned",
               "tensor_map: rows of 20 bytes refused")
  -- a region of its own: a block of a larger matrix, from a view or a 2-D array
  local big = cuda.array("float32", 100 * 64)
  local blk = big:view(4 * 64 + 8 + 1, 9 * 64 + 33)   -- 10 x 33 at (4, 8), rows 64 apart
  ok, map = pcall(blk.tensor_map, blk, 8, 32, 128, {rows = 10, cols = 33, stride = 256})
  T.ok(ok and #map == 128, "tensor_map: a 10x33 block of a 1-D view, rows 256 bytes apart", not ok and map or nil)
  ok, map = pcall(m.tensor_map, m, 32, 32, 128, {rows = 50, cols = 60, stride = 256})
  T.ok(ok and #map == 128, "tensor_map: a 50x60 block at a 2-D array's corner", not ok and map or nil)
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 10, cols = 33, stride = 128}) end,
               "tensor_map: a stride of 128 bytes is less than a row of 132 %(33 float32%)", "tensor_map: stride below a row")
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 11, cols = 33, stride = 256}) end,
               "tensor_map: 11x33 float32 with rows 256 bytes apart runs past the array's 2436 bytes", "tensor_map: region past the end")
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 9, cols = 33, stride = 260}) end,
               "tensor_map: the array's base and rows must be 16%-byte aligned", "tensor_map: stride not 16 bytes")
  T.error_like(function () big:view(2, 640):tensor_map(8, 32, 128, {rows = 10, cols = 32, stride = 256}) end,
               "tensor_map: the array's base and rows must be 16%-byte aligned", "tensor_map: a view off 16 bytes")
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 10, cols = 33}) end, "tensor_map: stride must be an integer, got nil",
               "tensor_map: region without a stride")
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 0, cols = 33, stride = 256}) end,
               "tensor_map: rows must be an integer 1%.%.2%^32, got 0", "tensor_map: no rows")
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 2.5, cols = 33, stride = 256}) end,
               "tensor_map: rows must be an integer, got 2%.5", "tensor_map: a fractional row count")
  T.error_like(function () blk:tensor_map(8, 32, 128, "rows") end, "tensor_map: bad argument #%d %(table expected, got string%)",
               "tensor_map: a region that is not a table")
  T.error_like(function () blk:tensor_map(8, 32, 128, {rows = 10, cols = 33, stride = 256, pitch = 1}) end,
               "tensor_map: unknown option 'pitch' %(known: rows, cols, stride%)", "tensor_map: a misspelt key")
  blk, big = nil
end

-- a copy without a stream is complete when it returns, measured with the host clock:
-- 1 GiB device to device cannot take less than 1 GiB / 4 TB/s (2 x 1 GiB moved at the
-- H100's 3.35 TB/s is 0.64 ms); the driver alone returns from it at once
do
  local n = (1 << 30) // 4
  local a, b = cuda.array("float32", n):fill(1.5), cuda.array("float32", n)
  cuda.synchronize()
  local t0 = cuda.clock()
  a:copy_to(b)
  local dt = cuda.clock() - t0
  T.ok(dt >= 2 * (1 << 30) / 4e12, ("1 GiB device-to-device copy took %.3f ms on the host clock (>= %.3f)"):format(dt * 1e3, 2 * (1 << 30) / 4e12 * 1e3))
  T.is(b:view(n, 1):totable()[1], 1.5, "and its last element is there")
  local p = cuda.array("float32", {4096, 1000}, {pitched = true}):fill(2)
  local q = cuda.array("float32", {4096, 1000}, {pitched = true})
  cuda.synchronize()
  t0 = cuda.clock()
  p:copy_to(q)
  T.ok(cuda.clock() - t0 >= 2 * 4096 * 4000 / 4e12, "a pitched device copy too waits for its end")
  if cuda.device_count() > 1 then
    local c = cuda.array("float32", n, {device = 1})
    t0 = cuda.clock()
    a:copy_to(c)
    dt = cuda.clock() - t0
    -- NVLink's one way is at most 900 GB/s: 1 GiB takes over a millisecond
    T.ok(dt >= (1 << 30) / 1e12, ("1 GiB peer copy took %.3f ms on the host clock (at %.0f GB/s)"):format(dt * 1e3, (1 << 30) / dt / 1e9))
    T.is(c:view(n, 1):totable()[1], 1.5, "and arrived whole on device 1")
    c = nil
  else
    T.skip("one GPU: the peer copy needs two", 2)
  end
  a, b, p, q = nil, nil, nil, nil
end

-- zero-length arrays, views and copies are ordinary (NumPy, CuPy): no allocation
-- (ptr 0), no driver call for 0 bytes, catalog calls that return at once
do
  local held = cuda.memory_in_use()
  local z = cuda.array("float32", 0)
  T.is(#z, 0, "cuda.array(dtype, 0) has no elements")
  T.is(z.ptr, 0, "and holds no allocation (ptr 0)")
  T.is(cuda.memory_in_use(), held, "nor any memory in this state's accounting")
  T.is_deeply(z.shape, {0}, "its shape is {0}")
  T.is(z.nbytes, 0, "nbytes 0")
  T.is(tostring(z):match("{}$"), "{}", "tostring shows it empty: " .. tostring(z))
  T.is_deeply(z:totable(), {}, "totable is {}")
  T.is(z:bytes(), "", "bytes is ''")
  T.ok(z:fill(1) == z, "fill does nothing")
  local s = cuda.stream()
  T.ok(z:fill(1, s) == z, "fill on a stream does nothing")
  T.ok(z:copy_from({}) == z and z:copy_from(cuda.host_array("float32", 0)) == z, "copies in of nothing")
  T.ok(z:copy_from(cuda.host_array("float32", 0), s) == z, "an async copy of nothing")
  local hz = cuda.host_array("float32", 0)
  T.ok(z:copy_to(hz) == hz, "a copy out of nothing to a host array")
  local z2 = cuda.array("float32", 0)
  T.ok(z:copy_to(z2) == z2, "and to another empty array")
  local x = cuda.array("float32", 8):fill(3)
  z:copy_to(x)
  T.is(x:totable()[1], 3.0, "a copy of nothing into a larger array changes nothing")
  local e = x:view(9, 0)
  T.is(#e, 0, "x:view(n + 1, 0): an empty view one past the end")
  T.is(#x:view(1, 0), 0, "x:view(1, 0)")
  T.is(#x:view(9), 0, "x:view(n + 1) is empty")
  T.is(select(1, cuda.compare(z, hz)), 0.0, "compare of two empty ones")
  local w = cuda.array("float64", {4, 0})
  T.is_deeply(w.shape, {4, 0}, "a {4, 0} array")
  T.is(#w, 0, "has no elements")
  local p = cuda.array("float32", {4, 0}, {pitched = true})
  T.is(#p, 0, "a pitched {4, 0} array holds nothing")
  p:fill(1)
  T.ok(true, "and fills")
  local hz8 = cuda.host_array("uint8", 0, {pinned = true})
  T.is(#hz8, 0, "a pinned zero-length host array")
  local hp = cuda.host_array("float32", 0, {pinned = true})
  T.ok(z:copy_to(hp, s) == hp, "an async copy of nothing to pinned memory")
  z:close(); z:close()
  T.ok(true, "closing an empty array twice is harmless")
  -- the catalog on nothing
  local cat = cuda.catalog
  local zi = cuda.array("int32", 0)
  T.is(cat.reduce(zi), 0, "reduce of nothing: 0 (an integer for int32)")
  T.is(math.type(cat.reduce(zi)), "integer", "as an integer")
  T.is(cat.reduce(cuda.array("float32", 0)), 0.0, "a float sum of nothing: 0.0")
  T.error_like(function () cat.reduce(zi, {op = "max"}) end, "cuda%.catalog%.reduce: the max of an empty x is undefined", "the max of nothing is refused")
  T.ok(cat.scan(zi) == zi, "scan of nothing returns at once")
  T.ok(cat.scan(zi, cuda.array("int32", 0), {exclusive = true}) ~= nil, "an exclusive scan into another empty array")
  T.is(cat.compact(zi, cuda.array("int32", 0), "x > 0"), 0, "compact of nothing: a count of 0")
  T.is(cat.split(zi, cuda.array("int32", 0), cuda.array("uint8", 0)), 0, "split of nothing: a count of 0")
  local cnt = cuda.array("int64", 1):fill(9)
  cat.compact(zi, cuda.array("int32", 0), "x > 0", {count = cnt})
  T.is(cnt:totable()[1], 0, "compact of nothing writes 0 to count")
  local counts = cuda.array("uint32", 4):fill(5)
  T.is(cat.histogram(cuda.array("uint8", 0), counts), 0, "histogram of nothing leaves out 0")
  T.is_deeply(counts:totable(), {0, 0, 0, 0}, "and zeroes the counts")
  cat.histogram(cuda.array("uint8", 0), counts:fill(5), {accumulate = true})
  T.is_deeply(counts:totable(), {5, 5, 5, 5}, "or leaves them, accumulating")
  local k0 = cuda.array("uint32", 0)
  T.ok(cat.sort(k0) == k0, "sort of nothing returns at once")
  T.ok(cat.sort(k0, cuda.array("float32", 0)) == k0, "with values too")
  T.is(#cat.argsort(k0), 0, "argsort of nothing: an empty array")
  -- matmul with a zero dimension: C (m x n) = alpha*A*B + beta*C
  local C = cuda.array("float32", {3, 2}):fill(2)
  cat.matmul(cuda.array("float32", 0), cuda.array("float32", 0), C, {m = 3, n = 2, k = 0, beta = 0.5})
  T.is_deeply(C:totable(), {{1, 1}, {1, 1}, {1, 1}}, "k = 0: C = beta*C")
  cat.matmul(cuda.array("float32", 0), cuda.array("float32", 0), C, {m = 3, n = 2, k = 0})
  T.is_deeply(C:totable(), {{0, 0}, {0, 0}, {0, 0}}, "k = 0 and beta 0: C = 0")
  -- the same with 2-D shapes of nothing: A {3, 0}, B {0, 2}
  C:fill(2)
  cat.matmul(cuda.array("float32", {3, 0}), cuda.array("float32", {0, 2}), C, {beta = 0.5})
  T.is_deeply(C:totable(), {{1, 1}, {1, 1}, {1, 1}}, "k = 0 from {3, 0} and {0, 2}: C = beta*C")
  local E = cuda.array("float32", {0, 4})
  T.is_deeply(E.shape, {0, 4}, "a {0, 4} device array keeps its shape")
  T.is(E.ptr, 0, "and holds no memory")
  T.is(tostring(E), "cuda.array(float32, {0, 4}): {}", "tostring says the shape")
  T.is_deeply(E:astype("float64").shape, {0, 4}, "astype of {0, 4}: {0, 4}")
  T.ok(cat.matmul(E, cuda.array("float32", {4, 3}), cuda.array("float32", {0, 3})) ~= nil, "m = 0 from {0, 4}: nothing to do")
  T.error_like(function () cuda.texture(E) end, "an array of no elements has no texture", "no texture of nothing")
  local C0 = cuda.array("float64", {4, 0})
  T.ok(cat.matmul(cuda.array("float64", {4, 3}), cuda.array("float64", {3, 0}), C0) == C0, "n = 0: a {4, 0} C, nothing to do")
  T.ok(cat.matmul(cuda.array("float32", 0), cuda.array("float32", {3, 2}), cuda.array("float32", 0), {m = 0, k = 3}) ~= nil,
       "m = 0: nothing to do")
  cuda.synchronize()
  s:close()
  z, z2, zi, w, p, hz, hz8, hp, x, e, cnt, counts, k0, C, C0, E = nil
end

collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
