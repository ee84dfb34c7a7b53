/*
** stream.c
** cuda.stream: an ordered queue of work on one device. Also graph capture,
** whose result is a cuda.graph (graph.c).
*/

#include "config.h"

#include <string.h>

#include "culua_int.h"


typedef culua_Stream Stream;


static Stream *check_stream (lua_State *L, int i) {
  return (Stream *)culua_checkobj(L, i, CULUA_STREAM);
}


/* cuda.stream([{non_blocking = false, priority = 0, device = d}]) -> stream */
static int cuda_stream (lua_State *L) {
  int nonblocking = 0, priority = 0, ordinal = -1, least = 0, greatest = 0;
  Stream *s;
  const culua_Driver *cu;
  if (!lua_isnoneornil(L, 1)) {
    static const char *const known[] = {"non_blocking", "priority", "device", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    culua_checkoptions(L, 1, "cuda.stream", known);
    lua_getfield(L, 1, "non_blocking");
    nonblocking = lua_toboolean(L, -1);
    if (lua_getfield(L, 1, "priority") != LUA_TNIL) {
      culua_checkfield(L, "cuda.stream", "priority", LUA_TNUMBER);
      priority = (int)lua_tointeger(L, -1);
    }
    lua_settop(L, 1);
    ordinal = culua_optdevice(L, 1, "cuda.stream");
  }
  s = (Stream *)lua_newuserdatauv(L, sizeof(Stream), 0);
  memset(s, 0, sizeof(*s));
  luaL_setmetatable(L, CULUA_STREAM);
  culua_ctx_open(L, &s->c, ordinal, "cuda.stream");
  cu = culua_cu(L, "cuda.stream");
  culua_check(L, cu->cuCtxGetStreamPriorityRange(&least, &greatest), "cuda.stream", "reading priorities");
  /* lower numbers are higher priorities: greatest <= priority <= least */
  if (priority < greatest || priority > least) {
    culua_ctx_close(&s->c);
    return luaL_error(L, "cuda.stream: priority %d outside %d (highest) .. %d (lowest)",
                      priority, greatest, least);
  }
  culua_check(L, cu->cuStreamCreateWithPriority(&s->s, nonblocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT,
                                                priority),
              "cuda.stream", "creating a stream on device %d", s->c.ordinal);
  s->priority = priority;
  return 1;
}


static int stream_close (lua_State *L) {
  Stream *s = (Stream *)luaL_checkudata(L, 1, CULUA_STREAM);
  if (culua_ctx_live(&s->c))
    culua_load_driver(NULL)->cuStreamDestroy(s->s);   /* queued work still runs */
  culua_ctx_close(&s->c);
  return 0;
}


static int stream_synchronize (lua_State *L) {
  Stream *s = check_stream(L, 1);
  culua_check(L, culua_cu(L, "synchronize")->cuStreamSynchronize(s->s), "synchronize",
              "on a stream of device %d", s->c.ordinal);
  lua_settop(L, 1);
  return 1;
}


/* s:query() -> true when all its work is done */
static int stream_query (lua_State *L) {
  Stream *s = check_stream(L, 1);
  return culua_pushready(L, culua_cu(L, "query")->cuStreamQuery(s->s), "query", "a stream", s->c.ordinal);
}


/* s:wait(event): later work on s waits until the event has happened */
static int stream_wait (lua_State *L) {
  Stream *s = check_stream(L, 1);
  CUevent e = culua_toevent(L, 2, "wait");
  culua_ctx_enter(L, &s->c, CULUA_STREAM);
  culua_check(L, culua_cu(L, "wait")->cuStreamWaitEvent(s->s, e, 0), "wait",
              "on a stream of device %d", s->c.ordinal);
  lua_settop(L, 1);
  return 1;
}


/* s:begin_capture(): record the stream's work into a graph instead of running it */
static int stream_begin_capture (lua_State *L) {
  Stream *s = check_stream(L, 1);
  culua_check(L, culua_cu(L, "begin_capture")->cuStreamBeginCapture(s->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "begin_capture", "on a stream of device %d", s->c.ordinal);
  s->capturing = 1;
  lua_settop(L, 1);
  return 1;
}


/* s:end_capture() -> graph, ready to launch */
static int stream_end_capture (lua_State *L) {
  Stream *s = check_stream(L, 1);
  CUgraph g = NULL;
  if (!s->capturing) return luaL_error(L, "end_capture: the stream is not capturing (call begin_capture first)");
  s->capturing = 0;
  culua_check(L, culua_cu(L, "end_capture")->cuStreamEndCapture(s->s, &g), "end_capture",
              "on a stream of device %d", s->c.ordinal);
  culua_newgraph(L, s->c.ordinal, g);
  return 1;
}


static int stream_index (lua_State *L) {
  Stream *s;
  const char *k = lua_tostring(L, 2);
  if (culua_pushmethod(L, CULUA_STREAM, 2) && !lua_isnil(L, -1)) return 1;  /* close works when closed */
  s = check_stream(L, 1);
  if (k != NULL && strcmp(k, "priority") == 0) lua_pushinteger(L, s->priority);
  else if (k != NULL && strcmp(k, "device") == 0) culua_pushdevice(L, s->c.ordinal, CULUA_STREAM);
  else return culua_pushmethod(L, CULUA_STREAM, 2);
  return 1;
}


static int stream_tostring (lua_State *L) {
  Stream *s = (Stream *)luaL_checkudata(L, 1, CULUA_STREAM);
  if (s->c.ctx == NULL) lua_pushliteral(L, "cuda.stream (closed)");
  else lua_pushfstring(L, "cuda.stream (%p) on device %d", (void *)s->s, s->c.ordinal);
  return 1;
}


static const luaL_Reg stream_meta[] = {
  {"__index", stream_index},
  {"__tostring", stream_tostring},
  {"__gc", stream_close},
  {"__close", stream_close},
  {NULL, NULL}
};

static const luaL_Reg stream_methods[] = {
  {"synchronize", stream_synchronize},
  {"query", stream_query},
  {"wait", stream_wait},
  {"begin_capture", stream_begin_capture},
  {"end_capture", stream_end_capture},
  {"close", stream_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"stream", cuda_stream},
  {NULL, NULL}
};


void culua_open_stream (lua_State *L) {
  culua_newmeta(L, CULUA_STREAM, stream_meta, stream_methods);
  luaL_setfuncs(L, funcs, 0);
}
