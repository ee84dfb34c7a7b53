/*
** mpi.c
** cuda.mpi: MPI ranks for culua scripts, on Lua values, host arrays and
** device arrays. MPI is linked when configure finds it (mpirun and the
** MPI's wrappers expect that); without it cuda.mpi says so when used.
** Device arrays go to MPI as they are when the MPI is CUDA-aware (Open
** MPI's MPIX_Query_cuda_support), and through pinned host copies otherwise;
** cuda.mpi.path says which.
*/

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "culua_int.h"

#ifdef CULUA_USE_MPI

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#define CULUA_MPIREQ "cuda.mpi.request"

static int initialized_here;   /* culua called MPI_Init_thread; it finalizes */
static int cuda_aware = -1;


/* {====================================================== errors and set-up */

static const char *class_name (int cls) {
  switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_TAG: return "MPI_ERR_TAG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_RANK: return "MPI_ERR_RANK";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING";
    case MPI_ERR_NO_MEM: return "MPI_ERR_NO_MEM";
    default: return "MPI_ERR_OTHER";
  }
}


/* raise "fname: MPI_ERR_X (MPI's words) what" */
static int mpi_fail (lua_State *L, int err, const char *fname, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0, cls = MPI_ERR_OTHER;
  MPI_Error_class(err, &cls);
  if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) len = 0;
  text[len] = '\0';
  return luaL_error(L, "%s: %s (%s) %s", fname, class_name(cls), text, what);
}

#define mpi_check(L, call, fname, what) \
  do { int e_ = (call); if (e_ != MPI_SUCCESS) mpi_fail(L, e_, fname, what); } while (0)


/* the node-local rank from the launcher's environment, or -1 */
static int env_local_rank (void) {
  static const char *const vars[] = {
    "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK", "SLURM_LOCALID", NULL
  };
  int i;
  for (i = 0; vars[i] != NULL; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && *v != '\0') return atoi(v);
  }
  return -1;
}


/* finalizes MPI when the state closes (a userdata's __gc in the registry) */
static int mpi_finalize (lua_State *L) {
  int fin = 0;
  (void)L;
  MPI_Finalized(&fin);
  if (initialized_here && !fin) MPI_Finalize();
  return 0;
}


/*
** After an uncaught error: the other ranks may be waiting on this one in a
** collective, and would wait forever. Say which rank failed and take the
** job down (main.c calls this through the registry; see its report).
*/
static int mpi_fatal (lua_State *L) {
  int rank = 0, size = 1, ini = 0, fin = 0;
  MPI_Initialized(&ini);
  MPI_Finalized(&fin);
  if (!ini || fin) return 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) {
    fprintf(stderr, "culua: rank %d of %d failed: %s\nculua: aborting the MPI job\n", rank, size,
            luaL_optstring(L, 1, "(no message)"));
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}


/*
** Initialize MPI on first use (or adopt the host's), make errors return,
** and point this state at the GPU of its node-local rank unless the user
** chose one (CULUA_DEVICE or an earlier dev:use()).
*/
static void ensure_init (lua_State *L, const char *fname) {
  int ini = 0, fin = 0;
  MPI_Finalized(&fin);
  if (fin) luaL_error(L, "%s: MPI was finalized", fname);
  MPI_Initialized(&ini);
  if (!ini) {
    int provided = 0;
    mpi_check(L, MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), fname, "initializing MPI");
    initialized_here = 1;
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, (void *)&initialized_here) == LUA_TNIL) {
    culua_State *S = culua_state(L);
    int lr = env_local_rank();
    const culua_Driver *cu = culua_load_driver(NULL);
    int ndev = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    lua_newuserdatauv(L, 1, 0);                /* the finalizer */
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, mpi_finalize);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, (void *)&initialized_here);
    lua_pushcfunction(L, mpi_fatal);
    lua_setfield(L, LUA_REGISTRYINDEX, "culua.fatal");
    if (lr >= 0 && getenv("CULUA_DEVICE") == NULL && S->objects == 0 && cu != NULL &&
        culua_driver_init() == CUDA_SUCCESS && cu->cuDeviceGetCount(&ndev) == CUDA_SUCCESS && ndev > 0)
      S->device = lr % ndev;
  }
  lua_pop(L, 1);
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (cuda_aware < 0) cuda_aware = MPIX_Query_cuda_support() && getenv("CULUA_MPI_STAGE") == NULL;
#else
  if (cuda_aware < 0) cuda_aware = 0;
