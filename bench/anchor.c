/*
** anchor.c
** The plain-C anchors for culua's binding benchmarks, measured the same
** way as the Lua side (events around the region, warm-up, median of reps):
**
**   anchor launch PTXFILE KERNEL N REPS   us per cuLaunchKernel of a no-argument kernel,
**                                         then us per kernel of a graph replay
**   anchor copy BYTES REPS                pinned host-to-device and device-to-host GB/s
**
** Built on the GPU machine by bench/run.sh: cc anchor.c -lcuda.
*/

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
  const char *n_ = "?"; cuGetErrorName(r_, &n_); \
  fprintf(stderr, "anchor: %s failed: %s\n", #x, n_); exit(1); } } while (0)


static int cmp (const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}


static float median (float *v, int n) {
  qsort(v, (size_t)n, sizeof(float), cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}


static char *slurp (const char *path) {
  FILE *f = fopen(path, "rb");
  long n;
  char *s;
  if (f == NULL) { perror(path); exit(1); }
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  rewind(f);
  s = malloc((size_t)n + 1);
  if (fread(s, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(1); }
  s[n] = '\0';
  fclose(f);
  return s;
}


static void launch (const char *ptxfile, const char *name, int n, int reps) {
  CUmodule m;
  CUfunction f;
  CUevent e0, e1;
  CUstream s;
  CUgraph g;
  CUgraphExec x;
  float *t = malloc(sizeof(float) * (size_t)reps), ms;
  int i, r;
  char *ptx = slurp(ptxfile);
  CHECK(cuModuleLoadData(&m, ptx));
  CHECK(cuModuleGetFunction(&f, m, name));
  CHECK(cuEventCreate(&e0, 0));
  CHECK(cuEventCreate(&e1, 0));
  for (i = 0; i < 1000; i++)   /* warm-up */
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  CHECK(cuCtxSynchronize());
  for (r = 0; r < reps; r++) {
    CHECK(cuEventRecord(e0, NULL));
    for (i = 0; i < n; i++)
      CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuEventRecord(e1, NULL));
    CHECK(cuEventSynchronize(e1));
    CHECK(cuEventElapsedTime(&ms, e0, e1));
    t[r] = ms * 1000.0f / (float)n;
  }
  printf("launch_us %.4f\n", median(t, reps));
  /* the same launches captured once into a graph, replayed */
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (i = 0; i < 1000; i++)
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
  CHECK(cuStreamEndCapture(s, &g));
  CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
  CHECK(cuGraphLaunch(x, s));
  CHECK(cuStreamSynchronize(s));
  for (r = 0; r < reps; r++) {
    CHECK(cuEventRecord(e0, s));
    for (i = 0; i < n / 1000; i++) CHECK(cuGraphLaunch(x, s));
    CHECK(cuEventRecord(e1, s));
    CHECK(cuEventSynchronize(e1));
    CHECK(cuEventElapsedTime(&ms, e0, e1));
    t[r] = ms * 1000.0f / (float)(n / 1000 * 1000);
  }
  printf("graph_us %.4f\n", median(t, reps));
  free(t);
  free(ptx);
}


static void copy (size_t bytes, int reps) {
  void *h;
  CUdeviceptr d;
  CUevent e0, e1;
  float *t = malloc(sizeof(float) * (size_t)reps), ms;
  int r, dir;
  CHECK(cuMemHostAlloc(&h, bytes, CU_MEMHOSTALLOC_PORTABLE));
  CHECK(cuMemAlloc(&d, bytes));
  memset(h, 1, bytes);
  CHECK(cuEventCreate(&e0, 0));
  CHECK(cuEventCreate(&e1, 0));
  for (dir = 0; dir < 2; dir++) {
    CHECK(dir == 0 ? cuMemcpyHtoD(d, h, bytes) : cuMemcpyDtoH(h, d, bytes));   /* warm-up */
    for (r = 0; r < reps; r++) {
      CHECK(cuEventRecord(e0, NULL));
      CHECK(dir == 0 ? cuMemcpyHtoD(d, h, bytes) : cuMemcpyDtoH(h, d, bytes));
      CHECK(cuEventRecord(e1, NULL));
      CHECK(cuEventSynchronize(e1));
      CHECK(cuEventElapsedTime(&ms, e0, e1));
      t[r] = (float)((double)bytes / (ms * 1e-3) / 1e9);
    }
    printf("%s_gbs %.3f\n", dir == 0 ? "htod" : "dtoh", median(t, reps));
  }
  free(t);
}


int main (int argc, char **argv) {
  CUdevice dev;
  CUcontext ctx;
  if (argc < 2) {
    fprintf(stderr, "usage: anchor launch PTXFILE KERNEL N REPS | anchor copy BYTES REPS\n");
    return 2;
  }
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  if (strcmp(argv[1], "launch") == 0 && argc == 6)
    launch(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
  else if (strcmp(argv[1], "copy") == 0 && argc == 4)
    copy((size_t)strtoull(argv[2], NULL, 10), atoi(argv[3]));
  else {
    fprintf(stderr, "anchor: bad arguments\n");
    return 2;
  }
  return 0;
}
