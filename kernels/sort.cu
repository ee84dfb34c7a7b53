/*
** sort.cu
** The radix sort family of culua's catalog: stable LSD radix sorts of 8-,
** 16-, 32- and 64-bit keys, 8 bits a pass, with values of 1, 2, 4 or 8
** bytes carried along.
**
** Keys are sorted as unsigned integers of their "radix bits": signed keys
** with the sign bit flipped; floats with every bit flipped when negative and
** the sign bit flipped otherwise (so -0.0 comes before +0.0); descending
** order inverts those bits, which keeps the sort stable. Every NaN, whatever
** its sign and payload, becomes all ones after the inversion, so NaNs sort
** last in either order, and comes back as the canonical quiet NaN
** (0x7fc00000, 0x7ff8000000000000; 0x7fff of float16 and bfloat16, 0x7f of
** both fp8 formats, as culua's conversions make them): the sort cannot keep
** both NaNs last and their bits. What is a NaN depends on the format (the
** kind: <culua/sort.cuh>'s KeyBits): float8_e4m3 has no infinity, and its
** only NaNs are 0x7f and 0xff. No other float has radix bits all ones in
** either order (only a NaN has all bits set, and +0.0's sign-flipped bits
** are not zero). A pass
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
**
** The family's kernels are in two files, with what they share in
** kernels/culua/sort.cuh (the radix bits, the flags of a pass, the
** look-back words, the block and warp pieces a tile is ranked with):
** - kernels/sort.cu (this file): the tile kernels, whose shape (keys a
**   thread, threads a block) NVRTC varies with -D values: onesweep's pass,
**   the one-block sort, the fused sort, lsd's scatter.
** - kernels/sort_counts.cu: the digit counts (onesweep's upfront histogram,
**   lsd's counts and scan), the copies back, and the warp sort.
*/

#include <culua/barrier.cuh>
#include <culua/sort.cuh>

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


#ifndef SORT_ITEMS32
#define SORT_ITEMS32 18   /* keys a thread, 32-bit keys: tiles of 4608 (bench/sort.lua sweep) */
#endif
#define SORT_FUSED_ITEMS 4   /* keys a thread of the fused kernel for small sorts */
#ifndef SORT_ITEMS64
#define SORT_ITEMS64 16   /* keys a thread, 64-bit keys: tiles of 4096 */
#endif
#define SORT_FUSED_WINDOW 8  /* look-back words loaded at once by the small sorts' fused tiles */
static_assert(SORT_FUSED_WINDOW <= SORT_MAX_WINDOW, "SORT_FUSED_WINDOW: at most SORT_MAX_WINDOW");
#define SORT_SHARED (48 * 1024)  /* a tile's static shared memory, at most (SORT_FITS) */

/*
** The wider tiles prebuilt (below, where they are prebuilt), threads and keys a
** thread by "<key>_<value>" case: each case's default shape where it has one
** (lua/catalog/sort.lua reads them); the others take SORT_THREADS at the
** default keys a thread
*/
#define SORT_WIDE_U32_KEYS_THREADS 384
#define SORT_WIDE_U32_KEYS_ITEMS 20
#define SORT_WIDE_U32_U32_THREADS 512
#define SORT_WIDE_U32_U32_ITEMS 13
#define SORT_WIDE_U64_KEYS_THREADS 512
#define SORT_WIDE_U64_KEYS_ITEMS 10
#define SORT_WIDE_U64_U32_THREADS 512
#define SORT_WIDE_U64_U32_ITEMS 10
#define SORT_WIDE_U64_U64_THREADS 512
#define SORT_WIDE_U64_U64_ITEMS 10
/*
** The narrow cases: 16- and 8-bit keys, and 1- and 2-byte values. A key
** sits in a register as a wide one does and costs the same to rank, so a
** tile's registers are what they are for 32-bit keys, and only its shared
** memory and the bytes a pass moves shrink: each case takes the shape of
** 32-bit keys alone or with 4-byte values (of 64-bit keys with 1- or 2-byte
** values, 64-bit keys'), the registers' cliff being where it was for those
** (more than 85 a thread at 384 threads, 64 at 512: one block a
** multiprocessor). Keys of 2 bytes with 8-byte values take 256 x 18, as
** 32-bit keys do. Prebuilt: 16-bit keys alone and with 4-byte values
** (argsort's positions); the others are built by NVRTC on first use
** (SORT_CASE, below).
*/
#define SORT_WIDE_U16_KEYS_THREADS 384
#define SORT_WIDE_U16_KEYS_ITEMS 20
#define SORT_WIDE_U16_U8_THREADS 512
#define SORT_WIDE_U16_U8_ITEMS 13
#define SORT_WIDE_U16_U16_THREADS 512
#define SORT_WIDE_U16_U16_ITEMS 13
#define SORT_WIDE_U16_U32_THREADS 512
#define SORT_WIDE_U16_U32_ITEMS 13
#define SORT_WIDE_U8_KEYS_THREADS 384
#define SORT_WIDE_U8_KEYS_ITEMS 20
#define SORT_WIDE_U8_U8_THREADS 512
#define SORT_WIDE_U8_U8_ITEMS 13
#define SORT_WIDE_U8_U16_THREADS 512
#define SORT_WIDE_U8_U16_ITEMS 13
#define SORT_WIDE_U8_U32_THREADS 512
#define SORT_WIDE_U8_U32_ITEMS 13
#define SORT_WIDE_U32_U8_THREADS 512
#define SORT_WIDE_U32_U8_ITEMS 13
#define SORT_WIDE_U32_U16_THREADS 512
#define SORT_WIDE_U32_U16_ITEMS 13
#define SORT_WIDE_U64_U8_THREADS 512
#define SORT_WIDE_U64_U8_ITEMS 10
#define SORT_WIDE_U64_U16_THREADS 512
#define SORT_WIDE_U64_U16_ITEMS 10


