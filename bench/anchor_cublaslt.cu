/*
** anchor_cublaslt.cu
** The cuBLAS anchor for bench/matmul_lowp.lua: the product culua's matmul
** computes, C = A * B with A (m x k), B (k x n) and C (m x n) row-major, in
** low precision with float32 sums:
**   f16_ms   cublasGemmEx, float16 A, B and C (CUBLAS_COMPUTE_32F)
**   bf16_ms  cublasGemmEx, bfloat16 A, B and C (CUBLAS_COMPUTE_32F)
**   e4m3_ms  cublasLtMatmul, fp8 e4m3 A and B, bfloat16 C, per-tensor scales
**            (device pointers), printed where the device has fp8 (8.9 and
**            later), with the algorithm that ran on an "e4m3_algo" line
** Timed with events after a warm-up, median of reps. Built on the GPU machine by
** bench/run.sh:
**   nvcc -O2 -o bench/anchor_cublaslt bench/anchor_cublaslt.cu -lcublasLt -lcublas
**
**   anchor_cublaslt N REPS        "f16_ms X", "bf16_ms Y" [, "e4m3_ms Z", "e4m3_algo ..."]
**   anchor_cublaslt check [M N K] the three products on random data checked against a
**                                 CPU loop in double (default 208 x 144 x 320); prints a
**                                 line a dtype and exits 1 when one is wrong
**
** cuBLAS is column-major, and a row-major matrix is its transpose there.
** - 16-bit: row-major C = A * B is column-major C^T = B^T A^T, and row-major
**   B and A are column-major B^T (n x k) and A^T (k x m): gemm(N, N, n, m, k)
**   with B first.
** - fp8: on Hopper and Ada cuBLASLt's fp8 kernels take only the "TN" form,
**   D = op(X) op(Y) with X transposed and Y not, both X and Y stored K-major
**   (k the contiguous index). Row-major A is K-major; row-major B (k x n) is
**   N-major. So B goes K-major, as Bt = B^T (n x k row-major, transposed once
**   before timing): column-major D (n x m) = C^T = B^T A^T with X = Bt (a
**   column-major k x n, ld k: op T gives B^T, n x k) and Y = A (a column-major
**   k x m, ld k: op N gives A^T), D's ld n: row-major C again. Every leading
**   dimension is k (fp8) or n (bfloat16): multiples of 16 bytes when k % 16 and
**   n % 8 are 0. culua's fp8 matmul given a row-major B transposes it into
**   scratch first, inside its time; given Bt (transb = true) it reads it as
**   this anchor does: bench/matmul_lowp.lua times both against it.
**   D = alpha * scale_a * scale_b * A*B (+ beta * C, beta = 0 here); D is its own
**   buffer, apart from C's (no in-place product), the scales two separate device floats.
*/

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <algorithm>
#include <functional>

/* a failed call: its text and the status's name (cuBLAS, cuBLASLt and the runtime share no codes) */
static void fail_cuda (const char *what, cudaError_t e) {
  fprintf(stderr, "anchor_cublaslt: %s failed: %s\n", what, cudaGetErrorName(e));
  exit(1);
}
static void fail_cublas (const char *what, cublasStatus_t s) {
  fprintf(stderr, "anchor_cublaslt: %s failed: %s (%s)\n", what, cublasLtGetStatusName(s), cublasLtGetStatusString(s));
  exit(1);
}
static void check (cudaError_t e, const char *what) { if (e != cudaSuccess) fail_cuda(what, e); }
static void check (cublasStatus_t s, const char *what) { if (s != CUBLAS_STATUS_SUCCESS) fail_cublas(what, s); }
#define CHECK(x) check((x), #x)

