/*
** lu_multi.cu
** What LU (and the seed's method) on several GPUs add to the one-GPU kernels
** (kernels/lu.cu, lu_panel.cu, triangular.cu): a share's block-cyclic columns
** packed out of A and back, and a factored panel packed with its pivots as
** it travels to the other shares (lua/catalog/lu_multi.lua).
*/

#include <culua/common.cuh>
#include <culua/solve.cuh>

using namespace culua::solve;


/* {====================================================== several GPUs */

/*
** Block-cyclic columns: the shares (GPUs, or several shares of one) take
** the panels of nb columns in turn, panel q to share q % shares. A share
** keeps its columns in an n x nloc array X, in order; `back` = 0 packs them
** out of A (n x n), 1 puts them back: `rows` rows of its columns [c0, c0 +
** w), A and X pointing at the first row (all n, or a block row as it becomes
** final; all its columns, or a chunk of them as the first step takes them).
*/
template <typename T>
__device__ void cyclic (int n, int rows, int nb, int shares, int share, int nloc, int c0, int w, T *A, T *X,
                        int back) {
  long long total = (long long)rows * w;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    int r = (int)(e / w), lc = c0 + (int)(e % w);
    int gc = ((lc / nb) * shares + share) * nb + lc % nb;
    size_t x = (size_t)r * nloc + lc, a = (size_t)r * n + gc;
    if (back) A[a] = X[x];
    else X[x] = A[a];
  }
}


/* a pivot (a row number) carried bit for bit in an element of the panel's buffer */
__device__ __forceinline__ float pivot_in (int p, float) { return __int_as_float(p); }
__device__ __forceinline__ double pivot_in (int p, double) { return __longlong_as_double((long long)p); }
__device__ __forceinline__ int pivot_out (float v) { return __float_as_int(v); }
__device__ __forceinline__ int pivot_out (double v) { return (int)__double_as_longlong(v); }

/*
** The factored panel of columns [j0, j0 + jb) as it travels to the other
** GPUs: buf = its jb pivots (ipiv[j0..]), then rows j0..n-1 of the panel,
** packed (jb x jb: L11 and U11, then L21), from A at aoff (the panel's first
** column) with leading dimension ld.
*/
template <typename T>
__device__ void panel_pack (int n, int j0, int jb, const T *A, long long aoff, int ld, const int *ipiv, T *buf) {
  long long total = (long long)(n - j0) * jb;
  A += aoff;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total + jb;
       e += (long long)gridDim.x * blockDim.x) {
    if (e < jb) buf[e] = pivot_in(ipiv[j0 + e], T(0));
    else {
      long long f = e - jb;
      int r = j0 + (int)(f / jb), c = (int)(f % jb);
      buf[e] = A[(size_t)r * ld + c];
    }
  }
}

/* the panel's pivots out of its buffer, into this GPU's ipiv */
template <typename T>
__device__ void panel_pivots (int j0, int jb, const T *buf, int *ipiv) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < jb; i += gridDim.x * blockDim.x)
    ipiv[j0 + i] = pivot_out(buf[i]);
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_SOLVE_MULTI(t, T) \
  extern "C" __global__ void culua_solve_cyclic_##t (int n, int rows, int nb, int shares, int share, int nloc, int c0, \
      int w, T *A, T *X, int back) \
  { cyclic<T>(n, rows, nb, shares, share, nloc, c0, w, A, X, back); } \
  extern "C" __global__ void culua_solve_panel_pack_##t (int n, int j0, int jb, const T *A, long long aoff, int ld, \
      const int *ipiv, T *buf) \
  { panel_pack<T>(n, j0, jb, A, aoff, ld, ipiv, buf); } \
  extern "C" __global__ void culua_solve_panel_pivots_##t (int j0, int jb, const T *buf, int *ipiv) \
  { panel_pivots<T>(j0, jb, buf, ipiv); }

CULUA_SOLVE_MULTI(f32, float)
CULUA_SOLVE_MULTI(f64, double)


/* }====================================================== */
