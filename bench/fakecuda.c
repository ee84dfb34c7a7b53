/*
** bench/fakecuda.c
** A driver library with no device behind it, for measuring culua's host
** time where there is no GPU (bench/host_time.sh builds and uses it). It
** answers every entry point culua's loader asks for (src/loader.h's lists)
** with success and at once: one device that says it is an H100 (compute
** capability 9.0, 132 multiprocessors), device memory that is host memory
** (so copies, fills and memsets really move bytes), modules and kernels that
** are names only, and launches that run nothing. An event's record reads the
** host's monotonic clock, so cuda.bench and cuda.event:elapsed time the host's
** side of what they bracket: on this driver that is all there is.
**
**   culua:  CULUA_LIBCUDA=./fakecuda.so culua script.lua
**   C:      cc anchor.c -L<dir with libcuda.so -> fakecuda.so> -lcuda
**
** Not for tests of results: kernels do nothing, and every launch succeeds.
*/

#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader.h"

#define OK CUDA_SUCCESS
#define DEVICE_BYTES ((size_t)80 << 30)

typedef struct Event { double t; } Event;

static int dummy_ctx, dummy_module, dummy_graph, dummy_exec, dummy_link;
static CUcontext current;
static char globals[1 << 16];   /* a module's globals: one buffer for all */


static double now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;   /* ms */
}


/* {====================================================== device and contexts */

CUresult cuGetErrorName (CUresult r, const char **s) { *s = r == OK ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE"; return OK; }
CUresult cuGetErrorString (CUresult r, const char **s) { *s = r == OK ? "no error" : "error of the fake driver"; return OK; }
CUresult cuInit (unsigned flags) { (void)flags; return OK; }
CUresult cuDriverGetVersion (int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount (int *n) { *n = 1; return OK; }
CUresult cuDeviceGet (CUdevice *d, int ordinal) { if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE; *d = 0; return OK; }
CUresult cuDeviceGetName (char *name, int len, CUdevice d) { (void)d; snprintf(name, (size_t)len, "fake H100 (no device)"); return OK; }
CUresult cuDeviceTotalMem (size_t *b, CUdevice d) { (void)d; *b = DEVICE_BYTES; return OK; }
CUresult cuDeviceGetPCIBusId (char *s, int len, CUdevice d) { (void)d; snprintf(s, (size_t)len, "0000:00:00.0"); return OK; }
CUresult cuDeviceGetUuid (CUuuid *u, CUdevice d) { (void)d; memset(u, 0, sizeof(*u)); return OK; }

CUresult cuDeviceGetAttribute (int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 0x7fffffff; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *v = 512; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; break;
    default: *v = 1; break;   /* every feature present */
  }
  return OK;
}

CUresult cuDevicePrimaryCtxRetain (CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)&dummy_ctx; return OK; }
CUresult cuDevicePrimaryCtxRelease (CUdevice d) { (void)d; return OK; }
CUresult cuDevicePrimaryCtxReset (CUdevice d) { (void)d; return OK; }
CUresult cuDeviceCanAccessPeer (int *can, CUdevice a, CUdevice b) { *can = a != b; return OK; }
CUresult cuCtxSetCurrent (CUcontext c) { current = c; return OK; }
CUresult cuCtxGetCurrent (CUcontext *c) { *c = current; return OK; }
CUresult cuCtxGetDevice (CUdevice *d) { *d = 0; return OK; }
CUresult cuCtxSynchronize (void) { return OK; }
CUresult cuCtxEnablePeerAccess (CUcontext c, unsigned flags) { (void)c; (void)flags; return OK; }
CUresult cuCtxGetStreamPriorityRange (int *least, int *greatest) { *least = 0; *greatest = -5; return OK; }
CUresult cuCtxSetLimit (CUlimit l, size_t v) { (void)l; (void)v; return OK; }
CUresult cuCtxGetLimit (size_t *v, CUlimit l) { (void)l; *v = 1024; return OK; }

/* }====================================================== */


/* {====================================================== memory: host memory */

static void *alloc (size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 256, n ? n : 1) != 0) return NULL;
  return p;
}

