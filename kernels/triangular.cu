/*
** triangular.cu
** The solve family's triangular solves: trsm, a block row of U (LU's) or of
** lu_solve's blocked substitutions; the substitutions of lu_solve for a few
** right-hand sides, one launch a triangle; lu_solve's permutation of the
** right-hand sides; and the solve over ranks' step for a few right-hand sides, a
** block's triangle and its block column in one launch (lua/catalog/triangular.lua). kernels/solve.cu says what
** the family's files hold.
*/

#include <culua/common.cuh>
#include <culua/barrier.cuh>
#include <culua/solve.cuh>

using namespace culua::solve;


/* {====================================================== triangular solves */

/*
** X (jb x ncols, leading dimension ldx) = inv(Tr) * X for the jb x jb
** triangle Tr (leading dimension ldt): unit lower (UPPER false, forward) or
** upper with its diagonal (UPPER true, backward). A block takes 32 columns
** into shared memory; 8 rows of threads share the updates below (above)
** each solved row. The triangle comes into shared memory first (the launch
** gives jb x jbp elements of it): read from A at each step, its loads were the
** chain (23 us for a 64 x 8128 block row on an H100).
*/
template <typename T, bool UPPER>
__device__ void trsm (int jb, int ncols, const T *Tr, long long toff, int ldt, T *X, long long xoff, int ldx) {
  __shared__ T xs[MAXBLOCK][TRSM_COLS + 1];
  extern __shared__ __align__(16) unsigned char trsm_tri[];
  /* ts[k * jbp + (i ^ (k & 31))] = Tr(i, k): column k contiguous, its rows' order turned
     within each 32 by k so that the stores of a row (32 k's) fall in 32 banks, not one.
     The turn keeps a row within its 32, below jbp (jb to a multiple of 32; the launch
     gives jb * jbp elements) */
  T *ts = reinterpret_cast<T *>(trsm_tri);
  const int jbp = (jb + 31) & ~31;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TRSM_COLS + tx;
  const int c = blockIdx.x * TRSM_COLS + tx;
  const bool in = c < ncols;
  Tr += toff;
  X += xoff;
  for (int e0 = 0; e0 < jb * jb; e0 += TRSM_THREADS * TRSM_BATCH) {   /* TRSM_BATCH loads in flight */
    T v[TRSM_BATCH];
#pragma unroll
    for (int u = 0; u < TRSM_BATCH; u++) {
      const int e = e0 + u * TRSM_THREADS + tid, i = e / jb, k = e - i * jb;
      v[u] = e < jb * jb ? Tr[(size_t)i * ldt + k] : T(0);
    }
#pragma unroll
    for (int u = 0; u < TRSM_BATCH; u++) {
      const int e = e0 + u * TRSM_THREADS + tid, i = e / jb, k = e - i * jb;
      if (e < jb * jb) ts[k * jbp + (i ^ (k & 31))] = v[u];
    }
  }
  for (int i = ty; i < jb; i += TRSM_ROWS) xs[i][tx] = in ? X[(size_t)i * ldx + c] : T(0);
  __syncthreads();
  if (!UPPER) {
    for (int k = 0; k < jb - 1; k++) {
      T xk = xs[k][tx];
      for (int i = k + 1 + ty; i < jb; i += TRSM_ROWS) xs[i][tx] -= ts[k * jbp + (i ^ (k & 31))] * xk;
      __syncthreads();
    }
  }
  else {
    for (int k = jb - 1; k >= 0; k--) {
      if (ty == 0) xs[k][tx] /= ts[k * jbp + (k ^ (k & 31))];
      __syncthreads();
      T xk = xs[k][tx];
      for (int i = ty; i < k; i += TRSM_ROWS) xs[i][tx] -= ts[k * jbp + (i ^ (k & 31))] * xk;
      __syncthreads();
    }
  }
  if (in)
    for (int i = ty; i < jb; i += 8) X[(size_t)i * ldx + c] = xs[i][tx];
}

/* }====================================================== */


/* {====================================================== lu_solve's permutation */


