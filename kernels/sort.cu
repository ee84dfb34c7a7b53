/*
** sort.cu
** The radix sort family of culua's catalog: stable LSD radix sorts of 32-
** and 64-bit keys, 8 bits a pass, with values of 4 or 8 bytes carried along.
**
** Keys are sorted as unsigned integers of their "radix bits": signed keys
** with the sign bit flipped; floats with every bit flipped when negative and
** the sign bit flipped otherwise (so -0.0 comes before +0.0); descending
** order inverts those bits, which keeps the sort stable. Every NaN, whatever
** its sign and payload, becomes all ones after the inversion, so NaNs sort
** last in either order, and comes back as the canonical quiet NaN
** (0x7fc00000, 0x7ff8000000000000): the sort cannot keep both NaNs last and
** their bits. No other float has radix bits all ones in either order (only a
** NaN has all bits set, and +0.0's sign-flipped bits are not zero). A pass
** that reads the user's keys transforms them (SORT_FIRST), the pass that
** writes the user's keys transforms them back (SORT_LAST), and the passes
** between move radix bits.
**
** Three variants (lua/catalog/sort.lua picks and plans them):
** - onesweep (Adinets and Merrill, "Onesweep: A Faster Least Significant
**   Digit Radix Sort for GPUs", 2022): one kernel histograms every pass's
**   digits in one read and scans the counts; then one kernel a pass takes
**   tiles in the order its blocks start (a counter), ranks a tile's keys with
**   warp-level multi-split, finds the tile's place among the earlier tiles by
**   decoupled look-back on one counter a digit and tile, and scatters through
**   shared memory so that the writes coalesce. Sorts of at most one tile run
**   in a single block that makes every pass in shared memory (one launch);
**   sorts of up to a tile a multiprocessor run every pass in one launch too,
**   a block a tile, all resident, grid barriers between the passes (fused).
** - lsd: the classic three kernels a pass (digit counts per block, one scan
**   of them, a stable scatter).
** - warp: seed 003's teaching sort of at most 32 uint32 keys in one warp, a
**   bit a round, with __ballot_sync and __popc.
*/

#include <culua/barrier.cuh>

typedef unsigned int u32;
typedef unsigned long long u64;

#define SORT_RADIX 256            /* 8-bit digits; the histogram kernels' blocks */
#define SORT_FULL 0xffffffffu

/*
** Threads of a tile's block (onesweep, the one-block sort, lsd's scatter):
** at least one a digit; the first 256 own a digit each in the steps done
** per digit (counts, scan, look-back). NVRTC builds other shapes
** (-DCULUA_SORT_THREADS=n, n a multiple of 32 in 256..1024), whose entry
** points' names end in _t<n>.
*/
#ifdef CULUA_SORT_THREADS
#define SORT_THREADS CULUA_SORT_THREADS
#else
#define SORT_THREADS 256
#endif
static_assert(SORT_THREADS % 32 == 0 && SORT_THREADS >= SORT_RADIX && SORT_THREADS <= 1024,
              "CULUA_SORT_THREADS: a multiple of 32 in 256..1024");

/* flags of a pass */
#define SORT_FIRST 1     /* keys come from the user: make them radix bits */
#define SORT_LAST 2      /* keys go to the user: back from radix bits */
#define SORT_IOTA 4      /* values are not read: they are the keys' 1-based positions */
#define SORT_NOKEYS 8    /* write no keys (argsort's last pass) */
#define SORT_DESC 16     /* descending: radix bits inverted */

/*
** A look-back word: 2 status bits above a 30-bit count. Zero: the tile has
** published nothing yet. The words are zeroed before each launch that uses
** them (one launch ahead, by the launch before: see onesweep), so a pass
** never reads an earlier pass's word.
*/
#define SORT_AGGREGATE 0x40000000u   /* the tile's own count */
#define SORT_PREFIX 0x80000000u      /* the count of this and every earlier tile */
#define SORT_COUNT 0x3fffffffu
#define SORT_MAX_WINDOW 8            /* at most this many earlier tiles' words loaded at once */

#ifndef SORT_ITEMS32
#define SORT_ITEMS32 18   /* keys a thread, 32-bit keys: tiles of 4608 (bench/sort.lua sweep) */
#endif
#define SORT_FUSED_ITEMS 4   /* keys a thread of the fused kernel for small sorts */
#ifndef SORT_ITEMS64
#define SORT_ITEMS64 16   /* keys a thread, 64-bit keys: tiles of 4096 */
#endif


/* {====================================================== radix bits */

template <typename K> struct KeyBits;
template <> struct KeyBits<u32> {
  static constexpr u32 sign = 0x80000000u, exp = 0x7f800000u, qnan = 0x7fc00000u;
  typedef int signed_t;
};
template <> struct KeyBits<u64> {
  static constexpr u64 sign = 0x8000000000000000ull, exp = 0x7ff0000000000000ull, qnan = 0x7ff8000000000000ull;
  typedef long long signed_t;
};

/*
** kind: 0 unsigned, 1 signed, 2 floating point. Both ways are written
** without branches on the key: a float's flip depends on its sign bit, so
** the masks that depend on kind and flags (the same for every key of a
** launch, computed once) combine with the key's sign spread over its word:
** negative floats flip every bit, other floats and signed keys the sign bit.
*/
template <typename K>
__device__ __forceinline__ K sign_spread (K k) {   /* all ones when the sign bit is set */
  return (K)((typename KeyBits<K>::signed_t)k >> (8 * sizeof(K) - 1));
}

template <typename K>
__device__ __forceinline__ K to_radix (K k, int kind, int flags) {
  const K sign = KeyBits<K>::sign;
  const K fmask = kind == 2 ? (K)~sign : K(0);
  const K xmask = (kind != 0 ? sign : K(0)) ^ ((flags & SORT_DESC) ? ~K(0) : K(0));
  const K r = k ^ (sign_spread(k) & fmask) ^ xmask;
  /* NaN, of either sign: last, either order */
  return (kind == 2 && (k & ~sign) > KeyBits<K>::exp) ? ~K(0) : r;
}

template <typename K>
__device__ __forceinline__ K from_radix (K k, int kind, int flags) {
  const K sign = KeyBits<K>::sign;
  const K fmask = kind == 2 ? (K)~sign : K(0);
  const K k1 = (flags & SORT_DESC) ? ~k : k;
  const K r = k1 ^ (kind != 0 ? sign : K(0)) ^ (~sign_spread(k1) & fmask);
  return (kind == 2 && k == ~K(0)) ? KeyBits<K>::qnan : r;
}

