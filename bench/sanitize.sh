#!/bin/sh
# bench/sanitize.sh -- compute-sanitizer over the test files that launch
# kernels, on the GPU machine:
#
#   sh bench/sanitize.sh [CULUA] [OUTDIR]
#
# CULUA is the interpreter (default ./culua), OUTDIR the folder for the
# logs (default sanitize-out), one log a tool and file: OUTDIR/TOOL-FILE.log.
# TOOLS restricts the tools (default "memcheck racecheck synccheck
# initcheck"); TESTS the files (default every t/*.t that calls
# T.need_gpu()), since racecheck, synccheck and initcheck are slow:
#   TESTS="t/018-scan.t t/019-histogram.t" TOOLS=racecheck sh bench/sanitize.sh
#
# Notes on reading the table:
# - initcheck may report reads of scratch memory (cuMemAlloc'ed, never
#   memset) that a kernel itself wrote earlier in the same launch or an
#   earlier one: that read-after-write is intended, and such a report is
#   worth a look but not a bug by itself.
# - some files must not run under the sanitizer: t/013-fault.t faults a
#   kernel on purpose (the sanitizer would report that fault as the error
#   it is, and the poisoned context would stop the rest); they are listed
#   in EXCLUDE below with the reason, which is printed.
# - a long file can be shared out over several runs at once: t/017-examples.t
#   runs only the programs that CULUA_TEST_ONLY (a Lua pattern) matches, so
#   CULUA_TEST_ONLY=quicksort TESTS=t/017-examples.t sh bench/sanitize.sh ./culua out-q
#   beside other such runs (each its own OUTDIR) checks part of it.
# - t/020-sort.t and t/030-solve.t share their cases out the same way:
#   CULUA_TEST_SHARE=2/4 runs the second of every four (T.share in lua/tap.lua);
#   four runs at once, each with its own OUTDIR, cover the file.
# - under a tool, CULUA_TEST_SANITIZER names it, and a file may take smaller
#   sizes (T.sanitizer in lua/tap.lua); the file says which.
# - the tools run with their default flags: culua makes no call that it
#   expects the driver to refuse (t/033-sanitizer.t checks a catalog script
#   so), and an API error in the summary is a finding. Files that provoke
#   refusals on purpose are listed in REFUSES below, with what they provoke;
#   only they run with --report-api-errors no, and the table says so.

CULUA=${1:-./culua}
OUTDIR=${2:-sanitize-out}
TOOLS=${TOOLS:-"memcheck racecheck synccheck initcheck"}
SANITIZER=${SANITIZER:-compute-sanitizer}
SANITIZER_FLAGS=${SANITIZER_FLAGS:-}
TIMEOUT=
[ -n "${SANITIZER_TIMEOUT:-}" ] && TIMEOUT="timeout $SANITIZER_TIMEOUT"
# the tests compile into a cache of their own, as under make check
CULUA_CACHE=${CULUA_CACHE:-$OUTDIR/cache}; export CULUA_CACHE

# "file:reason" a line
EXCLUDE='t/013-fault.t:faults a kernel on purpose (an illegal address the sanitizer would count)'

# "file:what it asks the driver that the driver refuses, on purpose" a line:
# these files alone run with --report-api-errors no
REFUSES='t/010-array.t:allocates 1 TiB to check the out-of-memory error
t/012-launch.t:launches with too much shared memory, loads bad PTX
t/023-link.t:links a program with an undefined symbol
t/029-bad-input.t:allocates 8 TiB, loads malformed PTX'

# files whose CUDA work is all in child processes (mpirun's ranks; t/017's
# example programs, which T.run starts): the file itself runs plainly, each
# child runs under the tool (CULUA_TEST_WRAP, lua/tap.lua) with a log of its
# own, OUTDIR/TOOL-FILE-child<pid>.log, and the children's errors are added up.
# (t/017 whole under the tool, its children followed by it, stalled on the H100:
# programs that finish in 2-19 s under memcheck alone made no progress in 530.)
CHILDREN='t/026-mpi.t t/017-examples.t'

excluded () {  # prints the reason when $1 is excluded
  echo "$EXCLUDE" | while IFS= read -r line; do
    case $line in "$1:"*) echo "${line#*:}";; esac
  done
}

