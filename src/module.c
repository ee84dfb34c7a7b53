/*
** module.c
** cuda.module: PTX, CUBIN or fatbin loaded onto a device, with its
** kernels (mod:kernel) and its __device__/__constant__ symbols (mod:global).
*/

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "culua_int.h"


#define LOGSIZE 8192


typedef struct Module {
  culua_Ctx c;
  CUmodule m;
} Module;


static Module *check_module (lua_State *L, int i) {
  return (Module *)culua_checkobj(L, i, CULUA_MODULE);
}


/* PTX is text that declares its version; CUBIN and fatbin are binary */
static int is_ptx (const char *s, size_t n) {
  return memchr(s, '\0', n) == NULL && strstr(s, ".version") != NULL;
}


/* the image at i: a string, a cuda.program, or {file = path} (read here) */
static const char *get_image (lua_State *L, int i, size_t *n) {
  if (luaL_testudata(L, i, CULUA_PROGRAM)) {
    lua_getfield(L, i, "cubin");
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_getfield(L, i, "ptx");
    }
  }
  else if (lua_istable(L, i)) {
    const char *path;
    FILE *f;
    luaL_Buffer b;
    size_t got;
    lua_getfield(L, i, "file");
    path = luaL_checkstring(L, -1);
    if ((f = fopen(path, "rb")) == NULL)
      luaL_error(L, "cuda.load: cannot open %s", path);
    luaL_buffinit(L, &b);
    do {
      char *p = luaL_prepbuffer(&b);
      got = fread(p, 1, LUAL_BUFFERSIZE, f);
      luaL_addsize(&b, got);
    } while (got == LUAL_BUFFERSIZE);
    fclose(f);
    luaL_pushresult(&b);
  }
  else
    lua_pushvalue(L, i);
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_typeerror(L, i, "string, cuda.program or {file = path}");
  return lua_tolstring(L, -1, n);
}


/* little-endian fields of an image, read without alignment assumptions */
static uint64_t le (const unsigned char *p, int bytes) {
  uint64_t v = 0;
  while (bytes-- > 0) v = (v << 8) | p[bytes];
  return v;
}


/*
** Refuse an image the driver would read past the end of: a truncated
** CUBIN (ELF) or fatbin made the driver crash the process on an H100
** (driver 580), where an error was due. ELF: the section and program
** header tables, and every section with contents, lie inside the image;
** fatbin: its header's own size fits. PTX is text the driver parses
** safely (a Lua string always ends in a NUL).
*/
static void check_image (lua_State *L, const unsigned char *p, size_t n) {
  if (n >= 4 && memcmp(p, "\177ELF", 4) == 0) {
    uint64_t shoff, phoff, shnum, phnum, shent, phent, i;
    if (n < 64 || p[4] != 2)
      luaL_error(L, "cuda.load: a truncated or 32-bit ELF image (%I bytes)", (lua_Integer)n);
    phoff = le(p + 0x20, 8); shoff = le(p + 0x28, 8);
    phent = le(p + 0x36, 2); phnum = le(p + 0x38, 2);
    shent = le(p + 0x3a, 2); shnum = le(p + 0x3c, 2);
    if (phoff > n || phnum * phent > n - phoff || shoff > n || shnum * shent > n - shoff ||
        (shnum > 0 && shent < 64))
      luaL_error(L, "cuda.load: a truncated ELF image (%I bytes; its headers run past the end)", (lua_Integer)n);
    for (i = 0; i < shnum; i++) {
      const unsigned char *sh = p + shoff + i * shent;
      uint64_t type = le(sh + 4, 4), off = le(sh + 0x18, 8), size = le(sh + 0x20, 8);
      if (type != 8 && (off > n || size > n - off))   /* 8: SHT_NOBITS, no contents */
        luaL_error(L, "cuda.load: a truncated ELF image (%I bytes; section %I runs past the end)",
                   (lua_Integer)n, (lua_Integer)i);
    }
  }
  else if (n >= 4 && le(p, 4) == 0xBA55ED50u) {
    uint64_t head = n >= 16 ? le(p + 6, 2) : 0, size = n >= 16 ? le(p + 8, 8) : 0;
    if (n < 16 || head < 16 || head > n || size > n - head)
      luaL_error(L, "cuda.load: a truncated fatbin image (%I bytes)", (lua_Integer)n);
  }
}


