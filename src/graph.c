/*
** graph.c
** cuda.graph: work captured from a stream (s:begin_capture/s:end_capture),
** instantiated once and replayed cheaply with graph:launch(stream).
*/

#include "config.h"

#include <string.h>

#include "culua_int.h"


typedef struct Graph {
  culua_Ctx c;
  CUgraph g;
  CUgraphExec x;
  size_t nodes;
} Graph;


void culua_newgraph (lua_State *L, int ordinal, CUgraph g) {
  const culua_Driver *cu = culua_cu(L, "end_capture");
  Graph *gr = (Graph *)lua_newuserdatauv(L, sizeof(Graph), 0);
  CUresult r;
  memset(gr, 0, sizeof(*gr));
  luaL_setmetatable(L, CULUA_GRAPH);
  culua_ctx_open(L, &gr->c, ordinal, "end_capture");
  gr->g = g;   /* owned from here on: __gc destroys it even if we raise below */
  cu->cuGraphGetNodes(g, NULL, &gr->nodes);
  r = cu->cuGraphInstantiateWithFlags(&gr->x, g, 0);
  if (r != CUDA_SUCCESS) {
    gr->x = NULL;
    culua_cufail(L, r, "end_capture", "instantiating a graph of %d nodes", (int)gr->nodes);
  }
}


static int graph_close (lua_State *L) {
  Graph *g = (Graph *)luaL_checkudata(L, 1, CULUA_GRAPH);
  if (culua_ctx_live(&g->c)) {
    const culua_Driver *cu = culua_load_driver(NULL);
    if (g->x) cu->cuGraphExecDestroy(g->x);
    if (g->g) cu->cuGraphDestroy(g->g);
  }
  culua_ctx_close(&g->c);
  return 0;
}


/* graph:launch([stream]) -> graph */
static int graph_launch (lua_State *L) {
  Graph *g = (Graph *)culua_checkobj(L, 1, CULUA_GRAPH);
  CUstream s = culua_optstream(L, 2, "launch");
  culua_ctx_enter(L, &g->c, CULUA_GRAPH);
  culua_check(L, culua_cu(L, "launch")->cuGraphLaunch(g->x, s), "launch",
              "a graph of %d nodes on device %d", (int)g->nodes, g->c.ordinal);
  lua_settop(L, 1);
  return 1;
}


static int graph_index (lua_State *L) {
  Graph *g;
  const char *k = lua_tostring(L, 2);
  if (culua_pushmethod(L, CULUA_GRAPH, 2) && !lua_isnil(L, -1)) return 1;  /* close works when closed */
  g = (Graph *)culua_checkobj(L, 1, CULUA_GRAPH);
  if (k != NULL && strcmp(k, "nodes") == 0) lua_pushinteger(L, (lua_Integer)g->nodes);
  else return culua_pushmethod(L, CULUA_GRAPH, 2);
  return 1;
}


static int graph_tostring (lua_State *L) {
  Graph *g = (Graph *)luaL_checkudata(L, 1, CULUA_GRAPH);
  if (g->c.ctx == NULL) lua_pushliteral(L, "cuda.graph (closed)");
  else lua_pushfstring(L, "cuda.graph (%d nodes) on device %d", (int)g->nodes, g->c.ordinal);
  return 1;
}


static const luaL_Reg graph_meta[] = {
  {"__index", graph_index},
  {"__tostring", graph_tostring},
  {"__gc", graph_close},
  {"__close", graph_close},
  {NULL, NULL}
};

static const luaL_Reg graph_methods[] = {
  {"launch", graph_launch},
  {"close", graph_close},
  {NULL, NULL}
};


void culua_open_graph (lua_State *L) {
  culua_newmeta(L, CULUA_GRAPH, graph_meta, graph_methods);
}
