/*
** device.c
** cuda.device: a GPU and its attributes. Also cuda.synchronize and
** cuda.reset. The contexts that every object holds are context.c's.
*/

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "culua_int.h"


typedef struct Device {
  culua_Ctx c;         /* retained lazily, by use() and memory queries */
  CUdevice dev;
  int ordinal;
} Device;


static const struct DevAttr {
  const char *name;
  int attr;
  int deprecated;   /* left out of dev:attributes(), still answered by name */
} devattrs[] = {
#include "devattr.inc"
  {NULL, 0, 0}
};


/* {====================================================== cuda.device */

static Device *check_device (lua_State *L, int i) {
  return (Device *)luaL_checkudata(L, i, CULUA_DEVICE);
}


/* the device's own retained context, taken on first need */
static culua_Ctx *device_ctx (lua_State *L, Device *d, const char *fname) {
  if (d->c.ctx != NULL && culua_ctx_stale(&d->c))
    culua_ctx_close(&d->c);  /* reset under us: take a fresh reference */
  if (d->c.ctx == NULL)
    culua_ctx_open(L, &d->c, d->ordinal, fname);
  else
    culua_ctx_enter(L, &d->c, CULUA_DEVICE);
  return &d->c;
}


static const char *const regkey = "cuda.devices";  /* ordinal -> device */

/*
** Push device `ordinal`: one userdata an ordinal and state, made (and the
** ordinal checked with the driver) on first use; later pushes are a table
** read, since arrays' `device` field is read in every catalog call.
*/
void culua_pushdevice (lua_State *L, int ordinal, const char *fname) {
  Device *d;
  CUdevice dev;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, regkey);   /* devices */
  if (lua_rawgeti(L, -1, ordinal) != LUA_TNIL) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  dev = culua_ctx_device(L, ordinal, fname);
  d = (Device *)lua_newuserdatauv(L, sizeof(Device), 0);  /* devices, d */
  memset(d, 0, sizeof(*d));
  d->dev = dev;
  d->ordinal = ordinal;
  luaL_setmetatable(L, CULUA_DEVICE);
  lua_pushvalue(L, -1);
  lua_rawseti(L, -3, ordinal);
  lua_remove(L, -2);
}


static int getattr (lua_State *L, Device *d, int attr, int *v) {
  const culua_Driver *cu = culua_cu(L, "cuda.device");
  return cu->cuDeviceGetAttribute(v, (CUdevice_attribute)attr, d->dev) == CUDA_SUCCESS;
}


static int attr_number (lua_State *L, Device *d, int attr) {
  int v = 0;
  if (!getattr(L, d, attr, &v))
    luaL_error(L, "cuda.device: cannot read attribute %d of device %d", attr, d->ordinal);
  return v;
}


