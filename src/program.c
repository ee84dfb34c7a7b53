/*
** program.c
** cuda.program: CUDA C++ compiled at run time by NVRTC, with a disk cache.
**
**   local prog = cuda.compile(src, {options = {...}, headers = {...},
**                                   name_expressions = {...}, output = "ptx", rdc = false})
**   prog.ptx  prog.cubin  prog.log  prog.lowered[expr]  prog.cached  prog.rdc
*/

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "culua_int.h"


#define MAXOPTS     64
#define MAXHEADERS  64
#define MAXNAMES    256

/* what one compile is asked for, all of it pointing into the Lua stack */
typedef struct Request {
  const char *src;
  size_t srclen;
  const char *name;          /* NVRTC's program name, as the log prints it */
  const char *file;          /* Lua file and line of the source's first line, */
  int line;                  /* or NULL: the log keeps the kernel's own lines */
  const char *callsrc;       /* the calling chunk: "@path", "=name" or its text */
  size_t callsrclen;
  const char *callname;      /* its short name, as error positions print it */
  int cubin;                 /* output CUBIN instead of PTX */
  int usecache;
  int userarch;              /* options include -arch= */
  int rdc;                   /* relocatable device code (for cuda.link) */
  int nopts;
  const char *opts[MAXOPTS];
  int nheaders;
  const char *hnames[MAXHEADERS];
  const char *hsrcs[MAXHEADERS];
  int nnames;
  const char *names[MAXNAMES];
  char arch[32];             /* the -arch=... option in force, or "" */
  char incopt[2][600];       /* the -I options we added */
} Request;


/* {====================================================== options */

/* what the cache key and the default target need to know of NVRTC */
typedef struct NvrtcId {
  int major, minor;
  int narchs;
  int archs[128];
} NvrtcId;


static int hasprefix (const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}


static void addopt (lua_State *L, Request *q, const char *opt) {
  if (q->nopts >= MAXOPTS)
    luaL_error(L, "cuda.compile: more than %d options", MAXOPTS);
  q->opts[q->nopts++] = opt;
}


/*
** The target: the current device's architecture when a GPU is there (PTX
** for compute_XY, CUBIN for sm_XY), clamped to what this NVRTC supports.
*/
static void default_arch (lua_State *L, Request *q, const NvrtcId *id) {
  const culua_Driver *cu = culua_load_driver(NULL);
  int major = 0, minor = 0, cc, best = 0, i, count = 0;
  CUdevice dev;
  if (cu == NULL || culua_driver_init() != CUDA_SUCCESS ||
      cu->cuDeviceGetCount(&count) != CUDA_SUCCESS ||
      culua_state(L)->device >= count ||
      cu->cuDeviceGet(&dev, culua_state(L)->device) != CUDA_SUCCESS ||
      cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
      cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) {
    if (q->cubin)
      luaL_error(L, "cuda.compile: output 'cubin' needs a device or an -arch=sm_XX option");
    return;  /* NVRTC's own default target */
  }
  cc = major * 10 + minor;
  if (id->narchs > 0) {
    for (i = 0; i < id->narchs; i++)
      if (id->archs[i] <= cc && id->archs[i] > best) best = id->archs[i];
    if (best == 0)
      luaL_error(L, "cuda.compile: this NVRTC cannot target sm_%d", cc);
    if (q->cubin && best != cc)
      luaL_error(L, "cuda.compile: this NVRTC cannot make a CUBIN for sm_%d", cc);
    cc = best;
  }
  snprintf(q->arch, sizeof(q->arch), "-arch=%s_%d", q->cubin ? "sm" : "compute", cc);
  addopt(L, q, q->arch);
}


/*
** The toolkit's include directory, which NVRTC does not bring: its own
** built-in headers stop short of <cuda_fp16.h>, <cuda_bf16.h> and
** <cuda_fp8.h>. The one configure found, else (a binary moved to another
** machine) the usual places, looked for at run time; NULL when none has
** them.
*/
static const char *toolkit_include (char *buf, size_t size) {
  const char *homes[] = {NULL, "CUDA_HOME", "CUDA_PATH", NULL};
  struct stat st;
  int i;
  for (i = 0; i < 4; i++) {
    const char *home = i == 0 ? NULL : i == 3 ? "/usr/local/cuda" : getenv(homes[i]);
    if (i == 0) snprintf(buf, size, "%s", CULUA_CUDA_INCLUDE);
    else if (home == NULL || *home == '\0') continue;
    else snprintf(buf, size, "%s/include", home);
    {
      char probe[700];
      snprintf(probe, sizeof(probe), "%s/cuda_fp16.h", buf);
      if (stat(probe, &st) == 0) return buf;
    }
  }
  return NULL;
}


