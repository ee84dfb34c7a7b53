-- matmul_lab.lua: seed 002's lab on global vs shared memory in matrix multiplication,
-- with seed 000's question (how much do 16x16 shared-memory tiles gain over naive?).
--
-- Every variant of cuda.catalog.matmul is checked against the CPU, timed with events
-- (median of repeats) for N = 256 .. NMAX, and reported as GFLOP/s = 2N^3/t. Then the
-- lab's three plot families: time and GFLOP/s against block size per algorithm and N;
-- against the unroll factor; row/column variants against the launch configuration.
-- CSV files always; PNG plots when gnuplot is installed.
--
--   ./culua examples/matmul_lab.lua [OUTDIR] [NMAX]      (defaults: lab-out, 8192)

local cuda = require "cuda"
local plot = require "culua.plot"
require("culua.bench").need_devices()
local outdir = arg and arg[1] or "lab-out"
local nmax = tonumber(arg and arg[2]) or 8192
os.execute("mkdir -p " .. outdir)
local dev = cuda.device()
local mm, ref = cuda.catalog.matmul, cuda.catalog.reference.matmul
print(("%s (%s), N = 256 .. %d, output in %s/"):format(dev.name, dev.arch, nmax, outdir))

local function gflops(n, ms) return 2 * n ^ 3 / (ms * 1e-3) / 1e9 end

-- matrices per N, made once; C poisoned before each run
local data = {}
local function problem(n)
  if data.n ~= n then
    data = {n = n}
    data.hA = cuda.host_array("float32", {n, n}):random(n, -1, 1)
    data.hB = cuda.host_array("float32", {n, n}):random(n + 1, -1, 1)
    data.A = cuda.array("float32", {n, n}):copy_from(data.hA)
    data.B = cuda.array("float32", {n, n}):copy_from(data.hB)
    data.C = cuda.array("float32", {n, n})
    collectgarbage()
  end
  return data
end

-- median ms of a variant; few repeats where one run is long
local function measure(n, opts)
  local d = problem(n)
  d.C:fill(0 / 0)
  mm(d.A, d.B, d.C, opts)            -- warm-up (and NVRTC for a new variant)
  local once = cuda.bench(function () mm(d.A, d.B, d.C, opts) end, {warmup = 0, reps = 1}).median
  local reps = once > 200 and 1 or (once > 20 and 3 or 7)
  return cuda.bench(function () mm(d.A, d.B, d.C, opts) end, {warmup = 0, reps = reps}).median
end

