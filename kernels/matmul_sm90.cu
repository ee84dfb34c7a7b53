/*
** matmul_sm90.cu
** The Hopper half of the matmul family's tf32, fed by the Tensor Memory
** Accelerator, on wgmma, and the split-K reduction of both Hopper kernels
** (fast is in matmul_sm90_fast.cu). Built for sm_90a only (wgmma and
** setmaxnreg exist nowhere else); the catalog loads it on devices of compute
** capability 9.0 and uses matmul.cu's kernels elsewhere.
**
** C = alpha * A * B + beta * C, row-major float32, M x K times K x N, A's
** and B's first elements and row strides 16-byte aligned (what TMA can
** address; the tensor maps give their sizes and strides, so they may be
** blocks of larger matrices). The kernel takes (int M, int N,
** int K, float alpha, tensor map of A, tensor map of B, float beta, float *C,
** float *W, int splits, int sk, unsigned *counts, int ldc, tensor map of C,
** int tmac), 384 threads and dynamic shared memory, and runs culua/sm90.cuh's
** pipeline; C's rows are ldc elements apart.
**
** culua_matmul_tf32_wgmma: k-tiles of 32 in 4 stages; A in 256 x 32 boxes with
** the 128-byte swizzle, B in 32 x 32 boxes with the 128-byte swizzle,
** CULUA_SM90_SHARED(256, 128, 32, 4) + CULUA_TF32_CSTAGE bytes. Where tmac is
** 1 (and splits 1) the tiles go to C through shared memory and TMA stores
** (tf32_store_tma below; tmC: C's map in 32 x 32 boxes, 128-byte swizzle),
** else from registers.
**
** wgmma takes tf32 operands from shared memory only in K-major layout, and
** B is row-major (N-major). So the kernel computes C^T = B^T A^T: A's tile
** (K-major, as TMA lays it out) is wgmma's shared-memory operand, and B^T's
** fragments come from registers, read out of B's tile by each thread.
** Each consumer warpgroup owns 64 columns x 256 rows of C's 256 x 128 tile
** (128 accumulators a thread).
**
** Split-K: with splits > 1 the grid has `splits` blocks a tile, each taking
** an equal run of the k-tiles and writing its raw partial sums to its M x N
** slice of the workspace W; culua_matmul_splitk then adds the slices, in
** order, into C. Small products have too few tiles to fill the machine.
**
** Stream-K: with sk > 0 the last sk blocks share the tiles that would leave
** the last wave part empty (see culua/sm90.cuh); W holds 2 x sk tiles of
** partial sums, counts a count a tile, zero between launches.
*/

#include <culua/sm90.cuh>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

using namespace culua::sm90;

/* {====================================================== tf32: wgmma */

__device__ __forceinline__ unsigned to_tf32 (unsigned x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
  return r;
}

