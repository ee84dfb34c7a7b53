-- bench/sort.lua: cuda.catalog.sort against CUB's DeviceRadixSort, in the same run.
--   culua bench/sort.lua [ANCHOR] [sweep]
-- ANCHOR (bench/anchor_cub) sorts uniform random keys and prints the median of its
-- event-timed calls:
--   ANCHOR sort u32 N REPS keys|pairs   -> "sort_ms X"   (uint32 keys, uint32 values)
--   ANCHOR sort u64 N REPS keys         -> "sort_ms X"
-- Without it, ours alone. A sort works in place, so each timed call sorts fresh keys:
-- they (and the values) are restored from pristine device copies before the call, the
-- stream is synchronized, and only the call lies between the two events. Figures:
-- uint32 keys and pairs at 2^28 and uint64 keys at 2^27 in Gkeys/s (targets >= 1.0x
-- CUB), and a sort of 2^16 uint32 keys a call (target <= 30 us), every variant. With
-- "sweep", the 2^28 and 2^27 sorts again with other keys a thread (items =, compiled by
-- NVRTC on first use), to choose the prebuilt counts.
local cuda = require "cuda"
local cat = cuda.catalog
local ANCHOR = arg[1] ~= "sweep" and arg[1] or nil
local SWEEP = arg[1] == "sweep" or arg[2] == "sweep"
local REPS = 15

if cuda.device_count() == 0 then
  print("bench/sort.lua needs a CUDA device")
  os.exit(1)
end
local dev = cuda.device()
local s = cuda.stream()
local e0, e1 = cuda.event(), cuda.event()

print(("cuda.catalog.sort on %s, uniform random keys, median of %d%s"):format(dev.name, REPS,
      ANCHOR and (", anchor " .. ANCHOR) or " (no anchor given: ours alone)"))
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end

local run_anchor = require "culua.anchor"
local function anchor(args) return run_anchor(ANCHOR, "sort " .. args, "sort_ms") end

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

-- n uniform random keys of every bit pattern, dtype uint32 or uint64, on the device
local function random_keys(dt, n, seed)
  local d = cuda.array(dt, n)
  if dt == "uint32" then return d:copy_from(cuda.host_array("uint32", n):random(seed, 0, 0xffffffff)) end
  -- uint64 takes no negative bounds: every bit pattern comes as int64, moved as bytes
  return d:copy_from(cuda.host_array("int64", n):random(seed, math.mininteger, math.maxinteger):bytes())
end

