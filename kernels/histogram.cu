/*
** histogram.cu
** The histogram family of culua's catalog: equal-width bins over [lo, hi)
** for uint8, uint16, int32, uint32, float32 and float64 input (and, built
** by NVRTC, float16, bfloat16, float8_e4m3 and float8_e5m2), counted into
** uint32 or uint64 counts.
**
** The bin of v is floor((v - lo) * bins / (hi - lo)) for integers, exact:
** the host keeps lo and hi within [-2^32, 2^33] and bins below 2^30, so
** d = v - lo and d * bins fit 64 bits. Dividing is what costs: a 64-bit
** division is a software loop of dozens of instructions, while a byte of
** input has the time of about ten. So the rule is chosen once a thread:
** hi - lo == bins (every integer its own bin, the common case) is d itself;
** where d * bins stays below 2^32 it is a multiply-high by the reciprocal
** ceil(2^64 / range), exact for every 32-bit dividend (Lemire, Kaser and
** Kurz 2019); only wider ranges divide. Floats take (v - lo) * scale in
** double, scale = bins / (hi - lo) worked out by the host, each operation
** rounded once (the C reference in src/catalog.c does the same), a product
** that rounds up to `bins` for v below hi clamped into the last bin.
** Values outside [lo, hi) and NaNs are left out and counted.
**
** One kernel a dtype pair, three ways, chosen by `mode`:
**   0: bins in shared memory, one shared atomicAdd an element. With
**      mode | 16 (at most 256 bins) each lane of a warp has its own copy,
**      bin b of lane l at word 32 b + l: a lane always hits its own bank,
**      so a warp's 32 atomics never conflict whatever the data, and the
**      block's warps share the copies. With mode | 8 (more bins, where
**      8 copies fit) each warp has its own copy instead; lanes of one warp
**      on one bin are served by the hardware in one instruction, which is
**      why skewed data runs as fast as uniform data. The copies are summed
**      at the end. A 16-byte group holding one value repeated (a run, as
**      in skewed data) is counted with one atomic. Grouping
**      equal values with __match_any_sync first measured 17x slower on
**      the H100 (bench/RESULTS.md, session 7);
**   1: bins that do not fit shared memory: global atomics, a warp whose
**      lanes all hold one bin adding once;
**   2: seed 003's histogram: block-private bins in shared memory, one
**      shared atomicAdd an element, read one element at a time.
** Mode | 4: x is 16-byte aligned, so whole 16-byte groups are read as
** uint4 (the rest, fewer than a group, one element a thread after); a view
** at another offset reads element by element. All read with a grid-stride
** loop over 64-bit indices; the grid is sized by the host (occupancy).
*/

typedef unsigned long long u64;
typedef long long i64;

/* float16, bfloat16 and fp8 (NVRTC variants only, -D CULUA_LOWP): binned as their float values */
#ifdef CULUA_LOWP
#include <culua/lowp.cuh>
#endif
template <class T> __device__ __forceinline__ T culua_widen (T v) { return v; }

#define FULL_MASK 0xffffffffu
#define HIST_VEC 4
#define HIST_WARPS 8   /* a copy of the bins a warp */
#define HIST_LANE_BINS 256   /* mode | 16, a copy a lane: at most this many bins (32 KiB) */

/*
** How an integer's bin is found (see above), the way fixed at compile time
** so that the loop over the input holds no branch on it: NARROW when the
** input type fits 32 bits signed and lo, hi do too, so d is a 32-bit
** subtraction (a value below lo wraps past the range); KIND 0: d itself,
** 1: the multiply-high, 2: a 64-bit division, 3: d itself with no range
** check, where every value of the type is in range (uint8 over [0, 256)
** with 256 bins: the loop is a byte extract and a shared atomic).
*/
template <bool NARROW, int KIND> struct int_rule {
  static const bool always = KIND == 3;   /* no value is left out */
  i64 lo;
  u64 range, magic;
  unsigned bins;
  template <typename T> __device__ __forceinline__ int bin (T v) const {
    u64 d;
    if (KIND == 3) return (int)((unsigned)v - (unsigned)lo);
    if (NARROW) {
      unsigned d32 = (unsigned)v - (unsigned)lo;
      if (d32 >= (unsigned)range) return -1;
      d = d32;
    }
    else {
      d = (u64)((i64)v - lo);
      if (d >= range) return -1;
    }
    if (KIND == 0) return (int)d;
    if (KIND == 1) return (int)__umul64hi(magic, (u64)((unsigned)d * bins));
    return (int)(d * bins / range);
  }
};

struct float_rule {
  static const bool always = false;
  double lo, hi, scale;
  int bins;
  template <typename T> __device__ __forceinline__ int bin (T x) const {
    const auto v = culua_widen(x);   /* a low-precision value as its float */
    if (!(v >= lo && v < hi)) return -1;   /* NaN fails both */
    int b = (int)floor(__dmul_rn(__dsub_rn((double)v, lo), scale));
    return b >= bins ? bins - 1 : b;
  }
};

