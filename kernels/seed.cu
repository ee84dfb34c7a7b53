/*
** seed.cu
** Seed 003's method (cuda.catalog.solve's method = "seed"): three kernels a
** column on the transposed augmented matrix, on one GPU or on each share of
** several (lua/catalog/seed.lua). kernels/solve.cu says what the family's
** files hold.
*/

#include <culua/common.cuh>
#include <culua/solve.cuh>

using namespace culua::solve;


/* {====================================================== the seed's kernels */

/*
** The seed keeps the transpose of the augmented matrix [A | B]: ABT is
** (n + k) x n, ABT[c*n + r] = AB[r][c], so that a column of AB (the pivot
** search, the elimination) is contiguous. Two modes: `lu` (eliminate the rows
** below the pivot and keep the multipliers: getrf's unblocked algorithm) and
** Gauss-Jordan (lu = 0: eliminate every other row, as the seed's CPU loop
** does, so that the solution is the right-hand columns over the diagonal).
*/

/* out (cols x rows) = transpose of in (rows x cols), through TRANSPOSE_TILE x TRANSPOSE_TILE tiles */
template <typename T>
__device__ void transpose (int rows, int cols, const T *in, long long inoff, int ldin,
                           T *out, long long outoff, int ldout) {
  __shared__ T tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
  in += inoff;
  out += outoff;
  int r0 = blockIdx.y * TRANSPOSE_TILE, c0 = blockIdx.x * TRANSPOSE_TILE;
  for (int i = threadIdx.y; i < TRANSPOSE_TILE; i += blockDim.y) {
    int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[(size_t)r * ldin + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < TRANSPOSE_TILE; i += blockDim.y) {
    int c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[(size_t)c * ldout + r] = tile[threadIdx.x][i];
  }
}


/*
** findPivotRowAndMultipliers, one block: the pivot of column p among rows
** p..n-1, then the multipliers of the rows to eliminate as they will be
** once rows p and the pivot's are swapped (mult[p] = 0: the pivot row stays).
** ABT holds the columns c0.. of AB (all of them: c0 = 0; a GPU's share of
** them when several GPUs split the columns, as the seed's P2P program does).
*/
template <typename T>
__device__ void seed_pivot (int n, int c0, int p, int lu, const T *ABT, int *ipiv, T *mult, int *status) {
  __shared__ double sv[SEED_PIVOT_THREADS / 32];
  __shared__ int si[SEED_PIVOT_THREADS / 32];
  __shared__ int spiv;
  const T *col = ABT + (size_t)(p - c0) * n;
  double best = -1.0;
  int bi = n;
  for (int r = p + threadIdx.x; r < n; r += blockDim.x) {
    double m = magnitude(col[r]);
    if (better(m, r, best, bi)) { best = m; bi = r; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    double v = __shfl_down_sync(0xffffffffu, best, o);
    int i = __shfl_down_sync(0xffffffffu, bi, o);
    if (better(v, i, best, bi)) { best = v; bi = i; }
  }
  if ((threadIdx.x & 31) == 0) { sv[threadIdx.x >> 5] = best; si[threadIdx.x >> 5] = bi; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
      if (better(sv[w], si[w], best, bi)) { best = sv[w]; bi = si[w]; }
    if (bi >= n) bi = p;
    ipiv[p] = bi + 1;
    note_pivot(status, p, col[bi]);
    spiv = bi;
  }
  __syncthreads();
  int piv = spiv;
  T pv = col[piv];
  bool usable = pv != T(0) && isfinite((double)pv);
  for (int r = (lu ? p + 1 : 0) + threadIdx.x; r < n; r += blockDim.x) {
    int src = r == p ? piv : r == piv ? p : r;
    mult[r] = (r == p || !usable) ? T(0) : col[src] / pv;
  }
}


/* extractPivotRow: swap rows p and ipiv[p]-1 of AB (a thread a column) and keep the new row p */
template <typename T>
__device__ void seed_extract (int n, int ncols, int p, const int *ipiv, T *ABT, T *prow) {
  int piv = ipiv[p] - 1;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < ncols; c += gridDim.x * blockDim.x) {
    T *col = ABT + (size_t)c * n;
    T a = col[p], b = col[piv];
    col[p] = b;
    col[piv] = a;
    prow[c] = b;
  }
}


/*
** rowElimination: row r -= mult[r] * pivot row, on columns p.. (column p takes
** the multiplier, or 0). ABT holds ncols columns of AB from column c0 on (prow
** too: its element c is column c0 + c); only those from p on change.
*/
template <typename T>
__device__ void seed_eliminate (int n, int ncols, int c0, int p, int lu, T *ABT, const T *mult, const T *prow) {
  int r = (lu ? p + 1 : 0) + blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n || r == p) return;
  T m = mult[r];
  for (int c = max(p - c0, 0) + blockIdx.y; c < ncols; c += gridDim.y) {
    T *e = ABT + (size_t)c * n + r;
    if (c + c0 == p) *e = lu ? m : T(0);
    else *e -= m * prow[c];
  }
}


/* X (n x k) = the right-hand columns of the reduced ABT over its diagonal */
template <typename T>
__device__ void seed_divide (int n, int k, const T *ABT, T *X) {
  long long total = (long long)n * k;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    int r = (int)(e / k), j = (int)(e % k);
    X[e] = ABT[(size_t)(n + j) * n + r] / ABT[(size_t)r * n + r];
  }
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_SOLVE_SEED(t, T) \
  extern "C" __global__ void culua_solve_transpose_##t (int rows, int cols, const T *in, long long inoff, int ldin, \
      T *out, long long outoff, int ldout) \
  { transpose<T>(rows, cols, in, inoff, ldin, out, outoff, ldout); } \
  extern "C" __global__ void culua_solve_seed_pivot_##t (int n, int c0, int p, int lu, const T *ABT, int *ipiv, T *mult, \
      int *status) \
  { seed_pivot<T>(n, c0, p, lu, ABT, ipiv, mult, status); } \
  extern "C" __global__ void culua_solve_seed_extract_##t (int n, int ncols, int p, const int *ipiv, T *ABT, T *prow) \
  { seed_extract<T>(n, ncols, p, ipiv, ABT, prow); } \
  extern "C" __global__ void culua_solve_seed_eliminate_##t (int n, int ncols, int c0, int p, int lu, T *ABT, \
      const T *mult, const T *prow) \
  { seed_eliminate<T>(n, ncols, c0, p, lu, ABT, mult, prow); } \
  extern "C" __global__ void culua_solve_seed_divide_##t (int n, int k, const T *ABT, T *X) \
  { seed_divide<T>(n, k, ABT, X); }

CULUA_SOLVE_SEED(f32, float)
CULUA_SOLVE_SEED(f64, double)


/* }====================================================== */
