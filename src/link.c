/*
** link.c
** cuda.link: the driver's linker (cuLink*), for programs compiled with
** {rdc = true} that call one another's device functions or launch kernels
** from the device (dynamic parallelism, which needs libcudadevrt.a).
**
**   local image = cuda.link{parent, child, "cudadevrt", options = {...}}
**   local mod = cuda.load(image)
*/

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "culua_int.h"


#define LINKER    "cuda.linker"   /* internal: frees the link state on errors */
#define LOGSIZE   16384
#define MAXINPUTS 64


/* {====================================================== libcudadevrt.a */

static int readable (const char *path) {
  return access(path, R_OK) == 0;
}


/*
** Where the device runtime library is: the toolkit that NVRTC came from
** first (its lib64 holds both), then CUDA_HOME, the toolkit configure
** found, and the usual place. CULUA_LIBCUDADEVRT, when set, is the only
** candidate. Fills buf and returns it, or NULL with the places tried in buf.
*/
static const char *find_cudadevrt (char *buf, size_t size) {
  const char *forced = getenv("CULUA_LIBCUDADEVRT");
  const char *home = getenv("CUDA_HOME");
  const char *nvrtc = culua_nvrtc_file();
  char dirs[4][4096];
  int n = 0, i;
  size_t used = 0;
  if (forced && *forced) {
    snprintf(buf, size, "%s", forced);
    if (readable(buf)) return buf;
    snprintf(buf, size, "CULUA_LIBCUDADEVRT=%s", forced);
    return NULL;
  }
  if (nvrtc != NULL) {
    const char *slash = strrchr(nvrtc, '/');
    if (slash != NULL) snprintf(dirs[n++], sizeof(dirs[0]), "%.*s", (int)(slash - nvrtc), nvrtc);
  }
  if (home && *home) snprintf(dirs[n++], sizeof(dirs[0]), "%s/lib64", home);
  snprintf(dirs[n++], sizeof(dirs[0]), "%s", CULUA_CUDA_LIBDIR);
  snprintf(dirs[n++], sizeof(dirs[0]), "/usr/local/cuda/lib64");
  for (i = 0; i < n; i++) {
    if (dirs[i][0] == '\0') continue;   /* unconfigured */
    snprintf(buf, size, "%s/libcudadevrt.a", dirs[i]);
    if (readable(buf)) return buf;
  }
  buf[0] = '\0';
  for (i = 0; i < n && used + 2 < size; i++) {
    if (dirs[i][0] == '\0') continue;
    snprintf(buf + used, size - used, "%s%s", used ? ", " : "", dirs[i]);
    used = strlen(buf);
  }
  return NULL;
}


const char *culua_cudadevrt (char *buf, size_t size) {
  return find_cudadevrt(buf, size);
}

/* }====================================================== */


/* {====================================================== inputs and options */

typedef struct Input {
  CUjitInputType type;
  const char *data;     /* the image (a program's), or NULL for a file */
  size_t size;
  const char *name;     /* a program's name or the file's path */
} Input;


/* the input type of a file, from its name */
static int file_type (const char *path, CUjitInputType *t) {
  static const struct { const char *ext; CUjitInputType t; } types[] = {
    {".a", CU_JIT_INPUT_LIBRARY}, {".ptx", CU_JIT_INPUT_PTX}, {".cubin", CU_JIT_INPUT_CUBIN},
    {".fatbin", CU_JIT_INPUT_FATBINARY}, {".o", CU_JIT_INPUT_OBJECT}, {NULL, CU_JIT_INPUT_PTX}
  };
  size_t n = strlen(path);
  int i;
  for (i = 0; types[i].ext != NULL; i++) {
    size_t e = strlen(types[i].ext);
    if (n > e && strcmp(path + n - e, types[i].ext) == 0) {
      *t = types[i].t;
      return 1;
    }
  }
  return 0;
}


