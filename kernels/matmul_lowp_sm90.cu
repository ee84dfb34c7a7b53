/*
** matmul_lowp_sm90.cu
** The Hopper half of the low-precision matmul: float16 and bfloat16 A and B
** on wgmma (m64n256k16, float32 sums), fed by the Tensor Memory Accelerator
** through culua/sm90.cuh's pipeline, as matmul_sm90.cu's tf32 kernel is.
** Built for sm_90a only; the catalog loads it on compute capability 9.0 where
** TMA can address A and B (first elements 16-byte aligned, rows a multiple of
** 16 bytes apart) and uses matmul_lowp.cu's mma.sync kernels elsewhere.
** Two kernels, which lua/catalog/matmul_lowp.lua's tune.lowp_sm90 chooses between:
**
**   culua_matmul_lowp_wgmma_<f16|bf16>     ("rs": B^T from registers, 256 x 128 tiles)
**     (int M, int N, int K, float alpha, tensor map of A, tensor map of B, float beta,
**      void *C, int ldc, int ctype)
**   culua_matmul_lowp_wgmma_ss_<f16|bf16>  ("ss": both operands from shared memory, 128 x 256)
**     (the same, then tensor map of C, int tmac)
**
** C = alpha * A * B + beta * C, row-major, C's elements of ctype (culua/matmul_lowp.cuh's
** CULUA_F16, CULUA_BF16 or CULUA_F32), its rows ldc elements apart; C is not read
** when beta == 0. ss writes C through shared memory and TMA stores where tmac
** is 1 (tmC: C's map in 64-row boxes of 128 bytes, 128-byte swizzle; the
** catalog makes one where C's first element, its rows and a row's n elements
** are whole 16 bytes), else as rs always does, from registers. 384 threads,
** LOWP_SM90_SHARED (rs) or LOWP_SS_SHARED (ss) bytes of dynamic shared
** memory. No split-K or stream-K here (a tile's sums go straight to C). The
** ring counts in 4-byte words: a k-tile of 64 elements of 16 bits is BK = 32
** words of culua/sm90.cuh's Ring, and K goes to it in words.
** The blocks are persistent when the catalog launches fewer than the tiles
** (tune.lowp_persistent): block b takes tiles b, b + grid, ... (lowp_tiles
** below), as matmul_lowp_fp8.cu's product does.
**
** rs, as tf32 does, computes C^T = B^T A^T, so that both operands are K-major
** where wgmma reads them: A's 256 x 64 tile (128-byte rows, TMA's 128-byte
** swizzle) is the shared-memory operand, exactly as tf32's 256 x 32 floats
** are (the same descriptor, stepped 32 bytes a k16); B^T's fragments come from
** registers, read out of B's row-major 64 x 128 tile (two 64-column panels,
** 128-byte rows, swizzled) by ldmatrix.trans, one per 16 x 16 of a warp. Each
** consumer warpgroup owns 64 columns x 256 rows of C's 256 x 128 tile (128
** accumulators a thread). Register operands keep it at one k-tile of wgmmas in
** flight (wait_group 0 after the next k-tile's fragments are read, into a
** second set of registers), and the consumer warps spend issue slots on ldmatrix.
**
** ss computes C itself: 16-bit wgmma reads B from shared memory N-major too
** (its transpose bit, imm-trans-b = 1), which tf32's cannot. A's 128 x 64 tile
** is the K-major A operand (each consumer warpgroup its 64 rows); B's 64 x 256
** tile, four 64-column panels as TMA lays them out (128-byte rows, swizzled),
** is the N-major B operand. Nothing goes through registers but the sums, so a
** warpgroup keeps two k-tiles of wgmmas in flight (wait_group 1: a stage is
** released when the k-tile after it has been issued), and its C elements come
** in pairs of columns, written 4 or 8 bytes at a time.
*/

#include <culua/sm90.cuh>
#include <culua/matmul_lowp.cuh>

/* tiles and ring (lua/catalog/matmul.lua reads these): 256 x 128 of C, 64 of K a stage */
#define LOWP_SM90_BM 256
#define LOWP_SM90_BN 128
#define LOWP_SM90_BK 64
#define LOWP_SM90_STAGES 4
#define LOWP_SM90_SHARED (LOWP_SM90_STAGES * (LOWP_SM90_BM * LOWP_SM90_BK * 2 + LOWP_SM90_BK * LOWP_SM90_BN * 2) + 2 * LOWP_SM90_STAGES * 8 + 1024)
/* ss: 128 x 256 of C, 64 of K a stage; B's tile in 64-column panels of LOWP_SS_BK rows of 128 bytes */
#define LOWP_SS_BM 128
#define LOWP_SS_BN 256
#define LOWP_SS_BK 64
#define LOWP_SS_STAGES 4
/* (and after the ring C's staging: 16 KB a consumer warpgroup, from the next 1024-byte boundary;
** the literal is for the catalog's reader of this file, the assertion below keeps it culua/matmul_lowp.cuh's) */
#define LOWP_SS_CSTAGE (2 * 2 * 64 * 128 + 1024)
static_assert(LOWP_SS_CSTAGE == LOWP_C_STAGE_BYTES + 1024, "culua/matmul_lowp.cuh's staging");
#define LOWP_SS_SHARED (LOWP_SS_STAGES * (LOWP_SS_BM * LOWP_SS_BK * 2 + LOWP_SS_BK * LOWP_SS_BN * 2) + 2 * LOWP_SS_STAGES * 8 + 1024 + LOWP_SS_CSTAGE)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

