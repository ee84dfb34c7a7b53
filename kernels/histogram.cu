/*
** histogram.cu
** The histogram family of culua's catalog: equal-width bins over [lo, hi)
** for uint8, uint16, int32, uint32, float32 and float64 input, counted into
** uint32 or uint64 counts.
**
** The bin of v is floor((v - lo) * bins / (hi - lo)). For integers that is
** exact in 64-bit unsigned arithmetic (the host keeps lo and hi within
** [-2^32, 2^33] and bins below 2^30, so the product fits); floats compute it
** in double with round-to-nearest operations spelt out (no contraction), so
** the C reference in src/catalog.c gets the same bits, and a v just below
** hi whose quotient rounds up to `bins` is clamped into the last bin.
** Values outside [lo, hi) and NaNs are left out and counted.
**
** One kernel a dtype pair, three ways, chosen by `mode`:
**   0: block-private bins in shared memory, equal bins within a warp
**      aggregated first (__match_any_sync: the leader adds the group's
**      size), so that skewed data (all values equal) costs one shared
**      atomic a warp rather than 32 on one address; then one global
**      atomicAdd per nonzero bin per block;
**   1: the same aggregation straight to global counts (bins that do not
**      fit the shared memory given);
**   2: seed 003's histogram: block-private bins in shared memory, one
**      shared atomicAdd an element, no aggregation.
** Mode | 4: x is 16-byte aligned, so whole 16-byte groups are read as
** uint4 (the rest, fewer than a group, one element a thread after); a view
** at another offset reads element by element. All read with a grid-stride
** loop over 64-bit indices; the grid is sized by the host (occupancy).
*/

typedef unsigned long long u64;
typedef long long i64;

#define FULL_MASK 0xffffffffu

/* the bin of v, or -1 when it is left out */
template <typename T> struct binner {
  static __device__ __forceinline__ int bin (T v, i64 lo, i64 hi, double, double, int bins) {
    i64 w = (i64)v;
    if (w < lo || w >= hi) return -1;
    return (int)(((u64)(w - lo) * (u64)bins) / (u64)(hi - lo));
  }
};

__device__ __forceinline__ int float_bin (double v, double lo, double hi, int bins) {
  if (!(v >= lo && v < hi)) return -1;   /* NaN fails both */
  double q = __ddiv_rn(__dmul_rn(__dsub_rn(v, lo), (double)bins), __dsub_rn(hi, lo));
  int b = (int)floor(q);
  return b >= bins ? bins - 1 : b;
}

template <> struct binner<float> {
  static __device__ __forceinline__ int bin (float v, i64, i64, double lo, double hi, int bins) {
    return float_bin((double)v, lo, hi, bins);
  }
};
template <> struct binner<double> {
  static __device__ __forceinline__ int bin (double v, i64, i64, double lo, double hi, int bins) {
    return float_bin(v, lo, hi, bins);
  }
};

__device__ __forceinline__ void add_to (unsigned *c, unsigned k) { atomicAdd(c, k); }
__device__ __forceinline__ void add_to (u64 *c, unsigned k) { atomicAdd(c, (u64)k); }

template <typename T, typename C>
__device__ void histogram (const T *__restrict__ x, u64 n, C *counts, int bins,
                           i64 ilo, i64 ihi, double flo, double fhi,
                           u64 *left, int mode) {
  extern __shared__ unsigned sh[];
  const bool vec = (mode & 4) != 0;   /* 16-byte loads: the host saw x aligned */
  mode &= 3;
  const bool shared = mode != 1;
  if (shared) {
    for (int i = threadIdx.x; i < bins; i += blockDim.x) sh[i] = 0;
    __syncthreads();
  }
  unsigned out = 0;   /* left out by this thread */
  const unsigned lane = threadIdx.x & 31;
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  /* count bin b (-1: left out, -2: past the end); every lane of a warp
  ** calls this equally often (loop bounds are whole rounds of the grid),
  ** so __match_any_sync sees the full warp */
  auto put = [&] (int b) {
    if (mode == 2) {
      if (b >= 0) atomicAdd(&sh[b], 1u);
      return;
    }
    unsigned peers = __match_any_sync(FULL_MASK, b);
    if (b >= 0 && (__ffs(peers) - 1) == (int)lane) {
      unsigned k = __popc(peers);
      if (shared) atomicAdd(&sh[b], k);
      else add_to(&counts[b], k);
    }
  };
  u64 done = 0;
  if (vec) {   /* x is 16-byte aligned: whole 16-byte groups first */
    const int V = 16 / sizeof(T);
    const u64 groups = n / V;
    const uint4 *xv = (const uint4 *)x;
    const u64 rounds = (groups + stride - 1) / stride;
    for (u64 r = 0, i = start; r < rounds; r++, i += stride) {
      T v[V];
      bool in = i < groups;
      if (in) {
        uint4 q = xv[i];
        memcpy(v, &q, 16);
      }
      #pragma unroll
      for (int k = 0; k < V; k++) {
        int b = -2;
        if (in) {
          b = binner<T>::bin(v[k], ilo, ihi, flo, fhi, bins);
          if (b < 0) out++;
        }
        put(b);
      }
    }
    done = groups * V;
  }
  const u64 rounds = (n - done + stride - 1) / stride;
  for (u64 r = 0, i = done + start; r < rounds; r++, i += stride) {
    int b = -2;
    if (i < n) {
      b = binner<T>::bin(x[i], ilo, ihi, flo, fhi, bins);
      if (b < 0) out++;
    }
    put(b);
  }
  /* the left-out count: a warp's sum, one atomic a warp */
  for (int o = 16; o > 0; o >>= 1) out += __shfl_down_sync(FULL_MASK, out, o);
  if (lane == 0 && out != 0) atomicAdd(left, (u64)out);
  if (shared) {
    __syncthreads();
    for (int i = threadIdx.x; i < bins; i += blockDim.x) {
      unsigned k = sh[i];
      if (k != 0) add_to(&counts[i], k);
    }
  }
}

#define HIST(TN, T, CN, C)                                                         \
  extern "C" __global__ void __launch_bounds__(256)                                \
  culua_histogram_##TN##_##CN (const T *x, u64 n, C *counts, int bins,             \
                               i64 ilo, i64 ihi, double flo, double fhi,           \
                               u64 *left, int mode) {                               \
    histogram<T, C>(x, n, counts, bins, ilo, ihi, flo, fhi, left, mode);            \
  }

#define HIST2(TN, T) HIST(TN, T, u32, unsigned) HIST(TN, T, u64, u64)

HIST2(u8, unsigned char)
HIST2(u16, unsigned short)
HIST2(i32, int)
HIST2(u32, unsigned)
HIST2(f32, float)
HIST2(f64, double)
