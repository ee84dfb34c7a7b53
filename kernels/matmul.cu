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


/* C's BM x BN tile at (bm, bn) into L2, 128 bytes a prefetch, a row's lines from consecutive
** threads: where C is read at the end (beta != 0; LU's update, C -= A*B), the products do not
** wait for it there and its reads find it in L2 (no registers, no shared memory). dmma takes
** it; fast (float32) did not gain (float32 LU at n = 16384 on an H100: 165.7 -> 169.8 ms,
** its 128-register kernel spilling 44 bytes more). */
template <typename T, int BM, int BN, int NT>
__device__ __forceinline__ void prefetch_tile (const T *C, int ldc, int bm, int bn, int M, int N, int tid) {
  constexpr int STEP = 128 / sizeof(T), LINES = (BN + STEP - 1) / STEP;
#pragma unroll 1
  for (int e = tid; e < BM * LINES; e += NT) {
    int r = bm + e / LINES, c = bn + (e % LINES) * STEP;
    if (r < M && c < N) asm volatile("prefetch.global.L2 [%0];" :: "l"(C + (size_t)r * ldc + c));
  }
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

/* cp.async of 8 or 16 bytes, of which the first `bytes` come from src and the rest are
** zeros (bytes 0: src is not read, but must still be a valid address); copy_all: all of them */
template <int SIZE>
__device__ __forceinline__ void copy_async (void *dst, const void *src, int bytes) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if (SIZE == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
}

template <int SIZE>
__device__ __forceinline__ void copy_all (void *dst, const void *src) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if (SIZE == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ void copy_commit () { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void copy_wait () { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }


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


/*
** CS, C staged (float32 with VEC, C's rows 16 bytes apart, and beta != 0: the
** dispatcher takes it only so; N is then a multiple of 4): where C is read (LU's
** update, C -= A*B at k = 64 or 128), each thread's part of it comes into the
** launch's shared memory by cp.async before the first product, a chunk of 4 values
** (TN / 2) at fast_cstage[q * NT + tid] for q = 2 * (its row i) + (its half h), so
** that the end of the tile reads it there rather than waiting on 64 loads from
** memory then, and writes 16-byte vectors. A thread reads only what it copied: its
** own cp.async.wait_group is all the ordering needed. 64 KiB a block (2 blocks a
** multiprocessor still fit on an H100). The copies' addresses are worked out in a
** loop and again at the end (the thread index read afresh), so that none lives
** across the products: 40 bytes of spill against 0 without the staging (ptxas;
** unrolled, 44-104). LU's update on an H100 (bench/RESULTS.md, session 21): k = 64
** 1.33x the kernel without it, k = 128 1.05x.
*/
#define CULUA_MATMUL_STAGE_C_BYTES (16 * 16 * 256)   /* CS's shared memory: 2 TM chunks of 16 bytes a thread, NT threads */
template <typename T, int BM, int BN, int BK, int TM, int TN, bool VEC, bool CS = false>
__device__ void fast (int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C,
                      int lda, int ldb, int ldc) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int LA = BM * BK / NT, LB = BK * BN / NT;   /* elements each thread loads */
  static_assert(!CS || (VEC && sizeof(T) == 4 && TN == 8), "C staged: float32, 16-byte chunks of 4");
  static_assert(!CS || 2 * TM * 16 * NT == CULUA_MATMUL_STAGE_C_BYTES, "C staged: CULUA_MATMUL_STAGE_C_BYTES");
  __shared__ __align__(16) T as[2][BK][BM];
  __shared__ __align__(16) T bs[2][BK][BN];
  extern __shared__ float4 fast_cstage[];
  const int tid = threadIdx.x;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  T ra[LA], rb[LB], acc[TM][TN];
  /* this thread's row i and first column of half h of its TM x TN part of C */
  auto crow = [&] (int i) { return bm + (i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + i - TM / 2); };
  auto ccol = [&] (int h) { return bn + h * (BN / 2) + tx * (TN / 2); };
  if (CS) {
#pragma unroll 1
    for (int q = 0; q < 2 * TM; q++) {   /* (a loop, not unrolled: its addresses do not outlive it) */
      const int r = crow(q >> 1), c = ccol(q & 1);
      if (r < M && c < N) copy_all<16>(&fast_cstage[q * NT + tid], C + (size_t)r * ldc + c);
    }
    copy_commit();
  }

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
  if constexpr (CS) {
    copy_wait<0>();
    /* the thread's place again, read afresh: nothing of the start lives across the products */
    unsigned t2;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t2));
    const int ex = t2 % (BN / TN), ey = t2 / (BN / TN);
    const int eb = blockIdx.y * BM, ec = blockIdx.x * BN;
#pragma unroll
    for (int i = 0; i < TM; i++) {
      const int r = eb + (i < TM / 2 ? ey * (TM / 2) + i : BM / 2 + ey * (TM / 2) + i - TM / 2);
      if (r >= M) continue;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int c = ec + h * (BN / 2) + ex * (TN / 2);
        const T *a = &acc[i][h * (TN / 2)];
        if (c < N) {   /* (N is a multiple of 4: the chunk is whole) */
          const float4 o = fast_cstage[(2 * i + h) * NT + t2];
          *(float4 *)(C + (size_t)r * ldc + c) = make_float4(alpha * a[0] + beta * o.x, alpha * a[1] + beta * o.y,
                                                              alpha * a[2] + beta * o.z, alpha * a[3] + beta * o.w);
        }
      }
    }
  }
  else {   /* an else, not a return above: a loop after it is unreachable when CS (nvcc #128-D) */
#pragma unroll
    for (int i = 0; i < TM; i++) {
      int r = crow(i);
      if (r >= M) continue;
#pragma unroll
      for (int j = 0; j < TN; j++) {
        int c = bn + (j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + j - TN / 2);
        if (c < N) store_c(C, (size_t)r * ldc + c, alpha, acc[i][j], beta);
      }
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
/* tf32's tile and threads, for lua/catalog/matmul.lua */
#define CULUA_TF32_TILE 128
#define CULUA_TF32_THREADS 256
template <bool VEC>
__device__ void tf32 (int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C,
                      int lda, int ldb, int ldc) {
  constexpr int BM = CULUA_TF32_TILE, BN = CULUA_TF32_TILE, BK = 16, NT = CULUA_TF32_THREADS, PA = 4, PB = 8;
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


/* {====================================================== dmma: float64 tensor cores through mma.sync */

/*
** D += A B on a 16 x 8 x 8 tile, all float64. With g = lane / 4 and t = lane % 4:
**   a = A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4);   b = B(t, g), B(t + 4, g);
**   d = D(g, 2t), D(g, 2t + 1), D(g + 8, 2t), D(g + 8, 2t + 1).
** One instruction on compute capability 9.0; elsewhere (8.x) the same as four
** m8n8k4, whose operands are these fragments' halves.
*/
__device__ __forceinline__ void mma_f64 (double *d, const double *a, const double *b) {
#if __CUDA_ARCH__ >= 900
  asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
#define CULUA_M8N8K4(d0, d1, a, b) \
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};" \
      : "+d"(d0), "+d"(d1) : "d"(a), "d"(b))
  CULUA_M8N8K4(d[0], d[1], a[0], b[0]);
  CULUA_M8N8K4(d[0], d[1], a[2], b[1]);
  CULUA_M8N8K4(d[2], d[3], a[1], b[0]);
  CULUA_M8N8K4(d[2], d[3], a[3], b[1]);
#undef CULUA_M8N8K4
#endif
}


/*
** The origin (bm, bn) of dmma's tile: (blockIdx.y, blockIdx.x), or, in a grid G times as
** wide as C's tile columns (G > 1, the catalog's tune.dmma_group), groups of G tile rows
** that walk the columns together, so that B's columns are read from memory once a group
** and not once a tile row (the grid's blocks start in order, x first). False for the last
** group's spare blocks, which leave at once. The block's indices are read with asm
** volatile, so that a second call works them out again instead of keeping them live.
*/
template <int BM, int BN>
__device__ __forceinline__ bool dmma_origin (int M, int N, int &bm, int &bn) {
  unsigned bx, by, gx;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(bx));
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(by));
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(gx));
  const int tn = (N + BN - 1) / BN;
  bm = by * BM, bn = bx * BN;
  if ((int)gx <= tn) return true;
  const int G = gx / tn, first = by * G, rows = min(G, (M + BM - 1) / BM - first);
  bm = (first + bx % rows) * BM;
  bn = bx / rows * BN;
  return (int)bx / rows < tn;
}


