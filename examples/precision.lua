-- precision.lua: one matrix product in every precision culua's matmul has, side by side.
--
-- A and B are n x n random numbers in [-1, 1), made in float64; each precision rounds them
-- into its dtype on the GPU (x:astype) and multiplies with cuda.catalog.matmul: float64
-- (dmma on tensor cores), float32, tf32 (float32 data, tensor cores rounding to 10 bits),
-- bfloat16 and float16 (float32 sums, C in the same dtype) and fp8 e4m3 (float32 sums,
-- bfloat16 C, scales of 1; compute capability 8.9 and later). Each row gives its time
-- (median of 5 after a warm-up), TFLOP/s and its error against the float64 product: the
-- norm-wise relative error ||C - C64|| / ||C64||, rounding of the inputs included.
-- It writes precision.csv and, with gnuplot, precision.png (error against TFLOP/s).
--
--   culua examples/precision.lua [N [OUTDIR]]      (default 4096 and the current directory)

local cuda = require "cuda"
require("culua.bench").need_devices(1)
local plot = require "culua.plot"

local n = math.tointeger(tonumber(arg[1] or 4096))
if not n or n < 1 then error(("precision.lua: N must be a positive integer, got '%s'"):format(tostring(arg[1])), 0) end
local outdir = arg[2] or "."
local dev = cuda.device()
local fp8 = dev.major * 10 + dev.minor >= 89

-- label, A's and B's dtype, C's dtype, matmul options, the error expected at most
-- (the inputs' rounding: about the format's epsilon, times a few)
local runs = {
  {"float64", "float64", "float64", nil, 1e-12},
  {"float32", "float32", "float32", {variant = "fast"}, 1e-5},
  {"tf32", "float32", "float32", {variant = "tf32"}, 1e-2},
  {"bfloat16", "bfloat16", "bfloat16", nil, 3e-2},
  {"float16", "float16", "float16", nil, 5e-3},
  fp8 and {"fp8 e4m3", "float8_e4m3", "bfloat16", {scale_a = 1, scale_b = 1}, 0.25} or nil,
}

print(("precision.lua: C = A*B on %s, %d x %d x %d, A and B random in [-1, 1) made in float64"):format(dev.name, n, n, n))
local hA = cuda.host_array("float64", {n, n}):random(1, -1, 1)
local hB = cuda.host_array("float64", {n, n}):random(2, -1, 1)
local A64, B64 = cuda.array("float64", {n, n}):copy_from(hA), cuda.array("float64", {n, n}):copy_from(hB)
local C64
local rows, series, good = {}, {}, true
print(("%-10s %-26s %10s %10s %12s"):format("precision", "A, B -> C", "ms", "TFLOP/s", "error"))
for _, r in ipairs(runs) do
  local label, din, dout, opts, bound = r[1], r[2], r[3], r[4], r[5]
  local A = din == "float64" and A64 or A64:astype(din)
  local B = din == "float64" and B64 or B64:astype(din)
  local C = cuda.array(dout, {n, n})
  local t = cuda.bench(function () cuda.catalog.matmul(A, B, C, opts) end, {warmup = 1, reps = 5})
  local tf = 2 * n ^ 3 / (t.median * 1e-3) / 1e12
  local err
  if din == "float64" then
    C64 = C
    -- the float64 product itself, against the CPU's on a few sampled rows
    local idx = {1, n // 2 + 1, n}
    local rA = cuda.host_array("float64", {#idx, n})
    for i, row in ipairs(idx) do for j = 1, n do rA[(i - 1) * n + j] = hA[(row - 1) * n + j] end end
    local want, got = cuda.host_array("float64", {#idx, n}), cuda.host_array("float64", {#idx, n})
    cuda.catalog.reference.matmul(rA, hB, want)
    local all = cuda.host_array("float64", {n, n})
    C:copy_to(all)
    for i, row in ipairs(idx) do for j = 1, n do got[(i - 1) * n + j] = all[(row - 1) * n + j] end end
    all = nil
    err = select(3, cuda.compare(got, want))
  else
    err = select(3, cuda.compare(C, C64))
  end
  good = good and err <= bound
  print(("%-10s %-26s %10.3f %10.1f %12.3e"):format(label, ("%s -> %s"):format(din, dout), t.median, tf, err))
  rows[#rows + 1] = {label, din, dout, t.median, tf, err}
  series[#series + 1] = {name = label, x = {tf}, y = {math.max(err, 1e-17)}}
  if din ~= "float64" then A, B = nil end
  C = din == "float64" and C or nil
  collectgarbage()
end
if not fp8 then print(("fp8: %s has compute capability %d.%d; fp8 matmul needs 8.9"):format(dev.name, dev.major, dev.minor)) end

plot.csv(outdir .. "/precision.csv", {"precision", "ab_dtype", "c_dtype", "ms", "tflops", "rel_error"}, rows)
local ok, why = plot.lines{output = outdir .. "/precision.png", title = ("matmul %d^3 on %s: error against speed"):format(n, dev.name),
                           xlabel = "TFLOP/s", ylabel = "relative error against float64", logy = true, series = series}
print(ok and ("wrote %s/precision.csv and precision.png"):format(outdir) or ("wrote %s/precision.csv (no plot: %s)"):format(outdir, why))
print(("Check: every precision's error is within its bound: %s"):format(good and "SUCCESS" or "FAILED"))
os.exit(good and 0 or 1)
