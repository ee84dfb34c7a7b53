/*
** embed.c
** A small C host that embeds culua: open a state, let culua add the `cuda`
** module, run a script, read back its result.
**
**   cc embed.c $(pkg-config --cflags --libs culua) -o embed && ./embed script.lua
*/

#include <stdio.h>
#include <stdlib.h>

#include <lua.h>
#include <lauxlib.h>

#include <culua.h>


int main (int argc, char **argv) {
  lua_State *L;
  int status;
  if (argc < 2) {
    fprintf(stderr, "usage: %s script.lua\n", argv[0]);
    return EXIT_FAILURE;
  }
  L = luaL_newstate();
  if (L == NULL) return EXIT_FAILURE;
  culua_openlibs(L);   /* standard libraries, and the global `cuda` */
  status = luaL_loadfile(L, argv[1]);
  if (status == LUA_OK) status = lua_pcall(L, 0, 1, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "%s: %s\n", argv[0], lua_tostring(L, -1));
    lua_close(L);
    return EXIT_FAILURE;
  }
  printf("script returned %s\n", luaL_tolstring(L, -1, NULL));
  lua_close(L);
  return EXIT_SUCCESS;
}
