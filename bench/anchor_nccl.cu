/*
** anchor_nccl.cu
** The NCCL anchor for bench/nccl.lua: the same measurement as
** examples/allreduce.lua, in C calling NCCL directly. One process, every
** GPU (ncclCommInitAll), float32 sum all-reduce of BYTES a GPU, events on
** each GPU's stream, a run counted at its slowest GPU, 3 warm-ups, median of
** REPS. Built on the GPU machine by bench/run_nccl.sh:
**   nvcc -O2 -o bench/anchor_nccl bench/anchor_nccl.cu -lnccl
**
**   anchor_nccl REPS BYTES [BYTES ...]   ->   "allreduce BYTES ms X busbw Y" a size
*/

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "anchor_nccl: %s failed: %s\n", #x, cudaGetErrorName(e_)); exit(1); } } while (0)
#define NCHECK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  fprintf(stderr, "anchor_nccl: %s failed: %s\n", #x, ncclGetErrorString(r_)); exit(1); } } while (0)

int main (int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: anchor_nccl REPS BYTES [BYTES ...]\n");
    return 2;
  }
  int reps = atoi(argv[1]), n = 0;
  size_t largest = 0;
  for (int a = 2; a < argc; a++) largest = std::max(largest, (size_t)strtoull(argv[a], NULL, 10));
  CHECK(cudaGetDeviceCount(&n));
  std::vector<int> devs(n);
  std::vector<ncclComm_t> comms(n);
  std::vector<float *> send(n), recv(n);
  std::vector<cudaStream_t> streams(n);
  std::vector<cudaEvent_t> e0(n), e1(n);
  for (int i = 0; i < n; i++) {
    devs[i] = i;
    CHECK(cudaSetDevice(i));
    CHECK(cudaMalloc(&send[i], largest));
    CHECK(cudaMalloc(&recv[i], largest));
    CHECK(cudaMemset(send[i], 0, largest));
    CHECK(cudaStreamCreate(&streams[i]));
    CHECK(cudaEventCreate(&e0[i]));
    CHECK(cudaEventCreate(&e1[i]));
  }
  NCHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int a = 2; a < argc; a++) {
    size_t bytes = strtoull(argv[a], NULL, 10), count = bytes / 4;
    auto run = [&] () {
      NCHECK(ncclGroupStart());
      for (int i = 0; i < n; i++)
        NCHECK(ncclAllReduce(send[i], recv[i], count, ncclFloat, ncclSum, comms[i], streams[i]));
      NCHECK(ncclGroupEnd());
    };
    for (int w = 0; w < 3; w++) run();
    std::vector<float> t(reps);
    for (int r = 0; r < reps; r++) {
      for (int i = 0; i < n; i++) { CHECK(cudaSetDevice(i)); CHECK(cudaEventRecord(e0[i], streams[i])); }
      run();
      float slowest = 0;
      for (int i = 0; i < n; i++) {
        float ms;
        CHECK(cudaSetDevice(i));
        CHECK(cudaEventRecord(e1[i], streams[i]));
        CHECK(cudaEventSynchronize(e1[i]));
        CHECK(cudaEventElapsedTime(&ms, e0[i], e1[i]));
        slowest = std::max(slowest, ms);
      }
      t[r] = slowest;
    }
    std::sort(t.begin(), t.end());
    float ms = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
    double algbw = bytes / (ms * 1e-3) / 1e9;
    printf("allreduce %zu ms %.4f busbw %.2f\n", bytes, ms, algbw * 2.0 * (n - 1) / n);
  }
  for (int i = 0; i < n; i++) ncclCommDestroy(comms[i]);
  return 0;
}
