-- The culua program: options, arguments, exit status, errors (lua.c's behaviour).
local T = require "culua.tap"
local culua = T.culua

local out, status = T.run(culua .. " -v")
T.like(out, "^Lua 5%.4", "-v prints Lua's version")
T.like(out, "culua %d+%.%d+%.%d+", "and culua's")
T.is(status, 0, "-v exits 0")

out, status = T.run(culua .. " --help")
T.like(out, "usage: .*culua %[options%] %[script %[args%]%]", "--help prints usage")
T.like(out, "%-e stat", "usage lists -e")
T.is(status, 0, "--help exits 0")

-- every CULUA_* variable that the code reads is listed in --help, one a line
do
  local srcdir = os.getenv("CULUA_SRCDIR") or "."
  local p = io.popen(("grep -ohE 'getenv\\(\"CULUA_[A-Z0-9_]+|open_first\\(\"CULUA_[A-Z0-9_]+' %s/src/*.c %s/lua/*.lua %s/lua/catalog/*.lua")
                     :format(srcdir, srcdir, srcdir))
  local seen, n = {}, 0
  for name in p:read("a"):gmatch("CULUA_[A-Z0-9_]+") do
    if not seen[name] then
      seen[name] = true
      n = n + 1
      T.like(out, "\n  " .. name .. " +%S", "--help lists " .. name)
    end
  end
  p:close()
  T.ok(n >= 8, ("found the %d variables the code reads"):format(n))
  local widest = ""
  for line in out:gmatch("[^\n]+") do if #line > #widest then widest = line end end
  T.ok(#widest <= 80, "--help fits 80 columns: " .. widest)
end

out, status = T.run(culua .. " -z")
T.like(out, "unrecognized option '%-z'", "a bad option is named")
T.isnt(status, 0, "and exits non-zero")

-- {arguments, stdin, the whole output (a pattern when it starts with ^), what it shows}
for _, c in ipairs{
  {" -e 'print(1 + 2)' -e 'print(type(cuda))'", nil, "3\ntable\n", "-e runs statements in order; cuda is a global from the start"},
  {" -e 'print(cuda.version)'", nil, "^%d+%.%d+%.%d+\n$", "culua -e 'print(cuda.version)' works"},
  {" -e 'print(require \"cuda\" == cuda, package.loaded.cuda == cuda)'", nil, "true\ttrue\n", "require 'cuda' returns the global cuda"},
  {"", "print(type(cuda.device_count))", "function\n", "cuda is a global on stdin"},
  {" -E -e 'print(type(cuda))'", nil, "table\n", "and with -E"},
  {" -l cuda -e 'print(type(cuda.device_count))'", nil, "function\n", "-l cuda makes a global cuda"},
  {" -l t=culua.tap -e 'print(type(t.ok))'", nil, "function\n", "-l g=mod names the global"},
} do
  out = T.run(culua .. c[1], c[2])
  if c[3]:sub(1, 1) == "^" then T.like(out, c[3], c[4]) else T.is(out, c[3], c[4]) end
end

local script = os.tmpname()
local f = assert(io.open(script, "w"))
f:write([[
print(#arg, arg[0] ~= nil, arg[1], arg[2], ...)
print(type(cuda.compile))
print(require "cuda" == cuda)
]])
f:close()
out, status = T.run(culua .. " " .. script .. " a b")
T.is(out, "2\ttrue\ta\tb\ta\tb\nfunction\ntrue\n", "script gets arg and ... ; cuda is a global")
T.is(status, 0, "script exits 0")

out = T.run(culua .. " - x y", "print(arg[1], arg[2], ...)")
T.is(out, "x\ty\tx\ty\n", "'-' runs stdin as the script with arguments")

out = T.run(culua, "print('from stdin')")
T.is(out, "from stdin\n", "no script and a non-terminal stdin: stdin runs")

f = assert(io.open(script, "w"))
f:write("local function inner() error('deliberate') end\ninner()\n")
f:close()
out, status = T.run(culua .. " " .. script)
T.like(out, "deliberate", "a script error is printed")
T.like(out, "stack traceback:", "with a traceback")
T.like(out, "in local 'inner'", "naming the function")
T.isnt(status, 0, "and the exit status is non-zero")

out, status = T.run(culua .. " /nonexistent/script.lua")
T.like(out, "cannot open /nonexistent/script%.lua", "a missing script is reported")
T.isnt(status, 0, "with a non-zero status")

out, status = T.run(culua .. " -e 'error(setmetatable({}, {__tostring = function () return \"custom\" end}))'")
T.like(out, "custom", "error objects with __tostring are printed")

out, status = T.run("LUA_INIT='print(\"init ran\")' " .. culua .. " -e 'print(2)'")
T.is(out, "init ran\n2\n", "LUA_INIT runs first")
out = T.run("LUA_INIT='print(\"init ran\")' " .. culua .. " -E -e 'print(2)'")
T.is(out, "2\n", "-E ignores LUA_INIT")

os.remove(script)
-- the man page (installed by make install) covers every option --help lists
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local man = io.open(srcdir .. "/doc/culua.1")
T.ok(man ~= nil, "doc/culua.1 is there")
if man then
  local text = man:read("a"):gsub("\\%-", "-"):gsub("\\fR", ""):gsub("\\fI", ""):gsub("\\fB", "")
  man:close()
  local help = T.run(T.culua .. " --help")
  local missing = {}
  for opt in help:gmatch("\n  (%-%-?%a*)") do
    if not text:find(opt, 1, true) then missing[#missing + 1] = opt end
  end
  T.is(table.concat(missing, " "), "", "culua(1) names every option of --help")
  T.like(text, "CULUA_CACHE", "and the environment")
end
T.done_testing()
