/*
** sort_counts.cu
** The radix sort family's kernels outside the tiles (kernels/sort.cu has the
** tile kernels and says how the sort works; kernels/culua/sort.cuh what the
** two share): onesweep's upfront histogram of every pass's digits, lsd's digit
** counts and their scan, the copies back to the user's arrays, and seed 003's
** warp sort. None of them varies with the tile's shape: all are prebuilt.
*/

#include <culua/sort.cuh>


/* {====================================================== onesweep's upfront histogram */


/*
** An upfront kernel's count: every pass's digit of keys t, t + stride, ...
** of kin (t: the thread's place in the grid, stride: the grid's threads),
** LOADS loads in flight a thread. Pass p's counter of digit d is
** ctr[(p * 256 + d) * COLS] (ctr: the thread's column of counters in shared
** memory). Each pass's shift and mask are held in registers: the loop over
** passes is unrolled to the most a key width has, and a key costs a shift,
** a mask and an atomic a pass.
*/
template <typename K, bool PLAIN, int LOADS, int THREADS, int COLS>
__device__ __forceinline__ void upfront_tally (const K *kin, u64 n, u32 *ctr, int passes, int begin_bit, int end_bit,
                                               int kind, int flags) {
  constexpr int MAXP = sizeof(K);
  const u64 stride = (u64)gridDim.x * THREADS;
  int sh[MAXP];
  u32 mk[MAXP];
#pragma unroll
  for (int p = 0; p < MAXP; p++) {
    sh[p] = p < passes ? begin_bit + 8 * p : 0;
    mk[p] = p < passes ? (1u << min(8, end_bit - sh[p])) - 1 : 0;
  }
  auto tally = [&] (K k) {
    if (PLAIN) {
#pragma unroll
      for (int p = 0; p < MAXP; p++) atomicAdd(&ctr[((p << 8) | ((u32)(k >> (8 * p)) & 0xff)) * COLS], 1u);
    }
    else {
      const K r = to_radix(k, kind, flags);
#pragma unroll
      for (int p = 0; p < MAXP; p++)
        if (p < passes) atomicAdd(&ctr[((p << 8) | digit_of(r, sh[p], mk[p])) * COLS], 1u);
    }
  };
  u64 i = (u64)blockIdx.x * THREADS + threadIdx.x;
  for (; i + (LOADS - 1) * stride < n; i += LOADS * stride) {
    K k[LOADS];
#pragma unroll
    for (int q = 0; q < LOADS; q++) k[q] = kin[i + q * stride];
#pragma unroll
    for (int q = 0; q < LOADS; q++) tally(k[q]);
  }
  for (; i < n; i += stride) tally(kin[i]);
}

/*
** The end of an upfront kernel, once a block has added its counts to hist:
** the last block to finish turns them into the passes' digit offsets (see
** upfront). wsum: THREADS / 32 words of shared memory.
*/
template <int THREADS>
__device__ __forceinline__ void upfront_last (u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride, u32 *skip,
                                              int passes, u64 *wsum) {
  __shared__ int last;
  const int tid = threadIdx.x;
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int p = 0; p < passes; p++) {
    u64 c = tid < SORT_RADIX ? __ldcg(&hist[p * SORT_RADIX + tid]) : 0;
    if (tid < SORT_RADIX) hist[p * SORT_RADIX + tid] = 0;
    u64 before = block_exclusive_scan<THREADS, u64>(c, wsum);
    if (tid < SORT_RADIX) bins[p * bins_stride + tid] = before;
    if (tid == 0) skip[p] = 0;
    __syncthreads();
    if (tid < SORT_RADIX && c == n) skip[p] = 1;
  }
  if (tid == 0) *done = 0;
}