template <typename K>
__device__ __forceinline__ u32 digit_of (K k, int shift, u32 mask) {
  return (u32)(k >> shift) & mask;
}

/* }====================================================== */


/* {====================================================== block-wide pieces */

/*
** The look-back words are read and written by other blocks while this one
** spins: relaxed loads and stores at GPU scope. A word carries its status
** and its count together, and nothing else is published through it, so no
** release or acquire is needed (unlike scan's 8-byte values).
*/
__device__ __forceinline__ u32 load_relaxed (const u32 *p) {
  u32 v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_relaxed (u32 *p, u32 v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

/* exclusive prefix sum of one value a thread over a block of THREADS threads;
** `warp_sums` holds THREADS / 32 values of shared memory, free again on return */
template <int THREADS, typename T>
__device__ __forceinline__ T block_exclusive_scan (T x, T *warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T incl = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    T y = __shfl_up_sync(SORT_FULL, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  T before = 0;
#pragma unroll
  for (int w = 0; w < THREADS / 32; w++)
    if (w < warp) before += warp_sums[w];
  __syncthreads();
  return before + incl - x;
}

/*
** A tile's ranks, in the steps of onesweep's "early counts": first every warp
** counts its keys' digits in a row of 256 counters of its own (an atomic in
** shared memory a key), so that the tile's digit counts are known, and can be
** published to the later tiles, before the slower ranking; then the rows
** become each warp's first place in the tile for each digit, and each warp
** ranks its keys against its row. Items are warp-striped: item i of lane l in
** warp w is key w*32*ITEMS + i*32 + l of the tile, and ranks keep that order
** among equal digits (stable). whist: (THREADS / 32) rows of 256 words.
** Both steps take the keys and extract their digits where they need them:
** an array of digits held from one to the other would cost a register a
** key, and fewer blocks would fit a multiprocessor.
**
**   warp_count(key, shift, mask, whist[warp]);  __syncthreads();
**   n = tile_counts(whist);                    digit tid's count (tid < 256; 0 above)
**   local = block_exclusive_scan(n, ...);      digit tid's first place in the tile
**   tile_offsets(whist, local);  __syncthreads();
**   warp_rank(key, shift, mask, rank, whist[warp]);   rank[i]: item i's place in the tile
**
** The caller makes sure that no thread still reads what whist shares its
** shared memory with (the tile's keys of a previous round) when a warp zeroes
** its row in warp_count.
*/
template <typename K, int ITEMS>
__device__ __forceinline__ void warp_count (const K (&key)[ITEMS], int shift, u32 mask, u32 *row) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = lane; d < SORT_RADIX; d += 32) row[d] = 0;
  __syncwarp();
#pragma unroll
  for (int i = 0; i < ITEMS; i++) atomicAdd(&row[digit_of(key[i], shift, mask)], 1u);
}

/* column tid of the rows becomes the count of digit tid in the earlier warps */
template <int THREADS>
__device__ __forceinline__ u32 tile_counts (u32 (*whist)[SORT_RADIX]) {
  const int tid = threadIdx.x;
  u32 count = 0;
  if (tid < SORT_RADIX) {
#pragma unroll
    for (int w = 0; w < (THREADS / 32); w++) {
      u32 c = whist[w][tid];
      whist[w][tid] = count;
      count += c;
    }
  }
  return count;
}

/* and then each warp's first place in the tile for digit tid */
template <int THREADS>
__device__ __forceinline__ void tile_offsets (u32 (*whist)[SORT_RADIX], u32 local) {
  const int tid = threadIdx.x;
  if (tid < SORT_RADIX) {
#pragma unroll
    for (int w = 0; w < (THREADS / 32); w++) whist[w][tid] += local;
  }
}

/*
** The lanes of the warp whose digit d equals this lane's: eight ballots, one
** a bit; a lane whose bit is clear takes the ballot's complement. Written in
** PTX so that the bit's predicate comes straight from the digit (ptxas then
** sets seven of them with one R2P) and the complement is a predicated not:
** three instructions a bit, where the C form (bit ? m : ~m) compiled to six,
** a large share of a pass's instructions (bench/RESULTS.md, session 15).
*/
__device__ __forceinline__ u32 warp_match (u32 d) {
  u32 peers = SORT_FULL;
#pragma unroll
  for (int b = 0; b < 8; b++) {
    u32 m;
    asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
        "and.b32 t, %1, %2;\n\t"
        "setp.ne.u32 p, t, 0;\n\t"
        "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t"
        "@!p not.b32 %0, %0;\n\t}"
        : "=r"(m) : "r"(d), "r"(1u << b));
    peers &= m;
  }
  return peers;
}

/*
** Warp-level multi-split: item i's peers (warp_match); the highest of them
** advances the warp's counter of that digit by their number, and the others
** learn the old count by shuffle. The next item's leader adds only after
** that shuffle, which waited for this item's atomic: the adds are in order
** without a __syncwarp between items.
*/
template <typename K, int ITEMS>
__device__ __forceinline__ void warp_rank (const K (&key)[ITEMS], int shift, u32 mask, u32 (&rank)[ITEMS], u32 *row) {
  const int lane = threadIdx.x & 31;
  const u32 below = (1u << lane) - 1;
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    const u32 d = digit_of(key[i], shift, mask), peers = warp_match(d);
    const int leader = 31 - __clz(peers);
    u32 base = 0;
    if (lane == leader) base = atomicAdd(&row[d], (u32)__popc(peers));
    rank[i] = __shfl_sync(SORT_FULL, base, leader) + __popc(peers & below);
  }
}

/* a tile's keys, warp-striped, as radix bits; keys past `valid` are all ones
** (the last digit of every pass, ranked after every real key) */
template <typename T, bool CG>
__device__ __forceinline__ T load_one (const T *p) { return CG ? __ldcg(p) : *p; }

/* CG: from L2 (what other blocks of the same launch wrote: fused) */
template <typename K, int ITEMS, int THREADS, bool CG = false>
__device__ __forceinline__ void load_keys (const K *src, u32 valid, K (&key)[ITEMS], int kind, int flags) {
  const u32 first = (threadIdx.x >> 5) * 32 * ITEMS + (threadIdx.x & 31);
  if (valid == THREADS * ITEMS) {
#pragma unroll
    for (int i = 0; i < ITEMS; i++) key[i] = load_one<K, CG>(src + first + i * 32);
  }
  else {
#pragma unroll
    for (int i = 0; i < ITEMS; i++) key[i] = first + i * 32 < valid ? load_one<K, CG>(src + first + i * 32) : ~K(0);
  }
  if (flags & SORT_FIRST) {
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
      if (valid == THREADS * ITEMS || first + i * 32 < valid) key[i] = to_radix(key[i], kind, flags);
  }
}

