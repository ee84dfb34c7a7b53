/*
** sort_multi.cu
** The sort over several GPUs or ranks (lua/catalog/sort_multi.lua). Each part
** sorts its own keys with the one-GPU sort (kernels/sort.cu); these kernels
** then find where the boundaries of the global order fall in a part's sorted
** run (bounds, ends), and merge the runs a part receives (corank, merge).
**
** Keys are compared by their order key: the bits [begin_bit, end_bit) of
** <culua/sort.cuh>'s to_radix, the very bits the one-GPU sort orders by, so
** that a merge keeps its order (descending, NaNs last, -0.0 before +0.0) and
** stability holds: of two keys with one order key, the earlier run's comes
** first, and the runs are merged in the order of the parts they came from.
*/

#include <culua/sort.cuh>

#define SORTM_THREADS 256                        /* a merge tile's block, and the searches' */
/* keys a thread of a merge tile: prebuilt at 12; NVRTC builds other counts (sort_multi_run.lua's
** tune.items, 1..16: a tile of 64-bit keys and its sources within 48 KiB) with -DSORTM_ITEMS=n
** -DSORTM_V=_in, SORTM_V naming the merges so built. A merge of two runs into 2^27 uint32
** keys on an H100 took 0.684 ms at 12 (1570 GB/s read and written), 0.815 at 8, 1.163 at 4,
** 0.831 at 16 (bench/RESULTS.md, session 29) */
#ifndef SORTM_ITEMS
#define SORTM_ITEMS 12
#endif
#ifndef SORTM_V
#define SORTM_V
#endif
#define SORTM_TILE (SORTM_THREADS * SORTM_ITEMS)   /* keys a merge tile writes */
#define SORTM_CAT_(a, b) a##b
#define SORTM_CAT(a, b) SORTM_CAT_(a, b)

typedef unsigned short u16;


/* {====================================================== order keys */

/*
** The order key of k: to_radix's bits (kind 0 unsigned, 1 signed, 2 floating
** point; flags SORT_DESC inverts them) shifted down by `shift` (begin_bit)
** and masked to end_bit - begin_bit bits. 16-bit keys have no KeyBits in
** <culua/sort.cuh>: the same transform is written out here, with the largest
** magnitude that is no NaN given (`inf16`: 0x7c00 for float16, 0x7f80 for
** bfloat16), since the two formats put their exponents apart.
*/
template <typename K> struct Okey;
template <> struct Okey<u32> {
  static __device__ __forceinline__ u64 of (u32 k, int kind, int flags, int shift, u64 mask, u32) {
    return (u64)(to_radix<u32>(k, kind, flags) >> shift) & mask;
  }
};
template <> struct Okey<u64> {
  static __device__ __forceinline__ u64 of (u64 k, int kind, int flags, int shift, u64 mask, u32) {
    return (to_radix<u64>(k, kind, flags) >> shift) & mask;
  }
};
template <> struct Okey<u16> {
  static __device__ __forceinline__ u64 of (u16 k, int kind, int flags, int shift, u64 mask, u32 inf16) {
    const u32 x = k, sign = 0x8000u;
    u32 r = x ^ ((kind == 2 && (x & sign)) ? 0x7fffu : 0u) ^ (kind != 0 ? sign : 0u) ^
            ((flags & SORT_DESC) ? 0xffffu : 0u);
    if (kind == 2 && (x & 0x7fffu) > inf16) r = 0xffffu;   /* NaN, of either sign: last, either order */
    return (u64)(r >> shift) & mask;
  }
};

/* the parameters every kernel here takes after its own, as one value */
struct Order {
  int kind, flags, shift;
  u64 mask;
  u32 inf16;
  template <typename K> __device__ __forceinline__ u64 key (K k) const {
    return Okey<K>::of(k, kind, flags, shift, mask, inf16);
  }
};
#define SORTM_ORDER_PARAMS int kind, int flags, int shift, u64 mask, u32 inf16
#define SORTM_ORDER Order{kind, flags, shift, mask, inf16}

/* the first place in keys[0, n) (sorted by order key) whose order key is >= c,
** or > c when `upper` */
template <typename K>
__device__ __forceinline__ u64 bound (const K *keys, u64 n, u64 c, bool upper, const Order &o) {
  u64 lo = 0, hi = n;
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    const u64 d = o.key(keys[mid]);
    if (upper ? d <= c : d < c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* }====================================================== */


/* {====================================================== the boundaries' search */

/*
** A round of the search for the global order's boundaries (sort_multi.lua,
** boundaries): for each of `count` candidate order keys, how many keys of this
** part's sorted run come before it (out[i]; and, with `both`, how many do not
** come after it: out[count + i]). A thread a candidate: a few hundred a round.
*/
template <typename K>
__device__ __forceinline__ void bounds (const K *keys, u64 n, const u64 *cand, u32 count, u64 *out, u32 both,
                                        const Order &o) {
  const u32 i = blockIdx.x * SORTM_THREADS + threadIdx.x;
  if (i >= count) return;
  const u64 c = cand[i];
  out[i] = bound(keys, n, c, false, o);
  if (both) out[count + i] = bound(keys, n, c, true, o);
}

/* the order keys of a run's first and last keys (n >= 1): where the search starts */
template <typename K>
__device__ __forceinline__ void ends (const K *keys, u64 n, u64 *out, const Order &o) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = o.key(keys[0]);
    out[1] = o.key(keys[n - 1]);
  }
}

