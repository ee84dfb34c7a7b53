-- Seed 003's prefix sum, compact and split, on cuda.catalog.
--
--   culua examples/scan.lua [N [BIG]]
--
-- N (default 1024, at most 1024: the naive scan is one block) random floats in
-- [-0.5, 0.5) are scanned by the seed's two one-block kernels (naive Hillis-
-- Steele, "gpu_v1", and Blelloch's work-efficient scan, "gpu_v2") and checked
-- against the CPU, as the seed prints them; then BIG elements (default 2^24)
-- by the multi-block scans (the seed's global scan and the single pass with
-- decoupled look-back), timed against the CPU; then the positive elements are
-- compacted and split.

local cuda = require "cuda"
local cat = cuda.catalog

local n = math.tointeger(tonumber(arg and arg[1] or "1024"))
local big = math.tointeger(tonumber(arg and arg[2] or tostring(1 << 24)))
if not n or n < 1 or n > 1024 or not big or big < 1 then
  io.stderr:write("usage: culua examples/scan.lua [N (1..1024) [BIG]]\n")
  os.exit(1)
end
require("culua.bench").need_devices()

-- "label:: a b c d ... y z", as the seed prints an array
local function show(label, h, count)
  count = count or #h
  local t = {}
  local function add(i) t[#t + 1] = ("%7.4f"):format(h[i]) end
  if count <= 6 then
    for i = 1, count do add(i) end
  else
    for i = 1, 4 do add(i) end
    t[#t + 1] = "..."
    add(count - 1); add(count)
  end
  print(("%-14s:: %s"):format(label, table.concat(t, " ")))
end

-- SUCCESS!!, or the first element that differs by more than tol relative to
-- the largest prefix so far: float32 sums on the GPU add in another order, and
-- a prefix near zero keeps the rounding of the larger ones before it
local function verdict(got, want, count, tol)
  local scale = 1
  for i = 1, count do
    local g, w = got[i], want[i]
    scale = math.max(scale, math.abs(w))
    if g ~= w and not (math.abs(g - w) <= tol * scale) then
      print(("FAILED at element %d: gpu %.6f, cpu %.6f"):format(i, g, w))
      return false
    end
  end
  print("SUCCESS!!")
  return true
end

local function seconds(fn)
  local t0 = os.clock()
  fn()
  return os.clock() - t0
end

-- {====================================================== the seed's one-block scans

local hx = cuda.host_array("float32", n):random(2019, -0.5, 0.5)
local x = cuda.array("float32", n):copy_from(hx)
local y = cuda.array("float32", n)
local cpu = cuda.host_array("float32", n)
cat.reference.scan(hx, cpu)
local got = cuda.host_array("float32", n)
local ok = true

show("input", hx)
for _, v in ipairs{{"naive", "gpu_v1"}, {"blelloch", "gpu_v2"}} do
  y:fill(0 / 0)
  cat.scan(x, y, {variant = v[1]})
  y:copy_to(got)
  show("result[cpu]", cpu)
  show(("result[%s]"):format(v[2]), got)
  ok = verdict(got, cpu, n, 1e-5) and ok
end
for _, v in ipairs{"naive", "blelloch"} do
  local r = cuda.bench(function () cat.scan(x, y, {variant = v}) end, {warmup = 3, reps = 20})
  print(("  %-8s scan of %d: %8.2f us"):format(v, n, r.median * 1000))
end

-- }======================================================


-- {====================================================== the multi-block scans, timed

print()
local hb = cuda.host_array("float32", big):random(2020, -0.5, 0.5)
local xb, yb = cuda.array("float32", big):copy_from(hb), cuda.array("float32", big)
local cpub = cuda.host_array("float32", big)
local cpu_s = seconds(function () cat.reference.scan(hb, cpub) end)
local gotb = cuda.host_array("float32", big)
for _, v in ipairs{"global", "lookback"} do
  yb:fill(0 / 0)
  cat.scan(xb, yb, {variant = v})
  yb:copy_to(gotb)
  show("result[cpu]", cpub)
  show(("result[%s]"):format(v), gotb)
  ok = verdict(gotb, cpub, big, 1e-4) and ok
  local r = cuda.bench(function () cat.scan(xb, yb, {variant = v}) end, {warmup = 3, reps = 10})
  print(("Processing Time -> GPU (%s): %.3f ms, %.1f GB/s; Host: %.3f ms (%.0fx)"):format(v, r.median,
        8 * big / r.median / 1e6, cpu_s * 1000, cpu_s * 1000 / r.median))
end

-- }======================================================


-- {====================================================== compact and split

print()
local m = math.min(big, 1 << 20)
local hp = cuda.host_array("float32", m):random(2019, -0.5, 0.5)
local xp, yp = cuda.array("float32", m):copy_from(hp), cuda.array("float32", m)
local kept, rest = cuda.host_array("float32", m), cuda.host_array("float32", m)
local nk, nr = 0, 0
for i = 1, m do
  local v = hp[i]
  if v > 0 then nk = nk + 1; kept[nk] = v else nr = nr + 1; rest[nr] = v end
end
show("input", hp)
local count = cat.compact(xp, yp:fill(0 / 0), "x > 0.0f")
local gp = cuda.host_array("float32", m)
yp:copy_to(gp)
show("pack[cpu]", kept, nk)
show("pack[gpu]", gp, count)
if count ~= nk then print(("FAILED: gpu kept %d, cpu %d"):format(count, nk)); ok = false
else ok = verdict(gp, kept, nk, 0) and ok end

count = cat.split(xp, yp:fill(0 / 0), "x > 0.0f")
yp:copy_to(gp)
for i = 1, nr do kept[nk + i] = rest[i] end
show("split[cpu]", kept)
show("split[gpu]", gp)
if count ~= nk then print(("FAILED: gpu kept %d, cpu %d"):format(count, nk)); ok = false
else ok = verdict(gp, kept, m, 0) and ok end
local r = cuda.bench(function () cat.compact(xp, yp, "x > 0.0f") end, {warmup = 3, reps = 20})
print(("compact of %d: %.3f ms (with the count read back)"):format(m, r.median))

-- }======================================================

os.exit(ok and 0 or 1)