/*
** perm[i] = the row of B that row i of P*B is, from the n pivots: the swaps
** replayed on an identity, by one thread (they are a chain), in shared memory
** when it fits (`shared`: the launch gave n ints of it), else in perm itself.
** The pivots come to shared memory a block's worth at a time, the next ones
** loaded by every thread while thread 0 replays these: a pivot loaded from
** global memory inside the chain would make each swap wait for it.
*/
__device__ void permutation (int n, const int *ipiv, int *perm, int shared) {
  extern __shared__ int sp[];
  __shared__ int piv[2][PERM_THREADS];
  int *w = shared ? sp : perm;
  const int tid = threadIdx.x;
  for (int i = tid; i < n; i += blockDim.x) w[i] = i;
  if (tid < n) piv[0][tid] = ipiv[tid] - 1;
  __syncthreads();
  for (int c0 = 0, b = 0; c0 < n; c0 += PERM_THREADS, b ^= 1) {
    if (c0 + PERM_THREADS + tid < n) piv[b ^ 1][tid] = ipiv[c0 + PERM_THREADS + tid] - 1;
    if (tid == 0)
      for (int j = 0, m = min(PERM_THREADS, n - c0); j < m; j++) {
        const int i = c0 + j, p = piv[b][j];
        const int a = w[i];
        w[i] = w[p];
        w[p] = a;
      }
    __syncthreads();
  }
  if (shared)
    for (int i = tid; i < n; i += blockDim.x) perm[i] = w[i];
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
#define TRSV_RPW (TRSV_ROWS / TRSV_WARPS)     /* rows a warp accumulates */
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

/*
** A step of the solve over ranks for a few right-hand sides (k <= BSTEP_COLS): the
** forward solve's, panel by panel in the factorization (lua/catalog/lu_multi.lua's
** rhs: Tr and Lb in the panel's buffer), and the backward solve's, by fan-in
** (lua/catalog/ranks.lua: in the owner's columns). In one launch: Y (jb x k, a row every k) = inv(Tr) * B
** for the jb x jb triangle at Tr (a row every ld; unit lower, or upper with its
** diagonal), then W (m x k, a row every k) -= Lb (m x jb, a row every ld) * Y,
** where Lb is the block column below (lower) or above (upper) the triangle. Every block solves the triangle itself, in shared memory (below), so
** that no launch stands between the solve and the update on the chain of steps;
** the grid is kept to a block a multiprocessor, which bounds the triangle's reads.
** Block 0 writes Y, which must not be B: a block that starts late reads B after
** block 0 has written Y. Then a warp BSTEP_ROWS rows of Lb at a time: its lanes
** split each row (reads coalesced), keep k partial sums, and a butterfly adds them.
** (trsm, above, keeps a thread a column and TRSM_ROWS rows a step: for one column
** its 127 dependent steps took 52 us a 128 x 128 triangle on an H200.)
*/
template <typename T, bool UPPER>
__device__ void bstep (int jb, int k, const T *Tr, long long toff, int ld, const T *B, long long boff, T *Y,
                       long long yoff, int m, const T *Lb, long long loff, T *W, long long woff) {
  extern __shared__ __align__(16) unsigned char bstep_tri[];
  T *ts = reinterpret_cast<T *>(bstep_tri);   /* ts[i * (jb + 1) + j] = Tr(i, j): rows padded by one */
  __shared__ T ys[MAXBLOCK * BSTEP_COLS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = BSTEP_THREADS / 32;
  Tr += toff;
  B += boff;
  Y += yoff;
  {   /* a warp RPW rows, all of a thread's loads in flight at once */
    constexpr int RPW = MAXBLOCK / (BSTEP_THREADS / 32);
    T v[RPW][MAXBLOCK / 32];
#pragma unroll
    for (int u = 0; u < RPW; u++)
#pragma unroll
      for (int h = 0; h < MAXBLOCK / 32; h++) {
        const int i = warp + u * (BSTEP_THREADS / 32), j = lane + 32 * h;
        v[u][h] = i < jb && j < jb ? Tr[(size_t)i * ld + j] : T(0);
      }
#pragma unroll
    for (int u = 0; u < RPW; u++)
#pragma unroll
      for (int h = 0; h < MAXBLOCK / 32; h++) {
        const int i = warp + u * (BSTEP_THREADS / 32), j = lane + 32 * h;
        if (i < jb && j < jb) ts[i * (jb + 1) + j] = v[u][h];
      }
    for (int e = tid; e < jb * k; e += BSTEP_THREADS) ys[e] = B[e];
  }
  __syncthreads();
  /* The triangle by diagonal blocks of 32: a warp a right-hand side solves a block's
     rows, a lane a row (its row of the block in registers, each solved value passed by
     a shuffle: 32 steps of a shuffle and a multiply-add), then every thread takes the
     block's values from the rows beyond it (below it for L, above for U). A warp alone
     through all jb steps took 25 us: its 40 instructions a step waited on each other. */
  const int nd = (jb + 31) >> 5;
  for (int s = 0; s < nd; s++) {
    const int d = UPPER ? nd - 1 - s : s;
    const int b0 = 32 * d, bn = min(32, jb - b0);
    if (warp < k) {
      const int r = b0 + lane;
      const bool in = lane < bn;
      T x = in ? ys[r * k + warp] : T(0);
      T l[32];
#pragma unroll
      for (int t = 0; t < 32; t++) l[t] = in && t < bn ? ts[r * (jb + 1) + b0 + t] : T(0);
      if (!UPPER) {
#pragma unroll
        for (int t = 0; t < 32; t++) {
          const T xt = __shfl_sync(0xffffffffu, x, t);
          if (lane > t) x -= l[t] * xt;
        }
      }
      else {
        /* (by the reciprocal, off the chain of shuffles, as lu_solve's trsv does: a
           diagonal so small that its reciprocal overflows makes inf or NaN there too) */
        const T rd = in ? T(1) / ts[r * (jb + 1) + r] : T(0);
#pragma unroll
        for (int t = 31; t >= 0; t--) {
          if (lane == t) x *= rd;
          const T xt = __shfl_sync(0xffffffffu, x, t);
          if (lane < t) x -= l[t] * xt;
        }
      }
      if (in) ys[r * k + warp] = x;
    }
    __syncthreads();
    const int r0 = UPPER ? 0 : b0 + bn, nr = UPPER ? b0 : jb - b0 - bn;
    for (int e = tid; e < nr * k; e += BSTEP_THREADS) {
      const int r = r0 + e / k, c = e - (e / k) * k;
      T acc = T(0);
      for (int t = 0; t < bn; t++) acc += ts[r * (jb + 1) + b0 + t] * ys[(b0 + t) * k + c];
      ys[r * k + c] -= acc;
    }
    __syncthreads();
  }
  if (blockIdx.x == 0)
    for (int e = tid; e < jb * k; e += BSTEP_THREADS) Y[e] = ys[e];
  Lb += loff;
  W += woff;
  /* BSTEP_ROWS rows a warp at a time, their loads issued before any sum (W's stores
     would otherwise keep the next rows' loads waiting) */
  for (int i0 = (blockIdx.x * warps + warp) * BSTEP_ROWS; i0 < m; i0 += gridDim.x * warps * BSTEP_ROWS) {
    T l[BSTEP_ROWS][MAXBLOCK / 32];
#pragma unroll
    for (int r = 0; r < BSTEP_ROWS; r++)
#pragma unroll
      for (int h = 0; h < MAXBLOCK / 32; h++) {
        const int j = lane + 32 * h;
        l[r][h] = i0 + r < m && j < jb ? Lb[(size_t)(i0 + r) * ld + j] : T(0);
      }
#pragma unroll
    for (int r = 0; r < BSTEP_ROWS; r++) {
      T acc[BSTEP_COLS];
#pragma unroll
      for (int c = 0; c < BSTEP_COLS; c++) acc[c] = T(0);
#pragma unroll
      for (int h = 0; h < MAXBLOCK / 32; h++) {
        const int j = lane + 32 * h;
#pragma unroll
        for (int c = 0; c < BSTEP_COLS; c++)
          if (c < k && j < jb) acc[c] += l[r][h] * ys[j * k + c];
      }
#pragma unroll
      for (int c = 0; c < BSTEP_COLS; c++) {
        if (c >= k) break;
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], s);
        if (lane == c && i0 + r < m) W[(size_t)(i0 + r) * k + c] -= acc[c];
      }
    }
  }
}