/* the toolkit headers (<cuda/std/...>, <cooperative_groups.h>, <cuda_fp16.h>) with no flags */
static void default_includes (lua_State *L, Request *q) {
  char found[600];
  const char *inc = getenv("CULUA_CUDA_INCLUDE");
  if (inc == NULL) inc = toolkit_include(found, sizeof(found));
  if (inc == NULL) inc = CULUA_CUDA_INCLUDE;   /* none: NVRTC's error says what is missing */
  if (*inc == '\0') return;  /* set empty: the user wants none */
  snprintf(q->incopt[0], sizeof(q->incopt[0]), "-I%s", inc);
  snprintf(q->incopt[1], sizeof(q->incopt[1]), "-I%s/cccl", inc);
  addopt(L, q, q->incopt[0]);
  addopt(L, q, q->incopt[1]);
}


/* <culua/...> device headers with no flags; a user header of the same name wins */
static void add_catalog_headers (lua_State *L, Request *q) {
  const culua_Blob *b = NULL;
  const char *name;
  int i, j;
  while ((b = culua_blob_next("header", b, &name)) != NULL) {
    for (j = 0; j < q->nheaders; j++)
      if (strcmp(q->hnames[j], name) == 0) break;
    if (j < q->nheaders) continue;
    if (q->nheaders >= MAXHEADERS)
      luaL_error(L, "cuda.compile: more than %d headers", MAXHEADERS);
    q->hnames[q->nheaders] = name;
    q->hsrcs[q->nheaders++] = (const char *)b->data;
  }
  /* by name: lua_next's order varies between processes (per-state hash
  ** seeds), and the cache key must not */
  for (i = 1; i < q->nheaders; i++) {
    const char *hn = q->hnames[i], *hs = q->hsrcs[i];
    for (j = i; j > 0 && strcmp(q->hnames[j - 1], hn) > 0; j--) {
      q->hnames[j] = q->hnames[j - 1];
      q->hsrcs[j] = q->hsrcs[j - 1];
    }
    q->hnames[j] = hn;
    q->hsrcs[j] = hs;
  }
}


static void read_request (lua_State *L, Request *q) {
  int i, userarch = 0;
  lua_Debug ar;
  memset(q, 0, sizeof(*q));
  q->src = luaL_checklstring(L, 1, &q->srclen);
  {   /* NVRTC reads C strings: what follows a NUL would be dropped in silence */
    const char *nul = (const char *)memchr(q->src, '\0', q->srclen);
    if (nul != NULL)
      luaL_error(L, "cuda.compile: the source has a NUL byte at offset %I (NVRTC would ignore the %I bytes after it)",
                 (lua_Integer)(nul - q->src), (lua_Integer)(q->srclen - (size_t)(nul - q->src) - 1));
  }
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  /* where the source string began is found only if a compile fails
  ** (locate, below); opts.file/opts.line say it outright */
  if (culua_caller(L, &ar)) {
    q->callsrc = ar.source;                          /* the Proto's: alive during the call */
    q->callsrclen = ar.srclen;
    q->callname = lua_pushstring(L, ar.short_src);   /* anchored at index 3 */
  }
  lua_settop(L, 3);   /* (no caller: nil there) */
  q->usecache = 1;
  q->name = "kernel.cu";
  if (lua_isnil(L, 2)) goto defaults;
  {
    static const char *const known[] = {"options", "headers", "name_expressions", "output", "name", "file",
                                        "line", "cache", "rdc", NULL};
    culua_checkoptions(L, 2, "cuda.compile", known);
  }
  if (lua_getfield(L, 2, "name") != LUA_TNIL) {
    culua_checkfield(L, "cuda.compile", "name", LUA_TSTRING);
    q->name = lua_tostring(L, -1);
  }
  if (lua_getfield(L, 2, "file") != LUA_TNIL) {
    culua_checkfield(L, "cuda.compile", "file", LUA_TSTRING);
    q->file = lua_tostring(L, -1);
  }
  if (lua_getfield(L, 2, "line") != LUA_TNIL) {
    culua_checkfield(L, "cuda.compile", "line", LUA_TNUMBER);
    q->line = (int)lua_tointeger(L, -1);
  }
  if (q->file != NULL || q->line != 0) {   /* told: no search */
    if (q->file == NULL) q->file = q->callname ? q->callname : "?";
    if (q->line == 0) q->line = 1;
    q->callsrc = NULL;
  }
  if (lua_getfield(L, 2, "cache") != LUA_TNIL) q->usecache = lua_toboolean(L, -1);
  if (lua_getfield(L, 2, "output") != LUA_TNIL) {
    const char *out;
    culua_checkfield(L, "cuda.compile", "output", LUA_TSTRING);
    out = lua_tostring(L, -1);
    if (strcmp(out, "cubin") == 0) q->cubin = 1;
    else if (strcmp(out, "ptx") != 0)
      luaL_error(L, "cuda.compile: output must be 'ptx' or 'cubin', not '%s'", out);
  }
  /* relocatable device code: for cuda.link (device functions across
  ** programs, device-side launches) */
  if (lua_getfield(L, 2, "rdc") != LUA_TNIL && lua_toboolean(L, -1)) {
    addopt(L, q, "-rdc=true");
    q->rdc = 1;
  }
  if (lua_getfield(L, 2, "options") != LUA_TNIL) {   /* options stay at a fixed index */
    culua_checkfield(L, "cuda.compile", "options", LUA_TTABLE);
    for (i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
      const char *o;
      if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "cuda.compile: options[%d] must be a string", i);
      o = lua_tostring(L, -1);
      if (hasprefix(o, "-arch=") || hasprefix(o, "--gpu-architecture=")) {
        userarch = 1;
        snprintf(q->arch, sizeof(q->arch), "%s", o);
      }
      else if (strcmp(o, "-rdc=true") == 0 || strcmp(o, "--relocatable-device-code=true") == 0 ||
               strcmp(o, "-dc") == 0)
        q->rdc = 1;
      else if (hasprefix(o, "-arch") || hasprefix(o, "--gpu-architecture"))
        luaL_error(L, "cuda.compile: write the target as '-arch=NAME', not '%s'", o);
      addopt(L, q, o);
      lua_pop(L, 1);   /* still referenced by the options table */
    }
    lua_pop(L, 1);
  }
  if (lua_getfield(L, 2, "headers") != LUA_TNIL) {
    culua_checkfield(L, "cuda.compile", "headers", LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "cuda.compile: headers must map names to source strings");
      if (q->nheaders >= MAXHEADERS)
        luaL_error(L, "cuda.compile: more than %d headers", MAXHEADERS);
      {
        size_t hlen;
        const char *h = lua_tolstring(L, -1, &hlen);
        if (memchr(h, '\0', hlen) != NULL)
          luaL_error(L, "cuda.compile: header '%s' has a NUL byte", lua_tostring(L, -2));
      }
      q->hnames[q->nheaders] = lua_tostring(L, -2);
      q->hsrcs[q->nheaders++] = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
  }
  if (lua_getfield(L, 2, "name_expressions") != LUA_TNIL) {
    culua_checkfield(L, "cuda.compile", "name_expressions", LUA_TTABLE);
    for (i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
      if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "cuda.compile: name_expressions[%d] must be a string", i);
      if (q->nnames >= MAXNAMES)
        luaL_error(L, "cuda.compile: more than %d name expressions", MAXNAMES);
      q->names[q->nnames++] = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
  }
 defaults:
  q->userarch = userarch;
  add_catalog_headers(L, q);
}


