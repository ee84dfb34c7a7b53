-- image_histogram.lua: seed 003's 256-bin histogram of an 8-bit grey image,
-- read through a texture object.
--
-- The image goes into a pitched 2-D device array and a texture over it
-- (point sampling, clamped, elements read as they are). One thread a pixel
-- reads it with tex2D<unsigned char>; each block of 16 x 16 threads counts its
-- pixels into a histogram of its own in shared memory (the seed's
-- privatisation: atomics on shared memory are far cheaper than on global),
-- then adds its non-zero bins to the global histogram with one atomic each.
-- (The seed stored each block's histogram in a slice of its own; the atomics
-- leave the total on the GPU.) The result is checked against a count made here
-- in Lua and against cuda.catalog.histogram over the same pixels packed into
-- a 1-D array. Times: the texture kernel (events), the catalog's histogram and
-- the CPU's count.
--
--   culua examples/image_histogram.lua [WIDTHxHEIGHT | file.pgm]
--   Without a file, a WIDTHxHEIGHT (default 2048x2048) image of bands and
--   noise is made. A PGM must be 8-bit (maxval at most 255), P5 or P2.

local cuda = require "cuda"
local pgm = require "culua.pgm"

local BLOCK, BINS, REPS = 16, 256, 20
local width, height, file = 2048, 2048, nil
if arg[1] then
  local w, h = arg[1]:match("^(%d+)x(%d+)$")
  if w then
    width, height = math.tointeger(tonumber(w)), math.tointeger(tonumber(h))
    if not width or width < 1 or height < 1 then
      error(("image_histogram.lua: the size must be WIDTHxHEIGHT, got '%s'"):format(arg[1]), 0)
    end
  else
    file = arg[1]
  end
end

