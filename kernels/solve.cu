/*
** solve.cu
** The solve family of culua's catalog: LU factorization with partial
** pivoting and the solves that use it, on row-major float32 and float64
** matrices (element (i, j) of an n x n matrix at i*ld + j).
**
** Two methods, both driven from lua/catalog/solve.lua (on one GPU, or
** several: the panel kernels take a leading dimension and a column offset,
** so that they factor a panel inside one GPU's share of the columns):
**   - seed: seed 003's three kernels a column (find the pivot row and the
**     multipliers, extract the pivot row, eliminate), on the transposed
**     (augmented) matrix, as the seed stores it so that the pivot search
**     reads a column contiguously;
**   - lu: blocked right-looking LU, LAPACK's getrf: a panel of `block`
**     columns factored on the GPU (one thread-block cluster a panel with its
**     rows in shared memory and a cluster barrier a column; or one cooperative
**     launch a panel with a grid barrier a column; or, panel = "columns", a
**     kernel a column, which also searches the next column's pivot), the
**     panel's row swaps applied to the rest,
**     a triangular solve for the block row of U, and the trailing update
**     A22 -= L21 * U12 by the catalog's matmul (alpha = -1, beta = 1, with
**     leading dimensions: kernels/matmul*.cu), as are the blocked substitutions
**     of lu_solve for many right-hand sides; for a few, the substitutions
**     below (one launch a triangle, its blocks meeting through global memory).
**
** Pivots are LAPACK's ipiv, 1-based: at step i, row i was swapped with
** row ipiv[i]. A status word records the first bad pivot: i + 1 when
** pivot i is zero, -(i + 1) when it is not finite; 0 when all are fine.
** Matrix offsets are element counts (long long), leading dimensions ints.
*/

#include <culua/common.cuh>
#include <culua/barrier.cuh>

#define MAXBLOCK 128      /* the widest panel (a lane keeps 4 of its columns) */
#define PANEL_WARPS 8     /* the fused panel's blocks: 256 threads, a warp a row */
#define PANEL_SLOT (2 + MAXBLOCK)   /* a block's candidate: magnitude, row, its panel values */


/*
** Programmatic dependent launches: lu's chain of launches on the panels'
** stream (the cluster panel, narrow_step, laswp) may be launched with
** `programmatic = true` (culua_dep_wait and culua_dep_release in
** culua/common.cuh), so that a kernel's blocks are scheduled while the one
** before it finishes, not after: each launch boundary on the chain then
** costs less than a launch's latency.
*/


/* a candidate's magnitude: NaN counts as infinite, so that it is chosen and reported */
template <typename T>
__device__ __forceinline__ double magnitude (T v) {
  double a = fabs((double)v);
  return a != a ? __longlong_as_double(0x7ff0000000000000ll) : a;
}

/* (a, ia) better than (b, ib): larger, then the smaller row (LAPACK's i?amax takes the first) */
__device__ __forceinline__ bool better (double a, int ia, double b, int ib) {
  return a > b || (a == b && ia < ib);
}

/* pivot i's verdict: i + 1 when it is zero, -(i + 1) when not finite, 0 when fine */
template <typename T>
__device__ __forceinline__ int pivot_verdict (int i, T pv) {
  return pv == T(0) ? i + 1 : !isfinite((double)pv) ? -(i + 1) : 0;
}

/*
** The best (magnitude, row) of the warp, in every lane, in three warp-wide
** integer reductions (redux.sync, compute capability 8.0) rather than five
** rounds of shuffles and compares: a magnitude (>= 0) orders as its bits do,
** so the best is the largest high word, then the largest low word among
** those, then the smallest row among those. A lane with no candidate (v < 0,
** i past every row) counts as magnitude 0 and loses the tie on its row; when
** no lane has one, i comes back past every row (callers look at i, and a
** magnitude of 0 there loses to any candidate's on the row too).
*/
__device__ __forceinline__ void warp_best (double &v, int &i) {
  const unsigned long long bits = v < 0.0 ? 0ull : (unsigned long long)__double_as_longlong(v);
  const unsigned hi = (unsigned)(bits >> 32), lo = (unsigned)bits;
  const unsigned mh = __reduce_max_sync(0xffffffffu, hi);
  const unsigned ml = __reduce_max_sync(0xffffffffu, hi == mh ? lo : 0u);
  const unsigned mr = __reduce_max_sync(0xffffffffu, hi == mh && lo == ml ? ~(unsigned)i : 0u);
  v = __longlong_as_double((long long)((unsigned long long)mh << 32 | ml));
  i = (int)~mr;
}

/* a pivot's verdict into the status word, unless an earlier one is there */
template <typename T>
__device__ __forceinline__ void note_pivot (int *status, int i, T pv) {
  if (*status != 0) return;
  const int v = pivot_verdict(i, pv);
  if (v != 0) *status = v;
}


/* {====================================================== input checks */

/* status = 1 when any of x[0..count) is NaN or infinite */
template <typename T>
__device__ void check_finite (long long count, const T *x, int *status) {
  bool bad = false;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    bad |= !isfinite((double)x[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *status = 1;
}

/*
** The largest magnitude among an n x n matrix's elements (upper: only those on
** and above the diagonal, U's) into *out as a double's bits, by atomicMax: a
** magnitude (>= 0) orders as its bits do, so the word starts at 0 (0.0) and
** grows. A block a row at a time, its threads across the row (coalesced, no
** division an element); each block's warps meet in shared memory, then one
** atomic a block. For the growth factor max|U| / max|A| (lu's growth option).
*/
template <typename T>
__device__ void absmax (int n, const T *X, int upper, unsigned long long *out) {
  __shared__ unsigned long long warps[32];
  double m = 0.0;
  for (int i = blockIdx.x; i < n; i += gridDim.x) {
    const T *row = X + (size_t)i * n;
    for (int j = (upper ? i : 0) + threadIdx.x; j < n; j += blockDim.x)
      m = fmax(m, fabs((double)row[j]));
  }
  unsigned long long bits = (unsigned long long)__double_as_longlong(m);
  for (int d = 16; d > 0; d >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, bits, d);
    bits = o > bits ? o : bits;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = bits;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x + 31) / 32; w++) bits = warps[w] > bits ? warps[w] : bits;
    atomicMax(out, bits);
  }
}

/* }====================================================== */


/* {====================================================== panel factorization */

/*
** One column of the panel of columns [j0, j0 + jb), rows [j0, n): when
** ju >= j0, eliminate column ju below its pivot (the multipliers
** A[r][ju] /= A[ju][ju] and the rank-1 update of the panel's columns right of
** ju); when `search`, also find the pivot of column js = ju + 1 among rows
** js..n-1 (the values just updated), record it, and swap rows js and the
** pivot across the panel. A warp a row, so a row's panel columns are read
** together. The blocks' candidates meet in `part`; the last block to finish
** (a ticket on `counter`, which it puts back to 0) picks the pivot and swaps,
** once every block's writes are visible (each fenced before its ticket).
*/
template <typename T>
__device__ void panel (int n, int j0, int jb, int ju, int search, T *A, int ld, int coff, int *ipiv,
                       int *status, double *part, unsigned *counter) {
  __shared__ double wv[32];
  __shared__ int wi[32];
  __shared__ bool last;
  __shared__ int spiv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int js = ju + 1, jend = j0 + jb;
  const bool update = ju >= j0;
  T ur[MAXBLOCK / 32], pv = T(0);
  if (update) {   /* row ju's panel entries right of ju: this lane's columns */
    pv = A[(size_t)ju * ld + (ju + coff)];
#pragma unroll
    for (int q = 0; q < MAXBLOCK / 32; q++) {
      int c = js + lane + 32 * q;
      ur[q] = c < jend ? A[(size_t)ju * ld + (c + coff)] : T(0);
    }
  }
  double best = -1.0;
  int bi = n;
  for (int r = js + blockIdx.x * warps + warp; r < n; r += gridDim.x * warps) {
    T *row = A + (size_t)r * ld + coff;   /* row[c]: column c of the panel */
    if (update) {
      T l = pv != T(0) ? row[ju] / pv : T(0);
      __syncwarp();                     /* every lane has read row[ju] */
      if (lane == 0 && pv != T(0)) row[ju] = l;
#pragma unroll
      for (int q = 0; q < MAXBLOCK / 32; q++) {
        int c = js + lane + 32 * q;
        if (c < jend) {
          T v = row[c] - l * ur[q];
          row[c] = v;
          if (q == 0 && lane == 0 && search) { double m = magnitude(v); if (better(m, r, best, bi)) { best = m; bi = r; } }
        }
      }
    }
    else if (lane == 0) {
      double m = magnitude(row[js]);
      if (better(m, r, best, bi)) { best = m; bi = r; }
    }
  }
  if (!search) return;
  /* the block's best: lane 0 of each warp holds its warp's */
  if (lane == 0) { wv[warp] = best; wi[warp] = bi; }
  __threadfence();                      /* every thread's row writes, before the block's ticket */
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; w++)
      if (better(wv[w], wi[w], best, bi)) { best = wv[w]; bi = wi[w]; }
    part[2 * blockIdx.x] = best;
    part[2 * blockIdx.x + 1] = (double)bi;
    __threadfence();                    /* the partial, before the ticket */
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  if (threadIdx.x == 0) {
    __threadfence();
    best = -1.0; bi = n;
    for (int b = 0; b < (int)gridDim.x; b++) {
      double v = __ldcg(part + 2 * b);
      int i = (int)__ldcg(part + 2 * b + 1);
      if (better(v, i, best, bi)) { best = v; bi = i; }
    }
    if (bi >= n) bi = js;               /* cannot happen: row js is always a candidate */
    ipiv[js] = bi + 1;
    note_pivot(status, js, __ldcg(A + (size_t)bi * ld + (js + coff)));
    *counter = 0;                       /* for the next launch (kernels on one stream are ordered) */
    spiv = bi;
  }
  __syncthreads();
  int p = spiv;
  if (p != js)
    for (int c = j0 + threadIdx.x; c < jend; c += blockDim.x) {
      T a = __ldcg(A + (size_t)js * ld + (c + coff)), b = __ldcg(A + (size_t)p * ld + (c + coff));
      A[(size_t)js * ld + (c + coff)] = b;
      A[(size_t)p * ld + (c + coff)] = a;
    }
}

