-- gauss_mpi.lua: seed 003's Gaussian elimination across MPI ranks, one GPU a rank.
--
-- As the seed's gaussian_multi_gpu_rdma: rank 0 makes the system A x = b and
-- the transpose of the augmented matrix [A b] (a row of it is a column of A,
-- so the column searches are coalesced); MPI_Scatterv gives each rank a block
-- of its rows. Then for every column n: the rank that holds n finds the pivot
-- and the multipliers (findPivotRowAndMultipliers), MPI broadcasts them, and
-- every rank swaps the pivot row into place in its columns (extractPivotRow)
-- and eliminates below it (rowElimination). MPI_Gatherv brings the reduced
-- matrix back to rank 0, which solves the triangular system. Rank 0 also runs
-- the same kernels on its GPU alone: the one-GPU result the ranks must match.
--
--   mpirun -np 2 culua examples/gauss_mpi.lua [N]       (default N = 2048)
--   culua examples/gauss_mpi.lua [N]                     (one rank)

local cuda = require "cuda"
local mpi = cuda.mpi
local N = math.tointeger(tonumber(arg[1] or "")) or 2048
local me, size = mpi.rank, mpi.size

require("culua.bench").need_devices(1, {quiet = me ~= 0})

local src = [[
// the transposed augmented matrix: row c (a column of [A b]) holds N entries
extern "C" __global__ void findPivotRowAndMultipliers(const double *col, double *info, int n, int N) {
  __shared__ double best[1024];
  __shared__ int where[1024];
  int t = threadIdx.x;
  double b = -1.0;
  int w = n;
  for (int i = n + t; i < N; i += blockDim.x) {
    double v = fabs(col[i]);
    if (v > b) { b = v; w = i; }
  }
  best[t] = b; where[t] = w;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s && (best[t + s] > best[t] || (best[t + s] == best[t] && where[t + s] < where[t]))) {
      best[t] = best[t + s]; where[t] = where[t + s];
    }
    __syncthreads();
  }
  int p = where[0];
  double piv = col[p];
  if (t == 0) { info[0] = (double)p; info[1] = piv; }
  // multipliers of the rows below n once rows n and p are swapped
  for (int i = n + 1 + t; i < N; i += blockDim.x)
    info[2 + i] = (i == p ? col[n] : col[i]) / piv;
}

// swap entries n and p of each of my columns, keeping the pivot row's value
extern "C" __global__ void extractPivotRow(double *abt, const double *info, double *pivrow, int n, int N, int ncols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= ncols) return;
  int p = (int)info[0];
  double *col = abt + (size_t)c * N;
  double v = col[p];
  col[p] = col[n];
  col[n] = v;
  pivrow[c] = v;
}

extern "C" __global__ void rowElimination(double *abt, const double *info, const double *pivrow, int n, int N, int ncols) {
  int c = blockIdx.y;
  int i = n + 1 + blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= ncols || i >= N) return;
  abt[(size_t)c * N + i] -= info[2 + i] * pivrow[c];
}
]]
local mod = cuda.compile(src, {options = {"-default-device"}}):module()
local findPivot, extract, eliminate = mod:kernel("findPivotRowAndMultipliers"), mod:kernel("extractPivotRow"),
                                      mod:kernel("rowElimination")

-- my block of the columns 1..N+1 (0-based lo, count)
local function block_of(rank, nranks)
  local cols = N + 1
  local base, extra = cols // nranks, cols % nranks
  local lo = rank * base + math.min(rank, extra)
  return lo, base + (rank < extra and 1 or 0)
end

