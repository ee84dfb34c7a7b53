/*
** culua/lowp.cuh
** The low-precision dtypes in the catalog's kernels (float16, bfloat16,
** float8_e4m3, float8_e5m2): read as the float of their exact value, and
** float16/bfloat16 written from a float32, rounded once to nearest even
** (__float2half_rn, __float2bfloat16_rn, as doc/dtypes.md says). Included
** only by the NVRTC variants that take these types (-D CULUA_LOWP), so the
** prebuilt kernels never parse <cuda_fp16.h>. Also available to user kernels
** compiled with cuda.compile as <culua/lowp.cuh>.
*/

#ifndef culua_lowp_cuh
#define culua_lowp_cuh

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

/* the exact value as a float (a NaN stays a NaN, its bits as the hardware gives them) */
__device__ __forceinline__ float culua_widen (__half x) { return __half2float(x); }
__device__ __forceinline__ float culua_widen (__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float culua_widen (__nv_fp8_e4m3 x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.__x, __NV_E4M3)));
}
__device__ __forceinline__ float culua_widen (__nv_fp8_e5m2 x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.__x, __NV_E5M2)));
}

/* a float rounded into T (float: itself) */
template <class T> __device__ __forceinline__ T culua_narrow (float v);
template <> __device__ __forceinline__ float culua_narrow<float> (float v) { return v; }
template <> __device__ __forceinline__ __half culua_narrow<__half> (float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 culua_narrow<__nv_bfloat16> (float v) { return __float2bfloat16_rn(v); }

#endif