/* dev:attribute(name) -> integer */
static int device_attribute (lua_State *L) {
  Device *d = check_device(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const struct DevAttr *a;
  const culua_Driver *cu = culua_cu(L, "attribute");
  int v = 0;
  for (a = devattrs; a->name != NULL; a++)
    if (strcmp(a->name, name) == 0) break;
  if (a->name == NULL)
    return luaL_argerror(L, 2, lua_pushfstring(L, "unknown attribute '%s'", name));
  culua_check(L, cu->cuDeviceGetAttribute(&v, (CUdevice_attribute)a->attr, d->dev),
              "attribute", "reading '%s' of device %d", name, d->ordinal);
  lua_pushinteger(L, v);
  return 1;
}


/* dev:attributes() -> {name = value, ...}, every attribute this driver answers */
static int device_attributes (lua_State *L) {
  Device *d = check_device(L, 1);
  const struct DevAttr *a;
  lua_newtable(L);
  for (a = devattrs; a->name != NULL; a++) {
    int v;
    if (a->deprecated || !getattr(L, d, a->attr, &v)) continue;
    lua_pushinteger(L, v);
    lua_setfield(L, -2, a->name);
  }
  return 1;
}


/* dev:memory_info() -> free, total (bytes) */
static int device_memory_info (lua_State *L) {
  Device *d = check_device(L, 1);
  size_t freeb = 0, total = 0;
  device_ctx(L, d, "memory_info");
  culua_check(L, culua_cu(L, "memory_info")->cuMemGetInfo(&freeb, &total),
              "memory_info", "on device %d", d->ordinal);
  lua_pushinteger(L, (lua_Integer)freeb);
  lua_pushinteger(L, (lua_Integer)total);
  return 2;
}


/* dev:use() -> dev; new objects go to this device from now on */
static int device_use (lua_State *L) {
  Device *d = check_device(L, 1);
  device_ctx(L, d, "use");
  culua_state(L)->device = d->ordinal;
  lua_settop(L, 1);
  return 1;
}


/* the context limits by name, in the order an error lists them */
static const struct { const char *name; CUlimit limit; } limits[] = {
  {"stack_size", CU_LIMIT_STACK_SIZE},
  {"printf_fifo_size", CU_LIMIT_PRINTF_FIFO_SIZE},
  {"malloc_heap_size", CU_LIMIT_MALLOC_HEAP_SIZE},
  {"dev_runtime_sync_depth", CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH},
  {"dev_runtime_pending_launch_count", CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT},
  {"max_l2_fetch_granularity", CU_LIMIT_MAX_L2_FETCH_GRANULARITY},
  {"persisting_l2_cache_size", CU_LIMIT_PERSISTING_L2_CACHE_SIZE},
  {NULL, CU_LIMIT_MAX}
};


/* the limit named at index i, raising with the valid names */
static int check_limit (lua_State *L, int i, const char *fname) {
  const char *name = luaL_checkstring(L, i);
  luaL_Buffer b;
  int j;
  for (j = 0; limits[j].name != NULL; j++)
    if (strcmp(limits[j].name, name) == 0) return j;
  luaL_buffinit(L, &b);
  for (j = 0; limits[j].name != NULL; j++) {
    if (j > 0) luaL_addstring(&b, ", ");
    luaL_addstring(&b, limits[j].name);
  }
  luaL_pushresult(&b);
  return luaL_argerror(L, i, lua_pushfstring(L, "%s: unknown limit '%s' (valid: %s)", fname, name,
                                             lua_tostring(L, -1)));
}


/*
** dev:limit(name [, value]) -> the limit's value (after setting it, as the
** driver may round it: the stack size goes up to its granularity)
*/
static int limit_of (lua_State *L, int devidx, int nameidx, const char *fname) {
  int j = check_limit(L, nameidx, fname);
  int set = !lua_isnoneornil(L, nameidx + 1);
  lua_Integer v = set ? luaL_checkinteger(L, nameidx + 1) : 0;
  const culua_Driver *cu;
  Device *d;
  size_t got = 0;
  luaL_argcheck(L, v >= 0, nameidx + 1, "a limit must not be negative");
  d = check_device(L, devidx);
  cu = culua_cu(L, fname);
  device_ctx(L, d, fname);
  if (set)
    culua_check(L, cu->cuCtxSetLimit(limits[j].limit, (size_t)v), fname, "setting %s to %lld on device %d",
                limits[j].name, (long long)v, d->ordinal);
  culua_check(L, cu->cuCtxGetLimit(&got, limits[j].limit), fname, "reading %s on device %d",
              limits[j].name, d->ordinal);
  lua_pushinteger(L, (lua_Integer)got);
  return 1;
}


static int device_limit (lua_State *L) {
  return limit_of(L, 1, 2, "limit");
}


/* dev:synchronize(): wait for everything queued on the device */
static int device_synchronize (lua_State *L) {
  Device *d = check_device(L, 1);
  device_ctx(L, d, "synchronize");
  culua_check(L, culua_cu(L, "synchronize")->cuCtxSynchronize(), "synchronize",
              "on device %d", d->ordinal);
  return 0;
}


/* dev:can_access_peer(other) -> boolean */
static int device_can_access_peer (lua_State *L) {
  Device *d = check_device(L, 1), *o = check_device(L, 2);
  int can = 0;
  if (d->ordinal != o->ordinal)
    culua_check(L, culua_cu(L, "can_access_peer")->cuDeviceCanAccessPeer(&can, d->dev, o->dev),
                "can_access_peer", "from device %d to %d", d->ordinal, o->ordinal);
  lua_pushboolean(L, can);
  return 1;
}


/* dev:enable_peer_access(other): let kernels on dev read other's memory */
static int device_enable_peer_access (lua_State *L) {
  Device *d = check_device(L, 1), *o = check_device(L, 2);
  culua_Ctx *oc;
  CUresult r;
  luaL_argcheck(L, d->ordinal != o->ordinal, 2, "a device is always its own peer");
  oc = device_ctx(L, o, "enable_peer_access");
  device_ctx(L, d, "enable_peer_access");
  r = culua_enable_peer(L, d->ordinal, oc->ctx, o->ordinal);
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, "enable_peer_access", "from device %d to %d", d->ordinal, o->ordinal);
  return 0;
}


