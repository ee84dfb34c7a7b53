/*
** culua.h
** Embedding culua, the Lua 5.4 scripting engine for CUDA, in a C host.
**
**   lua_State *L = luaL_newstate();
**   culua_openlibs(L);                 -- standard libraries and the global `cuda`
**   luaL_dostring(L, "print(cuda.version)");
**
** Which states get the global `cuda`:
**   culua_openlibs(L)       yes, as luaL_openlibs gives `string`; it is also
**                           package.loaded.cuda, so `require "cuda"` returns it
**                           (the culua program opens its states this way)
**   luaopen_cuda            no: it is the opener `require "cuda"` calls (stock
**                           lua5.4 with cuda.so, or a host's own preload);
**                           it returns the module and sets no global
** culua_openlibs also preloads culua's Lua modules (culua.tap, culua.bench...).
**
** A host that manages its own CUDA context hands it over before the state
** makes its first CUDA object (opening the module makes none); culua then
** uses that context for every object it creates instead of retaining device
** primary contexts (as luv_set_loop does for a loop).
*/

#ifndef culua_h
#define culua_h

#include <lua.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CULUA_VERSION       "0.1.0"
#define CULUA_VERSION_NUM   100

/* forward declaration of CUcontext, so hosts need not include cuda.h */
struct CUctx_st;

/* the `cuda` module opener, as `require "cuda"` calls it */
int luaopen_cuda (lua_State *L);

/* open Lua's standard libraries, preload culua's Lua modules, and open
** `cuda` into package.loaded and the global `cuda` */
void culua_openlibs (lua_State *L);

/* make culua use the host's context (NULL: back to device primary contexts);
** returns 0, or -1 when the state already made CUDA objects */
int culua_set_context (lua_State *L, struct CUctx_st *ctx);

#ifdef __cplusplus
}
#endif

#endif
