-- bench/host_paths.lua: the host time of small calls (issue 40), next to the C launch anchor.
--   culua bench/host_paths.lua [ANCHOR] [ROUNDS] [CUB]
-- ANCHOR: bench/anchor (bench/run.sh builds it: cc bench/anchor.c -lcuda), whose C loop of
-- cuLaunchKernel is the launch figure's reference; without it, ours alone. CUB:
-- bench/anchor_cub, whose DeviceScan and DeviceRadixSort of the same 2^16 elements (a
-- call between two events, queued: the GPU's time) are printed beside 2 and 3.
--
--   1. an empty kernel's k:launch(cfg) in a Lua loop, and the prepared go(), against the same
--      launches from C: us a launch between events, rounds alternating Lua and C, the ratio
--      taken within each round (target: k:launch <= 1.05x C)
--   2. cuda.catalog.scan of 2^16 float32, a call in a loop of 100 between events (target <= 7 us)
--   3. cuda.catalog.sort of 2^16 uint32 keys, the same (target <= 12 us)
--   4. cuda.catalog.sort of 2^22 uint32 keys: the host time of a call, cuda.clock() around it
--      with the GPU not waited for (target <= 20 us); the sort's GPU time beside it
-- Beside 2-4: the loop's host time a call (cuda.clock, not waiting: what the host spends), and
-- a call on a new view each time (no plan to replay: the full checks, lua/catalog/sort.lua's
-- plans). On bench/fakecuda.c's driver (no GPU: CULUA_LIBCUDA=fakecuda.so, the anchor
-- linked to it) every figure is host time, and the driver's part is nothing.
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local ANCHOR = arg[1]
local ROUNDS = tonumber(arg[2]) or 7
local CUB = arg[3]
local N = 20000   -- launches a measurement
local dev = cuda.device()

local median = require("culua.bench").median

local function present(path)
  local f = path and io.open(path)
  if f then f:close() return path end
  if path then print(("anchor %s is missing: ours alone"):format(path)) end
end
ANCHOR, CUB = present(ANCHOR), present(CUB)

-- {====================================================== 1. launches

local prog = cuda.compile[[extern "C" __global__ void empty() {}]]
local empty = prog:module():kernel("empty")
local cfg = {grid = 1, block = 32}
local launch, go = empty.launch, empty:prepare(cfg)
local ptxfile
if ANCHOR then
  ptxfile = os.tmpname()
  local f = assert(io.open(ptxfile, "w"))
  f:write(prog.ptx)
  f:close()
end
local function anchor_us()
  local out = io.popen(("%s launch %s empty %d 9"):format(ANCHOR, ptxfile, N)):read("a")
  return tonumber(out:match("launch_us (%S+)")) or error("anchor failed: " .. out)
end
local function per_launch(f)
  return cuda.bench(f, {warmup = 2, reps = 9}).median * 1000 / N
end
local lua_t, prep_t, c_t, ratio, pratio = {}, {}, {}, {}, {}
for r = 1, ROUNDS do
  lua_t[r] = per_launch(function () for _ = 1, N do launch(empty, cfg) end end)
  prep_t[r] = per_launch(function () for _ = 1, N do go() end end)
  if ANCHOR then
    c_t[r] = anchor_us()
    ratio[r], pratio[r] = lua_t[r] / c_t[r], prep_t[r] / c_t[r]
  end
end
if ptxfile then os.remove(ptxfile) end

-- }======================================================