/*
** The upfront histogram: every pass's digit counts over all n keys, in one
** read. A block counts in shared memory and adds to `hist` (passes x 256
** counts); the last block to finish (a ticket in *done) turns the counts
** into each pass's exclusive digit offsets in `bins` (bins_stride apart),
** leaves hist and *done at zero for the next sort, and sets skip[p] where
** one digit holds every key (the pass is then a copy). The grid also zeroes
** `zero` (the passes' tile counters and the first launch's look-back words),
** which no block of this kernel reads.
**
** PLAIN: unsigned keys in ascending order over all their bits (the radix bits
** are the keys, every pass takes a whole byte), a copy with the shifts and
** masks constant and no transform: 2^28 uint32 keys took 475 us so against
** 488, 2^27 uint64 468 against 521 (H100, ncu). LOADS: loads in flight a
** thread (16 saved 2-3 us more for PLAIN; the other copy keeps 8, which for
** uint64 keys is already 38 registers).
*/
template <typename K, bool PLAIN = false, int LOADS = 8>
__device__ __forceinline__ void upfront (const K *kin, u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride,
                                         u32 *skip, u32 *zero, u64 zero_words, int passes, int begin_bit,
                                         int end_bit, int kind, int flags) {
  __shared__ u32 count[8][SORT_RADIX];
  __shared__ u64 wsum[SORT_RADIX / 32];
  const int tid = threadIdx.x;
  const u64 stride = (u64)gridDim.x * SORT_RADIX;
  culua_dep_wait();
  culua_dep_release();   /* the first pass's blocks wait for this grid's end, in place */
  for (u64 i = (u64)blockIdx.x * SORT_RADIX + tid; i < zero_words; i += stride) zero[i] = 0;
  for (int p = 0; p < 8; p++) count[p][tid] = 0;
  __syncthreads();
  upfront_tally<K, PLAIN, LOADS, SORT_RADIX, 1>(kin, n, &count[0][0], passes, begin_bit, end_bit, kind, flags);
  __syncthreads();
  for (int p = 0; p < passes; p++)
    if (count[p][tid]) atomicAdd(&hist[p * SORT_RADIX + tid], (u64)count[p][tid]);
  upfront_last<SORT_RADIX>(n, hist, done, bins, bins_stride, skip, passes, wsum);
}

/*
** The upfront histogram (as upfront, the same arguments) in blocks of 1024
** threads, one a multiprocessor, whose counters are a column a lane: pass
** p's counter of digit d for column c is word (p * 256 + d) * COLS + c of
** `lanes`, 128 KiB of dynamic shared memory. upfront's rows of 256 put a
** warp's random digits in the same bank three or four at a time, and its
** atomics, a key's digit a pass, set its pace rather than the reads: 2^28
** uint32 keys took 392 us so against 477, 2^27 uint64 381 against 470 (H100,
** ncu, PLAIN both). 32-bit keys take a column a lane, and a warp's atomics
** fall in 32 banks; 64-bit keys (eight passes) a column for two lanes, two
** to a bank; 16- and 8-bit keys (two passes, one) have 64 and 128 columns,
** a column a lane of each warp and a bank a lane still.
*/
#define SORT_LANES_THREADS 1024
#define SORT_LANES_LOADS 16        /* loads in flight a thread */
#define SORT_LANES_COUNTERS 128    /* a digit's counters over the passes: PASSES x COLS */
template <typename K, bool PLAIN>
__device__ __forceinline__ void upfront_lanes (const K *kin, u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride,
                                               u32 *skip, u32 *zero, u64 zero_words, int passes, int begin_bit,
                                               int end_bit, int kind, int flags) {
  constexpr int LOADS = SORT_LANES_LOADS, T = SORT_LANES_THREADS, PASSES = sizeof(K), COLS = SORT_LANES_COUNTERS / PASSES;
  extern __shared__ __align__(16) u32 lanes[];   /* PASSES x 256 x COLS counters */
  __shared__ u64 wsum[T / 32];
  const int tid = threadIdx.x, col = tid & (COLS - 1);
  const u64 stride = (u64)gridDim.x * T;
  culua_dep_wait();
  culua_dep_release();
  for (u64 i = (u64)blockIdx.x * T + tid; i < zero_words; i += stride) zero[i] = 0;
  for (int w = tid; w < PASSES * SORT_RADIX * COLS; w += T) lanes[w] = 0;
  __syncthreads();
  upfront_tally<K, PLAIN, LOADS, T, COLS>(kin, n, lanes + col, passes, begin_bit, end_bit, kind, flags);
  __syncthreads();
  /* thread t sums pass c / 256's digit c % 256 over the columns (c = t, t +
     T, ...), each lane starting at another column so that their reads
     spread over the banks */
  for (int c = tid; c < passes * SORT_RADIX; c += T) {
    const u32 *row = lanes + c * COLS;
    u32 sum = 0;
#pragma unroll 8
    for (int j = 0; j < COLS; j++) sum += row[(j + tid) & (COLS - 1)];
    if (sum) atomicAdd(&hist[c], (u64)sum);
  }
  upfront_last<T>(n, hist, done, bins, bins_stride, skip, passes, wsum);
}

