/*
** scalar.c
** cuda.scalar: one value of a given dtype, for kernel parameters whose type
** a PTX signature does not say. A __half and a __nv_bfloat16 passed by
** value are both `.param .align 2 .b8 p[2]`, and the two fp8 types both
** `.param .align 1 .b8 p[1]`: a Lua number could be either, and the bits
** differ. The user says which:
**
**   k:launch(cfg, cuda.scalar("float16", 0.5), x, n)
**
** The value is converted once, when made, by the dtype's rules (a write of
** a Lua number: doc/dtypes.md), and kept as its bits.
*/

#include "config.h"

#include <string.h>

#include "culua_int.h"


typedef struct Scalar {
  _Alignas(8) unsigned char bits[8];   /* culua_toelem stores a double here */
  culua_Dtype dtype;
} Scalar;


static Scalar *check_scalar (lua_State *L, int i) {
  return (Scalar *)luaL_checkudata(L, i, CULUA_SCALAR);
}


/* cuda.scalar(dtype, x) -> a scalar: x rounded (or range-checked) into dtype */
static int cuda_scalar (lua_State *L) {
  culua_Dtype t = culua_checkdtype(L, 1);
  Scalar *s;
  luaL_checkany(L, 2);
  s = (Scalar *)lua_newuserdatauv(L, sizeof(Scalar), 0);
  memset(s, 0, sizeof(*s));
  culua_toelem(L, 2, t, s->bits, "cuda.scalar");
  s->dtype = t;
  luaL_setmetatable(L, CULUA_SCALAR);
  return 1;
}


int culua_toscalar (lua_State *L, int i, culua_Dtype *t, const void **bits) {
  Scalar *s = (Scalar *)luaL_testudata(L, i, CULUA_SCALAR);
  if (s == NULL) return 0;
  *t = s->dtype;
  *bits = s->bits;
  return 1;
}


/* s.dtype, s.value (the exact value, as a Lua number), s.bits (an integer) */
static int scalar_index (lua_State *L) {
  Scalar *s = check_scalar(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "dtype") == 0) lua_pushstring(L, culua_dtype_names[s->dtype]);
  else if (strcmp(k, "value") == 0) culua_pushelem(L, s->dtype, s->bits);
  else if (strcmp(k, "bits") == 0) {
    uint64_t b = 0;
    size_t j;
    for (j = culua_dtype_size[s->dtype]; j-- > 0; ) b = b << 8 | s->bits[j];   /* little-endian */
    lua_pushinteger(L, (lua_Integer)b);
  }
  else lua_pushnil(L);
  return 1;
}


static int scalar_tostring (lua_State *L) {
  Scalar *s = check_scalar(L, 1);
  culua_pushelem(L, s->dtype, s->bits);
  lua_pushfstring(L, "cuda.scalar(%s, %s)", culua_dtype_names[s->dtype], luaL_tolstring(L, -1, NULL));
  return 1;
}


static const luaL_Reg scalar_meta[] = {
  {"__index", scalar_index},
  {"__tostring", scalar_tostring},
  {NULL, NULL}
};

static const luaL_Reg scalar_methods[] = {
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"scalar", cuda_scalar},
  {NULL, NULL}
};


void culua_open_scalar (lua_State *L) {
  culua_newmeta(L, CULUA_SCALAR, scalar_meta, scalar_methods);
  luaL_setfuncs(L, funcs, 0);
}
