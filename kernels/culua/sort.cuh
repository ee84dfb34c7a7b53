/*
** culua/sort.cuh
** What the radix sort family's kernel files share (kernels/sort.cu, the tile
** kernels, and kernels/sort_counts.cu, the digit counts, copies and the warp
** sort): the radix bits, the flags of a pass and the look-back words (numbers
** lua/catalog/sort.lua reads from this text too: core.constants), and the
** block and warp pieces a tile is ranked and written with. kernels/sort.cu's
** opening says how the sort works.
*/

#ifndef culua_sort_cuh
#define culua_sort_cuh

#include <culua/common.cuh>


typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define SORT_RADIX 256            /* 8-bit digits; the histogram kernels' blocks */
#define SORT_FULL 0xffffffffu

/* flags of a pass */
#define SORT_FIRST 1     /* keys come from the user: make them radix bits */
#define SORT_LAST 2      /* keys go to the user: back from radix bits */
#define SORT_IOTA 4      /* values are not read: they are the keys' 1-based positions */
#define SORT_NOKEYS 8    /* write no keys (argsort's last pass) */
#define SORT_DESC 16     /* descending: radix bits inverted */

/* a key's kind, which says how its bits become radix bits (to_radix) */
#define SORT_UNSIGNED 0
#define SORT_SIGNED 1
#define SORT_FLOAT 2       /* float64, float32, float16, float8_e5m2: NaN past the infinity's bits */
#define SORT_FLOAT_ALT 3   /* the width's other format: bfloat16 (NaN past 0x7f80), float8_e4m3 (0x7e) */

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

/* {====================================================== radix bits */

/*
** A key width's numbers: its sign bit; the largest bits of a float that is
** no NaN, once the sign is cleared (exp: the infinity of float64, float32,
** float16 and float8_e5m2; alt: of the width's other format, bfloat16's
** infinity and float8_e4m3's 448, which has no infinity); the NaN a sort
** writes back, the one culua's conversions make (doc/dtypes.md: 0x7fff for
** both 2-byte formats, 0x7f for both fp8). Keys of 8 and 16 bits sit in a
** 32-bit register each, as wider ones do, and are ranked the same way.
*/
template <typename K> struct KeyBits;
template <> struct KeyBits<u8> {
  static constexpr u8 sign = 0x80, exp = 0x7c, alt = 0x7e, qnan = 0x7f;
  typedef signed char signed_t;
};
template <> struct KeyBits<u16> {
  static constexpr u16 sign = 0x8000, exp = 0x7c00, alt = 0x7f80, qnan = 0x7fff;
  typedef short signed_t;
};
template <> struct KeyBits<u32> {
  static constexpr u32 sign = 0x80000000u, exp = 0x7f800000u, alt = exp, qnan = 0x7fc00000u;
  typedef int signed_t;
};
template <> struct KeyBits<u64> {
  static constexpr u64 sign = 0x8000000000000000ull, exp = 0x7ff0000000000000ull, alt = exp,
                       qnan = 0x7ff8000000000000ull;
  typedef long long signed_t;
};

/* all ones in K: ~K(0) alone is an int -1 for the narrow keys, which no key equals */
template <typename K>
__device__ __forceinline__ constexpr K ones () { return (K)~K(0); }

/*
** kind: SORT_UNSIGNED, SORT_SIGNED, SORT_FLOAT or SORT_FLOAT_ALT. Both ways
** are written without branches on the key: a float's flip depends on its
** sign bit, so the masks that depend on kind and flags (the same for every
** key of a launch, computed once) combine with the key's sign spread over
** its word: negative floats flip every bit, other floats and signed keys the
** sign bit. The narrow keys' arithmetic is in int, as C promotes it; every
** result is cut back to K.
*/
template <typename K>
__device__ __forceinline__ K sign_spread (K k) {   /* all ones when the sign bit is set */
  return (K)((typename KeyBits<K>::signed_t)k >> (8 * sizeof(K) - 1));
}

template <typename K>
__device__ __forceinline__ K to_radix (K k, int kind, int flags) {
  const K sign = KeyBits<K>::sign;
  const K fmask = kind >= SORT_FLOAT ? (K)~sign : K(0);
  const K xmask = (K)((kind != SORT_UNSIGNED ? sign : K(0)) ^ ((flags & SORT_DESC) ? ones<K>() : K(0)));
  const K top = kind == SORT_FLOAT_ALT ? KeyBits<K>::alt : KeyBits<K>::exp;
  const K r = (K)(k ^ (sign_spread(k) & fmask) ^ xmask);
  /* NaN, of either sign: last, either order */
  return (kind >= SORT_FLOAT && (K)(k & ~sign) > top) ? ones<K>() : r;
}

template <typename K>
__device__ __forceinline__ K from_radix (K k, int kind, int flags) {
  const K sign = KeyBits<K>::sign;
  const K fmask = kind >= SORT_FLOAT ? (K)~sign : K(0);
  const K k1 = (flags & SORT_DESC) ? (K)~k : k;
  const K r = (K)(k1 ^ (kind != SORT_UNSIGNED ? sign : K(0)) ^ ((K)~sign_spread(k1) & fmask));
  return (kind >= SORT_FLOAT && k == ones<K>()) ? KeyBits<K>::qnan : r;
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
    for (int i = 0; i < ITEMS; i++) key[i] = first + i * 32 < valid ? load_one<K, CG>(src + first + i * 32) : ones<K>();
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
** scatter: digits (8 bits) and places in a tile (16 bits: a tile's keys
** fit in 48 KiB of shared memory, at least a byte each). A pass of pairs holds each key's digit, place and
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

/* a tile's shared memory as a formula, which lua/catalog/sort.lua reads to
** refuse a shape that cannot fit: the larger of the warps' counters and the
** tile's keys or values (E bytes each), then the digits' places, the warps'
** sums and the ticket, padded to 8 bytes; tile_bytes holds it to the struct */
#define SORT_TILE_COUNTERS(T) ((T) / 32 * SORT_RADIX * 4)
#define SORT_TILE_ITEMS(T, I, E) ((T) * (I) * (E))
#define SORT_TILE_REST(T) ((SORT_RADIX * 8 + (T) / 32 * 12 + 4 + 7) / 8 * 8)
template <typename K, typename V, int ITEMS, int THREADS>
__host__ __device__ constexpr int tile_bytes () {
  constexpr int e = sizeof(K) > sizeof(V) ? (int)sizeof(K) : (int)sizeof(V);
  constexpr int a = SORT_TILE_COUNTERS(THREADS), b = SORT_TILE_ITEMS(THREADS, ITEMS, e);
  static_assert(sizeof(TileShared<K, V, ITEMS, THREADS>) == (a > b ? a : b) + SORT_TILE_REST(THREADS),
                "SORT_TILE_* say TileShared's size");
  return (a > b ? a : b) + SORT_TILE_REST(THREADS);
}

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

#endif
