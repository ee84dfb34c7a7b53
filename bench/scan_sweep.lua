-- bench/scan_sweep.lua: the look-back scan's tile shape: threads x items (no register bound), float32 and int32 at 2^28, compiled by NVRTC
-- from kernels/scan.cu with -D values, each checked against the default shape's result
local cuda = require "cuda"
require("culua.bench").need_devices()
local n = 1 << 28
local src = cuda._catalog.source("scan")
local function bench(fn)
  local r = cuda.bench(fn, {warmup = 3, reps = 15})
  return r.median
end
for _, dt in ipairs{"float32", "int32"} do
  local short = dt == "float32" and "f32" or "i32"
  local h = cuda.host_array(dt, n):random(1, 0, 3)
  local x, y, ref = cuda.array(dt, n):copy_from(h), cuda.array(dt, n), cuda.array(dt, n)
  cuda.catalog.scan(x, ref)
  local href = cuda.host_array(dt, n); ref:copy_to(href)
  local ms0 = bench(function () cuda.catalog.scan(x, y) end)
  print(("%s default (256 x 32, 5 blocks): %.3f ms %.0f GB/s"):format(dt, ms0, 8 * n / ms0 / 1e6))
  for _, t in ipairs{128, 256, 512} do
    for _, it in ipairs{8, 12, 16, 20, 24, 32} do
      local ok, prog = pcall(cuda.compile, src, {options = {"-std=c++17", "-arch=compute_90", "-DCULUA_ADD4_THREADS=" .. t, "-DCULUA_ITEMS4=" .. it, "-DCULUA_SCAN_MINB=1"}, name = "scan.cu"})
      if not ok then print(t, it, "compile failed", prog) goto next end
      local k = prog:module():kernel("culua_scan_lookback_" .. short .. "_add")
      local tile = t * it
      local ntiles = (n + tile - 1) // tile
      local w = cuda.array("uint64", 1 + ntiles):fill(0)
      local values = cuda.array("uint64", 2 * ntiles)
      local base, epoch = 0, 0
      local function run()
        epoch = epoch + 1
        k:launch({grid = ntiles, block = t}, x, y, n, 0, 0, w, values, base, epoch, ntiles, 0)
        base = base + ntiles
      end
      y:fill(0)
      run()
      local _, rel = cuda.compare(y, href)
      local ms = bench(run)
      print(("%s %4d x %2d: %.3f ms %6.0f GB/s  %.2fx default  regs %d  %s"):format(dt, t, it, ms, 8 * n / ms / 1e6, ms0 / ms,
            k:attributes().num_regs, rel == 0 and "same result" or ("DIFFERS " .. rel)))
      ::next::
    end
  end
end
