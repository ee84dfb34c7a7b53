/*
** embed.c
** The files built into culua: the Lua modules of lua/, and the catalog's
** kernel files (a fatbin and the .cu source a family, the <culua/...>
** device headers). build-aux/embed.sh puts them in src/embedded.S with
** .incbin, and their table in src/embedded.inc. Names are "<kind>.<name>":
** "lua.culua.tap", "fatbin.sort", "source.sort", "header.culua/common.cuh".
** Knows nothing of Lua or CUDA: the loader's level of the layers.
*/

#include "config.h"

#include <stddef.h>
#include <string.h>

#include "culua_int.h"

#if defined(__GNUC__)
#define CULUA_HIDDEN __attribute__((visibility("hidden")))
#else
#define CULUA_HIDDEN
#endif

#include "embedded.inc"


/* the name's part after "<kind>.", or NULL when the blob is of another kind */
static const char *after_kind (const culua_Blob *b, const char *kind) {
  size_t kl = strlen(kind);
  if (strncmp(b->name, kind, kl) != 0 || b->name[kl] != '.') return NULL;
  return b->name + kl + 1;
}


const culua_Blob *culua_blob (const char *kind, const char *name) {
  const culua_Blob *b;
  for (b = blobs; b->name != NULL; b++) {
    const char *n = after_kind(b, kind);
    if (n != NULL && strcmp(n, name) == 0) return b;
  }
  return NULL;
}


const culua_Blob *culua_blob_next (const char *kind, const culua_Blob *prev, const char **name) {
  const culua_Blob *b;
  for (b = prev == NULL ? blobs : prev + 1; b->name != NULL; b++) {
    const char *n = after_kind(b, kind);
    if (n != NULL) {
      if (name != NULL) *name = n;
      return b;
    }
  }
  return NULL;
}
