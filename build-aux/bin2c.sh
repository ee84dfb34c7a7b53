#!/bin/sh
# bin2c.sh PREFIX FILE...: each file as a C byte array, then a table
# {"PREFIX.<basename without .lua>", bytes, size} ending in {NULL, NULL, 0}.
# The same od | sed trick jq uses for its builtins; no xxd needed.
set -e
prefix=$1; shift
i=0
table=
for f in "$@"; do
  base=`basename "$f" .lua`
  echo "static const unsigned char embedded_$i[] = {"
  od -An -v -tx1 "$f" | sed -e 's/[0-9a-f][0-9a-f]/0x&,/g'
  echo "};"
  table="$table  {\"$prefix.$base\", embedded_$i, sizeof(embedded_$i)},
"
  i=`expr $i + 1`
done
echo "static const struct Embedded { const char *name; const unsigned char *data; size_t size; } embedded[] = {"
printf '%s' "$table"
echo "  {NULL, NULL, 0}"
echo "};"
