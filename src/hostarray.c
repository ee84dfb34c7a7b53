/*
** hostarray.c
** cuda.host_array: typed host memory, pageable or pinned, for staging copies
** and for CPU references. Bulk work (fill, iota, random, compare) is in C.
** Pinned memory may also be mapped, for kernels to read and write in place.
*/

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "culua_int.h"


#define PREVIEW 8


/* {====================================================== checks */

static culua_HostArray *check_host (lua_State *L, int i) {
  culua_HostArray *h = culua_testhostarray(L, i);
  if (h == NULL) luaL_typeerror(L, i, CULUA_HOSTARRAY);
  return h;
}


static char *elem (const culua_HostArray *h, size_t k) {
  return (char *)h->data + k * culua_dtype_size[h->dtype];
}


/* a 1-based index at i, checked against the array */
static size_t checkindex (lua_State *L, const culua_HostArray *h, int i) {
  lua_Integer k = luaL_checkinteger(L, i);
  if (k < 1 || (size_t)k > h->n)
    luaL_error(L, "cuda.host_array: index %I outside 1..%I", k, (lua_Integer)h->n);
  return (size_t)k - 1;
}

/* }====================================================== */


/* {====================================================== making host arrays */

/*
** cuda.host_array(dtype, n | {rows, cols} [, {pinned = true, mapped = true,
** device = d}]). Mapped is pinned memory that kernels reach over the bus
** (zero-copy): a kernel takes it as it takes a device array.
*/
static int cuda_host_array (lua_State *L) {
  culua_Dtype t = culua_checkdtype(L, 1);
  int twod;
  size_t rows, cols, n = culua_checkshape(L, 2, t, &rows, &cols, &twod);
  size_t bytes = n * culua_dtype_size[t];
  size_t held = bytes ? bytes : 1;   /* data == NULL means closed: an empty array holds a byte */
  int pinned = 0, mapped = 0, ordinal = -1;
  culua_HostArray *h;
  if (!lua_isnoneornil(L, 3)) {
    static const char *const known[] = {"pinned", "mapped", "device", NULL};
    luaL_checktype(L, 3, LUA_TTABLE);
    culua_checkoptions(L, 3, "cuda.host_array", known);
    mapped = culua_optflag(L, 3, "cuda.host_array", "mapped", 0);
    lua_getfield(L, 3, "pinned");
    if (mapped && !lua_isnil(L, -1) && !lua_toboolean(L, -1))
      luaL_error(L, "cuda.host_array: mapped memory is pinned (pinned = false and mapped = true contradict)");
    pinned = mapped || lua_toboolean(L, -1);
    lua_settop(L, 3);
    ordinal = culua_optdevice(L, 3, "cuda.host_array");
  }
  h = (culua_HostArray *)lua_newuserdatauv(L, sizeof(culua_HostArray), 0);
  memset(h, 0, sizeof(*h));
  luaL_setmetatable(L, CULUA_HOSTARRAY);
  if (pinned) {
    const culua_Driver *cu = culua_cu(L, "cuda.host_array");
    CUresult r;
    char buf[32];
    culua_ctx_open(L, &h->c, ordinal, "cuda.host_array");
    if (mapped)
      culua_need(L, h->c.dev, h->c.ordinal, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "cuda.host_array",
                 "cannot map host memory (mapped = true)");
    /* portable: usable for copies with any context, not only this one; and
    ** mapped into every context's address space when asked, as UVA does */
    r = cu->cuMemHostAlloc(&h->data, held, CU_MEMHOSTALLOC_PORTABLE | (mapped ? CU_MEMHOSTALLOC_DEVICEMAP : 0));
    if (r != CUDA_SUCCESS) {
      h->data = NULL;
      culua_cufail(L, r, "cuda.host_array", "pinning %s of host memory%s", culua_bytes(buf, (double)bytes),
                   mapped ? " (mapped)" : "");
    }
    if (mapped && (r = cu->cuMemHostGetDevicePointer(&h->dptr, h->data, 0)) != CUDA_SUCCESS) {
      cu->cuMemFreeHost(h->data);
      h->data = NULL;
      culua_cufail(L, r, "cuda.host_array", "mapping %s of pinned memory for device %d",
                   culua_bytes(buf, (double)bytes), h->c.ordinal);
    }
  }
  else if ((h->data = calloc(1, held)) == NULL) {
    char buf[32];
    luaL_error(L, "cuda.host_array: out of host memory allocating %s", culua_bytes(buf, (double)bytes));
  }
  h->n = n;
  h->rows = rows;
  h->cols = cols;
  h->twod = twod;
  h->dtype = t;
  h->pinned = pinned;
  h->mapped = mapped;
  if (mapped) {   /* counted and listed with the arrays kernels use */
    culua_state(L)->mapped_bytes += bytes;
    culua_track(L, -1, CULUA_TRACK_ARRAYS);
  }
  return 1;
}


