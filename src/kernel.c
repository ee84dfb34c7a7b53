/*
** kernel.c
** cuda.kernel: a __global__ function of a module, its signature (read from
** the PTX .entry, or a CUBIN's .nv.info, or else asked of the driver), and launches
** whose arguments are checked against that signature before anything runs.
*/

#include "config.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "culua_int.h"


#define MAXPARAMS 128
#define ARGBYTES  4096   /* kernel parameter space is 4 KiB (32 KiB on Hopper+) */

/* one parameter: its kind and width; bytes > 8 only for .b8 arrays (structs) */
typedef struct Param {
  char kind;      /* 'u' unsigned, 's' signed, 'f' float, 'b' bits (untyped) */
  short bits;     /* 8, 16, 32, 64 */
  int bytes;      /* size in the parameter buffer */
  int off;        /* where it starts there, aligned to its width (a kernel's; set once) */
  char plain;     /* a kernel's: 'i' an integer of its width (u, s), 'f' f32 or f64, else 0 */
} Param;

typedef struct Kernel {
  culua_Ctx *mod;          /* the module's context (module kept by user value) */
  culua_State *S;          /* per-state data, looked up once rather than per launch */
  const culua_Driver *cu;  /* the driver, loaded once for the process: not asked again a launch */
  CUfunction f;
  int nparams;
  int fromptx;             /* signature read from PTX (else sizes only) */
  int maxblock[3], maxgrid[3], maxthreads, smcount;
  int clusters;            /* the device and driver launch thread-block clusters */
  int dependents;          /* ... and programmatic dependent launches (compute capability 9.0) */
  int nonportable;         /* clusters of more than 8 allowed (set on first use) */
  unsigned long id;        /* its number in its state (S->kernels_made), for the journal */
  /* the last cooperative launch's blocks a multiprocessor, for its block and shared
  ** memory (coop_block 0: none yet); the attributes that change it clear it */
  int coop_block, coop_per;
  unsigned coop_shared;
  char name[256];
  Param p[MAXPARAMS];
} Kernel;


/*
** kernel_launch runs as a closure whose upvalue is the kernel metatable,
** and reads its config's keys by address (culua_State.launch_keys, kept by
** the registry): a launch then checks its kernel and reads its config
** without interning a string or searching the registry.
*/
#define UP_META      lua_upvalueindex(1)
static const char *const launch_keys[] = {"grid", "block", "shared", "stream", "cooperative", "cluster",
                                          "programmatic"};
#define NLAUNCH_KEYS ((int)(sizeof(launch_keys) / sizeof(launch_keys[0])))
static const char launch_keys_key = 'k';   /* registry: the table that keeps them */


static Kernel *check_kernel (lua_State *L, int i) {
  Kernel *k = (Kernel *)luaL_checkudata(L, i, CULUA_KERNEL);
  culua_ctx_enter(L, k->mod, "cuda.kernel (its module)");
  return k;
}


/* for launches: check only; the context is entered once, after the arguments */
/* a kernel is usable while its module is open and its device not reset */
static void check_live (lua_State *L, const Kernel *k) {
  if (k->mod->ctx == NULL) luaL_error(L, "attempt to use a cuda.kernel whose module was closed");
  if (culua_ctx_stale(k->mod))
    luaL_error(L, "attempt to use a cuda.kernel whose device was reset by cuda.reset()");
}


static Kernel *test_kernel (lua_State *L, int i) {
  Kernel *k = (Kernel *)lua_touserdata(L, i);
  if (k == NULL || !lua_getmetatable(L, i) || !lua_rawequal(L, -1, UP_META))
    luaL_typeerror(L, i, CULUA_KERNEL);
  lua_pop(L, 1);
  check_live(L, k);
  return k;
}


/* {====================================================== signatures */

/* skip blanks and commas */
static const char *skipws (const char *s) {
  while (*s && (isspace((unsigned char)*s))) s++;
  return s;
}


/*
** Parse the parameter list of `.entry name(` in PTX text: each is
** `.param [.align N] .TYPE [.ptr .global .align N] pname[[N]]`.
** Returns the count, -1 when the entry is not found, or -2 - i when
** parameter i is not one a launch can pass (a width other than 8, 16, 32
** or 64 bits, or an array outside the 4 KiB a kernel's parameters take):
** the text is not PTX that ptxas accepts, and guessing would be unsafe.
*/
static int parse_entry (const char *ptx, const char *name, Param *p, int max) {
  const char *s = ptx, *end;
  size_t len = strlen(name);
  int n = 0;
  for (;;) {
    s = strstr(s, ".entry");
    if (s == NULL) return -1;
    s = skipws(s + 6);
    if (strncmp(s, name, len) == 0 && (isspace((unsigned char)s[len]) || s[len] == '(')) break;
  }
  s = skipws(s + len);
  if (*s != '(') return 0;   /* no parameter list */
  end = strchr(s, ')');
  if (end == NULL) return -1;
  s++;
  while (s < end && n < max) {
    const char *param = strstr(s, ".param");
    Param q = {'b', 32, 4, 0, 0};
    const char *t, *next;
    if (param == NULL || param > end) break;
    next = strchr(param + 6, ',');
    if (next == NULL || next > end) next = end;
    /* the type is the first .TYPE token that is not .param/.align/.ptr/state */
    for (t = param + 6; t < next; t++) {
      if (*t != '.') continue;
      if (strncmp(t, ".align", 6) == 0 || strncmp(t, ".ptr", 4) == 0 ||
          strncmp(t, ".global", 7) == 0 || strncmp(t, ".const", 6) == 0 ||
          strncmp(t, ".shared", 7) == 0 || strncmp(t, ".local", 6) == 0)
        continue;
      if (strchr("usfb", t[1]) && isdigit((unsigned char)t[2])) {
        long bits = strtol(t + 2, NULL, 10);
        if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return -2 - n;
        q.kind = t[1];
        q.bits = (short)bits;
        q.bytes = q.bits / 8;
        break;
      }
    }
    /* an array parameter (a struct passed by value): name[N] */
    {
      const char *br = memchr(param, '[', (size_t)(next - param));
      if (br != NULL) {
        long count = strtol(br + 1, NULL, 10);
        if (count < 1 || count > 4096 / q.bytes) return -2 - n;
        q.bytes *= (int)count;
      }
    }
    p[n++] = q;
    s = next + 1;
  }
  return n;
}


int culua_hasentry (const char *ptx, const char *name) {
  Param p[MAXPARAMS];
  return parse_entry(ptx, name, p, MAXPARAMS) != -1;
}


/* a size in bytes as a parameter known by size only */
static void bysize (Param *p, size_t size) {
  p->kind = 'b';
  p->bits = (short)(size <= 8 ? size * 8 : 8);
  p->bytes = (int)size;
}


/* little-endian fields of an ELF image */
static uint64_t le (const unsigned char *p, int bytes) {
  uint64_t v = 0;
  while (bytes-- > 0) v = (v << 8) | p[bytes];
  return v;
}


#define EIFMT_SVAL          4      /* a record with a 16-bit size and that many bytes */
#define EIATTR_PARAM_SIZE   0x19   /* the bytes of all parameters (a 16-bit value) */
#define EIATTR_KPARAM_INFO  0x17   /* one parameter: index, ordinal, offset, size */