/*
** The whole panel of columns [j0, j0 + jb), rows [j0, n), in one cooperative
** launch (every block resident): a column a step, one grid barrier a step.
** Row r belongs to warp (r - j0) % W of the grid (W warps in all) for the
** whole launch, so a row is only ever read and written by its warp (lane l
** keeps the panel columns j0 + l + 32q), and the only data that crosses
** blocks goes through `part` (doubles; T's values are exact in them):
**
**   each block posts its best candidate of column j (magnitude, row) with
**   that row's panel values, and the warp that owns row j posts row j's;
**   barrier; every block takes the best of all the posts in the same way
**   (the same pivot p everywhere: `better` is a total order), copies the
**   pivot row and the old row j out of the posts, and updates its rows:
**   row j becomes the pivot row, row p gets row j's old values, every row
**   below j is eliminated (multiplier, rank-1 update of the panel columns
**   right of j), and the update's value in column j + 1 is the row's
**   candidate for the next step.
**
** Because nobody reads another block's rows of A, rows j and p can be
** written in the same step as they are read. The posts alternate between
** two halves of `part` by the parity of j: a block writes the half of step
** j + 2 only after the barrier of step j + 1, which every block reaches after
** it has read the half of step j. part holds 2 * (gridDim.x + 1) slots of
** PANEL_SLOT doubles (slot gridDim.x of each half: row j). Block 0 records
** the pivots and the status. The panel's swaps touch its own columns only
** (laswp does the rest). `bar` is culua/barrier.cuh's state, zero at launch;
** the flat barrier (at most CULUA_GRID_FLAT blocks, the launch caps the grid
** at the multiprocessors) leaves it at zero when the kernel ends.
**
** KEEP (culua_solve_panel_fused_kept_*): each warp copies its rows (at most R
** of them, jb values each) into the block's dynamic shared memory first,
** works on them there, and writes them back at the end. A warp's rows are
** only ever its own, so nothing else changes. Without it every row a warp
** updates is a round trip to L2 a column, one after the other: on an H100,
** 32768 x 64 float32 took 12.7 us a column that way (bench/RESULTS.md,
** session 12).
*/
template <typename T, bool KEEP>
__device__ void panel_fused (int n, int j0, int jb, T *A, int ld, int coff, int *ipiv, int *status, double *part,
                             unsigned *bar, int R) {
  extern __shared__ __align__(16) unsigned char fpanel_rows[];
  __shared__ T prow[MAXBLOCK], jrow[MAXBLOCK];
  __shared__ double wv[PANEL_WARPS];
  __shared__ int wi[PANEL_WARPS];
  __shared__ int sbest, spiv;
  culua::grid_barrier grid(bar);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = gridDim.x, W = G * PANEL_WARPS, gw = blockIdx.x * PANEL_WARPS + warp;
  const int jend = j0 + jb;
  /* KEEP: row r of this block at kept(r), its panel columns from 0; a warp's t-th row (r = j0 + gw + t W) at K0 + t jb */
  T *const K0 = (T *)fpanel_rows + (size_t)warp * R * jb;
  auto kept = [&] (int r) -> T * {
    const int q = r - j0;
    return (T *)fpanel_rows + ((size_t)(q % W - blockIdx.x * PANEL_WARPS) * R + q / W) * jb;
  };
  if constexpr (KEEP) {   /* the warp's rows into shared memory, a row at a time */
    int t = 0;
    for (int r = j0 + gw; r < n; r += W, t++) {
      const T *g = A + (size_t)r * ld + (j0 + coff);
      for (int c = lane; c < jb; c += 32) K0[(size_t)t * jb + c] = g[c];
    }
    __syncwarp();
  }
  double best = -1.0;
  int bi = n;
  if (lane == 0) {   /* column j0's candidates; later ones come out of the updates */
    int t = 0;
    for (int r = j0 + gw; r < n; r += W, t++) {
      double m;
      if constexpr (KEEP) m = magnitude(K0[(size_t)t * jb]);
      else m = magnitude(A[(size_t)r * ld + (j0 + coff)]);
      if (better(m, r, best, bi)) { best = m; bi = r; }
    }
  }
  for (int j = j0; j < jend; j++) {
    double *half = part + (size_t)(j & 1) * (G + 1) * PANEL_SLOT;
    /* the block's best: within each warp, then across the warps */
    warp_best(best, bi);
    if (lane == 0) { wv[warp] = best; wi[warp] = bi; }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < PANEL_WARPS; w++)
        if (better(wv[w], wi[w], best, bi)) { best = wv[w]; bi = wi[w]; }
      half[(size_t)blockIdx.x * PANEL_SLOT] = best;
      half[(size_t)blockIdx.x * PANEL_SLOT + 1] = (double)bi;
      sbest = bi;
    }
    __syncthreads();   /* also: the rows' updates are visible to the whole block */
    const int mine = sbest;
    if (mine < n) {
      const T *src;
      if constexpr (KEEP) src = kept(mine);
      else src = A + (size_t)mine * ld + (j0 + coff);
      for (int c = threadIdx.x; c < jb; c += blockDim.x) half[(size_t)blockIdx.x * PANEL_SLOT + 2 + c] = (double)src[c];
    }
    if (gw == (j - j0) % W) {   /* row j's warp: the lanes read what they wrote */
      const T *src;
      if constexpr (KEEP) src = kept(j);
      else src = A + (size_t)j * ld + (j0 + coff);
      for (int c = lane; c < jb; c += 32) half[(size_t)G * PANEL_SLOT + 2 + c] = (double)src[c];
    }
    grid.sync();

    if (warp == 0) {   /* the pivot: the best of the posts, read from L2 */
      double v = -1.0;
      int i = n;
      for (int b = lane; b < G; b += 32) {
        double bv = __ldcg(half + (size_t)b * PANEL_SLOT);
        int bx = (int)__ldcg(half + (size_t)b * PANEL_SLOT + 1);
        if (better(bv, bx, v, i)) { v = bv; i = bx; }
      }
      warp_best(v, i);
      if (lane == 0) spiv = i < n ? i : j;   /* i < n always: row j is a candidate */
    }
    __syncthreads();
    const int p = spiv;
    const int owner = ((p - j0) % W) / PANEL_WARPS;   /* the block whose post is row p */
    for (int c = threadIdx.x; c < jb; c += blockDim.x) {
      prow[c] = (T)__ldcg(half + (size_t)owner * PANEL_SLOT + 2 + c);
      jrow[c] = (T)__ldcg(half + (size_t)G * PANEL_SLOT + 2 + c);
    }
    __syncthreads();
    const T pv = prow[j - j0];
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      ipiv[j] = p + 1;
      note_pivot(status, j, pv);
    }

    best = -1.0;
    bi = n;
    int t = 0;
    for (int r = j0 + gw; r < n; r += W, t++) {
      if (r < j) continue;
      T *row;   /* row[c]: column c of the panel */
      if constexpr (KEEP) row = K0 + (size_t)t * jb - j0;
      else row = A + (size_t)r * ld + coff;
      if (r == j) {   /* row j: the pivot row's panel values */
        if (p != j)
#pragma unroll
          for (int q = 0; q < MAXBLOCK / 32; q++) {
            int c = lane + 32 * q;
            if (c < jb) row[j0 + c] = prow[c];
          }
        continue;
      }
      const bool swapped = r == p;   /* row p: row j's old values, then eliminated as the others */
      const T a = swapped ? jrow[j - j0] : row[j];
      const T l = pv != T(0) ? a / pv : T(0);
      __syncwarp();   /* every lane has read row[j] before its lane writes it */
#pragma unroll
      for (int q = 0; q < MAXBLOCK / 32; q++) {
        int c = lane + 32 * q, cc = j0 + c;
        if (c < jb) {
          if (cc > j) {
            T v = (swapped ? jrow[c] : row[cc]) - l * prow[c];
            row[cc] = v;
            if (cc == j + 1) { double m = magnitude(v); if (better(m, r, best, bi)) { best = m; bi = r; } }
          }
          else if (cc == j) row[cc] = pv != T(0) ? l : a;
          else if (swapped) row[cc] = jrow[c];
        }
      }
    }
  }
  if constexpr (KEEP) {   /* the factored rows back into A (each lane its own columns: no sync needed) */
    int t = 0;
    for (int r = j0 + gw; r < n; r += W, t++) {
      T *g = A + (size_t)r * ld + (j0 + coff);
      for (int c = lane; c < jb; c += 32) g[c] = K0[(size_t)t * jb + c];
    }
  }
}

/*
** The whole panel in one thread-block cluster (compute capability 9.0): the
** same steps as panel_fused, with the panel's rows kept in the blocks' shared
** memory and one cluster barrier a column instead of a grid barrier. The C
** blocks of the launch are one cluster (grid = cluster = C, up to 16); block b
** holds the panel rows r = j0 + b + C k (its local row k) in shared memory
** while k < ks (the launch's dynamic shared memory: ks rows of jst values), and
** in A itself beyond that, so that a panel too tall for the cluster's shared
** memory still works, its extra rows at L2's speed.
**
** A thread a row: it updates the row's values right of j a segment of 4 at a
** time (16-byte shared-memory accesses; a row in shared memory is jbs = jb
** rounded up to 4 values, its padding zero, then 16 bytes more, so that the
** rows of a warp's threads fall on different banks: always in float64, in
** float32 when jbs is a multiple of 8, as the default block's is). The
** per-column work that is not a row's (the block's best candidate, the posts,
** the pivot) is one warp's, so that it is not paid once a warp. A block's posts (its best
** candidate with that row's values, and row j's values from the block holding
** row j) are in its own shared memory; after the barrier each block copies
** every post (a warp a posting block) and row j into its own shared memory
** through distributed shared memory, and its warps each find the pivot there. Posts alternate between two buffers by the parity
** of j, for panel_fused's reason.
*/
#define CPANEL_THREADS 512
#define CPANEL_WARPS (CPANEL_THREADS / 32)
#define CLUSTER_MAX 16    /* the largest cluster (non-portable; 8 is portable) */

