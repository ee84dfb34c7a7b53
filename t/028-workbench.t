-- The REPL as a GPU workbench: ':' commands and Tab completion, driven through a
-- pipe (-i) and, for completion, through a pseudo-terminal (script(1)).
local T = require "culua.tap"
local cuda = require "cuda"
local gpu = cuda.device_count() > 0
local cache = os.tmpname()
os.remove(cache)
local repl = "CULUA_CACHE=" .. cache .. " " .. T.culua .. " -i"

local out = T.run(repl, ":help\n")
for _, c in ipairs{"help", "devices", "mem", "kernels", "time", "reload", "cache"} do
  T.like(out, "\n  :" .. c .. "[ <%[]", ":help lists :" .. c)
end
T.like(T.run(repl, ":bogus\n1 + 1\n"), "unknown command ':bogus' %(:help lists them%)\n> 2", "an unknown command is named and the REPL goes on")

out = T.run(repl, ":devices\n")
if gpu then T.like(out, "\n0%s+NVIDIA[^\n]+%d+%.%d+%s+[%d.]+ GiB", ":devices lists GPU 0 with its memory")
else T.like(out, "no CUDA device", ":devices says there is no GPU") end

-- :time prints the value and the host time (and the GPU's, with a GPU)
out = T.run(repl, ":time 6 * 7\n:time\n")
T.like(out, "> 42\nhost [%d.]+ ms", ":time runs an expression and times it")
T.like(out, "usage: :time <statement>", ":time with nothing says how")
T.like(T.run(repl, ":time error('boom')\n"), "boom", ":time shows an error")

-- :cache: where, how many, how big; clear empties it
out = T.run(repl, "c = require 'cuda'\nc.compile('extern \"C\" __global__ void k() {}', {options = {'-arch=compute_80'}})\n:cache\n:cache clear\n:cache\n")
T.like(out, cache:gsub("%p", "%%%0") .. ": 1 entry, [%d.]+ [KM]?i?B", ":cache counts the entry a compile made")
T.like(out, "cleared 1 entry", ":cache clear removes it")
T.like(out, ": 0 entries, 0 B", "and the cache is empty after")

-- :reload of a .lua file runs it again
local lf = os.tmpname() .. ".lua"
local f = assert(io.open(lf, "w")); f:write("counter = (counter or 0) + 1\n"); f:close()
out = T.run(repl, (":reload %s\n:reload %s\ncounter\n:reload /nonexistent.lua\n"):format(lf, lf))
T.like(out, "reloaded [^\n]+\n> reloaded [^\n]+\n> 2\n", ":reload of a .lua file runs it each time")
T.like(out, "/nonexistent%.lua", "a missing file is named")
os.remove(lf)
local cf = os.tmpname() .. ".cu"
f = assert(io.open(cf, "w")); f:write('extern "C" __global__ void scale(float *x, float a, int n) {\n  int i = threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n'); f:close()

if gpu then
  out = T.run(repl, "c = require 'cuda'\na = c.array('float32', 1000)\nb = c.array('float64', {20, 30})\n"
              .. "m = c.array('int32', 256, {managed = true})\nh = c.host_array('uint8', 100, {mapped = true})\n:mem\n")
  T.like(out, "3%.91 KiB%s+float32%s+1000%s+0%s+device%s+stdin:1", ":mem lists the array with where it was made")
  T.like(out, "4%.69 KiB%s+float64%s+20 x 30", ":mem shows a 2-D shape")
  T.like(out, "1%.00 KiB%s+int32%s+256%s+0%s+managed%s+stdin:1", ":mem lists a managed array, marked so")
  T.like(out, "100 B%s+uint8%s+100%s+0%s+mapped%s+stdin:1", ":mem lists a mapped host array, marked so")
  T.like(out, "in 4 arrays %(cuda%.memory_in_use: 9%.69 KiB; device 8%.59 KiB, managed 1%.00 KiB, mapped 100 B%)",
         ":mem counts them, by kind")
  -- :reload of a .cu file rebinds the globals that hold its kernels; :kernels lists them
  local g = io.open(cf, "a"); g:write('extern "C" __global__ void twice(float *x) { x[threadIdx.x] *= 2; }\n'); g:close()
  out = T.run(repl, ("c = require 'cuda'\nk = c.compile(io.open('%s'):read('a')):module():kernel('scale')\n:reload %s\n:kernels\nk.name\n"):format(cf, cf))
  T.like(out, "reloaded [^\n]*; globals rebound: k", ":reload of a .cu file rebinds k")
  T.like(out, "\nscale%s+%d+%s+[%d.]+ B", ":kernels lists scale with its registers")
else
  T.like(T.run(repl, ":mem\n"), "no live arrays %(device, managed or mapped%)", ":mem without arrays")
  out = T.run(repl, (":reload %s\n"):format(cf))
  T.like(out, "> :reload: cuda%.load: no CUDA driver", ":reload of a .cu file without a GPU says why, naming the command")
  T.unlike(out, "%[culua%.", "and no line inside culua")
  T.like(T.run(repl, ":kernels\n"), "no kernels loaded", ":kernels without kernels")
end
os.remove(cf)
os.execute("rm -rf " .. cache)

-- results print readably: tables nested and bounded, arrays as their tostring
out = T.run(repl, "{1, 2, {a = 1, b = 'x'}}\n{{{{{1}}}}}\n" ..
                  "(function () local t = {} for i = 1, 100 do t[i] = i end return t end)()\n" ..
                  "cuda.host_array('float32', 3)\ncuda.catalog.list()\n'plain', 7\n")
T.like(out, "> {1, 2, {a = 1, b = \"x\"}}\n", "a table prints its contents, nested")
T.like(out, "\n> {{{{%.%.%.}}}}\n", "bounded in depth")
T.like(out, "%.%.%. %(76 more%)", "and in length")
T.like(out, "> cuda%.host_array%(float32, 3%): {0%.0, 0%.0, 0%.0}\n", "an array prints as its tostring")
T.like(out, "\n  families = {", "cuda.catalog.list() shows the families")
T.like(out, "> plain\t7\n", "strings and numbers as print shows them")

-- completion hides private names (a leading _) unless the word starts with one
do
  local r = require "culua.repl"
  local c = table.concat(r.complete("cuda."), " ")
  T.like(c, "cuda%.array", "cuda.<Tab> lists cuda.array")
  T.unlike(c, "cuda%._", "but no name that begins with _")
  T.like(table.concat(r.complete("cuda._"), " "), "cuda%._catalog", "cuda._<Tab> lists them")
end

-- :help fits 80 columns
do
  local widest = ""
  for line in T.run(repl, ":help\n"):gmatch("[^\n]+") do if #line > #widest then widest = line end end
  T.ok(#widest <= 80, ":help fits 80 columns: " .. widest)
end

-- Tab completion needs a terminal: script(1) makes one
local has_script = os.execute("command -v script >/dev/null 2>&1")
local skip_pty = os.getenv("CULUA_TEST_SKIP_PTY")
if skip_pty and skip_pty ~= "" then
  T.skip("the pseudo-terminal part is skipped in this pass: " .. skip_pty, 5)
elseif not has_script then
  T.skip("no script(1) for a pseudo-terminal", 5)
else
  local input = os.tmpname()
  f = assert(io.open(input, "w"))
  f:write("#!/bin/sh\nprintf 'c = require \"cuda\"\\n'; sleep 0.3\nprintf 'c.catalog.matm\\t\\n'; sleep 0.3\n",
          "printf 'h = c.host_array(\"float32\", 3)\\n'; sleep 0.3\nprintf 'h:fi\\t(2)\\n'; sleep 0.3\n",
          "printf 'c.no_such\\t\\n'; sleep 0.3\nprintf 'os.exit()\\n'\n")
  f:close()
  local log = os.tmpname()
  local home = os.tmpname()
  os.remove(home)
  os.execute("mkdir " .. home)
  local cmd = ("sh %s | HOME=%s TERM=dumb timeout 20 script -qec %q %s >/dev/null 2>&1"):format(input, home, T.culua, log)
  os.execute(cmd)
  local hf = io.open(home .. "/.culua_history")
  local hist = hf and hf:read("a") or ""
  if hf then hf:close() end
  os.execute("rm -rf " .. home)
  T.like(hist, "h:fill%(2%)\n", "the history is saved when the REPL is left by os.exit()")
  T.like(hist, "os%.exit%(%)", "its last line too")
  local typed = io.open(log):read("a"):gsub("\r", "")
  os.remove(input); os.remove(log)
  T.like(typed, "> c%.catalog%.matmul\nfunction: ", "Tab completes cuda.catalog.matm to matmul (the catalog loads on demand)")
  T.like(typed, "> h:fill%(2%)\ncuda%.host_array%(float32, 3%): {2%.0, 2%.0, 2%.0}", "Tab completes a method of an array")
  T.like(typed, "> c%.no_such\a?\nnil", "no completion (a bell) leaves the word as typed")
end
T.done_testing()
