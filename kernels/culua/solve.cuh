/*
** culua/solve.cuh
** What the solve family's kernel files share (kernels/solve.cu, lu.cu,
** lu_panel.cu, lu_multi.cu, triangular.cu, seed.cu): the numbers that
** lua/catalog/solve_common.lua reads too, and the pivot search's pieces.
**
** The numbers are the only copy: the Lua side reads them from this text at
** load time (core.constants), so each is a constexpr int of an integer, or
** of + - * / and parentheses over the ones above it, on one line. They live
** in namespace culua::solve; the kernel files say `using namespace
** culua::solve`.
*/

#ifndef culua_solve_cuh
#define culua_solve_cuh

namespace culua {
namespace solve {

/* {====================================================== shapes that Lua launches */

constexpr int MAXBLOCK = 128;                  /* the widest panel (a lane keeps 4 of its columns) */

/* the fused panel (lu_panel.cu): 256 threads, a warp a row; a block's candidate in
   `part` is a slot of doubles: magnitude, row, its panel values */
constexpr int PANEL_WARPS = 8;
constexpr int PANEL_THREADS = PANEL_WARPS * 32;
constexpr int PANEL_SLOT = 2 + MAXBLOCK;

/* the column panel (lu_panel.cu, panel = "columns"): its blocks, a warp a row */
constexpr int COLUMNS_THREADS = 256;
constexpr int COLUMNS_WARPS = COLUMNS_THREADS / 32;

/* the cluster panel (lu_panel.cu): its blocks, the largest cluster (non-portable; 8
   is portable), and a row in shared memory: jb values rounded up to CPANEL_ALIGN,
   then CPANEL_PAD bytes more (lu_panel.cu says why) */
constexpr int CPANEL_THREADS = 512;
constexpr int CLUSTER_MAX = 16;
constexpr int CPANEL_ALIGN = 4;
constexpr int CPANEL_PAD = 16;

/* laswp (lu.cu): its blocks, and the bytes of a row a block moves a turn */
constexpr int SWAP_THREADS = 256;
constexpr int SWAP_BYTES = 128;

/* block_row (lu.cu): its blocks and the bytes of a row a block takes (its columns of the
   block row); row_plan's words a plan: the count, then SWAP_PLAN_MAX destinations and as
   many sources */
constexpr int BROW_THREADS = 256;
constexpr int BROW_BYTES = 256;
constexpr int SWAP_PLAN_MAX = 2 * MAXBLOCK;
constexpr int SWAP_PLAN_WORDS = 1 + 2 * SWAP_PLAN_MAX;

/* update_narrow (lu.cu): a block's tile of C (UPDATE_TILE x UPDATE_TILE, a thread 4 x 4
   of it) and its threads */
constexpr int UPDATE_TILE = 64;
constexpr int UPDATE_THREADS = 256;

/* narrow_step (lu.cu): rows a block below the panel, columns a block (a column group,
   a ticket each), its threads, and U's row stride in shared memory (a warp's 4 rows x 8
   columns on distinct banks) */
constexpr int NSTEP_ROWS = 64;
constexpr int NSTEP_COLS = 64;
constexpr int NSTEP_THREADS = 256;
constexpr int NSTEP_US = 72;

/* the substitutions (triangular.cu): rows a block of threads, its warps, right-hand
   sides a column group (one for k = 1), words of `sync` a group (the ticket, then
   `done`) */
constexpr int TRSV_ROWS = 64;
constexpr int TRSV_WARPS = 8;
constexpr int TRSV_THREADS = TRSV_WARPS * 32;
constexpr int TRSV_COLS = 4;
constexpr int TRSV_SYNC = 32;

/* trsm (triangular.cu): a block's columns of X, and its rows of threads (a thread a
   column, TRSM_ROWS rows sharing the updates) */
constexpr int TRSM_COLS = 32;
constexpr int TRSM_ROWS = 8;
constexpr int TRSM_THREADS = TRSM_COLS * TRSM_ROWS;
constexpr int TRSM_BATCH = 16;                 /* the triangle's loads a thread has in flight */

/* bstep (triangular.cu): the solve over ranks' step, a warp a right-hand side (at most
   BSTEP_COLS: more go to trsm and matmul), then a warp BSTEP_ROWS rows of the block
   column at a time */
constexpr int BSTEP_COLS = 8;
constexpr int BSTEP_THREADS = 512;
constexpr int BSTEP_ROWS = 4;

/* lu_solve's permutation (triangular.cu) and the seed's pivot search (seed.cu): one
   block of these threads (the pivot's warps meet in SEED_PIVOT_THREADS / 32 slots) */
constexpr int PERM_THREADS = 1024;
constexpr int SEED_PIVOT_THREADS = 1024;

/* transpose (seed.cu): TRANSPOSE_TILE x TRANSPOSE_TILE tiles, TRANSPOSE_ROWS rows of
   threads a block */
constexpr int TRANSPOSE_TILE = 32;
constexpr int TRANSPOSE_ROWS = 8;

/* }====================================================== */


/* {====================================================== the pivot search */

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

/* }====================================================== */

}  /* namespace solve */
}  /* namespace culua */

#endif