#endif
}

/* }====================================================== */


/* {====================================================== buffers */

/*
** What a call sends or receives: memory MPI can read (a host array's, a
** device array's when MPI is CUDA-aware, a pinned copy of a device array's
** otherwise, or an encoded Lua value), its MPI type and count.
*/
typedef struct Buf {
  void *p;
  int count;
  MPI_Datatype type;
  int device;           /* a device array at index `idx` */
  int staged;           /* p is a pinned copy: copy back after receiving */
  int idx;              /* the array's stack index, or 0 */
  int hidx;             /* the staging host array's stack index */
} Buf;


static MPI_Datatype mpi_type (culua_Dtype t) {
  switch (t) {
    case CULUA_INT8: return MPI_INT8_T;
    case CULUA_UINT8: return MPI_UINT8_T;
    case CULUA_INT16: return MPI_INT16_T;
    case CULUA_UINT16: return MPI_UINT16_T;
    case CULUA_INT32: return MPI_INT32_T;
    case CULUA_UINT32: return MPI_UINT32_T;
    case CULUA_INT64: return MPI_INT64_T;
    case CULUA_UINT64: return MPI_UINT64_T;
    case CULUA_FLOAT32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}


static int is_array (lua_State *L, int i) {
  return culua_testarray(L, i, 0) != NULL || culua_testhostarray(L, i) != NULL;
}


/* call method `m` of the object at i with the object at j: x:copy_to(h) */
static void call_copy (lua_State *L, int i, const char *m, int j) {
  lua_getfield(L, i, m);
  lua_pushvalue(L, i);
  lua_pushvalue(L, j);
  lua_call(L, 2, 0);
}


/*
** The array at i as a buffer. `in`: its contents are sent (a staged
** device array is copied to the host first). Pushes a staging host array
** when one is needed (the caller's stack grows by one then).
*/
static void array_buf (lua_State *L, int i, Buf *b, int in, const char *fname) {
  culua_HostArray *h = culua_testhostarray(L, i);
  culua_Array *a;
  size_t n;
  culua_Dtype t;
  memset(b, 0, sizeof(*b));
  b->idx = lua_absindex(L, i);
  if (h != NULL) {
    b->p = h->data; n = h->n; t = h->dtype;
  }
  else {
    a = culua_testarray(L, i, 1);
    if (a == NULL) luaL_argerror(L, i, "a cuda.array or cuda.host_array expected");
    n = a->n; t = a->dtype;
    b->device = 1;
    if (cuda_aware) {
      /* MPI may read it at once: work queued on the default stream must be done */
      culua_check(L, culua_cu(L, fname)->cuCtxSynchronize(), fname, "before handing device %d's array to MPI",
                  a->c.ordinal);
      b->p = (void *)a->ptr;
    }
    else {
      culua_HostArray *s;
      lua_getglobal(L, "require");          /* cuda.host_array(dtype, n, {pinned = true}) */
      lua_pushliteral(L, "cuda");
      lua_call(L, 1, 1);
      lua_getfield(L, -1, "host_array");
      lua_remove(L, -2);
      lua_pushstring(L, culua_dtype_names[t]);
      lua_pushinteger(L, (lua_Integer)n);
      lua_createtable(L, 0, 1);
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "pinned");
      lua_call(L, 3, 1);
      b->hidx = lua_gettop(L);
      s = culua_testhostarray(L, b->hidx);
      if (in) call_copy(L, b->idx, "copy_to", b->hidx);
      b->p = s->data;
      b->staged = 1;
    }
  }
  if (n > (size_t)0x7fffffff)
    luaL_error(L, "%s: %I elements are more than one MPI call takes (2^31 - 1)", fname, (lua_Integer)n);
  b->count = (int)n;
  b->type = mpi_type(t);
}


/* after receiving into a buffer: a staged device array gets its data */
static void buf_done (lua_State *L, Buf *b) {
  if (b->staged) call_copy(L, b->idx, "copy_from", b->hidx);
}