/* }====================================================== */


/* {====================================================== merges */

/*
** How many of the first `diag` keys of the merge of a[0, na) and b[0, nb)
** come from a (the merge path's crossing of that diagonal): a[i] comes before
** b[j] when its order key is not greater (a is the earlier run).
*/
template <typename K>
__device__ __forceinline__ u64 co_rank (const K *a, u64 na, const K *b, u64 nb, u64 diag, const Order &o) {
  u64 lo = diag > nb ? diag - nb : 0, hi = diag < na ? diag : na;
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    if (o.key(a[mid]) <= o.key(b[diag - 1 - mid])) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* co[t] for tile t = 0..tiles: where tile t of the merge starts in a (a thread a tile) */
template <typename K>
__device__ __forceinline__ void corank (const K *a, u64 na, const K *b, u64 nb, u64 *co, u64 tiles, const Order &o) {
  const u64 t = (u64)blockIdx.x * SORTM_THREADS + threadIdx.x;
  if (t > tiles) return;
  const u64 total = na + nb;
  const u64 diag = t * SORTM_TILE < total ? t * SORTM_TILE : total;
  co[t] = co_rank(a, na, b, nb, diag, o);
}

/*
** One tile of the merge of a and b into out (a block a tile; co from corank):
** the tile's keys of a and of b into shared memory, each thread's ITEMS
** outputs merged from its own crossing of the tile's merge path, written back
** to shared memory in output order and then to out in whole rows. Values are
** not held: each output's source (its place among the tile's keys, 16 bits)
** says where to read its value. out may not overlap a or b. nb may be 0 (a
** copy). The loads go in rows of the block, each thread's ITEMS of them issued
** before any is used: one load in flight a thread would leave the merge bound
** by memory latency, not bandwidth.
*/
template <typename K, typename V, bool VALUES>
__device__ __forceinline__ void merge (const K *a, u64 na, const K *b, u64 nb, const V *va, const V *vb, K *out,
                                       V *vout, const u64 *co, const Order &o) {
  __shared__ K sk[SORTM_TILE];
  __shared__ u16 src[VALUES ? SORTM_TILE : 1];
  const u64 tile = blockIdx.x;
  const u64 total = na + nb;
  const u64 k0 = tile * SORTM_TILE;
  const u64 k1 = k0 + SORTM_TILE < total ? k0 + SORTM_TILE : total;
  const u64 a0 = co[tile], a1 = co[tile + 1];
  const u64 b0 = k0 - a0;
  const int la = (int)(a1 - a0), len = (int)(k1 - k0), lb = len - la;
  {
    K in[SORTM_ITEMS];
#pragma unroll
    for (int j = 0; j < SORTM_ITEMS; j++) {
      const int i = threadIdx.x + j * SORTM_THREADS;
      if (i < len) in[j] = i < la ? a[a0 + i] : b[b0 + (i - la)];
    }
#pragma unroll
    for (int j = 0; j < SORTM_ITEMS; j++) {
      const int i = threadIdx.x + j * SORTM_THREADS;
      if (i < len) sk[i] = in[j];
    }
  }
  __syncthreads();

  const int d = threadIdx.x * SORTM_ITEMS;
  K rk[SORTM_ITEMS];
  u16 rs[SORTM_ITEMS];
  if (d < len) {
    int lo = d > lb ? d - lb : 0, hi = d < la ? d : la;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (o.key(sk[mid]) <= o.key(sk[la + d - 1 - mid])) lo = mid + 1;
      else hi = mid;
    }
    int ia = lo, ib = d - lo;
    u64 ka = ia < la ? o.key(sk[ia]) : 0, kb = ib < lb ? o.key(sk[la + ib]) : 0;
#pragma unroll
    for (int t = 0; t < SORTM_ITEMS; t++) {
      if (d + t < len) {
        const bool from_a = ib >= lb || (ia < la && ka <= kb);
        const int s = from_a ? ia : la + ib;
        rk[t] = sk[s];
        rs[t] = (u16)s;
        if (from_a) {
          ia++;
          if (ia < la) ka = o.key(sk[ia]);
        }
        else {
          ib++;
          if (ib < lb) kb = o.key(sk[la + ib]);
        }
      }
    }
  }
  __syncthreads();   /* every thread has read what it merges: the tile's keys may be overwritten */
#pragma unroll
  for (int t = 0; t < SORTM_ITEMS; t++) {
    if (d + t < len) {
      sk[d + t] = rk[t];
      if (VALUES) src[d + t] = rs[t];
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < SORTM_ITEMS; j++) {
    const int i = threadIdx.x + j * SORTM_THREADS;
    if (i < len) out[k0 + i] = sk[i];
  }
  if (VALUES) {
    V v[SORTM_ITEMS];
#pragma unroll
    for (int j = 0; j < SORTM_ITEMS; j++) {
      const int i = threadIdx.x + j * SORTM_THREADS;
      if (i < len) {
        const int s = src[i];
        v[j] = s < la ? va[a0 + s] : vb[b0 + (s - la)];
      }
    }
#pragma unroll
    for (int j = 0; j < SORTM_ITEMS; j++) {
      const int i = threadIdx.x + j * SORTM_THREADS;
      if (i < len) vout[k0 + i] = v[j];
    }
  }
}

/* }====================================================== */


/* {====================================================== instances */

#define SORTM_KEYS(k, K) \
  extern "C" __global__ void __launch_bounds__(SORTM_THREADS) culua_sortm_bounds_##k ( \
      const K *keys, u64 n, const u64 *cand, u32 count, u64 *out, u32 both, SORTM_ORDER_PARAMS) { \
    bounds<K>(keys, n, cand, count, out, both, SORTM_ORDER); \
  } \
  extern "C" __global__ void culua_sortm_ends_##k (const K *keys, u64 n, u64 *out, SORTM_ORDER_PARAMS) { \
    ends<K>(keys, n, out, SORTM_ORDER); \
  } \
  extern "C" __global__ void __launch_bounds__(SORTM_THREADS) SORTM_CAT(culua_sortm_corank_##k, SORTM_V) ( \
      const K *a, u64 na, const K *b, u64 nb, u64 *co, u64 tiles, SORTM_ORDER_PARAMS) { \
    corank<K>(a, na, b, nb, co, tiles, SORTM_ORDER); \
  } \
  extern "C" __global__ void __launch_bounds__(SORTM_THREADS) SORTM_CAT(culua_sortm_merge_##k##_keys, SORTM_V) ( \
      const K *a, u64 na, const K *b, u64 nb, K *out, const u64 *co, SORTM_ORDER_PARAMS) { \
    merge<K, u32, false>(a, na, b, nb, nullptr, nullptr, out, nullptr, co, SORTM_ORDER); \
  }

