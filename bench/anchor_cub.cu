/*
** anchor_cub.cu
** The CUB anchor for bench/scan.lua, bench/histogram.lua and bench/sort.lua:
** NVIDIA's own device-wide primitives on data made on the device, temp
** storage allocated before timing, 2 warm-up calls, then REPS calls each
** between two events; the median is printed. Each run checks its result
** a little (an anchor that computes nothing would flatter us). Built on the
** GPU machine by bench/run.sh:
**   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o bench/anchor_cub bench/anchor_cub.cu
**
**   anchor_cub scan f32|i32 N REPS                     -> scan_ms X
**   anchor_cub select f32 N REPS                       -> select_ms X kept K
**   anchor_cub histogram u8 N BINS REPS uniform|equal  -> histogram_ms X
**   anchor_cub histogram f32 N BINS REPS uniform       -> histogram_ms X
**   anchor_cub sort u32 N REPS keys|pairs              -> sort_ms X
**   anchor_cub sort u64 N REPS keys                    -> sort_ms X
**   anchor_cub sort f16|bf16 N REPS keys|pairs         -> sort_ms X
** (f16, bf16: __half and __nv_bfloat16 keys of every bit pattern, NaNs among
** them; pairs: uint32 values, what an argsort moves)
** With ANCHOR_SYNC=1 in the environment, the device is synchronized before
** each first event, so that a figure also holds the host's way to the first
** launch (bench/RESULTS.md, session 24); without, the calls are queued while
** the work before them runs, and a figure is the GPU's time alone.
*/

#include <cub/cub.cuh>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <vector>
#include <algorithm>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "anchor_cub: %s failed: %s\n", #x, cudaGetErrorName(e_)); exit(1); } } while (0)

static void usage (void) {
  fprintf(stderr, "usage: anchor_cub scan f32|i32 N REPS | select f32 N REPS | "
                  "histogram u8|f32 N BINS REPS uniform|equal | sort u32|u64|f16|bf16 N REPS keys|pairs\n");
  exit(2);
}

/* splitmix64 of the index: reproducible data without a host copy */
__device__ __host__ static uint64_t mix (uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T> __global__ void fill_kernel (T *x, size_t n, uint64_t seed, int kind) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t h = mix(i ^ seed);
    if (kind == 0) x[i] = (T)h;                                        /* integers: all bits */
    else if (kind == 1) x[i] = (T)((h >> 40) * (1.0 / 16777216.0));   /* floats in [0, 1) */
    else if (kind == 2) x[i] = (T)7;                                    /* all equal */
    else x[i] = (T)((int)(h % 5) - 2);                                  /* small integers: exact sums */
  }
}

template <typename T> static void fill (T *x, size_t n, uint64_t seed, int kind) {
  fill_kernel<<<1024, 256>>>(x, n, seed, kind);
  CHECK(cudaGetLastError());
}

struct Over { __device__ bool operator() (const float &v) const { return v > 0.5f; } };

