/*
** array.c
** cuda.array: typed device memory, 1-D or 2-D (row-major), and views of a
** contiguous range. Every copy in or out of device memory is here.
** A pitched 2-D array (cuMemAllocPitch) pads each row to the driver's
** pitch, as 2-D textures want; copies move its rows with cuMemcpy2D and
** leave the padding out, so to Lua it holds n packed elements like any other.
** A managed array (cuMemAllocManaged) is unified memory: the same calls,
** plus host indexing, prefetch and advice (doc/memory.md).
*/

#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "culua_int.h"


#define PREVIEW 8   /* elements __tostring shows */


/* {====================================================== checks */

static culua_Array *check_array (lua_State *L, int i) {
  culua_Array *a = culua_testarray(L, i, 1);
  if (a == NULL) luaL_typeerror(L, i, CULUA_ARRAY);
  return a;
}


static size_t nbytes (const culua_Array *a) {
  return a->n * culua_dtype_size[a->dtype];
}


/* what the allocation holds, padding included */
static size_t held_bytes (const culua_Array *a) {
  return a->pitch ? a->pitch * a->rows : nbytes(a);
}


/*
** Before the host reads or writes a managed array (x[i], totable, bytes, a
** copy without a stream): wait for all work on the array's device, unless
** it was made with sync = false. A device without concurrent managed
** access faults the host (SIGBUS) when it touches managed memory while any
** kernel runs, and one with it gives whatever a running kernel has written
** so far; waiting for the one stream the host knows of would not be enough,
** since kernels of every stream may use the array (it is attached globally).
** For a kernel that never touches the array, the wait is the price of a
** rule a user can keep in mind; doc/memory.md states it.
*/
static void host_ready (lua_State *L, const culua_Array *x, const char *fname) {
  culua_Ctx c = x->c;   /* entering only reads it */
  if (!x->managed || !x->host_sync) return;
  culua_ctx_enter(L, &c, CULUA_ARRAY);
  culua_check(L, culua_cu(L, fname)->cuCtxSynchronize(), fname,
              "waiting for device %d before the host touches managed memory", x->c.ordinal);
}


/* the state's count of bytes that a (an owner) adds to: device or managed */
static size_t *account (lua_State *L, const culua_Array *a) {
  culua_State *S = culua_state(L);
  return a->managed ? &S->managed_bytes : &S->device_bytes;
}

/* }====================================================== */


/* {====================================================== making arrays */

/*
** Allocate, and on out-of-memory run a full collection (unreachable arrays
** give their memory back in __gc) and try once more before raising.
** Managed memory is attached globally: any stream of any device may use it,
** as kernels take arrays without saying which streams they run on.
*/
static CUdeviceptr alloc (lua_State *L, size_t bytes, int ordinal, int managed, const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  CUdeviceptr p = 0;
  CUresult r;
  if (bytes == 0) return 0;   /* cuMemAlloc refuses 0: an empty array holds nothing, ptr 0 */
  r = managed ? cu->cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL) : cu->cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    lua_gc(L, LUA_GCCOLLECT);
    r = managed ? cu->cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL) : cu->cuMemAlloc(&p, bytes);
  }
  if (r != CUDA_SUCCESS) {
    char buf[32];
    culua_cufail(L, r, fname, "allocating %s%s on device %d", culua_bytes(buf, (double)bytes),
                 managed ? " of managed memory" : "", ordinal);
  }
  return p;
}


/*
** The same for a pitched allocation. The driver asks for the widest access
** (4, 8 or 16 bytes) to align rows for; narrower elements ask for 4.
*/
static CUdeviceptr alloc_pitch (lua_State *L, size_t rows, size_t rowbytes, size_t es,
                                size_t *pitch, int ordinal, const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  CUdeviceptr p = 0;
  unsigned el = es < 4 ? 4 : (unsigned)es;
  CUresult r = cu->cuMemAllocPitch(&p, pitch, rowbytes, rows, el);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    lua_gc(L, LUA_GCCOLLECT);
    r = cu->cuMemAllocPitch(&p, pitch, rowbytes, rows, el);
  }
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, fname, "allocating %d pitched rows of %d bytes on device %d", (int)rows,
                 (int)rowbytes, ordinal);
  return p;
}


/* a new closed array userdata: the state an error can leave it in */
static culua_Array *newarray (lua_State *L) {
  culua_Array *a = (culua_Array *)lua_newuserdatauv(L, sizeof(culua_Array), 1);
  memset(a, 0, sizeof(*a));
  luaL_setmetatable(L, CULUA_ARRAY);
  return a;
}


/*
** cuda.array(dtype, n | {rows, cols} [, {device = d, pitched = b, managed = b,
** sync = b}]) -> array. A managed array's host access waits for its device
** unless sync = false, which only a device that shares managed memory with
** the host while kernels run may take (doc/memory.md says why).
*/
static int cuda_array (lua_State *L) {
  culua_Dtype t = culua_checkdtype(L, 1);
  int twod;
  size_t rows, cols, n = culua_checkshape(L, 2, t, &rows, &cols, &twod);
  int ordinal = -1, pitched = 0, managed = 0, sync = 1;
  size_t pitch = 0;
  culua_Array *a;
  if (!lua_isnoneornil(L, 3)) {
    static const char *const known[] = {"device", "pitched", "managed", "sync", NULL};
    luaL_checktype(L, 3, LUA_TTABLE);
    culua_checkoptions(L, 3, "cuda.array", known);
    ordinal = culua_optdevice(L, 3, "cuda.array");
    lua_settop(L, 3);
    pitched = lua_getfield(L, 3, "pitched") != LUA_TNIL && lua_toboolean(L, -1);
    lua_settop(L, 3);
    luaL_argcheck(L, !pitched || twod, 2, "a pitched array needs a {rows, cols} shape");
    managed = culua_optflag(L, 3, "cuda.array", "managed", 0);
    sync = culua_optflag(L, 3, "cuda.array", "sync", 1);
    if (lua_getfield(L, 3, "sync") != LUA_TNIL && !managed)
      luaL_error(L, "cuda.array: sync is an option of managed arrays (give managed = true too)");
    lua_settop(L, 3);
    if (managed && pitched)
      luaL_error(L, "cuda.array: a managed array is not pitched (give one of managed and pitched)");
  }
  a = newarray(L);
  culua_ctx_open(L, &a->c, ordinal, "cuda.array");
  if (managed) {
    culua_need(L, a->c.dev, a->c.ordinal, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "cuda.array",
               "cannot allocate managed memory");
    if (!sync)
      culua_need(L, a->c.dev, a->c.ordinal, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "cuda.array",
                 "cannot let the host touch managed memory while kernels run (sync = false)");
  }
  /* the fields after the allocation: a failed one leaves nothing to give back */
  if (pitched && n > 0)
    a->ptr = alloc_pitch(L, rows, cols * culua_dtype_size[t], culua_dtype_size[t], &pitch,
                         a->c.ordinal, "cuda.array");
  else
    a->ptr = alloc(L, n * culua_dtype_size[t], a->c.ordinal, managed, "cuda.array");
  a->n = n;
  a->rows = rows;
  a->cols = cols;
  a->twod = twod;
  a->dtype = t;
  a->pitch = pitch;
  a->managed = managed;
  a->host_sync = sync;
  *account(L, a) += held_bytes(a);
  culua_track(L, -1, CULUA_TRACK_ARRAYS);
  return 1;
}