/*
** Input k (1-based) of the table at 1, into in. Strings are anchored in
** the table, and a program's image in the table at stash.
*/
static void read_input (lua_State *L, int k, int stash, Input *in, char *devrt, size_t devrtsize) {
  int t = lua_rawgeti(L, 1, k);
  if (luaL_testudata(L, -1, CULUA_PROGRAM)) {
    lua_getfield(L, -1, "name");
    in->name = lua_tostring(L, -1);
    lua_rawseti(L, stash, 2 * k);
    if (lua_getfield(L, -1, "cubin") != LUA_TNIL) in->type = CU_JIT_INPUT_CUBIN;
    else {
      lua_pop(L, 1);
      lua_getfield(L, -1, "ptx");
      in->type = CU_JIT_INPUT_PTX;
    }
    in->data = lua_tolstring(L, -1, &in->size);
    if (in->data == NULL) luaL_error(L, "cuda.link: input %d is a cuda.program without code", k);
    if (in->type == CU_JIT_INPUT_PTX) in->size++;   /* PTX goes with its terminating NUL */
    lua_rawseti(L, stash, 2 * k - 1);
  }
  else if (t == LUA_TSTRING) {
    const char *s = lua_tostring(L, -1);
    if (strcmp(s, "cudadevrt") == 0) {
      if (find_cudadevrt(devrt, devrtsize) == NULL)
        luaL_error(L, "cuda.link: libcudadevrt.a not found (looked in %s; set CULUA_LIBCUDADEVRT)", devrt);
      in->name = lua_pushstring(L, devrt);
      lua_rawseti(L, stash, 2 * k);
      in->type = CU_JIT_INPUT_LIBRARY;
    }
    else {
      if (!file_type(s, &in->type))
        luaL_error(L, "cuda.link: input %d '%s' is not a .ptx, .cubin, .fatbin, .o or .a file", k, s);
      if (!readable(s)) luaL_error(L, "cuda.link: input %d: cannot read '%s'", k, s);
      in->name = s;
    }
    in->data = NULL;
  }
  else
    luaL_error(L, "cuda.link: input %d must be a cuda.program, \"cudadevrt\" or a file name, not %s", k,
               luaL_typename(L, -1));
  lua_pop(L, 1);
}


/* the linker options culua knows, as JIT options with integer values */
static const struct { const char *name; CUjit_option opt; int boolean; } link_opts[] = {
  {"max_registers", CU_JIT_MAX_REGISTERS, 0},
  {"optimization_level", CU_JIT_OPTIMIZATION_LEVEL, 0},
  {"lineinfo", CU_JIT_GENERATE_LINE_INFO, 1},
  {"debug", CU_JIT_GENERATE_DEBUG_INFO, 1},
  {"verbose", CU_JIT_LOG_VERBOSE, 1},
  {NULL, CU_JIT_NUM_OPTIONS, 0}
};

#define NLINKOPTS 5


/* the table at i into opts/vals after the log options; returns the new count */
static unsigned read_options (lua_State *L, int i, CUjit_option *opts, void **vals, unsigned n) {
  if (lua_isnil(L, i)) return n;
  if (!lua_istable(L, i)) luaL_error(L, "cuda.link: options must be a table, not %s", luaL_typename(L, i));
  lua_pushnil(L);
  while (lua_next(L, i)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    int j;
    for (j = 0; k != NULL && link_opts[j].name != NULL; j++)
      if (strcmp(link_opts[j].name, k) == 0) break;
    if (k == NULL || link_opts[j].name == NULL)
      luaL_error(L, "cuda.link: unknown option %s (known: max_registers, optimization_level, lineinfo, "
                 "debug, verbose)", k ? lua_pushfstring(L, "'%s'", k) : luaL_typename(L, -2));
    opts[n] = link_opts[j].opt;
    if (link_opts[j].boolean) vals[n] = (void *)(uintptr_t)lua_toboolean(L, -1);
    else {
      int isint;
      lua_Integer v = lua_tointegerx(L, -1, &isint);
      if (!isint || v < 0 || v > 0x7fffffff)
        luaL_error(L, "cuda.link: option %s must be a non-negative integer", k);
      vals[n] = (void *)(uintptr_t)v;
    }
    n++;
    lua_pop(L, 1);
  }
  return n;
}

/* }====================================================== */


/* {====================================================== linking */

/* the link state, a userdata so that an error anywhere frees it */
typedef struct Linker {
  culua_Ctx c;
  CUlinkState state;
  char info[LOGSIZE], err[LOGSIZE];
} Linker;


static void linker_free (Linker *k) {
  if (k->state != NULL && culua_ctx_live(&k->c))
    culua_load_driver(NULL)->cuLinkDestroy(k->state);
  k->state = NULL;
  culua_ctx_close(&k->c);
}


static int linker_gc (lua_State *L) {
  linker_free((Linker *)luaL_checkudata(L, 1, LINKER));
  return 0;
}