CUresult cuMemGetInfo (size_t *free_, size_t *total) { *free_ = DEVICE_BYTES / 2; *total = DEVICE_BYTES; return OK; }
CUresult cuMemAlloc (CUdeviceptr *p, size_t n) {
  void *q = alloc(n);
  if (q == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)q;
  return OK;
}
CUresult cuMemFree (CUdeviceptr p) { free((void *)(uintptr_t)p); return OK; }
CUresult cuMemHostAlloc (void **p, size_t n, unsigned flags) { (void)flags; *p = alloc(n); return *p ? OK : CUDA_ERROR_OUT_OF_MEMORY; }
CUresult cuMemFreeHost (void *p) { free(p); return OK; }
CUresult cuMemHostGetDevicePointer (CUdeviceptr *d, void *p, unsigned flags) { (void)flags; *d = (CUdeviceptr)(uintptr_t)p; return OK; }
CUresult cuMemAllocManaged (CUdeviceptr *p, size_t n, unsigned flags) { (void)flags; return cuMemAlloc(p, n); }
CUresult cuMemRangeGetAttribute (void *data, size_t size, CUmem_range_attribute a, CUdeviceptr p, size_t n) {
  (void)a; (void)p; (void)n;
  memset(data, 0, size);
  return OK;
}
CUresult cuMemAllocPitch (CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
  (void)elem;
  *pitch = (width + 511) / 512 * 512;
  return cuMemAlloc(p, *pitch * height);
}

#define HOST(p) ((void *)(uintptr_t)(p))
CUresult cuMemcpyHtoD (CUdeviceptr d, const void *s, size_t n) { memcpy(HOST(d), s, n); return OK; }
CUresult cuMemcpyDtoH (void *d, CUdeviceptr s, size_t n) { memcpy(d, HOST(s), n); return OK; }
CUresult cuMemcpyDtoD (CUdeviceptr d, CUdeviceptr s, size_t n) { memmove(HOST(d), HOST(s), n); return OK; }
CUresult cuMemcpyHtoDAsync (CUdeviceptr d, const void *s, size_t n, CUstream st) { (void)st; return cuMemcpyHtoD(d, s, n); }
CUresult cuMemcpyDtoHAsync (void *d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoH(d, s, n); }
CUresult cuMemcpyDtoDAsync (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoD(d, s, n); }
CUresult cuMemcpyPeer (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { (void)dc; (void)sc; return cuMemcpyDtoD(d, s, n); }
CUresult cuMemcpyPeerAsync (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) {
  (void)dc; (void)sc; (void)st;
  return cuMemcpyDtoD(d, s, n);
}

/* a 2-D copy between whatever kinds of memory: all of it is host memory here */
static char *base2d (CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr) {
  (void)arr;
  return t == CU_MEMORYTYPE_HOST ? (char *)(uintptr_t)host : (char *)HOST(dev);
}
CUresult cuMemcpy2D (const CUDA_MEMCPY2D *c) {
  char *s = base2d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray) + c->srcY * c->srcPitch + c->srcXInBytes;
  char *d = base2d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray) + c->dstY * c->dstPitch + c->dstXInBytes;
  size_t r;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) return OK;
  for (r = 0; r < c->Height; r++) memmove(d + r * c->dstPitch, s + r * c->srcPitch, c->WidthInBytes);
  return OK;
}
CUresult cuMemcpy2DAsync (const CUDA_MEMCPY2D *c, CUstream st) { (void)st; return cuMemcpy2D(c); }
CUresult cuMemcpy2DUnaligned (const CUDA_MEMCPY2D *c) { return cuMemcpy2D(c); }

#define FILL(T, d, pitch, v, w, h) do { \
  size_t r_, i_; \
  for (r_ = 0; r_ < (h); r_++) { \
    T *row_ = (T *)((char *)HOST(d) + r_ * (pitch)); \
    for (i_ = 0; i_ < (w); i_++) row_[i_] = (T)(v); \
  } } while (0)
CUresult cuMemsetD8Async (CUdeviceptr d, unsigned char v, size_t n, CUstream s) { (void)s; memset(HOST(d), v, n); return OK; }
CUresult cuMemsetD16Async (CUdeviceptr d, unsigned short v, size_t n, CUstream s) { (void)s; FILL(uint16_t, d, 0, v, n, 1); return OK; }
CUresult cuMemsetD32Async (CUdeviceptr d, unsigned v, size_t n, CUstream s) { (void)s; FILL(uint32_t, d, 0, v, n, 1); return OK; }
CUresult cuMemsetD2D8Async (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) { (void)s; FILL(uint8_t, d, p, v, w, h); return OK; }
CUresult cuMemsetD2D16Async (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) { (void)s; FILL(uint16_t, d, p, v, w, h); return OK; }
CUresult cuMemsetD2D32Async (CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h, CUstream s) { (void)s; FILL(uint32_t, d, p, v, w, h); return OK; }

