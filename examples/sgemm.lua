-- sgemm.lua: seed 003's matrix multiplication, naive and in shared-memory tiles.
--
-- C = alpha * A * B + beta * C with the seed's alpha = 2, beta = 1 and its
-- N = M = K = 2048. sgemm_kernel reads A and B from global memory, one thread
-- an element of C; sgemm_kernel_v2 walks BLOCK_DIM x BLOCK_DIM tiles of A
-- (rightwards) and B (downwards) through shared memory, so that every value
-- loaded is used BLOCK_DIM times. Both run at blocks of 16 x 16 and 32 x 32,
-- as the seed profiled them; the seed's V100 times are printed beside ours.
-- Unlike the seed's, the kernels take any sizes (partial tiles are padded
-- with zeros). Both are checked against cuda.catalog.reference.matmul on a
-- smaller odd-sized problem, and on sampled elements of the timed one.
--
--   culua examples/sgemm.lua [N | M N K]      (default 2048: the seed's problem)

local cuda = require "cuda"

local dims = {}
for i = 1, #arg do
  dims[i] = math.tointeger(tonumber(arg[i]))
  if not dims[i] or dims[i] < 1 then error(("sgemm.lua: sizes must be positive integers, got '%s'"):format(arg[i]), 0) end
end
if #dims ~= 0 and #dims ~= 1 and #dims ~= 3 then error("sgemm.lua: give N, or M N K", 0) end
local M, N, K = 2048, 2048, 2048
if #dims == 1 then M, N, K = dims[1], dims[1], dims[1] elseif #dims == 3 then M, N, K = dims[1], dims[2], dims[3] end
local alpha, beta = 2.0, 1.0

local source = [[
#ifndef BLOCK_DIM
#define BLOCK_DIM 16
#endif

// A is M x K, B is K x N, C is M x N, all row-major. A thread an element of C.
extern "C" __global__ void sgemm_kernel(const float *A, const float *B, float *C,
                                        int M, int N, int K, float alpha, float beta)
{
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float element_c = 0.f;
  for (int e = 0; e < K; e++)
    element_c += A[(size_t)row * K + e] * B[(size_t)e * N + col];
  size_t c = (size_t)row * N + col;
  C[c] = alpha * element_c + beta * C[c];
}

// The same with tiles: the block walks A's tiles rightwards and B's downwards,
// each thread loading one element of each into shared memory. Needs blocks of
// BLOCK_DIM x BLOCK_DIM threads. Every thread of the block reaches both
// barriers on every step (no early return): out-of-range threads load zeros,
// which add nothing, and store nothing.
extern "C" __global__ void sgemm_kernel_v2(const float *A, const float *B, float *C,
                                           int M, int N, int K, float alpha, float beta)
{
  __shared__ float s_tile_A[BLOCK_DIM][BLOCK_DIM];
  __shared__ float s_tile_B[BLOCK_DIM][BLOCK_DIM];
  int tid_x = threadIdx.x, tid_y = threadIdx.y;
  int row = blockIdx.y * BLOCK_DIM + tid_y;
  int col = blockIdx.x * BLOCK_DIM + tid_x;
  float element_c = 0.f;
  for (int k = 0; k < K; k += BLOCK_DIM) {
    s_tile_A[tid_y][tid_x] = (row < M && k + tid_x < K) ? A[(size_t)row * K + k + tid_x] : 0.f;
    s_tile_B[tid_y][tid_x] = (k + tid_y < K && col < N) ? B[(size_t)(k + tid_y) * N + col] : 0.f;
    __syncthreads();
    for (int e = 0; e < BLOCK_DIM; e++)
      element_c += s_tile_A[tid_y][e] * s_tile_B[e][tid_x];
    __syncthreads();   // before the next step overwrites the tiles
  }
  if (row < M && col < N) {
    size_t c = (size_t)row * N + col;
    C[c] = alpha * element_c + beta * C[c];
  }
}
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernels
local progs = {}
for _, b in ipairs{16, 32} do
  progs[b] = cuda.compile(source, {name = "sgemm.cu", options = {"-DBLOCK_DIM=" .. b}})
end
require("culua.bench").need_devices()

local dev = cuda.device()
local ref = cuda.catalog.reference.matmul
local kernels = {}
for b, prog in pairs(progs) do
  local mod = prog:module()
  kernels[b] = {naive = mod:kernel("sgemm_kernel"), v2 = mod:kernel("sgemm_kernel_v2")}
end

local function launch(which, b, A, B, C, m, n, k)
  local cfg = {grid = {(n + b - 1) // b, (m + b - 1) // b}, block = {b, b}}
  kernels[b][which]:launch(cfg, A, B, C, m, n, k, alpha, beta)
end

-- {====================================================== checks
-- a small problem of odd sizes, every element against the CPU (in double)
local all_ok = true
do
  local m, n, k = 317, 229, 263
  local hA = cuda.host_array("float32", {m, k}):random(1, -1, 1)
  local hB = cuda.host_array("float32", {k, n}):random(2, -1, 1)
  local hC = cuda.host_array("float32", {m, n}):random(3, -1, 1)
  local R = cuda.host_array("float64", {m, n}):copy_from(hC:totable())
  ref(hA, hB, R, alpha, beta)
  local A, B = cuda.array("float32", {m, k}):copy_from(hA), cuda.array("float32", {k, n}):copy_from(hB)
  local C = cuda.array("float32", {m, n})
  local line = {}
  for _, b in ipairs{16, 32} do
    for _, which in ipairs{"naive", "v2"} do
      C:copy_from(hC)
      launch(which, b, A, B, C, m, n, k)
      local _, _, rel = cuda.compare(C, R)
      local ok = rel < 1e-5
      all_ok = all_ok and ok
      line[#line + 1] = ("%s/%d %s (%.1e)"):format(which, b, ok and "ok" or "WRONG", rel)
    end
  end
  print(("Check, M=%d N=%d K=%d against the CPU: %s"):format(m, n, k, table.concat(line, ", ")))
end
-- }======================================================

-- {====================================================== the seed's problem
print(("\n%s: M = %d, N = %d, K = %d, alpha = %g, beta = %g"):format(dev.name, M, N, K, alpha, beta))
local hA = cuda.host_array("float32", {M, K}):random(11, 0, 1)
local hB = cuda.host_array("float32", {K, N}):random(12, 0, 1)
local hC = cuda.host_array("float32", {M, N}):random(13, 0, 1)
local A, B = cuda.array("float32", {M, K}):copy_from(hA), cuda.array("float32", {K, N}):copy_from(hB)
local C = cuda.array("float32", {M, N})

-- sampled elements of one product from C as it was, against dot products in Lua
local samples = {}
for s = 1, 97 do samples[s] = {(s * 7919) % M, (s * 104729) % N} end
samples[#samples + 1] = {M - 1, N - 1}
local want = {}
do
  local a, b, c = hA:bytes(), hB:bytes(), hC:bytes()
  for s, rc in ipairs(samples) do
    local r, col = rc[1], rc[2]
    local acc = 0.0
    for e = 0, K - 1 do
      acc = acc + string.unpack("<f", a, 1 + 4 * (r * K + e)) * string.unpack("<f", b, 1 + 4 * (e * N + col))
    end
    want[s] = alpha * acc + beta * string.unpack("<f", c, 1 + 4 * (r * N + col))
  end
end
-- float32 sums of K positive terms drift by about sqrt(K) roundings: 1e-4 is
-- far above that at K = 2048 and far below any indexing mistake
local function check_samples()
  local got = cuda.host_array("float32", {M, N})
  C:copy_to(got)
  local worst = 0
  for s, rc in ipairs(samples) do
    local g = got[rc[1] * N + rc[2] + 1]
    local err = math.abs(g - want[s]) / math.max(1, math.abs(want[s]))
    worst = (err == err) and math.max(worst, err) or math.huge
  end
  local ok = worst < 1e-4
  all_ok = all_ok and ok
  return ok, worst
end

local seed = (M == 2048 and N == 2048 and K == 2048) and {[16] = {naive = 9.9691, v2 = 6.7845},
                                                          [32] = {naive = 8.1985, v2 = 5.4787}} or nil
local function gflops(ms) return 2 * M * N * K / (ms * 1e-3) / 1e9 end
print(("%-7s %-16s %10s %9s %16s  %s"):format("block", "kernel", "ours (ms)", "GFLOP/s", "seed, V100 (ms)",
      ("check (%d sampled elements)"):format(#samples)))
local ours = {}
for _, b in ipairs{16, 32} do
  ours[b] = {}
  for _, which in ipairs{"naive", "v2"} do
    C:copy_from(hC)
    launch(which, b, A, B, C, M, N, K)
    local ok, worst = check_samples()
    local ms = cuda.bench(function () launch(which, b, A, B, C, M, N, K) end, {warmup = 2, reps = 10}).median
    ours[b][which] = ms
    print(("%-7s %-16s %10.3f %9.1f %16s  %s"):format(b .. "x" .. b, which == "naive" and "sgemm_kernel" or "sgemm_kernel_v2",
          ms, gflops(ms), seed and ("%.2f"):format(seed[b][which]) or "-",
          ok and ("ok (%.1e)"):format(worst) or ("WRONG (%.1e)"):format(worst)))
  end
end
for _, b in ipairs{16, 32} do
  print(("Tiles over naive at %dx%d: ours %.2fx%s"):format(b, b, ours[b].naive / ours[b].v2,
        seed and (", the seed's %.2fx"):format(seed[b].naive / seed[b].v2) or ""))
end
-- for scale: the catalog's register-blocked kernel on the same problem
local mm = cuda.catalog.matmul
local fast = cuda.bench(function () mm(A, B, C, {variant = "fast", alpha = alpha, beta = beta}) end,
                        {warmup = 2, reps = 10}).median
print(("(cuda.catalog.matmul 'fast' on the same problem: %.3f ms, %.1f GFLOP/s)"):format(fast, gflops(fast)))
-- }======================================================

print(all_ok and "Check: every kernel agrees with the CPU: SUCCESS" or "Check FAILED")
if not all_ok then os.exit(1) end
