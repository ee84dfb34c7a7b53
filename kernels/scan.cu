/*
** scan.cu
** The scan family of culua's catalog: prefix scans (add, min, max) over
** int32, uint32, int64, uint64, float32 and float64, their reduction, and
** stream compaction (compact and split), from seed 003's one-block scans to
** a single-pass scan with decoupled look-back.
**
** Integer additions are done in the unsigned type of the same width, so
** that signed overflow is defined: it wraps two's complement.
**
** The single pass (Merrill & Garland, "Single-pass Parallel Prefix Scan with
** Decoupled Look-back", 2016): each block takes the next tile index from a
** counter (so it only ever waits on tiles whose blocks have started), reduces
** its tile, publishes that aggregate, then warp 0 walks back over its
** predecessors 32 at a time, adding aggregates until it meets a tile that has
** published its inclusive prefix, and publishes its own.
**
** The tile words live in a scratch array of 64-bit words: word 0 is the tile
** counter, then one status word a tile; 8-byte values have an array of
** their own, one aggregate and one inclusive prefix a tile (apart, so that
** a status word is never a stale value that looks like a later epoch's
** status). The host passes the counter's
** value before the launch (`base`), so the counter is never reset, and an
** epoch that grows each launch: a status is valid only with this launch's
** epoch, so stale words from earlier launches need no clearing either.
** A status is epoch << 2 | flag (flag 1: aggregate, 2: inclusive prefix).
** For 4-byte values the status (high half) and the value (low half) are one
** 64-bit word, read and written whole; 8-byte values go to their own words,
** written before the status with release order and read after it with
** acquire order.
*/

typedef unsigned long long u64;

/* float16 and bfloat16 (NVRTC variants only, -D CULUA_LOWP): read as floats, summed in float32 */
#ifdef CULUA_LOWP
#include <culua/lowp.cuh>
#endif
template <class T> __device__ __forceinline__ T culua_widen (T v) { return v; }
template <class T> __device__ __forceinline__ T culua_narrow (float v);   /* culua/lowp.cuh */
template <class A, class B> struct same_type { static const bool value = false; };
template <class A> struct same_type<A, A> { static const bool value = true; };

/*
** The look-back tile: 32 four-byte items a thread, 16 eight-byte ones; 128
** threads, but 256 for the sums of 4-byte values, whose registers are bound
** to 5 blocks a multiprocessor (48 registers, a few bytes spilt). Swept on
** an H100, float32 and int32 at 2^28 (bench/RESULTS.md): in session 6,
** unbound, 128 x 32 ran 2403 GB/s against 256 x 16's 2131 and CUB's 2435;
** in session 14, through NVRTC, 128 x 32 took 1.012 ms unbound (78
** registers), 0.867 bound to 10 blocks and 0.857 as 256 x 32 bound to 5
** (int32 0.870); more blocks spill and lose. The min and max scans and the
** 8-byte ones spill 70-170 bytes when bound so, and keep 128 unbound.
*/
#ifndef CULUA_THREADS              /* -D for NVRTC variants (a tile-shape sweep) */
#define CULUA_THREADS 128        /* threads of a look-back block */
#endif
#ifndef CULUA_ADD4_THREADS
#define CULUA_ADD4_THREADS 256   /* ... of the sums of 4-byte values */
#endif
#ifndef CULUA_ITEMS4
#define CULUA_ITEMS4 32          /* items a thread for 4-byte types; half for 8-byte ones */
#endif
#ifndef CULUA_SCAN_MINB
#define CULUA_SCAN_MINB 5        /* blocks a multiprocessor: the sums of 4-byte values */
#endif
/*
** Small sums of 4-byte values (up to 2^21, lua/catalog/scan.lua) take 128 x 32
** tiles bound to 10 blocks (48 registers): at 2^16 a 256-thread tile made a
** scan from Lua 8.8 us a call between events where 128 threads made 5.5 (the
** GPU's share outgrew the host's), and 256 tiles of 128 x 32 keep the
** multiprocessors busy up there.
*/
#ifndef CULUA_SMALL_MINB
#define CULUA_SMALL_MINB 10
#endif
#define CULUA_ADD_THREADS(T) (sizeof(T) == 4 ? CULUA_ADD4_THREADS : CULUA_THREADS)
#define CULUA_ADD_MINB(T) (sizeof(T) == 4 ? CULUA_SCAN_MINB : 1)
#define CULUA_SEED_THREADS 1024  /* the seed's one-block scans */
#define FULL_MASK 0xffffffffu

#define FLAG_AGG 1u
#define FLAG_PREFIX 2u


/* {====================================================== element types and operators */

