-- culua.tap: a Test::More-like TAP producer for culua's test scripts.
--
--   local T = require "culua.tap"
--   T.plan(3)                      -- or T.done_testing() at the end
--   T.ok(x > 0, "x is positive")
--   T.is(#a, 10, "length")
--   T.error_like(function () cuda.device(99) end, "no CUDA device 99", "bad ordinal")
--
-- Failures print what was got and what was expected as '#' diagnostics.

local T = {}

local planned, count, failed = nil, 0, 0
local todo_reason = nil

local function out(...)
  io.stdout:write(...)
  io.stdout:flush()
end

local function diag_lines(msg)
  for line in (tostring(msg) .. "\n"):gmatch("(.-)\n") do
    out("# ", line, "\n")
  end
end

function T.diag(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  diag_lines(table.concat(parts, " "))
end

T.note = T.diag

function T.plan(n)
  assert(planned == nil, "plan given twice")
  planned = n
  out("1..", n, "\n")
end

function T.skip_all(reason)
  out("1..0 # SKIP ", reason, "\n")
  os.exit(0)
end

-- for a file that runs the catalog's Lua on a mock of cuda (plain Lua, none of culua's C
-- beyond the start and exit every file runs):
-- CI's memcheck pass sets CULUA_TEST_SKIP_MOCK, since under valgrind such a file checks
-- only the Lua interpreter, at 35 times the time; the plain and ASan passes run it
function T.mock_file()
  local skip = os.getenv("CULUA_TEST_SKIP_MOCK")
  if skip and skip ~= "" then T.skip_all("a mock of cuda in plain Lua: " .. skip) end
end

function T.bail_out(reason)
  out("Bail out! ", reason, "\n")
  os.exit(255)
end

-- the location of the test call in the test script, for failure diagnostics
local function caller()
  for level = 3, 12 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.short_src ~= "[culua.tap]" and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline
    end
  end
  return "?"
end

function T.ok(cond, name, ...)
  count = count + 1
  local line = (cond and "ok " or "not ok ") .. count
  if name and name ~= "" then line = line .. " - " .. tostring(name):gsub("\n", " ") end
  if todo_reason then line = line .. " # TODO " .. todo_reason end
  out(line, "\n")
  if not cond then
    if not todo_reason then failed = failed + 1 end
    diag_lines(("  Failed test%s at %s"):format(name and (" '" .. tostring(name) .. "'") or "", caller()))
    if select("#", ...) > 0 then T.diag(...) end
  end
  return cond and true or false
end

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

function T.is(got, expected, name)
  local pass = got == expected
  if not pass then
    return T.ok(false, name, ("         got: %s\n    expected: %s"):format(show(got), show(expected)))
  end
  return T.ok(true, name)
end

function T.isnt(got, unexpected, name)
  if got == unexpected then
    return T.ok(false, name, ("         got: %s\n    expected: anything else"):format(show(got)))
  end
  return T.ok(true, name)
end

-- numbers equal within an absolute or relative tolerance
function T.near(got, expected, tol, name)
  local pass = type(got) == "number" and math.abs(got - expected) <= tol * math.max(1, math.abs(expected))
  if not pass then
    return T.ok(false, name, ("         got: %s\n    expected: %s (tolerance %g)"):format(show(got), show(expected), tol))
  end
  return T.ok(true, name)
end

function T.like(got, pattern, name)
  local pass = type(got) == "string" and got:match(pattern) ~= nil
  if not pass then
    return T.ok(false, name, ("                  %s\n    doesn't match '%s'"):format(show(got), pattern))
  end
  return T.ok(true, name)
end

function T.unlike(got, pattern, name)
  local pass = type(got) == "string" and got:match(pattern) == nil
  if not pass then
    return T.ok(false, name, ("                  %s\n          matches '%s'"):format(show(got), pattern))
  end
  return T.ok(true, name)
end

local function deep_diff(a, b, path)
  if type(a) ~= "table" or type(b) ~= "table" then
    if a == b then return nil end
    return ("%s: got %s, expected %s"):format(path, show(a), show(b))
  end
  for k, v in pairs(b) do
    local d = deep_diff(a[k], v, path .. "[" .. show(k) .. "]")
    if d then return d end
  end
  for k, v in pairs(a) do
    if b[k] == nil then return ("%s[%s]: got %s, expected nil"):format(path, show(k), show(v)) end
  end
  return nil
end

function T.is_deeply(got, expected, name)
  local d = deep_diff(got, expected, "value")
  if d then return T.ok(false, name, "    " .. d) end
  return T.ok(true, name)
end

-- fn must raise an error whose message matches pattern (a Lua pattern)
function T.error_like(fn, pattern, name, ...)
  local okay, err = pcall(fn, ...)
  if okay then
    return T.ok(false, name, "    expected an error matching '" .. pattern .. "', got none")
  end
  return T.like(tostring(err), pattern, name)
end

-- the same with a plain substring instead of a pattern
function T.error_has(fn, text, name, ...)
  local okay, err = pcall(fn, ...)
  if okay then
    return T.ok(false, name, "    expected an error containing '" .. text .. "', got none")
  end
  err = tostring(err)
  if not err:find(text, 1, true) then
    return T.ok(false, name, ("                  %s\n    doesn't contain '%s'"):format(show(err), text))
  end
  return T.ok(true, name)
end

function T.lives_ok(fn, name, ...)
  local okay, err = pcall(fn, ...)
  if not okay then return T.ok(false, name, "    died: " .. tostring(err)) end
  return T.ok(true, name)
end

function T.skip(reason, n)
  for _ = 1, n or 1 do
    count = count + 1
    out("ok ", count, " # skip ", reason, "\n")
  end
end

function T.todo(reason, fn)
  todo_reason = reason
  local okay, err = pcall(fn)
  todo_reason = nil
  if not okay then error(err, 0) end
end

function T.done_testing(n)
  if n and n ~= count then
    T.ok(false, "planned " .. n .. " tests but ran " .. count)
  end
  if planned == nil then out("1..", count, "\n") end
  if planned and planned ~= count then
    T.diag(("Looks like you planned %d tests but ran %d."):format(planned, count))
  end
  if failed > 0 then
    T.diag(("Looks like you failed %d test%s of %d."):format(failed, failed == 1 and "" or "s", count))
  end
end

function T.failures() return failed end

-- GPU tests: skip the whole file without a device, saying why
function T.need_gpu()
  local cuda = require "cuda"
  if cuda.device_count() == 0 then
    local libs = cuda.libraries()
    T.skip_all("no CUDA device (" .. (libs.driver_error or "driver reports none") .. ")")
  end
  return cuda.device(0)
end

-- the scratch memory that the catalog and the elementwise kernels keep for reuse
-- between calls (lua/catalog/core.lua's) is no leak: give it back before counting
function T.free_scratch()
  local core = package.loaded["culua.catalog.core"]
  if core then core.free_scratch() end
end

-- say which device arrays are alive, and where each was made (after a leak check failed)
function T.diag_live()
  for _, e in ipairs(require("cuda").live("arrays")) do
    T.diag(("alive: %s, made at %s"):format(tostring(e[1]), e[2]))
  end
end

-- a file's GPU half: run fn where there is a device, then check that the file
-- left no device memory behind; else skip it, saying what is skipped
function T.gpu_part(fn, what)
  local cuda = require "cuda"
  if cuda.device_count() > 0 then
    fn()
    T.free_scratch()
    collectgarbage()
    collectgarbage()
    if not T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file") then T.diag_live() end
  else
    T.skip("no CUDA device: " .. what, 1)
  end
end

-- a shared library built by cc from args (sources and flags) into a temporary .so,
-- removed when the file ends (the second result holds that); nil and why on failure
local function cc_so(args, what)
  local base = os.tmpname()
  local so = base .. ".so"
  local out, status = T.run(("cc -shared -fPIC -O1 -o %s %s"):format(so, args))
  if status ~= 0 then
    os.remove(base)
    return nil, ("cannot build %s with cc: %s"):format(what, out:gsub("\n", " "):sub(1, 200))
  end
  return so, setmetatable({}, {__gc = function () os.remove(so); os.remove(base) end})
end

-- t/cudashim.c, beside the test file that runs, built with cc (once a file): a
-- driver that hides features of the real one (it says how), for tests of the
-- messages culua gives where a device or driver lacks them. Returns the path, or
-- nil and why.
local shim, shim_why, shim_gone
function T.cuda_shim()
  if not (shim or shim_why) then
    local src = ((arg and arg[0] or ""):match("^(.*)/[^/]*$") or ".") .. "/cudashim.c"
    shim, shim_gone = cc_so(src .. " -ldl", "t/cudashim.c")
    if not shim then shim_why = shim_gone end
  end
  return shim, shim_why
end

-- bench/fakecuda.c, the driver with no device behind it (an H100 whose launches run
-- nothing), built with cc (once a file), for files that check what a call launches.
-- Returns the path, or nil and why: CI's memcheck pass sets CULUA_TEST_SKIP_CC (cc(1)
-- is not its to trace), and cc or cuda.h may be missing.
local fake, fake_why, fake_gone
function T.fakecuda()
  if not (fake or fake_why) then
    local skip = os.getenv("CULUA_TEST_SKIP_CC")
    if skip and skip ~= "" then return nil, skip end
    local srcdir = os.getenv("CULUA_SRCDIR") or "."
    local inc = os.getenv("CULUA_CUDA_INCLUDE") or (os.getenv("CUDA_HOME") and os.getenv("CUDA_HOME") .. "/include")
                or "/usr/local/cuda/include"
    fake, fake_gone = cc_so(("-I%s -I%s/src -I. %s/bench/fakecuda.c"):format(inc, srcdir, srcdir), "bench/fakecuda.c and cuda.h")
    if not fake then fake_why = fake_gone end
  end
  return fake, fake_why
end

-- runs code in a child culua on bench/fakecuda.c's driver (an H100 with nothing behind it),
-- code printing a line "case I: WHAT" for each of its cases; every kernel launch there first
-- calls code's global on_launch(kernel, config, args...) if it defines one. Returns a function
-- of I that gives case I's WHAT (the log's start where there is none), or nil and why with no
-- fake driver
local launch_hook = [[
local methods = debug.getregistry()["cuda.kernel"].methods
local launch = methods.launch
methods.launch = function (k, c, ...)
  if on_launch then on_launch(k, c, ...) end
  return launch(k, c, ...)
end
]]
function T.fake_cases(code)
  local so, skip = T.fakecuda()
  if not so then return nil, skip end
  local log = T.run(("CULUA_LIBCUDA=%s %s -"):format(so, T.culua), launch_hook .. code)
  return function (i) return log:match("case " .. i .. ": ([^\n]*)") or log:sub(1, 300) end
