-- bench/soak.lua: a soak test. Each phase repeats one kind of work many times
-- and samples the process's resident memory and the device's used memory as it
-- goes; a leak shows as a slope, where a benchmark would show only speed.
--   culua bench/soak.lua [OUTDIR] [SCALE]
-- OUTDIR (default ".") receives soak.csv and, with gnuplot, soak_rss.png and
-- soak_device.png; SCALE (default 1) divides every count, for a quick run.
-- Phases, at SCALE 1:
--   launch   10^6 launches of a trivial kernel (prepared and plain, alternating);
--            the kernel counts itself, so every launch is checked to have run
--   alloc    10^5 allocate/free cycles of 1 B .. 64 MiB (log-uniform, from a
--            fixed seed) through a pool of 8 live arrays, every 16th one filled
--   compile  10^4 cuda.compile calls of one source, all disk-cache hits; every
--            10th program is loaded as a module and closed
--   stream   10^4 streams and 10^4 events, each used once and closed
--   fault    a child culua whose kernel writes to an illegal address must exit
--            with an error naming it; then a fresh child must run a kernel
-- A phase is flat when, from its second sample (warm: first-use costs are
-- paid) to its last, RSS grows by at most RSS_TOL and the device's used memory
-- by at most DEV_TOL. Device memory is the device's, not this process's:
-- another process on the GPU moves it too, so run the soak on an idle GPU.
-- Exits 0 when every phase is flat and the fault cycle behaved, 1 otherwise,
-- 2 on bad arguments, 77 (skipped) without a GPU.
local cuda = require "cuda"
local plot = require "culua.plot"

local RSS_TOL, DEV_TOL = 8, 2          -- MiB
local SAMPLES = 10                     -- samples a phase, after the one at its start
local MiB = 1024 * 1024

local function usage(msg)
  io.stderr:write("bench/soak.lua: ", msg, "\nusage: culua bench/soak.lua [OUTDIR] [SCALE]\n")
  os.exit(2)
end

local outdir = arg[1] or "."
local scale = math.tointeger(tonumber(arg[2] or "1"))
if not scale or scale < 1 then usage("SCALE must be a positive integer, not '" .. tostring(arg[2]) .. "'") end