__device__ __forceinline__ void add_to (unsigned *c, unsigned k) { atomicAdd(c, k); }
__device__ __forceinline__ void add_to (u64 *c, unsigned k) { atomicAdd(c, (u64)k); }

/* whether the 16 bytes of q hold one value of T, repeated */
template <typename T> __device__ __forceinline__ bool all_equal (uint4 q) {
  if (sizeof(T) == 8) return q.x == q.z && q.y == q.w;
  if (!(q.x == q.y && q.y == q.z && q.z == q.w)) return false;
  if (sizeof(T) == 1) return q.x == (q.x & 0xffu) * 0x01010101u;
  if (sizeof(T) == 2) return (q.x >> 16) == (q.x & 0xffffu);
  return true;
}

/*
** Count x[0 .. n) into `mine` (shared memory) or, without shared bins,
** straight into counts; returns how many this thread left out.
*/
template <typename T, typename C, typename R>
__device__ unsigned count (const T *__restrict__ x, u64 n, C *counts, const R &rule,
                           unsigned *mine, int shift, bool shared, bool vec) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned lane = threadIdx.x & 31;
  const int V = 16 / sizeof(T);
  const uint4 *xv = (const uint4 *)x;
  const u64 groups = vec ? n / V : 0;   /* 16-byte groups, read first */
  unsigned out = 0;
  if (shared) {
    auto put16 = [&] (uint4 q) {
      T v[V];
      memcpy(v, &q, 16);
      if (all_equal<T>(q)) {   /* a run of one value (skewed data): one atomic for the group */
        int b = rule.bin(v[0]);
        if (R::always || b >= 0) atomicAdd(&mine[b << shift], (unsigned)V);
        else out += V;
        return;
      }
      #pragma unroll
      for (int k = 0; k < V; k++) {
        int b = rule.bin(v[k]);
        if (R::always || b >= 0) atomicAdd(&mine[b << shift], 1u);
        else out++;
      }
    };
    /* two groups in flight a thread: the loads of the second overlap the
    ** atomics of the first. Read once: streaming, not kept in L2 */
    u64 i = start;
    for (; i + stride < groups; i += 2 * stride) {
      uint4 q0 = __ldcs(xv + i), q1 = __ldcs(xv + i + stride);
      put16(q0);
      put16(q1);
    }
    if (i < groups) put16(__ldcs(xv + i));
    for (u64 i = groups * V + start; i < n; i += stride) {
      int b = rule.bin(x[i]);
      if (b >= 0) atomicAdd(&mine[b << shift], 1u);
      else out++;
    }
    return out;
  }
  /* global bins: every lane runs the same number of rounds (-2: past the
  ** end), so the vote sees the whole warp and a warp whose lanes all hold
  ** one bin (skewed data) adds once */
  auto put = [&] (int b) {
    if (b == -1) out++;
    if (__all_sync(FULL_MASK, b == __shfl_sync(FULL_MASK, b, 0))) {
      if (lane == 0 && b >= 0) add_to(&counts[b], 32u);
    }
    else if (b >= 0) add_to(&counts[b], 1u);
  };
  u64 rounds = (groups + stride - 1) / stride;
  for (u64 r = 0, i = start; r < rounds; r++, i += stride) {
    T v[V];
    bool in = i < groups;
    if (in) {
      uint4 q = __ldcs(xv + i);
      memcpy(v, &q, 16);
    }
    #pragma unroll
    for (int k = 0; k < V; k++) put(in ? rule.bin(v[k]) : -2);
  }
  rounds = (n - groups * V + stride - 1) / stride;
  for (u64 r = 0, i = groups * V + start; r < rounds; r++, i += stride)
    put(i < n ? rule.bin(x[i]) : -2);
  return out;
}

template <typename T> struct is_float { static const bool value = false; };
template <> struct is_float<float> { static const bool value = true; };
template <> struct is_float<double> { static const bool value = true; };
#ifdef CULUA_LOWP
template <> struct is_float<__half> { static const bool value = true; };
template <> struct is_float<__nv_bfloat16> { static const bool value = true; };
template <> struct is_float<__nv_fp8_e4m3> { static const bool value = true; };
template <> struct is_float<__nv_fp8_e5m2> { static const bool value = true; };
#endif

