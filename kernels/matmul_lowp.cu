/*
** matmul_lowp.cu
** matmul in low precision on tensor cores, mma.sync: C = alpha * A * B + beta * C
** for row-major M x K and K x N matrices of any size, A and B in float16 or
** bfloat16 (m16n8k16, compute capability 8.0 and later) or fp8 (e4m3 x e4m3,
** e4m3 x e5m2 and the other two pairs: m16n8k32, compute capability 8.9 and
** later), the products summed in float32, C in float16, bfloat16 or float32.
** Parameters as kernels/matmul.cu's, with alpha and beta floats and fp8's
** scales folded into alpha by the catalog (alpha * scale_a * scale_b):
**
**   (int M, int N, int K, float alpha, const void *A, const void *B, float beta,
**    void *C, int lda, int ldb, int ldc)
**
** Names: culua_matmul_lowp_<a>_<b>_<c>[_vec], a and b of f16 bf16 e4m3 e5m2,
** c of f16 bf16 f32. _vec: A's and B's tiles come by 16-byte cp.async (their
** bases 16-byte aligned, rows a multiple of 16 bytes apart: the catalog checks);
** else element by element. The list at the end is prebuilt; any other is
** compiled by NVRTC from this file with
**   -DCULUA_LOWP_A=e4m3 -DCULUA_LOWP_B=e5m2 -DCULUA_LOWP_C=bf16
** No CUDA header is needed (NVRTC may lack them): elements are their bits, and
** the few conversions are PTX's cvt. When beta == 0, C is never read.
*/

#include <culua/matmul_lowp.cuh>

/* BM x BN tiles of C, K through them LOWP_KBYTES bytes at a time (32 elements of 16 bits,
** 64 of fp8), LOWP_STAGES deep; each stage A's tile (BM rows of LOWP_KBYTES, padded by 16
** bytes) and B's (16-bit: LOWP_KBYTES / 2 rows of BN elements padded by 16 bytes; fp8: BN
** rows of LOWP_KBYTES, B transposed, padded alike). lua/catalog/matmul.lua reads LOWP_SHARED. */
#define LOWP_BM 128
#define LOWP_BN 128
#define LOWP_THREADS 256
#define LOWP_KBYTES 64
#define LOWP_STAGES 3
#define LOWP_ROW 80            /* LOWP_KBYTES + 16: rows 20 words apart, ldmatrix without conflicts */
#define LOWP_BROW16 272        /* LOWP_BN * 2 + 16: 68 words, conflict-free too */
#define LOWP_STAGE_BYTES 20480 /* LOWP_BM * LOWP_ROW + LOWP_BN * LOWP_ROW (>= 32 * LOWP_BROW16) */
#define LOWP_SHARED (LOWP_STAGES * LOWP_STAGE_BYTES)


/* {====================================================== pieces */

