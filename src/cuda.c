/*
** cuda.c
** The `cuda` module itself, on top of everything, as Lua's linit.c is: the
** functions that belong to no object, the list of openers (one a binding
** file) and the host API of culua.h.
*/

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lualib.h>

#include "culua_int.h"


/* {====================================================== module functions */

/* cuda.live("arrays" | "kernels") -> {{object, "file:line"}, ...}: what is alive */
static int cuda_live (lua_State *L) {
  static const char *const kinds[] = {"arrays", "kernels", NULL};
  static const char *const keys[] = {CULUA_TRACK_ARRAYS, CULUA_TRACK_KERNELS};
  int k = luaL_checkoption(L, 1, NULL, kinds), n = 0;
  lua_newtable(L);
  if (lua_getfield(L, LUA_REGISTRYINDEX, keys[k]) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {            /* list, reg, obj, where */
      lua_createtable(L, 2, 0);
      lua_pushvalue(L, -3);
      lua_rawseti(L, -2, 1);
      lua_pushvalue(L, -2);
      lua_rawseti(L, -2, 2);
      lua_rawseti(L, -5, ++n);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return 1;
}


/* cuda.driver_version() -> 13000, or fail, message when there is no driver */
static int cuda_driver_version (lua_State *L) {
  const char *why = NULL;
  const culua_Driver *cu = culua_load_driver(&why);
  int v = 0;
  if (cu == NULL) {
    luaL_pushfail(L);
    lua_pushfstring(L, "no CUDA driver: %s", why);
    return 2;
  }
  culua_check(L, cu->cuDriverGetVersion(&v), "cuda.driver_version", "asking the driver");
  lua_pushinteger(L, v);
  return 1;
}


/* cuda.nvrtc_version() -> major, minor */
static int cuda_nvrtc_version (lua_State *L) {
  const culua_Nvrtc *rtc = culua_rtc(L, "cuda.nvrtc_version");
  int major = 0, minor = 0;
  rtc->nvrtcVersion(&major, &minor);
  lua_pushinteger(L, major);
  lua_pushinteger(L, minor);
  return 2;
}


/* cuda.device_count() -> n; 0 when there is no driver or no GPU, never raises */
static int cuda_device_count (lua_State *L) {
  const culua_Driver *cu = culua_load_driver(NULL);
  int n = 0;
  if (cu == NULL || culua_driver_init() != CUDA_SUCCESS ||
      cu->cuDeviceGetCount(&n) != CUDA_SUCCESS)
    n = 0;
  lua_pushinteger(L, n);
  return 1;
}


/* cuda.libraries() -> {driver=path|false, driver_error=, nvrtc=, nvrtc_error=, cudadevrt=} */
static int cuda_libraries (lua_State *L) {
  const char *why = NULL;
  lua_createtable(L, 0, 4);
  if (culua_load_driver(&why)) {
    lua_pushstring(L, culua_driver_path());
    lua_setfield(L, -2, "driver");
    if (culua_driver_init() != CUDA_SUCCESS) {
      lua_pushstring(L, culua_cuname(culua_driver_init()));
      lua_setfield(L, -2, "driver_error");
    }
  }
  else {
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "driver");
    lua_pushstring(L, why);
    lua_setfield(L, -2, "driver_error");
  }
  if (culua_load_nvrtc(&why)) {
    lua_pushstring(L, culua_nvrtc_path());
    lua_setfield(L, -2, "nvrtc");
  }
  else {
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "nvrtc");
    lua_pushstring(L, why);
    lua_setfield(L, -2, "nvrtc_error");
  }
  {
    char buf[4096];
    if (culua_cudadevrt(buf, sizeof(buf))) lua_pushstring(L, buf);
    else lua_pushboolean(L, 0);
    lua_setfield(L, -2, "cudadevrt");
  }
  return 1;
}


/* cuda.clock() -> seconds on a monotonic clock, for host-side timings */
static int cuda_clock (lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}


/* cuda.bench(fn [, opts]): lua/bench.lua does the work */
static int cuda_bench (lua_State *L) {
  int n = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "culua.bench");
  lua_call(L, 1, 1);
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}


/* cuda.type(x) -> "cuda.array", "cuda.stream", ... or nil, like io.type */
static int cuda_type (lua_State *L) {
  static const char *const names[] = {
    CULUA_DEVICE, CULUA_ARRAY, CULUA_HOSTARRAY, CULUA_STREAM, CULUA_EVENT,
    CULUA_MODULE, CULUA_KERNEL, CULUA_PROGRAM, CULUA_GRAPH, CULUA_TEXTURE, CULUA_SCALAR, CULUA_NCCLCOMM, NULL
  };
  int i;
  luaL_checkany(L, 1);
  for (i = 0; names[i] != NULL; i++)
    if (luaL_testudata(L, 1, names[i])) {
      lua_pushstring(L, names[i]);
      return 1;
    }
  luaL_pushfail(L);
  return 1;
}


static const luaL_Reg cuda_funcs[] = {
  {"type", cuda_type},
  {"bench", cuda_bench},
  {"clock", cuda_clock},
  {"live", cuda_live},
  {"driver_version", cuda_driver_version},
  {"nvrtc_version", cuda_nvrtc_version},
  {"device_count", cuda_device_count},
  {"libraries", cuda_libraries},
  {NULL, NULL}
};

/* }====================================================== */


/* {====================================================== the openers */

/* every binding adds its metatables and functions to the table on top */
int luaopen_cuda (lua_State *L) {
  culua_state(L);
  luaL_newlib(L, cuda_funcs);            /* cuda */
  lua_pushliteral(L, CULUA_VERSION);
  lua_setfield(L, -2, "version");
  culua_open_device(L);
  culua_open_array(L);
  culua_open_hostarray(L);
  culua_open_stream(L);
  culua_open_event(L);
  culua_open_graph(L);
  culua_open_module(L);
  culua_open_kernel(L);
  culua_open_program(L);
  culua_open_texture(L);
  culua_open_scalar(L);
  culua_open_link(L);
  culua_open_nvtx(L);
  culua_open_catalog(L);
  culua_open_reference(L);   /* into the catalog's table */
  culua_open_nccl(L);
  culua_open_mpi(L);
  culua_open_luamods(L);
  return 1;
}

/* }====================================================== */


/* {====================================================== host API (culua.h) */

/*
** As luaL_openlibs gives `string`: the standard libraries, culua's Lua
** modules preloaded, and `cuda` opened into package.loaded and the global
** `cuda`. Opening it makes no CUDA object, so culua_set_context may follow.
*/
void culua_openlibs (lua_State *L) {
  luaL_openlibs(L);
  culua_open_luamods(L);
  luaL_requiref(L, "cuda", luaopen_cuda, 1);
  lua_pop(L, 1);
}


int culua_set_context (lua_State *L, struct CUctx_st *ctx) {
  culua_State *S = culua_state(L);
  if (S->objects > 0) return -1;  /* they hold the other context */
  S->host_ctx = ctx;
  return 0;
}

/* }====================================================== */
