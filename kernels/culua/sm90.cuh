/*
** culua/sm90.cuh
** The skeleton of culua's Hopper matmul kernels (matmul_sm90.cu and
** matmul_sm90_fast.cu): a ring of k-tiles in shared memory that one producer
** warpgroup fills with TMA copies, guarded by full and empty mbarriers, for
** two consumer warpgroups that compute. The mbarriers replace
** __syncthreads, so consumers drift apart and keep the math units busy while
** others wait. sm_90a only (setmaxnreg); the device code is in namespace
** culua::sm90.
**
** A kernel calls pipeline<BM, BN, BK, STAGES, ARRIVALS>(M, N, K, splits,
** load, consume) with 384 threads and CULUA_SM90_SHARED(BM, BN, BK, STAGES)
** bytes of dynamic shared memory; load issues a k-tile's copies, consume
** computes a tile and writes it through Out.
*/

#ifndef culua_sm90_cuh
#define culua_sm90_cuh

#include <culua/common.cuh>

/* the dynamic shared memory of a ring of STAGES k-tiles of a BM x BN tile, BK
** deep: its buffers, two mbarriers a stage, and room to align the start to
** 1024 bytes */
#define CULUA_SM90_SHARED(BM, BN, BK, STAGES) \
  ((STAGES) * ((BM) * (BK) * 4 + (BK) * (BN) * 4) + 2 * (STAGES) * 8 + 1024)

/* CUtensorMap without cuda.h: 128 opaque bytes, 64-byte aligned */
struct __align__(64) culua_tmap { unsigned long long w[16]; };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace culua {
namespace sm90 {

/* the final write of one element, as in matmul.cu: C is not read when beta == 0 */
__device__ __forceinline__ void store_c (float *C, size_t idx, float alpha, float acc, float beta) {
  C[idx] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[idx];
}

/* where a tile's sums go: into C, or (W given) raw into split's M x N slice of W */
struct Out {
  float *C, *W;
  float alpha, beta;
  __device__ Out (float *c, float *w, int split, int M, int N, float a, float b)
    : C(c), W(w == nullptr ? nullptr : w + (size_t)split * M * N), alpha(a), beta(b) {}
  __device__ void operator() (size_t idx, float acc) const {
    if (W != nullptr) W[idx] = acc;
    else store_c(C, idx, alpha, acc, beta);
  }
};

/* {====================================================== PTX wrappers */

__device__ __forceinline__ unsigned smem_u32 (const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ unsigned lds (unsigned a) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}

__device__ __forceinline__ float4 lds4 (unsigned a) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
  return v;
}

__device__ __forceinline__ void mbar_init (unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx (unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive (unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait (unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nWAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}"
               :: "r"(bar), "r"(parity) : "memory");
}

/* a 2-D TMA copy of the box at (c0 = column, c1 = row) that signals bar */
__device__ __forceinline__ void tma_load (unsigned dst, const culua_tmap *map, unsigned bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

/* }====================================================== */


/* {====================================================== the ring */

/*
** The origin of this block's BM x BN tile of C. Groups of GROUP tile rows
** walk the columns together, so B's columns are read from L2 once per group
** rather than once per tile row.
*/
template <int BM, int BN>
__device__ __forceinline__ void tile_origin (int M, int N, int b, int &m0, int &n0) {
  constexpr int GROUP = 8;
  const int tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN;
  const int first = b / (GROUP * tn) * GROUP, gs = min(GROUP, tm - first), r = b % (GROUP * tn);
  n0 = (r / gs) * BN;
  m0 = (first + r % gs) * BM;
}

/*
** A ring of STAGES buffers of A_BYTES + B_BYTES in dynamic shared memory,
** after its 1024-byte aligned start (the 128-byte swizzle repeats every 1024
** bytes), then a full and an empty mbarrier per stage. The empty barrier
** expects `consumers` arrivals.
*/
template <int STAGES, int A_BYTES, int B_BYTES>
struct Ring {
  unsigned a, b, bars;
  __device__ Ring (unsigned char *smem) {
    a = (smem_u32(smem) + 1023) & ~1023u;
    b = a + STAGES * A_BYTES;
    bars = b + STAGES * B_BYTES;
  }
  __device__ unsigned full (int s) const { return bars + 8 * s; }
  __device__ unsigned empty (int s) const { return bars + 8 * (STAGES + s); }
  __device__ unsigned abuf (int s) const { return a + s * A_BYTES; }
  __device__ unsigned bbuf (int s) const { return b + s * B_BYTES; }
  __device__ void init (unsigned consumers) const {
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; s++) {
        mbar_init(full(s), 1);     /* the producer's expect_tx */
        mbar_init(empty(s), consumers);
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
  }
  /* the producer's thread: fill stage after stage with load(stage, k-tile),
  ** each once its consumers have released it */
  template <class Load>
  __device__ void produce (int KT, Load load) const {
    for (int kt = 0; kt < KT; kt++) {
      const int s = kt % STAGES;
      if (kt >= STAGES) mbar_wait(empty(s), (kt / STAGES - 1) & 1);
      mbar_expect_tx(full(s), A_BYTES + B_BYTES);
      load(s, kt);
    }
  }
  /* a consumer: wait until k-tile kt has landed; returns its stage */
  __device__ int wait (int kt) const {
    mbar_wait(full(kt % STAGES), (kt / STAGES) & 1);
    return kt % STAGES;
  }
};


/*
** What the kernels share: a BM x BN tile of C, k-tiles BK deep in a ring of
** STAGES (ARRIVALS releases free a stage), warpgroup 0 the producer (one thread
** calls load(ring, stage, k-tile, m0, n0) for each k-tile), warpgroups 1
** and 2 the consumers (consume(ring, m0, n0, k-tiles, split)), with their
** registers taken from the producer by setmaxnreg: 384 x 168 at launch
** is 128 x 24 + 256 x 240, so the consumers get all the producer gives
** (240 against 232 made fast 2% faster at n = 8192 on an H100).
*/
template <int BM, int BN, int BK, int STAGES, int ARRIVALS, class Load, class Consume>
__device__ __forceinline__ void pipeline (int M, int N, int K, int splits, Load load, Consume consume) {
  extern __shared__ unsigned char smem_raw[];
  const Ring<STAGES, BM * BK * 4, BK * BN * 4> ring(smem_raw);
  /* block b: tile b % tiles, k-tiles [kt0, kt0 + KT) of split b / tiles (possibly none) */
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), split = blockIdx.x / tiles;
  const int all = (K + BK - 1) / BK, per = (all + splits - 1) / splits, kt0 = split * per;
  const int KT = max(0, min(all, kt0 + per) - kt0);
  int m0, n0;
  tile_origin<BM, BN>(M, N, blockIdx.x % tiles, m0, n0);
  ring.init(ARRIVALS);
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x == 0)
      ring.produce(KT, [&] (int s, int kt) { load(ring, s, kt0 + kt, m0, n0); });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  consume(ring, m0, n0, KT, split);
}

/* }====================================================== */

}  /* namespace sm90 */
}  /* namespace culua */

#endif

#endif