using namespace culua::sm90;

__device__ __forceinline__ void lowp_ldsm_x4_trans (unsigned *r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

/* d (64 x 256, f32) += a (64 x 16, fragments in registers) * the 16 x 256 tile at desc (K-major) */
#define LOWP_WGMMA(TYPES) \
  asm volatile("{\n" \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPES " {" \
               CULUA_WG_R128 \
               "}, {%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n" \
               "}\n" \
               : CULUA_WG_D64(0), CULUA_WG_D64(64) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))

template <int TA>
__device__ __forceinline__ void lowp_wgmma (float *d, const unsigned *a, unsigned long long desc) {
  if (TA == CULUA_BF16) LOWP_WGMMA("bf16.bf16");
  else LOWP_WGMMA("f16.f16");
}

/*
** Both kernels' blocks: warpgroup 0 the producer (its one thread calls
** load(ring, stage, k-tile, m0, n0) for each k-tile, TMA copies that signal the
** stage's full barrier), warpgroups 1 and 2 the consumers (mma(ring, acc, q0,
** KT) adds the ring's turns q0 .. q0 + KT - 1 into a thread's R accumulators,
** releasing each stage on its empty barrier; store(ring, acc, m0, n0) writes the
** tile to C). It is culua/sm90.cuh's pipeline without split-K
** and stream-K, and persistent: block b takes tiles b, b + gridDim.x, ...,
** and its ring's turns run on from one tile to the next (tile i's k-tiles are
** turns i * KT ..), so that the producer fills the next tile's first stages
** as soon as the consumers release the last ones of this tile, and the copies
** land while the consumers write C. A stage is reused only through the ring's
** barriers, within a tile or across two, and C is written from registers or
** through staging after the ring: nothing of tile t's epilogue touches the
** ring of tile t + 1. A consumer warpgroup's TMA stores of C (ss) may still
** be reading its staging when it leaves the loop: its leader waits for them
** before the block ends.
** A grid of one block a tile runs each block's one tile from turn 0, as the
** pipeline did.
**
** Tiles come in culua/sm90.cuh's tile_origin order: groups of 8 tile rows
** walk C's columns together, tile t + 1 below tile t within a group's column.
** At any time the blocks hold about a grid of consecutive tiles, so blocks
** side by side share B's column panel (8 tiles a panel) and every column of
** a group reads the same 8 row panels of A. At n = 4096, ss (512 tiles of 128
** x 256) with 132 blocks: a wave of tiles is about one group (8 x 16 tiles),
** 8 of A's row panels and all of B, 40 MB, which fits the H100's 50 MB of L2.
** It is the order a block a tile had, kept so that a grid of the tiles is
** unchanged.
*/
template <int BM, int BN, int BKW, int STAGES, int R, class Load, class Mma, class Store>
__device__ __forceinline__ void lowp_tiles (int M, int N, int K, Load load, Mma mma, Store store) {
  static_assert(R * 256 == BM * BN, "a consumer thread holds R of the tile's sums");
  extern __shared__ unsigned char lowp_smem[];
  const Ring<STAGES, BM * BKW * 4, BKW * BN * 4> ring(lowp_smem);
  ring.init(2);   /* a stage is free once both consumer warpgroups have released it */
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), KT = (K + BKW - 1) / BKW;
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x == 0)
      for (int t = blockIdx.x, q = 0; t < tiles; t += gridDim.x, q += KT) {
        int m0, n0;
        tile_origin<BM, BN>(M, N, t, m0, n0);
        ring.produce(q, KT, [&] (int s, int kt) { load(ring, s, kt, m0, n0); });
      }
    return;
  }
  /* (the consumers take all the producer gives: 384 x 168 = 128 x 24 + 256 x 240) */
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  float acc[R];
  for (int t = blockIdx.x, q = 0; t < tiles; t += gridDim.x, q += KT) {
    int m0, n0;
    tile_origin<BM, BN>(M, N, t, m0, n0);
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    mma(ring, acc, q, KT);
    store(ring, acc, m0, n0);
  }
  if ((threadIdx.x & 127) == 0) bulk_wait_read();
}

