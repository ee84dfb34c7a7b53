-- Kernels from a line of C (doc/elementwise.md): seed 000's incr, then SAXPY
-- written three ways (a raw kernel, cuda.elementwise, cuda.map) with their line
-- counts and times, then a reduction and a dot product.
--
--   culua examples/elementwise.lua [N]        (default 2^24 elements)

local cuda = require "cuda"
local bench = require "culua.bench"
bench.need_devices(1)

local n = math.tointeger(tonumber(arg and arg[1] or tostring(1 << 24)))
if not n or n < 1 then io.stderr:write("usage: culua examples/elementwise.lua [N]\n"); os.exit(1) end

-- seed 000's incr: every element plus one
local a = cuda.array("int32", 8):fill(41)
cuda.map("a = a + 1", {a = a})
print("incr:", table.concat(a:totable(), " "))

local x = cuda.array("float32", n):fill(1)
local y = cuda.array("float32", n):fill(2)

-- 1. a raw kernel (9 lines)
local raw = cuda.compile([[
extern "C" __global__ void saxpy(long long n, float a, const float *x, float *y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}
]]):module():kernel("saxpy")
local grid = math.min((n + 255) // 256, 65535)
local function saxpy_raw() raw:launch({grid = grid, block = 256}, n, 2.0, x, y) end

-- 2. cuda.elementwise (1 line)
local saxpy = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y", name = "saxpy"}
local function saxpy_ew() saxpy(2, x, y) end

-- 3. cuda.map (1 line, no declaration)
local function saxpy_map() cuda.map("y = a * x + y", {a = 2, x = x, y = y}) end

local bytes = 3 * 4 * n
for _, c in ipairs{{"raw kernel", 9, saxpy_raw}, {"cuda.elementwise", 1, saxpy_ew}, {"cuda.map", 1, saxpy_map}} do
  local r = bench(c[3], {name = c[1]})
  print(("saxpy, %-16s %2d lines  %8.3f ms  %7.1f GB/s"):format(c[1], c[2], r.median, bytes / r.median / 1e6))
end

-- a reduction: the sum of squares, and a dot product
y:fill(0.5)
local sumsq = cuda.reduction{params = "T *x", map = "x * x", reduce = "a + b", identity = 0, dtype = "float64"}
print(("sum of squares: %.1f (expected %d)"):format(sumsq(y), n // 4))
print(("x:dot(y): %.1f (expected %.1f)"):format(x:dot(y), n * 0.5))
print(("y:sum(): %.1f  y:max(): %.1f  y:norm(): %.3f"):format(y:sum(), y:max(), y:norm()))
