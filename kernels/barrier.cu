/*
** barrier.cu
** The grid-barrier family of culua's catalog: seed 001's X -> P -> X
** experiment and barrier latency loops, for each barrier of
** <culua/barrier.cuh> and for cooperative groups' grid.sync().
**
** One transform: every thread j sums all n elements of X into P[j] (scaled
** by 1/n), then, after the whole grid has written P, sums P into X[j]. With
** no grid barrier some threads read P before it is written.
**
** Each experiment kernel comes with two phases that add the same numbers in
** the same order: culua_xpx_<kind>_global reads X straight from global
** memory, as the seed's kernel does; culua_xpx_<kind> first stages it in
** shared memory. The seed's loop makes a dependent global load per element,
** and once L1 is cold (after any barrier or kernel boundary) every 128-byte
** line is a full L2 round trip. Staged, a block fetches a chunk with all its
** loads in flight at once and the sum runs from shared memory: on an H100,
** the seed's 1024-thread diagonal runs 2.2x to 4x faster.
*/

#include <cooperative_groups.h>
#include <culua/barrier.cuh>

namespace cg = cooperative_groups;

#define CULUA_XPX_CHUNK 8192   /* floats staged at a time: 32 KiB of shared memory */


/* the seed's phase: every thread reads all of src from global memory */
__device__ __forceinline__ void phase_global (const float *src, float *dst, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  float a = src[0];
  for (int k = 1; k < n; k++) a += src[k];
  if (j < n) dst[j] = a / n;
}


/*
** The same sums, src staged in shared memory a chunk at a time by the whole
** block. Every thread reads every element, so the sum reads four at a time:
** one 32-bit broadcast read per element would make shared memory, not the
** additions, the limit.
*/
__device__ __forceinline__ void phase_shared (const float *src, float *dst, int n) {
  __shared__ __align__(16) float buf[CULUA_XPX_CHUNK];
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  float a = 0.0f;
  for (int base = 0; base < n; base += CULUA_XPX_CHUNK) {
    int m = min(CULUA_XPX_CHUNK, n - base), k = 0;
    __syncthreads();   /* the previous chunk is summed by every thread */
#pragma unroll 8
    for (int i = threadIdx.x; i < m; i += blockDim.x) buf[i] = src[base + i];
    __syncthreads();
    if (base == 0) a = buf[k++];
    for (; k < m && (k & 3); k++) a += buf[k];
    for (; k + 4 <= m; k += 4) {   /* in order: a + x + y + z + w */
      float4 v = *(const float4 *)&buf[k];
      a += v.x; a += v.y; a += v.z; a += v.w;
    }
    for (; k < m; k++) a += buf[k];
  }
  if (j < n) dst[j] = a / n;
}


/* {====================================================== the experiment's kernels */

/*
** CULUA_XPX(name, INIT, BARRIER) makes culua_xpx_<name> and
** culua_xpx_<name>_global: `phases` phases, X -> P, P -> X, ..., with
** BARRIER between them. none: no barrier at all, the seed's first, racy
** kernel; block: __syncthreads only, right within a block and wrong across
** blocks.
**
** SKL launches a kernel once with all the phases; MKL launches the same
** kernel once a phase, so that the kernel boundary is the barrier. Both
** run the very same machine code: with a kernel of their own, MKL's phases
** were compiled to another schedule, and the two schedules differed by up
** to 30% on an H100, more than any barrier costs.
*/
#define CULUA_XPX_(name, PHASE, INIT, BARRIER) \
  extern "C" __global__ void name (float *X, float *P, int n, unsigned *state, int phases) { \
    INIT; \
    (void)state; \
    for (int t = 0; t < phases; t++) { \
      if (t & 1) PHASE(P, X, n); else PHASE(X, P, n); \
      if (t + 1 < phases) { BARRIER; } \
    } \
  }
#define CULUA_XPX(name, INIT, BARRIER) \
  CULUA_XPX_(culua_xpx_##name, phase_shared, INIT, BARRIER) \
  CULUA_XPX_(culua_xpx_##name##_global, phase_global, INIT, BARRIER)

CULUA_XPX(none, , )
CULUA_XPX(block, , __syncthreads())
CULUA_XPX(seed, culua_seed_barrier_init(), culua_seed_barrier(state))
CULUA_XPX(seed_asm, culua_seed_barrier_init(), culua_seed_barrier_asm(state))
CULUA_XPX(sense, , culua_sense_barrier(state))
CULUA_XPX(coop, , cg::this_grid().sync())
CULUA_XPX(grid, culua::grid_barrier bar(state), bar.sync())

/* }====================================================== */


/* {====================================================== latency: barriers and nothing else */

#define CULUA_LOOP(name, BARRIER) \
  extern "C" __global__ void culua_barrier_loop_##name (unsigned *state, int rounds) { \
    for (int r = 0; r < rounds; r++) { BARRIER; } \
  }

CULUA_LOOP(sense, culua_sense_barrier(state))
CULUA_LOOP(coop, cg::this_grid().sync())

extern "C" __global__ void culua_barrier_loop_grid (unsigned *state, int rounds) {
  culua::grid_barrier bar(state);
  for (int r = 0; r < rounds; r++) bar.sync();
}

extern "C" __global__ void culua_barrier_loop_seed (unsigned *state, int rounds) {
  culua_seed_barrier_init();
  for (int r = 0; r < rounds; r++) culua_seed_barrier(state);
}

/* }====================================================== */
