/*
** auxlib.c
** The helpers every binding uses, as Lua's lauxlib.c is for its libraries:
** per-state data, errors that name the CUDA error, option checks, object
** tracking and metatables. They sit on the loader and call no binding.
*/

#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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



/* }====================================================== */


/* {====================================================== errors */

/*
** One voice for every message (DESIGN, STYLE): it starts with the function
** the user called, as they wrote it, then says what is wrong, lowercase,
** with no final period, quoting the bad value:
**   cuda.array: CUDA_ERROR_OUT_OF_MEMORY allocating 1.00 TiB on device 0
**   cuda.host_array: unknown option 'pinnned' (known: pinned, mapped, device)
**   cuda.array: bad argument #2 (number expected, got string)
**   copy_from: bad argument #1 (cuda.host_array expected, got number)
** Module functions are named in full (cuda.array, cuda.nccl.comm), methods
** by their name (copy_from, launch). Lua's own argument checks say "bad
** argument #2 to 'array' (...)": culua_int.h points luaL_argerror,
** luaL_typeerror and the luaL_check and luaL_opt functions that raise
** through them at the culua_ versions below, which differ only in the
** message. A Lua module (lua/) raises at the user's line with error(msg,
** level), never at its own.
*/

/*
** Find the function at index f in the table on top, down to `level` tables
** deep; on success leave "prefix.key[.key]" on top (over the table) and
** return 1, else pop nothing and return 0. lauxlib's pushglobalfuncname does
** the same for tracebacks, two levels deep; cuda.nccl.comm is three.
*/
static int findfield (lua_State *L, int f, int level) {
  if (level == 0 || !lua_istable(L, -1)) return 0;
  lua_pushnil(L);
  while (lua_next(L, -2)) {                     /* t, k, v */
    if (lua_type(L, -2) == LUA_TSTRING) {
      if (lua_rawequal(L, f, -1)) {
        lua_pop(L, 1);                          /* t, k */
        return 1;
      }
      if (findfield(L, f, level - 1)) {        /* t, k, v, name */
        lua_pushliteral(L, ".");
        lua_replace(L, -3);                     /* t, k, ".", name */
        lua_concat(L, 3);                       /* t, "k.name" */
        return 1;
      }
    }
    lua_pop(L, 1);
  }
  return 0;
}


/* the name a user calls the running C function by: its place in the
** modules of package.loaded ("cuda.array"), else the name at the call */
static const char *funcname (lua_State *L, lua_Debug *ar) {
  int top = lua_gettop(L);
  lua_getinfo(L, "f", ar);                                    /* f */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);   /* f, loaded */
  lua_pushnil(L);
  while (lua_next(L, top + 2)) {                              /* f, loaded, mod, t */
    if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), LUA_GNAME) != 0 &&
        findfield(L, top + 1, 2)) {                           /* ..., mod, t, "k.name" */
      const char *name = lua_pushfstring(L, "%s.%s", lua_tostring(L, top + 3), lua_tostring(L, -1));
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);   /* the name stays until the error is raised */
      return name;
    }
    lua_settop(L, top + 3);
  }
  lua_settop(L, top);
  return ar->name ? ar->name : "?";
}


int culua_argerror (lua_State *L, int arg, const char *extramsg) {
  lua_Debug ar;
  const char *name;
  if (!lua_getstack(L, 0, &ar))   /* no stack frame */
    return luaL_error(L, "bad argument #%d (%s)", arg, extramsg);
  lua_getinfo(L, "n", &ar);
  name = funcname(L, &ar);
  if (strcmp(ar.namewhat, "method") == 0) {
    arg--;   /* do not count self */
    if (arg == 0) return luaL_error(L, "%s: bad self (%s)", name, extramsg);
  }
  return luaL_error(L, "%s: bad argument #%d (%s)", name, arg, extramsg);
}


int culua_typeerror (lua_State *L, int arg, const char *tname) {
  const char *typearg;
  if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) typearg = lua_tostring(L, -1);
  else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA) typearg = "light userdata";
  else typearg = luaL_typename(L, arg);
  return culua_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", tname, typearg));
}


/* lauxlib's checks, raising through culua_argerror */
void culua_checktype (lua_State *L, int arg, int t) {
  if (lua_type(L, arg) != t) culua_typeerror(L, arg, lua_typename(L, t));
}

void culua_checkany (lua_State *L, int arg) {
  if (lua_type(L, arg) == LUA_TNONE) culua_argerror(L, arg, "value expected");
}

const char *culua_checklstring (lua_State *L, int arg, size_t *len) {
  const char *s = lua_tolstring(L, arg, len);
  if (s == NULL) culua_typeerror(L, arg, lua_typename(L, LUA_TSTRING));
  return s;
}

const char *culua_optlstring (lua_State *L, int arg, const char *def, size_t *len) {
  if (lua_isnoneornil(L, arg)) {
    if (len) *len = def ? strlen(def) : 0;
    return def;
  }
  return culua_checklstring(L, arg, len);
}

lua_Number culua_checknumber (lua_State *L, int arg) {
  int isnum;
  lua_Number d = lua_tonumberx(L, arg, &isnum);
  if (!isnum) culua_typeerror(L, arg, lua_typename(L, LUA_TNUMBER));
  return d;
}

lua_Number culua_optnumber (lua_State *L, int arg, lua_Number def) {
  return lua_isnoneornil(L, arg) ? def : culua_checknumber(L, arg);
}

lua_Integer culua_checkinteger (lua_State *L, int arg) {
  int isnum;
  lua_Integer d = lua_tointegerx(L, arg, &isnum);
  if (!isnum) {
    if (lua_isnumber(L, arg)) culua_argerror(L, arg, "number has no integer representation");
    else culua_typeerror(L, arg, lua_typename(L, LUA_TNUMBER));
  }
  return d;
}

lua_Integer culua_optinteger (lua_State *L, int arg, lua_Integer def) {
  return lua_isnoneornil(L, arg) ? def : culua_checkinteger(L, arg);
}

void *culua_checkudata (lua_State *L, int arg, const char *tname) {
  void *p = luaL_testudata(L, arg, tname);
  if (p == NULL) culua_typeerror(L, arg, tname);
  return p;
}

int culua_checkoption (lua_State *L, int arg, const char *def, const char *const lst[]) {
  const char *name = def ? culua_optlstring(L, arg, def, NULL) : culua_checklstring(L, arg, NULL);
  int i;
  for (i = 0; lst[i]; i++)
    if (strcmp(lst[i], name) == 0) return i;
  return culua_argerror(L, arg, lua_pushfstring(L, "invalid option '%s'", name));
}

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
               type == LUA_TNUMBER ? "an integer" : type == LUA_TTABLE ? "a table"
               : type == LUA_TBOOLEAN ? "a boolean" : "a string",
               lua_type(L, -1) == LUA_TNUMBER ? lua_pushfstring(L, "%s", luaL_tolstring(L, -1, NULL))
                                               : luaL_typename(L, -1));
}


/* the boolean option `key` of the table at t; def when absent, raising on another type */
int culua_optflag (lua_State *L, int t, const char *fname, const char *key, int def) {
  int v = def;
  if (lua_getfield(L, t, key) != LUA_TNIL) {
    culua_checkfield(L, fname, key, LUA_TBOOLEAN);
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
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