/* a Lua value as bytes: 'i' integer, 'f' float, 's' string, 'b' boolean, 'n' nil */
static void encode (lua_State *L, int i, const char *fname) {
  luaL_Buffer B;
  luaL_buffinit(L, &B);
  switch (lua_type(L, i)) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, i)) {
        lua_Integer v = lua_tointeger(L, i);
        luaL_addchar(&B, 'i');
        luaL_addlstring(&B, (const char *)&v, sizeof(v));
      }
      else {
        lua_Number v = lua_tonumber(L, i);
        luaL_addchar(&B, 'f');
        luaL_addlstring(&B, (const char *)&v, sizeof(v));
      }
      break;
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, i, &len);
      luaL_addchar(&B, 's');
      luaL_addlstring(&B, s, len);
      break;
    }
    case LUA_TBOOLEAN:
      luaL_addchar(&B, 'b');
      luaL_addchar(&B, lua_toboolean(L, i) ? 1 : 0);
      break;
    case LUA_TNIL:
      luaL_addchar(&B, 'n');
      break;
    default:
      luaL_error(L, "%s: cannot send a %s (numbers, strings, booleans, nil, host and device arrays)",
                 fname, luaL_typename(L, i));
  }
  luaL_pushresult(&B);
}


static void decode (lua_State *L, const char *p, size_t len) {
  if (len >= 1 + sizeof(lua_Integer) && p[0] == 'i') {
    lua_Integer v;
    memcpy(&v, p + 1, sizeof(v));
    lua_pushinteger(L, v);
  }
  else if (len >= 1 + sizeof(lua_Number) && p[0] == 'f') {
    lua_Number v;
    memcpy(&v, p + 1, sizeof(v));
    lua_pushnumber(L, v);
  }
  else if (len >= 1 && p[0] == 's') lua_pushlstring(L, p + 1, len - 1);
  else if (len == 2 && p[0] == 'b') lua_pushboolean(L, p[1]);
  else if (len == 1 && p[0] == 'n') lua_pushnil(L);
  else luaL_error(L, "cuda.mpi: received %d bytes that are not a Lua value sent by cuda.mpi", (int)len);
}

/* }====================================================== */


/* {====================================================== options */

static int opt_int (lua_State *L, int t, const char *fname, const char *key, int dflt) {
  int v = dflt;
  if (lua_istable(L, t) && lua_getfield(L, t, key) != LUA_TNIL) {
    culua_checkfield(L, fname, key, LUA_TNUMBER);
    v = (int)lua_tointeger(L, -1);
  }
  if (lua_istable(L, t)) lua_pop(L, 1);
  return v;
}


/* opts at t: a table of only `known` keys, or nil */
static void check_opts (lua_State *L, int t, const char *fname, const char *const known[]) {
  if (lua_isnoneornil(L, t)) return;
  luaL_argexpected(L, lua_istable(L, t), t, "table of options");
  culua_checkoptions(L, t, fname, known);
}


static int check_rank (lua_State *L, int i, const char *fname, const char *what, int any) {
  int size, r;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  r = (int)luaL_checkinteger(L, i);
  if (!(r >= 0 && r < size) && !(any && r == MPI_ANY_SOURCE))
    luaL_argerror(L, i, lua_pushfstring(L, "%s: %s must be a rank 0..%d%s, got %d", fname, what, size - 1,
                                        any ? " or cuda.mpi.any_source" : "", r));
  return r;
}


static MPI_Op check_op (lua_State *L, int t, const char *fname) {
  static const char *const names[] = {"sum", "prod", "min", "max", NULL};
  MPI_Op ops[4];
  const char *name = "sum";
  int i;
  ops[0] = MPI_SUM; ops[1] = MPI_PROD; ops[2] = MPI_MIN; ops[3] = MPI_MAX;
  if (lua_istable(L, t) && lua_getfield(L, t, "op") != LUA_TNIL) name = luaL_checkstring(L, -1);
  for (i = 0; names[i] != NULL; i++)
    if (strcmp(names[i], name) == 0) break;
  if (names[i] == NULL) luaL_error(L, "%s: op must be one of sum, prod, min, max, got '%s'", fname, name);
  if (lua_istable(L, t)) lua_pop(L, 1);
  return ops[i];
}

/* }====================================================== */


/* {====================================================== point to point */

static const char *const p2p_opts[] = {"tag", NULL};

