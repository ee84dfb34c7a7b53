-- bench/nccl.lua: all-reduce bus bandwidth from Lua (examples/allreduce.lua,
-- through cuda.nccl) against a C program calling NCCL directly
-- (bench/anchor_nccl.cu), same sizes, same timing, in one run.
--   culua bench/nccl.lua [ANCHOR] [REPS]
-- Target: Lua >= 0.95x C at 128 MiB and 1 GiB a GPU. Keep NCCL_NVLS_ENABLE=0.
local cuda = require "cuda"
local anchor = arg[1] or "bench/anchor_nccl"
local reps = tonumber(arg[2]) or 20
local culua = arg[-1] or "culua"
local sizes = {128 * 2^20, 2^30}

require("culua.bench").need_devices(2)
print(("all-reduce float32 sum over %d GPUs (%s), median of %d; NCCL_NVLS_ENABLE=%s"):format(
      cuda.device_count(), cuda.device(0).name, reps, tostring(os.getenv("NCCL_NVLS_ENABLE"))))

local function run(cmd, pattern)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  p:close()
  local got = {}
  for bytes, busbw in out:gmatch(pattern) do got[tonumber(bytes)] = tonumber(busbw) end
  return got, out
end

local args = {}
for i, b in ipairs(sizes) do args[i] = ("%d"):format(b) end
local ours, out1 = run(("%s examples/allreduce.lua reps=%d %s"):format(culua, reps, table.concat(args, " ")),
                       "\n%s*(%d+)%s+%d+%s+[%d.]+%s+[%d.]+%s+([%d.]+)")
local theirs, out2 = run(("%s %d %s"):format(anchor, reps, table.concat(args, " ")), "allreduce (%d+) ms [%d.]+ busbw ([%d.]+)")
print(("%12s %14s %14s %7s %7s"):format("bytes", "culua busbw", "C busbw", "ratio", "target"))
local verdict = {}
for _, b in ipairs(sizes) do
  local o, t = ours[b], theirs[b]
  if not o then error("examples/allreduce.lua gave no figure for " .. b .. ":\n" .. out1) end
  if not t then error("the anchor gave no figure for " .. b .. ":\n" .. out2) end
  print(("%12d %14.2f %14.2f %6.3fx %6.2fx"):format(b, o, t, o / t, 0.95))
  verdict[#verdict + 1] = ("%d MiB %s"):format(b // 2^20, o / t >= 0.95 and "met" or "NOT met")
end
print("target: " .. table.concat(verdict, "; "))
