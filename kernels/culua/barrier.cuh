/*
** culua/barrier.cuh
** Grid-wide barriers for kernels whose blocks must all meet, without ending
** the kernel. Include it from cuda.compile'd kernels as <culua/barrier.cuh>.
**
** Every block of the grid must be resident at once, or a barrier waits for
** blocks that never start: launch through cuda.catalog.barrier.launch, which
** sizes the grid from occupancy and refuses a grid that cannot be resident.
** The state is CULUA_BARRIER_WORDS words of global memory, zero at launch
** (cuda.catalog.barrier.state() makes it; the launch helper zeroes it).
**
**   culua_seed_barrier_init();     once at the kernel's start, then
**   culua_seed_barrier(state)      seed 001: atomicInc counter, __threadfence,
**                                  spin on a volatile read
**   culua_seed_barrier_asm(state)  the same, spinning in inline PTX as the seed shows
**   culua_sense_barrier(state)     sense-reversing, release/acquire, one atomic per block
**   culua::grid_barrier b(state);  b.sync();   one counter up to 1536 blocks, a tree
**                                  of counters beyond; the fastest on small and on
**                                  16-blocks-a-SM grids
**   cooperative_groups::this_grid().sync()  with a cooperative launch (not in here)
*/

#ifndef culua_barrier_cuh
#define culua_barrier_cuh

#include <culua/common.cuh>

#define CULUA_BARRIER_WORDS 2176   /* 8.5 KiB */

/* word offsets in the state: each barrier kind uses its own cache lines */
#define CULUA_SEED_COUNT    0      /* and 1 */
#define CULUA_SENSE_COUNT   32
#define CULUA_SENSE_FLAG    33
#define CULUA_GRID_EPOCH    64
#define CULUA_GRID_TOP      96
#define CULUA_GRID_PAIR     112    /* and 113: the flat barrier's pair (never in a launch with the tree) */
#define CULUA_GRID_GROUPS   128    /* CULUA_GRID_MAXGROUPS counters, a line apart */
#define CULUA_GRID_MAXGROUPS 64
#define CULUA_GRID_STRIDE   32
#define CULUA_GRID_FLAT     1536   /* up to this many blocks: flat (measured: 1056 flat, 2112 tree) */


/*
** Seed 001's barrier: the counter wraps to 0 when the last block arrives
** (atomicInc with limit nblocks-1), the others spin until they see the 0.
** The seed used one counter, and so can deadlock: the first block out of
** barrier i may increment it for barrier i+1 before a slow block has seen
** the 0 (this hung on an H100 with short phases). So, as the seed's
** InitSyncWholeDevice does, a kernel calls culua_seed_barrier_init() once
** at its start, and successive barriers alternate between two counters: no
** block reaches barrier i+2, the same counter, before all have left barrier i.
** The seed's SyncWholeDevice also lets thread 0 arrive as soon as its own
** writes are fenced, while the other warps of its block may still be
** writing: here the block meets at __syncthreads() first (on an H100 that
** costs nothing measurable: 2.16 us at 1056 blocks either way).
*/
__device__ __forceinline__ unsigned &culua_seed_round () {
  __shared__ unsigned round;   /* per block: barriers passed */
  return round;
}

__device__ __forceinline__ void culua_seed_barrier_init () {
  if (culua_thread_rank() == 0) culua_seed_round() = 0;
  __syncthreads();
}

/* the seed's second way to stop the compiler deleting the spin: PTX */
__device__ __forceinline__ void culua_spin_while_not (const unsigned *p, unsigned val) {
  asm volatile("{\n\t"
               ".reg .u32 r_count;\n\t"
               ".reg .pred p;\n\t"
               "culua_spin:\n\t"
               "ld.volatile.global.u32 r_count, [%0];\n\t"
               "setp.ne.u32 p, r_count, %1;\n\t"
               "@p bra culua_spin;\n\t"
               "}"
               : : "l"(p), "r"(val) : "memory");
}


/* ASM: spin in inline PTX (culua_seed_barrier_asm) rather than on a volatile read */
template <bool ASM>
__device__ __forceinline__ void culua_seed_barrier_ (unsigned *state) {
  __syncthreads();
  __threadfence();
  if (culua_thread_rank() == 0) {
    unsigned *count = state + CULUA_SEED_COUNT + (culua_seed_round()++ & 1u);
    unsigned nb = culua_grid_blocks();
    unsigned old = atomicInc(count, nb - 1);
    __threadfence();
    if (old != nb - 1) {
      if (ASM) culua_spin_while_not(count, 0);
      else while (*(volatile unsigned *)count != 0) {}
    }
  }
  __syncthreads();
}