/*
** cuda.link{input, ... [, options = {...}] [, device = n]} -> cubin (and the
** linker's info log with options.verbose).
** Inputs: cuda.programs (PTX or CUBIN, usually compiled with rdc = true),
** "cudadevrt" (the device runtime that device-side launches call), or
** names of .ptx/.cubin/.fatbin/.o/.a files. The image is for the device
** the link ran on; load it with cuda.load.
*/
static int cuda_link (lua_State *L) {
  Input in[MAXINPUTS];
  int n, k, ordinal = -1, stash, verbose = 0;
  CUjit_option opts[4 + NLINKOPTS];
  void *vals[4 + NLINKOPTS];
  unsigned nopts;
  char devrt[4096];
  Linker *lk;
  const culua_Driver *cu;
  void *cubin = NULL;
  size_t size = 0;
  CUresult r;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  n = (int)luaL_len(L, 1);
  if (n == 0) luaL_error(L, "cuda.link: nothing to link (a list of programs, \"cudadevrt\" or files)");
  if (n > MAXINPUTS) luaL_error(L, "cuda.link: more than %d inputs", MAXINPUTS);
  lua_pushnil(L);   /* only array entries, options and device: a misspelt key must not be ignored */
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n) continue;
    if (lua_type(L, -1) == LUA_TSTRING &&
        (strcmp(lua_tostring(L, -1), "options") == 0 || strcmp(lua_tostring(L, -1), "device") == 0)) continue;
    luaL_error(L, "cuda.link: unknown key %s (inputs 1..%d, options, device)",
               lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -1))
                                              : luaL_tolstring(L, -1, NULL), n);
  }
  if (lua_getfield(L, 1, "device") != LUA_TNIL) ordinal = (int)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  lua_createtable(L, 2 * n, 0);
  stash = lua_gettop(L);
  for (k = 1; k <= n; k++) read_input(L, k, stash, &in[k - 1], devrt, sizeof(devrt));
  lk = (Linker *)lua_newuserdatauv(L, sizeof(Linker), 0);
  memset(lk, 0, sizeof(*lk));
  luaL_setmetatable(L, LINKER);
  opts[0] = CU_JIT_INFO_LOG_BUFFER; vals[0] = lk->info;
  opts[1] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES; vals[1] = (void *)(uintptr_t)LOGSIZE;
  opts[2] = CU_JIT_ERROR_LOG_BUFFER; vals[2] = lk->err;
  opts[3] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES; vals[3] = (void *)(uintptr_t)LOGSIZE;
  lua_getfield(L, 1, "options");
  nopts = read_options(L, lua_gettop(L), opts, vals, 4);
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "verbose");
    verbose = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  culua_ctx_open(L, &lk->c, ordinal, "cuda.link");
  cu = culua_cu(L, "cuda.link");
  culua_check(L, cu->cuLinkCreate(nopts, opts, vals, &lk->state), "cuda.link",
              "creating a link on device %d", lk->c.ordinal);
  for (k = 0; k < n; k++) {
    r = in[k].data ? cu->cuLinkAddData(lk->state, in[k].type, (void *)in[k].data, in[k].size, in[k].name,
                                       0, NULL, NULL)
                   : cu->cuLinkAddFile(lk->state, in[k].type, in[k].name, 0, NULL, NULL);
    /* the log is what the user needs (an undefined symbol, say): all of it,
    ** not culua_cufail's 256 bytes */
    if (r != CUDA_SUCCESS)
      return luaL_error(L, "cuda.link: %s adding input %d (%s) on device %d: %s", culua_cuname(r), k + 1,
                        in[k].name, lk->c.ordinal, lk->err[0] ? lk->err : "(no log)");
  }
  r = cu->cuLinkComplete(lk->state, &cubin, &size);
  if (r != CUDA_SUCCESS)
    return luaL_error(L, "cuda.link: %s linking %d inputs on device %d: %s", culua_cuname(r), n,
                      lk->c.ordinal, lk->err[0] ? lk->err : "(no log)");
  lua_pushlstring(L, (const char *)cubin, size);
  if (verbose) lua_pushstring(L, lk->info);
  linker_free(lk);   /* now, not at the next collection */
  /* the image alone, so that cuda.load(cuda.link{...}) reads as it should;
  ** the linker's report too when it was asked for */
  return verbose ? 2 : 1;
}

/* }====================================================== */


static const luaL_Reg linker_meta[] = {
  {"__gc", linker_gc},
  {NULL, NULL}
};

static const luaL_Reg linker_methods[] = {
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"link", cuda_link},
  {NULL, NULL}
};


void culua_open_link (lua_State *L) {
  culua_newmeta(L, LINKER, linker_meta, linker_methods);
  luaL_setfuncs(L, funcs, 0);
}
