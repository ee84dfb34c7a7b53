/*
** loader.c
** Opens the CUDA driver and NVRTC at run time. Nothing in culua links
** libcuda or libnvrtc, so culua starts (and NVRTC works) on a machine with no
** driver, and device calls fail there with a clear message instead.
** This is the only file that knows about dlopen.
*/

#define _GNU_SOURCE   /* dladdr */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"


static culua_Driver driver;
static culua_Nvrtc nvrtc;
static culua_Nccl nccl;
static const char *nccl_why, *nccl_opened;
static char nccl_msg[512];
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static const char *driver_why, *nvrtc_why;
static const char *driver_opened, *nvrtc_opened;
static char driver_msg[512], nvrtc_msg[512];
static CUresult driver_init = CUDA_ERROR_NOT_INITIALIZED;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;


/*
** dlopen the first name that opens; an environment variable, when set, is
** the only candidate (a user who names a library wants that one or an error).
*/
static void *open_first (const char *envvar, const char *const names[],
                         const char **opened, char *msg, size_t msgsz) {
  const char *forced = getenv(envvar);
  int i;
  if (forced && *forced) {
    void *h = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
      snprintf(msg, msgsz, "%s not found (%s=%s: %s)", forced, envvar, forced,
               dlerror());
    *opened = forced;
    return h;
  }
  for (i = 0; names[i] != NULL; i++) {
    void *h;
    if (names[i][0] == '\0') continue;  /* unconfigured fallback */
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      *opened = names[i];
      return h;
    }
  }
  snprintf(msg, msgsz, "%s not found", names[0]);
  return NULL;
}


/* {====================================================== driver */

static void load_driver (void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  PFN_cuGetProcAddress_v12000 getproc;
  CUresult (*getversion)(int *);
  CUdriverProcAddressQueryResult found;
  int version = 0;
  void *h = open_first("CULUA_LIBCUDA", names, &driver_opened,
                       driver_msg, sizeof(driver_msg));
  if (h == NULL) {
    driver_why = driver_msg;
    return;
  }
  getproc = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
  if (getproc == NULL) {
    snprintf(driver_msg, sizeof(driver_msg),
             "%s is too old (no cuGetProcAddress_v2; CUDA 12 or newer needed)",
             driver_opened);
    driver_why = driver_msg;
    return;
  }
  /*
  ** A version past the driver's is an error (CUDA_ERROR_INVALID_VALUE, which
  ** compute-sanitizer reports), so such an entry point is not asked for: the
  ** driver's version comes first, from the one entry point that every
  ** driver exports under its own name.
  */
  getversion = (CUresult (*)(int *))dlsym(h, "cuDriverGetVersion");
  if (getversion == NULL || getversion(&version) != CUDA_SUCCESS) version = 0;
  /*
  ** The call can succeed and still hand back NULL: check both. The name is
  ** stringified by REQUIRED/OPTIONAL themselves, before cuda.h's macros
  ** (cuMemAlloc -> cuMemAlloc_v2) rewrite it: the lookup takes base names.
  */
#define RESOLVE(sym, field, ver, required) \
  if ((version > 0 && ver > version) || \
      getproc(sym, (void **)&driver.field, ver, CU_GET_PROC_ADDRESS_DEFAULT, \
              &found) != CUDA_SUCCESS || driver.field == NULL) { \
    driver.field = NULL; \
    if (required) { \
      snprintf(driver_msg, sizeof(driver_msg), \
               "%s lacks %s (ABI of CUDA %d.%d): driver too old", \
               driver_opened, sym, ver / 1000, ver % 1000 / 10); \
      driver_why = driver_msg; \
      return; \
    } \
  }
#define REQUIRED(name, ver) RESOLVE(#name, name, ver, 1)
#define OPTIONAL(name, ver) RESOLVE(#name, name, ver, 0)
  CULUA_DRIVER_REQUIRED(REQUIRED)
  CULUA_DRIVER_OPTIONAL(OPTIONAL)
#undef REQUIRED
#undef OPTIONAL
#undef RESOLVE
  /* a driver with no usable GPU loads fine and fails here (NO_DEVICE) */
  driver_init = driver.cuInit(0);
}


