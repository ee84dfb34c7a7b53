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
  "float32", "float64", "float16", "bfloat16", "float8_e4m3", "float8_e5m2", NULL
};

const size_t culua_dtype_size[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 2, 2, 1, 1};


/* a dtype name; a wrong one is named as a dtype, with the list of valid ones */
culua_Dtype culua_checkdtype (lua_State *L, int i) {
  const char *name = luaL_checkstring(L, i);
  luaL_Buffer b;
  int t;
  for (t = 0; t < CULUA_NDTYPES; t++)
    if (strcmp(culua_dtype_names[t], name) == 0) return (culua_Dtype)t;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "unknown dtype '%s'; expected one of ", name);
  luaL_addvalue(&b);
  for (t = 0; t < CULUA_NDTYPES; t++) {
    if (t > 0) luaL_addstring(&b, ", ");
    luaL_addstring(&b, culua_dtype_names[t]);
  }
  luaL_pushresult(&b);
  return (culua_Dtype)luaL_argerror(L, i, lua_tostring(L, -1));
}


/* the bits of a low-precision element at p, and storing them */
static unsigned lowp_get (culua_Dtype t, const void *p) {
  return culua_dtype_size[t] == 2 ? *(const uint16_t *)p : *(const uint8_t *)p;
}

static void lowp_set (culua_Dtype t, void *p, unsigned bits) {
  if (culua_dtype_size[t] == 2) *(uint16_t *)p = (uint16_t)bits;
  else *(uint8_t *)p = (uint8_t)bits;
}


/*
** A Lua number into a low-precision dtype: rounded once from the double,
** to nearest even (half.c). What the format cannot hold raises, as for
** float32: a finite number that rounds past the largest finite value, and
** an infinity into an fp8 dtype (SATFINITE would make it the largest finite
** value). NaN is a value of every format.
*/
static void lowp_toelem (lua_State *L, int i, culua_Dtype t, lua_Number x, void *p,
                         const char *fname) {
  if (!culua_lowp_fits(t, x)) {
    const char *v = lua_tostring(L, i), *max = lua_pushfstring(L, "%f", culua_lowp_max(t));
    if (culua_dtype_size[t] == 1)   /* fp8: saturating, even an infinity */
      luaL_error(L, "%s: %s would saturate to %s%s in %s (fp8 conversions are SATFINITE)", fname,
                 v, x < 0 ? "-" : "", max, culua_dtype_names[t]);
    luaL_error(L, "%s: %s overflows %s (largest %s)", fname, v, culua_dtype_names[t], max);
  }
  lowp_set(t, p, culua_lowp_round(t, x));
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
  if (culua_dtype_isfloat(t)) {
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
    if (culua_dtype_islowp(t)) lowp_toelem(L, i, t, x, p, fname);
    else if (t == CULUA_FLOAT32) *(float *)p = (float)x;
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
    case CULUA_FLOAT64: lua_pushnumber(L, *(const double *)p); break;
    default: lua_pushnumber(L, culua_lowp_widen(t, lowp_get(t, p))); break;
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
    case CULUA_FLOAT64: return *(const double *)p;
    default: return culua_lowp_widen(t, lowp_get(t, p));
  }
}


/*
** x into an integer dtype as CUDA's cvt.rzi does (so that a cast on the
** host and on the device agree): toward zero, saturating at the range, NaN
** to 0. C leaves a conversion out of range undefined.
*/
static void int_set_double (culua_Dtype t, void *p, double x) {
  static const double lo[] = {-128, 0, -32768, 0, -2147483648.0, 0, -0x1p63, 0};
  static const double hi[] = {127, 255, 32767, 65535, 2147483647.0, 4294967295.0, 0x1p63, 0x1p64};
  x = isnan(x) ? 0 : trunc(x);
  if (x < lo[t]) x = lo[t];
  if (x >= hi[t] && (t == CULUA_INT64 || t == CULUA_UINT64)) {   /* 2^63, 2^64: one past */
    if (t == CULUA_INT64) *(int64_t *)p = INT64_MAX;
    else *(uint64_t *)p = UINT64_MAX;
    return;
  }
  if (x > hi[t]) x = hi[t];
  switch (t) {
    case CULUA_INT8: *(int8_t *)p = (int8_t)x; break;
    case CULUA_UINT8: *(uint8_t *)p = (uint8_t)x; break;
    case CULUA_INT16: *(int16_t *)p = (int16_t)x; break;
    case CULUA_UINT16: *(uint16_t *)p = (uint16_t)x; break;
    case CULUA_INT32: *(int32_t *)p = (int32_t)x; break;
    case CULUA_UINT32: *(uint32_t *)p = (uint32_t)x; break;
    case CULUA_INT64: *(int64_t *)p = (int64_t)x; break;
    default: *(uint64_t *)p = (uint64_t)x; break;
  }
}


