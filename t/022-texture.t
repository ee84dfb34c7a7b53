-- cuda.texture over 1-D and 2-D arrays, and the pitched arrays 2-D textures read.
local T = require "culua.tap"
local cuda = require "cuda"

-- {------ argument checks: options are read before the array, so these need no GPU
local bad = {
  {{filter = "cubic"}, "option filter must be 'point' or 'linear', not 'cubic'"},
  {{address = "repeat"}, "option address must be 'clamp', 'wrap', 'border' or 'mirror', not 'repeat'"},
  {{read = "float"}, "option read must be 'element' or 'normalized_float', not 'float'"},
  {{filter = 1}, "option filter must be 'point' or 'linear', not '1'"},
  {{adress = "wrap"}, "unknown option 'adress' (known: filter, address, normalized, read, border)"},
  {{address = "wrap"}, "address 'wrap' needs normalized = true"},
  {{address = "mirror"}, "address 'mirror' needs normalized = true"},
  {{address = "clamp", border = {0, 0, 0, 0}}, "option border needs address = 'border', not 'clamp'"},
  {{address = "border", border = {1, 2, 3}}, "option border must be a table of 4 numbers {r, g, b, a}"},
  {{address = "border", border = {1, 2, "x", 4}}, "border[3] must be a number"},
}
for _, c in ipairs(bad) do
  T.error_has(function () cuda.texture(42, c[1]) end, "cuda.texture: " .. c[2], "cuda.texture refuses: " .. c[2])
end
T.error_like(function () cuda.texture(42) end, "cuda%.texture: bad argument #1 %(cuda%.array expected, got number%)",
             "cuda.texture needs a cuda.array")
T.error_like(function () cuda.texture(42, "point") end, "cuda%.texture: bad argument #2 %(table expected",
             "options must be a table")
T.error_has(function () cuda.array("uint8", 10, {pitched = true}) end,
            "(a pitched array needs a {rows, cols} shape)", "pitched 1-D refused")
-- }------

-- the kernels compile without a GPU; a texture object is a u64 parameter
local tk_prog = cuda.compile([[
extern "C" __global__ void fetch1d(cudaTextureObject_t t, int n, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(t, i);
}
extern "C" __global__ void fetch1d_int(cudaTextureObject_t t, int n, int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int>(t, i);
}
// seed 003's histogram reads its image through tex2D<unsigned char>
extern "C" __global__ void hist2d(cudaTextureObject_t img, int w, int h, unsigned char *copy,
                                  unsigned int *bins) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    unsigned char v = tex2D<unsigned char>(img, x + 0.5f, y + 0.5f);
    copy[y * w + x] = v;
    atomicAdd(&bins[v], 1u);
  }
}
extern "C" __global__ void sample2d(cudaTextureObject_t t, int n, const float *u, const float *v,
                                    float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(t, u[i], v[i]);
}
]])
T.is_deeply(cuda.signature(tk_prog.ptx, "hist2d"), {"u64", "u32", "u32", "u64", "u64"},
            "cudaTextureObject_t is a u64 parameter")

if cuda.device_count() == 0 then
  T.done_testing()
  return
end
T.need_gpu()