/* the options culua adds: the target (unless given) and the include path */
static void finish_request (lua_State *L, Request *q, const NvrtcId *id) {
  if (!q->userarch) default_arch(L, q, id);
  else if (q->cubin && strstr(q->arch, "compute_"))
    luaL_error(L, "cuda.compile: output 'cubin' needs -arch=sm_XX, not '%s'", q->arch);
  default_includes(L, q);
}

/* }====================================================== */


/* {====================================================== disk cache */

/*
** The key is every input that can change the output, written out in full;
** the file name is its hash, and the key itself is stored in the file and
** compared on a hit, so a hash collision can never load the wrong code.
*/
static void push_key (lua_State *L, const Request *q, const NvrtcId *id) {
  luaL_Buffer b;
  int i;
  char head[96];
  luaL_buffinit(L, &b);
  snprintf(head, sizeof(head), "culua-nvrtc-1 nvrtc=%d.%d out=%s", id->major, id->minor,
           q->cubin ? "cubin" : "ptx");
  luaL_addstring(&b, head);
  luaL_addchar(&b, '\0');
  luaL_addstring(&b, q->name);
  luaL_addchar(&b, '\0');
  for (i = 0; i < q->nopts; i++) {
    luaL_addstring(&b, "opt:");
    luaL_addstring(&b, q->opts[i]);
    luaL_addchar(&b, '\0');
  }
  for (i = 0; i < q->nheaders; i++) {
    luaL_addstring(&b, "hdr:");
    luaL_addstring(&b, q->hnames[i]);
    luaL_addchar(&b, '\0');
    luaL_addstring(&b, q->hsrcs[i]);
    luaL_addchar(&b, '\0');
  }
  for (i = 0; i < q->nnames; i++) {
    luaL_addstring(&b, "name:");
    luaL_addstring(&b, q->names[i]);
    luaL_addchar(&b, '\0');
  }
  luaL_addstring(&b, "src:");
  luaL_addlstring(&b, q->src, q->srclen);
  luaL_pushresult(&b);
}


static uint64_t fnv1a (const char *s, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}


/* the cache directory (created), or NULL when caching is off or impossible */
static const char *cache_dir (char *buf, size_t size) {
  const char *env = getenv("CULUA_CACHE"), *base;
  char *p;
  if (env != NULL && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0))
    return NULL;
  if (env != NULL && *env != '\0')
    snprintf(buf, size, "%s", env);
  else if ((base = getenv("XDG_CACHE_HOME")) != NULL && *base != '\0')
    snprintf(buf, size, "%s/culua", base);
  else if ((base = getenv("HOME")) != NULL && *base != '\0')
    snprintf(buf, size, "%s/.cache/culua", base);
  else
    return NULL;
  for (p = buf + 1; *p; p++) {   /* mkdir -p */
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return NULL;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return NULL;
  return buf;
}