const culua_Driver *culua_load_driver (const char **why) {
  pthread_once(&driver_once, load_driver);
  if (driver_why != NULL) {
    if (why) *why = driver_why;
    return NULL;
  }
  return &driver;
}


CUresult culua_driver_init (void) {
  return culua_load_driver(NULL) ? driver_init : CUDA_ERROR_NOT_INITIALIZED;
}


const char *culua_driver_path (void) {
  return culua_load_driver(NULL) ? driver_opened : NULL;
}

/* }====================================================== */


/* {====================================================== NVRTC */

static void load_nvrtc (void) {
  /* the toolkit's own copy is the last resort when ld.so does not know it */
  static const char *const names[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
    CULUA_CUDA_LIBDIR "/libnvrtc.so", NULL
  };
  void *h = open_first("CULUA_LIBNVRTC", names, &nvrtc_opened,
                       nvrtc_msg, sizeof(nvrtc_msg));
  if (h == NULL) {
    nvrtc_why = nvrtc_msg;
    return;
  }
#define LOOKUP(name) \
  if ((*(void **)&nvrtc.name = dlsym(h, #name)) == NULL) { \
    snprintf(nvrtc_msg, sizeof(nvrtc_msg), "%s lacks %s", nvrtc_opened, #name); \
    nvrtc_why = nvrtc_msg; \
    return; \
  }
  CULUA_NVRTC_ENTRIES(LOOKUP)
#undef LOOKUP
}


const culua_Nvrtc *culua_load_nvrtc (const char **why) {
  pthread_once(&nvrtc_once, load_nvrtc);
  if (nvrtc_why != NULL) {
    if (why) *why = nvrtc_why;
    return NULL;
  }
  return &nvrtc;
}


const char *culua_nvrtc_path (void) {
  return culua_load_nvrtc(NULL) ? nvrtc_opened : NULL;
}


const char *culua_nvrtc_file (void) {
  Dl_info info;
  const culua_Nvrtc *rtc = culua_load_nvrtc(NULL);
  if (rtc == NULL || dladdr(*(void **)&rtc->nvrtcVersion, &info) == 0) return NULL;
  return info.dli_fname;
}

/* }====================================================== */


/* {====================================================== NCCL */

/*
** NCCL is optional: culua without it runs everything but cuda.nccl, whose
** first call says why. The toolkit's directories are tried last, for
** installs that put NCCL beside CUDA (lib or lib64) and not on ld.so's path.
*/
static void load_nccl (void) {
  static const char *const names[] = {
    "libnccl.so.2", "libnccl.so",
    CULUA_CUDA_PREFIX "/lib/libnccl.so.2", CULUA_CUDA_PREFIX "/lib64/libnccl.so.2", NULL
  };
  int version = 0;
  void *h = open_first("CULUA_LIBNCCL", names, &nccl_opened, nccl_msg, sizeof(nccl_msg));
  if (h == NULL) {
    nccl_why = nccl_msg;
    return;
  }
#define LOOKUP(name) \
  if ((*(void **)&nccl.name = dlsym(h, #name)) == NULL) { \
    snprintf(nccl_msg, sizeof(nccl_msg), "%s lacks %s (NCCL 2.13 or newer needed)", nccl_opened, #name); \
    nccl_why = nccl_msg; \
    return; \
  }
  CULUA_NCCL_ENTRIES(LOOKUP)
#undef LOOKUP
#define OPTIONAL(name) *(void **)&nccl.name = dlsym(h, #name);
  CULUA_NCCL_OPTIONAL(OPTIONAL)
#undef OPTIONAL
  if (nccl.ncclGetVersion(&version) != ncclSuccess || version < 21300) {
    snprintf(nccl_msg, sizeof(nccl_msg), "%s is NCCL %d, older than 2.13", nccl_opened, version);
    nccl_why = nccl_msg;
  }
}


const culua_Nccl *culua_load_nccl (const char **why) {
  pthread_once(&nccl_once, load_nccl);
  if (nccl_why != NULL) {
    if (why) *why = nccl_why;
    return NULL;
  }
  return &nccl;
}


const char *culua_nccl_path (void) {
  return culua_load_nccl(NULL) ? nccl_opened : NULL;
}

/* }====================================================== */
