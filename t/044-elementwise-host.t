-- The host side of cuda.elementwise and cuda.map calls, without a GPU: lua/elementwise.lua
-- on the mock of t/elementwise-mock.lua, which records each launch (kernel, grid, device,
-- stream, arguments), each compile and each C.array call. A call like the last one takes
-- the fast path (lua/elementwise_call.lua: one C.array an array, no compile, the last
-- launcher); a call after a change (dtypes, length, alignment, device, cuda.reset(), the
-- tuning knobs, a stream, the names or kinds of cuda.map's arguments) gets what the
-- general path gives; and a bad call after a good one is refused with the general path's
-- message, at the caller's line. t/036-elementwise.t runs the same on a GPU.
local T = require "culua.tap"
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local mock = dofile(srcdir .. "/t/elementwise-mock.lua"){record = true}
local M, array, device = mock.M, mock.array, mock.device

-- what f did: C.array calls, launches, compiles, and the last launch
local function step(f)
  local i0, l0, c0 = mock.info_calls, #mock.launches, #mock.compiles
  local r = table.pack(f())
  return {info = mock.info_calls - i0, launches = #mock.launches - l0, compiles = #mock.compiles - c0,
          last = #mock.launches > l0 and mock.launches[#mock.launches] or nil, ret = r}
end

local axpy = M.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "axpy"}
local N = 1 << 20
local x, y = array("float32", N), array("float32", N)

-- C.keys, which cuda.map's fast path counts its arguments with (the mock takes the real one)
local keys = require("cuda")._catalog.keys
T.ok(keys({}) == 0 and keys({a = 1, b = false}) == 2 and keys({1, 2, x = 3}) == 3, "C.keys counts a table's keys")
T.ok(keys(setmetatable({}, {__index = {a = 1}})) == 0, "C.keys counts its own keys only")
T.ok(keys(5) == nil and keys("ab") == nil and keys(nil) == nil and keys(require("cuda").host_array("float32", 1)) == nil,
     "C.keys of what is no table: nil")
T.is(mock.cuda._catalog.keys, keys, "the mock uses it")

-- {====================================================== elementwise: the same call again

local s = step(function () return axpy(2, x, y) end)
T.is(s.compiles, 1, "the first call compiles")
T.is(s.last.kernel, "axpy_vec", "aligned float32 arrays: the vector kernel")
T.is(s.last.grid, N // 4 // 256, "a chunk of 4 a thread")
T.is(s.ret[1], y, "the call returns its output")
T.is(math.type(s.last.args[1]), "float", "a scalar of a float dtype goes as a float")
T.ok(s.last.args[2] == x and s.last.args[3] == y and s.last.args[4] == N, "the arrays and n")
s = step(function () return axpy(2, x, y) end)
T.is(s.info, 2, "the same call again: one C.array an array")
T.is(s.compiles, 0, "no compile")
T.is(s.last.kernel, "axpy_vec", "the vector kernel again")
T.is(s.ret[1], y, "the fast path returns the output too")
T.ok(s.last.args[1] == 2.0 and math.type(s.last.args[1]) == "float" and s.last.args[4] == N, "its arguments")
s = step(function () for _ = 1, 10 do axpy(3, x, y) end end)
T.is(s.info, 20, "ten calls in a loop: twenty C.array calls")
T.is(s.launches, 10, "ten launches")
T.is(s.last.args[1], 3.0, "with this call's scalar")

-- }======================================================


-- {====================================================== elementwise: changes

local x64, y64 = array("float64", N), array("float64", N)
s = step(function () return axpy(2, x64, y64) end)
T.is(s.compiles, 1, "float64: a new signature compiles")
T.is(s.last.grid, N // 2 // 256, "float64: a chunk of 2 a thread")
T.ok(s.last.args[2] == x64 and s.last.args[3] == y64, "float64: its arrays")
s = step(function () return axpy(2, x, y) end)
T.is(s.compiles, 0, "back to float32: no compile")
T.is(s.last.args[2], x, "back to float32: its arrays")
T.is(step(function () return axpy(2, x, y) end).info, 2, "and the fast path again")

local xi, yi = array("int32", N), array("int32", N)
s = step(function () return axpy(3, xi, yi) end)
T.is(math.type(s.last.args[1]), "integer", "int32: an integer scalar")
s = step(function () return axpy(3.0, xi, yi) end)
T.ok(s.last.args[1] == 3 and math.type(s.last.args[1]) == "integer", "int32: 3.0 goes as the integer 3")
T.error_like(function () axpy(2.5, xi, yi) end, "cuda%.elementwise: argument #1 %(a%) must be an integer for int32, got 2%.5",
             "int32: a fraction is refused after a good call")

-- lengths: the grid follows
local x5, y5 = array("float32", 5000), array("float32", 5000)
s = step(function () return axpy(2, x5, y5) end)
T.is(s.last.grid, (5000 // 4 + 255) // 256, "another length: its grid")
T.is(s.last.args[4], 5000, "another length: its n")
s = step(function () return axpy(2, x, y) end)
T.ok(s.last.grid == N // 4 // 256 and s.last.args[4] == N, "the first length again")

-- alignment: a view 4 bytes past a boundary takes the scalar kernel, and the two alternate
local big = array("float32", N + 1)
local odd, even = big:view(2, N), big:view(1, N)
s = step(function () return axpy(2, odd, y) end)
T.is(s.last.kernel, "axpy", "a view 4 bytes off: the scalar kernel")
T.is(s.last.grid, N // 256, "the scalar kernel's grid")
s = step(function () return axpy(2, even, y) end)
T.is(s.last.kernel, "axpy_vec", "an aligned view: the vector kernel")
s = step(function () axpy(2, odd, y); axpy(2, even, y); axpy(2, odd, y) end)
T.is(s.info, 6, "aligned and not, alternating: both launchers kept")
T.is(s.last.kernel, "axpy", "the last one unaligned")

-- in place, and overlaps refused after a good call of the same shape
s = step(function () return axpy(1, y, y) end)
T.ok(s.launches == 1 and s.last.args[2] == y and s.last.args[3] == y, "in place: x and y the same elements")
local pool = array("float32", N + 8)
T.error_like(function () axpy(1, pool:view(1, N), pool:view(5, N)) end,
             "cuda%.elementwise: argument #3 %(y%) overlaps argument #2 %(x%) at another offset", "a partial overlap")
T.error_like(function () axpy(1, pool:view(5, N), pool:view(1, N)) end,
             "argument #3 %(y%) overlaps argument #2 %(x%) at another offset", "a partial overlap, the other way")
s = step(function () return axpy(1, pool:view(1, N), array("float32", N)) end)
T.is(s.launches, 1, "next to each other is no overlap")

-- every refusal after a good call (the fast path hands them to the general path)
axpy(2, x, y)
local h = {kind = "cuda.host_array", dtype = "float32", n = N, device = device(0), ptr = 0, epoch = 0}
local closed = array("float32", N)
closed:close()
local refusals = {
  {"too few", function () axpy(1, x) end, "cuda%.elementwise: expects 3 arguments %(a, x, y%), got 2"},
  {"too many", function () axpy(1, x, y, {}, 5) end, "expects 3 arguments %(a, x, y%), got 5"},
  {"a number for an array", function () axpy(1, 2, y) end, "argument #2 %(x%) must be a cuda%.array, got a number"},
  {"a host array", function () axpy(1, h, y) end, "argument #2 %(x%) must be a cuda%.array, got cuda%.host_array %(not mapped"},
  {"an array for a scalar", function () axpy(x, x, y) end, "argument #1 %(a%) must be a number %(it is declared a scalar%), got cuda%.array"},
  {"a string for a scalar", function () axpy("2", x, y) end, "argument #1 %(a%) must be a number %(it is declared a scalar%), got string"},
  {"lengths", function () axpy(1, x, array("float32", N - 1)) end, "argument #3 %(y%) has 1048575 elements but x has 1048576"},
  {"dtypes", function () axpy(1, x64, y) end, "argument #3 %(y%) has dtype float32 but T is float64"},
  {"closed", function () axpy(1, closed, y) end, "argument #2 %(x%) is closed"},
  {"pitched", function () axpy(1, array("float32", N, {pitched = true}), y) end, "argument #2 %(x%) is a pitched 2%-D array"},
  {"another device", function () axpy(1, x, array("float32", N, {device = 1})) end, "argument #3 %(y%) is on device 1 but x is on device 0"},
  {"unknown option", function () axpy(1, x, y, {streem = 1}) end, "cuda%.elementwise: unknown option 'streem' %(known: stream%)"},
  {"options not a table", function () axpy(1, x, y, 4) end, "expects 3 arguments"},
  {"nil options", function () axpy(1, x, y, nil) end, "expects 3 arguments %(a, x, y%), got 4"},
}
for _, c in ipairs(refusals) do
  T.error_like(c[2], c[3], "after a good call: " .. c[1])
  axpy(2, x, y)   -- good again, so that each refusal follows a cached call
end
-- at the caller's line
local line = debug.getinfo(1, "l").currentline + 1
local ok, err = pcall(function () axpy(1, 2, y) end)
T.ok(not ok and tostring(err):find(("044%%-elementwise%%-host%%.t:%d: cuda%%.elementwise: argument #2"):format(line)),
     "a refusal names the caller's line", tostring(err))
T.is(step(function () return axpy(2, x, y) end).info, 2, "after the refusals: the fast path again")

-- a stream: the general path, with the stream; the default stream's fast path is kept
local st = mock.stream(device(0))
s = step(function () return axpy(2, x, y, {stream = st}) end)
T.ok(s.last.stream == st and s.last.kernel == "axpy_vec", "a call on a stream launches on it")
s = step(function () return axpy(2, x, y) end)
T.ok(s.info == 2 and s.last.stream == nil, "the next call on the default stream: the fast path")

-- the tuning knobs: a grid cap, chunks a thread
M.blocks_per_sm = 4
s = step(function () return axpy(2, x, y) end)
T.is(s.last.grid, 132 * 4, "blocks_per_sm = 4: the grid capped at 4 a multiprocessor")
M.blocks_per_sm = 0
M.unroll = 2
s = step(function () return axpy(2, x, y) end)
T.is(s.last.grid, N // 4 // 256 // 2, "unroll = 2: half the blocks")
M.unroll = 1
T.is(step(function () return axpy(2, x, y) end).last.grid, N // 4 // 256, "the knobs back: the grid back")

-- n = 0: nothing launched, the output returned
local e0, f0 = array("float32", 0), array("float32", 0)
s = step(function () return axpy(2, e0, f0) end)
T.ok(s.launches == 0 and s.ret[1] == f0, "no elements: no launch, the output returned")
s = step(function () return axpy(2, e0, f0) end)
T.ok(s.launches == 0 and s.ret[1] == f0, "no elements again")

-- another device: its own kernels, and back without a compile
local x1, y1 = array("float32", N, {device = 1}), array("float32", N, {device = 1})
s = step(function () return axpy(2, x1, y1) end)
T.ok(s.compiles == 1 and s.last.device == 1, "device 1: compiled for it, launched on it")
T.is(step(function () return axpy(2, x1, y1) end).info, 2, "device 1 again: the fast path")
s = step(function () return axpy(2, x, y) end)
T.ok(s.compiles == 0 and s.last.device == 0, "device 0 again: no compile, launched on 0")

-- cuda.reset(): the old arrays are refused, new ones compile again
mock.reset()
T.error_like(function () axpy(2, x, y) end, "argument #2 %(x%) is an array of a device reset by cuda%.reset%(%)",
             "after cuda.reset(): an old array is refused")
local xr, yr = array("float32", N), array("float32", N)
s = step(function () return axpy(2, xr, yr) end)
T.ok(s.compiles == 1 and s.last.args[2] == xr, "after cuda.reset(): the kernel is made again")
T.is(step(function () return axpy(2, xr, yr) end).info, 2, "and then the fast path")
x, y = xr, yr
x64, y64 = array("float64", N), array("float64", N)
x1, y1 = array("float32", N, {device = 1}), array("float32", N, {device = 1})

-- }======================================================


-- {====================================================== shapes

-- two outputs, fixed dtypes, an integer scalar
local split = M.elementwise{params = "float32 *x, int32 k", out = "float32 a, float32 b", body = "a = x * k; b = x + k"}
local a, b = array("float32", N), array("float32", N)
split(x, 3, a, b)
s = step(function () return split(x, 3, a, b) end)
T.ok(s.info == 3 and s.ret.n == 2 and s.ret[1] == a and s.ret[2] == b, "two outputs: both returned by the fast path")
T.ok(s.last.args[2] == 3 and math.type(s.last.args[2]) == "integer", "an int32 scalar: an integer")
T.ok(pcall(split, x, 3, a, a), "the same array for both outputs: the same elements, allowed")
T.ok(pcall(split, x, 3, a, x), "an output the same as an input: allowed")
T.error_like(function () split(x, 0.5, a, b) end, "argument #2 %(k%) must be an integer for int32, got 0%.5", "two outputs: a fraction refused")

-- the longest declaration a fast path takes, and one past it (the general path only)
local G = require "culua.elementwise_call"
for _, np in ipairs{G.MAX_ARGS, G.MAX_ARGS + 1} do
  local decls, vals = {}, {}
  for j = 1, np - 1 do decls[j] = (j % 2 == 0 and "T *x%d" or "T s%d"):format(j) end
  local long = M.elementwise{params = table.concat(decls, ", "), out = "T y", body = "y = 1"}
  for j = 1, np - 1 do vals[j] = j % 2 == 0 and array("float32", 100) or j end
  vals[np] = array("float32", 100)
  long(table.unpack(vals, 1, np))
  s = step(function () return long(table.unpack(vals, 1, np)) end)
  T.ok(s.launches == 1 and s.ret[1] == vals[np] and s.last.args.n == np + 1 and s.last.args[np - 1] == vals[np - 1],
       ("%d arguments: launched with each"):format(np))
  T.is(s.info, (np - 1) // 2 + 1, ("%d arguments: one C.array an array (%s)"):format(np,
       np == G.MAX_ARGS and "the fast path" or "the general path only"))
end

-- mapped host arrays count as arrays
local hx = array("float32", N, {mapped = true})
s = step(function () axpy(2, hx, y); return axpy(2, hx, y) end)
T.ok(s.launches == 2 and s.last.args[2] == hx, "a mapped host array")

-- x:map on the fast path
local xm = step(function () return M.methods.map(x, "2*x") end)
T.is(xm.last.kernel, "culua_map_vec", "x:map launches its kernel")
T.is(step(function () return M.methods.map(x, "2*x") end).compiles, 0, "x:map again: no compile")

-- reductions keep the general path, on the same launch
s = step(function () return M.methods.sum(x) end)
T.ok(s.last.kernel == "culua_sum_vec" and s.ret[1] == 0, "x:sum() launches its vector kernel and reads the word")
local total = M.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0}
local o = array("float64", 1)
s = step(function () return total(x, {out = o}) end)
T.ok(s.last.kernel == "culua_kernel_vec" and s.ret[1] == o, "a reduction into an array")

-- }======================================================


-- {====================================================== cuda.map

local body = "y = a * x + y"
s = step(function () return M.map(body, {a = 2, x = x, y = y}) end)
T.ok(s.compiles == 1 and s.ret[1] == y, "cuda.map: the first call compiles, returns y")
T.ok(s.last.args[1] == 2 and math.type(s.last.args[1]) == "integer" and s.last.args[2] == x and s.last.args[3] == y,
     "cuda.map: an integer scalar as int64, the arrays in order")
s = step(function () for _ = 1, 10 do M.map(body, {a = 2, x = x, y = y}) end end)
T.ok(s.info == 20 and s.launches == 10 and s.compiles == 0, "cuda.map in a loop: one C.array an array, no compile")
s = step(function () return M.map(body, {a = 2.5, x = x, y = y}) end)
T.ok(s.compiles == 1 and s.last.args[1] == 2.5, "a float scalar: another kernel (float32)")
T.is(step(function () return M.map(body, {a = 2.5, x = x, y = y}) end).info, 2, "a float scalar again: the fast path")
s = step(function () return M.map(body, {a = 2, x = x, y = y}) end)
T.ok(s.compiles == 0 and math.type(s.last.args[1]) == "integer", "back to an integer: its kernel, no compile")
s = step(function () return M.map(body, {a = 2, x = x64, y = y64}) end)
T.ok(s.compiles == 1 and s.last.args[2] == x64, "float64 arrays: another kernel")
T.is(step(function () return M.map(body, {a = 2, x = x64, y = y64}) end).info, 2, "float64 again: the fast path")
s = step(function () return M.map(body, {a = 2, x = x, y = y}) end)
T.ok(s.compiles == 0 and s.last.args[2] == x, "float32 again: no compile")
-- names and kinds
local z = array("float32", N)
s = step(function () return M.map(body, {a = 2, x = x, y = y, z = z}) end)
T.ok(s.compiles == 1 and s.last.args.n == 5, "another name: another variant (z an argument too)")
s = step(function () return M.map(body, {a = 2, x = 3, y = y}) end)
T.ok(s.last.args[2] == 3, "a number where an array was: another variant, x a scalar")
T.error_like(function () M.map(body, {a = 2, x = x, y = y, z = array("float32", 5)}) end, "cuda%.map: argument #3 %(z%) has 5 elements but x has",
             "another name: its array checked")
T.error_like(function () M.map(body, {a = 2, x = x, y = 2}) end, "cuda%.map: 'y' is assigned in the body, so it must be an array, got a number",
             "after a good call: an output as a number refused")
T.error_like(function () M.map(body, {a = 2, x = x, y = h}) end, "cuda%.map: argument 'y' must be a cuda%.array or a number, got cuda%.host_array",
             "after a good call: a host array refused")
T.error_like(function () M.map(body, {a = 2, x = x, y = closed}) end, "cuda%.map: argument 'y' is closed", "after a good call: a closed array")
T.error_like(function () M.map(body, {a = 2, x = x, y = array("float32", 3)}) end, "argument #3 %(y%) has 3 elements but x has",
             "after a good call: lengths differ")
T.error_like(function () M.map(body, {a = 2, x = x, y = y, [1] = 5}) end, "cuda%.map: argument names must be C identifiers, got 1",
             "after a good call: a key that is no name")
T.error_like(function () M.map(body, x) end, "cuda%.map: args must be a table of named arguments, got cuda%.array",
             "after a good call: an array for args")
T.error_like(function () M.map(body, {a = 2, x = x, y = y}, {streem = 1}) end, "cuda%.map: unknown option 'streem'",
             "after a good call: an unknown option")
M.map(body, {a = 2, x = x, y = y})
line = debug.getinfo(1, "l").currentline + 1
ok, err = pcall(function () M.map(body, {a = 2, x = x, y = closed}) end)
T.ok(not ok and tostring(err):find(("044%%-elementwise%%-host%%.t:%d: cuda%%.map: argument 'y' is closed"):format(line)),
     "cuda.map: a refusal after a good call names the caller's line", tostring(err))
s = step(function () return M.map(body, {a = 2, x = x, y = y}, {stream = st}) end)
T.ok(s.last.stream == st, "cuda.map on a stream")
T.is(step(function () return M.map(body, {a = 2, x = x, y = y}) end).info, 2, "and back: the fast path")
-- another device, cuda.reset()
s = step(function () return M.map(body, {a = 2, x = x1, y = y1}) end)
T.ok(s.last.device == 1, "cuda.map on device 1")
mock.reset()
T.error_like(function () M.map(body, {a = 2, x = x, y = y}) end, "cuda%.map: argument 'x' is an array of a device reset by cuda%.reset%(%)",
             "cuda.map after cuda.reset(): an old array refused")
local xr2, yr2 = array("float32", N), array("float32", N)
s = step(function () return M.map(body, {a = 2, x = xr2, y = yr2}) end)
T.ok(s.compiles == 1 and s.last.args[2] == xr2, "cuda.map after cuda.reset(): made again")
T.is(step(function () return M.map(body, {a = 2, x = xr2, y = yr2}) end).info, 2, "and then the fast path")

-- }======================================================

T.done_testing()