void culua_elem_set_double (culua_Dtype t, void *p, double x) {
  switch (t) {
    case CULUA_FLOAT32: *(float *)p = (float)x; break;
    case CULUA_FLOAT64: *(double *)p = x; break;
    default:
      if (culua_dtype_islowp(t)) lowp_set(t, p, culua_lowp_round(t, x));
      else int_set_double(t, p, x);
      break;
  }
}


/* an integer element's bits, sign-extended, for casts between integers */
static uint64_t int_get (culua_Dtype t, const void *p) {
  switch (t) {
    case CULUA_INT8: return (uint64_t)(int64_t)*(const int8_t *)p;
    case CULUA_UINT8: return *(const uint8_t *)p;
    case CULUA_INT16: return (uint64_t)(int64_t)*(const int16_t *)p;
    case CULUA_UINT16: return *(const uint16_t *)p;
    case CULUA_INT32: return (uint64_t)(int64_t)*(const int32_t *)p;
    case CULUA_UINT32: return *(const uint32_t *)p;
    default: return *(const uint64_t *)p;
  }
}


/*
** n elements of dtype from at src into dtype to at dst: the rules of
** astype, which the device's casts (lua/catalog/cast.lua) follow too.
** Between integers the low bits are kept, as C and NumPy do; everything
** else goes through a double, which holds every value of every dtype but
** the 64-bit integers past 2^53 exactly, and is rounded once into `to`.
*/
void culua_convert (culua_Dtype to, void *dst, culua_Dtype from, const void *src, size_t n) {
  size_t k, es = culua_dtype_size[to], fs = culua_dtype_size[from];
  char *d = (char *)dst;
  const char *s = (const char *)src;
  if (to == from) {
    memcpy(dst, src, n * es);
    return;
  }
  for (k = 0; k < n; k++, d += es, s += fs) {
    if (!culua_dtype_isfloat(to) && !culua_dtype_isfloat(from)) {
      uint64_t v = int_get(from, s);
      switch (es) {
        case 1: *(uint8_t *)d = (uint8_t)v; break;
        case 2: *(uint16_t *)d = (uint16_t)v; break;
        case 4: *(uint32_t *)d = (uint32_t)v; break;
        default: *(uint64_t *)d = v; break;
      }
    }
    else
      culua_elem_set_double(to, d, culua_elem_double(from, s));
  }
}


/*
** Shapes: a count n, or a table {rows, cols}. Fills *rows (0 for 1-D) and
** *cols and returns the element count, refusing what would overflow.
*/
size_t culua_checkshape (lua_State *L, int i, culua_Dtype t, size_t *rows, size_t *cols, int *twod) {
  lua_Integer r = 0, c;
  *twod = lua_istable(L, i);
  if (*twod) {
    int okr, okc;
    luaL_argcheck(L, luaL_len(L, i) == 2, i, "shape must be {rows, cols}");
    lua_rawgeti(L, i, 1);
    lua_rawgeti(L, i, 2);
    r = lua_tointegerx(L, -2, &okr);   /* 2.0 is 2; 2.5 and "2" are no size */
    c = lua_tointegerx(L, -1, &okc);
    if (!okr || lua_type(L, -2) != LUA_TNUMBER) r = -1;
    if (!okc || lua_type(L, -1) != LUA_TNUMBER) c = -1;
    lua_pop(L, 2);
    /* {rows, 0} and {0, cols} hold nothing, as in NumPy */
    luaL_argcheck(L, r >= 0 && c >= 0, i, "rows and cols must be integers 0 or more");
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
  return *twod ? (size_t)r * (size_t)c : (size_t)c;
}


void culua_pushshape (lua_State *L, int twod, size_t rows, size_t cols) {
  if (twod) {
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


/* elements -> a new Lua table (rows of tables when 2-D) */
void culua_elems_to_table (lua_State *L, culua_Dtype t, const void *src, int twod, size_t rows,
                           size_t cols) {
  size_t es = culua_dtype_size[t], r, k;
  const char *s = (const char *)src;
  luaL_checkstack(L, 4, "totable");
  if (!twod) {
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
void culua_push_preview (lua_State *L, const char *tname, const char *tag, culua_Dtype t, int twod,
                         size_t rows, size_t cols, const void *first, size_t nfirst, size_t n) {
  luaL_Buffer b;
  size_t k;
  luaL_buffinit(L, &b);
  if (twod)
    lua_pushfstring(L, "%s(%s, {%I, %I}%s%s): {", tname, culua_dtype_names[t], (lua_Integer)rows,
                    (lua_Integer)cols, tag ? ", " : "", tag ? tag : "");
  else
    lua_pushfstring(L, "%s(%s, %I%s%s): {", tname, culua_dtype_names[t], (lua_Integer)cols,
                    tag ? ", " : "", tag ? tag : "");
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