/* push the status table {source =, tag =, count =} */
static void push_status (lua_State *L, MPI_Status *st, MPI_Datatype type) {
  int count = 0;
  MPI_Get_count(st, type, &count);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, st->MPI_SOURCE);
  lua_setfield(L, -2, "source");
  lua_pushinteger(L, st->MPI_TAG);
  lua_setfield(L, -2, "tag");
  lua_pushinteger(L, count);
  lua_setfield(L, -2, "count");
}


/* cuda.mpi.send(value_or_array, dest [, {tag = 0}]) */
static int mpi_send (lua_State *L) {
  const char *fname = "cuda.mpi.send";
  int dest, tag;
  ensure_init(L, fname);
  dest = check_rank(L, 2, fname, "dest", 0);
  check_opts(L, 3, fname, p2p_opts);
  tag = opt_int(L, 3, fname, "tag", 0);
  if (is_array(L, 1)) {
    Buf b;
    array_buf(L, 1, &b, 1, fname);
    mpi_check(L, MPI_Send(b.p, b.count, b.type, dest, tag, MPI_COMM_WORLD), fname, "sending an array");
  }
  else {
    size_t len;
    const char *p;
    encode(L, 1, fname);
    p = lua_tolstring(L, -1, &len);
    mpi_check(L, MPI_Send(p, (int)len, MPI_BYTE, dest, tag, MPI_COMM_WORLD), fname, "sending a value");
  }
  return 0;
}


/*
** cuda.mpi.recv(array, source [, {tag =}]) -> array, status
** cuda.mpi.recv(source [, {tag =}]) -> value, status
** source and tag may be cuda.mpi.any_source and cuda.mpi.any_tag.
*/
static int mpi_recv (lua_State *L) {
  const char *fname = "cuda.mpi.recv";
  MPI_Status st;
  int src, tag, arr;
  ensure_init(L, fname);
  arr = is_array(L, 1);
  src = check_rank(L, arr ? 2 : 1, fname, "source", 1);
  check_opts(L, arr ? 3 : 2, fname, p2p_opts);
  tag = opt_int(L, arr ? 3 : 2, fname, "tag", MPI_ANY_TAG);
  if (arr) {
    Buf b;
    array_buf(L, 1, &b, 0, fname);
    mpi_check(L, MPI_Recv(b.p, b.count, b.type, src, tag, MPI_COMM_WORLD, &st), fname, "receiving an array");
    buf_done(L, &b);
    lua_pushvalue(L, 1);
    push_status(L, &st, b.type);
  }
  else {
    int len = 0;
    char *p;
    mpi_check(L, MPI_Probe(src, tag, MPI_COMM_WORLD, &st), fname, "waiting for a value");
    MPI_Get_count(&st, MPI_BYTE, &len);
    p = (char *)lua_newuserdatauv(L, (size_t)len + 1, 0);
    mpi_check(L, MPI_Recv(p, len, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st), fname,
              "receiving a value");
    decode(L, p, (size_t)len);
    push_status(L, &st, MPI_BYTE);
  }
  return 2;
}


/* a request: the MPI handle, and what must live until it completes */
typedef struct Request {
  MPI_Request r;
  int active;
  int value;            /* an irecv of a Lua value (probe then receive at wait) */
  int receives;         /* an irecv into an array: wait returns the array */
  int src, tag;
  MPI_Datatype type;
} Request;


static Request *new_request (lua_State *L, int anchor) {
  Request *q = (Request *)lua_newuserdatauv(L, sizeof(Request), 1);
  memset(q, 0, sizeof(*q));
  q->r = MPI_REQUEST_NULL;
  luaL_setmetatable(L, CULUA_MPIREQ);
  if (anchor) {
    lua_pushvalue(L, anchor);           /* the buffer stays alive while MPI uses it */
    lua_setiuservalue(L, -2, 1);
  }
  return q;
}


/* cuda.mpi.isend(value_or_array, dest [, {tag =}]) -> request */
static int mpi_isend (lua_State *L) {
  const char *fname = "cuda.mpi.isend";
  int dest, tag, top;
  Request *q;
  Buf b;
  ensure_init(L, fname);
  dest = check_rank(L, 2, fname, "dest", 0);
  check_opts(L, 3, fname, p2p_opts);
  tag = opt_int(L, 3, fname, "tag", 0);
  lua_settop(L, 3);
  if (is_array(L, 1)) {
    array_buf(L, 1, &b, 1, fname);
    top = b.staged ? b.hidx : 1;         /* the pinned copy is what MPI reads */
  }
  else {
    size_t len;
    encode(L, 1, fname);
    top = lua_gettop(L);
    b.p = (void *)lua_tolstring(L, top, &len);
    b.count = (int)len;
    b.type = MPI_BYTE;
  }
  q = new_request(L, top);
  mpi_check(L, MPI_Isend(b.p, b.count, b.type, dest, tag, MPI_COMM_WORLD, &q->r), fname, "starting a send");
  q->active = 1;
  return 1;
}