-- eliminate on the columns [lo, lo + ncols) held in abt (ncols x N, on this GPU);
-- bcast(info, owner) brings the pivot information of the owner of column n
local function gauss(abt, lo, ncols, owner_of, bcast)
  local info = cuda.array("float64", N + 2)
  local pivrow = cuda.array("float64", math.max(ncols, 1))
  for n = 0, N - 1 do
    local owner = owner_of(n)
    if owner == me then
      findPivot:launch({grid = 1, block = 1024}, abt:view((n - lo) * N + 1, N), info, n, N)
    end
    bcast(info, owner)
    if ncols > 0 then
      -- columns left of n are finished: start at the first of mine that is not
      local first = math.max(n - lo, 0)
      local active = ncols - first
      if active > 0 then
        local part = abt:view(first * N + 1, active * N)
        extract:launch({grid = (active + 255) // 256, block = 256}, part, info, pivrow, n, N, active)
        if n + 1 < N then
          eliminate:launch({grid = {(N - n - 1 + 255) // 256, active}, block = 256}, part, info, pivrow, n, N, active)
        end
      end
    end
  end
  cuda.synchronize()
end

-- x from the reduced transposed matrix (host, (N+1) x N): back substitution
local function back_substitute(h)
  local x = {}
  for i = N - 1, 0, -1 do
    local s = h[N * N + i + 1]                       -- b, the last column
    for j = i + 1, N - 1 do s = s - h[j * N + i + 1] * x[j + 1] end
    x[i + 1] = s / h[i * N + i + 1]
  end
  return x
end

-- rank 0: the system (diagonally weighted random, so it is well conditioned)
local full, A, b
if me == 0 then
  local hA = cuda.host_array("float64", N * N):random(1, -1, 1)
  A, b = {}, {}
  full = cuda.host_array("float64", (N + 1) * N)
  for i = 0, N - 1 do
    for j = 0, N - 1 do
      local v = hA[i * N + j + 1] + (i == j and N / 8 or 0)
      full[j * N + i + 1] = v                        -- transposed: column j of A is row j
    end
    local bi = math.sin(i + 1)
    full[N * N + i + 1] = bi
    b[i + 1] = bi
  end
  A = hA
  print(("Gaussian elimination of %d x %d on %d rank%s, MPI path %s"):format(N, N, size, size == 1 and "" or "s", mpi.path))
end

-- scatter the transposed rows (whole columns of [A b]) over the ranks
local counts = {}
for r = 0, size - 1 do local _, c = block_of(r, size); counts[r + 1] = c * N end
local lo, ncols = block_of(me, size)
local mine = cuda.host_array("float64", math.max(ncols * N, 1))
mpi.barrier()
local t0 = cuda.clock()
mpi.scatterv(full or cuda.host_array("float64", 1), counts, mine, {root = 0})
local abt = cuda.array("float64", math.max(ncols * N, 1)):copy_from(mine)
local function owner_of(n)
  for r = 0, size - 1 do
    local rlo, rc = block_of(r, size)
    if n >= rlo and n < rlo + rc then return r end
  end
end
gauss(abt, lo, ncols, owner_of, function (info, owner) if size > 1 then mpi.bcast(info, {root = owner}) end end)
abt:copy_to(mine)
local back = me == 0 and cuda.host_array("float64", (N + 1) * N) or cuda.host_array("float64", 1)
mpi.gatherv(mine, back, counts, {root = 0})
local t_ranks = cuda.clock() - t0
local t_max = mpi.allreduce(t_ranks, {op = "max"})

if me == 0 then
  local x = back_substitute(back)
  -- the same on rank 0's GPU alone
  local one = cuda.array("float64", (N + 1) * N)
  cuda.synchronize()
  t0 = cuda.clock()
  one:copy_from(full)
  gauss(one, 0, N + 1, function () return 0 end, function () end)
  local h1 = cuda.host_array("float64", (N + 1) * N)
  one:copy_to(h1)
  local t_one = cuda.clock() - t0          -- as the ranks' time: to the reduced matrix on the host
  local x1 = back_substitute(h1)
  -- LAPACK's test ratio ||A x - b|| / (||A|| ||x|| N eps), infinity norms
  local rmax, anorm, xnorm, diff = 0, 0, 0, 0
  for i = 0, N - 1 do
    local s, rs = -b[i + 1], 0
    for j = 0, N - 1 do
      local a = A[i * N + j + 1] + (i == j and N / 8 or 0)
      s = s + a * x[j + 1]
      rs = rs + math.abs(a)
    end
    rmax, anorm = math.max(rmax, math.abs(s)), math.max(anorm, rs)
    xnorm = math.max(xnorm, math.abs(x[i + 1]))
    diff = math.max(diff, math.abs(x[i + 1] - x1[i + 1]))
  end
  local ratio = rmax / (anorm * xnorm * N * 2^-52)
  print(("%d rank(s): %.3f s (scatter, %d eliminations, gather); one GPU, same kernels: %.3f s"):format(size, t_max, N, t_one))
  print(("residual ratio ||Ax - b|| / (||A|| ||x|| N eps) = %.3f (LAPACK passes <= 10)"):format(ratio))
  print(("largest difference from the one-GPU solution: %.3g"):format(diff))
  print((ratio <= 10 and diff <= 1e-9 * (1 + xnorm)) and "SUCCESS" or "FAILED")
end
