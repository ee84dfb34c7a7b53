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
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
               : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
#define CULUA_M8N8K4(d0, d1, a, b) \
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};" \
               : "+d"(d0), "+d"(d1) : "d"(a), "d"(b))
  CULUA_M8N8K4(d[0], d[1], a[0], b[0]);
  CULUA_M8N8K4(d[0], d[1], a[2], b[1]);
  CULUA_M8N8K4(d[2], d[3], a[1], b[0]);
  CULUA_M8N8K4(d[2], d[3], a[3], b[1]);
#undef CULUA_M8N8K4
#endif
}


/* cp.async of 8 or 16 bytes, of which the first `bytes` come from src and the rest are
** zeros (bytes 0: src is not read, but must still be a valid address) */
template <int SIZE>
__device__ __forceinline__ void copy_async (void *dst, const void *src, int bytes) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if (SIZE == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void copy_commit () { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void copy_wait () { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }


/* the shared memory of dmma<BM, BN, STAGES>: STAGES copies of A's BM x 16 tile (rows padded
** to 24) and B's 16 x BN tile (rows padded to BN + 2); lua/catalog/matmul.lua sizes it alike */
#define CULUA_DMMA_SHARED(BM, BN, STAGES) ((STAGES) * ((BM) * 24 + 16 * ((BN) + 2)) * 8)

/*
** BM x BN tiles of C, k 16 at a time through a ring of STAGES shared tiles filled by
** cp.async (the next STAGES - 1 in flight while one is multiplied); WM x WN warps, each
** a (BM / WM) x (BN / WN) block of C as 16 x 8 mma tiles. V16: 16-byte copies (lda, ldb
** even and A, B 16-byte aligned: the dispatcher checks), else 8-byte ones. Elements
** outside the matrices arrive as zeros, so edge tiles need no case of their own.
**
** The mma's k slots t and t + 4 (mma_f64) take k = 2t and 2t + 1 of each 8: which k a slot
** holds is free, as long as A's and B's agree, and so a thread's two A values of a row lie
** side by side, one 16-byte load. With rows of A 24 apart and of B BN + 2 apart, the loads
** of a fragment hit every bank once a wavefront.
**
** Where beta = alpha or -alpha (LU's update: C -= A*B), the accumulators start as
** (beta / alpha) * C, exactly, loaded while the first tiles of A and B are on their way,
** and the block ends with C = alpha * acc: C's read overlaps the products, not follows them.
*/
template <int BM, int BN, int WM, int WN, int STAGES, bool V16>
__device__ void dmma (int M, int N, int K, double alpha, const double *A, const double *B, double beta, double *C,
                      int lda, int ldb, int ldc) {
  constexpr int BK = 16, SA = BK + 8, SB = BN + 2, NT = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN, MI = TM / 16, NI = TN / 8;
  constexpr int E = V16 ? 2 : 1;                                   /* doubles a copy */
  extern __shared__ __align__(16) double dmma_smem[];
  double *as = dmma_smem, *bs = dmma_smem + STAGES * BM * SA;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / WN) * TM, wn = (warp % WN) * TN;
  const int g = lane >> 2, t = lane & 3;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const bool cinit = beta != 0.0 && (beta == alpha || beta == -alpha);
  double acc[MI][NI][4];

  /* k-tile kt into stage s: E doubles a copy, rows and columns past the matrix zero */
  auto load = [&] (int s, int kt) {
    int k0 = kt * BK;
    double *sa = as + s * BM * SA, *sb = bs + s * BK * SB;
#pragma unroll
    for (int q = 0; q < BM * BK / E / NT; q++) {
      int e = (tid + q * NT) * E, r = e / BK, c = e % BK;
      int gr = bm + r, gc = k0 + c;
      int bytes = gr < M ? 8 * max(0, min(E, K - gc)) : 0;
      copy_async<8 * E>(sa + r * SA + c, bytes ? A + (size_t)gr * lda + gc : A, bytes);
    }
#pragma unroll
    for (int q = 0; q < BK * BN / E / NT; q++) {
      int e = (tid + q * NT) * E, r = e / BN, c = e % BN;
      int gr = k0 + r, gc = bn + c;
      int bytes = gr < K ? 8 * max(0, min(E, N - gc)) : 0;
      copy_async<8 * E>(sb + r * SB + c, bytes ? B + (size_t)gr * ldb + gc : B, bytes);
    }
  };

  const int KT = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < KT) load(s, s);
    copy_commit();   /* a group a stage, empty or not: wait_group counts them */
  }

  /* accumulator q of tile (i, j): row g (+8 for q >= 2), column 2t (+1 for odd q) */
  const double scale = cinit ? beta / alpha : 0.0;
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        int r = bm + wm + i * 16 + g + (q >= 2 ? 8 : 0), c = bn + wn + j * 8 + 2 * t + (q & 1);
        acc[i][j][q] = cinit && r < M && c < N ? scale * C[(size_t)r * ldc + c] : 0.0;
      }

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
        const double *p = sa + (wm + i * 16 + g) * SA + kk + 2 * t;
        double2 lo = *(const double2 *)p, hi = *(const double2 *)(p + 8 * SA);
        a[i][0] = lo.x; a[i][2] = lo.y; a[i][1] = hi.x; a[i][3] = hi.y;
      }
