// cast.cu: x:astype(dtype), a kernel for every ordered pair of culua's dtypes,
// cast_<from>_<to>, by the rules of doc/dtypes.md that the host's casts
// (src/dtype.c's culua_convert, src/half.c) follow too, bit for bit:
// - between integers, the low bits (two's complement);
// - into an integer from a float, toward zero, saturating, NaN to 0;
// - into a float, one rounding to nearest even from the exact value (a
//   double; a float where the value is one, so that the float intrinsics,
//   in hardware on 8.9 and later for fp8, do the work), integers through a
//   double; NaN to the format's canonical NaN; fp8 saturating (SATFINITE).
// lua/catalog/cast.lua names the kernels from the dtype names below.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace {

// what a value widens to exactly: float for the floats of 32 bits and less
template <class T> struct wide { typedef double type; };
template <> struct wide<float> { typedef float type; };
template <> struct wide<__half> { typedef float type; };
template <> struct wide<__nv_bfloat16> { typedef float type; };
template <> struct wide<__nv_fp8_e4m3> { typedef float type; };
template <> struct wide<__nv_fp8_e5m2> { typedef float type; };

// A low-precision NaN widens to the positive quiet NaN, as the host's does: the
// hardware gives 0x7fffffff from float16 and fp8 and keeps bfloat16's payload
__device__ float quiet(float f) { return f != f ? __int_as_float(0x7fc00000) : f; }
template <class T> __device__ typename wide<T>::type widen(T x) { return (double)x; }
__device__ float widen(float x) { return x; }
__device__ float widen(__half x) { return quiet(__half2float(x)); }
__device__ float widen(__nv_bfloat16 x) { return quiet(__bfloat162float(x)); }
__device__ float widen(__nv_fp8_e4m3 x) { return quiet(__half2float(__half(__nv_cvt_fp8_to_halfraw(x.__x, __NV_E4M3)))); }
__device__ float widen(__nv_fp8_e5m2 x) { return quiet(__half2float(__half(__nv_cvt_fp8_to_halfraw(x.__x, __NV_E5M2)))); }

template <class I> struct limits;
#define LIMITS(T, LO, HI) template <> struct limits<T> { \
  static __device__ double lo() { return LO; } static __device__ double hi() { return HI; } };
LIMITS(int8_t, -128.0, 127.0)
LIMITS(uint8_t, 0.0, 255.0)
LIMITS(int16_t, -32768.0, 32767.0)
LIMITS(uint16_t, 0.0, 65535.0)
LIMITS(int32_t, -2147483648.0, 2147483647.0)
LIMITS(uint32_t, 0.0, 4294967295.0)
LIMITS(int64_t, -0x1p63, 0x1p63)    // the 64-bit highs are one past: 2^63, 2^64
LIMITS(uint64_t, 0.0, 0x1p64)

// a float value into an integer type: toward zero, saturating, NaN to 0
template <class I> __device__ I to_int(double x) {
  x = x != x ? 0.0 : trunc(x);
  if (x < limits<I>::lo()) x = limits<I>::lo();
  if (sizeof(I) == 8 && x >= limits<I>::hi()) return (I)~(I)0 > 0 ? (I)~(I)0 : (I)(~(uint64_t)0 >> 1);
  if (x > limits<I>::hi()) x = limits<I>::hi();
  return (I)x;
}

