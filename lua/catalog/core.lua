-- culua.catalog.core: what every catalog family shares, and the only Lua code
-- that loads the catalog's kernels.
--
-- Kernels come from the fatbin that nvcc built (loaded once per device, on
-- first use); a variant that is not prebuilt (another tile, unroll factor or
-- block shape) is compiled by NVRTC from the same embedded source with -D
-- values, through the disk cache. Families (lua/catalog/<family>.lua) ask this
-- module for kernels, checks and scratch memory; they never load modules.

local cuda = require "cuda"
local C = cuda._catalog

local core = {}

-- {====================================================== kernels

-- per state, per device (its object: one an ordinal, and a key with no call
-- into C to read an ordinal): loaded kernel-file modules and kernels by name
local cache = {}
-- per state, per device ordinal: anything a family keeps a device (cleared with the kernels)
local per_device = {}
-- scratch memory by kind (below), and pinned words for results read back a device
local kinds = {}
local readback_dev = {}

-- forget every loaded module, and the memory kept a device or stream (cuda.reset()
-- calls this: they are all gone with the context)
-- core.epoch counts the resets: whoever keeps kernels outside this cache (the
-- elementwise kernels) drops those of an earlier epoch
core.epoch = 0
-- core.version counts what drops the loaded kernels or the scratch memory (clear and
-- free_scratch): a family's plans of launches made before it are stale
core.version = 0
function core.clear()
  core.epoch = core.epoch + 1
  core.version = core.version + 1
  cache = {}
  per_device = {}
  readback_dev = {}
  for _, sc in pairs(kinds) do
    for _, t in ipairs{sc.streams, sc.devices} do
      for k in pairs(t) do t[k] = nil end
    end
  end
end

local function device_cache(dev)
  local c = cache[dev]
  if not c then
    c = {modules = {}, kernels = {}}
    cache[dev] = c
  end
  return c
end

local files = {}
for _, f in ipairs(C.families()) do files[f] = true end

-- the kernel `name` of kernels/<file>.cu on `dev` (default: the current device):
-- prebuilt, or compiled for that device with `defines` ({"A=1", ...}) and, when
-- given, extra source text prepended (`prelude`: a user's predicate, say)
function core.kernel(file, name, defines, dev, prelude)
  if not files[file] then error(("cuda.catalog: no kernel family '%s'"):format(tostring(file)), 2) end
  dev = dev or cuda.device()
  local c = device_cache(dev)
  local k = c.kernels[name]
  if k then return k end
  local mod = c.modules[file]
  if mod == nil then
    -- the entries (the PTX's .entry declarations, made with the fatbin) give each
    -- kernel its parameter types, and say which kernels are prebuilt: neither is
    -- asked of the driver, whose refusals compute-sanitizer counts as errors
    mod = cuda.load(C.fatbin(file), {device = dev.ordinal, ptx = C.entries(file)})
    c.modules[file] = mod
  end
  local ok, res = pcall(mod.kernel, mod, name)
  if ok then
    k = res
  elseif defines and tostring(res):find("no kernel", 1, true) then
    local opts = {"-std=c++17", ("-arch=compute_%d%d"):format(dev.major, dev.minor)}
    for _, d in ipairs(defines) do opts[#opts + 1] = "-D" .. d end
    local src, line = C.source(file), 1
    if prelude then src, line = prelude .. "\n" .. src, nil end
    local prog = cuda.compile(src, {options = opts, name = file .. ".cu", file = line and "kernels/" .. file .. ".cu", line = line})
    k = prog:module({device = dev.ordinal}):kernel(name)
  else
    error(res, 2)
  end
  c.kernels[name] = k
  return k
end

-- which of a family's kernel files (kernels/<file>.cu, `files`) holds each kernel named
-- <prefix><stem>..., read from their instances: an `extern "C" __global__` line names
-- <prefix><stem>, <prefix><stem>_##t or <prefix><stem>##suffix (the stem: the name's
-- letters, digits and underscores up to a macro's ##, less a trailing _). So a kernel
-- moved between files needs no change in its family. Returns a function, stem -> file;
-- the files are read on its first call, once a state.
function core.kernel_files(prefix, files)
  local pattern = prefix:gsub("%p", "%%%0") .. "([%w_]+)"
  local file_of
  return function (stem)
    if not file_of then
      local found = {}
      for _, f in ipairs(files) do
        for line in C.source(f):gmatch("[^\n]*__global__[^\n]*") do
          local k = line:match(pattern)
          if k then
            k = k:gsub("_$", "")
            assert(found[k] == nil or found[k] == f, prefix .. k .. " in two kernel files")
            found[k] = f
          end
        end
      end
      file_of = found
    end
    return file_of[stem] or error("cuda.catalog: no kernel " .. prefix .. stem, 2)
  end
end

--[[
** The integer constants of an embedded device header ("culua/solve.cuh") or
** kernel file ("sort"): {NAME = value} for each `#define NAME <expression>`
** and `constexpr int NAME = <expression>;` whose expression is integers,
** names defined above it, + - * / (C's integer division; the operands are not
** negative here), %, << and >>, and parentheses. A function-like macro of such
** an expression, `#define NAME(A, B) <expression in A, B>`, is a Lua function of
** as many integers (a formula both sides need: a kernel's shared memory from its
** tile shape). Anything else (a suffixed literal, a name from elsewhere) is no
** number here and left out; a name given two values (#if branches) raises, since
** which one holds is not for this reader to guess. So a number that a family's
** Lua and its kernels both need is written once, in the CUDA. Read once a
** state, then kept.
]]
local constants = {}
-- a C integer expression as Lua source: its names replaced by their integer values in
-- `known`, but for those in `params` (kept as names), literal suffixes dropped (16u,
-- 0xffu), / as C's integer division; nil where it is no such expression
local function lua_expr(expr, known, params)
  if expr:find("[^%w_%s%+%-%*/%%%(%)<>]") then return nil end
  expr = expr:gsub("%f[%w_](%d%w*)", function (lit) return (lit:gsub("[uUlL]+$", "")) end)
  local ok = true
  expr = expr:gsub("%f[%w_][%a_][%w_]*", function (name)
    if params and params[name] then return name end
    if math.type(known[name]) ~= "integer" then ok = false; return name end
    return tostring(known[name])
  end)
  return ok and (expr:gsub("/", "//")) or nil
end

local function evaluate(expr, known)
  local src = lua_expr(expr, known)
  local f = src and load("return " .. src, "=constant", "t", {})
  local good, v = pcall(f or error)
  return good and math.type(v) == "integer" and v or nil
end

-- a function-like macro as a Lua function of its parameters, compiled on its first
-- call (by then every name of the file is read) and kept: a family calls these on
-- every call of its own (sort's tile size), where a load() a call cost 10 us and more
local function formula(from, fname, names, body, t)
  local f
  local function bad() error(("cuda.catalog: %s's %s is no integer formula"):format(from, fname), 3) end
  return function (...)
    if not f then
      local params = {}
      for _, p in ipairs(names) do params[p] = true end
      local src = lua_expr(body, t, params)
      f = src and load(("local %s = ...; return %s"):format(table.concat(names, ", "), src), "=" .. fname, "t", {})
      if not f then bad() end
    end
    local good, v = pcall(f, ...)
    if not good or math.type(v) ~= "integer" then bad() end
    return v
  end
end

function core.constants(from)
  local t = constants[from]
  if t then return t end
  local text = from:find("%.cuh$") and C.headers()[from] or files[from] and C.source(from)
  if not text then error(("cuda.catalog: no device header or kernel file '%s'"):format(tostring(from)), 2) end
  t = {}
  for line in text:gsub("\\\n", " "):gmatch("[^\n]+") do   -- continued lines joined
    local fname, params, body = line:match("^%s*#%s*define%s+([%a_][%w_]*)%(([%w_,%s]*)%)%s+(.-)%s*$")
    if fname then
      local names = {}
      for p in params:gmatch("[%a_][%w_]*") do names[#names + 1] = p end
      body = body:gsub("/%*.*", ""):gsub("//.*", "")
      t[fname] = formula(from, fname, names, body, t)
    end
    local name, expr = line:match("^%s*#%s*define%s+([%a_][%w_]*)%s+(.-)%s*$")
    if not name then name, expr = line:match("^%s*constexpr%s+int%s+([%a_][%w_]*)%s*=%s*([^;]+);") end
    if name then
      local v = evaluate((expr:gsub("/%*.*", ""):gsub("//.*", "")), t)
      if v and t[name] and t[name] ~= v then
        error(("cuda.catalog: %s defines %s twice (%d, %d)"):format(from, name, t[name], v), 2)
      end
      t[name] = t[name] or v
    end
  end
  constants[from] = t
  return t
end

-- the argument lists of the lines of kernel file `file` that instantiate macro
-- `name` at the start of a line (`CULUA_DMMA(128x64, 128, 64, 2, 2, 3, 2)`):
-- {{"128x64", 128, 64, 2, 2, 3, 2}, ...}, numerals as integers. So the shapes a
-- family launches are read from the lines that build them, never copied.
function core.instances(file, name)
  if not files[file] then error(("cuda.catalog: no kernel file '%s'"):format(tostring(file)), 2) end
  local list = {}
  for args in ("\n" .. C.source(file)):gmatch("\n" .. name .. "(%b())") do
    local t = {}
    for a in args:sub(2, -2):gmatch("[^,]+") do
      a = a:match("^%s*(.-)%s*$")
      t[#t + 1] = math.tointeger(tonumber(a)) or a
    end
    list[#list + 1] = t
  end
  return list
end

-- a table a family keeps per device under `key` (made empty on first use and
-- after cuda.reset())
function core.device_state(key, dev)
  local d = per_device[dev.ordinal]
  if not d then d = {}; per_device[dev.ordinal] = d end
  local s = d[key]
  if not s then s = {}; d[key] = s end
  return s
end

-- an event of device dev (cuda.event makes them on the current device, which stays as
-- it was): the several-GPU families' (solve's shares, the sort over parts) one helper.
-- Without timing unless `timing` (a bench's timeline)
function core.event_on(dev, timing)
  local cur = cuda.device()
  local opts = {timing = timing == true}
  if cur.ordinal == dev.ordinal then return cuda.event(opts) end
  dev:use()
  local ok, e = pcall(cuda.event, opts)
  cur:use()
  if not ok then error(e, 0) end
  return e
end

-- let kernel k take `bytes` of dynamic shared memory a block (past the 48 KiB
-- that needs no asking): the attribute is set once a kernel and size, not a
-- launch, since a driver call a launch is host time a small call cannot spare
local shared_allowed = setmetatable({}, {__mode = "k"})
function core.allow_shared(k, bytes)
  if (shared_allowed[k] or -1) < bytes then
    k:set_max_dynamic_shared(bytes)
    shared_allowed[k] = bytes
  end
end

-- float64 products take tensor cores (matmul's dmma) on compute capability
-- 8.0 and later: matmul's default there, and LU's choice of update and trsm
function core.dmma_for(dt, dev)
  return dt == "float64" and dev.major >= 8
end

-- multiprocessors, asked of the driver once a device
-- (by the device object, one an ordinal: no call into C to read its ordinal)
local sm_counts = {}
function core.sm_count(dev)
  local c = sm_counts[dev]
  if not c then
    c = dev:attribute("multiprocessor_count")
    sm_counts[dev] = c
  end
  return c
end

-- }======================================================


-- {====================================================== scratch memory

-- A stream's (or, for the default stream, a device's) scratch array of a kind:
-- a stream's work is ordered, two streams' is not, so two streams never share
-- one. Arrays grow to the largest request and go with the garbage collector.
-- kinds[name] = {dtype = ..., zero = true?}: a zeroed kind is filled with 0 when
-- made (on the caller's stream), and its users leave it at zero. Arrays are
-- kept by stream or by device object, and their lengths here (a small call
-- reads them without a call into C).
local lengths = setmetatable({}, {__mode = "k"})
function core.scratch_kind(name, dtype, zero)
  kinds[name] = kinds[name] or {dtype = dtype, zero = zero,
                                streams = setmetatable({}, {__mode = "k"}),
                                devices = setmetatable({}, {__mode = "v"})}
end

function core.scratch(kind, dev, stream, n)
  local sc = kinds[kind]
  if not sc then error("cuda.catalog: no scratch kind " .. tostring(kind), 2) end
  local w
  if stream then w = sc.streams[stream] else w = sc.devices[dev] end
  if not w or lengths[w] < n then
    n = math.max(n, 1)
    w = cuda.array(sc.dtype, n, {device = dev.ordinal})
    lengths[w] = n
    if sc.zero then w:fill(0, stream) end   -- on the stream, ahead of the kernel
    if stream then sc.streams[stream] = w else sc.devices[dev] = w end
  end
  return w
end

-- give back the device memory the catalog keeps between calls: every scratch
-- array (closed once its device has done the work queued on it, on any stream),
-- and what families keep a device (the several-GPU solvers' streams, whose scratch
-- this is). A later call makes new ones (and loads its kernels again). Returns the
-- bytes of scratch freed. (An array that is gone already was another state's
-- cuda.reset(): this state's reset empties these tables itself.)
local function nbytes(w) return w.nbytes end
function core.free_scratch()
  local bytes, done = 0, {}
  for _, sc in pairs(kinds) do
    for _, t in ipairs{sc.streams, sc.devices} do
      for k, w in pairs(t) do
        local ok, n = pcall(nbytes, w)
        if ok then
          local dev = w.device
          if not done[dev] then dev:synchronize(); done[dev] = true end
          bytes = bytes + n
          w:close()
        end
        t[k] = nil
      end
    end
  end
  -- what families keep a device goes with the loaded kernels, as in clear(): the
  -- predicate kernels' names (scan) must never outlive the kernels they name
  per_device = {}
  cache = {}
  core.version = core.version + 1
  return bytes
end

-- }======================================================


-- {====================================================== results read back

-- one pinned host word a stream (or device) and dtype, reused
local readback = setmetatable({}, {__mode = "k"})

-- the first element of a device array of results (a count, a reduction), read
-- through a pinned word once the caller's stream has done it: only that
-- stream is synchronized (the default stream's copy waits for its own work)
function core.read_word(word, stream)
  local words
  if stream then
    words = readback[stream] or {}
    readback[stream] = words
  else
    local ordinal = word.device.ordinal
    words = readback_dev[ordinal] or {}
    readback_dev[ordinal] = words
  end
  local h = words[word.dtype]
  if not h then
    h = cuda.host_array(word.dtype, 1, {pinned = true})
    words[word.dtype] = h
  end
  local v = word:view(1, 1)
  if stream then
    v:copy_to(h, stream)
    stream:synchronize()
  else
    v:copy_to(h)
  end
  return h[1]
end

-- }======================================================


-- {====================================================== argument checks

-- raise "cuda.catalog.<fname>: ..." at the user's line: the first caller
-- outside the catalog's own modules, however deep the check that failed
local function user_level()
  local level = 3                 -- 1: error's caller (fail), 2: fail's caller
  while true do
    local info = debug.getinfo(level, "S")
    if not info then return 1 end
    -- C frames between (an NVTX range, a pcall) have no line to name: look past them
    if info.what ~= "C" and not info.source:find("^=%[culua%.catalog") then return level - 1 end
    level = level + 1
  end
end

function core.fail(fname, fmt, ...)
  error(("cuda.catalog.%s: " .. fmt):format(fname, ...), user_level())
end
local fail = core.fail

function core.check_array(fname, what, x)
  if cuda.type(x) ~= "cuda.array" then fail(fname, "%s must be a cuda.array, got %s", what, cuda.type(x) or type(x)) end
  return x
end

-- the dtype, length, device and address of an open cuda.array, refused (a closed one,
-- or one of a device reset since, too) with the function's name, and refused
-- unless its dtype is one of `allowed` (a list) when that is given
local array_info = C.array
function core.open_dtype(fname, what, x, allowed)
  local dt, n, dev, ptr = array_info(x)
  if not dt then
    if n == "type" then core.check_array(fname, what, x) end
    fail(fname, n == "closed" and "%s is closed" or "%s belongs to a device reset by cuda.reset()", what)
  end
  if allowed then core.dtype_in(fname, what, dt, allowed) end
  return dt, n, dev, ptr
end

-- rows, cols of a 2-D array, or of a 1-D array with the dims given
function core.dims(fname, what, x, rows, cols)
  local shape = x.shape
  if #shape == 2 then
    if (rows and rows ~= shape[1]) or (cols and cols ~= shape[2]) then
      fail(fname, "%s is %dx%d, expected %dx%d", what, shape[1], shape[2], rows or shape[1], cols or shape[2])
    end
    return shape[1], shape[2]
  end
  if not (rows and cols) then
    fail(fname, "%s is 1-D (%d elements): make it 2-D, or give m, n and k", what, #x)
  end
  if #x < rows * cols then
    fail(fname, "%s has %d elements, fewer than %dx%d", what, #x, rows, cols)
  end
  return rows, cols
end

function core.ceil_div(a, b) return (a + b - 1) // b end

-- the bytes of an element of each dtype (src/dtype.c's culua_dtype_size)
core.dtype_bytes = {int8 = 1, uint8 = 1, float8_e4m3 = 1, float8_e5m2 = 1, int16 = 2, uint16 = 2, float16 = 2,
                    bfloat16 = 2, int32 = 4, uint32 = 4, float32 = 4, int64 = 8, uint64 = 8, float64 = 8}

function core.one_of(fname, what, v, allowed)
  for i = 1, #allowed do if v == allowed[i] then return v end end
  local s = {}
  for _, a in ipairs(allowed) do s[#s + 1] = tostring(a) end
  fail(fname, "%s must be one of %s, got %s", what, table.concat(s, ", "), tostring(v))
end

-- a knob of "how many blocks" (matmul.tune's *_persistent): nil (the default), a boolean,
-- or a count of blocks >= 1, a float that is an integer taken as one; anything else refused
function core.block_count(fname, what, v)
  if v == nil or type(v) == "boolean" then return v end
  local c = math.type(v) == "float" and math.tointeger(v) or v
  if math.type(c) ~= "integer" or c < 1 then
    fail(fname, "%s must be a boolean or a block count, got %s", what, tostring(v))
  end
  return c
end

-- opts[name], refused unless it is nil (the option's default) or a boolean
function core.flag(fname, opts, name)
  local v = opts[name]
  if v ~= nil and type(v) ~= "boolean" then fail(fname, "%s must be a boolean, got %s", name, type(v)) end
  return v
end

-- the options table (or an empty one, shared and read-only: small calls are
-- bound by work like a table a call), refusing keys not in `known` (a list):
-- a misspelt option must not be ignored in silence
local no_options = setmetatable({}, {__newindex = function () error("cuda.catalog: the empty options are read-only", 2) end})
core.no_options = no_options   -- what options() returns for none: a family tells a call without options by it
function core.options(fname, opts, known)
  if opts == nil then return no_options end
  if type(opts) ~= "table" then fail(fname, "opts must be a table, got %s", type(opts)) end
  for key in pairs(opts) do
    local found = false
    for _, k in ipairs(known) do if k == key then found = true; break end end
    if not found then
      fail(fname, "unknown option '%s' (known: %s)", tostring(key), table.concat(known, ", "))
    end
  end
  return opts
end

-- dtype dt (of the array named `what`), refused unless it is one of `allowed`
function core.dtype_in(fname, what, dt, allowed)
  for i = 1, #allowed do if dt == allowed[i] then return dt end end
  fail(fname, "%s has dtype %s; expected one of %s", what, dt, table.concat(allowed, ", "))
end

-- the dtype of x, refused unless it is one of `allowed`
function core.dtype_of(fname, what, x, allowed)
  return core.dtype_in(fname, what, x.dtype, allowed)
end

-- the device that arrays x, y, ... share (nil entries are skipped), or an error
-- naming the two that differ
-- (a device's object is one per ordinal, so objects compare as their ordinals would;
-- no table a call: small catalog calls are bound by work like this)
function core.same_device(fname, names, ...)
  local dev, first
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if a ~= nil then
      local d = a.device
      if dev == nil then dev, first = d, names[i]
      elseif d ~= dev then
        fail(fname, "%s is on device %d but %s is on device %d", names[i], d.ordinal, first, dev.ordinal)
      end
    end
  end
  return dev
end

-- a stream option: nil or a cuda.stream of device `dev`
function core.check_stream(fname, stream, dev)
  if stream == nil then return nil end
  if cuda.type(stream) ~= "cuda.stream" then fail(fname, "stream must be a cuda.stream, got %s", cuda.type(stream) or type(stream)) end
  if stream.device and dev and stream.device.ordinal ~= dev.ordinal then
    fail(fname, "stream is on device %d but the arrays are on device %d", stream.device.ordinal, dev.ordinal)
  end
  return stream
end

-- a C reference f (cuda._catalog.ref_*) as cuda.catalog.<fname>: its errors name
-- that, at the user's line, instead of the C name at the wrapper's line
function core.reference(fname, f)
  local function out(ok, ...)
    if ok then return ... end
    local msg = tostring((...)):gsub("^%[culua[^%]]*%]:%d+: ", ""):gsub("^[%w_.:]+: ", "", 1)
    fail(fname, "%s", msg)
  end
  return function (...) return out(pcall(f, ...)) end
end

-- }======================================================

return core
