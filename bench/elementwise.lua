-- Kernels from expressions against CuPy / PyTorch (issue 38's targets):
-- axpy over 2^28 float32, sin(x*3 + y) into z, sums by cuda.reduction and by
-- x:sum(), and x:sum() of float16 (float32 sums), in GB/s; the host time of an elementwise call and of cuda.map on
-- 2^16 elements. The anchor column comes from python3 with CuPy or PyTorch
-- where one imports, else it is left out.
--
--   culua bench/elementwise.lua [LOG2N] [sweep]
-- "sweep" first times axpy, sin(x*3 + y) and the sum with each tuning of the
-- generated loops (chunks a thread an iteration, blocks a multiprocessor), a line each.

local cuda = require "cuda"
local bench = require "culua.bench"
bench.need_devices(1)

local E = require "culua.elementwise"
local SWEEP = false
for _, a in ipairs(arg or {}) do if a == "sweep" then SWEEP = true end end
local n = 1 << math.tointeger(tonumber(arg and arg[1] and arg[1] ~= "sweep" and arg[1] or "28"))
local x = cuda.array("float32", n):fill(1)
local y = cuda.array("float32", n):fill(2)
local z = cuda.array("float32", n)

local axpy = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "axpy"}
local fused = cuda.elementwise{params = "T *x, T *y", out = "T z", body = "z = sin(x * 3 + y)", name = "fused"}
local sum = cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, dtype = "float32", name = "sum"}
local out = cuda.array("float32", 1)

local function gbs(bytes, r) return bytes / r.median / 1e6 end

if SWEEP then
  local u0, b0 = E.unroll, E.blocks_per_sm
  for _, u in ipairs{1, 2, 4} do
    for _, b in ipairs{8, 16, 32, 0} do   -- 0: one round a thread, no cap
      E.unroll, E.blocks_per_sm = u, b
      -- new kernels: the unroll is in their source (each a compile, through the cache)
      local a2 = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "axpy_u" .. u}
      local f2 = cuda.elementwise{params = "T *x, T *y", out = "T z", body = "z = sin(x * 3 + y)", name = "fused_u" .. u}
      local s2 = cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, dtype = "float32", name = "sum_u" .. u}
      print(("sweep unroll %d, %2d blocks/SM (0: a round a thread): axpy %7.1f  sin %7.1f  sum %7.1f GB/s"):format(u, b,
        gbs(12 * n, bench(function () a2(2, x, y) end)), gbs(12 * n, bench(function () f2(x, y, z) end)),
        gbs(4 * n, bench(function () s2(x, {out = out}) end))))
    end
  end
  E.unroll, E.blocks_per_sm = u0, b0
end
local rows = {
  {"axpy", 12 * n, function () axpy(2, x, y) end},
  {"sin(x*3 + y)", 12 * n, function () fused(x, y, z) end},
  {"sum (cuda.reduction)", 4 * n, function () sum(x, {out = out}) end},
  {"sum (x:sum)", 4 * n, function () x:sum({out = out}) end},
}
-- the float16 sum (issue 37: float32 sums, >= 2600 GB/s at 2^28), two bytes an element read
local xh = x:astype("float16")
rows[#rows + 1] = {"float16 sum (x:sum)", 2 * n, function () xh:sum({out = out}) end}

-- the anchor: one python3 run printing "name GB/s" lines
local py = ([[
import sys
n = %d
try:
    import torch
    x = torch.ones(n, device="cuda"); y = torch.full((n,), 2.0, device="cuda")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    def t(f, b):
        for _ in range(3): f()
        ts = []
        for _ in range(20):
            s.record(); f(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
        ts.sort(); print("%%.1f" %% (b / ts[10] / 1e6))
    t(lambda: y.add_(x, alpha=2.0), 12 * n)
    t(lambda: torch.sin(x * 3 + y), 12 * n)
    t(lambda: x.sum(), 4 * n)
    t(lambda: x.sum(), 4 * n)
    xh = x.half()
    t(lambda: xh.sum(), 2 * n)
    print("PyTorch " + torch.__version__)
except Exception as err:
    print("none", err); sys.exit(0)
]]):format(n)
local anchor = {}
local path = os.tmpname()
local g = io.open(path, "w")
if g then
  g:write(py); g:close()
  local p = io.popen("python3 " .. path .. " 2>/dev/null")
  if p then
    for line in p:lines() do anchor[#anchor + 1] = line end
    p:close()
  end
end
os.remove(path)
local have = #anchor == 6
print(("%-22s %10s %12s"):format("what", "culua GB/s", have and anchor[6] or "(no anchor)"))
for i, r in ipairs(rows) do
  local res = bench(r[3], {name = r[1]})
  print(("%-22s %10.1f %12s"):format(r[1], gbs(r[2], res), have and anchor[i] or ""))
end

-- host time of a call on 2^16 elements (events cannot see it: the clock can)
local m = 1 << 16
local xs, ys = x:view(1, m), y:view(1, m)
local function host_us(fn)
  for _ = 1, 100 do fn() end
  cuda.device():synchronize()
  local reps = 2000
  local t0 = os.clock()
  for _ = 1, reps do fn() end
  local t = (os.clock() - t0) / reps * 1e6
  cuda.device():synchronize()
  return t
end
print(("host time a call, 2^16 elements: cuda.elementwise %.2f us, cuda.map %.2f us"):format(
  host_us(function () axpy(2, xs, ys) end),
  host_us(function () cuda.map("y = a * x + y", {a = 2, x = xs, y = ys}) end)))
-- beside them, what no Lua around it can save: the same kernel's prepared launcher
-- called directly (the call's Lua is the difference; bench/elementwise_host.lua
-- times that part without a GPU)
local dev = cuda.device()
local prog = cuda.compile(axpy:source("float32,float32,float32"),
                          {options = {"-std=c++17", ("-arch=compute_%d%d"):format(dev.major, dev.minor)}})
local go = prog:module():kernel("axpy_vec"):prepare({grid = m // 4 // 256, block = 256})
print(("host time of its prepared launch alone: %.2f us"):format(host_us(function () go(2.0, xs, ys, m) end)))