static int host_close (lua_State *L) {
  culua_HostArray *h = (culua_HostArray *)luaL_checkudata(L, 1, CULUA_HOSTARRAY);
  if (h->data == NULL) {   /* closed, or its allocation failed: the context may still be held */
    culua_ctx_close(&h->c);
    return 0;
  }
  if (h->mapped) culua_state(L)->mapped_bytes -= h->n * culua_dtype_size[h->dtype];
  if (h->pinned) {
    if (culua_ctx_live(&h->c)) culua_load_driver(NULL)->cuMemFreeHost(h->data);
    culua_ctx_close(&h->c);
  }
  else
    free(h->data);
  h->data = NULL;
  return 0;
}

/* }====================================================== */


/* {====================================================== bulk operations */

/* h:fill(v) -> h */
static int host_fill (lua_State *L) {
  culua_HostArray *h = check_host(L, 1);
  size_t k, es = culua_dtype_size[h->dtype];
  char v[8];
  luaL_checkany(L, 2);
  culua_toelem(L, 2, h->dtype, v, "fill");
  for (k = 0; k < h->n; k++) memcpy(elem(h, k), v, es);
  lua_settop(L, 1);
  return 1;
}


/* raise as culua_toelem does when x is not a value of dtype t */
static void check_fits (lua_State *L, culua_Dtype t, double x, const char *fname) {
  char probe[8];
  if (x == floor(x) && fabs(x) < 9.2e18) lua_pushinteger(L, (lua_Integer)x);   /* 3.0 is the integer 3 */
  else lua_pushnumber(L, x);
  culua_toelem(L, -1, t, probe, fname);
  lua_pop(L, 1);
}


/* h:iota([start [, step]]) -> h: start, start+step, ... (default 1, 1) */
static int host_iota (lua_State *L) {
  culua_HostArray *h = check_host(L, 1);
  double start = luaL_optnumber(L, 2, 1), step = luaL_optnumber(L, 3, 1);
  size_t k;
  /* the first and last values must fit the dtype, as any value does (the
  ** sequence is monotonic, so the ends bound it) */
  if (!culua_dtype_isfloat(h->dtype) && step != floor(step))
    luaL_error(L, "iota: step %s is not a whole number, as %s needs", lua_tostring(L, 3), culua_dtype_names[h->dtype]);
  check_fits(L, h->dtype, start, "iota");
  if (h->n > 0) check_fits(L, h->dtype, start + step * (double)(h->n - 1), "iota");
  lua_settop(L, 3);
  for (k = 0; k < h->n; k++) culua_elem_set_double(h->dtype, elem(h, k), start + step * (double)k);
  lua_settop(L, 1);
  return 1;
}


/* splitmix64: small, fast, and the same sequence on every machine */
static uint64_t splitmix (uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}


/*
** h:random(seed [, lo, hi]) -> h. Floats: uniform in [lo, hi), default
** [0, 1). Integers: uniform in [lo, hi], default [0, 99].
*/
static int host_random (lua_State *L) {
  culua_HostArray *h = check_host(L, 1);
  uint64_t s = (uint64_t)luaL_checkinteger(L, 2);
  size_t k;
  if (culua_dtype_isfloat(h->dtype)) {
    double lo = luaL_optnumber(L, 3, 0), hi = luaL_optnumber(L, 4, 1);
    luaL_argcheck(L, lo < hi, 4, "hi must be greater than lo");
    check_fits(L, h->dtype, lo, "random");   /* float16 has no 1e6 */
    check_fits(L, h->dtype, hi, "random");
    for (k = 0; k < h->n; k++) {
      double u = (double)(splitmix(&s) >> 11) * 0x1.0p-53;
      culua_elem_set_double(h->dtype, elem(h, k), lo + (hi - lo) * u);
    }
  }
  else {
    lua_Integer lo = luaL_optinteger(L, 3, 0), hi = luaL_optinteger(L, 4, 99);
    char probe[8];
    uint64_t span;
    luaL_argcheck(L, lo <= hi, 4, "hi must not be less than lo");
    lua_pushinteger(L, lo);   /* both ends must fit the dtype */
    culua_toelem(L, -1, h->dtype, probe, "random");
    lua_pushinteger(L, hi);
    culua_toelem(L, -1, h->dtype, probe, "random");
    span = (uint64_t)hi - (uint64_t)lo + 1;   /* 0 means the whole 2^64 */
    for (k = 0; k < h->n; k++) {
      uint64_t r = splitmix(&s);
      int64_t v = (int64_t)((uint64_t)lo + (span ? r % span : r));
      switch (culua_dtype_size[h->dtype]) {
        case 1: *(uint8_t *)elem(h, k) = (uint8_t)v; break;
        case 2: *(uint16_t *)elem(h, k) = (uint16_t)v; break;
        case 4: *(uint32_t *)elem(h, k) = (uint32_t)v; break;
        default: *(uint64_t *)elem(h, k) = (uint64_t)v; break;
      }
    }
  }
  lua_settop(L, 1);
  return 1;
}


