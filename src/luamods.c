/*
** luamods.c
** culua's Lua-side modules (the files in lua/), embedded at build time so the
** binary needs no installed files: `require "culua.tap"` and friends.
*/

#include "config.h"

#include <stddef.h>

#include <lualib.h>

#include "culua_int.h"

#include "luamods.inc"


/* package.preload loader; upvalue: index into embedded[] */
static int load_embedded (lua_State *L) {
  const struct Embedded *e = &embedded[lua_tointeger(L, lua_upvalueindex(1))];
  lua_pushfstring(L, "=[%s]", e->name);
  if (luaL_loadbufferx(L, (const char *)e->data, e->size, lua_tostring(L, -1), "t") != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, e->name);
  lua_call(L, 1, 1);
  return 1;
}


void culua_open_luamods (lua_State *L) {
  int i;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (i = 0; embedded[i].name != NULL; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, embedded[i].name);
  }
  lua_pop(L, 1);
}
