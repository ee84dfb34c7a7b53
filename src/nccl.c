/*
** nccl.c
** cuda.nccl: NCCL communicators and their collectives on cuda.arrays.
** NCCL is opened at run time by the loader, like the driver; without it
** `require "cuda"` still works and the first cuda.nccl call says why.
*/

#include "config.h"

#include <limits.h>
#include <string.h>

#include "culua_int.h"


typedef struct Comm {
  culua_Ctx c;          /* the device's context, retained while the comm lives */
  ncclComm_t comm;
  int rank, size;
  int failed;           /* an operation failed: close aborts instead of destroying */
} Comm;


/* {====================================================== errors */

static const culua_Nccl *check_nccl (lua_State *L, const char *fname) {
  const char *why = NULL;
  const culua_Nccl *nc = culua_load_nccl(&why);
  if (nc == NULL) luaL_error(L, "%s: NCCL not available: %s", fname, why);
  return nc;
}


static const char *result_name (ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult?";
  }
}


/*
** Raise "fname: ncclInvalidUsage (NCCL's words) doing what", with NCCL's
** last error string (which says what was wrong) when it has one.
*/
static int nccl_fail (lua_State *L, const culua_Nccl *nc, ncclResult_t r, ncclComm_t comm,
                      const char *fname, const char *what) {
  const char *last = nc->ncclGetLastError(comm);
  if (last != NULL && *last != '\0')
    return luaL_error(L, "%s: %s (%s) %s: %s", fname, result_name(r), nc->ncclGetErrorString(r), what, last);
  return luaL_error(L, "%s: %s (%s) %s", fname, result_name(r), nc->ncclGetErrorString(r), what);
}

#define nccl_check(L, nc, call, comm, fname, what) \
  do { ncclResult_t r_ = (call); \
       if (r_ != ncclSuccess) nccl_fail(L, nc, r_, comm, fname, what); \
  } while (0)

/* }====================================================== */


/* {====================================================== communicators */

static Comm *new_comm (lua_State *L) {
  Comm *c = (Comm *)lua_newuserdatauv(L, sizeof(Comm), 0);
  memset(c, 0, sizeof(*c));
  luaL_setmetatable(L, CULUA_NCCLCOMM);
  return c;
}


static Comm *check_comm (lua_State *L, int i) {
  Comm *c = (Comm *)luaL_checkudata(L, i, CULUA_NCCLCOMM);
  if (c->comm == NULL) luaL_error(L, "attempt to use a closed %s", CULUA_NCCLCOMM);
  culua_ctx_enter(L, &c->c, CULUA_NCCLCOMM);
  return c;
}


/* after init: ask NCCL what it made */
static void comm_describe (lua_State *L, const culua_Nccl *nc, Comm *c, const char *fname) {
  nccl_check(L, nc, nc->ncclCommUserRank(c->comm, &c->rank), c->comm, fname, "asking the rank");
  nccl_check(L, nc, nc->ncclCommCount(c->comm, &c->size), c->comm, fname, "asking the size");
}


/* cuda.nccl.unique_id() -> a 128-byte string for every rank's cuda.nccl.comm */
static int nccl_unique_id (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "cuda.nccl.unique_id");
  ncclUniqueId id;
  nccl_check(L, nc, nc->ncclGetUniqueId(&id), NULL, "cuda.nccl.unique_id", "making an id");
  lua_pushlstring(L, id.internal, sizeof(id.internal));
  return 1;
}


/*
** A communicator's options, NCCL's ncclConfig_t: NCCL runs each operation in
** up to max_ctas blocks (its channels), which take multiprocessors from the
** kernels that run beside it; a caller overlapping work with transfers caps
** them. Checks t's keys against known[] and reads the three; returns whether
** any was given.
*/
static const char *const config_keys[] = {"max_ctas", "min_ctas", "cga_cluster_size", NULL};