/*
** cuda.mpi.irecv(host_array, source [, {tag =}]) -> request; a device array
** too where MPI is CUDA-aware. irecv(source [, {tag =}]) receives a Lua
** value when waited on.
*/
static int mpi_irecv (lua_State *L) {
  const char *fname = "cuda.mpi.irecv";
  int src, tag, arr;
  Request *q;
  ensure_init(L, fname);
  arr = is_array(L, 1);
  src = check_rank(L, arr ? 2 : 1, fname, "source", 1);
  check_opts(L, arr ? 3 : 2, fname, p2p_opts);
  tag = opt_int(L, arr ? 3 : 2, fname, "tag", MPI_ANY_TAG);
  if (arr) {
    Buf b;
    if (culua_testarray(L, 1, 0) != NULL && !cuda_aware)
      luaL_error(L, "%s: this MPI is not CUDA-aware: receive a device array with cuda.mpi.recv, or into a host array", fname);
    array_buf(L, 1, &b, 0, fname);
    q = new_request(L, 1);
    q->type = b.type;
    q->receives = 1;
    mpi_check(L, MPI_Irecv(b.p, b.count, b.type, src, tag, MPI_COMM_WORLD, &q->r), fname, "starting a receive");
  }
  else {
    q = new_request(L, 0);
    q->value = 1;
    q->src = src;
    q->tag = tag;
  }
  q->active = 1;
  return 1;
}


static Request *check_request (lua_State *L) {
  return (Request *)luaL_checkudata(L, 1, CULUA_MPIREQ);
}


/* req:wait() -> status (sends), array, status or value, status (receives) */
static int req_wait (lua_State *L) {
  Request *q = check_request(L);
  MPI_Status st;
  if (!q->active) return luaL_error(L, "wait: the request was already completed");
  q->active = 0;
  if (q->value) {
    lua_settop(L, 0);
    lua_pushinteger(L, q->src);
    lua_createtable(L, 0, 1);
    lua_pushinteger(L, q->tag);
    lua_setfield(L, -2, "tag");
    return mpi_recv(L);
  }
  mpi_check(L, MPI_Wait(&q->r, &st), "wait", "waiting for a request");
  lua_getiuservalue(L, 1, 1);
  if (!q->receives) {     /* a send */
    lua_pop(L, 1);
    push_status(L, &st, MPI_BYTE);
    return 1;
  }
  push_status(L, &st, q->type);
  return 2;
}


/* req:test() -> true once done (then wait returns at once) */
static int req_test (lua_State *L) {
  Request *q = check_request(L);
  int flag = 0;
  if (!q->active || q->value) {
    lua_pushboolean(L, !q->active);
    return 1;
  }
  mpi_check(L, MPI_Request_get_status(q->r, &flag, MPI_STATUS_IGNORE), "test", "testing a request");
  lua_pushboolean(L, flag);
  return 1;
}


static int req_gc (lua_State *L) {
  Request *q = check_request(L);
  int fin = 0;
  MPI_Finalized(&fin);
  /* a request dropped while active: MPI may still write into the buffer it
  ** anchors, so it must finish first */
  if (q->active && !q->value && !fin) MPI_Wait(&q->r, MPI_STATUS_IGNORE);
  q->active = 0;
  return 0;
}


static int req_tostring (lua_State *L) {
  Request *q = check_request(L);
  lua_pushfstring(L, "cuda.mpi.request (%s)", q->active ? "active" : "completed");
  return 1;
}

/* }====================================================== */


/* {====================================================== collectives */

static const char *const root_opts[] = {"root", NULL};
static const char *const op_opts[] = {"op", NULL};
static const char *const root_op_opts[] = {"root", "op", NULL};

static int opt_root (lua_State *L, int t, const char *fname) {
  int size, r = opt_int(L, t, fname, "root", 0);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (r < 0 || r >= size) luaL_error(L, "%s: root must be a rank 0..%d, got %d", fname, size - 1, r);
  return r;
}