/* }====================================================== */


/* {====================================================== instances */

#define CULUA_SOLVE_TRIANGULAR(t, T) \
  extern "C" __global__ void __launch_bounds__(TRSM_THREADS) culua_solve_trsm_lower_##t (int jb, int ncols, const T *Tr, \
      long long toff, int ldt, T *X, long long xoff, int ldx) \
  { trsm<T, false>(jb, ncols, Tr, toff, ldt, X, xoff, ldx); } \
  extern "C" __global__ void __launch_bounds__(TRSM_THREADS) culua_solve_trsm_upper_##t (int jb, int ncols, const T *Tr, \
      long long toff, int ldt, T *X, long long xoff, int ldx) \
  { trsm<T, true>(jb, ncols, Tr, toff, ldt, X, xoff, ldx); } \
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
  extern "C" __global__ void __launch_bounds__(BSTEP_THREADS) culua_solve_bstep_lower_##t (int jb, int k, \
      const T *Tr, long long toff, int ld, const T *B, long long boff, T *Y, long long yoff, int m, const T *Lb, \
      long long loff, T *W, long long woff) \
  { bstep<T, false>(jb, k, Tr, toff, ld, B, boff, Y, yoff, m, Lb, loff, W, woff); } \
  extern "C" __global__ void __launch_bounds__(BSTEP_THREADS) culua_solve_bstep_upper_##t (int jb, int k, \
      const T *Tr, long long toff, int ld, const T *B, long long boff, T *Y, long long yoff, int m, const T *Lb, \
      long long loff, T *W, long long woff) \
  { bstep<T, true>(jb, k, Tr, toff, ld, B, boff, Y, yoff, m, Lb, loff, W, woff); } \
  extern "C" __global__ void culua_solve_gather_##t (int n, int k, const int *perm, const T *B, T *W) \
  { gather<T>(n, k, perm, B, W); }

CULUA_SOLVE_TRIANGULAR(f32, float)
CULUA_SOLVE_TRIANGULAR(f64, double)

extern "C" __global__ void culua_solve_permutation (int n, const int *ipiv, int *perm, int shared)
{ permutation(n, ipiv, perm, shared); }


/* }====================================================== */
