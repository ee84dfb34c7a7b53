-- cuda.nvtx: push/pop, range, scope; no tool attached (a no-op), so no GPU needed.
local T = require "culua.tap"
local cuda = require "cuda"
local nvtx = cuda.nvtx

-- push/pop balance
T.is(nvtx.depth(), 0, "no range open at the start")
T.is(nvtx.push("outer"), 1, "push returns the depth")
T.is(nvtx.push("inner"), 2, "nested push")
T.is(nvtx.pop(), 1, "pop returns the depth left")
T.is(nvtx.pop(), 0, "balanced")
T.error_has(function () nvtx.pop() end, "cuda.nvtx.pop: no range is open", "an unbalanced pop raises")
T.is(nvtx.depth(), 0, "an unbalanced pop leaves the depth at 0")

-- range: fn's results, its arguments, and a pop on every way out
T.is_deeply({nvtx.range("sum", function (a, b) return a + b, "two", nil end, 1, 2)}, {3, "two", nil},
            "range returns fn's results")
T.is(select("#", nvtx.range("none", function () end)), 0, "range of a function returning nothing")
T.is(select("#", nvtx.range("three", function () return nil, nil, nil end)), 3, "trailing nils kept")
local seen
nvtx.range("depth", function () seen = nvtx.depth() end)
T.is(seen, 1, "the range is open while fn runs")
T.is(nvtx.depth(), 0, "and closed after")
local okay, err = pcall(nvtx.range, "fails", function () error("boom") end)
T.ok(not okay and err:match("boom$"), "range rethrows fn's error")
T.is(nvtx.depth(), 0, "range pops when fn raises")
local obj = setmetatable({}, {})
okay, err = pcall(nvtx.range, "table error", function () error(obj) end)
T.ok(rawequal(err, obj), "the error object is rethrown unchanged")
okay = pcall(nvtx.range, "leaky", function () nvtx.push("forgotten"); nvtx.push("forgotten too"); error("x") end)
T.is(nvtx.depth(), 0, "range also pops what fn opened and left open")
nvtx.range("outer", function ()
  nvtx.range("inner", function () seen = nvtx.depth() end)
end)
T.is(seen, 2, "ranges nest")
local callable = setmetatable({}, {__call = function (_, x) return x * 10 end})
T.is(nvtx.range("callable", callable, 4), 40, "a callable object works as fn")
-- inside a coroutine, fn may yield
local co = coroutine.wrap(function ()
  return nvtx.range("co", function () return coroutine.yield("paused") * 2 end)
end)
T.is(co(), "paused", "fn yields through range")
T.is(nvtx.depth(), 1, "the range stays open while the coroutine is suspended")
T.is(co(21), 42, "resumed: fn's result")
T.is(nvtx.depth(), 0, "and the range is closed")

-- scope: a to-be-closed range
do
  local r <close> = nvtx.scope("block")
  T.is(nvtx.depth(), 1, "scope opens a range")
  T.is(tostring(r), "cuda.nvtx.scope (depth 1)", "scope __tostring")
end
T.is(nvtx.depth(), 0, "<close> pops it")
okay = pcall(function ()
  local r <close> = nvtx.scope("raising")
  error("inside")
end)
T.is(nvtx.depth(), 0, "<close> pops on an error too")
local s = nvtx.scope("explicit")
s:close()
s:close()
T.is(nvtx.depth(), 0, "close is idempotent")
T.is(tostring(s), "cuda.nvtx.scope (closed)", "closed __tostring")
do
  local a <close> = nvtx.scope("a")
  nvtx.push("left open inside a")
  T.is(nvtx.depth(), 2, "a push inside a scope")
end
T.is(nvtx.depth(), 0, "a scope closes what was left open inside it")

-- bad arguments
T.error_like(function () nvtx.push() end, "cuda%.nvtx%.push: bad argument #1 %(string expected, got no value%)",
             "push needs a name")
T.error_like(function () nvtx.push({}) end, "cuda%.nvtx%.push: bad argument #1 %(string expected, got table%)",
             "push: a table is no name")
T.error_like(function () nvtx.range("r") end, "cuda%.nvtx%.range: bad argument #2 %(function expected, got no value%)",
             "range needs a function")
T.error_like(function () nvtx.range("r", 42) end, "cuda%.nvtx%.range: bad argument #2 %(function expected, got number%)",
             "range: a number is not callable")
T.error_like(function () nvtx.range(nil, print) end, "cuda%.nvtx%.range: bad argument #1 %(string expected",
             "range needs a name")
T.error_like(function () nvtx.scope() end, "cuda%.nvtx%.scope: bad argument #1 %(string expected", "scope needs a name")
T.is(nvtx.depth(), 0, "failed calls opened nothing")

-- no tool attached: a no-op costing what a trivial C call does. Measured against
-- such calls in the same run, not against the clock: under valgrind (CI's memcheck
-- pass) everything is 30x slower, and a fixed bound failed there by a few percent
local function seconds(fn)
  local t0 = cuda.clock()
  fn()
  return cuda.clock() - t0
end
local f = function () end
local N = 100000
local calls = seconds(function () for _ = 1, N do math.abs(1); math.abs(1) end end)
local pushpop = seconds(function () for _ = 1, N do nvtx.push("tick"); nvtx.pop() end end)
T.ok(pushpop < 10 * calls + 0.01, ("10^5 push/pop pairs in %.4f s, %.1fx as long as 2 x 10^5 calls of math.abs (< 10x)")
     :format(pushpop, pushpop / calls))
local pcalls = seconds(function () for _ = 1, N do pcall(f) end end)
local ranges = seconds(function () for _ = 1, N do nvtx.range("tick", f) end end)
T.ok(ranges < 10 * pcalls + 0.01, ("10^5 ranges of a function in %.4f s, %.1fx as long as 10^5 pcalls of it (< 10x)")
     :format(ranges, ranges / pcalls))

-- an injection library that cannot be loaded leaves NVTX a no-op
local out = T.run("NVTX_INJECTION64_PATH=/nonexistent/libinject.so " .. T.culua .. " -", [[
local nvtx = require("cuda").nvtx
nvtx.push("a"); nvtx.range("b", function () end); nvtx.pop()
print("depth", nvtx.depth())
]])
T.is(out, "depth\t0\n", "a missing injection library is harmless")

-- cuda.bench marks its run (needs a GPU for its events)
if cuda.device_count() > 0 then
  local depths = {}
  cuda.bench(function () depths[#depths + 1] = nvtx.depth() end, {warmup = 2, reps = 3, name = "bench test"})
  T.is_deeply(depths, {2, 2, 1, 1, 1}, "cuda.bench: a range around the run, a warmup range inside it")
  T.is(nvtx.depth(), 0, "cuda.bench closes its ranges")
  pcall(cuda.bench, function () error("stop") end)
  T.is(nvtx.depth(), 0, "cuda.bench closes its ranges when fn raises")
else
  T.skip("no CUDA device: cuda.bench's range", 3)
end

T.done_testing()