/* x:view(first, count) -> a 1-D array over elements first..first+count-1 */
static int array_view (lua_State *L) {
  culua_Array *a = check_array(L, 1);
  lua_Integer first = luaL_checkinteger(L, 2);
  lua_Integer count = luaL_optinteger(L, 3, (lua_Integer)a->n - first + 1);
  culua_Array *v;
  if (a->pitch)
    return luaL_error(L, "view: the rows of a pitched array are not contiguous (copy it to a packed array first)");
  /* an empty view may start one past the end, as x[n+1:] does in NumPy */
  luaL_argcheck(L, first >= 1 && (size_t)first <= a->n + (count == 0), 2,
                lua_pushfstring(L, "first element %I outside 1..%I", first, (lua_Integer)a->n));
  luaL_argcheck(L, count >= 0 && (size_t)(first - 1 + count) <= a->n, 3,
                lua_pushfstring(L, "count %I runs past the end (%I elements from %I)", count,
                                (lua_Integer)a->n, first));
  v = newarray(L);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);   /* the view keeps its parent alive */
  culua_ctx_open(L, &v->c, a->c.ordinal, "view");
  v->ptr = count == 0 ? 0 : a->ptr + (CUdeviceptr)((size_t)(first - 1) * culua_dtype_size[a->dtype]);
  v->n = v->cols = (size_t)count;
  v->dtype = a->dtype;
  v->parent = a->parent ? a->parent : a;
  v->managed = a->managed;
  v->host_sync = a->host_sync;
  return 1;
}


void culua_newarray_over (lua_State *L, int owner, int ordinal, CUdeviceptr p, size_t n,
                          culua_Dtype t) {
  culua_Array *a;
  owner = lua_absindex(L, owner);
  a = newarray(L);
  lua_pushvalue(L, owner);
  lua_setiuservalue(L, -2, 1);   /* the owner outlives the array */
  culua_ctx_open(L, &a->c, ordinal, "global");
  a->ptr = p;
  a->n = a->cols = n;
  a->dtype = t;
  a->borrowed = 1;
}


static int array_close (lua_State *L) {
  culua_Array *a = (culua_Array *)luaL_checkudata(L, 1, CULUA_ARRAY);
  if (a->c.ctx != NULL && a->parent == NULL && !a->borrowed) {
    if (culua_ctx_live(&a->c) && a->ptr != 0) culua_load_driver(NULL)->cuMemFree(a->ptr);
    *account(L, a) -= held_bytes(a);
  }
  culua_ctx_close(&a->c);
  return 0;
}

/* }====================================================== */


/* {====================================================== copies */

/* where a copy ends: n elements of dtype at a host or device address */
typedef struct End {
  void *host;
  CUdeviceptr dev;
  size_t n;
  culua_Dtype dtype;
  const culua_Array *array;   /* the device array, when on the device */
  int anytype;                /* raw bytes (a Lua string): dtype is the other end's */
} End;


/*
** The other end of a copy, at index i: a device array, a host array, a Lua
** string (bytes), or for copies in, a Lua table (converted into a staging
** buffer left on the stack).
*/
static void other_end (lua_State *L, int i, const culua_Array *x, int incoming, End *e,
                       const char *fname) {
  culua_Array *a;
  culua_HostArray *h;
  memset(e, 0, sizeof(*e));
  if ((a = culua_testarray(L, i, 1)) != NULL) {
    e->dev = a->ptr;
    e->n = a->n;
    e->dtype = a->dtype;
    e->array = a;
  }
  else if ((h = culua_testhostarray(L, i)) != NULL) {
    e->host = h->data;
    e->n = h->n;
    e->dtype = h->dtype;
  }
  else if (lua_type(L, i) == LUA_TSTRING && incoming) {
    size_t len, es = culua_dtype_size[x->dtype];
    e->host = (void *)lua_tolstring(L, i, &len);
    if (len % es != 0)
      luaL_error(L, "%s: a string of %d bytes is not a whole number of %s elements", fname,
                 (int)len, culua_dtype_names[x->dtype]);
    e->n = len / es;
    e->dtype = x->dtype;
    e->anytype = 1;
  }
  else if (lua_type(L, i) == LUA_TTABLE && incoming) {
    size_t n = (size_t)luaL_len(L, i);
    if (n > 0 && lua_rawgeti(L, i, 1) == LUA_TTABLE) {   /* rows of a 2-D table */
      n = n * (size_t)luaL_len(L, -1);
    }
    lua_pop(L, n > 0 ? 1 : 0);
    if (n > x->n)
      luaL_error(L, "%s: %d values do not fit in %d elements", fname, (int)n, (int)x->n);
    e->host = lua_newuserdatauv(L, n * culua_dtype_size[x->dtype] + 1, 0);  /* staging */
    culua_table_to_elems(L, i, x->dtype, e->host, n, x->twod ? x->cols : 0, fname);
    e->n = n;
    e->dtype = x->dtype;
  }
  else
    luaL_typeerror(L, i, incoming ? "cuda.array, cuda.host_array, string or table"
                                  : "cuda.array or cuda.host_array");
}


/* {------ pitched copies */

/* one end of a 2-D copy: rows of `pitch` bytes at a host or device address */
typedef struct Side {
  void *host;
  CUdeviceptr dev;
  size_t pitch;
} Side;


static void set_side (CUDA_MEMCPY2D *m, const Side *sd, size_t rowoff, int dst) {
  CUmemorytype t = sd->host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (dst) {
    m->dstMemoryType = t;
    m->dstHost = sd->host ? (char *)sd->host + rowoff * sd->pitch : NULL;
    m->dstDevice = sd->host ? 0 : sd->dev + (CUdeviceptr)(rowoff * sd->pitch);
    m->dstPitch = sd->pitch;
  }
  else {
    m->srcMemoryType = t;
    m->srcHost = sd->host ? (const char *)sd->host + rowoff * sd->pitch : NULL;
    m->srcDevice = sd->host ? 0 : sd->dev + (CUdeviceptr)(rowoff * sd->pitch);
    m->srcPitch = sd->pitch;
  }
}