static int config_int (lua_State *L, int t, const char *fname, const char *key, int lo, int hi, int *v) {
  lua_Integer i;
  if (lua_getfield(L, t, key) == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_isinteger(L, -1))
    luaL_error(L, "%s: %s must be an integer, got %s", fname, key, luaL_typename(L, -1));
  i = lua_tointeger(L, -1);
  if (i < lo || i > hi) luaL_error(L, "%s: %s must be %d..%d, got %I", fname, key, lo, hi, i);
  *v = (int)i;
  lua_pop(L, 1);
  return 1;
}

static int read_config (lua_State *L, int t, const char *fname, const char *const known[],
                        ncclConfig_t *cfg) {
  int given = 0;
  luaL_checktype(L, t, LUA_TTABLE);
  culua_checkoptions(L, t, fname, known);
  given |= config_int(L, t, fname, "max_ctas", 1, 1024, &cfg->maxCTAs);   /* NCCL lowers it to its channels */
  given |= config_int(L, t, fname, "min_ctas", 1, 1024, &cfg->minCTAs);
  given |= config_int(L, t, fname, "cga_cluster_size", 0, 8, &cfg->cgaClusterSize);
  if (cfg->minCTAs != NCCL_CONFIG_UNDEF_INT) {
    /* (NCCL compares the two before it fills in its default for an unset max: it would refuse) */
    if (cfg->maxCTAs == NCCL_CONFIG_UNDEF_INT)
      luaL_error(L, "%s: min_ctas needs max_ctas beside it", fname);
    if (cfg->minCTAs > cfg->maxCTAs)
      luaL_error(L, "%s: min_ctas (%d) is more than max_ctas (%d)", fname, cfg->minCTAs, cfg->maxCTAs);
  }
  return given;
}


/*
** What a call needs of the library: an entry (have: the loader found it) and a
** version (NCCL's code: 21700 is 2.17; a config's fields before 2.17 are ignored),
** or an error naming both.
*/
static void nccl_need (lua_State *L, const culua_Nccl *nc, int have, int since, const char *fname,
                       const char *what) {
  int v = 0;
  if (!have || nc->ncclGetVersion(&v) != ncclSuccess || v < since)
    luaL_error(L, "%s: %s needs NCCL %d.%d or newer; %s is %d.%d", fname, what, since / 10000,
               since / 100 % 100, culua_nccl_path(), v / 10000, v / 100 % 100);
}


/*
** The depth of cuda.nccl.group calls running on this thread (NCCL's groups are a
** thread's): a call that must not be queued in a group asks it.
*/
static _Thread_local int group_depth;


