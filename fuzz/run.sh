#!/bin/sh
# fuzz/run.sh [SECONDS] [TARGET ...]: build the libFuzzer harnesses of fuzz.c
# with clang (-fsanitize=fuzzer,address,undefined) against culua's sources
# in a configured tree, then run each for SECONDS (default 60) from its seed
# corpus in fuzz/corpus/<target>/ (new inputs go to a scratch copy, not the
# tree). Crashes land in fuzz/out/<target>/. Prints a line a target:
#   fuzz <target>: <N> executions in <S> s, <verdict>
# and exits non-zero when any target crashed. Needs clang and a configured
# tree (./configure; make builds the generated src/*.inc it includes, and
# src/embedded.S, the files built in). culua's sources are compiled once for
# every target, and the targets run FUZZ_JOBS at a time (default: the
# processors there are), each a process on a processor of its own: the same
# seconds a target as one after another, in a fraction of the time.
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
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
san="address,undefined -fno-sanitize-recover=undefined"
flags="-g -O1 -fsanitize=fuzzer,$san"
incs="-I$out/build -I$top/src $lua_cflags -isystem $cuda/include"
# culua's sources (no main), compiled once, in parallel, instrumented for the fuzzer
# (fuzzer-no-link: its main comes in at each target's link)
obj=$out/build/obj
rm -rf "$obj"
mkdir -p "$obj"
if ! ls "$top"/src/*.c "$top"/src/embedded.S | grep -v '/main\.c$' \
     | xargs -P "$jobs" -I{} sh -c 'f={}; b=$(basename "$f"); '"$cc -g -O1 -fsanitize=fuzzer-no-link,$san $incs"' -c -o "'"$obj"'/$b.o" "$f"' \
       2>"$out/build/objects.log"; then
  echo "fuzz: culua's sources did not build"; cat "$out/build/objects.log"; exit 1
fi

# one target: link its harness, run it from a scratch copy of its corpus, print its line
one () {
  t=$1
  bin=$out/build/fuzz_$t
  if ! $cc $flags -DFUZZ_TARGET_$t=1 $incs -o "$bin" "$top/fuzz/fuzz.c" "$obj"/*.o \
       "$lua_lib" -ldl -lm -lpthread 2>"$out/build/$t.log"; then
    echo "fuzz $t: build failed"; cat "$out/build/$t.log"; return 1
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
  if [ $rc -eq 0 ]; then verdict="no crash"; else verdict="CRASH (exit $rc; see $log and $out/$t/crashes/)"; tail -40 "$log"; fi
  echo "fuzz $t: ${execs:-0} executions in $secs s, $verdict"
  [ $rc -eq 0 ]
}

# the targets, jobs at a time; each one's lines printed whole when it ends
status=0
running=0
for t in $targets; do
  (one "$t" >"$out/build/$t.out" 2>&1; echo $? >"$out/build/$t.rc") &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait; running=0; fi
done
wait
for t in $targets; do
  cat "$out/build/$t.out"
  [ "$(cat "$out/build/$t.rc" 2>/dev/null)" = 0 ] || status=1
done
exit $status