/*
** A CUBIN (ELF) tells each kernel's parameters in its section
** .nv.info.<name>: records of a format byte, an attribute byte and two
** bytes that are the value, or for EIFMT_SVAL the size of the value that
** follows. A parameter is an EIATTR_KPARAM_INFO record of 12 bytes (index
** 4, ordinal 2, offset 2, then flags whose bits 18..31 are the size), as
** cuobjdump -elf prints them. Returns the count, or -1 when the image does
** not say (no such section, a record of a format not known, ordinals that
** are not 0..n-1, or sizes that disagree with EIATTR_PARAM_SIZE): the
** caller then asks the driver.
*/
static int elf_params (const unsigned char *e, size_t n, const char *name, Param *p, int max) {
  uint64_t shoff, shent, shnum, strndx, stroff, strsize, i;
  const unsigned char *info = NULL;
  uint64_t size = 0, at, total = 0, end = 0;
  size_t namelen = strlen(name);
  unsigned char seen[MAXPARAMS];
  int count = 0, j;
  if (n < 64 || memcmp(e, "\177ELF", 4) != 0 || e[4] != 2 || e[5] != 1) return -1;
  shoff = le(e + 0x28, 8); shent = le(e + 0x3a, 2); shnum = le(e + 0x3c, 2); strndx = le(e + 0x3e, 2);
  if (shent < 64 || shoff > n || shnum > (n - shoff) / shent || strndx >= shnum) return -1;
  stroff = le(e + shoff + strndx * shent + 0x18, 8);
  strsize = le(e + shoff + strndx * shent + 0x20, 8);
  if (stroff > n || strsize > n - stroff) return -1;
  for (i = 0; i < shnum && info == NULL; i++) {
    const unsigned char *sh = e + shoff + i * shent;
    uint64_t nm = le(sh, 4), off = le(sh + 0x18, 8), sz = le(sh + 0x20, 8);
    if (nm < strsize && strsize - nm > 9 + namelen &&
        memcmp(e + stroff + nm, ".nv.info.", 9) == 0 &&
        memcmp(e + stroff + nm + 9, name, namelen + 1) == 0) {
      if (off > n || sz > n - off) return -1;
      info = e + off;
      size = sz;
    }
  }
  if (info == NULL) return -1;
  memset(seen, 0, sizeof(seen));
  for (at = 0; at + 4 <= size; ) {
    unsigned fmt = info[at], attr = info[at + 1];
    uint64_t len = fmt == EIFMT_SVAL ? le(info + at + 2, 2) : 0;
    const unsigned char *v = info + at + 4;
    if (fmt < 1 || fmt > EIFMT_SVAL || len > size - at - 4) return -1;
    if (attr == EIATTR_KPARAM_INFO) {
      uint64_t ord, off, psz;
      if (fmt != EIFMT_SVAL || len < 12) return -1;
      ord = le(v + 4, 2); off = le(v + 6, 2); psz = (le(v + 8, 4) >> 18) & 0x3fff;
      if (ord >= (uint64_t)max || seen[ord] || psz == 0) return -1;
      seen[ord] = 1;
      bysize(&p[ord], (size_t)psz);
      if ((int)ord >= count) count = (int)ord + 1;
      if (off + psz > end) end = off + psz;
    }
    else if (attr == EIATTR_PARAM_SIZE && fmt != EIFMT_SVAL)
      total = le(info + at + 2, 2);
    at += 4 + len;
  }
  for (j = 0; j < count; j++)
    if (!seen[j]) return -1;
  if (end > total && (count > 0 || total > 0)) return -1;
  if (count == 0 && total > 0) return -1;
  return count;
}


/* binaries carry no PTX: ask the driver for each parameter's size */
static int param_sizes (const culua_Driver *cu, CUfunction f, Param *p, int max) {
  int n = 0;
  size_t off, size;
  if (cu->cuFuncGetParamInfo == NULL) return -1;
  while (n < max && cu->cuFuncGetParamInfo(f, (size_t)n, &off, &size) == CUDA_SUCCESS)
    bysize(&p[n++], size);
  return n;
}


/*
** Each parameter's place in the buffer a launch hands the driver: packed in
** order, each aligned to its width (8 at most), as the kernel's C compiler
** lays them out; and whether a number for it takes put_plain's short way.
** Found once, for every launch of the kernel; a layout past ARGBYTES is
** refused by the launch that reaches it (marshal).
*/
static void layout (Param *p, int n) {
  int off = 0, j;
  for (j = 0; j < n; j++) {
    int align = p[j].bytes >= 8 ? 8 : p[j].bytes < 1 ? 1 : p[j].bytes;
    off = (off + align - 1) / align * align;
    p[j].off = off;
    off += p[j].bytes;
    p[j].plain = p[j].bytes != p[j].bits / 8 ? 0
                 : p[j].kind == 'u' || p[j].kind == 's' ? 'i'
                 : p[j].kind == 'f' && p[j].bits >= 32 ? 'f' : 0;
  }
}


static void push_typename (lua_State *L, const Param *p) {
  if (p->bytes > p->bits / 8) lua_pushfstring(L, "%c%d[%d]", p->kind, (int)p->bits, p->bytes / (p->bits / 8));
  else lua_pushfstring(L, "%c%d", p->kind, (int)p->bits);
}


/*
** The kernel's parameters come from the first source that has them: the
** PTX's .entry (types), the ELF's .nv.info (sizes), and last the driver,
** asked for parameter 0, 1, ... until it refuses (sizes): compute-sanitizer
** counts that refusal as an error, so only an image with neither (a fatbin
** loaded without cuda.load's ptx option) gets there.
*/
void culua_newkernel (lua_State *L, int modidx, culua_Ctx *mod, CUfunction f, const char *name,
                      const char *ptx, const char *elf, size_t elfsize) {
  const culua_Driver *cu = culua_cu(L, "kernel");
  Kernel *k;
  int n = -1, i;
  static const CUdevice_attribute limits[] = {
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z
  };
  modidx = lua_absindex(L, modidx);
  k = (Kernel *)lua_newuserdatauv(L, sizeof(Kernel), 1);
  memset(k, 0, sizeof(*k));
  luaL_setmetatable(L, CULUA_KERNEL);
  lua_pushvalue(L, modidx);
  lua_setiuservalue(L, -2, 1);          /* the kernel keeps its module alive */
  k->mod = mod;
  k->S = culua_state(L);
  k->id = ++k->S->kernels_made;
  k->f = f;
  snprintf(k->name, sizeof(k->name), "%s", name);
  if (ptx != NULL) {
    n = parse_entry(ptx, name, k->p, MAXPARAMS);
    k->fromptx = n >= 0;
  }
  if (n < 0 && elf != NULL) n = elf_params((const unsigned char *)elf, elfsize, name, k->p, MAXPARAMS);
  if (n < 0) n = param_sizes(cu, f, k->p, MAXPARAMS);
  if (n < 0) luaL_error(L, "kernel: cannot read the parameters of '%s' (no PTX, driver too old)", name);
  k->nparams = n;
  k->cu = cu;
  layout(k->p, n);
  culua_track(L, -1, CULUA_TRACK_KERNELS);
  /* device limits, read once so that each launch checks without a driver call */
  for (i = 0; i < 6; i++)
    culua_check(L, cu->cuDeviceGetAttribute(i < 3 ? &k->maxblock[i] : &k->maxgrid[i - 3], limits[i], mod->dev),
                "kernel", "reading device limits");
  culua_check(L, cu->cuFuncGetAttribute(&k->maxthreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
              "kernel", "reading the attributes of '%s'", name);
  culua_check(L, cu->cuDeviceGetAttribute(&k->smcount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, mod->dev),
              "kernel", "reading device limits");
  /* a driver that does not know the attribute launches no clusters either */
  if (cu->cuLaunchKernelEx == NULL || cu->cuOccupancyMaxActiveClusters == NULL ||
      cu->cuDeviceGetAttribute(&k->clusters, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, mod->dev) != CUDA_SUCCESS)
    k->clusters = 0;
  {
    int major = 0;
    k->dependents = cu->cuLaunchKernelEx != NULL &&
                    cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, mod->dev) ==
                    CUDA_SUCCESS && major >= 9;
  }
}

