/*
** context.c
** The contexts that every object holds: a device's primary context retained
** from an object's making to its closing (or the host's own context), and
** what cuda.reset() leaves stale. Helpers: they call no binding.
*/

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "culua_int.h"


/*
** Primary contexts are per process, so cuda.reset() destroys what every
** lua_State made on that device: one generation counter per device, shared
** by the process like the context it describes.
*/
static unsigned generation[CULUA_MAXDEVICES];

/* {====================================================== contexts */

CUdevice culua_ctx_device (lua_State *L, int ordinal, const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  CUresult r = culua_driver_init();
  int n = 0;
  CUdevice dev;
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, fname, "initialising the driver (%s)", culua_driver_path());
  culua_check(L, cu->cuDeviceGetCount(&n), fname, "counting devices");
  if (ordinal < 0 || ordinal >= n || ordinal >= CULUA_MAXDEVICES)
    luaL_error(L, "%s: no CUDA device %d (%d present)", fname, ordinal, n);
  culua_check(L, cu->cuDeviceGet(&dev, ordinal), fname, "getting device %d", ordinal);
  return dev;
}


void culua_ctx_open (lua_State *L, culua_Ctx *c, int ordinal, const char *fname) {
  culua_State *S = culua_state(L);
  const culua_Driver *cu = culua_cu(L, fname);
  if (S->host_ctx != NULL) {
    /* the host's context: its device, and no reference of ours to drop */
    culua_check(L, cu->cuCtxSetCurrent(S->host_ctx), fname, "entering the host's context");
    culua_check(L, cu->cuCtxGetDevice(&c->dev), fname, "asking the host's context for its device");
    c->ordinal = (int)c->dev;
    c->retained = 0;
    c->gen = generation[c->ordinal % CULUA_MAXDEVICES];
    c->ctx = S->host_ctx;
  }
  else {
    CUcontext ctx;
    if (ordinal < 0) ordinal = S->device;
    c->dev = culua_ctx_device(L, ordinal, fname);
    culua_check(L, cu->cuDevicePrimaryCtxRetain(&ctx, c->dev), fname,
                "retaining the primary context of device %d", ordinal);
    c->ordinal = ordinal;
    c->retained = 1;
    c->gen = generation[ordinal];
    c->ctx = ctx;
    culua_check(L, cu->cuCtxSetCurrent(ctx), fname, "entering device %d", ordinal);
  }
  S->objects++;
}


void culua_ctx_close (culua_Ctx *c) {
  const culua_Driver *cu = culua_load_driver(NULL);
  if (c->ctx == NULL) return;
  if (c->retained && cu != NULL)
    cu->cuDevicePrimaryCtxRelease(c->dev);
  c->ctx = NULL;
}


int culua_ctx_stale (const culua_Ctx *c) {
  return c->gen != generation[c->ordinal % CULUA_MAXDEVICES];
}


/*
** ctx made current on this thread: cuCtxSetCurrent only where cuCtxGetCurrent says
** another is (a kernel launch makes one such call beside the launch itself; the H100's
** k:launch took 3.66 us against C's 3.38, which makes none). CULUA_CTX_SET=always in the
** environment sets it every time, as before, to compare.
*/
CUresult culua_ctx_current (const culua_Driver *cu, CUcontext ctx) {
  static int always = -1;
  CUcontext cur = NULL;
  if (always < 0) {
    const char *e = getenv("CULUA_CTX_SET");
    always = e != NULL && strcmp(e, "always") == 0;
  }
  if (!always && cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx) return CUDA_SUCCESS;
  return cu->cuCtxSetCurrent(ctx);
}


int culua_ctx_live (culua_Ctx *c) {
  const culua_Driver *cu = culua_load_driver(NULL);
  return c->ctx != NULL && !culua_ctx_stale(c) && cu != NULL &&
         culua_ctx_current(cu, c->ctx) == CUDA_SUCCESS;
}


void culua_ctx_enter (lua_State *L, culua_Ctx *c, const char *tname) {
  const culua_Driver *cu = culua_load_driver(NULL);
  CUresult r;
  if (c->ctx == NULL)
    luaL_error(L, "attempt to use a closed %s", tname);
  if (culua_ctx_stale(c))
    luaL_error(L, "attempt to use a %s whose device was reset by cuda.reset()", tname);
  if ((r = culua_ctx_current(cu, c->ctx)) != CUDA_SUCCESS)
    culua_cufail(L, r, tname, "entering the context of device %d", c->ordinal);
}


int culua_need_attr (lua_State *L, CUdevice dev, int ordinal, CUdevice_attribute attr,
                     const char *attrname, const char *fname, const char *cannot) {
  int v = 0;
  culua_check(L, culua_cu(L, fname)->cuDeviceGetAttribute(&v, attr, dev), fname,
              "reading %s of device %d", attrname, ordinal);
  if (v == 0)
    luaL_error(L, "%s: device %d %s: its %s is 0", fname, ordinal, cannot, attrname);
  return v;
}


void *culua_checkobj (lua_State *L, int i, const char *tname) {
  culua_Ctx *c = (culua_Ctx *)luaL_checkudata(L, i, tname);
  culua_ctx_enter(L, c, tname);
  return c;
}


void culua_ctx_bump (int ordinal) {
  generation[ordinal % CULUA_MAXDEVICES]++;
}


/*
** An access this state enabled is not asked for again: the driver answers
** CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, an error compute-sanitizer counts.
** The answer is still success when the host or another state enabled it.
*/
CUresult culua_enable_peer (lua_State *L, int from, CUcontext to, int toord) {
  culua_State *S = culua_state(L);
  CUresult r;
  if (from < 64 && toord < 64 && (S->peers[from] >> toord & 1)) return CUDA_SUCCESS;
  r = culua_load_driver(NULL)->cuCtxEnablePeerAccess(to, 0);
  if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) r = CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && from < 64 && toord < 64)   /* launches check arrays of other devices against it */
    S->peers[from] |= 1ULL << toord;
  return r;
}

/* }====================================================== */
