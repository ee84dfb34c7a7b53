/*
** culua/matmul_lowp.cuh
** What the low-precision matmul kernels share (matmul_lowp.cu, mma.sync;
** matmul_lowp_sm90.cu and matmul_lowp_fp8.cu, wgmma): the dtypes' codes, C's
** elements read as float and written rounded to nearest even, the NaN
** canonical (0x7fff), as src/half.c rounds, and the wgmma kernels' shared
** memory descriptor and C epilogue. No CUDA header: elements are their bits, conversions
** PTX's cvt (NVRTC may lack cuda_fp16.h).
*/

#ifndef culua_matmul_lowp_cuh
#define culua_matmul_lowp_cuh

#define CULUA_F16 0
#define CULUA_BF16 1
#define CULUA_E4M3 2
#define CULUA_E5M2 3
#define CULUA_F32 4

/* the rows of C's boxes in the wgmma kernels' TMA stores (lowp_ss_store_tma: a consumer
** warpgroup's 64); lua/catalog/matmul_lowp.lua makes C's map of them */
#define LOWP_C_ROWS 64
/* C's staging after the ring: two buffers of a panel (LOWP_C_ROWS x 128 bytes) a consumer
** warpgroup (the kernels' LOWP_*_CSTAGE are this and 1024 bytes to align it) */
#define LOWP_C_STAGE_BYTES (2 * 2 * LOWP_C_ROWS * 128)

typedef unsigned char culua_u8;
typedef unsigned short culua_u16;

/* bytes an element */
template <int T> struct lowp_size { enum { value = T == CULUA_F32 ? 4 : T >= CULUA_E4M3 ? 1 : 2 }; };

/* C's elements: read as float, written rounded to nearest even */
template <int TC> __device__ __forceinline__ float lowp_load (const void *p);
template <> __device__ __forceinline__ float lowp_load<CULUA_F32> (const void *p) { return *(const float *)p; }
template <> __device__ __forceinline__ float lowp_load<CULUA_F16> (const void *p) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(*(const culua_u16 *)p));
  return f;
}
template <> __device__ __forceinline__ float lowp_load<CULUA_BF16> (const void *p) {
  return __uint_as_float((unsigned)*(const culua_u16 *)p << 16);
}
template <int TC> __device__ __forceinline__ void lowp_store (void *p, float x);
template <> __device__ __forceinline__ void lowp_store<CULUA_F32> (void *p, float x) { *(float *)p = x; }
template <> __device__ __forceinline__ void lowp_store<CULUA_F16> (void *p, float x) {
  culua_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  *(culua_u16 *)p = x != x ? (culua_u16)0x7fff : h;
}
template <> __device__ __forceinline__ void lowp_store<CULUA_BF16> (void *p, float x) {
  culua_u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  *(culua_u16 *)p = x != x ? (culua_u16)0x7fff : h;
}


/* the same, C's dtype a run-time code (CULUA_F16, CULUA_BF16 or CULUA_F32) */
__device__ __forceinline__ float lowp_load_rt (int tc, const void *p) {
  return tc == CULUA_F32 ? lowp_load<CULUA_F32>(p) : tc == CULUA_BF16 ? lowp_load<CULUA_BF16>(p) : lowp_load<CULUA_F16>(p);
}
__device__ __forceinline__ void lowp_store_rt (int tc, void *p, float x) {
  if (tc == CULUA_F32) lowp_store<CULUA_F32>(p, x);
  else if (tc == CULUA_BF16) lowp_store<CULUA_BF16>(p, x);
  else lowp_store<CULUA_F16>(p, x);
}

/* two neighbours of C at p (aligned to two elements): read as floats, written rounded as above */
template <int TC> __device__ __forceinline__ void lowp_load2 (const void *p, float &x0, float &x1) {
  if constexpr (TC == CULUA_F32) {
    const float2 v = *(const float2 *)p;
    x0 = v.x, x1 = v.y;
  } else {
    const unsigned w = *(const unsigned *)p;
    const culua_u16 h0 = (culua_u16)w, h1 = (culua_u16)(w >> 16);
    x0 = lowp_load<TC>(&h0), x1 = lowp_load<TC>(&h1);
  }
}
template <int TC> __device__ __forceinline__ void lowp_store2 (void *p, float x0, float x1) {
  if constexpr (TC == CULUA_F32) {
    *(float2 *)p = make_float2(x0, x1);
  } else {
    culua_u16 h0, h1;
    lowp_store<TC>(&h0, x0);
    lowp_store<TC>(&h1, x1);
    *(unsigned *)p = h0 | (unsigned)h1 << 16;
  }
}


