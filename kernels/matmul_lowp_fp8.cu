/*
** matmul_lowp_fp8.cu
** The Hopper fp8 matmul: e4m3 and e5m2 A and B (any pair) on wgmma
** (m64nNk32, float32 sums), fed by the Tensor Memory Accelerator, C in
** float16, bfloat16 or float32. Built for sm_90a only; lua/catalog/matmul.lua
** takes it on compute capability 9.0 where TMA can address A and B (or the
** B^T given: first elements 16-byte aligned, rows a multiple of 16 bytes
** apart), and matmul_lowp.cu's mma.sync kernels elsewhere.
**
** fp8 wgmma reads both operands K-major from shared memory (it has no
** transpose bit, which 16-bit wgmma uses for N-major B). Row-major A (M x K)
** is K-major already; row-major B (K x N) is N-major, so the kernel reads B^T
** (N x K, K-major): the caller's own where it gives B transposed (matmul's
** transb, as cuBLASLt's "TN" form and PyTorch's _scaled_mm take it) and TMA
** can address it, else a copy that kernels/matmul_transpose.cu's 1-byte
** kernel writes into scratch first (rows padded to 16 bytes):
**
**   culua_matmul_lowp_fp8_<a>_<b>_n<BN>s<S>[c2]
**     (int M, int N, int K, float alpha, tensor map of A, tensor map of Bt, float beta,
**      void *C, int ldc, int ctype, tensor map of C, int tmac)
**     (c2: launched in clusters of two blocks that share B^T's tile; see lowp_fp8)
**     C = alpha * A * B + beta * C, as matmul_lowp_sm90.cu's kernels (C's
**     dtype a code of culua/matmul_lowp.cuh, C not read when beta == 0);
**     the catalog folds fp8's scales into alpha; C through shared memory and TMA
**     stores where tmac is 1, as matmul_lowp_sm90.cu's ss writes it. 384 threads,
**     LOWP_FP8_SHARED(BN, S) bytes of dynamic shared memory.
**
** Why a transpose before, not B transposed as it is loaded: the product reads
** B^T's k-tiles from L2 once per row of tiles (M / 128 times), so transposing
** them in the kernel would be that many times the work of transposing B once;
** and the kernel already moves 48 KB of shared memory a k-tile through TMA and
** wgmma, which a transpose in shared memory would add its read and write of B's
** tile to. B^T once is a pass over K x N bytes at memory speed: at n = 4096, 32
** MB read and written, some 8-11 us beside the product's 110-120 (7-9%); at 8192,
** 128 MB, 30-45 us beside 740-900 (4-5%). bench/matmul_lowp.lua times it alone,
** and the product on a B^T given (transb) beside it.
** After a transpose the product is launched as its programmatic dependent
** (where the catalog asks): its blocks set up while the transpose ends, and
** its producer waits for B^T (griddepcontrol.wait) before its first copy.
**
** The product, as matmul_lowp_sm90.cu's ss: BM = 128 x BN tiles of C (BN 256 or
** 128), K 128 bytes (128 elements) a stage, a ring of S stages in shared memory
** (culua/sm90.cuh's Ring: full and empty mbarriers), one producer warpgroup
** whose one thread issues the TMA copies, two consumer warpgroups each owning
** 64 rows of the tile. A's 128 x 128 box and Bt's BN x 128 box land with TMA's
** 128-byte swizzle: K-major operands of 128-byte rows, 8-row groups 1024 bytes
** apart (culua/matmul_lowp.cuh's lowp_desc_k128 for both), a k32 step 32 bytes
** along the rows. A consumer keeps two k-tiles of wgmmas in flight (wait_group
** 1: a stage is released when the k-tile after it has been issued). The
** blocks are persistent when the catalog launches fewer than the tiles: block
** b takes tiles b, b + grid, ..., the ring's turns running on from one tile to
** the next, so the producer fills the next tile's stages while the consumers
** write C.
**
** Sums: each wgmma adds into the float32 accumulators directly, as the
** mma.sync kernel and cuBLASLt's "fast accumulation" do (no promotion of
** partial sums every few k-tiles: at 128 sums a thread there are no registers
** for a second set).
*/