static void cache_path (char *path, size_t size, const char *dir, const char *key,
                        size_t keylen) {
  snprintf(path, size, "%s/%016llx.nvrtc", dir,
           (unsigned long long)fnv1a(key, keylen));
}


/* a file of length-prefixed parts: key, code, log, then lowered names */
static int write_part (FILE *f, const char *s, size_t n) {
  return fprintf(f, "%zu\n", n) > 0 && fwrite(s, 1, n, f) == n;
}


static int read_part (FILE *f, luaL_Buffer *b, long size) {
  size_t n, got;
  char *p;
  long at;
  /* a length past the file's end is a corrupt entry: a miss, and no 2 GiB
  ** buffer made for it */
  if (fscanf(f, "%zu", &n) != 1 || fgetc(f) != '\n' || (at = ftell(f)) < 0 || n > (size_t)(size - at))
    return 0;
  p = luaL_prepbuffsize(b, n);
  got = fread(p, 1, n, f);
  luaL_addsize(b, got);
  return got == n;
}


/*
** On a hit, push code, log and a table of lowered names and return 1. The
** stored key must equal ours byte for byte.
*/
/*
** An entry: the key, code and log, then expression/lowered-name pairs, each
** "<length>\n<bytes>". Anything else (truncated, corrupt, another key) is a
** miss: the entry is never trusted beyond what it proves. Pushes code, log
** and the lowered table on success.
*/
static int cache_read (lua_State *L, FILE *f, int keyidx, int nnames) {
  luaL_Buffer b;
  int i, ok, top = lua_gettop(L);
  long size;
  if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) return 0;
  luaL_buffinit(L, &b);
  ok = read_part(f, &b, size);
  luaL_pushresult(&b);                              /* stored key */
  ok = ok && lua_rawequal(L, -1, keyidx);
  lua_pop(L, 1);
  for (i = 0; ok && i < 2; i++) {                   /* code, log */
    luaL_buffinit(L, &b);
    ok = read_part(f, &b, size);
    luaL_pushresult(&b);
  }
  lua_createtable(L, 0, nnames);                    /* code, log, lowered */
  for (i = 0; ok && i < 2 * nnames; i++) {          /* expression, lowered name */
    luaL_buffinit(L, &b);
    ok = read_part(f, &b, size);
    luaL_pushresult(&b);
    if (i % 2 == 1) lua_rawset(L, -3);
  }
  if (!ok) lua_settop(L, top);
  return ok;
}


static int cache_load (lua_State *L, const char *path, int keyidx, int nnames) {
  FILE *f = fopen(path, "rb");
  int ok;
  if (f == NULL) return 0;
  ok = cache_read(L, f, keyidx, nnames);   /* raises only on memory errors */
  fclose(f);
  return ok;
}


/* store key, code, log, lowered (at the stack indices given); errors ignored */
static void cache_store (lua_State *L, const char *path, int keyidx, int codeidx,
                         int logidx, int lowidx) {
  char tmp[4300];
  FILE *f;
  int ok;
  size_t n;
  const char *s;
  snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
  if ((f = fopen(tmp, "wb")) == NULL) return;
  s = lua_tolstring(L, keyidx, &n);
  ok = write_part(f, s, n);
  s = lua_tolstring(L, codeidx, &n);
  ok = ok && write_part(f, s, n);
  s = lua_tolstring(L, logidx, &n);
  ok = ok && write_part(f, s, n);
  lua_pushnil(L);
  while (lua_next(L, lowidx)) {
    s = lua_tolstring(L, -2, &n);
    ok = ok && write_part(f, s, n);
    s = lua_tolstring(L, -1, &n);
    ok = ok && write_part(f, s, n);
    lua_pop(L, 1);
  }
  ok = (fclose(f) == 0) && ok;
  /* rename is atomic: a reader sees the old file or the whole new one */
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* }====================================================== */


/* {====================================================== NVRTC identity */

/*
** Loading NVRTC takes milliseconds (a 100 MB library), more than a cache hit
** may cost. So the version and targets of the NVRTC in use are kept in
** <cache>/nvrtc.id with the library's real path, size and mtime, and the
** environment that decides which library is opened. The record is used only
** while all of that is unchanged; otherwise NVRTC is loaded and it is rewritten.
*/
static void env_key (char *buf, size_t size) {
  const char *forced = getenv("CULUA_LIBNVRTC"), *ldpath = getenv("LD_LIBRARY_PATH");
  struct stat st;
  long long t = stat("/etc/ld.so.cache", &st) == 0 ? (long long)st.st_mtime : 0;
  snprintf(buf, size, "%s|%s|%lld|%s", forced ? forced : "", ldpath ? ldpath : "", t, CULUA_CUDA_LIBDIR);
}


static int file_stamp (const char *path, long long *size, long long *mtime) {
  struct stat st;
  if (path == NULL || stat(path, &st) != 0) return 0;
  *size = (long long)st.st_size;
  *mtime = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  return 1;
}


