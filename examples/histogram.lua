-- Seed 003's histogram, on cuda.catalog.
--
--   culua examples/histogram.lua [W [H]]
--
-- An image-like W x H (default 2048 x 2048) uint8 array, smooth gradients and
-- a little noise so that some grey levels are far more common than others,
-- is counted into 256 bins on the CPU (the C reference) and on the GPU (the
-- default kernel, then the seed's shared-memory one); both histograms are
-- printed in part, then SUCCESS or the first bin that differs, and the times.

local cuda = require "cuda"
local cat = cuda.catalog

local w = math.tointeger(tonumber(arg and arg[1] or "2048"))
local h = math.tointeger(tonumber(arg and arg[2] or tostring(w or 2048)))
if not w or w < 1 or not h or h < 1 then
  io.stderr:write("usage: culua examples/histogram.lua [W [H]]\n")
  os.exit(1)
end
require("culua.bench").need_devices()

local n = w * h
-- the image: a diagonal gradient plus noise in [0, 16), row by row
local img = cuda.host_array("uint8", n)
local noise = cuda.host_array("uint8", w):random(3, 0, 15)
for y = 0, h - 1 do
  local base = y * w
  for x = 0, w - 1 do
    img[base + x + 1] = ((x + y) * 255 // (w + h)) + noise[x + 1] & 255
  end
end

local function seconds(fn)
  local t0 = os.clock()
  fn()
  return os.clock() - t0
end

local function show(label, c)
  local t = {}
  for i = 1, 8 do t[#t + 1] = ("%d"):format(c[i]) end
  t[#t + 1] = "..."
  for i = 255, 256 do t[#t + 1] = ("%d"):format(c[i]) end
  print(("%-12s:: %s"):format(label, table.concat(t, " ")))
end

local cpu = cuda.host_array("uint32", 256)
local cpu_s = seconds(function () cat.reference.histogram(img, cpu) end)

local x = cuda.array("uint8", n):copy_from(img)
local counts = cuda.array("uint32", 256)
local ok = true
for _, variant in ipairs{"default", "seed"} do
  cat.histogram(x, counts, {variant = variant})   -- warm: loads the kernel
  local r = cuda.bench(function () cat.histogram(x, counts, {variant = variant}) end, {warmup = 1, reps = 10})
  local gpu = cuda.host_array("uint32", 256)
  counts:copy_to(gpu)
  print(("%d x %d image, 256 bins, variant '%s'"):format(w, h, variant))
  show("cpu", cpu)
  show("gpu", gpu)
  local diff
  for i = 1, 256 do
    if gpu[i] ~= cpu[i] then diff = i; break end
  end
  if diff then
    print(("FAILED at bin %d: gpu %d, cpu %d"):format(diff - 1, gpu[diff], cpu[diff]))
    ok = false
  else
    print("SUCCESS!!")
  end
  print(("cpu %.3f ms, gpu %.3f ms (%.1fx)"):format(cpu_s * 1e3, r.median, cpu_s * 1e3 / r.median))
end
os.exit(ok and 0 or 1)