-- {------ pitched arrays: every array method
do
  for _, dt in ipairs{"uint8", "int16", "float32", "float64", "int64"} do
    for _, shape in ipairs{{1, 1}, {3, 5}, {67, 131}, {2, 1000}} do
      local r, c = shape[1], shape[2]
      local name = ("%s %dx%d pitched"):format(dt, r, c)
      local x = cuda.array(dt, {r, c}, {pitched = true})
      local es = x.nbytes // (r * c)
      T.ok(x.pitched and x.pitch >= c * es and x.pitch % es == 0, name .. ": pitch " .. x.pitch)
      T.is(#x, r * c, name .. ": #x counts elements, not padding")
      x:fill(dt:match("int8") and 99 or -7)
      local t = x:totable()
      T.ok(#t == r and #t[r] == c and t[r][c] == (dt:match("int8") and 99 or -7), name .. ": fill, totable")
      local h = cuda.host_array(dt, r * c):random(r * c, 0, 100)
      x:copy_from(h)
      local back = cuda.host_array(dt, r * c)
      x:copy_to(back)
      T.is(cuda.compare(back, h), 0.0, name .. ": host round trip")
      T.is(cuda.compare(x, h), 0.0, name .. ": cuda.compare reads the rows")
      T.is(x:bytes(), back:bytes(), name .. ": bytes() leaves the padding out")
      -- to and from packed device arrays, 1-D and 2-D, with a stream
      local flat = cuda.array(dt, r * c)
      flat:copy_from(x)
      T.is(cuda.compare(flat, h), 0.0, name .. ": to a packed 1-D array")
      local y = cuda.array(dt, {r, c}, {pitched = true}):fill(0)
      local s = cuda.stream()
      y:copy_from(flat, s)
      s:synchronize()
      T.is(cuda.compare(y, h), 0.0, name .. ": packed -> pitched on a stream")
      local z = cuda.array(dt, {r, c}, {pitched = true}):fill(0)
      z:copy_from(y)
      T.is(cuda.compare(z, h), 0.0, name .. ": pitched -> pitched")
    end
  end
  -- a partial copy ends mid-row
  local x = cuda.array("int32", {4, 7}, {pitched = true}):fill(-1)
  x:copy_from({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
  local t = x:totable()
  T.is_deeply({t[1][7], t[2][1], t[2][3], t[2][4], t[4][7]}, {7, 8, 10, -1, -1}, "a partial copy ends mid-row")
  x:copy_from({{1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 70}})
  T.is(x:totable()[4][7], 70, "copy_from a table of rows")
  x:copy_from(string.pack("<i4i4", 11, 12))
  T.is_deeply(x:totable()[1], {11, 12, 3, 4, 5, 6, 7}, "copy_from a string")
  T.is(tostring(x), "cuda.array(int32, {4, 7}): {11, 12, 3, 4, 5, 6, 7, 1, ...}", "__tostring's preview crosses rows")
  T.error_has(function () x:view(1, 3) end, "view: the rows of a pitched array are not contiguous", "view refused")
  local other = cuda.array("int32", {4, 8}, {pitched = true})
  T.error_has(function () other:copy_from(x) end, "copy_from: pitched arrays of 8 and 7 columns", "widths must match")
  T.is(cuda.array("float32", {3, 5}).pitch, 20, "a packed 2-D array's pitch is its row bytes")
  T.is(cuda.array("float32", {3, 5}).pitched, false, "pitched is false for a packed array")
  T.is(cuda.array("float32", 5).pitch, nil, "a 1-D array has no pitch")
end
-- }------

local tk = tk_prog:module()
local fetch1d, fetch1d_int = tk:kernel("fetch1d"), tk:kernel("fetch1d_int")
local hist2d, sample2d = tk:kernel("hist2d"), tk:kernel("sample2d")

local function blocks(n, b) return (n + b - 1) // b end

-- {------ 1-D: tex1Dfetch over linear memory; past the end reads zero
for _, n in ipairs{1, 255, 1000, 65537} do
  local h = cuda.host_array("float32", n):random(n, -10, 10)
  local a = cuda.array("float32", n):copy_from(h)
  local t = cuda.texture(a)
  local out = cuda.array("float32", n + 5):fill(0 / 0)
  fetch1d:launch({grid = blocks(n + 5, 256), block = 256}, t, n + 5, out)
  T.is(cuda.compare(out:view(1, n), h), 0.0, "tex1Dfetch<float> over " .. n .. " elements")
  T.is_deeply(out:view(n + 1, 5):totable(), {0, 0, 0, 0, 0}, "tex1Dfetch past the end reads 0 (n = " .. n .. ")")
end
do
  local a = cuda.array("int32", 100):copy_from((function () local v = {} for i = 1, 100 do v[i] = i * 1000 - 7 end return v end)())
  local out = cuda.array("int32", 100):fill(-1)
  fetch1d_int:launch({grid = 1, block = 128}, cuda.texture(a), 100, out)
  T.is(out:totable()[77], 76993, "tex1Dfetch<int> over int32 (read = element)")
  T.error_has(function () cuda.texture(a, {filter = "linear"}) end, "a 1-D texture reads linear memory by index",
              "1-D: no linear filtering")
  T.error_has(function () cuda.texture(cuda.array("float64", 8)) end,
              "float64 arrays have no texture format (allowed: int8, uint8, int16, uint16, int32, uint32, float32)",
              "float64 refused, the allowed dtypes listed")
  T.error_has(function () cuda.texture(cuda.array("uint64", 8)) end, "uint64 arrays have no texture format", "uint64 refused")
  T.error_has(function () cuda.texture(a, {read = "normalized_float"}) end,
              "read = 'normalized_float' needs an 8- or 16-bit integer array, not int32", "normalized_float on int32 refused")
  T.error_has(function () cuda.texture(cuda.array("uint8", {4, 512}), {filter = "linear"}) end,
              "filter = 'linear' needs read = 'normalized_float' or a float32 array", "linear filtering of elements refused")
  T.error_has(function () cuda.texture(a:view(2, 10)) end, "is not aligned to", "a misaligned view refused")
  T.error_like(function () fetch1d:launch({grid = 1, block = 1}, cuda.texture(a), 1.5, out) end,
               "launch: argument 2", "the other arguments are still checked")
  T.error_has(function () fetch1d:launch({grid = 1, block = 1}, cuda.texture(a), cuda.texture(a), out) end,
              "launch: argument 2 is a cuda.texture but parameter 2 is u32, not a cudaTextureObject_t (u64)",
              "a texture for a 32-bit parameter is refused")
end
-- }------

-- {------ 2-D: tex2D<unsigned char> over a pitched uint8 image, as seed 003's histogram
for _, shape in ipairs{{1, 1}, {67, 131}, {480, 640}, {33, 1001}} do
  local hgt, wid = shape[1], shape[2]
  local h = cuda.host_array("uint8", hgt * wid):random(hgt * wid, 0, 255)
  local img = cuda.array("uint8", {hgt, wid}, {pitched = true}):copy_from(h)
  local t = cuda.texture(img, {filter = "point", address = "clamp", read = "element"})
  local copy = cuda.array("uint8", hgt * wid):fill(0)
  local bins = cuda.array("uint32", 256):fill(0)
  hist2d:launch({grid = {blocks(wid, 32), blocks(hgt, 8)}, block = {32, 8}}, t, wid, hgt, copy, bins)
  T.is(cuda.compare(copy, h), 0.0, ("tex2D<unsigned char> reads a %dx%d pitched image"):format(hgt, wid))
  local ref = {}
  for i = 0, 255 do ref[i + 1] = 0 end
  for i = 1, hgt * wid do ref[h[i] + 1] = ref[h[i] + 1] + 1 end
  T.is_deeply(bins:totable(), ref, ("histogram of the %dx%d image through the texture"):format(hgt, wid))
end
-- a packed 2-D array works when its rows fall on the pitch alignment, else the error says what to do
do
  local ok = cuda.array("uint8", {4, 512})
  T.lives_ok(function () cuda.texture(ok):close() end, "packed uint8 4x512 (rows of 512 bytes) is usable")
  T.error_has(function () cuda.texture(cuda.array("uint8", {4, 131})) end, "make the array with {pitched = true}",
              "packed rows of 131 bytes refused, pitched suggested")
end
-- }------

-- {------ linear filtering on float32 at half-texel coordinates: the mean of two neighbours
do
  local rows, cols = 5, 33
  local h = cuda.host_array("float32", rows * cols):random(7, -100, 100)
  local a = cuda.array("float32", {rows, cols}, {pitched = true}):copy_from(h)
  local t = cuda.texture(a, {filter = "linear", address = "clamp"})
  local us, vs, want = {}, {}, {}
  for i = 0, rows - 1 do
    for j = 0, cols - 2 do
      -- texel centres sit at j + 0.5: x = j + 1 is halfway between j and j + 1
      us[#us + 1], vs[#vs + 1] = j + 1.0, i + 0.5
      want[#want + 1] = (h[i * cols + j + 1] + h[i * cols + j + 2]) / 2
    end
  end
  local n = #us
  local u, v = cuda.array("float32", n):copy_from(us), cuda.array("float32", n):copy_from(vs)
  local out = cuda.array("float32", n):fill(0 / 0)
  sample2d:launch({grid = blocks(n, 128), block = 128}, t, n, u, v, out)
  local got, worst = out:totable(), 0
  for i = 1, n do worst = math.max(worst, math.abs(got[i] - want[i])) end
  T.ok(worst <= 1e-4, ("linear filtering halfway between texels (worst error %g)"):format(worst))
  -- uint8 read as normalized floats interpolates too
  local b = cuda.array("uint8", {2, 64}, {pitched = true}):copy_from((function ()
    local r = {} for k = 1, 128 do r[k] = (k - 1) % 2 == 0 and 0 or 255 end return r end)())
  local tb = cuda.texture(b, {filter = "linear", read = "normalized_float"})
  local o1 = cuda.array("float32", 1)
  sample2d:launch({grid = 1, block = 1}, tb, 1, cuda.array("float32", 1):copy_from({1.0}),
                  cuda.array("float32", 1):copy_from({0.5}), o1)
  T.near(o1:totable()[1], 0.5, 0.01, "uint8 as normalized_float, linear: halfway between 0 and 255 is 0.5")
end
-- }------

-- {------ address modes at out-of-range coordinates (normalized, point sampling at texel centres)
do
  local W = 8
  local vals = {}
  for r = 0, 1 do for c = 0, W - 1 do vals[#vals + 1] = 10 * r + c + 1 end end
  local a = cuda.array("float32", {2, W}, {pitched = true}):copy_from(vals)
  local cols = {-3, -1, 3, 8, 10}
  local us, vs = {}, {}
  for k, c in ipairs(cols) do us[k], vs[k] = (c + 0.5) / W, 0.25 end   -- row 0 of 2
  local u, v = cuda.array("float32", #cols):copy_from(us), cuda.array("float32", #cols):copy_from(vs)
  local expect = {
    clamp = {1, 1, 4, 8, 8},
    wrap = {6, 8, 4, 1, 3},
    mirror = {3, 1, 4, 8, 6},
    border = {-1, -1, 4, -1, -1},
  }
  for _, mode in ipairs{"clamp", "wrap", "mirror", "border"} do
    local t <close> = cuda.texture(a, {address = mode, normalized = true,
                                       border = mode == "border" and {-1, 0, 0, 0} or nil})
    local out = cuda.array("float32", #cols):fill(0 / 0)
    sample2d:launch({grid = 1, block = 32}, t, #cols, u, v, out)
    T.is_deeply(out:totable(), expect[mode], "address '" .. mode .. "' at columns -3, -1, 3, 8, 10")
  end
end
-- }------

-- {------ lifetime: the texture keeps its array; closing
do
  local n = 1000
  local h = cuda.host_array("float32", n):random(3, 0, 1)
  local a = cuda.array("float32", n):copy_from(h)
  local t = cuda.texture(a)
  T.ok(rawequal(t.array, a), "t.array is the array")
  T.ok(math.type(t.handle) == "integer" and t.handle ~= 0, "t.handle is an integer")
  T.is(cuda.type(t), "cuda.texture", "cuda.type")
  T.like(tostring(t), "^cuda%.texture%(float32 1000, device 0%)$", "__tostring")
  a = nil
  collectgarbage(); collectgarbage()
  local out = cuda.array("float32", n):fill(-1)
  fetch1d:launch({grid = blocks(n, 256), block = 256}, t, n, out)
  T.is(cuda.compare(out, h), 0.0, "the array's last reference dropped: the texture still reads it")
  t:close()
  t:close()
  T.is(tostring(t), "cuda.texture (closed)", "closed __tostring")
  T.error_has(function () return t.handle end, "attempt to use a closed cuda.texture", "a closed texture's fields raise")
  T.error_has(function () fetch1d:launch({grid = 1, block = 1}, t, 1, out) end, "attempt to use a closed cuda.texture",
              "a closed texture is refused by launch")
  local b = cuda.array("float32", 16)
  local tb = cuda.texture(b)
  b:close()
  T.error_has(function () fetch1d:launch({grid = 1, block = 1}, tb, 1, out) end, "attempt to use a closed cuda.array",
              "a texture whose array was closed explicitly is refused")
  tb:close()
  local t2d = cuda.texture(cuda.array("uint8", {3, 7}, {pitched = true}), {filter = "point", address = "border"})
  T.like(tostring(t2d), "^cuda%.texture%(uint8 3x7, point, border, device 0%)$", "2-D __tostring")
  do local scoped <close> = t2d end
  T.is(tostring(t2d), "cuda.texture (closed)", "<close> closes it")
end
-- }------

collectgarbage()
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
