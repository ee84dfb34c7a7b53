/*
** anchor_cublaslt.cu
** The cuBLAS anchor for bench/matmul_lowp.lua: C = A * B of n x n random
** matrices in low precision, float32 sums:
**   f16_ms   cublasGemmEx, float16 A, B and C (CUBLAS_COMPUTE_32F)
**   bf16_ms  cublasGemmEx, bfloat16 A, B and C (CUBLAS_COMPUTE_32F)
**   e4m3_ms  cublasLtMatmul, fp8 e4m3 A and B, bfloat16 C, per-tensor scales
**            (A and B scale pointers, 1.0), the "TN" layout cuBLASLt's fp8
**            asks for; printed only where the device has fp8 (8.9 and later)
** row-major C = A * B is column-major C^T = B^T A^T, so the 16-bit calls pass
** B first; the fp8 call times cuBLASLt's own layout (the FLOPs are the same).
** Timed with events after a warm-up, median of reps. Built on the GPU machine by
** bench/run.sh:
**   nvcc -O2 -o bench/anchor_cublaslt bench/anchor_cublaslt.cu -lcublasLt -lcublas
**
**   anchor_cublaslt N REPS   ->   "f16_ms X", "bf16_ms Y" [, "e4m3_ms Z"]
*/

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>
#include <functional>

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "anchor_cublaslt: %s failed\n", #x); exit(1); } } while (0)

static float median_ms (const std::function<void ()> &f, int reps) {
  cudaEvent_t e0, e1;
  std::vector<float> t(reps);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 2; i++) f();
  CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < reps; r++) {
    cudaEventRecord(e0);
    f();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&t[r], e0, e1);
  }
  CHECK(cudaGetLastError());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(t.begin(), t.end());
  return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

/* count random elements of T in [-1, 1) on the device */
template <typename T>
static T *random_matrix (size_t count, unsigned seed) {
  std::vector<T> h(count);
  srand(seed);
  for (size_t i = 0; i < count; i++) h[i] = T((float)rand() / RAND_MAX * 2 - 1);
  T *d;
  CHECK(cudaMalloc(&d, count * sizeof(T)));
  CHECK(cudaMemcpy(d, h.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
static float time_gemmex (cublasHandle_t h, cudaDataType_t type, int n, int reps) {
  size_t count = (size_t)n * n;
  T *A = random_matrix<T>(count, 1), *B = random_matrix<T>(count, 2), *C = random_matrix<T>(count, 3);
  float alpha = 1, beta = 0;
  float ms = median_ms([&] {
    CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, B, type, n, A, type, n, &beta, C, type, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }, reps);
  cudaFree(A); cudaFree(B); cudaFree(C);
  return ms;
}

static float time_fp8 (int n, int reps) {
  size_t count = (size_t)n * n, wsize = 32u << 20;
  __nv_fp8_e4m3 *A = random_matrix<__nv_fp8_e4m3>(count, 1), *B = random_matrix<__nv_fp8_e4m3>(count, 2);
  __nv_bfloat16 *C = random_matrix<__nv_bfloat16>(count, 3);
  float one = 1, *scales, alpha = 1, beta = 0;
  void *ws;
  CHECK(cudaMalloc(&scales, 2 * sizeof(float)));
  CHECK(cudaMemcpy(scales, &one, sizeof one, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(scales + 1, &one, sizeof one, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&ws, wsize));
  cublasLtHandle_t lt;
  CHECK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const float *sa = scales, *sb = scales + 1;
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n));   /* k x m, transposed by the op */
  CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n));
  CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n));
  cublasLtMatmulPreference_t pref;
  CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsize, sizeof wsize));
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
  if (found == 0) { fprintf(stderr, "anchor_cublaslt: no fp8 algorithm\n"); exit(1); }
  float ms = median_ms([&] {
    CHECK(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &heur.algo, ws, wsize, 0));
  }, reps);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(scales); cudaFree(ws);
  return ms;
}

int main (int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096, reps = argc > 2 ? atoi(argv[2]) : 9;
  cublasHandle_t handle;
  CHECK(cublasCreate(&handle));
  printf("f16_ms %.4f\n", time_gemmex<__half>(handle, CUDA_R_16F, n, reps));
  printf("bf16_ms %.4f\n", time_gemmex<__nv_bfloat16>(handle, CUDA_R_16BF, n, reps));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major * 10 + prop.minor >= 89) printf("e4m3_ms %.4f\n", time_fp8(n, reps));
  cublasDestroy(handle);
  return 0;
}
