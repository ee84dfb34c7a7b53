-- bench/depth.lua: issue 40's sweep, the scan's and the sort's knobs against CUB in one run.
--   culua bench/depth.lua [ANCHOR] [scan|sort]
-- ANCHOR: bench/anchor_cub (DeviceScan::InclusiveSum, DeviceRadixSort), timed in the same
-- run; without it, ours alone. Every knob is off by default; each line builds its kernels
-- by NVRTC and checks its result against the catalog's default call.
--
-- scan: 2^28 float32 and int32, inclusive sums, a line a configuration of kernels/scan.cu's
-- -D knobs (built with -DCULUA_SCAN_SWEEP: the two kernels alone), launched as
-- lua/catalog/scan.lua launches its look-back kernel; ms, GB/s (8 bytes an element), the
-- ratio to CUB (target 1.10x) and to a device copy of the same bytes (the bound). The shape
-- is threads x items and bN the blocks a multiprocessor the registers are bounded for; x0 /
-- x1 / x2 the transposes (block, warp, warp with 16-byte shared accesses), cs1-3 the
-- streaming hints, sN the look-back's sleep in ns after pN polls, wN a wait before the first.
--
-- sort: 2^28 uint32 keys (target 1.15x CUB), then pairs (1.05x) and 2^27 uint64 keys (1.1x):
-- the default, the look-back window, and the look-back's polling (sort.tune: kernels/sort.cu's
-- CULUA_SORT_LB_SPINS and CULUA_SORT_LB_SLEEP, built by NVRTC under their own names).
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog
local run_anchor = require "culua.anchor"
local ANCHOR = arg[1] ~= "scan" and arg[1] ~= "sort" and arg[1] or nil
local ONLY = arg[#arg] == "scan" and "scan" or arg[#arg] == "sort" and "sort" or nil
local REPS = 15
local dev = cuda.device()
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end
print(("issue 40's sweep on %s, median of %d%s"):format(dev.name, REPS, ANCHOR and (", anchor " .. ANCHOR) or ""))

local function ratio(a, b) return (a and b) and ("%.3fx"):format(a / b) or "-" end

-- {====================================================== scan

local SCAN = {
  -- label, -D values (CULUA_ prefix left off); the first repeats the default through NVRTC
  {"256x32 b5 x0 (default)", {}},
  {"256x32 b5 x1", {"SCAN_XPOSE=1"}},
  {"256x32 b5 x2", {"SCAN_XPOSE=2"}},
  {"256x32 b4 x2", {"SCAN_XPOSE=2", "SCAN_MINB=4"}},
  {"256x32 b4 x1", {"SCAN_XPOSE=1", "SCAN_MINB=4"}},
  {"256x32 b5 x1 cs1", {"SCAN_XPOSE=1", "SCAN_CACHE=1"}},
  {"256x32 b5 x1 cs2", {"SCAN_XPOSE=1", "SCAN_CACHE=2"}},
  {"256x32 b5 x1 cs3", {"SCAN_XPOSE=1", "SCAN_CACHE=3"}},
  {"256x32 b5 x0 cs2", {"SCAN_CACHE=2"}},
  {"128x24 b8 x1 (CUB's sm90 shape)", {"SCAN_XPOSE=1", "ADD4_THREADS=128", "ITEMS4=24", "SCAN_MINB=8"}},
  {"128x24 b8 x2", {"SCAN_XPOSE=2", "ADD4_THREADS=128", "ITEMS4=24", "SCAN_MINB=8"}},
  {"128x32 b10 x1", {"SCAN_XPOSE=1", "ADD4_THREADS=128", "SCAN_MINB=10"}},
  {"128x32 b8 x2", {"SCAN_XPOSE=2", "ADD4_THREADS=128", "SCAN_MINB=8"}},
  {"512x16 b3 x2", {"SCAN_XPOSE=2", "ADD4_THREADS=512", "ITEMS4=16", "SCAN_MINB=3"}},
  {"256x32 b5 x1 s0 (spin)", {"SCAN_XPOSE=1", "SCAN_SLEEP=0"}},
  {"256x32 b5 x1 p1 s256", {"SCAN_XPOSE=1", "SCAN_SPINS=1", "SCAN_SLEEP=256"}},
  {"256x32 b5 x1 w700", {"SCAN_XPOSE=1", "SCAN_PREWAIT=700"}},
  {"256x32 b5 x1 w700 p0 s700", {"SCAN_XPOSE=1", "SCAN_PREWAIT=700", "SCAN_SPINS=0", "SCAN_SLEEP=700"}},
}

local function scan_sweep()
  local n = 1 << 28
  local src = cuda._catalog.source("scan")
  local arch = ("-arch=compute_%d%d"):format(dev.major, dev.minor)
  local rows = {}
  for _, t in ipairs{{"float32", "f32", 0, 1}, {"int32", "i32", 0, 9}} do
    local dt, short = t[1], t[2]
    local x = cuda.array(dt, n):copy_from(cuda.host_array(dt, n):random(28, t[3], t[4]))
    local y, ref = cuda.array(dt, n), cuda.array(dt, n)
    collectgarbage()
    cat.scan(x, ref)
    local href = ref:copy_to(cuda.host_array(dt, n))
    local function ms_of(fn) return cuda.bench(fn, {warmup = 3, reps = REPS}).median end
    local copy = ms_of(function () y:copy_from(x) end)
    local cub = run_anchor(ANCHOR, ("scan %s %d %d"):format(short, n, REPS), "scan_ms")
    local cat_ms = ms_of(function () cat.scan(x, y) end)
    rows[#rows + 1] = {dt, "catalog call (prebuilt)", cat_ms, cub, copy, "regs -", "same"}
    for _, c in ipairs(SCAN) do
      local opts = {"-std=c++17", arch, "-DCULUA_SCAN_SWEEP"}
      local threads, items = 256, 32
      for _, d in ipairs(c[2]) do
        opts[#opts + 1] = "-DCULUA_" .. d
        threads = tonumber(d:match("^ADD4_THREADS=(%d+)")) or threads
        items = tonumber(d:match("^ITEMS4=(%d+)")) or items
      end
      local ok, prog = pcall(cuda.compile, src, {options = opts, name = "scan.cu"})
      if not ok then rows[#rows + 1] = {dt, c[1], nil, cub, copy, "build failed: " .. tostring(prog):sub(1, 60), ""} goto next end
      do
        local k = prog:module():kernel("culua_scan_lookback_" .. short .. "_add")
        local ntiles = (n + threads * items - 1) // (threads * items)
        local w = cuda.array("uint64", 1 + ntiles):fill(0)
        local values = cuda.array("uint64", 2 * ntiles)
        local base, epoch = 0, 0
        local function run()
          epoch = epoch + 1
          k:launch({grid = ntiles, block = threads}, x, y, n, 0, 0, w, values, base, epoch, ntiles, 0)
          base = base + ntiles
        end
        y:fill(0)
        run()
        local _, rel = cuda.compare(y, href)
        local ms = ms_of(run)
        rows[#rows + 1] = {dt, c[1], ms, cub, copy, "regs " .. k:attributes().num_regs,
                           rel == 0 and "same" or ("rel %.1e"):format(rel)}
        w:close(); values:close()
      end
      ::next::
    end
    x:close(); y:close(); ref:close()
    collectgarbage()
  end
  print(("\nscan, 2^28 elements, inclusive sum; GB/s count 8 bytes an element; copy: a device copy of the same bytes"))
  print(("%-7s %-32s %8s %7s %8s %7s %8s %8s  %s"):format("dtype", "kernel", "ms", "GB/s", "CUB ms", "vs CUB", "vs copy", "", "result"))
  for _, r in ipairs(rows) do
    local dt, what, ms, cub, copy, regs, same = table.unpack(r)
    local bytes = 8 * (1 << 28)
    print(("%-7s %-32s %8s %7s %8s %7s %8s %8s  %s"):format(dt, what, ms and ("%.4f"):format(ms) or "-",
          ms and ("%.0f"):format(bytes / ms / 1e6) or "-", cub and ("%.4f"):format(cub) or "-", ratio(cub, ms),
          ratio(copy, ms), regs, same))
  end
  print(("copy of 1 GiB each way (8 bytes an element): %.4f ms, %.0f GB/s"):format(rows[1][5], 8 * (1 << 28) / rows[1][5] / 1e6))
end

-- }======================================================


-- {====================================================== sort

local random_keys = require("culua.bench").random_keys

-- the median ms of a sort, keys (and values) restored before each call on the stream, not
-- waited for (as bench/sort.lua and the anchor time theirs)
local s = cuda.stream()
local e0, e1 = cuda.event(), cuda.event()
local function time_sort(pk, pv, opts, reps)
  local k = cuda.array(pk.dtype, #pk)
  local v = pv and cuda.array(pv.dtype, #pv)
  local o = {stream = s}
  for key, val in pairs(opts or {}) do o[key] = val end
  local t = {}
  for r = -2, reps do
    k:copy_from(pk, s)
    if v then v:copy_from(pv, s) end
    e0:record(s)
    cat.sort(k, v, o)
    e1:record(s)
    local ms = e0:elapsed(e1)
    if r >= 1 then t[#t + 1] = ms end
  end
  table.sort(t)
  return t[(#t + 1) // 2], k, v
end

-- label, sort options, sort.tune (tag and kernels/sort.cu -D values)
local SORT = {
  {"default", {}},
  {"window 2", {window = 2}},
  {"window 8", {window = 8}},
  {"look-back spins (p0 s0)", {}, {"p0s0", {"CULUA_SORT_LB_SPINS=0", "CULUA_SORT_LB_SLEEP=0"}}},
  {"look-back p2 s128", {}, {"p2s128", {"CULUA_SORT_LB_SPINS=2", "CULUA_SORT_LB_SLEEP=128"}}},
  {"look-back p8 s32 (default, NVRTC)", {}, {"p8s32", {}}},
}

local function sort_sweep()
  local tune = require("culua.catalog.sort").tune
  print("\nsort, uniform random keys; Gkeys/s; each line's result compared with the default's")
  print(("%-26s %-34s %8s %8s %8s %7s %7s  %s"):format("case", "configuration", "ms", "Gkeys/s", "CUB ms", "vs CUB", "target", "result"))
  for _, c in ipairs{
    {"uint32 keys 2^28", "uint32", 1 << 28, false, "sort u32 %d %d keys", 1.15, SORT},
    {"uint32 pairs 2^28", "uint32", 1 << 28, true, "sort u32 %d %d pairs", 1.05, {SORT[1], SORT[2], SORT[4]}},
    {"uint64 keys 2^27", "uint64", 1 << 27, false, "sort u64 %d %d keys", 1.10, {SORT[1], SORT[3], SORT[4]}},
  } do
    local what, dt, n, with_values, args, target, configs = table.unpack(c)
    local pk = random_keys(dt, n, 1)
    local pv = with_values and random_keys("uint32", n, 2) or nil
    local cub = run_anchor(ANCHOR, args:format(n, REPS), "sort_ms")
    local want
    for i, cf in ipairs(configs) do
      tune.tag, tune.defines = cf[3] and cf[3][1], cf[3] and cf[3][2]
      local ok, ms, k, v = pcall(time_sort, pk, pv, cf[2], REPS)
      tune.tag, tune.defines = nil, nil
      local same = "-"
      if ok then
        if i == 1 then want = {k, v}; same = "kept"
        else
          local dk, dv = cuda.compare(k, want[1]), v and cuda.compare(v, want[2]) or 0
          same = (dk == 0 and dv == 0) and "same" or "DIFFERS"
          k:close(); if v then v:close() end
        end
        print(("%-26s %-34s %8.3f %8.2f %8s %7s %7.2fx  %s"):format(what, cf[1], ms, n / ms / 1e6,
              cub and ("%.3f"):format(cub) or "-", ratio(cub, ms), target, same))
      else
        print(("%-26s %-34s failed: %s"):format(what, cf[1], tostring(ms)))
      end
      collectgarbage()
    end
    if want then want[1]:close(); if want[2] then want[2]:close() end end
    want = nil
    pk:close(); if pv then pv:close() end
    collectgarbage()
  end
end

-- }======================================================

if ONLY ~= "sort" then scan_sweep() end
if ONLY ~= "scan" then sort_sweep() end
