/*
** texture.c
** cuda.texture: a texture object over a 1-D or 2-D cuda.array, read in a
** kernel through the texture cache (tex1Dfetch, tex2D) with the hardware's
** filtering and out-of-range addressing.
**
**   local t = cuda.texture(img, {filter = "point", address = "clamp",
**                                normalized = false, read = "element"})
**   k:launch(grid, block, t, ...)     -- a cudaTextureObject_t parameter
*/

#include "config.h"

#include <string.h>

#include "culua_int.h"


typedef struct Texture {
  culua_Ctx c;                 /* closed when c.ctx == NULL */
  CUtexObject tex;             /* 0 until made */
  const culua_Array *array;    /* the array read (kept alive by the user value) */
  CUfilter_mode filter;
  CUaddress_mode address;
  int normalized;
} Texture;


static Texture *check_texture (lua_State *L, int i) {
  return (Texture *)culua_checkobj(L, i, CULUA_TEXTURE);
}


/* {====================================================== options */

static const char *const filter_names[] = {"point", "linear", NULL};
static const CUfilter_mode filter_modes[] = {CU_TR_FILTER_MODE_POINT, CU_TR_FILTER_MODE_LINEAR};

static const char *const address_names[] = {"clamp", "wrap", "border", "mirror", NULL};
static const CUaddress_mode address_modes[] = {
  CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_BORDER,
  CU_TR_ADDRESS_MODE_MIRROR
};

static const char *const read_names[] = {"element", "normalized_float", NULL};

static const char *const option_names[] = {
  "filter", "address", "normalized", "read", "border", NULL
};


typedef struct Options {
  int filter, address, read;   /* indices into the name lists */
  int normalized;
  int hasborder;
  float border[4];
} Options;


/* the name at field k of the table at i, as an index into names (default def) */
static int pick (lua_State *L, int i, const char *k, const char *const names[], int def) {
  int j;
  const char *s;
  if (lua_getfield(L, i, k) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  if ((s = lua_tostring(L, -1)) != NULL && lua_type(L, -1) == LUA_TSTRING)
    for (j = 0; names[j] != NULL; j++)
      if (strcmp(names[j], s) == 0) {
        lua_pop(L, 1);
        return j;
      }
  {
    luaL_Buffer b;
    const char *bad = s ? lua_pushfstring(L, "'%s'", s) : luaL_typename(L, -1);
    luaL_buffinit(L, &b);
    for (j = 0; names[j] != NULL; j++) {
      if (j > 0) luaL_addstring(&b, names[j + 1] ? ", " : " or ");
      lua_pushfstring(L, "'%s'", names[j]);
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return luaL_error(L, "cuda.texture: option %s must be %s, not %s", k, lua_tostring(L, -1), bad);
  }
}


/*
** Everything that does not depend on the array, checked first so that a
** misspelt option is reported the same with or without a GPU.
*/
static void read_options (lua_State *L, int i, Options *o) {
  memset(o, 0, sizeof(*o));
  if (lua_isnoneornil(L, i)) return;
  luaL_checktype(L, i, LUA_TTABLE);
  culua_checkoptions(L, i, "cuda.texture", option_names);   /* a misspelt key must not mean the default */
  o->filter = pick(L, i, "filter", filter_names, 0);
  o->address = pick(L, i, "address", address_names, 0);
  o->read = pick(L, i, "read", read_names, 0);
  lua_getfield(L, i, "normalized");
  o->normalized = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, i, "border") != LUA_TNIL) {
    int j;
    if (!lua_istable(L, -1) || luaL_len(L, -1) != 4)
      luaL_error(L, "cuda.texture: option border must be a table of 4 numbers {r, g, b, a}");
    for (j = 0; j < 4; j++) {
      int isnum;
      lua_rawgeti(L, -1, j + 1);
      o->border[j] = (float)lua_tonumberx(L, -1, &isnum);
      if (!isnum) luaL_error(L, "cuda.texture: border[%d] must be a number", j + 1);
      lua_pop(L, 1);
    }
    if (o->address != 2)
      luaL_error(L, "cuda.texture: option border needs address = 'border', not '%s'",
                 address_names[o->address]);
    o->hasborder = 1;
  }
  lua_pop(L, 1);
  /* the hardware wraps and mirrors only coordinates in [0, 1) */
  if ((o->address == 1 || o->address == 3) && !o->normalized)
    luaL_error(L, "cuda.texture: address '%s' needs normalized = true", address_names[o->address]);
}