static float median_ms (const std::function<void ()> &f, int reps) {
  cudaEvent_t e0, e1;
  std::vector<float> t(reps);
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
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

/* {====================================================== host matrices */

/* an element as a double, and a double rounded into T (the cuda_*.h conversions run on the host too) */
static double widen (__half x) { return __half2float(x); }
static double widen (__nv_bfloat16 x) { return __bfloat162float(x); }
static double widen (__nv_fp8_e4m3 x) { return (float)x; }

/* count elements of T, uniform in [-1, 1) then rounded into T */
template <typename T>
static std::vector<T> random_host (size_t count, unsigned seed) {
  std::vector<T> h(count);
  srand(seed);
  for (size_t i = 0; i < count; i++) h[i] = T((float)rand() / RAND_MAX * 2 - 1);
  return h;
}

template <typename T>
static T *to_device (const std::vector<T> &h) {
  T *d;
  CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
static std::vector<T> to_host (const T *d, size_t count) {
  std::vector<T> h(count);
  CHECK(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/* the transpose of row-major rows x cols X: row-major cols x rows */
template <typename T>
static std::vector<T> transpose (const std::vector<T> &x, int rows, int cols) {
  std::vector<T> t(x.size());
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) t[(size_t)j * rows + i] = x[(size_t)i * cols + j];
  return t;
}

/* }====================================================== */


/* {====================================================== the products */

/* row-major C (m x n) = alpha * A (m x k) * B (k x n) in cublasGemmEx: column-major C^T = B^T A^T */
static void gemmex (cublasHandle_t h, cudaDataType_t type, int m, int n, int k, float alpha, const void *A,
                    const void *B, void *C) {
  const float beta = 0;
  CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, type, n, A, type, k, &beta, C, type, n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* row-major bfloat16 D (m x n) = alpha * scale_a * scale_b * A (m x k) * B (k x n), fp8 e4m3 A
** and Bt = B^T (n x k), in cuBLASLt's TN form (see the top of the file) */
struct Fp8 {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lx = nullptr, ly = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo;
  void *ws = nullptr, *C = nullptr;   /* C: beta's input, not read (beta = 0), apart from D all the same */
  size_t wsize = 32u << 20;
  float alpha;
  const __nv_fp8_e4m3 *A, *Bt;
  __nv_bfloat16 *D;
  char chosen[256];

  /* sa, sb: device pointers to the scales (float) */
  Fp8 (int m, int n, int k, float a, const float *sa, const float *sb, const __nv_fp8_e4m3 *A_, const __nv_fp8_e4m3 *Bt_,
       __nv_bfloat16 *D_) : alpha(a), A(A_), Bt(Bt_), D(D_) {
    CHECK(cudaMalloc(&ws, wsize));
    CHECK(cudaMalloc(&C, (size_t)m * n * sizeof(__nv_bfloat16)));
    CHECK(cudaMemset(C, 0, (size_t)m * n * sizeof(__nv_bfloat16)));
    CHECK(cublasLtCreate(&lt));
    CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t tx = CUBLAS_OP_T, ty = CUBLAS_OP_N;
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tx, sizeof tx));
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ty, sizeof ty));
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
    /* X = Bt: k x n column-major (op T: n x k); Y = A: k x m column-major; C and D: n x m, ld n */
    CHECK(cublasLtMatrixLayoutCreate(&lx, CUDA_R_8F_E4M3, k, n, k));
    CHECK(cublasLtMatrixLayoutCreate(&ly, CUDA_R_8F_E4M3, k, m, k));
    CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, m, n));
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsize, sizeof wsize));
    /* the heuristic's candidates, best first: the first that runs is kept. A candidate
    ** may still refuse at cublasLtMatmul; each refusal is named on stderr. */
    cublasLtMatmulHeuristicResult_t heur[8];
    int found = 0;
    memset(heur, 0, sizeof heur);
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, lx, ly, ld, ld, pref, 8, heur, &found));
    if (found == 0) {
      fprintf(stderr, "anchor_cublaslt: cuBLASLt has no fp8 algorithm for %d x %d x %d (TN, e4m3, bfloat16 D)\n", m, k, n);
      exit(1);
    }
    for (int i = 0; i < found; i++) {
      if (heur[i].state != CUBLAS_STATUS_SUCCESS || heur[i].workspaceSize > wsize) {
        fprintf(stderr, "anchor_cublaslt: fp8 candidate %d of %d: state %s, workspace %zu\n", i + 1, found,
                cublasLtGetStatusName(heur[i].state), heur[i].workspaceSize);
        continue;
      }
      cublasStatus_t s = launch(heur[i].algo);
      cudaError_t e = cudaDeviceSynchronize();
      if (s == CUBLAS_STATUS_SUCCESS && e == cudaSuccess) {
        algo = heur[i].algo;
        describe(i, found, heur[i].wavesCount);
        return;
      }
      fprintf(stderr, "anchor_cublaslt: fp8 candidate %d of %d refused: %s, %s\n", i + 1, found, cublasLtGetStatusName(s),
              cudaGetErrorName(e));
      if (e != cudaSuccess) exit(1);   /* a sticky error: no later call can work */
    }
    fprintf(stderr, "anchor_cublaslt: none of cuBLASLt's %d fp8 algorithms ran\n", found);
    exit(1);
  }
  ~Fp8 () {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lx); cublasLtMatrixLayoutDestroy(ly); cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    cudaFree(ws);
    cudaFree(C);
  }
  cublasStatus_t launch (const cublasLtMatmulAlgo_t &a) {
    const float beta = 0;
    return cublasLtMatmul(lt, op, &alpha, Bt, lx, A, ly, &beta, C, ld, D, ld, &a, ws, wsize, 0);
  }
  void run () { CHECK(launch(algo)); }
  /* the algorithm's configuration (cublasLt.h's enums: cublasLtMatmulTile_t, cublasLtMatmulStages_t, cublasLtClusterShape_t) */
  void describe (int i, int found, float waves) {
    int id = 0, splitk = 0;
    unsigned tile = 0, stages = 0, swizzle = 0, custom = 0, reduction = 0;
    unsigned short cluster = 0;
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof reduction, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
    snprintf(chosen, sizeof chosen, "id %d tile %u stages %u splitk %d reduction %u swizzle %u custom %u cluster %u waves %.2f (candidate %d of %d)",
             id, tile, stages, splitk, reduction, swizzle, custom, (unsigned)cluster, waves, i + 1, found);
  }
};

