-- cuda.stream, cuda.event: ordering, queries, timing, errors.
local T = require "culua.tap"
local cuda = require "cuda"
if cuda.device_count() == 0 then
  T.error_like(function () cuda.stream() end, "cuda%.stream: ", "no GPU: cuda.stream raises")
  T.error_like(function () cuda.event() end, "cuda%.event: ", "no GPU: cuda.event raises")
  T.done_testing()
  return
end
T.need_gpu()

local s = cuda.stream()
T.like(tostring(s), "^cuda%.stream %(0x%x+%) on device 0$", "__tostring")
T.is(s.priority, 0, "default priority")
T.ok(s:query(), "an idle stream is done")
T.ok(rawequal(s:synchronize(), s), "synchronize returns the stream")
local hi = cuda.stream{non_blocking = true, priority = -1}
T.is(hi.priority, -1, "a higher-priority, non-blocking stream")
T.error_like(function () cuda.stream{priority = 10} end, "priority 10 outside %-?%d+ %(highest%) %.%. 0 %(lowest%)", "bad priority")
T.error_like(function () cuda.stream(5) end, "cuda%.stream: bad argument #1 %(table expected, got number%)", "bad options")

local e0, e1 = cuda.event(), cuda.event()
T.like(tostring(e0), "^cuda%.event", "event __tostring")
T.error_like(function () e0:elapsed(e1) end, "both events must be recorded first", "elapsed before record")
local x = cuda.array("float32", 1 << 24)
e0:record(s)
for _ = 1, 10 do x:fill(1.0, s) end
e1:record(s)
T.ok(rawequal(e1:synchronize(), e1), "event synchronize")
T.ok(e1:query(), "event done after synchronize")
local ms = e0:elapsed(e1)
T.ok(type(ms) == "number" and ms > 0 and ms < 1000, ("elapsed %.4f ms for 10 fills of 64 MiB"):format(ms))

-- wait: work on s2 starts after the event on s
local s2 = cuda.stream{non_blocking = true}
local y = cuda.array("float32", 1 << 24)
x:fill(3.0, s)
local done = cuda.event():record(s)
s2:wait(done)
y:copy_from(x, s2)
s2:synchronize()
local t = y:view(1 << 24, 1):totable()
T.is(t[1], 3.0, "s2:wait(event) orders work across streams")

local nt = cuda.event{timing = false}
nt:record(s)
e0:record(s)
T.error_like(function () e0:elapsed(nt) end, "made with timing = false", "no timing on a timing-less event")
T.error_like(function () s:wait(5) end, "cuda%.event expected, got number", "wait needs an event")
T.error_like(function () s:end_capture() end, "not capturing", "end_capture without begin")

s:close()
T.error_like(function () s:query() end, "attempt to use a closed cuda%.stream", "closed stream")
T.error_like(function () x:fill(1, s) end, "attempt to use a closed cuda%.stream", "closed stream as an argument")
T.lives_ok(function () s:close() end, "close twice")
e0:close()
T.error_like(function () e0:record() end, "attempt to use a closed cuda%.event", "closed event")

x, y = nil
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