static int device_index (lua_State *L) {
  Device *d = check_device(L, 1);
  const char *k = luaL_checkstring(L, 2);
  const culua_Driver *cu = culua_cu(L, "cuda.device");
  if (strcmp(k, "ordinal") == 0)
    lua_pushinteger(L, d->ordinal);
  else if (strcmp(k, "name") == 0) {
    char name[256];
    culua_check(L, cu->cuDeviceGetName(name, sizeof(name), d->dev), "cuda.device",
                "reading the name of device %d", d->ordinal);
    lua_pushstring(L, name);
  }
  else if (strcmp(k, "major") == 0)
    lua_pushinteger(L, attr_number(L, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
  else if (strcmp(k, "minor") == 0)
    lua_pushinteger(L, attr_number(L, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
  else if (strcmp(k, "compute_capability") == 0 || strcmp(k, "arch") == 0) {
    int major = attr_number(L, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    int minor = attr_number(L, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    lua_pushfstring(L, k[0] == 'a' ? "sm_%d%d" : "%d.%d", major, minor);
  }
  else if (strcmp(k, "total_memory") == 0) {
    size_t total = 0;
    culua_check(L, cu->cuDeviceTotalMem(&total, d->dev), "cuda.device",
                "reading the memory size of device %d", d->ordinal);
    lua_pushinteger(L, (lua_Integer)total);
  }
  else if (strcmp(k, "pci_bus_id") == 0) {
    char id[64];
    culua_check(L, cu->cuDeviceGetPCIBusId(id, sizeof(id), d->dev), "cuda.device",
                "reading the PCI bus id of device %d", d->ordinal);
    lua_pushstring(L, id);
  }
  else if (strcmp(k, "uuid") == 0) {
    CUuuid u;
    const unsigned char *b = (const unsigned char *)u.bytes;
    char s[40];
    if (cu->cuDeviceGetUuid == NULL)
      return luaL_error(L, "cuda.device: this driver cannot report UUIDs");
    culua_check(L, cu->cuDeviceGetUuid(&u, d->dev), "cuda.device",
                "reading the UUID of device %d", d->ordinal);
    snprintf(s, sizeof(s), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
    lua_pushfstring(L, "GPU-%s", s);
  }
  else
    return culua_pushmethod(L, CULUA_DEVICE, 2);
  return 1;
}


static int device_tostring (lua_State *L) {
  Device *d = check_device(L, 1);
  char name[256], mem[32];
  size_t total = 0;
  const culua_Driver *cu = culua_cu(L, "cuda.device");
  culua_check(L, cu->cuDeviceGetName(name, sizeof(name), d->dev), "cuda.device",
              "reading the name of device %d", d->ordinal);
  cu->cuDeviceTotalMem(&total, d->dev);
  lua_pushfstring(L, "cuda.device(%d): %s, sm_%d%d, %s", d->ordinal, name,
                  attr_number(L, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                  attr_number(L, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
                  culua_bytes(mem, (double)total));
  return 1;
}


static int device_gc (lua_State *L) {
  culua_ctx_close(&check_device(L, 1)->c);
  return 0;
}


static const luaL_Reg device_meta[] = {
  {"__index", device_index},
  {"__tostring", device_tostring},
  {"__gc", device_gc},
  {NULL, NULL}
};

static const luaL_Reg device_methods[] = {
  {"attribute", device_attribute},
  {"attributes", device_attributes},
  {"memory_info", device_memory_info},
  {"use", device_use},
  {"synchronize", device_synchronize},
  {"limit", device_limit},
  {"can_access_peer", device_can_access_peer},
  {"enable_peer_access", device_enable_peer_access},
  {NULL, NULL}
};

/* }====================================================== */


/* {====================================================== module functions */

/* cuda.device([ordinal]) -> device; the state's current device by default */
static int cuda_device (lua_State *L) {
  int ordinal = (int)luaL_optinteger(L, 1, culua_state(L)->device);
  culua_pushdevice(L, ordinal, "cuda.device");
  return 1;
}


/* cuda.synchronize(): wait for the current device */
static int cuda_synchronize (lua_State *L) {
  lua_settop(L, 0);
  culua_pushdevice(L, culua_state(L)->device, "cuda.synchronize");
  return device_synchronize(L);
}


/* cuda.device_limit(name [, value]): dev:limit on the current device */
static int cuda_device_limit (lua_State *L) {
  /* the arguments before the device, so that misuse fails alike without a GPU */
  check_limit(L, 1, "cuda.device_limit");
  if (!lua_isnoneornil(L, 2))
    luaL_argcheck(L, luaL_checkinteger(L, 2) >= 0, 2, "a limit must not be negative");
  lua_settop(L, 2);
  culua_pushdevice(L, culua_state(L)->device, "cuda.device_limit");
  lua_insert(L, 1);
  return limit_of(L, 1, 2, "cuda.device_limit");
}


/*
** cuda.reset([ordinal]): destroy everything on the device's primary context,
** the way out after a kernel fault. Objects made before it refuse to be used.
*/
static int cuda_reset (lua_State *L) {
  culua_State *S = culua_state(L);
  int ordinal = (int)luaL_optinteger(L, 1, S->device);
  CUdevice dev = culua_ctx_device(L, ordinal, "cuda.reset");
  const culua_Driver *cu = culua_cu(L, "cuda.reset");
  CUcontext ctx;
  CUresult r;
  int version = 0;
  luaL_argcheck(L, S->host_ctx == NULL, 1, "the host owns the context; reset it there");
  cu->cuCtxSetCurrent(NULL);   /* no thread of ours keeps the old context bound */
  culua_check(L, cu->cuDevicePrimaryCtxReset(dev), "cuda.reset", "resetting device %d", ordinal);
  culua_ctx_bump(ordinal);
  S->journal_next = 0;
  /* the device's peer accesses, both ways, went with its context */
  if (ordinal < 64) {
    int i;
    S->peers[ordinal] = 0;
    for (i = 0; i < CULUA_MAXDEVICES; i++) S->peers[i] &= ~(1ULL << ordinal);
  }
  /* the catalog's loaded modules are gone with everything else, and the
  ** elementwise kernels (both kept by culua.catalog.core, loaded by either) */
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "culua.catalog.core") == LUA_TTABLE &&
      lua_getfield(L, -1, "clear") == LUA_TFUNCTION)
    lua_call(L, 0, 0);
  lua_settop(L, 1);
  /*
  ** A kernel fault (illegal address and the like) can outlive the reset:
  ** drivers may keep it for the life of the process (seen with 580 on an
  ** H100, where even a new context reports it). Find out now and say so,
  ** rather than fail later at some unrelated call.
  */
  r = cu->cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r == CUDA_SUCCESS) {
    cu->cuDevicePrimaryCtxRelease(dev);
    return 0;
  }
  cu->cuDriverGetVersion(&version);
  return luaL_error(L, "cuda.reset: %s persists after resetting device %d: this driver (CUDA %d.%d) "
                    "keeps a kernel fault for the life of the process; run the work again in a "
                    "new culua process", culua_cuname(r), ordinal, version / 1000, version % 1000 / 10);
}


static const luaL_Reg funcs[] = {
  {"device", cuda_device},
  {"synchronize", cuda_synchronize},
  {"reset", cuda_reset},
  {"device_limit", cuda_device_limit},
  {NULL, NULL}
};

/* }====================================================== */


void culua_open_device (lua_State *L) {
  culua_newmeta(L, CULUA_DEVICE, device_meta, device_methods);
  luaL_setfuncs(L, funcs, 0);
}
