#!/bin/sh
# bin2c.sh NAME FILE [NAME FILE ...]: each file as a C byte array, then a
# table {NAME, bytes, size} ending in {NULL, NULL, 0}. The bytes are followed
# by a NUL that size does not count, so text can be used as a C string.
# The same od | sed trick jq uses for its builtins; no xxd needed.
set -e
i=0
table=
while [ $# -ge 2 ]; do
  name=$1
  file=$2
  shift 2
  echo "static const unsigned char embedded_$i[] = {"
  od -An -v -tx1 "$file" | sed -e 's/[0-9a-f][0-9a-f]/0x&,/g'
  echo "0x00};"
  table="$table  {\"$name\", embedded_$i, sizeof(embedded_$i) - 1},
"
  i=`expr $i + 1`
done
echo "static const struct Embedded { const char *name; const unsigned char *data; size_t size; } embedded[] = {"
printf '%s' "$table"
echo "  {NULL, NULL, 0}"
echo "};"
