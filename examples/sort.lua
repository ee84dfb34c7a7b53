-- Seed 003's radix sort, on cuda.catalog.sort.
--
--   culua examples/sort.lua [N]
--
-- The seed's worked example (the keys 7, 14, 4, 1 of four bits, sorted one bit a
-- round: the bit, its two-bin histogram, the prefix sums and the new places), done
-- by its warp-level sort (__ballot_sync and __popc: the catalog's "warp" variant)
-- round by round; the warp sort of 32 keys; then a larger sort of N (default 2^20)
-- int keys in 10..99 (the seed's Thrust example) and of N uint32 keys of every bit,
-- each printed as the seed does (input, CPU, GPU) with SUCCESS or the first
-- difference, and the GPU's time against Lua's table.sort.

local cuda = require "cuda"
local N = math.tointeger(tonumber(arg and arg[1] or tostring(1 << 20)))
if not N or N < 1 then
  io.stderr:write("usage: culua examples/sort.lua [N]\n")
  os.exit(1)
end
require("culua.bench").need_devices()
local sort = cuda.catalog.sort

local function binary(x, bits)
  local t = {}
  for b = bits - 1, 0, -1 do t[#t + 1] = (x >> b) & 1 end
  return table.concat(t)
end

local function row(label, t)
  local c = {}
  for i, v in ipairs(t) do c[i] = ("%5s"):format(v) end
  print(("  %-26s %s"):format(label, table.concat(c, " ")))
end

local function binaries(t)
  local b = {}
  for i, k in ipairs(t) do b[i] = binary(k, 4) end
  return b
end

-- SUCCESS, or the first place where the GPU and the CPU differ
local function verdict(got, want)
  for i = 1, #want do
    if got[i] ~= want[i] then
      print(("FAILURE: first difference at %d: GPU %s, CPU %s"):format(i, tostring(got[i]), tostring(want[i])))
      return false
    end
  end
  print("SUCCESS")
  return true
end

-- {====================================================== the seed's example

print("Radix sort, the seed's example: keys of 4 bits, one bit a round")
local keys = {7, 14, 4, 1}
local d = cuda.array("uint32", #keys)
row("keys", keys)
row("binary", binaries(keys))
local cur = table.move(keys, 1, #keys, 1, {})
for b = 0, 3 do
  -- the CPU's round: the bit, a two-bin histogram, exclusive prefix sums, new places (stable)
  local bit, zeros = {}, 0
  for i, k in ipairs(cur) do
    bit[i] = (k >> b) & 1
    if bit[i] == 0 then zeros = zeros + 1 end
  end
  local place, nz, no = {}, 0, 0
  for i = 1, #cur do
    if bit[i] == 0 then place[i] = nz; nz = nz + 1 else place[i] = zeros + no; no = no + 1 end
  end
  local nxt = {}
  for i = 1, #cur do nxt[place[i] + 1] = cur[i] end
  print(("bit %d"):format(b))
  row("bit " .. b, bit)
  print(("  %-26s zeros %d, ones %d; prefix sums: zeros from 0, ones from %d"):format("histogram", zeros, #cur - zeros, zeros))
  row("new place", place)
  cur = nxt
  -- the GPU's: the warp sort of the original keys over bits 0..b gives the same order
  d:copy_from(keys)
  sort(d, {variant = "warp", end_bit = b + 1})
  local gpu = d:totable()
  row("CPU, sorted on bits 0.." .. b, cur)
  row("GPU, sorted on bits 0.." .. b, gpu)
  row("binary", binaries(gpu))
  verdict(gpu, cur)
end

-- }======================================================


-- {====================================================== the warp sort of 32 keys

print()
print("Warp-level radix sort of 32 keys (__ballot_sync, __popc)")
local h = cuda.host_array("uint32", 32):random(2019, 0, 999)
local input = h:totable()
local cpu = table.move(input, 1, 32, 1, {})
table.sort(cpu)
d = cuda.array("uint32", 32):copy_from(h)
sort(d, {variant = "warp"})
local gpu = d:totable()
print("input:");    print(table.concat(input, " "))
print("CPU sort:"); print(table.concat(cpu, " "))
print("GPU sort:"); print(table.concat(gpu, " "))
verdict(gpu, cpu)

-- }======================================================


-- {====================================================== larger sorts, timed

local e0, e1 = cuda.event(), cuda.event()

-- the best of five GPU sorts of pristine's keys into keys, the call alone between
-- two events (the keys are restored from the pristine copy before each)
local function gpu_ms(k, pristine)
  local best = math.huge
  for _ = 1, 5 do
    k:copy_from(pristine)
    e0:record()
    sort(k)
    e1:record()
    best = math.min(best, e0:elapsed(e1))
  end
  return best
end

local function larger(title, dtype, hk)
  print()
  print(title)
  local pristine = cuda.array(dtype, N):copy_from(hk)
  local dk = cuda.array(dtype, N)
  local ms = gpu_ms(dk, pristine)
  local t = hk:totable()
  local c0 = cuda.clock()
  table.sort(t)
  local cpu_ms = (cuda.clock() - c0) * 1000
  local got = dk:copy_to(cuda.host_array(dtype, N)):totable()
  local show = math.min(N, 16)
  print(("input (first %d):"):format(show));    print(table.concat(hk:totable(), " ", 1, show))
  print(("CPU sort (first %d):"):format(show)); print(table.concat(t, " ", 1, show))
  print(("GPU sort (first %d):"):format(show)); print(table.concat(got, " ", 1, show))
  verdict(got, t)
  print(("Processing Time -> GPU: %.3f ms (%.2f Gkeys/s), CPU table.sort: %.3f ms (%.0fx)"):format(ms,
        N / ms / 1e6, cpu_ms, cpu_ms / ms))
end

larger(("Radix sort of %d int keys in 10..99 (the seed's Thrust example)"):format(N), "int32",
       cuda.host_array("int32", N):random(12, 10, 99))
larger(("Radix sort of %d uint32 keys of every bit"):format(N), "uint32",
       cuda.host_array("uint32", N):random(7, 0, 0xffffffff))

-- }======================================================
