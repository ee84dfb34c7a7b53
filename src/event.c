/*
** event.c
** cuda.event: a point in a stream's work, for ordering and timing.
*/

#include "config.h"

#include <string.h>

#include "culua_int.h"


typedef culua_Event Event;


static Event *check_event (lua_State *L, int i) {
  return (Event *)culua_checkobj(L, i, CULUA_EVENT);
}


/* cuda.event([{timing = true, blocking = false}]) -> event */
static int cuda_event (lua_State *L) {
  int timing = 1, blocking = 0;
  unsigned flags = 0;
  Event *e;
  if (!lua_isnoneornil(L, 1)) {
    static const char *const known[] = {"timing", "blocking", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    culua_checkoptions(L, 1, "cuda.event", known);
    if (lua_getfield(L, 1, "timing") != LUA_TNIL) timing = lua_toboolean(L, -1);
    lua_getfield(L, 1, "blocking");
    blocking = lua_toboolean(L, -1);
    lua_settop(L, 1);
  }
  if (!timing) flags |= CU_EVENT_DISABLE_TIMING;
  if (blocking) flags |= CU_EVENT_BLOCKING_SYNC;
  e = (Event *)lua_newuserdatauv(L, sizeof(Event), 0);
  memset(e, 0, sizeof(*e));
  luaL_setmetatable(L, CULUA_EVENT);
  culua_ctx_open(L, &e->c, -1, "cuda.event");
  culua_check(L, culua_cu(L, "cuda.event")->cuEventCreate(&e->e, flags), "cuda.event",
              "creating an event on device %d", e->c.ordinal);
  e->timing = timing;
  return 1;
}


static int event_close (lua_State *L) {
  Event *e = (Event *)luaL_checkudata(L, 1, CULUA_EVENT);
  if (culua_ctx_live(&e->c)) culua_load_driver(NULL)->cuEventDestroy(e->e);
  culua_ctx_close(&e->c);
  return 0;
}


/* e:record([stream]) -> e */
static int event_record (lua_State *L) {
  Event *e = check_event(L, 1);
  CUstream s = culua_optstream(L, 2, "record");
  culua_ctx_enter(L, &e->c, CULUA_EVENT);
  culua_check(L, culua_cu(L, "record")->cuEventRecord(e->e, s), "record", "on device %d", e->c.ordinal);
  e->recorded = 1;
  lua_settop(L, 1);
  return 1;
}


static int event_synchronize (lua_State *L) {
  Event *e = check_event(L, 1);
  culua_check(L, culua_cu(L, "synchronize")->cuEventSynchronize(e->e), "synchronize",
              "waiting for an event on device %d", e->c.ordinal);
  lua_settop(L, 1);
  return 1;
}


/* e:query() -> true once the work before the record is done */
static int event_query (lua_State *L) {
  Event *e = check_event(L, 1);
  return culua_pushready(L, culua_cu(L, "query")->cuEventQuery(e->e), "query", "an event", e->c.ordinal);
}


/* e0:elapsed(e1) -> milliseconds from e0 to e1 (waits for e1) */
static int event_elapsed (lua_State *L) {
  Event *a = check_event(L, 1), *b = check_event(L, 2);
  const culua_Driver *cu = culua_cu(L, "elapsed");
  float ms = 0;
  if (!a->timing || !b->timing)
    return luaL_error(L, "elapsed: an event was made with timing = false");
  if (!a->recorded || !b->recorded)
    return luaL_error(L, "elapsed: both events must be recorded first");
  culua_check(L, cu->cuEventSynchronize(b->e), "elapsed", "waiting for the end event");
  culua_check(L, cu->cuEventElapsedTime(&ms, a->e, b->e), "elapsed", "between two events");
  lua_pushnumber(L, ms);
  return 1;
}


static int event_tostring (lua_State *L) {
  Event *e = (Event *)luaL_checkudata(L, 1, CULUA_EVENT);
  if (e->c.ctx == NULL) lua_pushliteral(L, "cuda.event (closed)");
  else lua_pushfstring(L, "cuda.event (%p) on device %d%s", (void *)e->e, e->c.ordinal,
                       e->timing ? "" : ", no timing");
  return 1;
}


static const luaL_Reg event_meta[] = {
  {"__tostring", event_tostring},
  {"__gc", event_close},
  {"__close", event_close},
  {NULL, NULL}
};

static const luaL_Reg event_methods[] = {
  {"record", event_record},
  {"synchronize", event_synchronize},
  {"query", event_query},
  {"elapsed", event_elapsed},
  {"close", event_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"event", cuda_event},
  {NULL, NULL}
};


void culua_open_event (lua_State *L) {
  culua_newmeta(L, CULUA_EVENT, event_meta, event_methods);
  luaL_setfuncs(L, funcs, 0);
}