-- {====================================================== 2-4. catalog calls

-- us a call of f in a loop of `calls`: between events (median of reps) and the loop's host
-- time (cuda.clock, the GPU not waited for; median of the same reps)
local function loop(f, calls)
  local host = {}
  local r = cuda.bench(function ()
    local t0 = cuda.clock()
    for _ = 1, calls do f() end
    host[#host + 1] = (cuda.clock() - t0) * 1e6 / calls
  end, {warmup = 2, reps = 21})
  return r.median * 1000 / calls, median(host)
end

-- us of host time a call (cuda.clock around it, the GPU not waited for), the GPU idle before each
local function host_call(f, reps)
  local t = {}
  f()
  cuda.synchronize()
  for i = 1, reps do
    local t0 = cuda.clock()
    f()
    t[i] = (cuda.clock() - t0) * 1e6
    cuda.synchronize()
  end
  return median(t)
end

local n = 1 << 16
local x, y = cuda.array("float32", n):fill(1), cuda.array("float32", n)
local keys = cuda.array("uint32", n):copy_from(cuda.host_array("uint32", n):random(5, 0, 0xffffffff))
local scan_ev, scan_host = loop(function () cat.scan(x, y) end, 100)
local scan_view = host_call(function () cat.scan(x:view(1, n), y:view(1, n)) end, 51)
local sort_ev, sort_host = loop(function () cat.sort(keys) end, 100)
local sort_view = host_call(function () cat.sort(keys:view(1, n)) end, 51)
-- the 2^16 sort's GPU time: one call between events, the GPU idle before (launch latency in)
local sort_gpu = cuda.bench(function () cat.sort(keys) end, {warmup = 3, reps = 21}).median * 1000

-- CUB's own calls of the same size, ms between events -> us
local function cub_us(args, key)
  if not CUB then return end
  local out = io.popen(("%s %s"):format(CUB, args)):read("a")
  return (tonumber(out:match(key .. " (%S+)")) or error("anchor_cub failed: " .. out)) * 1000
end
local cub_scan = cub_us(("scan f32 %d 101"):format(n), "scan_ms")
local cub_sort = cub_us(("sort u32 %d 101 keys"):format(n), "sort_ms")
-- and 4096 keys, which both sort in one block (ours: the small path, every pass in one launch)
local k4 = keys:view(1, 4096)
local small_ev = loop(function () cat.sort(k4) end, 100)
local cub_small = cub_us("sort u32 4096 101 keys", "sort_ms")

local big = cuda.array("uint32", 1 << 22):copy_from(cuda.host_array("uint32", 1 << 22):random(6, 0, 0xffffffff))
local big_host = host_call(function () cat.sort(big) end, 51)
local big_view = host_call(function () cat.sort(big:view(1, 1 << 22)) end, 21)
local big_gpu = cuda.bench(function () cat.sort(big) end, {warmup = 3, reps = 21}).median * 1000

-- }======================================================

print(("host time of small calls on %s (%s), medians"):format(dev.name, cuda.driver_version()))
local lua_us, prep_us = median(lua_t), median(prep_t)
local targets = {}
if ANCHOR then
  local c_us, rmed, pmed = median(c_t), median(ratio), median(pratio)
  print(("%-44s %8.3f us   C %8.3f us   %5.2fx (rounds %.2f..%.2f)"):format("empty kernel, k:launch(cfg), a launch",
        lua_us, c_us, rmed, math.min(table.unpack(ratio)), math.max(table.unpack(ratio))))
  print(("%-44s %8.3f us   C %8.3f us   %5.2fx (rounds %.2f..%.2f)"):format("empty kernel, prepared go(), a launch",
        prep_us, c_us, pmed, math.min(table.unpack(pratio)), math.max(table.unpack(pratio))))
  targets[#targets + 1] = ("k:launch <= 1.05x C %s (%.2fx)"):format(rmed <= 1.05 and "met" or "NOT met", rmed)
else
  print(("%-44s %8.3f us   (no anchor)"):format("empty kernel, k:launch(cfg), a launch", lua_us))
  print(("%-44s %8.3f us"):format("empty kernel, prepared go(), a launch", prep_us))
end
print(("%-44s %8.3f us   host %7.3f us a call, a new view a call %7.3f"):format(
      "scan 2^16 float32, a call in a loop of 100", scan_ev, scan_host, scan_view))
print(("%-44s %8.3f us   host %7.3f us a call, a new view a call %7.3f; one call between events %.2f"):format(
      "sort 2^16 uint32, a call in a loop of 100", sort_ev, sort_host, sort_view, sort_gpu))
print(("%-44s %8.3f us   a new view a call %7.3f; GPU, between events %.2f"):format(
      "sort 2^22 uint32, host time of a call", big_host, big_view, big_gpu))
if CUB then
  print(("%-44s %8.3f us   (a call between events, queued: the GPU's time)"):format(
        "CUB DeviceScan, 2^16 float32", cub_scan))
  print(("%-44s %8.3f us   (the same)"):format("CUB DeviceRadixSort, 2^16 uint32 keys", cub_sort))
end
print(("%-44s %8.3f us"):format("sort 4096 uint32, a call in a loop of 100", small_ev))
if CUB then
  print(("%-44s %8.3f us   (a call between events, queued)"):format("CUB DeviceRadixSort, 4096 uint32 keys", cub_small))
end
targets[#targets + 1] = ("scan 2^16 <= 7 us %s"):format(scan_ev <= 7 and "met" or "NOT met")
targets[#targets + 1] = ("sort 2^16 <= 12 us %s"):format(sort_ev <= 12 and "met" or "NOT met")
targets[#targets + 1] = ("sort 2^22 host <= 20 us %s"):format(big_host <= 20 and "met" or "NOT met")
print("targets: " .. table.concat(targets, "; "))
