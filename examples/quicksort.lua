-- quicksort.lua: seed 003's cdp_simple_quicksort, a quicksort by dynamic
-- parallelism.
--
-- The host launches one thread on the whole array. A thread partitions its
-- range around the middle element (two pointers moving inwards, swapping
-- pairs on the wrong side), then launches one single-thread grid for each
-- side from the device, each into a non-blocking stream of its own so that
-- the children run side by side instead of one after the other. A range of at
-- most INSERTION_SORT + 1 elements, or one at MAX_DEPTH, is sorted by
-- selection sort in its thread instead. The host waits once, for the first
-- grid: a grid is complete only when all the grids it launched are.
--
-- The program is compiled by NVRTC as relocatable device code, linked by the
-- driver against the device runtime (libcudadevrt.a) and loaded. The seed set
-- the device runtime's sync depth to MAX_DEPTH: how deep in the tree of grids
-- device code may call cudaDeviceSynchronize (its kernel never does). CUDA
-- 12's device runtime (CDP2) has no such call, and from compute capability
-- 9.0 the driver refuses the limit (CUDA_ERROR_UNSUPPORTED_LIMIT, says
-- cuda.h), so the script only tries it and prints the driver's answer. It
-- raises the limit on outstanding device-side launches to the most the sort
-- can make, and counts in a device variable the launches, the failed ones,
-- the deepest level and the longest range left to a selection sort.
--
-- The seed's way (a stream created and destroyed around each launch) runs
-- beside CUDA 12's cudaStreamFireAndForget, which does the same with less
-- bookkeeping. Both are checked against Lua's table.sort and timed with
-- events against cuda.catalog.sort (a radix sort) on the same keys.
--
--   culua examples/quicksort.lua [N]   (default 2^18 keys in [0, N-1], as the seed's rand() % N)
--
-- The depth limit shapes the time. Partitions around the middle key are
-- uneven enough that random keys reach depth 16 from about 10^4 keys on, and
-- the ranges left there grow with N: the longest is some 4000 keys at 2^18
-- and 16000 at 2^20 (its selection sort, one thread, about 1.3 * 10^8
-- comparisons, then takes most of the time), 65000 at 2^22.

local cuda = require "cuda"

local N = 1 << 18
if arg[1] then
  N = math.tointeger(tonumber(arg[1]))
  if not N or N < 1 or N > 0x7fffffff then
    error(("quicksort.lua: N must be an integer in 1 .. 2^31-1, got '%s'"):format(arg[1]), 0)
  end
end
local MAX_DEPTH, INSERTION_SORT, REPS = 16, 32, 5

local source = [[
#ifndef MAX_DEPTH
#define MAX_DEPTH 16
#endif
#define INSERTION_SORT 32

// What the script reads back: [0] device-side launches made, [1] launches (or
// stream creations) that failed, [2] the deepest level that ran, [3] the
// longest range left to a selection sort.
__device__ unsigned int qs_stats[4];

extern "C" __global__ void cdp_simple_quicksort(unsigned int *data, int left, int right, int depth);

// data[left .. right] in order, by one thread: the smallest of the rest to the front, each time
__device__ void selection_sort(unsigned int *data, int left, int right)
{
  for (int i = left; i <= right; ++i) {
    unsigned int smallest = data[i];
    int at = i;
    for (int j = i + 1; j <= right; ++j) {
      unsigned int v = data[j];
      if (v < smallest) { smallest = v; at = j; }
    }
    if (at != i) { data[at] = data[i]; data[i] = smallest; }
  }
}

// one single-thread grid on data[left .. right] at the next depth. A failed
// launch is counted, not ignored: its range would stay unsorted.
__device__ void sort_side(unsigned int *data, int left, int right, int depth)
{
  cudaError_t launched;
  atomicAdd(&qs_stats[0], 1u);
#ifdef FIRE_AND_FORGET
  cdp_simple_quicksort<<<1, 1, 0, cudaStreamFireAndForget>>>(data, left, right, depth);
  launched = cudaGetLastError();
#else
  cudaStream_t s;
  launched = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (launched == cudaSuccess) {
    cdp_simple_quicksort<<<1, 1, 0, s>>>(data, left, right, depth);
    launched = cudaGetLastError();
    cudaStreamDestroy(s);   // the grid launched into it still runs; the stream goes when it is done
  }
#endif
  if (launched != cudaSuccess) atomicAdd(&qs_stats[1], 1u);
}

extern "C" __global__ void cdp_simple_quicksort(unsigned int *data, int left, int right, int depth)
{
  atomicMax(&qs_stats[2], (unsigned int)depth);
  if (depth >= MAX_DEPTH || right - left <= INSERTION_SORT) {
    atomicMax(&qs_stats[3], (unsigned int)(right - left + 1));
    selection_sort(data, left, right);
    return;
  }
  // Partition around the middle element. A scan stops at an element on the
  // wrong side of the pivot or equal to it: first the pivot itself, later the
  // elements just swapped, bound the scans, so neither leaves the range. A
  // pair found is swapped and both pointers step past it.
  unsigned int *lptr = data + left;
  unsigned int *rptr = data + right;
  unsigned int pivot = data[left + (right - left) / 2];
  while (lptr <= rptr) {
    unsigned int lval = *lptr;
    unsigned int rval = *rptr;
    while (lval < pivot) lval = *++lptr;
    while (rval > pivot) rval = *--rptr;
    if (lptr <= rptr) {
      *lptr++ = rval;
      *rptr-- = lval;
    }
  }
  // now data[left .. rptr] <= pivot <= data[lptr .. right], with anything between equal to the pivot
  int nright = (int)(rptr - data);
  int nleft = (int)(lptr - data);
  if (left < nright) sort_side(data, left, nright, depth + 1);
  if (nleft < right) sort_side(data, nleft, right, depth + 1);
}
]]

-- compiled before looking for a GPU, so that a machine without one still checks the kernels
local variants = {
  {name = "streams", what = "a non-blocking stream a launch (the seed's)"},
  {name = "fire_and_forget", what = "cudaStreamFireAndForget (CUDA 12)", define = "-DFIRE_AND_FORGET"},
}
for _, v in ipairs(variants) do
  local opts = {"-DMAX_DEPTH=" .. MAX_DEPTH}
  if v.define then opts[#opts + 1] = v.define end
  v.prog = cuda.compile(source, {name = "quicksort.cu", rdc = true, options = opts})
end
require("culua.bench").need_devices()

local dev = cuda.device()
print(("%s (compute capability %s): cdp_simple_quicksort, MAX_DEPTH %d, INSERTION_SORT %d"):format(dev.name,
      dev.compute_capability, MAX_DEPTH, INSERTION_SORT))

-- {====================================================== the device runtime's limits
-- The seed's cudaDeviceSetLimit(cudaLimitDevRuntimeSyncDepth, MAX_DEPTH)
do
  local ok, got = pcall(cuda.device_limit, "dev_runtime_sync_depth", MAX_DEPTH)
  if ok then
    print(("dev_runtime_sync_depth set to %d, as the seed does"):format(got))
  else
    print(("dev_runtime_sync_depth not set to %d as the seed does (CUDA 12 has no device-side cudaDeviceSynchronize\n" ..
           "  for it to limit); the driver says: %s"):format(MAX_DEPTH, tostring(got)))
  end
end
-- A device-side launch is outstanding until its grid completes, after all of
-- its children: near the end of the sort almost every launch is. A grid at
-- depth d < MAX_DEPTH launches at most two, on disjoint ranges, so depth d
-- holds at most min(2^d, N) grids and their sum bounds the launches (2^17 - 2
-- for N >= 2^16); the limit is raised to that. A launch past the limit fails
-- (cudaErrorLaunchPendingCountExceeded), and is counted.
local most = 0
for d = 1, MAX_DEPTH do most = most + math.min(1 << d, N) end
local slots = cuda.device_limit("dev_runtime_pending_launch_count")
if slots < most then
  local ok, got = pcall(cuda.device_limit, "dev_runtime_pending_launch_count", most)
  if ok then slots = got
  else print(("dev_runtime_pending_launch_count stays %d: %s"):format(slots, tostring(got))) end
end
print(("dev_runtime_pending_launch_count: %d (at most %d device-side launches for N = %d)"):format(slots, most, N))
-- }======================================================

-- {====================================================== link and load
for _, v in ipairs(variants) do
  local t0 = cuda.clock()
  local image = cuda.link{v.prog, "cudadevrt"}
  v.mod = cuda.load(image)
  v.kernel = v.mod:kernel("cdp_simple_quicksort")
  v.stats = v.mod:global("qs_stats", "uint32")
  print(("%-16s linked with %s and loaded: %d-byte CUBIN, %.1f ms"):format(v.name, cuda.libraries().cudadevrt,
        #image, (cuda.clock() - t0) * 1000))
end
-- }======================================================

-- {====================================================== the keys
-- the seed's data: N keys in [0, N-1] (its rand() % N), reproducible
local keys = cuda.host_array("uint32", N):random(2047, 0, N - 1)
local function sample(t, count)
  local s = {}
  for i = 1, math.min(count, #t) do s[i] = tostring(t[i]) end
  if #t > count then s[#s + 1] = ("... (%d more) ... %d"):format(#t - count - 1, t[#t]) end
  return table.concat(s, " ")
end
local input = keys:totable()
print(("\nInitializing data: %d keys in [0, %d]"):format(N, N - 1))
print(("input  :: %s"):format(sample(input, 16)))

local c0 = cuda.clock()
local want = keys:totable()
table.sort(want)
local cpu_ms = (cuda.clock() - c0) * 1000
print(("cpu    :: %s"):format(sample(want, 16)))
-- }======================================================

-- {====================================================== the sorts
local original = cuda.array("uint32", N):copy_from(keys)
local data = cuda.array("uint32", N)
local e0, e1 = cuda.event(), cuda.event()

local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end

-- one quicksort of the original keys in data: ms, and the device counters
local function quicksort(v)
  data:copy_from(original)
  v.stats:fill(0)
  e0:record()
  v.kernel:launch({grid = 1, block = 1}, data, 0, N - 1, 0)
  e1:record()
  local ms = e0:elapsed(e1)
  local st = v.stats:totable()
  return ms, {launches = st[1], failed = st[2], deepest = st[3], longest = st[4]}
end

-- SUCCESS, or the seed's complaint and the first place that differs from the CPU
local function verdict(label, got)
  for i = 2, N do
    if got[i - 1] > got[i] then
      print(("Validating results: Invalid item[%d]: %d greater than %d"):format(i - 2, got[i - 1], got[i]))
      break
    end
  end
  for i = 1, N do
    if got[i] ~= want[i] then
      print(("FAILURE (%s): first difference at item %d: GPU %d, CPU %d"):format(label, i - 1, got[i], want[i]))
      return false
    end
  end
  print(("Validating results: OK (%s: SUCCESS)"):format(label))
  return true
end

local all_ok = true
for _, v in ipairs(variants) do
  print(("\nRunning quicksort on %d elements: %s"):format(N, v.what))
  print("Launching kernel on the GPU")
  local ms, st = quicksort(v)
  local got = data:totable()
  print(("gpu    :: %s"):format(sample(got, 16)))
  local ok = verdict(v.name, got)
  print(("%d device-side launches, %d failed, deepest level %d, longest selection sort %d keys"):format(st.launches,
        st.failed, st.deepest, st.longest))
  if st.failed > 0 then
    print(("FAILURE (%s): %d device-side launches failed"):format(v.name, st.failed))
    ok = false
  end
  local times = {ms}
  for r = 2, ms < 2000 and REPS or 1 do times[r] = quicksort(v) end
  v.ms = median(times)
  all_ok = all_ok and ok
end

-- cuda.catalog.sort on the same keys, in place: each run starts from the original
local sorted = cuda.array("uint32", N)
sorted:copy_from(original)
print(("\nRunning cuda.catalog.sort on the same %d keys"):format(N))
cuda.catalog.sort(sorted)                 -- warm: loads the kernels, makes the scratch memory
local cat_sorted = sorted:totable()
print(("gpu    :: %s"):format(sample(cat_sorted, 16)))
local cat_ok = verdict("cuda.catalog.sort", cat_sorted)
all_ok = all_ok and cat_ok
local cat_times = {}
for r = 1, 2 * REPS do
  sorted:copy_from(original)
  e0:record()
  cuda.catalog.sort(sorted)
  e1:record()
  cat_times[r] = e0:elapsed(e1)
end
local cat_ms = median(cat_times)
-- }======================================================

print(("\nTimes for %d keys (medians, events):"):format(N))
for _, v in ipairs(variants) do
  print(("  cdp_simple_quicksort, %-44s %10.3f ms (%.1fx cuda.catalog.sort)"):format(v.what, v.ms, v.ms / cat_ms))
end
print(("  %-66s %10.3f ms"):format("cuda.catalog.sort (onesweep radix sort)", cat_ms))
print(("  %-66s %10.3f ms"):format("CPU: Lua's table.sort", cpu_ms))
print(all_ok and "Check: both quicksorts and the catalog's sort agree with the CPU: SUCCESS" or "Check FAILED")
if not all_ok then os.exit(1) end
