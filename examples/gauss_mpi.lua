-- gauss_mpi.lua: seed 003's Gaussian elimination across MPI ranks, one GPU a rank,
-- the pivots and multipliers broadcast by NCCL on the GPU or staged through the host.
--
-- As the seed's gaussian_multi_gpu_rdma: rank 0 holds the system A x = b as the
-- transpose of the augmented matrix [A b] (a row of it is a column of A, so the
-- column searches are coalesced) and deals the columns out; for every column n the
-- rank that holds it finds the pivot and the multipliers and broadcasts them, and
-- every rank swaps the pivot row into place in its columns and eliminates below
-- it; the reduced matrix comes back to rank 0, which solves the triangular system.
-- Rank 0 also runs the same kernels on its GPU alone: the one-GPU result the ranks
-- must match. They match to the bit: every entry gets the same operations in the
-- same order wherever its column lives.
--
-- What changed from the seed, and why:
--   * Panels. A broadcast a column is bound by latency (10-20 us by NCCL, 60 us
--     through the host), and 8192 of them cost as much as the elimination they
--     feed. So the owner of a panel of nb columns (32 by default) factors it as
--     the seed does, column by column (panel_step: a launch a column, the pivot
--     search of column j fused with the elimination of column j - 1 in the
--     panel), and one broadcast sends the panel's nb pivots and nb columns of
--     multipliers (rows below the panel's first only). Every rank then does the
--     panel's nb row swaps in its columns (apply_top) and the seed's
--     rowElimination a column (eliminate_step), in the seed's order.
--   * Panels are dealt round-robin (rank r owns panels r, r + G, ...), not one
--     block a rank as the seed scatters them: with blocks the first rank is idle
--     after the first 1/G of the columns, and on 2 ranks the last does 11/16 of
--     the work.
--   * Look-ahead. The owner of panel k + 1 updates it with panel k first, on a
--     stream of higher priority, and factors and broadcasts it while every rank
--     updates the rest of its columns; the broadcasts run on a third stream that
--     waits only on events, so no rank waits for another's update. Left on every
--     rank's path: the panels' searches, a launch a column on one rank after
--     another, and a broadcast a panel. More ranks divide the updates only.
--   * update=gemm does a panel's updates as one matrix product instead (apply_top
--     also solves the panel's small triangle, apply_rest the rest, each entry's nb
--     terms in the seed's order, so the result is still the same to the bit). It
--     reads and writes a column once a panel instead of once a column, and does
--     the arithmetic from shared memory and registers: far less time than the
--     seed's update, memory-bound, takes. Then the searches' path above, which
--     more ranks cannot shorten, is most of what is left at a few thousand
--     columns, and the ranks gain little on it there. The seed's update is the
--     default: it is seed 003's program, and the one whose time more ranks
--     divide. (For a fast LU over ranks, see cuda.catalog.lu with comm =.)
-- The transport is beneath the algorithm: "nccl" broadcasts a panel on the GPU
-- (ncclBroadcast on a stream, no host round trip) and deals the columns out and
-- back by NCCL sends; "host" stages each panel through pinned host memory and
-- MPI_Bcast (the seed's way, and what a machine without NCCL has), and deals the
-- columns by MPI_Scatterv and MPI_Gatherv. block=1 is the seed's algorithm itself:
-- a broadcast a column.
--
--   mpirun -np 2 culua examples/gauss_mpi.lua [N] [nccl|host|both] [block=NB] [update=seed|gemm] [reps=R] [onestream]
--   culua examples/gauss_mpi.lua [N] ...                 (one rank)
--
-- N: the system's size (default 2048); nccl (the default where NCCL is), host, or
-- both (each, beside one GPU); block=NB: panel width 1..64 (default 32); update:
-- the seed's (default) or gemm; reps=R: timed runs (the median; default 3, after
-- one untimed); onestream: no look-ahead stream (a panel's work and the update
-- queue on one stream). Times run from the system in rank 0's host memory to the
-- reduced system back there (as the seed's), "elimination" from every rank holding
-- its columns to every rank done with them. Under mpirun as root add
-- OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; on machines whose GPUs
-- have NVLink multicast, NCCL_NVLS_ENABLE=0. Two ranks on one GPU need an
-- NCCL_HOSTID each (NCCL refuses them otherwise; t/026-mpi.t shows how).

local cuda = require "cuda"

-- {====================================================== arguments

local N, nb, reps, mode, onestream, gemm = 2048, 32, 3, nil, false, false
for _, a in ipairs(arg) do
  local v = math.tointeger(tonumber(a))
  if v then N = v
  elseif a == "nccl" or a == "host" or a == "both" then mode = a
  elseif a:match("^block=%d+$") then nb = math.tointeger(tonumber(a:sub(7)))
  elseif a:match("^reps=%d+$") then reps = math.tointeger(tonumber(a:sub(6)))
  elseif a == "update=seed" or a == "update=gemm" then gemm = a == "update=gemm"
  elseif a == "onestream" then onestream = true
  else
    error(("gauss_mpi.lua: unknown argument '%s' (N, nccl, host, both, block=NB, reps=R, update=seed|gemm, onestream)")
          :format(a), 0)
  end
end
if N < 1 or N > 46340 then error(("gauss_mpi.lua: N must be 1..46340 (a rank's columns in one MPI call), got %d"):format(N), 0) end
if nb < 1 or nb > 64 then error(("gauss_mpi.lua: block must be 1..64, got %d"):format(nb), 0) end
if reps < 1 then error("gauss_mpi.lua: reps must be at least 1", 0) end

-- }======================================================


-- {====================================================== kernels

local PT, MAXNB, TOPW, BM, BN, BK = 128, 64, 4, 64, 64, 16
local src = ([==[
#define PT $PT
#define MAXNB $MAXNB
#define TOPW $TOPW
#define BM $BM
#define BN $BN
#define BK $BK
typedef unsigned long long u64;

// The transposed augmented matrix: column c of [A b] is N contiguous doubles.
// Panels of nb columns are dealt round-robin over G ranks; a rank holds its
// panels in order, and rank 0 holds all ranks' one after another (rank-major).
__device__ int panels_of(int r, int G, int P) { return r < P ? (P - 1 - r) / G + 1 : 0; }
__device__ long long columns_of(int r, int G, int nb, int P, int last) {
  long long c = (long long)panels_of(r, G, P) * nb;
  return (P - 1) % G == r ? c - (nb - last) : c;
}
__device__ long long column_start(int c, int N, int G, int nb) {
  int P = (N + nb) / nb, last = N + 1 - (P - 1) * nb, p = c / nb, r = p % G;
  long long base = 0;
  for (int q = 0; q < r; q++) base += columns_of(q, G, nb, P, last);
  return (base + (long long)(p / G) * nb + c % nb) * N;
}

// [A b]'s entry (i, j), j == N for b: a hash of (i, j) in [-1, 1), so that rows are
// swapped at almost every column (a weighted diagonal would leave the pivots in place);
// b_i = sin(i + 1)
__device__ double entry(int i, int j, int N) {
  if (j == N) return sin((double)(i + 1));
  u64 z = (u64)i * (u64)N + (u64)j + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

extern "C" __global__ void make_system(double *m, int N, int G, int nb) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (i < N) m[column_start(c, N, G, nb) + i] = entry(i, c, N);
}

// the seed's order of candidates: the larger magnitude, the lower row on a tie
__device__ bool better(double a, int ia, double b, int ib) { return a > b || (a == b && ia < ib); }

__device__ void block_best(double *bv, int *bi, int t) {
  __syncthreads();
  for (int h = PT / 2; h > 0; h >>= 1) {
    if (t < h && better(bv[t + h], bi[t + h], bv[t], bi[t])) { bv[t] = bv[t + h]; bi[t] = bi[t + h]; }
    __syncthreads();
  }
}

/*
** Launch j (0 .. w) of a panel's factorization, on its owner: pa holds the panel's
** wp columns (w of them to factor; the last panel may also hold b), rows k0 .. N-1
** are a thread each. First step s = j - 1 as the seed's kernels do it, with the pivot
** p and the rows p and n = k0 + s that launch j - 1 kept in stash (U: row p, R: row n,
** by column; columns v < s are L's, whose rows are swapped like the matrix's): row i's
** multiplier into L (column s, rows from k0, a row m apart), its swap and elimination
** in the panel's later columns. Then the search of column j: each block's best row
** into cand; the last block to finish picks the pivot, the seed's way, and stashes
** rows p and k0 + j for launch j + 1.
*/
extern "C" __global__ void panel_step(double *pa, int N, int k0, int w, int wp, int j, double *L, int m,
                                      double *piv, double *stash, double *cand, unsigned *count) {
  __shared__ double bv[PT];
  __shared__ int bi[PT];
  __shared__ bool last;
  double *U = stash, *R = stash + MAXNB;
  int t = threadIdx.x, i = k0 + blockIdx.x * PT + t;
  double vj = 0.0;   // column j at row i after step j - 1
  if (j > 0 && i < N) {
    int s = j - 1, n = k0 + s, p = (int)piv[s];
    if (i > n) {
      double l = ((i == p) ? R[s] : pa[(size_t)s * N + i]) / U[s];
      L[(size_t)s * m + (i - k0)] = l;
      for (int v = s + 1; v < wp; v++) {
        double *col = pa + (size_t)v * N;
        double x = fma(-l, U[v], (i == p) ? R[v] : col[i]);
        col[i] = x;
        if (v == j) vj = x;
      }
      if (i == p) for (int v = 0; v < s; v++) L[(size_t)v * m + (p - k0)] = R[v];
    }
    else if (i == n) {
      for (int v = s; v < wp; v++) pa[(size_t)v * N + n] = U[v];
      for (int v = 0; v < s; v++) L[(size_t)v * m + (n - k0)] = U[v];
    }
  }
  if (j >= w) return;
  int n = k0 + j;
  double b = -1.0;
  int where = n;
  if (i < N && i >= n) {
    double a = fabs(j > 0 ? vj : pa[i]);
    if (better(a, i, b, where)) { b = a; where = i; }
  }
  bv[t] = b; bi[t] = where;
  block_best(bv, bi, t);
  if (t == 0) { cand[2 * blockIdx.x] = bv[0]; cand[2 * blockIdx.x + 1] = (double)bi[0]; }
  __threadfence();   // this block's rows and candidate, before it counts itself done
  __syncthreads();
  if (t == 0) last = atomicAdd(count, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  b = -1.0; where = n;
  for (int q = t; q < gridDim.x; q += PT) {
    double cv = __ldcg(&cand[2 * q]);
    int ci = (int)__ldcg(&cand[2 * q + 1]);
    if (better(cv, ci, b, where)) { b = cv; where = ci; }
  }
  bv[t] = b; bi[t] = where;
  block_best(bv, bi, t);
  int p = bi[0];
  for (int v = t; v < wp; v += PT) {
    if (v < j) { U[v] = __ldcg(&L[(size_t)v * m + (p - k0)]); R[v] = __ldcg(&L[(size_t)v * m + (n - k0)]); }
    else { U[v] = __ldcg(&pa[(size_t)v * N + p]); R[v] = __ldcg(&pa[(size_t)v * N + n]); }
  }
  if (t == 0) { piv[j] = (double)p; *count = 0u; }
}

/*
** A panel's row swaps, and its small triangle where solve is 1, in nc columns from a:
** a warp a column. The swaps of rows k0 + s and piv[s], in order, on the panel's rows
** (seg) and on the pivot rows below them (out, one slot a distinct row); then rows
** k0 .. k0+w-1 eliminated with L's top w x w, each row's updates in the seed's order.
*/
extern "C" __global__ void apply_top(double *a, int N, int nc, int k0, int w, const double *L, int m,
                                     const double *piv, int solve) {
  __shared__ double Lt[MAXNB * MAXNB];
  __shared__ double seg[TOPW][MAXNB], out[TOPW][MAXNB];
  __shared__ int pv[MAXNB], slot[MAXNB];
  int t = threadIdx.x, lane = t & 31, q = t >> 5, top = k0 + w;
  for (int e = t; e < w * w; e += blockDim.x) {
    int s = e / w, r = e % w;
    Lt[e] = r > s ? L[(size_t)s * m + r] : 0.0;
  }
  for (int s = t; s < w; s += blockDim.x) pv[s] = (int)piv[s];
  __syncthreads();
  for (int s = t; s < w; s += blockDim.x) {
    int f = s;
    for (int e = 0; e < s; e++) if (pv[e] == pv[s]) { f = e; break; }
    slot[s] = f;
  }
  __syncthreads();
  int c = blockIdx.x * TOPW + q;
  if (c >= nc) return;
  double *col = a + (size_t)c * N, *sg = seg[q], *o = out[q];
  for (int r = lane; r < w; r += 32) sg[r] = col[k0 + r];
  for (int s = lane; s < w; s += 32) if (pv[s] >= top && slot[s] == s) o[s] = col[pv[s]];
  __syncwarp();
  if (lane == 0)
    for (int s = 0; s < w; s++) {
      double *x = pv[s] < top ? &sg[pv[s] - k0] : &o[slot[s]], v = sg[s];
      sg[s] = *x;
      *x = v;
    }
  __syncwarp();
  for (int s = 0; solve && s < w - 1; s++) {
    double u = sg[s];
    for (int r = lane; r < w; r += 32) if (r > s) sg[r] = fma(-Lt[s * w + r], u, sg[r]);
    __syncwarp();
  }
  for (int r = lane; r < w; r += 32) col[k0 + r] = sg[r];
  for (int s = lane; s < w; s += 32) if (pv[s] >= top && slot[s] == s) col[pv[s]] = o[s];
}

/*
** The seed's rowElimination, for step s of a panel whose swaps are done: rows below
** n = k0 + s of nc columns from a, with L's column s (from row k0) and the pivot
** row's entry in each column (row n, which this step does not change).
*/
extern "C" __global__ void eliminate_step(double *a, int N, int nc, int n, const double *l, int k0) {
  int c = blockIdx.y, i = n + 1 + blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= nc || i >= N) return;
  double *col = a + (size_t)c * N;
  col[i] = fma(-l[i - k0], col[n], col[i]);
}

/*
** The rest of the panel's elimination in nc columns from a, rows k0 + w .. N-1:
** A(i, c) -= sum over s of L_s(i) * A(k0 + s, c), the sum's terms in order, as
** the seed subtracts them a column at a time. Tiles of BM rows x BN columns,
** 4 x 4 a thread.
*/
extern "C" __global__ void apply_rest(double *a, int N, int nc, int k0, int w, const double *L, int m) {
  __shared__ double Ls[BK][BM];
  __shared__ double Us[BN][BK + 1];
  int t = threadIdx.x, tx = t % 16, ty = t / 16;
  int row0 = k0 + w + blockIdx.x * BM, col0 = blockIdx.y * BN;
  double acc[4][4];
  for (int r = 0; r < 4; r++)
    for (int q = 0; q < 4; q++) {
      int i = row0 + tx + 16 * r, c = col0 + ty + 16 * q;
      acc[r][q] = (i < N && c < nc) ? a[(size_t)c * N + i] : 0.0;
    }
  for (int s0 = 0; s0 < w; s0 += BK) {
    int kk = min(BK, w - s0);
    for (int e = t; e < BK * BM; e += 256) {
      int s = e / BM, r = e % BM, i = row0 + r;
      Ls[s][r] = (s < kk && i < N) ? L[(size_t)(s0 + s) * m + (i - k0)] : 0.0;
    }
    for (int e = t; e < BN * BK; e += 256) {
      int cc = e / BK, s = e % BK, c = col0 + cc;
      Us[cc][s] = (s < kk && c < nc) ? a[(size_t)c * N + k0 + s0 + s] : 0.0;
    }
    __syncthreads();
    for (int s = 0; s < kk; s++) {
      double l[4], u[4];
      for (int r = 0; r < 4; r++) l[r] = Ls[s][tx + 16 * r];
      for (int q = 0; q < 4; q++) u[q] = Us[ty + 16 * q][s];
      for (int r = 0; r < 4; r++)
        for (int q = 0; q < 4; q++) acc[r][q] = fma(-l[r], u[q], acc[r][q]);
    }
    __syncthreads();
  }
  for (int r = 0; r < 4; r++)
    for (int q = 0; q < 4; q++) {
      int i = row0 + tx + 16 * r, c = col0 + ty + 16 * q;
      if (i < N && c < nc) a[(size_t)c * N + i] = acc[r][q];
    }
}

// x from the reduced system (laid out for G ranks): back substitution, one block,
// column by column (column i holds U's column i above its diagonal)
extern "C" __global__ void back_substitute(const double *mat, double *x, int N, int G, int nb) {
  __shared__ double xi;
  const double *b = mat + column_start(N, N, G, nb);
  for (int j = threadIdx.x; j < N; j += blockDim.x) x[j] = b[j];
  __syncthreads();
  for (int i = N - 1; i >= 0; i--) {
    const double *col = mat + column_start(i, N, G, nb);
    if (threadIdx.x == 0) { xi = x[i] / col[i]; x[i] = xi; }
    __syncthreads();
    double v = xi;
    for (int j = threadIdx.x; j < i; j += blockDim.x) x[j] = fma(-col[j], v, x[j]);
    __syncthreads();
  }
}

// LAPACK's test ratio's parts: row i of A x - b, and row i's sum of |A(i, j)|
extern "C" __global__ void residual(const double *x, double *r, double *rowsum, int N) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  double s = -entry(i, N, N), rs = 0.0;
  for (int j = 0; j < N; j++) {
    double a = entry(i, j, N);
    s = fma(a, x[j], s);
    rs += fabs(a);
  }
  r[i] = s;
  rowsum[i] = rs;
}
]==]):gsub("%$(%u+)", {PT = PT, MAXNB = MAXNB, TOPW = TOPW, BM = BM, BN = BN, BK = BK})
-- compiled before looking for a GPU, so that a machine without one still checks the kernels
local prog = cuda.compile(src, {name = "gauss_mpi.cu"})

-- }======================================================


-- {====================================================== ranks

-- without MPI (culua built --without-mpi) this is one rank of its own
local mpi = cuda.mpi
local have_mpi = mpi.available()
local me, size = 0, 1
if have_mpi then me, size = mpi.rank, mpi.size end
local function barrier() if have_mpi then mpi.barrier() end end
local function maxall(v) return have_mpi and mpi.allreduce(v, {op = "max"}) or v end

require("culua.bench").need_devices(1, {quiet = me ~= 0})
local mod = prog:module()
local make_system, panel_step, apply_top, apply_rest, eliminate_step, back_substitute, residual =
  mod:kernel("make_system"), mod:kernel("panel_step"), mod:kernel("apply_top"), mod:kernel("apply_rest"),
  mod:kernel("eliminate_step"), mod:kernel("back_substitute"), mod:kernel("residual")

-- the NCCL communicator over the ranks, or nil and why not (every rank agrees)
local function communicator()
  if size == 1 then return nil, "one rank: nothing to broadcast" end
  local nccl = cuda.nccl
  local ok, why = nccl.available()
  if mpi.allreduce(ok and 1 or 0, {op = "min"}) == 0 then
    return nil, ok and "NCCL is missing on another rank" or ("NCCL not available: " .. tostring(why))
  end
  local id = mpi.bcast(me == 0 and nccl.unique_id() or nil, {root = 0})
  local made, comm = pcall(nccl.comm, id, size, me, {device = cuda.device().ordinal})
  if mpi.allreduce(made and 1 or 0, {op = "min"}) == 0 then
    if made then comm:close() end
    return nil, "no NCCL communicator over the ranks: " .. (made and "another rank failed" or tostring(comm))
  end
  return comm
end

-- }======================================================


-- {====================================================== the layout

local P = (N + nb) // nb        -- panels of the N + 1 columns
local PF = (N + nb - 1) // nb   -- those with a column to factor
local NBUF = 4                  -- panels in flight: a broadcast buffer each
local RING = 2 * NBUF + 4       -- events of a kind, reused a ring apart
local function panel_cols(k) return math.min(nb, N + 1 - k * nb) end
local function factored(k) return math.max(0, math.min(nb, N - k * nb)) end
local function columns_of(r, G)
  local c = 0
  for k = r, P - 1, G do c = c + panel_cols(k) end
  return c
end
-- counts (elements) and offsets of the ranks' parts in rank-major order
local function parts(G)
  local counts, offsets, off = {}, {}, 0
  for r = 0, G - 1 do
    counts[r + 1], offsets[r + 1] = columns_of(r, G) * N, off
    off = off + counts[r + 1]
  end
  return counts, offsets
end

-- the system in rank-major order for G ranks, in rank 0's pinned host memory
local function system_for(G)
  local d = cuda.array("float64", (N + 1) * N)
  make_system:launch({grid = {(N + 255) // 256, N + 1}, block = 256}, d, N, G, nb)
  local h = cuda.host_array("float64", (N + 1) * N, {pinned = true})
  d:copy_to(h)
  d:close()
  return h
end

-- }======================================================


-- {====================================================== the elimination

-- what a run keeps: streams (S the update, Q the look-ahead, C the transport),
-- the panels' buffers, the panel factorization's scratch, and rings of events
local function workspace()
  local w = {S = cuda.stream{non_blocking = true}, C = cuda.stream{non_blocking = true, priority = -1}}
  w.Q = onestream and w.S or cuda.stream{non_blocking = true, priority = -1}
  w.slots = {}   -- zeroed: a broadcast sends entries no step writes (above the multipliers)
  for b = 0, NBUF - 1 do w.slots[b] = cuda.array("float64", nb * (N + 1)):fill(0) end
  w.stash = cuda.array("float64", 2 * MAXNB)
  w.cand = cuda.array("float64", 2 * ((N + PT - 1) // PT))
  w.count = cuda.array("uint32", 1):fill(0)
  w.ev = {}
  for _, kind in ipairs{"f", "g", "a", "s", "q"} do
    w.ev[kind] = {}
    for i = 0, RING - 1 do w.ev[kind][i] = cuda.event{timing = false} end
  end
  return w
end

-- panel k's buffer: L (m rows a column, from row k0) and the pivots after it
local function panel_buffer(w, k)
  local m = N - k * nb
  local slot = w.slots[k % NBUF]
  return slot:view(1, nb * m), slot:view(nb * m + 1, nb), m, slot:view(1, nb * m + nb)
end

-- the owner factors panel k, held from its local column lc, on stream st
local function factor(w, a, k, lc, st)
  local L, piv, m = panel_buffer(w, k)
  local pa = a:view(lc * N + 1, panel_cols(k) * N)
  local cfg = {grid = (m + PT - 1) // PT, block = PT, stream = st}
  for j = 0, factored(k) do
    panel_step:launch(cfg, pa, N, k * nb, factored(k), panel_cols(k), j, L, m, piv, w.stash, w.cand, w.count)
  end
end

-- panel k applied to nc local columns from column c0, on stream st
local function apply(w, a, k, c0, nc, st)
  if nc <= 0 then return end
  local L, piv, m = panel_buffer(w, k)
  local k0, fw = k * nb, factored(k)
  local part = a:view(c0 * N + 1, nc * N)
  apply_top:launch({grid = (nc + TOPW - 1) // TOPW, block = 32 * TOPW, stream = st}, part, N, nc, k0, fw, L, m, piv,
                   gemm and 1 or 0)
  if gemm then
    if N - k0 - fw > 0 then
      apply_rest:launch({grid = {(N - k0 - fw + BM - 1) // BM, (nc + BN - 1) // BN}, block = 256, stream = st},
                        part, N, nc, k0, fw, L, m)
    end
  else
    for s = 0, fw - 1 do
      local n = k0 + s
      if n + 1 < N then
        eliminate_step:launch({grid = {(N - n - 1 + 255) // 256, nc}, block = 256, stream = st}, part, N, nc, n,
                              L:view(s * m + 1, m), k0)
      end
    end
  end
end

--[[
** Rank r of G eliminates its columns a (its panels in order). tp.bcast(k, owner,
** factored, s_old, q_old) brings panel k's buffer from its owner to this rank (after
** the event `factored` on the owner; after the events that last read the buffer,
** s_old and q_old, elsewhere) and returns the event the buffer is ready at, or nil
** when it is ready on return. Events: f (panel factored, on Q), g (broadcast, on C),
** a (S done with the first panel of its part), s (S done), q (Q's look-ahead update).
]]
local function eliminate(w, a, G, r, tp)
  local S, Q, ev = w.S, w.Q, w.ev
  local ncols = columns_of(r, G)
  local la_done = {}
  if r == 0 then
    factor(w, a, 0, 0, Q)
    ev.f[0]:record(Q)
  end
  for k = 0, PF - 1 do
    local owner, old = k % G, k - NBUF
    local ready = ev.f[k % RING]
    if G > 1 then
      ready = tp.bcast(k, owner, ready, old >= 0 and ev.s[old % RING] or nil,
                       old >= 0 and la_done[old] and ev.q[old % RING] or nil)
    end
    -- my columns right of panel k start at c0
    local c0 = math.min(((k - r) // G + 1) * nb, ncols)
    local nxt = k + 1
    if nxt < PF and nxt % G == r then
      -- look-ahead: panel k + 1 is mine and the first of them; it waits for S only as far
      -- as S's first panel at step k - 1, and its buffer for S to be done with panel k + 1 - NBUF
      if ready then Q:wait(ready) end
      if k > 0 then Q:wait(ev.a[(k - 1) % RING]) end
      apply(w, a, k, c0, panel_cols(nxt), Q)
      ev.q[k % RING]:record(Q)
      la_done[k] = true
      if nxt - NBUF >= 0 then Q:wait(ev.s[(nxt - NBUF) % RING]) end
      factor(w, a, nxt, c0, Q)
      ev.f[nxt % RING]:record(Q)
      c0 = c0 + panel_cols(nxt)
    end
    if ready then S:wait(ready) end
    local first = math.min(nb, ncols - c0)
    apply(w, a, k, c0, first, S)
    ev.a[k % RING]:record(S)
    apply(w, a, k, c0 + first, ncols - c0 - first, S)
    ev.s[k % RING]:record(S)
    la_done[k - RING] = nil
  end
  S:synchronize()
  Q:synchronize()
  w.C:synchronize()
end

-- }======================================================


-- {====================================================== transports

-- NCCL: a panel by ncclBroadcast on C; the columns out and back by sends in a group
local function nccl_transport(comm, w, G)
  local nccl, C = cuda.nccl, w.C
  local counts, offsets = parts(G)
  return {
    bcast = function (k, owner, factored_ev, s_old, q_old)
      if owner == me then C:wait(factored_ev)
      else
        if s_old then C:wait(s_old) end
        if q_old then C:wait(q_old) end
      end
      local _, _, _, whole = panel_buffer(w, k)
      comm:broadcast(whole, {root = owner, stream = C})
      local g = w.ev.g[k % RING]
      g:record(C)
      return g
    end,
    -- rank 0: the whole system onto its GPU, then each rank's part to it
    scatter = function (packed, mine, hsys)
      if me == 0 then packed:copy_from(hsys) end
      nccl.group(function ()
        if me == 0 then
          for q = 1, G - 1 do
            if counts[q + 1] > 0 then comm:send(packed:view(offsets[q + 1] + 1, counts[q + 1]), q, {stream = C}) end
          end
        elseif counts[me + 1] > 0 then comm:recv(mine, 0, {stream = C}) end
      end)
      C:synchronize()
    end,
    gather = function (packed, mine, hback)
      nccl.group(function ()
        if me == 0 then
          for q = 1, G - 1 do
            if counts[q + 1] > 0 then comm:recv(packed:view(offsets[q + 1] + 1, counts[q + 1]), q, {stream = C}) end
          end
        elseif counts[me + 1] > 0 then comm:send(mine, 0, {stream = C}) end
      end)
      C:synchronize()
      if me == 0 then packed:copy_to(hback) end
    end,
  }
end

-- one rank: nothing to broadcast; the columns are all its own, in order
local function local_transport()
  return {
    scatter = function (_, mine, hsys) mine:copy_from(hsys) end,
    gather = function (_, mine, hback) mine:copy_to(hback) end,
  }
end

-- the host: a panel through pinned host memory and MPI_Bcast (the whole buffer: a
-- host array has no views), the columns by MPI_Scatterv and MPI_Gatherv
local function host_transport(w, G)
  local counts = parts(G)
  local hbuf = cuda.host_array("float64", nb * (N + 1), {pinned = true})
  local hmine = cuda.host_array("float64", math.max(counts[me + 1], 1), {pinned = true})
  local empty = cuda.host_array("float64", 1)
  return {
    bcast = function (k, owner, factored_ev, s_old, q_old)
      local _, _, _, whole = panel_buffer(w, k)
      if owner == me then
        factored_ev:synchronize()
        whole:copy_to(hbuf)
      else
        if s_old then s_old:synchronize() end
        if q_old then q_old:synchronize() end
      end
      mpi.bcast(hbuf, {root = owner})
      if owner ~= me then w.slots[k % NBUF]:copy_from(hbuf) end
      return nil
    end,
    scatter = function (_, mine, hsys)
      mpi.scatterv(me == 0 and hsys or empty, counts, hmine, {root = 0})
      if counts[me + 1] > 0 then mine:copy_from(hmine) end
    end,
    gather = function (_, mine, hback)
      if counts[me + 1] > 0 then mine:copy_to(hmine) end
      mpi.gatherv(hmine, me == 0 and hback or empty, counts, {root = 0})
    end,
  }
end

-- }======================================================


-- {====================================================== runs

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

-- the ranks over transport `kind`: median total and elimination times, and on
-- rank 0 the reduced system (rank-major, on its GPU)
local function run_ranks(kind, comm, hsys)
  local G = size
  local w = workspace()
  local tp = G == 1 and local_transport() or kind == "nccl" and nccl_transport(comm, w, G) or host_transport(w, G)
  local counts = parts(G)
  local packed = (me == 0 and kind == "nccl" and G > 1) and cuda.array("float64", (N + 1) * N) or nil
  local mine = (me == 0 and packed) and packed:view(1, counts[1]) or cuda.array("float64", counts[me + 1])
  local hback = me == 0 and cuda.host_array("float64", (N + 1) * N, {pinned = true}) or nil
  local totals, elims = {}, {}
  for rep = 0, reps do   -- rep 0 loads the kernels and sets NCCL's connections up
    barrier()
    local t0 = cuda.clock()
    tp.scatter(packed, mine, hsys)
    barrier()
    local t1 = cuda.clock()
    eliminate(w, mine, G, me, tp)
    barrier()
    local t2 = cuda.clock()
    tp.gather(packed, mine, hback)
    local total, elim = maxall(cuda.clock() - t0), maxall(t2 - t1)
    if rep > 0 then totals[rep], elims[rep] = total, elim end
  end
  local reduced
  if me == 0 then
    reduced = cuda.array("float64", (N + 1) * N):copy_from(hback)
    hback:close()
  end
  return median(totals), median(elims), reduced
end

-- rank 0's GPU alone, the same kernels (G = 1: its columns are all of them, in order)
local function run_one(hsys1)
  local w = workspace()
  local one = cuda.array("float64", (N + 1) * N)
  local hback = cuda.host_array("float64", (N + 1) * N, {pinned = true})
  local totals, elims = {}, {}
  for rep = 0, reps do
    local t0 = cuda.clock()
    one:copy_from(hsys1)
    local t1 = cuda.clock()
    eliminate(w, one, 1, 0, nil)
    local t2 = cuda.clock()
    one:copy_to(hback)
    if rep > 0 then totals[rep], elims[rep] = cuda.clock() - t0, t2 - t1 end
  end
  return median(totals), median(elims), one
end

-- x (on the host) from a reduced system laid out for G ranks (on rank 0's GPU), LAPACK's
-- residual ratio, and x's largest magnitude
local function solve(reduced, G)
  local x = cuda.array("float64", N)
  back_substitute:launch({grid = 1, block = 1024}, reduced, x, N, G, nb)
  local r, rs = cuda.array("float64", N), cuda.array("float64", N)
  residual:launch({grid = (N + 255) // 256, block = 256}, x, r, rs, N)
  local hx, hr, hrs = cuda.host_array("float64", N), cuda.host_array("float64", N), cuda.host_array("float64", N)
  x:copy_to(hx); r:copy_to(hr); rs:copy_to(hrs)
  local rmax, anorm, xnorm = 0, 0, 0
  for i = 1, N do
    rmax, anorm, xnorm = math.max(rmax, math.abs(hr[i])), math.max(anorm, hrs[i]), math.max(xnorm, math.abs(hx[i]))
  end
  return hx, rmax / (anorm * xnorm * N * 2^-52), xnorm
end

-- }======================================================


-- {====================================================== main

local comm, why_not = communicator()
local hsys = me == 0 and system_for(size) or nil
if me == 0 then
  print(("Gaussian elimination of %d x %d (float64) on %d rank%s: %d panel%s of %d column%s%s, the %s update; " ..
         "MPI path %s%s"):format(N, N, size, size == 1 and "" or "s", PF, PF == 1 and "" or "s", nb, nb == 1 and "" or "s",
         size == 1 and "" or " dealt round-robin", gemm and "product (gemm)" or "seed's",
         have_mpi and mpi.path or "none (one rank)", comm and (", NCCL %d.%d.%d"):format(cuda.nccl.version()) or ""))
  if size > 1 and not comm and mode ~= "host" then
    print(("nccl: not available here (%s); the host-staged way runs instead"):format(why_not))
  end
end
-- the transports to run: one rank has none to choose
local modes = {}
if size == 1 then modes = {"local"}
else
  if comm and mode ~= "host" then modes[#modes + 1] = "nccl" end
  if not comm or mode == "host" or mode == "both" then modes[#modes + 1] = "host" end
end
local results, ok_all = {}, true
for _, kind in ipairs(modes) do
  local total, elim, reduced = run_ranks(kind, comm, hsys)
  results[#results + 1] = {use = kind, total = total, elim = elim, reduced = reduced}
end

if me == 0 then
  local hsys1 = size == 1 and hsys or system_for(1)
  local t1, e1, one = run_one(hsys1)
  local x1, ratio1, xnorm = solve(one, 1)
  print(("one GPU (rank 0's, the same kernels): %.3f s (elimination %.3f s), median of %d; residual ratio %.3f"):format(
        t1, e1, reps, ratio1))
  for _, res in ipairs(results) do
    res.name = size == 1 and "1 rank" or ("%s, %d ranks"):format(res.use, size)
    local how = size == 1 and "nothing to broadcast"
                or res.use == "nccl" and "panels broadcast by NCCL on the GPU"
                or "panels staged through pinned host memory and MPI"
    print(("%s: %.3f s (elimination %.3f s), %.2fx one GPU; %s"):format(res.name, res.total, res.elim,
          t1 / res.total, how))
  end
  for _, res in ipairs(results) do
    local x, ratio = solve(res.reduced, size)
    local first, diff = nil, 0
    for i = 1, N do
      if x[i] ~= x1[i] then
        first = first or i
        diff = math.max(diff, math.abs(x[i] - x1[i]))
      end
    end
    local same = first == nil and "identical to the one-GPU solution"
                 or ("first difference from the one-GPU solution at x[%d]: %.17g against %.17g (largest %.3g)"):format(
                    first, x[first], x1[first], diff)
    local good = ratio <= 10 and diff <= 1e-9 * (1 + xnorm)
    ok_all = ok_all and good
    print(("%s: residual ratio ||Ax - b|| / (||A|| ||x|| N eps) = %.3f (LAPACK passes <= 10); %s: %s"):format(
          res.name, ratio, same, good and "SUCCESS" or "FAILED"))
  end
  if ratio1 > 10 then ok_all = false end
  print(ok_all and "SUCCESS" or "FAILED")
end
local failed = maxall(ok_all and 0 or 1) ~= 0   -- every rank waits here for rank 0's checks
if comm then comm:close() end
if failed then os.exit(1, true) end

-- }======================================================
