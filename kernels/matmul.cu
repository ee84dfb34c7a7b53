/*
** matmul.cu
** The matmul family of culua's catalog: C = alpha * A * B + beta * C for
** row-major M x K and K x N matrices of any size. Every kernel has the same
** parameters, so the catalog launches any variant the same way:
**
**   (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
**    int lda, int ldb, int ldc)
**
** lda, ldb and ldc are the leading dimensions, elements from one row to the
** next (K, N and N for packed matrices), so that A, B and C may be blocks of
** larger matrices: LU's trailing update (lua/catalog/solve.lua) is one.
**
** The seed-002 lab's algorithms (naive, row, column, tiled) take two knobs:
** a block shape or tile side P1 and an unroll factor P2 of the inner loop.
** Built by nvcc, the list at the end is prebuilt; any other combination is
** compiled by NVRTC from this same file with
**   -DCULUA_ALGO=tiled -DCULUA_T=f32 -DCULUA_P1=32 -DCULUA_P2=8
** and gets the same kernel name, culua_matmul_<algo>_<t>_<p1>_<p2>.
** When beta == 0, C is never read (it may hold anything, NaN included).
*/

#include <culua/common.cuh>

typedef float culua_f32;
typedef double culua_f64;


/* the final write of one element, shared by every kernel */
template <typename T>
__device__ __forceinline__ void store_c (T *C, size_t idx, T alpha, T acc, T beta) {
  C[idx] = beta == T(0) ? alpha * acc : alpha * acc + beta * C[idx];
}


/* {====================================================== naive: one thread per element */

/* a BS x BS block of threads; x runs along a row of C, so loads of B and
** stores of C are coalesced */
template <typename T, int BS, int U>
__device__ void naive (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
                       int lda, int ldb, int ldc) {
  int col = blockIdx.x * BS + threadIdx.x, row = blockIdx.y * BS + threadIdx.y;
  if (row >= M || col >= N) return;
  T acc = 0;
  const T *a = A + (size_t)row * lda, *b = B + col;
#pragma unroll U
  for (int k = 0; k < K; k++) acc += a[k] * b[(size_t)k * ldb];
  store_c(C, (size_t)row * ldc + col, alpha, acc, beta);
}

/* }====================================================== */


/* {====================================================== row: a row of A in shared memory */

#define CHUNK 2048   /* elements of the cached row or column per pass */

/* one block per (row of C, P1 consecutive columns); the row of A is read
** once per block from global memory, in chunks */
template <typename T, int NT, int U>
__device__ void row (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
                     int lda, int ldb, int ldc) {
  __shared__ T t[CHUNK];
  int r = blockIdx.y, col = blockIdx.x * NT + threadIdx.x;
  T acc = 0;
  for (int k0 = 0; k0 < K; k0 += CHUNK) {
    int n = min(CHUNK, K - k0);
    for (int i = threadIdx.x; i < n; i += NT) t[i] = A[(size_t)r * lda + k0 + i];
    __syncthreads();
    if (col < N) {
      const T *b = B + (size_t)k0 * ldb + col;
#pragma unroll U
      for (int k = 0; k < n; k++) acc += t[k] * b[(size_t)k * ldb];
    }
    __syncthreads();
  }
  if (col < N && r < M) store_c(C, (size_t)r * ldc + col, alpha, acc, beta);
}


/* one block per (column of C, P1 consecutive rows); the column of B is read
** once per block; the reads of A are strided (the lab's point) */
template <typename T, int NT, int U>
__device__ void column (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
                        int lda, int ldb, int ldc) {
  __shared__ T t[CHUNK];
  int c = blockIdx.y, r = blockIdx.x * NT + threadIdx.x;
  T acc = 0;
  for (int k0 = 0; k0 < K; k0 += CHUNK) {
    int n = min(CHUNK, K - k0);
    for (int i = threadIdx.x; i < n; i += NT) t[i] = B[(size_t)(k0 + i) * ldb + c];
    __syncthreads();
    if (r < M) {
      const T *a = A + (size_t)r * lda + k0;
#pragma unroll U
      for (int k = 0; k < n; k++) acc += a[k] * t[k];
    }
    __syncthreads();
  }
  if (r < M && c < N) store_c(C, (size_t)r * ldc + c, alpha, acc, beta);
}

