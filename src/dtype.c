/*
** dtype.c
** Element types shared by device arrays and host arrays: names, sizes, and
** the conversions between Lua values and elements, range-checked so that
** no value is silently truncated.
*/

#include "config.h"

#include <math.h>
#include <string.h>

#include "culua_int.h"


const char *const culua_dtype_names[] = {
  "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
  "float32", "float64", NULL
};

const size_t culua_dtype_size[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};


/* a dtype name; a wrong one is named as a dtype, with the list of valid ones */
culua_Dtype culua_checkdtype (lua_State *L, int i) {
  const char *name = luaL_checkstring(L, i);
  int t;
  for (t = 0; t < CULUA_NDTYPES; t++)
    if (strcmp(culua_dtype_names[t], name) == 0) return (culua_Dtype)t;
  return (culua_Dtype)luaL_argerror(L, i, lua_pushfstring(L,
    "unknown dtype '%s'; expected one of int8, uint8, int16, uint16, int32, uint32, int64, uint64, "
    "float32, float64", name));
}


/* the integer range of each integer type, as lua_Integer */
static int int_fits (culua_Dtype t, lua_Integer v) {
  switch (t) {
    case CULUA_INT8: return v >= -128 && v <= 127;
    case CULUA_UINT8: return v >= 0 && v <= 255;
    case CULUA_INT16: return v >= -32768 && v <= 32767;
    case CULUA_UINT16: return v >= 0 && v <= 65535;
    case CULUA_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case CULUA_UINT32: return v >= 0 && v <= (lua_Integer)UINT32_MAX;
    case CULUA_INT64: return 1;
    case CULUA_UINT64: return v >= 0;  /* Lua integers stop at 2^63-1 */
    default: return 1;
  }
}


void culua_toelem (lua_State *L, int i, culua_Dtype t, void *p, const char *fname) {
  if (t == CULUA_FLOAT32 || t == CULUA_FLOAT64) {
    int isnum;
    lua_Number x = lua_tonumberx(L, i, &isnum);
    if (!isnum)
      luaL_error(L, "%s: number expected for %s, got %s", fname,
                 culua_dtype_names[t], luaL_typename(L, i));
    /* the one rule for values a dtype cannot hold: they raise. A finite
    ** double past float32's range would become inf in silence; NaN and
    ** the infinities are values of both float dtypes and pass */
    if (t == CULUA_FLOAT32 && isinf((float)x) && !isinf(x))
      luaL_error(L, "%s: %s overflows float32 (largest 3.4028235e+38)", fname, lua_tostring(L, i));
    if (t == CULUA_FLOAT32) *(float *)p = (float)x;
    else *(double *)p = (double)x;
  }
  else {
    int isint;
    lua_Integer v = lua_tointegerx(L, i, &isint);
    if (!isint) {
      if (lua_type(L, i) == LUA_TNUMBER)
        luaL_error(L, "%s: %s has no exact %s representation", fname,
                   lua_tostring(L, i), culua_dtype_names[t]);
      luaL_error(L, "%s: integer expected for %s, got %s", fname,
                 culua_dtype_names[t], luaL_typename(L, i));
    }
    if (!int_fits(t, v))
      luaL_error(L, "%s: %I out of range for %s", fname, v, culua_dtype_names[t]);
    switch (t) {
      case CULUA_INT8: case CULUA_UINT8: *(uint8_t *)p = (uint8_t)v; break;
      case CULUA_INT16: case CULUA_UINT16: *(uint16_t *)p = (uint16_t)v; break;
      case CULUA_INT32: case CULUA_UINT32: *(uint32_t *)p = (uint32_t)v; break;
      default: *(uint64_t *)p = (uint64_t)v; break;
    }
  }
}


