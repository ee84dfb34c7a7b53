/*
** fuzz.c
** libFuzzer harnesses for the code that reads what users (or files) give
** culua: the PTX signature parser, launch argument marshalling, dtype
** conversions from Lua values, the NVRTC log line mapper and the disk-cache
** entry reader. One file, one target a build (-DFUZZ_TARGET=name), each
** driving culua through a lua_State made once, the way scripts reach it.
** A Lua error is an expected answer; a crash, a sanitizer report or a
** broken invariant (abort) is a finding. Built by fuzz/run.sh with clang.
*/

#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "culua.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static lua_State *L;

/* a Lua function that takes the input as a string, defined per target */
static const char *const driver =
#if FUZZ_TARGET_signature
  /* name on the first line, PTX after it */
  "local cuda = require 'cuda'\n"
  "return function (s)\n"
  "  local name, ptx = s:match('^([^\\n]*)\\n(.*)$')\n"
  "  if not name then name, ptx = 'k', s end\n"
  "  local ok, sig = pcall(cuda.signature, ptx, name)\n"
  "  if ok then\n"
  "    assert(type(sig) == 'table')\n"
  "    for i, t in ipairs(sig) do assert(t:match('^[usfb]%d+') , t) end\n"
  "    pcall(cuda.check_args, sig)\n"
  "  end\n"
  "end\n";
#elif FUZZ_TARGET_check_args
  /* a signature and arguments decoded from the bytes */
  "local cuda = require 'cuda'\n"
  "local types = {'u8','u16','u32','u64','s8','s16','s32','s64','f32','f64','b8','b16','b32','b64',\n"
  "               'b8[16]','b32[3]','b64[2]','u7','f16','b8[0]','b64[999999999]','x32','s64[2147483647]'}\n"
  "return function (s)\n"
  "  local pos = 1\n"
  "  local function byte() local b = s:byte(pos) or 0; pos = pos + 1; return b end\n"
  "  local function take(k) local b = s:sub(pos, pos + k - 1); pos = pos + k; return b .. ('\\0'):rep(k - #b) end\n"
  "  local n = byte() % 10\n"
  "  local sig, args = {}, {}\n"
  "  for i = 1, n do\n"
  "    local b = byte()\n"
  "    if b < 230 then sig[i] = types[b % #types + 1] else sig[i] = s:sub(pos, pos + 5); pos = pos + 6 end\n"
  "  end\n"
  "  local nargs = n + (byte() % 3) - 1\n"
  "  for i = 1, math.max(nargs, 0) do\n"
  "    local k = byte() % 8\n"
  "    if k == 0 then args[i] = string.unpack('<i8', take(8))\n"
  "    elseif k == 1 then args[i] = string.unpack('<d', take(8))\n"
  "    elseif k == 2 then local l = byte() % 40; args[i] = s:sub(pos, pos + l - 1); pos = pos + l\n"
  "    elseif k == 3 then args[i] = byte() % 2 == 0\n"
  "    elseif k == 4 then args[i] = {}\n"
  "    elseif k == 5 then args[i] = (byte() - 128) * 2^(byte() % 80 - 40)\n"
  "    elseif k == 6 then args[i] = cuda.host_array('uint8', 1)\n"
  "    else args[i] = nil end\n"
  "  end\n"
  "  pcall(cuda.check_args, sig, table.unpack(args, 1, math.max(nargs, 0)))\n"
  "end\n";
#elif FUZZ_TARGET_dtype
  /* values of every kind into host arrays of every dtype, read back */
  "local cuda = require 'cuda'\n"
  "local dtypes = {'int8','uint8','int16','uint16','int32','uint32','int64','uint64','float32','float64'}\n"
  "local arrays = {}\n"
  "for i, d in ipairs(dtypes) do arrays[i] = cuda.host_array(d, 4) end\n"
  "return function (s)\n"
  "  local pos = 1\n"
  "  local function byte() local b = s:byte(pos) or 0; pos = pos + 1; return b end\n"
  "  local function take(k) local b = s:sub(pos, pos + k - 1); pos = pos + k; return b .. ('\\0'):rep(k - #b) end\n"
  "  while pos <= #s do\n"
  "    local h = arrays[byte() % #arrays + 1]\n"
  "    local k, v = byte() % 6\n"
  "    if k == 0 then v = string.unpack('<i8', take(8))\n"
  "    elseif k == 1 then v = string.unpack('<d', take(8))\n"
  "    elseif k == 2 then local l = byte() % 24; v = s:sub(pos, pos + l - 1); pos = pos + l\n"
  "    elseif k == 3 then v = (byte() - 128) * 2^(byte() % 160 - 80)\n"
  "    elseif k == 4 then v = byte() % 2 == 0\n"
  "    else v = nil end\n"
  "    local ok = pcall(function () h[byte() % 6] = v end)\n"
  "    pcall(h.fill, h, v)\n"
  "    pcall(h.copy_from, h, {v, v, v, v})\n"
  "    for i = 1, 4 do local x = h[i]; assert(type(x) == 'number') end\n"
  "    pcall(tostring, h)\n"
  "  end\n"
  "end\n";
#elif FUZZ_TARGET_logmap
  /* an NVRTC log mapped onto a chunk's lines: cuda._map_log(log, src, chunk) */
  "local cuda = require 'cuda'\n"
  "return function (s)\n"
  "  local a, b = s:find('\\0', 1, true)\n"
  "  local log, rest = s, ''\n"
  "  if a then log, rest = s:sub(1, a - 1), s:sub(b + 1) end\n"
  "  local c = rest:find('\\0', 1, true)\n"
  "  local src, chunk = rest, nil\n"
  "  if c then src, chunk = rest:sub(1, c - 1), rest:sub(c + 1) end\n"
  "  local ok, out = pcall(cuda._map_log, log, src, chunk)\n"
  "  if ok then assert(type(out) == 'string') end\n"
  "end\n";
#elif FUZZ_TARGET_cache
  /* a cache entry's bytes: a miss (nil) or a complete entry, never a crash */
  "local cuda = require 'cuda'\n"
  "return function (s)\n"
  "  local ok, entry = pcall(cuda._read_cache_entry, s, 'key')\n"
  "  if ok and entry ~= nil then assert(type(entry) == 'table' and type(entry.code) == 'string') end\n"
  "end\n";
#else
#error "define FUZZ_TARGET_<name>"
#endif


int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  if (L == NULL) {
    L = luaL_newstate();
    culua_openlibs(L);
    if (luaL_dostring(L, driver) != LUA_OK) {
      fprintf(stderr, "fuzz: driver: %s\n", lua_tostring(L, -1));
      abort();
    }
    lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.driver");
  }
  lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.driver");
  lua_pushlstring(L, (const char *)data, size);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    /* the driver catches culua's errors itself: one escaping is a broken invariant */
    fprintf(stderr, "fuzz: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_settop(L, 0);
  if (size % 64 == 0) lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