/*
** cuda.nccl.comm(id, nranks, rank [, {device = d, max_ctas = , ...}]) -> comm:
** this process's rank of a communicator that nranks processes (or threads)
** make with the same id. It blocks until all nranks have joined, as
** ncclCommInitRank does.
*/
static int nccl_comm (lua_State *L) {
  static const char *const known[] = {"device", "max_ctas", "min_ctas", "cga_cluster_size", NULL};
  const char *fname = "cuda.nccl.comm";
  const culua_Nccl *nc = check_nccl(L, fname);
  size_t len;
  const char *id = luaL_checklstring(L, 1, &len);
  lua_Integer nranks = luaL_checkinteger(L, 2), rank = luaL_checkinteger(L, 3);
  int ordinal = -1, configured = 0;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId uid;
  Comm *c;
  luaL_argcheck(L, len == sizeof(uid.internal), 1,
                lua_pushfstring(L, "an id from cuda.nccl.unique_id() is %d bytes, got %d", (int)sizeof(uid.internal), (int)len));
  luaL_argcheck(L, nranks >= 1 && nranks <= 1 << 20, 2, lua_pushfstring(L, "nranks must be 1..1048576, got %I", nranks));
  luaL_argcheck(L, rank >= 0 && rank < nranks, 3,
                lua_pushfstring(L, "rank must be 0..%I (nranks - 1), got %I", nranks - 1, rank));
  if (!lua_isnoneornil(L, 4)) {
    configured = read_config(L, 4, fname, known, &cfg);
    if (lua_getfield(L, 4, "device") != LUA_TNIL) ordinal = (int)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  if (configured)
    nccl_need(L, nc, nc->ncclCommInitRankConfig != NULL, 21700, fname, "max_ctas, min_ctas and cga_cluster_size");
  memcpy(uid.internal, id, sizeof(uid.internal));
  c = new_comm(L);
  culua_ctx_open(L, &c->c, ordinal, fname);   /* current: NCCL takes the current device */
  nccl_check(L, nc, configured ? nc->ncclCommInitRankConfig(&c->comm, (int)nranks, uid, (int)rank, &cfg)
                               : nc->ncclCommInitRank(&c->comm, (int)nranks, uid, (int)rank), NULL, fname,
             lua_pushfstring(L, "joining as rank %I of %I on device %d", rank, nranks, c->c.ordinal));
  comm_describe(L, nc, c, fname);
  return 1;
}


/* cuda.nccl.comm_all{0, 1, ...} -> {comm, comm, ...}: one rank a device, in this process */
static int nccl_comm_all (lua_State *L) {
  const char *fname = "cuda.nccl.comm_all";
  const culua_Nccl *nc = check_nccl(L, fname);
  int n, i, devs[64];
  ncclComm_t comms[64];
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (int)luaL_len(L, 1);
  luaL_argcheck(L, n >= 1 && n <= 64, 1, lua_pushfstring(L, "1..64 device ordinals expected, got %d", n));
  for (i = 0; i < n; i++) {
    int j;
    lua_geti(L, 1, i + 1);
    if (!lua_isinteger(L, -1))
      luaL_argerror(L, 1, lua_pushfstring(L, "devices[%d] must be a device ordinal, got %s", i + 1, luaL_typename(L, -1)));
    devs[i] = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    for (j = 0; j < i; j++)
      if (devs[j] == devs[i])
        luaL_argerror(L, 1, lua_pushfstring(L, "device %d is listed twice (NCCL takes a GPU once)", devs[i]));
  }
  /* the comms' userdata first, each holding its device's context: an error
  ** below leaves them closed and collectable */
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    Comm *c = new_comm(L);
    culua_ctx_open(L, &c->c, devs[i], fname);
    lua_rawseti(L, -2, i + 1);
  }
  nccl_check(L, nc, nc->ncclCommInitAll(comms, n, devs), NULL, fname, "making one communicator over the devices");
  for (i = 0; i < n; i++) {
    Comm *c;
    lua_rawgeti(L, -1, i + 1);
    c = (Comm *)lua_touserdata(L, -1);
    c->comm = comms[i];
    comm_describe(L, nc, c, fname);
    lua_pop(L, 1);
  }
  return 1;
}


static int comm_close (lua_State *L) {
  Comm *c = (Comm *)luaL_checkudata(L, 1, CULUA_NCCLCOMM);
  if (c->comm != NULL) {
    const culua_Nccl *nc = culua_load_nccl(NULL);
    ncclResult_t async = ncclSuccess;
    if (culua_ctx_live(&c->c)) {
      /* a comm with an error pending would wait forever on its peers in destroy */
      nc->ncclCommGetAsyncError(c->comm, &async);
      if (c->failed || async != ncclSuccess) nc->ncclCommAbort(c->comm);
      else nc->ncclCommDestroy(c->comm);
    }
    c->comm = NULL;
  }
  culua_ctx_close(&c->c);
  return 0;
}


static int comm_index (lua_State *L) {
  Comm *c = (Comm *)luaL_checkudata(L, 1, CULUA_NCCLCOMM);
  const char *k = lua_tostring(L, 2);
  if (culua_pushmethod(L, CULUA_NCCLCOMM, 2) && !lua_isnil(L, -1)) return 1;
  if (c->comm == NULL && k != NULL && strcmp(k, "closed") != 0)
    return luaL_error(L, "attempt to use a closed %s", CULUA_NCCLCOMM);
  if (k == NULL) lua_pushnil(L);
  else if (strcmp(k, "rank") == 0) lua_pushinteger(L, c->rank);
  else if (strcmp(k, "size") == 0) lua_pushinteger(L, c->size);
  else if (strcmp(k, "device") == 0) culua_pushdevice(L, c->c.ordinal, CULUA_NCCLCOMM);
  else if (strcmp(k, "closed") == 0) lua_pushboolean(L, c->comm == NULL);
  else lua_pushnil(L);
  return 1;
}


