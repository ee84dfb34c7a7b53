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
if cuda.device_count() == 0 then
  print("No CUDA device: " .. (cuda.libraries().driver_error or "the driver reports none"))
  return
end
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
print("\nCorrectness against the CPU (float64 reference), N = 256 and 1000:")
local variants = {
  {"naive", {variant = "naive"}}, {"row", {variant = "row"}}, {"column", {variant = "column"}},
  {"tiled 8", {variant = "tiled", tile = 8}}, {"tiled 16", {variant = "tiled", tile = 16}},
  {"tiled 32", {variant = "tiled", tile = 32}}, {"fast", {variant = "fast"}}, {"tf32", {variant = "tf32"}},
}
for _, n in ipairs{256, 1000} do
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
local sweep_n = {1024, math.min(4096, nmax)}
local block_rows, block_series = {}, {}
print("\nGFLOP/s against block size (naive: side of a square block; tiled: tile side):")
for _, n in ipairs(sweep_n) do
  for _, alg in ipairs{{"naive", "block", {4, 8, 16, 32}}, {"tiled", "tile", {8, 16, 32}}} do
    local s = {name = ("%s N=%d"):format(alg[1], n), x = {}, y = {}}
    local cells = {}
    for _, b in ipairs(alg[3]) do
      local ms = measure(n, {variant = alg[1], [alg[2]] = b})
      block_rows[#block_rows + 1] = {alg[1], n, b, ms, gflops(n, ms)}
      s.x[#s.x + 1] = b
      s.y[#s.y + 1] = gflops(n, ms)
      cells[#cells + 1] = ("%d: %.0f"):format(b, gflops(n, ms))
    end
    block_series[#block_series + 1] = s
    print(("  %-6s N=%-5d %s"):format(alg[1], n, table.concat(cells, "  ")))
  end
end
plot.csv(outdir .. "/lab_block.csv", {"algorithm", "N", "block", "ms", "gflops"}, block_rows)
plot.lines{output = outdir .. "/lab_block.png", title = "matmul: GFLOP/s against block size", xlabel = "block side",
           ylabel = "GFLOP/s", logx = true, series = block_series}

local unroll_rows, unroll_series = {}, {}
print("\nGFLOP/s against the unroll factor of the inner loop (N = 2048):")
local un = math.min(2048, nmax)
for _, alg in ipairs{{"naive", {variant = "naive"}}, {"row", {variant = "row"}}, {"column", {variant = "column"}},
                     {"tiled 16", {variant = "tiled", tile = 16}}, {"tiled 32", {variant = "tiled", tile = 32}}} do
  local s = {name = alg[1], x = {}, y = {}}
  local cells = {}
  for _, u in ipairs{1, 2, 4, 8} do
    local o = {unroll = u}
    for k, x in pairs(alg[2]) do o[k] = x end
    local ms = measure(un, o)
    unroll_rows[#unroll_rows + 1] = {alg[1], un, u, ms, gflops(un, ms)}
    s.x[#s.x + 1] = u
    s.y[#s.y + 1] = gflops(un, ms)
    cells[#cells + 1] = ("x%d: %.0f"):format(u, gflops(un, ms))
  end
  unroll_series[#unroll_series + 1] = s
  print(("  %-9s %s"):format(alg[1], table.concat(cells, "  ")))
end
plot.csv(outdir .. "/lab_unroll.csv", {"algorithm", "N", "unroll", "ms", "gflops"}, unroll_rows)
plot.lines{output = outdir .. "/lab_unroll.png", title = ("matmul: GFLOP/s against unroll (N = %d)"):format(un),
           xlabel = "unroll factor", ylabel = "GFLOP/s", logx = true, series = unroll_series}

local launch_rows, launch_series = {}, {}
print("\nRow and column caching against the launch configuration (threads per block, N = 2048):")
for _, alg in ipairs{"row", "column"} do
  local s = {name = alg, x = {}, y = {}}
  local cells = {}
  for _, t in ipairs{32, 64, 128, 256, 512, 1024} do
    local ms = measure(un, {variant = alg, threads = t})
    launch_rows[#launch_rows + 1] = {alg, un, t, ms, gflops(un, ms)}
    s.x[#s.x + 1] = t
    s.y[#s.y + 1] = gflops(un, ms)
    cells[#cells + 1] = ("%d: %.0f"):format(t, gflops(un, ms))
  end
  launch_series[#launch_series + 1] = s
  print(("  %-7s %s"):format(alg, table.concat(cells, "  ")))
end
plot.csv(outdir .. "/lab_launch.csv", {"algorithm", "N", "threads", "ms", "gflops"}, launch_rows)
plot.lines{output = outdir .. "/lab_launch.png", title = ("row/column caching against threads per block (N = %d)"):format(un),
           xlabel = "threads per block", ylabel = "GFLOP/s", logx = true, series = launch_series}
-- }======================================================

if ok then
  print(("\nPlots: %s/lab_size.png, lab_block.png, lab_unroll.png, lab_launch.png"):format(outdir))
else
  print(("\nPlots skipped (%s); the CSV files in %s/ hold every figure"):format(why, outdir))
end
