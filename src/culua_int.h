/*
** culua_int.h
** What the C files of src/ share, in the order of their layers (each calls
** only the layers below it; t/034-layers.t checks):
**   loader.c, embed.c       the driver and NVRTC by dlopen; the files built in
**   auxlib.c context.c      the helpers: state, errors, options, tracking,
**   dtype.c objects.c       metatables, contexts, dtypes, the shared objects
**   device.c ... mpi.c      the bindings, one a Lua type
**   catalog.c reference.c   the catalog's C half and its CPU references
**   cuda.c                  the module and the list of openers
** Not installed.
*/

#ifndef culua_int_h
#define culua_int_h

#include <stddef.h>
#include <stdint.h>

#include <lua.h>
#include <lauxlib.h>

/*
** Argument errors in culua's voice (auxlib.c says the rule): "cuda.array:
** bad argument #2 (number expected, got string)" where lauxlib would say
** "bad argument #2 to 'array' (...)". The same checks as lauxlib's; only the
** message differs. luaL_argcheck and luaL_argexpected, macros over
** luaL_argerror and luaL_typeerror, follow.
*/
int culua_argerror (lua_State *L, int arg, const char *extramsg);
int culua_typeerror (lua_State *L, int arg, const char *tname);
void culua_checktype (lua_State *L, int arg, int t);
void culua_checkany (lua_State *L, int arg);
const char *culua_checklstring (lua_State *L, int arg, size_t *len);
const char *culua_optlstring (lua_State *L, int arg, const char *def, size_t *len);
lua_Number culua_checknumber (lua_State *L, int arg);
lua_Number culua_optnumber (lua_State *L, int arg, lua_Number def);
lua_Integer culua_checkinteger (lua_State *L, int arg);
lua_Integer culua_optinteger (lua_State *L, int arg, lua_Integer def);
void *culua_checkudata (lua_State *L, int arg, const char *tname);
int culua_checkoption (lua_State *L, int arg, const char *def, const char *const lst[]);

#define luaL_argerror       culua_argerror
#define luaL_typeerror      culua_typeerror
#define luaL_checktype      culua_checktype
#define luaL_checkany       culua_checkany
#define luaL_checklstring   culua_checklstring
#define luaL_optlstring     culua_optlstring
#define luaL_checknumber    culua_checknumber
#define luaL_optnumber      culua_optnumber
#define luaL_checkinteger   culua_checkinteger
#define luaL_optinteger     culua_optinteger
#define luaL_checkudata     culua_checkudata
#define luaL_checkoption    culua_checkoption

#include "loader.h"
#include "culua.h"

/* registry names of the metatables, one per Lua type */
#define CULUA_DEVICE     "cuda.device"
#define CULUA_ARRAY      "cuda.array"
#define CULUA_HOSTARRAY  "cuda.host_array"
#define CULUA_STREAM     "cuda.stream"
#define CULUA_EVENT      "cuda.event"
#define CULUA_MODULE     "cuda.module"
#define CULUA_KERNEL     "cuda.kernel"
#define CULUA_PROGRAM    "cuda.program"
#define CULUA_GRAPH      "cuda.graph"
#define CULUA_TEXTURE    "cuda.texture"
#define CULUA_SCALAR     "cuda.scalar"
#define CULUA_NCCLCOMM   "cuda.nccl.comm"

#define CULUA_MAXDEVICES 64

#if defined(__GNUC__)
#define culua_noret void __attribute__((noreturn))
#define culua_printf(f, a) __attribute__((format(printf, f, a)))
#else
#define culua_noret void
#define culua_printf(f, a)
#endif


/* {====================================================== embedded files (embed.c) */

typedef struct culua_Blob {
  const char *name;                   /* "<kind>.<name>": "fatbin.sort", "lua.culua.tap" */
  const unsigned char *data, *end;    /* end - data bytes, followed by a NUL */
} culua_Blob;

#define culua_blob_size(b) ((size_t)((b)->end - (b)->data))

/* the embedded file "<kind>.<name>", or NULL */
const culua_Blob *culua_blob (const char *kind, const char *name);
/* the next file of kind after prev (NULL: the first), with its name's part
** after "<kind>." in *name; NULL past the last */
const culua_Blob *culua_blob_next (const char *kind, const culua_Blob *prev, const char **name);

