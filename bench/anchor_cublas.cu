/*
** anchor_cublas.cu
** The cuBLAS anchor for bench/matmul.lua: row-major C = A * B of n x n
** float32 random matrices, SGEMM in plain fp32 and with TF32 tensor ops,
** timed with events after a warm-up, median of reps. Built on the GPU
** machine by bench/run.sh (nvcc anchor_cublas.cu -lcublas).
**
**   anchor_cublas N REPS   ->   "sgemm_ms X" and "tf32_ms Y"
*/

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "anchor_cublas: %s failed\n", #x); exit(1); } } while (0)

static float time_gemm (cublasHandle_t h, int n, const float *A, const float *B, float *C, int reps) {
  const float one = 1.0f, zero = 0.0f;
  cudaEvent_t e0, e1;
  std::vector<float> t(reps);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  /* row-major C = A B is column-major C^T = B^T A^T */
  for (int i = 0; i < 2; i++)
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, C, n));
  for (int r = 0; r < reps; r++) {
    cudaEventRecord(e0);
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, C, n));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&t[r], e0, e1);
  }
  std::sort(t.begin(), t.end());
  return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

int main (int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096, reps = argc > 2 ? atoi(argv[2]) : 9;
  size_t count = (size_t)n * n;
  std::vector<float> h(count);
  float *A, *B, *C;
  cublasHandle_t handle;
  srand(1);
  for (size_t i = 0; i < count; i++) h[i] = (float)rand() / RAND_MAX * 2 - 1;
  CHECK(cudaMalloc(&A, count * 4));
  CHECK(cudaMalloc(&B, count * 4));
  CHECK(cudaMalloc(&C, count * 4));
  CHECK(cudaMemcpy(A, h.data(), count * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, h.data(), count * 4, cudaMemcpyHostToDevice));
  CHECK(cublasCreate(&handle));
  CHECK(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH));   /* true fp32 */
  printf("sgemm_ms %.4f\n", time_gemm(handle, n, A, B, C, reps));
  CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
  printf("tf32_ms %.4f\n", time_gemm(handle, n, A, B, C, reps));
  return 0;
}