template <int TA>
__device__ __forceinline__ void lowp_sm90 (int M, int N, int K, float alpha, const culua_tmap &tmA, const culua_tmap &tmB,
                                           float beta, void *C, int ldc, int ctype) {   /* rs */
  constexpr int BM = LOWP_SM90_BM, BN = LOWP_SM90_BN, BK = LOWP_SM90_BK, BKW = BK / 2;   /* BKW: in words */
  constexpr int PANEL = BK * 64 * 2;   /* B's tile: 64-column panels of BK rows of 128 bytes */
  static_assert(BM * BKW * 4 == BM * BK * 2 && BKW * BN * 4 == BK * BN * 2, "the ring's words hold the tiles");
  const int ct = threadIdx.x - 128, wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, t = lane & 3;
  const int r0 = wg * 64 + warp * 16 + g;    /* the tile column of fragment rows r0 and r0 + 8 */
  const int w0 = wg * 64 + warp * 16;        /* this warp's 16 columns of B's tile */
  const int ec = ctype == CULUA_F32 ? 4 : 2;
  lowp_tiles<BM, BN, BKW, LOWP_SM90_STAGES, BM / 2>(M, N, (K + 1) / 2, [&] (const auto &ring, int s, int kt, int m0, int n0) {
    tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
    for (int q = 0; q < BN / 64; q++)   /* B in 64-column panels: a swizzled row is 128 bytes */
      tma_load(ring.bbuf(s) + q * PANEL, &tmB, ring.full(s), n0 + 64 * q, kt * BK);
  }, [&] (const auto &ring, float (&d)[BM / 2], int q0, int KT) {   /* one release per consumer warpgroup */
    /* the byte of element (k, n) of B's tile: panel n / 64, row k, 16-byte chunk swizzled by k % 8 */
    auto boff = [] (int k, int n) {
      return (n >> 6) * PANEL + k * 128 + ((((n & 63) >> 3) ^ (k & 7)) << 4) + ((n & 7) << 1);
    };
    /* ldmatrix.x4.trans: lane L gives row L % 8 of 8 x 8 matrix L / 8; matrix i holds columns
    ** w0 + 8 (i % 2) .. + 7 at k + 8 (i / 2) .. + 7, so the registers are the m16n8k16 A
    ** fragment of B^T: (n g, k 2t), (n g + 8, k 2t), (n g, k 2t + 8), (n g + 8, k 2t + 8) */
    const int lk = (lane & 7) + ((lane >> 4) << 3), ln = w0 + ((lane >> 3) & 1) * 8;
    /* k-tile kt + 1's fragments are read while kt's wgmmas run (the ring's k-loop) */
    auto fragments = [&] (unsigned (&f)[4][4], unsigned bs) {
#pragma unroll
      for (int kk = 0; kk < 4; kk++) lowp_ldsm_x4_trans(f[kk], bs + boff(kk * 16 + lk, ln));
    };
    ring.consume_rs(q0, KT, ct, fragments, [&] (const unsigned (&f)[4][4], unsigned as) {
#pragma unroll
      for (int kk = 0; kk < 4; kk++) lowp_wgmma<TA>(d, f[kk], lowp_desc_k128(as + kk * 32));
    });
  }, [&] (const auto &, const float (&d)[BM / 2], int m0, int n0) {
    /* accumulator 4j + q: C^T row r0 (+8 for q >= 2), column 8j + 2t (+1 for odd q) */
    char *c8 = (char *)C;
    const int n = n0 + r0;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int nn = n + (q >= 2 ? 8 : 0), mm = m0 + 8 * j + 2 * t + (q & 1);
        if (mm < M && nn < N) {
          char *p = c8 + ((size_t)mm * ldc + nn) * ec;
          float v = alpha * d[4 * j + q];
          if (beta != 0.0f) v += beta * lowp_load_rt(ctype, p);
          lowp_store_rt(ctype, p, v);
        }
      }
  });
}

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_lowp_wgmma_f16 (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                             const __grid_constant__ culua_tmap tmB, float beta, void *C, int ldc, int ctype)
{ lowp_sm90<CULUA_F16>(M, N, K, alpha, tmA, tmB, beta, C, ldc, ctype); }

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_lowp_wgmma_bf16 (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                              const __grid_constant__ culua_tmap tmB, float beta, void *C, int ldc, int ctype)
{ lowp_sm90<CULUA_BF16>(M, N, K, alpha, tmA, tmB, beta, C, ldc, ctype); }

/* {====================================================== ss: both operands from shared memory */