/* a value's bits in a 64-bit word, and back (the host passes init as bits) */
template <class T> __device__ __forceinline__ u64 to_bits (T v);
template <class T> __device__ __forceinline__ T from_bits (u64 b);
template <> __device__ __forceinline__ u64 to_bits<int> (int v) { return (unsigned)v; }
template <> __device__ __forceinline__ u64 to_bits<unsigned> (unsigned v) { return v; }
template <> __device__ __forceinline__ u64 to_bits<long long> (long long v) { return (u64)v; }
template <> __device__ __forceinline__ u64 to_bits<u64> (u64 v) { return v; }
template <> __device__ __forceinline__ u64 to_bits<float> (float v) { return (unsigned)__float_as_int(v); }
template <> __device__ __forceinline__ u64 to_bits<double> (double v) { return (u64)__double_as_longlong(v); }
template <> __device__ __forceinline__ int from_bits<int> (u64 b) { return (int)(unsigned)b; }
template <> __device__ __forceinline__ unsigned from_bits<unsigned> (u64 b) { return (unsigned)b; }
template <> __device__ __forceinline__ long long from_bits<long long> (u64 b) { return (long long)b; }
template <> __device__ __forceinline__ u64 from_bits<u64> (u64 b) { return b; }
template <> __device__ __forceinline__ float from_bits<float> (u64 b) { return __int_as_float((int)(unsigned)b); }
template <> __device__ __forceinline__ double from_bits<double> (u64 b) { return __longlong_as_double((long long)b); }

/* the largest and lowest values: identities of min and max (infinities for floats) */
template <class T> struct Lim;
template <> struct Lim<int> {
  static __device__ __forceinline__ int max () { return 0x7fffffff; }
  static __device__ __forceinline__ int lowest () { return -0x7fffffff - 1; }
};
template <> struct Lim<unsigned> {
  static __device__ __forceinline__ unsigned max () { return 0xffffffffu; }
  static __device__ __forceinline__ unsigned lowest () { return 0; }
};
template <> struct Lim<long long> {
  static __device__ __forceinline__ long long max () { return 0x7fffffffffffffffLL; }
  static __device__ __forceinline__ long long lowest () { return -0x7fffffffffffffffLL - 1; }
};
template <> struct Lim<u64> {
  static __device__ __forceinline__ u64 max () { return ~0ULL; }
  static __device__ __forceinline__ u64 lowest () { return 0; }
};
template <> struct Lim<float> {
  static __device__ __forceinline__ float max () { return __int_as_float(0x7f800000); }
  static __device__ __forceinline__ float lowest () { return __int_as_float((int)0xff800000u); }
};
template <> struct Lim<double> {
  static __device__ __forceinline__ double max () { return __longlong_as_double(0x7ff0000000000000LL); }
  static __device__ __forceinline__ double lowest () { return __longlong_as_double((long long)0xfff0000000000000ULL); }
};

