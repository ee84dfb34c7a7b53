/*
** anchor_cublas.cu
** The cuBLAS anchor for bench/matmul.lua: row-major C = A * B of n x n
** float32 random matrices, SGEMM in plain fp32 and with TF32 tensor ops,
** and DGEMM (float64, on tensor cores where the device has them); with K,
** LU's trailing update alone: C (n x n) -= A (n x K) * B (K x n), SGEMM in
** plain fp32 and DGEMM.
** Timed with events after a warm-up, median of reps. Built on the GPU
** machine by bench/run.sh (nvcc anchor_cublas.cu -lcublas).
**
**   anchor_cublas N REPS     ->   "sgemm_ms X", "tf32_ms Y" and "dgemm_ms Z"
**   anchor_cublas N REPS K   ->   "sgemm_ms X" and "dgemm_ms Z"
*/

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "anchor_cublas: %s failed\n", #x); exit(1); } } while (0)

/* row-major C (m x n) = alpha A (m x k) B (k x n) + beta C is column-major C^T = B^T A^T */
static cublasStatus_t gemm (cublasHandle_t h, int m, int n, int k, float alpha, const float *A, const float *B, float beta, float *C) {
  return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, n, A, k, &beta, C, n);
}
static cublasStatus_t gemm (cublasHandle_t h, int m, int n, int k, double alpha, const double *A, const double *B, double beta, double *C) {
  return cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, n, A, k, &beta, C, n);
}

template <typename T>
static float time_gemm (cublasHandle_t h, int m, int n, int k, T alpha, const T *A, const T *B, T beta, T *C, int reps) {
  cudaEvent_t e0, e1;
  std::vector<float> t(reps);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 2; i++) CHECK(gemm(h, m, n, k, alpha, A, B, beta, C));
  for (int r = 0; r < reps; r++) {
    cudaEventRecord(e0);
    CHECK(gemm(h, m, n, k, alpha, A, B, beta, C));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&t[r], e0, e1);
  }
  std::sort(t.begin(), t.end());
  return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

/* three device matrices of count random T each (C too: the update reads it) */
template <typename T>
static void matrices (size_t count, T **A, T **B, T **C) {
  std::vector<T> h(count);
  srand(1);
  for (size_t i = 0; i < count; i++) h[i] = (T)rand() / RAND_MAX * 2 - 1;
  for (T **p : {A, B, C}) {
    CHECK(cudaMalloc(p, count * sizeof(T)));
    CHECK(cudaMemcpy(*p, h.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  }
}

int main (int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096, reps = argc > 2 ? atoi(argv[2]) : 9;
  int k = argc > 3 ? atoi(argv[3]) : 0;
  size_t count = (size_t)n * n;
  cublasHandle_t handle;
  CHECK(cublasCreate(&handle));
  if (k == 0) {
    float *A, *B, *C;
    matrices(count, &A, &B, &C);
    CHECK(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH));   /* true fp32 */
    printf("sgemm_ms %.4f\n", time_gemm(handle, n, n, n, 1.0f, A, B, 0.0f, C, reps));
    CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
    printf("tf32_ms %.4f\n", time_gemm(handle, n, n, n, 1.0f, A, B, 0.0f, C, reps));
    cudaFree(A); cudaFree(B); cudaFree(C);
  } else {
    float *A, *B, *C;
    matrices(count, &A, &B, &C);
    CHECK(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH));
    printf("sgemm_ms %.4f\n", time_gemm(handle, n, n, k, -1.0f, A, B, 1.0f, C, reps));
    cudaFree(A); cudaFree(B); cudaFree(C);
  }
  CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  double *A, *B, *C;
  matrices(count, &A, &B, &C);   /* n x n each: enough for n x k and k x n too, k <= n */
  if (k == 0) printf("dgemm_ms %.4f\n", time_gemm(handle, n, n, n, 1.0, A, B, 0.0, C, reps));
  else printf("dgemm_ms %.4f\n", time_gemm(handle, n, n, k, -1.0, A, B, 1.0, C, reps));
  return 0;
}