/* }====================================================== */


/* {====================================================== tiled: S x S tiles (seed 000, 002) */

template <typename T, int S, int U>
__device__ void tiled (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
                       int lda, int ldb, int ldc) {
  __shared__ T as[S][S], bs[S][S + 1];   /* +1: no bank conflicts on the column reads */
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * S + ty, col = blockIdx.x * S + tx;
  T acc = 0;
  for (int k0 = 0; k0 < K; k0 += S) {
    /* zero outside the matrices, so edge tiles need no special case below */
    as[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * lda + k0 + tx] : T(0);
    bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * ldb + col] : T(0);
    __syncthreads();
#pragma unroll U
    for (int k = 0; k < S; k++) acc += as[ty][k] * bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) store_c(C, (size_t)row * ldc + col, alpha, acc, beta);
}

/* }====================================================== */


/* {====================================================== fast: register-blocked, double-buffered */

/*
** This thread's L elements of a tile W wide whose corner is (r0, c0) in a
** rows x cols row-major matrix with rows ld apart, into registers: element
** e = tid*L + q of the tile in row-major order, zero outside the matrix.
** VEC: four at a time (cols and ld multiples of 4, P aligned: the dispatcher
** checks; a float4 never reaches past cols, into what may be another's data).
*/
template <typename T, int W, int L, bool VEC>
__device__ __forceinline__ void fetch_tile (T *reg, int tid, int r0, int c0, int rows, int cols, int ld, const T *P) {
#pragma unroll
  for (int q = 0; q < L; q += (VEC ? 4 : 1)) {
    int e = tid * L + q, r = r0 + e / W, c = c0 + e % W;
    if (VEC) {
      float4 v = make_float4(0, 0, 0, 0);
      if (r < rows && c < cols) v = *(const float4 *)(P + (size_t)r * ld + c);
      reg[q] = v.x; reg[q + 1] = v.y; reg[q + 2] = v.z; reg[q + 3] = v.w;
    }
    else
      reg[q] = (r < rows && c < cols) ? P[(size_t)r * ld + c] : T(0);
  }
}


/* the next A (BM x BK) and B (BK x BN) tiles, from k0 on */
template <typename T, int BM, int BN, int BK, int NT, bool VEC>
__device__ __forceinline__ void fetch_tiles (T *ra, T *rb, int tid, int bm, int bn, int k0,
                                             int M, int N, int K, const T *A, const T *B, int lda, int ldb) {
  fetch_tile<T, BK, BM * BK / NT, VEC>(ra, tid, bm, k0, M, K, lda, A);
  fetch_tile<T, BN, BK * BN / NT, VEC>(rb, tid, k0, bn, K, N, ldb, B);
}


template <typename T, int BM, int BN, int BK, int TM, int TN, bool VEC>
__device__ void fast (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
                      int lda, int ldb, int ldc) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int LA = BM * BK / NT, LB = BK * BN / NT;   /* elements each thread loads */
  __shared__ __align__(16) T as[2][BK][BM];
  __shared__ __align__(16) T bs[2][BK][BN];
  const int tid = threadIdx.x;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  T ra[LA], rb[LB], acc[TM][TN];

#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0;

  /* registers -> shared buffer s */
  auto stash = [&] (int s) {
#pragma unroll
    for (int q = 0; q < LA; q++) {
      int e = tid * LA + q;
      as[s][e % BK][e / BK] = ra[q];
    }
#pragma unroll
    for (int q = 0; q < LB; q++) {
      int e = tid * LB + q;
      bs[s][e / BN][e % BN] = rb[q];
    }
  };

  fetch_tiles<T, BM, BN, BK, NT, VEC>(ra, rb, tid, bm, bn, 0, M, N, K, A, B, lda, ldb);
  stash(0);
  __syncthreads();
  int s = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    bool more = k0 + BK < K;
    if (more)   /* the next tiles are in flight while we compute */
      fetch_tiles<T, BM, BN, BK, NT, VEC>(ra, rb, tid, bm, bn, k0 + BK, M, N, K, A, B, lda, ldb);