template <typename T>
struct cpost {                /* a block's posts for one step */
  double mag;                 /* its best candidate's magnitude (-1: none) */
  int row;                    /* and row (n: none) */
  T cand[MAXBLOCK];           /* that row's panel values */
  T jrow[MAXBLOCK];           /* row j's, posted by the block holding row j */
};

#if __CUDA_ARCH__ >= 900
/* *p in the shared memory of block `rank` of the cluster (a generic address) */
template <typename P>
__device__ __forceinline__ P *cluster_map (P *p, unsigned rank) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(p), "r"(rank));
  return (P *)r;
}

/*
** Every thread of the cluster: its shared-memory writes before, everyone's
** after. The release is a fence restricted to shared memory before a relaxed
** arrive: the barrier's own release (barrier.cluster.arrive.release) waits
** for all of the thread's memory operations at cluster scope, 1200-1400
** cycles on an H100 against about 200 (measured); the posts are all this
** kernel's blocks exchange, and they are in shared memory.
*/
__device__ __forceinline__ void cluster_sync () {
#if __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8)
  asm volatile("fence.release.sync_restrict::shared::cta.cluster;\n\t"
               "barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else   /* .sync_restrict is PTX ISA 8.6: older compilers get the barrier's own release */
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
#endif

/* 4 values at p (16-byte aligned, shared memory) */
__device__ __forceinline__ void load4 (const float *p, float v[4]) {
  float4 q = *(const float4 *)p;
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
__device__ __forceinline__ void load4 (const double *p, double v[4]) {
  double2 a = ((const double2 *)p)[0], b = ((const double2 *)p)[1];
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
__device__ __forceinline__ void store4 (float *p, const float v[4]) {
  *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4 (double *p, const double v[4]) {
  ((double2 *)p)[0] = make_double2(v[0], v[1]);
  ((double2 *)p)[1] = make_double2(v[2], v[3]);
}

/* columns c..c+3 of a panel row in A: those below jb (A's row ends there) */
template <typename T>
__device__ __forceinline__ void put4 (T *row, int c, int jb, const T v[4]) {
  for (int i = 0; i < 4 && c + i < jb; i++) row[c + i] = v[i];
}

template <typename T>
__device__ void panel_cluster (int n, int j0, int jb, T *A, int ld, int coff, int *ipiv, int *status, int ks) {
#if __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char cpanel_rows[];
  T *const S = (T *)cpanel_rows;
  __shared__ cpost<T> post[2];
  __shared__ double wv[CPANEL_WARPS], cv[CLUSTER_MAX];   /* the warps' candidates; the blocks' posts' */
  __shared__ int wi[CPANEL_WARPS], ci[CLUSTER_MAX];
  __shared__ __align__(16) T cand[CLUSTER_MAX][MAXBLOCK], jrow[MAXBLOCK];   /* the posts' rows; row j */
  const int C = gridDim.x, b = blockIdx.x;   /* the grid is one cluster: blockIdx.x is the rank */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int jbs = (jb + 3) & ~3, jst = jbs + 16 / (int)sizeof(T);
  const int m = n - j0, R = (m - b + C - 1) / C;   /* rows of this block: r = j0 + b + C k, k < R */
  T *const G = A + (size_t)j0 * ld + (coff + j0);  /* G[r' * ld + c]: panel row j0 + r', column c */
  auto grow = [&](int k) { return G + (size_t)(b + C * k) * ld; };
  auto srow = [&](int k) { return S + (size_t)k * jst; };
  /* column c of local row k, wherever it is (c < jbs; 0 in the padding) */
  auto value = [&](int k, int c) { return k < ks ? srow(k)[c] : c < jb ? grow(k)[c] : T(0); };

  culua_dep_wait();
  /* the rows into shared memory, a warp a row (coalesced) */
  for (int k = warp; k < min(R, ks); k += CPANEL_WARPS)
    for (int c = lane; c < jbs; c += 32) srow(k)[c] = c < jb ? grow(k)[c] : T(0);
  __syncthreads();
  /* column j0's candidates, a thread a row */
  double best = -1.0;
  int bi = n;
  for (int k = tid; k < R; k += CPANEL_THREADS) {
    double a = magnitude(value(k, 0));
    int r = j0 + b + C * k;
    if (better(a, r, best, bi)) { best = a; bi = r; }
  }

  int bad = 0;   /* block 0's first bad pivot (note_pivot's verdict) */
  for (int j = j0; j < j0 + jb; j++) {
    const int jj = j - j0;
    cpost<T> &P = post[j & 1];
    if (j == j0 + jb - 1) culua_dep_release();   /* the last column: the next launch may be scheduled */
    /* the block's best candidate: a warp's, then warp 0 takes the best of those and posts it */
    warp_best(best, bi);
    if (lane == 0) { wv[warp] = best; wi[warp] = bi; }
    __syncthreads();   /* also: the block's row updates, seen by the whole block */
    if (warp == 0) {
      best = lane < CPANEL_WARPS ? wv[lane] : -1.0;
      bi = lane < CPANEL_WARPS ? wi[lane] : n;
      warp_best(best, bi);
      if (lane == 0) { P.mag = bi < n ? best : -1.0; P.row = bi; }
      if (bi < n) {
        int k = (bi - j0 - b) / C;
        for (int c = lane; c < jbs; c += 32) P.cand[c] = value(k, c);
      }
    }
    else if (warp == 1 && jj % C == b) {   /* row j's values, from the block holding it */
      int k = jj / C;
      for (int c = lane; c < jbs; c += 32) P.jrow[c] = value(k, c);
    }
    cluster_sync();

    /* the C posts, a warp a block, copied here in one round trip: each candidate with its
       row's values, and row j's (every thread reading the posting blocks' shared memory
       would queue 10^5 requests a column on their multiprocessors). Every value read from
       another block is stored here before the block barrier below, so those reads are done
       before this block arrives at the next cluster barrier (the posts' second buffer and
       the last barrier before exit rely on it); cand, cv, ci and jrow are rewritten only
       after that barrier. */
    if (warp < C) {
      const cpost<T> *q = cluster_map(&P, warp);
      for (int c = lane; c < jbs; c += 32) cand[warp][c] = q->cand[c];
      if (lane == 0) { cv[warp] = q->mag; ci[warp] = q->row; }
      if (warp == jj % C)
        for (int c = lane; c < jbs; c += 32) jrow[c] = q->jrow[c];
    }
    __syncthreads();
    /* the pivot: the best of the posts, found by every warp (no second barrier) */
    double pvv = lane < C ? cv[lane] : -1.0;
    int p = lane < C ? ci[lane] : n;
    warp_best(pvv, p);
    if (p >= n) p = j;   /* cannot happen: row j is a candidate */
    const T *const prow = cand[(p - j0) % C];
    const T pv = prow[jj];
    if (b == 0 && tid == 0) {
      ipiv[j] = p + 1;
      if (bad == 0) bad = pivot_verdict(j, pv);   /* into the status word at the end */
    }

    /* the block's rows below j: eliminated; row j the pivot row, row p row j's old values */
    best = -1.0;
    bi = n;
    const int kfirst = max(0, (jj - b + C - 1) / C);   /* the first local row at or below j */
    for (int k = kfirst + tid; k < R; k += CPANEL_THREADS) {
      const int r = j0 + b + C * k;
      const bool sw = r == p, shared = k < ks;
      T *const row = shared ? srow(k) : grow(k);
      if (r == j) {   /* row j: the pivot row's values (already, when p == j) */
        if (p != j)
          for (int c = 0; c < jb; c += 4) {
            T v[4];
            load4(prow + c, v);
            if (shared) store4(srow(k) + c, v);
            else put4(row, c, jb, v);
          }
        continue;
      }
      const T *const src = sw ? jrow : row;   /* row p: row j's old values, then eliminated */
      if (shared) {
        /* a row in shared memory (all of them unless the panel spills): row j's old values
           left of the segment holding column j when it is row p, that segment, then plain
           segments. Every thread's row is a chain of segments and the block waits for the
           longest (row p's, which is full width): through generic addresses and the
           branches of the loop below, row p alone cost a microsecond a column */
        T *const rs = srow(k);
        const T *const ss = sw ? jrow : rs;
        const T a = ss[jj];
        const T l = pv != T(0) ? a / pv : T(0);
        const int c0 = jj & ~3;
        T v[4], u[4];
        if (sw)
          for (int c = 0; c < c0; c += 4) { load4(jrow + c, v); store4(rs + c, v); }
        load4(ss + c0, v);
        load4(prow + c0, u);
#pragma unroll
        for (int i = 0; i < 4; i++) {
          if (c0 + i > jj) v[i] -= l * u[i];
          else if (c0 + i == jj) v[i] = pv != T(0) ? l : a;
        }
        store4(rs + c0, v);
#pragma unroll 4
        for (int c = c0 + 4; c < jbs; c += 4) {   /* the padding stays 0: prow's is 0 */
          load4(ss + c, v);
          load4(prow + c, u);
#pragma unroll
          for (int i = 0; i < 4; i++) v[i] -= l * u[i];
          store4(rs + c, v);
        }
        if (jj + 1 < jb) {   /* the next column's candidate */
          const double mg = magnitude(rs[jj + 1]);
          if (better(mg, r, best, bi)) { best = mg; bi = r; }
        }
        continue;
      }
      /* a row in A (past the cluster's shared memory) */
      const T a = src[jj];
      const T l = pv != T(0) ? a / pv : T(0);
#pragma unroll 2
      for (int c = sw ? 0 : jj & ~3; c < jb; c += 4) {
        T v[4], u[4];
        if (sw) load4(src + c, v);   /* jrow, in shared memory */
        else for (int i = 0; i < 4; i++) v[i] = c + i < jb ? src[c + i] : T(0);
        load4(prow + c, u);
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const int cc = c + i;
          if (cc > jj) v[i] -= l * u[i];
          else if (cc == jj) v[i] = pv != T(0) ? l : a;
        }
        if (c <= jj + 1 && jj + 1 < c + 4 && jj + 1 < jb) {   /* the next column's candidate */
          const int i = jj + 1 - c;
          double mg = magnitude(i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3]);
          if (better(mg, r, best, bi)) { best = mg; bi = r; }
        }
        put4(row, c, jb, v);
      }
    }
  }

  if (b == 0 && tid == 0 && bad != 0 && *status == 0) *status = bad;
  cluster_sync();   /* no block leaves while another may read its posts */
  for (int k = warp; k < min(R, ks); k += CPANEL_WARPS)
    for (int c = lane; c < jb; c += 32) grow(k)[c] = srow(k)[c];
#endif
}

/* }====================================================== */


/* {====================================================== row swaps */

/*
** The swaps of pivots i0..i1-1 (ipiv, 1-based) on the columns [0, ncols) of
** X (leading dimension ld) that are outside [skip_lo, skip_hi).
**
** Done in order, a column's swaps are a chain: each waits for the last one's
** loads, and 64 of them took 36 us on an H100 (8192 columns). So each block
** first composes them into one permutation of the rows they touch (at most
** 2 * SWAP_MAX: the dense rows i0..i1-1 and the rows they were swapped
** with), then moves its columns' values in two passes, every load before any
** store, through shared memory. More than SWAP_MAX pivots go in turns.
**
** The composition, on the dense rows' sources d[] (row i0 + q holds what was
** row d[q]): at swap i with a dense pivot p, d[i] and d[p] trade; with a row p
** outside, row i takes what p holds then, which is p itself, or out[j] for
** the last earlier swap j with the same p (out[j]: what row j held before
** swap j, which went to p). A row p outside ends up with out[j] of its last
** swap j.
*/
#define SWAP_MAX 128
#define SWAP_THREADS 256
#define SWAP_COLS(T) (128 / (int)sizeof(T))   /* a block's columns in a turn: 128 bytes a row */

struct swap_plan {
  int piv[SWAP_MAX], d[SWAP_MAX], out[SWAP_MAX], prev[SWAP_MAX];
  int dst[2 * SWAP_MAX], src[2 * SWAP_MAX];
  int count;
};

/* the rows swaps i0..i1-1 (i1 - i0 <= SWAP_MAX) move: count pairs (dst, src) */
__device__ void swap_compose (int i0, int i1, const int *ipiv, swap_plan &sp) {
  const int w = i1 - i0, tid = threadIdx.x;
  for (int q = tid; q < w; q += blockDim.x) { sp.piv[q] = ipiv[i0 + q] - 1; sp.d[q] = i0 + q; }
  if (tid == 0) sp.count = 0;
  __syncthreads();
  for (int q = tid; q < w; q += blockDim.x) {   /* the last earlier swap with the same row outside */
    const int p = sp.piv[q];
    int j = -1;
    if (p < i0 || p >= i1)
      for (int r = q - 1; r >= 0; r--) if (sp.piv[r] == p) { j = r; break; }
    sp.prev[q] = j;
  }
  __syncthreads();
  if (tid == 0)
    for (int q = 0; q < w; q++) {
      const int p = sp.piv[q];
      if (p >= i0 && p < i1) {
        const int a = sp.d[q];
        sp.d[q] = sp.d[p - i0];
        sp.d[p - i0] = a;
      }
      else {
        sp.out[q] = sp.d[q];
        sp.d[q] = sp.prev[q] >= 0 ? sp.out[sp.prev[q]] : p;
      }
    }
  __syncthreads();
  for (int q = tid; q < w; q += blockDim.x) {
    if (sp.d[q] != i0 + q) {
      const int e = atomicAdd(&sp.count, 1);
      sp.dst[e] = i0 + q; sp.src[e] = sp.d[q];
    }
    const int p = sp.piv[q];
    if (p < i0 || p >= i1) {
      bool last = true;                       /* no later swap with the same row */
      for (int r = q + 1; r < w; r++) if (sp.piv[r] == p) { last = false; break; }
      if (last && sp.out[q] != p) {
        const int e = atomicAdd(&sp.count, 1);
        sp.dst[e] = p; sp.src[e] = sp.out[q];
      }
    }
  }
  __syncthreads();
}

template <typename T>
__device__ void laswp (int ncols, int ld, int skip_lo, int skip_hi, int i0, int i1, const int *ipiv, T *X) {
  __shared__ swap_plan sp;
  __shared__ T stage[2 * SWAP_MAX][SWAP_COLS(T)];
  const int cols = SWAP_COLS(T), rows = SWAP_THREADS / cols;
  const int tx = threadIdx.x % cols, ty = threadIdx.x / cols;
  const int width = ncols - (skip_hi - skip_lo);
  culua_dep_wait();
  culua_dep_release();   /* a short kernel: its dependents may be scheduled now */
  for (int s0 = i0; s0 < i1; s0 += SWAP_MAX) {
    swap_compose(s0, min(i1, s0 + SWAP_MAX), ipiv, sp);
    const int count = sp.count;
    for (int t0 = blockIdx.x * cols; t0 < width; t0 += gridDim.x * cols) {
      const int t = t0 + tx;
      const int c = t < skip_lo ? t : t + (skip_hi - skip_lo);
      if (t < width)
        for (int e = ty; e < count; e += rows) stage[e][tx] = X[(size_t)sp.src[e] * ld + c];
      __syncthreads();
      if (t < width)
        for (int e = ty; e < count; e += rows) X[(size_t)sp.dst[e] * ld + c] = stage[e][tx];
      __syncthreads();
    }
    __syncthreads();   /* a block with no columns: sp is read before the next turn writes it */
  }
}


/*
** perm[i] = the row of B that row i of P*B is, from the n pivots: the swaps
** replayed on an identity, by one thread (they are a chain), in shared memory
** when it fits (`shared`: the launch gave n ints of it), else in perm itself.
*/
__device__ void permutation (int n, const int *ipiv, int *perm, int shared) {
  extern __shared__ int sp[];
  int *w = shared ? sp : perm;
  for (int i = threadIdx.x; i < n; i += blockDim.x) w[i] = i;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < n; i++) {
      int p = ipiv[i] - 1;
      int a = w[i];
      w[i] = w[p];
      w[p] = a;
    }
  __syncthreads();
  if (shared)
    for (int i = threadIdx.x; i < n; i += blockDim.x) perm[i] = w[i];
}


/* W (n x k) = the rows perm[0..n) of B (n x k) */
template <typename T>
__device__ void gather (int n, int k, const int *perm, const T *B, T *W) {
  long long total = (long long)n * k;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    int i = (int)(e / k), c = (int)(e % k);
    W[e] = B[(size_t)perm[i] * k + c];
  }
}

template <typename T>
__device__ void copy (long long count, const T *src, T *dst) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count;
       e += (long long)gridDim.x * blockDim.x)
    dst[e] = src[e];
}

