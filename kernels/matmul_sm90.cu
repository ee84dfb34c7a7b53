/*
** matmul_sm90.cu
** The Hopper half of the matmul family: fast and tf32 fed by the Tensor
** Memory Accelerator, tf32 on wgmma. Built for sm_90a only (wgmma and
** setmaxnreg exist nowhere else); the catalog loads it on devices of compute
** capability 9.0 and uses matmul.cu's kernels elsewhere.
**
** C = alpha * A * B + beta * C, row-major float32, M x K times K x N, with
** K and N multiples of 4 and 16-byte aligned bases (what TMA can address).
** Both kernels take (int M, int N, int K, float alpha, tensor map of A,
** tensor map of B, float beta, float *C, float *W, int splits), 384
** threads and dynamic shared memory: one producer warpgroup issues TMA
** copies into a ring of STAGES buffers guarded by full and empty mbarriers,
** and two consumer warpgroups compute. The mbarriers replace __syncthreads,
** so consumers drift apart and keep the math units busy while others wait.
**
** culua_matmul_tf32_wgmma: k-tiles of 32 in 4 stages; A in 256 x 32 boxes with
** the 128-byte swizzle, B in 32 x 32 boxes with the 128-byte swizzle,
** CULUA_SM90_SHARED(256, 128, 32, 4) bytes.
**
** wgmma takes tf32 operands from shared memory only in K-major layout, and
** B is row-major (N-major). So the kernel computes C^T = B^T A^T: A's tile
** (K-major, as TMA lays it out) is wgmma's shared-memory operand, and B^T's
** fragments come from registers, read out of B's tile by each thread.
** Each consumer warpgroup owns 64 columns x 256 rows of C's 256 x 128 tile
** (128 accumulators a thread).
**
** culua_matmul_fast_tma: FFMA, no tensor cores. k-tiles of 16 in 8 stages; A
** in 128 x 16 boxes with the 64-byte swizzle, B in 16 x 128 boxes unswizzled,
** CULUA_SM90_SHARED(128, 256, 16, 8) bytes. C's 128 x 256 tile, 8 x 16 a
** thread: TMA takes the staging loads, stores and block barriers out of the
** FFMA warps.
**
** Split-K: with splits > 1 the grid has `splits` blocks a tile, each taking
** an equal run of the k-tiles and writing its raw partial sums to its M x N
** slice of the workspace W; culua_matmul_splitk then adds the slices, in
** order, into C. Small products have too few tiles to fill the machine.
*/

#include <culua/common.cuh>

/* the dynamic shared memory of a ring of STAGES k-tiles of a BM x BN tile, BK
** deep: its buffers, two mbarriers a stage, and room to align the start to
** 1024 bytes */
#define CULUA_SM90_SHARED(BM, BN, BK, STAGES) \
  ((STAGES) * ((BM) * (BK) * 4 + (BK) * (BN) * 4) + 2 * (STAGES) * 8 + 1024)

/* CUtensorMap without cuda.h: 128 opaque bytes, 64-byte aligned */
struct __align__(64) culua_tmap { unsigned long long w[16]; };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

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

