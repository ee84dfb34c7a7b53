-- The examples and benchmark scripts: every one parses; devices.lua runs anywhere;
-- with a GPU, a small run of the matmul lab checks every variant and writes its CSVs, and a
-- small run of the scan example checks its scans, compact and split, and the sort example agrees
-- with the CPU.
local T = require "culua.tap"
local cuda = require "cuda"
local srcdir = os.getenv("CULUA_SRCDIR") or "."
-- CULUA_TEST_ONLY (a Lua pattern) runs only the programs whose file names
-- match it, so that slow runs (under compute-sanitizer: bench/sanitize.sh)
-- can share the programs out over several processes; the rest are skipped
local only = os.getenv("CULUA_TEST_ONLY")
-- under compute-sanitizer (T.sanitizer) the programs that check on the CPU take smaller sizes
local S = T.sanitizer
-- what a compute-sanitizer tool cannot run, with the reason
local function refused(f)
  if S and S ~= "memcheck" and f:find("quicksort") then
    return "compute-sanitizer's " .. S .. " does not support CUDA Dynamic Parallelism (device-side launches)"
  end
  if S == "racecheck" and f:find("matmul_lab") then
    return "racecheck over the lab's timed sweeps runs past 500 s; its kernels are cuda.catalog.matmul's, which t/015 racechecks"
  end
end
local function wanted(f, tests)
  local why = refused(f)
  if why then
    T.skip(("%s: %s"):format(f, why), tests)
    return false
  end
  if not only or f:find(only) then return true end
  T.skip(("%s: not selected by CULUA_TEST_ONLY=%s"):format(f, only), tests)
  return false
end

for _, f in ipairs{"examples/devices.lua", "examples/embed.lua", "examples/grid_barrier.lua", "examples/matmul_lab.lua",
                   "examples/scan.lua", "bench/scan.lua", "examples/histogram.lua", "bench/histogram.lua", "examples/sort.lua", "bench/sort.lua", "bench/launch.lua", "bench/copy.lua", "bench/managed.lua", "bench/nvrtc_cache.lua", "bench/matmul.lua", "bench/matmul_lowp.lua", "bench/barrier.lua",
                   "examples/gauss.lua", "bench/solve.lua", "bench/solve_profile.lua", "examples/solve_scale.lua"} do
  local chunk, err = loadfile(srcdir .. "/" .. f)
  T.ok(chunk ~= nil, f .. " parses", err)
end

-- status and output of a script that has no GPU to run on (culua.bench's
-- need_devices): one line, exit 77
local SKIPPED = 77
local function skipped_line(f) return "^%S*" .. f:gsub("%p", "%%%0") .. ": skipped: no CUDA device %(.-%)\n$" end