/* }====================================================== */


/* {====================================================== launches */

typedef struct Config {
  unsigned grid[3], block[3];
  unsigned cluster[3];      /* thread-block cluster; {0, 0, 0}: none */
  unsigned shared;
  CUstream stream;
  int cooperative;
  int programmatic;         /* may start before the stream's last kernel ends (griddepcontrol) */
} Config;




static const char xyz[] = "xyz";


/* a dimension at the top of the stack: n or {x [, y [, z]]}; fname names the caller */
static void todims (lua_State *L, const char *fname, const char *what, unsigned d[3]) {
  int t, j;
  d[0] = d[1] = d[2] = 1;
  if (lua_isinteger(L, -1)) {   /* the usual case first: one test */
    lua_Integer v = lua_tointeger(L, -1);
    if (v < 1 || v > 0x7fffffff)
      luaL_error(L, "%s: %s must be a positive integer or {x, y, z}", fname, what);
    d[0] = (unsigned)v;
  }
  else if ((t = lua_type(L, -1)) == LUA_TNUMBER)
    luaL_error(L, "%s: %s must be a positive integer or {x, y, z}", fname, what);
  else if (t == LUA_TTABLE) {
    int n = (int)luaL_len(L, -1);
    if (n < 1 || n > 3) luaL_error(L, "%s: %s must have 1 to 3 dimensions, got %d", fname, what, n);
    for (j = 0; j < n; j++) {
      lua_Integer v;
      lua_rawgeti(L, -1, j + 1);
      v = lua_tointeger(L, -1);
      if (!lua_isinteger(L, -1) || v < 1 || v > 0x7fffffff)
        luaL_error(L, "%s: %s[%d] must be a positive integer", fname, what, j + 1);
      d[j] = (unsigned)v;
      lua_pop(L, 1);
    }
  }
  else
    luaL_error(L, "%s: %s must be a positive integer or {x, y, z}, got %s", fname, what, luaL_typename(L, -1));
}


/*
** The metatables of what a launch takes, by address (culua_State.launch_meta):
** a kernel argument's, and the config's stream. Filled on first use, after
** every type has made its own.
*/
enum { META_ARRAY, META_SCALAR, META_HOSTARRAY, META_TEXTURE, META_STREAM };
static void launch_metas (lua_State *L, culua_State *S) {
  static const char *const names[] = {CULUA_ARRAY, CULUA_SCALAR, CULUA_HOSTARRAY, CULUA_TEXTURE, CULUA_STREAM};
  int j;
  for (j = 0; j < 5; j++) {
    luaL_getmetatable(L, names[j]);
    S->launch_meta[j] = lua_topointer(L, -1);   /* NULL where there is none (nil) */
    lua_pop(L, 1);
  }
}


/*
** The stream at i, for a launch: an open cuda.stream is told by its
** metatable's address (luaL_testudata would look its name up in the
** registry); anything else, nil included, gets culua_optstream's checks and
** messages.
*/
static CUstream tostream (lua_State *L, int i, const char *fname, culua_State *S) {
  if (lua_getmetatable(L, i)) {
    const void *mt = lua_topointer(L, -1);
    lua_pop(L, 1);
    if (S->launch_meta[META_STREAM] == NULL) launch_metas(L, S);
    if (mt == S->launch_meta[META_STREAM]) {
      const culua_Stream *st = (const culua_Stream *)lua_touserdata(L, i);
      if (st->c.ctx != NULL && !culua_ctx_stale(&st->c)) return st->s;
    }
  }
  return culua_optstream(L, i, fname);
}


/*
** One pass over the keys present (a config usually holds two), matched
** against the config keys by address: short strings are interned, so a
** key "grid" is the very string object whose address is S->launch_keys[0]
** (the registry keeps it), and lua_topointer tells it in one call (a key
** that is not a string is no string's address); a key that is none of
** them is a typo, and raises.
*/
static void getconfig (lua_State *L, int i, Config *c, const char *fname, culua_State *S) {
  const void *const *keys = S->launch_keys;
  int seen = 0;
  luaL_checktype(L, i, LUA_TTABLE);
  c->shared = 0;
  c->stream = NULL;
  c->cooperative = c->programmatic = 0;
  c->cluster[0] = c->cluster[1] = c->cluster[2] = 0;
  lua_pushnil(L);
  while (lua_next(L, i)) {                        /* key, value */
    const void *key = lua_topointer(L, -2);
    if (key == keys[0]) { todims(L, fname, "grid", c->grid); seen |= 1; }
    else if (key == keys[1]) { todims(L, fname, "block", c->block); seen |= 2; }
    else if (key == keys[2]) {
      lua_Integer v = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
      if (v < 0 || v > 0x7fffffff)
        luaL_error(L, "%s: shared must be a byte count, got %s", fname, luaL_tolstring(L, -1, NULL));
      c->shared = (unsigned)v;
    }
    else if (key == keys[3]) c->stream = tostream(L, lua_gettop(L), fname, S);
    else if (key == keys[4]) c->cooperative = lua_toboolean(L, -1);
    else if (key == keys[5]) todims(L, fname, "cluster", c->cluster);
    else if (key == keys[6]) c->programmatic = lua_toboolean(L, -1);
    else
      luaL_error(L, "%s: unknown config key %s (grid, block, shared, stream, cooperative, cluster, programmatic)",
                 fname,
                 lua_type(L, -2) == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -2))
                                               : luaL_typename(L, -2));
    lua_pop(L, 1);                                /* key */
  }
  if (!(seen & 1)) luaL_error(L, "%s: config.grid is required (a number or {x, y, z})", fname);
  if (!(seen & 2)) luaL_error(L, "%s: config.block is required (a number or {x, y, z})", fname);
}


/*
** A cluster (compute capability 9.0 and later) tiles the grid: each of its
** dimensions divides the grid's. Up to 8 blocks is portable; up to 16 needs the
** kernel's non-portable attribute, set here once, and the driver has the last word.
*/
static void checkcluster (lua_State *L, Kernel *k, const Config *c, const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  lua_Integer size = (lua_Integer)c->cluster[0] * c->cluster[1] * c->cluster[2];
  int j;
  if (!k->clusters)
    luaL_error(L, "%s: device %d cannot launch thread-block clusters (compute capability 9.0 or later, "
               "and a driver with cuLaunchKernelEx)", fname, k->mod->ordinal);
  for (j = 0; j < 3; j++)
    if (c->grid[j] % c->cluster[j] != 0)
      luaL_error(L, "%s: grid.%c = %d is not a multiple of cluster.%c = %d", fname, xyz[j], (int)c->grid[j],
                 xyz[j], (int)c->cluster[j]);
  if (size > 16)
    luaL_error(L, "%s: a cluster of %I blocks is more than 16 (8 portably)", fname, size);
  if (size > 8 && !k->nonportable) {
    culua_ctx_enter(L, k->mod, "cuda.kernel (its module)");
    culua_check(L, cu->cuFuncSetAttribute(k->f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), fname,
                "allowing '%s' a cluster of %d blocks (more than 8 is not portable)", k->name, (int)size);
    k->nonportable = 1;
    k->coop_block = 0;
  }
}


static void checkconfig (lua_State *L, Kernel *k, const Config *c, const char *fname) {
  unsigned long threads = (unsigned long)c->block[0] * c->block[1] * c->block[2];
  int j;
  for (j = 0; j < 3; j++) {
    if (c->block[j] > (unsigned)k->maxblock[j])
      luaL_error(L, "%s: block.%c = %d exceeds the device's %d", fname, xyz[j], (int)c->block[j], k->maxblock[j]);
    if (c->grid[j] > (unsigned)k->maxgrid[j])
      luaL_error(L, "%s: grid.%c = %d exceeds the device's %d", fname, xyz[j], (int)c->grid[j], k->maxgrid[j]);
  }
  if (threads > (unsigned long)k->maxthreads)
    luaL_error(L, "%s: a block of %d threads exceeds the %d that '%s' allows", fname, (int)threads,
               k->maxthreads, k->name);
  if (c->cluster[0] != 0) checkcluster(L, k, c, fname);
  if (c->programmatic && !k->dependents)
    luaL_error(L, "%s: device %d cannot launch programmatic dependents (compute capability 9.0 or later, "
               "and a driver with cuLaunchKernelEx)", fname, k->mod->ordinal);
}


/*
** A cuda.scalar of dtype t for parameter p: its bits, when the parameter
** has its size and a kind that can hold it (a low-precision value goes only
** to an untyped one, which is what a __half or an fp8 by value is).
*/
static void put_scalar (lua_State *L, int pos, const Param *p, culua_Dtype t, const void *bits,
                        char *buf) {
  int size = (int)culua_dtype_size[t];
  int kind = culua_dtype_islowp(t) ? p->kind == 'b' || p->kind == 'f'
             : culua_dtype_isfloat(t) ? p->kind == 'f' || p->kind == 'b' : p->kind != 'f';
  if (size != p->bytes || !kind) {
    push_typename(L, p);
    luaL_error(L, "launch: argument %d is a cuda.scalar of %s but parameter %d is %s", pos,
               culua_dtype_names[t], pos, lua_tostring(L, -1));
  }
  memcpy(buf, bits, (size_t)size);
}


/*
** A Lua number for a 1- or 2-byte untyped parameter: PTX writes a __half
** and a __nv_bfloat16 by value alike (b8[2]), and the fp8 types too (b8), so
** the number's bits are not known: refused, saying how to choose. An
** integer into a b16 or b8 stays its raw bits, as before.
*/
static void refuse_untyped (lua_State *L, int pos, const Param *p) {
  int two = p->bytes == 2;
  push_typename(L, p);
  luaL_error(L, "launch: argument %d is a number but parameter %d is %s, %s (PTX does not tell them "
             "apart): pass cuda.scalar(\"%s\", x) or cuda.scalar(\"%s\", x)", pos, pos, lua_tostring(L, -1),
             two ? "a __half or __nv_bfloat16" : "an __nv_fp8_e4m3 or __nv_fp8_e5m2",
             two ? "float16" : "float8_e4m3", two ? "bfloat16" : "float8_e5m2");
}


/*
** Convert argument i for parameter p into buf. A device array fits any
** 64-bit parameter (PTX writes pointers as .u64), and so does a texture
** (a cudaTextureObject_t is an unsigned long long); integers are range
** checked for the parameter's width; numbers go to f32/f64.
*/
/*
** The argument at i into buf as parameter pos of type p. A launch on device
** `ordinal` (-1: no device, as check_args) refuses an array of another
** device unless peer access from it was enabled: the kernel would fault.
*/
static void putarg (lua_State *L, int i, int pos, const Param *p, char *buf, int ordinal, culua_State *S) {
  culua_Array *a;
  culua_HostArray *h;
  unsigned long long tex;
  culua_Dtype st;
  const void *sbits;
  int t = lua_type(L, i);
  /* a userdata's kind by its metatable's address: one look-up, not one a type */
  const void *mt = NULL;
  if (t == LUA_TUSERDATA && lua_getmetatable(L, i)) {
    if (S->launch_meta[META_STREAM] == NULL) launch_metas(L, S);
    mt = lua_topointer(L, -1);
    lua_pop(L, 1);
  }
  if (mt != NULL && mt == S->launch_meta[META_SCALAR] && culua_toscalar(L, i, &st, &sbits)) {
    put_scalar(L, pos, p, st, sbits, buf);
    return;
  }
  if (t == LUA_TNUMBER && p->kind == 'b' && p->bytes <= 2 &&
      (!lua_isinteger(L, i) || p->bytes > p->bits / 8))
    refuse_untyped(L, pos, p);
  if (p->bytes > 8) {   /* a struct by value: exactly its bytes */
    size_t len;
    const char *s = lua_tolstring(L, i, &len);
    if (t != LUA_TSTRING || len != (size_t)p->bytes)
      luaL_error(L, "launch: argument %d must be a string of %d bytes (a struct by value), got %s",
                 pos, p->bytes, t == LUA_TSTRING ? lua_pushfstring(L, "%d bytes", (int)len) : luaL_typename(L, i));
    memcpy(buf, s, len);
    return;
  }
  if (mt != NULL && mt == S->launch_meta[META_ARRAY]) {
    a = culua_openarray(L, (culua_Array *)lua_touserdata(L, i), 0);
    if (p->bytes != 8 || p->kind == 'f')
      luaL_error(L, "launch: argument %d is a cuda.array but parameter %d is %c%d, not a pointer",
                 pos, pos, p->kind, (int)p->bits);
    /* managed memory is attached globally: every device reaches it */
    if (ordinal >= 0 && a->c.ordinal != ordinal && !a->managed &&
        !(ordinal < 64 && a->c.ordinal < 64 && (S->peers[ordinal] >> a->c.ordinal & 1)))
      luaL_error(L, "launch: argument %d is an array on device %d but the kernel runs on device %d "
                 "(copy it over, or cuda.device(%d):enable_peer_access(cuda.device(%d)))", pos,
                 a->c.ordinal, ordinal, ordinal, a->c.ordinal);
    memcpy(buf, &a->ptr, 8);
    return;
  }
  if (mt != NULL && mt == S->launch_meta[META_HOSTARRAY] && (h = culua_testhostarray(L, i)) != NULL) {
    if (p->bytes != 8 || p->kind == 'f')
      luaL_error(L, "launch: argument %d is a cuda.host_array but parameter %d is %c%d, not a pointer",
                 pos, pos, p->kind, (int)p->bits);
    if (!h->mapped)
      luaL_error(L, "launch: argument %d is a cuda.host_array that is not mapped: kernels cannot reach it "
                 "(make it with {mapped = true}, or copy it to a cuda.array)", pos);
    memcpy(buf, &h->dptr, 8);   /* portable and mapped: valid in every context */
    return;
  }
  if (mt != NULL && mt == S->launch_meta[META_TEXTURE] && culua_totexture(L, i, &tex)) {   /* a cudaTextureObject_t */
    if (p->bytes != 8 || p->kind == 'f')
      luaL_error(L, "launch: argument %d is a cuda.texture but parameter %d is %c%d, not a "
                 "cudaTextureObject_t (u64)", pos, pos, p->kind, (int)p->bits);
    memcpy(buf, &tex, 8);
    return;
  }
  if (p->kind == 'f' || (p->kind == 'b' && !lua_isinteger(L, i) && t == LUA_TNUMBER)) {
    lua_Number x;
    if (t != LUA_TNUMBER)
      luaL_error(L, "launch: argument %d must be a number for %c%d, got %s", pos, p->kind, (int)p->bits,
                 luaL_typename(L, i));
    x = lua_tonumber(L, i);
    if (p->bits == 32) { float f = (float)x; memcpy(buf, &f, 4); }
    else if (p->bits == 64) memcpy(buf, &x, 8);
    else if (p->bits == 16)   /* .f16: no doubt which format */
      culua_toelem(L, i, CULUA_FLOAT16, buf, lua_pushfstring(L, "launch: argument %d", pos));
    else luaL_error(L, "launch: argument %d: %c%d parameters are not supported", pos, p->kind, (int)p->bits);
    return;
  }
  {
    int isint;
    lua_Integer v = lua_tointegerx(L, i, &isint);
    lua_Integer lo, hi;
    if (!isint || t != LUA_TNUMBER)
      luaL_error(L, "launch: argument %d must be an integer for %c%d%s, got %s", pos, p->kind, (int)p->bits,
                 p->bits == 64 ? " (or a cuda.array)" : "",
                 t == LUA_TNUMBER ? lua_pushfstring(L, "%f", lua_tonumber(L, i)) : luaL_typename(L, i));
    /* NVRTC declares int and short parameters .u32/.u16, so an unsigned or
    ** untyped parameter takes either signedness's range; the value must
    ** still fit the width */
    if (p->bits < 64) {
      lua_Integer span = (lua_Integer)1 << p->bits;
      lo = -(span / 2);
      hi = p->kind == 's' ? span / 2 - 1 : span - 1;
      if (v < lo || v > hi)
        luaL_error(L, "launch: argument %d = %I out of range for %c%d", pos, v, p->kind, (int)p->bits);
    }
    switch (p->bytes) {
      case 1: { uint8_t x = (uint8_t)v; memcpy(buf, &x, 1); break; }
      case 2: { uint16_t x = (uint16_t)v; memcpy(buf, &x, 2); break; }
      case 4: { uint32_t x = (uint32_t)v; memcpy(buf, &x, 4); break; }
      default: memcpy(buf, &v, 8); break;
    }
  }
}


