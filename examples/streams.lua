-- streams.lua: seed 003's vector addition over four non-blocking streams.
--
-- The vectors live in pinned host memory, a pinned buffer a segment (copies
-- overlap kernels only from pinned memory). Segment j goes to stream
-- (j - 1) % 4 + 1, in rounds of four as in the seed: copy its a and b in, add,
-- copy c out, each on the segment's stream. The same work is then done on
-- one stream. Both runs are checked against a + b computed here, both are
-- timed (median of repeats), and the speed-up is printed.
--
-- The seed showed the overlap in a profiler. Here the script records it: an
-- event before and after every copy and kernel gives the timeline, printed as
-- text (times relative to the first event), written as CSV and drawn as a PNG
-- Gantt chart when gnuplot is on PATH.
--
--   culua examples/streams.lua [N [SEGMENT [PREFIX]]]
--     N: elements a vector (default 2^25); SEGMENT: elements a copy (default
--     2^19); PREFIX: output files PREFIX.csv and PREFIX.png (default "streams")

local cuda = require "cuda"
local plot = require "culua.plot"

local function count_arg(i, default, what)
  if arg[i] == nil then return default end
  local v = math.tointeger(tonumber(arg[i]))
  if not v or v < 1 then error(("streams.lua: %s must be a positive integer, got '%s'"):format(what, arg[i]), 0) end
  return v
end
local n = count_arg(1, 1 << 25, "N")
local seglen = math.min(count_arg(2, 1 << 19, "SEGMENT"), n)
local prefix = arg[3] or "streams"
local NSTREAMS = 4

