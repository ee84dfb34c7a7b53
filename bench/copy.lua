-- bench/copy.lua: pinned host<->device copies of 1 GiB from Lua, against C
-- (bench/anchor) in the same run.   culua bench/copy.lua [ANCHOR] [BYTES] [REPS]
local cuda = require "cuda"
require("culua.bench").need_devices()
local anchor = arg[1] or "bench/anchor"
local bytes, REPS = tonumber(arg[2]) or (1 << 30), tonumber(arg[3]) or 7

local n = bytes // 4
local h = cuda.host_array("float32", n, {pinned = true}):random(1)
local d = cuda.array("float32", n)
local function gbs(fn)
  local r = cuda.bench(fn, {warmup = 1, reps = REPS})
  return bytes / (r.median * 1e-3) / 1e9
end
local htod = gbs(function () d:copy_from(h) end)
local dtoh = gbs(function () d:copy_to(h) end)

local out = io.popen(("%s copy %d %d"):format(anchor, bytes, REPS)):read("a")
local c_htod, c_dtoh = tonumber(out:match("htod_gbs (%S+)")), tonumber(out:match("dtoh_gbs (%S+)"))
if not c_htod then error("anchor failed: " .. out) end
print(("pinned copies of %.2f GiB on %s, %d reps, median"):format(bytes / 2^30, cuda.device().name, REPS))
print(("%-22s %10s %10s %7s"):format("", "culua", "C", "ratio"))
print(("%-22s %6.2f GB/s %6.2f GB/s %6.3fx"):format("host to device", htod, c_htod, htod / c_htod))
print(("%-22s %6.2f GB/s %6.2f GB/s %6.3fx"):format("device to host", dtoh, c_dtoh, dtoh / c_dtoh))
print(("target: >= 0.98x C both ways: %s"):format((htod / c_htod >= 0.98 and dtoh / c_dtoh >= 0.98) and "met" or "NOT met"))
