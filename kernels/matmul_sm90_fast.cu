/*
** matmul_sm90_fast.cu
** The matmul family's fast on compute capability 9.0: FFMA, no tensor
** cores, fed by the Tensor Memory Accelerator through culua/sm90.cuh's
** pipeline. Built for sm_90a only, with ptxas at -O1: at -O2 and -O3 it
** renames the accumulators across the unrolled loop and reorders the FFMAs,
** and the kernel ran 7-8% slower on an H100 (46.1 against 49.2 TFLOP/s at
** n = 4096). tf32 is slower at -O1, hence a file of its own.
**
** culua_matmul_fast_tma (int M, int N, int K, float alpha, tensor map of A,
** tensor map of B, float beta, float *C, float *W, int splits, int sk,
** unsigned *counts, int ldc): 384
** threads; k-tiles of 16 in 8 stages; A in 128 x 16 boxes with the 64-byte
** swizzle, B in 16 x 128 boxes unswizzled, CULUA_SM90_SHARED(128, 256, 16, 8)
** bytes. C's 128 x 256 tile, 8 x 16 a thread: TMA takes the staging loads,
** stores and block barriers out of the FFMA warps. Split-K (splits > 1, W
** and matmul_sm90.cu's culua_matmul_splitk) and stream-K (sk > 0, W and
** counts) as there.
*/

#include <culua/sm90.cuh>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

using namespace culua::sm90;

/* {====================================================== fast: FFMA */

/* the kernel's shape, which lua/catalog/matmul.lua reads: C's BM x BN tile, BK
** of k a stage in STAGES stages; A's TMA boxes BM x BK, swizzled 64 bytes (a
** row of BK floats); B's BK x BHALF boxes unswizzled, two a stage */
#define CULUA_FAST_BM 128
#define CULUA_FAST_BN 256
#define CULUA_FAST_BK 16
#define CULUA_FAST_STAGES 8
#define CULUA_FAST_BHALF 128
#define CULUA_FAST_SWIZZLE 64
static_assert(CULUA_FAST_BK * 4 == CULUA_FAST_SWIZZLE && 2 * CULUA_FAST_BHALF == CULUA_FAST_BN,
              "A's row is one swizzle span; B comes in two halves");

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_fast_tma (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                       const __grid_constant__ culua_tmap tmB, float beta, float *C, float *W, int splits,
                       int sk, unsigned *counts, int ldc) {
  /* k-tiles of 16 in 8 stages halve the unrolled loop of 32 in 4: 6% faster at
  ** n = 4096 and 1% at 8192 (H100), the instruction cache missing less */
  constexpr int BM = CULUA_FAST_BM, BN = CULUA_FAST_BN, BK = CULUA_FAST_BK, B_BYTES = BK * BN * 4;
  /* 8 consumer warps as 2 x 4 of 64 x 64; a thread: rows lm + 8i, columns 4ln + 16j (+0..3) */
  const int ct = threadIdx.x - 128, warp = ct >> 5, lane = ct & 31, lm = lane & 7, ln = lane >> 3;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * 64;
  pipeline<BM, BN, BK, CULUA_FAST_STAGES, 8, 128>(M, N, K, splits, sk, W, counts, [&] (const auto &ring, int s, int kt, int m0, int n0) {
    tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
    tma_load(ring.bbuf(s), &tmB, ring.full(s), n0, kt * BK);   /* two 128-column halves */
    tma_load(ring.bbuf(s) + B_BYTES / 2, &tmB, ring.full(s), n0 + CULUA_FAST_BHALF, kt * BK);
  }, [&] (const auto &ring, float (&acc)[128], int q0, int KT) {   /* one release per consumer warp */
    /* The 8 lanes of a quarter-warp read 8 rows of A, two a 128-byte line, whose
    ** swizzled chunks differ, and one 16-byte piece of B (a broadcast): no bank
    ** conflicts. */
    for (int kt = 0; kt < KT; kt++) {
      const int s = ring.wait(q0 + kt);
      const unsigned as = ring.abuf(s), bs = ring.bbuf(s);
#pragma unroll
      for (int kc = 0; kc < BK / 4; kc++) {   /* 4 k at a time: one 16-byte chunk of each A row */
        float4 a[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
          const int m = wm + lm + 8 * i;
          a[i] = lds4(as + m * 64 + ((kc ^ ((m >> 1) & 3)) << 4));   /* the 64-byte swizzle */
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
          const int k = kc * 4 + kk;
          float bv[16];
#pragma unroll
          for (int j = 0; j < 4; j++) {
            const int n = wn + ln * 4 + 16 * j;
            const float4 v = lds4(bs + (n >> 7) * (B_BYTES / 2) + (k * 128 + (n & 127)) * 4);
            bv[4 * j] = v.x; bv[4 * j + 1] = v.y; bv[4 * j + 2] = v.z; bv[4 * j + 3] = v.w;
          }
          /* odd rows walk the columns backwards, so each row starts on the B
          ** value the last one ended with (1% faster than all forwards, H100) */
#pragma unroll
          for (int i = 0; i < 8; i++) {
            const float av = kk == 0 ? a[i].x : kk == 1 ? a[i].y : kk == 2 ? a[i].z : a[i].w;
#pragma unroll
            for (int jj = 0; jj < 16; jj++) {
              const int j = (i & 1) ? 15 - jj : jj;
              acc[16 * i + j] = fmaf(av, bv[j], acc[16 * i + j]);
            }
          }
        }
      }
      /* (the fence costs nothing measurable here: 4096 / 8192 2.77-2.81 / 21.53-21.70 ms
      ** against 2.77 / 21.51-21.56 without it, H100, session 32; no race was seen
      ** without it in 58 products, but the PTX memory model asks for it) */
      ring.release_read(s);
    }
  }, [&] (const auto &, const float (&acc)[128], int m0, int n0, int split) {
    const Out out(C, splits > 1 ? W : nullptr, split, M, N, ldc, alpha, beta);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int m = m0 + wm + lm + 8 * i;
#pragma unroll
      for (int j = 0; j < 16; j++) {
        const int n = n0 + wn + ln * 4 + 16 * (j >> 2) + (j & 3);
        if (m < M && n < N) out(m, n, acc[16 * i + j]);
      }
    }
  });
}

/* }====================================================== */

#endif
