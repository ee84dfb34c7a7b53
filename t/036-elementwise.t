-- Kernels from expressions (lua/elementwise.lua, doc/elementwise.md): cuda.elementwise,
-- cuda.map, cuda.reduction and the array methods on them. Without a GPU: the
-- generated source of every dtype through NVRTC and its PTX signature, the
-- compile error's Lua line, and every refusal that needs no device array. On a
-- GPU: every dtype against a Lua reference, lengths 0, 1, 31 and 2^20 + 1, views,
-- in place, streams, reductions whole and by axis, and 2^31 + 1 elements where
-- the device has the memory.
local T = require "culua.tap"
local cuda = require "cuda"

local DTYPES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                "float32", "float64", "float16", "bfloat16", "float8_e4m3", "float8_e5m2"}
local E = require "culua.elementwise"

-- {====================================================== no GPU needed

local axpy = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "axpy"}
local sum = cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, dtype = "float64", name = "total"}
for _, dt in ipairs(DTYPES) do
  local prog = cuda.compile(axpy:source(("%s,%s,%s"):format(dt, dt, dt)), {options = {"-std=c++17"}})
  local entry = prog.ptx:match("%.entry axpy%s*(%b())")
  T.ok(entry, dt .. ": axpy compiles")
  local carrier = (dt:find("float") and ".f64") or ".u64"
  T.like(entry or "", "^%(%s*%.param " .. carrier:gsub("%.", "%%.") .. " axpy_param_0,%s*%.param %.u64 axpy_param_1,%s*%.param %.u64 axpy_param_2,%s*%.param %.u64 axpy_param_3%s*%)$",
         dt .. ": scalar carrier, two pointers and a 64-bit n")
  T.ok(prog.ptx:find("%.entry axpy_vec"), dt .. ": a vector path")
  local acc = E.accumulation.sum(dt)
  local rprog = cuda.compile(sum:source(("%s,float64,float64"):format(dt)), {options = {"-std=c++17"}})
  for _, suffix in ipairs{"", "_vec", "_rows", "_cols"} do
    T.ok(rprog.ptx:find("%.entry total" .. suffix .. "%s*%("), ("%s: reduction entry total%s"):format(dt, suffix))
  end
  T.ok(acc == "float64" or acc == "float32" or acc == "int64" or acc == "uint64", dt .. ": sums accumulate in " .. acc)
end
-- arrays of different widths: no vector path
local conv = cuda.elementwise{params = "float32 *x", out = "float16 y", body = "y = x * 2"}
T.ok(not conv:source("float32,float16"):find("_vec"), "arrays of 4 and 2 bytes: no vector path")
T.like(conv:source("float32,float16"), "culua_kernel%(", "the default name")

-- the body's line, and a compile error naming it
local LINE = debug.getinfo(1, "l").currentline + 1
local bad = cuda.elementwise{params = "T *x", out = "T y", body = "y = undefined_thing(x)"}
local src = bad:source("float32,float32")
T.like(src, ('#line %d "[^"]*036%%-elementwise%%.t"'):format(LINE), "the body carries the Lua file and line")
T.error_like(function () cuda.compile(src) end, ("036%%-elementwise%%.t%%(%d%%): error: identifier \"undefined_thing\" is undefined"):format(LINE),
             "NVRTC's error names the Lua line that defined the kernel")
-- outputs that the body does not read are not loaded
T.unlike(cuda.elementwise{params = "T *x", out = "T z", body = "z = sin(x)"}:source("float32,float32"),
         "culua_v_z = %(float%)culua_p_z", "a written-only output is not read")
T.like(axpy:source("float32,float32,float32"), "culua_v_y = %(float%)culua_p_y", "y = a*x + y reads y")