/* }====================================================== */


/* {====================================================== per-state data */

/* one remembered launch, for naming the culprit of a sticky kernel fault */
typedef struct culua_Launch {
  CUstream stream;
  int line;            /* Lua line of the k:launch call */
  unsigned long kernel_id;   /* the kernel's culua_State.kernels_made: kernel holds its name */
  char kernel[256];
  char source[LUA_IDSIZE];   /* its chunk's short name */
} culua_Launch;

#define CULUA_JOURNAL 16

typedef struct culua_State {
  CUcontext host_ctx;      /* a host's own context (culua_set_context), or NULL */
  int device;              /* ordinal that new objects use by default */
  int debug;               /* synchronize after every launch */
  long objects;            /* CUDA objects made so far in this state */
  unsigned journal_next;   /* launches recorded so far */
  culua_Launch journal[CULUA_JOURNAL];
  size_t device_bytes;     /* held by this state's live device arrays (cuMemAlloc) */
  size_t managed_bytes;    /* ... managed arrays (cuMemAllocManaged) */
  size_t mapped_bytes;     /* ... mapped host arrays (cuMemHostAlloc, DEVICEMAP) */
  unsigned long long peers[CULUA_MAXDEVICES];   /* bit j of peers[i]: kernels on i may read j's memory */
  int nvtx_depth;          /* NVTX ranges this state has open */
  unsigned long kernels_made;   /* cuda.kernel objects made: each one's id */
  /*
  ** What a launch compares by address rather than by name (kernel.c fills
  ** them): the config keys, interned strings that the registry keeps, and
  ** the metatables of the objects a kernel argument (or the stream) may be.
  */
  const void *launch_keys[7];
  const void *launch_meta[5];
} culua_State;

culua_State *culua_state (lua_State *L);

/* }====================================================== */


/* {====================================================== driver access */

/* the driver table, or a raised "fname: no CUDA driver: ..." */
const culua_Driver *culua_cu (lua_State *L, const char *fname);
/* the NVRTC table, or a raised "fname: NVRTC not available: ..." */
const culua_Nvrtc *culua_rtc (lua_State *L, const char *fname);

/* "CUDA_ERROR_X" for a result code */
const char *culua_cuname (CUresult r);

/*
** Raise "fname: CUDA_ERROR_X <what>", where <what> is formatted from fmt.
** For a sticky kernel fault, the recent launches are named as well.
*/
culua_noret culua_cufail (lua_State *L, CUresult r, const char *fname,
                          const char *fmt, ...) culua_printf(4, 5);

#define culua_check(L, call, fname, ...) \
  do { CUresult r_ = (call); \
       if (r_ != CUDA_SUCCESS) culua_cufail(L, r_, fname, __VA_ARGS__); \
  } while (0)

/* for query(): push true (done) or false (CUDA_ERROR_NOT_READY); raise otherwise */
int culua_pushready (lua_State *L, CUresult r, const char *fname, const char *what, int ordinal);

/* "1.00 GiB" and the like, into buf (at least 32 bytes) */
const char *culua_bytes (char *buf, double n);

/* }====================================================== */


/* {====================================================== contexts */

/*
** Every object that holds a CUDA resource starts with one of these: it keeps
** the device's primary context retained (or the host's context) until the
** object is closed. ctx == NULL means closed.
*/
typedef struct culua_Ctx {
  CUcontext ctx;
  CUdevice dev;
  int ordinal;
  unsigned gen;        /* device generation when made; cuda.reset bumps it */
  int retained;        /* we hold a primary-context reference */
} culua_Ctx;