// a wide value (float or double) rounded into each type
template <class T> struct narrow {
  template <class W> static __device__ T from(W x) { return to_int<T>((double)x); }
};
template <> struct narrow<float> {
  template <class W> static __device__ float from(W x) { return (float)x; }
};
template <> struct narrow<double> {
  template <class W> static __device__ double from(W x) { return (double)x; }
};
template <> struct narrow<__half> {
  static __device__ __half nan() { __half_raw r; r.x = 0x7fff; return __half(r); }
  static __device__ __half from(float x) { return x != x ? nan() : __float2half_rn(x); }
  static __device__ __half from(double x) { return x != x ? nan() : __double2half(x); }
};
template <> struct narrow<__nv_bfloat16> {
  static __device__ __nv_bfloat16 nan() { __nv_bfloat16_raw r; r.x = 0x7fff; return __nv_bfloat16(r); }
  static __device__ __nv_bfloat16 from(float x) { return x != x ? nan() : __float2bfloat16_rn(x); }
  static __device__ __nv_bfloat16 from(double x) { return x != x ? nan() : __double2bfloat16(x); }
};
template <__nv_fp8_interpretation_t K, class T> struct narrow_fp8 {
  static __device__ T bits(__nv_fp8_storage_t b) { T r; r.__x = b; return r; }
  static __device__ T from(float x) { return bits(x != x ? 0x7f : __nv_cvt_float_to_fp8(x, __NV_SATFINITE, K)); }
  static __device__ T from(double x) { return bits(x != x ? 0x7f : __nv_cvt_double_to_fp8(x, __NV_SATFINITE, K)); }
};
template <> struct narrow<__nv_fp8_e4m3> : narrow_fp8<__NV_E4M3, __nv_fp8_e4m3> {};
template <> struct narrow<__nv_fp8_e5m2> : narrow_fp8<__NV_E5M2, __nv_fp8_e5m2> {};

template <class T> struct is_int { enum { value = 0 }; };
#define INT(T) template <> struct is_int<T> { enum { value = 1 }; };
INT(int8_t) INT(uint8_t) INT(int16_t) INT(uint16_t) INT(int32_t) INT(uint32_t) INT(int64_t) INT(uint64_t)

template <class F, class T, int ints> struct convert {
  static __device__ T one(F x) { return narrow<T>::from(widen(x)); }
};
template <class F, class T> struct convert<F, T, 1> {   // both integers: the low bits
  static __device__ T one(F x) { return (T)x; }
};

// rows of cols elements, xs and ys elements from row to row (pitched arrays)
template <class F, class T>
__device__ void cast(const F *x, uint64_t xs, T *y, uint64_t ys, uint64_t rows, uint64_t cols) {
  uint64_t n = rows * cols, step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    uint64_t r = i / cols, c = i - r * cols;
    y[r * ys + c] = convert<F, T, is_int<F>::value && is_int<T>::value>::one(x[r * xs + c]);
  }
}

}  // namespace

#define CAST(fn, ft, tn, tt) \
  extern "C" __global__ void cast_##fn##_##tn(const ft *x, uint64_t xs, tt *y, uint64_t ys, \
                                              uint64_t rows, uint64_t cols) { \
    cast<ft, tt>(x, xs, y, ys, rows, cols); }

// every dtype as the target of a cast from fn (a dtype to itself is a copy, no kernel)
#define FROM(fn, ft) \
  CAST(fn, ft, int8, int8_t) CAST(fn, ft, uint8, uint8_t) CAST(fn, ft, int16, int16_t) \
  CAST(fn, ft, uint16, uint16_t) CAST(fn, ft, int32, int32_t) CAST(fn, ft, uint32, uint32_t) \
  CAST(fn, ft, int64, int64_t) CAST(fn, ft, uint64, uint64_t) CAST(fn, ft, float32, float) \
  CAST(fn, ft, float64, double) CAST(fn, ft, float16, __half) CAST(fn, ft, bfloat16, __nv_bfloat16) \
  CAST(fn, ft, float8_e4m3, __nv_fp8_e4m3) CAST(fn, ft, float8_e5m2, __nv_fp8_e5m2)

FROM(int8, int8_t) FROM(uint8, uint8_t) FROM(int16, int16_t) FROM(uint16, uint16_t)
FROM(int32, int32_t) FROM(uint32, uint32_t) FROM(int64, int64_t) FROM(uint64, uint64_t)
FROM(float32, float) FROM(float64, double) FROM(float16, __half) FROM(bfloat16, __nv_bfloat16)
FROM(float8_e4m3, __nv_fp8_e4m3) FROM(float8_e5m2, __nv_fp8_e5m2)
