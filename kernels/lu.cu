/*
** lu.cu
** LU on one GPU, less its panels (kernels/lu_panel.cu) and its triangular
** solves (kernels/triangular.cu): the row swaps of a panel's pivots (laswp),
** or the swaps and the block row of U in one launch (row_plan, block_row),
** the look-ahead's step between panels in one launch (narrow_step) or its
** update alone (update_narrow), and the pieces of trsm as a product (the
** identity, a copy aside). The several-GPU LU (lua/catalog/lu_multi.lua)
** takes them too, on its shares' columns. kernels/solve.cu says what the
** family's files hold.
**
** Programmatic dependent launches: lu's chain of launches on the panels'
** stream (the cluster panel, row_plan, narrow_step, laswp) may be launched with
** `programmatic = true` (culua_dep_wait and culua_dep_release in
** culua/common.cuh), so that a kernel's blocks are scheduled while the one
** before it finishes, not after: each launch boundary on the chain then
** costs less than a launch's latency.
*/

#include <culua/common.cuh>
#include <culua/solve.cuh>

using namespace culua::solve;


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
** The composition is worked out by every thread at once (swap_sources), not
** replayed swap by swap in one thread, which cost float32 lu 1-2% at n = 8192
** and 16384 (bench/RESULTS.md, session 39).
*/
#define SWAP_MAX 128
#define SWAP_COLS(T) (SWAP_BYTES / (int)sizeof(T))   /* a block's columns in a turn: 128 bytes a row */

