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
  -- errors name the user's line: theirs is the caller of cuda.bench (a C
  -- function) or of this one, required directly; never a line of this file
  local level = debug.getinfo(2, "S").what == "C" and 3 or 2
  local function fail(fmt, ...) error(("cuda.bench: " .. fmt):format(...), level + 1) end
  -- culua's own calls: a failure (no driver, say) is the user's, at their line
  local function call(f, ...)
    local ok, r = pcall(f, ...)
    if not ok then error(tostring(r):gsub("^%[culua%.bench%]:%d+: ", ""), level + 1) end
    return r
  end
  opts = opts or {}
  if type(fn) ~= "function" then fail("bad argument #1 (function expected, got %s)", type(fn)) end
  if type(opts) ~= "table" then fail("bad argument #2 (table expected, got %s)", type(opts)) end
  for k in pairs(opts) do
    if not known[k] then fail("unknown option '%s' (known: name, reps, setup, stream, warmup)", tostring(k)) end
  end
  local warmup, reps, stream = opts.warmup or 3, opts.reps or 20, opts.stream
  if math.type(warmup) ~= "integer" or warmup < 0 then fail("warmup must be an integer >= 0, got %s", tostring(warmup)) end
  if math.type(reps) ~= "integer" or reps < 1 then fail("reps must be an integer >= 1, got %s", tostring(reps)) end
  if stream ~= nil and cuda.type(stream) ~= "cuda.stream" then
    fail("stream must be a cuda.stream, got %s", cuda.type(stream) or type(stream))
  end
  local name = opts.name or "cuda.bench"
  if type(name) ~= "string" then fail("name must be a string, got %s", type(name)) end
  local setup = opts.setup
  if setup ~= nil and type(setup) ~= "function" then fail("setup must be a function, got %s", type(setup)) end
  local range <close> = call(cuda.nvtx.scope, name)
  if warmup > 0 then
    local w <close> = call(cuda.nvtx.scope, "warmup")
    for _ = 1, warmup do
      if setup then setup() end
      fn()
    end
  end
  local e0 <close> = call(cuda.event)
  local e1 <close> = call(cuda.event)
  local times, sum = {}, 0
  for i = 1, reps do
    if setup then setup() end
    call(e0.record, e0, stream)
    fn()
    call(e1.record, e1, stream)
    times[i] = call(e0.elapsed, e0, e1)
    sum = sum + times[i]
  end
  local sorted = table.move(times, 1, reps, 1, {})
  table.sort(sorted)
  return setmetatable({median = median(sorted), min = sorted[1], max = sorted[reps],
                       mean = sum / reps, reps = reps, samples = times}, Result)
end

return bench