/* rows x cols of in (from inoff, rows ldin apart) to out (from outoff, rows ldout apart) */
template <typename T>
__device__ void copy2d (int rows, int cols, const T *in, long long inoff, int ldin, T *out, long long outoff, int ldout) {
  in += inoff;
  out += outoff;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < (long long)rows * cols;
       e += (long long)gridDim.x * blockDim.x) {
    int r = (int)(e / cols), c = (int)(e % cols);
    out[(size_t)r * ldout + c] = in[(size_t)r * ldin + c];
  }
}

/* the n x n identity, packed */
template <typename T>
__device__ void eye (int n, T *out) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < (long long)n * n;
       e += (long long)gridDim.x * blockDim.x)
    out[e] = e / n == e % n ? T(1) : T(0);
}

/* }====================================================== */


/* {====================================================== several GPUs */

/*
** Block-cyclic columns: the shares (GPUs, or several shares of one) take
** the panels of nb columns in turn, panel q to share q % shares. A share
** keeps its columns in an n x nloc array X, in order; `back` = 0 packs them
** out of A (n x n), 1 puts them back: `rows` rows of its columns [c0, c0 +
** w), A and X pointing at the first row (all n, or a block row as it becomes
** final; all its columns, or a chunk of them as the first step takes them).
*/
template <typename T>
__device__ void cyclic (int n, int rows, int nb, int shares, int share, int nloc, int c0, int w, T *A, T *X,
                        int back) {
  long long total = (long long)rows * w;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    int r = (int)(e / w), lc = c0 + (int)(e % w);
    int gc = ((lc / nb) * shares + share) * nb + lc % nb;
    size_t x = (size_t)r * nloc + lc, a = (size_t)r * n + gc;
    if (back) A[a] = X[x];
    else X[x] = A[a];
  }
}


/* a pivot (a row number) carried bit for bit in an element of the panel's buffer */
__device__ __forceinline__ float pivot_in (int p, float) { return __int_as_float(p); }
__device__ __forceinline__ double pivot_in (int p, double) { return __longlong_as_double((long long)p); }
__device__ __forceinline__ int pivot_out (float v) { return __float_as_int(v); }
__device__ __forceinline__ int pivot_out (double v) { return (int)__double_as_longlong(v); }

/*
** The factored panel of columns [j0, j0 + jb) as it travels to the other
** GPUs: buf = its jb pivots (ipiv[j0..]), then rows j0..n-1 of the panel,
** packed (jb x jb: L11 and U11, then L21), from A at aoff (the panel's first
** column) with leading dimension ld.
*/
template <typename T>
__device__ void panel_pack (int n, int j0, int jb, const T *A, long long aoff, int ld, const int *ipiv, T *buf) {
  long long total = (long long)(n - j0) * jb;
  A += aoff;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total + jb;
       e += (long long)gridDim.x * blockDim.x) {
    if (e < jb) buf[e] = pivot_in(ipiv[j0 + e], T(0));
    else {
      long long f = e - jb;
      int r = j0 + (int)(f / jb), c = (int)(f % jb);
      buf[e] = A[(size_t)r * ld + c];
    }
  }
}