/* record a launch in S's journal, for fault messages (on the hot path: no formatting) */
static void journal (lua_State *L, culua_State *S, CUstream s, const Kernel *k) {
  culua_Launch *e = &S->journal[S->journal_next++ % CULUA_JOURNAL];
  lua_Debug ar;
  e->stream = s;
  /* a loop launches the same kernel again and again: copy only on change (ids are
  ** never reused, addresses may be) */
  if (e->kernel_id != k->id) {
    const char *kernel = k->name;
    size_t n = strlen(kernel);
    if (n >= sizeof(e->kernel)) n = sizeof(e->kernel) - 1;
    memcpy(e->kernel, kernel, n);
    e->kernel[n] = '\0';
    e->kernel_id = k->id;
  }
  if (culua_caller(L, &ar)) {
    memcpy(e->source, ar.short_src, sizeof(e->source));
    e->line = ar.currentline;
  }
  else {
    e->source[0] = '?';
    e->source[1] = '\0';
    e->line = 0;
  }
}


/*
** The driver's launch configuration for c: its cluster, cooperative and
** programmatic, those asked for. A programmatic launch may begin once every
** block of the stream's kernel before it has run griddepcontrol.launch_dependents
** (or ended); the kernel itself waits in griddepcontrol.wait before touching
** what that kernel wrote, so only kernels written so are launched so.
*/
#define NATTRS 3
static void exconfig (const Config *c, CUlaunchConfig *x, CUlaunchAttribute attrs[NATTRS]) {
  unsigned n = 0;
  memset(x, 0, sizeof(*x));
  memset(attrs, 0, NATTRS * sizeof(attrs[0]));
  x->gridDimX = c->grid[0]; x->gridDimY = c->grid[1]; x->gridDimZ = c->grid[2];
  x->blockDimX = c->block[0]; x->blockDimY = c->block[1]; x->blockDimZ = c->block[2];
  x->sharedMemBytes = c->shared;
  x->hStream = c->stream;
  x->attrs = attrs;
  if (c->cluster[0] != 0) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = c->cluster[0];
    attrs[n].value.clusterDim.y = c->cluster[1];
    attrs[n].value.clusterDim.z = c->cluster[2];
    n++;
  }
  if (c->cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n].value.cooperative = 1;
    n++;
  }
  if (c->programmatic) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    n++;
  }
  x->numAttrs = n;
}


/* the most clusters of c's shape that fit on the device at once (0: none) */
static int active_clusters (lua_State *L, const culua_Driver *cu, const Kernel *k, const Config *c,
                            const char *fname) {
  CUlaunchConfig x;
  CUlaunchAttribute attrs[NATTRS];
  Config one = *c;
  int n = 0;
  one.cooperative = one.programmatic = 0;
  exconfig(&one, &x, attrs);
  culua_check(L, cu->cuOccupancyMaxActiveClusters(&n, k->f, &x), fname,
              "computing how many clusters of {%d, %d, %d} blocks of '%s' fit", (int)c->cluster[0],
              (int)c->cluster[1], (int)c->cluster[2], k->name);
  return n;
}


/* raise unless a cooperative grid of c's can be co-resident (in clusters or blocks) */
static void check_coresident (lua_State *L, const culua_Driver *cu, Kernel *k, const Config *c) {
  if (c->cluster[0] != 0) {
    long clusters = (long)c->grid[0] / c->cluster[0] * (c->grid[1] / c->cluster[1]) * (c->grid[2] / c->cluster[2]);
    int most = active_clusters(L, cu, k, c, "launch");
    if (clusters > most)
      luaL_error(L, "launch: a cooperative grid of %I clusters cannot be co-resident (at most %d)",
                 (lua_Integer)clusters, most);
  }
  else {
    int per = k->coop_per, block = (int)(c->block[0] * c->block[1] * c->block[2]);
    long blocks = (long)c->grid[0] * c->grid[1] * c->grid[2];
    /* the driver's answer depends on the kernel, block and shared memory alone: asked
    ** again only when they change (a driver call a launch is host time) */
    if (block != k->coop_block || c->shared != k->coop_shared) {
      culua_check(L, cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per, k->f, block, c->shared), "launch",
                  "computing occupancy");
      k->coop_block = block;
      k->coop_shared = c->shared;
      k->coop_per = per;
    }
    if (blocks > (long)per * k->smcount)
      luaL_error(L, "launch: a cooperative grid of %d blocks cannot be co-resident "
                 "(at most %d: %d per multiprocessor x %d)", (int)blocks, per * k->smcount, per, k->smcount);
  }
}