/* time fn REPS times after 2 warm-ups; before() runs outside the events */
template <typename F, typename B> static float median_ms (int reps, F fn, B before) {
  cudaEvent_t e0, e1;
  std::vector<float> t(reps);
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const char *sync = getenv("ANCHOR_SYNC");
  for (int i = 0; i < 2; i++) { before(); fn(); }
  for (int r = 0; r < reps; r++) {
    before();
    if (sync && strcmp(sync, "1") == 0) CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(e0));
    fn();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  std::sort(t.begin(), t.end());
  return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

static void nothing (void) {}

template <typename T> static void scan (size_t n, int reps, int kind) {
  T *x, *y;
  void *tmp = NULL;
  size_t tmpb = 0;
  CHECK(cudaMalloc(&x, n * sizeof(T)));
  CHECK(cudaMalloc(&y, n * sizeof(T)));
  fill(x, n, 1, kind);
  CHECK(cub::DeviceScan::InclusiveSum(tmp, tmpb, x, y, (int64_t)n));
  CHECK(cudaMalloc(&tmp, tmpb));
  float ms = median_ms(reps, [&] { CHECK(cub::DeviceScan::InclusiveSum(tmp, tmpb, x, y, (int64_t)n)); }, nothing);
  /* the check: the last prefix is the sum, done again by a reduce */
  T *sum, hs, hy;
  CHECK(cudaMalloc(&sum, sizeof(T)));
  void *rt = NULL;
  size_t rtb = 0;
  CHECK(cub::DeviceReduce::Sum(rt, rtb, x, sum, (int64_t)n));
  CHECK(cudaMalloc(&rt, rtb));
  CHECK(cub::DeviceReduce::Sum(rt, rtb, x, sum, (int64_t)n));
  CHECK(cudaMemcpy(&hs, sum, sizeof(T), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&hy, y + n - 1, sizeof(T), cudaMemcpyDeviceToHost));
  double rel = fabs((double)hs - (double)hy) / (fabs((double)hs) + 1.0);
  if (rel > 1e-3) { fprintf(stderr, "anchor_cub: scan check failed (%g vs %g)\n", (double)hy, (double)hs); exit(1); }
  printf("check ok\nscan_ms %.4f\n", ms);
}

static void select_if (size_t n, int reps) {
  float *x, *y;
  int64_t *count, kept = 0;
  void *tmp = NULL;
  size_t tmpb = 0;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&count, sizeof(int64_t)));
  fill(x, n, 2, 1);
  CHECK(cub::DeviceSelect::If(tmp, tmpb, x, y, count, (int64_t)n, Over()));
  CHECK(cudaMalloc(&tmp, tmpb));
  float ms = median_ms(reps, [&] { CHECK(cub::DeviceSelect::If(tmp, tmpb, x, y, count, (int64_t)n, Over())); }, nothing);
  CHECK(cudaMemcpy(&kept, count, sizeof(int64_t), cudaMemcpyDeviceToHost));
  if (kept < (int64_t)(0.45 * n) || kept > (int64_t)(0.55 * n)) {
    fprintf(stderr, "anchor_cub: select check failed (kept %lld of %zu)\n", (long long)kept, n);
    exit(1);
  }
  printf("check ok\nselect_ms %.4f kept %lld\n", ms, (long long)kept);
}