/*
** cuda.load(image | program | {file = path} [, {device = ordinal, ptx = text}])
** -> module. ptx: the PTX a binary image was built from, or just its .entry
** declarations: kernels take their signatures from it (a CUBIN's own
** .nv.info gives sizes only; a fatbin's, nothing culua reads), and the module
** has no kernel that it does not declare.
*/
int culua_load (lua_State *L) {
  size_t n;
  int ordinal = -1, imgidx;
  const char *image;
  Module *m;
  CUresult r;
  char *info, *err;
  CUjit_option opts[5] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_LOG_VERBOSE};
  void *vals[5];
  if (!lua_isnoneornil(L, 2)) {
    static const char *const known[] = {"device", "ptx", NULL};
    luaL_checktype(L, 2, LUA_TTABLE);
    culua_checkoptions(L, 2, "cuda.load", known);
    ordinal = culua_optdevice(L, 2, "cuda.load");
    lua_getfield(L, 2, "ptx");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "cuda.load: ptx must be PTX text (the .entry declarations of the image's kernels), got %s",
                 luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  image = get_image(L, 1, &n);
  check_image(L, (const unsigned char *)image, n);
  imgidx = lua_gettop(L);
  info = (char *)lua_newuserdatauv(L, 2 * LOGSIZE, 0);
  err = info + LOGSIZE;
  info[0] = err[0] = '\0';
  vals[0] = info;
  vals[1] = (void *)(uintptr_t)LOGSIZE;
  vals[2] = err;
  vals[3] = (void *)(uintptr_t)LOGSIZE;
  vals[4] = (void *)(uintptr_t)0;
  m = (Module *)lua_newuserdatauv(L, sizeof(Module), 1);
  memset(m, 0, sizeof(Module));
  luaL_setmetatable(L, CULUA_MODULE);
  culua_ctx_open(L, &m->c, ordinal, "cuda.load");
  r = culua_cu(L, "cuda.load")->cuModuleLoadDataEx(&m->m, image, 5, opts, vals);
  if (r != CUDA_SUCCESS) {
    culua_ctx_close(&m->c);
    culua_cufail(L, r, "cuda.load", "loading a %s of %d bytes on device %d%s%s",
                 is_ptx(image, n) ? "PTX module" : "binary image", (int)n, m->c.ordinal,
                 err[0] ? ": " : "", err);
  }
  lua_createtable(L, 0, 4);                 /* fields: ptx, entries, elf (for signatures), log */
  if (is_ptx(image, n)) {
    lua_pushvalue(L, imgidx);
    lua_setfield(L, -2, "ptx");
  }
  else if (n >= 4 && memcmp(image, "\177ELF", 4) == 0) {
    lua_pushvalue(L, imgidx);
    lua_setfield(L, -2, "elf");
  }
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "ptx");
    lua_setfield(L, -2, "entries");
  }
  lua_pushstring(L, info);
  lua_setfield(L, -2, "log");
  lua_setiuservalue(L, -2, 1);
  return 1;
}


static int module_close (lua_State *L) {
  Module *m = (Module *)luaL_checkudata(L, 1, CULUA_MODULE);
  if (culua_ctx_live(&m->c)) culua_load_driver(NULL)->cuModuleUnload(m->m);
  culua_ctx_close(&m->c);
  return 0;
}


static int nokernel (lua_State *L, const char *name) {
  return luaL_error(L, "kernel: no kernel '%s' in the module (C++ names are mangled: use "
                    "extern \"C\" or name_expressions)", name);
}


