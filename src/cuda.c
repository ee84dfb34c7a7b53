/*
** cuda.c
** The `cuda` module: its table, the functions that belong to no object,
** per-state data and the error helpers every binding uses.
*/

#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lualib.h>

#include "culua_int.h"


/* {====================================================== per-state data */

static const char state_key = 'S';   /* its address keys the registry */

/*
** The state lives in a userdata in the registry, so two lua_States in one
** process (a host running several) never share settings.
*/
culua_State *culua_state (lua_State *L) {
  culua_State *S;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key) == LUA_TUSERDATA) {
    S = (culua_State *)lua_touserdata(L, -1);
    lua_pop(L, 1);
    return S;
  }
  lua_pop(L, 1);
  S = (culua_State *)lua_newuserdatauv(L, sizeof(culua_State), 0);
  memset(S, 0, sizeof(*S));
  lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
  return S;
}


int culua_set_context (lua_State *L, struct CUctx_st *ctx) {
  culua_State *S = culua_state(L);
  if (S->objects > 0) return -1;  /* they hold the other context */
  S->host_ctx = ctx;
  return 0;
}

/* }====================================================== */


/* {====================================================== errors */

const culua_Driver *culua_cu (lua_State *L, const char *fname) {
  const char *why = NULL;
  const culua_Driver *cu = culua_load_driver(&why);
  if (cu == NULL)
    luaL_error(L, "%s: no CUDA driver: %s", fname, why);
  return cu;
}


const culua_Nvrtc *culua_rtc (lua_State *L, const char *fname) {
  const char *why = NULL;
  const culua_Nvrtc *rtc = culua_load_nvrtc(&why);
  if (rtc == NULL)
    luaL_error(L, "%s: NVRTC not available: %s", fname, why);
  return rtc;
}


const char *culua_cuname (CUresult r) {
  const culua_Driver *cu = culua_load_driver(NULL);
  const char *name = NULL;
  static char buf[32];  /* only for codes the driver does not know */
  if (cu != NULL && cu->cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
    return name;
  snprintf(buf, sizeof(buf), "CUDA error %d", (int)r);
  return buf;
}


/* errors after which the context is unusable until cuda.reset() */
static int sticky (CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_INVALID_PC: case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
      return 1;
    default:
      return 0;
  }
}


/*
** A kernel fault surfaces at some later call (a copy, a synchronize), far
** from the launch that caused it; the journal lets the message name the
** kernels that were in flight and the Lua lines that launched them.
*/
static void add_journal (lua_State *L, luaL_Buffer *b) {
  culua_State *S = culua_state(L);
  unsigned n = S->journal_next, i, shown = 0;
  if (n == 0) return;
  luaL_addstring(b, "; most recent launches:");
  for (i = n; i > 0 && shown < 4; i--, shown++) {
    const culua_Launch *e = &S->journal[(i - 1) % CULUA_JOURNAL];
    lua_pushfstring(L, " kernel '%s' at %s:%d%s", e->kernel, e->source, e->line,
                    shown == 0 ? " (last)" : "");
    luaL_addvalue(b);
  }
  luaL_addstring(b, "; call cuda.reset() to recover");
}


culua_noret culua_cufail (lua_State *L, CUresult r, const char *fname,
                          const char *fmt, ...) {
  luaL_Buffer b;
  va_list ap;
  char what[256];
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "%s: %s %s", fname, culua_cuname(r), what);
  luaL_addvalue(&b);
  if (sticky(r)) add_journal(L, &b);
  luaL_pushresult(&b);
  lua_error(L);
  for (;;) {}  /* not reached; keeps noreturn honest for the compiler */
}


int culua_pushready (lua_State *L, CUresult r, const char *fname, const char *what, int ordinal) {
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
    culua_cufail(L, r, fname, "%s on device %d", what, ordinal);
  lua_pushboolean(L, r == CUDA_SUCCESS);
  return 1;
}


const char *culua_bytes (char *buf, double n) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (n >= 1024.0 && u < 5) { n /= 1024.0; u++; }
  if (u == 0) snprintf(buf, 32, "%.0f B", n);
  else snprintf(buf, 32, "%.2f %s", n, units[u]);
  return buf;
}


int culua_caller (lua_State *L, lua_Debug *ar) {
  int level;
  /* the first Lua function up the stack: C frames (pcall) have no line */
  for (level = 1; lua_getstack(L, level, ar); level++) {
    lua_getinfo(L, "Sl", ar);
    if (ar->currentline > 0) return 1;
  }
  return 0;
}


