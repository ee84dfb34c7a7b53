-- gauss.lua: seed 003's Gaussian elimination, sequential on the CPU, on one GPU and on several.
--
-- The seed solves A x = b three ways and prints each one's time: sequentially
-- on the CPU, on one GPU with three kernels a column (findPivotRowAndMultipliers,
-- extractPivotRow, rowElimination on the transpose of the augmented matrix
-- [A b]), and on several GPUs with peer copies. Here the CPU run is the C
-- reference (cuda.catalog.reference.lu and lu_solve, partial pivoting in
-- double), the GPU runs are cuda.catalog.solve with method = "seed" (the
-- seed's kernels) and the default blocked LU. Each prints its time and the
-- residual ||b - A x|| / (||A|| ||x||) (infinity norms) and LAPACK's ratio,
-- that over n eps, which must stay below 10. Several GPUs: both methods again
-- with devices = every GPU (the seed's P2P program for "seed": the columns split,
-- the pivot column broadcast by peer copies; block-cyclic LU with look-ahead for
-- "lu"), or, on a machine with one GPU, devices = {0, 0}: two shares of the one
-- GPU, which runs the same code but is no faster. How the data travelled (peer,
-- host-staged, local) is printed.
--
--   culua examples/gauss.lua [N [DTYPE]]     (default N = 1024, float32)

local cuda = require "cuda"
local cat = cuda.catalog
local N = math.tointeger(tonumber(arg[1] or "")) or 1024
local DT = arg[2] or "float32"
assert(DT == "float32" or DT == "float64", "dtype must be float32 or float64")
local EPS = DT == "float32" and 2.0 ^ -24 or 2.0 ^ -53
require("culua.bench").need_devices()

-- a random system, made diagonally heavy enough to be well conditioned but
-- still pivoting (uniform [-1, 1) entries)
local hA = cuda.host_array(DT, {N, N}):random(2024, -1, 1)
local hb = cuda.host_array(DT, N):random(7, -1, 1)

local ok = true
local function report(what, ms, hx)
  local r = cat.reference.lu_residual(hA, hx, hb)
  local ratio = r / (N * EPS)
  ok = ok and ratio <= 10
  print(("%-34s %10.3f ms   residual %.3e   ratio %.3f %s"):format(what, ms, r, ratio, ratio <= 10 and "" or "(too large)"))
end

print(("Gaussian elimination with partial pivoting, N = %d, %s"):format(N, DT))

-- sequential CPU
do
  local LU = cuda.host_array(DT, {N, N}):copy_from(hA)
  local piv = cuda.host_array("int32", N)
  local hx = cuda.host_array(DT, N):copy_from(hb)
  local t0 = os.clock()
  cat.reference.lu(LU, piv)
  cat.reference.lu_solve(LU, piv, hx)
  report("sequential CPU (C reference)", (os.clock() - t0) * 1e3, hx)
end

local dev = cuda.device()
print(("GPU: %s"):format(dev.name))
local A = cuda.array(DT, {N, N}):copy_from(hA)
local b = cuda.array(DT, N):copy_from(hb)
local function run(what, opts)
  cat.solve(A, b, opts)                  -- warm up: kernels loaded
  local e0, e1 = cuda.event(), cuda.event()
  e0:record()
  local x, _, info = cat.solve(A, b, opts)
  e1:record()
  e1:synchronize()
  local hx = cuda.host_array(DT, N)
  x:copy_to(hx)
  report(what, e0:elapsed(e1), hx)
  return info
end
for _, m in ipairs{"seed", "lu"} do run(("one GPU, method %s"):format(m), {method = m}) end

local devices, note = {}, nil
for i = 0, cuda.device_count() - 1 do devices[#devices + 1] = i end
if #devices == 1 then
  devices = {0, 0}
  note = "one GPU: devices = {0, 0}, two shares of it (the several-GPU code, no faster)"
end
print(note or ("several GPUs: devices = {%s}"):format(table.concat(devices, ", ")))
for _, m in ipairs{"seed", "lu"} do
  local info = run(("%d %s, method %s"):format(#devices, note and "shares" or "GPUs", m), {method = m, devices = devices})
  print(("  transfer: %s%s"):format(info.transfer, info.why and (" (" .. info.why .. ")") or ""))
end
print(ok and "SUCCESS!!" or "FAILED")
if not ok then os.exit(1) end