static int mpi_barrier (lua_State *L) {
  ensure_init(L, "cuda.mpi.barrier");
  mpi_check(L, MPI_Barrier(MPI_COMM_WORLD), "cuda.mpi.barrier", "");
  return 0;
}


/* cuda.mpi.bcast(value_or_array [, {root = 0}]) -> root's value (arrays: in place) */
static int mpi_bcast (lua_State *L) {
  const char *fname = "cuda.mpi.bcast";
  int root, rank;
  ensure_init(L, fname);
  check_opts(L, 2, fname, root_opts);
  root = opt_root(L, 2, fname);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  lua_settop(L, 2);
  if (is_array(L, 1)) {
    Buf b;
    array_buf(L, 1, &b, rank == root, fname);
    mpi_check(L, MPI_Bcast(b.p, b.count, b.type, root, MPI_COMM_WORLD), fname, "broadcasting an array");
    if (rank != root) buf_done(L, &b);
    lua_pushvalue(L, 1);
  }
  else {
    long long len = 0;
    char *p;
    if (rank == root) {
      size_t l;
      encode(L, 1, fname);
      lua_tolstring(L, -1, &l);
      len = (long long)l;
    }
    mpi_check(L, MPI_Bcast(&len, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), fname, "broadcasting a length");
    if (len > 0x7fffffff) luaL_error(L, "%s: a value of %I bytes is too long", fname, (lua_Integer)len);
    p = rank == root ? (char *)lua_tostring(L, -1) : (char *)lua_newuserdatauv(L, (size_t)len + 1, 0);
    mpi_check(L, MPI_Bcast(p, (int)len, MPI_BYTE, root, MPI_COMM_WORLD), fname, "broadcasting a value");
    decode(L, p, (size_t)len);
  }
  return 1;
}


/*
** reduce and allreduce: a number gives the reduced number; an array is
** reduced element by element into recv (or in place).
*/
static int reduce_common (lua_State *L, const char *fname, int all) {
  int root = 0, rank;
  MPI_Op op;
  int opts = is_array(L, 2) ? 3 : 2;
  ensure_init(L, fname);
  check_opts(L, opts, fname, all ? op_opts : root_op_opts);
  op = check_op(L, opts, fname);
  if (!all) root = opt_root(L, opts, fname);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (lua_type(L, 1) == LUA_TNUMBER) {
    if (lua_isinteger(L, 1)) {
      long long v = (long long)lua_tointeger(L, 1), out = 0;
      mpi_check(L, all ? MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, op, MPI_COMM_WORLD)
                       : MPI_Reduce(&v, &out, 1, MPI_LONG_LONG, op, root, MPI_COMM_WORLD), fname, "reducing a number");
      if (all || rank == root) lua_pushinteger(L, (lua_Integer)out); else luaL_pushfail(L);
    }
    else {
      double v = lua_tonumber(L, 1), out = 0;
      mpi_check(L, all ? MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD)
                       : MPI_Reduce(&v, &out, 1, MPI_DOUBLE, op, root, MPI_COMM_WORLD), fname, "reducing a number");
      if (all || rank == root) lua_pushnumber(L, out); else luaL_pushfail(L);
    }
    return 1;
  }
  if (!is_array(L, 1))
    return luaL_argerror(L, 1, lua_pushfstring(L, "a number or an array expected, got %s", luaL_typename(L, 1)));
  {
    Buf s, r;
    int recv = opts == 3 ? 2 : 1, top;
    lua_settop(L, 3);
    array_buf(L, 1, &s, 1, fname);
    top = lua_gettop(L);
    if (recv == 1) r = s;
    else {
      array_buf(L, recv, &r, 0, fname);
      if (r.count != s.count || r.type != s.type)
        luaL_error(L, "%s: send and recv differ in length or dtype (%d and %d elements)", fname, s.count, r.count);
    }
    (void)top;
    mpi_check(L, all ? MPI_Allreduce(recv == 1 ? MPI_IN_PLACE : s.p, r.p, s.count, s.type, op, MPI_COMM_WORLD)
                     : MPI_Reduce(recv == 1 && rank == root ? MPI_IN_PLACE : s.p, r.p, s.count, s.type, op, root,
                                  MPI_COMM_WORLD), fname, "reducing an array");
    if (all || rank == root) buf_done(L, &r);
    lua_pushvalue(L, recv);
    return 1;
  }
}

