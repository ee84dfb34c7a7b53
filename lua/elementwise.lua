-- culua.elementwise: kernels from a line of CUDA C (doc/elementwise.md).
--
--   cuda.elementwise{params =, out =, body =, name =, preamble =} -> callable
--   cuda.map(body, {name = value, ...} [, opts])
--   cuda.reduction{params =, map =, reduce =, identity =, post =, dtype =, name =, preamble =} -> callable
--   x:sum() x:min() x:max() x:mean() x:norm() x:dot(y) x:map(expr)   (M.methods)
--
-- Each is generated CUDA C, compiled by NVRTC through the disk cache (cuda.compile)
-- once per type signature and device, and kept here by signature and device, so
-- that a call again costs a table look-up, the argument checks and a prepared
-- launch. Bodies see their arguments as locals of a compute type (the dtype's own
-- type; float for the four low-precision dtypes): inputs are read at i, the body
-- runs, outputs are written back at i. Arrays are cuda.arrays (device or managed
-- memory) or mapped cuda.host_arrays, which kernels reach in place (doc/memory.md).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local G = require "culua.elementwise_call"
local array_info = cuda._catalog.array

local M = {}

local THREADS = 256
-- blocks a multiprocessor at most (the loops stride past; 0: no cap, a round a
-- thread), and chunks a thread an iteration of the vector loop (loops, below): tuning
-- knobs that bench/elementwise.lua's sweep sets before it makes its kernels. 0 and 1:
-- axpy over 2^28 float32 at 3050 GB/s, sin(x*3 + y) 3040, against 2814 and 2866 with
-- 8 blocks (the old default) and 2893-2908 with 16-32 blocks and four chunks (H100,
-- bench/RESULTS.md, session 26). Reductions keep a cap (8 where this is 0).
M.blocks_per_sm = 0

-- {====================================================== dtypes

-- storage type, compute type, bytes, header, and the kind of a scalar carrier
local DT = {
  int8 = {"signed char", "int", 1, nil, "i"}, uint8 = {"unsigned char", "unsigned", 1, nil, "u"},
  int16 = {"short", "int", 2, nil, "i"}, uint16 = {"unsigned short", "unsigned", 2, nil, "u"},
  int32 = {"int", "int", 4, nil, "i"}, uint32 = {"unsigned", "unsigned", 4, nil, "u"},
  int64 = {"long long", "long long", 8, nil, "i"},
  uint64 = {"unsigned long long", "unsigned long long", 8, nil, "u"},
  float32 = {"float", "float", 4, nil, "f"}, float64 = {"double", "double", 8, nil, "f"},
  float16 = {"__half", "float", 2, "cuda_fp16.h", "f"},
  bfloat16 = {"__nv_bfloat16", "float", 2, "cuda_bf16.h", "f"},
  float8_e4m3 = {"__nv_fp8_e4m3", "float", 1, "cuda_fp8.h", "f"},
  float8_e5m2 = {"__nv_fp8_e5m2", "float", 1, "cuda_fp8.h", "f"},
}
local DTYPE_LIST = "int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64, " ..
                   "float16, bfloat16, float8_e4m3, float8_e5m2"
-- C names a declaration may use for a dtype
local ALIAS = {float = "float32", double = "float64", int = "int32", unsigned = "uint32",
               half = "float16", __half = "float16", __nv_bfloat16 = "bfloat16"}
local CARRIER = {i = "long long", u = "unsigned long long", f = "double"}
-- accumulators a warp can shuffle
local ACC_OK = {int32 = true, uint32 = true, int64 = true, uint64 = true, float32 = true, float64 = true}

M.dtypes = DT

-- }======================================================