-- refusals (t/029 has each too)
local h = cuda.host_array("float32", 3)
local refusals = {
  {"elementwise: not a table", function () cuda.elementwise("y = x") end, "cuda%.elementwise: expects a table of fields, got string"},
  {"elementwise: unknown key", function () cuda.elementwise{params = "T *x", out = "T y", body = "y = x", nme = "k"} end, "cuda%.elementwise: unknown option 'nme' %(known: params, out, body, name, preamble%)"},
  {"elementwise: unknown dtype", function () cuda.elementwise{params = "float33 *x", out = "float32 y", body = "y = x"} end, "cuda%.elementwise: params: unknown dtype 'float33' for x"},
  {"elementwise: unreadable param", function () cuda.elementwise{params = "T **x", out = "T y", body = "y = 1"} end, "cuda%.elementwise: params: cannot read \"T %*%*x\""},
  {"elementwise: reserved name", function () cuda.elementwise{params = "T *i", out = "T y", body = "y = 1"} end, "the name 'i' is taken"},
  {"elementwise: twice", function () cuda.elementwise{params = "T *x", out = "T x", body = "x = 1"} end, "'x' is declared twice"},
  {"elementwise: no body", function () cuda.elementwise{params = "T *x", out = "T y"} end, "cuda%.elementwise: body must be a string, got nil"},
  {"elementwise: empty body", function () cuda.elementwise{params = "T *x", out = "T y", body = " "} end, "body is empty"},
  {"elementwise: bad name", function () cuda.elementwise{params = "T *x", out = "T y", body = "y = x", name = "a b"} end, "name must be a C identifier"},
  {"call: too few", function () axpy(1, 2) end, "cuda%.elementwise: expects 3 arguments %(a, x, y%), got 2"},
  {"call: too many", function () axpy(1, 2, 3, 4, 5) end, "expects 3 arguments %(a, x, y%), got 5"},
  {"call: a number for an array", function () axpy(1, 2, 3) end, "argument #2 %(x%) must be a cuda%.array, got a number"},
  {"call: a host array for an array", function () axpy(1, h, 3) end, "argument #2 %(x%) must be a cuda%.array, got cuda%.host_array"},
  {"call: an array for a scalar", function () axpy(h, 1, 3) end, "argument #1 %(a%) must be a number %(it is declared a scalar%), got cuda%.host_array"},
  {"call: unknown option", function () axpy(1, 2, 3, {streem = 1}) end, "cuda%.elementwise: unknown option 'streem' %(known: stream%)"},
  {"call: options not a table", function () axpy(1, 2, 3, 4) end, "expects 3 arguments"},
  {"map: body not a string", function () cuda.map(3, {}) end, "cuda%.map: body must be a string, got number"},
  {"map: args not a table", function () cuda.map("y = 1", 3) end, "cuda%.map: args must be a table of named arguments, got number"},
  {"map: a scalar assigned", function () cuda.map("y = x", {x = 1, y = 2}) end, "cuda%.map: 'y' is assigned in the body, so it must be an array, got a number"},
  {"map: a host array", function () cuda.map("y = 1", {y = h}) end, "cuda%.map: argument 'y' must be a cuda%.array or a number, got cuda%.host_array"},
  {"reduction: no identity", function () cuda.reduction{params = "T *x", map = "x", reduce = "a + b"} end, "cuda%.reduction: identity is missing"},
  {"reduction: unknown key", function () cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, ouput = 1} end, "cuda%.reduction: unknown option 'ouput'"},
  {"reduction: a dtype that cannot accumulate", function () cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, dtype = "float16"} end, "dtype float16 cannot accumulate"},
  {"reduction: unknown dtype", function () cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, dtype = "float33"} end, "unknown dtype 'float33' for dtype"},
  {"reduction: call with a number", function () sum(5) end, "cuda%.reduction: argument #1 %(x%) must be a cuda%.array, got a number"},
  {"reduction: unknown call option", function () sum(5, {axes = 1}) end, "cuda%.reduction: unknown option 'axes' %(known: stream, out, axis%)"},
}
for _, c in ipairs(refusals) do T.error_like(c[2], c[3], c[1]) end

