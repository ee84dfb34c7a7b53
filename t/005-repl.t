-- The REPL, driven through a pipe (-i forces it when stdin is not a terminal).
local T = require "culua.tap"
local repl = T.culua .. " -i"

local out = T.run(repl, "1+1\n")
T.like(out, "^Lua 5%.4.-\nculua ", "-i prints the banner")
T.like(out, "> 2\n", "an expression prints its value")

out = T.run(repl, "'a', 2, nil\n")
T.like(out, "> a\t2\tnil\n", "several values print tab-separated")

out = T.run(repl, "x = 10\nx * 3\n")
T.like(out, "> > 30\n", "a statement prints nothing; globals persist")

out = T.run(repl, "function f(a)\n  return a * 2\nend\nf(21)\n")
T.like(out, ">> >> > 42\n", "an incomplete statement continues on '>>' lines")

out = T.run(repl, "for i = 1, 3 do\nio.write(i, ' ')\nend\n")
T.like(out, "1 2 3 ", "a multi-line loop runs")

out = T.run(repl, "error('oops')\nprint('still here')\n")
T.like(out, "stdin:1: oops\nstack traceback:", "an error prints a traceback")
T.like(out, "still here", "and the REPL goes on")

out = T.run(repl, "1 +\n+\nprint('after')\n")
T.like(out, "unexpected symbol near '%+'", "a syntax error is reported")
T.like(out, "after", "and the REPL goes on")

out = T.run(repl, "=3*3\n")
T.like(out, "> 9\n", "'=expr' prints like Lua 5.2")

out = T.run(repl, "type(cuda.compile)\n")
T.like(out, "> function\n", "cuda is a global in the REPL from the start")
out = T.run(repl, "require('cuda') == cuda\n")
T.like(out, "> true\n", "and require 'cuda' returns it")

out = T.run(repl, "_PROMPT = 'cu> '\n1\n")
T.like(out, "cu> 1\n", "_PROMPT changes the prompt")

-- as lua.c: luaL_tolstring over _PROMPT and _PROMPT2, so numbers and __tostring work
out = T.run(repl, "_PROMPT = 7\n1\n")
T.like(out, "> 71\n7", "a number _PROMPT is shown as lua shows it")
out = T.run(repl, "n = 0\n_PROMPT = setmetatable({}, {__tostring = function () n = n + 1; return n end})\n'a'\n'b'\n")
T.like(out, "1a\n2b\n", "a __tostring that returns a number (a counter) is the prompt")
out = T.run(repl, "_PROMPT2 = setmetatable({}, {__tostring = function () return '..| ' end})\nfor i = 1, 2 do\nend\n")
T.like(out, "%.%.| ", "_PROMPT2 goes through __tostring too")
out = T.run(repl, "error({})\nerror(setmetatable({}, {__tostring = function () return 'custom' end}))\nerror()\n")
T.like(out, "%(error object is a table value%)", "an error object without __tostring is named by type, as lua does")
T.like(out, "> custom\n", "one with __tostring is shown through it")
T.like(out, "%(error object is a nil value%)", "error() with nothing")

-- Ctrl-C interrupts a running statement; only the child's own pid is signalled
local tmp = os.tmpname()
local function slurp(name)
  local fh = io.open(name)
  local s = fh and fh:read("a") or ""
  if fh then fh:close() end
  return s
end

local script = os.tmpname()
local f = assert(io.open(script, "w"))
f:write("while true do end\n")
f:close()
local status = io.popen(("%s %s >%s 2>&1 & pid=$!; sleep 0.5; kill -INT $pid; wait $pid; echo status=$?")
                        :format(T.culua, script, tmp)):read("a")
T.like(slurp(tmp), "interrupted!", "SIGINT interrupts a running script with 'interrupted!'")
T.like(status, "status=1", "and the script fails cleanly instead of being killed")

-- in the REPL: interrupt a busy statement, then keep reading
os.execute(("{ printf 'while true do end\\n'; sleep 1.5; printf 'print(\"after ctrl-c\")\\n'; } | %s -i >%s 2>&1 & " ..
            "pid=$!; sleep 0.7; kill -INT $pid; wait $pid"):format(T.culua, tmp))
out = slurp(tmp)
T.like(out, "interrupted!", "Ctrl-C in the REPL interrupts the statement")
T.like(out, "after ctrl%-c", "and the REPL reads the next line")
os.remove(tmp)
os.remove(script)
T.done_testing()