static int comm_tostring (lua_State *L) {
  Comm *c = (Comm *)luaL_checkudata(L, 1, CULUA_NCCLCOMM);
  if (c->comm == NULL) lua_pushliteral(L, "cuda.nccl.comm (closed)");
  else lua_pushfstring(L, "cuda.nccl.comm: rank %d of %d on device %d", c->rank, c->size, c->c.ordinal);
  return 1;
}

/*
** comm:split(color [, key [, opts]]) -> comm or nil: a communicator of the
** ranks that give the same color, ordered by key (default: the rank), as
** MPI_Comm_split does; a rank giving color nil takes no part and gets nil.
** Every rank of comm must call it, each from its own process or thread: not
** inside cuda.nccl.group, where NCCL would make the communicator at the
** group's end, after this call has returned. opts are cuda.nccl.comm's but
** device (what they leave unset is NCCL's default); without them the new
** communicator is made as comm was.
*/
static int comm_split (lua_State *L) {
  const char *fname = "split";
  Comm *c = check_comm(L, 1);
  const culua_Nccl *nc = check_nccl(L, fname);
  int color = NCCL_SPLIT_NOCOLOR, key = c->rank, configured = 0;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclResult_t r;
  Comm *nw;
  if (!lua_isnil(L, 2)) {
    lua_Integer v = luaL_checkinteger(L, 2);
    luaL_argcheck(L, v >= 0 && v <= INT_MAX, 2, lua_pushfstring(L, "color must be 0..%d or nil, got %I", INT_MAX, v));
    color = (int)v;
  }
  if (!lua_isnoneornil(L, 3)) {
    lua_Integer v = luaL_checkinteger(L, 3);
    luaL_argcheck(L, v >= INT_MIN && v <= INT_MAX, 3, lua_pushfstring(L, "key must be a C int, got %I", v));
    key = (int)v;
  }
  if (!lua_isnoneornil(L, 4)) configured = read_config(L, 4, fname, config_keys, &cfg);
  if (group_depth > 0)
    luaL_error(L, "%s: not inside cuda.nccl.group (NCCL would make the communicator at the group's end): "
                  "split from each rank's own process or thread", fname);
  nccl_need(L, nc, nc->ncclCommSplit != NULL, 21800, fname, "comm:split");
  nw = new_comm(L);
  culua_ctx_open(L, &nw->c, c->c.ordinal, fname);
  /* into the userdata itself: a split that fails may still leave NCCL's communicator
  ** there, which the collector then aborts */
  r = nc->ncclCommSplit(c->comm, color, key, &nw->comm, configured ? &cfg : NULL);
  if (r != ncclSuccess) {
    nw->failed = 1;
    nccl_fail(L, nc, r, c->comm, fname, lua_pushfstring(L, "splitting rank %d of %d by color %d", c->rank, c->size, color));
  }
  if (nw->comm == NULL) {   /* color nil: the userdata goes with the next collection */
    lua_pushnil(L);
    return 1;
  }
  comm_describe(L, nc, nw, fname);
  return 1;
}

/* }====================================================== */


/* {====================================================== operations */

/* what one operation was given, checked */
typedef struct Op {
  const char *fname;
  Comm *c;
  culua_Array *send, *recv;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root, peer;
  CUstream stream;
} Op;


static ncclDataType_t nccl_type (lua_State *L, const char *fname, culua_Dtype t) {
  switch (t) {
    case CULUA_INT8: return ncclInt8;
    case CULUA_UINT8: return ncclUint8;
    case CULUA_INT32: return ncclInt32;
    case CULUA_UINT32: return ncclUint32;
    case CULUA_INT64: return ncclInt64;
    case CULUA_UINT64: return ncclUint64;
    case CULUA_FLOAT32: return ncclFloat32;
    case CULUA_FLOAT64: return ncclFloat64;
    default:
      luaL_error(L, "%s: NCCL has no %s (int8, uint8, int32, uint32, int64, uint64, float32, float64)",
                 fname, culua_dtype_names[t]);
      return ncclInt8;
  }
}