/* the texture format of a dtype, or raise naming the ones that have one */
static CUarray_format format_of (lua_State *L, culua_Dtype t) {
  switch (t) {
    case CULUA_INT8: return CU_AD_FORMAT_SIGNED_INT8;
    case CULUA_UINT8: return CU_AD_FORMAT_UNSIGNED_INT8;
    case CULUA_INT16: return CU_AD_FORMAT_SIGNED_INT16;
    case CULUA_UINT16: return CU_AD_FORMAT_UNSIGNED_INT16;
    case CULUA_INT32: return CU_AD_FORMAT_SIGNED_INT32;
    case CULUA_UINT32: return CU_AD_FORMAT_UNSIGNED_INT32;
    case CULUA_FLOAT32: return CU_AD_FORMAT_FLOAT;
    default:
      luaL_argerror(L, 1, lua_pushfstring(L, "cuda.texture: %s arrays have no texture format "
                    "(allowed: int8, uint8, int16, uint16, int32, uint32, float32)", culua_dtype_names[t]));
      return CU_AD_FORMAT_FLOAT;
  }
}

/* }====================================================== */


/* {====================================================== making textures */

/* the device attribute a of the array's device */
static int attribute (lua_State *L, const culua_Array *a, CUdevice_attribute at) {
  int v = 0;
  culua_check(L, culua_cu(L, "cuda.texture")->cuDeviceGetAttribute(&v, at, a->c.dev), "cuda.texture",
              "reading texture limits of device %d", a->c.ordinal);
  return v;
}