#include <culua/sm90.cuh>
#include <culua/matmul_lowp.cuh>

/* tiles (lua/catalog/matmul.lua reads these): 128 rows of C (two warpgroups of m64), K 128
** bytes a stage; BN and the stages are each kernel's (LOWP_FP8 lines below) */
#define LOWP_FP8_BM 128
#define LOWP_FP8_BK 128
/* (and after the ring C's staging: 16 KB a consumer warpgroup, from the next 1024-byte boundary;
** the literal is for the catalog's reader of this file, the assertion below keeps it culua/matmul_lowp.cuh's) */
#define LOWP_FP8_CSTAGE (2 * 2 * 64 * 128 + 1024)
static_assert(LOWP_FP8_CSTAGE == LOWP_C_STAGE_BYTES + 1024, "culua/matmul_lowp.cuh's staging");
#define LOWP_FP8_SHARED(BN, STAGES) ((STAGES) * (LOWP_FP8_BM * LOWP_FP8_BK + (BN) * LOWP_FP8_BK) + 2 * (STAGES) * 8 + 1024 + LOWP_FP8_CSTAGE)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

using namespace culua::sm90;

/* {====================================================== the product */

/* d (64 x BN, f32) += the 64 x 32 K-major tile at da * the 32 x BN tile at db, K-major too
** (fp8 wgmma: d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b; no transpose bits) */
#define LOWP_FP8_WGMMA256(TYPES) \
  asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32." TYPES " {" CULUA_WG_R128 "}, %128, %129, 1, 1, 1;\n" \
               : CULUA_WG_D64(0), CULUA_WG_D64(64) : "l"(da), "l"(db))
#define LOWP_FP8_WGMMA128(TYPES) \
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32." TYPES " {" CULUA_WG_R64 "}, %64, %65, 1, 1, 1;\n" \
               : CULUA_WG_D64(0) : "l"(da), "l"(db))
#define LOWP_FP8_WGMMA(BN, TYPES) \
  do { if constexpr (BN == 256) LOWP_FP8_WGMMA256(TYPES); else LOWP_FP8_WGMMA128(TYPES); } while (0)

template <int TA, int TB, int BN>
__device__ __forceinline__ void lowp_fp8_wgmma (float *d, unsigned long long da, unsigned long long db) {
  if (TA == CULUA_E4M3 && TB == CULUA_E4M3) LOWP_FP8_WGMMA(BN, "e4m3.e4m3");
  else if (TA == CULUA_E4M3) LOWP_FP8_WGMMA(BN, "e4m3.e5m2");
  else if (TB == CULUA_E4M3) LOWP_FP8_WGMMA(BN, "e5m2.e4m3");
  else LOWP_FP8_WGMMA(BN, "e5m2.e5m2");
}

/* {------ clusters of two: B^T's tile shared by two blocks (tiles one above the other) */

