-- allreduce.lua: seed 003's NCCL all-reduce program as a culua script.
-- One process drives every GPU (cuda.nccl.comm_all, as ncclCommInitAll), each
-- with a send and a receive buffer and a stream of its own; one NCCL group
-- reduces them all. Sums are checked, then sizes from 1 MiB to 1 GiB are
-- timed with events on every GPU's stream (the slowest GPU counts), and the
-- algorithm and bus bandwidths are printed as nccl-tests defines them:
-- algbw = bytes / time, busbw = algbw * 2(n-1)/n for n GPUs.
--
--   culua examples/allreduce.lua [SIZE ...] [reps=N] [devices=0,1]
--   SIZE: bytes a GPU, with K, M or G (binary), e.g. 128M 1G; default 1M..1G
--
-- Keep NCCL_NVLS_ENABLE=0 on machines whose GPUs share NVLink multicast.

local cuda = require "cuda"
local nccl = cuda.nccl

local sizes, reps, devices = {}, 20, nil
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "reps" then reps = math.tointeger(tonumber(v)) or error("reps must be an integer")
  elseif k == "devices" then
    devices = {}
    for d in v:gmatch("%d+") do devices[#devices + 1] = math.tointeger(tonumber(d)) end
  else
    local num, unit = a:match("^(%d+)([KMG]?)$")
    if not num then error(("allreduce.lua: a size like 128M expected, got '%s'"):format(a)) end
    sizes[#sizes + 1] = tonumber(num) * ({[""] = 1, K = 2^10, M = 2^20, G = 2^30})[unit]
  end
end
if #sizes == 0 then
  for p = 20, 30 do sizes[#sizes + 1] = 2^p end
end

local ndev = require("culua.bench").need_devices()
local ok, why = nccl.available()
if not ok then print("NCCL is not available: " .. why); return end
if not devices then
  devices = {}
  for d = 0, ndev - 1 do devices[#devices + 1] = d end
end
local n = #devices
local major, minor, patch = nccl.version()
print(("NCCL %d.%d.%d, %d GPU%s: %s"):format(major, minor, patch, n, n == 1 and "" or "s",
      table.concat((function () local t = {} for i, d in ipairs(devices) do t[i] = cuda.device(d).name end return t end)(), ", ")))

-- the seed's device_t: send and receive buffers and a stream, a GPU
local comms = nccl.comm_all(devices)
local largest = math.max(table.unpack(sizes)) // 4
local dev = {}
for i, d in ipairs(devices) do
  dev[i] = {send = cuda.array("float32", largest, {device = d}), recv = cuda.array("float32", largest, {device = d}),
            stream = cuda.stream{device = d}, e0 = nil, e1 = nil}
  cuda.device(d):use()
  dev[i].e0, dev[i].e1 = cuda.event(), cuda.event()
end
cuda.device(devices[1]):use()

local function allreduce(count)
  nccl.group(function ()
    for i = 1, n do
      comms[i]:all_reduce(dev[i].send:view(1, count), dev[i].recv:view(1, count), {op = "sum", stream = dev[i].stream})
    end
  end)
end

-- the check: GPU i sends i everywhere, so every element of every recv is n(n+1)/2
local count = math.min(largest, 1 << 20)
for i = 1, n do dev[i].send:fill(i); dev[i].recv:fill(0 / 0) end
allreduce(count)
local want, bad = n * (n + 1) / 2, 0
for i = 1, n do
  dev[i].stream:synchronize()
  local h = cuda.host_array("float32", count)
  dev[i].recv:view(1, count):copy_to(h)
  for j = 1, count, 4099 do if h[j] ~= want then bad = bad + 1 end end
  if h[count] ~= want then bad = bad + 1 end
end
print(bad == 0 and ("Check: every element is %g on every GPU: SUCCESS"):format(want)
      or ("Check FAILED: %d sampled elements differ from %g"):format(bad, want))

-- timing: events on every GPU's stream; a run lasts as long as its slowest GPU
local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end
print(("%12s %10s %10s %12s %12s"):format("bytes", "elements", "time (us)", "algbw (GB/s)", "busbw (GB/s)"))
for _, bytes in ipairs(sizes) do
  local elems = math.tointeger(bytes // 4)
  for _ = 1, 3 do allreduce(elems) end
  local times = {}
  for r = 1, reps do
    for i = 1, n do dev[i].e0:record(dev[i].stream) end
    allreduce(elems)
    local slowest = 0
    for i = 1, n do
      dev[i].e1:record(dev[i].stream)
      slowest = math.max(slowest, dev[i].e0:elapsed(dev[i].e1))
    end
    times[r] = slowest
  end
  local ms = median(times)
  local algbw = bytes / (ms * 1e-3) / 1e9
  print(("%12d %10d %10.1f %12.2f %12.2f"):format(bytes, elems, ms * 1e3, algbw, algbw * 2 * (n - 1) / n))
end
for i = 1, n do comms[i]:close() end