/* additions that wrap: signed overflow is undefined in C++, unsigned is not */
__device__ __forceinline__ int add_wrap (int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ unsigned add_wrap (unsigned a, unsigned b) { return a + b; }
__device__ __forceinline__ long long add_wrap (long long a, long long b) { return (long long)((u64)a + (u64)b); }
__device__ __forceinline__ u64 add_wrap (u64 a, u64 b) { return a + b; }
__device__ __forceinline__ float add_wrap (float a, float b) { return a + b; }
__device__ __forceinline__ double add_wrap (double a, double b) { return a + b; }

struct OpAdd {
  template <class T> static __device__ __forceinline__ T apply (T a, T b) { return add_wrap(a, b); }
  template <class T> static __device__ __forceinline__ T identity () { return T(0); }
};
struct OpMin {
  template <class T> static __device__ __forceinline__ T apply (T a, T b) { return b < a ? b : a; }
  template <class T> static __device__ __forceinline__ T identity () { return Lim<T>::max(); }
};
struct OpMax {
  template <class T> static __device__ __forceinline__ T apply (T a, T b) { return a < b ? b : a; }
  template <class T> static __device__ __forceinline__ T identity () { return Lim<T>::lowest(); }
};

/* }====================================================== */


/* {====================================================== seed 003's scans */

/*
** Hillis-Steele in one block, double-buffered (seed 003's scan_v1 done in
** shared memory): log2(n) steps, each adding the element `off` behind.
** One thread an element, n <= 1024.
*/
template <class T, class Op>
__device__ void scan_naive (const T *x, T *y, int n, int exclusive, u64 initb) {
  __shared__ T buf[2][CULUA_SEED_THREADS];
  const T id = Op::template identity<T>(), init = from_bits<T>(initb);
  int t = threadIdx.x, in = 0;
  buf[0][t] = t < n ? x[t] : id;
  __syncthreads();
  for (int off = 1; off < (int)blockDim.x; off <<= 1) {
    T v = buf[in][t];
    if (t >= off) v = Op::apply(buf[in][t - off], v);
    buf[1 - in][t] = v;
    in = 1 - in;
    __syncthreads();
  }
  if (t < n) y[t] = exclusive ? (t > 0 ? Op::apply(init, buf[in][t - 1]) : init) : Op::apply(init, buf[in][t]);
}


/*
** Blelloch's work-efficient scan (seed 003's scan_v2): 1024 threads scan
** 2048 elements, an up-sweep of partial sums and a down-sweep that leaves
** the inclusive scan. Block b scans elements 2048b .. 2048b+2047. With sums
** (the multi-block `global` variant) it writes its block's total there and
** seeds with the identity (the propagation adds the blocks before it);
** without, it seeds with init.
*/
template <class T, class Op>
__device__ void scan_blelloch (const T *x, T *y, u64 n, int exclusive, u64 initb, T *sums) {
  const int N2 = 2 * CULUA_SEED_THREADS;
  __shared__ T s[N2];
  const T id = Op::template identity<T>();
  const T seed = sums ? id : from_bits<T>(initb);
  u64 first = (u64)blockIdx.x * N2;
  int valid = n - first < (u64)N2 ? (int)(n - first) : N2;
  int t = threadIdx.x;
  s[t] = t < valid ? x[first + t] : id;
  s[t + CULUA_SEED_THREADS] = t + CULUA_SEED_THREADS < valid ? x[first + t + CULUA_SEED_THREADS] : id;
  for (int off = 1; off < N2; off <<= 1) {      /* up-sweep */
    __syncthreads();
    int a = off * (2 * t + 1) - 1, b = off * (2 * t + 2) - 1;
    if (b < N2) s[b] = Op::apply(s[a], s[b]);
  }
  for (int off = N2 / 4; off > 0; off >>= 1) {  /* down-sweep */
    __syncthreads();
    int a = off * (2 * t + 2) - 1, b = off * (2 * t + 3) - 1;
    if (b < N2) s[b] = Op::apply(s[a], s[b]);
  }
  __syncthreads();
  for (int e = t; e < valid; e += CULUA_SEED_THREADS)
    y[first + e] = exclusive ? (e > 0 ? Op::apply(seed, s[e - 1]) : seed) : Op::apply(seed, s[e]);
  if (sums && t == 0) sums[blockIdx.x] = s[N2 - 1];
}


/* the global variant's last step: block b's elements get prefix[b] */
template <class T, class Op>
__device__ void scan_propagate (T *y, u64 n, const T *prefix) {
  const u64 per = 2 * CULUA_SEED_THREADS;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    y[i] = Op::apply(prefix[i / per], y[i]);
}

/* }====================================================== */


/* {====================================================== single pass with decoupled look-back */

/* the tile words: relaxed and acquire/release accesses at GPU scope */
__device__ __forceinline__ void st_relaxed (u64 *p, u64 v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release (u64 *p, u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 ld_relaxed (const u64 *p) {
  u64 v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u64 ld_acquire (const u64 *p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* skew shared-memory indices so that a thread's run of items spreads over banks */
__device__ __forceinline__ int pad (int i) { return i + (i >> 5); }

/*
** A tile of ITEMS elements a thread into registers, blocked (thread t holds
** elements t*ITEMS .. t*ITEMS+ITEMS-1): loaded striped across the block
** (coalesced; 16-byte vectors when the tile is whole and p is 16-byte
** aligned, element loads otherwise, as in a view at an odd offset) into
** shared memory, then read back blocked. Elements past `valid` are `fill`.
*/
template <class E, int ITEMS, int THREADS>
__device__ __forceinline__ void load_tile (const E *p, int valid, E fill, E (&items)[ITEMS], E *buf) {
  const int TILE = THREADS * ITEMS, VEC = 16 / sizeof(E);
  bool done = false;
  if constexpr (ITEMS % VEC == 0) {
    if (valid == TILE && ((u64)p & 15) == 0) {
      const uint4 *v = (const uint4 *)p;
#pragma unroll
      for (int k = 0; k < ITEMS / VEC; k++) {
        int j = threadIdx.x + k * THREADS;
        union { uint4 v; E e[VEC]; } u;
        u.v = v[j];
#pragma unroll
        for (int q = 0; q < VEC; q++) buf[pad(j * VEC + q)] = u.e[q];
      }
      done = true;
    }
  }
  if (!done) {
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      int i = threadIdx.x + k * THREADS;
      buf[pad(i)] = i < valid ? p[i] : fill;
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < ITEMS; k++) items[k] = buf[pad(threadIdx.x * ITEMS + k)];
  __syncthreads();   /* buf is free again */
}

/* the reverse: blocked registers to p[0 .. valid-1], through shared memory */
template <class E, int ITEMS, int THREADS>
__device__ __forceinline__ void store_tile (E *p, int valid, const E (&items)[ITEMS], E *buf) {
  const int TILE = THREADS * ITEMS, VEC = 16 / sizeof(E);
  bool done = false;
#pragma unroll
  for (int k = 0; k < ITEMS; k++) buf[pad(threadIdx.x * ITEMS + k)] = items[k];
  __syncthreads();
  if constexpr (ITEMS % VEC == 0) {
    if (valid == TILE && ((u64)p & 15) == 0) {
      uint4 *v = (uint4 *)p;
#pragma unroll
      for (int k = 0; k < ITEMS / VEC; k++) {
        int j = threadIdx.x + k * THREADS;
        union { uint4 v; E e[VEC]; } u;
#pragma unroll
        for (int q = 0; q < VEC; q++) u.e[q] = buf[pad(j * VEC + q)];
        v[j] = u.v;
      }
      done = true;
    }
  }
  if (!done) {
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      int i = threadIdx.x + k * THREADS;
      if (i < valid) p[i] = buf[pad(i)];
    }
  }
}

/*
** Exclusive scan of one value a thread across the block: `excl` is the
** combination of the threads before, `total` of all. wsum holds a value a
** warp; the caller syncs before using wsum again.
*/
template <class A, class Op, int THREADS>
__device__ __forceinline__ void block_scan (A v, A &excl, A &total, A *wsum) {
  const int NW = THREADS / 32;
  const A id = Op::template identity<A>();
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  A inc = v;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    A o = __shfl_up_sync(FULL_MASK, inc, off);
    if (lane >= off) inc = Op::apply(o, inc);
  }
  if (lane == 31) wsum[w] = inc;
  __syncthreads();
  A before = id, tot = id;
#pragma unroll
  for (int i = 0; i < NW; i++) {
    if (i == w) before = tot;
    tot = Op::apply(tot, wsum[i]);
  }
  A up = __shfl_up_sync(FULL_MASK, inc, 1);
  excl = Op::apply(before, lane > 0 ? up : id);
  total = tot;
}

/* publish a tile's aggregate or inclusive prefix (one thread) */
template <class A>
__device__ __forceinline__ void publish (u64 *scratch, u64 *values, u64 ntiles, u64 epoch, long long tile,
                                        unsigned flag, A v) {
  u64 *status = scratch + 1;
  u64 st = (epoch << 2) | flag;
  if (sizeof(A) == 4) {
    st_relaxed(status + tile, (st << 32) | (to_bits<A>(v) & 0xffffffffULL));
  } else {
    u64 *val = values + (flag == FLAG_PREFIX ? ntiles : 0);
    st_relaxed(val + tile, to_bits<A>(v));
    st_release(status + tile, st);   /* orders the value before the flag */
  }
}

/* a tile's flag (0 while it has published nothing this launch) and value */
template <class A>
__device__ __forceinline__ unsigned peek (const u64 *scratch, const u64 *values, u64 ntiles, u64 epoch,
                                          long long tile, A &v) {
  const u64 *status = scratch + 1;
  if (sizeof(A) == 4) {
    u64 w = ld_relaxed(status + tile);
    u64 st = w >> 32;
    if ((st >> 2) != epoch) return 0;
    v = from_bits<A>(w & 0xffffffffULL);
    return (unsigned)(st & 3);
  }
  u64 st = ld_acquire(status + tile);
  if ((st >> 2) != epoch) return 0;
  unsigned flag = (unsigned)(st & 3);
  v = from_bits<A>(ld_relaxed(values + (flag == FLAG_PREFIX ? ntiles : 0) + tile));
  return flag;
}

/*
** Warp 0 of a tile's block: publish the aggregate, look back, publish the
** inclusive prefix; returns (to every lane) the combination of all tiles
** before this one, seeded with init. Lane l looks at tile w - l of a
** window; the window stops at the nearest tile with a prefix, or moves 32
** tiles back. Tiles before 0 count as a prefix of the identity, so no lane
** waits on a tile that does not exist.
*/
template <class A, class Op>
__device__ A tile_prefix (u64 *scratch, u64 *values, u64 ntiles, u64 epoch, long long tile, A agg, A init) {
  const A id = Op::template identity<A>();
  int lane = threadIdx.x & 31;
  if (tile == 0) {
    if (lane == 0) publish<A>(scratch, values, ntiles, epoch, 0, FLAG_PREFIX, Op::apply(init, agg));
    return init;
  }
  if (lane == 0) publish<A>(scratch, values, ntiles, epoch, tile, FLAG_AGG, agg);
  A acc = id;
  for (long long w = tile - 1;; w -= 32) {
    long long pred = w - lane;
    unsigned flag;
    A v = id;
    for (int spins = 0;; spins++) {
      flag = pred < 0 ? FLAG_PREFIX : peek<A>(scratch, values, ntiles, epoch, pred, v);
      if (__all_sync(FULL_MASK, flag != 0)) break;
      if (spins > 4) __nanosleep(64);
    }
    unsigned pmask = __ballot_sync(FULL_MASK, flag == FLAG_PREFIX);
    int stop = pmask ? __ffs(pmask) - 1 : 31;
    A mine = lane <= stop ? v : id;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mine = Op::apply(mine, __shfl_xor_sync(FULL_MASK, mine, off));
    acc = Op::apply(mine, acc);   /* this window lies before the windows already summed */
    if (pmask) break;
  }
  if (lane == 0) publish<A>(scratch, values, ntiles, epoch, tile, FLAG_PREFIX, Op::apply(acc, agg));
  return acc;
}

/*
** This block's tile: the next from the launch's counter (base: the counter's
** value when the launch began), so a block waits only on tiles whose blocks
** have started. valid: how many of its elements exist.
*/
__device__ __forceinline__ long long claim_tile (u64 *scratch, u64 base, u64 n, int tile_elems, int &valid) {
  __shared__ long long s_tile;
  if (threadIdx.x == 0) s_tile = (long long)(atomicAdd(scratch, 1ULL) - base);
  __syncthreads();
  u64 first = (u64)s_tile * tile_elems;
  valid = n - first < (u64)tile_elems ? (int)(n - first) : tile_elems;
  return s_tile;
}

template <class T> struct Items { static const int n = sizeof(T) == 4 ? CULUA_ITEMS4 : CULUA_ITEMS4 / 2; };

/*
** The single-pass scan: one block a tile of THREADS x ITEMS elements (8192
** 4-byte ones to sum, else 4096 4-byte or 2048 8-byte). y may be x (in place: a block reads its whole tile
** before writing it) or 0 (only the total, to out[0], for reduce); out, when
** not 0, gets the inclusive total's bits from the last tile.
** T is the type the scan runs in; x holds L and y holds O, T itself but for
** float16 and bfloat16 (float T, as many items as float's): L widened as it
** is loaded, and y in L or in float, rounded once from the float.
*/
template <class T, class Op, int THREADS, class L = T, class O = T>
__device__ void scan_lookback (const L *x, O *y, u64 n, int exclusive, u64 initb, u64 *scratch, u64 *values, u64 base,
                               u64 epoch, u64 ntiles, u64 *out) {
  const int ITEMS = Items<T>::n, TILE = THREADS * ITEMS;
  __shared__ __align__(16) T buf[TILE + TILE / 32];
  __shared__ T wsum[THREADS / 32];
  __shared__ T s_prefix;
  const T id = Op::template identity<T>();
  int valid;
  long long tile = claim_tile(scratch, base, n, TILE, valid);
  u64 first = (u64)tile * TILE;
  T items[ITEMS];
  if constexpr (same_type<L, T>::value) load_tile<T, ITEMS, THREADS>(x + first, valid, id, items, buf);
  else {   /* narrower elements, in the same buffer; the identity past valid */
    L narrow[ITEMS];
    load_tile<L, ITEMS, THREADS>(x + first, valid, L(), narrow, (L *)buf);
#pragma unroll
    for (int k = 0; k < ITEMS; k++) items[k] = (int)threadIdx.x * ITEMS + k < valid ? culua_widen(narrow[k]) : id;
  }
  T sum = items[0];
#pragma unroll
  for (int k = 1; k < ITEMS; k++) sum = Op::apply(sum, items[k]);
  T excl, agg;
  block_scan<T, Op, THREADS>(sum, excl, agg, wsum);
  if (threadIdx.x < 32) {
    T p = tile_prefix<T, Op>(scratch, values, ntiles, epoch, tile, agg, from_bits<T>(initb));
    if (threadIdx.x == 0) {
      s_prefix = p;
      if (out && (u64)tile == ntiles - 1) *out = to_bits<T>(Op::apply(p, agg));
    }
  }
  __syncthreads();
  if (!y) return;
  T run = Op::apply(s_prefix, excl);
#pragma unroll
  for (int k = 0; k < ITEMS; k++) {
    T v = items[k];
    if (exclusive) { items[k] = run; run = Op::apply(run, v); }
    else { run = Op::apply(run, v); items[k] = run; }
  }
  if constexpr (same_type<O, T>::value) store_tile<T, ITEMS, THREADS>(y + first, valid, items, buf);
  else {
    O narrow[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) narrow[k] = culua_narrow<O>(items[k]);
    store_tile<O, ITEMS, THREADS>(y + first, valid, narrow, (O *)buf);
  }
}


/*
** Compaction on the same single pass, scanning counts of kept elements in
** C: unsigned when n < 2^32 (the host's choice), so that the look-back takes
** the one-word path of 4-byte values (no release/acquire), else u64 (more
** than 2^32 may be kept). mode 0, compact: kept elements go to y in order;
** 1, split: kept ones first, then the rest from *total (the kept count, from
** an earlier mode-2 launch) on, both in order; 2: only the count. The last
** tile writes the count to *count. With P::flags the predicate is
** flags[i] != 0, else P::test(x[i]).
**
** The tile is warp-striped and never transposed: warp w owns the tile's
** elements w*32*ITEMS .. (w+1)*32*ITEMS-1, loaded as rows of 32 16-byte
** vectors (row k, lane l: elements (32k + l)*VEC ..); so the warp's kept
** elements are one run of the output. A thread's kept count a row (at most
** VEC) is packed 8 bits a row into one word, and one warp scan of that word
** gives every row's exclusive count (no field carries: a row's warp total
** is at most 32*VEC <= 128). Each warp gathers its kept elements (for split
** its others after them) in its own part of shared memory before the tile's
** one __syncthreads ahead of the look-back (so every element written out
** was loaded before the tile publishes its count: compact in place stays
** safe), and writes its run out after the prefix is known.
*/
#ifndef CULUA_SELECT_THREADS       /* -D for NVRTC variants (a tile-shape sweep) */
#define CULUA_SELECT_THREADS 128
#endif
#ifndef CULUA_SELECT_ITEMS4
#define CULUA_SELECT_ITEMS4 CULUA_ITEMS4
#endif
/*
** Blocks a multiprocessor that the registers must allow: none for the
** prebuilt kernels (flags arrays), which spill 80-430 bytes when bound. An
** expression's kernel on 4-byte values is built (lua/catalog/scan.lua) with
** 256 threads and 5 blocks, 48 registers: compact of 2^28 float32 (x > 0.5f)
** took 0.713 ms on an H100 so, 0.734 at 128 x 10 and 0.831 at 128 unbound.
*/
#ifndef CULUA_SELECT_MINB
#define CULUA_SELECT_MINB 1
#endif

template <class F> struct FlagPred {
  static const bool flags = true;
  template <class T> static __device__ __forceinline__ bool test (T) { return false; }
};

template <class T> struct SelItems { static const int n = sizeof(T) == 8 ? CULUA_SELECT_ITEMS4 / 2 : CULUA_SELECT_ITEMS4; };

/* a vector of BYTES bytes, loaded whole */
template <int BYTES> struct Vec;
template <> struct Vec<16> { typedef uint4 t; };
template <> struct Vec<8> { typedef uint2 t; };
template <> struct Vec<4> { typedef unsigned t; };
template <> struct Vec<2> { typedef unsigned short t; };
struct __align__(32) uint4x2 { uint4 a, b; };   /* int32 flags beside 2-byte elements: two 16-byte loads */
template <> struct Vec<32> { typedef uint4x2 t; };

/*
** A warp-striped tile of ITEMS elements a thread (VEC a vector, ITEMS/VEC
** rows): e[k*VEC + q] = p[wfirst + (32k + lane)*VEC + q]; whole vectors when
** `whole` (the tile is whole and p aligned to a vector), else element loads,
** `fill` past `valid`.
*/
template <class E, int VEC, int ITEMS>
__device__ __forceinline__ void load_striped (const E *p, int wfirst, int valid, bool whole, E fill, E (&e)[ITEMS]) {
  const int lane = threadIdx.x & 31;
  typedef typename Vec<VEC * sizeof(E)>::t V;
  if (whole) {
#pragma unroll
    for (int k = 0; k < ITEMS / VEC; k++) {
      union { V v; E e[VEC]; } u;
      u.v = *(const V *)(p + wfirst + (32 * k + lane) * VEC);
#pragma unroll
      for (int q = 0; q < VEC; q++) e[k * VEC + q] = u.e[q];
    }
  } else {
#pragma unroll
    for (int k = 0; k < ITEMS / VEC; k++) {
#pragma unroll
      for (int q = 0; q < VEC; q++) {
        int i = wfirst + (32 * k + lane) * VEC + q;
        e[k * VEC + q] = i < valid ? p[i] : fill;
      }
    }
  }
}

/*
** A warp writes src[j0 .. j1-1] to dst[j0 .. j1-1] (dst anywhere): a round
** of the loop covers 32 consecutive places that start at a multiple of 32
** (of dst's alignment), so that a run's stores cover whole 32-byte sectors
** but at its two ends. Rounds from j0 itself cross a sector boundary in
** every round wherever the run begins unaligned: compact of 2^28 float32
** wrote 23.4 million sectors so (CUB's DeviceSelect: 19.1) and took 3-5%
** longer (bench/RESULTS.md, session 23).
*/
template <class T>
__device__ __forceinline__ void write_run (T *dst, const T *src, int j0, int j1, int lane) {
  const int skew = (int)(((u64)(dst + j0) / sizeof(T)) & 31);
  for (int j = j0 - skew + lane; j < j1; j += 32)
    if (j >= j0) dst[j] = src[j];
}

template <class T, class F, class P, class C>
__device__ void select_lookback (const T *x, const F *flags, T *y, u64 n, int mode, const u64 *total,
                                 u64 *count, u64 *scratch, u64 *values, u64 base, u64 epoch, u64 ntiles) {
  const int THREADS = CULUA_SELECT_THREADS, NW = THREADS / 32, ITEMS = SelItems<T>::n;
  const int VEC = 16 / sizeof(T), ROWS = ITEMS / VEC, WTILE = 32 * ITEMS, TILE = THREADS * ITEMS;
  static_assert(ITEMS % VEC == 0 && ROWS <= 8 && ITEMS <= 32 && THREADS % 32 == 0,
                "CULUA_SELECT_ITEMS4: whole vectors, at most 8 rows (32 four-byte items)");
  __shared__ __align__(16) T buf[TILE];
  __shared__ int wkept[NW];
  __shared__ C s_prefix;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wfirst = w * WTILE;
  int valid;
  long long tile = claim_tile(scratch, base, n, TILE, valid);
  u64 first = (u64)tile * TILE;
  T items[ITEMS];
  load_striped<T, VEC, ITEMS>(x + first, wfirst, valid, valid == TILE && ((u64)(x + first) & 15) == 0, T(0), items);
  unsigned keep = 0;
  if constexpr (P::flags) {
    F f[ITEMS];
    const F *fp = flags + first;
    load_striped<F, VEC, ITEMS>(fp, wfirst, valid, valid == TILE && ((u64)fp & (VEC * sizeof(F) - 1)) == 0, F(0), f);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) if (f[i] != 0) keep |= 1u << i;
  } else {
#pragma unroll
    for (int k = 0; k < ROWS; k++)
#pragma unroll
      for (int q = 0; q < VEC; q++)
        if (wfirst + (32 * k + lane) * VEC + q < valid && P::test(items[k * VEC + q])) keep |= 1u << (k * VEC + q);
  }

  /* the warp's counts a row, 8 bits each: this thread's, the lanes' before it, the warp's */
  u64 mine = 0;
#pragma unroll
  for (int k = 0; k < ROWS; k++) mine |= (u64)__popc((keep >> (k * VEC)) & ((1u << VEC) - 1)) << (8 * k);
  u64 inc = mine;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    u64 o = __shfl_up_sync(FULL_MASK, inc, off);
    if (lane >= off) inc += o;
  }
  const u64 rows = __shfl_sync(FULL_MASK, inc, 31), before = inc - mine;
  int wtot = 0;
#pragma unroll
  for (int k = 0; k < ROWS; k++) wtot += (int)((rows >> (8 * k)) & 0xff);

  /* this warp's kept elements to buf[wfirst ..] in order (and for split its others after them) */
  if (mode != 2) {
    int run = 0;   /* the warp's kept elements in the rows before */
#pragma unroll
    for (int k = 0; k < ROWS; k++) {
      int at = run + (int)((before >> (8 * k)) & 0xff);   /* place of this thread's next kept element */
#pragma unroll
      for (int q = 0; q < VEC; q++) {
        int i = k * VEC + q, el = (32 * k + lane) * VEC + q;   /* item, place in the warp's part */
        if (keep & (1u << i)) buf[wfirst + at++] = items[i];
        else if (mode == 1 && wfirst + el < valid) buf[wfirst + wtot + el - at] = items[i];
      }
      run += (int)((rows >> (8 * k)) & 0xff);
    }
  }
  if (lane == 0) wkept[w] = wtot;
  __syncthreads();
  int agg = 0, wbefore = 0;
#pragma unroll
  for (int i = 0; i < NW; i++) {
    int c = wkept[i];
    if (i < w) wbefore += c;
    agg += c;
  }
  if (threadIdx.x < 32) {
    C p = tile_prefix<C, OpAdd>(scratch, values, ntiles, epoch, tile, (C)agg, C(0));
    if (threadIdx.x == 0) {
      s_prefix = p;
      if ((u64)tile == ntiles - 1) *count = (u64)p + (u64)agg;
    }
  }
  __syncthreads();
  if (mode == 2) return;
  const u64 prefix = s_prefix;
  const u64 at = prefix + wbefore;
  write_run(y + at, buf + wfirst, 0, wtot, lane);
  if (mode == 1) {
    int wvalid = min(max(valid - wfirst, 0), WTILE), vbefore = min(wfirst, valid);
    u64 rest = *total + (first - prefix) + (u64)(vbefore - wbefore) - wtot;   /* where this warp's element `wtot` goes */
    write_run(y + rest, buf + wfirst, wtot, wvalid, lane);
  }
}

/* }====================================================== */


/* {====================================================== the prebuilt kernels */

/* the look-back entry point NAME over T with Op, THREADS a block, MINB blocks a multiprocessor */
#define CULUA_LOOKBACK(NAME, T, Op, THREADS, MINB) \
  extern "C" __global__ void __launch_bounds__(THREADS, MINB) \
  NAME (const T *x, T *y, u64 n, int exclusive, u64 init, u64 *scratch, u64 *values, u64 base, u64 epoch, \
        u64 ntiles, u64 *out) { \
    scan_lookback<T, Op, THREADS>(x, y, n, exclusive, init, scratch, values, base, epoch, ntiles, out); \
  }

#define CULUA_SCAN_KERNELS(tn, T, on, Op, THREADS, MINB) \
  CULUA_LOOKBACK(culua_scan_lookback_##tn##_##on, T, Op, THREADS, MINB) \
  extern "C" __global__ void __launch_bounds__(CULUA_SEED_THREADS) \
  culua_scan_naive_##tn##_##on (const T *x, T *y, int n, int exclusive, u64 init) { \
    scan_naive<T, Op>(x, y, n, exclusive, init); \
  } \
  extern "C" __global__ void __launch_bounds__(CULUA_SEED_THREADS) \
  culua_scan_blelloch_##tn##_##on (const T *x, T *y, u64 n, int exclusive, u64 init, T *sums) { \
    scan_blelloch<T, Op>(x, y, n, exclusive, init, sums); \
  } \
  extern "C" __global__ void culua_scan_propagate_##tn##_##on (T *y, u64 n, const T *prefix) { \
    scan_propagate<T, Op>(y, n, prefix); \
  }

