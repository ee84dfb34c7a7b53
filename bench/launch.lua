-- bench/launch.lua: launch overhead of an empty kernel from Lua, against a C
-- loop of cuLaunchKernel (bench/anchor) measured in the same run.
--   culua bench/launch.lua [ANCHOR] [N] [REPS]
-- and culua's own host time a launch, on bench/fakecuda.c's driver (its launches do nothing,
-- so what remains is ours; on a GPU the driver's time is in it too), N launches a loop
-- (default 10^6 there, 20000 on a GPU):
--   cc -shared -fPIC -O1 -Isrc -I. -I$CUDA/include -o fakecuda.so bench/fakecuda.c
--   CULUA_LIBCUDA=./fakecuda.so culua bench/launch.lua host [N]
local cuda = require "cuda"
require("culua.bench").need_devices()

-- {====================================================== host: ns a launch, ours alone

-- kernels of 0, 3 and 8 arguments (int, float, device pointer), each by k:launch(cfg, ...) with
-- the config reused and made anew each call, by launch(k, cfg, ...) (the method looked up
-- once), and prepared: the arguments given each call, or all bound by k:prepare
local function host_mode(N)
  local prog = cuda.compile[[
extern "C" __global__ void k0() {}
extern "C" __global__ void k3(int n, float a, float *x) {}
extern "C" __global__ void k8(int n, float a, float *x, const float *y, int m, float b, float *z, int c) {}
]]
  local mod = prog:module()
  local x = cuda.array("float32", 32)
  local cases = {
    {mod:kernel("k0"), {}},
    {mod:kernel("k3"), {7, 2.0, x}},
    {mod:kernel("k8"), {7, 2.0, x, x, 3, 1.5, x, 9}},
  }
  local cfg = {grid = 1, block = 32}
  -- ns a launch by f's loop of N, the least of 5 (the host's noise only adds)
  local function ns(f)
    local best = math.huge
    for _ = 1, 5 do
      local t0 = cuda.clock()
      f()
      best = math.min(best, (cuda.clock() - t0) * 1e9 / N)
      cuda.synchronize()
    end
    return best
  end
  -- a loop of N of `call` ("{,}" where the arguments go, after a comma; "{}" alone), the
  -- arguments locals a1, a2, ... (table.unpack would be a C call a launch of its own)
  local function loop(call, k, a)
    local names = {}
    for i = 1, #a do names[i] = "a" .. i end
    local list = table.concat(names, ", ")
    local body = call:gsub("{,}", #a > 0 and ", " .. list or ""):gsub("{}", list)
    local src = ("local k, cfg, N, go, nop, launch%s = ...\nreturn function () for _ = 1, N do %s end end")
                :format(#a > 0 and ", " .. list or "", body)
    local go = call == "go()" and k:prepare(cfg, table.unpack(a)) or k:prepare(cfg)
    return assert(load(src, "=launch host loop"))(k, cfg, N, go, function () end, k.launch, table.unpack(a))
  end
  local dev = cuda.device()
  print(("culua's host time a launch on %s, ns (least of 5 loops of %d)%s"):format(dev.name, N,
        dev.name:match("^fake") and "" or ": on a GPU the driver's time is in it"))
  print(("%-44s %9s %9s %9s"):format("", "0 args", "3 args", "8 args"))
  local rows = {
    {"k:launch(cfg, ...), cfg reused", "k:launch(cfg{,})"},
    {"k:launch({grid = 1, block = 32}, ...)", "k:launch({grid = 1, block = 32}{,})"},
    {"launch(k, cfg, ...), launch = k.launch", "launch(k, cfg{,})"},
    {"go = k:prepare(cfg); go(...)", "go({})"},
    {"go = k:prepare(cfg, ...); go()", "go()"},
    {"for scale: nop(cfg, ...), a Lua function", "nop(cfg{,})"},
  }
  for _, r in ipairs(rows) do
    local t = {}
    for i, c in ipairs(cases) do t[i] = ns(loop(r[2], c[1], c[2])) end
    print(("%-44s %9.1f %9.1f %9.1f"):format(r[1], t[1], t[2], t[3]))
  end
end

if arg[1] == "host" then   -- on a GPU, fewer: the launches queue behind the GPU's
  host_mode(tonumber(arg[2]) or (cuda.device().name:match("^fake") and 1000000 or 20000))
  return
end

-- }======================================================

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

local ROUNDS = tonumber(arg[4]) or 7

local function per_launch(fn)
  local r = cuda.bench(fn, {warmup = 2, reps = REPS})
  return r.median * 1000 / N
end

local median = require("culua.bench").median

-- graph: 1000 launches captured once, replayed
local s = cuda.stream{non_blocking = true}
s:begin_capture()
local gcfg = {grid = 1, block = 32, stream = s}
for _ = 1, 1000 do empty:launch(gcfg) end
local graph = s:end_capture()
graph:launch(s)
s:synchronize()

-- the C anchor, same kernel, same method, in a child process
local ptxfile = os.tmpname()
local f = assert(io.open(ptxfile, "w"))
f:write(prog.ptx)
f:close()
local function anchor_run()
  local out = io.popen(("%s launch %s empty %d %d"):format(anchor, ptxfile, N, REPS)):read("a")
  local c_us, c_graph = tonumber(out:match("launch_us (%S+)")), tonumber(out:match("graph_us (%S+)"))
  if not c_us then error("anchor failed: " .. out) end
  return c_us, c_graph
end

-- rounds alternate Lua and C, so that drift of the machine hits both alike;
-- the ratio is taken within each round
local launch = empty.launch
local lua_t, c_t, ratio, glua_t, gc_t, four_t = {}, {}, {}, {}, {}, {}
local prep_t, prep_ratio = {}, {}
local go = empty:prepare(cfg)
for r = 1, ROUNDS do
  lua_t[r] = per_launch(function () for _ = 1, N do launch(empty, cfg) end end)
  local gr = cuda.bench(function () for _ = 1, N // 1000 do graph:launch(s) end end, {warmup = 1, reps = REPS, stream = s})
  glua_t[r] = gr.median * 1000 / (N // 1000 * 1000)
  c_t[r], gc_t[r] = anchor_run()
  ratio[r] = lua_t[r] / c_t[r]
  prep_t[r] = per_launch(function () for _ = 1, N do go() end end)
  prep_ratio[r] = prep_t[r] / c_t[r]
  four_t[r] = per_launch(function () for _ = 1, N do four:launch(cfg, N, 2.0, x, x) end end)
end
os.remove(ptxfile)

local lua_us, c_us, graph_us, c_graph = median(lua_t), median(c_t), median(glua_t), median(gc_t)
local rmed, pmed = median(ratio), median(prep_ratio)
table.sort(ratio)
table.sort(prep_ratio)
local dev = cuda.device()
print(("launch overhead on %s: %d launches x %d reps per measurement, %d interleaved rounds, medians"):format(dev.name, N, REPS, ROUNDS))
print(("%-34s %10s %10s %7s"):format("", "culua", "C", "ratio"))
print(("%-34s %8.3f us %8.3f us %6.2fx  (per-round ratios %.2f..%.2f)"):format("empty kernel, cuLaunchKernel", lua_us, c_us, rmed, ratio[1], ratio[#ratio]))
print(("%-34s %8.3f us %8.3f us %6.2fx  (per-round ratios %.2f..%.2f)"):format("prepared: go = k:prepare(cfg); go()", median(prep_t), c_us, pmed, prep_ratio[1], prep_ratio[#prep_ratio]))
print(("%-34s %8.3f us %8.3f us %6.2fx"):format("graph replay, per kernel", graph_us, c_graph, graph_us / c_graph))
print(("%-34s %8.3f us %10s"):format("4-argument kernel (array, float)", median(four_t), ""))
print(("target: empty-kernel launch <= 1.05x C (issue 40): k:launch(cfg) %s (%.2fx), prepared launcher %s (%.2fx)")
      :format(rmed <= 1.05 and "met" or "NOT met", rmed, pmed <= 1.05 and "met" or "NOT met", pmed))