/* the panel's pivots out of its buffer, into this GPU's ipiv */
template <typename T>
__device__ void panel_pivots (int j0, int jb, const T *buf, int *ipiv) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < jb; i += gridDim.x * blockDim.x)
    ipiv[j0 + i] = pivot_out(buf[i]);
}

/* }====================================================== */


/* {====================================================== triangular solves */

/*
** X (jb x ncols, leading dimension ldx) = inv(Tr) * X for the jb x jb
** triangle Tr (leading dimension ldt): unit lower (UPPER false, forward) or
** upper with its diagonal (UPPER true, backward). A block takes 32 columns
** into shared memory; 8 rows of threads share the updates below (above)
** each solved row. The triangle comes into shared memory first (the launch
** gives jb * jb elements of it): read from A at each step, its loads were the
** chain (23 us for a 64 x 8128 block row on an H100).
*/
template <typename T, bool UPPER>
__device__ void trsm (int jb, int ncols, const T *Tr, long long toff, int ldt, T *X, long long xoff, int ldx) {
  __shared__ T xs[MAXBLOCK][33];
  extern __shared__ __align__(16) unsigned char trsm_tri[];
  T *ts = reinterpret_cast<T *>(trsm_tri);   /* ts[k * jb + i] = Tr(i, k): column k contiguous */
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
  const int c = blockIdx.x * 32 + tx;
  const bool in = c < ncols;
  Tr += toff;
  X += xoff;
  for (int e = tid; e < jb * jb; e += 256) {
    const int i = e / jb, k = e % jb;
    ts[k * jb + i] = Tr[(size_t)i * ldt + k];
  }
  for (int i = ty; i < jb; i += 8) xs[i][tx] = in ? X[(size_t)i * ldx + c] : T(0);
  __syncthreads();
  if (!UPPER) {
    for (int k = 0; k < jb - 1; k++) {
      T xk = xs[k][tx];
      for (int i = k + 1 + ty; i < jb; i += 8) xs[i][tx] -= ts[k * jb + i] * xk;
      __syncthreads();
    }
  }
  else {
    for (int k = jb - 1; k >= 0; k--) {
      if (ty == 0) xs[k][tx] /= ts[k * jb + k];
      __syncthreads();
      T xk = xs[k][tx];
      for (int i = ty; i < k; i += 8) xs[i][tx] -= ts[k * jb + i] * xk;
      __syncthreads();
    }
  }
  if (in)
    for (int i = ty; i < jb; i += 8) X[(size_t)i * ldx + c] = xs[i][tx];
}