/* {====================================================== the wgmma kernels' pieces (sm_90a) */

/* the descriptor of a K-major operand with 128-byte swizzle (8-row groups 1024 bytes apart) */
__device__ __forceinline__ unsigned long long lowp_desc_k128 (unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

/*
** A consumer thread's part of C's tile, C's dtype TC: accumulator 4j + q is C's
** row r (+8 for q >= 2), column c + 8j (+1 for odd q), so each is one of a pair
** of neighbours in a row, written at once (4 or 8 bytes) where the pair is
** aligned; a column past N is not written, nor a row past M. (With C's dtype
** a run-time code here, the loop outgrew ptxas's unrolling and the
** accumulators went to local memory: callers branch on the code once.)
*/
template <int TC, int BN>
__device__ __forceinline__ void lowp_ss_store (const float *d, int M, int N, int r, int c, float alpha, float beta,
                                               void *C, int ldc) {
  constexpr int ES = lowp_size<TC>::value;
  char *c8 = (char *)C;
  const bool pairs = ldc % 2 == 0 && ((unsigned long long)C & (2 * ES - 1)) == 0;
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int mm = r + 8 * h, nn = c + 8 * j;
      if (mm < M && nn < N) {
        char *p = c8 + ((size_t)mm * ldc + nn) * ES;
        float v0 = alpha * d[4 * j + 2 * h], v1 = alpha * d[4 * j + 2 * h + 1];
        if (pairs && nn + 1 < N) {
          if (beta != 0.0f) {
            float c0, c1;
            lowp_load2<TC>(p, c0, c1);
            v0 += beta * c0, v1 += beta * c1;
          }
          lowp_store2<TC>(p, v0, v1);
        } else {
          if (beta != 0.0f) v0 += beta * lowp_load<TC>(p);
          lowp_store<TC>(p, v0);
          if (nn + 1 < N) {
            if (beta != 0.0f) v1 += beta * lowp_load<TC>(p + ES);
            lowp_store<TC>(p + ES, v1);
          }
        }
      }
    }
}

#if defined(culua_sm90_cuh) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* two neighbours of C's dtype TC at shared address a (aligned to the pair), rounded as above */
template <int TC> __device__ __forceinline__ void lowp_sts2 (unsigned a, float x0, float x1) {
  if constexpr (TC == CULUA_F32) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(a), "f"(x0), "f"(x1) : "memory");
  } else {
    culua_u16 h0, h1;
    lowp_store<TC>(&h0, x0);
    lowp_store<TC>(&h1, x1);
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(h0 | (unsigned)h1 << 16) : "memory");
  }
}