/* a launch with attributes (cuLaunchKernelEx): in clusters, or programmatic */
static CUresult launch_ex (const culua_Driver *cu, Kernel *k, const Config *c, void **args) {
  CUlaunchConfig x;
  CUlaunchAttribute attrs[NATTRS];
  exconfig(c, &x, attrs);
  return cu->cuLaunchKernelEx(&x, k->f, args, NULL);
}


/*
** The usual argument the short way: a number for a parameter of Param.plain,
** converted as putarg would. 0 where putarg must look (a float for an integer
** parameter, a value out of range): it converts, or raises with its message.
*/
static int put_plain (lua_State *L, int i, const Param *p, char *buf) {
  if (p->plain == 'f') {
    lua_Number x = lua_tonumber(L, i);
    if (p->bits == 32) { float f = (float)x; memcpy(buf, &f, 4); }
    else memcpy(buf, &x, 8);
    return 1;
  }
  else {
    int isint;
    lua_Integer v = lua_tointegerx(L, i, &isint);
    if (!isint) return 0;
    if (p->bits < 64) {   /* putarg's range: either signedness's for u, the signed one for s */
      lua_Integer half = (lua_Integer)1 << (p->bits - 1);
      if (v < -half || v > (p->kind == 's' ? half - 1 : 2 * half - 1)) return 0;
    }
    switch (p->bytes) {
      case 1: { uint8_t x = (uint8_t)v; memcpy(buf, &x, 1); break; }
      case 2: { uint16_t x = (uint16_t)v; memcpy(buf, &x, 2); break; }
      case 4: { uint32_t x = (uint32_t)v; memcpy(buf, &x, 4); break; }
      default: memcpy(buf, &v, 8); break;
    }
    return 1;
  }
}


/*
** Convert the nargs arguments at argbase into buf as parameters first,
** first + 1, ... (each at its place, Param.off); args[j] points at parameter
** j's. Returns where the bytes end (0 for none).
*/
static int marshal (lua_State *L, Kernel *k, int argbase, int first, int nargs, char *buf, void **args) {
  int j, end = 0;
  for (j = first; j < first + nargs; j++) {
    const Param *p = &k->p[j];
    int i = argbase + j - first;
    end = p->off + p->bytes;
    if (end > ARGBYTES)
      luaL_error(L, "launch: the arguments of '%s' exceed %d bytes", k->name, ARGBYTES);
    args[j] = buf + p->off;
    if (!(p->plain && lua_type(L, i) == LUA_TNUMBER && put_plain(L, i, p, buf + p->off)))
      putarg(L, i, j + 1, p, buf + p->off, k->mod->ordinal, k->S);
  }
  return end;
}


static void check_count (lua_State *L, const Kernel *k, int nargs) {
  if (nargs != k->nparams)
    luaL_error(L, "launch: '%s' takes %d argument%s, got %d", k->name, k->nparams,
               k->nparams == 1 ? "" : "s", nargs);
}


/* launch k with c and the converted arguments args */
static void launch_with (lua_State *L, Kernel *k, const Config *c, void **args) {
  const culua_Driver *cu = k->cu;
  CUresult r;
  check_live(L, k);   /* again: a config's __len or an argument may have run Lua since */
  r = culua_ctx_current(cu, k->mod->ctx);
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, "launch", "entering the context of device %d for '%s'", k->mod->ordinal, k->name);
  if (c->cooperative) check_coresident(L, cu, k, c);
  if (c->cluster[0] != 0 || c->programmatic)
    r = launch_ex(cu, k, c, args);
  else if (c->cooperative)
    r = cu->cuLaunchCooperativeKernel(k->f, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1],
                                      c->block[2], c->shared, c->stream, args);
  else
    r = cu->cuLaunchKernel(k->f, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                           c->shared, c->stream, args, NULL);
  journal(L, k->S, c->stream, k);
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, "launch", "launching '%s' with grid {%d, %d, %d}, block {%d, %d, %d}, %d bytes shared%s%s%s",
                 k->name, (int)c->grid[0], (int)c->grid[1], (int)c->grid[2], (int)c->block[0],
                 (int)c->block[1], (int)c->block[2], (int)c->shared,
                 c->cluster[0] ? lua_pushfstring(L, ", clusters of {%d, %d, %d}", (int)c->cluster[0],
                                                 (int)c->cluster[1], (int)c->cluster[2]) : "",
                 c->cooperative ? ", cooperative" : "", c->programmatic ? ", programmatic" : "");
  if (k->S->debug) {
    r = cu->cuStreamSynchronize(c->stream);
    if (r != CUDA_SUCCESS) culua_cufail(L, r, "launch", "running '%s' (cuda.debug is on)", k->name);
  }
}


/* k:launch(config, ...) -> k */
static int kernel_launch (lua_State *L) {
  Kernel *k = test_kernel(L, 1);
  Config c;
  char buf[ARGBYTES];
  void *args[MAXPARAMS];
  getconfig(L, 2, &c, "launch", k->S);
  checkconfig(L, k, &c, "launch");
  check_count(L, k, lua_gettop(L) - 2);
  marshal(L, k, 3, 0, k->nparams, buf, args);
  launch_with(L, k, &c, args);
  lua_pushvalue(L, 1);
  return 1;
}


/*
** A prepared launch: its config, parsed once, and the arguments bound to it
** (k:prepare(config, ...)), the kernel's first nbound, converted once into
** buf at their places (Param.off), with args[j] pointing at each: the driver
** reads them there (a userdata does not move). A call points the rest of
** args at its own arguments, converted into a buffer of its own. Those bound
** that are objects (an array may have been closed since) are converted again
** a call, from the launcher's upvalues, into their places in buf.
*/
typedef struct Prepared {
  Kernel *k;                                /* the launcher's upvalue 1 (which keeps it) */
  Config c;
  int nbound;
  int nobjects;                             /* bound arguments that are userdata */
  unsigned char objects[MAXPARAMS];         /* ... their positions (0-based) */
  char *buf;                                /* the bound arguments' bytes, after args */
  void *args[];                             /* the kernel's nparams pointers, then buf */
} Prepared;

#define UP_BOUND  4   /* the launcher's upvalues: kernel, Prepared, stream, then the bound objects */

/*
** The launcher: the config's stream (nil for the default stream) is checked
** on each call, since it may have been closed since.
*/
static int prepared_call (lua_State *L) {
  Prepared *pr = (Prepared *)lua_touserdata(L, lua_upvalueindex(2));
  Kernel *k = pr->k;
  int nargs = lua_gettop(L), o;
  char buf[ARGBYTES];
  check_live(L, k);
  if (pr->c.stream != NULL) tostream(L, lua_upvalueindex(3), "launch", k->S);
  check_count(L, k, pr->nbound + nargs);
  for (o = 0; o < pr->nobjects; o++) {
    int j = pr->objects[o];
    putarg(L, lua_upvalueindex(UP_BOUND + o), j + 1, &k->p[j], pr->buf + k->p[j].off, k->mod->ordinal, k->S);
  }
  marshal(L, k, 1, pr->nbound, nargs, buf, pr->args);
  launch_with(L, k, &pr->c, pr->args);
  return 0;
}