/* the integer rule for these lo, hi and bins, then count */
template <bool NARROW, typename T, typename C>
__device__ unsigned count_int (const T *x, u64 n, C *counts, int bins, i64 lo, i64 hi,
                               unsigned *mine, int shift, bool shared, bool vec) {
  const u64 range = (u64)(hi - lo);
  if (NARROW && sizeof(T) < 4 && range == (u64)bins && lo <= 0 && hi > (i64)(T)-1) {
    int_rule<NARROW, 3> r = {lo, range, 0, (unsigned)bins};
    return count(x, n, counts, r, mine, shift, shared, vec);
  }
  if (range == (u64)bins) {
    int_rule<NARROW, 0> r = {lo, range, 0, (unsigned)bins};
    return count(x, n, counts, r, mine, shift, shared, vec);
  }
  if (range - 1 <= 0xffffffffull / (u64)bins) {   /* d * bins < 2^32 */
    /* ceil(2^64 / range); 0 for range 1, whose only d is 0 */
    int_rule<NARROW, 1> r = {lo, range, ~0ull / range + 1, (unsigned)bins};
    return count(x, n, counts, r, mine, shift, shared, vec);
  }
  int_rule<NARROW, 2> r = {lo, range, 0, (unsigned)bins};
  return count(x, n, counts, r, mine, shift, shared, vec);
}

template <typename T, typename C>
__device__ void histogram (const T *__restrict__ x, u64 n, C *counts, int bins,
                           i64 ilo, i64 ihi, double flo, double fhi, double scale,
                           u64 *left, int mode) {
  extern __shared__ unsigned sh[];
  const bool vec = (mode & HIST_VEC) != 0;
  /* where this thread counts: bin b at mine[b << shift] */
  const bool lanes = (mode & 16) != 0;
  const int copies = lanes ? 32 : (mode & 8) ? HIST_WARPS : 1;
  const int shift = lanes ? 5 : 0;
  mode &= 3;
  const bool shared = mode != 1;
  unsigned *mine = lanes ? sh + (threadIdx.x & 31)
                         : sh + (copies > 1 ? (threadIdx.x >> 5) % copies * bins : 0);
  if (shared) {
    for (int i = threadIdx.x; i < bins * copies; i += blockDim.x) sh[i] = 0;
    __syncthreads();
  }
  unsigned out;   /* left out by this thread */
  if constexpr (is_float<T>::value) {
    float_rule r = {flo, fhi, scale, bins};
    out = count(x, n, counts, r, mine, shift, shared, vec);
  }
  else if (sizeof(T) < 4 || (T)-1 < (T)0) {   /* u8, u16, i32: values fit 32 bits signed */
    if (ilo >= -0x80000000ll && ihi <= 0x7fffffffll)
      out = count_int<true>(x, n, counts, bins, ilo, ihi, mine, shift, shared, vec);
    else
      out = count_int<false>(x, n, counts, bins, ilo, ihi, mine, shift, shared, vec);
  }
  else out = count_int<false>(x, n, counts, bins, ilo, ihi, mine, shift, shared, vec);
  /* the left-out count: a warp's sum, one atomic a warp */
  for (int o = 16; o > 0; o >>= 1) out += __shfl_down_sync(FULL_MASK, out, o);
  if ((threadIdx.x & 31) == 0 && out != 0) atomicAdd(left, (u64)out);
  if (shared) {
    __syncthreads();
    for (int i = threadIdx.x; i < bins; i += blockDim.x) {
      unsigned k = 0;
      if (lanes)   /* bin i's 32 words, each lane starting at its own bank */
        for (int c = 0; c < 32; c++) k += sh[i * 32 + ((c + threadIdx.x) & 31)];
      else
        for (int c = 0; c < copies; c++) k += sh[c * bins + i];
      if (k != 0) add_to(&counts[i], k);
    }
  }
}

#define HIST(TN, T, CN, C)                                                         \
  extern "C" __global__ void __launch_bounds__(HIST_WARPS * 32, 6)                  \
  culua_histogram_##TN##_##CN (const T *x, u64 n, C *counts, int bins,             \
                               i64 ilo, i64 ihi, double flo, double fhi,           \
                               double scale, u64 *left, int mode) {                 \
    histogram<T, C>(x, n, counts, bins, ilo, ihi, flo, fhi, scale, left, mode);     \
  }

/* 32-bit counters prebuilt; 64-bit ones built by NVRTC when asked for
** (lua/catalog/histogram.lua passes -DCULUA_HIST_COUNT64) */
#ifdef CULUA_HIST_COUNT64
#define HIST2(TN, T) HIST(TN, T, u64, u64)
#else
#define HIST2(TN, T) HIST(TN, T, u32, unsigned)
#endif

#ifndef CULUA_LOWP
HIST2(u8, unsigned char)
HIST2(u16, unsigned short)
HIST2(i32, int)
HIST2(u32, unsigned)
HIST2(f32, float)
HIST2(f64, double)
#else   /* the low-precision floats, built by NVRTC when asked for (-DCULUA_LOWP) */
HIST2(f16, __half)
HIST2(bf16, __nv_bfloat16)
HIST2(e4m3, __nv_fp8_e4m3)
HIST2(e5m2, __nv_fp8_e5m2)
#endif
