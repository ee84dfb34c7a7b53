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

out = T.run(repl, "cuda = require 'cuda'\ntype(cuda.compile)\n")
T.like(out, "> function\n", "cuda is available in the REPL")

out = T.run(repl, "_PROMPT = 'cu> '\n1\n")
T.like(out, "cu> 1\n", "_PROMPT changes the prompt")

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
