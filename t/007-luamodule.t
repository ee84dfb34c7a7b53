-- cuda.so: `require "cuda"` from a stock Lua 5.4 interpreter.
local T = require "culua.tap"
local builddir = os.getenv("CULUA_BUILDDIR") or "."
-- configure's LUA_INTERP under make check; under prove, the first of Lua 5.4's
-- names on the PATH
local lua = os.getenv("LUA_INTERP")
if not lua or lua == "" then
  local p = io.popen("command -v lua5.4 || command -v lua54 || command -v lua-5.4")
  lua = p:read("l")
  p:close()
end
if not lua or lua == "" then T.skip_all("no stock Lua 5.4 (lua5.4, lua54 or lua-5.4) on the PATH, and LUA_INTERP is not set") end
local so = builddir .. "/.libs/cuda.so"
local fh = io.open(so)
if not fh then T.skip_all(so .. " is not built") end
fh:close()

local code = ([[
package.cpath = "%s/.libs/?.so;" .. package.cpath
local cuda = require "cuda"
print("global:", rawget(_G, "cuda"))
print(type(cuda.compile), cuda.device_count() >= 0, (cuda.nvrtc_version()))
local p = cuda.compile('extern "C" __global__ void k(float *x) { x[0] = 1; }', {options = {"-arch=compute_80"}, cache = false})
print(p.ptx:match("%%.entry k") ~= nil)
print(type(require("culua.tap").ok))
]]):format(builddir)
local out, status = T.run(lua .. " -", code)
T.is(status, 0, "stock lua exits 0: " .. out:gsub("\n", " | "))
T.like(out, "^global:\tnil\n", "luaopen_cuda sets no global (culua.h)")
T.like(out, "\nfunction\ttrue\t%d+\n", "require 'cuda' gives the module")
T.like(out, "\ntrue\n", "NVRTC works through cuda.so")
T.like(out, "\nfunction\n$", "the embedded Lua modules come along")
T.done_testing()