void culua_pushelem (lua_State *L, culua_Dtype t, const void *p) {
  switch (t) {
    case CULUA_INT8: lua_pushinteger(L, *(const int8_t *)p); break;
    case CULUA_UINT8: lua_pushinteger(L, *(const uint8_t *)p); break;
    case CULUA_INT16: lua_pushinteger(L, *(const int16_t *)p); break;
    case CULUA_UINT16: lua_pushinteger(L, *(const uint16_t *)p); break;
    case CULUA_INT32: lua_pushinteger(L, *(const int32_t *)p); break;
    case CULUA_UINT32: lua_pushinteger(L, *(const uint32_t *)p); break;
    case CULUA_INT64: lua_pushinteger(L, (lua_Integer)*(const int64_t *)p); break;
    case CULUA_UINT64: {
      uint64_t v = *(const uint64_t *)p;
      /* past 2^63-1 a Lua integer would wrap negative: give a float instead */
      if (v > (uint64_t)LUA_MAXINTEGER) lua_pushnumber(L, (lua_Number)v);
      else lua_pushinteger(L, (lua_Integer)v);
      break;
    }
    case CULUA_FLOAT32: lua_pushnumber(L, *(const float *)p); break;
    default: lua_pushnumber(L, *(const double *)p); break;
  }
}


double culua_elem_double (culua_Dtype t, const void *p) {
  switch (t) {
    case CULUA_INT8: return *(const int8_t *)p;
    case CULUA_UINT8: return *(const uint8_t *)p;
    case CULUA_INT16: return *(const int16_t *)p;
    case CULUA_UINT16: return *(const uint16_t *)p;
    case CULUA_INT32: return *(const int32_t *)p;
    case CULUA_UINT32: return *(const uint32_t *)p;
    case CULUA_INT64: return (double)*(const int64_t *)p;
    case CULUA_UINT64: return (double)*(const uint64_t *)p;
    case CULUA_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}


void culua_elem_set_double (culua_Dtype t, void *p, double x) {
  switch (t) {
    case CULUA_INT8: *(int8_t *)p = (int8_t)x; break;
    case CULUA_UINT8: *(uint8_t *)p = (uint8_t)x; break;
    case CULUA_INT16: *(int16_t *)p = (int16_t)x; break;
    case CULUA_UINT16: *(uint16_t *)p = (uint16_t)x; break;
    case CULUA_INT32: *(int32_t *)p = (int32_t)x; break;
    case CULUA_UINT32: *(uint32_t *)p = (uint32_t)x; break;
    case CULUA_INT64: *(int64_t *)p = (int64_t)x; break;
    case CULUA_UINT64: *(uint64_t *)p = (uint64_t)x; break;
    case CULUA_FLOAT32: *(float *)p = (float)x; break;
    default: *(double *)p = x; break;
  }
}


/*
** Shapes: a count n, or a table {rows, cols}. Fills *rows (0 for 1-D) and
** *cols and returns the element count, refusing what would overflow.
*/
size_t culua_checkshape (lua_State *L, int i, culua_Dtype t, size_t *rows, size_t *cols) {
  lua_Integer r = 0, c;
  if (lua_istable(L, i)) {
    int okr, okc;
    luaL_argcheck(L, luaL_len(L, i) == 2, i, "shape must be {rows, cols}");
    lua_rawgeti(L, i, 1);
    lua_rawgeti(L, i, 2);
    r = lua_tointegerx(L, -2, &okr);   /* 2.0 is 2; 2.5 and "2" are no size */
    c = lua_tointegerx(L, -1, &okc);
    if (!okr || lua_type(L, -2) != LUA_TNUMBER) r = 0;
    if (!okc || lua_type(L, -1) != LUA_TNUMBER) c = -1;
    lua_pop(L, 2);
    /* {rows, 0} holds nothing; {0, cols} is not one, as rows == 0 means 1-D */
    luaL_argcheck(L, r > 0 && c >= 0, i, "rows must be a positive integer and cols an integer 0 or more");
  }
  else {   /* 0 is an array of nothing, as in NumPy: it holds no memory */
    c = luaL_checkinteger(L, i);
    luaL_argcheck(L, c >= 0, i, lua_pushfstring(L, "element count must be 0 or more, got %I", c));
  }
  if ((r > 0 && (uint64_t)c > (uint64_t)(SIZE_MAX / culua_dtype_size[t]) / (uint64_t)r) ||
      (uint64_t)c > SIZE_MAX / culua_dtype_size[t])
    luaL_argerror(L, i, "shape too large");
  *rows = (size_t)r;
  *cols = (size_t)c;
  return r > 0 ? (size_t)r * (size_t)c : (size_t)c;
}


void culua_pushshape (lua_State *L, size_t rows, size_t cols) {
  if (rows > 0) {
    lua_createtable(L, 2, 0);
    lua_pushinteger(L, (lua_Integer)rows);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, (lua_Integer)cols);
    lua_rawseti(L, -2, 2);
  }
  else {
    lua_createtable(L, 1, 0);
    lua_pushinteger(L, (lua_Integer)cols);
    lua_rawseti(L, -2, 1);
  }
}