/*
** The resource: a 1-D array is linear memory (tex1Dfetch by integer
** index: no filtering, no normalized coordinates; out of range reads 0);
** a 2-D array is pitched memory, whose rows must sit at the device's
** texture pitch alignment (and both start at its texture alignment): a packed array whose row bytes fall on it works
** as it is, others must be made with {pitched = true}.
*/
static void describe (lua_State *L, const culua_Array *a, const Options *o, CUDA_RESOURCE_DESC *rd) {
  CUarray_format fmt = format_of(L, a->dtype);
  size_t es = culua_dtype_size[a->dtype];
  int align = attribute(L, a, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
  memset(rd, 0, sizeof(*rd));
  if (align > 0 && a->ptr % (CUdeviceptr)align != 0)
    luaL_argerror(L, 1, lua_pushfstring(L, "cuda.texture: the array's address is not aligned to %d bytes "
                  "(a view must start at a multiple of the texture alignment)", align));
  if (a->rows == 0) {
    if (o->filter != 0 || o->normalized)
      luaL_error(L, "cuda.texture: a 1-D texture reads linear memory by index (tex1Dfetch): "
                 "filter = 'point' and normalized = false only");
    rd->resType = CU_RESOURCE_TYPE_LINEAR;
    rd->res.linear.devPtr = a->ptr;
    rd->res.linear.format = fmt;
    rd->res.linear.numChannels = 1;
    rd->res.linear.sizeInBytes = a->n * es;
  }
  else {
    int palign = attribute(L, a, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
    size_t pitch = a->pitch ? a->pitch : a->cols * es;
    if (palign > 0 && pitch % (size_t)palign != 0)
      luaL_argerror(L, 1, lua_pushfstring(L, "cuda.texture: rows of %d bytes are not on the device's "
                    "texture pitch alignment (%d bytes): make the array with {pitched = true}",
                    (int)pitch, palign));
    rd->resType = CU_RESOURCE_TYPE_PITCH2D;
    rd->res.pitch2D.devPtr = a->ptr;
    rd->res.pitch2D.format = fmt;
    rd->res.pitch2D.numChannels = 1;
    rd->res.pitch2D.width = a->cols;
    rd->res.pitch2D.height = a->rows;
    rd->res.pitch2D.pitchInBytes = pitch;
  }
}


/*
** The read mode: "element" returns the stored type; "normalized_float"
** maps 8- and 16-bit integers onto [0, 1] ([-1, 1] signed), which is
** what the hardware can interpolate, as it can float32 itself.
*/
static void texdesc (lua_State *L, const culua_Array *a, const Options *o, CUDA_TEXTURE_DESC *td) {
  int small = culua_dtype_size[a->dtype] <= 2;
  int j;
  memset(td, 0, sizeof(*td));
  if (o->read == 1 && !small)
    luaL_error(L, "cuda.texture: read = 'normalized_float' needs an 8- or 16-bit integer array, not %s",
               culua_dtype_names[a->dtype]);
  if (o->filter == 1 && !(o->read == 1 || a->dtype == CULUA_FLOAT32))
    luaL_error(L, "cuda.texture: filter = 'linear' needs read = 'normalized_float' or a float32 array (%s read as elements)",
               culua_dtype_names[a->dtype]);
  for (j = 0; j < 3; j++) td->addressMode[j] = address_modes[o->address];
  td->filterMode = filter_modes[o->filter];
  if (o->read == 0 && a->dtype != CULUA_FLOAT32) td->flags |= CU_TRSF_READ_AS_INTEGER;
  if (o->normalized) td->flags |= CU_TRSF_NORMALIZED_COORDINATES;
  for (j = 0; j < 4; j++) td->borderColor[j] = o->border[j];
}


/* cuda.texture(array [, opts]) -> texture */
static int cuda_texture (lua_State *L) {
  Options o;
  culua_Array *a;
  Texture *t;
  CUDA_RESOURCE_DESC rd;
  CUDA_TEXTURE_DESC td;
  CUtexObject h = 0;
  read_options(L, 2, &o);
  a = culua_testarray(L, 1, 1);
  if (a == NULL) return luaL_typeerror(L, 1, CULUA_ARRAY);
  luaL_argcheck(L, a->n > 0, 1, "an array of no elements has no texture");
  describe(L, a, &o, &rd);
  texdesc(L, a, &o, &td);
  t = (Texture *)lua_newuserdatauv(L, sizeof(Texture), 1);
  memset(t, 0, sizeof(*t));
  luaL_setmetatable(L, CULUA_TEXTURE);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);   /* the texture keeps its array alive */
  culua_ctx_open(L, &t->c, a->c.ordinal, "cuda.texture");
  culua_check(L, culua_cu(L, "cuda.texture")->cuTexObjectCreate(&h, &rd, &td, NULL), "cuda.texture",
              "making a texture over a %s %s array on device %d", a->rows ? "2-D" : "1-D",
              culua_dtype_names[a->dtype], a->c.ordinal);
  t->tex = h;
  t->array = a;
  t->filter = td.filterMode;
  t->address = td.addressMode[0];
  t->normalized = o.normalized;
  return 1;
}


static int texture_close (lua_State *L) {
  Texture *t = (Texture *)luaL_checkudata(L, 1, CULUA_TEXTURE);
  if (t->tex != 0 && culua_ctx_live(&t->c))
    culua_load_driver(NULL)->cuTexObjectDestroy(t->tex);
  t->tex = 0;
  culua_ctx_close(&t->c);
  return 0;
}


/*
** For kernel arguments. The array is kept alive, but can still be closed
** explicitly: then the texture would read freed memory, so it refuses.
*/
int culua_totexture (lua_State *L, int i, unsigned long long *h) {
  Texture *t = (Texture *)luaL_testudata(L, i, CULUA_TEXTURE);
  if (t == NULL) return 0;
  if (t->c.ctx == NULL) luaL_error(L, "attempt to use a closed %s", CULUA_TEXTURE);
  if (culua_ctx_stale(&t->c))
    luaL_error(L, "attempt to use a %s whose device was reset by cuda.reset()", CULUA_TEXTURE);
  lua_getiuservalue(L, i, 1);
  culua_testarray(L, -1, 0);   /* raises when the array was closed */
  lua_pop(L, 1);
  *h = (unsigned long long)t->tex;
  return 1;
}

/* }====================================================== */


/* {====================================================== metamethods */

static int texture_index (lua_State *L) {
  Texture *t;
  const char *k = lua_tostring(L, 2);
  if (culua_pushmethod(L, CULUA_TEXTURE, 2) && !lua_isnil(L, -1)) return 1;  /* close when closed */
  t = check_texture(L, 1);
  if (k == NULL) return 1;   /* nil */
  if (strcmp(k, "array") == 0) lua_getiuservalue(L, 1, 1);
  else if (strcmp(k, "handle") == 0) lua_pushinteger(L, (lua_Integer)t->tex);
  else lua_pushnil(L);
  return 1;
}


static int texture_tostring (lua_State *L) {
  Texture *t = (Texture *)luaL_checkudata(L, 1, CULUA_TEXTURE);
  const culua_Array *a = t->array;
  int j;
  if (t->c.ctx == NULL || a == NULL) {
    lua_pushliteral(L, "cuda.texture (closed)");
    return 1;
  }
  for (j = 0; address_modes[j] != t->address; j++) ;
  if (a->rows)
    lua_pushfstring(L, "cuda.texture(%s %Ix%I, %s, %s%s, device %d)", culua_dtype_names[a->dtype],
                    (lua_Integer)a->rows, (lua_Integer)a->cols,
                    t->filter == CU_TR_FILTER_MODE_LINEAR ? "linear" : "point", address_names[j],
                    t->normalized ? ", normalized" : "", t->c.ordinal);
  else
    lua_pushfstring(L, "cuda.texture(%s %I, device %d)", culua_dtype_names[a->dtype],
                    (lua_Integer)a->n, t->c.ordinal);
  return 1;
}


static const luaL_Reg texture_meta[] = {
  {"__index", texture_index},
  {"__tostring", texture_tostring},
  {"__gc", texture_close},
  {"__close", texture_close},
  {NULL, NULL}
};

static const luaL_Reg texture_methods[] = {
  {"close", texture_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"texture", cuda_texture},
  {NULL, NULL}
};

/* }====================================================== */


void culua_open_texture (lua_State *L) {
  culua_newmeta(L, CULUA_TEXTURE, texture_meta, texture_methods);
  luaL_setfuncs(L, funcs, 0);
}
