-- culua.repl: the REPL as a GPU workbench. A line that starts with ':' is a
-- command (:help lists them); Tab completes globals, fields and methods.
-- src/main.c hands such lines to repl.command and Tab to repl.complete; the
-- rest is here, where a table and a format string are all it takes.

local cuda = require "cuda"

local repl = {}
local commands, order = {}, {}

local function def(name, args, help, fn)
  commands[name] = {args = args, help = help, fn = fn}
  order[#order + 1] = name
end

local function bytes(n)
  local units = {"B", "KiB", "MiB", "GiB", "TiB"}
  local u = 1
  while n >= 1024 and u < #units do n, u = n / 1024, u + 1 end
  return u == 1 and ("%d B"):format(n) or ("%.2f %s"):format(n, units[u])
end

local function is_open(x)
  return not tostring(x):find("(closed)", 1, true)
end


-- {====================================================== commands

def("help", "", "the commands", function ()
  print("Lua statements and expressions work as in lua; `cuda` is a global.")
  print("Lines that start with a colon are commands:")
  for _, name in ipairs(order) do
    local c = commands[name]
    print(("  :%-16s %s"):format(name .. (c.args ~= "" and " " .. c.args or ""), c.help))
  end
  print("Tab completes globals, fields and methods (cuda.catalog.<Tab>, x:<Tab>).")
end)

def("devices", "", "the GPUs with their memory", function ()
  local n = cuda.device_count()
  if n == 0 then
    local libs = cuda.libraries()
    print("no CUDA device (" .. (libs.driver_error or "the driver reports none") .. ")")
    return
  end
  print(("%-3s %-28s %-5s %12s %12s %12s %5s"):format("#", "name", "cc", "total", "used", "free", "SMs"))
  for i = 0, n - 1 do
    local d = cuda.device(i)
    local free, total = d:memory_info()
    print(("%-3d %-28s %-5s %12s %12s %12s %5d"):format(i, d.name, ("%d.%d"):format(d.major, d.minor),
          bytes(total), bytes(total - free), bytes(free), d:attribute("multiprocessor_count")))
  end
  print("(utilisation: the driver API does not report it; nvidia-smi does)")
end)

def("mem", "", "live device, managed and mapped arrays, largest first", function ()
  local rows, total = {}, 0
  collectgarbage()
  for _, e in ipairs(cuda.live("arrays")) do
    local a, where = e[1], e[2]
    if is_open(a) then
      local size = a.nbytes   -- packed size, whatever the dtype
      rows[#rows + 1] = {a = a, size = size, where = where}
      total = total + size
    end
  end
  table.sort(rows, function (x, y) return x.size > y.size end)
  if #rows == 0 then print("no live arrays (device, managed or mapped)"); return end
  print(("%12s  %-9s %-16s %-6s %-7s %s"):format("size", "dtype", "shape", "device", "memory", "made at"))
  for _, r in ipairs(rows) do
    local shape = table.concat(r.a.shape, " x ")
    print(("%12s  %-9s %-16s %-6d %-7s %s"):format(bytes(r.size), r.a.dtype, shape, r.a.device.ordinal,
          r.a.memory, r.where))
  end
  print(("%12s  in %d array%s (cuda.memory_in_use: %s; device %s, managed %s, mapped %s)"):format(bytes(total),
        #rows, #rows == 1 and "" or "s", bytes(cuda.memory_in_use()), bytes(cuda.memory_in_use("device")),
        bytes(cuda.memory_in_use("managed")), bytes(cuda.memory_in_use("mapped"))))
end)

def("kernels", "", "loaded kernels with registers, shared and local memory", function ()
  local rows = {}
  collectgarbage()
  for _, e in ipairs(cuda.live("kernels")) do
    local ok, at = pcall(e[1].attributes, e[1])
    if ok then rows[#rows + 1] = {k = e[1], at = at, where = e[2]} end
  end
  if #rows == 0 then print("no kernels loaded"); return end
  table.sort(rows, function (x, y) return x.k.name < y.k.name end)
  print(("%-36s %5s %9s %9s %7s  %s"):format("kernel", "regs", "shared", "local", "threads", "loaded at"))
  for _, r in ipairs(rows) do
    local at = r.at
    print(("%-36s %5d %9s %9s %7d  %s"):format(r.k.name, at.num_regs, bytes(at.shared_size_bytes),
          bytes(at.local_size_bytes), at.max_threads_per_block, r.where))
  end
  print("(local memory above 0 B: spills or a stack frame)")
end)

-- the statement or expression as a function: `return <s>` first, as the REPL does
local function chunk(s)
  local f, err = load("return " .. s, "=time")
  if not f then f, err = load(s, "=time") end
  return f, err
end

def("time", "<statement>", "run it and print host and GPU time", function (arg)
  if arg == "" then print("usage: :time <statement>"); return end
  local f, err = chunk(arg)
  if not f then print(err); return end
  local gpu = cuda.device_count() > 0
  local e0, e1
  if gpu then
    e0, e1 = cuda.event(), cuda.event()
    cuda.synchronize()
    e0:record()
  end
  local t0 = cuda.clock()
  local res = table.pack(pcall(f))
  if gpu then e1:record(); cuda.synchronize() end
  local host = (cuda.clock() - t0) * 1e3
  if not res[1] then print(res[2]) return end
  if res.n > 1 then print(table.unpack(res, 2, res.n)) end
  if gpu then
    print(("host %.3f ms (to the end of the GPU's work), GPU %.3f ms (events on the default stream)"):format(host, e0:elapsed(e1)))
    e0:close(); e1:close()
  else
    print(("host %.3f ms (no GPU)"):format(host))
  end
end)

-- a .cu file's kernels into the globals that hold kernels of those names
local reload_opts = {}
def("reload", "<file>", "run a .lua file again, or compile a .cu file and rebind\n"
    .. (" "):rep(20) .. "the kernels of the same names (nvrtc options may follow)", function (arg)
  local path, rest = arg:match("^(%S+)%s*(.*)$")
  if not path then print("usage: :reload <file.cu|file.lua> [nvrtc options]"); return end
  if path:match("%.lua$") then
    local ok, err = pcall(dofile, path)
    print(ok and ("reloaded " .. path) or err)
    return
  end
  local f, err = io.open(path)
  if not f then print(err); return end
  local src = f:read("a")
  f:close()
  if rest ~= "" then
    reload_opts[path] = {}
    for o in rest:gmatch("%S+") do reload_opts[path][#reload_opts[path] + 1] = o end
  end
  local ok, prog = pcall(cuda.compile, src, {options = reload_opts[path], file = path, line = 1, name = path:match("[^/]*$")})
  if not ok then print(prog); return end
  local mod = prog:module()
  local rebound = {}
  for name, v in pairs(_G) do
    if cuda.type(v) == "cuda.kernel" then
      local ok2, k = pcall(mod.kernel, mod, v.name)
      if ok2 then _G[name] = k; rebound[#rebound + 1] = name end
    end
  end
  table.sort(rebound)
  print(("reloaded %s%s; globals rebound: %s"):format(path, prog.cached and " (from the cache)" or "",
        #rebound > 0 and table.concat(rebound, ", ") or "none (load kernels with module:kernel(name))"))
  repl.last_module = mod
end)

local function cache_files()
  local dir = cuda.cache_dir()
  if not dir then return nil end
  local p = io.popen(("ls -l %q 2>/dev/null"):format(dir))
  local files, total = {}, 0
  for line in p:lines() do
    local size, name = line:match("^%-%S+%s+%S+%s+%S+%s+%S+%s+(%d+)%s+.-%s(%S+)$")
    if size and name:match("%.nvrtc$") then files[#files + 1] = name; total = total + tonumber(size) end
  end
  p:close()
  return dir, files, total
end

def("cache", "[clear]", "the compile cache's place and size, or empty it", function (arg)
  local dir, files, total = cache_files()
  if not dir then print("the compile cache is off (CULUA_CACHE=off) or has no home"); return end
  if arg == "clear" then
    for _, name in ipairs(files) do os.remove(dir .. "/" .. name) end
    print(("cleared %d entr%s (%s) from %s"):format(#files, #files == 1 and "y" or "ies", bytes(total), dir))
  elseif arg == "" then
    print(("%s: %d entr%s, %s"):format(dir, #files, #files == 1 and "y" or "ies", bytes(total)))
  else
    print("usage: :cache [clear]")
  end
end)

-- }======================================================


-- {====================================================== printing results

-- a value as the REPL prints it: tables nested, at most MAXDEPTH deep and
-- MAXITEMS entries a table (then "..."), a table seen before by its address;
-- the rest (arrays included) as print shows them
local MAXDEPTH, MAXITEMS = 3, 24

local function keystr(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return k end
  return "[" .. (type(k) == "string" and ("%q"):format(k) or tostring(k)) .. "]"
end

local function show(v, depth, seen)
  if type(v) == "string" then return depth > 0 and ("%q"):format(v):gsub("\\\n", "\\n") or v end
  if type(v) ~= "table" or (getmetatable(v) and getmetatable(v).__tostring) then return tostring(v) end
  if seen[v] then return "<" .. tostring(v) .. ">" end
  if depth >= MAXDEPTH then return "{...}" end
  seen[v] = true
  local parts, n = {}, #v
  for i = 1, math.min(n, MAXITEMS) do parts[#parts + 1] = show(v[i], depth + 1, seen) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function (a, b)
    if type(a) == type(b) and (type(a) == "string" or type(a) == "number") then return a < b end
    return type(a) < type(b)
  end)
  for _, k in ipairs(keys) do
    if #parts >= MAXITEMS then break end
    parts[#parts + 1] = keystr(k) .. " = " .. show(v[k], depth + 1, seen)
  end
  seen[v] = nil
  if n + #keys > #parts then parts[#parts + 1] = ("... (%d more)"):format(n + #keys - #parts) end
  local one = "{" .. table.concat(parts, ", ") .. "}"
  if #one + depth * 2 <= 78 then return one end
  local pad = ("  "):rep(depth + 1)
  return "{\n" .. pad .. table.concat(parts, ",\n" .. pad) .. "\n" .. ("  "):rep(depth) .. "}"
end

-- repl.print(...): the REPL's results, tab-separated as print does, tables readably
function repl.print(...)
  local out = {}
  for i = 1, select("#", ...) do out[i] = show((select(i, ...)), 0, {}) end
  print(table.concat(out, "\t", 1, select("#", ...)))
end

-- }======================================================


-- repl.command(":name args") -> true when it was a command line (it ran, or
-- said what is wrong)
function repl.command(line)
  local name, arg = line:match("^:(%a*)%s*(.-)%s*$")
  if not name then return false end
  local c = commands[name]
  if not c then
    print(("unknown command ':%s' (:help lists them)"):format(name))
    return true
  end
  local ok, err = pcall(c.fn, arg)
  -- the error is the command's: name it, not this file's line
  if not ok then print((":%s: %s"):format(name, (tostring(err):gsub("^%[culua%.repl%]:%d+: ", "")))) end
  return true
end


-- {====================================================== completion

-- the methods a userdata answers to: its metatable's methods table (culua's
-- types), or an __index table
local function methods_of(v)
  local mt = getmetatable(v)
  if type(mt) ~= "table" then return nil end
  if type(mt.methods) == "table" then return mt.methods end
  if type(mt.__index) == "table" then return mt.__index end
  return nil
end

local function keys_of(v, colon)
  local out = {}
  if type(v) == "table" then
    for k, x in pairs(v) do
      if type(k) == "string" and (not colon or type(x) == "function") then out[#out + 1] = k end
    end
    local m = getmetatable(v)
    if type(m) == "table" and type(m.__index) == "table" then
      for k, x in pairs(m.__index) do
        if type(k) == "string" and (not colon or type(x) == "function") then out[#out + 1] = k end
      end
    end
  end
  if type(v) == "table" and v == cuda and not rawget(cuda, "catalog") then out[#out + 1] = "catalog" end
  local methods = (type(v) == "userdata" or type(v) == "string") and methods_of(v)
  if type(v) == "string" then methods = string end
  if methods then for k in pairs(methods) do if type(k) == "string" then out[#out + 1] = k end end end
  if type(v) == "userdata" and not colon then
    for _, f in ipairs{"dtype", "shape", "device", "ptr", "name", "signature", "ordinal", "rank", "size"} do
      local ok, x = pcall(function () return v[f] end)
      if ok and x ~= nil and type(x) ~= "function" then out[#out + 1] = f end
    end
  end
  return out
end

local keywords = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
                  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"}

-- repl.complete(line_up_to_cursor) -> sorted candidates for the word at its end,
-- each the whole word (prefix.field or obj:method); fields are read, never called
function repl.complete(line)
  local expr = line:match("[%w_%.:]*$") or ""
  local base, sep, partial = expr:match("^(.*)([%.:])([%w_]*)$")
  local cands, seen = {}, {}
  local function add(word) if not seen[word] then seen[word] = true; cands[#cands + 1] = word end end
  if base then
    if base:find(":", 1, true) then return {} end
    local v = _G
    for part in base:gmatch("[^%.]+") do
      if type(v) ~= "table" and type(v) ~= "userdata" then return {} end
      local ok, x = pcall(function () return v[part] end)
      if not ok or x == nil then return {} end
      v = x
    end
    -- names that begin with _ are private: shown only when the word does
    local private = partial:sub(1, 1) == "_"
    for _, k in ipairs(keys_of(v, sep == ":")) do
      if k:sub(1, #partial) == partial and k:match("^[%a_][%w_]*$") and (private or k:sub(1, 1) ~= "_") then
        add(base .. sep .. k)
      end
    end
  else
    for _, k in ipairs(keys_of(_G)) do if k:sub(1, #expr) == expr then add(k) end end
    for _, k in ipairs(keywords) do if k:sub(1, #expr) == expr then add(k) end end
  end
  table.sort(cands)
  return cands
end

-- }======================================================

return repl