local out, status = T.run(T.culua .. " " .. srcdir .. "/examples/devices.lua")
T.is(status, cuda.device_count() > 0 and 0 or SKIPPED, "devices.lua exits 0 with a GPU, 77 (skipped) without")
if cuda.device_count() > 0 then
  T.like(out, "Device 0\n  Name +: %S.-\n  Compute capability +: %d+%.%d.-Warp size +: 32.-Multiprocessor count +: %d+",
         "devices.lua prints the seed-000 table")
  if wanted("examples/matmul_lab.lua", 7) then
    local dir = os.tmpname()
    os.remove(dir)
    out, status = T.run(("%s %s/examples/matmul_lab.lua %s %d"):format(T.culua, srcdir, dir, S and 256 or 1024))
    T.is(status, 0, ("matmul_lab.lua (N up to %d) exits 0"):format(S and 256 or 1024))
    T.like(out, "N=256: all variants and unroll factors correct", "the lab checks every variant against the CPU")
    if S then T.skip("seed 000's claim is at N = 1024, past the size under compute-sanitizer", 1)
    else T.like(out, "Seed 000.s claim", "and reports seed 000.s claim") end
    for _, csv in ipairs{"lab_size.csv", "lab_block.csv", "lab_unroll.csv", "lab_launch.csv"} do
      local f = io.open(dir .. "/" .. csv)
      T.ok(f and f:read("l") ~= nil, csv .. " written")
      if f then f:close() end
    end
    os.execute("rm -rf " .. dir)
  end
  if wanted("examples/scan.lua", 3) then
    out, status = T.run(("%s %s/examples/scan.lua 1000 %d"):format(T.culua, srcdir, S and 20000 or 100000))
    T.is(status, 0, "scan.lua exits 0")
    T.like(out, "result%[gpu_v2%] *::.-SUCCESS!!.-result%[lookback%] *::.-SUCCESS!!.-pack%[gpu%] *::.-SUCCESS!!.-split%[gpu%] *::.-SUCCESS!!",
           "scan.lua checks the seed's scans, the multi-block ones, compact and split against the CPU")
    T.unlike(out, "FAILED", "and none fails")
  end
  if wanted("examples/histogram.lua", 2) then
    out, status = T.run(("%s %s/examples/histogram.lua %s"):format(T.culua, srcdir, S and "100 67" or "300 201"))
    T.is(status, 0, "histogram.lua exits 0")
    T.like(out, "variant 'default'.-SUCCESS!!.-variant 'seed'.-SUCCESS!!", "histogram.lua checks both variants against the CPU")
  end
  if wanted("examples/sort.lua", 3) then
    out, status = T.run(("%s %s/examples/sort.lua 100000"):format(T.culua, srcdir))
    T.is(status, 0, "sort.lua (N = 100000) exits 0")
    local _, agree = out:gsub("SUCCESS", "")
    T.is(agree, 7, "sort.lua: the seed's four rounds, the warp sort of 32 and the two larger sorts agree with the CPU")
    T.unlike(out, "FAILURE", "and none differs")
  end
  if wanted("examples/gauss.lua", 2) then
    out, status = T.run(("%s %s/examples/gauss.lua 300"):format(T.culua, srcdir))
    T.is(status, 0, "gauss.lua (N = 300) exits 0")
    T.like(out, "sequential CPU.-one GPU, method seed.-one GPU, method lu.-SUCCESS!!",
           "gauss.lua: the CPU, the seed's kernels and the blocked LU, each within LAPACK's ratio")
  end
  -- one script from one GPU to all of them (t/042-lu-ranks.t runs the catalog over ranks)
  if wanted("examples/solve_scale.lua", 4) then
    for _, mode in ipairs{"one", "devices"} do
      out, status = T.run(("%s %s/examples/solve_scale.lua 700 %s"):format(T.culua, srcdir, mode))
      T.is(status, 0, "solve_scale.lua 700 " .. mode .. " exits 0")
      T.like(out, "^solve n = 700, .-residual ratio %d+%.%d+; data by %a+\n$", "  and solves, within LAPACK's ratio")
    end
  end
else
  T.like(out, skipped_line("examples/devices.lua"), "devices.lua says plainly that there is none, in one line")
end