#pragma unroll
      for (int j = 0; j < NI; j++) {
        const double *p = sb + (kk + 2 * t) * SB + wn + j * 8 + g;
        b[j][0] = p[0]; b[j][1] = p[SB];
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) mma_f64(acc[i][j], a[i], b[j]);
    }
  }
  copy_wait<0>();   /* no copy outlives the block, even the empty groups' */
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        int r = bm + wm + i * 16 + g + (q >= 2 ? 8 : 0), c = bn + wn + j * 8 + 2 * t + (q & 1);
        if (r < M && c < N) {
          size_t at = (size_t)r * ldc + c;
          if (cinit) C[at] = alpha * acc[i][j][q];
          else store_c(C, at, alpha, acc[i][j][q], beta);
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
** TFLOP/s at n = 4096 on an H100); 64 x 64 x 8, 4 x 4 (double) */
extern "C" __global__ void __launch_bounds__(256, 2) culua_matmul_fast_f32_vec (CULUA_PARAMS(float))
{ fast<float, 128, 128, 8, 8, 8, true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(256, 2) culua_matmul_fast_f32 (CULUA_PARAMS(float))
{ fast<float, 128, 128, 8, 8, 8, false>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(256) culua_matmul_fast_f64 (CULUA_PARAMS(double))
{ fast<double, 64, 64, 8, 4, 4, false>(CULUA_ARGS); }

/* dmma, float64 on tensor cores: culua_matmul_dmma_<BM>x<BN>[_v16]. Each warp has 64 x 32
** of C (64 accumulators, about 230 registers); 128 x 128 in 8 warps, one block a
** multiprocessor; 128 x 64 and 64 x 128 in 4 warps, two blocks a multiprocessor, so that
** one's loads of C overlap the other's products (LU's update, k = 128, reads and writes
** all of C a step). Warps of 32 x 32 in two blocks of 256 threads (128 registers) spilled. */
#define CULUA_DMMA(BM, BN, WM, WN, STAGES, MINB) \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32, MINB) culua_matmul_dmma_##BM##x##BN (CULUA_PARAMS(double)) \
  { dmma<BM, BN, WM, WN, STAGES, false>(CULUA_ARGS); } \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32, MINB) culua_matmul_dmma_##BM##x##BN##_v16 (CULUA_PARAMS(double)) \
  { dmma<BM, BN, WM, WN, STAGES, true>(CULUA_ARGS); }
CULUA_DMMA(128, 128, 2, 4, 4, 1)
CULUA_DMMA(128, 64, 2, 2, 3, 2)
CULUA_DMMA(64, 128, 1, 4, 3, 2)


extern "C" __global__ void __launch_bounds__(256) culua_matmul_tf32_vec (CULUA_PARAMS(float))
{ tf32<true>(CULUA_ARGS); }
extern "C" __global__ void __launch_bounds__(256) culua_matmul_tf32 (CULUA_PARAMS(float))
{ tf32<false>(CULUA_ARGS); }

#endif

/* }====================================================== */