/* the array at i, on the comm's device */
static culua_Array *op_array (lua_State *L, Op *o, int i, const char *what) {
  culua_Array *a = culua_testarray(L, i, 0);
  if (a == NULL)
    luaL_argerror(L, i, lua_pushfstring(L, "%s must be a cuda.array, got %s", what, luaL_typename(L, i)));
  if (a->c.ordinal != o->c->c.ordinal)
    luaL_error(L, "%s: %s is on device %d but the communicator is on device %d", o->fname, what,
               a->c.ordinal, o->c->c.ordinal);
  return a;
}


/*
** comm:NAME(send [, recv] [, opts]): the arrays and the options table
** {op =, root =, stream =}; recv defaults to send (in place). reduces and
** rooted say whether op and root are options of this operation.
*/
static void read_op (lua_State *L, Op *o, const char *fname, int reduces, int rooted) {
  static const char *const ops[] = {"sum", "prod", "max", "min", "avg", NULL};
  static const ncclRedOp_t opv[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  int opts;
  memset(o, 0, sizeof(*o));
  o->fname = fname;
  o->c = check_comm(L, 1);
  o->send = op_array(L, o, 2, "send");
  if (lua_type(L, 3) == LUA_TUSERDATA) {
    o->recv = op_array(L, o, 3, "recv");
    opts = 4;
  }
  else {
    o->recv = o->send;
    opts = 3;
  }
  if (o->recv->dtype != o->send->dtype)
    luaL_error(L, "%s: send is %s but recv is %s", fname, culua_dtype_names[o->send->dtype],
               culua_dtype_names[o->recv->dtype]);
  o->type = nccl_type(L, fname, o->send->dtype);
  o->op = ncclSum;
  if (lua_isnoneornil(L, opts)) return;
  luaL_argexpected(L, lua_istable(L, opts), opts, "table of options");
  {   /* op and root only where the operation has them */
    const char *known[4];
    int k = 0;
    if (reduces) known[k++] = "op";
    if (rooted) known[k++] = "root";
    known[k++] = "stream";
    known[k] = NULL;
    culua_checkoptions(L, opts, fname, known);
  }
  if (lua_getfield(L, opts, "op") != LUA_TNIL) {
    const char *name = luaL_checkstring(L, -1);
    int i;
    for (i = 0; ops[i] && strcmp(ops[i], name) != 0; i++) {}
    if (ops[i] == NULL)
      luaL_error(L, "%s: op must be one of sum, prod, max, min, avg, got '%s'", fname, name);
    o->op = opv[i];
  }
  if (lua_getfield(L, opts, "root") != LUA_TNIL) {
    lua_Integer r = luaL_checkinteger(L, -1);
    if (r < 0 || r >= o->c->size)
      luaL_error(L, "%s: root must be a rank 0..%d, got %I", fname, o->c->size - 1, r);
    o->root = (int)r;
  }
  if (lua_getfield(L, opts, "stream") != LUA_TNIL) {
    int sidx = lua_gettop(L);
    o->stream = culua_optstream(L, sidx, fname);
    lua_getfield(L, sidx, "device");
    lua_getfield(L, -1, "ordinal");
    if (lua_tointeger(L, -1) != o->c->c.ordinal)
      luaL_error(L, "%s: the stream is on device %d but the communicator is on device %d", fname,
                 (int)lua_tointeger(L, -1), o->c->c.ordinal);
  }
  culua_ctx_enter(L, &o->c->c, CULUA_NCCLCOMM);   /* the checks above may have entered others */
}


static int op_done (lua_State *L, Op *o, const culua_Nccl *nc, ncclResult_t r, const char *what) {
  if (r != ncclSuccess && r != ncclInProgress) {
    o->c->failed = 1;
    nccl_fail(L, nc, r, o->c->comm, o->fname, what);
  }
  lua_settop(L, 1);
  return 1;
}


static void same_length (lua_State *L, Op *o, size_t send, size_t recv, const char *rule) {
  if (o->send->n != send || o->recv->n != recv)
    luaL_error(L, "%s: send has %I elements and recv %I; %s", o->fname, (lua_Integer)o->send->n,
               (lua_Integer)o->recv->n, rule);
}


/* comm:all_reduce(send [, recv], {op = "sum", stream = s}) -> comm */
static int comm_all_reduce (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "all_reduce");
  Op o;
  read_op(L, &o, "all_reduce", 1, 0);
  same_length(L, &o, o.send->n, o.send->n, "they must be equal");
  return op_done(L, &o, nc, nc->ncclAllReduce((void *)o.send->ptr, (void *)o.recv->ptr, o.send->n, o.type,
                                               o.op, o.c->comm, (cudaStream_t)o.stream), "reducing");
}


