-- bench/launch.lua: launch overhead of an empty kernel from Lua, against a C
-- loop of cuLaunchKernel (bench/anchor) measured in the same run.
--   culua bench/launch.lua [ANCHOR] [N] [REPS]
local cuda = require "cuda"
local anchor = arg[1] or "bench/anchor"
local N, REPS = tonumber(arg[2]) or 20000, tonumber(arg[3]) or 9

local src = [[
extern "C" __global__ void empty() {}
extern "C" __global__ void four(int n, float a, const float *x, float *y) {}
]]
local prog = cuda.compile(src)
local mod = prog:module()
local empty, four = mod:kernel("empty"), mod:kernel("four")
local x = cuda.array("float32", 32)
local cfg = {grid = 1, block = 32}

local function per_launch(fn)
  local r = cuda.bench(fn, {warmup = 2, reps = REPS})
  return r.median * 1000 / N, r
end

local launch = empty.launch
local lua_us = per_launch(function () for _ = 1, N do launch(empty, cfg) end end)
local four_us = per_launch(function () for _ = 1, N do four:launch(cfg, N, 2.0, x, x) end end)

-- graph: 1000 launches captured once, replayed
local s = cuda.stream{non_blocking = true}
s:begin_capture()
local gcfg = {grid = 1, block = 32, stream = s}
for _ = 1, 1000 do empty:launch(gcfg) end
local graph = s:end_capture()
graph:launch(s)
s:synchronize()
local gr = cuda.bench(function () for _ = 1, N // 1000 do graph:launch(s) end end, {warmup = 1, reps = REPS, stream = s})
local graph_us = gr.median * 1000 / (N // 1000 * 1000)

-- the C anchor, same kernel, same method
local ptxfile = os.tmpname()
local f = assert(io.open(ptxfile, "w"))
f:write(prog.ptx)
f:close()
local out = io.popen(("%s launch %s empty %d %d"):format(anchor, ptxfile, N, REPS)):read("a")
os.remove(ptxfile)
local c_us = tonumber(out:match("launch_us (%S+)"))
local c_graph = tonumber(out:match("graph_us (%S+)"))
if not c_us then error("anchor failed: " .. out) end

local dev = cuda.device()
print(("launch overhead on %s, %d launches x %d reps, median"):format(dev.name, N, REPS))
print(("%-34s %10s %10s %7s"):format("", "culua", "C", "ratio"))
print(("%-34s %8.3f us %8.3f us %6.2fx"):format("empty kernel, cuLaunchKernel", lua_us, c_us, lua_us / c_us))
print(("%-34s %8.3f us %8.3f us %6.2fx"):format("graph replay, per kernel", graph_us, c_graph, graph_us / c_graph))
print(("%-34s %8.3f us %10s"):format("4-argument kernel (array, float)", four_us, ""))
print(("target: empty-kernel launch <= 1.10x C: %s"):format(lua_us / c_us <= 1.10 and "met" or "NOT met"))