end

-- T.fake_cases over a list: code, then calls[i], one line of Lua a case (printing "case i:
-- WHAT"), then check(i, WHAT) for each case; with no fake driver the cases are skipped
function T.fake_each(code, calls, check)
  local got, skip = T.fake_cases(code .. table.concat(calls, "\n") .. "\n")
  if not got then return T.skip(skip, #calls) end
  for i = 1, #calls do check(i, got(i)) end
end

-- the transpose of a 2-D host array (r x c), a new c x r one of its dtype
function T.transposed(h)
  local r, c = h.shape[1], h.shape[2]
  local t = require("cuda").host_array(h.dtype, {c, r})
  for i = 0, r - 1 do
    for j = 1, c do t[(j - 1) * r + i + 1] = h[i * c + j] end
  end
  return t
end

-- the m x n block at offset off of a flat table t (1-based, rows ld apart) as a float64
-- host array, and whether the rest of its span (before it, and between its rows) still
-- holds fill: a C given as a block of a larger matrix, poisoned around it
function T.block_of(t, off, m, n, ld, fill)
  local out, kept = require("cuda").host_array("float64", {m, n}), true
  for i = 0, m - 1 do
    for j = 1, n do out[i * n + j] = t[off + i * ld + j] end
    for j = n + 1, ld do if i < m - 1 and t[off + i * ld + j] ~= fill then kept = false end end
  end
  for j = 1, off do if t[j] ~= fill then kept = false end end
  return out, kept
end

-- the value of an enumerator of the toolkit's cuda.h ("CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY"),
-- read from the header rather than copied here; nil and why where none is found
local cuda_h
function T.cuda_enum(name)
  if not cuda_h then
    local dirs = {os.getenv("CULUA_CUDA_INCLUDE"), os.getenv("CUDA_HOME") and os.getenv("CUDA_HOME") .. "/include",
                  "/usr/local/cuda/include"}
    for i = 1, 3 do
      local f = dirs[i] and dirs[i] ~= "" and io.open(dirs[i] .. "/cuda.h")
      if f then cuda_h = f:read("a"); f:close(); break end
    end
    if not cuda_h then return nil, "no cuda.h (CULUA_CUDA_INCLUDE, $CUDA_HOME/include, /usr/local/cuda/include)" end
  end
  local v = cuda_h:match("%f[%w_]" .. name .. "%s*=%s*(%w+)")
  if not v then return nil, "cuda.h has no " .. name end
  return math.tointeger(tonumber(v))
end

-- run Lua code in a child culua over the shim: zero, a list of device attributes
-- (their names in cuda.h) it answers 0 for, and hide, a list of entry points it does
-- not find. Returns the output and status, or nil and why the shim cannot run.
function T.run_shimmed(code, zero, hide)
  local so, why = T.cuda_shim()
  if not so then return nil, why end
  local nums = {}
  for i, name in ipairs(zero or {}) do
    nums[i], why = T.cuda_enum(name)
    if not nums[i] then return nil, why end
  end
  return T.run(("CULUA_LIBCUDA=%s CULUA_SHIM_ZERO=%s CULUA_SHIM_HIDE=%s %s -"):format(
               so, table.concat(nums, ","), table.concat(hide or {}, ","), T.culua), code)
end

-- the culua binary under test, as child processes run it; CULUA_TEST_WRAP puts
-- a command before it (bench/sanitize.sh runs MPI ranks under compute-sanitizer)
T.culua = (arg and arg[-1]) or "culua"
do
  local wrap = os.getenv("CULUA_TEST_WRAP")
  if wrap and wrap ~= "" then T.culua = wrap .. " " .. T.culua end
end

-- the MPI launcher for files that start ranks: $MPIRUN, else mpirun or mpiexec on the
-- PATH; nil when there is none (the file skips with "no mpirun on PATH")
function T.mpirun()
  local m = os.getenv("MPIRUN")
  if m and m ~= "" then return m end
  for _, name in ipairs{"mpirun", "mpiexec"} do
    local p = io.popen("command -v " .. name .. " 2>/dev/null")
    local path = p:read("l")
    p:close()
    if path and path ~= "" then return path end
  end
  return nil
end

-- the compute-sanitizer tool this file runs under (bench/sanitize.sh says), or
-- nil: a file may take smaller sizes there, where kernels run many times slower
T.sanitizer = os.getenv("CULUA_TEST_SANITIZER")
if T.sanitizer == "" then T.sanitizer = nil end

-- CULUA_TEST_SHARE=k/m shares a slow file's work out over m runs at once (under a
-- slow compute-sanitizer tool, bench/sanitize.sh): a file asks T.share() before each
-- unit of work (a case), and a run does the k-th of every m; unset, every unit runs.
-- Such a file ends with done_testing, so each run's plan is what it did.
local share_k, share_m
do
  local k, m = (os.getenv("CULUA_TEST_SHARE") or ""):match("^(%d+)/(%d+)$")
  share_k, share_m = tonumber(k), tonumber(m)
  if share_m and (share_m < 1 or share_k < 1 or share_k > share_m) then share_k, share_m = nil, nil end
end
local share_n = 0
function T.share()
  if not share_m then return true end
  share_n = share_n + 1
  return (share_n - 1) % share_m == share_k - 1
end

-- run the culua binary under test on a chunk of Lua; returns output, exit status
function T.run(args, input)
  local inf = os.tmpname()
  local f = assert(io.open(inf, "w"))
  f:write(input or "")
  f:close()
  local p = io.popen(args .. " < " .. inf .. " 2>&1")
  local output = p:read("a")
  local _, _, status = p:close()
  os.remove(inf)
  return output, status
end

return T
