/*
** luamods.c
** culua's Lua-side modules (the files in lua/), embedded at build time (embed.c) so
** the binary needs no installed files: `require "culua.tap"` and friends.
*/

#include "config.h"

#include <stddef.h>

#include <lualib.h>

#include "culua_int.h"



/* package.preload loader; upvalues: the module's name, its blob */
static int load_embedded (lua_State *L) {
  const char *name = lua_tostring(L, lua_upvalueindex(1));
  const culua_Blob *b = (const culua_Blob *)lua_touserdata(L, lua_upvalueindex(2));
  lua_pushfstring(L, "=[%s]", name);
  if (luaL_loadbufferx(L, (const char *)b->data, culua_blob_size(b), lua_tostring(L, -1), "t") != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  return 1;
}


void culua_open_luamods (lua_State *L) {
  const culua_Blob *b = NULL;
  const char *name;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  while ((b = culua_blob_next("lua", b, &name)) != NULL) {
    lua_pushstring(L, name);
    lua_pushlightuserdata(L, (void *)b);
    lua_pushcclosure(L, load_embedded, 2);
    lua_setfield(L, -2, name);
  }
  lua_pop(L, 1);
}