/* the descriptor of a K-major operand with 128-byte swizzle (8-row groups 1024 bytes apart) */
__device__ __forceinline__ unsigned long long desc_k128 (unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

/* d (64 x 256, f32) += a (64 x 8, tf32 fragments in registers) * the 8 x 256 tile at desc */
__device__ __forceinline__ void wgmma_m64n256k8 (float *d, const unsigned *a, unsigned long long desc) {
  asm volatile("{\n"
               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
               CULUA_WG_R128
               "}, {%128, %129, %130, %131}, %132, 1, 1, 1;\n"
               "}\n"
               : CULUA_WG_D64(0), CULUA_WG_D64(64)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

/* the tf32 kernel's shape, which lua/catalog/matmul.lua reads: C's BM x BN
** tile, BK of k a stage in STAGES stages; A's TMA boxes BM x BK, swizzled
** 128 bytes; B's BK x BPANEL panels, a row of BPANEL floats one 128-byte swizzle */
#define CULUA_TF32_BM 256
#define CULUA_TF32_BN 128
#define CULUA_TF32_BK 32
#define CULUA_TF32_STAGES 4
#define CULUA_TF32_BPANEL 32
#define CULUA_TF32_SWIZZLE 128
static_assert(CULUA_TF32_BPANEL * 4 == CULUA_TF32_SWIZZLE, "a B panel's row is one swizzle span");
/* C by TMA stores (tf32_store_tma): boxes of CULUA_TF32_CROWS rows x 128 bytes (the catalog's
** map of C), staged after the ring in 16 KB a consumer warpgroup from the next 1024-byte boundary */
#define CULUA_TF32_CROWS 32
#define CULUA_TF32_CSTAGE (2 * 2 * 2 * CULUA_TF32_CROWS * 128 + 1024)
static_assert(CULUA_SM90_SHARED(CULUA_TF32_BM, CULUA_TF32_BN, CULUA_TF32_BK, CULUA_TF32_STAGES) + CULUA_TF32_CSTAGE
              <= 227 * 1024, "the ring and C's staging fit a block's shared memory");

/*
** A consumer thread's part of tf32's 256 x 128 tile (C^T's fragments: accumulator
** 4j + q is C's row m0 + 8j + 2t (+1 for odd q), column n0 + r0 (+8 for q >= 2),
** r0 = 64 wg + 16 warp + g) written through shared memory and TMA stores, as
** culua/matmul_lowp.cuh's lowp_ss_store_tma does for the 16-bit tiles: a
** warpgroup's 256 x 64 goes in 8 steps of 32 rows, each two 32 x 32 panels of
** 128-byte rows (warps 0-1 hold the first panel's columns, 2-3 the second's)
** written into one of two 8 KB buffers at `stage` as TMA's 128-byte swizzle
** lays them out (16-byte chunk k of row r at k ^ (r % 8); a warp's floats, 4
** rows x 8 columns, hit 32 banks), then stored by the leader as two boxes of
** tmC. One barrier a step: before it the leader waits for the last step's
** stores to have read their buffer, which the next step writes. C's rows and
** columns past M and N land in the buffers and the map drops them.
*/
__device__ __forceinline__ void tf32_store_tma (const float (&d)[CULUA_TF32_BM / 2], int M, int N, int m0, int n0, int ldc,
                                                float alpha, float beta, const float *C, const culua_tmap *tmC,
                                                unsigned stage, int wg, int warp, int g, int t) {
  static_assert(CULUA_TF32_CROWS == 32, "steps of 32 rows: 4 j's of the fragments");
  const int cp = warp >> 1, kc = (warp & 1) * 16 + g, nw = n0 + wg * 64;   /* cp: the thread's panel, kc its column */
  const bool leader = threadIdx.x % 128 == 0;
#pragma unroll
  for (int s = 0; s < CULUA_TF32_BM / 32; s++) {
    const unsigned buf = stage + (s & 1) * 8192;
#pragma unroll
    for (int jj = 0; jj < 4; jj++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int r = 8 * jj + 2 * t + (q & 1), k = kc + (q >= 2 ? 8 : 0);   /* row and column in the panel */
        float v = alpha * d[4 * (4 * s + jj) + q];
        if (beta != 0.0f) {
          const int mm = m0 + 32 * s + r, nn = nw + 32 * cp + k;
          if (mm < M && nn < N) v += beta * C[(size_t)mm * ldc + nn];
        }
        asm volatile("st.shared.f32 [%0], %1;" :: "r"(buf + cp * 4096 + swizzle128(r, 4 * k)), "f"(v) : "memory");
      }
    staged_sync(2 + wg, leader);   /* (and the last step's stores have read the buffer the next one writes) */
    if (leader) {
      tma_store(tmC, buf, nw, m0 + 32 * s);
      tma_store(tmC, buf + 4096, nw + 32, m0 + 32 * s);
      bulk_commit();
    }
  }
}

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_tf32_wgmma (int M, int N, int K, float alpha, const __grid_constant__ culua_tmap tmA,
                         const __grid_constant__ culua_tmap tmB, float beta, float *C, float *W, int splits,
                         int sk, unsigned *counts, int ldc, const __grid_constant__ culua_tmap tmC, int tmac) {
  constexpr int BM = CULUA_TF32_BM, BN = CULUA_TF32_BN, BK = CULUA_TF32_BK, B_BYTES = BK * BN * 4;
  const int ct = threadIdx.x - 128, wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, t = lane & 3;
  const int r0 = wg * 64 + warp * 16 + g;    /* the tile column of fragment rows r0 and r0 + 8 */
  pipeline<BM, BN, BK, CULUA_TF32_STAGES, 2, BM / 2>(M, N, K, splits, sk, W, counts, [&] (const auto &ring, int s, int kt, int m0, int n0) {
    tma_load(ring.abuf(s), &tmA, ring.full(s), kt * BK, m0);
    for (int q = 0; q < BN / CULUA_TF32_BPANEL; q++)   /* B in 32-column panels: a swizzled row is 128 bytes */
      tma_load(ring.bbuf(s) + q * (B_BYTES / 4), &tmB, ring.full(s), n0 + CULUA_TF32_BPANEL * q, kt * BK);
  }, [&] (const auto &ring, float (&d)[BM / 2], int q0, int KT) {   /* one release per consumer warpgroup */
    /* element (k, n) of B's tile: panel n / 32, row k of it */
    auto boff = [] (int k, int n) { return (n >> 5) * (B_BYTES / 4) + swizzle128(k, 4 * (n & 31)); };
    /* B^T's fragments of the k-tile at bs (m16n8k8 layout: rows g, g + 8; columns t, t + 4) */
    auto fragments = [&] (unsigned (&a)[4][4], unsigned bs) {
#pragma unroll
      for (int kk = 0; kk < 4; kk++) {
        const int k = kk * 8 + t;
        a[kk][0] = to_tf32(lds(bs + boff(k, r0)));
        a[kk][1] = to_tf32(lds(bs + boff(k, r0 + 8)));
        a[kk][2] = to_tf32(lds(bs + boff(k + 4, r0)));
        a[kk][3] = to_tf32(lds(bs + boff(k + 4, r0 + 8)));
      }
    };
    /* (the ring's k-loop for register fragments, as the 16-bit rs kernel's) */
    ring.consume_rs(q0, KT, ct, fragments, [&] (const unsigned (&f)[4][4], unsigned as) {
#pragma unroll
      for (int kk = 0; kk < 4; kk++) wgmma_m64n256k8(d, f[kk], desc_k128(as + kk * 32));
    });
  }, [&] (const auto &ring, const float (&d)[BM / 2], int m0, int n0, int split) {
    if (tmac && splits == 1) {   /* (the staging after the ring) */
      tf32_store_tma(d, M, N, m0, n0, ldc, alpha, beta, C, &tmC, ((ring.end() + 1023) & ~1023u) + wg * 2 * 8192, wg, warp, g, t);
      return;
    }
    const Out out(C, splits > 1 ? W : nullptr, split, M, N, ldc, alpha, beta);
    /* accumulator 4j + q: C^T row r0 (+8 for q >= 2), column 8j + 2t (+1 for odd q) */
    const int n = n0 + r0;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int nn = n + (q >= 2 ? 8 : 0), mm = m0 + 8 * j + 2 * t + (q & 1);
        if (mm < M && nn < N) out(mm, nn, d[4 * j + q]);
      }
  });
}

/* }====================================================== */


/* {====================================================== dmma: float64 on tensor cores, fed by TMA */

/*
** culua_matmul_dmma_tma (int M, int N, int K, double alpha, tensor map of A, tensor map of
** B, double beta, double *C, int ldc, double *W, int sk, int sk_tiles, unsigned *counts):
** matmul.cu's dmma (mma.sync m16n8k8 in float64)
** with culua/sm90.cuh's ring instead of cp.async and __syncthreads: a producer
** warpgroup (one thread) issues the TMA copies, two consumer warpgroups compute, and
** setmaxnreg gives the consumers 240 registers. That lets a block hold a 128 x 128 tile
** of C (8 warps of 64 x 32, 64 accumulators a thread), which reads A and B from L2 a
** third less than matmul.cu's 128 x 64 tiles (where two blocks a multiprocessor were
** the only way to hide __syncthreads, 230 registers a thread leaving room for one).
**
** Persistent: the first gridDim.x - sk blocks take tiles b, b + (gridDim.x - sk), ...
** of the first tiles - sk_tiles (culua/sm90.cuh's each_run, in its groups of tile rows),
** and the ring runs on from one tile to the next, so the producer loads the
** next tile while the consumers write this one: what LU's update (k = 128, C read and
** written) spends most of its time on. The catalog launches one block a multiprocessor
** (or, tune.dmma_persistent = false, one a tile), then the sk stream-K blocks. Where C
** is read (beta != 0), the consumers ask L2 for their tile of C as they start it.
**
** Stream-K: the last sk blocks share the last sk_tiles tiles' k-tiles (each_run), so
** that the last wave is not part empty: at n = 4096 on an H100 the 1024 tiles are 7.76
** waves of 132, at 8192 the 4096 tiles 31.03. W holds 2 x sk tiles of partial sums,
** counts a count a stream-K tile, zero between launches (the kernel leaves them so).
**
** Shared memory: A in 128 x 16 boxes (a row of 16 doubles is one 128-byte swizzle
** span), B in 16 x 16 panels, eight a stage, each swizzled alike. The mma's k slots
** are free to order, so slot s of a k-step of 8 is column (row) pi(s) = s / 2 + 4 (s % 2)
** of A's (B's) tile: with the swizzle, every fragment read (8 bytes a lane) then takes
** the two wavefronts its 256 bytes need, A's and B's alike.
*/
#define CULUA_DMMA_TMA_BM 128
#define CULUA_DMMA_TMA_BN 128
#define CULUA_DMMA_TMA_BK 16
#define CULUA_DMMA_TMA_STAGES 6
#define CULUA_DMMA_TMA_PANEL 16
#define CULUA_DMMA_TMA_SWIZZLE 128
#define CULUA_DMMA_TMA_SHARED(STAGES) ((STAGES) * (128 * 16 * 8 + 16 * 128 * 8) + 2 * (STAGES) * 8 + 1024)
static_assert(CULUA_DMMA_TMA_BK * 8 == CULUA_DMMA_TMA_SWIZZLE && CULUA_DMMA_TMA_PANEL * 8 == CULUA_DMMA_TMA_SWIZZLE,
              "a row of A's box and of B's panel is one swizzle span");

/* byte offset of element (r, c), a double, in a box of 128-byte rows, 128-byte swizzled */
__device__ __forceinline__ unsigned swz128 (int r, int c) { return swizzle128(r, 8 * c); }

extern "C" __global__ void __launch_bounds__(384, 1)
culua_matmul_dmma_tma (int M, int N, int K, double alpha, const __grid_constant__ culua_tmap tmA,
                       const __grid_constant__ culua_tmap tmB, double beta, double *C, int ldc,
                       double *W, int sk, int sk_tiles, unsigned *counts) {
  constexpr int BM = CULUA_DMMA_TMA_BM, BN = CULUA_DMMA_TMA_BN, BK = CULUA_DMMA_TMA_BK, P = CULUA_DMMA_TMA_PANEL;
  constexpr int STAGES = CULUA_DMMA_TMA_STAGES, A_BYTES = BM * BK * 8, B_BYTES = BK * BN * 8, P_BYTES = BK * P * 8;
  static_assert(CULUA_DMMA_TMA_SHARED(STAGES) == STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024, "shared memory");
  extern __shared__ unsigned char smem_raw[];
  const Ring<STAGES, A_BYTES, B_BYTES> ring(smem_raw);
  ring.init(8);   /* a release a consumer warp */
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x == 0)
      each_run<BM, BN, BK>(M, N, K, 1, sk, [&] (const Run &r) {
        ring.produce(r.q, r.KT, [&] (int s, int kt) {
          const int k0 = (r.down ? r.k0 + r.KT - 1 - kt : r.k0 + kt) * BK;
          tma_load(ring.abuf(s), &tmA, ring.full(s), k0, r.m0);
#pragma unroll
          for (int p = 0; p < BN / P; p++) tma_load(ring.bbuf(s) + p * P_BYTES, &tmB, ring.full(s), r.n0 + p * P, k0);
        });
      }, sk_tiles);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  const int ct = threadIdx.x - 128, warp = ct >> 5, lane = ct & 31, g = lane >> 2, t = lane & 3;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;   /* 2 x 4 warps of 64 x 32 */
  const int pk = (t >> 1) + 4 * (t & 1);                   /* pi(t); pi(t + 4) = pi(t) + 2 */
  const bool pairs = (ldc & 1) == 0 && ((size_t)C & 15) == 0;
  /* the fragments are read as C++ loads (ldd: shared address a at smem_raw + a - s0), not asm
  ** volatile: ptxas may then interleave a k-step's reads with the last one's products,
  ** and the ring's waits and releases (asm volatile, "memory") still order them */
  const unsigned s0 = smem_u32(smem_raw);
  auto ldd = [&] (unsigned a) { return *(const double *)(smem_raw + (a - s0)); };
  /* accumulator (i, j, x) of the thread's 4 x 4 mma tiles at acc[(i * 4 + j) * 4 + x]
  ** (one array, as streamk_meet takes it) */
  double acc[64];
  each_run<BM, BN, BK>(M, N, K, 1, sk, [&] (const Run &r) {
    const int m0 = r.m0, n0 = r.n0;
    if (beta != 0.0)   /* C's tile into L2 (a stream-K tile's: each contributor, since any may write it) */
#pragma unroll
      for (int e = ct; e < BM * (BN / 16); e += 256) {   /* 128 rows of 8 lines, 4 a thread */
        const int row = m0 + e / (BN / 16), c = n0 + (e % (BN / 16)) * 16;
        if (row < M && c < N) asm volatile("prefetch.global.L2 [%0];" :: "l"(C + (size_t)row * ldc + c));
      }
#pragma unroll
    for (int x = 0; x < 64; x++) acc[x] = 0.0;
    for (int kt = 0; kt < r.KT; kt++) {
      const int s = ring.wait(r.q + kt);
      /* the last k-tile's stage goes back now, one k-tile late: its reads are long done,
      ** so release_read's fence waits for nothing. Released as each k-tile ended, the
      ** fence cost 2-3% (H100, 4096^3 and 8192^3: 2.41-2.58 / 19.75-22.87 ms against
      ** 2.32-2.43 / 19.00-19.24 one late, bench/RESULTS.md session 32) */
      if (kt > 0) ring.release_read((r.q + kt - 1) % STAGES);
      const unsigned as = ring.abuf(s), bs = ring.bbuf(s);
#pragma unroll
      for (int kk = 0; kk < BK; kk += 8) {
        double a[4][4], bf[4][2];
#pragma unroll
        for (int i = 0; i < 4; i++) {   /* rows r and r + 8: both r % 8 == g */
          const int row = wm + i * 16 + g;
          a[i][0] = ldd(as + swz128(row, kk + pk));
          a[i][1] = ldd(as + swz128(row + 8, kk + pk));
          a[i][2] = ldd(as + swz128(row, kk + pk + 2));
          a[i][3] = ldd(as + swz128(row + 8, kk + pk + 2));
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {   /* column n of panel n / 16, k rows kk + pi(t) and kk + pi(t + 4) */
          const int n = wn + j * 8 + g;
          const unsigned pb = bs + (n / P) * P_BYTES;
          bf[j][0] = ldd(pb + swz128(kk + pk, n % P));
          bf[j][1] = ldd(pb + swz128(kk + pk + 2, n % P));
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int j = 0; j < 4; j++) {
            double *d = acc + (i * 4 + j) * 4;
            asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                         : "d"(a[i][0]), "d"(a[i][1]), "d"(a[i][2]), "d"(a[i][3]), "d"(bf[j][0]), "d"(bf[j][1]));
          }
      }
    }
    /* the run's last stage goes back straight after its reads, the order that raced: here the
    ** fence alone keeps the refill behind them (and its cost lands once a run) */
    if (r.KT > 0) ring.release_read((r.q + r.KT - 1) % STAGES);
    if (r.n > 1 && !streamk_meet(acc, W, counts + r.t, r)) return;
    /* accumulators 2h and 2h + 1 of tile (i, j): row g (+8 for h = 1), columns 2t and 2t + 1 */
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int row = m0 + wm + i * 16 + g + 8 * h, c = n0 + wn + j * 8 + 2 * t;
          if (row >= M) continue;
          const size_t at = (size_t)row * ldc + c;
          double x = alpha * acc[(i * 4 + j) * 4 + 2 * h], y = alpha * acc[(i * 4 + j) * 4 + 2 * h + 1];
          if (pairs && c + 1 < N) {
            double2 *p = (double2 *)(C + at);
            if (beta != 0.0) {
              const double2 old = *p;
              x += beta * old.x; y += beta * old.y;
            }
            *p = make_double2(x, y);
          }
          else {
            if (c < N) C[at] = beta == 0.0 ? x : x + beta * C[at];
            if (c + 1 < N) C[at + 1] = beta == 0.0 ? y : y + beta * C[at + 1];
          }
        }
  }, sk_tiles);
}

/* }====================================================== */


/* {====================================================== split-K */

/* C = alpha * (W[0] + W[1] + ... + W[splits - 1]) + beta * C, the slices packed M x N
** apart, C's rows ldc apart */
extern "C" __global__ void culua_matmul_splitk (long long MN, int splits, float alpha, const float *W, float beta, float *C,
                                                int N, int ldc) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < MN; i += (long long)gridDim.x * blockDim.x) {
    float acc = W[i];
    for (int s = 1; s < splits; s++) acc += W[s * MN + i];
    store_c(C, (size_t)(i / N) * ldc + i % N, alpha, acc, beta);
  }
}

/* }====================================================== */

#endif