/* height rows of width bytes from src to dst, starting at row `row` of both */
static CUresult copy_rows (const culua_Driver *cu, const Side *dst, const Side *src, size_t row,
                           size_t width, size_t height, CUstream s) {
  CUDA_MEMCPY2D m;
  CUresult r;
  memset(&m, 0, sizeof(m));
  set_side(&m, src, row, 0);
  set_side(&m, dst, row, 1);
  m.WidthInBytes = width;
  m.Height = height;
  r = s ? cu->cuMemcpy2DAsync(&m, s) : cu->cuMemcpy2D(&m);
  /* within a device, cuMemcpy2D may refuse a pitch that cuMemAllocPitch did
  ** not pick (a packed end's); the unaligned copy takes any, but has no
  ** stream form: the stream's earlier work must finish first */
  if (r == CUDA_ERROR_INVALID_VALUE && dst->host == NULL && src->host == NULL) {
    r = s ? cu->cuStreamSynchronize(s) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = cu->cuMemcpy2DUnaligned(&m);
  }
  return r;
}


/*
** n elements in row-major order between x and e when either is pitched:
** the pitched one's rows set the width, the packed end is read as rows of
** that width, and a last partial row goes as a 2-D copy of height one.
*/
static void copy_pitched (lua_State *L, culua_Array *x, End *e, int incoming, size_t n,
                          CUstream s, const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  const culua_Array *o = e->array;
  size_t es = culua_dtype_size[x->dtype];
  size_t w = x->pitch ? x->cols : o->cols, full, rem;
  Side xs, es_;
  CUresult r;
  if (o != NULL && o->c.ctx != x->c.ctx)
    luaL_error(L, "%s: copies of a pitched array between devices %d and %d are not supported", fname,
               x->c.ordinal, o->c.ordinal);
  if (o != NULL && x->pitch && o->pitch && x->cols != o->cols)
    luaL_error(L, "%s: pitched arrays of %d and %d columns; copy between equal widths", fname,
               (int)x->cols, (int)o->cols);
  full = n / w;
  rem = n % w;
  xs.host = NULL;
  xs.dev = x->ptr;
  xs.pitch = x->pitch ? x->pitch : w * es;
  es_.host = o ? NULL : e->host;
  es_.dev = o ? o->ptr : 0;
  es_.pitch = o && o->pitch ? o->pitch : w * es;
  r = full ? copy_rows(cu, incoming ? &xs : &es_, incoming ? &es_ : &xs, 0, w * es, full, s)
           : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && rem)
    r = copy_rows(cu, incoming ? &xs : &es_, incoming ? &es_ : &xs, full, rem * es, 1, s);
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, fname, "copying %d elements (pitched rows of %d) %s device %d", (int)n, (int)w,
                 incoming ? "to" : "from", x->c.ordinal);
}


/*
** The first k elements of a, packed, into buf; raises nothing (for
** __tostring too). The context must be current.
*/
static CUresult read_first (const culua_Driver *cu, const culua_Array *a, void *buf, size_t k) {
  size_t es = culua_dtype_size[a->dtype];
  Side dev, host;
  CUresult r = CUDA_SUCCESS;
  if (k == 0) return CUDA_SUCCESS;
  if (!a->pitch) return cu->cuMemcpyDtoH(buf, a->ptr, k * es);
  dev.host = NULL;
  dev.dev = a->ptr;
  dev.pitch = a->pitch;
  host.host = buf;
  host.dev = 0;
  host.pitch = a->cols * es;
  if (k / a->cols) r = copy_rows(cu, &host, &dev, 0, a->cols * es, k / a->cols, NULL);
  if (r == CUDA_SUCCESS && k % a->cols)
    r = copy_rows(cu, &host, &dev, k / a->cols, (k % a->cols) * es, 1, NULL);
  return r;
}


void culua_array_read (lua_State *L, const culua_Array *a, void *buf, const char *fname) {
  host_ready(L, a, fname);
  culua_check(L, read_first(culua_cu(L, fname), a, buf, a->n), fname,
              "copying %d bytes from device %d", (int)nbytes(a), a->c.ordinal);
}

/* }------ */


/*
** Copies between two GPUs go over NVLink or PCIe directly only once peer
** access is enabled; without it the driver stages them through the host
** (38 GB/s for 1 GiB between two H200s joined by NVLink, measured). Enable
** it both ways on the first copy between a pair that can, and note it for
** launches (culua_State.peers). A pair that cannot still copies, staged.
*/
static void peer_access (lua_State *L, culua_Array *x, const culua_Array *y) {
  culua_State *S = culua_state(L);
  const culua_Driver *cu = culua_cu(L, "copy");
  int a = x->c.ordinal, b = y->c.ordinal, ok = 0;
  culua_Ctx yc = y->c;
  if (a >= 64 || b >= 64 || ((S->peers[a] >> b) & 1 && (S->peers[b] >> a) & 1)) return;
  if (cu->cuDeviceCanAccessPeer(&ok, x->c.dev, y->c.dev) != CUDA_SUCCESS || !ok) return;
  culua_enable_peer(L, a, yc.ctx, b);                  /* x's context is current: x reads y */
  culua_ctx_enter(L, &yc, CULUA_ARRAY);
  culua_enable_peer(L, b, x->c.ctx, a);
  culua_ctx_enter(L, &x->c, CULUA_ARRAY);
}


/*
** A copy between device memories without a stream returns before it is
** done (the driver does not wait for device-to-device copies; a 1 GiB
** peer copy "ran" at 118 TB/s by the host clock). culua promises that a
** copy without a stream is complete on return: wait for the default
** streams of both ends' contexts, which the copy ran on.
*/
static void device_copy_done (lua_State *L, culua_Array *x, const culua_Array *y, const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  if (y->c.ctx != x->c.ctx) {
    culua_Ctx yc = y->c;   /* entering only reads it */
    culua_ctx_enter(L, &yc, CULUA_ARRAY);
    culua_check(L, cu->cuStreamSynchronize(NULL), fname, "waiting for a copy on device %d", y->c.ordinal);
    culua_ctx_enter(L, &x->c, CULUA_ARRAY);
  }
  culua_check(L, cu->cuStreamSynchronize(NULL), fname, "waiting for a copy on device %d", x->c.ordinal);
}


