-- culua.anchor: a benchmark's anchor program (bench/anchor_*.cu, built on the GPU
-- machine) run once, its figure read from its output.
--
--   local anchor = require "culua.anchor"
--   local ms = anchor(ANCHOR, "scan f32 268435456 20", "scan_ms")   -- nil without ANCHOR
--
-- A missing figure is said on stderr (with the anchor's output) and gives nil,
-- so the benchmark prints its own figures alone.
return function (program, args, key)
  if not program then return nil end
  local p = io.popen(program .. " " .. args .. " 2>&1")
  local out = p:read("a")
  p:close()
  local v = tonumber(out:match(key .. "%s+([%d%.eE+-]+)"))
  if not v then io.stderr:write(("anchor %s %s: no %s in its output:\n%s\n"):format(program, args, key, out)) end
  return v
end