static float *device_float (float v) {
  float *p;
  CHECK(cudaMalloc(&p, sizeof(float)));
  CHECK(cudaMemcpy(p, &v, sizeof v, cudaMemcpyHostToDevice));
  return p;
}

/* }====================================================== */


/* {====================================================== timing */

template <typename T>
static float time_gemmex (cublasHandle_t h, cudaDataType_t type, int n, int reps) {
  size_t count = (size_t)n * n;
  T *A = to_device(random_host<T>(count, 1)), *B = to_device(random_host<T>(count, 2)), *C;
  CHECK(cudaMalloc(&C, count * sizeof(T)));
  float ms = median_ms([&] { gemmex(h, type, n, n, n, 1.0f, A, B, C); }, reps);
  cudaFree(A); cudaFree(B); cudaFree(C);
  return ms;
}

static float time_fp8 (int n, int reps) {
  size_t count = (size_t)n * n;
  __nv_fp8_e4m3 *A = to_device(random_host<__nv_fp8_e4m3>(count, 1));
  __nv_fp8_e4m3 *Bt = to_device(transpose(random_host<__nv_fp8_e4m3>(count, 2), n, n));
  __nv_bfloat16 *D;
  CHECK(cudaMalloc(&D, count * sizeof *D));
  float *sa = device_float(1), *sb = device_float(1);
  float ms;
  {
    Fp8 f(n, n, n, 1.0f, sa, sb, A, Bt, D);
    ms = median_ms([&] { f.run(); }, reps);
    printf("e4m3_ms %.4f\n", ms);
    printf("e4m3_algo %s\n", f.chosen);
  }
  cudaFree(A); cudaFree(Bt); cudaFree(D); cudaFree(sa); cudaFree(sb);
  return ms;
}

/* }====================================================== */


/* {====================================================== the self-check */

/*
** C = alpha * s * A * B against a double loop, element by element, relative to
** sum |a||b| (the scale of the sums' rounding): within tol. Returns whether all were.
*/
template <typename TI, typename TO>
static bool compare (const char *what, const std::vector<TI> &A, const std::vector<TI> &B, const std::vector<TO> &C,
                     int m, int n, int k, double scale, double tol) {
  double worst = 0;
  int wi = 0, wj = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        const double x = widen(A[(size_t)i * k + p]) * widen(B[(size_t)p * n + j]);
        s += x;
        mag += fabs(x);
      }
      const double got = widen(C[(size_t)i * n + j]);
      const double err = fabs(got - scale * s) / (fabs(scale) * mag + 1e-30);
      if (!(err <= worst)) { worst = err; wi = i; wj = j; }   /* a NaN is the worst */
    }
  const bool ok = worst <= tol;
  printf("check %-5s %d x %d x %d: worst error %.2e at (%d, %d) (tolerance %.1e): %s\n", what, m, k, n, worst, wi, wj, tol,
         ok ? "ok" : "WRONG");
  return ok;
}

