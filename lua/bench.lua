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
--
-- The module is callable (cuda.bench calls it) and also holds the one way
-- every script in bench/ and examples/ says that it cannot run here:
--
--   require("culua.bench").need_devices([n [, opts]])
--
-- returns the device count when there are at least n GPUs (default 1);
-- otherwise prints one line on stdout and exits with status 77, automake's
-- "skipped" (bench/run.sh and t/017 read it so):
--
--   examples/sort.lua: skipped: no CUDA device (no CUDA driver: libcuda.so.1 not found)
--   bench/nccl.lua: skipped: needs 2 CUDA devices, found 1
--
-- opts.name replaces the script's name (arg[0]) in the line; opts.quiet
-- exits without the line (the ranks other than 0 of an MPI job).

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

-- the median of a list of numbers, left as it is (the bench scripts' rounds)
local function median_of(t)
  local c = table.move(t, 1, #t, 1, {})
  table.sort(c)
  return median(c)
end

-- n uniform random keys of every bit pattern on the current device, dtype uint32 or uint64
-- (the sort benches' keys)
local function random_keys(dt, n, seed)
  local d = cuda.array(dt, n)
  if dt == "uint32" then return d:copy_from(cuda.host_array("uint32", n):random(seed, 0, 0xffffffff)) end
  -- uint64 takes no negative bounds: every bit pattern comes as int64, moved as bytes
  return d:copy_from(cuda.host_array("int64", n):random(seed, math.mininteger, math.maxinteger):bytes())
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

-- anchor(r) and ours(r) in turn for rounds r = 1 .. rounds, the anchor first in odd rounds
-- and last in even ones, so that neither side always meets the GPU the warmer (the matmul
-- benches: an anchor's process run once and then ours left ours the hotter GPU)
local function in_turn(rounds, anchor, ours)
  for r = 1, rounds do
    if r % 2 == 1 then anchor(r); ours(r) else ours(r); anchor(r) end
  end
end

-- the status a script that did not run exits with (automake's SKIP)
local SKIP_STATUS = 77

local function need_devices(n, opts)
  n, opts = n or 1, opts or {}
  if math.type(n) ~= "integer" or n < 1 then
    error("need_devices: n must be a positive integer, got " .. tostring(n), 2)
  end
  if type(opts) ~= "table" then error("need_devices: opts must be a table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if k ~= "name" and k ~= "quiet" then error("need_devices: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local what = opts.name or (arg and arg[0]) or "culua"
  local quiet = opts.quiet
  local count = cuda.device_count()
  if count >= n then return count end
  if not quiet then
    local why
    if count == 0 then
      why = "no CUDA device (" .. (cuda.libraries().driver_error or "the driver reports none") .. ")"
    else
      why = ("needs %d CUDA devices, found %d"):format(n, count)
    end
    io.stdout:write(what, ": skipped: ", why, "\n")
    io.stdout:flush()
  end
  os.exit(SKIP_STATUS, true)
end

return setmetatable({need_devices = need_devices, SKIP_STATUS = SKIP_STATUS, run = bench, median = median_of,
                     random_keys = random_keys, in_turn = in_turn},
                    {__call = function (_, ...) return bench(...) end})