/* the values of the same keys; `pos1` is the 1-based position of the tile's
** first key, for SORT_IOTA */
template <typename V, int ITEMS, int THREADS, bool CG = false>
__device__ __forceinline__ void load_values (const V *src, u32 valid, V (&val)[ITEMS], u64 pos1, int flags) {
  const u32 first = (threadIdx.x >> 5) * 32 * ITEMS + (threadIdx.x & 31);
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    u32 j = first + i * 32;
    if (flags & SORT_IOTA) val[i] = (V)(pos1 + j);
    else val[i] = (valid == THREADS * ITEMS || j < valid) ? load_one<V, CG>(src + j) : V(0);
  }
}

/*
** Small numbers held packed in registers while they wait for the values'
** scatter: digits (8 bits) and places in a tile (16 bits: a tile has at
** most 1024 x 32 keys). A pass of pairs holds each key's digit, place and
** value at once, and unpacked they cost registers that left fewer blocks
** room on a multiprocessor (or spilled). i is a constant once the loops
** over items are unrolled, so a get or set is a shift and a mask.
*/
template <int ITEMS, int BITS>
struct Packed {
  static constexpr int PER = 32 / BITS;
  u32 w[(ITEMS + PER - 1) / PER];
  __device__ __forceinline__ void set (int i, u32 v) { w[i / PER] |= v << (i % PER) * BITS; }
  __device__ __forceinline__ u32 get (int i) const { return (w[i / PER] >> (i % PER) * BITS) & ((1u << BITS) - 1); }
};
template <int ITEMS> using Digits = Packed<ITEMS, 8>;
template <int ITEMS> using Places = Packed<ITEMS, 16>;

/* the places of a tile's items, packed */
template <int ITEMS>
__device__ __forceinline__ Places<ITEMS> pack_places (const u32 (&rank)[ITEMS]) {
  Places<ITEMS> p = {};
#pragma unroll
  for (int i = 0; i < ITEMS; i++) p.set(i, rank[i]);
  return p;
}

/* shared memory of a tile: the warps' counters, then (reused) the tile's keys
** and values in sorted order */
template <typename K, typename V, int ITEMS, int THREADS>
struct TileShared {
  static_assert(THREADS % 32 == 0 && THREADS >= SORT_RADIX && THREADS <= 1024,
                "a tile's block: a multiple of 32 in 256..1024");
  union {
    u32 whist[(THREADS / 32)][SORT_RADIX];
    K keys[THREADS * ITEMS];
    V vals[THREADS * ITEMS];
  } u;
  union {   /* a digit's first key (then value) in the output, less its start in the tile */
    K *key[SORT_RADIX];
    V *val[SORT_RADIX];
  } dst;
  u64 wsum64[(THREADS / 32)];
  u32 wsum[(THREADS / 32)];
  u32 tile;
};

/* a tile's ranks (see warp_count): rank[i] is item i's place among the tile's
** keys; returns digit tid's count in the tile (tid < 256) and sets *local to
** its first place; whist's rows are free to zero (no reads of the union
** pending); on return the rows are still read by warp_rank's last items */
template <typename K, typename V, int ITEMS, int THREADS>
__device__ __forceinline__ u32 rank_tile (TileShared<K, V, ITEMS, THREADS> &s, const K (&key)[ITEMS], int shift, u32 mask,
                                          u32 (&rank)[ITEMS], u32 *local) {
  const int warp = threadIdx.x >> 5;
  warp_count<K, ITEMS>(key, shift, mask, s.u.whist[warp]);
  __syncthreads();
  u32 n = tile_counts<THREADS>(s.u.whist);
  *local = block_exclusive_scan<THREADS, u32>(n, s.wsum);
  tile_offsets<THREADS>(s.u.whist, *local);
  __syncthreads();
  warp_rank<K, ITEMS>(key, shift, mask, rank, s.u.whist[warp]);
  return n;
}

/*
** Scatter a ranked tile through shared memory, so that the writes coalesce:
** put_keys stores the keys in tile order (rank[i]: the place in the tile);
** each thread of a digit (tid < 256) sets s.dst.key[tid] (at_place); after a
** __syncthreads, write_keys has thread t write sorted keys t, t + THREADS,
** ..., so that a warp writes runs of consecutive places, each key to
** s.dst.key[its digit] + its place in the tile, and leaves their digits in
** dig (packed). write_values then does the same with the values (its own syncs;
** g: digit tid's place, as at_place took it). An address a digit, rather
** than a place, makes a key's address one multiply-add.
*/
template <typename K, typename V, int ITEMS, int THREADS>
__device__ __forceinline__ void put_keys (TileShared<K, V, ITEMS, THREADS> &s, const K (&key)[ITEMS], const u32 (&rank)[ITEMS]) {
#pragma unroll
  for (int i = 0; i < ITEMS; i++) s.u.keys[rank[i]] = key[i];
}

/* &p[g], where g (a digit's place in the output less its first place in the
** tile) may have wrapped below zero: it comes back when a place is added */
template <typename T>
__device__ __forceinline__ T *at_place (T *p, u64 g) { return (T *)((u64)p + g * sizeof(T)); }

template <typename K, typename V, int ITEMS, int THREADS>
__device__ __forceinline__ void write_keys (TileShared<K, V, ITEMS, THREADS> &s, Digits<ITEMS> &dig, u32 valid, int shift,
                                            u32 mask, int kind, int flags) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    u32 j = i * THREADS + tid;
    if (valid == THREADS * ITEMS || j < valid) {   /* the first test folds in onesweep's whole tiles */
      K k = s.u.keys[j];
      u32 d = digit_of(k, shift, mask);
      dig.set(i, d);
      if (!(flags & SORT_NOKEYS))
        s.dst.key[d][j] = (flags & SORT_LAST) ? from_radix(k, kind, flags) : k;
    }
  }
}

template <typename K, typename V, int ITEMS, int THREADS>
__device__ __forceinline__ void write_values (TileShared<K, V, ITEMS, THREADS> &s, const V (&val)[ITEMS], const Digits<ITEMS> &dig,
                                              const Places<ITEMS> &rank, u32 valid, V *vout, u64 g) {
  const int tid = threadIdx.x;
  __syncthreads();   /* the keys and their addresses are read: the union becomes values */
  if (tid < SORT_RADIX) s.dst.val[tid] = at_place(vout, g);
#pragma unroll
  for (int i = 0; i < ITEMS; i++)
    if (valid == THREADS * ITEMS || rank.get(i) < valid) s.u.vals[rank.get(i)] = val[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    u32 j = i * THREADS + tid;
    if (valid == THREADS * ITEMS || j < valid) s.dst.val[dig.get(i)][j] = s.u.vals[j];
  }
}