/*
** An options table's keys must all be known: a misspelt option ignored in
** silence is an experiment that quietly ran with the defaults.
*/
void culua_checkoptions (lua_State *L, int t, const char *fname, const char *const known[]) {
  t = lua_absindex(L, t);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    int i, found = 0;
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING)
      for (i = 0; known[i] != NULL && !found; i++) found = strcmp(known[i], lua_tostring(L, -1)) == 0;
    if (!found) {
      luaL_Buffer b;
      const char *key = luaL_tolstring(L, -1, NULL);
      luaL_buffinit(L, &b);
      for (i = 0; known[i] != NULL; i++) {
        if (i > 0) luaL_addstring(&b, ", ");
        luaL_addstring(&b, known[i]);
      }
      luaL_pushresult(&b);
      luaL_error(L, "%s: unknown option '%s' (known: %s)", fname, key, lua_tostring(L, -1));
    }
  }
}


/*
** The value on top of the stack, an option `key` of fname, must be of type
** `type` (LUA_TNUMBER: an integer): "fname: key must be an integer, got
** string" names the option, where luaL_check* would say "bad argument #-1".
*/
void culua_checkfield (lua_State *L, const char *fname, const char *key, int type) {
  int ok = type == LUA_TNUMBER ? lua_isinteger(L, -1) : lua_type(L, -1) == type;
  if (!ok)
    luaL_error(L, "%s: %s must be %s, got %s", fname, key,
               type == LUA_TNUMBER ? "an integer" : type == LUA_TTABLE ? "a table" : "a string",
               lua_type(L, -1) == LUA_TNUMBER ? lua_pushfstring(L, "%s", luaL_tolstring(L, -1, NULL))
                                               : luaL_typename(L, -1));
}


/* the `device` option of the table at t: an ordinal >= 0 or a cuda.device; -1 when absent */
int culua_optdevice (lua_State *L, int t, const char *fname) {
  int ordinal = -1;
  if (lua_getfield(L, t, "device") != LUA_TNIL) {
    if (lua_isinteger(L, -1)) ordinal = (int)lua_tointeger(L, -1);
    else if (lua_isuserdata(L, -1) && lua_getfield(L, -1, "ordinal") == LUA_TNUMBER) {
      ordinal = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    else
      luaL_error(L, "%s: device must be a device ordinal or a cuda.device, got %s", fname, luaL_typename(L, -1));
    if (ordinal < 0 || lua_tointeger(L, -1) > 0x7fffffff)
      luaL_error(L, "%s: device must be an ordinal 0 or more, got %d", fname, ordinal);
  }
  lua_pop(L, 1);
  return ordinal;
}


/*
** Remember where (the Lua file:line that made it) the object at index obj
** comes from, in a weak-keyed registry table of its kind: the REPL's :mem
** and :kernels list what is alive and where it was made.
*/
void culua_track (lua_State *L, int obj, const char *kind) {
  lua_Debug ar;
  obj = lua_absindex(L, obj);
  if (!luaL_getsubtable(L, LUA_REGISTRYINDEX, kind)) {   /* new: its keys are weak */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
  }
  lua_pushvalue(L, obj);
  if (culua_caller(L, &ar)) lua_pushfstring(L, "%s:%d", ar.short_src, ar.currentline);
  else lua_pushliteral(L, "?");
  lua_rawset(L, -3);
  lua_pop(L, 1);
}


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


/*
** The methods table is kept as mt.methods; it is also __index unless meta
** brings its own __index (types with computed fields), which then ends in
** culua_pushmethod.
*/
void culua_newmeta (lua_State *L, const char *tname, const luaL_Reg *meta,
                    const luaL_Reg *methods) {
  luaL_newmetatable(L, tname);  /* mt */
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L);              /* mt, methods */
  luaL_setfuncs(L, methods, 0);
  if (lua_getfield(L, -2, "__index") == LUA_TNIL) {
    lua_pushvalue(L, -2);
    lua_setfield(L, -4, "__index");
  }
  lua_pop(L, 1);
  lua_setfield(L, -2, "methods");
  lua_pop(L, 1);
}


int culua_pushmethod (lua_State *L, const char *tname, int key) {
  key = lua_absindex(L, key);
  luaL_getmetatable(L, tname);
  lua_getfield(L, -1, "methods");
  lua_pushvalue(L, key);
  lua_rawget(L, -2);
  return 1;
}

/* }====================================================== */


/* {====================================================== module functions */

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
    CULUA_MODULE, CULUA_KERNEL, CULUA_PROGRAM, CULUA_GRAPH, CULUA_TEXTURE, NULL
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
  culua_open_link(L);
  culua_open_nvtx(L);
  culua_open_catalog(L);
  culua_open_nccl(L);
  culua_open_mpi(L);
  culua_open_luamods(L);
  return 1;
}


void culua_openlibs (lua_State *L) {
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_cuda);
  lua_setfield(L, -2, "cuda");
  lua_pop(L, 1);
  culua_open_luamods(L);
}