static int read_id (const char *file, const char *env, NvrtcId *id) {
  char line[8192], path[4096];
  long long size, mtime, s2, m2;
  int i, ok = 0;
  FILE *f = fopen(file, "r");
  if (f == NULL) return 0;
  if (fgets(line, sizeof(line), f) && strcmp(line, "culua-nvrtc-id 1\n") == 0 &&
      fgets(line, sizeof(line), f) && strncmp(line, env, strlen(env)) == 0 && line[strlen(env)] == '\n' &&
      fgets(path, sizeof(path), f) && (path[strcspn(path, "\n")] = '\0', 1) &&
      fscanf(f, "%lld %lld %d %d %d", &size, &mtime, &id->major, &id->minor, &id->narchs) == 5 &&
      id->narchs >= 0 && id->narchs <= 128 &&
      file_stamp(path, &s2, &m2) && s2 == size && m2 == mtime) {
    for (i = 0; i < id->narchs; i++)
      if (fscanf(f, "%d", &id->archs[i]) != 1) break;
    ok = i == id->narchs;
  }
  fclose(f);
  return ok;
}


static void write_id (const char *file, const char *env, const NvrtcId *id) {
  char tmp[4300];
  const char *path = culua_nvrtc_file();
  long long size, mtime;
  int i, ok;
  FILE *f;
  if (!file_stamp(path, &size, &mtime)) return;
  snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", file, (long)getpid());
  if ((f = fopen(tmp, "w")) == NULL) return;
  ok = fprintf(f, "culua-nvrtc-id 1\n%s\n%s\n%lld %lld %d %d %d\n", env, path, size, mtime,
               id->major, id->minor, id->narchs) > 0;
  for (i = 0; ok && i < id->narchs; i++) ok = fprintf(f, "%d\n", id->archs[i]) > 0;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, file) != 0) remove(tmp);
}


static void nvrtc_identity (lua_State *L, const char *dir, NvrtcId *id) {
  char file[4200], env[8192];
  const culua_Nvrtc *rtc;
  memset(id, 0, sizeof(*id));
  env_key(env, sizeof(env));
  if (dir != NULL) {
    snprintf(file, sizeof(file), "%s/nvrtc.id", dir);
    if (read_id(file, env, id)) return;
  }
  rtc = culua_rtc(L, "cuda.compile");
  rtc->nvrtcVersion(&id->major, &id->minor);
  if (rtc->nvrtcGetNumSupportedArchs(&id->narchs) != NVRTC_SUCCESS || id->narchs > 128 ||
      rtc->nvrtcGetSupportedArchs(id->archs) != NVRTC_SUCCESS)
    id->narchs = 0;
  if (dir != NULL) write_id(file, env, id);
}

/* }====================================================== */


/* {====================================================== compiling */

/*
** The line of `chunk` on which the only copy of `src` starts, or 0 when
** src is not there or is there twice: a guessed place is worse than none.
** A [[...]] literal's text stands in the chunk as it is (Lua drops only a
** newline right after the [[, which is before the text); a quoted string
** with escapes does not, and then the log keeps the kernel's own lines.
*/
static int find_line (const char *chunk, size_t clen, const char *src, size_t slen) {
  const char *p = chunk, *end = chunk + clen, *hit = NULL;
  int line = 1;
  if (slen == 0 || slen > clen) return 0;
  while ((size_t)(end - p) >= slen) {
    const char *c = (const char *)memchr(p, src[0], (size_t)(end - p) - slen + 1);
    if (c == NULL) break;
    if (memcmp(c, src, slen) == 0) {
      if (hit != NULL) return 0;   /* twice: not certain */
      hit = c;
    }
    p = c + 1;
  }
  if (hit == NULL) return 0;
  for (p = chunk; p < hit; p++) line += *p == '\n';
  return line;
}


/*
** After a failed compile: find the source in the calling chunk's text (the
** file's, for a chunk loaded from a file). Sets q->file and q->line when
** certain; leaves them NULL otherwise.
*/
static void locate (lua_State *L, Request *q) {
  const char *text = NULL;
  size_t len = 0;
  if (q->file != NULL || q->callsrc == NULL || q->callsrc[0] == '=') return;
  if (q->callsrc[0] == '@') {
    FILE *f = fopen(q->callsrc + 1, "rb");
    luaL_Buffer b;
    size_t got;
    if (f == NULL) return;
    luaL_buffinit(L, &b);
    do {
      char *p = luaL_prepbuffer(&b);
      got = fread(p, 1, LUAL_BUFFERSIZE, f);
      luaL_addsize(&b, got);
    } while (got == LUAL_BUFFERSIZE && luaL_bufflen(&b) < ((size_t)64 << 20));
    fclose(f);
    luaL_pushresult(&b);     /* stays on the stack until the error is raised */
    text = lua_tolstring(L, -1, &len);
  }
  else {
    text = q->callsrc;
    len = q->callsrclen;
  }
  if ((q->line = find_line(text, len, q->src, q->srclen)) > 0) q->file = q->callname;
}