/* the shared memory of dmma<BM, BN, STAGES, BK>: STAGES copies of A's BM x BK tile (rows
** padded to BK + 4) and B's BK x BN tile (rows padded to BN + 4); lua/catalog/matmul.lua
** sizes it alike. BULK's staging of C's tile takes the same memory afterwards, its rows
** CULUA_DMMA_STAGING_ROW bytes apart (320: the 8 rows of a store fall on two halves of the
** banks, 4 wavefronts for its 512 bytes, where 256 bytes apart would take 8) */
#define CULUA_DMMA_SHARED(BM, BN, STAGES, BK) ((STAGES) * ((BM) * ((BK) + 4) + (BK) * ((BN) + 4)) * 8)
#define CULUA_DMMA_STAGING_ROW 320

/*
** BM x BN tiles of C, k BK (16 or 32) at a time through a ring of STAGES shared tiles filled by
** cp.async (the next STAGES - 1 in flight while one is multiplied); WM x WN warps, each
** a (BM / WM) x (BN / WN) block of C as 16 x 8 mma tiles. V16: 16-byte copies (lda, ldb
** even and A, B 16-byte aligned: the dispatcher checks), else 8-byte ones.
**
** A thread's copies of a tile lie a fixed number of rows apart (RA of A's, RB of B's), so
** one address and two strides give them all. Tiles wholly inside the matrices take that
** path alone; edge tiles check each copy, and what lies outside arrives as zeros, so the
** products need no case of their own. (Bounds checks on every copy, as a first version
** had, took about half of the loop's instructions.)
**
** Fragments are read 8 bytes at a time, each straight into the mma's register: 16-byte
** reads of two k of a row (a free choice of the k slots) needed register moves around
** every mma, since the mma takes its four A values in the order A(g), A(g + 8), A(g) ...
** With rows of A BK + 4 apart and of B BN + 4 apart, a half-warp's reads hit 16 banks.
**
** Where C is read (beta != 0; LU's update, C -= A*B, k = 128), the block first asks L2 to
** fetch its tile of C (prefetch.global.L2: no registers, no shared memory), so that the
** products do not wait for C and the final reads find it in L2. (Accumulators that start
** as C waited for it from memory before the first product: 18 TFLOP/s on an H100 at
** 16384^2 x 128 either way.) The final reads and writes take two columns at once where
** C's rows allow (ldc even, C on 16 bytes).
**
** EB > 0: in a tile wholly inside C (with the two-column reads), the reads of C go in
** batches of EB rows of mma tiles, every read of a batch issued before its first write.
** With EB = 0 each read waits for the write before it (the compiler cannot tell that they
** touch other elements of C): 16 round trips to L2 one after the other a thread, at the
** end of every tile, which at LU's k (128, 256) weigh as much as a third of the products.
*/
template <int BM, int BN, int WM, int WN, int STAGES, bool V16, int EB, int BK, bool BULK>
__device__ void dmma (int M, int N, int K, double alpha, const double *A, const double *B, double beta, double *C,
                      int lda, int ldb, int ldc) {
  constexpr int SA = BK + 4, SB = BN + 4, NT = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN, MI = TM / 16, NI = TN / 8;
  constexpr int XB = EB > 0 ? EB : 2;   /* the batches of C's reads (BULK with EB = 0: 2) */
  static_assert(MI % XB == 0, "whole batches");
  constexpr int E = V16 ? 2 : 1;                                   /* doubles a copy */
  constexpr int QA = BM * BK / E / NT, QB = BK * BN / E / NT;      /* copies a thread */
  constexpr int RA = NT * E / BK, RB = NT * E / BN;                /* rows between them */
  static_assert(NT * E % BK == 0 && NT * E % BN == 0, "a thread's copies are whole rows apart");
  extern __shared__ __align__(16) double dmma_smem[];
  double *as = dmma_smem, *bs = dmma_smem + STAGES * BM * SA;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / WN) * TM, wn = (warp % WN) * TN;
  const int g = lane >> 2, t = lane & 3;
  int bm, bn;
  if (!dmma_origin<BM, BN>(M, N, bm, bn)) return;
  const bool inside = bm + BM <= M && bn + BN <= N;
  /* this thread's first copy of each tile: row ar, column ac of A's; row br, column bc of B's */
  const int ar = tid * E / BK, ac = tid * E % BK, br = tid * E / BN, bc = tid * E % BN;
  const double *pa = A + (size_t)(bm + ar) * lda + ac, *pb = B + (size_t)br * ldb + bn + bc;
  const size_t sa_step = (size_t)RA * lda, sb_step = (size_t)RB * ldb;
  double acc[MI][NI][4];

  /* k-tile kt into stage s */
  auto load = [&] (int s, int kt) {
    int k0 = kt * BK;
    double *sa = as + s * BM * SA + ar * SA + ac, *sb = bs + s * BK * SB + br * SB + bc;
    const double *qa = pa + k0, *qb = pb + (size_t)k0 * ldb;
    if (inside && k0 + BK <= K) {
#pragma unroll
      for (int q = 0; q < QA; q++) copy_all<8 * E>(sa + q * RA * SA, qa + q * sa_step);
#pragma unroll
      for (int q = 0; q < QB; q++) copy_all<8 * E>(sb + q * RB * SB, qb + q * sb_step);
      return;
    }
    int em, en;   /* the origin read afresh: edge tiles alone come here */
    dmma_origin<BM, BN>(M, N, em, en);
#pragma unroll
    for (int q = 0; q < QA; q++) {
      int bytes = em + ar + q * RA < M ? 8 * max(0, min(E, K - k0 - ac)) : 0;
      copy_async<8 * E>(sa + q * RA * SA, bytes ? qa + q * sa_step : A, bytes);
    }
#pragma unroll
    for (int q = 0; q < QB; q++) {
      int bytes = k0 + br + q * RB < K ? 8 * max(0, min(E, N - en - bc)) : 0;
      copy_async<8 * E>(sb + q * RB * SB, bytes ? qb + q * sb_step : B, bytes);
    }
  };

  const int KT = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < KT) load(s, s);
    copy_commit();   /* a group a stage, empty or not: wait_group counts them */
  }

  if (beta != 0.0) prefetch_tile<double, BM, BN, NT>(C, ldc, bm, bn, M, N, tid);
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0;

  for (int kt = 0; kt < KT; kt++) {
    copy_wait<STAGES - 2>();   /* k-tile kt has landed, for this thread's copies */
    __syncthreads();           /* for every thread's; and stage (kt - 1) % STAGES is free */
    if (kt + STAGES - 1 < KT) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    copy_commit();
    const double *sa = as + (kt % STAGES) * BM * SA, *sb = bs + (kt % STAGES) * BK * SB;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      double a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; i++) {
        const double *p = sa + (wm + i * 16 + g) * SA + kk + t;
        a[i][0] = p[0]; a[i][1] = p[8 * SA]; a[i][2] = p[4]; a[i][3] = p[8 * SA + 4];
      }