/*
** lowp_ss_store's work (the same accumulators: a consumer warpgroup's 64 x BN
** of the tile, accumulator 4j + q at row `row` (+8 for q >= 2) of the 64,
** column c + 8j (+1 for odd q)) written through shared memory and TMA stores:
** panels of 64 rows x 128 bytes (64 columns of 16 bits, 32 of float32), each
** written into one of the warpgroup's two 8 KB buffers at `stage` (1024-aligned,
** the second 8 KB after the first) as TMA's 128-byte swizzle lays it out
** (16-byte chunk k of row r at chunk k ^ (r % 8): a warp's pairs, 8 rows x 16
** bytes, hit 32 different banks), then stored by one thread (`leader`) as a
** box of the map tmC (C itself, 64 x 128-byte boxes, 128-byte swizzle). The
** stores run on while the warpgroup goes back to the tensor cores for its next
** tile. Panel p goes to buffer p % 2; one barrier a panel: before it the leader
** waits for panel p - 1's store to have read its buffer, which panel p + 1
** writes after it (a tile has an even number of panels, so the next tile's
** first panel takes the buffer whose store was waited for last). Rows and
** columns past C's edge land in the buffer and the map drops them. Where
** direct stores (lowp_ss_store) wrote 4-byte pairs, half of each 32-byte
** sector, one instruction a pair, the copies are whole lines, and the
** warpgroup waits for none of them: at n = 4096 on an H100 (ncu, base clocks)
** a 128 x 256 float16 tile took 65k cycles of tensor-core work and 19k more
** with the direct stores (bench/RESULTS.md, session 33). `bar`: a named
** barrier of the warpgroup's 128 threads (not 0).
*/
template <int TC, int BN>
__device__ __forceinline__ void lowp_ss_store_tma (const float *d, int M, int N, int m0, int n0, int row, int c,
                                                   float alpha, float beta, const void *C, int ldc,
                                                   const culua_tmap *tmC, unsigned stage, int bar, bool leader) {
  using namespace culua::sm90;
  constexpr int ES = lowp_size<TC>::value, PW = 128 / ES, JP = PW / 8;   /* a panel: PW columns, JP pairs of j */
  static_assert(BN % (2 * PW) == 0, "the tile is an even number of panels");
  static_assert(LOWP_C_ROWS == 64, "a panel is a warpgroup's 64 rows");
  const char *c8 = (const char *)C;
#pragma unroll
  for (int p = 0; p < BN / PW; p++) {
    const unsigned buf = stage + (p & 1) * LOWP_C_ROWS * 128;
#pragma unroll
    for (int jj = 0; jj < JP; jj++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int j = p * JP + jj, r = row + 8 * h, cb = (8 * jj + c) * ES;   /* cb: the pair's byte in the panel's row */
        float v0 = alpha * d[4 * j + 2 * h], v1 = alpha * d[4 * j + 2 * h + 1];
        if (beta != 0.0f) {
          const int mm = m0 + r, nn = n0 + 8 * j + c;
          if (mm < M && nn < N) {   /* (C's rows are 16-byte aligned here: a pair is aligned) */
            const char *q = c8 + ((size_t)mm * ldc + nn) * ES;
            if (nn + 1 < N) {
              float x0, x1;
              lowp_load2<TC>(q, x0, x1);
              v0 += beta * x0, v1 += beta * x1;
            } else {
              v0 += beta * lowp_load<TC>(q);
            }
          }
        }
        lowp_sts2<TC>(buf + swizzle128(r, cb), v0, v1);
      }
    staged_sync(bar, leader);   /* (and panel p - 1's store has read the buffer panel p + 1 writes) */
    if (leader) {
      tma_store(tmC, buf, n0 + p * PW, m0);
      bulk_commit();
    }
  }
}

/*
** What the 16-bit ss kernel and fp8 do with a 128 x BN tile's sums, from a
** consumer thread (warpgroup wg = 0 or 1 of the block's two, rows m0 + 64 wg
** .. + 63): C's dtype a run-time code, branched on once (see lowp_ss_store);
** by TMA stores where tmac is 1, the staging at the first 1024-byte boundary
** from ring_end (16 KB a warpgroup: the kernels' LOWP_*_CSTAGE), else from
** registers.
*/
template <int BN>
__device__ __forceinline__ void lowp_store_tile (const float *d, int M, int N, int m0, int n0, float alpha, float beta,
                                                 void *C, int ldc, int ctype, const culua_tmap *tmC, int tmac,
                                                 unsigned ring_end) {
  const int ct = threadIdx.x - 128, wg = ct >> 7, row = ((ct >> 5) & 3) * 16 + ((ct & 31) >> 2), c = 2 * (ct & 3);
  if (tmac) {
    const unsigned stage = ((ring_end + 1023) & ~1023u) + wg * (LOWP_C_STAGE_BYTES / 2);
    const int wm = m0 + wg * 64, bar = 2 + wg;
    const bool leader = (ct & 127) == 0;
    if (ctype == CULUA_F32) lowp_ss_store_tma<CULUA_F32, BN>(d, M, N, wm, n0, row, c, alpha, beta, C, ldc, tmC, stage, bar, leader);
    else if (ctype == CULUA_BF16) lowp_ss_store_tma<CULUA_BF16, BN>(d, M, N, wm, n0, row, c, alpha, beta, C, ldc, tmC, stage, bar, leader);
    else lowp_ss_store_tma<CULUA_F16, BN>(d, M, N, wm, n0, row, c, alpha, beta, C, ldc, tmC, stage, bar, leader);
  } else {
    const int r = m0 + wg * 64 + row, cc = n0 + c;
    if (ctype == CULUA_F32) lowp_ss_store<CULUA_F32, BN>(d, M, N, r, cc, alpha, beta, C, ldc);
    else if (ctype == CULUA_BF16) lowp_ss_store<CULUA_BF16, BN>(d, M, N, r, cc, alpha, beta, C, ldc);
    else lowp_ss_store<CULUA_F16, BN>(d, M, N, r, cc, alpha, beta, C, ldc);
  }
}

#endif

/* }====================================================== */

#endif