/*
** NVRTC's log says "kernel.cu(12): error: ..."; say instead where that line
** stands in the Lua file, which is what the user can open. Without a place
** (q->file NULL) the log is left as NVRTC wrote it.
*/
static void push_mapped_log (lua_State *L, const Request *q, const char *log) {
  luaL_Buffer b;
  size_t nlen = strlen(q->name);
  const char *p = log;
  if (q->file == NULL) {
    lua_pushstring(L, log);
    return;
  }
  luaL_buffinit(L, &b);
  while (*p) {
    const char *hit = strstr(p, q->name);
    char *end;
    long n;
    if (hit == NULL || hit[nlen] != '(') {
      const char *stop = hit ? hit + nlen : p + strlen(p);
      luaL_addlstring(&b, p, (size_t)(stop - p));
      p = stop;
      continue;
    }
    n = strtol(hit + nlen + 1, &end, 10);
    if (*end != ')' || n <= 0) {
      luaL_addlstring(&b, p, (size_t)(hit + nlen - p));
      p = hit + nlen;
      continue;
    }
    luaL_addlstring(&b, p, (size_t)(hit - p));
    lua_pushfstring(L, "%s:%d", q->file, q->line + (int)n - 1);
    luaL_addvalue(&b);
    p = end + 1;
  }
  luaL_pushresult(&b);
}


/*
** An NVRTC program is NVRTC's memory (tens of KiB and up), and compile()
** allocates Lua memory while it lives: a memory error there would longjmp
** past nvrtcDestroyProgram. So a guard userdata owns it from birth, and the
** guard's __gc destroys what compile() did not get to.
*/
#define CULUA_RTCGUARD  "cuda.nvrtc_guard"

typedef struct RtcGuard {
  nvrtcProgram prog;           /* NULL once destroyed */
  const culua_Nvrtc *rtc;
} RtcGuard;

static void guard_destroy (RtcGuard *g) {
  if (g->prog != NULL) g->rtc->nvrtcDestroyProgram(&g->prog);
  g->prog = NULL;
}

static int guard_gc (lua_State *L) {
  guard_destroy((RtcGuard *)luaL_checkudata(L, 1, CULUA_RTCGUARD));
  return 0;
}


/*
** A log (on top) that could not open one of the toolkit's headers: say
** where they were looked for, and how to point at them.
*/
static void hint_headers (lua_State *L, const Request *q) {
  const char *log = lua_tostring(L, -1), *env = getenv("CULUA_CUDA_INCLUDE"), *dir;
  char found[600];
  (void)q;
  if (strstr(log, "source file \"cuda_") == NULL && strstr(log, "source file \"cuda/") == NULL) return;
  dir = env != NULL ? env : toolkit_include(found, sizeof(found));
  lua_pushfstring(L, "%s\n(NVRTC does not bring the CUDA toolkit's headers; culua hands it the toolkit's "
                  "include directory: $CULUA_CUDA_INCLUDE, else the first of %s, $CUDA_HOME/include, "
                  "$CUDA_PATH/include and /usr/local/cuda/include that holds cuda_fp16.h. %s)", log,
                  CULUA_CUDA_INCLUDE, dir == NULL ? "None of them does: install the toolkit's headers, "
                  "or set CULUA_CUDA_INCLUDE" : lua_pushfstring(L, "It was %s.", *dir ? dir : "set empty: none"));
  lua_replace(L, -2 - (dir != NULL));
  if (dir != NULL) lua_pop(L, 1);
}


