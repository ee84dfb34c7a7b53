#!/bin/sh
# bench/run.sh: build the C anchors and run every benchmark, on the GPU machine.
#   sh bench/run.sh [CULUA] [OUTDIR]
# Needs nvcc, cuBLAS and cuSOLVER (the toolkit) for the anchors.
# Prints each table; with OUTDIR, also writes them to OUTDIR/bench.txt.
set -e
culua=${1:-./culua}
out=${2:-}
cuda=${CUDA_HOME:-/usr/local/cuda}
cc -O2 -I"$cuda/include" bench/anchor.c -o bench/anchor -L"$cuda/lib64/stubs" -lcuda
nvcc -O2 -o bench/anchor_cublas bench/anchor_cublas.cu -lcublas
nvcc -O2 -o bench/anchor_cusolver bench/anchor_cusolver.cu -lcusolver -lcublas
nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o bench/anchor_cub bench/anchor_cub.cu
# one core for culua and its anchor child alike: less scheduler noise in launch timings
pin=
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 2"; fi
{
  echo "== $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  $pin "$culua" bench/launch.lua bench/anchor
  echo
  $pin "$culua" bench/call_overhead.lua
  echo
  "$culua" bench/copy.lua bench/anchor
  echo
  "$culua" bench/nvrtc_cache.lua
  echo
  "$culua" bench/matmul.lua bench/anchor_cublas
  echo
  "$culua" bench/streamk.lua bench/anchor_cublas
  echo
  "$culua" bench/barrier.lua
  echo
  $pin "$culua" bench/scan.lua bench/anchor_cub   # its 2^16 figure is the host's
  echo
  "$culua" bench/histogram.lua bench/anchor_cub
  echo
  "$culua" bench/sort.lua bench/anchor_cub
  echo
  "$culua" bench/solve.lua bench/anchor_cusolver
  echo
  "$culua" examples/grid_barrier.lua seed "${out:-/tmp}/grid_barrier.csv" | sed -n '/Part 2/,$p'
} 2>&1 | if [ -n "$out" ]; then tee "$out/bench.txt"; else cat; fi