/*
** The descriptor of an N-major (MN-major) operand with 128-byte swizzle, as
** TMA lays out a row-major tile in 64-column panels: 64 elements (128 bytes)
** of N contiguous, rows of K 128 bytes apart, swizzled by row % 8. The
** leading byte offset is from one 64-column panel to the next (panel bytes),
** the stride byte offset from one 8-row group of K to the next (1024 bytes).
*/
__device__ __forceinline__ unsigned long long lowp_desc_mn128 (unsigned addr, unsigned panel) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(panel >> 4) << 16)
         | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

/* d (64 x 256, f32) += the 64 x 16 K-major tile at da * the 16 x 256 N-major tile at db */
#define LOWP_WGMMA_SS(TYPES) \
  asm volatile("{\n" \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPES " {" \
               CULUA_WG_R128 \
               "}, %128, %129, 1, 1, 1, 0, 1;\n" \
               "}\n" \
               : CULUA_WG_D64(0), CULUA_WG_D64(64) \
               : "l"(da), "l"(db))

template <int TA>
__device__ __forceinline__ void lowp_wgmma_ss (float *d, unsigned long long da, unsigned long long db) {
  if (TA == CULUA_BF16) LOWP_WGMMA_SS("bf16.bf16");
  else LOWP_WGMMA_SS("f16.f16");
}

template <int TA>
__device__ __forceinline__ void lowp_ss (int M, int N, int K, float alpha, const culua_tmap &tmA, const culua_tmap &tmB,
                                         float beta, void *C, int ldc, int ctype, const culua_tmap &tmC, int tmac) {
  constexpr int BM = LOWP_SS_BM, BN = LOWP_SS_BN, BK = LOWP_SS_BK, BKW = BK / 2;   /* BKW: in words */
  constexpr int PANEL = BK * 64 * 2;   /* B's tile: 64-column panels of BK rows of 128 bytes */
  static_assert(BM * BKW * 4 == BM * BK * 2 && BKW * BN * 4 == BK * BN * 2, "the ring's words hold the tiles");
  static_assert(BM == 2 * 64 && BN == 256 && BK % 16 == 0, "two consumer warpgroups of m64n256, k16 steps");
  const int ct = threadIdx.x - 128, wg = ct >> 7;
  lowp_tiles<BM, BN, BKW, LOWP_SS_STAGES, BM * BN / 256>(M, N, (K + 1) / 2, [&] (const auto &ring, int s, int kt, int m0, int n0) {
    tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
    for (int q = 0; q < BN / 64; q++)   /* B in 64-column panels: a swizzled row is 128 bytes */
      tma_load(ring.bbuf(s) + q * PANEL, &tmB, ring.full(s), n0 + 64 * q, kt * BK);
  }, [&] (const auto &ring, float (&d)[BM * BN / 256], int q0, int KT) {   /* one release per consumer warpgroup */
    /* this warpgroup's 64 rows of A's tile start 64 rows of 128 bytes in (a multiple of the
    ** swizzle's 1024); a k16 step is 32 bytes along A's rows and 16 rows (2048 bytes) down B's panels */
    const unsigned arow = wg * 64 * 128;
    int held = -1;   /* the stage whose wgmmas may still run */
    for (int kt = 0; kt < KT; kt++) {
      const int s = ring.wait(q0 + kt);
      const unsigned as = ring.abuf(s) + arow, bs = ring.bbuf(s);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++)
        lowp_wgmma_ss<TA>(d, lowp_desc_k128(as + kk * 32), lowp_desc_mn128(bs + kk * 2048, PANEL));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      /* k-tile kt - 1's wgmmas are done once at most kt's are pending: its stage goes back */
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (held >= 0 && (ct & 127) == 0) mbar_arrive(ring.empty(held));
      held = s;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (held >= 0 && (ct & 127) == 0) mbar_arrive(ring.empty(held));
  }, [&] (const auto &ring, const float (&d)[BM * BN / 256], int m0, int n0) {
    lowp_store_tile<BN>(d, M, N, m0, n0, alpha, beta, C, ldc, ctype, &tmC, tmac, ring.end());
  });
}

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_lowp_wgmma_ss_f16 (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                                const __grid_constant__ culua_tmap tmB, float beta, void *C, int ldc, int ctype,
                                const __grid_constant__ culua_tmap tmC, int tmac)
{ lowp_ss<CULUA_F16>(M, N, K, alpha, tmA, tmB, beta, C, ldc, ctype, tmC, tmac); }

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_lowp_wgmma_ss_bf16 (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                                 const __grid_constant__ culua_tmap tmB, float beta, void *C, int ldc, int ctype,
                                 const __grid_constant__ culua_tmap tmC, int tmac)
{ lowp_ss<CULUA_BF16>(M, N, K, alpha, tmA, tmB, beta, C, ldc, ctype, tmC, tmac); }

/* }====================================================== */

#endif
