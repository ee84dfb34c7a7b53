/*
** nvtx.c
** cuda.nvtx: named ranges on the timeline of Nsight Systems and other
** NVTX tools.
**
**   cuda.nvtx.push("step"); ...; cuda.nvtx.pop()
**   cuda.nvtx.range("step", fn, ...)             -- fn's results; pops on errors too
**   local r <close> = cuda.nvtx.scope("step")    -- popped when r goes out of scope
**
** NVTX 3 is header-only. Its first call looks for a tool named by the
** NVTX_INJECTION64_PATH environment variable and, when one is set,
** dlopens it from inside NVIDIA's header. That is the one dlopen outside
** loader.c, accepted because the header is NVIDIA's and is the documented
** way to talk to the tools. With no tool attached every call returns at
** once (a few nanoseconds).
*/

#include "config.h"

#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "culua_int.h"


#define CULUA_NVTXSCOPE "cuda.nvtx.scope"


/* {====================================================== the depth */

/*
** NVTX ranges nest per thread, and with no tool attached the library
** answers no depth at all; so culua counts the ranges this state opened.
** That catches an unbalanced pop, and lets range and scope close exactly
** what they opened even when the code inside forgot a pop of its own.
** The functions of cuda.nvtx find the state's data in their upvalue (every
** catalog call is a range: a registry look-up is host time it cannot spare).
*/
#define STATE(L) ((culua_State *)lua_touserdata(L, lua_upvalueindex(1)))

static void push (culua_State *S, const char *name) {
  nvtxRangePushA(name);
  S->nvtx_depth++;
}


/* pop down to depth d (ranges opened inside and left open go too) */
static void pop_to (culua_State *S, int d) {
  while (S->nvtx_depth > d) {
    nvtxRangePop();
    S->nvtx_depth--;
  }
}

/* }====================================================== */


/* {====================================================== functions */

/* cuda.nvtx.push(name) -> depth */
static int nvtx_push (lua_State *L) {
  push(STATE(L), luaL_checkstring(L, 1));
  lua_pushinteger(L, STATE(L)->nvtx_depth);
  return 1;
}


/* cuda.nvtx.pop() -> depth */
static int nvtx_pop (lua_State *L) {
  int d = STATE(L)->nvtx_depth;
  if (d == 0) return luaL_error(L, "cuda.nvtx.pop: no range is open");
  pop_to(STATE(L), d - 1);
  lua_pushinteger(L, d - 1);
  return 1;
}


/* cuda.nvtx.depth() -> ranges open in this state */
static int nvtx_depth (lua_State *L) {
  lua_pushinteger(L, STATE(L)->nvtx_depth);
  return 1;
}


/*
** After fn: close the range (and anything fn left open), then return
** fn's results or raise its error unchanged. A continuation, so that fn
** may yield when range runs inside a coroutine.
*/
static int range_done (lua_State *L, int status, lua_KContext before) {
  pop_to(STATE(L), (int)before);   /* a continuation runs as range: its upvalue */
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L);   /* the error object is on top */
  return lua_gettop(L) - 1;   /* everything above the name */
}


/* cuda.nvtx.range(name, fn, ...) -> fn(...) */
static int nvtx_range (lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  int before = STATE(L)->nvtx_depth;
  if (lua_type(L, 2) != LUA_TFUNCTION) {   /* a callable object will do */
    if (luaL_getmetafield(L, 2, "__call") == LUA_TNIL) return luaL_typeerror(L, 2, "function");
    lua_pop(L, 1);
  }
  push(STATE(L), name);
  return range_done(L, lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, before, range_done), before);
}


/* a scope: the depth its range was opened at, 0 once closed */
typedef struct Scope {
  int depth;
} Scope;


/* cuda.nvtx.scope(name) -> a to-be-closed range */
static int nvtx_scope (lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  Scope *s = (Scope *)lua_newuserdatauv(L, sizeof(Scope), 0);
  s->depth = 0;
  luaL_setmetatable(L, CULUA_NVTXSCOPE);
  push(STATE(L), name);
  s->depth = STATE(L)->nvtx_depth;
  return 1;
}


/*
** close, __close and __gc: pop back below the scope's range. A scope
** never closed is popped when it is collected, which is late and at an
** unknown point: hold it in a <close> variable.
*/
static int scope_close (lua_State *L) {
  Scope *s = (Scope *)luaL_checkudata(L, 1, CULUA_NVTXSCOPE);
  if (s->depth > 0) {
    culua_State *S = culua_state(L);   /* a metamethod: no upvalue */
    if (S->nvtx_depth >= s->depth) pop_to(S, s->depth - 1);
    s->depth = 0;
  }
  return 0;
}


static int scope_tostring (lua_State *L) {
  Scope *s = (Scope *)luaL_checkudata(L, 1, CULUA_NVTXSCOPE);
  if (s->depth > 0) lua_pushfstring(L, "cuda.nvtx.scope (depth %d)", s->depth);
  else lua_pushliteral(L, "cuda.nvtx.scope (closed)");
  return 1;
}


static const luaL_Reg scope_meta[] = {
  {"__tostring", scope_tostring},
  {"__close", scope_close},
  {"__gc", scope_close},
  {NULL, NULL}
};

static const luaL_Reg scope_methods[] = {
  {"close", scope_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"push", nvtx_push},
  {"pop", nvtx_pop},
  {"range", nvtx_range},
  {"scope", nvtx_scope},
  {"depth", nvtx_depth},
  {NULL, NULL}
};

/* }====================================================== */


void culua_open_nvtx (lua_State *L) {
  culua_newmeta(L, CULUA_NVTXSCOPE, scope_meta, scope_methods);
  luaL_newlibtable(L, funcs);
  lua_pushlightuserdata(L, culua_state(L));
  luaL_setfuncs(L, funcs, 1);
  lua_setfield(L, -2, "nvtx");
}