-- seed 003's programs, at small sizes: each compiles its kernels on any
-- machine and says plainly when there is no GPU; with one, it checks its
-- results against the CPU and says SUCCESS. %s in the arguments is a fresh
-- directory for the files they write.
local seed003 = {
  {"examples/streams.lua", "100003 4099 %s/streams",
   {"Check %(1 stream%): every element of c equals a %+ b: SUCCESS", "Check %(4 streams%).-SUCCESS",
    "Speed%-up of 4 streams over 1: [%d.]+x", "Timeline, 4 streams.-stream 4 |"}, {"streams.csv"}},
  {"examples/image_merge.lua", "size=37x53 out=%s/merged.pgm reps=2",
   {"1 GPU: the merge equals the CPU's", "wall time [%d.]+ ms", "Check: every merged sample equals the CPU's: SUCCESS"},
   {"merged.pgm"}},
  {"examples/sgemm.lua", "257 129 193",
   {"against the CPU: naive/16 ok %S+, v2/16 ok %S+, naive/32 ok %S+, v2/32 ok", "32x32 +sgemm_kernel_v2 +[%d.]+ +[%d.]+ +%- +ok",
    "Check: every kernel agrees with the CPU: SUCCESS"}},
  {"examples/convolution.lua", "101x67 9",
   {"every pixel of a 75 x 101 image against the CPU: v1 ok %S+, v2 ok %S+, v3 ok", "convolution_kernel_v3 +[%d.]+ +[%d.]+x",
    "Check: all three kernels agree with the CPU: SUCCESS"}},
  {"examples/nbody.lua", "2048",
   {"one step of N = 1000 against the CPU %([%d.]+ s in Lua%): seed ok %S+, tuned/64 ok.-tuned/1024 ok",
    "\n +2048 | +[%d.]+ +[%d.e+]+ +[%d.]+ | +%d+ +[%d.]+", "Check: both kernels agree with the CPU: SUCCESS"}},
  {"examples/radix_warp.lua", "50",
   {"new index %(prefix sum %+ offset%) +2 +0 +1 +3\n", "gives new indices 2 0 1 3: the same", "sorted: 1 4 7 14",
    "50 runs of 32 random keys against table%.sort: all sorted", "Sorting Successful! %(SUCCESS%)"}},
  {"examples/image_histogram.lua", "301x203",
   {"301 x 203 image %(generated: bands and noise%), 256 bins, blocks of 16 x 16",
    "SUCCESS!! %(texture kernel: all 256 bins equal the CPU's, 61103 pixels%)",
    "SUCCESS!! %(cuda%.catalog%.histogram: all 256 bins equal the CPU's, 61103 pixels%)",
    "Processing Time %-> GPU %(texture kernel%): [%d.]+ ms"}},
  {"examples/quicksort.lua", S and "3000" or "20000",
   {"dev_runtime_pending_launch_count: %d+ %(at most %d+ device%-side launches for N = " .. (S and 3000 or 20000),
    "Validating results: OK %(streams: SUCCESS%)\n%d+ device%-side launches, 0 failed, deepest level %d+",
    "Validating results: OK %(fire_and_forget: SUCCESS%)\n%d+ device%-side launches, 0 failed",
    "Validating results: OK %(cuda%.catalog%.sort: SUCCESS%)",
    "cuda%.catalog%.sort %(onesweep radix sort%) +[%d.]+ ms",
    "Check: both quicksorts and the catalog's sort agree with the CPU: SUCCESS"}},
  {"examples/precision.lua", "256 %s",
   {"float16 +float16 %-> float16 +[%d.]+ +[%d.]+ +[%d.]+e%-%d+", "bfloat16 +bfloat16 %-> bfloat16 ",
    "Check: every precision's error is within its bound: SUCCESS"}, {"precision.csv"}},
  {"examples/quicksort.lua", "37",
   {"Validating results: OK %(streams: SUCCESS%)\n2 device%-side launches, 0 failed, deepest level 1",
    "Check: both quicksorts and the catalog's sort agree with the CPU: SUCCESS"}},
}
for _, ex in ipairs(seed003) do
  local f, args, patterns, files = table.unpack(ex)
  if wanted(f, 2 + (cuda.device_count() > 0 and #patterns + #(files or {}) or 1)) then
    local chunk, err = loadfile(srcdir .. "/" .. f)
    T.ok(chunk ~= nil, f .. " parses", err)
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local t0 = os.time()
    out, status = T.run(("%s %s/%s %s"):format(T.culua, srcdir, f, args:gsub("%%s", dir)))
    T.is(status, cuda.device_count() > 0 and 0 or SKIPPED, f .. " exits 0 (77 without a GPU)")
    if cuda.device_count() > 0 then
      for _, pat in ipairs(patterns) do T.like(out, pat, f .. ": " .. pat:gsub("\n", "\\n")) end
      for _, name in ipairs(files or {}) do
        local h = io.open(dir .. "/" .. name)
        T.ok(h ~= nil, f .. " writes " .. name)
        if h then h:close() end
      end
      T.diag(("%s: %d s"):format(f, os.time() - t0))
    else
      T.like(out, skipped_line(f), f .. " compiles its kernels and says there is no GPU")
    end
    os.execute("rm -rf " .. dir)
  end
end

-- gauss_mpi.lua (t/026-mpi.t runs it under mpirun) refuses what it cannot run before
-- it starts MPI or looks for a GPU, naming the argument
for _, case in ipairs{
  {"bogus", "unknown argument 'bogus' %(N, nccl, host, both, block=NB, reps=R, update=seed|gemm, onestream%)"},
  {"update=fast", "unknown argument 'update=fast'"},
  {"block=65", "block must be 1%.%.64, got 65"},
  {"block=0", "block must be 1%.%.64, got 0"},
  {"0", "N must be 1%.%.46340 %(a rank's columns in one MPI call%), got 0"},
  {"reps=0", "reps must be at least 1"},
} do
  out, status = T.run(("%s %s/examples/gauss_mpi.lua %s"):format(T.culua, srcdir, case[1]))
  T.ok(status ~= 0 and out:find("gauss_mpi%.lua: " .. case[2]) ~= nil,
       ("gauss_mpi.lua %s: refused, naming it"):format(case[1]), out)
end

-- image_histogram.lua on a PGM file: an odd-sized plain (P2) one, written here
if wanted("examples/image_histogram.lua", 2) then
  local pgm = require "culua.pgm"
  local name = os.tmpname()
  pgm.write(name, cuda.host_array("uint8", {45, 77}):random(45 * 77, 0, 255), {format = "P2"})
  out, status = T.run(("%s %s/examples/image_histogram.lua %s"):format(T.culua, srcdir, name))
  T.is(status, cuda.device_count() > 0 and 0 or SKIPPED, "image_histogram.lua on a 77 x 45 P2 file exits 0 (77 without a GPU)")
  if cuda.device_count() > 0 then
    T.like(out, "77 x 45 image %(.-, maxval 255%).-SUCCESS!! %(texture kernel: all 256 bins equal the CPU's, 3465 pixels%)" ..
           ".-SUCCESS!! %(cuda%.catalog%.histogram", "image_histogram.lua reads the PGM and agrees with the CPU")
  else
    T.like(out, skipped_line("examples/image_histogram.lua"), "image_histogram.lua with a file says there is no GPU")
  end
  os.remove(name)
end

-- every script of bench/ and examples/ that needs a GPU says so the one way
-- (culua.bench's need_devices): one line on stdout, exit 77, no file left
-- behind (bench/soak.lua once left an empty soak.csv). Without a GPU only:
-- with one, they would run in full.
local function scripts(dir)
  local p = io.popen(("ls %s/%s/*.lua"):format(srcdir, dir))
  local t = {}
  for l in p:lines() do t[#t + 1] = dir .. "/" .. l:match("([^/]+)$") end
  p:close()
  return t
end
-- these need no GPU: a compile-cache timing, the embedding example's script, and the
-- host side of elementwise calls on a mock (run here with a thousand calls a row)
local no_gpu = {["bench/nvrtc_cache.lua"] = true, ["examples/embed.lua"] = true, ["bench/elementwise_host.lua"] = true}
do
  local o, st = T.run(("%s %s/bench/elementwise_host.lua '' 1000"):format(T.culua, srcdir))
  T.is(st, 0, "bench/elementwise_host.lua runs without a GPU")
  T.like(o, "elementwise axpy%(2, x, y%) +[%d.]+ ns.-cuda%.map axpy +[%d.]+ ns", "and prints its figures")
end
local all = scripts("bench")
for _, f in ipairs(scripts("examples")) do all[#all + 1] = f end
local need = {}
for _, f in ipairs(all) do if not no_gpu[f] then need[#need + 1] = f end end
-- where a GPU is, the driver is hidden from them (CULUA_LIBCUDA names no library)
do
  local nogpu = "CULUA_LIBCUDA=/nonexistent/libcuda.so.1"
  -- each runs in an empty directory of its own, so paths here become absolute
  local p = io.popen("pwd")
  local cwd = p:read("l")
  p:close()
  local function abs(path) return path:find("^/") and path or cwd .. "/" .. path end
  local culua = T.culua:gsub("(%S+)$", function (w) return w:find("/") and abs(w) or w end)
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  -- a script that starts MPI before it asks for a GPU is left out where the run
  -- says MPI is (under memcheck and ASan, whose reports of Open MPI's own leaks and
  -- whose hwloc warnings are not the script's: CULUA_TEST_SKIP_MPI, as t/026)
  local skip_mpi = os.getenv("CULUA_TEST_SKIP_MPI")
  for _, f in ipairs(need) do
    local fh = io.open(abs(srcdir) .. "/" .. f)
    local starts_mpi = fh and fh:read("a"):find("cuda%.mpi") ~= nil
    if fh then fh:close() end
    if starts_mpi and skip_mpi and skip_mpi ~= "" then
      T.skip(f .. " starts MPI: " .. skip_mpi, 2)
    else
      local o, st = T.run(("cd %s && %s %s %s/%s"):format(dir, nogpu, culua, abs(srcdir), f))
      T.is(st, SKIPPED, f .. " exits 77 without a GPU")
      T.like(o, skipped_line(f), f .. " says so in the one line: " .. o:gsub("\n", " | "))
    end
  end
  p = io.popen("ls -A " .. dir)
  local left = p:read("a")
  p:close()
  T.is(left, "", "and none leaves a file behind")
  os.execute("rm -rf " .. dir)
  -- bench/run.sh on a machine without a GPU fails, loudly, before any nvcc
  local o, st = T.run(("cd %s && %s sh bench/run.sh %s"):format(abs(srcdir), nogpu, culua))
  T.isnt(st, 0, "bench/run.sh without a GPU exits non-zero")
  T.like(o, "bench/run.sh: skipped: no CUDA device.-bench/run.sh: no benchmark ran", "and says that no benchmark ran")
end
T.done_testing()
