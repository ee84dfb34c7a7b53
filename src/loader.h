/*
** loader.h
** The tables of CUDA driver and NVRTC entry points, filled at run time by
** loader.c, the only code that knows about dlopen.
*/

#ifndef culua_loader_h
#define culua_loader_h

#include <cuda.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>

/*
** Driver entry points: X(name, version). The version picks the ABI whose
** typedef (PFN_<name>_v<version> in cudaTypedefs.h) we call through, and is
** what cuGetProcAddress is asked for, so a newer header never changes the
** ABI under our feet.
*/
#define CULUA_DRIVER_REQUIRED(X) \
  X(cuGetErrorName, 6000) \
  X(cuGetErrorString, 6000) \
  X(cuInit, 2000) \
  X(cuDriverGetVersion, 2020) \
  X(cuDeviceGetCount, 2000) \
  X(cuDeviceGet, 2000) \
  X(cuDeviceGetName, 2000) \
  X(cuDeviceGetAttribute, 2000) \
  X(cuDeviceTotalMem, 3020) \
  X(cuDeviceGetPCIBusId, 4010) \
  X(cuDevicePrimaryCtxRetain, 7000) \
  X(cuDevicePrimaryCtxRelease, 11000) \
  X(cuDevicePrimaryCtxReset, 11000) \
  X(cuDeviceCanAccessPeer, 4000) \
  X(cuCtxSetCurrent, 4000) \
  X(cuCtxGetCurrent, 4000) \
  X(cuCtxGetDevice, 2000) \
  X(cuCtxSynchronize, 2000) \
  X(cuCtxEnablePeerAccess, 4000) \
  X(cuCtxGetStreamPriorityRange, 5050) \
  X(cuCtxSetLimit, 3010) \
  X(cuCtxGetLimit, 3010) \
  X(cuMemGetInfo, 3020) \
  X(cuMemAlloc, 3020) \
  X(cuMemFree, 3020) \
  X(cuMemHostAlloc, 2020) \
  X(cuMemFreeHost, 2000) \
  X(cuMemHostGetDevicePointer, 3020) \
  X(cuMemAllocManaged, 6000) \
  X(cuMemRangeGetAttribute, 8000) \
  X(cuMemcpyHtoD, 3020) \
  X(cuMemcpyDtoH, 3020) \
  X(cuMemcpyDtoD, 3020) \
  X(cuMemcpyHtoDAsync, 3020) \
  X(cuMemcpyDtoHAsync, 3020) \
  X(cuMemcpyDtoDAsync, 3020) \
  X(cuMemcpyPeer, 4000) \
  X(cuMemcpyPeerAsync, 4000) \
  X(cuMemAllocPitch, 3020) \
  X(cuMemcpy2D, 3020) \
  X(cuMemcpy2DAsync, 3020) \
  X(cuMemcpy2DUnaligned, 3020) \
  X(cuMemsetD2D8Async, 3020) \
  X(cuMemsetD2D16Async, 3020) \
  X(cuMemsetD8Async, 3020) \
  X(cuMemsetD16Async, 3020) \
  X(cuMemsetD32Async, 3020) \
  X(cuMemsetD2D32Async, 3020) \
  X(cuStreamCreateWithPriority, 5050) \
  X(cuStreamDestroy, 4000) \
  X(cuStreamSynchronize, 2000) \
  X(cuStreamQuery, 2000) \
  X(cuStreamWaitEvent, 3020) \
  X(cuStreamBeginCapture, 10010) \
  X(cuStreamEndCapture, 10000) \
  X(cuGraphInstantiateWithFlags, 11040) \
  X(cuGraphLaunch, 10000) \
  X(cuGraphExecDestroy, 10000) \
  X(cuGraphDestroy, 10000) \
  X(cuGraphGetNodes, 10000) \
  X(cuEventCreate, 2000) \
  X(cuEventRecord, 2000) \
  X(cuEventSynchronize, 2000) \
  X(cuEventQuery, 2000) \
  X(cuEventElapsedTime, 2000) \
  X(cuEventDestroy, 4000) \
  X(cuModuleLoadDataEx, 2010) \
  X(cuModuleUnload, 2000) \
  X(cuModuleGetFunction, 2000) \
  X(cuModuleGetGlobal, 3020) \
  X(cuFuncGetAttribute, 2020) \
  X(cuFuncSetAttribute, 9000) \
  X(cuLaunchKernel, 4000) \
  X(cuLinkCreate, 6050) \
  X(cuLinkAddData, 6050) \
  X(cuLinkAddFile, 6050) \
  X(cuLinkComplete, 5050) \
  X(cuLinkDestroy, 5050) \
  X(cuTexObjectCreate, 5000) \
  X(cuTexObjectDestroy, 5000) \
  X(cuLaunchCooperativeKernel, 9000) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)