/* culua_scan_lookback_<type>_add_small: 4-byte types' small sums (above) */
#define CULUA_SCAN_SMALL(tn, T) \
  CULUA_LOOKBACK(culua_scan_lookback_##tn##_add_small, T, OpAdd, CULUA_THREADS, CULUA_SMALL_MINB)

#define CULUA_SCAN_OPS(tn, T) \
  CULUA_SCAN_KERNELS(tn, T, add, OpAdd, CULUA_ADD_THREADS(T), CULUA_ADD_MINB(T)) \
  CULUA_SCAN_KERNELS(tn, T, min, OpMin, CULUA_THREADS, 1) \
  CULUA_SCAN_KERNELS(tn, T, max, OpMax, CULUA_THREADS, 1)

/* culua_scan_select_<type>_<flags> counts in 64 bits, ..._c32 in 32 (n < 2^32) */
#define CULUA_SELECT_KERNEL(tn, T, fn, F, cn, C) \
  extern "C" __global__ void __launch_bounds__(CULUA_SELECT_THREADS, CULUA_SELECT_MINB) \
  culua_scan_select_##tn##_##fn##cn (const T *x, const F *flags, T *y, u64 n, int mode, const u64 *total, \
                                     u64 *count, u64 *scratch, u64 *values, u64 base, u64 epoch, u64 ntiles) { \
    select_lookback<T, F, FlagPred<F>, C>(x, flags, y, n, mode, total, count, scratch, values, base, epoch, ntiles); \
  }

#define CULUA_SELECT_FLAGS(tn, T) \
  CULUA_SELECT_KERNEL(tn, T, u8, unsigned char, , u64) \
  CULUA_SELECT_KERNEL(tn, T, i32, int, , u64) \
  CULUA_SELECT_KERNEL(tn, T, u8, unsigned char, _c32, unsigned) \
  CULUA_SELECT_KERNEL(tn, T, i32, int, _c32, unsigned)

#if !defined(CULUA_PRED) && !defined(CULUA_LOWP_SCAN) && !defined(CULUA_SELECT16)

CULUA_SCAN_OPS(i32, int)
CULUA_SCAN_OPS(u32, unsigned)
CULUA_SCAN_OPS(i64, long long)
CULUA_SCAN_OPS(u64, u64)
CULUA_SCAN_OPS(f32, float)
CULUA_SCAN_OPS(f64, double)
CULUA_SCAN_SMALL(i32, int)
CULUA_SCAN_SMALL(u32, unsigned)
CULUA_SCAN_SMALL(f32, float)

CULUA_SELECT_FLAGS(i32, int)
CULUA_SELECT_FLAGS(u32, unsigned)
CULUA_SELECT_FLAGS(i64, long long)
CULUA_SELECT_FLAGS(u64, u64)
CULUA_SELECT_FLAGS(f32, float)
CULUA_SELECT_FLAGS(f64, double)

