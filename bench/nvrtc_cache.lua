-- bench/nvrtc_cache.lua: cuda.compile of the same source in a new process,
-- served from the disk cache. Target: <= 2 ms.   culua bench/nvrtc_cache.lua [REPS]
local cuda = require "cuda"
local REPS = tonumber(arg[1]) or 9
local culua = arg[-1]
local dir = os.tmpname()
os.remove(dir)

local child = [[
local cuda = require "cuda"
local src = [=[
#include <cuda/std/limits>
template <typename T> __global__ void saxpy(int n, T a, const T *x, T *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + cuda::std::numeric_limits<T>::epsilon();
}
]=]
local ti = cuda.clock()
cuda.device_count()     -- scripts touch the device first: driver load and cuInit, timed apart
local t0 = cuda.clock()
local p = cuda.compile(src, {name_expressions = {"saxpy<float>", "saxpy<double>"}})
local t1 = cuda.clock()
print(p.cached, (t1 - t0) * 1000, (t0 - ti) * 1000)
]]
local script = os.tmpname()
local f = assert(io.open(script, "w"))
f:write(child)
f:close()
local function run()
  local out = io.popen(("CULUA_CACHE=%s %s %s"):format(dir, culua, script)):read("a")
  local cached, ms, init = out:match("(%a+)\t(%S+)\t(%S+)")
  return cached == "true", tonumber(ms), tonumber(init)
end
local cached0, miss = run()
assert(not cached0, "the first compile should miss")
local hits, inits = {}, {}
for i = 1, REPS do
  local cached, ms, init = run()
  assert(cached, "later compiles should hit")
  hits[i], inits[i] = ms, init
end
table.sort(inits)
table.sort(hits)
local med = hits[(REPS + 1) // 2]
os.execute("rm -rf " .. dir)
os.remove(script)
print(("NVRTC disk cache, new process each time, %d reps"):format(REPS))
print(("first compile (miss)      %8.2f ms"):format(miss))
print(("cached compile, median    %8.3f ms (min %.3f, max %.3f)"):format(med, hits[1], hits[REPS]))
print(("driver start-up, median   %8.2f ms (cuda.device_count() first in the process, not in the figure above)"):format(inits[(REPS + 1) // 2]))
print(("target: cached <= 2 ms: %s"):format(med <= 2 and "met" or "NOT met"))
