/*
** culua_int.h
** What the binding files share: per-state data, contexts, error helpers and
** the openers of each Lua type. Not installed.
*/

#ifndef culua_int_h
#define culua_int_h

#include <stddef.h>
#include <stdint.h>

#include <lua.h>
#include <lauxlib.h>

#include "loader.h"
#include "culua.h"

/* registry names of the metatables, one per Lua type */
#define CULUA_DEVICE     "cuda.device"
#define CULUA_ARRAY      "cuda.array"
#define CULUA_HOSTARRAY  "cuda.hostarray"
#define CULUA_STREAM     "cuda.stream"
#define CULUA_EVENT      "cuda.event"
#define CULUA_MODULE     "cuda.module"
#define CULUA_KERNEL     "cuda.kernel"
#define CULUA_PROGRAM    "cuda.program"
#define CULUA_GRAPH      "cuda.graph"

#define CULUA_MAXDEVICES 64

#if defined(__GNUC__)
#define culua_noret void __attribute__((noreturn))
#define culua_printf(f, a) __attribute__((format(printf, f, a)))
#else
#define culua_noret void
#define culua_printf(f, a)
#endif


/* {====================================================== per-state data */

/* one remembered launch, for naming the culprit of a sticky kernel fault */
typedef struct culua_Launch {
  CUstream stream;
  char kernel[64];
  char where[96];      /* Lua "file:line" of the k:launch call */
} culua_Launch;

#define CULUA_JOURNAL 16

typedef struct culua_State {
  CUcontext host_ctx;      /* a host's own context (culua_set_context), or NULL */
  int device;              /* ordinal that new objects use by default */
  int debug;               /* synchronize after every launch */
  long objects;            /* CUDA objects made so far in this state */
  unsigned journal_next;   /* launches recorded so far */
  culua_Launch journal[CULUA_JOURNAL];
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

/* retain the context of device `ordinal` (-1: the state's default) into c */
void culua_ctx_open (lua_State *L, culua_Ctx *c, int ordinal, const char *fname);
/* drop the reference; harmless on a closed c */
void culua_ctx_close (culua_Ctx *c);
/* make c's context current; raises on a closed or reset object */
void culua_ctx_enter (lua_State *L, culua_Ctx *c, const char *tname);
/* 1 when cuda.reset() destroyed what c's object held */
int culua_ctx_stale (const culua_Ctx *c);

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
  CULUA_NDTYPES
} culua_Dtype;

extern const char *const culua_dtype_names[];
extern const size_t culua_dtype_size[];

culua_Dtype culua_checkdtype (lua_State *L, int i);
/* store the Lua value at index i into p as dtype t, raising on a bad value */
void culua_toelem (lua_State *L, int i, culua_Dtype t, void *p, const char *fname);
/* push the element at p */
void culua_pushelem (lua_State *L, culua_Dtype t, const void *p);

/* fill ar for the nearest Lua function calling the running C function; 0 if none */
int culua_caller (lua_State *L, lua_Debug *ar);
/* "file:line" of the Lua code that called the running C function */
const char *culua_where (lua_State *L, char *buf, size_t size);

/* }====================================================== */


/* openers, one per binding file: each makes its metatables and adds its
** module functions to the `cuda` table at the top of the stack */
void culua_open_device (lua_State *L);
void culua_open_program (lua_State *L);
void culua_open_luamods (lua_State *L);

#endif