#elif defined(CULUA_LOWP_SCAN)

/*
** A look-back scan of float16 or bfloat16, in float32 (lua/catalog/scan.lua):
** built by NVRTC with -D CULUA_LOWP, CULUA_LOWP_SCAN (the kernel's name),
** CULUA_LOWP_X and CULUA_LOWP_Y (x's and y's element types), CULUA_LOWP_OP
** (0 add, 1 min, 2 max) and CULUA_LOWP_SMALL (1: a small sum), in float32's
** shapes: the tile and the arguments are those of the float32 kernels.
*/
template <int OP, int SMALL> struct LowpShape { static const int threads = CULUA_THREADS, minb = 1; };
template <> struct LowpShape<0, 0> { static const int threads = CULUA_ADD4_THREADS, minb = CULUA_SCAN_MINB; };
template <> struct LowpShape<0, 1> { static const int threads = CULUA_THREADS, minb = CULUA_SMALL_MINB; };
typedef LowpShape<CULUA_LOWP_OP, CULUA_LOWP_SMALL> LowpS;
typedef OpAdd Op0;
typedef OpMin Op1;
typedef OpMax Op2;
#define CULUA_LOWP_OPN(N) CULUA_LOWP_OPN_(N)
#define CULUA_LOWP_OPN_(N) Op##N

