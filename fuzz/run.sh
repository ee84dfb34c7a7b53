#!/bin/sh
# fuzz/run.sh [SECONDS] [TARGET ...]: build the libFuzzer harnesses of fuzz.c
# with clang (-fsanitize=fuzzer,address,undefined) against culua's sources
# in a configured tree, then run each for SECONDS (default 60) from its seed
# corpus in fuzz/corpus/<target>/ (new inputs go to a scratch copy, not the
# tree). Crashes land in fuzz/out/<target>/. Prints a line a target:
#   fuzz <target>: <N> executions in <S> s, <verdict>
# and exits non-zero when any target crashed. Needs clang and a configured
# tree (./configure; make builds the generated src/*.inc it includes, and
# src/embedded.S, the files built in).
set -u
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-"signature check_args dtype logmap cache"}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/fuzz/out
cc=${FUZZ_CC:-clang}
cuda=${CUDA_HOME:-/usr/local/cuda}
if ! command -v "$cc" >/dev/null 2>&1; then echo "fuzz: $cc not found (apt-get install clang)"; exit 1; fi
[ -f "$top/config.h" ] || { echo "fuzz: run ./configure && make first"; exit 1; }
mkdir -p "$out/build"
# the harness build leaves MPI out: mpirun is not a fuzzer's world
grep -v 'CULUA_USE_MPI' "$top/config.h" > "$out/build/config.h"
lua_cflags=$(pkg-config --cflags lua5.4 2>/dev/null)
lua_lib=$(pkg-config --variable=libdir lua5.4 2>/dev/null)/liblua5.4.a
[ -f "$lua_lib" ] || lua_lib=$(pkg-config --libs lua5.4)
srcs="$(ls "$top"/src/*.c | grep -v '/main\.c$') $top/src/embedded.S"
status=0
for t in $targets; do
  bin=$out/build/fuzz_$t
  if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
       -DFUZZ_TARGET_$t=1 -I"$out/build" -I"$top/src" $lua_cflags -isystem "$cuda/include" \
       -o "$bin" "$top/fuzz/fuzz.c" $srcs "$lua_lib" -ldl -lm -lpthread 2>"$out/build/$t.log"; then
    echo "fuzz $t: build failed"; cat "$out/build/$t.log"; status=1; continue
  fi
  mkdir -p "$out/$t/corpus" "$out/$t/crashes"
  cp "$top"/fuzz/corpus/$t/* "$out/$t/corpus/" 2>/dev/null
  log=$out/$t/log
  # leak checking is off inside the loop: the Lua state lives across inputs
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 CULUA_CACHE="$out/$t/cache" \
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$out/$t/crashes/" "$out/$t/corpus" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then verdict="no crash"; else verdict="CRASH (exit $rc; see $log and $out/$t/crashes/)"; status=1; tail -40 "$log"; fi
  echo "fuzz $t: ${execs:-0} executions in $secs s, $verdict"
done
exit $status
