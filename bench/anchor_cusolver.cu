/*
** anchor_cusolver.cu
** The cuSOLVER anchor for bench/solve.lua: LU with partial pivoting of an
** n x n random matrix (uniform in [-1, 1)) by cusolverDn<t>getrf, then one
** right-hand side by <t>getrs, each timed with events after a warm-up,
** median of reps. getrf overwrites its matrix, so each repetition starts
** from a fresh copy (not timed). cuSOLVER is column-major: it factors the
** transpose of what bench/solve.lua factors, the same work.
** Built on the GPU machine by bench/run.sh:
**   nvcc -O2 -o bench/anchor_cusolver bench/anchor_cusolver.cu -lcusolver -lcublas
**
**   anchor_cusolver f32|f64 N REPS   ->   "getrf_ms X" and "getrs_ms Y"
*/

#include <cusolverDn.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <algorithm>

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "anchor_cusolver: %s failed\n", #x); exit(1); } } while (0)

static float median (std::vector<float> &t) {
  std::sort(t.begin(), t.end());
  size_t r = t.size();
  return r % 2 ? t[r / 2] : (t[r / 2 - 1] + t[r / 2]) / 2;
}

/* the typed cuSOLVER calls, by overloading */
static cusolverStatus_t buffer (cusolverDnHandle_t h, int n, float *A, int *lwork)
{ return cusolverDnSgetrf_bufferSize(h, n, n, A, n, lwork); }
static cusolverStatus_t buffer (cusolverDnHandle_t h, int n, double *A, int *lwork)
{ return cusolverDnDgetrf_bufferSize(h, n, n, A, n, lwork); }
static cusolverStatus_t getrf (cusolverDnHandle_t h, int n, float *A, float *w, int *ipiv, int *info)
{ return cusolverDnSgetrf(h, n, n, A, n, w, ipiv, info); }
static cusolverStatus_t getrf (cusolverDnHandle_t h, int n, double *A, double *w, int *ipiv, int *info)
{ return cusolverDnDgetrf(h, n, n, A, n, w, ipiv, info); }
static cusolverStatus_t getrs (cusolverDnHandle_t h, int n, const float *A, const int *ipiv, float *b, int *info)
{ return cusolverDnSgetrs(h, CUBLAS_OP_N, n, 1, A, n, ipiv, b, n, info); }
static cusolverStatus_t getrs (cusolverDnHandle_t h, int n, const double *A, const int *ipiv, double *b, int *info)
{ return cusolverDnDgetrs(h, CUBLAS_OP_N, n, 1, A, n, ipiv, b, n, info); }

template <typename T>
static void run (int n, int reps) {
  size_t count = (size_t)n * n;
  std::vector<T> h(count), hb(n);
  T *A0, *A, *b0, *b, *work;
  int *ipiv, *info, lwork = 0, hinfo = 0;
  cusolverDnHandle_t handle;
  cudaEvent_t e0, e1;
  std::vector<float> tf(reps), ts(reps);
  srand(1);
  for (size_t i = 0; i < count; i++) h[i] = (T)((double)rand() / RAND_MAX * 2 - 1);
  for (int i = 0; i < n; i++) hb[i] = (T)((double)rand() / RAND_MAX * 2 - 1);
  CHECK(cudaMalloc(&A0, count * sizeof(T)));
  CHECK(cudaMalloc(&A, count * sizeof(T)));
  CHECK(cudaMalloc(&b0, n * sizeof(T)));
  CHECK(cudaMalloc(&b, n * sizeof(T)));
  CHECK(cudaMalloc(&ipiv, n * sizeof(int)));
  CHECK(cudaMalloc(&info, sizeof(int)));
  CHECK(cudaMemcpy(A0, h.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b0, hb.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cusolverDnCreate(&handle));
  CHECK(buffer(handle, n, A, &lwork));
  CHECK(cudaMalloc(&work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(T)));
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int r = -1; r < reps; r++) {   /* r = -1: the warm-up */
    CHECK(cudaMemcpy(A, A0, count * sizeof(T), cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(b, b0, n * sizeof(T), cudaMemcpyDeviceToDevice));
    CHECK(cudaDeviceSynchronize());
    cudaEventRecord(e0);
    CHECK(getrf(handle, n, A, work, ipiv, info));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    if (r >= 0) cudaEventElapsedTime(&tf[r], e0, e1);
    cudaEventRecord(e0);
    CHECK(getrs(handle, n, A, ipiv, b, info));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    if (r >= 0) cudaEventElapsedTime(&ts[r], e0, e1);
  }
  CHECK(cudaMemcpy(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost));
  if (hinfo != 0) fprintf(stderr, "anchor_cusolver: info = %d\n", hinfo);
  printf("getrf_ms %.4f\n", median(tf));
  printf("getrs_ms %.4f\n", median(ts));
}

int main (int argc, char **argv) {
  const char *t = argc > 1 ? argv[1] : "f32";
  int n = argc > 2 ? atoi(argv[2]) : 8192, reps = argc > 3 ? atoi(argv[3]) : 5;
  if (n < 1 || reps < 1) { fprintf(stderr, "usage: anchor_cusolver f32|f64 N REPS\n"); return 1; }
  if (strcmp(t, "f64") == 0) run<double>(n, reps);
  else run<float>(n, reps);
  return 0;
}
