/*
** barrier.cu
** The grid-barrier family of culua's catalog: seed 001's X -> P -> X
** experiment and barrier latency loops, for each barrier of
** <culua/barrier.cuh> and for cooperative groups' grid.sync().
**
** One transform: every thread j sums all n elements of X into P[j] (scaled
** by 1/n), then, after the whole grid has written P, sums P into X[j]. With
** no grid barrier some threads read P before it is written.
*/

#include <cooperative_groups.h>
#include <culua/barrier.cuh>

namespace cg = cooperative_groups;


__device__ __forceinline__ void phase (const float *src, float *dst, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  float a = src[0];
  for (int k = 1; k < n; k++) a += src[k];
  if (j < n) dst[j] = a / n;
}


/* {====================================================== one launch, barriers inside (SKL) */

/* no barrier at all: the seed's first, racy kernel */
extern "C" __global__ void culua_xpx_none (float *X, float *P, int n, unsigned *state, int transforms) {
  (void)state;
  for (int t = 0; t < transforms; t++) {
    phase(X, P, n);
    phase(P, X, n);
  }
}

/* __syncthreads only: right within a block, wrong across blocks */
extern "C" __global__ void culua_xpx_block (float *X, float *P, int n, unsigned *state, int transforms) {
  (void)state;
  for (int t = 0; t < transforms; t++) {
    phase(X, P, n);
    __syncthreads();
    phase(P, X, n);
    __syncthreads();
  }
}

#define CULUA_XPX(name, BARRIER) \
  extern "C" __global__ void culua_xpx_##name (float *X, float *P, int n, unsigned *state, int transforms) { \
    culua_seed_barrier_init(); \
    for (int t = 0; t < transforms; t++) { \
      phase(X, P, n); \
      BARRIER; \
      phase(P, X, n); \
      BARRIER; \
    } \
  }

CULUA_XPX(seed, culua_seed_barrier(state))
CULUA_XPX(seed_asm, culua_seed_barrier_asm(state))
CULUA_XPX(sense, culua_sense_barrier(state))
CULUA_XPX(coop, cg::this_grid().sync())

extern "C" __global__ void culua_xpx_grid (float *X, float *P, int n, unsigned *state, int transforms) {
  culua::grid_barrier bar(state);
  for (int t = 0; t < transforms; t++) {
    phase(X, P, n);
    bar.sync();
    phase(P, X, n);
    bar.sync();
  }
}

/* }====================================================== */


/* {====================================================== many launches (MKL) */

/* one phase per launch: the kernel boundary is the barrier */
extern "C" __global__ void culua_xpx_phase (const float *src, float *dst, int n) {
  phase(src, dst, n);
}

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
