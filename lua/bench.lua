-- culua.bench: time GPU work with events, the way the benchmarks must.
--
--   local r = cuda.bench(function () k:launch(cfg, n, x) end, {warmup = 3, reps = 20})
--   print(r.median, r.min, r.max)          -- milliseconds
--
-- fn is called warmup times untimed, then reps times, each between two
-- events recorded on opts.stream (default stream when nil). fn may also
-- do several launches; the time is that of one call. opts.setup, when
-- given, is called before each call of fn (warm-up ones too), outside the
-- events: to put back the input that fn overwrites, say. The whole run is an
-- NVTX range named opts.name (default "cuda.bench"), its warmup a range
-- inside it, so a profiler's timeline shows where each benchmark ran.

local cuda = require "cuda"

local Result = {}
Result.__index = Result
function Result.__tostring(r)
  return ("median %.4f ms (min %.4f, max %.4f, %d reps)"):format(r.median, r.min, r.max, r.reps)
end

local function median(sorted)
  local n = #sorted
  if n % 2 == 1 then return sorted[(n + 1) // 2] end
  return (sorted[n // 2] + sorted[n // 2 + 1]) / 2
end

local known = {warmup = true, reps = true, stream = true, name = true, setup = true}

local function bench(fn, opts)
  opts = opts or {}
  if type(fn) ~= "function" then error("bad argument #1 to 'bench' (function expected, got " .. type(fn) .. ")", 2) end
  if type(opts) ~= "table" then error("bad argument #2 to 'bench' (table expected, got " .. type(opts) .. ")", 2) end
  for k in pairs(opts) do
    if not known[k] then
      error(("cuda.bench: unknown option '%s' (known: name, reps, setup, stream, warmup)"):format(tostring(k)), 2)
    end
  end
  local warmup, reps, stream = opts.warmup or 3, opts.reps or 20, opts.stream
  if math.type(warmup) ~= "integer" or warmup < 0 then error("bench: warmup must be an integer >= 0", 2) end
  if math.type(reps) ~= "integer" or reps < 1 then error("bench: reps must be an integer >= 1", 2) end
  local name = opts.name or "cuda.bench"
  if type(name) ~= "string" then error("bench: name must be a string", 2) end
  local setup = opts.setup
  if setup ~= nil and type(setup) ~= "function" then error("bench: setup must be a function", 2) end
  local range <close> = cuda.nvtx.scope(name)
  if warmup > 0 then
    local w <close> = cuda.nvtx.scope("warmup")
    for _ = 1, warmup do
      if setup then setup() end
      fn()
    end
  end
  local e0 <close> = cuda.event()
  local e1 <close> = cuda.event()
  local times, sum = {}, 0
  for i = 1, reps do
    if setup then setup() end
    e0:record(stream)
    fn()
    e1:record(stream)
    times[i] = e0:elapsed(e1)
    sum = sum + times[i]
  end
  local sorted = table.move(times, 1, reps, 1, {})
  table.sort(sorted)
  return setmetatable({median = median(sorted), min = sorted[1], max = sorted[reps],
                       mean = sum / reps, reps = reps, samples = times}, Result)
end

return bench
