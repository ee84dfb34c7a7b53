-- Relocatable device code, the driver's linker (cuda.link) and device-side launches; cuda.device_limit.
local T = require "culua.tap"
local cuda = require "cuda"

-- {------ NVRTC with rdc = true: no GPU needed
local child_src = [[
extern "C" __device__ int twice(int x) { return 2 * x; }
extern "C" __global__ void child(int *out, int base, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[base + i] = twice(base + i) + 1;
}
]]
-- seed 003's dynamic-parallelism shape: a parent grid hands each chunk to a child grid
local parent_src = [[
extern "C" __global__ void child(int *out, int base, int n);
extern "C" __global__ void parent(int *out, int total, int chunk) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int base = c * chunk;
  if (base < total) {
    int n = total - base < chunk ? total - base : chunk;
    child<<<(n + 127) / 128, 128>>>(out, base, n);
  }
}
]]
local child = cuda.compile(child_src, {rdc = true})
local parent = cuda.compile(parent_src, {rdc = true})
T.is(child.rdc, true, "prog.rdc is true with rdc = true")
T.is(cuda.compile("extern \"C\" __global__ void k() {}").rdc, false, "prog.rdc is false by default")
T.is(cuda.compile("extern \"C\" __global__ void k() {}", {options = {"--relocatable-device-code=true"}}).rdc, true,
     "prog.rdc follows --relocatable-device-code=true in options")
T.like(child.ptx, "%.visible %.entry child", "rdc: the child kernel is visible")
T.like(child.ptx, "%.visible %.func[^\n]*twice", "rdc: a __device__ function is visible to other programs")
T.like(parent.ptx, "%.extern %.entry child", "rdc: the parent declares the child as .extern")
T.like(parent.ptx, "%.extern %.func[^\n]*LaunchDevice", "rdc: the device launch calls the device runtime")
T.error_like(function () cuda.compile(parent_src, {cache = false}) end, "device%-side kernel launch",
             "without rdc a device-side launch does not compile")
local uses_extern = cuda.compile([[
extern "C" __device__ int missing_helper(int x);
extern "C" __global__ void user(int *out) { out[threadIdx.x] = missing_helper(threadIdx.x); }
]], {rdc = true})
T.like(uses_extern.ptx, "%.extern %.func[^\n]*missing_helper", "rdc: an undefined device function is .extern")
-- }------

-- {------ cuda.link's argument checks: before any device is touched
local bad = {
  {{}, "cuda.link: nothing to link"},
  {{42}, "cuda.link: input 1 must be a cuda.program, \"cudadevrt\" or a file name, not number"},
  {{child, {}}, "cuda.link: input 2 must be a cuda.program, \"cudadevrt\" or a file name, not table"},
  {{"kernel.txt"}, "cuda.link: input 1 'kernel.txt' is not a .ptx, .cubin, .fatbin, .o or .a file"},
  {{"/nonexistent/k.ptx"}, "cuda.link: input 1: cannot read '/nonexistent/k.ptx'"},
  {{child, optoins = {}}, "cuda.link: unknown key 'optoins' (inputs 1..1, options, device)"},
  {{child, options = {max_regs = 32}}, "cuda.link: unknown option 'max_regs'"},
  {{child, options = {max_registers = -1}}, "cuda.link: option max_registers must be a non-negative integer"},
  {{child, options = "-O3"}, "cuda.link: options must be a table, not string"},
}
for _, c in ipairs(bad) do
  T.error_has(function () cuda.link(c[1]) end, c[2], c[2])
end
T.error_like(function () cuda.link(child) end, "cuda%.link: bad argument #1 %(table expected", "cuda.link takes a list")
local devrt = cuda.libraries().cudadevrt
if devrt then
  T.like(devrt, "libcudadevrt%.a$", "cuda.libraries() finds libcudadevrt.a: " .. devrt)
else
  T.skip("no libcudadevrt.a beside NVRTC, in CUDA_HOME or /usr/local/cuda (set CULUA_LIBCUDADEVRT)", 1)
end
do
  local out = T.run("CULUA_LIBCUDADEVRT=/nonexistent/libcudadevrt.a " .. T.culua .. " -", [[
local cuda = require "cuda"
print(cuda.libraries().cudadevrt)
print(select(2, pcall(cuda.link, {"cudadevrt"})))
]])
  T.like(out, "^false\n", "CULUA_LIBCUDADEVRT names the only candidate")
  T.like(out, "cuda%.link: libcudadevrt%.a not found %(looked in CULUA_LIBCUDADEVRT=/nonexistent/libcudadevrt%.a; set CULUA_LIBCUDADEVRT%)",
         "a missing device runtime is named")
  local here = cuda.libraries().cudadevrt
  if here then
    out = T.run("CULUA_LIBCUDADEVRT=" .. here .. " " .. T.culua .. " -", 'print(require("cuda").libraries().cudadevrt)')
    T.is(out, here .. "\n", "CULUA_LIBCUDADEVRT is used when it exists")
  end
end
-- }------

