/*
** solve.cu
** The solve family of culua's catalog: LU factorization with partial
** pivoting and the solves that use it, on row-major float32 and float64
** matrices (element (i, j) of an n x n matrix at i*ld + j). Its kernels are
** in one file a part, as its Lua is (lua/catalog/):
**   - kernels/lu_panel.cu: the panel factorizations (a cluster, a
**     cooperative launch, or a launch a column);
**   - kernels/lu.cu: the rest of LU on one GPU (row swaps, the look-ahead's
**     step between panels);
**   - kernels/lu_multi.cu: what several GPUs add (a share's columns, a
**     panel as it travels);
**   - kernels/triangular.cu: the triangular solves (trsm, a block row; the
**     substitutions of lu_solve) and lu_solve's permutation;
**   - kernels/seed.cu: seed 003's method;
**   - this file: what every method calls (the input checks, copies);
**   - culua/solve.cuh: the numbers Lua reads too, and the pivot search.
**
** Two methods, both driven from lua/catalog/solve.lua (on one GPU, or
** several: the panel kernels take a leading dimension and a column offset,
** so that they factor a panel inside one GPU's share of the columns):
**   - seed: seed 003's three kernels a column (find the pivot row and the
**     multipliers, extract the pivot row, eliminate), on the transposed
**     (augmented) matrix, as the seed stores it so that the pivot search
**     reads a column contiguously;
**   - lu: blocked right-looking LU, LAPACK's getrf: a panel of `block`
**     columns factored on the GPU (one thread-block cluster a panel with its
**     rows in shared memory and a cluster barrier a column; or one cooperative
**     launch a panel with a grid barrier a column; or, panel = "columns", a
**     kernel a column, which also searches the next column's pivot), the
**     panel's row swaps applied to the rest,
**     a triangular solve for the block row of U, and the trailing update
**     A22 -= L21 * U12 by the catalog's matmul (alpha = -1, beta = 1, with
**     leading dimensions: kernels/matmul*.cu), as are the blocked substitutions
**     of lu_solve for many right-hand sides; for a few, the substitutions
**     (one launch a triangle, its blocks meeting through global memory).
**
** Pivots are LAPACK's ipiv, 1-based: at step i, row i was swapped with
** row ipiv[i]. A status word records the first bad pivot: i + 1 when
** pivot i is zero, -(i + 1) when it is not finite; 0 when all are fine.
** Matrix offsets are element counts (long long), leading dimensions ints.
*/

#include <culua/common.cuh>
#include <culua/solve.cuh>

using namespace culua::solve;


/* {====================================================== input checks */

/* status = 1 when any of x[0..count) is NaN or infinite */
template <typename T>
__device__ void check_finite (long long count, const T *x, int *status) {
  bool bad = false;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    bad |= !isfinite((double)x[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *status = 1;
}

/*
** lu_solve's pivots: the first ipiv[i] outside 1..n marks status with
** 2 + (n - 1 - i) (by atomicMax, so the smallest such i wins, and over
** check_finite's 1). The permutation would read and write rows outside B.
*/
__device__ void check_pivots (int n, const int *ipiv, int *status) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int p = ipiv[i];
    if (p < 1 || p > n) atomicMax(status, 2 + (n - 1 - i));
  }
}

/*
** The largest magnitude among an n x n matrix's elements (upper: only those on
** and above the diagonal, U's) into *out as a double's bits, by atomicMax: a
** magnitude (>= 0) orders as its bits do, so the word starts at 0 (0.0) and
** grows. A block a row at a time, its threads across the row (coalesced, no
** division an element); each block's warps meet in shared memory, then one
** atomic a block. For the growth factor max|U| / max|A| (lu's growth option).
*/
template <typename T>
__device__ void absmax (int n, const T *X, int upper, unsigned long long *out) {
  __shared__ unsigned long long warps[32];
  double m = 0.0;
  for (int i = blockIdx.x; i < n; i += gridDim.x) {
    const T *row = X + (size_t)i * n;
    for (int j = (upper ? i : 0) + threadIdx.x; j < n; j += blockDim.x)
      m = fmax(m, fabs((double)row[j]));
  }
  unsigned long long bits = (unsigned long long)__double_as_longlong(m);
  for (int d = 16; d > 0; d >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, bits, d);
    bits = o > bits ? o : bits;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = bits;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x + 31) / 32; w++) bits = warps[w] > bits ? warps[w] : bits;
    atomicMax(out, bits);
  }
}

/* }====================================================== */


/* {====================================================== copies */

template <typename T>
__device__ void copy (long long count, const T *src, T *dst) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count;
       e += (long long)gridDim.x * blockDim.x)
    dst[e] = src[e];
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_SOLVE(t, T) \
  extern "C" __global__ void culua_solve_check_##t (long long count, const T *x, int *status) \
  { check_finite<T>(count, x, status); } \
  extern "C" __global__ void culua_solve_absmax_##t (int n, const T *X, int upper, unsigned long long *out) \
  { absmax<T>(n, X, upper, out); } \
  extern "C" __global__ void culua_solve_copy_##t (long long count, const T *src, T *dst) \
  { copy<T>(count, src, dst); }

CULUA_SOLVE(f32, float)
CULUA_SOLVE(f64, double)

extern "C" __global__ void culua_solve_check_pivots (int n, const int *ipiv, int *status)
{ check_pivots(n, ipiv, status); }


/* }====================================================== */
