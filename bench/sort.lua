-- bench/sort.lua: cuda.catalog.sort against CUB's DeviceRadixSort, in the same run.
--   culua bench/sort.lua [ANCHOR] [sweep] [narrow] [sync]
-- ANCHOR (bench/anchor_cub) sorts uniform random keys and prints the median of its
-- event-timed calls:
--   ANCHOR sort u32 N REPS keys|pairs   -> "sort_ms X"   (uint32 keys, uint32 values)
--   ANCHOR sort u64 N REPS keys         -> "sort_ms X"
--   ANCHOR sort f16|bf16 N REPS keys|pairs -> "sort_ms X" (__half, __nv_bfloat16 keys of
--                                            every bit pattern; pairs: uint32 values)
-- Without it, ours alone. A sort works in place, so each timed call sorts fresh keys:
-- they (and the values) are restored from pristine device copies before the call, on
-- the same stream and not waited for, and only the call lies between the two events:
-- the first event is reached once the copy is done, by when the call's launches are
-- queued, so both sides are timed on the GPU alone (the anchor restores its keys the
-- same way; a stream synchronized before the first event also timed the host's way to
-- the first launch, ours from Lua, and not CUB's: bench/RESULTS.md, session 24; "sync"
-- times both sides that way, the anchor with ANCHOR_SYNC=1). Figures:
-- uint32 keys and pairs at 2^28 and uint64 keys at 2^27 in Gkeys/s (targets >= 1.0x
-- CUB), float16 and bfloat16 keys at 2^28 (every bit pattern, NaNs among them, as the
-- anchor makes them; target >= 1.0x CUB for float16), argsort of the float16 keys (target
-- <= 3.3 ms; CUB's sort of the same keys with uint32 values beside it, for orientation: it
-- writes the keys too), and a sort of 2^16 uint32 keys a call (target <= 30 us), every variant. With
-- "sweep": where the time of a 2^28 sort goes (a pass, the rest), then the 2^28 and 2^27
-- sorts and the 2^16 one again in other shapes (threads x items, min_blocks, the
-- look-back window; NVRTC builds the shapes not prebuilt on first use), a line each, to
-- choose the prebuilt ones. With "narrow", the sweep of the float16 sort's and argsort's
-- shapes alone (kernels/sort.cu's SORT_WIDE_U16_*).
local cuda = require "cuda"
local cat = cuda.catalog
local words = {}
for _, a in ipairs(arg) do words[a] = true end
local ANCHOR = arg[1] ~= "sweep" and arg[1] ~= "sync" and arg[1] ~= "narrow" and arg[1] or nil
local SWEEP, SYNC, NARROW = words.sweep, words.sync, words.narrow
local REPS = 15

require("culua.bench").need_devices()
local dev = cuda.device()
local s = cuda.stream()
local e0, e1 = cuda.event(), cuda.event()

print(("cuda.catalog.sort on %s, uniform random keys, median of %d%s%s"):format(dev.name, REPS,
      ANCHOR and (", anchor " .. ANCHOR) or " (no anchor given: ours alone)",
      SYNC and ", synchronized before each first event (the host's way to the first launch timed)" or ""))
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end

local run_anchor = require "culua.anchor"
local function anchor(args)
  return run_anchor(ANCHOR and (SYNC and "ANCHOR_SYNC=1 " or "") .. ANCHOR, "sort " .. args, "sort_ms")
end

local median = require("culua.bench").median

local random_keys = require("culua.bench").random_keys

-- n keys of a 2-byte dtype (float16, bfloat16), every bit pattern
local function random_bits16(dt, n, seed)
  return cuda.array(dt, n):copy_from(cuda.host_array("uint16", n):random(seed, 0, 0xffff):bytes())
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
    if SYNC then s:synchronize() end
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

-- the median ms of one argsort call; the keys are copied again before each call (they
-- are not changed), so that the GPU is busy while the host makes the call, as the sorts'
-- restores do; the positions are freed after each (outside the events)
local function time_argsort(pk, reps, opts)
  local k = cuda.array(pk.dtype, #pk)
  local o = {stream = s}
  for key, val in pairs(opts or {}) do o[key] = val end
  local t = {}
  for r = -2, reps do
    k:copy_from(pk, s)
    if SYNC then s:synchronize() end
    e0:record(s)
    local idx = cat.argsort(k, o)
    e1:record(s)
    local ms = e0:elapsed(e1)
    idx:close()
    if r >= 1 then t[#t + 1] = ms end
  end
  return median(t)
end

-- and 2^20 float16 keys, and their argsort, against the reference
do
  local n = (1 << 20) + 7
  local pk = random_bits16("float16", n, 97)
  local _, k = time_sort(pk, nil, 1)
  local hk = pk:copy_to(cuda.host_array("float16", n))
  local idx = cat.argsort(pk)
  local want = cat.reference.argsort(hk)
  cat.reference.sort(hk)
  if k:bytes() ~= hk:bytes() or idx:bytes() ~= want:bytes() then
    print("WRONG: the sort or argsort of 2^20 + 7 float16 keys differs from the reference")
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

for _, c in ipairs(NARROW and {} or {   -- (with "narrow", the 16-bit figures and sweep alone)
  {"uint32 keys n = 2^28", "uint32", 1 << 28, false, "u32 %d %d keys"},
  {"uint32 pairs n = 2^28", "uint32", 1 << 28, true, "u32 %d %d pairs"},
  {"uint64 keys n = 2^27", "uint64", 1 << 27, false, "u64 %d %d keys"},
}) do
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

-- 16-bit float keys at 2^28: sorts against CUB, argsort against its target
for _, c in ipairs{{"float16 keys n = 2^28", "float16", "f16"}, {"bfloat16 keys n = 2^28", "bfloat16", "bf16"}} do
  local what, dt, ct = table.unpack(c)
  local n = 1 << 28
  local pk = random_bits16(dt, n, 7)
  local ms = time_sort(pk, nil, REPS)
  line(what, n, ms, anchor(("%s %d %d keys"):format(ct, n, REPS)), 1.0)
  if dt == "float16" then
    local am = time_argsort(pk, REPS)
    local cub = anchor(("f16 %d %d pairs"):format(n, REPS))
    print(("%-28s %9.3f ms %7.2f Gkeys/s   (target <= 3.3 ms)%s"):format("float16 argsort n = 2^28", am, n / am / 1e6,
          cub and ("   CUB keys + uint32 values %.3f ms"):format(cub) or ""))
    targets[#targets + 1] = ("float16 argsort %s"):format(am <= 3.3 and "met" or "NOT met")
  end
  pk = nil
  collectgarbage()
  collectgarbage()
end

-- 2^16 keys: a call from Lua as a user makes it (checks and launches included), in a
-- loop of 100 on the default stream; then one call between two events, and CUB's
if not NARROW then
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

-- one sweep line: a configuration's median, or why it did not run
local function sweep_line(what, n, pk, pv, opts, reps)
  local ok, ms = pcall(time_sort, pk, pv, reps or 5, opts)
  if ok then line(what, n, ms) else print(("%-40s failed: %s"):format(what, tostring(ms))) end
  collectgarbage()   -- the sorted copies (a GiB or two) before the next line makes its own
  collectgarbage()
  return ok and ms
end

-- a configuration's name: threads x items [bN] [wN]
local function shape_name(c)
  local s = ("%dx%d"):format(c.threads or 256, c.items)
  if c.min_blocks then s = s .. " b" .. c.min_blocks end
  if c.window then s = s .. " w" .. c.window end
  if c.fused == false then s = s .. " not fused" end
  return s
end

if SWEEP then
  -- where a sort's time goes: uint32 keys sorted on 16 and on 32 bits (2 and 4 passes, no
  -- copy back), so that a pass costs half the difference and the rest is the histogram
  -- kernel and the launches
  do
    local n = 1 << 28
    local pk = random_keys("uint32", n, 1)
    local t2 = sweep_line("uint32 keys 2^28 end_bit 16", n, pk, nil, {end_bit = 16})
    local t4 = sweep_line("uint32 keys 2^28 end_bit 32", n, pk, nil, {})
    if t2 and t4 then
      print(("  a pass %.3f ms (%.0f GB/s moved), the rest %.3f ms"):format((t4 - t2) / 2,
            2 * 4 * n / ((t4 - t2) / 2) / 1e6, t2 - (t4 - t2)))
    end
    pk = nil
    collectgarbage()
    collectgarbage()
  end
  -- shapes (threads x items, NVRTC builds those not prebuilt), min_blocks (bN) and the
  -- look-back window (wN; default 4); the first line of each is the 256-thread default of
  -- keys alone (32-bit keys: still the default), and 512x12 (pairs) and 512x10 (64-bit keys)
  -- are the prebuilt defaults of those
  local shapes32 = {
    {items = 15}, {items = 15, window = 1}, {items = 15, window = 8}, {items = 12}, {items = 18}, {items = 22},
    {items = 15, min_blocks = 3}, {threads = 384, items = 15}, {threads = 384, items = 20},
    {threads = 384, items = 20, min_blocks = 2}, {threads = 512, items = 12}, {threads = 512, items = 16},
    {threads = 512, items = 18, min_blocks = 1},
  }
  local shapes64 = {
    {items = 12}, {items = 12, window = 8}, {items = 9}, {items = 16}, {items = 12, min_blocks = 3},
    {threads = 384, items = 12}, {threads = 384, items = 12, min_blocks = 2}, {threads = 512, items = 9},
    {threads = 512, items = 10},
  }
  for _, c in ipairs{
    {"uint32 keys n = 2^28", "uint32", 1 << 28, false, shapes32},
    {"uint32 pairs n = 2^28", "uint32", 1 << 28, true, shapes32},
    {"uint64 keys n = 2^27", "uint64", 1 << 27, false, shapes64},
  } do
    local what, dt, n, with_values, shapes = table.unpack(c)
    local pk = random_keys(dt, n, 1)
    local pv = with_values and random_keys("uint32", n, 2) or nil
    for _, sh in ipairs(shapes) do sweep_line(("%s %s"):format(what, shape_name(sh)), n, pk, pv, sh) end
    pk, pv = nil, nil
    collectgarbage()
    collectgarbage()
  end
  -- 2^16 keys: smaller tiles make more blocks, each with less to rank before its look-back
  do
    local n = 1 << 16
    local pk = random_keys("uint32", n, 3)
    local k = cuda.array("uint32", n):copy_from(pk)
    for _, sh in ipairs{{items = 15}, {items = 15, fused = false}, {items = 15, window = 8}, {items = 8},
                        {items = 8, window = 8}, {items = 4, window = 8}, {items = 4, window = 8, fused = false},
                        {threads = 512, items = 4, window = 8}, {threads = 1024, items = 8}} do
      local o = {}
      for key, v in pairs(sh) do o[key] = v end
      local ok, err = pcall(cat.sort, k, o)   -- builds the shape first
      if not ok then
        print(("uint32 keys 2^16 %-20s failed: %s"):format(shape_name(sh), tostring(err)))
      else
        local calls = 100
        local r = cuda.bench(function () for _ = 1, calls do cat.sort(k, o) end end, {warmup = 2, reps = REPS})
        local one = time_sort(pk, nil, 5 * REPS, sh)
        print(("uint32 keys 2^16 %-20s %8.2f us a call from Lua, %8.2f us between events"):format(
              shape_name(sh), r.median * 1000 / calls, one * 1000))
      end
    end
  end
end

if SWEEP or NARROW then
  -- 16-bit keys: their shape for keys alone (384 x 20, as 32-bit keys) and for argsort
  -- (512 x 13, as 32-bit keys with 4-byte values), against others: CUB's 512 x 38 at one
  -- block a multiprocessor among them
  local n = 1 << 28
  local pk = random_bits16("float16", n, 7)
  for _, sh in ipairs{{threads = 384, items = 20}, {threads = 384, items = 24}, {threads = 384, items = 28},
                      {threads = 256, items = 20}, {threads = 256, items = 24}, {threads = 320, items = 24},
                      {threads = 512, items = 13}, {threads = 512, items = 24, min_blocks = 1},
                      {threads = 512, items = 38, min_blocks = 1}, {threads = 384, items = 20, window = 8}} do
    sweep_line(("float16 keys 2^28 %s"):format(shape_name(sh)), n, pk, nil, sh)
  end
  for _, sh in ipairs{{threads = 512, items = 13}, {threads = 512, items = 12}, {threads = 384, items = 16},
                      {threads = 384, items = 20}, {threads = 512, items = 16, min_blocks = 1},
                      {threads = 512, items = 13, window = 4}} do
    local ok, ms = pcall(time_argsort, pk, 5, sh)
    print(("%-40s %s"):format("float16 argsort 2^28 " .. shape_name(sh), ok and ("%9.3f ms"):format(ms) or "failed: " .. tostring(ms)))
    collectgarbage()
  end
end

if #targets > 0 then print("targets: " .. table.concat(targets, "; ")) end