-- {====================================================== correctness
-- (N = 1000 only where the sweep goes that far: a small NMAX is a quick look, or a run
-- under compute-sanitizer, where N = 1000 in every variant takes many minutes)
local checked = nmax >= 1000 and {256, 1000} or {256}
print(("\nCorrectness against the CPU (float64 reference), N = %s:"):format(table.concat(checked, " and ")))
local variants = {
  {"naive", {variant = "naive"}}, {"row", {variant = "row"}}, {"column", {variant = "column"}},
  {"tiled 8", {variant = "tiled", tile = 8}}, {"tiled 16", {variant = "tiled", tile = 16}},
  {"tiled 32", {variant = "tiled", tile = 32}}, {"fast", {variant = "fast"}}, {"tf32", {variant = "tf32"}},
}
for _, n in ipairs(checked) do
  local hA = cuda.host_array("float32", {n, n}):random(1, -1, 1)
  local hB = cuda.host_array("float32", {n, n}):random(2, -1, 1)
  local A, B = cuda.array("float32", {n, n}):copy_from(hA), cuda.array("float32", {n, n}):copy_from(hB)
  local C = cuda.array("float32", {n, n})
  local R = cuda.host_array("float64", {n, n})
  local t0 = cuda.clock()
  ref(hA, hB, R)
  local cpu_s = cuda.clock() - t0
  local line = {}
  for _, v in ipairs(variants) do
    for _, u in ipairs{1, 2, 4, 8} do
      if u == 1 or v[2].variant ~= "fast" and v[2].variant ~= "tf32" then
        local o = {}
        for k, x in pairs(v[2]) do o[k] = x end
        o.unroll = u
        mm(A, B, C:fill(0 / 0), o)
        local _, _, rel = cuda.compare(C, R)
        local tol = o.variant == "tf32" and 5e-3 or 1e-5
        if rel > tol then error(("%s unroll %d at N=%d: relative error %.2e"):format(v[1], u, n, rel)) end
        if u == 1 then line[#line + 1] = ("%s %.1e"):format(v[1], rel) end
      end
    end
  end
  print(("  N=%d: all variants and unroll factors correct; relative errors: %s"):format(n, table.concat(line, ", ")))
  print(("  CPU reference (C, one core, double accumulation): %.3f s = %.2f GFLOP/s"):format(cpu_s, gflops(n, cpu_s * 1000)))
end
-- }======================================================


-- {====================================================== time against N
local sizes, sz = {}, 256
while sz <= nmax do sizes[#sizes + 1] = sz; sz = sz * 2 end
local size_rows, series = {}, {}
print("\nTime and GFLOP/s against N (default knobs: naive 16x16, row/column 256 threads, tiled 16, unroll 1):")
io.write(("%-10s"):format("N"))
for _, v in ipairs(variants) do io.write(("%12s"):format(v[1])) end
io.write("\n")
local cpu_rows = {}
for _, n in ipairs(sizes) do
  io.write(("%-10d"):format(n))
  for _, v in ipairs(variants) do
    local ms = measure(n, v[2])
    size_rows[#size_rows + 1] = {v[1], n, ms, gflops(n, ms)}
    series[v[1]] = series[v[1]] or {name = v[1], x = {}, y = {}}
    table.insert(series[v[1]].x, n)
    table.insert(series[v[1]].y, gflops(n, ms))
    io.write(("%12.1f"):format(gflops(n, ms)))
  end
  io.write("  GFLOP/s\n")
  if n <= 512 then   -- CPU timing for comparison at small N
    local d = problem(n)
    local R = cuda.host_array("float64", {n, n})
    local t0 = cuda.clock()
    ref(d.hA, d.hB, R)
    local cpu_ms = (cuda.clock() - t0) * 1000
    cpu_rows[#cpu_rows + 1] = {n, cpu_ms, gflops(n, cpu_ms)}
  end
end
plot.csv(outdir .. "/lab_size.csv", {"variant", "N", "ms", "gflops"}, size_rows)
for _, r in ipairs(cpu_rows) do
  local fast_ms
  for _, s in ipairs(size_rows) do if s[1] == "fast" and s[2] == r[1] then fast_ms = s[3] end end
  print(("  CPU at N=%d: %.1f ms (%.2f GFLOP/s); the GPU's fast variant is %.0fx faster"):format(r[1], r[2], r[3], r[2] / fast_ms))
end
local function ms_of(name, n)
  for _, s in ipairs(size_rows) do if s[1] == name and s[2] == n then return s[3] end end
end
if ms_of("naive", 1024) then
  print(("Seed 000's claim at N = 1024 (16x16 tiles over naive, > 10x on its GPU): %.2fx on this %s")
        :format(ms_of("naive", 1024) / ms_of("tiled 16", 1024), dev.name))
end
local ordered = {}
for _, v in ipairs(variants) do ordered[#ordered + 1] = series[v[1]] end
local ok, why = plot.lines{output = outdir .. "/lab_size.png", title = "matmul: GFLOP/s against N", xlabel = "N",
                           ylabel = "GFLOP/s", logx = true, logy = true, series = ordered}
-- }======================================================


-- {====================================================== block size, unroll, launch configuration

-- one knob against GFLOP/s at size n: rows for the CSV, a plot series, a printed line
local function sweep(alg, label, n, values, opts_of, fmt)
  local series, rows, cells = {name = label, x = {}, y = {}}, {}, {}
  for _, v in ipairs(values) do
    local ms = measure(n, opts_of(v))
    rows[#rows + 1] = {alg, n, v, ms, gflops(n, ms)}
    series.x[#series.x + 1] = v
    series.y[#series.y + 1] = gflops(n, ms)
    cells[#cells + 1] = fmt:format(v, gflops(n, ms))
  end
  return series, rows, table.concat(cells, "  ")
end

-- run several sweeps into one CSV and one plot
local function family(spec)
  local all_rows, all_series = {}, {}
  print(spec.heading)
  for _, sw in ipairs(spec.sweeps) do
    local series, rows, line = sweep(sw.alg, sw.label, sw.n, sw.values, sw.opts, sw.fmt)
    all_series[#all_series + 1] = series
    table.move(rows, 1, #rows, #all_rows + 1, all_rows)
    print(("  %-16s %s"):format(sw.label, line))
  end
  plot.csv(outdir .. "/" .. spec.file .. ".csv", {"algorithm", "N", spec.knob, "ms", "gflops"}, all_rows)
  plot.lines{output = outdir .. "/" .. spec.file .. ".png", title = spec.title, xlabel = spec.xlabel,
             ylabel = "GFLOP/s", logx = true, series = all_series}
end

local function with(base, key, v)
  local o = {[key] = v}
  for k, x in pairs(base) do o[k] = x end
  return o
end

local sweeps = {}
for _, n in ipairs{1024, math.min(4096, nmax)} do
  sweeps[#sweeps + 1] = {alg = "naive", label = ("naive N=%d"):format(n), n = n, values = {4, 8, 16, 32}, fmt = "%d: %.0f",
                         opts = function (b) return {variant = "naive", block = b} end}
  sweeps[#sweeps + 1] = {alg = "tiled", label = ("tiled N=%d"):format(n), n = n, values = {8, 16, 32}, fmt = "%d: %.0f",
                         opts = function (b) return {variant = "tiled", tile = b} end}
end
family{heading = "\nGFLOP/s against block size (naive: side of a square block; tiled: tile side):", sweeps = sweeps,
       file = "lab_block", knob = "block", title = "matmul: GFLOP/s against block size", xlabel = "block side"}

local un = math.min(2048, nmax)
sweeps = {}
for _, alg in ipairs{{"naive", {variant = "naive"}}, {"row", {variant = "row"}}, {"column", {variant = "column"}},
                     {"tiled 16", {variant = "tiled", tile = 16}}, {"tiled 32", {variant = "tiled", tile = 32}}} do
  sweeps[#sweeps + 1] = {alg = alg[1], label = alg[1], n = un, values = {1, 2, 4, 8}, fmt = "x%d: %.0f",
                         opts = function (u) return with(alg[2], "unroll", u) end}
end
family{heading = ("\nGFLOP/s against the unroll factor of the inner loop (N = %d):"):format(un), sweeps = sweeps,
       file = "lab_unroll", knob = "unroll", title = ("matmul: GFLOP/s against unroll (N = %d)"):format(un), xlabel = "unroll factor"}

sweeps = {}
for _, alg in ipairs{"row", "column"} do
  sweeps[#sweeps + 1] = {alg = alg, label = alg, n = un, values = {32, 64, 128, 256, 512, 1024}, fmt = "%d: %.0f",
                         opts = function (t) return {variant = alg, threads = t} end}
end
family{heading = ("\nRow and column caching against the launch configuration (threads per block, N = %d):"):format(un),
       sweeps = sweeps, file = "lab_launch", knob = "threads", xlabel = "threads per block",
       title = ("row/column caching against threads per block (N = %d)"):format(un)}
-- }======================================================

if ok then
  print(("\nPlots: %s/lab_size.png, lab_block.png, lab_unroll.png, lab_launch.png"):format(outdir))
else
  print(("\nPlots skipped (%s); the CSV files in %s/ hold every figure"):format(why, outdir))
end
