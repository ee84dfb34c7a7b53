/*
** t/cudashim.c
** A driver library in front of the real libcuda.so.1, for the tests of
** what culua says where a device or driver lacks a feature that the test
** GPU has (an H100 has them all). culua opens it by CULUA_LIBCUDA and finds
** the real driver's entry points through it, except that
**   CULUA_SHIM_ZERO=19,83,89   cuDeviceGetAttribute answers 0 for these
**                              attributes (CU_DEVICE_ATTRIBUTE_* numbers)
**   CULUA_SHIM_HIDE=cuMemAdvise,cuMemPrefetchAsync
**                              cuGetProcAddress finds no such entry point
**   CULUA_SHIM_REAL=path       the driver behind it (default libcuda.so.1)
** lua/tap.lua's T.cuda_shim builds it with cc where a test needs it. It
** needs no CUDA header: it only passes pointers through.
*/

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int Result;   /* CUresult: 0 success */
#define NOT_INITIALIZED 3
#define NOT_FOUND 500
#define SYMBOL_NOT_FOUND 1   /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */

typedef Result (*GetProc) (const char *, void **, int, unsigned long long, int *);
typedef Result (*GetAttr) (int *, int, int);
typedef Result (*GetVersion) (int *);

/* the two names culua's loader looks up in the library it opens */
Result cuDriverGetVersion (int *v);
Result cuGetProcAddress_v2 (const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

static void *real;
static GetAttr real_getattr;


static void *real_sym (const char *name) {
  if (real == NULL) {
    const char *path = getenv("CULUA_SHIM_REAL");
    real = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (real == NULL) return NULL;
  }
  return dlsym(real, name);
}


/* whether the comma-separated list in environment variable var holds word */
static int listed (const char *var, const char *word) {
  const char *s = getenv(var);
  size_t n = strlen(word);
  while (s && *s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len == n && strncmp(s, word, n) == 0) return 1;
    s = end ? end + 1 : NULL;
  }
  return 0;
}


static Result shim_getattr (int *v, int attr, int dev) {
  char num[16];
  Result r = real_getattr(v, attr, dev);
  snprintf(num, sizeof(num), "%d", attr);
  if (r == 0 && listed("CULUA_SHIM_ZERO", num)) *v = 0;
  return r;
}


Result cuDriverGetVersion (int *v) {
  GetVersion f;
  *(void **)&f = real_sym("cuDriverGetVersion");
  return f ? f(v) : NOT_INITIALIZED;
}


Result cuGetProcAddress_v2 (const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
  GetProc f;
  Result r;
  *(void **)&f = real_sym("cuGetProcAddress_v2");
  if (f == NULL) return NOT_INITIALIZED;
  if (listed("CULUA_SHIM_HIDE", sym)) {
    *pfn = NULL;
    if (status) *status = SYMBOL_NOT_FOUND;
    return NOT_FOUND;
  }
  r = f(sym, pfn, ver, flags, status);
  if (r == 0 && *pfn != NULL && strcmp(sym, "cuDeviceGetAttribute") == 0) {
    GetAttr mine = shim_getattr;
    memcpy(&real_getattr, pfn, sizeof(real_getattr));
    memcpy(pfn, &mine, sizeof(mine));
  }
  return r;
}