#pragma unroll
    for (int k = 0; k < BK; k++) {
      T a[TM], b[TN];
      /* two halves TM/2 apart: rows ty*TM/2 and BM/2 + ty*TM/2, likewise columns */
#pragma unroll
      for (int i = 0; i < TM / 2; i++) {
        a[i] = as[s][k][ty * (TM / 2) + i];
        a[i + TM / 2] = as[s][k][BM / 2 + ty * (TM / 2) + i];
      }
#pragma unroll
      for (int j = 0; j < TN / 2; j++) {
        b[j] = bs[s][k][tx * (TN / 2) + j];
        b[j + TN / 2] = bs[s][k][BN / 2 + tx * (TN / 2) + j];
      }
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];
    }
    if (more) {
      stash(s ^ 1);
      __syncthreads();
      s ^= 1;
    }
  }
#pragma unroll
  for (int i = 0; i < TM; i++) {
    int r = bm + (i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + i - TM / 2);
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; j++) {
      int c = bn + (j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + j - TN / 2);
      if (c < N) store_c(C, (size_t)r * ldc + c, alpha, acc[i][j], beta);
    }
  }
}

/* }====================================================== */


/* {====================================================== tf32: tensor cores through mma.sync */

__device__ __forceinline__ unsigned to_tf32 (float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}


/*
** 128 x 128 x 16 tiles, 8 warps as 2 x 4, each warp 64 x 32 of C as 4 x 4
** m16n8k8 TF32 mma tiles (64 accumulators a thread). Shared rows are padded
** so that the fragment reads hit 32 different banks.
*/
template <bool VEC>
__device__ void tf32 (int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C,
                      int lda, int ldb, int ldc) {
  constexpr int BM = 128, BN = 128, BK = 16, NT = 256, PA = 4, PB = 8;
  constexpr int LA = BM * BK / NT, LB = BK * BN / NT;   /* 8 and 8 */
  __shared__ __align__(16) float as[2][BM][BK + PA];
  __shared__ __align__(16) float bs[2][BK][BN + PB];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;    /* the warp's corner */
  const int g = lane >> 2, t = lane & 3;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  float ra[LA], rb[LB], acc[4][4][4];

#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

  auto stash = [&] (int s) {
#pragma unroll
    for (int q = 0; q < LA; q++) {
      int e = tid * LA + q;
      as[s][e / BK][e % BK] = __uint_as_float(to_tf32(ra[q]));
    }
#pragma unroll
    for (int q = 0; q < LB; q++) {
      int e = tid * LB + q;
      bs[s][e / BN][e % BN] = __uint_as_float(to_tf32(rb[q]));
    }
  };

  fetch_tiles<float, BM, BN, BK, NT, VEC>(ra, rb, tid, bm, bn, 0, M, N, K, A, B, lda, ldb);
  stash(0);
  __syncthreads();
  int s = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    bool more = k0 + BK < K;
    if (more) fetch_tiles<float, BM, BN, BK, NT, VEC>(ra, rb, tid, bm, bn, k0 + BK, M, N, K, A, B, lda, ldb);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      unsigned a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        int r = wm + i * 16 + g;
        a[i][0] = __float_as_uint(as[s][r][kk + t]);
        a[i][1] = __float_as_uint(as[s][r + 8][kk + t]);
        a[i][2] = __float_as_uint(as[s][r][kk + t + 4]);
        a[i][3] = __float_as_uint(as[s][r + 8][kk + t + 4]);
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
        int c = wn + j * 8 + g;
        b[j][0] = __float_as_uint(bs[s][kk + t][c]);
        b[j][1] = __float_as_uint(bs[s][kk + t + 4][c]);
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
          asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                       "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                       : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                       : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
    if (more) {
      stash(s ^ 1);
      __syncthreads();
      s ^= 1;
    }
  }
  /* accumulator q of tile (i, j): row g (+8 for q >= 2), column 2t (+1 for odd q) */
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        int r = bm + wm + i * 16 + g + (q >= 2 ? 8 : 0);
        int c = bn + wn + j * 8 + 2 * t + (q & 1);
        if (r < M && c < N) store_c(C, (size_t)r * ldc + c, alpha, acc[i][j][q], beta);
      }
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_PARAMS(T) int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C, int lda, int ldb, int ldc
#define CULUA_ARGS M, N, K, alpha, A, B, beta, C, lda, ldb, ldc