/* h:copy_from(table | string | hostarray) -> h */
static int host_copy_from (lua_State *L) {
  culua_HostArray *h = check_host(L, 1), *o;
  size_t es = culua_dtype_size[h->dtype];
  if ((o = culua_testhostarray(L, 2)) != NULL) {
    if (o->dtype != h->dtype)
      luaL_error(L, "copy_from: dtype mismatch (%s and %s); copies do not convert",
                 culua_dtype_names[h->dtype], culua_dtype_names[o->dtype]);
    if (o->n > h->n) luaL_error(L, "copy_from: %d elements do not fit in %d", (int)o->n, (int)h->n);
    memmove(h->data, o->data, o->n * es);
  }
  else if (lua_type(L, 2) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, 2, &len);
    if (len % es != 0 || len / es > h->n)
      luaL_error(L, "copy_from: a string of %d bytes does not fit %d %s elements", (int)len,
                 (int)h->n, culua_dtype_names[h->dtype]);
    memcpy(h->data, s, len);
  }
  else if (lua_type(L, 2) == LUA_TTABLE) {
    size_t n = (size_t)luaL_len(L, 2);
    if (n > 0 && lua_rawgeti(L, 2, 1) == LUA_TTABLE) n *= (size_t)luaL_len(L, -1);
    lua_settop(L, 2);
    if (n > h->n) luaL_error(L, "copy_from: %d values do not fit in %d elements", (int)n, (int)h->n);
    culua_table_to_elems(L, 2, h->dtype, h->data, n, h->twod ? h->cols : 0, "copy_from");
  }
  else
    luaL_typeerror(L, 2, "cuda.host_array, string or table");
  lua_settop(L, 1);
  return 1;
}


/*
** h:astype(dtype) -> a new pageable host array of h's shape in dtype, each
** element converted by the rules of the device's x:astype (dtype.c's
** culua_convert), so that the host can check the device bit for bit.
*/
static int host_astype (lua_State *L) {
  culua_HostArray *h = check_host(L, 1), *o;
  culua_checkdtype(L, 2);
  lua_pushcfunction(L, cuda_host_array);
  lua_pushvalue(L, 2);
  if (h->twod) culua_pushshape(L, 1, h->rows, h->cols);
  else lua_pushinteger(L, (lua_Integer)h->n);
  lua_call(L, 2, 1);
  o = (culua_HostArray *)lua_touserdata(L, -1);
  culua_convert(o->dtype, o->data, h->dtype, h->data, h->n);
  return 1;
}


static int host_totable (lua_State *L) {
  culua_HostArray *h = check_host(L, 1);
  culua_elems_to_table(L, h->dtype, h->data, h->twod, h->rows, h->cols);
  return 1;
}


static int host_bytes (lua_State *L) {
  culua_HostArray *h = check_host(L, 1);
  lua_pushlstring(L, (const char *)h->data, h->n * culua_dtype_size[h->dtype]);
  return 1;
}


/* the host data of a comparison operand; device arrays are copied (pushed) */
static const void *operand (lua_State *L, int i, size_t *n, culua_Dtype *t) {
  culua_HostArray *h = culua_testhostarray(L, i);
  if (h != NULL) {
    *n = h->n;
    *t = h->dtype;
    return h->data;
  }
  else {
    culua_Array *a = culua_testarray(L, i, 1);
    void *buf;
    if (a == NULL) luaL_typeerror(L, i, "cuda.host_array or cuda.array");
    buf = lua_newuserdatauv(L, a->n * culua_dtype_size[a->dtype] + 1, 0);
    culua_array_read(L, a, buf, "cuda.compare");
    *n = a->n;
    *t = a->dtype;
    return buf;
  }
}