/*
** mod:kernel(name) -> kernel. A module loaded with cuda.load's ptx option
** has no kernel that option does not declare: asked for another (the
** catalog asks for variants that may not be prebuilt), it says so without
** the driver lookup that would fail.
*/
static int module_kernel (lua_State *L) {
  Module *m = check_module(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const char *ptx, *entries, *elf;
  size_t elfsize = 0;
  CUfunction f;
  CUresult r;
  lua_settop(L, 2);
  lua_getiuservalue(L, 1, 1);               /* mod, name, fields */
  lua_getfield(L, 3, "ptx");
  lua_getfield(L, 3, "entries");
  lua_getfield(L, 3, "elf");                /* mod, name, fields, ptx, entries, elf */
  ptx = lua_tostring(L, 4);
  entries = lua_tostring(L, 5);
  elf = lua_tolstring(L, 6, &elfsize);
  if (entries != NULL && !culua_hasentry(entries, name)) return nokernel(L, name);
  r = culua_cu(L, "kernel")->cuModuleGetFunction(&f, m->m, name);
  if (r == CUDA_ERROR_NOT_FOUND) return nokernel(L, name);
  if (r != CUDA_SUCCESS) culua_cufail(L, r, "kernel", "looking up '%s'", name);
  culua_newkernel(L, 1, &m->c, f, name, entries != NULL ? entries : ptx, elf, elfsize);
  return 1;
}


/* mod:global(name [, dtype]) -> cuda.array over a __device__ or __constant__ symbol */
static int module_global (lua_State *L) {
  Module *m = check_module(L, 1);
  const char *name = luaL_checkstring(L, 2);
  culua_Dtype t = lua_isnoneornil(L, 3) ? CULUA_FLOAT32 : culua_checkdtype(L, 3);
  CUdeviceptr p;
  size_t bytes;
  CUresult r = culua_cu(L, "global")->cuModuleGetGlobal(&p, &bytes, m->m, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return luaL_error(L, "global: no symbol '%s' in the module", name);
  if (r != CUDA_SUCCESS) culua_cufail(L, r, "global", "looking up '%s'", name);
  if (bytes % culua_dtype_size[t] != 0)
    return luaL_error(L, "global: '%s' has %d bytes, not a whole number of %s", name, (int)bytes,
                      culua_dtype_names[t]);
  culua_newarray_over(L, 1, m->c.ordinal, p, bytes / culua_dtype_size[t], t);
  return 1;
}


static int module_index (lua_State *L) {
  const char *k = lua_tostring(L, 2);
  if (culua_pushmethod(L, CULUA_MODULE, 2) && !lua_isnil(L, -1)) return 1;  /* close works when closed */
  check_module(L, 1);
  if (k != NULL && (strcmp(k, "log") == 0 || strcmp(k, "ptx") == 0)) {
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, k);
    return 1;
  }
  return culua_pushmethod(L, CULUA_MODULE, 2);
}


static int module_tostring (lua_State *L) {
  Module *m = (Module *)luaL_checkudata(L, 1, CULUA_MODULE);
  if (m->c.ctx == NULL) lua_pushliteral(L, "cuda.module (closed)");
  else lua_pushfstring(L, "cuda.module (%p) on device %d", (void *)m->m, m->c.ordinal);
  return 1;
}


static const luaL_Reg module_meta[] = {
  {"__index", module_index},
  {"__tostring", module_tostring},
  {"__gc", module_close},
  {"__close", module_close},
  {NULL, NULL}
};

static const luaL_Reg module_methods[] = {
  {"kernel", module_kernel},
  {"global", module_global},
  {"close", module_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"load", culua_load},
  {NULL, NULL}
};


void culua_open_module (lua_State *L) {
  culua_newmeta(L, CULUA_MODULE, module_meta, module_methods);
  luaL_setfuncs(L, funcs, 0);
}
