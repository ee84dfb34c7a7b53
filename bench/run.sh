#!/bin/sh
# bench/run.sh: build the C anchors and run every benchmark, on the GPU machine.
#   sh bench/run.sh [CULUA] [OUTDIR]
# Needs nvcc, cuBLAS and cuSOLVER (the toolkit) for the anchors.
# Prints each table; with OUTDIR, also writes them to OUTDIR/bench.txt.
# Exits 1, naming them, when any benchmark failed or did not run (no GPU).
set -e
culua=${1:-./culua}
out=${2:-}
cuda=${CUDA_HOME:-/usr/local/cuda}
# no GPU, nothing to time: say so before minutes of nvcc, and fail
if ! "$culua" -e 'require("culua.bench").need_devices(1, {name = "bench/run.sh"})'; then
  echo "bench/run.sh: no benchmark ran" >&2
  exit 1
fi
cc -O2 -I"$cuda/include" bench/anchor.c -o bench/anchor -L"$cuda/lib64/stubs" -lcuda
nvcc -O2 -o bench/anchor_cublas bench/anchor_cublas.cu -lcublas
nvcc -O2 -o bench/anchor_cublaslt bench/anchor_cublaslt.cu -lcublasLt -lcublas
nvcc -O2 -o bench/anchor_cusolver bench/anchor_cusolver.cu -lcusolver -lcublas
nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o bench/anchor_cub bench/anchor_cub.cu
# one core for culua and its anchor child alike: less scheduler noise in launch
# timings. Core 2 as the results in bench/RESULTS.md were taken, or the last
# core this process may use where there is no core 2; none when taskset cannot.
pin=
if command -v taskset >/dev/null 2>&1; then
  ncpu=$(nproc 2>/dev/null || echo 1)
  core=2
  [ "$ncpu" -gt 2 ] || core=$((ncpu - 1))
  if taskset -c "$core" true 2>/dev/null; then
    pin="taskset -c $core"
  else
    echo "bench/run.sh: taskset -c $core refused; timings unpinned" >&2
  fi
fi
# every step runs, whatever the one before did; a step that fails, or skips
# (status 77: no GPU, or not enough of them), is named here and in the last
# line, and makes run.sh exit 1
failures=$(mktemp)
trap 'rm -f "$failures"' EXIT
step () {
  st=0
  "$@" || st=$?
  if [ "$st" -ne 0 ]; then
    echo "bench/run.sh: FAILED (exit $st): $*"
    echo "$* (exit $st)" >>"$failures"
  fi
  return 0
}
# grid_barrier's second part only
grid_part2 () {
  gout=$(mktemp)
  gst=0
  "$@" >"$gout" 2>&1 || gst=$?
  sed -n '/Part 2/,$p' "$gout"
  [ "$gst" -eq 0 ] || cat "$gout"
  rm -f "$gout"
  return "$gst"
}
{
  echo "== $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  step $pin "$culua" bench/launch.lua bench/anchor
  echo
  step $pin "$culua" bench/call_overhead.lua
  echo
  step $pin "$culua" bench/host_paths.lua bench/anchor
  echo
  step "$culua" bench/copy.lua bench/anchor
  echo
  step "$culua" bench/managed.lua
  echo
  step "$culua" bench/nvrtc_cache.lua
  echo
  step "$culua" bench/matmul.lua bench/anchor_cublas
  echo
  step "$culua" bench/matmul_lowp.lua bench/anchor_cublaslt
  echo
  step "$culua" bench/streamk.lua bench/anchor_cublas
  echo
  step "$culua" bench/barrier.lua
  echo
  step $pin "$culua" bench/scan.lua bench/anchor_cub   # its 2^16 figure is the host's
  echo
  step "$culua" bench/histogram.lua bench/anchor_cub
  echo
  step "$culua" bench/sort.lua bench/anchor_cub
  echo
  step "$culua" bench/solve.lua bench/anchor_cusolver
  echo
  step grid_part2 "$culua" examples/grid_barrier.lua seed "${out:-/tmp}/grid_barrier.csv"
} 2>&1 | if [ -n "$out" ]; then tee "$out/bench.txt"; else cat; fi
if [ -s "$failures" ]; then
  {
    echo "bench/run.sh: $(wc -l <"$failures") benchmark(s) did not run to their end:"
    sed 's/^/  /' "$failures"
  } >&2
  exit 1
fi