/* }====================================================== */


/* {====================================================== onesweep */

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
** to a bank.
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

/*
** A pass where one digit holds every key keeps the order: a tile is copied to
** the same places (transformed on the first pass and back on the last). kin,
** vin: the tile's first key and value; at: its place.
*/
template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void copy_tile (const K *kin, K *kout, const V *vin, V *vout, u64 at, u32 valid,
                                           int kind, int flags) {
  const u32 first = (threadIdx.x >> 5) * 32 * ITEMS + (threadIdx.x & 31);
  K key[ITEMS];
  load_keys<K, ITEMS, THREADS>(kin, valid, key, kind, flags);
  if (!(flags & SORT_NOKEYS)) {
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
      if (first + i * 32 < valid) kout[at + first + i * 32] = (flags & SORT_LAST) ? from_radix(key[i], kind, flags) : key[i];
  }
  if (VALUES) {
    V val[ITEMS];
    load_values<V, ITEMS, THREADS>(vin, valid, val, at + 1, flags);
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
      if (first + i * 32 < valid) vout[at + first + i * 32] = val[i];
  }
}

/*
** One pass over one portion of at most 2^30 - 1 keys (the look-back counts
** have 30 bits): keys base .. base+count-1 of kin (and vin) go to their
** places in kout (and vout).
**
** Blocks take tiles in the order they start (a ticket in *ctr, zeroed by the
** upfront kernel), so a tile only ever waits on tiles whose blocks are
** running or done; and a tile publishes its own counts before it waits on
** anything, so every wait ends.
**
** A tile counts its keys' digits and publishes the counts in its look-back
** words at once (lb: a row of 256 a tile, zero on entry), so that the later
** tiles find them while it ranks its keys (the slow part) and puts them in
** shared memory in tile order; only then does it add up the earlier tiles'
** counts, each thread its digit (decoupled look-back: a tile that has only
** published its own count is added and passed over, and the walk stops at
** the first tile that has published its inclusive prefix), publish its
** prefix, and write its keys out. window: earlier tiles' words loaded at
** once in the walk (1..SORT_MAX_WINDOW). bins_in: each digit's first place
** in the output for this portion; the last tile writes the next portion's to
** bins_out (when not null). lb_next: the next launch's words, of
** lb_next_tiles tiles, zeroed here (the launch before this one used them and
** is done). skip: nonzero when every key has the same digit this pass, which
** is then a copy.
*/

/* the count of every tile before the one of look-back word *word, for its
** digit: `window` words of earlier tiles loaded a round */
__device__ __forceinline__ u32 look_back (const u32 *word, u32 tile, int window) {
  const u32 *w = word - SORT_RADIX;
  u32 left = tile;   /* tiles at or before *w */
  u32 before = 0;
  for (int spins = 0;; spins++) {
    /* loaded together: when blocks start at once, a walk passes over many
       tiles that have only published their own counts, and one load at a
       time would make it a chain of round trips to L2 */
    u32 v[SORT_MAX_WINDOW];
#pragma unroll
    for (int j = 0; j < SORT_MAX_WINDOW; j++)
      v[j] = j < window && (u32)j < left ? load_relaxed(w - j * SORT_RADIX) : 0;
    int j = 0;
    bool found = false;
#pragma unroll
    for (; j < SORT_MAX_WINDOW; j++) {
      if (v[j] == 0) break;   /* not published yet (or past the window): load again from here */
      before += v[j] & SORT_COUNT;
      if (v[j] & SORT_PREFIX) { found = true; break; }
    }
    if (found) return before;   /* tile 0 publishes its prefix: the walk ends there at the latest */
    w -= j * SORT_RADIX;
    left -= j;
    if (j == 0 && spins > 8) __nanosleep(32);
  }
}

/*
** A tile after its ticket: kin (and vin, unless SORT_IOTA) at its first key,
** `at` its first key's place in the portion's output. onesweep calls it in
** three copies that the compiler specializes: a whole tile of a plain pass
** (valid == TILE, flags 0: no bounds and no transforms in the loops over
** items; every pass of unsigned ascending keys, and the passes between the
** first and the last of the others), a whole tile of another pass, and the
** last tile of the portion.
*/
template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void onesweep_tile (TileShared<K, V, ITEMS, THREADS> &s, const K *kin, K *kout, const V *vin,
                                               V *vout, u64 at, u32 valid, u32 tile, u32 tiles, const u64 *bins_in,
                                               u64 *bins_out, u32 *lb, int shift, u32 mask, int kind, int flags,
                                               int window) {
  constexpr u32 TILE = THREADS * ITEMS;
  const int tid = threadIdx.x, warp = tid >> 5;
  const u64 bin = tid < SORT_RADIX ? bins_in[tid] : 0;   /* digit tid's first place in the portion */
  K key[ITEMS];
  u32 rank[ITEMS];
  load_keys<K, ITEMS, THREADS>(kin, valid, key, kind, flags);

  /* rank_tile's steps, with the counts published between them */
  warp_count<K, ITEMS>(key, shift, mask, s.u.whist[warp]);
  __syncthreads();
  const u32 n = tile_counts<THREADS>(s.u.whist);   /* digit tid's count in the tile */
  const u32 mine = (tid == (int)mask) ? n - (TILE - valid) : n;   /* less the padding keys */
  u32 *word = lb + (u64)tile * SORT_RADIX + tid;
  if (tid < SORT_RADIX) store_relaxed(word, (tile == 0 ? SORT_PREFIX : SORT_AGGREGATE) | mine);
  const u32 local = block_exclusive_scan<THREADS, u32>(n, s.wsum);   /* digit tid's start in the tile */
  tile_offsets<THREADS>(s.u.whist, local);
  __syncthreads();
  warp_rank<K, ITEMS>(key, shift, mask, rank, s.u.whist[warp]);
  __syncthreads();   /* the counters are read: the union becomes keys */
  put_keys<K, V, ITEMS, THREADS>(s, key, rank);
  const Places<ITEMS> places = pack_places(rank);   /* for the values (keys alone: dead) */

  V val[ITEMS];
  if (VALUES)   /* in flight during the walk */
    load_values<V, ITEMS, THREADS>(vin, valid, val, at + 1, flags);
  u32 before = 0;
  const u64 g = bin - local;   /* wraps when the walk's count is not yet added: see at_place */
  if (tid < SORT_RADIX) {
    if (tile > 0) {
      before = look_back(word, tile, window);
      store_relaxed(word, SORT_PREFIX | (before + mine));
    }
    s.dst.key[tid] = at_place(kout, g + before);
  }
  __syncthreads();
  Digits<ITEMS> dig = {};
  write_keys<K, V, ITEMS, THREADS>(s, dig, valid, shift, mask, kind, flags);
  if (VALUES) write_values<K, V, ITEMS, THREADS>(s, val, dig, places, valid, vout, g + before);
  if (bins_out && tile == tiles - 1 && tid < SORT_RADIX) bins_out[tid] = bin + before + mine;
}