-- {====================================================== errors

local SOURCE = debug.getinfo(1, "S").source

-- the first level outside this module and the catalog's (a check may be deep)
local function user_level()
  local level = 3
  while true do
    local info = debug.getinfo(level, "S")
    if not info then return 1 end
    if info.what ~= "C" and info.source ~= SOURCE and not info.source:find("^=%[culua%.catalog") then
      return level - 1
    end
    level = level + 1
  end
end

local function fail(fname, fmt, ...)
  error((fname .. ": " .. fmt):format(...), user_level())
end

-- where the user's code defined a kernel: its file and line
local function where()
  local level = user_level()
  local info = debug.getinfo(level, "Sl")
  if not info or info.currentline < 0 then return "?", 1 end
  return info.short_src, info.currentline
end

local function options(fname, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(fname, "options must be a table, got %s", type(opts)) end
  for key in pairs(opts) do
    local found = false
    for _, k in ipairs(known) do if k == key then found = true; break end end
    if not found then fail(fname, "unknown option '%s' (known: %s)", tostring(key), table.concat(known, ", ")) end
  end
  return opts
end

local function check_string(fname, what, v, optional)
  if v == nil and optional then return nil end
  if type(v) ~= "string" then fail(fname, "%s must be a string, got %s", what, type(v)) end
  return v
end

-- }======================================================


-- {====================================================== declarations

local RESERVED = {i = true, n = true}

-- "T a, T *x, float32 b" -> {{name =, type =, placeholder =, array =}, ...}
local function parse_params(fname, what, s, list, seen, out, internal)
  if s == nil or not s:find("%S") then return list end
  for item in (s .. ","):gmatch("([^,]*),") do
    local ty, star, name = item:match("^%s*([%a_][%w_]*)%s*(%**)%s*([%a_][%w_]*)%s*$")
    if not ty or #star > 1 then
      fail(fname, "%s: cannot read %q (expected 'type name' for a scalar or 'type *name' for an array)", what, item)
    end
    if not internal and (RESERVED[name] or name:find("^culua_")) then fail(fname, "%s: the name '%s' is taken (i, n and culua_*)", what, name) end
    if seen[name] then fail(fname, "%s: '%s' is declared twice", what, name) end
    seen[name] = true
    local p = {name = name, array = out or star == "*", out = out}
    ty = ALIAS[ty] or ty
    if DT[ty] then p.type = ty
    elseif ty:find("^%u[%w_]*$") then p.type, p.placeholder = ty, true
    else fail(fname, "%s: unknown dtype '%s' for %s (expected one of %s, or a placeholder such as T)", what, ty, name, DTYPE_LIST)
    end
    list[#list + 1] = p
  end
  return list
end

-- does the body read `name` (anything but a plain `name = ...`)?
local function reads(body, name)
  local rest = body:gsub("%f[%w_]" .. name .. "%s*=%f[^=]", "")
  return rest:find("%f[%w_]" .. name .. "%f[^%w_]") ~= nil
end

-- does the body assign `name` (=, op=, ++, --)?
local function assigns(body, name)
  local n = "%f[%w_]" .. name .. "%f[^%w_]"
  return body:find(n .. "%s*[-+*/%%&|^]?=%f[^=]") or body:find(n .. "%s*<<=") or body:find(n .. "%s*>>=")
      or body:find(n .. "%s*%+%+") or body:find(n .. "%s*%-%-") or body:find("%+%+%s*" .. n)
      or body:find("%-%-%s*" .. n)
end

-- }======================================================


-- {====================================================== arguments

-- what a kernel cannot take, for the messages: a host array says why
local function kind_of(v)
  local t = cuda.type(v)
  if t == "cuda.host_array" then return "cuda.host_array (not mapped: make it with {mapped = true})" end
  return t or type(v)
end

-- Check the arguments against the declarations, bind placeholders, and fill
-- `argv` (the launch's arguments in order). Returns the signature key, the
-- length and the device; each array's address and end go to ptrs and ends.
local bound, parts, ptrs, ends = {}, {}, {}, {}
local function bind(fname, decl, argv, ...)
  local params = decl.params
  local np = #params
  for k in pairs(bound) do bound[k] = nil end
  local n, dev, first = nil, nil, nil
  for j = 1, np do
    local p = params[j]
    local v = select(j, ...)
    local dt
    if p.array then
      local len, adev, ptr, pitched
      dt, len, adev, ptr, pitched = array_info(v, true)
      if not dt then
        if len == "type" then
          fail(fname, "argument #%d (%s) must be a cuda.array, got %s", j, p.name,
               type(v) == "number" and "a number (it is declared an array: '*')" or kind_of(v))
        end
        fail(fname, "argument #%d (%s) is %s", j, p.name, len == "closed" and "closed" or "an array of a device reset by cuda.reset()")
      end
      if pitched then fail(fname, "argument #%d (%s) is a pitched 2-D array: elementwise kernels take dense arrays", j, p.name) end
      if n == nil then n, dev, first = len, adev, p.name
      else
        if len ~= n then fail(fname, "argument #%d (%s) has %d elements but %s has %d", j, p.name, len, first, n) end
        if adev ~= dev then fail(fname, "argument #%d (%s) is on device %d but %s is on device %d", j, p.name, adev.ordinal, first, dev.ordinal) end
      end
      ptrs[j], ends[j] = ptr, ptr + len * DT[dt][3]
      if p.placeholder then
        local b = bound[p.type]
        if b == nil then bound[p.type] = dt
        elseif b ~= dt then fail(fname, "argument #%d (%s) has dtype %s but %s is %s", j, p.name, dt, p.type, b) end
      elseif dt ~= p.type then
        fail(fname, "argument #%d (%s) has dtype %s; declared %s", j, p.name, dt, p.type)
      end
      argv[j] = v
      parts[j] = dt
    else
      if type(v) ~= "number" then
        fail(fname, "argument #%d (%s) must be a number (it is declared a scalar), got %s", j, p.name, cuda.type(v) or type(v))
      end
      argv[j] = v
      parts[j] = "s"
    end
  end
  -- the scalars' types, now that the arrays have bound the placeholders
  for j = 1, np do
    local p = params[j]
    if not p.array then
      local dt = p.placeholder and bound[p.type] or p.type
      if dt == nil then fail(fname, "argument #%d (%s): no array says what %s is", j, p.name, p.type) end
      local v = argv[j]
      if DT[dt][5] ~= "f" then
        local iv = math.tointeger(v)
        if iv == nil then fail(fname, "argument #%d (%s) must be an integer for %s, got %s", j, p.name, dt, tostring(v)) end
        argv[j] = iv
      else
        argv[j] = v + 0.0
      end
      parts[j] = dt
    end
  end
  if n == nil then fail(fname, "no array among the arguments") end
  argv[np + 1] = n
  -- the signature string: the last call's where the dtypes are the same (a call in a
  -- loop makes no string then)
  local last = decl.last_parts
  if last then
    local same = true
    for j = 1, np do if last[j] ~= parts[j] then same = false; break end end
    if same then return decl.last_sig, n, dev end
  else
    last = {}
    decl.last_parts = last
  end
  local sig = table.concat(parts, ",", 1, np)
  table.move(parts, 1, np, 1, last)
  decl.last_sig = sig
  return sig, n, dev
end

-- }======================================================


-- {====================================================== source

local function headers(types)
  local seen, out = {}, {}
  for _, dt in pairs(types) do
    local h = DT[dt][4]
    if h and not seen[h] then seen[h] = true; out[#out + 1] = ("#include <%s>\n"):format(h) end
  end
  table.sort(out)
  return table.concat(out)
end

-- the types of a signature: every param's dtype, and every placeholder's
local function types_of(decl, sig)
  local types, ph, j = {}, {}, 0
  for dt in sig:gmatch("[^,]+") do
    j = j + 1
    types[j] = dt
    local p = decl.params[j]
    if p and p.placeholder then ph[p.type] = dt end
  end
  return types, ph
end

-- the kernel's parameters (pointers, scalar carriers) and the loads, stores and
-- per-element locals; `ix` is the element's index expression, `vec` the vector
-- loads' variable of an array (nil for scalar loads)
local function prologue(decl, types)
  local ps, sc = {}, {}
  for j, p in ipairs(decl.params) do
    local d = DT[types[j]]
    if p.array then
      ps[#ps + 1] = ("%s%s *culua_p_%s"):format(p.out and "" or "const ", d[1], p.name)
    else
      ps[#ps + 1] = ("%s culua_s_%s"):format(CARRIER[d[5]], p.name)
      sc[#sc + 1] = ("  const %s culua_v_%s = (%s)culua_s_%s;\n"):format(d[2], p.name, d[2], p.name)
    end
  end
  ps[#ps + 1] = "long long n"
  return table.concat(ps, ", "), table.concat(sc)
end

-- one element: locals loaded, `stmt` run, outputs stored; `at(p)` is the place
-- of p's element (an lvalue of its storage type)
local function element(decl, types, stmt, at)
  local pre, post = {}, {}
  for j, p in ipairs(decl.params) do
    if p.array then
      local d = DT[types[j]]
      if not p.out or p.read then
        pre[#pre + 1] = ("%s culua_v_%s = (%s)%s;"):format(d[2], p.name, d[2], at(p))
      else
        pre[#pre + 1] = ("%s culua_v_%s;"):format(d[2], p.name)
      end
      if p.out then post[#post + 1] = ("%s = (%s)(culua_v_%s);"):format(at(p), d[1], p.name) end
    end
  end
  return table.concat(pre, " ") .. " " .. stmt .. " " .. table.concat(post, " ")
end

-- the arguments of the per-element function (by value; outputs by reference)
local function body_args(decl, types, ph)
  local a, c = {"const long long i", "const long long n"}, {"i", "n"}
  for j, p in ipairs(decl.params) do
    local ct = DT[types[j]][2]
    if p.out then a[#a + 1] = ("%s &%s"):format(ct, p.name) else a[#a + 1] = ("const %s %s"):format(ct, p.name) end
    c[#c + 1] = "culua_v_" .. p.name
  end
  local td = {}
  for name, dt in pairs(ph) do td[#td + 1] = ("typedef %s %s;\n"):format(DT[dt][2], name) end
  table.sort(td)
  return table.concat(a, ", "), table.concat(c, ", "), table.concat(td)
end

-- the vector path: elements a thread loads at once, and each array's chunk
local function vector_types(decl, types, width)
  local out = {}
  for j, p in ipairs(decl.params) do
    if p.array then
      local d = DT[types[j]]
      out[#out + 1] = ("struct __align__(%d) culua_c_%s { %s e[%d]; };\n"):format(width * d[3], p.name, d[1], width)
    end
  end
  return table.concat(out)
end

-- the two loops over 0 .. n-1: scalar (grid-stride), and vector chunks then
-- the tail; `stmt` is the per-element statement. The vector loop takes M.unroll
-- chunks a thread an iteration (each a grid's stride from the last): all their
-- loads are issued before the first element is computed, so more bytes are in
-- flight a thread; the chunks past the last whole round go one at a time.
M.unroll = 1
local function loops(decl, types, stmt, width, vector)
  local ix = function (p) return ("culua_p_%s[i]"):format(p.name) end
  local one = element(decl, types, stmt, ix)
  local head = "  const long long culua_t = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n" ..
               "  const long long culua_stride = (long long)gridDim.x * blockDim.x;\n"
  if not vector then
    return head .. ("  for (long long i = culua_t; i < n; i += culua_stride) { %s }\n"):format(one)
  end
  local U = M.unroll
  -- one round of u chunks (u: 1 or U), the chunk of index u at culua_j + u * stride
  local function round(u)
    local decls, ld, st = {}, {}, {}
    for _, p in ipairs(decl.params) do
      if p.array then
        decls[#decls + 1] = ("culua_c_%s culua_k_%s[%d];"):format(p.name, p.name, u)
        if not p.out or p.read then
          ld[#ld + 1] = ("culua_k_%s[culua_u] = ((const culua_c_%s *)culua_p_%s)[culua_j + culua_u * culua_stride];"):format(
            p.name, p.name, p.name)
        end
        if p.out then
          st[#st + 1] = ("((culua_c_%s *)culua_p_%s)[culua_j + culua_u * culua_stride] = culua_k_%s[culua_u];"):format(
            p.name, p.name, p.name)
        end
      end
    end
    local inner = element(decl, types, stmt, function (p) return ("culua_k_%s[culua_u].e[culua_e]"):format(p.name) end)
    local loop = ("    #pragma unroll\n    for (int culua_u = 0; culua_u < %d; ++culua_u) {"):format(u)
    return "    " .. table.concat(decls, " ") .. "\n" ..
      (#ld > 0 and (loop .. " " .. table.concat(ld, " ") .. " }\n") or "") ..
      loop .. "\n" ..
      ("      #pragma unroll\n      for (int culua_e = 0; culua_e < %d; ++culua_e) {\n"):format(width) ..
      ("        const long long i = (culua_j + culua_u * culua_stride) * %d + culua_e; %s\n      }\n    }\n"):format(width, inner) ..
      (#st > 0 and (loop .. " " .. table.concat(st, " ") .. " }\n") or "")
  end
  local out = head ..
    ("  const long long culua_nv = n / %d;\n"):format(width) ..
    "  long long culua_j = culua_t;\n"
  if U > 1 then
    out = out .. ("  for (; culua_j + %d * culua_stride < culua_nv; culua_j += %d * culua_stride) {\n"):format(U - 1, U) ..
      round(U) .. "  }\n"
  end
  return out ..
    "  for (; culua_j < culua_nv; culua_j += culua_stride) {\n" .. round(1) .. "  }\n" ..
    ("  for (long long i = culua_nv * %d + culua_t; i < n; i += culua_stride) { %s }\n"):format(width, one)
end

-- elements a thread takes at once on the vector path: 16 bytes of the widest
-- array (nil: no vector path, when the arrays' widths differ)
local function vector_width(decl, types)
  local es
  for j, p in ipairs(decl.params) do
    if p.array then
      local s = DT[types[j]][3]
      if es and s ~= es then return nil end
      es = s
    end
  end
  return es and 16 // es
end

local function compile(fname, decl, src, dev)
  local opts = {"-std=c++17"}
  if dev then opts[2] = ("-arch=compute_%d%d"):format(dev.major, dev.minor) end
  local ok, prog = pcall(cuda.compile, src, {options = opts, name = decl.name .. ".cu"})
  if not ok then
    error(("%s: '%s' (defined at %s:%d) does not compile: %s"):format(fname, decl.name, decl.file, decl.line,
          tostring(prog)), user_level())
  end
  return prog
end

-- }======================================================


-- {====================================================== elementwise

local function elementwise_source(decl, sig)
  local types, ph = types_of(decl, sig)
  local width = vector_width(decl, types)
  local args, call, td = body_args(decl, types, ph)
  local params, scalars = prologue(decl, types)
  local stmt = ("culua_body(%s);"):format(call)
  local src = headers(types) .. td .. (decl.preamble or "") .. "\n" ..
    ("static __device__ __forceinline__ void culua_body(%s) {\n#line %d \"%s\"\n%s\n;\n}\n"):format(
      args, decl.line, decl.file, decl.body) ..
    "#line 1 \"culua-elementwise\"\n" ..
    (width and vector_types(decl, types, width) or "") ..
    ("extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n%s%s}\n"):format(
      THREADS, decl.name, params, scalars, loops(decl, types, stmt)) ..
    (width and ("extern \"C\" __global__ void __launch_bounds__(%d) %s_vec(%s) {\n%s%s}\n"):format(
      THREADS, decl.name, params, scalars, loops(decl, types, stmt, width, true)) or "")
  return src, width
end

-- the compiled kernels of a signature on a device: {k =, kv =, width =, align = {...}}
local function entry_for(fname, decl, sig, dev)
  local by = decl.kernels[dev]
  if not by or by[0] ~= core.epoch then   -- none yet, or a cuda.reset() since: their modules are gone
    by = {[0] = core.epoch}
    decl.kernels[dev] = by
  end
  local e = by[sig]
  if e then return e end
  local src, width = decl.source(decl, sig)
  local prog = compile(fname, decl, src, dev)
  local mod = prog:module({device = dev.ordinal})
  e = {k = mod:kernel(decl.name), width = width, prepared = {}}
  if width then e.kv = mod:kernel(decl.name .. "_vec") end
  if decl.acc then e.kr, e.kc = mod:kernel(decl.name .. "_rows"), mod:kernel(decl.name .. "_cols") end
  by[sig] = e
  return e
end

-- the grid: a thread a chunk, at most blocks_per_sm blocks a multiprocessor (the
-- loops stride past); blocks_per_sm = 0 (elementwise kernels only, not reductions,
-- whose last block reads a partial a block) is one round of M.unroll chunks a thread
local function grid_for(dev, items, reduction)
  local bps = M.blocks_per_sm
  if bps == 0 and reduction then bps = 8 end
  if bps == 0 then return math.max(1, (items + THREADS * M.unroll - 1) // (THREADS * M.unroll)) end
  local g = (items + THREADS - 1) // THREADS
  local cap = core.sm_count(dev) * bps
  if g > cap then g = cap end
  if g < 1 then g = 1 end
  return g
end

-- launch kernel k over `items` (vector chunks or elements) with the arguments in
-- argv; returns the prepared launcher it used (on the default stream)
local cfg = {block = THREADS}
local function launch(e, k, dev, items, stream, argv, nargs, reduction)
  local g = grid_for(dev, items, reduction)
  if stream == nil then
    local by = e.prepared[k]
    if not by then by = {}; e.prepared[k] = by end
    local go = by[g]
    if not go then go = k:prepare({grid = g, block = THREADS}); by[g] = go end
    go(table.unpack(argv, 1, nargs))
    return go
  else
    cfg.grid, cfg.stream = g, stream
    k:launch(cfg, table.unpack(argv, 1, nargs))
    cfg.stream = nil
  end
end

-- each array's alignment for the vector path, by signature (bytes: width x size)
local function alignments(decl, sig, width)
  local types = types_of(decl, sig)
  local al = {}
  for j, p in ipairs(decl.params) do al[j] = p.array and width * DT[types[j]][3] or 1 end
  return al
end

-- are the arrays of the last bind aligned for e's vector path?
local function aligned(e, decl, sig, np)
  local al = e.align
  if not al then al = alignments(decl, sig, e.width); e.align = al end
  for j = 1, np do
    if al[j] > 1 and ptrs[j] % al[j] ~= 0 then return false end
  end
  return true
end

-- refuse an output that overlaps another array but is not the same elements
local function check_overlap(fname, decl)
  local params = decl.params
  for j, p in ipairs(params) do
    if p.out then
      local pj, sj = ptrs[j], ends[j]
      for l, q in ipairs(params) do
        if l ~= j and q.array then
          local pl, sl = ptrs[l], ends[l]
          if pl ~= pj and pl < sj and pj < sl then
            fail(fname, "argument #%d (%s) overlaps argument #%d (%s) at another offset (in place is the same elements only)",
                 j, p.name, l, q.name)
          end
        end
      end
    end
  end
end

local EW_KEYS = {"params", "out", "body", "name", "preamble"}
local CALL_OPTIONS = {"stream"}

local function new_decl(fname, spec, keys)
  if type(spec) ~= "table" then fail(fname, "expects a table of fields, got %s", type(spec)) end
  options(fname, spec, keys)
  local decl = {fname = fname, kernels = setmetatable({}, {__mode = "k"})}
  decl.name = check_string(fname, "name", spec.name, true) or "culua_kernel"
  if not decl.name:find("^[%a_][%w_]*$") then fail(fname, "name must be a C identifier, got %q", decl.name) end
  decl.preamble = check_string(fname, "preamble", spec.preamble, true)
  decl.file, decl.line = where()
  decl.file = decl.file:gsub('[\\"]', "\\%0")
  return decl
end

local function run_elementwise(fname, decl, argv, ...)
  local np = decl.nparams
  local nargs = select("#", ...)
  local opts
  if nargs == np + 1 then
    opts = select(nargs, ...)
    if type(opts) ~= "table" or cuda.type(opts) then
      fail(fname, "expects %d arguments (%s), got %d", np, decl.names, nargs)
    end
    options(fname, opts, CALL_OPTIONS)
  elseif nargs ~= np then
    fail(fname, "expects %d arguments (%s), got %d", np, decl.names, nargs)
  end
  local sig, n, dev = bind(fname, decl, argv, ...)
  local stream = opts and core.check_stream(fname, opts.stream, dev)
  if decl.nout > 0 and decl.narrays > 1 then check_overlap(fname, decl) end
  if n == 0 then return end
  local e = entry_for(fname, decl, sig, dev)
  local vec = e.width ~= nil and n >= e.width
  -- the call's facts, for the next call's fast path (lua/elementwise_call.lua)
  if vec and aligned(e, decl, sig, np) then
    local go = launch(e, e.kv, dev, n // e.width, stream, argv, np + 1)
    if go and decl.remember then decl.remember(parts, dev, n, true, e.align, true, go) end
  else
    local go = launch(e, e.k, dev, n, stream, argv, np + 1)
    if go and decl.remember then decl.remember(parts, dev, n, vec, e.align, false, go) end
  end
end

-- a call's arguments are kept in a table reused from call to call (no table a
-- call on the hot path). Its values are weak: every one is also an argument or a
-- local of the running call, so none goes while the call runs, and after it the
-- table keeps no array alive (a user's, or the scratch that free_scratch gives
-- back), whether the call returned or raised. (An earlier version emptied it
-- through a pcall a call, which cost host time on every call.)
local function new_argv() return setmetatable({}, {__mode = "v"}) end

local function outputs(decl, argv)
  local o = decl.outs
  if #o == 1 then return argv[o[1]] end
  local r = {}
  for k, j in ipairs(o) do r[k] = argv[j] end
  return table.unpack(r)
end

local function run_outputs(fname, decl, argv, ...)
  run_elementwise(fname, decl, argv, ...)
  return outputs(decl, argv)
end

-- a dtype's bytes and kind ("i", "u", "f"), for the fast path's code
local SIZE, KIND = {}, {}
for dt, d in pairs(DT) do SIZE[dt], KIND[dt] = d[3], d[5] end

local map_slow   -- cuda.map's general path (below): where a map kernel's fast path goes back to

local function elementwise(fname, spec, decl)
  decl = decl or new_decl(fname, spec, EW_KEYS)
  decl.body = check_string(fname, "body", spec.body)
  if not decl.body:find("%S") then fail(fname, "body is empty") end
  local params, seen = {}, {}
  parse_params(fname, "params", spec.params, params, seen, false, decl.internal)
  parse_params(fname, "out", spec.out, params, seen, true, decl.internal)
  decl.params, decl.nparams, decl.outs, decl.nout, decl.narrays = params, #params, {}, 0, 0
  local names = {}
  for j, p in ipairs(params) do
    names[j] = p.name
    if p.array then decl.narrays = decl.narrays + 1 end
    if p.out then
      p.read = reads(decl.body, p.name)
      decl.nout = decl.nout + 1
      decl.outs[decl.nout] = j
    end
  end
  if #params == 0 then fail(fname, "declares no arguments (params, out)") end
  decl.names = table.concat(names, ", ")
  decl.source = elementwise_source
  local argv = new_argv()
  local call = function (_, ...) return run_outputs(fname, decl, argv, ...) end
  if decl.narrays > 0 then   -- (none: every call is refused, by the general path)
    local kinds = {}
    for j, p in ipairs(params) do kinds[j] = p.out and "o" or p.array and "a" or "s" end
    local env = {array_info = array_info, keys = cuda._catalog.keys, core = core, M = M, size = SIZE,
                 kind = KIND, slow = run_outputs, map_slow = map_slow, fname = fname, decl = decl,
                 argv = argv, names = names}
    local fast, mapcall, remember = G.make(table.concat(kinds), env, SOURCE)
    if fast then call, decl.mapcall, decl.remember = fast, mapcall, remember end
  end
  return setmetatable({decl = decl}, {
    __call = call,
    __name = "cuda.elementwise",
    __tostring = function () return ("cuda.elementwise '%s' (%s)"):format(decl.name, decl.names) end,
    __index = {
      -- the generated CUDA C for a signature, e.g. k:source("float32,float32") (a dtype an argument)
      source = function (_, sig) return (elementwise_source(decl, sig)) end,
    },
  })
end

function M.elementwise(spec)
  return elementwise("cuda.elementwise", spec)
end

-- }======================================================


-- {====================================================== map

-- cuda.map(body, args [, opts]): names assigned in the body are the outputs
-- (arrays), the others inputs; an array is declared with its dtype, a Lua
-- number as int64 (an integer) or as the arrays' float type (float32 where
-- they are float32 or narrower, float64 otherwise). Kept by body, names and
-- kinds, then by dtypes.
local maps = {}
local map_names = {}

local function scalar_dtype(v, widest)
  if math.type(v) == "integer" then return "int64" end
  return widest
end

-- the last kernel of each body, whose fast path (lua/elementwise_call.lua) takes a
-- call with its names, kinds and dtypes, and gives any other call back to map_slow
local map_last = {}

function M.map(body, args, opts)
  local f = map_last[body]
  if f then return f(body, args, opts) end
  return map_slow(body, args, opts)
end

function map_slow(body, args, opts)
  local fname = "cuda.map"
  check_string(fname, "body", body)
  if type(args) ~= "table" or cuda.type(args) then fail(fname, "args must be a table of named arguments, got %s", cuda.type(args) or type(args)) end
  local variants = maps[body]
  if not variants then variants = {}; maps[body] = variants end
  -- the variant whose names are these
  local count = 0
  for _ in pairs(args) do count = count + 1 end
  local var
  for _, v in ipairs(variants) do
    if v.count == count then
      local ok = true
      for _, name in ipairs(v.names) do
        local a = args[name]
        if a == nil or (type(a) == "number") ~= v.scalar[name] then ok = false; break end
      end
      if ok then var = v; break end
    end
  end
  if not var then
    local names, scalar = {}, {}
    for k, a in pairs(args) do
      if type(k) ~= "string" or not k:find("^[%a_][%w_]*$") then fail(fname, "argument names must be C identifiers, got %s", tostring(k)) end
      names[#names + 1] = k
      scalar[k] = type(a) == "number"
    end
    table.sort(names)
    var = {count = count, names = names, scalar = scalar, by = {}}
    local file, line = where()
    var.file, var.line = file:gsub('[\\"]', "\\%0"), line
    variants[#variants + 1] = var
  end
  -- the dtypes: arrays' own, scalars' by the rule above
  local widest
  local names = var.names
  local sig = map_names
  local scalar = var.scalar
  for j = 1, #names do
    local name = names[j]
    local a = args[name]
    if not scalar[name] then
      local dt, why = array_info(a, true)   -- one call into C, not two (a call in a loop is bound by the host)
      if not dt then
        if why ~= "type" then
          fail(fname, "argument '%s' is %s", name, why == "closed" and "closed" or "an array of a device reset by cuda.reset()")
        end
        fail(fname, "argument '%s' must be a cuda.array or a number, got %s", name, kind_of(a))
      end
      if dt == "float64" then widest = "float64"
      elseif DT[dt][5] == "f" and widest == nil then widest = "float32" end
      sig[j] = dt
    end
  end
  widest = widest or "float64"
  for j, name in ipairs(names) do
    if var.scalar[name] then sig[j] = scalar_dtype(args[name], widest) end
  end
  -- the kernel of these dtypes: the last call's where they are the same (no string made)
  local k
  local last = var.last
  if last then
    k = var.last_k
    for j = 1, #names do if last[j] ~= sig[j] then k = nil; break end end
  end
  local key = not k and table.concat(sig, ",", 1, #names)
  k = k or var.by[key]
  if not k then
    local ins, outs = {}, {}
    for j, name in ipairs(names) do
      local decl = ("%s %s%s"):format(sig[j], var.scalar[name] and "" or "*", name)
      if assigns(body, name) then
        if var.scalar[name] then fail(fname, "'%s' is assigned in the body, so it must be an array, got a number", name) end
        outs[#outs + 1] = decl
      else
        ins[#ins + 1] = decl
      end
    end
    if #outs == 0 then fail(fname, "the body assigns none of the arguments (%s)", table.concat(names, ", ")) end
    local decl = {fname = fname, kernels = setmetatable({}, {__mode = "k"}), name = "culua_map", file = var.file, line = var.line}
    k = elementwise(fname, {params = table.concat(ins, ", "), out = table.concat(outs, ", "), body = body}, decl)
    k.order = {}
    for _, p in ipairs(k.decl.params) do k.order[#k.order + 1] = p.name end
    k.argv = new_argv()
    var.by[key] = k
  end
  if k ~= var.last_k then
    var.last = table.move(sig, 1, #names, 1, var.last or {})
    var.last_k = k
  end
  map_last[body] = k.decl.mapcall   -- (nil for a kernel of more arguments than a fast path takes)
  local argv, order = k.argv, k.order
  for j = 1, #order do argv[j] = args[order[j]] end
  if opts ~= nil then
    argv[#k.order + 1] = opts
    return k(table.unpack(argv, 1, #k.order + 1))
  end
  return k(table.unpack(argv, 1, #k.order))
end

-- }======================================================


-- {====================================================== reduction

local run_reduction
local RED_KEYS = {"params", "map", "reduce", "identity", "post", "dtype", "name", "preamble"}
local RED_CALL_OPTIONS = {"stream", "out", "axis"}

core.scratch_kind("elementwise_done", "uint32", true)
core.scratch_kind("elementwise_partials", "uint64")
for dt in pairs(ACC_OK) do core.scratch_kind("elementwise_result_" .. dt, dt) end

local function reduction_source(decl, sig)
  local types, ph = types_of(decl, sig)
  local nparams = #decl.params
  local acc = types[nparams + 1]
  local out = types[nparams + 2]
  local A, O = DT[acc][2], DT[out][1]
  local width = vector_width(decl, types)
  local args, call, td = body_args(decl, types, ph)
  local params, scalars = prologue(decl, types)
  params = params .. (", void *culua_partials, unsigned *culua_done, %s *culua_out, long long culua_rows, long long culua_cols"):format(O)
  local at = ("#line %d \"%s\"\n"):format(decl.line, decl.file)
  local stmt = ("culua_a = culua_reduce(culua_a, culua_map(%s));"):format(call)
  local function kernel(name, loop, finish)
    return ("extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n%s  culua_acc culua_a = culua_identity();\n%s%s}\n"):format(
      THREADS, name, params, scalars, loop, finish)
  end
  local whole = [[
  culua_a = culua_block(culua_a);
  __shared__ bool culua_last;
  if (threadIdx.x == 0) {
    ((culua_acc *)culua_partials)[blockIdx.x] = culua_a;
    __threadfence();
    culua_last = atomicAdd(culua_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (culua_last) {
    __threadfence();
    culua_a = culua_identity();
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
      culua_a = culua_reduce(culua_a, __ldcg((const culua_acc *)culua_partials + b));
    culua_a = culua_block(culua_a);
    if (threadIdx.x == 0) { *culua_out = (]] .. O .. [[)(culua_post(culua_a, n)); *culua_done = 0u; }
  }
]]
  local function ix(p) return ("culua_p_%s[i]"):format(p.name) end
  local rows = "  for (long long culua_r = blockIdx.x; culua_r < culua_rows; culua_r += gridDim.x) {\n" ..
    "    culua_a = culua_identity();\n" ..
    "    for (long long culua_c = threadIdx.x; culua_c < culua_cols; culua_c += blockDim.x) {\n" ..
    "      const long long i = culua_r * culua_cols + culua_c; " .. element(decl, types, stmt, ix) .. "\n    }\n" ..
    "    culua_a = culua_block(culua_a);\n" ..
    "    if (threadIdx.x == 0) culua_out[culua_r] = (" .. O .. ")(culua_post(culua_a, culua_cols));\n" ..
    "    __syncthreads();\n  }\n"
  local cols = "  for (long long culua_c = blockIdx.x * (long long)blockDim.x + threadIdx.x; culua_c < culua_cols;\n" ..
    "       culua_c += (long long)gridDim.x * blockDim.x) {\n" ..
    "    culua_a = culua_identity();\n" ..
    "    for (long long culua_r = 0; culua_r < culua_rows; ++culua_r) {\n" ..
    "      const long long i = culua_r * culua_cols + culua_c; " .. element(decl, types, stmt, ix) .. "\n    }\n" ..
    "    culua_out[culua_c] = (" .. O .. ")(culua_post(culua_a, culua_rows));\n  }\n"
  local src = headers(types) .. td .. ("typedef %s culua_acc;\n"):format(A) .. (decl.preamble or "") .. "\n" ..
    ("static __device__ __forceinline__ culua_acc culua_identity() {\n%sreturn (culua_acc)(%s\n);\n}\n"):format(at, decl.identity) ..
    ("static __device__ __forceinline__ culua_acc culua_reduce(const culua_acc a, const culua_acc b) {\n%sreturn (culua_acc)(%s\n);\n}\n"):format(at, decl.reduce) ..
    ("static __device__ __forceinline__ culua_acc culua_map(%s) {\n%sreturn (culua_acc)(%s\n);\n}\n"):format(args, at, decl.map) ..
    ("static __device__ __forceinline__ culua_acc culua_post(const culua_acc a, const long long n) {\n%sreturn (culua_acc)(%s\n);\n}\n"):format(at, decl.post) ..
    "#line 1 \"culua-reduction\"\n" ..
    "static __device__ __forceinline__ culua_acc culua_block(culua_acc v) {\n" ..
    "  __shared__ culua_acc culua_w[32];\n" ..
    "  #pragma unroll\n  for (int o = 16; o > 0; o >>= 1) v = culua_reduce(v, __shfl_down_sync(0xffffffffu, v, o));\n" ..
    "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n" ..
    "  __syncthreads();\n  if (lane == 0) culua_w[warp] = v;\n  __syncthreads();\n" ..
    "  if (warp == 0) {\n    v = lane < (int)(blockDim.x >> 5) ? culua_w[lane] : culua_identity();\n" ..
    "    #pragma unroll\n    for (int o = 16; o > 0; o >>= 1) v = culua_reduce(v, __shfl_down_sync(0xffffffffu, v, o));\n  }\n" ..
    "  return v;   /* thread 0's is the block's */\n}\n" ..
    (width and vector_types(decl, types, width) or "") ..
    kernel(decl.name, loops(decl, types, stmt), whole) ..
    (width and kernel(decl.name .. "_vec", loops(decl, types, stmt, width, true), whole) or "") ..
    kernel(decl.name .. "_rows", rows, "") ..
    kernel(decl.name .. "_cols", cols, "")
  return src, width
end

local function to_expr(fname, what, v)
  if type(v) == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      return v ~= v and "__int_as_float(0x7fc00000)" or (v > 0 and "__longlong_as_double(0x7ff0000000000000ll)" or "__longlong_as_double(0xfff0000000000000ll)")
    end
    return math.type(v) == "integer" and tostring(v) or ("%.17g"):format(v)
  end
  return check_string(fname, what, v)
end

local function reduction(fname, spec)
  local decl = new_decl(fname, spec, RED_KEYS)
  decl.map = check_string(fname, "map", spec.map)
  decl.reduce = check_string(fname, "reduce", spec.reduce)
  if spec.identity == nil then fail(fname, "identity is missing (the reduce's identity: 0 for a + b)") end
  decl.identity = to_expr(fname, "identity", spec.identity)
  decl.post = check_string(fname, "post", spec.post, true) or "a"
  local params, seen = {}, {}
  parse_params(fname, "params", spec.params, params, seen, false)
  if #params == 0 then fail(fname, "declares no arguments (params)") end
  decl.params, decl.nparams, decl.outs, decl.nout, decl.narrays = params, #params, {}, 0, 0
  local names = {}
  for j, p in ipairs(params) do names[j] = p.name; if p.array then decl.narrays = decl.narrays + 1 end end
  decl.names = table.concat(names, ", ")
  local acc = check_string(fname, "dtype", spec.dtype, true) or "float64"
  acc = ALIAS[acc] or acc
  if DT[acc] then
    if not ACC_OK[acc] then fail(fname, "dtype %s cannot accumulate (expected int32, uint32, int64, uint64, float32 or float64)", acc) end
  elseif not acc:find("^%u[%w_]*$") then
    fail(fname, "unknown dtype '%s' for dtype (expected one of %s, or a placeholder such as T)", acc, DTYPE_LIST)
  end
  decl.acc = acc
  decl.source = reduction_source
  local argv = new_argv()
  local r = setmetatable({decl = decl}, {
    __call = function (_, ...) return run_reduction(fname, decl, argv, ...) end,
    __name = "cuda.reduction",
    __tostring = function () return ("cuda.reduction '%s' (%s)"):format(decl.name, decl.names) end,
    __index = {source = function (_, sig) return (reduction_source(decl, sig)) end},
  })
  return r
end

function M.reduction(spec)
  return reduction("cuda.reduction", spec)
end

local rcfg = {block = THREADS}
function run_reduction(fname, decl, argv, ...)
  local np = decl.nparams
  local nargs = select("#", ...)
  local opts
  if nargs == np + 1 then
    opts = select(nargs, ...)
    if type(opts) ~= "table" or cuda.type(opts) then fail(fname, "expects %d arguments (%s), got %d", np, decl.names, nargs) end
    options(fname, opts, RED_CALL_OPTIONS)
  elseif nargs ~= np then
    fail(fname, "expects %d arguments (%s), got %d", np, decl.names, nargs)
  end
  local sig, n, dev = bind(fname, decl, argv, ...)
  local acc = decl.acc
  if not DT[acc] then
    acc = bound[acc]
    if not acc then fail(fname, "no array says what dtype %s is", decl.acc) end
    if not ACC_OK[acc] then fail(fname, "dtype %s (%s) cannot accumulate (expected int32, uint32, int64, uint64, float32 or float64)", decl.acc, acc) end
  end
  local stream = opts and core.check_stream(fname, opts.stream, dev)
  local out = opts and opts.out
  local axis = opts and opts.axis
  local rows, cols = 1, n
  if axis ~= nil then
    if axis ~= 1 and axis ~= 2 then fail(fname, "axis must be 1 (per column) or 2 (per row), got %s", tostring(axis)) end
    local shape
    for j, p in ipairs(decl.params) do if p.array then shape = argv[j].shape; break end end
    if #shape ~= 2 then fail(fname, "axis needs 2-D arrays; the first is 1-D") end
    for j, p in ipairs(decl.params) do
      if p.array then
        local s = argv[j].shape
        if #s ~= 2 or s[1] ~= shape[1] or s[2] ~= shape[2] then
          fail(fname, "argument #%d (%s) has another shape than the first array's %dx%d", j, p.name, shape[1], shape[2])
        end
      end
    end
    rows, cols = shape[1], shape[2]
  end
  local outlen = axis == 1 and cols or axis == 2 and rows or 1
  local odt
  if out ~= nil then
    local olen, odev
    odt, olen, odev = array_info(out, true)
    if not odt then fail(fname, "out must be an open cuda.array, got %s", kind_of(out)) end
    if olen < outlen then fail(fname, "out has %d elements; the result needs %d", olen, outlen) end
    if odev ~= dev then fail(fname, "out is on device %d but the arrays are on device %d", odev.ordinal, dev.ordinal) end
  else
    if axis then fail(fname, "axis needs out = an array for the results") end
    odt = acc
  end
  local key = sig .. "," .. acc .. "," .. odt
  local np1 = np + 1
  argv[np1] = n
  if outlen == 0 then return out end   -- no results to write (an empty array reduces to the identity, posted)
  local e = entry_for(fname, decl, key, dev)
  local word = out or core.scratch("elementwise_result_" .. acc, dev, stream, 1)
  if axis then
    argv[np1 + 1], argv[np1 + 2], argv[np1 + 3], argv[np1 + 4], argv[np1 + 5] = 0, 0, word, rows, cols
    local g = axis == 2 and math.min(rows, core.sm_count(dev) * (M.blocks_per_sm == 0 and 8 or M.blocks_per_sm))
              or grid_for(dev, cols, true)
    rcfg.grid, rcfg.stream = g, stream
    e[axis == 2 and "kr" or "kc"]:launch(rcfg, table.unpack(argv, 1, np1 + 5))
    rcfg.stream = nil
    return out
  end
  local k, items = e.k, n
  if e.width and n >= e.width and aligned(e, decl, key, np) then k, items = e.kv, n // e.width end
  local g = grid_for(dev, items, true)
  local partials = core.scratch("elementwise_partials", dev, stream, g)
  local done = core.scratch("elementwise_done", dev, stream, 1)
  argv[np1 + 1], argv[np1 + 2], argv[np1 + 3], argv[np1 + 4], argv[np1 + 5] = partials, done, word, 1, n
  launch(e, k, dev, items, stream, argv, np1 + 5, true)
  if out then return out end
  return core.read_word(word, stream)
end

-- }======================================================

-- {====================================================== array methods

-- The accumulation dtype of x:sum(), x:dot(y), x:norm() and x:mean(): float64 for
-- float64, float32 for float32 and the low-precision dtypes (as CuPy and
-- PyTorch sum them); int64 / uint64 for integer sums, float64 for integer
-- norms and means. x:min() and x:max() keep the value exactly: the dtype
-- itself for 4- and 8-byte dtypes, float32 for low precision, int32 / uint32
-- for 1- and 2-byte integers.
local SUM_ACC = {float64 = "float64", float32 = "float32", float16 = "float32", bfloat16 = "float32",
                 float8_e4m3 = "float32", float8_e5m2 = "float32"}
local function sum_acc(dt) return SUM_ACC[dt] or (DT[dt][5] == "u" and "uint64" or "int64") end
local function float_acc(dt) return SUM_ACC[dt] or "float64" end
local function minmax_acc(dt)
  if DT[dt][3] >= 4 then return dt end
  return SUM_ACC[dt] or (DT[dt][5] == "u" and "uint32" or "int32")
end
M.accumulation = {sum = sum_acc, dot = sum_acc, norm = float_acc, mean = float_acc, min = minmax_acc, max = minmax_acc}

local INF = "__int_as_float(0x7f800000)"
local LIMITS = {   -- the identities of min and max
  int32 = {"2147483647", "(-2147483647 - 1)"}, uint32 = {"0xffffffffu", "0u"},
  int64 = {"9223372036854775807ll", "(-9223372036854775807ll - 1)"}, uint64 = {"0xffffffffffffffffull", "0ull"},
  float32 = {INF, "-" .. INF}, float64 = {INF, "-" .. INF},
}
local METHOD_SPECS = {
  sum = {params = "T *x", map = "x", reduce = "a + b", identity = "0"},
  dot = {params = "T *x, T *y", map = "(culua_acc)x * (culua_acc)y", reduce = "a + b", identity = "0"},
  norm = {params = "T *x", map = "(culua_acc)x * (culua_acc)x", reduce = "a + b", identity = "0", post = "sqrt(a)"},
  mean = {params = "T *x", map = "x", reduce = "a + b", identity = "0", post = "a / (culua_acc)n"},
  min = {params = "T *x", map = "x", reduce = "(b < a || b != b) ? b : a", identity = 1},
  max = {params = "T *x", map = "x", reduce = "(b > a || b != b) ? b : a", identity = 2},
}
local method_reductions = {}
local function method_reduction(method, acc)
  local key = method .. ":" .. acc
  local r = method_reductions[key]
  if r then return r end
  local s = METHOD_SPECS[method]
  local spec = {params = s.params, map = s.map, reduce = s.reduce, post = s.post, dtype = acc,
                name = "culua_" .. method,
                identity = type(s.identity) == "number" and LIMITS[acc][s.identity] or s.identity}
  r = reduction("x:" .. method, spec)
  r.decl.file, r.decl.line = "culua.elementwise", 1
  method_reductions[key] = r
  return r
end

-- cuda.catalog.reduce's kernels (lua/catalog/scan.lua): op "add", "min" or "max" in
-- dtype acc (x's own, or float32 for float16 and bfloat16), the one implementation of
-- an array's reduction that the catalog and the methods share. Integer sums wrap in
-- acc, as the catalog says (signed overflow is undefined in C++, unsigned is not).
local WRAP_ADD = {int32 = "(int)((unsigned)a + (unsigned)b)",
                  int64 = "(long long)((unsigned long long)a + (unsigned long long)b)"}
local catalog_reductions = {}
function M.catalog_reduction(op, acc)
  local key = op .. ":" .. acc
  local r = catalog_reductions[key]
  if r then return r end
  local spec
  if op == "add" then
    spec = {params = "T *x", map = "x", reduce = WRAP_ADD[acc] or "a + b", identity = "0"}
  else
    local s = METHOD_SPECS[op == "min" and "min" or "max"]
    spec = {params = s.params, map = s.map, reduce = s.reduce, identity = LIMITS[acc][s.identity]}
  end
  spec.dtype, spec.name = acc, "culua_reduce_" .. op
  r = reduction("cuda.catalog.reduce", spec)
  r.decl.file, r.decl.line = "culua.elementwise", 1
  catalog_reductions[key] = r
  return r
end

local function method(name)
  return function (x, y, opts)
    local fname = "x:" .. name
    if name ~= "dot" then opts, y = y, nil end
    local dt, n = array_info(x)
    if not dt then fail(fname, "x must be an open cuda.array") end
    if n == 0 and (name == "min" or name == "max") and not (opts and opts.out) then
      fail(fname, "the %s of an empty array is undefined", name)
    end
    local r = method_reduction(name, M.accumulation[name](dt))
    if y ~= nil then
      if opts ~= nil then return r(x, y, opts) end
      return r(x, y)
    end
    if opts ~= nil then return r(x, opts) end
    return r(x)
  end
end

local expr_maps = {}
M.methods = {
  sum = method("sum"), min = method("min"), max = method("max"), mean = method("mean"),
  norm = method("norm"), dot = method("dot"),
  -- x:map(expr [, {stream =}]) -> a new array of x's dtype and shape, each element expr of x (and i)
  map = function (x, expr, opts)
    local fname = "x:map"
    check_string(fname, "expr", expr)
    local dt = array_info(x)
    if not dt then fail(fname, "x must be an open cuda.array") end
    local k = expr_maps[expr]
    if not k then
      local decl = {fname = fname, kernels = setmetatable({}, {__mode = "k"}), name = "culua_map", internal = true}
      decl.file, decl.line = where()
      k = elementwise(fname, {params = "T *x", out = "T *culua_out", body = "culua_out = (" .. expr .. "\n)"}, decl)
      expr_maps[expr] = k
    end
    local shape = x.shape
    local y = cuda.array(dt, #shape == 2 and shape or shape[1], {device = x.device.ordinal})
    if opts ~= nil then return k(x, y, opts) end
    return k(x, y)
  end,
}

-- }======================================================

return M