#pragma unroll
      for (int j = 0; j < NI; j++) {
        const double *p = sb + (kk + t) * SB + wn + j * 8 + g;
        b[j][0] = p[0]; b[j][1] = p[4 * SB];
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) mma_f64(acc[i][j], a[i], b[j]);
    }
  }
  copy_wait<0>();   /* no copy outlives the block, even the empty groups' */
  /* accumulators 2h and 2h + 1 of tile (i, j): row g (+8 for h = 1), columns 2t and 2t + 1;
  ** the tile's origin read afresh, so that it need not live across the products */
  dmma_origin<BM, BN>(M, N, bm, bn);
  const bool pairs = (ldc & 1) == 0 && ((size_t)C & 15) == 0;
#if __CUDA_ARCH__ >= 900
  if (BULK && (beta == 0.0 || beta == 1.0) && pairs && bm + BM <= M && bn + BN <= N) {
    /* a tile inside C, beta 0 or 1 (compute capability 9.0): alpha A*B through shared memory
    ** (the ring, free once every warp has done its products), each warp's TM rows of TN
    ** doubles CULUA_DMMA_STAGING_ROW bytes apart, then its lanes send the rows to C by bulk
    ** copies: cp.reduce.async.bulk .add.f64 (beta = 1: L2 adds them to C) or cp.async.bulk
    ** (beta = 0). The block waits only until they have read shared memory, not for C: its
    ** reads and writes are L2's, beside the next blocks' products. */
    constexpr int SROW = CULUA_DMMA_STAGING_ROW / 8;
    static_assert(TN * 8 % 16 == 0 && SROW >= TN && CULUA_DMMA_STAGING_ROW % 16 == 0, "rows of whole 16 bytes");
    static_assert(!BULK || NT / 32 * TM * CULUA_DMMA_STAGING_ROW <= CULUA_DMMA_SHARED(BM, BN, STAGES, BK), "the staging fits the ring");
    __syncthreads();   /* every warp's last reads of the ring done */
    double *stg = dmma_smem + warp * TM * SROW;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
      for (int j = 0; j < NI; j++)
#pragma unroll
        for (int h = 0; h < 2; h++)
          *(double2 *)(stg + (i * 16 + g + 8 * h) * SROW + j * 8 + 2 * t) =
            make_double2(alpha * acc[i][j][2 * h], alpha * acc[i][j][2 * h + 1]);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    const unsigned s0 = (unsigned)__cvta_generic_to_shared(stg);
#pragma unroll
    for (int r = lane; r < TM; r += 32) {
      double *dst = C + (size_t)(bm + wm + r) * ldc + bn + wn;
      if (beta != 0.0)
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f64 [%0], [%1], %2;"
                     :: "l"(dst), "r"(s0 + r * CULUA_DMMA_STAGING_ROW), "n"(TN * 8) : "memory");
      else
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     :: "l"(dst), "r"(s0 + r * CULUA_DMMA_STAGING_ROW), "n"(TN * 8) : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");   /* shared memory read: the block may go */
    return;
  }