/* compile; push code, log, lowered names (or raise with the mapped log) */
static void compile (lua_State *L, Request *q) {
  const culua_Nvrtc *rtc = culua_rtc(L, "cuda.compile");
  RtcGuard *g;
  nvrtcProgram prog;
  nvrtcResult r;
  size_t n;
  int i;
  char *buf;
  g = (RtcGuard *)lua_newuserdatauv(L, sizeof(RtcGuard), 0);   /* guard */
  g->prog = NULL;
  g->rtc = rtc;
  luaL_setmetatable(L, CULUA_RTCGUARD);
  r = rtc->nvrtcCreateProgram(&prog, q->src, q->name, q->nheaders, q->hsrcs, q->hnames);
  if (r != NVRTC_SUCCESS)
    luaL_error(L, "cuda.compile: %s creating program '%s'", rtc->nvrtcGetErrorString(r), q->name);
  g->prog = prog;
  for (i = 0; i < q->nnames && r == NVRTC_SUCCESS; i++)
    r = rtc->nvrtcAddNameExpression(prog, q->names[i]);
  if (r == NVRTC_SUCCESS)
    r = rtc->nvrtcCompileProgram(prog, q->nopts, q->opts);
  /* the log, whatever happened */
  if (rtc->nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS) n = 1;
  buf = (char *)lua_newuserdatauv(L, n + 1, 0);      /* freed by the GC if we raise */
  buf[0] = '\0';
  rtc->nvrtcGetProgramLog(prog, buf);
  buf[n] = '\0';
  if (r != NVRTC_SUCCESS) {
    guard_destroy(g);
    locate(L, q);
    push_mapped_log(L, q, buf);
    hint_headers(L, q);
    if (q->file != NULL)
      luaL_error(L, "cuda.compile: %s in %s (source from %s:%d):\n%s",
                 rtc->nvrtcGetErrorString(r), q->name, q->file, q->line, lua_tostring(L, -1));
    luaL_error(L, "cuda.compile: %s in %s (lines are the kernel's own: its place in the Lua "
               "file is not certain):\n%s", rtc->nvrtcGetErrorString(r), q->name, lua_tostring(L, -1));
  }
  if (q->cubin) r = rtc->nvrtcGetCUBINSize(prog, &n);
  else r = rtc->nvrtcGetPTXSize(prog, &n);
  if (r == NVRTC_SUCCESS) {
    char *code = (char *)lua_newuserdatauv(L, n, 0);
    r = q->cubin ? rtc->nvrtcGetCUBIN(prog, code) : rtc->nvrtcGetPTX(prog, code);
    if (!q->cubin && n > 0) n--;   /* the PTX size counts its final NUL */
    lua_pushlstring(L, code, n);                    /* log, code-ud, code */
    lua_replace(L, -2);
  }
  if (r != NVRTC_SUCCESS) {
    guard_destroy(g);
    luaL_error(L, "cuda.compile: %s reading the output of %s", rtc->nvrtcGetErrorString(r), q->name);
  }
  lua_pushstring(L, buf);                           /* guard, logud, code, log */
  lua_remove(L, -3);                                /* guard, code, log */
  lua_createtable(L, 0, q->nnames);
  for (i = 0; i < q->nnames; i++) {
    const char *lowered = NULL;
    if (rtc->nvrtcGetLoweredName(prog, q->names[i], &lowered) == NVRTC_SUCCESS && lowered) {
      lua_pushstring(L, lowered);
      lua_setfield(L, -2, q->names[i]);
    }
  }
  guard_destroy(g);
  lua_remove(L, -4);                                /* code, log, lowered */
}



/*
** PTX compiled for NVRTC's default target says it on its ".target sm_XY"
** line: push "compute_XY", as -arch=compute_XY would have set prog.arch
** (1), or nothing (0) when there is no such line.
*/
static int push_ptx_arch (lua_State *L, int ptx) {
  size_t len;
  const char *s = lua_tolstring(L, ptx, &len), *t = s ? strstr(s, ".target sm_") : NULL;
  size_t n = 0;
  if (t == NULL) return 0;
  t += strlen(".target sm_");
  while (t + n < s + len && (isalnum((unsigned char)t[n]))) n++;
  if (n == 0) return 0;
  lua_pushfstring(L, "compute_%s", lua_pushlstring(L, t, n));
  lua_remove(L, -2);
  return 1;
}

/* cuda.compile(src [, opts]) -> program */
static int cuda_compile (lua_State *L) {
  Request q;
  NvrtcId id;
  char dirbuf[4096], path[4200];
  const char *dir;
  int hit = 0, keyidx;
  read_request(L, &q);
  dir = q.usecache ? cache_dir(dirbuf, sizeof(dirbuf)) : NULL;
  nvrtc_identity(L, dir, &id);
  finish_request(L, &q, &id);
  push_key(L, &q, &id);
  keyidx = lua_gettop(L);
  if (dir != NULL) {
    size_t klen;
    const char *key = lua_tolstring(L, keyidx, &klen);
    cache_path(path, sizeof(path), dir, key, klen);
    hit = cache_load(L, path, keyidx, q.nnames);
  }
  if (!hit) {
    compile(L, &q);                               /* key, code, log, lowered */
    if (dir != NULL) cache_store(L, path, keyidx, keyidx + 1, keyidx + 2, keyidx + 3);
  }
  /* the program: a userdata whose user value holds its fields */
  lua_newuserdatauv(L, 1, 1);                     /* key, code, log, lowered, p */
  luaL_setmetatable(L, CULUA_PROGRAM);
  lua_createtable(L, 0, 8);                       /* ..., p, fields */
  lua_pushvalue(L, keyidx + 1);
  lua_setfield(L, -2, q.cubin ? "cubin" : "ptx");
  lua_pushvalue(L, keyidx + 2);
  lua_setfield(L, -2, "log");
  lua_pushvalue(L, keyidx + 3);
  lua_setfield(L, -2, "lowered");
  lua_pushboolean(L, hit);
  lua_setfield(L, -2, "cached");
  lua_pushstring(L, q.name);
  lua_setfield(L, -2, "name");
  lua_pushboolean(L, q.rdc);
  lua_setfield(L, -2, "rdc");
  if (q.arch[0] != '\0') {
    lua_pushstring(L, strchr(q.arch, '=') + 1);
    lua_setfield(L, -2, "arch");
  }
  else if (!q.cubin && push_ptx_arch(L, keyidx + 1))   /* NVRTC's own default: the PTX says */
    lua_setfield(L, -2, "arch");
  lua_setiuservalue(L, -2, 1);
  return 1;
}