template <typename T>
static bool check_gemmex (cublasHandle_t h, cudaDataType_t type, const char *what, int m, int n, int k, double eps) {
  std::vector<T> hA = random_host<T>((size_t)m * k, 11), hB = random_host<T>((size_t)k * n, 12);
  T *A = to_device(hA), *B = to_device(hB), *C;
  CHECK(cudaMalloc(&C, (size_t)m * n * sizeof(T)));
  CHECK(cudaMemset(C, 0xff, (size_t)m * n * sizeof(T)));   /* NaN: every element must be written */
  gemmex(h, type, m, n, k, 1.5f, A, B, C);
  std::vector<T> hC = to_host(C, (size_t)m * n);
  cudaFree(A); cudaFree(B); cudaFree(C);
  return compare(what, hA, hB, hC, m, n, k, 1.5, 2 * eps + k * 0x1p-22);
}

static bool check_fp8 (int m, int n, int k) {
  std::vector<__nv_fp8_e4m3> hA = random_host<__nv_fp8_e4m3>((size_t)m * k, 21), hB = random_host<__nv_fp8_e4m3>((size_t)k * n, 22);
  __nv_fp8_e4m3 *A = to_device(hA), *Bt = to_device(transpose(hB, k, n));
  __nv_bfloat16 *D;
  CHECK(cudaMalloc(&D, (size_t)m * n * sizeof *D));
  CHECK(cudaMemset(D, 0xff, (size_t)m * n * sizeof *D));
  /* the scales count: 1.5 * 0.5 * 4 = 3 */
  float *sa = device_float(0.5f), *sb = device_float(4.0f);
  std::vector<__nv_bfloat16> hD;
  {
    Fp8 f(m, n, k, 1.5f, sa, sb, A, Bt, D);
    printf("check e4m3 algorithm: %s\n", f.chosen);
    CHECK(cudaMemset(D, 0xff, (size_t)m * n * sizeof *D));   /* the candidate's trial run wrote D */
    f.run();
    hD = to_host(D, (size_t)m * n);
  }
  cudaFree(A); cudaFree(Bt); cudaFree(D); cudaFree(sa); cudaFree(sb);
  /* bfloat16's rounding, and room for the tensor cores' narrower fp8 sums (as t/038) */
  return compare("e4m3", hA, hB, hD, m, n, k, 3.0, 2 * 0x1p-8 + k * 0x1p-16);
}

/* }====================================================== */


static bool has_fp8 () {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.major * 10 + prop.minor >= 89;
}

int main (int argc, char **argv) {
  cublasHandle_t handle;
  if (argc > 1 && strcmp(argv[1], "check") == 0) {
    const int m = argc > 2 ? atoi(argv[2]) : 208, n = argc > 3 ? atoi(argv[3]) : 144, k = argc > 4 ? atoi(argv[4]) : 320;
    if (m < 1 || n < 1 || k < 1 || n % 8 != 0 || k % 16 != 0) {
      fprintf(stderr, "anchor_cublaslt check M N K: sizes 1 or more, N a multiple of 8 and K of 16 (fp8's 16-byte leading dimensions)\n");
      return 2;
    }
    CHECK(cublasCreate(&handle));
    bool ok = check_gemmex<__half>(handle, CUDA_R_16F, "f16", m, n, k, 0x1p-11);
    ok = check_gemmex<__nv_bfloat16>(handle, CUDA_R_16BF, "bf16", m, n, k, 0x1p-8) && ok;
    if (has_fp8()) ok = check_fp8(m, n, k) && ok;
    else printf("check e4m3: not on this device (fp8 needs compute capability 8.9)\n");
    cublasDestroy(handle);
    printf("check: %s\n", ok ? "all right" : "WRONG");
    return ok ? 0 : 1;
  }
  const int n = argc > 1 ? atoi(argv[1]) : 4096, reps = argc > 2 ? atoi(argv[2]) : 9;
  if (n < 16 || n % 16 != 0 || reps < 1) {
    fprintf(stderr, "anchor_cublaslt N REPS: N a multiple of 16, REPS 1 or more\n");
    return 2;
  }
  CHECK(cublasCreate(&handle));
  printf("f16_ms %.4f\n", time_gemmex<__half>(handle, CUDA_R_16F, n, reps));
  printf("bf16_ms %.4f\n", time_gemmex<__nv_bfloat16>(handle, CUDA_R_16BF, n, reps));
  fflush(stdout);
  if (has_fp8()) time_fp8(n, reps);
  cublasDestroy(handle);
  return 0;
}