-- }======================================================


-- {====================================================== GPU

-- values every dtype holds exactly, so that every path is compared exactly
local function xv(i) return (i - 1) % 3 end
local function yv(i) return (i - 1) % 2 end

local function fill(dt, n, f)
  local hh = cuda.host_array(dt, n)
  for i = 1, n do hh[i] = f(i) end
  return cuda.array(dt, n):copy_from(hh)
end

local function check(got, n, f, what)
  local t = got:totable()
  local bad
  for i = 1, n do if t[i] ~= f(i) then bad = i; break end end
  T.ok(bad == nil, what, bad and ("element %d: got %s, expected %s"):format(bad, tostring(t[bad]), tostring(f(bad))) or nil)
end

local function gpu()
  local dev = cuda.device(0)
  require("culua.catalog")
  local function axpy_ref(i) return 2 * xv(i) + yv(i) end
  for _, dt in ipairs(DTYPES) do
    local lengths = (dt == "float32" or dt == "float16" or dt == "int8" or dt == "float64") and {0, 1, 31, (1 << 20) + 1} or {0, 1, 31, 1000}
    for _, n in ipairs(lengths) do
      local x, y = fill(dt, n, xv), fill(dt, n, yv)
      T.is(axpy(2, x, y), y, "the call returns its output")
      check(y, n, axpy_ref, ("%s n=%d: elementwise axpy"):format(dt, n))
      local y2 = fill(dt, n, yv)
      cuda.map("y = a * x + y", {a = 2, x = x, y = y2})
      check(y2, n, axpy_ref, ("%s n=%d: cuda.map axpy"):format(dt, n))
      T.is(x:sum(), (n // 3) * 3 + ((n % 3 == 2) and 1 or 0), ("%s n=%d: x:sum()"):format(dt, n))
      if n > 0 then
        T.is(x:min(), 0, dt .. ": x:min()")
        T.is(x:max(), n >= 3 and 2 or (n == 2 and 1 or 0), dt .. ": x:max()")
      end
      local m = x:map("2*x + 1")
      check(m, n, function (i) return 2 * xv(i) + 1 end, ("%s n=%d: x:map"):format(dt, n))
      local d = 0
      for i = 1, n do d = d + xv(i) * axpy_ref(i) end
      T.is(x:dot(y), d, ("%s n=%d: x:dot(y)"):format(dt, n))
      x:close(); y:close(); y2:close(); m:close()
    end
  end

  -- views at odd offsets (no vector path), in place, aliasing refused
  local n = 1001
  local big = fill("float32", n + 3, xv)
  local v = big:view(2, n)   -- 4 bytes past a 16-byte boundary
  local w = fill("float32", n, yv)
  axpy(3, v, w)
  check(w, n, function (i) return 3 * xv(i + 1) + yv(i) end, "a view at an odd offset")
  axpy(1, w, w)
  check(w, n, function (i) return 2 * (3 * xv(i + 1) + yv(i)) end, "in place: x and y the same elements")
  T.error_like(function () axpy(1, big:view(1, n), big:view(2, n)) end,
               "argument #3 %(y%) overlaps argument #2 %(x%) at another offset", "a partial overlap is refused")
  T.error_like(function () axpy(1, big, w) end, "argument #3 %(y%) has 1001 elements but x has 1004", "lengths differ")
  T.error_like(function () axpy(1, cuda.array("float64", n), w) end, "argument #3 %(y%) has dtype float32 but T is float64", "dtypes differ")
  T.error_like(function () axpy(1.5, cuda.array("int32", 4), cuda.array("int32", 4)) end,
               "argument #1 %(a%) must be an integer for int32, got 1%.5", "a fraction for an integer scalar")

  -- streams
  local s = cuda.stream()
  local xs, ys = fill("float32", 4097, xv), fill("float32", 4097, yv)
  axpy(2, xs, ys, {stream = s})
  s:synchronize()
  check(ys, 4097, axpy_ref, "on a stream")
  T.is(xs:sum({stream = s}), 4096, "x:sum on a stream")
  local out = cuda.array("float64", 1)
  T.is(xs:sum({out = out}), out, "x:sum{out =} returns out")
  T.is(out:totable()[1], 4096.0, "x:sum{out =} wrote the sum")

  -- reductions: identity of an empty array, mean, norm, axis
  T.is(cuda.array("float32", 0):sum(), 0.0, "the sum of nothing is 0")
  T.error_like(function () cuda.array("float32", 0):min() end, "x:min: the min of an empty array is undefined", "min of nothing")
  T.near(xs:mean(), 4096 / 4097, 1e-6, "x:mean()")
  T.near(fill("float64", 2, function (i) return i == 1 and 3 or 4 end):norm(), 5, 1e-12, "x:norm()")
  local rows, cols = 37, 300
  local hh = cuda.host_array("float32", {rows, cols})
  for r = 1, rows do for c = 1, cols do hh[(r - 1) * cols + c] = (r + c) % 4 end end
  local A = cuda.array("float32", {rows, cols}):copy_from(hh)
  local per_row, per_col = cuda.array("float64", rows), cuda.array("float64", cols)
  sum(A, {axis = 2, out = per_row})
  sum(A, {axis = 1, out = per_col})
  check(per_row, rows, function (r) local t = 0; for c = 1, cols do t = t + (r + c) % 4 end; return t end, "axis = 2: per row")
  check(per_col, cols, function (c) local t = 0; for r = 1, rows do t = t + (r + c) % 4 end; return t end, "axis = 1: per column")
  T.error_like(function () sum(A, {axis = 3, out = per_row}) end, "axis must be 1 %(per column%) or 2 %(per row%)", "a bad axis")
  T.error_like(function () sum(A, {axis = 1}) end, "axis needs out = an array", "axis without out")
  local maxr = cuda.reduction{params = "T *x", map = "x", reduce = "max(a, b)", identity = "-1e30f", dtype = "T"}
  T.is(maxr(fill("float32", 5, function (i) return i * 1.5 end)), 7.5, "a reduction with its dtype from T")

  -- the compile error of a call names the line that defined the kernel
  local line = debug.getinfo(1, "l").currentline + 1
  local broken = cuda.elementwise{params = "T *x", out = "T y", body = "y = nope(x)"}
  T.error_like(function () broken(xs, ys) end, ("cuda%%.elementwise: 'culua_kernel' %%(defined at [^)]*036%%-elementwise%%.t:%d%%) does not compile"):format(line),
               "a compile error names file:line")

  -- cuda.map in a loop: one kernel, found again in the cache
  for _ = 1, 100 do cuda.map("y = a * x + y", {a = 0, x = xs, y = ys}) end
  check(ys, 4097, axpy_ref, "100 calls of cuda.map with a = 0: y unchanged")

  -- past 2^31 elements, where the device has the memory
  local free = dev:memory_info()
  local N = (1 << 31) + 1
  if type(free) == "number" and free > 6 * N then
    local a8 = cuda.array("int8", N):fill(1)
    local b8 = cuda.array("int8", N):fill(0)
    cuda.map("b = a + i % 3", {a = a8, b = b8})
    local tail = b8:view(N - 2, 3):totable()
    T.is_deeply(tail, {1 + (N - 3) % 3, 1 + (N - 2) % 3, 1 + (N - 1) % 3}, "2^31 + 1 elements: the last ones, by 64-bit i")
    T.is(a8:sum(), N, "2^31 + 1 elements: the sum")
    a8:close(); b8:close()
  else
    T.skip("2^31 + 1 int8 elements need 4.3 GB free", 2)
  end
end

T.gpu_part(gpu, "elementwise and reduction kernels on the device")

-- }======================================================

T.done_testing()