/* }====================================================== */


/* {====================================================== lsd: its counts and scan */

/*
** Block b of the grid sorts keys b*chunk .. (b+1)*chunk-1 (its chunk) in
** tiles, in order. lsd_count writes each block's digit counts digit-major,
** counts[d * blocks + b], so that one exclusive scan of them (lsd_scan) gives
** every block its first place for every digit; lsd_scatter then ranks its
** chunk a tile at a time and scatters it, advancing its places.
*/
template <typename K>
__device__ __forceinline__ void lsd_count (const K *kin, u64 n, u64 chunk, u64 *counts, int shift, int bits,
                                           int kind, int flags) {
  __shared__ u32 c[SORT_RADIX];
  const int tid = threadIdx.x;
  const u32 mask = (1u << bits) - 1;
  c[tid] = 0;
  __syncthreads();
  u64 lo = (u64)blockIdx.x * chunk, hi = min(n, lo + chunk);
  for (u64 i = lo + tid; i < hi; i += SORT_RADIX) {
    K k = kin[i];
    if (flags & SORT_FIRST) k = to_radix(k, kind, flags);
    atomicAdd(&c[digit_of(k, shift, mask)], 1u);
  }
  __syncthreads();
  counts[(u64)tid * gridDim.x + blockIdx.x] = c[tid];
}

/* the exclusive prefix sums of counts[0 .. m-1], in place, by one block: a
** thread a slice */
extern "C" __global__ void __launch_bounds__(SORT_RADIX) culua_sort_lsd_scan (u64 *counts, u64 m) {
  __shared__ u64 wsum[SORT_RADIX / 32];
  const u64 per = (m + SORT_RADIX - 1) / SORT_RADIX;
  const u64 lo = min(m, threadIdx.x * per), hi = min(m, lo + per);
  u64 sum = 0;
  for (u64 i = lo; i < hi; i++) sum += counts[i];
  u64 run = block_exclusive_scan<SORT_RADIX, u64>(sum, wsum);
  for (u64 i = lo; i < hi; i++) {
    u64 c = counts[i];
    counts[i] = run;
    run += c;
  }
}

/* }====================================================== */


/* {====================================================== warp: seed 003's sort */

/*
** At most 32 uint32 keys in one warp of 32 threads, one bit a round from
** begin_bit up: a ballot tells every lane which lanes hold a one; a lane
** with a zero goes after the zeros of lower lanes, a lane with a one after
** all zeros and the ones of lower lanes. The keys (and values) trade places
** through a ping-pong buffer in shared memory. Lanes past n hold all ones,
** which stay behind the real keys.
*/
template <typename V, bool VALUES>
__device__ __forceinline__ void warp_sort (const u32 *kin, u32 *kout, const V *vin, V *vout, int n,
                                           int begin_bit, int end_bit, int flags) {
  __shared__ u32 sk[2][32];
  __shared__ V sv[2][32];
  const int lane = threadIdx.x & 31;
  const u32 below = (1u << lane) - 1;
  u32 key = lane < n ? to_radix<u32>(kin[lane], 0, flags) : SORT_FULL;
  V val = V(0);
  if (VALUES) val = (flags & SORT_IOTA) ? (V)(lane + 1) : lane < n ? vin[lane] : V(0);
  int buf = 0;
  for (int b = begin_bit; b < end_bit; b++) {
    u32 bit = (key >> b) & 1;
    u32 ones = __ballot_sync(SORT_FULL, bit), zeros = ~ones;
    u32 pos = bit ? __popc(zeros) + __popc(ones & below) : __popc(zeros & below);
    sk[buf][pos] = key;
    if (VALUES) sv[buf][pos] = val;
    __syncwarp();
    key = sk[buf][lane];
    if (VALUES) val = sv[buf][lane];
    buf ^= 1;   /* the other buffer next round: no lane still reads the one written next */
  }
  if (lane < n) {
    if (!(flags & SORT_NOKEYS)) kout[lane] = from_radix<u32>(key, 0, flags);
    if (VALUES) vout[lane] = val;
  }
}