/* the CUdevice of an ordinal (the driver initialised), raising on a bad one */
CUdevice culua_ctx_device (lua_State *L, int ordinal, const char *fname);
/* cuda.reset() destroyed device ordinal's context: what was made on it is stale */
void culua_ctx_bump (int ordinal);
/* retain the context of device `ordinal` (-1: the state's default) into c */
void culua_ctx_open (lua_State *L, culua_Ctx *c, int ordinal, const char *fname);
/* drop the reference; harmless on a closed c */
void culua_ctx_close (culua_Ctx *c);
/* make c's context current; raises on a closed or reset object */
void culua_ctx_enter (lua_State *L, culua_Ctx *c, const char *tname);
/* make ctx current on this thread, with no driver call beyond a read where it is */
CUresult culua_ctx_current (const culua_Driver *cu, CUcontext ctx);
/* 1 when cuda.reset() destroyed what c's object held */
int culua_ctx_stale (const culua_Ctx *c);
/*
** For finalisers: 1 when c is open and what it holds still exists, with its
** context made current; then free the resource, then culua_ctx_close.
** After cuda.reset() the resource is gone, and freeing it could hit a new
** one at the same address.
*/
int culua_ctx_live (culua_Ctx *c);

/*
** Let kernels on device `from` (its context current) read the memory of
** context `to` (device toord), and note it in culua_State.peers; an access
** already enabled is success. Returns the driver's result.
*/
CUresult culua_enable_peer (lua_State *L, int from, CUcontext to, int toord);

/*
** A device attribute that a feature needs: its value, or, where it is 0,
** "fname: device N <cannot>: its CU_DEVICE_ATTRIBUTE_X is 0" raised, so that a
** missing feature is named, not left to the driver's INVALID_VALUE later.
** culua_need stringifies the attribute's name.
*/
int culua_need_attr (lua_State *L, CUdevice dev, int ordinal, CUdevice_attribute attr,
                     const char *attrname, const char *fname, const char *cannot);