/*
** copy n elements between x and the other end e, in the direction asked,
** on stream s (NULL: synchronously). The smaller side decides the count;
** the source never exceeds the destination (no silent truncation).
*/
static void do_copy (lua_State *L, culua_Array *x, End *e, int incoming, CUstream s,
                     const char *fname) {
  const culua_Driver *cu = culua_cu(L, fname);
  size_t n = incoming ? e->n : x->n, bytes;
  size_t room = incoming ? x->n : e->n;
  if (e->dtype != x->dtype)
    luaL_error(L, "%s: dtype mismatch (%s and %s); copies do not convert", fname,
               culua_dtype_names[x->dtype], culua_dtype_names[e->dtype]);
  if (n > room)
    luaL_error(L, "%s: %d elements do not fit in %d", fname, (int)n, (int)room);
  bytes = n * culua_dtype_size[x->dtype];
  if (bytes == 0) return;
  culua_ctx_enter(L, &x->c, CULUA_ARRAY);
  if (x->pitch || (e->array && e->array->pitch)) {
    copy_pitched(L, x, e, incoming, n, s, fname);
    if (e->array != NULL && s == NULL) device_copy_done(L, x, e->array, fname);
    return;
  }
  if (e->array != NULL) {   /* device to device, maybe across devices */
    CUdeviceptr dst = incoming ? x->ptr : e->dev, src = incoming ? e->dev : x->ptr;
    if (e->array->c.ctx == x->c.ctx)
      culua_check(L, s ? cu->cuMemcpyDtoDAsync(dst, src, bytes, s) : cu->cuMemcpyDtoD(dst, src, bytes),
                  fname, "copying %d bytes on device %d", (int)bytes, x->c.ordinal);
    else {
      CUcontext dctx = incoming ? x->c.ctx : e->array->c.ctx;
      CUcontext sctx = incoming ? e->array->c.ctx : x->c.ctx;
      peer_access(L, x, e->array);
      culua_check(L, s ? cu->cuMemcpyPeerAsync(dst, dctx, src, sctx, bytes, s)
                       : cu->cuMemcpyPeer(dst, dctx, src, sctx, bytes),
                  fname, "copying %d bytes between devices %d and %d", (int)bytes,
                  x->c.ordinal, e->array->c.ordinal);
    }
    if (s == NULL) device_copy_done(L, x, e->array, fname);
  }
  else if (incoming)
    culua_check(L, s ? cu->cuMemcpyHtoDAsync(x->ptr, e->host, bytes, s)
                     : cu->cuMemcpyHtoD(x->ptr, e->host, bytes),
                fname, "copying %d bytes to device %d", (int)bytes, x->c.ordinal);
  else
    culua_check(L, s ? cu->cuMemcpyDtoHAsync(e->host, x->ptr, bytes, s)
                     : cu->cuMemcpyDtoH(e->host, x->ptr, bytes),
                fname, "copying %d bytes from device %d", (int)bytes, x->c.ordinal);
}


/* x:copy_from(src [, stream]) -> x  and  x:copy_to(dst [, stream]) -> dst */
static int copy (lua_State *L, int incoming, const char *fname) {
  culua_Array *x = check_array(L, 1);
  CUstream s = culua_optstream(L, 3, fname);
  End e;
  other_end(L, 2, x, incoming, &e, fname);
  if (s == NULL) {   /* the copy is done on return: so is the device's work on managed ends */
    host_ready(L, x, fname);
    if (e.array != NULL) host_ready(L, e.array, fname);
  }
  do_copy(L, x, &e, incoming, s, fname);
  lua_settop(L, incoming ? 1 : 2);
  return 1;
}

static int array_copy_from (lua_State *L) { return copy(L, 1, "copy_from"); }
static int array_copy_to (lua_State *L) { return copy(L, 0, "copy_to"); }


/* x:totable() -> Lua table (rows of tables for 2-D) */
static int array_totable (lua_State *L) {
  culua_Array *x = check_array(L, 1);
  void *buf = lua_newuserdatauv(L, nbytes(x) + 1, 0);
  culua_array_read(L, x, buf, "totable");
  culua_elems_to_table(L, x->dtype, buf, x->twod, x->rows, x->cols);
  return 1;
}


/*
** x:astype(dtype [, {stream = s}]) -> a new array of x's shape in dtype,
** converted on the device by the catalog's cast kernels (lua/catalog/cast.lua),
** by the rules that h:astype follows on the host (doc/dtypes.md)
*/
static int array_astype (lua_State *L) {
  check_array(L, 1);
  culua_checkdtype(L, 2);
  lua_settop(L, 3);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "culua.catalog");
  lua_call(L, 1, 1);                  /* x, dtype, opts, catalog */
  lua_getfield(L, -1, "astype");
  lua_replace(L, -2);                 /* x, dtype, opts, astype */
  lua_insert(L, 1);
  lua_call(L, 3, 1);
  return 1;
}


/*
** x:sum(), x:min(), x:max(), x:mean(), x:norm(), x:dot(y), x:map(expr): the
** kernels-from-expressions module's methods (lua/elementwise.lua), called with
** this method's arguments
*/
static int lua_method (lua_State *L, const char *name) {
  int n = lua_gettop(L);
  check_array(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "culua.elementwise");
  lua_call(L, 1, 1);                  /* args, module */
  lua_getfield(L, -1, "methods");
  lua_getfield(L, -1, name);          /* args, module, methods, f */
  lua_replace(L, -3);
  lua_pop(L, 1);                      /* args, f */
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

#define LUA_METHOD(m) static int array_##m (lua_State *L) { return lua_method(L, #m); }
LUA_METHOD(sum)
LUA_METHOD(min)
LUA_METHOD(max)
LUA_METHOD(mean)
LUA_METHOD(norm)
LUA_METHOD(dot)
LUA_METHOD(map)


/* x:bytes() -> the raw contents as a Lua string */
static int array_bytes (lua_State *L) {
  culua_Array *x = check_array(L, 1);
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, nbytes(x));
  culua_array_read(L, x, p, "bytes");
  luaL_pushresultsize(&b, nbytes(x));
  return 1;
}


/* a pitched array's rows, padding untouched; 8-byte elements a row at a time */
static CUresult fill_pitched (const culua_Driver *cu, const culua_Array *x, const void *v,
                              CUstream s) {
  uint64_t u = 0;
  size_t i;
  CUresult r = CUDA_SUCCESS;
  memcpy(&u, v, culua_dtype_size[x->dtype]);
  switch (culua_dtype_size[x->dtype]) {
    case 1: return cu->cuMemsetD2D8Async(x->ptr, x->pitch, (unsigned char)u, x->cols, x->rows, s);
    case 2: return cu->cuMemsetD2D16Async(x->ptr, x->pitch, (unsigned short)u, x->cols, x->rows, s);
    case 4: return cu->cuMemsetD2D32Async(x->ptr, x->pitch, (unsigned)u, x->cols, x->rows, s);
    default:
      for (i = 0; i < x->rows && r == CUDA_SUCCESS; i++) {
        CUdeviceptr row = x->ptr + (CUdeviceptr)(i * x->pitch);
        r = cu->cuMemsetD2D32Async(row, 8, (unsigned)(u & 0xffffffffu), 1, x->cols, s);
        if (r == CUDA_SUCCESS)
          r = cu->cuMemsetD2D32Async(row + 4, 8, (unsigned)(u >> 32), 1, x->cols, s);
      }
      return r;
  }
}


