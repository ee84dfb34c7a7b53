/*
** objects.c
** The checks of the objects that bindings take from each other: a kernel
** launch or a copy takes arrays and streams, a stream waits on an event, a
** host array copies from a device array. Here, below the bindings, so that
** each binding file reaches down to them and never across or up: the
** objects' layouts are culua_int.h's. Helpers: they call no binding.
*/

#include "config.h"

#include "culua_int.h"


/* {====================================================== cuda.array */

/*
** The array at i without raising: NULL and *why "type" (not a cuda.array),
** "closed" or "reset" (its device was reset by cuda.reset()), so that a
** caller with a name of its own for the argument can say which.
*/
culua_Array *culua_peekarray (lua_State *L, int i, const char **why) {
  culua_Array *a = (culua_Array *)luaL_testudata(L, i, CULUA_ARRAY);
  *why = a == NULL ? "type" : !culua_array_isopen(a) ? "closed" : culua_ctx_stale(&a->c) ? "reset" : NULL;
  return *why == NULL ? a : NULL;
}


culua_Array *culua_testarray (lua_State *L, int i, int enter) {
  culua_Array *a = (culua_Array *)luaL_testudata(L, i, CULUA_ARRAY);
  return a == NULL ? NULL : culua_openarray(L, a, enter);
}


culua_Array *culua_openarray (lua_State *L, culua_Array *a, int enter) {
  if (!culua_array_isopen(a))
    luaL_error(L, "attempt to use a closed %s", a->c.ctx ? "cuda.array (its parent was closed)" : CULUA_ARRAY);
  if (enter) culua_ctx_enter(L, &a->c, CULUA_ARRAY);
  else if (culua_ctx_stale(&a->c))
    luaL_error(L, "attempt to use a %s whose device was reset by cuda.reset()", CULUA_ARRAY);
  return a;
}

/* }====================================================== */


/* {====================================================== cuda.host_array */

culua_HostArray *culua_testhostarray (lua_State *L, int i) {
  culua_HostArray *h = (culua_HostArray *)luaL_testudata(L, i, CULUA_HOSTARRAY);
  if (h != NULL && h->data == NULL)
    luaL_error(L, "attempt to use a closed %s", CULUA_HOSTARRAY);
  if (h != NULL && h->pinned && culua_ctx_stale(&h->c))
    luaL_error(L, "attempt to use a %s whose device was reset by cuda.reset()", CULUA_HOSTARRAY);
  return h;
}

/* }====================================================== */


/* {====================================================== cuda.stream, cuda.event */

CUstream culua_optstream (lua_State *L, int i, const char *fname) {
  culua_Stream *s;
  if (lua_isnoneornil(L, i)) return NULL;
  s = (culua_Stream *)luaL_testudata(L, i, CULUA_STREAM);
  if (s == NULL)
    luaL_argerror(L, i, lua_pushfstring(L, "%s: cuda.stream expected, got %s", fname, luaL_typename(L, i)));
  if (s->c.ctx == NULL) luaL_error(L, "attempt to use a closed %s", CULUA_STREAM);
  if (culua_ctx_stale(&s->c))
    luaL_error(L, "attempt to use a %s whose device was reset by cuda.reset()", CULUA_STREAM);
  return s->s;
}


CUevent culua_toevent (lua_State *L, int i, const char *fname) {
  culua_Event *e = (culua_Event *)luaL_testudata(L, i, CULUA_EVENT);
  if (e == NULL)
    luaL_argerror(L, i, lua_pushfstring(L, "%s: cuda.event expected, got %s", fname, luaL_typename(L, i)));
  culua_ctx_enter(L, &e->c, CULUA_EVENT);
  return e->e;
}

/* }====================================================== */