template <typename T, typename L> static void histogram (size_t n, int bins, int reps, int kind, L lo, L hi) {
  T *x;
  unsigned *counts;
  void *tmp = NULL;
  size_t tmpb = 0;
  CHECK(cudaMalloc(&x, n * sizeof(T)));
  CHECK(cudaMalloc(&counts, bins * sizeof(unsigned)));
  fill(x, n, 3, kind);
  /* CUB takes the sample count as an int here: n up to 2^31 - 1 */
  if (n > 0x7fffffff) { fprintf(stderr, "anchor_cub: histogram of more than 2^31 - 1 samples\n"); exit(2); }
  CHECK(cub::DeviceHistogram::HistogramEven(tmp, tmpb, x, counts, bins + 1, lo, hi, (int)n));
  CHECK(cudaMalloc(&tmp, tmpb));
  float ms = median_ms(reps, [&] {
    CHECK(cub::DeviceHistogram::HistogramEven(tmp, tmpb, x, counts, bins + 1, lo, hi, (int)n)); }, nothing);
  std::vector<unsigned> h(bins);
  CHECK(cudaMemcpy(h.data(), counts, bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  uint64_t total = 0;
  for (int b = 0; b < bins; b++) total += h[b];
  if (total != n) { fprintf(stderr, "anchor_cub: histogram check failed (%llu of %zu)\n", (unsigned long long)total, n); exit(1); }
  printf("check ok\nhistogram_ms %.4f\n", ms);
}

/* a key as a double, for the check: 2-byte floats through float (NaNs compare false) */
template <typename K> static double key_value (K k) { return (double)k; }
template <> double key_value<__half> (__half k) { return (double)__half2float(k); }
template <> double key_value<__nv_bfloat16> (__nv_bfloat16 k) { return (double)__bfloat162float(k); }

/* K: the keys' type; B: an unsigned integer of its size, whose every bit pattern the
** keys are made of (for K an integer, itself) */
template <typename K, typename B = K> static void sort (size_t n, int reps, bool pairs) {
  K *k0, *k1, *pristine;
  unsigned *v0 = NULL, *v1 = NULL;
  void *tmp = NULL;
  size_t tmpb = 0;
  static_assert(sizeof(K) == sizeof(B), "the keys' bits");
  CHECK(cudaMalloc(&k0, n * sizeof(K)));
  CHECK(cudaMalloc(&k1, n * sizeof(K)));
  CHECK(cudaMalloc(&pristine, n * sizeof(K)));
  fill((B *)pristine, n, 4, 0);
  if (pairs) {
    CHECK(cudaMalloc(&v0, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&v1, n * sizeof(unsigned)));
    fill(v0, n, 5, 0);
  }
  cub::DoubleBuffer<K> keys(k0, k1);
  cub::DoubleBuffer<unsigned> vals(v0, v1);
  if (pairs) CHECK(cub::DeviceRadixSort::SortPairs(tmp, tmpb, keys, vals, (int64_t)n));
  else CHECK(cub::DeviceRadixSort::SortKeys(tmp, tmpb, keys, (int64_t)n));
  CHECK(cudaMalloc(&tmp, tmpb));
  auto restore = [&] {
    keys = cub::DoubleBuffer<K>(k0, k1);
    vals = cub::DoubleBuffer<unsigned>(v0, v1);
    CHECK(cudaMemcpyAsync(k0, pristine, n * sizeof(K), cudaMemcpyDeviceToDevice));
  };
  float ms = median_ms(reps, [&] {
    if (pairs) CHECK(cub::DeviceRadixSort::SortPairs(tmp, tmpb, keys, vals, (int64_t)n));
    else CHECK(cub::DeviceRadixSort::SortKeys(tmp, tmpb, keys, (int64_t)n));
  }, restore);
  /* the check: sampled neighbours in order */
  for (size_t s = 0; s < 64; s++) {
    size_t i = (size_t)(mix(s) % (n - 1));
    K a[2];
    CHECK(cudaMemcpy(a, keys.Current() + i, 2 * sizeof(K), cudaMemcpyDeviceToHost));
    if (key_value(a[0]) > key_value(a[1])) { fprintf(stderr, "anchor_cub: sort check failed at %zu\n", i); exit(1); }
  }
  printf("check ok\nsort_ms %.4f\n", ms);
}

int main (int argc, char **argv) {
  cudaDeviceProp prop;
  if (argc < 5) usage();
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s\n", prop.name);
  const char *what = argv[1], *type = argv[2];
  size_t n = strtoull(argv[3], NULL, 10);
  if (n < 2) usage();
  if (strcmp(what, "scan") == 0) {
    int reps = atoi(argv[4]);
    if (strcmp(type, "f32") == 0) scan<float>(n, reps, 1);
    else if (strcmp(type, "i32") == 0) scan<int>(n, reps, 3);
    else usage();
  }
  else if (strcmp(what, "select") == 0 && strcmp(type, "f32") == 0) select_if(n, atoi(argv[4]));
  else if (strcmp(what, "histogram") == 0 && argc >= 7) {
    int bins = atoi(argv[4]), reps = atoi(argv[5]);
    bool equal = strcmp(argv[6], "equal") == 0;
    if (!equal && strcmp(argv[6], "uniform") != 0) usage();
    if (strcmp(type, "u8") == 0) histogram<unsigned char, int>(n, bins, reps, equal ? 2 : 0, 0, 256);
    else if (strcmp(type, "f32") == 0 && !equal) histogram<float, float>(n, bins, reps, 1, 0.0f, 1.0f);
    else usage();
  }
  else if (strcmp(what, "sort") == 0 && argc >= 6) {
    int reps = atoi(argv[4]);
    bool pairs = strcmp(argv[5], "pairs") == 0;
    if (!pairs && strcmp(argv[5], "keys") != 0) usage();
    if (strcmp(type, "u32") == 0) sort<unsigned>(n, reps, pairs);
    else if (strcmp(type, "u64") == 0 && !pairs) sort<unsigned long long>(n, reps, false);
    else if (strcmp(type, "f16") == 0) sort<__half, unsigned short>(n, reps, pairs);
    else if (strcmp(type, "bf16") == 0) sort<__nv_bfloat16, unsigned short>(n, reps, pairs);
    else usage();
  }
  else usage();
  return 0;
}