__device__ __forceinline__ void lowp_copy (void *dst, const void *src, int bytes) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void lowp_commit () { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void lowp_wait () { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

__device__ __forceinline__ void ldsm_x4 (unsigned *r, const void *p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans (unsigned *r, const void *p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

/*
** D += A B on one tile, float32 accumulators d: 16 x 8 x 16 for 16-bit A and B, 16 x 8 x 32
** for fp8. With g = lane / 4 and t = lane % 4, d = D(g, 2t), D(g, 2t + 1), D(g + 8, 2t),
** D(g + 8, 2t + 1); a and b as ldmatrix leaves them (see lowp_mma's fragment reads).
*/
template <int TA, int TB>
__device__ __forceinline__ void lowp_mma (float *d, const unsigned *a, const unsigned *b) {
#define LOWP_MMA(SHAPE, TYPES) \
  asm volatile("mma.sync.aligned." SHAPE ".row.col.f32." TYPES ".f32 " \
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  if (TA == CULUA_F16) LOWP_MMA("m16n8k16", "f16.f16");
  else if (TA == CULUA_BF16) LOWP_MMA("m16n8k16", "bf16.bf16");
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
  else if (TA == CULUA_E4M3 && TB == CULUA_E4M3) LOWP_MMA("m16n8k32", "e4m3.e4m3");
  else if (TA == CULUA_E4M3 && TB == CULUA_E5M2) LOWP_MMA("m16n8k32", "e4m3.e5m2");
  else if (TA == CULUA_E5M2 && TB == CULUA_E4M3) LOWP_MMA("m16n8k32", "e5m2.e4m3");
  else if (TA == CULUA_E5M2 && TB == CULUA_E5M2) LOWP_MMA("m16n8k32", "e5m2.e5m2");
#else
  else __trap();   /* fp8 below 8.9: the catalog refuses it before a launch */
#endif
#undef LOWP_MMA
}

/* }====================================================== */


/*
** LOWP_BM x LOWP_BN tiles of C, 8 warps of 64 x 32 (2 x 4), 4 x 4 mma tiles a warp.
**
** A's tile: BM rows of 64 bytes, 4 chunks of 16 bytes a row, two a thread, by cp.async
** (VEC) with the bytes past K or M zero-filled, or element by element through registers.
** B's, 16-bit: 32 rows (k) of BN elements, 16 chunks a row, two a thread, alike; the
** fragments come by ldmatrix.trans. B's, fp8: ldmatrix has no transpose of bytes, and
** the mma wants 4 consecutive k of one column in a register, so B goes in transposed,
** BN rows (n) of 64 k: a thread reads 32 k of one column (consecutive threads,
** consecutive columns) and writes them as 2 16-byte rows; with VEC, a thread reads two
** blocks of 4 k x 4 columns as 4-byte words (a warp: 4 blocks of k by 8 of columns, 32
** bytes of a row each), transposes them by byte permutes and writes each column's 4 k
** as a word.
**
** Fragments: a k-step is 32 bytes of K for every type (16 elements of 16 bits, 32 of
** fp8), and one ldmatrix.x4 gives A's 16 x (32 bytes) as the mma's four registers in
** order for both shapes; one more gives two n8 tiles of B.
*/
template <int TA, int TB, int TC, bool VEC>
__device__ __forceinline__ void lowp (int M, int N, int K, float alpha, const void *A, const void *B, float beta, void *C,
                                      int lda, int ldb, int ldc) {
  constexpr int ES = lowp_size<TA>::value;              /* bytes an element of A and B */
  constexpr bool FP8 = ES == 1;
  constexpr int BK = LOWP_KBYTES / ES;                   /* elements of K a tile */
  constexpr int MI = 4, NI = 4;
  static_assert(lowp_size<TA>::value == lowp_size<TB>::value, "A and B of one width");
  extern __shared__ __align__(128) unsigned char lowp_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
  const int bm = blockIdx.y * LOWP_BM, bn = blockIdx.x * LOWP_BN;
  const char *a8 = (const char *)A, *b8 = (const char *)B;
  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

  /* k-tile kt into stage s */
  auto load = [&] (int s, int kt) {
    unsigned char *sa = lowp_smem + s * LOWP_STAGE_BYTES, *sb = sa + LOWP_BM * LOWP_ROW;
    const int k0 = kt * BK;
#pragma unroll
    for (int q = 0; q < 2; q++) {   /* A: chunk c, row c / 4, bytes 16 * (c % 4) */
      int c = tid + q * LOWP_THREADS, r = c >> 2, kc = k0 + (c & 3) * (16 / ES);
      unsigned char *dst = sa + r * LOWP_ROW + (c & 3) * 16;
      bool rowin = bm + r < M;
      if (VEC) {
        int bytes = rowin ? max(0, min(16, (K - kc) * ES)) : 0;
        lowp_copy(dst, bytes ? a8 + ((size_t)(bm + r) * lda + kc) * ES : a8, bytes);
      }
      else {
        union { uint4 v; culua_u16 h[8]; culua_u8 b[16]; } u;
        u.v = make_uint4(0, 0, 0, 0);
        const char *src = a8 + ((size_t)(bm + r) * lda + kc) * ES;
#pragma unroll
        for (int e = 0; e < 16 / ES; e++)
          if (rowin && kc + e < K) {
            if (FP8) u.b[e] = ((const culua_u8 *)src)[e];
            else u.h[e] = ((const culua_u16 *)src)[e];
          }
        *(uint4 *)dst = u.v;
      }
    }
    if (!FP8) {
#pragma unroll
      for (int q = 0; q < 2; q++) {   /* B: chunk c, row (k) c / 16, bytes 16 * (c % 16) */
        int c = tid + q * LOWP_THREADS, r = c >> 4, nc = bn + (c & 15) * 8;
        unsigned char *dst = sb + r * LOWP_BROW16 + (c & 15) * 16;
        bool rowin = k0 + r < K;
        if (VEC) {
          int bytes = rowin ? max(0, min(16, (N - nc) * 2)) : 0;
          lowp_copy(dst, bytes ? b8 + ((size_t)(k0 + r) * ldb + nc) * 2 : b8, bytes);
        }
        else {
          union { uint4 v; culua_u16 h[8]; } u;
          u.v = make_uint4(0, 0, 0, 0);
          const culua_u16 *src = (const culua_u16 *)b8 + (size_t)(k0 + r) * ldb + nc;
#pragma unroll
          for (int e = 0; e < 8; e++)
            if (rowin && nc + e < N) u.h[e] = src[e];
          *(uint4 *)dst = u.v;
        }
      }
    }
    else if (VEC) {   /* fp8 B, transposed by 4 x 4 bytes: two blocks a thread (see above) */
#pragma unroll
      for (int q = 0; q < 2; q++) {
        const int b = tid + q * LOWP_THREADS, l = b & 31, wq = b >> 5;
        const int kg = (l & 3) + 4 * (wq & 3), ng = (l >> 2) + 8 * (wq >> 2), k = k0 + 4 * kg, n = bn + 4 * ng;
        unsigned w[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
          const culua_u8 *src = (const culua_u8 *)b8 + (size_t)(k + r) * ldb + n;
          w[r] = 0;
          if (k + r < K) {
            if (n + 3 < N) w[r] = *(const unsigned *)src;
            else
#pragma unroll
              for (int e = 0; e < 3; e++)
                if (n + e < N) w[r] |= (unsigned)src[e] << (8 * e);
          }
        }
        /* column c's 4 k: byte c of w[0] .. w[3] */
        const unsigned lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
        const unsigned lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
        unsigned char *dst = sb + 4 * ng * LOWP_ROW + 4 * kg;
        *(unsigned *)(dst) = __byte_perm(lo01, lo23, 0x5410);
        *(unsigned *)(dst + LOWP_ROW) = __byte_perm(lo01, lo23, 0x7632);
        *(unsigned *)(dst + 2 * LOWP_ROW) = __byte_perm(hi01, hi23, 0x5410);
        *(unsigned *)(dst + 3 * LOWP_ROW) = __byte_perm(hi01, hi23, 0x7632);
      }
    }
    else {   /* fp8 B, transposed: column n = tid % 128, k from 32 * (tid / 128) */
      int n = tid & 127, kh = (tid >> 7) * 32;
      bool colin = bn + n < N;
      const culua_u8 *src = (const culua_u8 *)b8 + (size_t)(k0 + kh) * ldb + bn + n;
      unsigned w[8];
#pragma unroll
      for (int e = 0; e < 8; e++) w[e] = 0;
#pragma unroll
      for (int e = 0; e < 32; e++)
        if (colin && k0 + kh + e < K) w[e >> 2] |= (unsigned)src[(size_t)e * ldb] << (8 * (e & 3));
      uint4 *dst = (uint4 *)(sb + n * LOWP_ROW + kh);
      dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
      dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
  };

  const int KT = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < LOWP_STAGES - 1; s++) {
    if (s < KT) load(s, s);
    lowp_commit();   /* a group a stage, empty or not: wait_group counts them */
  }
  for (int kt = 0; kt < KT; kt++) {
    lowp_wait<LOWP_STAGES - 2>();   /* k-tile kt has landed, for this thread's copies */
    __syncthreads();                 /* for every thread's (and its plain stores); stage (kt - 1) is free */
    if (kt + LOWP_STAGES - 1 < KT) load((kt + LOWP_STAGES - 1) % LOWP_STAGES, kt + LOWP_STAGES - 1);
    lowp_commit();
    const unsigned char *sa = lowp_smem + (kt % LOWP_STAGES) * LOWP_STAGE_BYTES, *sb = sa + LOWP_BM * LOWP_ROW;
#pragma unroll
    for (int kk = 0; kk < LOWP_KBYTES; kk += 32) {
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; i++)
        ldsm_x4(a[i], sa + (wm + i * 16 + (lane & 15)) * LOWP_ROW + kk + (lane >> 4) * 16);
#pragma unroll
      for (int j = 0; j < NI; j += 2) {
        unsigned r[4];
        if (FP8)
          ldsm_x4(r, sb + (wn + j * 8 + (lane & 7) + ((lane >> 4) << 3)) * LOWP_ROW + kk + ((lane >> 3) & 1) * 16);
        else
          ldsm_x4_trans(r, sb + (kk / 2 + (lane & 15)) * LOWP_BROW16 + (wn + j * 8 + (lane >> 4) * 8) * 2);
        b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) lowp_mma<TA, TB>(acc[i][j], a[i], b[j]);
    }
  }
  lowp_wait<0>();   /* no copy outlives the block, even the empty groups' */

  constexpr int EC = lowp_size<TC>::value;
  char *c8 = (char *)C;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int r = bm + wm + i * 16 + g + 8 * h, c = bn + wn + j * 8 + 2 * t;
        if (r >= M) continue;
#pragma unroll
        for (int e = 0; e < 2; e++) {
          if (c + e >= N) continue;
          char *p = c8 + ((size_t)r * ldc + c + e) * EC;
          float v = alpha * acc[i][j][2 * h + e];
          if (beta != 0.0f) v += beta * lowp_load<TC>(p);
          lowp_store<TC>(p, v);
        }
      }
}


/* {====================================================== instances */

#define LOWP_PARAMS int M, int N, int K, float alpha, const void *A, const void *B, float beta, void *C, int lda, int ldb, int ldc
#define LOWP_ARGS M, N, K, alpha, A, B, beta, C, lda, ldb, ldc
#define LOWP_CODE_f16 CULUA_F16
#define LOWP_CODE_bf16 CULUA_BF16
#define LOWP_CODE_e4m3 CULUA_E4M3
#define LOWP_CODE_e5m2 CULUA_E5M2
#define LOWP_CODE_f32 CULUA_F32
#define LOWP_CODE(t) LOWP_CODE_##t
/* blocks a multiprocessor, as __launch_bounds__ asks: two for 16-bit (at most 128 registers,
** none spilled); one for fp8, whose transposing loads spilled up to 136 bytes under sm_90's
** 128 (sm_89's had room) */
#define LOWP_MINB_f16 2
#define LOWP_MINB_bf16 2
#define LOWP_MINB_e4m3 1
#define LOWP_MINB_e5m2 1
#define LOWP_MINB(t) LOWP_MINB_##t
/* culua_matmul_lowp_<a>_<b>_<c> (element by element) and ..._vec (cp.async) */
#define LOWP_KERNELS(a, b, c) \
  extern "C" __global__ void __launch_bounds__(LOWP_THREADS, LOWP_MINB(a)) culua_matmul_lowp_##a##_##b##_##c (LOWP_PARAMS) \
  { lowp<LOWP_CODE(a), LOWP_CODE(b), LOWP_CODE(c), false>(LOWP_ARGS); } \
  extern "C" __global__ void __launch_bounds__(LOWP_THREADS, LOWP_MINB(a)) culua_matmul_lowp_##a##_##b##_##c##_vec (LOWP_PARAMS) \
  { lowp<LOWP_CODE(a), LOWP_CODE(b), LOWP_CODE(c), true>(LOWP_ARGS); }
#define LOWP_KERNELS_(a, b, c) LOWP_KERNELS(a, b, c)

#if defined(CULUA_LOWP_A)
/* a pair asked for by the catalog, compiled by NVRTC (both paths: they share the compile) */
LOWP_KERNELS_(CULUA_LOWP_A, CULUA_LOWP_B, CULUA_LOWP_C)
#else
/* prebuilt by nvcc: 16-bit A, B and C of one dtype (on 9.0 the aligned ones go to
** matmul_lowp_sm90.cu, so these are 8.x's, and 9.0's blocks off 16 bytes); the rest by
** NVRTC, to keep the build short */
LOWP_KERNELS(f16, f16, f16)
LOWP_KERNELS(bf16, bf16, bf16)
#endif

/* }====================================================== */