__device__ __forceinline__ void culua_seed_barrier (unsigned *state) { culua_seed_barrier_<false>(state); }
__device__ __forceinline__ void culua_seed_barrier_asm (unsigned *state) { culua_seed_barrier_<true>(state); }


__device__ __forceinline__ unsigned culua_ld_acquire (const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}


__device__ __forceinline__ void culua_st_release (unsigned *p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}


/*
** Sense reversal: each block reads the sense, arrives with one atomic; the
** last to arrive resets the count and flips the sense (release), the others
** wait for the flip (acquire). Safe for barriers back to back.
*/
__device__ __forceinline__ void culua_sense_barrier (unsigned *state) {
  unsigned *count = state + CULUA_SENSE_COUNT, *sense = state + CULUA_SENSE_FLAG;
  __syncthreads();
  if (culua_thread_rank() == 0) {
    unsigned nb = culua_grid_blocks();
    unsigned s = culua_ld_acquire(sense), arrived;
    __threadfence();   /* the block's writes, ordered by __syncthreads, go first */
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(arrived) : "l"(count) : "memory");
    if (arrived == nb - 1) {
      *(volatile unsigned *)count = 0;
      culua_st_release(sense, s ^ 1u);
    }
    else
      while (culua_ld_acquire(sense) == s) {}
  }
  __syncthreads();
}


namespace culua {

/*
** The grid barrier. Up to CULUA_GRID_FLAT blocks it is the seed's counter
** made cheaper: thread 0 of each block fences its block's writes, arrives
** with atomicInc on one of two counters in one line (alternating, by the
** parity of the barrier's number), spins with relaxed loads until the last
** arrival wraps it to 0, and then acquires with one ld.acquire instead of
** the seed's trailing __threadfence(). Measured on an H100: 0.72 us at 8
** blocks, 0.89 at 132, 2.34 at 1056, against grid.sync()'s 1.08, 1.12 and
** 2.24. Spinning on acquire loads was as fast in a loop of barriers, but in
** seed 001's experiment it slowed SKL: in a standalone harness it lost to MKL
** at 32 x 256 by 2.3%, and with relaxed spins it won there by 1.8%.
** Beyond CULUA_GRID_FLAT blocks, a tree: groups of blocks (at most
** CULUA_GRID_MAXGROUPS), each with its own counter on its own line, and the
** last arrival of a group arrives on the top counter; the last arrival of
** all publishes the epoch, which everybody else waits on. Two thousand
** same-address atomics in a row were the cost of the flat barrier (and of
** grid.sync()) at 2112 blocks of 128 threads: 2.93 us against 4.34 for
** grid.sync(). Counters wrap to 0 by themselves (atomicInc), and the epoch
** lives in a register of each block, so nothing is reset between barriers.
*/
struct grid_barrier {
  unsigned *state;
  unsigned epoch;

  __device__ explicit grid_barrier (unsigned *s) : state(s), epoch(0) {}

  __device__ __forceinline__ void sync () {
    __syncthreads();
    epoch++;
    if (culua_thread_rank() == 0) {
      unsigned nb = culua_grid_blocks();
      __threadfence();   /* the block's writes, ordered by __syncthreads, go first */
      if (nb <= CULUA_GRID_FLAT) {
        unsigned *count = state + CULUA_GRID_PAIR + (epoch & 1u);
        /* the spin starts once the atomic has returned: at 1056 blocks, spins
           issued beside the arrivals (a RED, its result unused) took 3.3 us */
        if (atomicInc(count, nb - 1) != nb - 1)
          while (*(volatile unsigned *)count != 0) {}
        (void)culua_ld_acquire(count);   /* reads the 0: every block's writes are visible */
      }
      else tree(nb);
    }
    __syncthreads();
  }

  __device__ __forceinline__ void tree (unsigned nb) {
    unsigned me = culua_block_rank();
    unsigned gsz = max(32u, (nb + CULUA_GRID_MAXGROUPS - 1) / CULUA_GRID_MAXGROUPS);
    unsigned groups = (nb + gsz - 1) / gsz, g = me / gsz;
    unsigned size = g == groups - 1 ? nb - g * gsz : gsz;
    unsigned *flag = state + CULUA_GRID_EPOCH;
    bool last = atomicInc(state + CULUA_GRID_GROUPS + g * CULUA_GRID_STRIDE, size - 1) == size - 1;
    if (last && groups > 1)
      last = atomicInc(state + CULUA_GRID_TOP, groups - 1) == groups - 1;
    if (last) {
      __threadfence();
      culua_st_release(flag, epoch);
    }
    else   /* acquire spins here: relaxed ones took 4.8 us at 2112 blocks, against 2.9 */
      while (culua_ld_acquire(flag) != epoch) {}
  }
};

}  /* namespace culua */

#endif