/* }====================================================== */


/* {====================================================== entry points */

/* the keys (or values) back to the user's array when the passes are odd in
** number and end in scratch */
extern "C" __global__ void culua_sort_copy32 (const u32 *src, u32 *dst, u64 n) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) dst[i] = src[i];
}

extern "C" __global__ void culua_sort_copy64 (const u64 *src, u64 *dst, u64 n) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) dst[i] = src[i];
}

extern "C" __global__ void culua_sort_copy16 (const u16 *src, u16 *dst, u64 n) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) dst[i] = src[i];
}

extern "C" __global__ void culua_sort_copy8 (const u8 *src, u8 *dst, u64 n) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) dst[i] = src[i];
}

#define SORT_COUNTS(k, K) \
  extern "C" __global__ void __launch_bounds__(SORT_RADIX) culua_sort_upfront_##k ( \
      const K *kin, u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride, u32 *skip, u32 *zero, \
      u64 zero_words, int passes, int begin_bit, int end_bit, int kind, int flags) { \
    upfront<K>(kin, n, hist, done, bins, bins_stride, skip, zero, zero_words, passes, begin_bit, end_bit, \
               kind, flags); \
  } \
  extern "C" __global__ void __launch_bounds__(SORT_RADIX) culua_sort_upfront_plain_##k ( \
      const K *kin, u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride, u32 *skip, u32 *zero, \
      u64 zero_words, int passes, int begin_bit, int end_bit, int kind, int flags) { \
    upfront<K, true, 16>(kin, n, hist, done, bins, bins_stride, skip, zero, zero_words, passes, begin_bit, end_bit, \
               kind, flags); \
  } \
  extern "C" __global__ void __launch_bounds__(SORT_RADIX) culua_sort_lsd_count_##k ( \
      const K *kin, u64 n, u64 chunk, u64 *counts, int shift, int bits, int kind, int flags) { \
    lsd_count<K>(kin, n, chunk, counts, shift, bits, kind, flags); \
  }

SORT_COUNTS(u8, u8)
SORT_COUNTS(u16, u16)
SORT_COUNTS(u32, u32)
SORT_COUNTS(u64, u64)

#define SORT_LANES(k, K, PLAIN, plain) \
  extern "C" __global__ void __launch_bounds__(SORT_LANES_THREADS) culua_sort_upfront_lanes##plain##_##k ( \
      const K *kin, u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride, u32 *skip, u32 *zero, \
      u64 zero_words, int passes, int begin_bit, int end_bit, int kind, int flags) { \
    upfront_lanes<K, PLAIN>(kin, n, hist, done, bins, bins_stride, skip, zero, zero_words, passes, begin_bit, \
                            end_bit, kind, flags); \
  }
SORT_LANES(u8, u8, false, )
SORT_LANES(u16, u16, false, )
SORT_LANES(u32, u32, false, )
SORT_LANES(u64, u64, false, )
SORT_LANES(u8, u8, true, _plain)
SORT_LANES(u16, u16, true, _plain)
SORT_LANES(u32, u32, true, _plain)
SORT_LANES(u64, u64, true, _plain)
#define SORT_WARP(v, V, VALUES) \
  extern "C" __global__ void __launch_bounds__(32) culua_sort_warp_##v ( \
      const u32 *kin, u32 *kout, const V *vin, V *vout, int n, int begin_bit, int end_bit, int flags) { \
    warp_sort<V, VALUES>(kin, kout, vin, vout, n, begin_bit, end_bit, flags); \
  }

SORT_WARP(keys, u32, false)
SORT_WARP(u32, u32, true)
SORT_WARP(u64, u64, true)

/* }====================================================== */