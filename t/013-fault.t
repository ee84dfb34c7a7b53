-- A kernel fault: the error names the kernel and the Lua line that launched it;
-- cuda.reset() recovers, old objects refuse use, new ones work.
local T = require "culua.tap"
local cuda = require "cuda"
if cuda.device_count() == 0 then T.skip_all("no CUDA device (" .. (cuda.libraries().driver_error or "none") .. ")") end
T.need_gpu()

local mod = cuda.compile([[
extern "C" __global__ void oob(float *x) { x[threadIdx.x + (1ull << 40)] = 1.0f; }
extern "C" __global__ void ok(float *x) { x[threadIdx.x] = 2.0f; }
]]):module()
local oob, ok = mod:kernel("oob"), mod:kernel("ok")
local x = cuda.array("float32", 32)
local line = debug.getinfo(1, "l").currentline + 1
oob:launch({grid = 1, block = 32}, x)
local okay, err = pcall(cuda.synchronize)
T.ok(not okay, "the fault surfaces at the next synchronize")
T.like(err, "CUDA_ERROR_ILLEGAL_ADDRESS", "as an illegal address")
T.like(err, "kernel 'oob' at t/013%-fault%.t:" .. line .. " %(last%)", "naming the kernel and its Lua line")
T.like(err, "call cuda%.reset%(%) to recover", "and the way out")
T.error_like(function () x:totable() end, "CUDA_ERROR_ILLEGAL_ADDRESS", "the context stays broken until reset")

-- cuda.reset(): recovers where the driver allows it, and says so plainly where it does not
local reset_ok, reset_err = pcall(cuda.reset)
T.error_like(function () x:fill(0) end, "cuda%.array whose device was reset by cuda%.reset%(%)", "old arrays refuse use")
T.error_like(function () ok:launch({grid = 1, block = 32}, x) end, "reset by cuda%.reset%(%)", "old kernels refuse use")
T.is(tostring(x), "cuda.array (invalidated by cuda.reset)", "and say so when printed")
T.error_like(function () cuda.catalog.scan(x) end, "cuda%.catalog%.scan: x belongs to a device reset by cuda%.reset%(%)",
             "and the catalog names the argument")
T.error_like(function () return x.dtype end, "reset by cuda%.reset%(%)", "even for a field of its own")

local after = [[
local cuda = require "cuda"
local y = cuda.array("float32", 32):fill(0)
cuda.compile('extern "C" __global__ void ok(float *x) { x[threadIdx.x] = 2.0f; }'):module():kernel("ok"):launch({grid = 1, block = 32}, y)
print("value", y:totable()[32])
]]
if reset_ok then
  T.diag("this driver recovers from the fault in-process")
  local y = cuda.array("float32", 32):fill(0)
  cuda.compile([[extern "C" __global__ void ok(float *x) { x[threadIdx.x] = 2.0f; }]]):module():kernel("ok"):launch({grid = 1, block = 32}, y)
  T.is(y:totable()[32], 2.0, "after cuda.reset() a new module, array and launch work")
else
  T.like(reset_err, "cuda%.reset: CUDA_ERROR_ILLEGAL_ADDRESS persists after resetting device 0: this driver %(CUDA %d+%.%d%) " ..
         "keeps a kernel fault for the life of the process; run the work again in a new culua process",
         "cuda.reset() says the fault outlives it, and what to do")
  T.like(T.run(T.culua .. " -", after), "value\t2%.0", "a new culua process launches fine")
end

-- cuda.reset() without a fault, in a fresh process: the catalog forgets the scratch
-- memory and pinned words it kept on the device, and its next calls make new ones
local reset_plain = [[
local cuda = require "cuda"
local cat = cuda.catalog
local n = (1 << 20) + 3
local x, s = cuda.array("int32", n):fill(1), cuda.stream()
cat.scan(x, {stream = s})
print("before", x:view(n, 1):totable()[1], cat.reduce(x, {op = "max"}))
cuda.reset()
x = cuda.array("int32", n):fill(1)
cat.scan(x)
print("after", x:view(n, 1):totable()[1], cat.reduce(x, {op = "max"}))
]]
local n1 = (1 << 20) + 3
T.like(T.run(T.culua .. " -", reset_plain), ("before\t%d\t%d\nafter\t%d\t%d"):format(n1, n1, n1, n1),
       "after cuda.reset() the catalog's scan and reduce make new scratch and are right")

-- with cuda.debug on, the faulting launch itself raises (in a fresh process)
local dbg = [[
local cuda = require "cuda"
cuda.debug(true)
local k = cuda.compile('extern "C" __global__ void oob2(float *x) { x[threadIdx.x + (1ull << 40)] = 1.0f; }'):module():kernel("oob2")
local z = cuda.array("float32", 32)
print(select(2, pcall(k.launch, k, {grid = 1, block = 32}, z)))
]]
T.like(T.run(T.culua .. " -", dbg), "launch: CUDA_ERROR_ILLEGAL_ADDRESS running 'oob2' %(cuda%.debug is on%)",
       "cuda.debug(true): the faulting launch raises, naming the kernel")
x = nil
collectgarbage()
T.done_testing()