/* }====================================================== */


/* {====================================================== streams, events, graphs */

CUresult cuStreamCreateWithPriority (CUstream *s, unsigned flags, int prio) { (void)flags; (void)prio; *s = (CUstream)alloc(64); return OK; }
CUresult cuStreamCreate (CUstream *s, unsigned flags) { return cuStreamCreateWithPriority(s, flags, 0); }
CUresult cuStreamDestroy (CUstream s) { free(s); return OK; }
CUresult cuStreamSynchronize (CUstream s) { (void)s; return OK; }
CUresult cuStreamQuery (CUstream s) { (void)s; return OK; }
CUresult cuStreamWaitEvent (CUstream s, CUevent e, unsigned flags) { (void)s; (void)e; (void)flags; return OK; }
CUresult cuStreamBeginCapture (CUstream s, CUstreamCaptureMode m) { (void)s; (void)m; return OK; }
CUresult cuStreamEndCapture (CUstream s, CUgraph *g) { (void)s; *g = (CUgraph)&dummy_graph; return OK; }
CUresult cuGraphInstantiateWithFlags (CUgraphExec *x, CUgraph g, unsigned long long flags) { (void)g; (void)flags; *x = (CUgraphExec)&dummy_exec; return OK; }
CUresult cuGraphLaunch (CUgraphExec x, CUstream s) { (void)x; (void)s; return OK; }
CUresult cuGraphExecDestroy (CUgraphExec x) { (void)x; return OK; }
CUresult cuGraphDestroy (CUgraph g) { (void)g; return OK; }
CUresult cuGraphGetNodes (CUgraph g, CUgraphNode *nodes, size_t *n) { (void)g; (void)nodes; *n = 0; return OK; }

CUresult cuEventCreate (CUevent *e, unsigned flags) { (void)flags; *e = (CUevent)alloc(sizeof(Event)); ((Event *)*e)->t = now(); return OK; }
CUresult cuEventRecord (CUevent e, CUstream s) { (void)s; ((Event *)e)->t = now(); return OK; }
CUresult cuEventSynchronize (CUevent e) { (void)e; return OK; }
CUresult cuEventQuery (CUevent e) { (void)e; return OK; }
CUresult cuEventElapsedTime (float *ms, CUevent a, CUevent b) { *ms = (float)(((Event *)b)->t - ((Event *)a)->t); return OK; }
CUresult cuEventDestroy (CUevent e) { free(e); return OK; }

/* }====================================================== */


/* {====================================================== modules and launches */

CUresult cuModuleLoadDataEx (CUmodule *m, const void *image, unsigned n, CUjit_option *o, void **v) {
  (void)image; (void)n; (void)o; (void)v;
  *m = (CUmodule)&dummy_module;
  return OK;
}
CUresult cuModuleLoadData (CUmodule *m, const void *image) { return cuModuleLoadDataEx(m, image, 0, NULL, NULL); }
CUresult cuModuleUnload (CUmodule m) { (void)m; return OK; }
/* a function is its name, interned: one copy a name, on a list that keeps them all
   reachable to the end (a driver frees its functions with their module; this one never
   unloads, and a leak checker run over culua on it must not find them lost) */