-- the median ms of one sort call, keys (and values) restored before each from pristine copies
local function time_sort(pk, pv, reps, opts)
  local k = cuda.array(pk.dtype, #pk)
  local v = pv and cuda.array(pv.dtype, #pv)
  local o = {stream = s}
  for key, val in pairs(opts or {}) do o[key] = val end
  local t = {}
  for r = -2, reps do   -- three warm-up calls
    k:copy_from(pk, s)
    if v then v:copy_from(pv, s) end
    s:synchronize()
    e0:record(s)
    cat.sort(k, v, o)
    e1:record(s)
    local ms = e0:elapsed(e1)
    if r >= 1 then t[#t + 1] = ms end
  end
  return median(t), k, v
end

-- what we time sorts: 2^20 pairs against the reference
do
  local n = (1 << 20) + 7
  local pk, pv = random_keys("uint32", n, 99), random_keys("uint32", n, 98)
  local _, k, v = time_sort(pk, pv, 1)
  local hk, hv = pk:copy_to(cuda.host_array("uint32", n)), pv:copy_to(cuda.host_array("uint32", n))
  cat.reference.sort(hk, hv)
  if k:bytes() ~= hk:bytes() or v:bytes() ~= hv:bytes() then
    print("WRONG: the sort of 2^20 + 7 pairs differs from the reference")
    os.exit(1)
  end
end

local targets = {}
local function line(what, n, ms, cub_ms, target)
  local s1 = ("%-28s %9.3f ms %7.2f Gkeys/s"):format(what, ms, n / ms / 1e6)
  if cub_ms then
    local ratio = cub_ms / ms
    s1 = s1 .. ("   CUB %9.3f ms %7.2f Gkeys/s   %.2fx CUB (target >= %.1fx)"):format(cub_ms, n / cub_ms / 1e6, ratio, target)
    targets[#targets + 1] = ("%s %s"):format(what, ratio >= target and "met" or "NOT met")
  end
  print(s1)
end

for _, c in ipairs{
  {"uint32 keys n = 2^28", "uint32", 1 << 28, false, "u32 %d %d keys"},
  {"uint32 pairs n = 2^28", "uint32", 1 << 28, true, "u32 %d %d pairs"},
  {"uint64 keys n = 2^27", "uint64", 1 << 27, false, "u64 %d %d keys"},
} do
  local what, dt, n, with_values, args = table.unpack(c)
  local pk = random_keys(dt, n, 1)
  local pv = with_values and random_keys("uint32", n, 2) or nil
  local ms = time_sort(pk, pv, REPS)
  pk, pv = nil, nil
  collectgarbage()
  collectgarbage()
  line(what, n, ms, anchor(args:format(n, REPS)), 1.0)
  if dt == "uint32" and not with_values then
    local pk2 = random_keys(dt, n, 1)
    line("  variant lsd", n, (time_sort(pk2, nil, 3, {variant = "lsd"})))
    pk2 = nil
    collectgarbage()
  end
end

-- 2^16 keys: a call from Lua as a user makes it (checks and launches included), in a
-- loop of 100 on the default stream; then one call between two events, and CUB's
do
  local n = 1 << 16
  local pk = random_keys("uint32", n, 3)
  local k = cuda.array("uint32", n):copy_from(pk)
  local calls = 100
  local r = cuda.bench(function () for _ = 1, calls do cat.sort(k) end end, {warmup = 2, reps = REPS})
  local us = r.median * 1000 / calls
  print(("%-28s %9.2f us a call (target <= 30 us)"):format("uint32 keys n = 2^16 from Lua", us))
  targets[#targets + 1] = ("n = 2^16 %s"):format(us <= 30 and "met" or "NOT met")
  local one = time_sort(pk, nil, 5 * REPS)
  local cub = anchor(("u32 %d %d keys"):format(n, 5 * REPS))
  print(("%-28s %9.2f us%s"):format("  one call between events", one * 1000, cub and ("   CUB %.2f us"):format(cub * 1000) or ""))
  local pv = random_keys("uint32", n, 4)
  print(("%-28s %9.2f us"):format("  pairs, between events", time_sort(pk, pv, 5 * REPS) * 1000))
  print(("%-28s %9.2f us"):format("  variant lsd", time_sort(pk, nil, REPS, {variant = "lsd"}) * 1000))
  local small = random_keys("uint32", 3000, 5)
  print(("%-28s %9.2f us"):format("n = 3000 (one block)", time_sort(small, nil, 5 * REPS) * 1000))
  local w = random_keys("uint32", 32, 6)
  print(("%-28s %9.2f us"):format("n = 32, variant warp", time_sort(w, nil, 5 * REPS, {variant = "warp"}) * 1000))
end

if SWEEP then
  print("keys a thread (items; the prebuilt: 15 for 32-bit keys, 12 for 64-bit)")
  for _, c in ipairs{
    {"uint32 keys n = 2^28", "uint32", 1 << 28, false, {9, 12, 15, 17, 18}},
    {"uint32 pairs n = 2^28", "uint32", 1 << 28, true, {9, 12, 15, 17, 18}},
    {"uint64 keys n = 2^27", "uint64", 1 << 27, false, {8, 10, 12, 14, 16, 18}},
  } do
    local what, dt, n, with_values, counts = table.unpack(c)
    local pk = random_keys(dt, n, 1)
    local pv = with_values and random_keys("uint32", n, 2) or nil
    for _, items in ipairs(counts) do
      line(("%s items %d"):format(what, items), n, time_sort(pk, pv, 5, {items = items}))
    end
    pk, pv = nil, nil
    collectgarbage()
    collectgarbage()
  end
end

if #targets > 0 then print("targets: " .. table.concat(targets, "; ")) end