/* the lab's families: naive (block side), row/column (threads), tiled (tile side) */
#define CULUA_NAIVE(t, P1, P2) \
  extern "C" __global__ void __launch_bounds__(P1 * P1) culua_matmul_naive_##t##_##P1##_##P2 (CULUA_PARAMS(culua_##t)) \
  { naive<culua_##t, P1, P2>(CULUA_ARGS); }
#define CULUA_ROW(t, P1, P2) \
  extern "C" __global__ void __launch_bounds__(P1) culua_matmul_row_##t##_##P1##_##P2 (CULUA_PARAMS(culua_##t)) \
  { row<culua_##t, P1, P2>(CULUA_ARGS); }
#define CULUA_COLUMN(t, P1, P2) \
  extern "C" __global__ void __launch_bounds__(P1) culua_matmul_column_##t##_##P1##_##P2 (CULUA_PARAMS(culua_##t)) \
  { column<culua_##t, P1, P2>(CULUA_ARGS); }
#define CULUA_TILED(t, P1, P2) \
  extern "C" __global__ void __launch_bounds__(P1 * P1) culua_matmul_tiled_##t##_##P1##_##P2 (CULUA_PARAMS(culua_##t)) \
  { tiled<culua_##t, P1, P2>(CULUA_ARGS); }

#define CULUA_INSTANCE(algo, t, P1, P2) CULUA_INSTANCE_(algo, t, P1, P2)
#define CULUA_INSTANCE_(algo, t, P1, P2) CULUA_##algo(t, P1, P2)
#define CULUA_naive CULUA_NAIVE
#define CULUA_row CULUA_ROW
#define CULUA_column CULUA_COLUMN
#define CULUA_tiled CULUA_TILED

#if defined(CULUA_ALGO)

/* a variant asked for by the catalog, compiled by NVRTC */
CULUA_INSTANCE(CULUA_ALGO, CULUA_T, CULUA_P1, CULUA_P2)

#else

/* prebuilt by nvcc: the defaults of each algorithm */
CULUA_NAIVE(f32, 16, 1)
CULUA_ROW(f32, 256, 1)
CULUA_COLUMN(f32, 256, 1)
CULUA_TILED(f32, 16, 1)
CULUA_TILED(f32, 32, 1)
CULUA_NAIVE(f64, 16, 1)
CULUA_TILED(f64, 16, 1)

/* fast: 128 x 128 x 8 tiles, 8 x 8 per thread, 256 threads, at most 128
** registers so that two blocks share a multiprocessor (float: 27 -> 40
** TFLOP/s at n = 4096 on an H100); 64 x 64 x 8, 4 x 4 (double) */
extern "C" __global__ void __launch_bounds__(256, 2) culua_matmul_fast_f32_vec (CULUA_PARAMS(float))
{ fast<float, 128, 128, 8, 8, 8, true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(256, 2) culua_matmul_fast_f32 (CULUA_PARAMS(float))
{ fast<float, 128, 128, 8, 8, 8, false>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(256) culua_matmul_fast_f64 (CULUA_PARAMS(double))
{ fast<double, 64, 64, 8, 4, 4, false>(CULUA_ARGS); }

extern "C" __global__ void __launch_bounds__(256) culua_matmul_tf32_vec (CULUA_PARAMS(float))
{ tf32<true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(256) culua_matmul_tf32 (CULUA_PARAMS(float))
{ tf32<false>(CULUA_ARGS); }

#endif

/* }====================================================== */
