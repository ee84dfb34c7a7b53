/*
** catalog.c
** The C half of cuda.catalog: the kernel files of kernels/, embedded at
** build time (a fatbin per family, its kernels' .entry declarations, its
** source for NVRTC variants, and the <culua/...> device headers; embed.c
** holds them). lua/catalog.lua does the rest: lazy loading per device,
** variants through cuda.compile, argument checks. This file and that one
** are the only code that knows kernels/. The CPU references the tests
** compare with are reference.c's.
*/

#include "config.h"

#include <string.h>

#include "culua_int.h"

/* push the embedded "<kind>.<family>" at index 1 */
static int push_item (lua_State *L, const char *kind) {
  const char *name = luaL_checkstring(L, 1);
  const culua_Blob *b = culua_blob(kind, name);
  if (b == NULL) return luaL_error(L, "cuda.catalog: no kernel family '%s'", name);
  lua_pushlstring(L, (const char *)b->data, culua_blob_size(b));
  return 1;
}


/* _catalog.fatbin(family) -> the nvcc-built image */
static int catalog_fatbin (lua_State *L) { return push_item(L, "fatbin"); }

/*
** _catalog.entries(family) -> the .entry declarations of the fatbin's kernels,
** from the PTX nvcc made (kernels/<f>.entries): cuda.load's ptx option, so
** that kernels learn their parameters without a driver call that fails
*/
static int catalog_entries (lua_State *L) { return push_item(L, "entries"); }

/* _catalog.source(family) -> the .cu text, for NVRTC variants */
static int catalog_source (lua_State *L) { return push_item(L, "source"); }


/* _catalog.families() -> {"matmul", "barrier", ...} */
static int catalog_families (lua_State *L) {
  const culua_Blob *b = NULL;
  const char *name;
  int n = 0;
  lua_newtable(L);
  while ((b = culua_blob_next("source", b, &name)) != NULL) {
    lua_pushstring(L, name);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}


/* _catalog.headers() -> {["culua/barrier.cuh"] = text, ...} */
static int catalog_headers (lua_State *L) {
  const culua_Blob *b = NULL;
  const char *name;
  lua_newtable(L);
  while ((b = culua_blob_next("header", b, &name)) != NULL) {
    lua_pushlstring(L, (const char *)b->data, culua_blob_size(b));
    lua_setfield(L, -2, name);
  }
  return 1;
}


/*
** C.array(x [, mapped]) -> dtype, n, device, ptr, pitched: what a catalog call
** checks of each array, in one crossing into C (a small call is bound by the
** host, and these were five field reads an array); nil and "type", "closed" or
** "reset" where x is no usable array, for the family to raise with its
** function's name. With mapped true, an open mapped host array counts too
** (elementwise kernels take it in place; the catalog's families take device
** arrays only). pitched: a 2-D array with padded rows, not one dense run.
*/
static int catalog_array (lua_State *L) {
  const char *why;
  culua_Array *a = culua_peekarray(L, 1, &why);
  culua_HostArray *h = a == NULL && lua_toboolean(L, 2)
                       ? (culua_HostArray *)luaL_testudata(L, 1, CULUA_HOSTARRAY) : NULL;
  if (h != NULL && h->mapped)
    why = h->data == NULL ? "closed" : culua_ctx_stale(&h->c) ? "reset" : NULL;
  else
    h = NULL;
  if (why != NULL) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_pushstring(L, culua_dtype_names[a ? a->dtype : h->dtype]);
  lua_pushinteger(L, (lua_Integer)(a ? a->n : h->n));
  culua_pushdevice(L, a ? a->c.ordinal : h->c.ordinal, "cuda.catalog");
  lua_pushinteger(L, (lua_Integer)(a ? a->ptr : h->dptr));
  lua_pushboolean(L, a != NULL && a->pitch != 0);
  return 5;
}


/*
** C.live(a, ...) -> true when every argument but nil ones is an open cuda.array
** of a device not reset since it was made (culua_peekarray's test), else false: a
** family's repeated call, whose arrays it checked in full before, checks only what
** can have changed since (an array's dtype, shape and device never do), in one
** crossing into C.
*/
static int catalog_live (lua_State *L) {
  int i, n = lua_gettop(L);
  const char *why;
  for (i = 1; i <= n; i++)
    if (!lua_isnil(L, i) && culua_peekarray(L, i, &why) == NULL) break;
  lua_pushboolean(L, i > n);
  return 1;
}


/*
** C.keys(t) -> how many keys table t has (its own, those next finds), or nil
** where t is no table: cuda.map's fast path checks that its arguments are the
** names it knows and no others in one crossing into C, where a loop of next
** from Lua is a crossing a key.
*/
static int catalog_keys (lua_State *L) {
  lua_Integer n = 0;
  if (lua_type(L, 1) != LUA_TTABLE) {
    luaL_pushfail(L);
    return 1;
  }
  lua_settop(L, 1);
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);   /* t, key */
    n++;
  }
  lua_pushinteger(L, n);
  return 1;
}


static const luaL_Reg catalog_funcs[] = {
  {"array", catalog_array},
  {"keys", catalog_keys},
  {"live", catalog_live},
  {"fatbin", catalog_fatbin},
  {"entries", catalog_entries},
  {"source", catalog_source},
  {"families", catalog_families},
  {"headers", catalog_headers},
  {NULL, NULL}
};


/*
** cuda.catalog is lua/catalog.lua, required on first use: it requires
** "cuda" itself, which it can only do once luaopen_cuda has returned.
** cuda.elementwise, cuda.map and cuda.reduction come the same way from
** lua/elementwise.lua.
*/
static int cuda_index (lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "catalog") == 0) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "culua.catalog");
    lua_call(L, 1, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "catalog");   /* once: later reads find it directly */
    return 1;
  }
  if (lua_type(L, 2) == LUA_TSTRING) {   /* kernels from expressions: lua/elementwise.lua */
    static const char *const names[] = {"elementwise", "map", "reduction", NULL};
    const char *key = lua_tostring(L, 2);
    int i;
    for (i = 0; names[i] != NULL; i++) {
      if (strcmp(key, names[i]) == 0) {
        lua_getglobal(L, "require");
        lua_pushliteral(L, "culua.elementwise");
        lua_call(L, 1, 1);
        lua_getfield(L, -1, key);
        lua_pushvalue(L, -1);
        lua_setfield(L, 1, key);
        return 1;
      }
    }
  }
  return 0;
}


void culua_open_catalog (lua_State *L) {
  luaL_newlib(L, catalog_funcs);
  lua_setfield(L, -2, "_catalog");
  lua_createtable(L, 0, 1);             /* the module's metatable */
  lua_pushcfunction(L, cuda_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
}