/*
** C (m x nc) -= L (m x kb) * U (kb x nc), nc and kb at most MAXBLOCK: the
** look-ahead's update of the next panel's columns, which the next panel
** waits for. matmul's tiles (128 x 256, 128 x 128) leave most of a 64-wide
** block idle and took 53 us for 8128 x 64 x 64 on an H100; this takes 64 x
** 64 tiles, a thread 4 x 4 of them, k in steps of UPD_K.
*/
#define UPD_K 16
template <typename T>
__device__ void update_narrow (int m, int nc, int kb, const T *L, long long loff, int ldl,
                               const T *U, long long uoff, int ldu, T *C, long long coff, int ldc) {
  __shared__ T ls[UPD_K][64 + 1], us[UPD_K][64];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int r0 = blockIdx.x * 64, c0 = blockIdx.y * 64;
  L += loff; U += uoff; C += coff;
  T acc[4][4] = {};
  for (int k0 = 0; k0 < kb; k0 += UPD_K) {
    for (int e = threadIdx.x; e < 64 * UPD_K; e += 256) {
      const int r = e / UPD_K, k = e % UPD_K;     /* L: a row's UPD_K values together */
      ls[k][r] = r0 + r < m && k0 + k < kb ? L[(size_t)(r0 + r) * ldl + k0 + k] : T(0);
      const int uk = e / 64, uc = e % 64;         /* U: 64 columns of a row together */
      us[uk][uc] = k0 + uk < kb && c0 + uc < nc ? U[(size_t)(k0 + uk) * ldu + c0 + uc] : T(0);
    }
    __syncthreads();
    for (int k = 0; k < UPD_K; k++) {
      T a[4], b[4];
      for (int i = 0; i < 4; i++) { a[i] = ls[k][ty + 16 * i]; b[i] = us[k][tx + 16 * i]; }
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; i++) {
    const int r = r0 + ty + 16 * i;
    if (r >= m) continue;
    for (int j = 0; j < 4; j++) {
      const int c = c0 + tx + 16 * j;
      if (c < nc) C[(size_t)r * ldc + c] -= acc[i][j];
    }
  }
}

/*
** The look-ahead's step between two panels in one launch: the swaps of pivots
** i0..i0+kb-1 on the columns [c0, c0 + nc), their block row of U (the top kb
** rows: inv(L11) times the swapped rows, L11 the unit lower triangle of the
** panel's kb columns) and the update of the rows below, C -= L21 * U. The
** panel's rows i0.. are at L + loff, a row every ldl: columns of A itself on
** one GPU, the packed panel another GPU sent in the several-GPU LU.
** As three launches (laswp, trsm, update_narrow), each a few blocks of
** dependent loads, they took about 60 us a step on an H100, which every
** panel waited for (bench/RESULTS.md, session 16).
**
** A block takes NSTEP_ROWS rows below the top and 64 of the columns
** (blockIdx.y), and works out the swaps and its columns' U itself, from the
** rows as they were at launch. The swaps, from pivots p[t] (0-based, p[t] >=
** i0 + t): once swap t is done, row i0 + t never moves again, so top row t
** ends with what row p[t] held before swap t: row p[t] itself, unless an
** earlier swap s had the same pivot (the last such s), in which case what row
** i0 + s held before swap s, g(s). And g(s) is row i0 + s itself, unless an
** earlier swap s' had pivot i0 + s (the last such s'): then g(s'). A row below
** the top takes g(t) of the last swap t with it as pivot. Every thread of a
** pivot finds its last earlier matches by a scan of the others: no chain of
** swaps replayed one by one.
**
** So no block may write what another still reads: a top row, or a row below
** whose values go up (held: its block leaves its update in `held`, at the
** slot of the top row it goes to). The last block of a column group to finish
** (a ticket) writes both: U into the top rows, the held rows into their
** places; it leaves its ticket at zero for the next launch.
*/
#define NSTEP_ROWS 64
#define NSTEP_US 72   /* U's row stride: a warp's 4 rows x 8 columns on distinct banks */

template <typename T>
__device__ void narrow_step (int n, int i0, int kb, const T *L, long long loff, int ldl, int c0, int nc, T *A, int ld,
                             const int *ipiv, T *held, unsigned *ticket) {
  __shared__ int piv[MAXBLOCK], same[MAXBLOCK], onto[MAXBLOCK], g[MAXBLOCK];
  __shared__ int top[MAXBLOCK];       /* top[t]: the row whose values top row i0 + t takes */
  __shared__ int mine[NSTEP_ROWS];    /* the same for this block's rows (a row itself when untouched) */
  __shared__ int slot[NSTEP_ROWS];    /* a held row's slot in `held` (the top row it goes to), else -1 */
  __shared__ T ls[UPD_K][NSTEP_ROWS + 1];
  __shared__ bool last;
  extern __shared__ __align__(16) unsigned char nstep_smem[];
  const int ts = kb + 1;              /* tri's column stride: odd, so its transposed stores spread over the banks */
  T *const tri = (T *)nstep_smem;     /* tri[k * ts + i] = L11(i, k), zero on and above the diagonal */
  T *const U = tri + kb * ts;         /* U[i * NSTEP_US + c]: the swapped rows, then U */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int r1 = i0 + kb, r0 = r1 + blockIdx.x * NSTEP_ROWS;
  const int cb = c0 + blockIdx.y * 64, w = min(64, c0 + nc - cb);
  const int tx = tid % 16, ty = tid / 16;   /* the update's 4 x 4 of the tile: rows ty + 16 i, columns tx + 16 j */

  culua_dep_wait();
  /* the loads that need no swaps first, in flight while the swaps are worked out */
  for (int t = tid; t < kb; t += 256) piv[t] = ipiv[i0 + t] - 1;
#pragma unroll 8
  for (int e = tid; e < kb * kb; e += 256) {
    const int i = e / kb, k = e % kb;
    tri[k * ts + i] = k < i ? L[loff + (size_t)i * ldl + k] : T(0);
  }
  /* chunk k0 of this block's rows of L21: UPD_K columns, a thread NSTEP_ROWS * UPD_K / 256 values */
  auto lchunk = [&](int k0, T (&v)[NSTEP_ROWS * UPD_K / 256]) {
#pragma unroll
    for (int u = 0; u < NSTEP_ROWS * UPD_K / 256; u++) {
      const int e = tid + 256 * u, r = e / UPD_K, k = e % UPD_K;
      v[u] = r0 + r < n && k0 + k < kb ? L[loff + (size_t)(r0 + r - i0) * ldl + k0 + k] : T(0);
    }
  };
  T lpre[NSTEP_ROWS * UPD_K / 256];
  lchunk(0, lpre);
  for (int q = tid; q < NSTEP_ROWS; q += 256) { mine[q] = r0 + q; slot[q] = -1; }
  __syncthreads();
  for (int t = tid; t < kb; t += 256) {   /* the last earlier swaps with t's pivot, and onto row i0 + t */
    const int p = piv[t];
    int sm = -1, on = -1;
    for (int s = t - 1; s >= 0 && (sm < 0 || on < 0); s--) {
      const int q = piv[s];
      if (sm < 0 && q == p) sm = s;
      if (on < 0 && q == i0 + t) on = s;
    }
    same[t] = sm;
    onto[t] = on;
  }
  __syncthreads();
  for (int t = tid; t < kb; t += 256) {   /* g(t): down the chain of onto (each step a smaller t) */
    int v = t;
    while (onto[v] >= 0) v = onto[v];
    g[t] = i0 + v;
  }
  __syncthreads();
  for (int t = tid; t < kb; t += 256) {
    const int p = piv[t];
    const int src = same[t] >= 0 ? g[same[t]] : p;
    top[t] = src;
    if (src >= r0 && src < r0 + NSTEP_ROWS) slot[src - r0] = t;
    if (p >= r0 && p < r0 + NSTEP_ROWS) {   /* p gets g(t) if t is its last swap */
      bool final = true;
      for (int s = t + 1; s < kb; s++) if (piv[s] == p) { final = false; break; }
      if (final) mine[p - r0] = g[t];
    }
  }
  __syncthreads();
#pragma unroll 8
  for (int e = tid; e < kb * 64; e += 256) {
    const int i = e / 64, c = e % 64;
    U[i * NSTEP_US + c] = c < w ? A[(size_t)top[i] * ld + cb + c] : T(0);
  }
  T base[4][4];   /* this thread's values of the tile after the swaps, loaded during the solve */
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int q = ty + 16 * i, c = tx + 16 * j;
      base[i][j] = r0 + q < n && c < w ? A[(size_t)mine[q] * ld + cb + c] : T(0);
    }
  __syncthreads();
  /* U = inv(L11) * U by blocks of 16 rows: the diagonal block's rows solved in registers
     (a warp 8 columns, 4 lanes a column, lane l rows 4 j + l of the block; row k's value
     comes from its lane by a shuffle), then the rows below take the block's product */
  for (int d0 = 0; d0 < kb; d0 += 16) {
    {
      const int c = warp * 8 + (lane >> 2), l = lane & 3;
      T x[4];
#pragma unroll
      for (int j = 0; j < 4; j++) x[j] = d0 + 4 * j + l < kb ? U[(d0 + 4 * j + l) * NSTEP_US + c] : T(0);
#pragma unroll
      for (int k = 0; k < 15; k++) {
        const T xk = __shfl_sync(0xffffffffu, x[k / 4], (lane & ~3) | (k % 4));
        const T *const tk = tri + (d0 + k) * ts + d0 + l;   /* column d0 + k of L11, from row d0 + l */
#pragma unroll
        for (int j = k / 4; j < 4; j++)
          if (4 * j + l > k && d0 + 4 * j + l < kb) x[j] -= tk[4 * j] * xk;
      }
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (d0 + 4 * j + l < kb) U[(d0 + 4 * j + l) * NSTEP_US + c] = x[j];
    }
    __syncthreads();
    const int d1 = d0 + 16;
    if (d1 >= kb) break;
    {
      const int c = tid % 64, g4 = tid / 64, kn = min(16, kb - d0);
      T ub[16];
#pragma unroll
      for (int k = 0; k < 16; k++) ub[k] = k < kn ? U[(d0 + k) * NSTEP_US + c] : T(0);
      for (int i0r = d1 + g4; i0r < kb; i0r += 16) {   /* four rows at once: four chains of FMAs */
        T v[4];
#pragma unroll
        for (int m = 0; m < 4; m++) v[m] = i0r + 4 * m < kb ? U[(i0r + 4 * m) * NSTEP_US + c] : T(0);
#pragma unroll
        for (int k = 0; k < 16; k++)
          if (k < kn)
#pragma unroll
            for (int m = 0; m < 4; m++) v[m] -= tri[(d0 + k) * ts + i0r + 4 * m] * ub[k];
#pragma unroll
        for (int m = 0; m < 4; m++)
          if (i0r + 4 * m < kb) U[(i0r + 4 * m) * NSTEP_US + c] = v[m];
      }
    }
    __syncthreads();
  }

  /* C -= L21 * U on this block's 64 x 64 tile, a thread 4 x 4 of it (update_narrow's);
     each chunk of L21's columns is loaded during the last one's products (the first
     during the solve above: lpre, loaded before it) */
  T acc[4][4] = {};
  for (int k0 = 0; k0 < kb; k0 += UPD_K) {
    __syncthreads();   /* the last chunk's products are done with ls */
#pragma unroll
    for (int u = 0; u < NSTEP_ROWS * UPD_K / 256; u++) {
      const int e = tid + 256 * u, r = e / UPD_K, k = e % UPD_K;
      ls[k][r] = lpre[u];
    }
    __syncthreads();
    if (k0 + UPD_K < kb) lchunk(k0 + UPD_K, lpre);
    const int kn = min(UPD_K, kb - k0);
    for (int k = 0; k < kn; k++) {
      T a[4], bv[4];
      for (int i = 0; i < 4; i++) { a[i] = ls[k][ty + 16 * i]; bv[i] = U[(k0 + k) * NSTEP_US + tx + 16 * i]; }
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += a[i] * bv[j];
    }
  }
  culua_dep_release();   /* the products are done: the next launch may be scheduled */
  for (int i = 0; i < 4; i++) {
    const int q = ty + 16 * i, r = r0 + q;
    if (r >= n) continue;
    for (int j = 0; j < 4; j++) {
      const int c = tx + 16 * j;
      if (c >= w) continue;
      const T v = base[i][j] - acc[i][j];
      if (slot[q] >= 0) held[(size_t)slot[q] * nc + (cb - c0) + c] = v;
      else A[(size_t)r * ld + cb + c] = v;
    }
  }

  __syncthreads();
  if (tid == 0) {
    __threadfence();   /* the held rows before the ticket */
    last = atomicAdd(&ticket[blockIdx.y], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int e = tid; e < kb * 64; e += 256) {
    const int i = e / 64, c = e % 64;
    if (c >= w) continue;
    A[(size_t)(i0 + i) * ld + cb + c] = U[i * NSTEP_US + c];
    if (top[i] >= r1) A[(size_t)top[i] * ld + cb + c] = __ldcg(&held[(size_t)i * nc + (cb - c0) + c]);
  }
  if (tid == 0) ticket[blockIdx.y] = 0;
}

/* }====================================================== */


/* {====================================================== substitutions */

/*
** lu_solve's two triangular solves for a few right-hand sides, one launch a
** triangle (LAPACK's trsv, by blocks of rows), with no return to the host
** between block rows. A block of threads takes TRSV_ROWS rows and a group of
** COLS right-hand sides (blockIdx.y: columns COLS * y on). The blocks of a
** group meet through two words of `sync`, in a 128-byte line of the group's:
** a ticket, taken when the block starts, which orders the block rows as the
** solve does (ticket q solves block row q going forward, nblk - 1 - q going
** backward), and `done`, the number of block rows solved. Block row q needs
** those of tickets 0..q-1 only, taken by blocks that were running before it
** took its own: no deadlock, whatever fits on the device. `done` only grows:
** ticket q stores q + 1 after it has seen q. The words are zero at launch,
** and the last ticket leaves them so: when it has seen nblk - 1, every other
** block has passed its last wait (a block stores only after its waits).
**
** A block of rows, in order:
**   - what needs no other block: its diagonal tile in shared memory (the
**     strictly lower part of L; or the strictly upper part of U and its
**     diagonal's reciprocals), and its rows of B (a value a lane);
**   - for each block row solved before its own, in the solve's order: the
**     tile of its rows in those columns into registers (a warp TRSV_RPW rows,
**     a lane two columns: coalesced), loaded before waiting; then, unless
**     `done` as last read covers it, a wait (thread 0 spins, then acquires;
**     then the block's barrier); then those rows of the solution, read from
**     L2, into the lanes' partial sums;
**   - the partial sums added up across each warp (reduce_scatter), each
**     taken from its element of B into shared memory; warp 0 substitutes
**     through the diagonal tile, a lane two rows, each solved row broadcast
**     by a shuffle;
**   - its rows of the solution written, fenced, and `done` released (or,
**     the last ticket, the group's words put back to zero).
**
** The critical path is a block row after another: the wait, the last tile's
** products, the sums, TRSV_ROWS steps of substitution, the fence. Going up, a
** row's value is its right-hand side times the reciprocal of U's diagonal
** (computed while waiting), not divided by it: a division (a sequence of
** dependent instructions, longer in float64) would sit on that path once a
** row, where a step is a shuffle and a multiply-add. It rounds once more
** than LAPACK's trsv (backward stable all the same), and a diagonal so small
** that its reciprocal overflows gives inf or NaN where a division might not.
** Arithmetic in T, as LAPACK's.
*/
#define TRSV_ROWS 64                          /* rows a block of threads */
#define TRSV_WARPS 8
#define TRSV_THREADS (TRSV_WARPS * 32)
#define TRSV_RPW (TRSV_ROWS / TRSV_WARPS)     /* rows a warp accumulates */
#define TRSV_COLS 4                           /* right-hand sides a group (one for k = 1) */
#define TRSV_SYNC 32                          /* words of `sync` a group: the ticket, then `done` */
#define TRSV_DONE (TRSV_SYNC / 2)
/* the instances' launch bounds ask for 2 blocks a multiprocessor with TRSV_COLS
   right-hand sides (128 registers, all of which float64 takes) and 3 with one
   (float64 took 84 unbounded, which leaves room for 2) */

/*
** The sums over the warp of the NV values each lane holds (NV a power of 2,
** at most 32): lane l ends with the sum of value l / (32 / NV), after 31
** shuffles for 32 values instead of 5 a value. Each step halves what a lane
** holds: it keeps the half its lane bit names and sends the other half to its
** partner, which keeps that one; below one value a lane, plain butterflies.
*/
template <int NV, int S = 16, typename T>
__device__ __forceinline__ T reduce_scatter (T (&v)[NV]) {
  constexpr int HALF = NV * S / 32;   /* values a lane keeps after this step */
  if (HALF >= 1) {
    const bool up = threadIdx.x & S;
#pragma unroll
    for (int i = 0; i < HALF; i++) {
      const T keep = up ? v[i + HALF] : v[i], send = up ? v[i] : v[i + HALF];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, S);
    }
  }
  else v[0] += __shfl_xor_sync(0xffffffffu, v[0], S);
  if constexpr (S > 1) return reduce_scatter<NV, S / 2>(v);
  else return v[0];
}