#define SORTM_PAIRS(k, K, v, V) \
  extern "C" __global__ void __launch_bounds__(SORTM_THREADS) SORTM_CAT(culua_sortm_merge_##k##_##v, SORTM_V) ( \
      const K *a, u64 na, const K *b, u64 nb, const V *va, const V *vb, K *out, V *vout, const u64 *co, \
      SORTM_ORDER_PARAMS) { \
    merge<K, V, true>(a, na, b, nb, va, vb, out, vout, co, SORTM_ORDER); \
  }

SORTM_KEYS(u16, u16)
SORTM_KEYS(u32, u32)
SORTM_KEYS(u64, u64)
SORTM_PAIRS(u16, u16, u32, u32)
SORTM_PAIRS(u16, u16, u64, u64)
SORTM_PAIRS(u32, u32, u32, u32)
SORTM_PAIRS(u32, u32, u64, u64)
SORTM_PAIRS(u64, u64, u32, u32)
SORTM_PAIRS(u64, u64, u64, u64)

/*
** n bytes of src into dst (sort_multi_transport.lua's copy_bytes): keys of a
** dtype NCCL has no name for (16-bit) into a byte array for the transport over
** ranks, and, with tune.pull, the pieces of the sort over GPUs read from
** another GPU's memory over the link between them (peer access on) by this
** GPU's multiprocessors, where the copy engines' peer copies ran at about half
** the link's rate with every GPU sending and receiving at once. Words of W
** bytes, the widest that src and dst share an alignment in; the bytes before
** dst's first whole word and after its last go one at a time. Four loads in
** flight a thread.
*/
template <typename W>
__device__ __forceinline__ void copy_words (const unsigned char *src, unsigned char *dst, u64 n) {
  const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;
  const u64 skew = (u64)(sizeof(W) - ((size_t)dst & (sizeof(W) - 1))) & (sizeof(W) - 1);
  const u64 head = skew < n ? skew : n, words = (n - head) / sizeof(W), done = head + words * sizeof(W);
  if (tid < head) dst[tid] = src[tid];
  const W *s = (const W *)(src + head);
  W *d = (W *)(dst + head);
  for (u64 i = tid; i < words; i += 4 * stride) {
    W w[4];
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (i + u * stride < words) w[u] = s[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (i + u * stride < words) d[i + u * stride] = w[u];
  }
  if (tid < n - done) dst[done + tid] = src[done + tid];
}

extern "C" __global__ void culua_sortm_copy (const unsigned char *src, unsigned char *dst, u64 n) {
  const size_t x = (size_t)src ^ (size_t)dst;
  if (!(x & 15)) copy_words<uint4>(src, dst, n);
  else if (!(x & 7)) copy_words<uint2>(src, dst, n);
  else if (!(x & 3)) copy_words<unsigned>(src, dst, n);
  else copy_words<unsigned char>(src, dst, n);
}

/* }====================================================== */