/* cuda.mpi.reduce(number | send [, recv], {op = "sum", root = 0}) -> the result on root, fail elsewhere */
static int mpi_reduce (lua_State *L) { return reduce_common(L, "cuda.mpi.reduce", 0); }

/* cuda.mpi.allreduce(number | send [, recv], {op = "sum"}) -> the result on every rank */
static int mpi_allreduce (lua_State *L) { return reduce_common(L, "cuda.mpi.allreduce", 1); }


/* counts (a table of size integers) as an int array on the stack, their displacements after */
static int *read_counts (lua_State *L, int i, const char *fname, int size, long long *total) {
  int *c = (int *)lua_newuserdatauv(L, 2 * (size_t)size * sizeof(int), 0);
  int r;
  long long sum = 0;
  luaL_checktype(L, i, LUA_TTABLE);
  if ((int)luaL_len(L, i) != size)
    luaL_error(L, "%s: counts must have one entry a rank (%d), got %d", fname, size, (int)luaL_len(L, i));
  for (r = 0; r < size; r++) {
    lua_Integer v;
    lua_geti(L, i, r + 1);
    v = lua_tointeger(L, -1);
    if (!lua_isinteger(L, -1) || v < 0 || v > 0x7fffffff)
      luaL_error(L, "%s: counts[%d] must be an element count, got %s", fname, r + 1, luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
    c[r] = (int)v;
    c[size + r] = (int)sum;
    sum += v;
    if (sum > 0x7fffffff) luaL_error(L, "%s: the counts add up to more than 2^31 - 1", fname);
  }
  *total = sum;
  return c;
}


/*
** scatterv and gatherv are one shape: a `part` on every rank (what it
** receives, or sends), a `whole` on root laid out by counts, by rank.
*/
static int vector_collective (lua_State *L, int scatter) {
  const char *fname = scatter ? "cuda.mpi.scatterv" : "cuda.mpi.gatherv";
  const char *pname = scatter ? "recv" : "send", *wname = scatter ? "send" : "recv";
  int wi = scatter ? 1 : 2, ci = scatter ? 2 : 3, pi = scatter ? 3 : 1;
  int size, rank, root, *c;
  long long total;
  Buf part, whole;
  ensure_init(L, fname);
  check_opts(L, 4, fname, root_opts);
  root = opt_root(L, 4, fname);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  lua_settop(L, 4);
  c = read_counts(L, ci, fname, size, &total);
  array_buf(L, pi, &part, !scatter, fname);
  if (part.count < c[rank])
    luaL_error(L, "%s: %s has %d elements, fewer than counts[%d] = %d", fname, pname, part.count, rank + 1, c[rank]);
  memset(&whole, 0, sizeof(whole));
  if (rank == root) {
    array_buf(L, wi, &whole, scatter, fname);
    if (whole.count < total)
      luaL_error(L, "%s: %s has %d elements, fewer than the counts' %I", fname, wname, whole.count, (lua_Integer)total);
    if (whole.type != part.type) luaL_error(L, "%s: send and recv differ in dtype", fname);
  }
  if (scatter)
    mpi_check(L, MPI_Scatterv(whole.p, c, c + size, part.type, part.p, c[rank], part.type, root, MPI_COMM_WORLD),
              fname, "scattering");
  else
    mpi_check(L, MPI_Gatherv(part.p, c[rank], part.type, whole.p, c, c + size, part.type, root, MPI_COMM_WORLD),
              fname, "gathering");
  if (scatter) buf_done(L, &part);
  else if (rank == root) buf_done(L, &whole);
  lua_pushvalue(L, scatter ? 3 : 2);
  return 1;
}

/* cuda.mpi.scatterv(send, counts, recv [, {root = 0}]) -> recv: rank r gets counts[r+1] elements of root's send */
static int mpi_scatterv (lua_State *L) { return vector_collective(L, 1); }

/* cuda.mpi.gatherv(send, recv, counts [, {root = 0}]) -> recv on root: each rank's send, by rank */
static int mpi_gatherv (lua_State *L) { return vector_collective(L, 0); }


/* cuda.mpi.allgather(send, recv) -> recv: size sends of equal length, by rank */
static int mpi_allgather (lua_State *L) {
  const char *fname = "cuda.mpi.allgather";
  int size;
  Buf s, r;
  ensure_init(L, fname);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  lua_settop(L, 2);
  array_buf(L, 1, &s, 1, fname);
  array_buf(L, 2, &r, 0, fname);
  if ((long long)r.count != (long long)s.count * size || r.type != s.type)
    luaL_error(L, "%s: recv must hold size x send elements of send's dtype (%d x %d), has %d", fname, size, s.count, r.count);
  mpi_check(L, MPI_Allgather(s.p, s.count, s.type, r.p, s.count, r.type, MPI_COMM_WORLD), fname, "gathering");
  buf_done(L, &r);
  lua_pushvalue(L, 2);
  return 1;
}

/* }====================================================== */


/* cuda.mpi.available() -> true, library version | fail, why */
static int mpi_available (lua_State *L) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  lua_pushboolean(L, 1);
  lua_pushlstring(L, v, (size_t)len);
  return 2;
}