/*
** cuda.compare(a, b) -> max_abs, max_rel, norm_rel: how far a is from the
** reference b, elementwise and as ||a - b|| / ||b||, computed in double.
** A NaN anywhere that b has none makes every figure inf.
*/
static int cuda_compare (lua_State *L) {
  size_t na, nb, k;
  culua_Dtype ta, tb;
  const void *pa = operand(L, 1, &na, &ta);
  const void *pb = operand(L, 2, &nb, &tb);
  double maxabs = 0, maxrel = 0, diff2 = 0, ref2 = 0;
  if (na != nb)
    luaL_error(L, "cuda.compare: sizes differ (%d and %d elements)", (int)na, (int)nb);
  for (k = 0; k < na; k++) {
    double x = culua_elem_double(ta, (const char *)pa + k * culua_dtype_size[ta]);
    double y = culua_elem_double(tb, (const char *)pb + k * culua_dtype_size[tb]);
    double d = fabs(x - y);
    if (isnan(x) != isnan(y)) {
      maxabs = maxrel = diff2 = HUGE_VAL;
      break;
    }
    if (isnan(x)) continue;   /* NaN where the reference has NaN agrees */
    if (d > maxabs) maxabs = d;
    if (y != 0 && d / fabs(y) > maxrel) maxrel = d / fabs(y);
    diff2 += d * d;
    ref2 += y * y;
  }
  lua_pushnumber(L, maxabs);
  lua_pushnumber(L, maxrel);
  lua_pushnumber(L, ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2));
  return 3;
}

/* }====================================================== */


/* {====================================================== metamethods */

static int host_index (lua_State *L) {
  culua_HostArray *h;
  const char *k;
  if (culua_pushmethod(L, CULUA_HOSTARRAY, 2) && !lua_isnil(L, -1)) return 1;  /* close works when closed */
  h = check_host(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    culua_pushelem(L, h->dtype, elem(h, checkindex(L, h, 2)));
    return 1;
  }
  k = lua_tostring(L, 2);
  if (k == NULL) return culua_pushmethod(L, CULUA_HOSTARRAY, 2);
  if (strcmp(k, "dtype") == 0) lua_pushstring(L, culua_dtype_names[h->dtype]);
  else if (strcmp(k, "shape") == 0) culua_pushshape(L, h->twod, h->rows, h->cols);
  else if (strcmp(k, "nbytes") == 0) lua_pushinteger(L, (lua_Integer)(h->n * culua_dtype_size[h->dtype]));
  else if (strcmp(k, "size") == 0) lua_pushinteger(L, (lua_Integer)h->n);
  else if (strcmp(k, "pinned") == 0) lua_pushboolean(L, h->pinned);
  else if (strcmp(k, "mapped") == 0) lua_pushboolean(L, h->mapped);
  else if (strcmp(k, "memory") == 0)
    lua_pushstring(L, h->mapped ? "mapped" : h->pinned ? "pinned" : "pageable");
  else if (strcmp(k, "ptr") == 0) {   /* the address kernels use: mapped only */
    if (h->mapped) lua_pushinteger(L, (lua_Integer)h->dptr);
    else lua_pushnil(L);
  }
  else if (strcmp(k, "device") == 0) {   /* the device whose context pinned it, or nil */
    if (h->pinned) culua_pushdevice(L, h->c.ordinal, "cuda.host_array");
    else lua_pushnil(L);
  }
  else return culua_pushmethod(L, CULUA_HOSTARRAY, 2);
  return 1;
}


static int host_newindex (lua_State *L) {
  culua_HostArray *h = check_host(L, 1);
  size_t k = checkindex(L, h, 2);
  culua_toelem(L, 3, h->dtype, elem(h, k), "cuda.host_array");
  return 0;
}


static int host_len (lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_host(L, 1)->n);
  return 1;
}


static int host_tostring (lua_State *L) {
  culua_HostArray *h = (culua_HostArray *)luaL_checkudata(L, 1, CULUA_HOSTARRAY);
  if (h->data == NULL) {
    lua_pushliteral(L, "cuda.host_array (closed)");
    return 1;
  }
  culua_push_preview(L, CULUA_HOSTARRAY, h->mapped ? "mapped" : NULL, h->dtype, h->twod, h->rows, h->cols, h->data,
                     h->n < PREVIEW ? h->n : PREVIEW, h->n);
  return 1;
}


static const luaL_Reg host_meta[] = {
  {"__index", host_index},
  {"__newindex", host_newindex},
  {"__len", host_len},
  {"__tostring", host_tostring},
  {"__gc", host_close},
  {"__close", host_close},
  {NULL, NULL}
};

static const luaL_Reg host_methods[] = {
  {"fill", host_fill},
  {"iota", host_iota},
  {"random", host_random},
  {"copy_from", host_copy_from},
  {"totable", host_totable},
  {"bytes", host_bytes},
  {"astype", host_astype},
  {"close", host_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"host_array", cuda_host_array},
  {"compare", cuda_compare},
  {NULL, NULL}
};

/* }====================================================== */


void culua_open_hostarray (lua_State *L) {
  culua_newmeta(L, CULUA_HOSTARRAY, host_meta, host_methods);
  luaL_setfuncs(L, funcs, 0);
}
