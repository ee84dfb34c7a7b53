-- The host side of an elementwise call and of cuda.map, without a GPU: lua/elementwise.lua
-- on the mock of t/elementwise-mock.lua (cuda._catalog.array a Lua function, compiles
-- and launches empty), so that the Lua around the launch is what the clock sees. Per
-- call, in ns, the best of five runs of a million calls, less an empty loop's:
--   floor     what no Lua can save: C.array for each array and the launch (here mocks)
--   elementwise axpy(2, x, y)
--   cuda.map  cuda.map("y = a * x + y", {a = 2, x = x, y = y})
-- and each less the floor. bench/elementwise.lua's last line is the same on a GPU.
--
--   culua bench/elementwise_host.lua [path/to/elementwise.lua] [calls]
-- (the path: another version of the module, to compare with; default the source tree's)

-- the source tree: the one this script is in
local srcdir = arg and arg[0] and arg[0]:match("^(.*)/bench/[^/]*$") or os.getenv("CULUA_SRCDIR") or "."
local source = arg and arg[1] and arg[1] ~= "" and arg[1] or nil
local CALLS = math.tointeger(tonumber(arg and arg[2]) or 1e6)
local mock = dofile(srcdir .. "/t/elementwise-mock.lua"){source = source, srcdir = srcdir}
local M, array_info = mock.M, mock.array_info

local m = 1 << 16
local x, y = mock.array("float32", m), mock.array("float32", m)
local axpy = M.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "axpy"}
local body, map = "y = a * x + y", M.map
local go = function () end   -- the mock's prepared launcher

local function best(loop)
  local t = math.huge
  for _ = 1, 5 do
    local t0 = os.clock()
    loop(CALLS)
    t = math.min(t, os.clock() - t0)
  end
  return t / CALLS * 1e9
end

local empty = best(function (r) for _ = 1, r do end end)
local floor = best(function (r)
  for _ = 1, r do array_info(x, true); array_info(y, true); go(2.0, x, y, m) end
end) - empty
axpy(2, x, y)
local ew = best(function (r) for _ = 1, r do axpy(2, x, y) end end) - empty
map(body, {a = 2, x = x, y = y})
local mp = best(function (r) for _ = 1, r do map(body, {a = 2, x = x, y = y}) end end) - empty
local tbl = best(function (r) for _ = 1, r do local _ = {a = 2, x = x, y = y} end end) - empty

print(("module: %s"):format(source or "lua/elementwise.lua"))
print(("%-34s %8.1f ns"):format("floor (2 x C.array + launch)", floor))
print(("%-34s %8.1f ns   (%.1f past the floor)"):format("elementwise axpy(2, x, y)", ew, ew - floor))
print(("%-34s %8.1f ns   (%.1f past the floor, %.1f of it the args table)"):format("cuda.map axpy", mp, mp - floor, tbl))