/* fields that need MPI running: rank, size, local_rank, cuda_aware, path */
static int mpi_index (lua_State *L) {
  const char *k = luaL_checkstring(L, 2);
  int v;
  if (strcmp(k, "rank") == 0 || strcmp(k, "size") == 0 || strcmp(k, "local_rank") == 0 ||
      strcmp(k, "cuda_aware") == 0 || strcmp(k, "path") == 0) {
    ensure_init(L, "cuda.mpi");
    if (k[0] == 'r') { MPI_Comm_rank(MPI_COMM_WORLD, &v); lua_pushinteger(L, v); }
    else if (k[0] == 's') { MPI_Comm_size(MPI_COMM_WORLD, &v); lua_pushinteger(L, v); }
    else if (k[0] == 'l') {
      v = env_local_rank();
      if (v < 0) {   /* no launcher variable: ask MPI who shares this node */
        MPI_Comm node;
        MPI_Comm_rank(MPI_COMM_WORLD, &v);
        mpi_check(L, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, v, MPI_INFO_NULL, &node),
                  "cuda.mpi.local_rank", "splitting by node");
        MPI_Comm_rank(node, &v);
        MPI_Comm_free(&node);
      }
      lua_pushinteger(L, v);
    }
    else if (k[0] == 'c') lua_pushboolean(L, cuda_aware);
    else lua_pushstring(L, cuda_aware ? "cuda-aware" : "host-staged");
    return 1;
  }
  return 0;
}


static const luaL_Reg req_meta[] = {
  {"__gc", req_gc},
  {"__tostring", req_tostring},
  {NULL, NULL}
};

static const luaL_Reg req_methods[] = {
  {"wait", req_wait},
  {"test", req_test},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"available", mpi_available},
  {"barrier", mpi_barrier},
  {"send", mpi_send},
  {"recv", mpi_recv},
  {"isend", mpi_isend},
  {"irecv", mpi_irecv},
  {"bcast", mpi_bcast},
  {"reduce", mpi_reduce},
  {"allreduce", mpi_allreduce},
  {"scatterv", mpi_scatterv},
  {"gatherv", mpi_gatherv},
  {"allgather", mpi_allgather},
  {NULL, NULL}
};


void culua_open_mpi (lua_State *L) {
  culua_newmeta(L, CULUA_MPIREQ, req_meta, req_methods);
  luaL_newlib(L, funcs);
  lua_pushinteger(L, MPI_ANY_SOURCE);
  lua_setfield(L, -2, "any_source");
  lua_pushinteger(L, MPI_ANY_TAG);
  lua_setfield(L, -2, "any_tag");
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, mpi_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "mpi");
}

#else

/* built without MPI: cuda.mpi is there and says so */
static int mpi_missing (lua_State *L) {
  return luaL_error(L, "cuda.mpi: culua was built without MPI (install an MPI, e.g. libopenmpi-dev, and configure --with-mpi)");
}

static int mpi_available (lua_State *L) {
  luaL_pushfail(L);
  lua_pushliteral(L, "culua was built without MPI");
  return 2;
}

static int mpi_index (lua_State *L) {
  if (strcmp(luaL_checkstring(L, 2), "available") == 0) {
    lua_pushcfunction(L, mpi_available);
    return 1;
  }
  return mpi_missing(L);
}

void culua_open_mpi (lua_State *L) {
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, mpi_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "mpi");
}

#endif