-- the counts, divided by SCALE but never below 1
local function count(n) return math.max(1, n // scale) end

-- refuse now what would otherwise fail at the end, or take hours; a file the
-- probe made is removed again, so a run that stops here leaves nothing behind
if os.getenv("CULUA_CACHE") == "off" then
  usage("the compile phase measures cache hits, and CULUA_CACHE=off turns the cache off")
end
require("culua.bench").need_devices()
do
  local csv = outdir .. "/soak.csv"
  local existed = io.open(csv, "r")
  if existed then existed:close() end
  local probe = io.open(csv, "a")
  if not probe then usage("cannot write " .. csv) end
  probe:close()
  if not existed then os.remove(csv) end
end

local dev = cuda.device(0)

-- the interpreter running us, for the children: arg's most negative index
-- (arg[-1] is an option's argument after `culua -e ... bench/soak.lua`)
local culua = "culua"
do
  local i = -1
  while arg[i] do culua = arg[i]; i = i - 1 end
end

-- {====== sampling

local function rss_mib()
  local f = io.open("/proc/self/status")
  if not f then return 0 / 0 end
  for line in f:lines() do
    local kb = line:match("^VmRSS:%s*(%d+)%s*kB")
    if kb then f:close(); return tonumber(kb) / 1024 end
  end
  f:close()
  return 0 / 0
end

local function device_used_mib()
  local free, total = dev:memory_info()
  return (total - free) / MiB
end

local rows = {}            -- every sample: {phase, sample, ops, rss, dev, elapsed}
local phases = {}          -- {name =, samples =, ok =, note =, flat =, ...} in order

-- a sample is taken with the device idle and Lua's garbage collected, so that
-- what remains is what the work kept
local function sample(ph, ops)
  cuda.synchronize()
  collectgarbage("collect")
  collectgarbage("collect")
  local r = {ph.name, #ph.samples + 1, ops, rss_mib(), device_used_mib(), cuda.clock() - ph.t0}
  ph.samples[#ph.samples + 1] = r
  rows[#rows + 1] = r
  print(("%-8s %6d %10d %10.1f %12.1f %10.2f"):format(table.unpack(r)))
  io.stdout:flush()
end

-- run body(i) for i = 1..n, sampling at the start and after each tenth
-- (after between(), when given, has put down what the work holds)
local function phase(name, n, body, between)
  local ph = {name = name, samples = {}, t0 = cuda.clock(), n = n}
  phases[#phases + 1] = ph
  sample(ph, 0)
  local points = math.min(SAMPLES, n)
  local done = 0
  for k = 1, points do
    local upto = n * k // points
    for i = done + 1, upto do body(i) end
    done = upto
    if between then between() end
    sample(ph, done)
  end
  return ph
end

-- flat from the second sample to the last (the first is before any work)
local function judge(ph)
  local s = ph.samples
  local a, b = s[math.min(2, #s)], s[#s]
  ph.rss_growth, ph.dev_growth = b[4] - a[4], b[5] - a[5]
  ph.flat = ph.rss_growth <= RSS_TOL and ph.dev_growth <= DEV_TOL
  if ph.ok == nil then ph.ok = true end
end

-- }======

-- deterministic pseudo-random integers (a 64-bit LCG, Knuth's MMIX constants,
-- its high bits): the same sizes on every machine and every run
local seed = 20261122
local function rand(lo, hi)
  seed = seed * 6364136223846793005 + 1442695040888963407
  return lo + ((seed >> 33) % (hi - lo + 1))
end

local src = [[
extern "C" __global__ void soak_tick(unsigned *count) { if (threadIdx.x == 0) atomicAdd(count, 1u); }
]]

local started = cuda.clock()
print(("soak on %s (%s), SCALE %d, tolerances: RSS +%d MiB, device +%d MiB from a phase's second sample to its last")
      :format(dev.name, dev.arch, scale, RSS_TOL, DEV_TOL))
print(("%-8s %6s %10s %10s %12s %10s"):format("phase", "sample", "ops", "RSS MiB", "device MiB", "elapsed s"))

-- {====== launch

local N_LAUNCH = count(1000000)
local mod = cuda.compile(src):module()
local tick = mod:kernel("soak_tick")
local counter = cuda.array("uint32", 1):fill(0)
local cfg = {grid = 1, block = 32}
local go = tick:prepare(cfg)
local ph = phase("launch", N_LAUNCH, function (i)
  if i % 2 == 0 then go(counter) else tick:launch(cfg, counter) end
end)
local ran = counter:totable()[1]
if ran ~= N_LAUNCH then
  ph.ok, ph.note = false, ("the kernel ran %d times for %d launches"):format(ran, N_LAUNCH)
else
  ph.note = ("all %d launches ran"):format(N_LAUNCH)
end
counter:close()
judge(ph)

-- }======

-- {====== alloc

local N_ALLOC, POOL = count(100000), 8
local pool, filled = {}, 0
local log2max = 26                                 -- 64 MiB
-- log-uniform sizes: as many 1-byte arrays as 32 MiB ones, so both the
-- driver's small-block suballocator and its large mappings are exercised
local function size()
  local e = rand(0, log2max)
  local lo = 1 << (e == 0 and 0 or e - 1)
  return rand(lo, 1 << e)
end
local function drain()
  for j = 1, POOL do if pool[j] then pool[j]:close(); pool[j] = nil end end
end
ph = phase("alloc", N_ALLOC, function (i)
  local j = rand(1, POOL)
  if pool[j] then pool[j]:close() end
  local x = cuda.array("uint8", size())
  if i % 16 == 0 then x:fill(i % 251); filled = filled + 1 end
  pool[j] = x
end, drain)
ph.note = ("%d arrays filled, %d bytes in use after"):format(filled, cuda.memory_in_use())
judge(ph)

-- }======

-- {====== compile

local N_COMPILE = count(10000)
local misses, loads = 0, 0
cuda.compile(src)                                  -- warm: the entry exists from here on
ph = phase("compile", N_COMPILE, function (i)
  local p = cuda.compile(src)
  if not p.cached then misses = misses + 1 end
  if i % 10 == 0 then
    local m = p:module()
    m:kernel("soak_tick")
    m:close()
    loads = loads + 1
  end
end)
if misses > 0 then
  ph.ok, ph.note = false, ("%d of %d compiles missed the disk cache (CULUA_CACHE=%s)")
                          :format(misses, N_COMPILE, os.getenv("CULUA_CACHE") or "")
else
  ph.note = ("%d cache hits, %d modules loaded and closed"):format(N_COMPILE, loads)
end
judge(ph)

-- }======

-- {====== stream

local N_STREAM = count(10000)
counter = cuda.array("uint32", 1):fill(0)
ph = phase("stream", N_STREAM, function (i)
  local s = cuda.stream{non_blocking = i % 2 == 0}
  local e = cuda.event{timing = i % 3 == 0}
  tick:launch({grid = 1, block = 32, stream = s}, counter)
  e:record(s)
  e:synchronize()
  e:close()
  s:close()
end)
ran = counter:totable()[1]
if ran ~= N_STREAM then
  ph.ok, ph.note = false, ("the kernel ran %d times on %d streams"):format(ran, N_STREAM)
else
  ph.note = ("%d streams and events, a launch on each"):format(N_STREAM)
end
counter:close()
judge(ph)

-- }======

-- {====== fault

-- run Lua source in a child culua; returns its output and exit status. The
-- child gets a time limit where timeout(1) exists: a hang is a failure too.
local function child(code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local limit = os.execute("command -v timeout >/dev/null 2>&1") and "timeout 120 " or ""
  local p = io.popen(limit .. "'" .. culua:gsub("'", "'\\''") .. "' - < " .. path .. " 2>&1")
  local out = p:read("a")
  local _, how, status = p:close()
  os.remove(path)
  return out, how == "exit" and status or 128 + status
end

local faulty = [[
local cuda = require "cuda"
local k = cuda.compile('extern "C" __global__ void soak_oob(float *x) { x[threadIdx.x + (1ull << 40)] = 1.0f; }'):module():kernel("soak_oob")
local x = cuda.array("float32", 32)
k:launch({grid = 1, block = 32}, x)
cuda.synchronize()
print("no fault")
]]
local fresh = [[
local cuda = require "cuda"
local y = cuda.array("float32", 32):fill(0)
cuda.compile('extern "C" __global__ void soak_ok(float *x) { x[threadIdx.x] = 2.0f; }'):module():kernel("soak_ok"):launch({grid = 1, block = 32}, y)
print("value", y:totable()[32])
]]
local fault_out, fault_status, fresh_out, fresh_status
ph = phase("fault", 3, function (i)
  if i == 1 then
    fault_out, fault_status = child(faulty)
  elseif i == 2 then
    fresh_out, fresh_status = child(fresh)
  else
    -- and this process's own context was never touched by the child's fault
    counter = cuda.array("uint32", 1):fill(0)
    go(counter)
    ran = counter:totable()[1]
    counter:close()
  end
end)
local why = {}
if fault_status == 0 or fault_status == 124 then
  why[#why + 1] = fault_status == 0 and "the faulting child exited 0" or "the faulting child hung"
end
if not fault_out:match("CUDA_ERROR_ILLEGAL_ADDRESS") or not fault_out:match("'soak_oob'") then
  why[#why + 1] = "the faulting child's error does not name CUDA_ERROR_ILLEGAL_ADDRESS and 'soak_oob'"
end
if fresh_status ~= 0 or not fresh_out:match("value\t2%.0") then
  why[#why + 1] = ("the fresh child failed (status %d)"):format(fresh_status)
end
if ran ~= 1 then why[#why + 1] = "this process's own launch did not run afterwards" end
if #why > 0 then
  ph.ok, ph.note = false, table.concat(why, "; ")
  io.stderr:write("---- faulting child (status ", fault_status, "):\n", fault_out,
                  "---- fresh child (status ", fresh_status, "):\n", fresh_out)
else
  ph.note = ("the faulting child exited %d saying %s; a fresh child and this process ran kernels")
            :format(fault_status, fault_out:match("[^\n]*CUDA_ERROR_ILLEGAL_ADDRESS[^\n]*"):sub(1, 120))
end
judge(ph)

-- }======

-- {====== verdicts and files

print()
print(("%-8s %12s %12s  %s"):format("phase", "RSS growth", "dev growth", "verdict"))
local all = true
for _, p in ipairs(phases) do
  local good = p.flat and p.ok
  all = all and good
  print(("%-8s %+9.1f MiB %+9.1f MiB  %s%s"):format(p.name, p.rss_growth, p.dev_growth,
        good and "flat" or (p.flat and "FAILED" or "NOT flat"),
        p.note and (": " .. p.note) or ""))
end

local csv = outdir .. "/soak.csv"
plot.csv(csv, {"phase", "sample", "ops", "rss_mib", "device_used_mib", "elapsed_s"}, rows)
print("wrote " .. csv)
local function picture(file, col, ylabel)
  local series = {}
  for _, p in ipairs(phases) do
    local x, y = {}, {}
    for i, r in ipairs(p.samples) do x[i], y[i] = r[2], r[col] end
    series[#series + 1] = {name = p.name, x = x, y = y}
  end
  local ok, whynot = plot.lines{output = outdir .. "/" .. file, title = "soak on " .. dev.name,
                                xlabel = "sample (start, then after each tenth of the phase)",
                                ylabel = ylabel, series = series}
  print(ok and ("wrote " .. outdir .. "/" .. file) or ("no " .. file .. ": " .. whynot))
end
picture("soak_rss.png", 4, "RSS (MiB)")
picture("soak_device.png", 5, "device memory used (MiB)")
print(("%s in %.0f s"):format(all and "soak: every phase flat" or "soak: FAILED", cuda.clock() - started))
os.exit(all and 0 or 1)

-- }======