refuses () {  # prints what $1 provokes when it provokes refusals on purpose
  echo "$REFUSES" | while IFS= read -r line; do
    case $line in "$1:"*) echo "${line#*:}";; esac
  done
}

if [ -z "$TESTS" ]; then
  TESTS=`grep -l 'T\.need_gpu *(' t/*.t 2>/dev/null`
fi
if [ -z "$TESTS" ]; then
  echo "sanitize.sh: no test files to run" >&2
  exit 2
fi
mkdir -p "$OUTDIR" || exit 2

status=0
printf '%-28s %-10s %-12s %s\n' FILE TOOL ERRORS TAP
for f in $TESTS; do
  why=`excluded "$f"`
  if [ -n "$why" ]; then
    printf '%-28s %-10s %-12s %s\n' "$f" '-' excluded "$why"
    continue
  fi
  base=`basename "$f" .t`
  # API errors are reported unless the file provokes them on purpose
  flags=$SANITIZER_FLAGS
  note=
  if [ -n "`refuses "$f"`" ]; then
    flags="--report-api-errors no $SANITIZER_FLAGS"
    note=" (API errors not counted: `refuses "$f"`)"
  fi
  for tool in $TOOLS; do
    log=$OUTDIR/$tool-$base.log
    # the tests may take smaller sizes under a tool (T.sanitizer)
    export CULUA_TEST_SANITIZER=$tool
    # SANITIZER_TIMEOUT (seconds): a file slower than that under a tool is
    # reported as such, not waited for
    case " $CHILDREN " in
    *" $f "*)
      rm -f "$OUTDIR/$tool-$base"-child*.log
      CULUA_TEST_WRAP="$SANITIZER --tool $tool --error-exitcode 99 --print-limit 20 $flags --log-file $OUTDIR/$tool-$base-child%p.log" \
        $TIMEOUT "$CULUA" "$f" >"$log" 2>&1
      rc=$?
      # every child's summary, added up. A child with none was killed (by its
      # launcher, as when t/026 checks that a failing rank ends the job): said
      # beside the count, and left to the file's own TAP. No child at all is
      # fine when the file skipped (no MPI); otherwise there is no summary.
      n=0; kids=0; cut=0
      for c in "$OUTDIR/$tool-$base"-child*.log; do
        [ -f "$c" ] || continue
        kids=$((kids + 1))
        e=`sed -n -e 's/.*ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' \
                  -e 's/.*RACECHECK SUMMARY: .*(\([0-9][0-9]*\) error.*/\1/p' "$c" | tail -n 1`
        if [ -n "$e" ]; then n=$((n + e)); else cut=$((cut + 1)); fi
      done
      if [ "$kids" -eq 0 ] && ! grep -q '^1\.\.0' "$log"; then n=; fi
      ;;
    *)
      $TIMEOUT "$SANITIZER" --tool "$tool" --error-exitcode 99 --print-limit 20 \
        $flags "$CULUA" "$f" >"$log" 2>&1
      rc=$?
      n=`sed -n -e 's/.*ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' \
                -e 's/.*RACECHECK SUMMARY: .*(\([0-9][0-9]*\) error.*/\1/p' "$log" | tail -n 1`
      ;;
    esac
    if [ "$rc" -eq 124 ] && [ -n "$TIMEOUT" ]; then
      errs="timed out"
    elif [ -z "$n" ]; then
      errs="no summary"
      status=1
    else
      errs="$n errors"
      [ "$n" -eq 0 ] || status=1
      case " $CHILDREN " in
      *" $f "*) [ "$cut" -eq 0 ] || errs="$errs ($cut of $kids children cut)";;
      esac
    fi
    # TAP: a line "not ok" that is not a TODO is a failure
    fails=`grep '^not ok' "$log" | grep -vc '# *TODO'`
    if [ "$fails" -gt 0 ]; then
      tap="$fails failed"
      status=1
    elif grep -q '^ok' "$log"; then
      tap=ok
    elif grep -q '^1\.\.0' "$log"; then
      tap=skipped
    else
      tap="no TAP (rc $rc)"
      status=1
    fi
    [ "$rc" -eq 0 ] || [ "$rc" -eq 99 ] || case $tap in ok|skipped) tap="$tap (rc $rc)"; status=1;; esac
    printf '%-28s %-10s %-12s %s\n' "$f" "$tool" "$errs" "$tap$note"
  done
done
echo "logs in $OUTDIR"
exit $status
