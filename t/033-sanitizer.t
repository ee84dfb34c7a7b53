-- Clean under compute-sanitizer with its default flags: culua asks the driver
-- nothing it expects to be refused on a normal path. Without a GPU: every
-- catalog family's embedded entries (the .entry declarations of the PTX nvcc
-- made with its fatbin) parse, and a CUBIN's parameters are read from its
-- .nv.info. With a GPU: the catalog's kernels take their signatures from the
-- entries, and a catalog script (scan, sort, histogram, matmul, lu, solve, a
-- CUBIN of NVRTC's, a kernel that is not prebuilt) runs under
-- `compute-sanitizer --tool memcheck --error-exitcode 7` with 0 errors.
local T = require "culua.tap"
local cuda = require "cuda"
local C = cuda._catalog

-- {====================================================== without a GPU

local total = 0
for _, f in ipairs(C.families()) do
  local text = C.entries(f)
  local names, bad = {}, {}
  for name in text:gmatch("%.entry%s+([%w_$]+)") do
    names[#names + 1] = name
    if not pcall(cuda.signature, text, name) then bad[#bad + 1] = name end
  end
  T.ok(#names > 0, ("entries of %s: %d kernels declared"):format(f, #names))
  T.is(#bad, 0, ("  each one's signature parses%s"):format(#bad > 0 and " (not: " .. table.concat(bad, ", ") .. ")" or ""))
  total = total + #names
end
T.ok(total >= 20, ("%d catalog kernels in all"):format(total))
T.error_like(function () C.entries("nope") end, "no kernel family 'nope'", "entries of no family")
do   -- the entries read as the PTX would: types, not sizes
  local text = C.entries("matmul_sm90")
  local sig = cuda.signature(text, "culua_matmul_splitk")
  T.is(table.concat(sig, " "), "u64 u32 f32 u64 f32 u64 u32 u32", "matmul_splitk's parameters, typed")
  sig = cuda.signature(text, "culua_matmul_tf32_wgmma")
  T.is(sig[5], "b8[128]", "  a tensor map by value: 128 bytes")
  T.error_like(function () cuda.signature(text, "culua_matmul") end, "no entry 'culua_matmul'", "a name's prefix is not an entry")
end

T.error_like(function () cuda.load("x", {ptx = 5}) end, "cuda%.load: ptx must be PTX text", "load: ptx must be text")
T.error_like(function () cuda.load("x", {ptxx = ""}) end, "unknown option 'ptxx'", "load: an unknown option")

-- a CUBIN tells each kernel's parameter sizes in .nv.info.<kernel>
local src = [[
struct S { int a; double b; };
extern "C" __global__ void k1(float *x, int n, S s, unsigned long long q) { if (n) x[0] = s.a + s.b + q; }
extern "C" __global__ void k2(short h, char c, double d) {}
extern "C" __global__ void k3() {}
]]
local ok, prog = pcall(cuda.compile, src, {output = "cubin", options = {"-arch=sm_80"}})
if ok then
  local cubin = prog.cubin
  T.is(cubin:sub(1, 4), "\127ELF", "NVRTC's CUBIN is ELF")
  T.is_deeply(cuda.signature(cubin, "k1"), {"b64", "b32", "b8[16]", "b64"}, "CUBIN: pointer, int, a struct of 16 bytes, u64")
  T.is_deeply(cuda.signature(cubin, "k2"), {"b16", "b8", "b64"}, "CUBIN: short, char, double")
  T.is_deeply(cuda.signature(cubin, "k3"), {}, "CUBIN: no parameters")
  T.error_like(function () cuda.signature(cubin, "k4") end, "the CUBIN does not tell the parameters of 'k4'", "CUBIN: no such kernel")
  T.error_like(function () cuda.signature(cubin:sub(1, 200), "k1") end, "does not tell", "CUBIN cut short: no answer, no crash")
  -- the PTX of the same source says the same, typed
  local ptx = cuda.compile(src, {options = {"-arch=compute_80"}}).ptx
  T.is_deeply(cuda.signature(ptx, "k1"), {"u64", "u32", "b8[16]", "u64"}, "PTX of the same: the same widths, typed")
else
  T.skip("NVRTC cannot compile here: " .. tostring(prog), 7)
end

-- }======================================================


-- {====================================================== with a GPU

-- the script the sanitizer runs: a little of every family, at small sizes
local script = [[
local cuda = require "cuda"
local cat = cuda.catalog
local core = require "culua.catalog.core"
local n = 5000
local x = cuda.array("float32", n):copy_from(cuda.host_array("float32", n):random(1, 0, 9))
local y = cuda.array("float32", n)
cat.scan(x, y); cat.scan(x, y, {exclusive = true}); cat.reduce(x)
local k = cuda.array("uint32", n):copy_from(cuda.host_array("uint32", n):random(2, 0, 1000))
local v = cuda.array("uint32", n); v:fill(1)
cat.sort(k); cat.sort(k, v, {descending = true})
cat.histogram(k, cuda.array("uint32", 256), {lo = 0, hi = 1000})
local A = cuda.array("float32", {96, 80}):copy_from(cuda.host_array("float32", {96, 80}):random(3, -1, 1))
local B = cuda.array("float32", {80, 64}):copy_from(cuda.host_array("float32", {80, 64}):random(4, -1, 1))
cat.matmul(A, B, cuda.array("float32", {96, 64}))
local M = cuda.host_array("float64", {64, 64}):random(5, -1, 1)
for i = 0, 63 do M[i * 64 + i + 1] = 70 end   -- diagonally dominant: well conditioned
local D = cuda.array("float64", {64, 64}):copy_from(M)
cat.solve(D, cuda.array("float64", {64, 1}):fill(1))
cat.lu(D)
-- a kernel the fatbin lacks: the entries say so, the driver is not asked
assert(not pcall(core.kernel, "barrier", "no_such_kernel"))
-- a CUBIN: its parameters from .nv.info, the driver not asked past the last
local prog = cuda.compile('extern "C" __global__ void k1(float *x, int n) { if (n) x[0] = 1; }', {output = "cubin"})
local k1 = prog:module():kernel("k1")
assert(table.concat(k1.signature, " ") == "b64 b32", table.concat(k1.signature, " "))
k1:launch({grid = 1, block = 1}, y, 1)
cuda.synchronize()
print("catalog done")
]]

local function sanitizer()
  local p = io.popen("command -v compute-sanitizer 2>/dev/null")
  local path = p:read("l")
  p:close()
  if path and path ~= "" then return path end
  for _, dir in ipairs{os.getenv("CUDA_HOME"), "/usr/local/cuda"} do
    local f = dir and io.open(dir .. "/bin/compute-sanitizer")
    if f then f:close(); return dir .. "/bin/compute-sanitizer" end
  end
end

T.gpu_part(function ()
  local core = require "culua.catalog.core"
  -- the catalog's kernels are typed as their PTX declares them
  local text = C.entries("barrier")
  local name = text:match("%.entry%s+([%w_$]+)")
  local k = core.kernel("barrier", name)
  T.is_deeply(k.signature, cuda.signature(text, name), "a prebuilt kernel's signature is its entry's: " .. name)
  T.error_like(function () core.kernel("barrier", "no_such_kernel") end, "no kernel 'no_such_kernel'",
               "a kernel the fatbin lacks is missing, without asking the driver")
  local out, status = T.run(T.culua .. " -", script)
  T.like(out, "catalog done", "the script runs plainly")
  T.is(status, 0, "  and exits 0")
  local cs = sanitizer()
  if T.sanitizer or os.getenv("CULUA_TEST_WRAP") then
    T.skip("already under compute-sanitizer (bench/sanitize.sh)", 3)
  elseif not cs then
    T.skip("no compute-sanitizer on PATH or in $CUDA_HOME/bin", 3)
  else
    out, status = T.run(cs .. " --tool memcheck --error-exitcode 7 " .. T.culua .. " -", script)
    T.like(out, "catalog done", "under compute-sanitizer with its default flags: the script runs")
    T.like(out, "ERROR SUMMARY: 0 errors", "  0 errors")
    T.is(status, 0, "  and exits 0 (7 on errors)")
    if status ~= 0 then T.diag(out:sub(-3000)) end
  end
end, "the catalog under compute-sanitizer")

-- }======================================================

T.done_testing()
