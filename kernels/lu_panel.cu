/*
** lu_panel.cu
** The solve family's panel factorizations (kernels/solve.cu says what the
** family's files hold): the panel of columns [j0, j0 + jb) of LU, with
** partial pivoting, in one thread-block cluster (its rows in the blocks'
** shared memory), in one cooperative launch, or a launch a column. A panel
** lies in A or in one GPU's share of its columns (a leading dimension and a
** column offset). The cluster panel is on lu's chain of launches on the
** panels' stream (kernels/lu.cu: programmatic dependent launches).
*/

#include <culua/common.cuh>
#include <culua/solve.cuh>
#include <culua/barrier.cuh>

using namespace culua::solve;


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
#define CPANEL_WARPS (CPANEL_THREADS / 32)

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
  const int jbs = (jb + CPANEL_ALIGN - 1) & ~(CPANEL_ALIGN - 1), jst = jbs + CPANEL_PAD / (int)sizeof(T);
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


/* {====================================================== instances */

#define CULUA_SOLVE_PANEL(t, T) \
  extern "C" __global__ void __launch_bounds__(COLUMNS_THREADS) culua_solve_panel_##t (int n, int j0, int jb, int ju, int search, \
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
  { panel_cluster<T>(n, j0, jb, A, ld, coff, ipiv, status, ks); }

CULUA_SOLVE_PANEL(f32, float)
CULUA_SOLVE_PANEL(f64, double)


/* }====================================================== */
