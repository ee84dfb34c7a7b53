-- Embedding: examples/embed is a C host that runs a script through libculua.
local T = require "culua.tap"
local builddir = os.getenv("CULUA_BUILDDIR") or "."
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local embed = builddir .. "/examples/embed"

local fh = io.open(embed)
if not fh then T.skip_all(embed .. " is not built (make check builds it)") end
fh:close()

local out, status = T.run(embed .. " " .. srcdir .. "/examples/embed.lua")
T.is(status, 0, "the host exits 0")
T.like(out, "embedded culua %d+%.%d+%.%d+: NVRTC %d+%.%d+, %d+ CUDA device", "the script sees the cuda module")
T.like(out, "compiled %d+ bytes of PTX", "and compiles through NVRTC")
T.like(out, "script returned 42", "the host reads the script's result")

-- culua_openlibs gives the global `cuda` (culua.h), the same table require returns
local script = os.tmpname()
local f = assert(io.open(script, "w"))
f:write("print(type(cuda), require 'cuda' == cuda, cuda.version)\nreturn 7\n")
f:close()
out, status = T.run(embed .. " " .. script)
os.remove(script)
T.like(out, "^table\ttrue\t%d+%.%d+%.%d+\n", "an embedding host's state has the global cuda")
T.is(status, 0, "and the script runs")

out, status = T.run(embed .. " /nonexistent.lua")
T.like(out, "cannot open /nonexistent%.lua", "the host reports a load error")
T.isnt(status, 0, "and fails")

out, status = T.run(embed)
T.like(out, "usage:", "the host prints its usage without arguments")
T.done_testing()