template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void onesweep (const K *kin, K *kout, const V *vin, V *vout, u64 base, u32 count,
                                          const u64 *bins_in, u64 *bins_out, u32 *lb, u32 *lb_next,
                                          u32 lb_next_tiles, u32 *ctr, const u32 *skip, int shift, int bits,
                                          int kind, int flags, int window) {
  constexpr u32 TILE = THREADS * ITEMS;
  __shared__ TileShared<K, V, ITEMS, THREADS> s;
  const int tid = threadIdx.x;
  const u32 mask = (1u << bits) - 1;
  culua_dep_wait();   /* the pass before (or the upfront kernel) is done */
  if (tid == 0) s.tile = atomicAdd(ctr, 1u);
  __syncthreads();
  culua_dep_release();   /* every block has started: the next pass's may be scheduled */
  const u32 tile = s.tile, tiles = (count + TILE - 1) / TILE;
  if (tid < SORT_RADIX)
    for (u32 t = tile; t < lb_next_tiles; t += tiles) lb_next[(u64)t * SORT_RADIX + tid] = 0;
  const u32 start = tile * TILE, valid = min(TILE, count - start);
  kin += base + start;
  if (VALUES && !(flags & SORT_IOTA)) vin += base + start;
  if (*skip) {
    copy_tile<K, V, VALUES, ITEMS, THREADS>(kin, kout, vin, vout, base + start, valid, kind, flags);
    return;
  }
  /* unsigned keys in ascending order are their own radix bits: their first
     and last passes are plain ones too */
  const bool plain = !(flags & (SORT_IOTA | SORT_NOKEYS)) &&
                     (!(flags & (SORT_FIRST | SORT_LAST)) || (kind == 0 && !(flags & SORT_DESC)));
  if (valid == TILE && plain)
    onesweep_tile<K, V, VALUES, ITEMS, THREADS>(s, kin, kout, vin, vout, base + start, TILE, tile, tiles, bins_in,
                                                bins_out, lb, shift, mask, kind, 0, window);
  else if (valid == TILE)
    onesweep_tile<K, V, VALUES, ITEMS, THREADS>(s, kin, kout, vin, vout, base + start, TILE, tile, tiles, bins_in,
                                                bins_out, lb, shift, mask, kind, flags, window);
  else
    onesweep_tile<K, V, VALUES, ITEMS, THREADS>(s, kin, kout, vin, vout, base + start, valid, tile, tiles, bins_in,
                                                bins_out, lb, shift, mask, kind, flags, window);
}

/*
** A sort of at most one tile, every pass, in one block: the keys (and
** values) stay in registers and trade places through shared memory after
** each pass's ranks, read back warp-striped in their new order, which is
** the order the next pass's ranks keep. kin may be kout (in place: every key
** is read before any is written), and vin vout. flags: SORT_DESC,
** SORT_IOTA, SORT_NOKEYS.
*/
template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void small_sort (const K *kin, K *kout, const V *vin, V *vout, u32 n, int begin_bit,
                                            int end_bit, int kind, int flags) {
  __shared__ TileShared<K, V, ITEMS, THREADS> s;
  const int tid = threadIdx.x;
  const u32 first = (tid >> 5) * 32 * ITEMS + (tid & 31);
  K key[ITEMS];
  V val[ITEMS];
  u32 rank[ITEMS];
  load_keys<K, ITEMS, THREADS>(kin, n, key, kind, flags | SORT_FIRST);
  if (VALUES) load_values<V, ITEMS, THREADS>(vin, n, val, 1, flags);
  for (int shift = begin_bit; shift < end_bit; shift += 8) {
    const u32 mask = (1u << min(8, end_bit - shift)) - 1;
    u32 local;
    rank_tile<K, V, ITEMS, THREADS>(s, key, shift, mask, rank, &local);
    __syncthreads();   /* the counters are read: the union becomes keys */
    put_keys<K, V, ITEMS, THREADS>(s, key, rank);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ITEMS; i++) key[i] = s.u.keys[first + i * 32];
    if (VALUES) {
      __syncthreads();
#pragma unroll
      for (int i = 0; i < ITEMS; i++) s.u.vals[rank[i]] = val[i];
      __syncthreads();
#pragma unroll
      for (int i = 0; i < ITEMS; i++) val[i] = s.u.vals[first + i * 32];
    }
    __syncthreads();   /* the union becomes counters again */
  }
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    u32 j = first + i * 32;
    if (j < n) {
      if (!(flags & SORT_NOKEYS)) kout[j] = from_radix(key[i], kind, flags);
      if (VALUES) vout[j] = val[i];
    }
  }
}

/* }====================================================== */


/* {====================================================== fused: every pass in one launch */