__device__ __forceinline__ unsigned lowp_cluster_rank () {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/* every thread of both blocks: what was done before is seen after (the barriers made,
** the other's copies and arrivals done) */
__device__ __forceinline__ void lowp_cluster_sync () {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/* arrive on the mbarrier at bar (this block's address) in block `rank` of the cluster */
__device__ __forceinline__ void lowp_arrive_in (unsigned bar, unsigned rank) {
  asm volatile("{\n.reg .b32 r;\nmapa.shared::cluster.u32 r, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [r];\n}" :: "r"(bar), "r"(rank) : "memory");
}

/* tma_load into the same place of every block in mask, each block's bar told of its bytes */
__device__ __forceinline__ void lowp_tma_load_mc (unsigned dst, const culua_tmap *map, unsigned bar, int c0, int c1,
                                                  unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
}

/* ------} */

/*
** CL = 2: blocks in clusters of two (along the grid), the pair taking two
** tiles one above the other (256 x BN of C; tile_origin over pairs), whose
** B^T tile is the same: each block's producer copies its half of it (BN / 2
** rows) into both blocks at once (TMA multicast) and A's tile into its own, so
** a block reads 3/4 of what it would alone from L2. A block's full barrier
** still counts the whole stage's bytes; a stage is free once all four
** consumer warpgroups of the pair have released it (each arrives in both
** blocks), since either producer writes into both. The pair meets after the
** barriers are made and before either leaves (no copy or arrival into a block
** that is gone).
*/
template <int TA, int TB, int BN, int STAGES, int CL>
__device__ __forceinline__ void lowp_fp8 (int M, int N, int K, float alpha, const culua_tmap &tmA, const culua_tmap &tmB,
                                          float beta, void *C, int ldc, int ctype, const culua_tmap &tmC, int tmac) {
  constexpr int BM = LOWP_FP8_BM, BK = LOWP_FP8_BK, R = BN / 2;   /* R: accumulators a consumer thread */
  static_assert(BM == 2 * 64 && (BN == 256 || BN == 128) && BK == 128, "two warpgroups of m64nBN, one 128-byte row of K");
  static_assert(LOWP_FP8_SHARED(BN, STAGES) <= 227 * 1024, "the ring and C's staging fit a block's shared memory");
  static_assert(CL == 1 || CL == 2, "clusters of one or two blocks");
  extern __shared__ unsigned char lowp_fp8_smem[];
  const Ring<STAGES, BM * BK, BN * BK> ring(lowp_fp8_smem);
  ring.init(2 * CL);   /* a stage is free once the consumer warpgroups of the cluster have released it */
  const unsigned cr = CL > 1 ? lowp_cluster_rank() : 0;
  if (CL > 1) lowp_cluster_sync();
  /* this block's tiles: CL tiles one above the other a turn of the cluster's loop */
  const int units = ((M + CL * BM - 1) / (CL * BM)) * ((N + BN - 1) / BN), KT = (K + BK - 1) / BK;
  const int first = blockIdx.x / CL, stride = gridDim.x / CL;
  if (threadIdx.x < 128) {
    /* (a cluster's producer spilled at 24 registers: 40, and the consumers 232) */
    if (CL == 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      culua_dep_wait();   /* Bt is the kernel before's (a programmatic launch; else a no-op) */
      int q = 0;
      for (int t = first; t < units; t += stride, q += KT) {
        int m0, n0;
        tile_origin<CL * BM, BN>(M, N, t, m0, n0);
        m0 += cr * BM;
        ring.produce(q, KT, [&] (int s, int kt) {
          tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
          if (CL == 1) tma_load(ring.bbuf(s), &tmB, ring.full(s), kt * BK, n0);
          else lowp_tma_load_mc(ring.bbuf(s) + cr * (BN / 2) * BK, &tmB, ring.full(s), kt * BK, n0 + cr * (BN / 2), 3);
        });
      }
    }
    if (CL > 1) {
      __syncwarp();
      lowp_cluster_sync();
    }
    return;
  }
  if (CL == 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int ct = threadIdx.x - 128, wg = ct >> 7;
  /* this warpgroup's 64 rows of A's tile start 64 rows of 128 bytes in (a multiple of the swizzle's 1024) */
  const unsigned arow = wg * 64 * BK;
  float d[R];
  /* a stage goes back to every block of the cluster (one thread a warpgroup) */
  auto release = [&] (int s) {
    if ((ct & 127) == 0) {
      if (CL == 1) mbar_arrive(ring.empty(s));
      else
        for (unsigned r = 0; r < CL; r++) lowp_arrive_in(ring.empty(s), r);
    }
  };
  int q = 0;
  for (int t = first; t < units; t += stride, q += KT) {
    int m0, n0;
    tile_origin<CL * BM, BN>(M, N, t, m0, n0);
    m0 += cr * BM;
#pragma unroll
    for (int i = 0; i < R; i++) d[i] = 0.0f;
    int held = -1;   /* the stage whose wgmmas may still run */
    for (int kt = 0; kt < KT; kt++) {
      const int s = ring.wait(q + kt);
      const unsigned as = ring.abuf(s) + arow, bs = ring.bbuf(s);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < BK / 32; kk++)   /* k32 steps, 32 bytes along both tiles' rows */
        lowp_fp8_wgmma<TA, TB, BN>(d, lowp_desc_k128(as + kk * 32), lowp_desc_k128(bs + kk * 32));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      /* k-tile kt - 1's wgmmas are done once at most kt's are pending: its stage goes back */
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (held >= 0) release(held);
      held = s;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (held >= 0) release(held);
    lowp_store_tile<BN>(d, M, N, m0, n0, alpha, beta, C, ldc, ctype, &tmC, tmac, ring.end());
  }
  if ((ct & 127) == 0) bulk_wait_read();   /* the last TMA stores have read the staging */
  if (CL > 1) lowp_cluster_sync();
}

#endif

/* culua_matmul_lowp_fp8_<a>_<b>_n<BN>s<S>[c<CL>]: the catalog reads these lines (core.instances) */
#define LOWP_FP8_PARAMS int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA, \
                        const __grid_constant__ culua_tmap tmB, float beta, void *C, int ldc, int ctype, \
                        const __grid_constant__ culua_tmap tmC, int tmac
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOWP_FP8_BODY(a, b, BN, S, CL) \
  { lowp_fp8<CULUA_##a, CULUA_##b, BN, S, CL>(M, N, K, alpha, tmA, tmB, beta, C, ldc, ctype, tmC, tmac); }
#else
#define LOWP_FP8_BODY(a, b, BN, S, CL) { }
#endif
#define LOWP_FP8_KERNEL(name, a, b, BN, S, CL) \
  extern "C" __global__ void __launch_bounds__(384, 1) name (LOWP_FP8_PARAMS) LOWP_FP8_BODY(a, b, BN, S, CL)
#define LOWP_FP8_CODE_e4m3 E4M3
#define LOWP_FP8_CODE_e5m2 E5M2
/* a block alone, and in clusters of CL (launched so by the catalog) */
#define LOWP_FP8(a, b, BN, S) \
  LOWP_FP8_KERNEL(culua_matmul_lowp_fp8_##a##_##b##_n##BN##s##S, LOWP_FP8_CODE_##a, LOWP_FP8_CODE_##b, BN, S, 1)
#define LOWP_FP8_CLUSTER(a, b, BN, S, CL) \
  LOWP_FP8_KERNEL(culua_matmul_lowp_fp8_##a##_##b##_n##BN##s##S##c##CL, LOWP_FP8_CODE_##a, LOWP_FP8_CODE_##b, BN, S, CL)

/* every pair in the default tile (lua/catalog/matmul.lua's FP8_DEFAULT), and e4m3 x e4m3 in
** the others that tune.fp8_tile may pick (the bench's sweep) */
LOWP_FP8(e4m3, e4m3, 256, 4)
LOWP_FP8(e4m3, e5m2, 256, 4)
LOWP_FP8(e5m2, e4m3, 256, 4)
LOWP_FP8(e5m2, e5m2, 256, 4)
LOWP_FP8(e4m3, e4m3, 256, 3)
LOWP_FP8(e4m3, e4m3, 128, 4)
LOWP_FP8(e4m3, e4m3, 128, 6)
LOWP_FP8_CLUSTER(e4m3, e4m3, 256, 4, 2)

/* }====================================================== */