/* block row q's first row in the solve's order (q = 0 first) */
template <bool UPPER>
__device__ __forceinline__ int trsv_row0 (int q, int nblk) {
  return (UPPER ? nblk - 1 - q : q) * TRSV_ROWS;
}

/*
** X = inv(L) X (UPPER false: L unit lower, forward) or inv(U) X (UPPER true:
** U upper with its diagonal, backward), in place, for A = the n x n factors
** (row-major, leading dimension n) and X n x k (leading dimension k), its
** columns COLS * blockIdx.y on; a launch of nblk x ceil(k / COLS) blocks of
** TRSV_THREADS, `sync` TRSV_SYNC words a group, zero (and left zero).
*/
template <typename T, bool UPPER, int COLS>
__device__ void trsv (int n, int k, const T *__restrict__ A, T *X, unsigned *sync) {
  constexpr int NV = TRSV_RPW * COLS;     /* a lane's partial sums */
  constexpr int SPAN = 32 / NV;           /* lanes that end with the same sum */
  static_assert(NV <= 32 && SPAN * NV == 32, "a warp's sums must fit its lanes");
  __shared__ T tile[TRSV_ROWS][TRSV_ROWS + 1];   /* odd stride: warp 0 reads a column */
  __shared__ T rdiag[TRSV_ROWS];                 /* UPPER: 1 / U[i][i] */
  __shared__ T rhs[TRSV_ROWS][COLS + 1];         /* B's rows less the products with the rows solved */
  __shared__ unsigned sticket, sseen[2];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nblk = (n + TRSV_ROWS - 1) / TRSV_ROWS;
  const int c0 = blockIdx.y * COLS, kc = min(COLS, k - c0);
  unsigned *ticket = sync + (size_t)blockIdx.y * TRSV_SYNC, *done = ticket + TRSV_DONE;
  if (tid == 0) sticket = atomicAdd(ticket, 1u);
  __syncthreads();
  const int t = (int)sticket;
  const int i0 = trsv_row0<UPPER>(t, nblk), rows = min(TRSV_ROWS, n - i0);

  /* what needs no other block: the diagonal tile, the reciprocals, B's rows */
  for (int e = tid; e < TRSV_ROWS * TRSV_ROWS; e += TRSV_THREADS) {
    const int r = e / TRSV_ROWS, c = e % TRSV_ROWS;
    const bool in = UPPER ? (c > r && c < rows) : (c < r && r < rows);
    tile[r][c] = in ? A[(size_t)(i0 + r) * n + (i0 + c)] : T(0);
  }
  if (UPPER && tid < TRSV_ROWS)
    rdiag[tid] = tid < rows ? T(1) / A[(size_t)(i0 + tid) * n + (i0 + tid)] : T(0);
  /* the element of B whose sum this lane will hold (reduce_scatter's order) */
  const int mr = warp * TRSV_RPW + lane / SPAN / COLS, mc = lane / SPAN % COLS;
  const bool mine = lane % SPAN == 0;
  const T bv = mine && mr < rows && mc < kc ? X[(size_t)(i0 + mr) * k + (c0 + mc)] : T(0);

  /* the block rows solved before, each as soon as it is */
  T acc[NV];   /* acc[r * COLS + c]: row r of the warp's, right-hand side c */
#pragma unroll
  for (int i = 0; i < NV; i++) acc[i] = T(0);
  const int r0 = i0 + warp * TRSV_RPW, nr = n - r0;   /* the warp's rows, those below n */
  unsigned seen = 0, waits = 0;   /* block rows known solved, waits so far: the same in every thread */
  for (int q = 0; q < t; q++) {
    const int j0 = trsv_row0<UPPER>(q, nblk);
    const bool in0 = j0 + lane < n, in1 = j0 + lane + 32 < n;
    const T *ar = A + (size_t)r0 * n + (j0 + lane);
    T a[TRSV_RPW][2];
#pragma unroll
    for (int r = 0; r < TRSV_RPW; r++) {
      a[r][0] = in0 && r < nr ? ar[(size_t)r * n] : T(0);
      a[r][1] = in1 && r < nr ? ar[(size_t)r * n + 32] : T(0);
    }
    if ((unsigned)q >= seen) {
      /* relaxed spins (an acquire load invalidates the multiprocessor's L1
         each time), then one acquire, which reads that value or a later one.
         sseen alternates: thread 0 writes a half again only after a barrier
         that every thread reaches once it has read that half */
      if (tid == 0) {
        while (*(volatile unsigned *)done <= (unsigned)q) {}
        sseen[waits & 1] = culua_ld_acquire(done);
      }
      __syncthreads();
      seen = sseen[waits & 1];
      waits++;
    }
    T y[2][COLS];   /* rows j0 + lane and j0 + lane + 32 of the solution, from L2 */
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int c = 0; c < COLS; c++) {
        const int r = j0 + lane + 32 * h;
        y[h][c] = r < n && c < kc ? __ldcg(X + (size_t)r * k + (c0 + c)) : T(0);
      }
#pragma unroll
    for (int r = 0; r < TRSV_RPW; r++)
#pragma unroll
      for (int c = 0; c < COLS; c++)
        acc[r * COLS + c] = fma(a[r][1], y[1][c], fma(a[r][0], y[0][c], acc[r * COLS + c]));
  }
  const T s = reduce_scatter<NV>(acc);
  if (mine) rhs[mr][mc] = bv - s;
  __syncthreads();
  if (warp != 0) return;

  /* the diagonal block: row tt solved, broadcast, taken from the rows after it
     (selected, not branched on: no branch a step, so that the compiler loads
     the tile ahead, and a solved row is never touched, not even by 0 * inf).
     Going down, rows past `rows` change only rows past them; going up they
     would change the rows above, and are skipped */
  T x[2][COLS];   /* rows lane and lane + 32 of the block */
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int c = 0; c < COLS; c++) x[h][c] = rhs[lane + 32 * h][c];
  if (!UPPER) {
#pragma unroll
    for (int tt = 0; tt < TRSV_ROWS; tt++) {
      const int h = tt / 32;
      T yt[COLS];
#pragma unroll
      for (int c = 0; c < COLS; c++) yt[c] = __shfl_sync(0xffffffffu, x[h][c], tt & 31);
#pragma unroll
      for (int hh = h; hh < 2; hh++) {
        const bool below = lane + 32 * hh > tt;
        const T l = tile[lane + 32 * hh][tt];
#pragma unroll
        for (int c = 0; c < COLS; c++) {
          const T u = x[hh][c] - l * yt[c];
          x[hh][c] = below ? u : x[hh][c];
        }
      }
    }
  }
  else {
#pragma unroll
    for (int tt = TRSV_ROWS - 1; tt >= 0; tt--) {
      const int h = tt / 32;
      T yt[COLS];
#pragma unroll
      for (int c = 0; c < COLS; c++) yt[c] = __shfl_sync(0xffffffffu, x[h][c], tt & 31) * rdiag[tt];
#pragma unroll
      for (int hh = 0; hh <= h; hh++) {
        const bool above = lane + 32 * hh < tt && tt < rows;
        const T u = tile[lane + 32 * hh][tt];
#pragma unroll
        for (int c = 0; c < COLS; c++) {
          const T v = x[hh][c] - u * yt[c];
          x[hh][c] = above ? v : x[hh][c];
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; h++)   /* the products the steps broadcast */
#pragma unroll
      for (int c = 0; c < COLS; c++) x[h][c] *= rdiag[lane + 32 * h];
  }
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int c = 0; c < COLS; c++) {
      const int r = lane + 32 * h;
      if (r < rows && c < kc) X[(size_t)(i0 + r) * k + (c0 + c)] = x[h][c];
    }
  __threadfence();   /* every lane's rows, before lane 0 publishes them */
  __syncwarp();
  if (lane != 0) return;
  if (t < nblk - 1) culua_st_release(done, (unsigned)t + 1);
  else {   /* the group's last: every other block has read `done` for the last time */
    *ticket = 0;
    *done = 0;
  }
}

/* }====================================================== */


/* {====================================================== the seed's kernels */

/*
** The seed keeps the transpose of the augmented matrix [A | B]: ABT is
** (n + k) x n, ABT[c*n + r] = AB[r][c], so that a column of AB (the pivot
** search, the elimination) is contiguous. Two modes: `lu` (eliminate the rows
** below the pivot and keep the multipliers: getrf's unblocked algorithm) and
** Gauss-Jordan (lu = 0: eliminate every other row, as the seed's CPU loop
** does, so that the solution is the right-hand columns over the diagonal).
*/

/* out (cols x rows) = transpose of in (rows x cols), through 32 x 32 tiles */
template <typename T>
__device__ void transpose (int rows, int cols, const T *in, long long inoff, int ldin,
                           T *out, long long outoff, int ldout) {
  __shared__ T tile[32][33];
  in += inoff;
  out += outoff;
  int r0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[(size_t)r * ldin + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    int c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[(size_t)c * ldout + r] = tile[threadIdx.x][i];
  }
}


