-- convolution.lua: seed 003's 2-D convolution in three steps.
--
--   v1: image and filter read from global memory; pixels beyond the border
--       are clamped to the nearest one inside (as the seed's v1 does);
--   v2: the filter in __constant__ memory (written here through mod:global,
--       the seed's cudaMemcpyToSymbol), broadcast to a warp reading one
--       coefficient; pixels beyond the border count as zero (the seed's v2);
--   v3: v2 plus a BLOCK_DIM x BLOCK_DIM block's input tile, with a halo of
--       filter_size/2 pixels on each side, staged once in shared memory.
--
-- The seed's problem: a 2048 x 2048 image and a normalised 9 x 9 Gaussian
-- filter (sigma 2). Each kernel is checked against a CPU convolution in Lua
-- with its own border rule: every pixel of a small odd-sized image, and
-- sampled pixels (corners and edges included) of the timed one. Times are
-- medians of repeats (the seed timed a single run), with the speed-up of each
-- step; the seed's V100 figures are printed beside ours.
--
--   culua examples/convolution.lua [N | ROWSxCOLS [FILTER]]   (default 2048 and 9)

local cuda = require "cuda"

local rows, cols, fsize = 2048, 2048, 9
if arg[1] then
  local r, c = arg[1]:match("^(%d+)x(%d+)$")
  if r then rows, cols = math.tointeger(tonumber(r)), math.tointeger(tonumber(c))
  else rows = math.tointeger(tonumber(arg[1])); cols = rows end
  if not rows or rows < 1 or cols < 1 then error(("convolution.lua: size must be N or ROWSxCOLS, got '%s'"):format(arg[1]), 0) end
end
if arg[2] then fsize = math.tointeger(tonumber(arg[2])) end
local MAX_FILTER = 64
if not fsize or fsize < 1 or fsize % 2 == 0 or fsize >= MAX_FILTER then
  error(("convolution.lua: the filter size must be odd, 1..%d, got '%s'"):format(MAX_FILTER - 1, tostring(arg[2])), 0)
end
local BLOCK = 16

local source = [[
#ifndef BLOCK_DIM
#define BLOCK_DIM 16
#endif
#define MAX_FILTER_LENGTH 64
__constant__ float c_filter[MAX_FILTER_LENGTH * MAX_FILTER_LENGTH];

// one thread an output pixel; filter_size is odd, the filter centred on the pixel
extern "C" __global__ void convolution_kernel_v1(float *d_output, const float *d_input, const float *d_filter,
                                                 int num_row, int num_col, int filter_size)
{
  int idx_x = blockDim.x * blockIdx.x + threadIdx.x;
  int idx_y = blockDim.y * blockIdx.y + threadIdx.y;
  if (idx_x >= num_col || idx_y >= num_row) return;
  int half = filter_size / 2;
  float result = 0.f;
  for (int filter_row = -half; filter_row <= half; ++filter_row)
    for (int filter_col = -half; filter_col <= half; ++filter_col) {
      // clamp to the border of the source
      int image_row = min(max(idx_y + filter_row, 0), num_row - 1);
      int image_col = min(max(idx_x + filter_col, 0), num_col - 1);
      result += d_input[(size_t)image_row * num_col + image_col] *
                d_filter[(filter_row + half) * filter_size + filter_col + half];
    }
  d_output[(size_t)idx_y * num_col + idx_x] = result;
}

// the filter from constant memory; outside the image is zero
extern "C" __global__ void convolution_kernel_v2(float *d_output, const float *d_input, const float *d_filter,
                                                 int num_row, int num_col, int filter_size)
{
  int idx_x = blockDim.x * blockIdx.x + threadIdx.x;
  int idx_y = blockDim.y * blockIdx.y + threadIdx.y;
  if (idx_x >= num_col || idx_y >= num_row) return;
  int half = filter_size / 2;
  float result = 0.f;
  for (int filter_row = -half; filter_row <= half; ++filter_row)
    for (int filter_col = -half; filter_col <= half; ++filter_col) {
      int image_row = idx_y + filter_row;
      int image_col = idx_x + filter_col;
      float image_value = (image_row >= 0 && image_row < num_row && image_col >= 0 && image_col < num_col)
                          ? d_input[(size_t)image_row * num_col + image_col] : 0.f;
      result += image_value * c_filter[(filter_row + half) * filter_size + filter_col + half];
    }
  d_output[(size_t)idx_y * num_col + idx_x] = result;
}

// v2 with the block's input, and a halo of half the filter around it, in
// shared memory: (BLOCK_DIM + 2*half)^2 floats of dynamic shared memory, loaded
// by the whole block in BLOCK_DIM x BLOCK_DIM strides. Blocks are
// BLOCK_DIM x BLOCK_DIM threads; threads beyond the image help load, pass the
// barrier, then stop.
extern "C" __global__ void convolution_kernel_v3(float *d_output, const float *d_input, const float *d_filter,
                                                 int num_row, int num_col, int filter_size)
{
  extern __shared__ float s_input[];
  int pad_size = filter_size / 2;
  int tile_size = BLOCK_DIM + 2 * pad_size;
  int row0 = blockIdx.y * BLOCK_DIM - pad_size;   // the tile's first pixel in the image
  int col0 = blockIdx.x * BLOCK_DIM - pad_size;
  for (int r = threadIdx.y; r < tile_size; r += BLOCK_DIM)
    for (int c = threadIdx.x; c < tile_size; c += BLOCK_DIM) {
      int image_row = row0 + r, image_col = col0 + c;
      s_input[r * tile_size + c] = (image_row >= 0 && image_row < num_row && image_col >= 0 && image_col < num_col)
                                   ? d_input[(size_t)image_row * num_col + image_col] : 0.f;
    }
  __syncthreads();
  int idx_x = blockIdx.x * BLOCK_DIM + threadIdx.x;
  int idx_y = blockIdx.y * BLOCK_DIM + threadIdx.y;
  if (idx_x >= num_col || idx_y >= num_row) return;
  float result = 0.f;
  for (int filter_row = 0; filter_row < filter_size; ++filter_row)
    for (int filter_col = 0; filter_col < filter_size; ++filter_col)
      result += s_input[(threadIdx.y + filter_row) * tile_size + threadIdx.x + filter_col] *
                c_filter[filter_row * filter_size + filter_col];
  d_output[(size_t)idx_y * num_col + idx_x] = result;
}
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernels
local prog = cuda.compile(source, {name = "convolution.cu", options = {"-DBLOCK_DIM=" .. BLOCK}})
require("culua.bench").need_devices()

local dev = cuda.device()
local mod = prog:module()
local kernels = {mod:kernel("convolution_kernel_v1"), mod:kernel("convolution_kernel_v2"), mod:kernel("convolution_kernel_v3")}
local c_filter = mod:global("c_filter", "float32")
local modes = {"clamp", "zero", "zero"}

-- the seed's filter: a Gaussian of sigma 2, normalised to sum 1
local function gaussian(n)
  local h, sum, half = cuda.host_array("float32", n * n), 0, n // 2
  for r = -half, half do
    for c = -half, half do
      local v = math.exp(-(r * r + c * c) / (2 * 2.0 * 2.0))
      h[(r + half) * n + c + half + 1] = v
      sum = sum + v
    end
  end
  for i = 1, n * n do h[i] = h[i] / sum end
  return h
end

-- {====================================================== the CPU convolution
-- pixel (r, c) (0-based) of the convolution of img (a Lua array of floats,
-- row-major) with the filter; returns the value and the sum of the terms'
-- magnitudes (the scale of float32 rounding)
local function cpu_pixel(img, nr, nc, filt, n, mode, r, c)
  local half, acc, mag = n // 2, 0.0, 0.0
  for fr = -half, half do
    for fc = -half, half do
      local y, x = r + fr, c + fc
      local v
      if mode == "clamp" then
        y = math.min(math.max(y, 0), nr - 1)
        x = math.min(math.max(x, 0), nc - 1)
        v = img[y * nc + x + 1]
      else
        v = (y >= 0 and y < nr and x >= 0 and x < nc) and img[y * nc + x + 1] or 0.0
      end
      local t = v * filt[(fr + half) * n + fc + half + 1]
      acc, mag = acc + t, mag + math.abs(t)
    end
  end
  return acc, mag
end

local function floats(h)
  local s, n, t = h:bytes(), #h, {}
  for first = 0, n - 1, 4096 do
    local k = math.min(4096, n - first)
    local v = {string.unpack("<" .. ("f"):rep(k), s, 1 + 4 * first)}
    for i = 1, k do t[first + i] = v[i] end
  end
  return t
end
-- }======================================================

-- one image on the GPU, with the filter in global and constant memory
local function setup(nr, nc, seed)
  local h = cuda.host_array("float32", {nr, nc}):random(seed, 0, 1)
  local hf = gaussian(fsize)
  local d = {rows = nr, cols = nc, h = h, img = floats(h), filt = floats(hf)}
  d.input = cuda.array("float32", {nr, nc}):copy_from(h)
  d.output = cuda.array("float32", {nr, nc})
  d.filter = cuda.array("float32", fsize * fsize):copy_from(hf)
  c_filter:view(1, fsize * fsize):copy_from(hf)
  return d
end

local tile = BLOCK + 2 * (fsize // 2)
local function launch(v, d)
  local cfg = {grid = {(d.cols + BLOCK - 1) // BLOCK, (d.rows + BLOCK - 1) // BLOCK}, block = {BLOCK, BLOCK},
               shared = v == 3 and tile * tile * 4 or 0}
  kernels[v]:launch(cfg, d.output, d.input, d.filter, d.rows, d.cols, fsize)
end

-- run kernel v on d and compare the pixels listed (all when nil) with the CPU
local function check(v, d, pixels)
  d.output:fill(0 / 0)
  launch(v, d)
  local got = cuda.host_array("float32", {d.rows, d.cols})
  d.output:copy_to(got)
  local bad, worst, count = 0, 0, 0
  local function one(r, c)
    local want, mag = cpu_pixel(d.img, d.rows, d.cols, d.filt, fsize, modes[v], r, c)
    local g = got[r * d.cols + c + 1]
    local err = math.abs(g - want) / math.max(mag, 1e-30)
    if not (err <= 1e-5) then bad = bad + 1 end
    worst = (err == err) and math.max(worst, err) or math.huge
    count = count + 1
  end
  if pixels then
    for _, p in ipairs(pixels) do one(p[1], p[2]) end
  else
    for r = 0, d.rows - 1 do for c = 0, d.cols - 1 do one(r, c) end end
  end
  return bad == 0, worst, count
end

local all_ok = true
print(("%s: %d x %d filter (Gaussian, sigma 2), blocks of %d x %d"):format(dev.name, fsize, fsize, BLOCK, BLOCK))

-- {====================================================== checks
do
  local small = setup(75, 101, 7)
  local t0 = cuda.clock()
  for r = 0, 74 do for c = 0, 100 do cpu_pixel(small.img, 75, 101, small.filt, fsize, "zero", r, c) end end
  local cpu_ms = (cuda.clock() - t0) * 1000
  local line = {}
  for v = 1, 3 do
    local ok, worst = check(v, small)
    all_ok = all_ok and ok
    line[#line + 1] = ("v%d %s (%.1e)"):format(v, ok and "ok" or "WRONG", worst)
  end
  print(("Check, every pixel of a 75 x 101 image against the CPU: %s"):format(table.concat(line, ", ")))
  print(("(the CPU convolution, in Lua, takes %.1f ms for that image: about %.0f s for the seed's problem,\n where the seed's C++ took 4104.51 ms)"):format(cpu_ms,
        cpu_ms * 2048 * 2048 / (75 * 101) / 1000 * (9 * 9) / (fsize * fsize)))
end
-- }======================================================

-- {====================================================== the seed's problem
local d = setup(rows, cols, 2019)
local pixels = {{0, 0}, {0, cols - 1}, {rows - 1, 0}, {rows - 1, cols - 1}}
for s = 1, 60 do
  pixels[#pixels + 1] = {(s * 7919) % rows, (s * 104729) % cols}
  pixels[#pixels + 1] = {0, (s * 31) % cols}
  pixels[#pixels + 1] = {(s * 37) % rows, cols - 1}
end
local seed_us = (rows == 2048 and cols == 2048 and fsize == 9) and {442.21, 412.00, 286.56} or nil
local seed_ms = {0.48, 0.43, 0.30}
local times = {}
print(("\nImage %d x %d (the seed's: 2048 x 2048, 9 x 9):"):format(rows, cols))
print(("%-24s %10s %10s %20s  %s"):format("kernel", "ours (us)", "speed-up", "seed, V100 (us)", ("check (%d pixels)"):format(#pixels)))
for v = 1, 3 do
  local ok, worst, count = check(v, d, pixels)
  all_ok = all_ok and ok
  times[v] = cuda.bench(function () launch(v, d) end, {warmup = 2, reps = 20}).median * 1000
  print(("%-24s %10.2f %10s %20s  %s"):format("convolution_kernel_v" .. v, times[v],
        v == 1 and "" or ("%.2fx"):format(times[v - 1] / times[v]),
        seed_us and ("%.2f"):format(seed_us[v]) or "-",
        ok and ("ok (%.1e, %d)"):format(worst, count) or ("WRONG (%.1e)"):format(worst)))
end
print(("v3 over v1: ours %.2fx%s"):format(times[1] / times[3],
      seed_us and (", the seed's %.2fx (nvprof); its own timer printed %.2f, %.2f and %.2f ms"):format(
        seed_us[1] / seed_us[3], seed_ms[1], seed_ms[2], seed_ms[3]) or ""))
for v = 1, 3 do print(("Processing Time (%d) -> GPU: %.2f ms"):format(v, times[v] / 1000)) end
-- }======================================================

print(all_ok and "Check: all three kernels agree with the CPU: SUCCESS" or "Check FAILED")
if not all_ok then os.exit(1) end