/* comm:reduce(send [, recv], {op =, root = 0, stream =}) -> comm: the result on root only */
static int comm_reduce (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "reduce");
  Op o;
  read_op(L, &o, "reduce", 1, 1);
  same_length(L, &o, o.send->n, o.send->n, "they must be equal");
  return op_done(L, &o, nc, nc->ncclReduce((void *)o.send->ptr, (void *)o.recv->ptr, o.send->n, o.type,
                                            o.op, o.root, o.c->comm, (cudaStream_t)o.stream), "reducing");
}


/* comm:broadcast(send [, recv], {root = 0, stream =}) -> comm: root's send into every recv */
static int comm_broadcast (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "broadcast");
  Op o;
  read_op(L, &o, "broadcast", 0, 1);
  same_length(L, &o, o.send->n, o.send->n, "they must be equal");
  return op_done(L, &o, nc, nc->ncclBroadcast((void *)o.send->ptr, (void *)o.recv->ptr, o.send->n, o.type,
                                               o.root, o.c->comm, (cudaStream_t)o.stream), "broadcasting");
}


/* comm:all_gather(send, recv, {stream =}) -> comm: recv holds size sends, by rank */
static int comm_all_gather (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "all_gather");
  Op o;
  read_op(L, &o, "all_gather", 0, 0);
  same_length(L, &o, o.send->n, o.send->n * (size_t)o.c->size, "recv must hold size x send");
  return op_done(L, &o, nc, nc->ncclAllGather((void *)o.send->ptr, (void *)o.recv->ptr, o.send->n, o.type,
                                               o.c->comm, (cudaStream_t)o.stream), "gathering");
}


/* comm:reduce_scatter(send, recv, {op =, stream =}) -> comm: rank r gets the r-th block of the sum */
static int comm_reduce_scatter (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "reduce_scatter");
  Op o;
  read_op(L, &o, "reduce_scatter", 1, 0);
  same_length(L, &o, o.recv->n * (size_t)o.c->size, o.recv->n, "send must hold size x recv");
  return op_done(L, &o, nc, nc->ncclReduceScatter((void *)o.send->ptr, (void *)o.recv->ptr, o.recv->n, o.type,
                                                   o.op, o.c->comm, (cudaStream_t)o.stream), "reducing and scattering");
}


/* the peer argument of send and recv, at 3 (moved out of read_op's way) */
static int take_peer (lua_State *L, const char *fname) {
  Comm *c = check_comm(L, 1);
  lua_Integer peer = luaL_checkinteger(L, 3);
  if (peer < 0 || peer >= c->size)
    luaL_argerror(L, 3, lua_pushfstring(L, "%s: peer must be a rank 0..%d, got %I", fname, c->size - 1, peer));
  lua_remove(L, 3);
  return (int)peer;
}


/* comm:send(buf, peer, {stream =}) -> comm */
static int comm_send (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "send");
  int peer = take_peer(L, "send");
  Op o;
  luaL_argexpected(L, lua_isnoneornil(L, 3) || lua_istable(L, 3), 4, "table of options");
  read_op(L, &o, "send", 0, 0);
  return op_done(L, &o, nc, nc->ncclSend((void *)o.send->ptr, o.send->n, o.type, peer, o.c->comm,
                                          (cudaStream_t)o.stream), "sending");
}


/* comm:recv(buf, peer, {stream =}) -> comm */
static int comm_recv (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "recv");
  int peer = take_peer(L, "recv");
  Op o;
  luaL_argexpected(L, lua_isnoneornil(L, 3) || lua_istable(L, 3), 4, "table of options");
  read_op(L, &o, "recv", 0, 0);
  return op_done(L, &o, nc, nc->ncclRecv((void *)o.send->ptr, o.send->n, o.type, peer, o.c->comm,
                                          (cudaStream_t)o.stream), "receiving");
}

/* }====================================================== */


/* {====================================================== module functions */

/* cuda.nccl.version() -> major, minor, patch; raises without NCCL */
static int nccl_version (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "cuda.nccl.version");
  int v = 0;
  nc->ncclGetVersion(&v);
  /* 2.9 and later: major*10000 + minor*100 + patch */
  lua_pushinteger(L, v / 10000);
  lua_pushinteger(L, v / 100 % 100);
  lua_pushinteger(L, v % 100);
  return 3;
}


/* cuda.nccl.available() -> true, library path | fail, why: a probe, never raises */
static int nccl_available (lua_State *L) {
  const char *why = NULL;
  if (culua_load_nccl(&why) == NULL) {
    luaL_pushfail(L);
    lua_pushstring(L, why);
  }
  else {
    lua_pushboolean(L, 1);
    lua_pushstring(L, culua_nccl_path());
  }
  return 2;
}


static int group_finish (lua_State *L, int status, lua_KContext ctx) {
  const culua_Nccl *nc = culua_load_nccl(NULL);
  ncclResult_t r = nc->ncclGroupEnd();
  (void)ctx;
  group_depth--;
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L);   /* fn's error, after closing the group */
  if (r != ncclSuccess && r != ncclInProgress)
    nccl_fail(L, nc, r, NULL, "cuda.nccl.group", "ending the group");
  return lua_gettop(L) - 1;
}


/*
** cuda.nccl.group(fn, ...) -> fn's results: the calls fn makes are one
** NCCL group (ncclGroupStart/End), needed when one thread drives several
** ranks. The group is ended even when fn raises; then the error goes on.
*/
static int nccl_group (lua_State *L) {
  const culua_Nccl *nc = check_nccl(L, "cuda.nccl.group");
  luaL_checktype(L, 1, LUA_TFUNCTION);
  nccl_check(L, nc, nc->ncclGroupStart(), NULL, "cuda.nccl.group", "starting a group");
  group_depth++;
  lua_pushvalue(L, 1);
  lua_insert(L, 2);          /* fn, fn, args...: the first stays for group_finish's count */
  return group_finish(L, lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, group_finish), 0);
}

/* }====================================================== */


static const luaL_Reg comm_meta[] = {
  {"__index", comm_index},
  {"__tostring", comm_tostring},
  {"__gc", comm_close},
  {"__close", comm_close},
  {NULL, NULL}
};

static const luaL_Reg comm_methods[] = {
  {"all_reduce", comm_all_reduce},
  {"reduce", comm_reduce},
  {"broadcast", comm_broadcast},
  {"all_gather", comm_all_gather},
  {"reduce_scatter", comm_reduce_scatter},
  {"send", comm_send},
  {"recv", comm_recv},
  {"split", comm_split},
  {"close", comm_close},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"version", nccl_version},
  {"available", nccl_available},
  {"unique_id", nccl_unique_id},
  {"comm", nccl_comm},
  {"comm_all", nccl_comm_all},
  {"group", nccl_group},
  {NULL, NULL}
};


void culua_open_nccl (lua_State *L) {
  culua_newmeta(L, CULUA_NCCLCOMM, comm_meta, comm_methods);
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "nccl");
}