/*
** k:prepare(config [, ...]) -> launcher: launcher(...) launches k with config
** and the arguments, checking them as k:launch does; the config is checked
** once, here (PyCUDA's prepared call: less work per launch in a hot loop).
** Arguments given here are bound, the kernel's first ones: checked and
** converted here, and the launcher takes the rest.
*/
static int kernel_prepare (lua_State *L) {
  Kernel *k = check_kernel(L, 1);
  int nbound = lua_gettop(L) - 2, j;
  void *args[MAXPARAMS];
  char buf[ARGBYTES];
  Config c;
  int end;
  size_t size;
  Prepared *pr;
  luaL_checktype(L, 2, LUA_TTABLE);
  if (nbound > k->nparams)
    luaL_error(L, "prepare: '%s' takes %d argument%s, got %d to bind", k->name, k->nparams,
               k->nparams == 1 ? "" : "s", nbound);
  getconfig(L, 2, &c, "prepare", k->S);
  checkconfig(L, k, &c, "prepare");
  end = marshal(L, k, 3, 0, nbound, buf, args);
  size = offsetof(Prepared, args) + (size_t)k->nparams * sizeof(void *);
  pr = (Prepared *)lua_newuserdatauv(L, size + (size_t)(end > 0 ? end : 1), 0);   /* k, cfg, args..., pr */
  memset(pr, 0, size);
  pr->k = k;
  pr->c = c;
  pr->nbound = nbound;
  pr->buf = (char *)pr + size;
  memcpy(pr->buf, buf, (size_t)end);
  for (j = 0; j < nbound; j++) pr->args[j] = pr->buf + k->p[j].off;
  luaL_checkstack(L, 3 + nbound, "prepare: too many bound arguments");
  lua_pushvalue(L, 1);                                          /* ..., pr, k */
  lua_pushvalue(L, -2);                                         /* ..., pr, k, pr */
  lua_getfield(L, 2, "stream");                                 /* ..., pr, k, pr, stream */
  for (j = 0; j < nbound; j++)                                  /* ..., pr, k, pr, stream, objects... */
    if (lua_type(L, 3 + j) == LUA_TUSERDATA) {
      pr->objects[pr->nobjects++] = (unsigned char)j;
      lua_pushvalue(L, 3 + j);
    }
  lua_pushcclosure(L, prepared_call, UP_BOUND - 1 + pr->nobjects);
  return 1;
}


/* }====================================================== */


/* {====================================================== attributes, occupancy */

/* k:attributes() -> {num_regs, shared_size_bytes, ...} */
static int kernel_attributes (lua_State *L) {
  static const struct { const char *name; CUfunction_attribute a; } attrs[] = {
    {"max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {"shared_size_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES},
    {"const_size_bytes", CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES},
    {"local_size_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES},
    {"num_regs", CU_FUNC_ATTRIBUTE_NUM_REGS},
    {"ptx_version", CU_FUNC_ATTRIBUTE_PTX_VERSION},
    {"binary_version", CU_FUNC_ATTRIBUTE_BINARY_VERSION},
    {"max_dynamic_shared_size_bytes", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES},
    {"preferred_shared_memory_carveout", CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT},
  };
  Kernel *k = check_kernel(L, 1);
  const culua_Driver *cu = culua_cu(L, "attributes");
  size_t j;
  lua_createtable(L, 0, 9);
  for (j = 0; j < sizeof(attrs) / sizeof(attrs[0]); j++) {
    int v = 0;
    culua_check(L, cu->cuFuncGetAttribute(&v, attrs[j].a, k->f), "attributes", "reading %s of '%s'",
                attrs[j].name, k->name);
    lua_pushinteger(L, v);
    lua_setfield(L, -2, attrs[j].name);
  }
  return 1;
}


/* k:set_max_dynamic_shared(bytes) -> k: allow more than 48 KiB of dynamic shared memory */
static int kernel_set_max_dynamic_shared (lua_State *L) {
  Kernel *k = check_kernel(L, 1);
  lua_Integer bytes = luaL_checkinteger(L, 2);
  luaL_argcheck(L, bytes >= 0 && bytes <= 0x7fffffff, 2, "byte count expected");
  culua_check(L, culua_cu(L, "set_max_dynamic_shared")->cuFuncSetAttribute(k->f,
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes),
              "set_max_dynamic_shared", "allowing %d bytes for '%s'", (int)bytes, k->name);
  k->coop_block = 0;   /* the occupancy a cooperative launch asked for may differ now */
  lua_settop(L, 1);
  return 1;
}


static int active_blocks (lua_State *L, Kernel *k, const char *fname) {
  lua_Integer block = luaL_checkinteger(L, 2), shared = luaL_optinteger(L, 3, 0);
  int per = 0;
  luaL_argcheck(L, block >= 1 && block <= k->maxthreads, 2,
                lua_pushfstring(L, "block size must be 1..%d for '%s'", k->maxthreads, k->name));
  luaL_argcheck(L, shared >= 0 && shared <= 0x7fffffff, 3, "byte count expected");
  culua_check(L, culua_cu(L, fname)->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per, k->f, (int)block,
              (size_t)shared), fname, "for '%s' with %d threads", k->name, (int)block);
  return per;
}


/* k:max_active_blocks(block [, shared]) -> blocks per multiprocessor */
static int kernel_max_active_blocks (lua_State *L) {
  Kernel *k = check_kernel(L, 1);
  lua_pushinteger(L, active_blocks(L, k, "max_active_blocks"));
  return 1;
}


/*
** k:max_active_clusters(config) -> the most clusters of config's shape (block,
** cluster, shared; the grid is one cluster unless given) that fit on the device
** at once: a cooperative launch in clusters may have that many. A closure over
** the kernel metatable, as k:launch is.
*/
static int kernel_max_active_clusters (lua_State *L) {
  static const char fname[] = "max_active_clusters";
  Kernel *k = check_kernel(L, 1);
  Config c;
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_getfield(L, 2, "cluster") == LUA_TNIL)
    luaL_error(L, "%s: config.cluster is required (a number or {x, y, z})", fname);
  lua_pop(L, 1);
  if (lua_getfield(L, 2, "grid") == LUA_TNIL) {   /* one cluster: copy the table, grid = cluster */
    lua_pop(L, 1);
    lua_createtable(L, 0, 5);
    lua_pushnil(L);
    while (lua_next(L, 2)) { lua_pushvalue(L, -2); lua_insert(L, -2); lua_settable(L, 3); }
    lua_getfield(L, 3, "cluster");
    lua_setfield(L, 3, "grid");
    lua_replace(L, 2);
  }
  else lua_pop(L, 1);
  getconfig(L, 2, &c, fname, k->S);
  checkconfig(L, k, &c, fname);
  culua_ctx_enter(L, k->mod, "cuda.kernel (its module)");
  lua_pushinteger(L, active_clusters(L, culua_cu(L, fname), k, &c, fname));
  return 1;
}


/* k:max_cooperative_grid(block [, shared]) -> the most blocks that are all co-resident */
static int kernel_max_cooperative_grid (lua_State *L) {
  Kernel *k = check_kernel(L, 1);
  lua_pushinteger(L, (lua_Integer)active_blocks(L, k, "max_cooperative_grid") * k->smcount);
  return 1;
}

/* }====================================================== */


