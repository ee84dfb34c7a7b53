-- The examples and benchmark scripts: every one parses; devices.lua runs anywhere;
-- with a GPU, a small run of the matmul lab checks every variant and writes its CSVs, and a
-- small run of the scan example checks its scans, compact and split, and the sort example agrees
-- with the CPU.
local T = require "culua.tap"
local cuda = require "cuda"
local srcdir = os.getenv("CULUA_SRCDIR") or "."

for _, f in ipairs{"examples/devices.lua", "examples/embed.lua", "examples/grid_barrier.lua", "examples/matmul_lab.lua",
                   "examples/scan.lua", "bench/scan.lua", "examples/histogram.lua", "bench/histogram.lua", "examples/sort.lua", "bench/sort.lua", "bench/launch.lua", "bench/copy.lua", "bench/nvrtc_cache.lua", "bench/matmul.lua", "bench/barrier.lua"} do
  local chunk, err = loadfile(srcdir .. "/" .. f)
  T.ok(chunk ~= nil, f .. " parses", err)
end

local out, status = T.run(T.culua .. " " .. srcdir .. "/examples/devices.lua")
T.is(status, 0, "devices.lua exits 0")
if cuda.device_count() > 0 then
  T.like(out, "Device 0\n  Name +: %S.-\n  Compute capability +: %d+%.%d.-Warp size +: 32.-Multiprocessor count +: %d+",
         "devices.lua prints the seed-000 table")
  local dir = os.tmpname()
  os.remove(dir)
  out, status = T.run(("%s %s/examples/matmul_lab.lua %s 1024"):format(T.culua, srcdir, dir))
  T.is(status, 0, "matmul_lab.lua (N up to 1024) exits 0")
  T.like(out, "N=256: all variants and unroll factors correct", "the lab checks every variant against the CPU")
  T.like(out, "Seed 000.s claim", "and reports seed 000.s claim")
  for _, csv in ipairs{"lab_size.csv", "lab_block.csv", "lab_unroll.csv", "lab_launch.csv"} do
    local f = io.open(dir .. "/" .. csv)
    T.ok(f and f:read("l") ~= nil, csv .. " written")
    if f then f:close() end
  end
  os.execute("rm -rf " .. dir)
  out, status = T.run(("%s %s/examples/scan.lua 1000 100000"):format(T.culua, srcdir))
  T.is(status, 0, "scan.lua (N = 1000, 100000) exits 0")
  T.like(out, "result%[gpu_v2%] *::.-SUCCESS!!.-result%[lookback%] *::.-SUCCESS!!.-pack%[gpu%] *::.-SUCCESS!!.-split%[gpu%] *::.-SUCCESS!!",
         "scan.lua checks the seed's scans, the multi-block ones, compact and split against the CPU")
  T.unlike(out, "FAILED", "and none fails")
  out, status = T.run(("%s %s/examples/histogram.lua 300 201"):format(T.culua, srcdir))
  T.is(status, 0, "histogram.lua (300 x 201) exits 0")
  T.like(out, "variant 'default'.-SUCCESS!!.-variant 'seed'.-SUCCESS!!", "histogram.lua checks both variants against the CPU")
  out, status = T.run(("%s %s/examples/sort.lua 100000"):format(T.culua, srcdir))
  T.is(status, 0, "sort.lua (N = 100000) exits 0")
  local _, agree = out:gsub("SUCCESS", "")
  T.is(agree, 7, "sort.lua: the seed's four rounds, the warp sort of 32 and the two larger sorts agree with the CPU")
  T.unlike(out, "FAILURE", "and none differs")
else
  T.like(out, "No CUDA device found", "devices.lua says plainly that there is none")
end
T.done_testing()