/*
** x:fill(v [, stream]) -> x. memset by element width; 8-byte patterns go as
** two 4-byte columns of a 2-D memset (pitch 8), as there is no cuMemsetD64.
*/
static int array_fill (lua_State *L) {
  culua_Array *x = check_array(L, 1);
  CUstream s = culua_optstream(L, 3, "fill");
  const culua_Driver *cu = culua_cu(L, "fill");
  union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f; double d; } v;
  CUresult r;
  luaL_checkany(L, 2);
  culua_toelem(L, 2, x->dtype, &v, "fill");
  if (x->n == 0) {   /* nothing to fill, and no memory to give the driver */
    lua_settop(L, 1);
    return 1;
  }
  if (x->pitch) r = fill_pitched(cu, x, &v, s);
  else switch (culua_dtype_size[x->dtype]) {
    case 1: r = cu->cuMemsetD8Async(x->ptr, v.u8, x->n, s); break;
    case 2: r = cu->cuMemsetD16Async(x->ptr, v.u16, x->n, s); break;
    case 4: r = cu->cuMemsetD32Async(x->ptr, v.u32, x->n, s); break;
    default:
      r = cu->cuMemsetD2D32Async(x->ptr, 8, (unsigned)(v.u64 & 0xffffffffu), 1, x->n, s);
      if (r == CUDA_SUCCESS)
        r = cu->cuMemsetD2D32Async(x->ptr + 4, 8, (unsigned)(v.u64 >> 32), 1, x->n, s);
      break;
  }
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, "fill", "filling %d elements on device %d", (int)x->n, x->c.ordinal);
  if (s == NULL)   /* like copies without a stream: done when it returns */
    culua_check(L, cu->cuStreamSynchronize(NULL), "fill", "on device %d", x->c.ordinal);
  lua_settop(L, 1);
  return 1;
}

/* }====================================================== */


/* {====================================================== managed memory */

static void check_managed (lua_State *L, const culua_Array *x, const char *fname) {
  if (!x->managed)
    luaL_error(L, "%s: the array is device memory, not managed (make it with cuda.array(dtype, n, "
               "{managed = true}))", fname);
}


