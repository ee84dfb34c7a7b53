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

#endif