/*
** A sort of a few tiles, one a block, every block resident at once (a
** cooperative launch), in one launch: at 2^16 keys the launches and the
** gaps between the kernels of the other paths cost more than the work.
** Barriers between the steps take the place of kernel boundaries:
**
**   every block zeroes its rows of the look-back words of every pass, reads
**   its tile and counts the digits of every pass into `hist` (passes x 256
**   counts, zero on entry); barrier;
**   a pass: a block reads its tile from the pass's input (after a barrier
**   when that is also its output, so that every tile is read before any is
**   written), ranks it as onesweep does (decoupled look-back on the pass's
**   own words), takes each digit's start from hist, writes the tile out;
**   barrier, and the next pass.
**
** The buffers: pass 0 reads k0 (and v0), pass p writes ka when p is even,
** kb when odd, and the next pass reads what it wrote (lua/catalog/sort.lua
** picks them so that the last pass writes the user's array). The last block
** to finish (a ticket in *done) leaves hist and *done at zero; the barrier's
** words return to zero by themselves. flags: SORT_DESC, SORT_IOTA,
** SORT_NOKEYS.
*/
template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void fused (const K *k0, K *ka, K *kb, const V *v0, V *va, V *vb, u32 n, u32 *hist,
                                       u32 *done, u32 *lb, unsigned *bar, int begin_bit, int end_bit, int kind,
                                       int flags, int window) {
  constexpr u32 TILE = THREADS * ITEMS;
  __shared__ TileShared<K, V, ITEMS, THREADS> s;
  const int tid = threadIdx.x, warp = tid >> 5;
  const u32 tile = blockIdx.x, tiles = gridDim.x;
  const u32 start = tile * TILE, valid = min(TILE, n - start);
  const u32 first = warp * 32 * ITEMS + (tid & 31);
  const int passes = (end_bit - begin_bit + 7) / 8;   /* at most 8 <= (THREADS / 32) rows of counters */
  culua::grid_barrier grid(bar);

  if (tid < SORT_RADIX)
    for (int p = 0; p < passes; p++) lb[((u64)p * tiles + tile) * SORT_RADIX + tid] = 0;
  K key[ITEMS];
  V val[ITEMS];
  u32 rank[ITEMS];
  load_keys<K, ITEMS, THREADS>(k0 + start, valid, key, kind, flags | SORT_FIRST);
  u32 (*count)[SORT_RADIX] = s.u.whist;   /* a row a pass */
  for (int i = tid; i < passes * SORT_RADIX; i += THREADS) count[i / SORT_RADIX][i % SORT_RADIX] = 0;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    if (first + i * 32 < valid) {
      for (int p = 0; p < passes; p++) {
        int shift = begin_bit + 8 * p, bits = min(8, end_bit - shift);
        atomicAdd(&count[p][digit_of(key[i], shift, (1u << bits) - 1)], 1u);
      }
    }
  }
  __syncthreads();
  if (tid < SORT_RADIX)
    for (int p = 0; p < passes; p++)
      if (count[p][tid]) atomicAdd(&hist[p * SORT_RADIX + tid], count[p][tid]);
  grid.sync();   /* hist is whole, every look-back word zero; the rows of counters are free */

  for (int p = 0; p < passes; p++) {
    const int shift = begin_bit + 8 * p, bits = min(8, end_bit - shift);
    const u32 mask = (1u << bits) - 1;
    const bool last = p == passes - 1;
    const K *src = p == 0 ? k0 : (p & 1) ? ka : kb;
    K *dst = (p & 1) ? kb : ka;
    const V *vsrc = p == 0 ? v0 : (p & 1) ? va : vb;
    V *vdst = (p & 1) ? vb : va;
    const int iota = p == 0 ? flags & SORT_IOTA : 0;
    const int wflags = (flags & SORT_DESC) | (last ? SORT_LAST | (flags & SORT_NOKEYS) : 0);
    const u32 c = tid < SORT_RADIX ? __ldcg(&hist[p * SORT_RADIX + tid]) : 0;   /* digit tid's count, all tiles */
    if (p > 0) load_keys<K, ITEMS, THREADS, true>(src + start, valid, key, kind, 0);
    if (VALUES) load_values<V, ITEMS, THREADS, true>(iota ? vsrc : vsrc + start, valid, val, start + 1, iota);
    if ((const void *)src == (const void *)dst || (VALUES && !iota && (const void *)vsrc == (const void *)vdst))
      grid.sync();   /* in place: every tile is in registers before any is written */

    warp_count<K, ITEMS>(key, shift, mask, s.u.whist[warp]);
    __syncthreads();
    const u32 cnt = tile_counts<THREADS>(s.u.whist);   /* digit tid's count in the tile */
    const u32 mine = (tid == (int)mask) ? cnt - (TILE - valid) : cnt;   /* less the padding keys */
    u32 *word = lb + ((u64)p * tiles + tile) * SORT_RADIX + tid;
    if (tid < SORT_RADIX) store_relaxed(word, (tile == 0 ? SORT_PREFIX : SORT_AGGREGATE) | mine);
    /* one scan for two sums: the tile's digit starts below, every tile's above (no carry: both < 2^32) */
    const u64 both = block_exclusive_scan<THREADS, u64>(((u64)c << 32) | cnt, s.wsum64);
    const u32 local = (u32)both, digit_start = (u32)(both >> 32);
    tile_offsets<THREADS>(s.u.whist, local);
    __syncthreads();
    warp_rank<K, ITEMS>(key, shift, mask, rank, s.u.whist[warp]);
    __syncthreads();   /* the counters are read: the union becomes keys */
    put_keys<K, V, ITEMS, THREADS>(s, key, rank);
    const Places<ITEMS> places = pack_places(rank);
    u64 g = 0;   /* digit tid's place less its start in the tile: see at_place */
    if (tid < SORT_RADIX) {
      u32 before = 0;
      if (tile > 0) {
        before = look_back(word, tile, window);
        store_relaxed(word, SORT_PREFIX | (before + mine));
      }
      g = (u64)digit_start + before - local;
      s.dst.key[tid] = at_place(dst, g);
    }
    __syncthreads();
    Digits<ITEMS> dig = {};
    write_keys<K, V, ITEMS, THREADS>(s, dig, valid, shift, mask, kind, wflags);
    if (VALUES) write_values<K, V, ITEMS, THREADS>(s, val, dig, places, valid, vdst, g);
    if (!last) grid.sync();   /* the pass is written before the next reads it */
  }

  /* the last block out leaves hist and *done at zero: every block read hist before it came */
  __syncthreads();
  if (tid == 0) s.tile = atomicAdd(done, 1u) == tiles - 1;
  __syncthreads();
  if (s.tile) {
    for (int i = tid; i < passes * SORT_RADIX; i += THREADS) hist[i] = 0;
    if (tid == 0) *done = 0;
  }
}

/* }====================================================== */


/* {====================================================== lsd: three kernels a pass */

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

template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void lsd_scatter (const K *kin, K *kout, const V *vin, V *vout, u64 n, u64 chunk,
                                             const u64 *offsets, int shift, int bits, int kind, int flags) {
  constexpr u32 TILE = THREADS * ITEMS;
  __shared__ TileShared<K, V, ITEMS, THREADS> s;
  const int tid = threadIdx.x;
  const u32 mask = (1u << bits) - 1;
  u64 place = tid < SORT_RADIX ? offsets[(u64)tid * gridDim.x + blockIdx.x] : 0;   /* digit tid's next place */
  u64 lo = (u64)blockIdx.x * chunk, hi = min(n, lo + chunk);
  for (u64 t = lo; t < hi; t += TILE) {
    const u32 valid = (u32)min((u64)TILE, hi - t);
    K key[ITEMS];
    u32 rank[ITEMS];
    Digits<ITEMS> dig = {};
    load_keys<K, ITEMS, THREADS>(kin + t, valid, key, kind, flags);
    u32 local;
    u32 cnt = rank_tile<K, V, ITEMS, THREADS>(s, key, shift, mask, rank, &local);
    const u64 g = place - local;   /* see at_place */
    if (tid < SORT_RADIX) {
      s.dst.key[tid] = at_place(kout, g);
      place += (tid == (int)mask) ? cnt - (TILE - valid) : cnt;
    }
    __syncthreads();   /* the counters are read (and the addresses written): the union becomes keys */
    put_keys<K, V, ITEMS, THREADS>(s, key, rank);
    if (VALUES) {
      const Places<ITEMS> places = pack_places(rank);
      V val[ITEMS];
      load_values<V, ITEMS, THREADS>((VALUES && !(flags & SORT_IOTA)) ? vin + t : vin, valid, val, t + 1, flags);
      __syncthreads();
      write_keys<K, V, ITEMS, THREADS>(s, dig, valid, shift, mask, kind, flags);
      write_values<K, V, ITEMS, THREADS>(s, val, dig, places, valid, vout, g);
    }
    else {
      __syncthreads();
      write_keys<K, V, ITEMS, THREADS>(s, dig, valid, shift, mask, kind, flags);
    }
    __syncthreads();   /* the tile in shared memory is written out: the union becomes counters */
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

SORT_COUNTS(u32, u32)
SORT_COUNTS(u64, u64)

#define SORT_LANES(k, K, PLAIN, plain) \
  extern "C" __global__ void __launch_bounds__(SORT_LANES_THREADS) culua_sort_upfront_lanes##plain##_##k ( \
      const K *kin, u64 n, u64 *hist, u32 *done, u64 *bins, u64 bins_stride, u32 *skip, u32 *zero, \
      u64 zero_words, int passes, int begin_bit, int end_bit, int kind, int flags) { \
    upfront_lanes<K, PLAIN>(kin, n, hist, done, bins, bins_stride, skip, zero, zero_words, passes, begin_bit, \
                            end_bit, kind, flags); \
  }
SORT_LANES(u32, u32, false, )
SORT_LANES(u64, u64, false, )
SORT_LANES(u32, u32, true, _plain)
SORT_LANES(u64, u64, true, _plain)

/*
** culua_sort_{onesweep,small,fused,lsd}_<key>_<value>_<items>[_t<threads>],
** <value> "keys" for keys alone. The block's threads are a template
** parameter: the default shapes (SORT_THREADS) carry no _t; the wide ones
** prebuilt below, and NVRTC's other shapes, say theirs (-DCULUA_SORT_THREADS),
** and _b<blocks> (-DCULUA_SORT_MINBLOCKS: the blocks a multiprocessor that
** __launch_bounds__ asks registers for)
*/
#define SORT_PASTE(a, b) SORT_PASTE_(a, b)
#define SORT_PASTE_(a, b) a##b
#if defined(CULUA_SORT_THREADS) && defined(CULUA_SORT_MINBLOCKS)
#define SORT_SUFFIX SORT_PASTE(SORT_PASTE(_t, CULUA_SORT_THREADS), SORT_PASTE(_b, CULUA_SORT_MINBLOCKS))
#elif defined(CULUA_SORT_THREADS)
#define SORT_SUFFIX SORT_PASTE(_t, CULUA_SORT_THREADS)
#elif defined(CULUA_SORT_MINBLOCKS)
#define SORT_SUFFIX SORT_PASTE(_b, CULUA_SORT_MINBLOCKS)
#else
#define SORT_SUFFIX
#endif
#define SORT_NAME(f, k, v, I, S) SORT_NAME_(f, k, v, I, S)
#define SORT_NAME_(f, k, v, I, S) culua_sort_##f##_##k##_##v##_##I##S

#ifdef CULUA_SORT_MINBLOCKS
#define SORT_BOUNDS(T) __launch_bounds__(T, CULUA_SORT_MINBLOCKS)
#else
/* blocks of 416..512 threads ask for registers for two a multiprocessor (64
** at 512); the others leave the count to ptxas (0: no .minnctapersm, which
** is not the same as 1: with 1, ptxas took up to 168 registers at 256) */
#define SORT_BOUNDS(T) __launch_bounds__(T, (T) > 384 && (T) <= 512 ? 2 : 0)
#endif

/*
** A shape whose tile of keys or values would not fit in 48 KiB of static
** shared memory builds an entry point that traps (lua/catalog/sort.lua
** never launches it), so that one NVRTC build serves the dtypes it fits.
*/
#define SORT_FITS(K, V, I, T) (sizeof(TileShared<K, V, I, T>) <= 48 * 1024)

template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void onesweep_entry (const K *kin, K *kout, const V *vin, V *vout, u64 base, u32 count,
                                                const u64 *bins_in, u64 *bins_out, u32 *lb, u32 *lb_next,
                                                u32 lb_next_tiles, u32 *ctr, const u32 *skip, int shift, int bits,
                                                int kind, int flags, int window) {
  if constexpr (SORT_FITS(K, V, ITEMS, THREADS))
    onesweep<K, V, VALUES, ITEMS, THREADS>(kin, kout, vin, vout, base, count, bins_in, bins_out, lb, lb_next,
                                           lb_next_tiles, ctr, skip, shift, bits, kind, flags, window);
  else __trap();
}

template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void small_entry (const K *kin, K *kout, const V *vin, V *vout, u32 n, int begin_bit,
                                             int end_bit, int kind, int flags) {
  if constexpr (SORT_FITS(K, V, ITEMS, THREADS))
    small_sort<K, V, VALUES, ITEMS, THREADS>(kin, kout, vin, vout, n, begin_bit, end_bit, kind, flags);
  else __trap();
}

template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void fused_entry (const K *k0, K *ka, K *kb, const V *v0, V *va, V *vb, u32 n, u32 *hist,
                                             u32 *done, u32 *lb, unsigned *bar, int begin_bit, int end_bit, int kind,
                                             int flags, int window) {
  if constexpr (SORT_FITS(K, V, ITEMS, THREADS))
    fused<K, V, VALUES, ITEMS, THREADS>(k0, ka, kb, v0, va, vb, n, hist, done, lb, bar, begin_bit, end_bit, kind,
                                        flags, window);
  else __trap();
}

template <typename K, typename V, bool VALUES, int ITEMS, int THREADS>
__device__ __forceinline__ void lsd_entry (const K *kin, K *kout, const V *vin, V *vout, u64 n, u64 chunk,
                                           const u64 *offsets, int shift, int bits, int kind, int flags) {
  if constexpr (SORT_FITS(K, V, ITEMS, THREADS))
    lsd_scatter<K, V, VALUES, ITEMS, THREADS>(kin, kout, vin, vout, n, chunk, offsets, shift, bits, kind, flags);
  else __trap();
}

/* a shape's four tile kernels: I keys a thread, T threads, S the names' suffix */
#define SORT_PASS(k, K, v, V, VALUES, I, T, S) \
  extern "C" __global__ void SORT_BOUNDS(T) SORT_NAME(onesweep, k, v, I, S) ( \
      const K *kin, K *kout, const V *vin, V *vout, u64 base, u32 count, const u64 *bins_in, u64 *bins_out, \
      u32 *lb, u32 *lb_next, u32 lb_next_tiles, u32 *ctr, const u32 *skip, int shift, int bits, int kind, \
      int flags, int window) { \
    onesweep_entry<K, V, VALUES, I, T>(kin, kout, vin, vout, base, count, bins_in, bins_out, lb, lb_next, \
                                       lb_next_tiles, ctr, skip, shift, bits, kind, flags, window); \
  } \
  extern "C" __global__ void SORT_BOUNDS(T) SORT_NAME(small, k, v, I, S) ( \
      const K *kin, K *kout, const V *vin, V *vout, u32 n, int begin_bit, int end_bit, int kind, int flags) { \
    small_entry<K, V, VALUES, I, T>(kin, kout, vin, vout, n, begin_bit, end_bit, kind, flags); \
  } \
  SORT_FUSED(k, K, v, V, VALUES, I, T, S) \
  extern "C" __global__ void SORT_BOUNDS(T) SORT_NAME(lsd, k, v, I, S) ( \
      const K *kin, K *kout, const V *vin, V *vout, u64 n, u64 chunk, const u64 *offsets, int shift, int bits, \
      int kind, int flags) { \
    lsd_entry<K, V, VALUES, I, T>(kin, kout, vin, vout, n, chunk, offsets, shift, bits, kind, flags); \
  }

/* the fused kernel alone, at another count: small sorts want small tiles (more
** blocks for the same keys; bench/sort.lua's 2^16 lines) */
#define SORT_FUSED(k, K, v, V, VALUES, I, T, S) \
  extern "C" __global__ void SORT_BOUNDS(T) SORT_NAME(fused, k, v, I, S) ( \
      const K *k0, K *ka, K *kb, const V *v0, V *va, V *vb, u32 n, u32 *hist, u32 *done, u32 *lb, unsigned *bar, \
      int begin_bit, int end_bit, int kind, int flags, int window) { \
    fused_entry<K, V, VALUES, I, T>(k0, ka, kb, v0, va, vb, n, hist, done, lb, bar, begin_bit, end_bit, kind, \
                                    flags, window); \
  }
/* M (SORT_PASS or SORT_FUSED) for each of the six key and value cases, I32 or I64 keys a
** thread by the key's width */
#define SORT_CASES(M, I32, I64, T, S) \
  M(u32, u32, keys, u32, false, I32, T, S) \
  M(u32, u32, u32, u32, true, I32, T, S) \
  M(u32, u32, u64, u64, true, I32, T, S) \
  M(u64, u64, keys, u32, false, I64, T, S) \
  M(u64, u64, u32, u32, true, I64, T, S) \
  M(u64, u64, u64, u64, true, I64, T, S)
#define SORT_FUSEDS(I) SORT_CASES(SORT_FUSED, I, I, SORT_THREADS, SORT_SUFFIX)
#define SORT_PASSES(I32, I64) SORT_CASES(SORT_PASS, I32, I64, SORT_THREADS, SORT_SUFFIX)

/* prebuilt: each case's default shape (the wider tiles below, and 256 threads at
** the default keys a thread for 32-bit keys with 8-byte values) and the small
** sorts' fused tiles; NVRTC builds other counts (-DCULUA_SORT_ITEMS=n, both key
** widths, 256 threads: the other cases at the default count too) and shapes
** (-DCULUA_SORT_THREADS=n). Prebuilding every case at 256 threads cost the
** build 40% more for tiles that no default uses. */
#ifdef CULUA_SORT_ITEMS
SORT_PASSES(CULUA_SORT_ITEMS, CULUA_SORT_ITEMS)
#else
SORT_PASS(u32, u32, u64, u64, true, SORT_ITEMS32, SORT_THREADS, SORT_SUFFIX)
SORT_FUSEDS(SORT_FUSED_ITEMS)
#if !defined(CULUA_SORT_THREADS) && !defined(CULUA_SORT_MINBLOCKS)
/*
** The wider tiles, prebuilt where bench/sort.lua's sweeps found them faster
** (bench/RESULTS.md, sessions 7 and 15): 32-bit keys alone at 384 x 20
** (5.34 ms for 2^28 keys against 5.86 at 256 x 18), with 4-byte values at
** 512 x 13 (9.59 ms for 2^28 pairs against 10.64), 64-bit keys at 512 x 10
** (8.20 ms for 2^27 keys against 8.76 at 256 x 16), with or without values
** (8-byte values: 40 KiB of tile). 32-bit keys with 8-byte values stay at
** 256 x 18: 512 x 12 of them would take 48 KiB and more.
** lua/catalog/sort.lua's `wide` names the same.
*/
SORT_PASS(u32, u32, keys, u32, false, 20, 384, _t384)
SORT_PASS(u32, u32, u32, u32, true, 13, 512, _t512)
SORT_PASS(u64, u64, keys, u32, false, 10, 512, _t512)
SORT_PASS(u64, u64, u32, u32, true, 10, 512, _t512)
SORT_PASS(u64, u64, u64, u64, true, 10, 512, _t512)
#endif
#endif

#define SORT_WARP(v, V, VALUES) \
  extern "C" __global__ void __launch_bounds__(32) culua_sort_warp_##v ( \
      const u32 *kin, u32 *kout, const V *vin, V *vout, int n, int begin_bit, int end_bit, int flags) { \
    warp_sort<V, VALUES>(kin, kout, vin, vout, n, begin_bit, end_bit, flags); \
  }

SORT_WARP(keys, u32, false)
SORT_WARP(u32, u32, true)
SORT_WARP(u64, u64, true)

/* }====================================================== */
