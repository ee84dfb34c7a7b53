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
** A kernel calls pipeline<BM, BN, BK, STAGES, ARRIVALS, R>(M, N, K, splits,
** sk, P, counts, load, mma, store) with 384 threads and
** CULUA_SM90_SHARED(BM, BN, BK, STAGES) bytes of dynamic shared memory; load
** issues a k-tile's copies, mma adds k-tiles into a consumer thread's R
** accumulators, store writes them through Out.
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

/*
** A wgmma's accumulators as asm operands, d[i] .. d[i + 63] ("+f"), and the
** operand numbers of 64 and 128 of them in the instruction's text (%0 ..):
** the kernels' m64nNk* wrappers list d as CULUA_WG_D64(0), CULUA_WG_D64(64)
*/
#define CULUA_WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                       "+f"(d[i + 6]), "+f"(d[i + 7])
#define CULUA_WG_D64(i) CULUA_WG_D8(i), CULUA_WG_D8(i + 8), CULUA_WG_D8(i + 16), CULUA_WG_D8(i + 24), \
                        CULUA_WG_D8(i + 32), CULUA_WG_D8(i + 40), CULUA_WG_D8(i + 48), CULUA_WG_D8(i + 56)
#define CULUA_WG_R64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, " \
  "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define CULUA_WG_R128 CULUA_WG_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, " \
  "%102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, " \
  "%120, %121, %122, %123, %124, %125, %126, %127"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace culua {
namespace sm90 {

/* the final write of one element, as in matmul.cu: C is not read when beta == 0 */
__device__ __forceinline__ void store_c (float *C, size_t idx, float alpha, float acc, float beta) {
  C[idx] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[idx];
}

/* where a tile's sums go: element (m, n) of C, its rows ldc apart, or (W
** given) raw into split's packed M x N slice of W */
struct Out {
  float *C, *W;
  int N, ldc;
  float alpha, beta;
  __device__ Out (float *c, float *w, int split, int M, int n, int ld, float a, float b)
    : C(c), W(w == nullptr ? nullptr : w + (size_t)split * M * n), N(n), ldc(ld), alpha(a), beta(b) {}
  __device__ void operator() (int m, int n, float acc) const {
    if (W != nullptr) W[(size_t)m * N + n] = acc;
    else store_c(C, (size_t)m * ldc + n, alpha, acc, beta);
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

/* a 2-D TMA store of the box at (c0 = column, c1 = row) from shared memory at src (its
** bulk group committed by bulk_commit); what lies outside the map's matrix is not written */
__device__ __forceinline__ void tma_store (const culua_tmap *map, unsigned src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               :: "l"(map), "r"(c0), "r"(c1), "r"(src) : "memory");
}

__device__ __forceinline__ void bulk_commit () {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* this thread's bulk stores have read their shared memory (it may be written again) */
__device__ __forceinline__ void bulk_wait_read () {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

/* named barrier `id` (1..15) among `threads` threads: the kernels here use 1 for both consumer
** warpgroups (consumers_sync) and 2 + warpgroup for one (the staged stores of C) */
__device__ __forceinline__ void named_sync (int id, int threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

/*
** The byte offset of byte b of row r in a box of 128-byte rows laid out by
** TMA's 128-byte swizzle: 16-byte chunk k of row r lies at chunk k ^ (r % 8)
** (so the rows of an 8-row group put a given chunk in 8 different places)
*/
__device__ __forceinline__ unsigned swizzle128 (int r, int b) {
  return r * 128 + ((((b >> 4) ^ (r & 7)) << 4) | (b & 15));
}

/*
** A warpgroup's staged panel of C is written (its threads' shared stores
** done): the writes made visible to TMA (the async proxy), the leader's last
** bulk stores waited for until they have read their shared memory (which the
** next panel may write), and the warpgroup's named barrier `bar`. Then the
** leader stores the panel (tma_store, bulk_commit).
*/
__device__ __forceinline__ void staged_sync (int bar, bool leader) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (leader) bulk_wait_read();
  named_sync(bar, 128);
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
  __device__ unsigned end () const { return bars + 16 * STAGES; }   /* the first byte after the ring */
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
  /* the producer's thread: fill the ring's turns q0 .. q0 + KT - 1 with
  ** load(stage, kt) for k-tiles kt = 0 .. KT - 1, each stage once its
  ** consumers have released it. A block's turns go on from one tile to the
  ** next (stream-K), so the ring never drains between them. */
  template <class Load>
  __device__ void produce (int q0, int KT, Load load) const {
    for (int kt = 0; kt < KT; kt++) {
      const int q = q0 + kt, s = q % STAGES;
      if (q >= STAGES) mbar_wait(empty(s), (q / STAGES - 1) & 1);
      mbar_expect_tx(full(s), A_BYTES + B_BYTES);
      load(s, kt);
    }
  }
  /* a consumer: wait until turn q's k-tile has landed; returns its stage */
  __device__ int wait (int q) const {
    mbar_wait(full(q % STAGES), (q / STAGES) & 1);
    return q % STAGES;
  }
  /* a consumer warp that read stage s with ordinary loads (ld.shared, the generic
  ** proxy) gives it back, one arrival a warp. The TMA copies that refill it write
  ** through the async proxy, and only fence.proxy.async orders the warp's reads
  ** before them: without it ptxas issues the arrive while the last reads are still
  ** in flight (the float64 kernel's SASS, session 32), and on an H100 the refill
  ** overtook them in every 8192^3 product of the persistent float64 kernel (rows
  ** of one warp's fragments from the next k-tile). Kernels whose consumers read a
  ** stage by wgmma only, and wait for it, need no fence; nor, in practice, tf32's and
  ** the 16-bit rs kernel's, whose ld.shared / ldmatrix fragments feed wgmmas waited
  ** for before the release (their reads are then done), though the memory model
  ** would have the fence there too. */
  __device__ void release_read (int s) const {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if ((threadIdx.x & 31) == 0) mbar_arrive(empty(s));
  }
  /* a consumer warpgroup's turns q0 .. q0 + KT - 1 for wgmmas that take A from
  ** registers (tf32's, the 16-bit rs kernel's): frag(f, bbuf) reads a k-tile's
  ** fragments into f, mma(f, abuf) issues its wgmmas. k-tile kt + 1's fragments are
  ** read while kt's wgmmas run, into the other of two sets; waiting for all the
  ** wgmmas after that (not all but one) keeps ptxas from serializing them. The loop
  ** goes two k-tiles a turn with h unrolled so that each set's index is a constant:
  ** a[kt & 1] would put the sets in local memory. Thread 0 of the warpgroup (ct: the
  ** consumers' thread index) gives each stage back. */
  template <class Frag, class Mma>
  __device__ __forceinline__ void consume_rs (int q0, int KT, int ct, Frag frag, Mma mma) const {
    unsigned a[2][4][4];
    if (KT > 0) frag(a[0], bbuf(wait(q0)));
    for (int kt = 0; kt < KT; kt += 2) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        if (kt + h < KT) {
          const int s = (q0 + kt + h) % STAGES;
          asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
          mma(a[h], abuf(s));
          asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
          if (kt + h + 1 < KT) frag(a[h ^ 1], bbuf(wait(q0 + kt + h + 1)));
          asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
          if ((ct & 127) == 0) mbar_arrive(empty(s));
        }
      }
    }
  }
};

/* }====================================================== */


/* {====================================================== stream-K */

/* the consumers' own barrier (the producer warpgroup has left): 256 threads */
__device__ __forceinline__ void consumers_sync () {
  asm volatile("bar.sync 1, 256;" ::: "memory");
}

__device__ __forceinline__ unsigned ld_acquire (const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/*
** Stream-K (Osama et al., PPoPP 2023). Tiles that would fill only part of a
** last wave are shared out instead: sk blocks take equal shares of their
** k-tiles, laid end to end tile after tile, so every block does the same
** work and the wave ends together. The catalog makes a share at least half a
** tile and less than two, so a share crosses at most one tile boundary and
** a tile has one to three contributors; each block has at most two partial
** tiles, its first and its last.
**
** A block takes each tile's part of its share (a run) downwards in k. The
** shares start at k-tiles that differ from block to block, so upwards the
** blocks would each read their own slices of A and B: with 248 tiles shared
** by 132 blocks at n = 4096 on an H100, tf32 ran at 0.6x of no stream-K
** upwards, and 0.8x downwards. Downwards, a block's
** first run is at k-tile all - 1 - q at its turn q, whatever its share, and
** its second at length - 1 - q, the shares' lengths differing by one at
** most: at any time the blocks are at two k-tiles, and share their reads in
** L2 as blocks of a wave of whole tiles do.
*/
struct Streamk {
  long long total;   /* the stream-K tiles' k-tiles, end to end */
  int all, sk;       /* k-tiles a tile; stream-K blocks */
  __device__ long long begin (int c) const { return c * total / sk; }
  /* the block whose share holds k-tile x */
  __device__ int owner (long long x) const { return (int)(((x + 1) * sk - 1) / total); }
  /* block c's partial of tile t: its first (slot 2c) or its last (2c + 1) */
  __device__ int slot (int c, int t) const { return 2 * c + (begin(c) / all == t ? 0 : 1); }
};

/*
** Contributors c0 .. c0 + n - 1 of a tile meet: each leaves its partial
** sums in its slot of P and counts itself in; the last to come adds them up
** and returns true, so that it writes the tile. Nobody waits, so no block
** can hold a multiprocessor that another needs. The threads' accumulators go
** to P thread by thread (coalesced, and read back the same way). The sum
** runs in the contributors' order, so it does not depend on who came last;
** a block that finds all the others there already keeps its own sums in
** acc when that order allows (it is the first, or one of two). The last
** resets the count for the next launch.
*/
template <int R, class T, class Run>
__device__ __forceinline__ bool streamk_meet (T (&acc)[R], T *P, unsigned *count, const Run &run) {
  const int t = run.t, me = run.j, c0 = run.c0, n = run.n;
  const Streamk &sk = run.sks;
  __shared__ unsigned seen;
  const int ct = threadIdx.x - 128;
  auto part = [&] (int c) { return P + (size_t)sk.slot(c, t) * R * 256 + ct; };
  consumers_sync();   /* all have read the last meeting's `seen` */
  if (ct == 0) seen = ld_acquire(count);
  consumers_sync();
  const bool keep = seen == (unsigned)n - 1 && (me == c0 || n == 2);
  if (!keep) {
    T *p = part(me);
#pragma unroll
    for (int r = 0; r < R; r++) __stcg(p + r * 256, acc[r]);
    __threadfence();
    consumers_sync();
    if (ct == 0) {
      seen = atomicAdd(count, 1u);
      __threadfence();
    }
    consumers_sync();
    if (seen != (unsigned)n - 1) return false;
    const T *p0 = part(c0);
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = __ldcg(p0 + r * 256);
  }
  if (ct == 0) *count = 0;
  for (int c = c0 + 1 - (keep && me != c0); c < c0 + n; c++) {   /* keeping: all but me; else all after c0 */
    if (keep && c == me) continue;
    const T *p = part(c);
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] += __ldcg(p + r * 256);
  }
  return true;
}

/* }====================================================== */


/* {====================================================== the pipeline */

/*
** A block's work, run by run: the first gridDim.x - sk blocks (dp) take a tile
** each, block b tile b % tiles, the k-tiles of split b / tiles (of
** `splits`); the last sk blocks, when sk > 0 (and splits is 1), share the
** remaining tiles by stream-K. With sk_tiles >= 0 (and splits 1) the dp blocks
** are persistent instead: block b takes tiles b, b + dp, ... of the first
** tiles - sk_tiles, its ring's turns running on from one tile to the next.
*/
struct Run {
  int m0, n0;      /* the tile's origin in C */
  int q, k0, KT;   /* the ring's turns q .. q + KT - 1 take the tile's k-tiles k0 .. k0 + KT - 1, */
  int down;        /* upwards (0), or downwards (1: stream-K) */
  int split;       /* split-K's slice */
  int t, c0, n;    /* stream-K: the tile, its first contributor and how many there are (1 else) */
  int j;           /* stream-K: this block's number */
  Streamk sks;
};

/* calls f(run) for each of this block's runs of k-tiles, in order */
template <int BM, int BN, int BK, class F>
__device__ __forceinline__ void each_run (int M, int N, int K, int splits, int sk, F f, int sk_tiles = -1) {
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), all = (K + BK - 1) / BK;
  const int dp = gridDim.x - sk, dp_tiles = sk_tiles < 0 ? dp : tiles - sk_tiles;
  Run r;
  if (blockIdx.x < dp) {   /* a tile, or a split of one (possibly no k-tiles); persistent: tiles */
    const int per = (all + splits - 1) / splits;
    r.split = sk_tiles < 0 ? blockIdx.x / tiles : 0;
    r.q = 0, r.k0 = r.split * per, r.KT = max(0, min(all, r.k0 + per) - r.k0), r.down = 0;
    r.t = r.c0 = 0, r.n = 1;
    for (int b = blockIdx.x; b < (sk_tiles < 0 ? blockIdx.x + 1 : dp_tiles); b += dp, r.q += r.KT) {
      tile_origin<BM, BN>(M, N, b % tiles, r.m0, r.n0);
      f(r);
    }
    return;
  }
  /* stream-K: block j's share [begin(j), begin(j + 1)) of tiles dp_tiles .. tiles - 1, end to end */
  const Streamk &sks = r.sks = Streamk{(long long)(tiles - dp_tiles) * all, all, sk};
  const long long end = sks.begin((r.j = blockIdx.x - dp) + 1);
  r.split = 0, r.q = 0, r.down = 1;
  for (long long it = sks.begin(r.j); it < end; it += r.KT, r.q += r.KT) {
    r.t = (int)(it / all), r.k0 = (int)(it - (long long)r.t * all);
    r.KT = (int)min((long long)all, end - (long long)r.t * all) - r.k0;
    r.c0 = sks.owner((long long)r.t * all), r.n = sks.owner((long long)(r.t + 1) * all - 1) - r.c0 + 1;
    tile_origin<BM, BN>(M, N, dp_tiles + r.t, r.m0, r.n0);
    f(r);
  }
}

/*
** What the kernels share: BM x BN tiles of C, k-tiles BK deep in a ring of
** STAGES (ARRIVALS releases free a stage), warpgroup 0 the producer (one
** thread calls load(ring, stage, k-tile, m0, n0) for each k-tile), warpgroups
** 1 and 2 the consumers, R accumulators a thread: mma(ring, acc, q0, KT) adds
** the ring's turns q0 .. q0 + KT - 1 into acc, store(ring, acc, m0, n0, split)
** writes the tile (by TMA stores too, staged after ring.end(): a consumer
** warpgroup's first thread waits for their reads of shared memory before the
** block ends). Their registers come from the producer by setmaxnreg:
** 384 x 168 at launch is 128 x 24 + 256 x 240, so the consumers get all the
** producer gives (240 against 232 made fast 2% faster at n = 8192, H100).
** ptxas gives code the consumers' 240 only where no path from the producer's
** setmaxnreg reaches, hence two calls of each_run.
**
** The blocks' work is each_run's. Stream-K takes 2 x sk slots of BM x BN
** floats in P and a count a stream-K tile in counts (zero before the launch,
** and zero again after it).
*/
template <int BM, int BN, int BK, int STAGES, int ARRIVALS, int R, class Load, class Mma, class Store>
__device__ __forceinline__ void pipeline (int M, int N, int K, int splits, int sk, float *P, unsigned *counts,
                                          Load load, Mma mma, Store store) {
  static_assert(R * 256 == BM * BN, "a consumer thread holds R of the tile's sums");
  extern __shared__ unsigned char smem_raw[];
  const Ring<STAGES, BM * BK * 4, BK * BN * 4> ring(smem_raw);
  ring.init(ARRIVALS);
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x == 0)
      each_run<BM, BN, BK>(M, N, K, splits, sk, [&] (const Run &r) {
        ring.produce(r.q, r.KT, [&] (int s, int kt) {
          load(ring, s, r.down ? r.k0 + r.KT - 1 - kt : r.k0 + kt, r.m0, r.n0);
        });
      });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  float acc[R];
  each_run<BM, BN, BK>(M, N, K, splits, sk, [&] (const Run &r) {
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    mma(ring, acc, r.q, r.KT);
    if (r.n == 1 || streamk_meet(acc, P, counts + r.t, r))
      store(ring, acc, r.m0, r.n0, r.split);
  });
  if ((threadIdx.x & 127) == 0) bulk_wait_read();   /* (a store's TMA stores have read their staging) */
}

/* }====================================================== */

}  /* namespace sm90 */
}  /* namespace culua */

#endif

#endif