/*
** findPivotRowAndMultipliers, one block: the pivot of column p among rows
** p..n-1, then the multipliers of the rows to eliminate as they will be
** once rows p and the pivot's are swapped (mult[p] = 0: the pivot row stays).
** ABT holds the columns c0.. of AB (all of them: c0 = 0; a GPU's share of
** them when several GPUs split the columns, as the seed's P2P program does).
*/
template <typename T>
__device__ void seed_pivot (int n, int c0, int p, int lu, const T *ABT, int *ipiv, T *mult, int *status) {
  __shared__ double sv[32];
  __shared__ int si[32];
  __shared__ int spiv;
  const T *col = ABT + (size_t)(p - c0) * n;
  double best = -1.0;
  int bi = n;
  for (int r = p + threadIdx.x; r < n; r += blockDim.x) {
    double m = magnitude(col[r]);
    if (better(m, r, best, bi)) { best = m; bi = r; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    double v = __shfl_down_sync(0xffffffffu, best, o);
    int i = __shfl_down_sync(0xffffffffu, bi, o);
    if (better(v, i, best, bi)) { best = v; bi = i; }
  }
  if ((threadIdx.x & 31) == 0) { sv[threadIdx.x >> 5] = best; si[threadIdx.x >> 5] = bi; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
      if (better(sv[w], si[w], best, bi)) { best = sv[w]; bi = si[w]; }
    if (bi >= n) bi = p;
    ipiv[p] = bi + 1;
    note_pivot(status, p, col[bi]);
    spiv = bi;
  }
  __syncthreads();
  int piv = spiv;
  T pv = col[piv];
  bool usable = pv != T(0) && isfinite((double)pv);
  for (int r = (lu ? p + 1 : 0) + threadIdx.x; r < n; r += blockDim.x) {
    int src = r == p ? piv : r == piv ? p : r;
    mult[r] = (r == p || !usable) ? T(0) : col[src] / pv;
  }
}


/* extractPivotRow: swap rows p and ipiv[p]-1 of AB (a thread a column) and keep the new row p */
template <typename T>
__device__ void seed_extract (int n, int ncols, int p, const int *ipiv, T *ABT, T *prow) {
  int piv = ipiv[p] - 1;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < ncols; c += gridDim.x * blockDim.x) {
    T *col = ABT + (size_t)c * n;
    T a = col[p], b = col[piv];
    col[p] = b;
    col[piv] = a;
    prow[c] = b;
  }
}


/*
** rowElimination: row r -= mult[r] * pivot row, on columns p.. (column p takes
** the multiplier, or 0). ABT holds ncols columns of AB from column c0 on (prow
** too: its element c is column c0 + c); only those from p on change.
*/
template <typename T>
__device__ void seed_eliminate (int n, int ncols, int c0, int p, int lu, T *ABT, const T *mult, const T *prow) {
  int r = (lu ? p + 1 : 0) + blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n || r == p) return;
  T m = mult[r];
  for (int c = max(p - c0, 0) + blockIdx.y; c < ncols; c += gridDim.y) {
    T *e = ABT + (size_t)c * n + r;
    if (c + c0 == p) *e = lu ? m : T(0);
    else *e -= m * prow[c];
  }
}


/* X (n x k) = the right-hand columns of the reduced ABT over its diagonal */
template <typename T>
__device__ void seed_divide (int n, int k, const T *ABT, T *X) {
  long long total = (long long)n * k;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    int r = (int)(e / k), j = (int)(e % k);
    X[e] = ABT[(size_t)(n + j) * n + r] / ABT[(size_t)r * n + r];
  }
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_SOLVE(t, T) \
  extern "C" __global__ void culua_solve_check_##t (long long count, const T *x, int *status) \
  { check_finite<T>(count, x, status); } \
  extern "C" __global__ void culua_solve_absmax_##t (int n, const T *X, int upper, unsigned long long *out) \
  { absmax<T>(n, X, upper, out); } \
  extern "C" __global__ void __launch_bounds__(256) culua_solve_panel_##t (int n, int j0, int jb, int ju, int search, \
      T *A, int ld, int coff, int *ipiv, int *status, double *part, unsigned *counter) \
  { panel<T>(n, j0, jb, ju, search, A, ld, coff, ipiv, status, part, counter); } \
  extern "C" __global__ void __launch_bounds__(PANEL_WARPS * 32) culua_solve_panel_fused_##t (int n, int j0, int jb, \
      T *A, int ld, int coff, int *ipiv, int *status, double *part, unsigned *bar) \
  { panel_fused<T, false>(n, j0, jb, A, ld, coff, ipiv, status, part, bar, 0); } \
  extern "C" __global__ void __launch_bounds__(PANEL_WARPS * 32) culua_solve_panel_fused_kept_##t (int n, int j0, \
      int jb, T *A, int ld, int coff, int *ipiv, int *status, double *part, unsigned *bar, int rows) \
  { panel_fused<T, true>(n, j0, jb, A, ld, coff, ipiv, status, part, bar, rows); } \
  extern "C" __global__ void __launch_bounds__(CPANEL_THREADS) culua_solve_panel_cluster_##t (int n, int j0, int jb, \
      T *A, int ld, int coff, int *ipiv, int *status, int ks) \
  { panel_cluster<T>(n, j0, jb, A, ld, coff, ipiv, status, ks); } \
  extern "C" __global__ void culua_solve_cyclic_##t (int n, int rows, int nb, int shares, int share, int nloc, int c0, \
      int w, T *A, T *X, int back) \
  { cyclic<T>(n, rows, nb, shares, share, nloc, c0, w, A, X, back); } \
  extern "C" __global__ void culua_solve_panel_pack_##t (int n, int j0, int jb, const T *A, long long aoff, int ld, \
      const int *ipiv, T *buf) \
  { panel_pack<T>(n, j0, jb, A, aoff, ld, ipiv, buf); } \
  extern "C" __global__ void culua_solve_panel_pivots_##t (int j0, int jb, const T *buf, int *ipiv) \
  { panel_pivots<T>(j0, jb, buf, ipiv); } \
  extern "C" __global__ void __launch_bounds__(SWAP_THREADS) culua_solve_laswp_##t (int ncols, int ld, int skip_lo, int skip_hi, int i0, int i1, \
      const int *ipiv, T *X) \
  { laswp<T>(ncols, ld, skip_lo, skip_hi, i0, i1, ipiv, X); } \
  extern "C" __global__ void culua_solve_gather_##t (int n, int k, const int *perm, const T *B, T *W) \
  { gather<T>(n, k, perm, B, W); } \
  extern "C" __global__ void culua_solve_copy_##t (long long count, const T *src, T *dst) \
  { copy<T>(count, src, dst); } \
  extern "C" __global__ void culua_solve_copy2d_##t (int rows, int cols, const T *in, long long inoff, int ldin, \
      T *out, long long outoff, int ldout) \
  { copy2d<T>(rows, cols, in, inoff, ldin, out, outoff, ldout); } \
  extern "C" __global__ void culua_solve_eye_##t (int n, T *out) \
  { eye<T>(n, out); } \
  extern "C" __global__ void __launch_bounds__(256) culua_solve_trsm_lower_##t (int jb, int ncols, const T *Tr, \
      long long toff, int ldt, T *X, long long xoff, int ldx) \
  { trsm<T, false>(jb, ncols, Tr, toff, ldt, X, xoff, ldx); } \
  extern "C" __global__ void __launch_bounds__(256) culua_solve_trsm_upper_##t (int jb, int ncols, const T *Tr, \
      long long toff, int ldt, T *X, long long xoff, int ldx) \
  { trsm<T, true>(jb, ncols, Tr, toff, ldt, X, xoff, ldx); } \
  extern "C" __global__ void __launch_bounds__(256) culua_solve_update_narrow_##t (int m, int nc, int kb, \
      const T *L, long long loff, int ldl, const T *U, long long uoff, int ldu, T *C, long long coff, int ldc) \
  { update_narrow<T>(m, nc, kb, L, loff, ldl, U, uoff, ldu, C, coff, ldc); } \
  extern "C" __global__ void __launch_bounds__(256, 2) culua_solve_narrow_step_##t (int n, int i0, int kb, const T *L, \
      long long loff, int ldl, int c0, int nc, T *A, int ld, const int *ipiv, T *held, unsigned *ticket) \
  { narrow_step<T>(n, i0, kb, L, loff, ldl, c0, nc, A, ld, ipiv, held, ticket); } \
  extern "C" __global__ void __launch_bounds__(TRSV_THREADS, 2) culua_solve_trsv_lower_##t (int n, int k, const T *LU, \
      T *X, unsigned *sync) \
  { trsv<T, false, TRSV_COLS>(n, k, LU, X, sync); } \
  extern "C" __global__ void __launch_bounds__(TRSV_THREADS, 2) culua_solve_trsv_upper_##t (int n, int k, const T *LU, \
      T *X, unsigned *sync) \
  { trsv<T, true, TRSV_COLS>(n, k, LU, X, sync); } \
  extern "C" __global__ void __launch_bounds__(TRSV_THREADS, 3) culua_solve_trsv1_lower_##t (int n, int k, const T *LU, \
      T *X, unsigned *sync) \
  { trsv<T, false, 1>(n, k, LU, X, sync); } \
  extern "C" __global__ void __launch_bounds__(TRSV_THREADS, 3) culua_solve_trsv1_upper_##t (int n, int k, const T *LU, \
      T *X, unsigned *sync) \
  { trsv<T, true, 1>(n, k, LU, X, sync); } \
  extern "C" __global__ void culua_solve_transpose_##t (int rows, int cols, const T *in, long long inoff, int ldin, \
      T *out, long long outoff, int ldout) \
  { transpose<T>(rows, cols, in, inoff, ldin, out, outoff, ldout); } \
  extern "C" __global__ void culua_solve_seed_pivot_##t (int n, int c0, int p, int lu, const T *ABT, int *ipiv, T *mult, \
      int *status) \
  { seed_pivot<T>(n, c0, p, lu, ABT, ipiv, mult, status); } \
  extern "C" __global__ void culua_solve_seed_extract_##t (int n, int ncols, int p, const int *ipiv, T *ABT, T *prow) \
  { seed_extract<T>(n, ncols, p, ipiv, ABT, prow); } \
  extern "C" __global__ void culua_solve_seed_eliminate_##t (int n, int ncols, int c0, int p, int lu, T *ABT, \
      const T *mult, const T *prow) \
  { seed_eliminate<T>(n, ncols, c0, p, lu, ABT, mult, prow); } \
  extern "C" __global__ void culua_solve_seed_divide_##t (int n, int k, const T *ABT, T *X) \
  { seed_divide<T>(n, k, ABT, X); }

CULUA_SOLVE(f32, float)
CULUA_SOLVE(f64, double)

extern "C" __global__ void culua_solve_permutation (int n, const int *ipiv, int *perm, int shared)
{ permutation(n, ipiv, perm, shared); }


/* }====================================================== */
