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

/* }====================================================== */

#endif