local source = [[
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernel
local prog = cuda.compile(source, {name = "streams.cu"})
require("culua.bench").need_devices()

local dev = cuda.device()
local nseg = (n + seglen - 1) // seglen
if nseg * 4 * 2 > 200000 then error("streams.lua: too many segments; choose a larger SEGMENT", 0) end
print(("%s: %d floats a vector (%.1f MiB), %d segments of up to %d, %d non-blocking streams")
      :format(dev.name, n, n * 4 / 2^20, nseg, seglen, NSTREAMS))
local vec_add = prog:module():kernel("vec_add")

-- {====================================================== data
local segs = {}
for j = 1, nseg do
  local count = math.min(seglen, n - (j - 1) * seglen)
  segs[j] = {
    count = count,
    a = cuda.host_array("float32", count, {pinned = true}):random(2 * j, -1, 1),
    b = cuda.host_array("float32", count, {pinned = true}):random(2 * j + 1, -1, 1),
    c = cuda.host_array("float32", count, {pinned = true}),
  }
end
-- a set of device buffers a stream, as in the seed; a short last segment uses views
local streams, bufs = {}, {}
for k = 1, NSTREAMS do
  streams[k] = cuda.stream{non_blocking = true}
  bufs[k] = {a = cuda.array("float32", seglen), b = cuda.array("float32", seglen), c = cuda.array("float32", seglen)}
end
for j, sg in ipairs(segs) do
  local bf = bufs[(j - 1) % NSTREAMS + 1]
  if sg.count == seglen then
    sg.da, sg.db, sg.dc = bf.a, bf.b, bf.c
  else
    sg.da, sg.db, sg.dc = bf.a:view(1, sg.count), bf.b:view(1, sg.count), bf.c:view(1, sg.count)
  end
end
-- }======================================================

-- {====================================================== the work
-- every operation of the run, in issue order: {stream index, kind, segment, fn}
local function operations(nstreams)
  local ops = {}
  for j, sg in ipairs(segs) do
    local k = nstreams == 1 and 1 or (j - 1) % NSTREAMS + 1
    local s = streams[k]
    local cfg = {grid = {(sg.count + 255) // 256}, block = {256}, stream = s}
    ops[#ops + 1] = {k, "H2D", j, function () sg.da:copy_from(sg.a, s) end}
    ops[#ops + 1] = {k, "H2D", j, function () sg.db:copy_from(sg.b, s) end}
    ops[#ops + 1] = {k, "kernel", j, function () vec_add:launch(cfg, sg.da, sg.db, sg.dc, sg.count) end}
    ops[#ops + 1] = {k, "D2H", j, function () sg.dc:copy_to(sg.c, s) end}
  end
  return ops
end
local plans = {[1] = operations(1), [NSTREAMS] = operations(NSTREAMS)}

-- one run; the time from a start event that every stream waits for to the
-- last stream's end event
local t_start, t_end = cuda.event(), {}
for k = 1, NSTREAMS do t_end[k] = cuda.event() end
local function run(nstreams)
  t_start:record(streams[1])
  for k = 2, nstreams do streams[k]:wait(t_start) end
  for _, op in ipairs(plans[nstreams]) do op[4]() end
  local ms = 0
  for k = 1, nstreams do
    t_end[k]:record(streams[k])
    ms = math.max(ms, t_start:elapsed(t_end[k]))
  end
  return ms
end

-- the same run with an event before and after every operation
local marks = {}
local function run_traced(nstreams)
  local ops = plans[nstreams]
  for i = #marks + 1, 2 * #ops do marks[i] = cuda.event() end
  for i, op in ipairs(ops) do
    local s = streams[op[1]]
    marks[2 * i - 1]:record(s)
    op[4]()
    marks[2 * i]:record(s)
  end
  for k = 1, nstreams do streams[k]:synchronize() end
  local bars, first = {}, math.huge
  for i, op in ipairs(ops) do
    local t0, t1 = marks[1]:elapsed(marks[2 * i - 1]), marks[1]:elapsed(marks[2 * i])
    bars[i] = {stream = op[1], kind = op[2], segment = op[3], start = t0, stop = t1}
    first = math.min(first, t0)
  end
  for _, b in ipairs(bars) do b.start, b.stop = b.start - first, b.stop - first end
  return bars
end
-- }======================================================

-- {====================================================== checks
-- c == a + b to within float32 rounding, every element, read 1024 at a time
local function check()
  local bad, worst, CH = 0, 0, 1024
  for _, sg in ipairs(segs) do
    local sa, sb, sc = sg.a:bytes(), sg.b:bytes(), sg.c:bytes()
    for first = 0, sg.count - 1, CH do
      local k = math.min(CH, sg.count - first)
      local fmt, at = "<" .. ("f"):rep(k), 1 + 4 * first
      local va, vb, vc = {string.unpack(fmt, sa, at)}, {string.unpack(fmt, sb, at)}, {string.unpack(fmt, sc, at)}
      for i = 1, k do
        local want = va[i] + vb[i]
        local err = math.abs(vc[i] - want)
        if not (err <= 1.2e-7 * math.abs(want)) then
          bad = bad + 1
          worst = math.max(worst, err ~= err and math.huge or err)
        end
      end
    end
  end
  return bad, worst
end

local function run_checked(nstreams, label)
  for _, sg in ipairs(segs) do sg.c:fill(0 / 0) end
  run(nstreams)
  local bad, worst = check()
  if bad == 0 then
    print(("Check (%s): every element of c equals a + b: SUCCESS"):format(label))
  else
    print(("Check (%s) FAILED: %d elements differ from a + b (worst by %g)"):format(label, bad, worst))
  end
  return bad == 0
end
-- }======================================================

local ok1 = run_checked(1, "1 stream")
local ok4 = run_checked(NSTREAMS, NSTREAMS .. " streams")

local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end
local reps = 7
local times = {}
for _, ns in ipairs{1, NSTREAMS} do
  local t = {}
  for r = 1, reps do t[r] = run(ns) end
  times[ns] = median(t)
end
local gb = 3 * 4 * n / 1e9
print(("\n%-10s %10s %14s"):format("", "time (ms)", "copies (GB/s)"))
print(("%-10s %10.3f %14.1f"):format("1 stream", times[1], gb / (times[1] * 1e-3)))
print(("%-10s %10.3f %14.1f"):format(NSTREAMS .. " streams", times[NSTREAMS], gb / (times[NSTREAMS] * 1e-3)))
print(("Speed-up of %d streams over 1: %.2fx (median of %d runs each)"):format(NSTREAMS, times[1] / times[NSTREAMS], reps))

-- {====================================================== the timeline
local traced = {[1] = run_traced(1), [NSTREAMS] = run_traced(NSTREAMS)}

-- each engine's busy time against the run's length: what the overlap hid
local function summary(bars)
  local busy, span = {H2D = 0, kernel = 0, D2H = 0}, 0
  for _, b in ipairs(bars) do
    busy[b.kind] = busy[b.kind] + (b.stop - b.start)
    span = math.max(span, b.stop)
  end
  return busy, span
end

-- a line of characters a stream: h for copies in, K for kernels, d for copies out
local function ascii(bars, nrows, width, span)
  local rows = {}
  for r = 1, nrows do rows[r] = {} for c = 1, width do rows[r][c] = "." end end
  local mark = {H2D = "h", kernel = "K", D2H = "d"}
  for _, b in ipairs(bars) do
    local c0 = math.floor(b.start / span * width) + 1
    local c1 = math.max(c0, math.floor(b.stop / span * width))
    for c = c0, math.min(c1, width) do rows[b.stream][c] = mark[b.kind] end
  end
  for r = 1, nrows do rows[r] = table.concat(rows[r]) end
  return rows
end

local lines = {}
for _, ns in ipairs{NSTREAMS, 1} do
  local bars = traced[ns]
  local busy, span = summary(bars)
  print(("\nTimeline, %d stream%s (events around each operation; ms from the first event): %.3f ms in all")
        :format(ns, ns == 1 and "" or "s", span))
  print(("  busy: copies in %.3f ms, kernels %.3f ms, copies out %.3f ms; sum %.3f ms, %.0f%% hidden by overlap")
        :format(busy.H2D, busy.kernel, busy.D2H, busy.H2D + busy.kernel + busy.D2H,
                math.max(0, 100 * (1 - span / (busy.H2D + busy.kernel + busy.D2H)))))
  for r, line in ipairs(ascii(bars, ns, 100, span)) do print(("  stream %d |%s|"):format(r, line)) end
  if ns == NSTREAMS then
    print(("  %9s %9s %7s %-7s %s"):format("start", "end", "stream", "op", "segment"))
    for _, b in ipairs(bars) do
      print(("  %9.3f %9.3f %7d %-7s %d"):format(b.start, b.stop, b.stream, b.kind, b.segment))
    end
  end
  for _, b in ipairs(bars) do
    lines[#lines + 1] = {ns, b.stream, b.kind, b.segment, b.start, b.stop}
  end
end
print("  (h: copy in, K: kernel, d: copy out)")

plot.csv(prefix .. ".csv", {"streams", "stream", "op", "segment", "start_ms", "end_ms"}, lines)
local rows, gbars = {}, {}
for k = 1, NSTREAMS do rows[k] = ("%d streams: stream %d"):format(NSTREAMS, k) end
rows[NSTREAMS + 1] = "1 stream"
for _, b in ipairs(traced[NSTREAMS]) do gbars[#gbars + 1] = {row = b.stream, kind = b.kind, start = b.start, stop = b.stop} end
for _, b in ipairs(traced[1]) do gbars[#gbars + 1] = {row = NSTREAMS + 1, kind = b.kind, start = b.start, stop = b.stop} end
local drawn, why = plot.gantt{output = prefix .. ".png", rows = rows, kinds = {"H2D", "kernel", "D2H"}, bars = gbars,
                              title = ("vector addition, %d floats in %d segments: %d streams against 1 (%s)")
                                      :format(n, nseg, NSTREAMS, dev.name),
                              xlabel = "ms from the first event"}
print(("\nTimeline written to %s.csv%s"):format(prefix, drawn and (" and " .. prefix .. ".png") or (" (no PNG: " .. why .. ")")))
if not (ok1 and ok4) then os.exit(1) end
