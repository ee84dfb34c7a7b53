/*
** culua/common.cuh
** Shared by culua's catalog kernels; also available to user kernels compiled
** with cuda.compile as <culua/common.cuh>.
*/

#ifndef culua_common_cuh
#define culua_common_cuh

#define CULUA_CATALOG_VERSION 1

/* the block's linear thread index and size, and the grid's block count */
__device__ __forceinline__ unsigned culua_thread_rank () {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ __forceinline__ unsigned culua_grid_blocks () {
  return gridDim.x * gridDim.y * gridDim.z;
}

__device__ __forceinline__ unsigned culua_block_rank () {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

/*
** Programmatic dependent launches (compute capability 9.0; a kernel launched
** with `programmatic = true`): culua_dep_wait waits for the kernel before it
** on the stream to finish, its writes visible, and must come before anything
** that reads them; culua_dep_release lets the next such kernel's blocks be
** scheduled once every block of this one has released or ended (so the next
** kernel's blocks never take a place this kernel's own blocks still need).
** Both are no-ops for a kernel launched without the attribute.
*/
__device__ __forceinline__ void culua_dep_wait () {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void culua_dep_release () {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif
