/*
** reference.c
** The catalog's CPU references, which the tests hold the GPU's results
** against (cuda.catalog.reference.<family>): matmul, scan, histogram, sort
** and argsort, and LU with its solve and residual. Plain C on host arrays,
** in double precision where a family sums.
*/

#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "culua_int.h"


/* {====================================================== CPU references */

/* the rows and columns of a 2-D host array at i */
static culua_HostArray *check_matrix (lua_State *L, int i, size_t *rows, size_t *cols) {
  culua_HostArray *h = culua_testhostarray(L, i);
  if (h == NULL) luaL_typeerror(L, i, CULUA_HOSTARRAY);
  luaL_argcheck(L, h->twod, i, "a 2-D host array expected");
  *rows = h->rows;
  *cols = h->cols;
  return h;
}


/*
** _catalog.ref_matmul(A, B, C [, alpha, beta [, scale_a, scale_b]]):
** C = alpha*scale_a*scale_b*A*B + beta*C on host arrays of any dtypes (the
** low-precision ones read exactly and C rounded once, through half.c),
** accumulated in double, in C: the reference the tests and the lab compare
** the GPU against (a Lua loop would take minutes at 1000^3). The scales are
** fp8's per-tensor ones, as cuBLASLt's (default 1).
*/
static int ref_matmul (lua_State *L) {
  size_t m, k, k2, n, m2, n2, i, j, q;
  culua_HostArray *a = check_matrix(L, 1, &m, &k), *b = check_matrix(L, 2, &k2, &n);
  culua_HostArray *c = check_matrix(L, 3, &m2, &n2);
  double alpha = luaL_optnumber(L, 4, 1), beta = luaL_optnumber(L, 5, 0);
  double scale = luaL_optnumber(L, 6, 1) * luaL_optnumber(L, 7, 1);
  double *row, *bd;
  size_t ea = culua_dtype_size[a->dtype], eb = culua_dtype_size[b->dtype], ec = culua_dtype_size[c->dtype];
  if (k2 != k || m2 != m || n2 != n)
    return luaL_error(L, "cuda.catalog.reference.matmul: shapes %dx%d * %dx%d -> %dx%d do not fit", (int)m, (int)k,
                      (int)k2, (int)n, (int)m2, (int)n2);
  row = (double *)lua_newuserdatauv(L, n * sizeof(double), 0);
  /* B widened to double once (k x n): every row of A reads all of it, and a
  ** conversion an element and product made 1000^3 take seconds */
  bd = (double *)lua_newuserdatauv(L, (k * n > 0 ? k * n : 1) * sizeof(double), 0);
  for (q = 0; q < k * n; q++) bd[q] = culua_elem_double(b->dtype, (const char *)b->data + q * eb);
  for (i = 0; i < m; i++) {
    for (j = 0; j < n; j++) row[j] = 0;
    for (q = 0; q < k; q++) {   /* i-k-j order: B is read along its rows */
      double x = culua_elem_double(a->dtype, (char *)a->data + (i * k + q) * ea);
      const double *brow = bd + q * n;
      for (j = 0; j < n; j++) row[j] += x * brow[j];
    }
    for (j = 0; j < n; j++) {
      char *p = (char *)c->data + (i * n + j) * ec;
      double old = beta != 0 ? culua_elem_double(c->dtype, p) : 0;
      culua_elem_set_double(c->dtype, p, alpha * scale * row[j] + beta * old);
    }
  }
  lua_settop(L, 3);
  return 1;
}


/*
** _catalog.ref_scan(hx, hy, op, exclusive [, init]): the prefix scan of host
** array hx into hy (which may be hx), op "add", "min" or "max". Integers
** in their own width, added as unsigned so that they wrap as the GPU's do:
** exact. Floats accumulate in double and are rounded once an element, so
** float32 results are the float64 scan's rounded: the tests compare the
** GPU's (a float32 sum, in another order) with a tolerance. float16 and
** bfloat16 the same way, read and written through half.c's conversions
** (culua_elem_double: the exact stored value; culua_elem_set_double: one
** rounding, to nearest even), into hy of their dtype or of float32, init
** rounded to float32 as the GPU's accumulator is.
*/
#define SCAN_INT(T, U, LO, HI) {                                              \
    const T *x = (const T *)hx->data; T *y = (T *)hy->data;                  \
    T acc = op == 0 ? 0 : op == 1 ? (HI) : (LO);                             \
    if (!lua_isnoneornil(L, 5)) acc = (T)(U)luaL_checkinteger(L, 5);         \
    for (i = 0; i < n; i++) {                                                 \
      T v = x[i], before = acc;                                               \
      if (op == 0) acc = (T)((U)acc + (U)v);                                  \
      else if (op == 1) acc = v < acc ? v : acc;                              \
      else acc = acc < v ? v : acc;                                           \
      y[i] = exclusive ? before : acc;                                        \
    } }

#define SCAN_FLOAT(T, INF) {                                                  \
    const T *x = (const T *)hx->data; T *y = (T *)hy->data;                  \
    double acc = op == 0 ? 0 : op == 1 ? (INF) : -(INF);                     \
    if (!lua_isnoneornil(L, 5)) acc = (T)luaL_checknumber(L, 5);             \
    for (i = 0; i < n; i++) {                                                 \
      double v = x[i], before = acc;                                          \
      if (op == 0) acc += v;                                                  \
      else if (op == 1) acc = v < acc ? v : acc;                              \
      else acc = acc < v ? v : acc;                                           \
      y[i] = (T)(exclusive ? before : acc);                                   \
    } }

static void scan_lowp (lua_State *L, const culua_HostArray *hx, culua_HostArray *hy, int op, int exclusive) {
  size_t i, ex = culua_dtype_size[hx->dtype], ey = culua_dtype_size[hy->dtype];
  double acc = op == 0 ? 0 : op == 1 ? HUGE_VAL : -HUGE_VAL;
  if (!lua_isnoneornil(L, 5)) acc = (float)luaL_checknumber(L, 5);
  for (i = 0; i < hx->n; i++) {
    double v = culua_elem_double(hx->dtype, (const char *)hx->data + i * ex), before = acc;
    if (op == 0) acc += v;
    else if (op == 1) acc = v < acc ? v : acc;
    else acc = acc < v ? v : acc;
    culua_elem_set_double(hy->dtype, (char *)hy->data + i * ey, exclusive ? before : acc);
  }
}

static int ref_scan (lua_State *L) {
  static const char *const ops[] = {"add", "min", "max", NULL};
  culua_HostArray *hx = culua_testhostarray(L, 1), *hy = culua_testhostarray(L, 2);
  int op, exclusive;
  size_t i, n;
  if (hx == NULL) luaL_typeerror(L, 1, CULUA_HOSTARRAY);
  if (hy == NULL) luaL_typeerror(L, 2, CULUA_HOSTARRAY);
  op = luaL_checkoption(L, 3, "add", ops);
  exclusive = lua_toboolean(L, 4);
  n = hx->n;
  if ((hy->dtype != hx->dtype && !(culua_dtype_islowp(hx->dtype) && hy->dtype == CULUA_FLOAT32)) || hy->n != n)
    return luaL_error(L, "cuda.catalog.reference.scan: hx is %s[%d] but hy is %s[%d]", culua_dtype_names[hx->dtype],
                      (int)n, culua_dtype_names[hy->dtype], (int)hy->n);
  switch (hx->dtype) {
    case CULUA_INT32: SCAN_INT(int32_t, uint32_t, INT32_MIN, INT32_MAX) break;
    case CULUA_UINT32: SCAN_INT(uint32_t, uint32_t, 0, UINT32_MAX) break;
    case CULUA_INT64: SCAN_INT(int64_t, uint64_t, INT64_MIN, INT64_MAX) break;
    case CULUA_UINT64: SCAN_INT(uint64_t, uint64_t, 0, UINT64_MAX) break;
    case CULUA_FLOAT32: SCAN_FLOAT(float, HUGE_VAL) break;
    case CULUA_FLOAT64: SCAN_FLOAT(double, HUGE_VAL) break;
    case CULUA_FLOAT16: case CULUA_BFLOAT16: scan_lowp(L, hx, hy, op, exclusive); break;
    default:
      return luaL_error(L, "cuda.catalog.reference.scan: dtype %s is not scanned (int32, uint32, int64, uint64, float32, "
                        "float64, float16, bfloat16)",
                        culua_dtype_names[hx->dtype]);
  }
  lua_settop(L, 2);
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** histogram
** =======================================================
*/

/*
** _catalog.ref_histogram(hx, hcounts, bins, lo, hi, accumulate) -> left out:
** equal-width bins over [lo, hi), the bin of v floor((v - lo) * bins /
** (hi - lo)). Integers exactly, in 64-bit unsigned arithmetic (lua/catalog/
** histogram.lua keeps lo and hi within [-2^32, 2^33] and bins below 2^30, so
** the product fits); floats as (v - lo) * scale in double, scale = bins /
** (hi - lo), each operation rounded once as the kernel's __dsub_rn and
** __dmul_rn are (volatile stops the compiler from contracting them), and a
** product that rounds up to `bins` for v < hi clamped to the last bin. Values outside [lo, hi), NaNs
** included, are not counted: their number is returned.
*/
static int64_t hist_bin_int (int64_t v, int64_t lo, int64_t hi, uint64_t bins) {
  if (v < lo || v >= hi) return -1;
  return (int64_t)(((uint64_t)(v - lo) * bins) / (uint64_t)(hi - lo));
}

static int64_t hist_bin_float (double v, double lo, double hi, double scale, int64_t bins) {
  volatile double d;
  int64_t b;
  if (!(v >= lo && v < hi)) return -1;
  d = v - lo;
  d = d * scale;
  b = (int64_t)floor(d);
  return b >= bins ? bins - 1 : b;
}

static int ref_histogram (lua_State *L) {
  culua_HostArray *hx = culua_testhostarray(L, 1), *hc = culua_testhostarray(L, 2);
  lua_Integer bins = luaL_checkinteger(L, 3);
  int accumulate = lua_toboolean(L, 6);
  int64_t ilo = 0, ihi = 0, left = 0;
  double flo = 0, fhi = 0, scale = 0;
  size_t i;
  if (hx == NULL) luaL_typeerror(L, 1, CULUA_HOSTARRAY);
  if (hc == NULL) luaL_typeerror(L, 2, CULUA_HOSTARRAY);
  if (hx->data == NULL || hc->data == NULL)
    return luaL_error(L, "cuda.catalog.reference.histogram: %s is closed", hx->data == NULL ? "hx" : "hcounts");
  if (hc->dtype != CULUA_UINT32 && hc->dtype != CULUA_UINT64)
    return luaL_error(L, "cuda.catalog.reference.histogram: hcounts has dtype %s; expected uint32 or uint64",
                      culua_dtype_names[hc->dtype]);
  if (bins < 1 || (size_t)bins > hc->n)
    return luaL_error(L, "cuda.catalog.reference.histogram: bins (%d) must be 1 .. #hcounts (%d)",
                      (int)bins, (int)hc->n);
  switch (hx->dtype) {
    case CULUA_UINT8: case CULUA_UINT16: case CULUA_INT32: case CULUA_UINT32:
      ilo = luaL_checkinteger(L, 4); ihi = luaL_checkinteger(L, 5); break;
    case CULUA_FLOAT32: case CULUA_FLOAT64: case CULUA_FLOAT16: case CULUA_BFLOAT16:
    case CULUA_FLOAT8_E4M3: case CULUA_FLOAT8_E5M2:
      flo = luaL_checknumber(L, 4); fhi = luaL_checknumber(L, 5);
      scale = (double)bins / (fhi - flo);   /* as lua/catalog/histogram.lua works it out */
      break;
    default:
      return luaL_error(L, "cuda.catalog.reference.histogram: hx has dtype %s; expected one of "
                        "uint8, uint16, int32, uint32, float32, float64, float16, bfloat16, float8_e4m3, float8_e5m2",
                        culua_dtype_names[hx->dtype]);
  }
  if (!accumulate) memset(hc->data, 0, (size_t)bins * culua_dtype_size[hc->dtype]);
  for (i = 0; i < hx->n; i++) {
    int64_t b;
    switch (hx->dtype) {
      case CULUA_UINT8: b = hist_bin_int(((const uint8_t *)hx->data)[i], ilo, ihi, (uint64_t)bins); break;
      case CULUA_UINT16: b = hist_bin_int(((const uint16_t *)hx->data)[i], ilo, ihi, (uint64_t)bins); break;
      case CULUA_INT32: b = hist_bin_int(((const int32_t *)hx->data)[i], ilo, ihi, (uint64_t)bins); break;
      case CULUA_UINT32: b = hist_bin_int(((const uint32_t *)hx->data)[i], ilo, ihi, (uint64_t)bins); break;
      case CULUA_FLOAT32: b = hist_bin_float(((const float *)hx->data)[i], flo, fhi, scale, bins); break;
      case CULUA_FLOAT64: b = hist_bin_float(((const double *)hx->data)[i], flo, fhi, scale, bins); break;
      default:   /* float16, bfloat16, fp8: the exact stored value (half.c) */
        b = hist_bin_float(culua_elem_double(hx->dtype, (const char *)hx->data + i * culua_dtype_size[hx->dtype]),
                           flo, fhi, scale, bins);
        break;
    }
    if (b < 0) left++;
    else if (hc->dtype == CULUA_UINT32) ((uint32_t *)hc->data)[b]++;
    else ((uint64_t *)hc->data)[b]++;
  }
  lua_pushinteger(L, (lua_Integer)left);
  return 1;
}

/* }====================================================== */

/* {====================================================== CPU references: sort */

/* a key and its position: qsort is not stable, the position makes it so */
typedef struct SortItem {
  uint64_t key;
  size_t pos;
} SortItem;

static int sortitem_cmp (const void *a, const void *b) {
  const SortItem *x = (const SortItem *)a, *y = (const SortItem *)b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

/*
** How a key dtype sorts: 0 unsigned, 1 signed, 2 float (-1: not a key);
** for floats, the largest bits that are no NaN once the sign is cleared
** (float8_e4m3 has no infinity: 448, 0x7e) and the NaN the GPU writes back
** (kernels/culua/sort.cuh's KeyBits: the canonical quiet NaN of float32 and
** float64, the NaN culua's conversions make for the others).
*/
static int key_kind (culua_Dtype t, uint64_t *top, uint64_t *qnan) {
  switch (t) {
    case CULUA_UINT8: case CULUA_UINT16: case CULUA_UINT32: case CULUA_UINT64: return 0;
    case CULUA_INT8: case CULUA_INT16: case CULUA_INT32: case CULUA_INT64: return 1;
    case CULUA_FLOAT8_E4M3: *top = 0x7e; *qnan = 0x7f; return 2;
    case CULUA_FLOAT8_E5M2: *top = 0x7c; *qnan = 0x7f; return 2;
    case CULUA_FLOAT16: *top = 0x7c00; *qnan = 0x7fff; return 2;
    case CULUA_BFLOAT16: *top = 0x7f80; *qnan = 0x7fff; return 2;
    case CULUA_FLOAT32: *top = 0x7f800000u; *qnan = 0x7fc00000u; return 2;
    case CULUA_FLOAT64: *top = 0x7ff0000000000000ull; *qnan = 0x7ff8000000000000ull; return 2;
    default: return -1;
  }
}

/* the bits of an element of es bytes at p, and back */
static uint64_t get_bits (const void *p, size_t es) {
  uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
  switch (es) {
    case 1: memcpy(&u8, p, 1); return u8;
    case 2: memcpy(&u16, p, 2); return u16;
    case 4: memcpy(&u32, p, 4); return u32;
    default: memcpy(&u64, p, 8); return u64;
  }
}

static void set_bits (void *p, size_t es, uint64_t v) {
  uint8_t u8 = (uint8_t)v; uint16_t u16 = (uint16_t)v; uint32_t u32 = (uint32_t)v;
  switch (es) {
    case 1: memcpy(p, &u8, 1); break;
    case 2: memcpy(p, &u16, 2); break;
    case 4: memcpy(p, &u32, 4); break;
    default: memcpy(p, &v, 8); break;
  }
}

/*
** The key at p as the unsigned "radix bits" the GPU sorts (kernels/sort.cu):
** the sign bit of signed keys flipped; of floats, every bit when negative
** and the sign bit otherwise; inverted when descending; every NaN all ones
** in either order, so that it sorts last.
*/
static uint64_t radix_bits (culua_Dtype t, const void *p, int desc) {
  size_t es = culua_dtype_size[t];
  uint64_t sign = (uint64_t)1 << (8 * es - 1), all = sign | (sign - 1), v = get_bits(p, es), r, top = 0, qnan;
  switch (key_kind(t, &top, &qnan)) {
    case 0: r = v; break;
    case 1: r = v ^ sign; break;
    default:
      if ((v & ~sign) > top) return all;
      r = (v & sign) ? ~v & all : v ^ sign;
      break;
  }
  return desc ? ~r & all : r;
}

/* a NaN key as the GPU writes it back: the canonical NaN */
static void canonical_nan (culua_Dtype t, void *p) {
  size_t es = culua_dtype_size[t];
  uint64_t top, qnan, sign = (uint64_t)1 << (8 * es - 1);
  if (key_kind(t, &top, &qnan) == 2 && (get_bits(p, es) & ~sign) > top) set_bits(p, es, qnan);
}

/* move n elements of size `es` at data into the order of items, through tmp */
static void permute (char *data, size_t es, const SortItem *items, size_t n, char *tmp) {
  size_t j;
  for (j = 0; j < n; j++) memcpy(tmp + j * es, data + items[j].pos * es, es);
  memcpy(data, tmp, n * es);
}

/*
** _catalog.ref_sort(hkeys, hvalues|nil, descending, begin_bit, end_bit):
** the stable sort of cuda.catalog.sort on host arrays, in place, in the
** GPU's order: by bits begin_bit .. end_bit-1 of the keys' radix bits,
** equal keys in their input order; NaN keys come out as the GPU writes
** them. qsort on (key, position) pairs: n log n, fine for a reference.
*/
static int ref_sort (lua_State *L) {
  culua_HostArray *k = culua_testhostarray(L, 1), *v = NULL;
  int desc = lua_toboolean(L, 3);
  lua_Integer b0 = luaL_checkinteger(L, 4), b1 = luaL_checkinteger(L, 5);
  size_t n, i, ks, width, es;
  uint64_t mask, top, qnan;
  SortItem *items;
  char *tmp;
  if (k == NULL) return luaL_typeerror(L, 1, CULUA_HOSTARRAY);
  if (!lua_isnoneornil(L, 2) && (v = culua_testhostarray(L, 2)) == NULL)
    return luaL_typeerror(L, 2, CULUA_HOSTARRAY);
  if (key_kind(k->dtype, &top, &qnan) < 0)
    return luaL_error(L, "cuda.catalog.reference.sort: keys of dtype %s are not sorted", culua_dtype_names[k->dtype]);
  n = k->n;
  ks = culua_dtype_size[k->dtype];
  width = 8 * ks;
  if (v != NULL && v->n != n)
    return luaL_error(L, "cuda.catalog.reference.sort: hvalues has %d elements but hkeys has %d", (int)v->n, (int)n);
  if (b0 < 0 || b1 > (lua_Integer)width || b0 >= b1)
    return luaL_error(L, "cuda.catalog.reference.sort: bits %d..%d are not within 0..%d", (int)b0, (int)b1, (int)width);
  mask = (b1 - b0 == 64) ? ~(uint64_t)0 : (((uint64_t)1 << (b1 - b0)) - 1);
  es = v != NULL && culua_dtype_size[v->dtype] > ks ? culua_dtype_size[v->dtype] : ks;
  items = (SortItem *)lua_newuserdatauv(L, (n ? n : 1) * sizeof(SortItem), 0);
  tmp = (char *)lua_newuserdatauv(L, (n ? n : 1) * es, 0);
  for (i = 0; i < n; i++) {
    items[i].key = (radix_bits(k->dtype, (const char *)k->data + i * ks, desc) >> b0) & mask;
    items[i].pos = i;
  }
  qsort(items, n, sizeof(SortItem), sortitem_cmp);
  permute((char *)k->data, ks, items, n, tmp);
  for (i = 0; i < n; i++) canonical_nan(k->dtype, (char *)k->data + i * ks);
  if (v != NULL) permute((char *)v->data, culua_dtype_size[v->dtype], items, n, tmp);
  lua_settop(L, 1);
  return 1;
}

/* }====================================================== */


/* {====================================================== solve: LU references */

/* a host array's elements as a new double buffer (a userdata on the stack) */
static double *to_doubles (lua_State *L, const culua_HostArray *h) {
  double *w = (double *)lua_newuserdatauv(L, (h->n ? h->n : 1) * sizeof(double), 0);
  size_t i, e = culua_dtype_size[h->dtype];
  for (i = 0; i < h->n; i++) w[i] = culua_elem_double(h->dtype, (const char *)h->data + i * e);
  return w;
}

static void from_doubles (culua_HostArray *h, const double *w) {
  size_t i, e = culua_dtype_size[h->dtype];
  for (i = 0; i < h->n; i++) culua_elem_set_double(h->dtype, (char *)h->data + i * e, w[i]);
}

/* the n of a square float host array at i */
static culua_HostArray *check_square (lua_State *L, int i, const char *fname, size_t *n) {
  size_t rows, cols;
  culua_HostArray *h = check_matrix(L, i, &rows, &cols);
  if (h->dtype != CULUA_FLOAT32 && h->dtype != CULUA_FLOAT64)
    luaL_error(L, "%s: the matrix has dtype %s; expected float32 or float64", fname, culua_dtype_names[h->dtype]);
  if (rows != cols) luaL_error(L, "%s: the matrix is %dx%d, not square", fname, (int)rows, (int)cols);
  *n = rows;
  return h;
}

static culua_HostArray *check_pivots (lua_State *L, int i, const char *fname, size_t n) {
  culua_HostArray *p = culua_testhostarray(L, i);
  if (p == NULL) luaL_typeerror(L, i, CULUA_HOSTARRAY);
  if (p->dtype != CULUA_INT32 || p->n < n)
    luaL_error(L, "%s: ipiv must be an int32 host array of at least %d elements", fname, (int)n);
  return p;
}


/*
** _catalog.ref_lu(hA, hipiv) -> info: LAPACK's unblocked getrf on the
** row-major n x n host array hA, in double whatever its dtype: the pivot of
** column j is the first row of largest magnitude among rows j..n-1 (as
** i?amax), the rows are swapped whole, the column below scaled by the pivot
** and the rest updated by a rank-1 step. A zero pivot is skipped as getrf
** skips it, and the first one's 1-based index is returned (0: none).
*/
static int ref_lu (lua_State *L) {
  size_t n, i, j, c;
  culua_HostArray *ha = check_square(L, 1, "cuda.catalog.reference.lu", &n);
  culua_HostArray *hp = check_pivots(L, 2, "cuda.catalog.reference.lu", n);
  int32_t *ipiv = (int32_t *)hp->data;
  double *w = to_doubles(L, ha);
  lua_Integer info = 0;
  for (j = 0; j < n; j++) {
    size_t p = j;
    double best = fabs(w[j * n + j]), pv;
    for (i = j + 1; i < n; i++)
      if (fabs(w[i * n + j]) > best) { best = fabs(w[i * n + j]); p = i; }
    ipiv[j] = (int32_t)(p + 1);
    if (p != j)
      for (c = 0; c < n; c++) { double t = w[j * n + c]; w[j * n + c] = w[p * n + c]; w[p * n + c] = t; }
    pv = w[j * n + j];
    if (pv == 0) {
      if (info == 0) info = (lua_Integer)j + 1;
      continue;
    }
    for (i = j + 1; i < n; i++) {
      double l = w[i * n + j] / pv;
      double *ri = w + i * n;
      const double *rj = w + j * n;
      ri[j] = l;
      for (c = j + 1; c < n; c++) ri[c] -= l * rj[c];
    }
  }
  from_doubles(ha, w);
  lua_pushinteger(L, info);
  return 1;
}


/* the rows and columns of a right-hand side host array: n x k, or 1-D of n*k */
static culua_HostArray *check_rhs (lua_State *L, int i, const char *fname, size_t n, size_t *k) {
  culua_HostArray *h = culua_testhostarray(L, i);
  if (h == NULL) luaL_typeerror(L, i, CULUA_HOSTARRAY);
  if (h->twod ? h->rows != n : (n == 0 || h->n % n != 0))
    luaL_error(L, "%s: the right-hand sides do not have %d rows", fname, (int)n);
  *k = h->twod ? h->cols : h->n / n;
  return h;
}


/* _catalog.ref_lu_solve(hLU, hipiv, hB): hB overwritten with X, from ref_lu's factors, in double */
static int ref_lu_solve (lua_State *L) {
  size_t n, k, i, j, c;
  culua_HostArray *hl = check_square(L, 1, "cuda.catalog.reference.lu_solve", &n);
  culua_HostArray *hp = check_pivots(L, 2, "cuda.catalog.reference.lu_solve", n);
  culua_HostArray *hb = check_rhs(L, 3, "cuda.catalog.reference.lu_solve", n, &k);
  const int32_t *ipiv = (const int32_t *)hp->data;
  double *lu = to_doubles(L, hl), *x = to_doubles(L, hb);
  for (i = 0; i < n; i++) {
    size_t p = (size_t)ipiv[i] - 1;
    if (ipiv[i] < 1 || p >= n) return luaL_error(L, "cuda.catalog.reference.lu_solve: ipiv[%d] = %d is out of 1..%d", (int)i + 1, (int)ipiv[i], (int)n);
    if (p != i)
      for (c = 0; c < k; c++) { double t = x[i * k + c]; x[i * k + c] = x[p * k + c]; x[p * k + c] = t; }
  }
  for (i = 0; i < n; i++)           /* L y = P b, L unit lower */
    for (j = 0; j < i; j++)
      for (c = 0; c < k; c++) x[i * k + c] -= lu[i * n + j] * x[j * k + c];
  for (i = n; i-- > 0; ) {           /* U x = y */
    for (j = i + 1; j < n; j++)
      for (c = 0; c < k; c++) x[i * k + c] -= lu[i * n + j] * x[j * k + c];
    for (c = 0; c < k; c++) x[i * k + c] /= lu[i * n + i];
  }
  from_doubles(hb, x);
  lua_settop(L, 3);
  return 1;
}


/*
** _catalog.ref_lu_residual(hA, hX, hB) -> ||B - A X|| / (||A|| ||X||), in
** infinity norms (largest row sum of magnitudes), in double: the tests divide
** by n * eps for LAPACK's ratio. NaN when X is zero or not finite.
*/
static int ref_lu_residual (lua_State *L) {
  size_t n, k, k2, i, j, c;
  culua_HostArray *ha = check_square(L, 1, "cuda.catalog.reference.lu_residual", &n);
  culua_HostArray *hx = check_rhs(L, 2, "cuda.catalog.reference.lu_residual", n, &k);
  culua_HostArray *hb = check_rhs(L, 3, "cuda.catalog.reference.lu_residual", n, &k2);
  double *a, *x, *b, *r, na = 0, nx = 0, nr = 0;
  if (k2 != k) return luaL_error(L, "cuda.catalog.reference.lu_residual: X has %d columns but B has %d", (int)k, (int)k2);
  a = to_doubles(L, ha); x = to_doubles(L, hx); b = to_doubles(L, hb);
  r = (double *)lua_newuserdatauv(L, (k ? k : 1) * sizeof(double), 0);
  for (i = 0; i < n; i++) {
    double sa = 0, sx = 0, sr = 0;
    for (c = 0; c < k; c++) r[c] = b[i * k + c];
    for (j = 0; j < n; j++) {
      double aij = a[i * n + j];
      sa += fabs(aij);
      for (c = 0; c < k; c++) r[c] -= aij * x[j * k + c];
    }
    for (c = 0; c < k; c++) { sr += fabs(r[c]); sx += fabs(x[i * k + c]); }
    if (sa != sa || sa > na) na = sa;   /* a NaN sticks */
    if (sx != sx || sx > nx) nx = sx;
    if (sr != sr || sr > nr) nr = sr;
  }
  lua_pushnumber(L, nr / (na * nx));
  return 1;
}

/* }====================================================== */


static const luaL_Reg reference_funcs[] = {
  {"ref_matmul", ref_matmul},
  {"ref_scan", ref_scan},
  {"ref_histogram", ref_histogram},
  {"ref_sort", ref_sort},
  {"ref_lu", ref_lu},
  {"ref_lu_solve", ref_lu_solve},
  {"ref_lu_residual", ref_lu_residual},
  {NULL, NULL}
};


/* the references join the catalog's C functions (cuda._catalog.ref_*) */
void culua_open_reference (lua_State *L) {
  lua_getfield(L, -1, "_catalog");
  luaL_setfuncs(L, reference_funcs, 0);
  lua_pop(L, 1);
}