__device__ __forceinline__ unsigned to_tf32 (unsigned x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
  return r;
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

/* the descriptor of a K-major operand with 128-byte swizzle (8-row groups 1024 bytes apart) */
__device__ __forceinline__ unsigned long long desc_k128 (unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

/* d (64 x 256, f32) += a (64 x 8, tf32 fragments in registers) * the 8 x 256 tile at desc */
__device__ __forceinline__ void wgmma_m64n256k8 (float *d, const unsigned *a, unsigned long long desc) {
  asm volatile("{\n"
               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
               "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
               "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "
               "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "
               "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, "
               "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, "
               "%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
               "}, {%128, %129, %130, %131}, %132, 1, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                 "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                 "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                 "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                 "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                 "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
                 "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
                 "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
                 "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
                 "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
                 "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),
                 "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
                 "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
                 "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
                 "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),
                 "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
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
** What both kernels share: a BM x BN tile of C, k-tiles BK deep in a ring of
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

/* {====================================================== tf32: wgmma */

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_tf32_wgmma (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                         const __grid_constant__ culua_tmap tmB, float beta, float *C, float *W, int splits) {
  constexpr int BM = 256, BN = 128, BK = 32, B_BYTES = BK * BN * 4;
  pipeline<BM, BN, BK, 4, 2>(M, N, K, splits, [&] (const auto &ring, int s, int kt, int m0, int n0) {
    tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
    for (int q = 0; q < BN / 32; q++)   /* B in 32-column panels: a swizzled row is 128 bytes */
      tma_load(ring.bbuf(s) + q * (B_BYTES / 4), &tmB, ring.full(s), n0 + 32 * q, kt * BK);
  }, [&] (const auto &ring, int m0, int n0, int KT, int split) {   /* one release per consumer warpgroup */
    const Out out(C, W, split, M, N, alpha, beta);
    const int ct = threadIdx.x - 128, wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, t = lane & 3;
    const int r0 = wg * 64 + warp * 16 + g;    /* the tile column of fragment rows r0 and r0 + 8 */
    float d[BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; i++) d[i] = 0.0f;
    /* element (k, n) of B's tile: panel n / 32, row k, 16-byte chunk swizzled by k % 8 */
    auto boff = [] (int k, int n) {
      return (n >> 5) * (B_BYTES / 4) + k * 128 + ((((n & 31) >> 2) ^ (k & 7)) << 4) + ((n & 3) << 2);
    };
    for (int kt = 0; kt < KT; kt++) {
      const int s = ring.wait(kt);
      const unsigned as = ring.abuf(s), bs = ring.bbuf(s);
      unsigned a[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; kk++) {   /* m16n8k8 fragment layout: rows g, g + 8; columns t, t + 4 */
        const int k = kk * 8 + t;
        a[kk][0] = to_tf32(lds(bs + boff(k, r0)));
        a[kk][1] = to_tf32(lds(bs + boff(k, r0 + 8)));
        a[kk][2] = to_tf32(lds(bs + boff(k + 4, r0)));
        a[kk][3] = to_tf32(lds(bs + boff(k + 4, r0 + 8)));
      }
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < 4; kk++) wgmma_m64n256k8(d, a[kk], desc_k128(as + kk * 32));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      /* waiting for all (not all but one) keeps ptxas from serializing: the
      ** next fragments are written while no wgmma is in flight */
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      if ((ct & 127) == 0) mbar_arrive(ring.empty(s));
    }

    /* accumulator 4j + q: C^T row r0 (+8 for q >= 2), column 8j + 2t (+1 for odd q) */
    const int n = n0 + r0;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int nn = n + (q >= 2 ? 8 : 0), mm = m0 + 8 * j + 2 * t + (q & 1);
        if (mm < M && nn < N) out((size_t)mm * N + nn, d[4 * j + q]);
      }
  });
}

/* }====================================================== */


/* {====================================================== fast: FFMA */

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_fast_tma (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                       const __grid_constant__ culua_tmap tmB, float beta, float *C, float *W, int splits) {
  /* k-tiles of 16 in 8 stages halve the unrolled loop of 32 in 4: 6% faster at
  ** n = 4096 and 1% at 8192 (H100), the instruction cache missing less */
  constexpr int BM = 128, BN = 256, BK = 16, B_BYTES = BK * BN * 4;
  pipeline<BM, BN, BK, 8, 8>(M, N, K, splits, [&] (const auto &ring, int s, int kt, int m0, int n0) {
    tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
    tma_load(ring.bbuf(s), &tmB, ring.full(s), n0, kt * BK);   /* two 128-column halves */
    tma_load(ring.bbuf(s) + B_BYTES / 2, &tmB, ring.full(s), n0 + 128, kt * BK);
  }, [&] (const auto &ring, int m0, int n0, int KT, int split) {   /* one release per consumer warp */
    const Out out(C, W, split, M, N, alpha, beta);
    /* 8 warps as 2 x 4 of 64 x 64; a thread: rows lm + 8i, columns 4ln + 16j (+0..3).
    ** The 8 lanes of a quarter-warp read 8 rows of A, two a 128-byte line, whose
    ** swizzled chunks differ, and one 16-byte piece of B (a broadcast): no bank
    ** conflicts. */
    const int ct = threadIdx.x - 128, warp = ct >> 5, lane = ct & 31, lm = lane & 7, ln = lane >> 3;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 64;
    float acc[8][16];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 16; j++) acc[i][j] = 0.0f;
    for (int kt = 0; kt < KT; kt++) {
      const int s = ring.wait(kt);
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
              acc[i][j] = fmaf(av, bv[j], acc[i][j]);
            }
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(ring.empty(s));
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int m = m0 + wm + lm + 8 * i;
#pragma unroll
      for (int j = 0; j < 16; j++) {
        const int n = n0 + wn + ln * 4 + 16 * (j >> 2) + (j & 3);
        if (m < M && n < N) out((size_t)m * N + n, acc[i][j]);
      }
    }
  });
}

/* }====================================================== */


/* {====================================================== split-K */

/* C = alpha * (W[0] + W[1] + ... + W[splits - 1]) + beta * C, the slices M x N apart */
extern "C" __global__ void culua_matmul_splitk (long long MN, int splits, float alpha, const float *W, float beta, float *C) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < MN; i += (long long)gridDim.x * blockDim.x) {
    float acc = W[i];
    for (int s = 1; s < splits; s++) acc += W[s * MN + i];
    store_c(C, (size_t)i, alpha, acc, beta);
  }
}

/* }====================================================== */

#endif