/*
** k.name, k.signature, k.programmatic, and the methods. A closure over the
** metatable and the methods table (upvalues), so that k:launch finds its
** method with one raw look-up: no string compared, no registry searched.
*/
#define UP_METHODS   lua_upvalueindex(2)
static int kernel_index (lua_State *L) {
  Kernel *k;
  const char *key;
  int j;
  lua_settop(L, 2);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, UP_METHODS) != LUA_TNIL) return 1;   /* a method: k itself not read */
  k = (Kernel *)lua_touserdata(L, 1);
  if (k == NULL || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, UP_META))
    luaL_typeerror(L, 1, CULUA_KERNEL);
  key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
  if (strcmp(key, "name") == 0) lua_pushstring(L, k->name);
  else if (strcmp(key, "programmatic") == 0) lua_pushboolean(L, k->dependents);
  else if (strcmp(key, "signature") == 0) {
    lua_createtable(L, k->nparams, 0);
    for (j = 0; j < k->nparams; j++) {
      push_typename(L, &k->p[j]);
      lua_rawseti(L, -2, j + 1);
    }
  }
  else lua_pushnil(L);
  return 1;
}


static int kernel_tostring (lua_State *L) {
  Kernel *k = (Kernel *)luaL_checkudata(L, 1, CULUA_KERNEL);
  luaL_Buffer b;
  int j;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "cuda.kernel %s(", k->name);
  luaL_addvalue(&b);
  for (j = 0; j < k->nparams; j++) {
    if (j > 0) luaL_addstring(&b, ", ");
    push_typename(L, &k->p[j]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
  return 1;
}


static const luaL_Reg kernel_meta[] = {
  {"__index", NULL},   /* a closure over the metatable and the methods, made in culua_open_kernel */
  {"__tostring", kernel_tostring},
  {NULL, NULL}
};

static const luaL_Reg kernel_methods[] = {
  {"launch", NULL},   /* closures over the metatable, made in culua_open_kernel */
  {"prepare", NULL},
  {"attributes", kernel_attributes},
  {"set_max_dynamic_shared", kernel_set_max_dynamic_shared},
  {"max_active_blocks", kernel_max_active_blocks},
  {"max_cooperative_grid", kernel_max_cooperative_grid},
  {"max_active_clusters", NULL},
  {NULL, NULL}
};


/* {====================================================== without a GPU */

/*
** cuda.signature(ptx, name) -> {"u32", "f32", "u64", ...} of `.entry name`;
** of a CUBIN instead of PTX, the sizes its .nv.info gives ({"b64", "b32", "b8[16]"})
*/
static int cuda_signature (lua_State *L) {
  size_t len;
  const char *ptx = luaL_checklstring(L, 1, &len), *name = luaL_checkstring(L, 2);
  Param p[MAXPARAMS];
  int elf = len >= 4 && memcmp(ptx, "\177ELF", 4) == 0, j;
  int n = elf ? elf_params((const unsigned char *)ptx, len, name, p, MAXPARAMS) : parse_entry(ptx, name, p, MAXPARAMS);
  if (n == -1 && elf)
    return luaL_error(L, "cuda.signature: the CUBIN does not tell the parameters of '%s'", name);
  if (n == -1) return luaL_error(L, "cuda.signature: no entry '%s' in the PTX", name);
  if (n < 0) return luaL_error(L, "cuda.signature: parameter %d of '%s' is not a type a launch can pass", -1 - n, name);
  lua_createtable(L, n, 0);
  for (j = 0; j < n; j++) {
    push_typename(L, &p[j]);
    lua_rawseti(L, -2, j + 1);
  }
  return 1;
}


/* a type name as k.signature writes it ("u32", "b8[16]") back into a Param */
static void totype (lua_State *L, int pos, const char *s, Param *p) {
  int bits = 0, count = 1;
  char kind = s[0];
  if (strchr("usfb", kind) == NULL || sscanf(s + 1, "%d", &bits) != 1 ||
      (bits != 8 && bits != 16 && bits != 32 && bits != 64))
    luaL_error(L, "cuda.check_args: signature[%d] = '%s' is not a parameter type", pos, s);
  if (strchr(s, '[') && (sscanf(strchr(s, '[') + 1, "%d", &count) != 1 || count < 1 || count > 4096 / (bits / 8)))
    luaL_error(L, "cuda.check_args: signature[%d] = '%s' has a bad array length (1..%d)", pos, s, 4096 / (bits / 8));
  p->kind = kind;
  p->bits = (short)bits;
  p->bytes = bits / 8 * count;
}


/*
** cuda.check_args(signature, ...) -> true, or the error a launch with these
** arguments would raise: the same checks, with no kernel or GPU needed.
*/
static int cuda_check_args (lua_State *L) {
  int n, nargs = lua_gettop(L) - 1, j;
  char buf[64];
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (int)luaL_len(L, 1);
  if (n > MAXPARAMS) return luaL_error(L, "cuda.check_args: more than %d parameters", MAXPARAMS);
  if (nargs != n)
    return luaL_error(L, "launch: the kernel takes %d argument%s, got %d", n, n == 1 ? "" : "s", nargs);
  for (j = 0; j < n; j++) {
    Param p;
    lua_rawgeti(L, 1, j + 1);
    totype(L, j + 1, luaL_checkstring(L, -1), &p);
    lua_pop(L, 1);
    if (p.bytes > (int)sizeof(buf)) {   /* only the size matters for big structs */
      size_t len;
      if (lua_type(L, j + 2) != LUA_TSTRING || (lua_tolstring(L, j + 2, &len), len != (size_t)p.bytes))
        return luaL_error(L, "launch: argument %d must be a string of %d bytes (a struct by value)",
                          j + 1, p.bytes);
      continue;
    }
    putarg(L, j + 2, j + 1, &p, buf, -1, culua_state(L));
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* }====================================================== */


/* cuda.debug(on) -> previous setting: synchronize after every launch */
static int cuda_debug (lua_State *L) {
  culua_State *S = culua_state(L);
  int old = S->debug;
  if (!lua_isnone(L, 1)) S->debug = lua_toboolean(L, 1);
  lua_pushboolean(L, old);
  return 1;
}


static const luaL_Reg funcs[] = {
  {"debug", cuda_debug},
  {"signature", cuda_signature},
  {"check_args", cuda_check_args},
  {NULL, NULL}
};


void culua_open_kernel (lua_State *L) {
  static const lua_CFunction withmeta[] = {kernel_launch, kernel_prepare, kernel_max_active_clusters};
  static const char *const names[] = {"launch", "prepare", "max_active_clusters"};
  culua_State *S = culua_state(L);
  int i, j;
  lua_createtable(L, NLAUNCH_KEYS, 0);            /* keys */
  for (j = 0; j < NLAUNCH_KEYS; j++) {
    lua_pushstring(L, launch_keys[j]);
    S->launch_keys[j] = lua_topointer(L, -1);
    lua_rawseti(L, -2, j + 1);
  }
  lua_rawsetp(L, LUA_REGISTRYINDEX, &launch_keys_key);
  culua_newmeta(L, CULUA_KERNEL, kernel_meta, kernel_methods);
  luaL_getmetatable(L, CULUA_KERNEL);             /* mt */
  lua_getfield(L, -1, "methods");                 /* mt, methods */
  for (i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, withmeta[i], 1);          /* mt, methods, f */
    lua_setfield(L, -2, names[i]);
  }
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, kernel_index, 2);           /* mt, methods, __index */
  lua_setfield(L, -3, "__index");
  lua_pop(L, 2);
  luaL_setfuncs(L, funcs, 0);
}