/*
** Lua table -> elements: a flat table of n values, or for 2-D data also a
** table of rows (each a table of cols values).
*/
void culua_table_to_elems (lua_State *L, int i, culua_Dtype t, void *dst, size_t n,
                           size_t cols, const char *fname) {
  size_t k, es = culua_dtype_size[t];
  char *d = (char *)dst;
  i = lua_absindex(L, i);
  if (n > 0 && lua_rawgeti(L, i, 1) == LUA_TTABLE) {   /* rows */
    size_t r, rows = cols ? n / cols : 0;
    lua_pop(L, 1);
    for (r = 0; r < rows; r++) {
      if (lua_rawgeti(L, i, (lua_Integer)r + 1) != LUA_TTABLE)
        luaL_error(L, "%s: row %d is not a table", fname, (int)r + 1);
      if ((size_t)luaL_len(L, -1) != cols)
        luaL_error(L, "%s: row %d has %d values, expected %d", fname, (int)r + 1,
                   (int)luaL_len(L, -1), (int)cols);
      for (k = 0; k < cols; k++) {
        lua_rawgeti(L, -1, (lua_Integer)k + 1);
        culua_toelem(L, -1, t, d + (r * cols + k) * es, fname);
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    return;
  }
  if (n > 0) lua_pop(L, 1);
  for (k = 0; k < n; k++) {
    lua_rawgeti(L, i, (lua_Integer)k + 1);
    culua_toelem(L, -1, t, d + k * es, fname);
    lua_pop(L, 1);
  }
}


/* elements -> a new Lua table (rows of tables when rows > 0) */
void culua_elems_to_table (lua_State *L, culua_Dtype t, const void *src, size_t rows,
                           size_t cols) {
  size_t es = culua_dtype_size[t], r, k;
  const char *s = (const char *)src;
  luaL_checkstack(L, 4, "totable");
  if (rows == 0) {
    lua_createtable(L, (int)cols, 0);
    for (k = 0; k < cols; k++) {
      culua_pushelem(L, t, s + k * es);
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    return;
  }
  lua_createtable(L, (int)rows, 0);
  for (r = 0; r < rows; r++) {
    lua_createtable(L, (int)cols, 0);
    for (k = 0; k < cols; k++) {
      culua_pushelem(L, t, s + (r * cols + k) * es);
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_rawseti(L, -2, (lua_Integer)r + 1);
  }
}


/* a few elements for __tostring: "dtype[shape] {a, b, c, ...}" */
void culua_push_preview (lua_State *L, const char *tname, culua_Dtype t, size_t rows,
                         size_t cols, const void *first, size_t nfirst, size_t n) {
  luaL_Buffer b;
  size_t k;
  luaL_buffinit(L, &b);
  if (rows > 0)
    lua_pushfstring(L, "%s(%s, {%I, %I}): {", tname, culua_dtype_names[t],
                    (lua_Integer)rows, (lua_Integer)cols);
  else
    lua_pushfstring(L, "%s(%s, %I): {", tname, culua_dtype_names[t], (lua_Integer)cols);
  luaL_addvalue(&b);
  for (k = 0; k < nfirst; k++) {
    if (k > 0) luaL_addstring(&b, ", ");
    culua_pushelem(L, t, (const char *)first + k * culua_dtype_size[t]);
    luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    luaL_addvalue(&b);
  }
  if (nfirst < n) luaL_addstring(&b, ", ...");
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
}