-- {------ cuda.device_limit's argument checks
T.error_has(function () cuda.device_limit("stack") end,
            "cuda.device_limit: unknown limit 'stack' (valid: stack_size, printf_fifo_size, malloc_heap_size, " ..
            "dev_runtime_sync_depth, dev_runtime_pending_launch_count, max_l2_fetch_granularity, persisting_l2_cache_size)",
            "an unknown limit lists the valid ones")
T.error_has(function () cuda.device_limit("stack_size", -1) end, "a limit must not be negative", "negative limit refused")
T.error_has(function () cuda.device_limit("stack_size", 1.5) end, "number has no integer representation",
            "a fractional limit refused")
T.error_like(function () cuda.device_limit() end, "cuda%.device_limit: bad argument #1 %(string expected",
             "device_limit needs a name")
-- }------

if cuda.device_count() == 0 then
  T.done_testing()
  return
end
local dev = T.need_gpu()

-- {------ on a GPU: a parent kernel launching child kernels, linked with the device runtime
if not devrt then
  T.skip("no libcudadevrt.a: device-side launches not linked", 8)
else
  local image, none = cuda.link{parent, child, "cudadevrt"}
  T.ok(type(image) == "string" and #image > 0 and none == nil, "cuda.link returns the cubin alone")
  local _, log = cuda.link{parent, child, "cudadevrt", options = {verbose = true}}
  T.is(type(log), "string", "and the info log too with options.verbose")
  local mod = cuda.load(image)
  local k = mod:kernel("parent")
  for _, total in ipairs{1, 127, 1000, 100003} do
    local chunk = 256
    local out = cuda.array("int32", total):fill(-1)
    k:launch({grid = (total // chunk) // 64 + 1, block = 64}, out, total, chunk)
    cuda.synchronize()
    local ref = cuda.host_array("int32", total)
    for i = 1, total do ref[i] = 2 * (i - 1) + 1 end
    T.is(cuda.compare(out, ref), 0.0, ("parent -> child launches cover %d elements"):format(total))
  end
  -- the child is a kernel of the linked image too
  local c = mod:kernel("child")
  local out = cuda.array("int32", 10):fill(-1)
  c:launch({grid = 1, block = 32}, out, 0, 10)
  T.is_deeply(out:totable(), {1, 3, 5, 7, 9, 11, 13, 15, 17, 19}, "the child launched from the host")
  -- options reach the linker
  T.lives_ok(function () cuda.load(cuda.link{child, options = {optimization_level = 3, lineinfo = true}}) end,
             "cuda.link with options")
  -- a file input: the same program written out as PTX
  local tmp = os.tmpname()
  local name = tmp .. ".ptx"
  local f = assert(io.open(name, "w"))
  f:write(child.ptx)
  f:close()
  T.lives_ok(function () cuda.load(cuda.link{parent, name, "cudadevrt"}) end, "a .ptx file as a link input")
  os.remove(name)
  os.remove(tmp)
end

-- a link error carries the linker's log, which names the undefined symbol
T.error_like(function () cuda.link{uses_extern} end, "cuda%.link: CUDA_ERROR_[%u_]+ linking 1 inputs on device 0: .*missing_helper",
             "an undefined extern function: the error carries the linker's log")
if devrt then
  T.error_like(function () cuda.link{parent, "cudadevrt"} end, "cuda%.link: .*child",
               "an undefined child kernel is named")
end
-- }------

-- {------ device limits: a set/get round trip
do
  local old = cuda.device_limit("stack_size")
  T.ok(math.type(old) == "integer" and old > 0, "stack_size read: " .. old)
  local got = cuda.device_limit("stack_size", 4096)
  T.ok(got >= 4096, "stack_size set to 4096, read back " .. got)
  T.is(cuda.device_limit("stack_size"), got, "stack_size stays set")
  cuda.device_limit("stack_size", old)
  T.is(dev:limit("stack_size"), old, "dev:limit reads it back restored")
  local pending = cuda.device_limit("dev_runtime_pending_launch_count")
  T.is(cuda.device_limit("dev_runtime_pending_launch_count", 4096), 4096, "dev_runtime_pending_launch_count round trip")
  cuda.device_limit("dev_runtime_pending_launch_count", pending)
  local fifo = cuda.device_limit("printf_fifo_size")
  T.ok(cuda.device_limit("printf_fifo_size", 2 * 1024 * 1024) >= 2 * 1024 * 1024, "printf_fifo_size round trip")
  cuda.device_limit("printf_fifo_size", fifo)
  T.ok(math.type(cuda.device_limit("max_l2_fetch_granularity")) == "integer", "max_l2_fetch_granularity reads")
end
-- }------

collectgarbage()
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
