-- t/046-replay.t: a sort or scan called again on the same arrays replays the launches of
-- its first call (lua/catalog/sort.lua's and scan.lua's plans); t/replay-check.lua compares
-- what each replay launches (kernel, configuration, every argument) with what the full call
-- launches. It runs here on bench/fakecuda.c, the driver with no device behind it, so that
-- the check needs no GPU; on a GPU it runs as it is too (t/018 and t/020 check the results).
local T = require "culua.tap"
local so, why = T.fakecuda()
if not so then T.skip_all(why) end
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local log, st = T.run(("CULUA_LIBCUDA=%s %s %s/t/replay-check.lua"):format(so, T.culua, srcdir))
T.is(st, 0, "t/replay-check.lua ran on the fake driver")
local lines = 0
for line in log:gmatch("[^\n]+") do
  if not line:match("all the same$") then
    lines = lines + 1
    local what = line:match("^%s*(.-)%s%s+%S") or line
    T.ok(line:match("same launches on calls 1%-4 %(%d+ launches a call%)$") or line:match("same as a full call$"),
         "replay: " .. what, line)
  end
end
T.ok(lines >= 20, ("the check compared %d cases (at least 20 expected)"):format(lines))
T.like(log, "all the same\n?$", "every replayed call launched what its full call launches")
T.done_testing()