struct fname { struct fname *next; char s[]; };
static struct fname *fnames;
static const char *intern (const char *s) {
  for (struct fname *p = fnames; p; p = p->next)
    if (strcmp(p->s, s) == 0) return p->s;
  size_t n = strlen(s) + 1;
  struct fname *p = malloc(sizeof *p + n);
  if (p == NULL) return NULL;
  memcpy(p->s, s, n);
  p->next = fnames;
  fnames = p;
  return p->s;
}
CUresult cuModuleGetFunction (CUfunction *f, CUmodule m, const char *name) {
  const char *s = intern(name);
  (void)m;
  if (s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *f = (CUfunction)s;
  return OK;
}
CUresult cuModuleGetGlobal (CUdeviceptr *p, size_t *n, CUmodule m, const char *name) {
  (void)m; (void)name;
  if (p) *p = (CUdeviceptr)(uintptr_t)globals;
  if (n) *n = sizeof(globals);
  return OK;
}
CUresult cuFuncGetAttribute (int *v, CUfunction_attribute a, CUfunction f) {
  (void)f;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = 232448; break;
    default: *v = 0; break;
  }
  return OK;
}
CUresult cuFuncSetAttribute (CUfunction f, CUfunction_attribute a, int v) { (void)f; (void)a; (void)v; return OK; }
CUresult cuLaunchKernel (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, CUstream s, void **args, void **extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)s; (void)args; (void)extra;
  return OK;
}
CUresult cuLaunchCooperativeKernel (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, CUstream s, void **args) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, args, NULL);
}
CUresult cuLaunchKernelEx (const CUlaunchConfig *c, CUfunction f, void **args, void **extra) {
  (void)c; (void)f; (void)args; (void)extra;
  return OK;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor (int *n, CUfunction f, int block, size_t shared) {
  (void)f; (void)shared;
  *n = block > 0 ? 2048 / block : 0;
  if (*n > 32) *n = 32;
  return OK;
}
CUresult cuOccupancyMaxActiveClusters (int *n, CUfunction f, const CUlaunchConfig *c) { (void)f; (void)c; *n = 16; return OK; }
/* a TMA descriptor that describes nothing: no kernel reads it here */
CUresult cuTensorMapEncodeTiled (CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                 const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                 const cuuint32_t *es, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                 CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  (void)t; (void)rank; (void)addr; (void)dims; (void)strides; (void)box; (void)es; (void)il; (void)sw; (void)l2; (void)oob;
  memset(m, 0, sizeof *m);
  return OK;
}

CUresult cuLinkCreate (unsigned n, CUjit_option *o, void **v, CUlinkState *s) { (void)n; (void)o; (void)v; *s = (CUlinkState)&dummy_link; return OK; }
CUresult cuLinkAddData (CUlinkState s, CUjitInputType t, void *d, size_t n, const char *name, unsigned no, CUjit_option *o, void **v) {
  (void)s; (void)t; (void)d; (void)n; (void)name; (void)no; (void)o; (void)v;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuLinkAddFile (CUlinkState s, CUjitInputType t, const char *path, unsigned no, CUjit_option *o, void **v) {
  (void)s; (void)t; (void)path; (void)no; (void)o; (void)v;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuLinkComplete (CUlinkState s, void **cubin, size_t *n) { (void)s; (void)cubin; (void)n; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuLinkDestroy (CUlinkState s) { (void)s; return OK; }
CUresult cuTexObjectCreate (CUtexObject *t, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *d, const CUDA_RESOURCE_VIEW_DESC *v) {
  (void)r; (void)d; (void)v;
  *t = 1;
  return OK;
}
CUresult cuTexObjectDestroy (CUtexObject t) { (void)t; return OK; }

/* }====================================================== */


/* {====================================================== the look-up */

/*
** Every entry point the loader requires, by base name (the # of the macro
** argument is not expanded; the value is cuda.h's versioned name, which is
** the ABI loader.h asks for), and those of the optional ones answered here:
** a new required entry point in loader.h that this file lacks fails to link.
*/
static const struct { const char *name; void *fn; } entries[] = {
#define ENTRY(name, ver) {#name, (void *)name},
  CULUA_DRIVER_REQUIRED(ENTRY)
  ENTRY(cuDeviceGetUuid, 0)
  ENTRY(cuLaunchKernelEx, 0)
  ENTRY(cuOccupancyMaxActiveClusters, 0)
  ENTRY(cuTensorMapEncodeTiled, 0)
#undef ENTRY
};

CUresult cuGetProcAddress_v2 (const char *sym, void **pfn, int ver, cuuint64_t flags,
                              CUdriverProcAddressQueryResult *status);
CUresult cuGetProcAddress_v2 (const char *sym, void **pfn, int ver, cuuint64_t flags,
                              CUdriverProcAddressQueryResult *status) {
  size_t i;
  (void)ver; (void)flags;
  for (i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
    if (strcmp(entries[i].name, sym) == 0) {
      *pfn = entries[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return OK;
    }
  *pfn = NULL;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

/* }====================================================== */
