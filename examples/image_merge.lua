-- image_merge.lua: seed 003's merging of two images on several GPUs.
--
-- Each GPU gets a share of the rows, a non-blocking stream and buffers of its
-- own. For every GPU in turn the script queues its copies in (from pinned
-- memory), the merging kernel and the copy out, all asynchronous, so that one
-- GPU's copies run while another's kernel does (the seed used an OpenMP thread
-- a GPU; one Lua thread can queue them all because nothing here waits). The
-- merge is the rounded mean of the two samples. It runs on the first GPU
-- alone, then on all of them; each run is checked against the same merge
-- done here on the CPU, and its per-GPU times (from events on that GPU's
-- stream) and the wall time are printed. The merged image is written as PGM.
--
--   culua examples/image_merge.lua [A.pgm B.pgm] [out=merged.pgm] [size=ROWSxCOLS]
--                                  [devices=0,1,...] [reps=5]
--   Without A and B, two gradients of size ROWSxCOLS (default 4096x4096) are
--   merged. 8- and 16-bit PGM (P5 or P2) are read.

local cuda = require "cuda"
local pgm = require "culua.pgm"

local files, out, rows, cols, devices, reps = {}, "merged.pgm", 4096, 4096, nil, 5
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "out" then out = v
  elseif k == "size" then
    local r, c = v:match("^(%d+)x(%d+)$")
    rows, cols = math.tointeger(tonumber(r)), math.tointeger(tonumber(c))
    if not rows or rows < 1 or cols < 1 then error(("image_merge.lua: size must be ROWSxCOLS, got '%s'"):format(v), 0) end
  elseif k == "devices" then
    devices = {}
    for d in v:gmatch("%d+") do devices[#devices + 1] = math.tointeger(tonumber(d)) end
  elseif k == "reps" then
    reps = math.tointeger(tonumber(v))
    if not reps or reps < 1 then error(("image_merge.lua: reps must be a positive integer, got '%s'"):format(v), 0) end
  elseif k then error(("image_merge.lua: unknown option '%s' (known: out, size, devices, reps)"):format(k), 0)
  else files[#files + 1] = a end
end
if #files ~= 0 and #files ~= 2 then error("image_merge.lua: give two images to merge, or none", 0) end

local source = [[
// the rounded mean of two images' samples, n of them, in a grid-stride loop
template <typename T>
__device__ void merge(const T *a, const T *b, T *out, unsigned long long n)
{
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = (T)(((unsigned)a[i] + (unsigned)b[i] + 1u) >> 1);
}
extern "C" __global__ void merge_u8(const unsigned char *a, const unsigned char *b, unsigned char *out,
                                    unsigned long long n) { merge(a, b, out, n); }
extern "C" __global__ void merge_u16(const unsigned short *a, const unsigned short *b, unsigned short *out,
                                     unsigned long long n) { merge(a, b, out, n); }
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernels
local prog = cuda.compile(source, {name = "image_merge.cu"})
require("culua.bench").need_devices()

if not devices then
  devices = {}
  for d = 0, cuda.device_count() - 1 do devices[#devices + 1] = d end
end
for _, d in ipairs(devices) do cuda.device(d) end   -- a bad ordinal fails here, plainly

-- {====================================================== the images
local A, B, maxval
if #files == 2 then
  local ma, mb
  A, ma = pgm.read(files[1])
  B, mb = pgm.read(files[2])
  if A.shape[1] ~= B.shape[1] or A.shape[2] ~= B.shape[2] then
    error(("image_merge.lua: %s is %dx%d but %s is %dx%d"):format(files[1], A.shape[1], A.shape[2], files[2],
          B.shape[1], B.shape[2]), 0)
  end
  if A.dtype ~= B.dtype then
    error(("image_merge.lua: %s has maxval %d but %s has %d: one is 8-bit, the other 16-bit"):format(files[1], ma,
          files[2], mb), 0)
  end
  rows, cols, maxval = A.shape[1], A.shape[2], math.max(ma, mb)
  print(("Merging %s and %s: %d x %d, maxval %d"):format(files[1], files[2], rows, cols, maxval))
else
  -- a horizontal and a vertical gradient, 0 .. 255
  local function level(i, n) return n == 1 and 0 or (i * 255) // (n - 1) end
  local row = {}
  for c = 0, cols - 1 do row[c + 1] = string.char(level(c, cols)) end
  A = cuda.host_array("uint8", {rows, cols}):copy_from(table.concat(row):rep(rows))
  local lines = {}
  for r = 0, rows - 1 do lines[r + 1] = string.char(level(r, rows)):rep(cols) end
  B = cuda.host_array("uint8", {rows, cols}):copy_from(table.concat(lines))
  maxval = 255
  print(("Merging two generated gradients, %d x %d, 8-bit"):format(rows, cols))
end
local dtype = A.dtype
local esize = dtype == "uint8" and 1 or 2
local bytesA, bytesB = A:bytes(), B:bytes()
-- }======================================================

-- {====================================================== the CPU merge
local t0 = cuda.clock()
local want
do
  local parts, n, CH = {}, rows * cols, 4096
  for first = 0, n - 1, CH do
    local k = math.min(CH, n - first)
    local fmt = dtype == "uint8" and ("B"):rep(k) or "<" .. ("I2"):rep(k)
    local va = {string.unpack(fmt, bytesA, 1 + esize * first)}
    local vb = {string.unpack(fmt, bytesB, 1 + esize * first)}
    local m = {}
    for i = 1, k do m[i] = (va[i] + vb[i] + 1) >> 1 end
    parts[#parts + 1] = string.pack(fmt, table.unpack(m))
  end
  want = table.concat(parts)
end
local cpu_ms = (cuda.clock() - t0) * 1000
print(("CPU merge (Lua, one core): %.1f ms"):format(cpu_ms))
-- }======================================================

-- {====================================================== one GPU's share
-- rows r0 .. r1-1 on device d: pinned chunks of the inputs and output, device
-- buffers, a stream and four events (before, after the copies in, after the
-- kernel, after the copy out), all made once
local function share(d, r0, r1)
  local dev = cuda.device(d)
  dev:use()
  local nr = r1 - r0
  local n = nr * cols
  local first, last = r0 * cols * esize + 1, r1 * cols * esize
  local sh = {
    device = d, name = dev.name, r0 = r0, r1 = r1, n = n,
    ha = cuda.host_array(dtype, {nr, cols}, {pinned = true}):copy_from(bytesA:sub(first, last)),
    hb = cuda.host_array(dtype, {nr, cols}, {pinned = true}):copy_from(bytesB:sub(first, last)),
    hout = cuda.host_array(dtype, {nr, cols}, {pinned = true}),
    da = cuda.array(dtype, {nr, cols}, {device = d}),
    db = cuda.array(dtype, {nr, cols}, {device = d}),
    dout = cuda.array(dtype, {nr, cols}, {device = d}),
    stream = cuda.stream{device = d, non_blocking = true},
    ev = {cuda.event(), cuda.event(), cuda.event(), cuda.event()},
  }
  sh.kernel = prog:module{device = d}:kernel(dtype == "uint8" and "merge_u8" or "merge_u16")
  local blocks = math.max(1, math.min((n + 255) // 256, 8 * dev:attribute("multiprocessor_count")))
  sh.cfg = {grid = {blocks}, block = {256}, stream = sh.stream}
  return sh
end

-- the shares of a list of devices: rows split as evenly as they go
local function plan(devs)
  local shares = {}
  for i, d in ipairs(devs) do
    local r0, r1 = (i - 1) * rows // #devs, i * rows // #devs
    if r1 > r0 then shares[#shares + 1] = share(d, r0, r1) end
  end
  cuda.device(devs[1]):use()
  return shares
end

-- one merge on every share; the wall time from the first copy queued to the
-- last stream done
local function run(shares)
  local t = cuda.clock()
  for _, sh in ipairs(shares) do
    local s, ev = sh.stream, sh.ev
    ev[1]:record(s)
    sh.da:copy_from(sh.ha, s)
    sh.db:copy_from(sh.hb, s)
    ev[2]:record(s)
    sh.kernel:launch(sh.cfg, sh.da, sh.db, sh.dout, sh.n)
    ev[3]:record(s)
    sh.dout:copy_to(sh.hout, s)
    ev[4]:record(s)
  end
  for _, sh in ipairs(shares) do sh.stream:synchronize() end
  local wall = (cuda.clock() - t) * 1000
  local per = {}
  for i, sh in ipairs(shares) do
    local ev = sh.ev
    per[i] = {ev[1]:elapsed(ev[2]), ev[2]:elapsed(ev[3]), ev[3]:elapsed(ev[4]), ev[1]:elapsed(ev[4])}
  end
  return wall, per
end

local function merged(shares)
  local parts = {}
  for i, sh in ipairs(shares) do parts[i] = sh.hout:bytes() end
  return table.concat(parts)
end
-- }======================================================

local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end

local configs = {{devices[1]}}
if #devices > 1 then configs[2] = devices end
local walls, used, all_ok, result = {}, {}, true, nil
for ci, devs in ipairs(configs) do
  local shares = plan(devs)
  for _, sh in ipairs(shares) do sh.hout:fill(maxval > 255 and 65535 or 255) end   -- poison
  run(shares)                                       -- warm-up, and the run that is checked
  local got = merged(shares)
  local ok = got == want
  if not ok then
    local n = rows * cols
    for i = 0, n - 1 do
      local g = string.unpack(dtype == "uint8" and "B" or "<I2", got, 1 + esize * i)
      local w = string.unpack(dtype == "uint8" and "B" or "<I2", want, 1 + esize * i)
      if g ~= w then
        print(("Check FAILED on %d GPU(s): row %d, column %d is %d, the CPU says %d"):format(#devs, i // cols + 1,
              i % cols + 1, g, w))
        break
      end
    end
  end
  all_ok = all_ok and ok
  result = result or got
  local wl, per = {}, {}
  for r = 1, reps do
    local w, p = run(shares)
    wl[r] = w
    for i, x in ipairs(p) do
      per[i] = per[i] or {{}, {}, {}, {}}
      for j = 1, 4 do per[i][j][r] = x[j] end
    end
  end
  walls[ci], used[ci] = median(wl), #shares
  print(("\n%d GPU%s: the merge %s the CPU's"):format(#shares, #shares == 1 and "" or "s",
        ok and "equals" or "DIFFERS FROM"))
  print(("  %-8s %-28s %11s %10s %10s %10s %10s"):format("device", "name", "rows", "in (ms)", "kernel", "out (ms)",
        "span (ms)"))
  local sum = 0
  for i, sh in ipairs(shares) do
    local m = {}
    for j = 1, 4 do m[j] = median(per[i][j]) end
    sum = sum + m[4]
    print(("  %-8d %-28s %5d..%-5d %10.3f %10.3f %10.3f %10.3f"):format(sh.device, sh.name:sub(1, 28), sh.r0 + 1, sh.r1,
          m[1], m[2], m[3], m[4]))
  end
  print(("  wall time %.3f ms (median of %d); the GPUs' spans add up to %.3f ms"):format(walls[ci], reps, sum))
end
if walls[2] then
  print(("\nSpeed-up of %d GPUs over 1: %.2fx"):format(used[2], walls[1] / walls[2]))
end

local img = cuda.host_array(dtype, {rows, cols}):copy_from(result)
pgm.write(out, img, {maxval = maxval, comment = "merged by culua examples/image_merge.lua"})
print(("Merged image written to %s"):format(out))
print(all_ok and "Check: every merged sample equals the CPU's: SUCCESS" or "Check FAILED")
if not all_ok then os.exit(1) end
