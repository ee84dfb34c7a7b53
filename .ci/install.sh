#!/usr/bin/env bash
# .ci/install.sh: in a configured and built tree, what users do after make:
#   install  make install DESTDIR=...; stock lua5.4, with only the standard
#            C-module paths of the configured prefix, finds and loads cuda.so
#   embed    examples/embed.c against the installed prefix with pkg-config
#   static   the same linked statically against libculua.a with pkg-config --static
#   rocks    luarocks make --tree ... on the checkout; stock lua5.4 with the
#            tree's paths (luarocks path) loads cuda, and the tree's culua runs
# Each prints "install: ok <what>" or "install: FAILED <what>"; exits 1 when
# any failed. The tree's configuration is put back after LuaRocks reconfigures it.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
lua=${LUA:-lua5.4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
ok () { echo "install: ok $1"; }
bad () { echo "install: FAILED $1"; [ -f "$tmp/log" ] && sed 's/^/  | /' "$tmp/log"; failed=$((failed + 1)); }
mvar () { sed -n "s|^$1 = ||p" Makefile; }

prefix=$(mvar prefix)
libdir=$(mvar libdir | sed "s|\${exec_prefix}|$(mvar exec_prefix)|; s|\${prefix}|$prefix|")
dest=$tmp/dest

# {------ install: the configured prefix's standard paths are lua5.4's own
# package.cpath entries under that prefix, moved under DESTDIR
if make install DESTDIR="$dest" >"$tmp/log" 2>&1; then
  cpath=$(env -u LUA_CPATH -u LUA_CPATH_5_4 P="$prefix" D="$dest" "$lua" -e '
    local p, d, t = os.getenv("P"), os.getenv("D"), {}
    for e in (package.cpath .. ";"):gmatch("(.-);") do
      if e:sub(1, #p + 1) == p .. "/" then t[#t + 1] = d .. e end
    end
    print(table.concat(t, ";"))')
  if [ -z "$cpath" ]; then
    echo "$lua searches no directory under $prefix: configure with --prefix=/usr/local, or pass --with-lua-cmod-dir" >"$tmp/log"
    bad "install: cuda.so where $lua looks"
  elif env -u LUA_CPATH LUA_CPATH_5_4="$cpath" D="$dest" "$lua" -e '
      local cuda = require "cuda"
      assert(package.searchpath("cuda", package.cpath):find(os.getenv("D"), 1, true) == 1, "found outside DESTDIR")
      print(cuda.version)' >"$tmp/log" 2>&1; then
    ok "install: $lua finds cuda.so with $prefix's standard paths ($cpath)"
  else
    bad "install: cuda.so where $lua looks"
  fi
  [ ! -e "$dest/$(mvar luacmoddir | sed "s|\${prefix}|$prefix|")/cuda.la" ] && ok "install: no libtool cuda.la beside cuda.so" || { : >"$tmp/log"; bad "install: a stray cuda.la"; }
else
  bad "make install DESTDIR"
fi
# ------}

# {------ embedding through pkg-config, shared and static
# the staged culua.pc moved to where it lies (Lua's own .pc stays as it is)
sed -i "s|^prefix=.*|prefix=$dest$prefix|" "$dest$libdir/pkgconfig/culua.pc" 2>/dev/null
pc () { PKG_CONFIG_PATH="$dest$libdir/pkgconfig" pkg-config "$@"; }
if cc -o "$tmp/embed" examples/embed.c $(pc --cflags --libs culua) -Wl,-rpath,"$dest$libdir" >"$tmp/log" 2>&1 \
   && "$tmp/embed" examples/embed.lua >"$tmp/log" 2>&1 && grep -q '^embedded culua' "$tmp/log"; then
  ok "embed: examples/embed.c with pkg-config --libs culua"
else
  bad "embed: examples/embed.c with pkg-config --libs culua"
fi
# only the archive left, so -lculua can mean nothing else
rm -f "$dest$libdir"/libculua.so*
if cc -o "$tmp/embed-static" examples/embed.c $(pc --cflags culua) $(pc --static --libs culua) >"$tmp/log" 2>&1 \
   && ! ldd "$tmp/embed-static" | grep -q libculua \
   && "$tmp/embed-static" examples/embed.lua >"$tmp/log" 2>&1 && grep -q '^embedded culua' "$tmp/log"; then
  ok "static: examples/embed.c with pkg-config --static --libs culua ($(pc --static --libs culua | tr -s ' '))"
else
  bad "static: examples/embed.c with pkg-config --static --libs culua"
fi
# ------}

# {------ LuaRocks: the rockspec builds through configure into a tree
if command -v luarocks >/dev/null 2>&1; then
  cp -p config.status "$tmp/config.status"
  tree=$tmp/rocks
  if luarocks --lua-version 5.4 make --tree "$tree" culua-scm-1.rockspec >"$tmp/log" 2>&1 \
     && (eval "$(luarocks --lua-version 5.4 path --tree "$tree")"
         T="$tree" "$lua" -e '
           local cuda = require "cuda"
           assert(package.searchpath("cuda", package.cpath):find(os.getenv("T"), 1, true) == 1, "cuda.so found outside the tree")
           print(cuda.version)' && "$tree/bin/culua" -e 'print(cuda and cuda.version or require("cuda").version)') >"$tmp/log" 2>&1; then
    ok "rocks: luarocks make --tree; lua5.4 with luarocks path loads cuda; the tree's culua runs"
  else
    bad "rocks: luarocks make"
  fi
  # the tree's own configuration back (LuaRocks configured it for the tree)
  cp -p "$tmp/config.status" config.status && ./config.status >/dev/null && make >/dev/null 2>&1
else
  echo "install: skipped rocks: no luarocks"
fi
# ------}
exit $((failed > 0))
