#!/bin/sh
# entries.sh PTX...: the .entry declarations (name and parameter list) of
# the kernels in PTX files, each once, as PTX text that cuda.signature and
# cuda.load's ptx option read. nvcc keeps one PTX a virtual architecture;
# a kernel they declare differently is an error (its signature would depend
# on the device), not a guess.
set -e
[ $# -ge 1 ] || { echo "usage: entries.sh PTX..." >&2; exit 2; }
for f in "$@"; do [ -r "$f" ] || { echo "entries.sh: cannot read $f" >&2; exit 1; }; done
${AWK:-awk} '
  function flush() {
    if (name in seen) {
      if (seen[name] != decl) {
        printf "entries.sh: %s declares .entry %s unlike an earlier PTX\n", FILENAME, name > "/dev/stderr"
        bad = 1
      }
    }
    else { seen[name] = decl; order[++n] = name }
    p = 0
  }
  /^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]/ {
    line = $0
    sub(/^.*\.entry[ \t]+/, "", line)
    name = line
    sub(/[ \t(].*$/, "", name)
    decl = ".entry " line "\n"
    p = 1
    if (line !~ /\(/ || line ~ /\)/) flush()
    next
  }
  p { decl = decl $0 "\n"; if ($0 ~ /\)/) flush() }
  END {
    if (p) { printf "entries.sh: unterminated .entry %s\n", name > "/dev/stderr"; exit 1 }
    if (bad) exit 1
    if (n == 0) { print "entries.sh: no .entry in the PTX" > "/dev/stderr"; exit 1 }
    print "// the kernels declared in the PTX that nvcc made (build-aux/entries.sh)"
    for (i = 1; i <= n; i++) printf "%s", seen[order[i]]
  }' "$@"