/* }====================================================== */


/* {====================================================== cuda.program */

static int program_index (lua_State *L) {
  luaL_checkudata(L, 1, CULUA_PROGRAM);
  lua_getiuservalue(L, 1, 1);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, -2) != LUA_TNIL) return 1;
  return culua_pushmethod(L, CULUA_PROGRAM, 2);
}


/* prog:lowered_name(expr) -> mangled name of a name expression */
static int program_lowered_name (lua_State *L) {
  const char *expr;
  luaL_checkudata(L, 1, CULUA_PROGRAM);
  expr = luaL_checkstring(L, 2);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "lowered");
  if (lua_getfield(L, -1, expr) == LUA_TNIL)
    return luaL_argerror(L, 2, lua_pushfstring(L,
        "'%s' was not among the program's name_expressions", expr));
  return 1;
}


/* prog:module([{device = ordinal}]) -> the program loaded (cuda.load(prog, opts)) */
static int program_module (lua_State *L) {
  luaL_checkudata(L, 1, CULUA_PROGRAM);
  lua_settop(L, 2);
  return culua_load(L);
}


static int program_tostring (lua_State *L) {
  luaL_checkudata(L, 1, CULUA_PROGRAM);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "name");
  lua_getfield(L, -2, "arch");
  lua_getfield(L, -3, "cubin");
  lua_pushfstring(L, "cuda.program(%s, %s for %s)", lua_tostring(L, -3),
                  lua_toboolean(L, -1) ? "cubin" : "ptx",
                  lua_isstring(L, -2) ? lua_tostring(L, -2) : "NVRTC's default arch");
  return 1;
}


static const luaL_Reg program_meta[] = {
  {"__index", program_index},
  {"__tostring", program_tostring},
  {NULL, NULL}
};

static const luaL_Reg program_methods[] = {
  {"lowered_name", program_lowered_name},
  {"module", program_module},
  {NULL, NULL}
};

/*
** cuda._map_log(log, src [, chunk [, name]]) -> the log as a failed compile
** reports it, src being searched for in chunk (the calling chunk's text).
** A testing hook (fuzz/fuzz.c's logmap target), not part of the API.
*/
static int cuda_map_log (lua_State *L) {
  Request q;
  const char *log = luaL_checkstring(L, 1);
  memset(&q, 0, sizeof(q));
  q.src = luaL_checklstring(L, 2, &q.srclen);
  q.callsrc = luaL_optlstring(L, 3, NULL, &q.callsrclen);
  q.name = luaL_optstring(L, 4, "kernel.cu");
  q.callname = "chunk";
  if (q.callsrc != NULL && (q.callsrc[0] == '@' || q.callsrc[0] == '=')) q.callsrc = NULL;   /* text only */
  locate(L, &q);
  push_mapped_log(L, &q, log);
  return 1;
}


/*
** cuda._read_cache_entry(bytes, key [, nnames]) -> {code =, log =, lowered =} or
** nil: the cache's reader over bytes in memory. A testing hook (fuzz/fuzz.c's
** cache target), not part of the API.
*/
static int cuda_read_cache_entry (lua_State *L) {
  size_t n;
  const char *bytes = luaL_checklstring(L, 1, &n);
  int nnames = (int)luaL_optinteger(L, 3, 0);
  FILE *f;
  luaL_checkstring(L, 2);
  luaL_argcheck(L, nnames >= 0 && nnames <= MAXNAMES, 3, "0..256 names");
  lua_settop(L, 3);
  if (n == 0 || (f = fmemopen((void *)bytes, n, "rb")) == NULL) return 0;
  if (!cache_read(L, f, 2, nnames)) {
    fclose(f);
    return 0;
  }
  fclose(f);
  lua_createtable(L, 0, 3);
  lua_insert(L, -4);
  lua_setfield(L, -4, "lowered");
  lua_setfield(L, -3, "log");
  lua_setfield(L, -2, "code");
  return 1;
}


/* cuda.cache_dir() -> the compile cache's directory (made if missing) | fail when caching is off */
static int cuda_cache_dir (lua_State *L) {
  char buf[4096];
  const char *dir = cache_dir(buf, sizeof(buf));
  if (dir == NULL) luaL_pushfail(L);
  else lua_pushstring(L, dir);
  return 1;
}


static const luaL_Reg funcs[] = {
  {"compile", cuda_compile},
  {"cache_dir", cuda_cache_dir},
  {"_map_log", cuda_map_log},
  {"_read_cache_entry", cuda_read_cache_entry},
  {NULL, NULL}
};

/* }====================================================== */


void culua_open_program (lua_State *L) {
  culua_newmeta(L, CULUA_PROGRAM, program_meta, program_methods);
  luaL_newmetatable(L, CULUA_RTCGUARD);
  lua_pushcfunction(L, guard_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_setfuncs(L, funcs, 0);
}
