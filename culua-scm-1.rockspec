-- culua's `cuda` module (and the culua program) for LuaRocks:
--   luarocks --lua-version 5.4 make --tree TREE        (from a checkout)
-- The build is the Autotools one: configure with LuaRocks' directories, make,
-- make install. cuda.so goes into the rock's LIBDIR, which LuaRocks deploys
-- to TREE/lib/lua/5.4; the culua program into its BINDIR (TREE/bin); the
-- embedding library, header, pkg-config file and man pages stay inside the
-- rock's own directory (PREFIX/embed), where LuaRocks deploys nothing.
-- Needs the CUDA toolkit's headers (/usr/local/cuda, or CUDA_HOME), a C
-- compiler, and autoconf, automake and libtool for a checkout without a
-- configure script.
rockspec_format = "3.0"
package = "culua"
version = "scm-1"
source = {
   url = "git+file://.",
}
description = {
   summary = "Lua 5.4 for CUDA experiments: devices, arrays, NVRTC, launches and a catalog of fast kernels",
   detailed = [[
culua drives GPUs from Lua: device queries, device and host arrays, run-time
compilation with NVRTC, launches, streams and events, and a catalog of tuned
kernels (matmul, scan, sort, histogram, LU and solve, grid barriers).
The CUDA driver and NVRTC are opened at run time, so the module loads and
compiles kernels on a machine without a GPU.]],
   license = "MIT",
   labels = {"cuda", "gpu", "nvrtc"},
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
build = {
   type = "command",
   build_command = [[test -x ./configure || autoreconf -fi
./configure --prefix="$(PREFIX)/embed" --bindir="$(BINDIR)" --with-lua-cmod-dir="$(LIBDIR)" \
  ${CUDA_HOME:+--with-cuda="$CUDA_HOME"} LUA_INTERP="$(LUA)" && make]],
   install_command = "make install",
}