extern "C" __global__ void __launch_bounds__(LowpS::threads, LowpS::minb)
CULUA_LOWP_SCAN (const CULUA_LOWP_X *x, CULUA_LOWP_Y *y, u64 n, int exclusive, u64 init, u64 *scratch, u64 *values,
                 u64 base, u64 epoch, u64 ntiles, u64 *out) {
  scan_lookback<float, CULUA_LOWP_OPN(CULUA_LOWP_OP), LowpS::threads, CULUA_LOWP_X, CULUA_LOWP_Y>(
    x, y, n, exclusive, init, scratch, values, base, epoch, ntiles, out);
}

#elif defined(CULUA_SELECT16)

/*
** compact and split of 2-byte elements (float16, bfloat16) by a flags array:
** their bits moved as unsigned short, built by NVRTC with -D CULUA_SELECT16
*/
CULUA_SELECT_FLAGS(u16, unsigned short)

#else

/*
** A predicate given as an expression in x: compiled by NVRTC with a
** prelude `#define CULUA_PRED(x) (...)` and -D CULUA_PRED_T (the element
** type), CULUA_PRED_C (the count's type: unsigned for n < 2^32; u64 when
** not given) and CULUA_PRED_NAME (the kernel's name, with a hash of them).
*/
#ifndef CULUA_PRED_C
#define CULUA_PRED_C u64
#endif
struct ExprPred {
  static const bool flags = false;
  /* x is the element, but a float16 or bfloat16 one widened to its float */
  template <class T> static __device__ __forceinline__ bool test (T v) { auto x = culua_widen(v); return (CULUA_PRED(x)); }
};

extern "C" __global__ void __launch_bounds__(CULUA_SELECT_THREADS, CULUA_SELECT_MINB)
CULUA_PRED_NAME (const CULUA_PRED_T *x, const unsigned char *flags, CULUA_PRED_T *y, u64 n, int mode,
                 const u64 *total, u64 *count, u64 *scratch, u64 *values, u64 base, u64 epoch, u64 ntiles) {
  select_lookback<CULUA_PRED_T, unsigned char, ExprPred, CULUA_PRED_C>(x, flags, y, n, mode, total, count, scratch, values,
                                                         base, epoch, ntiles);
}

#endif

/* }====================================================== */