/*
** Where the rows of swaps i0.., of pivots piv[0..w) (0-based, piv[t] >=
** i0 + t, as a panel finds them), take their values from, worked out by
** every thread at once. Once swap t is done, row i0 + t never moves again,
** so it ends with what row piv[t] held before swap t: row piv[t] itself,
** unless an earlier swap s had the same pivot (same[t]: the last such s), in
** which case g(s), what row i0 + s held before swap s. And g(s) is row i0 + s
** itself, unless an earlier swap s' had pivot i0 + s (onto[s]: the last such
** s'): then g(s'). So top[t], the row whose values row i0 + t takes, is
** g(same[t]), or piv[t] itself. A row below the top ends with g(t) of the
** last swap t with it as pivot. (laswp and row_plan by swap_compose,
** narrow_step itself.)
*/
__device__ void swap_sources (int i0, int w, const int *piv, int *same, int *onto, int *g, int *top) {
  for (int t = threadIdx.x; t < w; t += blockDim.x) {   /* the last earlier swaps with t's pivot, and onto row i0 + t */
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
  for (int t = threadIdx.x; t < w; t += blockDim.x) {   /* g(t): down the chain of onto (each step a smaller t) */
    int v = t;
    while (onto[v] >= 0) v = onto[v];
    g[t] = i0 + v;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < w; t += blockDim.x) top[t] = same[t] >= 0 ? g[same[t]] : piv[t];
  __syncthreads();
}

/* whether swap t is the last of piv[0..w) with pivot p */
__device__ __forceinline__ bool last_swap (int t, int w, const int *piv, int p) {
  for (int s = t + 1; s < w; s++) if (piv[s] == p) return false;
  return true;
}

struct swap_plan {
  int piv[SWAP_MAX], same[SWAP_MAX], onto[SWAP_MAX], g[SWAP_MAX], top[SWAP_MAX];
  int dst[2 * SWAP_MAX], src[2 * SWAP_MAX];
  int count;
};

/* the rows swaps i0..i1-1 (i1 - i0 <= SWAP_MAX) move: count pairs (dst, src) */
__device__ void swap_compose (int i0, int i1, const int *ipiv, swap_plan &sp) {
  const int w = i1 - i0, tid = threadIdx.x;
  for (int t = tid; t < w; t += blockDim.x) sp.piv[t] = ipiv[i0 + t] - 1;
  if (tid == 0) sp.count = 0;
  __syncthreads();
  swap_sources(i0, w, sp.piv, sp.same, sp.onto, sp.g, sp.top);
  for (int t = tid; t < w; t += blockDim.x) {
    const int p = sp.piv[t];
    if (sp.top[t] != i0 + t) {
      const int e = atomicAdd(&sp.count, 1);
      sp.dst[e] = i0 + t; sp.src[e] = sp.top[t];
    }
    /* a row outside the top takes g(t) of its last swap */
    if ((p < i0 || p >= i1) && sp.g[t] != p && last_swap(t, w, sp.piv, p)) {
      const int e = atomicAdd(&sp.count, 1);
      sp.dst[e] = p; sp.src[e] = sp.g[t];
    }
  }
  __syncthreads();
}

/* column t of those outside [skip_lo, skip_hi), in order (laswp's, block_row's) */
__device__ __forceinline__ int unskipped (int t, int skip_lo, int skip_hi) {
  return t < skip_lo ? t : t + (skip_hi - skip_lo);
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
      const int c = unskipped(t, skip_lo, skip_hi);
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

/*
** The plan of the swaps of pivots i0..i0+kb-1 (kb <= MAXBLOCK) for
** block_row: count, then SWAP_PLAN_MAX destinations, then as many sources.
** Made once on the panels' stream, a block, rather than by each of
** block_row's blocks.
*/
static_assert(MAXBLOCK <= SWAP_MAX, "a panel's swaps are composed in one turn");
static_assert(SWAP_PLAN_MAX == 2 * SWAP_MAX, "a plan holds swap_plan's pairs");

__device__ void row_plan (int i0, int kb, const int *ipiv, int *plan) {
  __shared__ swap_plan sp;
  culua_dep_wait();      /* the panel's pivots */
  culua_dep_release();
  swap_compose(i0, i0 + kb, ipiv, sp);
  const int count = sp.count;
  for (int e = threadIdx.x; e < count; e += blockDim.x) {
    plan[1 + e] = sp.dst[e];
    plan[1 + SWAP_PLAN_MAX + e] = sp.src[e];
  }
  if (threadIdx.x == 0) plan[0] = count;
}

/*
** The block row of a step in one launch: the swaps of pivots i0..i0+kb-1 on
** X's columns but [skip_lo, skip_hi) (as laswp), and on those from `from` on
** the block row of U too: the top kb rows (i0..) solved with the panel's
** unit lower triangle (at L + loff, a row every ldl), as trsm does it. As
** laswp and then trsm these took 92.4 ms of float32 LU's 762 at n = 32768 on
** an H200, beside the panels: two passes over the block row, and the
** triangle loaded again by each block of 32 columns (bench/RESULTS.md,
** session 37).
**
** A block takes BROW_BYTES of each row (W columns, in the columns' order
** outside the skip). Every load of its columns comes before any store (a
** row that a top row takes may itself take another's): the rows that go
** below the top (the plan's pairs with a destination outside; their sources
** are top rows, which only ever trade with rows outside: at most kb, in
** registers), and the top rows as they end (in shared memory, R). Then the
** rows below are stored, and the top rows solved in R, each value
** x_i -= L_ik x_k for k ascending, one FMA each, as trsm's kernel and
** narrow_step do: the factors are the same bits whichever solves a block
** row (t/030 compares the panels' pivots, t/031 and t/042 the several GPUs'
** factors with one GPU's). A strip wholly left of `from` (L's columns)
** stores only the top rows that changed.
*/
template <typename T>
__device__ void block_row (int ncols, int ld, int skip_lo, int skip_hi, int from, int i0, int kb,
                           const int *plan, const T *L, long long loff, int ldl, T *X) {
  constexpr int W = BROW_BYTES / (int)sizeof(T), RT = BROW_THREADS / W;
  constexpr int ROWS = MAXBLOCK / RT;              /* a thread's most values of the top rows, or of rows going below */
  static_assert(BROW_THREADS % W == 0 && MAXBLOCK % RT == 0, "block_row's shape");
  extern __shared__ __align__(16) unsigned char brow_shared[];
  T *R = reinterpret_cast<T *>(brow_shared);      /* MAXBLOCK x W: the top rows, swapped */
  T *Lt = R + MAXBLOCK * W;                        /* kb x kb: the triangle */
  __shared__ int top[MAXBLOCK], dst[MAXBLOCK], src[MAXBLOCK];
  __shared__ int nout;
  const int tid = threadIdx.x, x = tid % W, y = tid / W;
  const int width = ncols - (skip_hi - skip_lo);
  const int t = blockIdx.x * W + x;
  const int c = unskipped(t, skip_lo, skip_hi);
  const bool in = t < width;
  culua_dep_wait();
  culua_dep_release();
  /* the plan: each top row's source, and the pairs that go below */
  const int count = plan[0];
  for (int q = tid; q < kb; q += BROW_THREADS) top[q] = i0 + q;
  if (tid == 0) nout = 0;
  __syncthreads();
  for (int e = tid; e < count; e += BROW_THREADS) {
    const int d = plan[1 + e], s = plan[1 + SWAP_PLAN_MAX + e];
    if (d >= i0 && d < i0 + kb) top[d - i0] = s;
    else {
      const int o = atomicAdd(&nout, 1);
      dst[o] = d; src[o] = s;
    }
  }
  __syncthreads();
  const int below = nout;
  T v[ROWS], w[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; j++) {
    const int q = y + j * RT;
    v[j] = in && q < below ? X[(size_t)src[q] * ld + c] : T(0);
    w[j] = in && q < kb ? X[(size_t)top[q] * ld + c] : T(0);
  }
#pragma unroll
  for (int j = 0; j < ROWS; j++) R[(y + j * RT) * W + x] = w[j];
  /* the strip's last column: whether it reaches `from` */
  const int tl = min(blockIdx.x * W + W, width) - 1;
  const bool solve = unskipped(tl, skip_lo, skip_hi) >= from;
  if (solve) {
    L += loff;
    for (int e = tid; e < kb * kb; e += BROW_THREADS) {
      const int i = e / kb, k = e - i * kb;
      if (k < i) Lt[e] = L[(size_t)i * ldl + k];
    }
  }
  __syncthreads();   /* every load before any store */
#pragma unroll
  for (int j = 0; j < ROWS; j++) {
    const int q = y + j * RT;
    if (in && q < below) X[(size_t)dst[q] * ld + c] = v[j];
  }
  if (solve) {
    const bool mine = in && c >= from;
    for (int k = 0; k < kb - 1; k++) {
      const T xk = R[k * W + x];
      if (mine)
        for (int i = k + 1 + y; i < kb; i += RT) R[i * W + x] -= Lt[i * kb + k] * xk;
      __syncthreads();
    }
  }
  for (int q = y; q < kb; q += RT)
    if (in && (c >= from || top[q] != i0 + q)) X[(size_t)(i0 + q) * ld + c] = R[q * W + x];
}

/* }====================================================== */


/* {====================================================== the look-ahead's step */

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
  __shared__ T ls[UPD_K][UPDATE_TILE + 1], us[UPD_K][UPDATE_TILE];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int r0 = blockIdx.x * UPDATE_TILE, c0 = blockIdx.y * UPDATE_TILE;
  L += loff; U += uoff; C += coff;
  T acc[4][4] = {};
  for (int k0 = 0; k0 < kb; k0 += UPD_K) {
    for (int e = threadIdx.x; e < UPDATE_TILE * UPD_K; e += UPDATE_THREADS) {
      const int r = e / UPD_K, k = e % UPD_K;     /* L: a row's UPD_K values together */
      ls[k][r] = r0 + r < m && k0 + k < kb ? L[(size_t)(r0 + r) * ldl + k0 + k] : T(0);
      const int uk = e / UPDATE_TILE, uc = e % UPDATE_TILE;   /* U: a row's columns together */
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
** (blockIdx.y), and works out the swaps (swap_sources) and its columns' U
** itself, from the rows as they were at launch.
**
** So no block may write what another still reads: a top row, or a row below
** whose values go up (held: its block leaves its update in `held`, at the
** slot of the top row it goes to). The last block of a column group to finish
** (a ticket) writes both: U into the top rows, the held rows into their
** places; it leaves its ticket at zero for the next launch.
*/

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
  const int cb = c0 + blockIdx.y * NSTEP_COLS, w = min(NSTEP_COLS, c0 + nc - cb);
  const int tx = tid % 16, ty = tid / 16;   /* the update's 4 x 4 of the tile: rows ty + 16 i, columns tx + 16 j */

  culua_dep_wait();
  /* the loads that need no swaps first, in flight while the swaps are worked out */
  for (int t = tid; t < kb; t += NSTEP_THREADS) piv[t] = ipiv[i0 + t] - 1;
#pragma unroll 8
  for (int e = tid; e < kb * kb; e += NSTEP_THREADS) {
    const int i = e / kb, k = e % kb;
    tri[k * ts + i] = k < i ? L[loff + (size_t)i * ldl + k] : T(0);
  }
  /* chunk k0 of this block's rows of L21: UPD_K columns, a thread NSTEP_ROWS * UPD_K / 256 values */
  auto lchunk = [&](int k0, T (&v)[NSTEP_ROWS * UPD_K / NSTEP_THREADS]) {
#pragma unroll
    for (int u = 0; u < NSTEP_ROWS * UPD_K / NSTEP_THREADS; u++) {
      const int e = tid + NSTEP_THREADS * u, r = e / UPD_K, k = e % UPD_K;
      v[u] = r0 + r < n && k0 + k < kb ? L[loff + (size_t)(r0 + r - i0) * ldl + k0 + k] : T(0);
    }
  };
  T lpre[NSTEP_ROWS * UPD_K / NSTEP_THREADS];
  lchunk(0, lpre);
  for (int q = tid; q < NSTEP_ROWS; q += NSTEP_THREADS) { mine[q] = r0 + q; slot[q] = -1; }
  __syncthreads();
  swap_sources(i0, kb, piv, same, onto, g, top);
  for (int t = tid; t < kb; t += NSTEP_THREADS) {
    const int p = piv[t], src = top[t];
    if (src >= r0 && src < r0 + NSTEP_ROWS) slot[src - r0] = t;
    if (p >= r0 && p < r0 + NSTEP_ROWS && last_swap(t, kb, piv, p)) mine[p - r0] = g[t];   /* p gets g(t) of its last swap */
  }
  __syncthreads();
#pragma unroll 8
  for (int e = tid; e < kb * NSTEP_COLS; e += NSTEP_THREADS) {
    const int i = e / NSTEP_COLS, c = e % NSTEP_COLS;
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
      const int c = tid % NSTEP_COLS, g4 = tid / NSTEP_COLS, kn = min(16, kb - d0);
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
    for (int u = 0; u < NSTEP_ROWS * UPD_K / NSTEP_THREADS; u++) {
      const int e = tid + NSTEP_THREADS * u, r = e / UPD_K, k = e % UPD_K;
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
  for (int e = tid; e < kb * NSTEP_COLS; e += NSTEP_THREADS) {
    const int i = e / NSTEP_COLS, c = e % NSTEP_COLS;
    if (c >= w) continue;
    A[(size_t)(i0 + i) * ld + cb + c] = U[i * NSTEP_US + c];
    if (top[i] >= r1) A[(size_t)top[i] * ld + cb + c] = __ldcg(&held[(size_t)i * nc + (cb - c0) + c]);
  }
  if (tid == 0) ticket[blockIdx.y] = 0;
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_SOLVE_LU(t, T) \
  extern "C" __global__ void __launch_bounds__(SWAP_THREADS) culua_solve_laswp_##t (int ncols, int ld, int skip_lo, int skip_hi, int i0, int i1, \
      const int *ipiv, T *X) \
  { laswp<T>(ncols, ld, skip_lo, skip_hi, i0, i1, ipiv, X); } \
  extern "C" __global__ void __launch_bounds__(BROW_THREADS) culua_solve_block_row_##t (int ncols, int ld, int skip_lo, \
      int skip_hi, int from, int i0, int kb, const int *plan, const T *L, long long loff, int ldl, T *X) \
  { block_row<T>(ncols, ld, skip_lo, skip_hi, from, i0, kb, plan, L, loff, ldl, X); } \
  extern "C" __global__ void culua_solve_copy2d_##t (int rows, int cols, const T *in, long long inoff, int ldin, \
      T *out, long long outoff, int ldout) \
  { copy2d<T>(rows, cols, in, inoff, ldin, out, outoff, ldout); } \
  extern "C" __global__ void culua_solve_eye_##t (int n, T *out) \
  { eye<T>(n, out); } \
  extern "C" __global__ void __launch_bounds__(UPDATE_THREADS) culua_solve_update_narrow_##t (int m, int nc, int kb, \
      const T *L, long long loff, int ldl, const T *U, long long uoff, int ldu, T *C, long long coff, int ldc) \
  { update_narrow<T>(m, nc, kb, L, loff, ldl, U, uoff, ldu, C, coff, ldc); } \
  extern "C" __global__ void __launch_bounds__(NSTEP_THREADS, 2) culua_solve_narrow_step_##t (int n, int i0, int kb, const T *L, \
      long long loff, int ldl, int c0, int nc, T *A, int ld, const int *ipiv, T *held, unsigned *ticket) \
  { narrow_step<T>(n, i0, kb, L, loff, ldl, c0, nc, A, ld, ipiv, held, ticket); }

CULUA_SOLVE_LU(f32, float)
CULUA_SOLVE_LU(f64, double)

extern "C" __global__ void culua_solve_row_plan (int i0, int kb, const int *ipiv, int *plan)
{ row_plan(i0, kb, ipiv, plan); }


/* }====================================================== */