local source = [[
#define BINS 256

// One thread a pixel of a width x height image read through img (unnormalized
// coordinates, point sampling: texel (x, y) has its centre at x + 0.5, y + 0.5).
// Every thread of the block, inside the image or not, clears and flushes the
// block's bins and passes both barriers; only those inside count a pixel.
extern "C" __global__ void image_histogram(cudaTextureObject_t img, int width, int height,
                                           unsigned int *histogram)
{
  __shared__ unsigned int histo_private[BINS];
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int local_id = threadIdx.y * blockDim.x + threadIdx.x;
  int threads = blockDim.x * blockDim.y;
  for (int b = local_id; b < BINS; b += threads) histo_private[b] = 0;
  __syncthreads();
  if (x < width && y < height) {
    unsigned char pixel = tex2D<unsigned char>(img, x + 0.5f, y + 0.5f);
    atomicAdd(&histo_private[pixel], 1u);
  }
  __syncthreads();
  for (int b = local_id; b < BINS; b += threads) {
    unsigned int count = histo_private[b];
    if (count != 0) atomicAdd(&histogram[b], count);
  }
}
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernel
local prog = cuda.compile(source, {name = "image_histogram.cu"})
require("culua.bench").need_devices()

local dev = cuda.device()
local kernel = prog:module():kernel("image_histogram")

-- {====================================================== the image
local host, what
if file then
  local maxval
  host, maxval = pgm.read(file)
  if host.dtype ~= "uint8" then
    error(("image_histogram.lua: %s has maxval %d: the seed's histogram takes 8-bit images"):format(file, maxval), 0)
  end
  height, width = host.shape[1], host.shape[2]
  what = ("%s, maxval %d"):format(file, maxval)
else
  -- bands across and down plus noise: a histogram with peaks and empty bins
  local cols, rows, noise = {}, {}, {}
  for x = 0, width - 1 do cols[x] = math.floor(60 + 50 * math.cos(x / 37)) end
  for y = 0, height - 1 do rows[y] = math.floor(40 + 30 * math.sin(y / 53)) end
  local rnd = cuda.host_array("uint8", 4093):random(2019, 0, 40)
  for i = 0, 4092 do noise[i] = rnd[i + 1] end
  local lines, px = {}, {}
  for y = 0, height - 1 do
    local ry, parts = rows[y], {}
    for x = 0, width - 1 do px[x + 1] = cols[x] + ry + noise[(x * 7 + y * 13) % 4093] end
    for first = 1, width, 4096 do parts[#parts + 1] = string.char(table.unpack(px, first, math.min(first + 4095, width))) end
    lines[y + 1] = table.concat(parts)
  end
  host = cuda.host_array("uint8", {height, width}):copy_from(table.concat(lines))
  what = "generated: bands and noise"
end
local n = width * height
-- }======================================================

-- {====================================================== the CPU's count
local t0 = cuda.clock()
local cpu = {}
do
  for b = 1, BINS do cpu[b] = 0 end
  local bytes = host:bytes()
  for first = 1, n, 4096 do
    local v = {bytes:byte(first, math.min(first + 4095, n))}
    for i = 1, #v do
      local b = v[i] + 1
      cpu[b] = cpu[b] + 1
    end
  end
end
local cpu_ms = (cuda.clock() - t0) * 1000
-- }======================================================

-- {====================================================== the GPU
local img = cuda.array("uint8", {height, width}, {pitched = true}):copy_from(host)
local tex = cuda.texture(img, {filter = "point", address = "clamp", read = "element"})
local counts = cuda.array("uint32", BINS)
local cfg = {grid = {(width + BLOCK - 1) // BLOCK, (height + BLOCK - 1) // BLOCK}, block = {BLOCK, BLOCK}}
local e0, e1 = cuda.event(), cuda.event()

-- one run of the texture kernel: its time in ms (the bins are cleared before, untimed)
local function run()
  counts:fill(0)
  e0:record()
  kernel:launch(cfg, tex, width, height, counts)
  e1:record()
  return e0:elapsed(e1)
end

local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end

counts:fill(0xffffffff)   -- poison: a bin the kernel forgot would not read as zero
local times = {run()}
local gpu = counts:totable()
for r = 2, REPS do times[r] = run() end
local tex_ms = median(times)

-- the catalog's histogram over the same pixels, packed into one row
local packed = cuda.array("uint8", n):copy_from(img)
local cat_counts = cuda.array("uint32", BINS):fill(0xffffffff)
local left_out = cuda.catalog.histogram(packed, cat_counts)
local catalog = cat_counts:totable()
local cat_ms = cuda.bench(function () cuda.catalog.histogram(packed, cat_counts) end, {warmup = 2, reps = REPS}).median
-- }======================================================

-- {====================================================== the report
local function show(label, c)
  local t = {}
  for b = 0, BINS - 1, 16 do t[#t + 1] = ("%7d"):format(c[b + 1]) end
  print(("%-14s:: %s"):format(label, table.concat(t, " ")))
end

-- SUCCESS!!, or the first bin that differs; whether they agree
local function verdict(label, c)
  local total = 0
  for b = 1, BINS do
    total = total + c[b]
    if c[b] ~= cpu[b] then
      print(("FAILED (%s) at bin %d: gpu %d, cpu %d"):format(label, b - 1, c[b], cpu[b]))
      return false
    end
  end
  print(("SUCCESS!! (%s: all 256 bins equal the CPU's, %d pixels)"):format(label, total))
  return true
end

print(("%s: %d x %d image (%s), %d bins, blocks of %d x %d, rows pitched to %d bytes"):format(dev.name, width, height,
      what, BINS, BLOCK, BLOCK, img.pitch))
local head = {}
for b = 0, BINS - 1, 16 do head[#head + 1] = ("%7s"):format("[" .. b .. "]") end
print(("%-14s   %s"):format("bin", table.concat(head, " ")))
show("cpu", cpu)
show("gpu[texture]", gpu)
local ok = verdict("texture kernel", gpu)
show("gpu[catalog]", catalog)
ok = verdict("cuda.catalog.histogram", catalog) and ok
if left_out ~= 0 then
  print(("FAILED: cuda.catalog.histogram left out %d pixels"):format(left_out))
  ok = false
end
print(("Processing Time -> GPU (texture kernel): %.4f ms (median of %d, events)"):format(tex_ms, REPS))
print(("Processing Time -> GPU (cuda.catalog.histogram): %.4f ms (median of %d)"):format(cat_ms, REPS))
print(("Processing Time -> CPU (Lua count): %.2f ms (%.0fx the texture kernel)"):format(cpu_ms, cpu_ms / tex_ms))
-- }======================================================

tex:close()
if not ok then os.exit(1) end