/*
** Entry points culua can do without on an older driver (NULL when missing).
** cuMemPrefetchAsync and cuMemAdvise at 12020 are the forms that take a
** CUmemLocation (the host, a NUMA node or a device), the only ones CUDA 13
** declares; a 12.0 or 12.1 driver has only the CUdevice forms.
*/
#define CULUA_DRIVER_OPTIONAL(X) \
  X(cuDeviceGetUuid, 11040) \
  X(cuFuncGetParamInfo, 12040) \
  X(cuTensorMapEncodeTiled, 12000) \
  X(cuLaunchKernelEx, 11060) \
  X(cuOccupancyMaxActiveClusters, 11070) \
  X(cuMemPrefetchAsync, 12020) \
  X(cuMemAdvise, 12020)

typedef struct culua_Driver {
#define CULUA_FIELD(name, ver) PFN_##name##_v##ver name;
  CULUA_DRIVER_REQUIRED(CULUA_FIELD)
  CULUA_DRIVER_OPTIONAL(CULUA_FIELD)
#undef CULUA_FIELD
} culua_Driver;

/* NVRTC has no versioned lookup: plain dlsym of these names */
#define CULUA_NVRTC_ENTRIES(X) \
  X(nvrtcVersion) \
  X(nvrtcGetErrorString) \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs) \
  X(nvrtcCreateProgram) \
  X(nvrtcDestroyProgram) \
  X(nvrtcCompileProgram) \
  X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) \
  X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) \
  X(nvrtcGetProgramLogSize) \
  X(nvrtcGetProgramLog) \
  X(nvrtcAddNameExpression) \
  X(nvrtcGetLoweredName)

typedef struct culua_Nvrtc {
#define CULUA_FIELD(name) __typeof__(name) *name;
  CULUA_NVRTC_ENTRIES(CULUA_FIELD)
#undef CULUA_FIELD
} culua_Nvrtc;

/*
** NCCL, like NVRTC, by plain dlsym. nccl.h declares these when the toolkit
** has it; otherwise nccl_decl.h declares the few culua uses, with NCCL's
** own ABI (NCCL 2.x has kept these signatures since 2.0; 2.13 added
** ncclGetLastError, the newest culua asks for).
*/
#ifdef HAVE_NCCL_H
#include <nccl.h>
#else
#include "nccl_decl.h"
#endif

#define CULUA_NCCL_ENTRIES(X) \
  X(ncclGetVersion) \
  X(ncclGetErrorString) \
  X(ncclGetLastError) \
  X(ncclGetUniqueId) \
  X(ncclCommInitRank) \
  X(ncclCommInitAll) \
  X(ncclCommDestroy) \
  X(ncclCommAbort) \
  X(ncclCommGetAsyncError) \
  X(ncclCommCount) \
  X(ncclCommCuDevice) \
  X(ncclCommUserRank) \
  X(ncclAllReduce) \
  X(ncclReduce) \
  X(ncclBroadcast) \
  X(ncclAllGather) \
  X(ncclReduceScatter) \
  X(ncclSend) \
  X(ncclRecv) \
  X(ncclGroupStart) \
  X(ncclGroupEnd)

/* newer than 2.13: NULL where the library lacks them, and the call that needs one says so */
#define CULUA_NCCL_OPTIONAL(X) \
  X(ncclCommInitRankConfig) \
  X(ncclCommSplit)

typedef struct culua_Nccl {
#define CULUA_FIELD(name) __typeof__(name) *name;
  CULUA_NCCL_ENTRIES(CULUA_FIELD)
  CULUA_NCCL_OPTIONAL(CULUA_FIELD)
#undef CULUA_FIELD
} culua_Nccl;

/*
** Each returns the filled table, or NULL with *why set to a message such as
** "libcuda.so.1 not found". They load once per process (thread-safe); later
** calls return the first outcome.
*/
const culua_Driver *culua_load_driver (const char **why);
const culua_Nvrtc *culua_load_nvrtc (const char **why);
const culua_Nccl *culua_load_nccl (const char **why);
const char *culua_nccl_path (void);

/* what cuInit(0) returned when the driver was loaded */
CUresult culua_driver_init (void);

/* the file NVRTC was loaded from, symbolic links resolved by ld.so, or NULL */
const char *culua_nvrtc_file (void);

/* the path actually opened, or NULL */
const char *culua_driver_path (void);
const char *culua_nvrtc_path (void);

#endif