/*
** A place for managed pages at index i: "host", or a device (a cuda.device
** or an ordinal) that can take them, which is one with concurrent managed
** access (the driver refuses the others with a bare CUDA_ERROR_INVALID_DEVICE).
*/
static CUmemLocation checklocation (lua_State *L, int i, const char *fname) {
  CUmemLocation loc;
  lua_Integer ord = -1;
  CUdevice dev;
  memset(&loc, 0, sizeof(loc));
  if (lua_type(L, i) == LUA_TSTRING && strcmp(lua_tostring(L, i), "host") == 0) {
    loc.type = CU_MEM_LOCATION_TYPE_HOST;   /* id ignored */
    return loc;
  }
  if (lua_isinteger(L, i)) ord = lua_tointeger(L, i);
  else if (luaL_testudata(L, i, CULUA_DEVICE) && lua_getfield(L, i, "ordinal") == LUA_TNUMBER) {
    ord = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  else
    luaL_argerror(L, i, lua_pushfstring(L, "a cuda.device, a device ordinal or \"host\" expected, got %s",
                                        lua_type(L, i) == LUA_TSTRING
                                          ? lua_pushfstring(L, "'%s'", lua_tostring(L, i))
                                          : luaL_typename(L, i)));
  if (ord < INT_MIN || ord > INT_MAX) luaL_error(L, "%s: no CUDA device %I", fname, ord);
  dev = culua_ctx_device(L, (int)ord, fname);   /* raises for one not present */
  culua_need(L, dev, (int)ord, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, fname,
             "cannot take managed memory by prefetch or advice");
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = (int)ord;
  return loc;
}


static const char *where (lua_State *L, CUmemLocation loc) {
  return loc.type == CU_MEM_LOCATION_TYPE_HOST ? "the host" : lua_pushfstring(L, "device %d", loc.id);
}


/*
** x:prefetch(where [, {stream = s}]) -> x: move a managed array's pages to
** device `where` (a cuda.device or an ordinal) or to "host" before they are
** used there, so that a kernel (or the host) finds them in place instead of
** faulting them over a page at a time. Enqueued on s (default: the default
** stream of x's device) and returning at once, like a launch: a kernel
** after it on the same stream finds the pages moved.
*/
static int array_prefetch (lua_State *L) {
  culua_Array *x = check_array(L, 1);
  const culua_Driver *cu = culua_cu(L, "prefetch");
  culua_Ctx from = x->c;   /* the context that issues it: the stream's, else x's */
  CUstream s = NULL;
  CUmemLocation loc;
  char buf[32];
  check_managed(L, x, "prefetch");
  loc = checklocation(L, 2, "prefetch");
  if (!lua_isnoneornil(L, 3)) {
    static const char *const known[] = {"stream", NULL};
    culua_Stream *st;
    luaL_checktype(L, 3, LUA_TTABLE);
    culua_checkoptions(L, 3, "prefetch", known);
    if (lua_getfield(L, 3, "stream") != LUA_TNIL) {
      if ((st = (culua_Stream *)luaL_testudata(L, -1, CULUA_STREAM)) == NULL)
        luaL_error(L, "prefetch: stream must be a cuda.stream, got %s", luaL_typename(L, -1));
      s = culua_optstream(L, -1, "prefetch");   /* refuses a closed or reset one */
      from = st->c;
    }
    lua_pop(L, 1);
  }
  culua_need(L, from.dev, from.ordinal, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "prefetch",
             "cannot prefetch managed memory on its streams");
  if (cu->cuMemPrefetchAsync == NULL)
    luaL_error(L, "prefetch: the driver has no cuMemPrefetchAsync that takes a CUmemLocation "
               "(CUDA 12.2 or newer)");
  if (x->n > 0) {
    culua_ctx_enter(L, &from, CULUA_ARRAY);
    culua_check(L, cu->cuMemPrefetchAsync(x->ptr, nbytes(x), loc, 0, s), "prefetch",
                "prefetching %s of managed memory to %s", culua_bytes(buf, (double)nbytes(x)), where(L, loc));
  }
  lua_settop(L, 1);
  return 1;
}


/* the advice x:advise takes, with CUDA's code, and whether it names a place */
static const struct Advice {
  const char *name;
  CUmem_advise code;
  int place;   /* 1: give a place; 0: CUDA applies it to every processor (give none) */
} advices[] = {
  {"read_mostly", CU_MEM_ADVISE_SET_READ_MOSTLY, 0},
  {"unset_read_mostly", CU_MEM_ADVISE_UNSET_READ_MOSTLY, 0},
  {"preferred_location", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 1},
  {"unset_preferred_location", CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0},
  {"accessed_by", CU_MEM_ADVISE_SET_ACCESSED_BY, 1},
  {"unset_accessed_by", CU_MEM_ADVISE_UNSET_ACCESSED_BY, 1},
  {NULL, CU_MEM_ADVISE_SET_READ_MOSTLY, 0}
};


/*
** x:advise(advice [, where]) -> x: tell the driver how a managed array will
** be used (cuMemAdvise over its range). "read_mostly": each processor that
** reads it keeps a copy; "preferred_location", where: its pages live there
** and others map them rather than fault them over; "accessed_by", where:
** that processor keeps a mapping wherever the pages go. Each has its
** "unset_" form. where is "host" or a device.
*/
static int array_advise (lua_State *L) {
  culua_Array *x = check_array(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const culua_Driver *cu = culua_cu(L, "advise");
  const struct Advice *a;
  CUmemLocation loc;
  check_managed(L, x, "advise");
  for (a = advices; a->name != NULL && strcmp(a->name, name) != 0; a++) ;
  if (a->name == NULL)
    luaL_error(L, "advise: unknown advice '%s' (known: read_mostly, preferred_location, accessed_by, "
               "and each with unset_ before it)", name);
  if (a->place) {
    if (lua_isnoneornil(L, 3))
      luaL_error(L, "advise: '%s' needs a place: a cuda.device, a device ordinal or \"host\"", name);
    loc = checklocation(L, 3, "advise");
  }
  else {
    if (!lua_isnoneornil(L, 3))
      luaL_error(L, "advise: '%s' takes no place (CUDA applies it for every processor)", name);
    memset(&loc, 0, sizeof(loc));
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;   /* ignored, but a valid one */
    loc.id = x->c.ordinal;
  }
  if (cu->cuMemAdvise == NULL)
    luaL_error(L, "advise: the driver has no cuMemAdvise that takes a CUmemLocation (CUDA 12.2 or newer)");
  if (x->n > 0)
    culua_check(L, cu->cuMemAdvise(x->ptr, nbytes(x), a->code, loc), "advise",
                "advising '%s'%s%s over %d bytes of managed memory", name, a->place ? " for " : "",
                a->place ? where(L, loc) : "", (int)nbytes(x));
  lua_settop(L, 1);
  return 1;
}


/* a processor as cuMemRangeGetAttribute gives it: an ordinal, "host", or nil for none */
static void push_processor (lua_State *L, int d) {
  if (d == (int)CU_DEVICE_CPU) lua_pushliteral(L, "host");
  else if (d < 0) lua_pushnil(L);   /* CU_DEVICE_INVALID: none, or not the same for every page */
  else lua_pushinteger(L, d);
}


/*
** The place that a pair of typed range attributes (CUDA 12.2: a location
** type and an id) gives, as push_processor does; a host NUMA node is the
** host. A driver without them (no CUmemLocation advice either) answers
** the one older attribute, whose CU_DEVICE_CPU cannot say a NUMA node.
*/
static void push_place (lua_State *L, const culua_Driver *cu, const culua_Array *x, CUmem_range_attribute typed,
                        CUmem_range_attribute id, CUmem_range_attribute old) {
  int t = 0, v = 0;
  CUresult r = CUDA_SUCCESS;
  if (cu->cuMemAdvise == NULL) {
    r = cu->cuMemRangeGetAttribute(&v, sizeof(v), old, x->ptr, nbytes(x));
    if (r == CUDA_SUCCESS) push_processor(L, v);
  }
  else {
    r = cu->cuMemRangeGetAttribute(&t, sizeof(t), typed, x->ptr, nbytes(x));
    if (r == CUDA_SUCCESS) r = cu->cuMemRangeGetAttribute(&v, sizeof(v), id, x->ptr, nbytes(x));
    if (r == CUDA_SUCCESS) {
      if (t == CU_MEM_LOCATION_TYPE_DEVICE) lua_pushinteger(L, v);
      else if (t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
               t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) lua_pushliteral(L, "host");
      else lua_pushnil(L);   /* none, or not the same for every page */
    }
  }
  if (r != CUDA_SUCCESS)
    culua_cufail(L, r, "range_attributes", "reading attribute %d of %d bytes", (int)typed, (int)nbytes(x));
}


/*
** x:range_attributes() -> {read_mostly = b, preferred_location = p,
** accessed_by = {p, ...}, last_prefetch = p}, the driver's account of a
** managed array's range (a p is an ordinal or "host"; nil where none is
** set, or the pages differ): what prefetch and advise did.
*/
static int array_range_attributes (lua_State *L) {
  culua_Array *x = check_array(L, 1);
  const culua_Driver *cu = culua_cu(L, "range_attributes");
  int v = 0, by[CULUA_MAXDEVICES + 1], i, k = 0;
  check_managed(L, x, "range_attributes");
  lua_createtable(L, 0, 4);
  lua_newtable(L);
  if (x->n == 0) {   /* no pages: no advice, no prefetch */
    lua_setfield(L, -2, "accessed_by");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "read_mostly");
    return 1;
  }
  culua_check(L, cu->cuMemRangeGetAttribute(by, sizeof(by), CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, x->ptr, nbytes(x)),
              "range_attributes", "reading who accesses %d bytes", (int)nbytes(x));
  for (i = 0; i < CULUA_MAXDEVICES + 1; i++)
    if (by[i] != (int)CU_DEVICE_INVALID) {
      push_processor(L, by[i]);
      lua_rawseti(L, -2, ++k);
    }
  lua_setfield(L, -2, "accessed_by");
  culua_check(L, cu->cuMemRangeGetAttribute(&v, sizeof(v), CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, x->ptr, nbytes(x)),
              "range_attributes", "reading read-mostly of %d bytes", (int)nbytes(x));
  lua_pushboolean(L, v);
  lua_setfield(L, -2, "read_mostly");
  push_place(L, cu, x, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID,
             CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION);
  lua_setfield(L, -2, "preferred_location");
  push_place(L, cu, x, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
             CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION);
  lua_setfield(L, -2, "last_prefetch");
  return 1;
}


/* the host address of element i (1-based, at index k) of x, which must be
** managed; host_ready before touching it */
static char *host_elem (lua_State *L, const culua_Array *x, int k) {
  lua_Integer i = luaL_checkinteger(L, k);
  if (!x->managed)
    luaL_error(L, "cuda.array: x[i] reaches managed arrays only; this one is device memory (read it with "
               "x:totable() or x:copy_to(h), or make it with {managed = true})");
  if (i < 1 || (size_t)i > x->n)
    luaL_error(L, "cuda.array: index %I outside 1..%I", i, (lua_Integer)x->n);
  return (char *)(uintptr_t)x->ptr + (size_t)(i - 1) * culua_dtype_size[x->dtype];
}

/* }====================================================== */


/* {====================================================== tensor maps */

/* the TMA element type that moves `d` unchanged (signedness does not matter to a copy) */
static CUtensorMapDataType tma_type (culua_Dtype d) {
  switch (d) {
    case CULUA_INT8: case CULUA_UINT8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case CULUA_INT16: case CULUA_UINT16: return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case CULUA_INT32: return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case CULUA_UINT32: return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case CULUA_INT64: return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case CULUA_UINT64: return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case CULUA_FLOAT32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case CULUA_FLOAT16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case CULUA_BFLOAT16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case CULUA_FLOAT8_E4M3: case CULUA_FLOAT8_E5M2: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    default: return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
  }
}


/*
** The region a tensor map describes, from the optional table at index t,
** {rows = r, cols = c, stride = bytes}: a rows x cols matrix whose rows are
** stride bytes apart, from x's first element, so that a block of a larger
** matrix (or a 1-D view of one) can be a map of its own. Without it, the 2-D
** array itself. The region must lie within x.
*/
static void map_region (lua_State *L, int t, const culua_Array *x, size_t *rows, size_t *cols,
                        size_t *stride) {
  static const char *const known[] = {"rows", "cols", "stride", NULL};
  static const char *const keys[] = {"rows", "cols", "stride"};
  size_t es = culua_dtype_size[x->dtype], *out[3];
  int i;
  if (lua_isnoneornil(L, t)) {
    luaL_argcheck(L, x->twod && x->rows > 0, 1, "a 2-D cuda.array expected (or give {rows =, cols =, stride =})");
    *rows = x->rows;
    *cols = x->cols;
    *stride = x->pitch ? x->pitch : x->cols * es;
    return;
  }
  luaL_checktype(L, t, LUA_TTABLE);
  culua_checkoptions(L, t, "tensor_map", known);
  out[0] = rows; out[1] = cols; out[2] = stride;
  for (i = 0; i < 3; i++) {
    lua_Integer v;
    int whole;
    lua_getfield(L, t, keys[i]);
    culua_checkfield(L, "tensor_map", keys[i], LUA_TNUMBER);
    v = lua_tointegerx(L, -1, &whole);
    if (!whole || v < 1 || v > ((lua_Integer)1 << 32))   /* 2.5 is no size: quoted as given */
      luaL_error(L, "tensor_map: %s must be an integer 1..2^32, got %s", keys[i], luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
    *out[i] = (size_t)v;
  }
  if (*stride < *cols * es)
    luaL_error(L, "tensor_map: a stride of %I bytes is less than a row of %I (%I %s)", (lua_Integer)*stride,
               (lua_Integer)(*cols * es), (lua_Integer)*cols, culua_dtype_names[x->dtype]);
  if (*cols * es > held_bytes(x) || *rows - 1 > (held_bytes(x) - *cols * es) / *stride)   /* no overflow */
    luaL_error(L, "tensor_map: %Ix%I %s with rows %I bytes apart runs past the array's %I bytes",
               (lua_Integer)*rows, (lua_Integer)*cols, culua_dtype_names[x->dtype], (lua_Integer)*stride,
               (lua_Integer)held_bytes(x));
}


/*
** x:tensor_map(box_rows, box_cols [, swizzle [, region]]) -> a 128-byte
** string: the CUtensorMap that lets a kernel copy box_rows x box_cols tiles
** of the 2-D array x into shared memory with the Tensor Memory Accelerator
** (sm_90+). Pass it as a `const __grid_constant__ CUtensorMap` argument.
** swizzle is 0 (none), 32, 64 or 128 bytes; reads outside the matrix fill
** with zeros. region, {rows =, cols =, stride = bytes}, maps a matrix of
** its own within x (1-D or 2-D) instead: a block of a larger one.
*/
static int array_tensor_map (lua_State *L) {
  static const struct { int bytes; CUtensorMapSwizzle s; } swz[] = {
    {0, CU_TENSOR_MAP_SWIZZLE_NONE}, {32, CU_TENSOR_MAP_SWIZZLE_32B},
    {64, CU_TENSOR_MAP_SWIZZLE_64B}, {128, CU_TENSOR_MAP_SWIZZLE_128B}
  };
  culua_Array *x = check_array(L, 1);
  lua_Integer br = luaL_checkinteger(L, 2), bc = luaL_checkinteger(L, 3);
  lua_Integer sw = luaL_optinteger(L, 4, 0);
  const culua_Driver *cu = culua_cu(L, "tensor_map");
  size_t es = culua_dtype_size[x->dtype];
  size_t rows, cols, stride;   /* stride: bytes from row to row */
  CUtensorMap map;
  cuuint64_t dims[2], strides[1];
  cuuint32_t box[2], estr[2] = {1, 1};
  int i;
  map_region(L, 5, x, &rows, &cols, &stride);
  luaL_argcheck(L, br >= 1 && br <= 256, 2, "box rows must be 1..256");
  luaL_argcheck(L, bc >= 1 && bc <= 256 && (bc * (lua_Integer)es) % 16 == 0, 3,
                "box columns must be 1..256 and a multiple of 16 bytes");
  for (i = 0; i < 4 && swz[i].bytes != sw; i++) ;
  luaL_argcheck(L, i < 4, 4, "swizzle must be 0, 32, 64 or 128 (bytes)");
  luaL_argcheck(L, sw == 0 || bc * (lua_Integer)es <= sw, 3, "a swizzled box row must fit the swizzle span");
  if (x->ptr % 16 != 0 || stride % 16 != 0)
    return luaL_error(L, "tensor_map: the array's base and rows must be 16-byte aligned (rows of %d bytes at 0x%p)",
                      (int)stride, (void *)(uintptr_t)x->ptr);
  if (cu->cuTensorMapEncodeTiled == NULL)
    return luaL_error(L, "tensor_map: this driver has no cuTensorMapEncodeTiled (CUDA 12 or newer needed)");
  dims[0] = cols; dims[1] = rows;
  strides[0] = stride;
  box[0] = (cuuint32_t)bc; box[1] = (cuuint32_t)br;
  culua_check(L, cu->cuTensorMapEncodeTiled(&map, tma_type(x->dtype), 2, (void *)(uintptr_t)x->ptr, dims, strides,
                                            box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, swz[i].s,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              "tensor_map", "encoding %dx%d boxes of a %dx%d %s array (rows %d bytes apart)", (int)br, (int)bc,
              (int)rows, (int)cols, culua_dtype_names[x->dtype], (int)stride);
  lua_pushlstring(L, (const char *)&map, sizeof(map));
  return 1;
}

/* }====================================================== */


/* {====================================================== metamethods */

/*
** The fields below are the array's own record: reading them needs no
** context, so they check only that the array is open and not reset (a
** cuCtxSetCurrent a field would be most of a small catalog call's checks).
*/
static culua_Array *check_record (lua_State *L, int i) {
  culua_Array *a = culua_testarray(L, i, 0);
  if (a == NULL) luaL_typeerror(L, i, CULUA_ARRAY);
  return a;
}


static int array_index (lua_State *L) {
  culua_Array *x;
  const char *k;
  if (lua_type(L, 2) == LUA_TNUMBER) {   /* x[i]: a managed array's element, from the host */
    char *p;
    x = check_record(L, 1);
    p = host_elem(L, x, 2);
    host_ready(L, x, "cuda.array");
    culua_pushelem(L, x->dtype, p);
    return 1;
  }
  k = lua_tostring(L, 2);
  if (culua_pushmethod(L, CULUA_ARRAY, 2) && !lua_isnil(L, -1)) return 1;  /* close works when closed */
  x = check_record(L, 1);
  if (k == NULL) return culua_pushmethod(L, CULUA_ARRAY, 2);
  if (strcmp(k, "dtype") == 0) lua_pushstring(L, culua_dtype_names[x->dtype]);
  else if (strcmp(k, "shape") == 0) culua_pushshape(L, x->twod, x->rows, x->cols);
  else if (strcmp(k, "nbytes") == 0) lua_pushinteger(L, (lua_Integer)nbytes(x));
  else if (strcmp(k, "size") == 0) lua_pushinteger(L, (lua_Integer)x->n);
  else if (strcmp(k, "ptr") == 0) lua_pushinteger(L, (lua_Integer)x->ptr);
  else if (strcmp(k, "pitch") == 0) {   /* row to row in bytes; nil for 1-D */
    if (!x->twod) lua_pushnil(L);
    else lua_pushinteger(L, (lua_Integer)(x->pitch ? x->pitch : x->cols * culua_dtype_size[x->dtype]));
  }
  else if (strcmp(k, "pitched") == 0) lua_pushboolean(L, x->pitch != 0);
  else if (strcmp(k, "managed") == 0) lua_pushboolean(L, x->managed);
  else if (strcmp(k, "memory") == 0) lua_pushstring(L, x->managed ? "managed" : "device");
  else if (strcmp(k, "device") == 0) culua_pushdevice(L, x->c.ordinal, "cuda.array");
  else return culua_pushmethod(L, CULUA_ARRAY, 2);
  return 1;
}


/* x[i] = v: a managed array's element, from the host; arrays have no other fields to set */
static int array_newindex (lua_State *L) {
  culua_Array *x = check_record(L, 1);
  union { uint64_t u; double d; } v;   /* culua_toelem may store a double: aligned */
  char *p;
  if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "cuda.array: cannot set field '%s' (only a managed array's elements can be set)",
                      luaL_tolstring(L, 2, NULL));
  p = host_elem(L, x, 2);
  culua_toelem(L, 3, x->dtype, &v, "cuda.array");   /* a bad value raises before the wait */
  host_ready(L, x, "cuda.array");
  memcpy(p, &v, culua_dtype_size[x->dtype]);
  return 0;
}


static int array_len (lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_record(L, 1)->n);
  return 1;
}


/* shows dtype, shape and the first few values; never raises on a bad device */
static int array_tostring (lua_State *L) {
  culua_Array *x = (culua_Array *)luaL_checkudata(L, 1, CULUA_ARRAY);
  char buf[PREVIEW * 8];
  size_t k = x->n < PREVIEW ? x->n : PREVIEW;
  const culua_Driver *cu = culua_load_driver(NULL);
  CUresult r;
  if (!culua_array_isopen(x)) {
    lua_pushliteral(L, "cuda.array (closed)");
    return 1;
  }
  if (culua_ctx_stale(&x->c)) {
    lua_pushliteral(L, "cuda.array (invalidated by cuda.reset)");
    return 1;
  }
  r = culua_ctx_current(cu, x->c.ctx);
  if (r == CUDA_SUCCESS && x->managed && x->host_sync) r = cu->cuCtxSynchronize();   /* as host_ready */
  if (r == CUDA_SUCCESS) r = read_first(cu, x, buf, k);
  if (r != CUDA_SUCCESS) {
    lua_pushfstring(L, "cuda.array(%s, %I%s) (unreadable: %s)", culua_dtype_names[x->dtype],
                    (lua_Integer)x->n, x->managed ? ", managed" : "", culua_cuname(r));
    return 1;
  }
  culua_push_preview(L, CULUA_ARRAY, x->managed ? "managed" : NULL, x->dtype, x->twod, x->rows, x->cols,
                     buf, k, x->n);
  return 1;
}


static const luaL_Reg array_meta[] = {
  {"__index", array_index},
  {"__newindex", array_newindex},
  {"__len", array_len},
  {"__tostring", array_tostring},
  {"__gc", array_close},
  {"__close", array_close},
  {NULL, NULL}
};

static const luaL_Reg array_methods[] = {
  {"copy_from", array_copy_from},
  {"copy_to", array_copy_to},
  {"fill", array_fill},
  {"view", array_view},
  {"totable", array_totable},
  {"bytes", array_bytes},
  {"astype", array_astype},
  {"sum", array_sum},
  {"min", array_min},
  {"max", array_max},
  {"mean", array_mean},
  {"norm", array_norm},
  {"dot", array_dot},
  {"map", array_map},
  {"tensor_map", array_tensor_map},
  {"prefetch", array_prefetch},
  {"advise", array_advise},
  {"range_attributes", array_range_attributes},
  {"close", array_close},
  {NULL, NULL}
};


/*
** cuda.memory_in_use([kind]) -> bytes held by this state's live arrays: of
** one kind ("device", "managed" or "mapped": mapped host arrays), or of all
** three (a file's leak check counts them all)
*/
static int cuda_memory_in_use (lua_State *L) {
  static const char *const kinds[] = {"all", "device", "managed", "mapped", NULL};
  culua_State *S = culua_state(L);
  size_t by[4];
  by[1] = S->device_bytes;
  by[2] = S->managed_bytes;
  by[3] = S->mapped_bytes;
  by[0] = by[1] + by[2] + by[3];
  lua_pushinteger(L, (lua_Integer)by[luaL_checkoption(L, 1, "all", kinds)]);
  return 1;
}


static const luaL_Reg funcs[] = {
  {"array", cuda_array},
  {"memory_in_use", cuda_memory_in_use},
  {NULL, NULL}
};

/* }====================================================== */


void culua_open_array (lua_State *L) {
  culua_newmeta(L, CULUA_ARRAY, array_meta, array_methods);
  luaL_setfuncs(L, funcs, 0);
}