#define culua_need(L, dev, ordinal, attr, fname, cannot) \
  culua_need_attr(L, dev, ordinal, attr, #attr, fname, cannot)

/* luaL_checkudata for objects that start with a culua_Ctx, refusing closed ones */
void *culua_checkobj (lua_State *L, int i, const char *tname);

/* }====================================================== */


/* {====================================================== shared helpers */

/* build the metatable tname from metamethods and methods (liolib's createmeta) */
void culua_newmeta (lua_State *L, const char *tname, const luaL_Reg *meta,
                    const luaL_Reg *methods);
/* push the method of tname named by the value at index key (or nil); returns 1 */
int culua_pushmethod (lua_State *L, const char *tname, int key);

/* element types shared by device and host arrays */
typedef enum culua_Dtype {
  CULUA_INT8, CULUA_UINT8, CULUA_INT16, CULUA_UINT16, CULUA_INT32,
  CULUA_UINT32, CULUA_INT64, CULUA_UINT64, CULUA_FLOAT32, CULUA_FLOAT64,
  /* the low-precision formats, stored as their bits (half.c converts) */
  CULUA_FLOAT16, CULUA_BFLOAT16, CULUA_FLOAT8_E4M3, CULUA_FLOAT8_E5M2,
  CULUA_NDTYPES
} culua_Dtype;

extern const char *const culua_dtype_names[];
extern const size_t culua_dtype_size[];

/* a floating-point dtype (of any width) */
#define culua_dtype_isfloat(t) ((t) >= CULUA_FLOAT32)
/* one of the low-precision formats of half.c */
#define culua_dtype_islowp(t) ((t) >= CULUA_FLOAT16)

/* half.c: x rounded once to nearest even into low-precision dtype t, as
** CUDA's conversions with SATFINITE for fp8 do; the bits, low-aligned */
unsigned culua_lowp_round (culua_Dtype t, double x);
/* 0 when rounding x into low-precision dtype t overflows (to inf, or
** saturating to the largest finite value), 1 otherwise */
int culua_lowp_fits (culua_Dtype t, double x);
/* the exact value of bits b of low-precision dtype t */
double culua_lowp_widen (culua_Dtype t, unsigned b);
/* the largest finite value of low-precision dtype t */
double culua_lowp_max (culua_Dtype t);

culua_Dtype culua_checkdtype (lua_State *L, int i);
/* store the Lua value at index i into p as dtype t, raising on a bad value */
void culua_toelem (lua_State *L, int i, culua_Dtype t, void *p, const char *fname);
/* push the element at p */
void culua_pushelem (lua_State *L, culua_Dtype t, const void *p);
/* the element at p as a double, and back (for compare, random, iota) */
double culua_elem_double (culua_Dtype t, const void *p);
void culua_elem_set_double (culua_Dtype t, void *p, double x);
/* n elements of dtype from at src into dtype to at dst, by astype's rules */
void culua_convert (culua_Dtype to, void *dst, culua_Dtype from, const void *src, size_t n);
/* a count or {rows, cols} at index i: element count; *twod 1 for {rows, cols}
** (rows may be 0: {0, cols} holds nothing, as NumPy's (0, cols)), else *rows 0 */
size_t culua_checkshape (lua_State *L, int i, culua_Dtype t, size_t *rows, size_t *cols, int *twod);
void culua_pushshape (lua_State *L, int twod, size_t rows, size_t cols);
/* Lua table (flat, or rows of cols) <-> n packed elements */
void culua_table_to_elems (lua_State *L, int i, culua_Dtype t, void *dst, size_t n,
                           size_t cols, const char *fname);
void culua_elems_to_table (lua_State *L, culua_Dtype t, const void *src, int twod, size_t rows,
                           size_t cols);
/* "tname(dtype, shape[, tag]): {a, b, ...}" from the first nfirst of n elements;
** tag (NULL: none) names the memory when it is not the type's plain kind */
void culua_push_preview (lua_State *L, const char *tname, const char *tag, culua_Dtype t, int twod,
                         size_t rows, size_t cols, const void *first, size_t nfirst, size_t n);

/* raise "fname: unknown option 'k' (known: ...)" for a key of table t not in known (NULL-ended) */
void culua_checkoptions (lua_State *L, int t, const char *fname, const char *const known[]);
/* the option `key` on top of the stack must be of type (LUA_TNUMBER: an integer), naming it if not */
void culua_checkfield (lua_State *L, const char *fname, const char *key, int type);
/* the boolean option `key` of table t: def when absent, raising on another type */
int culua_optflag (lua_State *L, int t, const char *fname, const char *key, int def);
/* the `device` option of table t: an ordinal (>= 0) or a cuda.device; -1 when absent */
int culua_optdevice (lua_State *L, int t, const char *fname);

/* remember where the object at obj was made, under a registry key below */
void culua_track (lua_State *L, int obj, const char *kind);
#define CULUA_TRACK_ARRAYS "culua.arrays"
#define CULUA_TRACK_KERNELS "culua.kernels"

/* fill ar for the nearest Lua function calling the running C function; 0 if none */
int culua_caller (lua_State *L, lua_Debug *ar);

/* }====================================================== */


/* {====================================================== the shared objects (objects.c) */

/* cuda.array: device memory, or a view into another array's */
typedef struct culua_Array {
  culua_Ctx c;                 /* closed when c.ctx == NULL */
  CUdeviceptr ptr;
  size_t n, rows, cols;        /* 1-D (twod 0): rows 0, cols == n elements */
  int twod;                    /* made with a {rows, cols} shape (rows may be 0) */
  size_t pitch;                /* bytes from row to row of a pitched 2-D array; 0: packed */
  culua_Dtype dtype;
  struct culua_Array *parent;  /* a view's owner (kept alive by the user value) */
  int borrowed;                /* memory owned by another object (a module global) */
  int managed;                 /* unified memory (cuMemAllocManaged): the host may index it */
  int host_sync;               /* managed: host access waits for the device first (doc/memory.md) */
} culua_Array;

/* cuda.host_array: pageable (malloc) or pinned (cuMemHostAlloc) memory */
typedef struct culua_HostArray {
  culua_Ctx c;                 /* pinned only: the context that allocated it */
  void *data;                  /* NULL: closed */
  size_t n, rows, cols;        /* as culua_Array's */
  int twod;
  culua_Dtype dtype;
  int pinned;
  int mapped;                  /* pinned and mapped: kernels reach it at dptr */
  CUdeviceptr dptr;            /* mapped: the address kernels use (cuMemHostGetDevicePointer) */
} culua_HostArray;

/* cuda.stream */
typedef struct culua_Stream {
  culua_Ctx c;
  CUstream s;
  int priority;
  int capturing;
} culua_Stream;

/* cuda.event */
typedef struct culua_Event {
  culua_Ctx c;
  CUevent e;
  int timing;
  int recorded;
} culua_Event;

/* an array is open while it and the array it views are */
static inline int culua_array_isopen (const culua_Array *a) {
  return a->c.ctx != NULL && (a->parent == NULL || a->parent->c.ctx != NULL);
}

/* the object at i if it is one (open, not reset), else NULL; closed ones raise.
** enter: make the array's context current (copies); launches only check */
culua_Array *culua_testarray (lua_State *L, int i, int enter);
/* the same checks of a, known to be a cuda.array (launches compare metatables themselves) */
culua_Array *culua_openarray (lua_State *L, culua_Array *a, int enter);
/* the same without raising: NULL and *why "type", "closed" or "reset" */
culua_Array *culua_peekarray (lua_State *L, int i, const char **why);
culua_HostArray *culua_testhostarray (lua_State *L, int i);
/* the stream at i (NULL handle for nil/none: the default stream) */
CUstream culua_optstream (lua_State *L, int i, const char *fname);
/* the event at i, its context made current */
CUevent culua_toevent (lua_State *L, int i, const char *fname);

/* }====================================================== */


/*
** {======================================================
** What a binding gives the bindings above it (t/034-layers.t holds the
** order): each is called only from files above the one that defines it
** =======================================================
*/

/* device.c: push the cuda.device object of an ordinal */
void culua_pushdevice (lua_State *L, int ordinal, const char *fname);
/* array.c: copy a's n elements, packed (a pitched array's padding left out), into buf */
void culua_array_read (lua_State *L, const culua_Array *a, void *buf, const char *fname);
/* array.c: push an array over memory owned by the object at index owner (module globals) */
void culua_newarray_over (lua_State *L, int owner, int ordinal, CUdeviceptr p, size_t n,
                          culua_Dtype t);
/* graph.c: push a cuda.graph that owns g, instantiated */
void culua_newgraph (lua_State *L, int ordinal, CUgraph g);
/* texture.c: 1 and *h when the value at i is an open cuda.texture (kernel arguments) */
int culua_totexture (lua_State *L, int i, unsigned long long *h);
/* scalar.c: 1, the dtype and its bits (little-endian, dtype-sized) when the value at i is a cuda.scalar */
int culua_toscalar (lua_State *L, int i, culua_Dtype *t, const void **bits);
/* kernel.c: push a kernel for f, owned by the module at index modidx; its
** parameters from ptx (text declaring its .entry) or elf (a CUBIN image), either NULL */
void culua_newkernel (lua_State *L, int modidx, culua_Ctx *mod, CUfunction f, const char *name,
                      const char *ptx, const char *elf, size_t elfsize);
/* kernel.c: whether PTX text declares .entry name */
int culua_hasentry (const char *ptx, const char *name);
/* module.c: cuda.load: the image, cuda.program or {file=} at index 1 -> module */
int culua_load (lua_State *L);
/* link.c: the path of libcudadevrt.a in buf, or NULL with the places looked in, in buf */
const char *culua_cudadevrt (char *buf, size_t size);

/* }====================================================== */


/* openers, one per binding file: each makes its metatables and adds its
** module functions to the `cuda` table at the top of the stack */
void culua_open_device (lua_State *L);
void culua_open_array (lua_State *L);
void culua_open_hostarray (lua_State *L);
void culua_open_stream (lua_State *L);
void culua_open_event (lua_State *L);
void culua_open_graph (lua_State *L);
void culua_open_module (lua_State *L);
void culua_open_kernel (lua_State *L);
void culua_open_program (lua_State *L);
void culua_open_texture (lua_State *L);
void culua_open_scalar (lua_State *L);
void culua_open_link (lua_State *L);
void culua_open_nvtx (lua_State *L);
void culua_open_catalog (lua_State *L);
void culua_open_reference (lua_State *L);
void culua_open_nccl (lua_State *L);
void culua_open_mpi (lua_State *L);

void culua_open_luamods (lua_State *L);

#endif