/* {====================================================== onesweep */


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
** chunk a tile at a time and scatters it, advancing its places. lsd_count and
** lsd_scan are in kernels/sort_counts.cu.
*/
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

/* {====================================================== entry points */


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
#define SORT_FITS(K, V, I, T) (tile_bytes<K, V, I, T>() <= SORT_SHARED)

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
  SORT_ONESWEEP(k, K, v, V, VALUES, I, T, S) \
  SORT_FUSED(k, K, v, V, VALUES, I, T, S) \
  extern "C" __global__ void SORT_BOUNDS(T) SORT_NAME(lsd, k, v, I, S) ( \
      const K *kin, K *kout, const V *vin, V *vout, u64 n, u64 chunk, const u64 *offsets, int shift, int bits, \
      int kind, int flags) { \
    lsd_entry<K, V, VALUES, I, T>(kin, kout, vin, vout, n, chunk, offsets, shift, bits, kind, flags); \
  }

/* onesweep's pass and the one-block sort */
#define SORT_ONESWEEP(k, K, v, V, VALUES, I, T, S) \
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

/*
** One case alone, as lua/catalog/sort.lua asks NVRTC for every shape it finds
** not prebuilt: -DCULUA_SORT_KEY=16 -DCULUA_SORT_VALUE=32, the widths in
** bits (a value of 0: keys alone), beside -DCULUA_SORT_ITEMS. The names
** and types of each width:
*/
#define SORT_KN_8 u8
#define SORT_KN_16 u16
#define SORT_KN_32 u32
#define SORT_KN_64 u64
#define SORT_VN_0 keys
#define SORT_VN_8 u8
#define SORT_VN_16 u16
#define SORT_VN_32 u32
#define SORT_VN_64 u64
#define SORT_VT_0 u8    /* keys alone: a value type never read, no wider than a key (a tile's shared memory) */
#define SORT_VT_8 u8
#define SORT_VT_16 u16
#define SORT_VT_32 u32
#define SORT_VT_64 u64
#define SORT_CASE(M, kb, vb, I) \
  M(SORT_PASTE(SORT_KN_, kb), SORT_PASTE(SORT_KN_, kb), SORT_PASTE(SORT_VN_, vb), SORT_PASTE(SORT_VT_, vb), \
    (vb) != 0, I, SORT_THREADS, SORT_SUFFIX)

/* prebuilt: the default shape of each case of 32- and 64-bit keys (the wider
** tiles below, and 256 threads at the default keys a thread for 32-bit keys
** with 8-byte values), of 16-bit keys alone and with 4-byte values, and their
** small sorts' fused tiles; NVRTC builds the other counts and shapes
** (-DCULUA_SORT_ITEMS=n, -DCULUA_SORT_THREADS=n), one case at a time
** (SORT_CASE), or the six cases of 32- and 64-bit keys at once when no case is
** named. Prebuilding every case at 256 threads cost the build 40% more for
** tiles that no default uses. */
#if defined(CULUA_SORT_ITEMS) && defined(CULUA_SORT_KEY)
SORT_CASE(SORT_PASS, CULUA_SORT_KEY, CULUA_SORT_VALUE, CULUA_SORT_ITEMS)
#elif defined(CULUA_SORT_ITEMS)
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
** 256 x 18: 512 x 12 of them would take 48 KiB and more. Their shapes
** (SORT_WIDE_*, above) are lua/catalog/sort.lua's defaults.
*/
#define SORT_WIDE(k, K, v, V, VALUES, W) \
  SORT_PASS(k, K, v, V, VALUES, W##_ITEMS, W##_THREADS, SORT_PASTE(_t, W##_THREADS))
SORT_WIDE(u32, u32, keys, u32, false, SORT_WIDE_U32_KEYS)
SORT_WIDE(u32, u32, u32, u32, true, SORT_WIDE_U32_U32)
SORT_WIDE(u64, u64, keys, u32, false, SORT_WIDE_U64_KEYS)
SORT_WIDE(u64, u64, u32, u32, true, SORT_WIDE_U64_U32)
SORT_WIDE(u64, u64, u64, u64, true, SORT_WIDE_U64_U64)
/* 16-bit keys alone and with 4-byte values, at their shapes and the small sorts'
** fused tiles; their lsd scatter, which no default takes, is NVRTC's */
#define SORT_NARROW(k, K, v, V, VALUES, W) \
  SORT_ONESWEEP(k, K, v, V, VALUES, W##_ITEMS, W##_THREADS, SORT_PASTE(_t, W##_THREADS)) \
  SORT_FUSED(k, K, v, V, VALUES, W##_ITEMS, W##_THREADS, SORT_PASTE(_t, W##_THREADS)) \
  SORT_FUSED(k, K, v, V, VALUES, SORT_FUSED_ITEMS, SORT_THREADS, )
SORT_NARROW(u16, u16, keys, u16, false, SORT_WIDE_U16_KEYS)
SORT_NARROW(u16, u16, u32, u32, true, SORT_WIDE_U16_U32)
#endif
#endif
