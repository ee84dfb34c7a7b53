/*
** culua/matmul_lowp.cuh
** What the low-precision matmul kernels share (matmul_lowp.cu, mma.sync;
** matmul_lowp_sm90.cu, wgmma): the dtypes' codes, and C's elements read as
** float and written rounded to nearest even, the NaN canonical (0x7fff), as
** src/half.c rounds. No CUDA header: elements are their bits, conversions
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

#endif