#endif
  if ((EB > 0 || BULK) && pairs && bm + BM <= M && bn + BN <= N) {
    /* a tile inside C: its reads of C in batches of EB rows of mma tiles, all of a batch
    ** issued before its first write (a read after a write of C must wait for it: the
    ** compiler cannot tell that they touch other elements) */
    double *c0 = C + (size_t)(bm + wm + g) * ldc + bn + wn + 2 * t;
#pragma unroll
    for (int i0 = 0; i0 < MI; i0 += XB) {
      double2 old[XB][NI][2];
      if (beta != 0.0)
#pragma unroll
        for (int i = 0; i < XB; i++)
#pragma unroll
          for (int j = 0; j < NI; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) old[i][j][h] = *(const double2 *)(c0 + (size_t)((i0 + i) * 16 + 8 * h) * ldc + j * 8);
#pragma unroll
      for (int i = 0; i < XB; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            double x = alpha * acc[i0 + i][j][2 * h], y = alpha * acc[i0 + i][j][2 * h + 1];
            if (beta != 0.0) { x += beta * old[i][j][h].x; y += beta * old[i][j][h].y; }
            *(double2 *)(c0 + (size_t)((i0 + i) * 16 + 8 * h) * ldc + j * 8) = make_double2(x, y);
          }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int r = bm + wm + i * 16 + g + 8 * h, c = bn + wn + j * 8 + 2 * t;
        if (r >= M) continue;
        size_t at = (size_t)r * ldc + c;
        if (pairs && c + 1 < N) {
          double2 *p = (double2 *)(C + at);
          double x = alpha * acc[i][j][2 * h], y = alpha * acc[i][j][2 * h + 1];
          if (beta != 0.0) {
            double2 old = *p;
            x += beta * old.x; y += beta * old.y;
          }
          *p = make_double2(x, y);
        }
        else {
          if (c < N) store_c(C, at, alpha, acc[i][j][2 * h], beta);
          if (c + 1 < N) store_c(C, at + 1, alpha, acc[i][j][2 * h + 1], beta);
        }
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
** TFLOP/s at n = 4096 on an H100); 64 x 64 x 8, 4 x 4 (double). The tiles
** and threads are named for lua/catalog/matmul.lua, which reads them */
#define CULUA_FAST_THREADS 256
#define CULUA_FAST_F32_TILE 128
#define CULUA_FAST_F64_TILE 64
extern "C" __global__ void __launch_bounds__(CULUA_FAST_THREADS, 2) culua_matmul_fast_f32_vec (CULUA_PARAMS(float))
{ fast<float, CULUA_FAST_F32_TILE, CULUA_FAST_F32_TILE, 8, 8, 8, true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(CULUA_FAST_THREADS, 2) culua_matmul_fast_f32 (CULUA_PARAMS(float))
{ fast<float, CULUA_FAST_F32_TILE, CULUA_FAST_F32_TILE, 8, 8, 8, false>(CULUA_ARGS); }
/* with C staged in 64 KiB of the launch's shared memory (fast's CS) */
extern "C" __global__ void __launch_bounds__(CULUA_FAST_THREADS, 2) culua_matmul_fast_f32_vec_cs (CULUA_PARAMS(float))
{ fast<float, CULUA_FAST_F32_TILE, CULUA_FAST_F32_TILE, 8, 8, 8, true, true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(CULUA_FAST_THREADS) culua_matmul_fast_f64 (CULUA_PARAMS(double))
{ fast<double, CULUA_FAST_F64_TILE, CULUA_FAST_F64_TILE, 8, 4, 4, false>(CULUA_ARGS); }

/* dmma, float64 on tensor cores: culua_matmul_dmma_<shape>[_v16]. 128x128: 8 warps of 64 x
** 32 of C (64 accumulators, about 230 registers), one block a multiprocessor; 128x64 and
** 64x128: 4 warps of 64 x 32, two blocks a multiprocessor; 128x64w8: 8 warps of 32 x 32
** (about 128 registers), two blocks a multiprocessor: more warps to hide the loads of C and
** the short k-loops of LU's update (k = 128: 27.5 TFLOP/s on an H100 at 8192^2, where the
** 4 warps gave 22.7).
** For LU's update (C read, k = 128 and 256), the same tiles with C read in batches (EB
** above): 128x64w8e1 (8 loads of 16 bytes in flight a thread), 128x64w8e2 (16: all of its
** tile's), 128x64e2 (16, twice); 128x64w8k32, 128x64w8e2 with k-tiles of 32 in 2 stages
** (half the barriers and waits of a short k-loop; 106 KiB, still two blocks a
** multiprocessor); and 128x64w8b, 128x64b, 128x64w8k32b, whose tiles inside C with beta 0
** or 1 go out by bulk copies on 9.0 (BULK above; elsewhere, and for other tiles, as EB = 2).
** The arguments after MINB: EB, BK, BULK. */
#define CULUA_DMMA(NAME, BM, BN, WM, WN, STAGES, MINB, EB, BK, BULK) \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32, MINB) culua_matmul_dmma_##NAME (CULUA_PARAMS(double)) \
  { dmma<BM, BN, WM, WN, STAGES, false, EB, BK, BULK>(CULUA_ARGS); } \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32, MINB) culua_matmul_dmma_##NAME##_v16 (CULUA_PARAMS(double)) \
  { dmma<BM, BN, WM, WN, STAGES, true, EB, BK, BULK>(CULUA_ARGS); }
CULUA_DMMA(128x128, 128, 128, 2, 4, 4, 1, 0, 16, false)
CULUA_DMMA(128x64, 128, 64, 2, 2, 3, 2, 0, 16, false)
CULUA_DMMA(64x128, 64, 128, 1, 4, 3, 2, 0, 16, false)
CULUA_DMMA(128x64w8, 128, 64, 4, 2, 3, 2, 0, 16, false)
CULUA_DMMA(128x64w8e1, 128, 64, 4, 2, 3, 2, 1, 16, false)
CULUA_DMMA(128x64w8e2, 128, 64, 4, 2, 3, 2, 2, 16, false)
CULUA_DMMA(128x64e2, 128, 64, 2, 2, 3, 2, 2, 16, false)
CULUA_DMMA(128x64w8k32, 128, 64, 4, 2, 2, 2, 2, 32, false)
CULUA_DMMA(128x64w8b, 128, 64, 4, 2, 3, 2, 2, 16, true)
CULUA_DMMA(128x64b, 128, 64, 2, 2, 3, 2, 2, 16, true)
CULUA_DMMA(128x64w8k32b, 128, 64, 4, 2, 2, 2, 2, 32, true)


extern "C" __global__ void __launch_bounds__(CULUA_TF32_THREADS) culua_matmul_tf32_vec (CULUA_PARAMS(float))
{ tf32<true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(CULUA_TF32_THREADS) culua_matmul_tf32 (CULUA_PARAMS(float))
{ tf32<false>(CULUA_ARGS); }

#endif

/* }====================================================== */
