-- cuda.compile: NVRTC from Lua. Runs without a GPU.
local T = require "culua.tap"
local cuda = require "cuda"

local saxpy = [[
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]

local prog = cuda.compile(saxpy, {options = {"-arch=compute_80"}, cache = false})
T.like(tostring(prog), "^cuda%.program%(kernel%.cu, ptx for compute_80%)", "__tostring")
T.like(prog.ptx, "%.entry saxpy%(", "PTX has the entry")
T.like(prog.ptx, "%.target sm_80", "and the asked-for target")
T.is(type(prog.log), "string", "log is a string")
T.is(prog.cached, false, "cache = false compiles")
T.is(prog.arch, "compute_80", "arch is the one given")

-- default target: the device's arch, or NVRTC's own without a device
local p2 = cuda.compile(saxpy, {cache = false})
if cuda.device_count() > 0 then
  local dev = cuda.device(0)
  T.is(p2.arch, "compute_" .. dev.major .. dev.minor, "default target is the current device's")
else
  T.like(p2.arch, "^compute_%d+$", "no device: NVRTC's default target, recorded from the PTX")
end

-- errors carry NVRTC's log, with lines mapped to this file
local line = debug.getinfo(1, "l").currentline
local okay, err = pcall(cuda.compile, [[
__global__ void broken(float *x) {
  x[0] = undefined_name;
}
]], {cache = false})
T.ok(not okay, "a syntax error raises")
T.like(err, "^cuda%.compile: NVRTC_ERROR_COMPILATION", "naming NVRTC's error")
T.like(err, "identifier \"undefined_name\" is undefined", "with NVRTC's log")
T.like(err, "003%-nvrtc%.t:" .. (line + 3) .. ": error", "log line mapped to the Lua line")

okay, err = pcall(cuda.compile, "__global__ void f() { int x = ; }", {cache = false})
T.like(err, "003%-nvrtc%.t:%d+: error: expected an expression", "one-line source maps to the call line")

okay, err = pcall(cuda.compile, "bad", {line = 100, file = "my.lua", name = "mine.cu", cache = false})
T.like(err, "my%.lua:100: error", "opts.file and opts.line override the mapping")
T.like(err, "in mine%.cu", "opts.name names the program")

-- prog.arch: the target asked, the device's, or without either what the PTX says
do
  local p = cuda.compile('extern "C" __global__ void k() {}', {cache = false})
  local target = p.ptx:match("%.target sm_(%w+)")
  T.is(p.arch, "compute_" .. target, "prog.arch is the PTX's target (" .. tostring(p.arch) .. ")")
  local q = cuda.compile('extern "C" __global__ void k() {}')
  T.is(q.arch, p.arch, "and the same from the cache")
end

-- bad arguments
T.error_like(function () cuda.compile() end, "cuda%.compile: bad argument #1 %(string expected, got no value%)", "no source")
T.error_like(function () cuda.compile("x", 5) end, "cuda%.compile: bad argument #2 %(table expected, got number%)", "opts not a table")
T.error_like(function () cuda.compile("x", {options = {1}}) end, "options%[1%] must be a string", "non-string option")
T.error_like(function () cuda.compile("x", {output = "elf"}) end, "output must be 'ptx' or 'cubin', not 'elf'", "bad output")
T.error_like(function () cuda.compile("x", {headers = {[1] = "x"}}) end, "headers must map names to source strings", "bad headers")
T.error_like(function () cuda.compile("x", {options = {"--no-such-flag"}, cache = false}) end,
             "NVRTC_ERROR_INVALID_OPTION", "unknown NVRTC option")
T.error_like(function () cuda.compile("x", {options = {"-arch", "sm_80"}}) end, "write the target as '%-arch=NAME'",
             "two-word -arch is refused rather than misread")
T.error_like(function () cuda.compile(saxpy, {output = "cubin", options = {"-arch=compute_80"}}) end,
             "output 'cubin' needs %-arch=sm_XX", "cubin with a virtual arch")

-- CUBIN output
local cub = cuda.compile(saxpy, {output = "cubin", options = {"-arch=sm_90"}, cache = false})
T.is(cub.cubin:sub(1, 4), "\127ELF", "CUBIN output is an ELF image")
T.is(cub.ptx, nil, "and no PTX")

-- named headers and macros
local p3 = cuda.compile([[
#include "scale.h"
extern "C" __global__ void k(float *x) { x[0] = SCALE * 2.0f; }
]], {headers = {["scale.h"] = "#define SCALE 3.0f\n"}, options = {"-arch=compute_80", "-DUNUSED=1"}, cache = false})
T.like(p3.ptx, "1086324736", "a named header is included (3*2 = 6.0f folded, 0x40C00000)")

-- toolkit headers with no flags
local p4 = cuda.compile([[
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda/std/limits>
namespace cg = cooperative_groups;
extern "C" __global__ void k(__half *h, int *m) {
  cg::thread_block b = cg::this_thread_block();
  h[b.thread_rank()] = __float2half(1.0f);
  m[0] = cuda::std::numeric_limits<int>::max();
}
]], {options = {"-arch=compute_80"}, cache = false})
T.like(p4.ptx, "%.entry k%(", "cuda_fp16.h, cooperative_groups.h and <cuda/std/limits> compile with no flags")

-- templates through name expressions
local p5 = cuda.compile([[
template <typename T, int N> __global__ void fill(T *x) { x[threadIdx.x] = T(N); }
]], {name_expressions = {"fill<float,256>", "fill<int,3>"}, options = {"-arch=compute_80"}, cache = false})
T.is(p5.lowered["fill<float,256>"], "_Z4fillIfLi256EEvPT_", "lowered name of fill<float,256>")
T.is(p5:lowered_name("fill<int,3>"), "_Z4fillIiLi3EEvPT_", "lowered_name method")
T.like(p5.ptx, "%.entry _Z4fillIfLi256EEvPT_", "the instantiation is in the PTX")
T.error_like(function () p5:lowered_name("fill<char,1>") end, "'fill<char,1>' was not among the program's name_expressions",
             "asking for an expression not compiled")

-- the disk cache
local dir = os.tmpname()
os.remove(dir)
local function child(code, env)
  return T.run("CULUA_CACHE=" .. dir .. " " .. (env or "") .. " " .. T.culua .. " -", code)
end
local code = [[
local cuda = require "cuda"
local t0 = os.clock()
local p = cuda.compile("extern \"C\" __global__ void k(int *x) { x[0] = 7; }", {options = {"-arch=compute_80"}, name_expressions = {"k"}})
print(p.cached, p.ptx:match("%.entry k") ~= nil, p.lowered.k)
]]
T.is(child(code), "false\ttrue\tk\n", "first compile misses the cache")
T.is(child(code), "true\ttrue\tk\n", "second compile, in a new process, hits it")
local files = io.popen("ls " .. dir):read("a")
T.like(files, "^%x+%.nvrtc\nnvrtc%.id\n$", "one cache file named by the key's hash, and the NVRTC record")
-- corrupt the stored key: the entry must be ignored, never loaded
local cfile = dir .. "/" .. files:match("^(%S+)")
local fh = assert(io.open(cfile, "rb"))
local data = fh:read("a")
fh:close()
fh = assert(io.open(cfile, "wb"))
fh:write((data:gsub("x%[0%] = 7", "x[0] = 8")))
fh:close()
T.is(child(code), "false\ttrue\tk\n", "an entry whose stored key differs is not used")
T.is(child((code:gsub("x%[0%] = 7", "x[0] = 9"))), "false\ttrue\tk\n", "a different source misses")
T.is(child((code:gsub("compute_80", "compute_90"))), "false\ttrue\tk\n", "a different option misses")
T.is(child(code, "CULUA_CACHE=off"), "false\ttrue\tk\n", "CULUA_CACHE=off never hits")
os.execute("rm -rf " .. dir)

-- a hit needs no NVRTC at all: its version comes from nvrtc.id
local maps = [==[
local cuda = require "cuda"
local p = cuda.compile("extern \"C\" __global__ void m(int *x) { x[0] = 1; }", {options = {"-arch=compute_80"}})
local f = io.open("/proc/self/maps")
print(p.cached, f and (f:read("a"):find("libnvrtc", 1, true) ~= nil))
]==]
T.is(child(maps), "false\ttrue\n", "a miss loads NVRTC")
T.is(child(maps), "true\tfalse\n", "a hit, in a new process, does not load NVRTC")
local idf = io.open(dir .. "/nvrtc.id")
local id = idf and idf:read("a") or ""
if idf then idf:close() end
local ma, mi = cuda.nvrtc_version()
T.like(id, "^culua%-nvrtc%-id 1\n.-\n/.-libnvrtc[^\n]*\n%d+ %d+ " .. ma .. " " .. mi .. " %d+\n",
       "nvrtc.id records the library file, its stamp and version " .. ma .. "." .. mi)
T.is(child(maps, "LD_LIBRARY_PATH=/nonexistent"), "true\ttrue\n",
     "another LD_LIBRARY_PATH could pick another NVRTC: the record is not trusted, NVRTC is loaded")
-- a replaced library (another size or mtime) makes the record stale: NVRTC is loaded, the record rewritten
local fh2 = assert(io.open(dir .. "/nvrtc.id", "w"))
fh2:write((id:gsub("\n(%d+) (%d+) ", "\n1%1 %2 ", 1)))
fh2:close()
T.is(child(maps), "true\ttrue\n", "a record whose library stamp changed is not trusted")
T.is(child(maps), "true\tfalse\n", "and the rewritten record serves the next process")
os.execute("rm -rf " .. dir)

-- a header's content is part of the key
local hk = [==[
local cuda = require "cuda"
local p = cuda.compile('#include "v.h"\nextern "C" __global__ void k(int *x) { x[0] = V; }', {headers = {["v.h"] = "#define V VALUE\n"}, options = {"-arch=compute_80"}})
print(p.cached, p.ptx:match("(%d+);%s+st%.global") or p.ptx:match("st%.global%.u32 %[[^%]]+%], (%d+);"))
]==]
T.is(child((hk:gsub("VALUE", "5"))), "false\t5\n", "header V=5 compiled")
T.is(child((hk:gsub("VALUE", "5"))), "true\t5\n", "same header content hits")
T.is(child((hk:gsub("VALUE", "6"))), "false\t6\n", "changed header content misses")
os.execute("rm -rf " .. dir)

-- {------ where a compile error is (reliability defect 1): the source is looked for in the
-- calling chunk's text, and only a place found exactly once is named
local here = debug.getinfo(1, "S").short_src:gsub("%p", "%%%0")
local function err_of(f) local ok, e = pcall(f); return ok and "" or tostring(e) end
-- a literal at the call
local e1 = err_of(function () return cuda.compile([[
extern "C" __global__ void map_direct(int *x) {
  x[0] = undefined_direct;
}
]]) end)
local want1 = debug.getinfo(1, "l").currentline - 3      -- the line `x[0] = ...` stands on
T.like(e1, here .. ":" .. want1 .. ": error: identifier \"undefined_direct\" is undefined", "a literal at the call: the error names its line in this file")
-- a variable defined lines above, compiled far below
local src_above = [[
extern "C" __global__ void map_above(int *x) {
  x[0] = undefined_above;
}
]]
local line_above = debug.getinfo(1, "l").currentline - 3
local pad = 0
for _ = 1, 3 do pad = pad + 1 end
local e2 = err_of(function () return cuda.compile(src_above) end)
T.like(e2, here .. ":" .. line_above .. ": error: identifier \"undefined_above\"", "a variable defined above: its own line, not the call's")
-- read from a .cu file: not in this chunk, so the kernel's own lines (or the file, when named)
local cu = os.tmpname() .. ".cu"
local fh = assert(io.open(cu, "w"))
fh:write('extern "C" __global__ void map_file(int *x) {\n  x[0] = undefined_file;\n}\n')
fh:close()
local text = assert(io.open(cu)):read("a")
local e3 = err_of(function () return cuda.compile(text) end)
T.like(e3, "lines are the kernel's own.-kernel%.cu%(2%): error: identifier \"undefined_file\"", "a source read from a .cu file keeps the kernel's own lines")
T.unlike(e3, here .. ":%d+: error", "and names no line of this file")
local e3b = err_of(function () return cuda.compile(text, {file = cu, line = 1}) end)
T.like(e3b, cu:gsub("%p", "%%%0") .. ":2: error", "with opts.file and opts.line the .cu file's own line")
os.remove(cu)
-- built by concatenation: nowhere verbatim
local e4 = err_of(function () return cuda.compile('extern "C" __global__ void map_concat(int *x) {\n' ..
                                                  '  x[0] = undefined_concat;\n' .. '}\n') end)
T.like(e4, "kernel%.cu%(2%): error: identifier \"undefined_concat\"", "a concatenated source keeps the kernel's own lines")
-- a chunk from load(), no file: its text is searched, and named as Lua names it
local chunk = "local cuda = require 'cuda'\nreturn cuda.compile([[\nextern \"C\" __global__ void map_load(int *x) {\n  x[0] = undefined_load;\n}\n]])\n"
local e5 = err_of(load(chunk, "=(load)") and load(chunk))
T.like(e5, "%[string \"local cuda = require 'cuda'%.%.%.\"%]:4: error: identifier \"undefined_load\"", "a chunk from load: its line 4")
-- the same text twice in the chunk: not certain, so not named
local twice = 'extern "C" __global__ void map_twice(int *x) { x[0] = undefined_twice; }'
local chunk2 = ("local cuda = require 'cuda'\nlocal a = %q\nlocal b = %q\nreturn cuda.compile(a)\n"):format(twice, twice)
T.like(err_of(load(chunk2)), "lines are the kernel's own.-kernel%.cu%(1%)", "a source found twice is not placed")
T.is(cuda._map_log("kernel.cu(2): error: x\n", "a\nb\n", "-- lua\nlocal s = [[\na\nb\n]]\n"), "chunk:4: error: x\n", "cuda._map_log (the fuzzer's hook) maps into a chunk")
-- ------}
-- a corrupt or truncated cache entry is a miss, never trusted and never a crash
do
  local dir = os.tmpname()
  os.remove(dir)
  local run = "CULUA_CACHE=" .. dir .. " " .. T.culua .. [[ -e "local p = require('cuda').compile('extern \"C\" __global__ void cached_k(int *x) { x[0] = 7; }', {options = {'-arch=compute_80'}}); print(p.cached, #p.ptx > 0)"]]
  T.like(T.run(run), "^false\ttrue", "first compile: a miss, stored")
  T.like(T.run(run), "^true\ttrue", "second: a hit")
  local p = io.popen("ls " .. dir .. "/*.nvrtc")
  local entry = p:read("l")
  p:close()
  local whole = io.open(entry, "rb"):read("a")
  for i, bad in ipairs{whole:sub(1, #whole // 2), "999999999999\n" .. whole, whole:gsub("^%d+", "7", 1), "", "\0\0\0"} do
    local f = io.open(entry, "wb"); f:write(bad); f:close()
    T.like(T.run(run), "^false\ttrue", ("corrupt entry %d: a miss, compiled again"):format(i))
  end
  T.like(T.run(run), "^true\ttrue", "and the entry written again is a hit")
  os.execute("rm -rf " .. dir)
  T.is(cuda._read_cache_entry("99999999999999\nkey", "key"), nil, "a length past the end is a miss, with no buffer made for it")
end
T.done_testing()
