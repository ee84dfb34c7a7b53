-- Modules, kernels and launches: the seed programs as culua scripts, and every launch check.
local T = require "culua.tap"
local cuda = require "cuda"

-- thread-block clusters (compute capability 9.0): each block reads the next block
-- of its cluster's shared memory (distributed shared memory) between two cluster barriers
local cluster_src = [[
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void ring(int *out) {
  __shared__ int mine;
  cg::cluster_group cluster = cg::this_cluster();
  unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0) mine = (int)b;
  cluster.sync();
  int theirs = *cluster.map_shared_rank(&mine, (rank + 1) % size);
  cluster.sync();   /* no block leaves while another reads its shared memory */
  if (threadIdx.x == 0) { out[3 * b] = (int)rank; out[3 * b + 1] = (int)size; out[3 * b + 2] = theirs; }
}
]]
local cluster_ptx = cuda.compile(cluster_src, {options = {"-arch=compute_90"}}).ptx
T.like(cluster_ptx, "barrier%.cluster%.arrive", "a cluster kernel compiles for compute_90: the cluster barrier")
T.like(cluster_ptx, "mapa", "and the map to another block's shared memory")

-- culua.bench's helpers for the bench scripts' rounds (no GPU needed)
do
  local bench = require "culua.bench"
  local t = {3, 1, 2}
  T.is(bench.median(t), 2, "culua.bench median of an odd count")
  T.is_deeply(t, {3, 1, 2}, "median leaves its list as it was")
  T.is(bench.median{4, 1, 3, 2}, 2.5, "median of an even count: the mean of the middle two")
  local order = {}
  bench.in_turn(3, function (r) order[#order + 1] = "a" .. r end, function (r) order[#order + 1] = "o" .. r end)
  T.is(table.concat(order, " "), "a1 o1 o2 a2 a3 o3", "in_turn: the anchor first in odd rounds, last in even ones")
end

if cuda.device_count() == 0 then
  T.error_like(function () cuda.load(cuda.compile("extern \"C\" __global__ void k() {}").ptx) end,
               "cuda%.load: ", "no GPU: cuda.load raises")
  T.done_testing()
  return
end
local dev = T.need_gpu()

-- seed 000: incr over 16M floats, timed with events
local mod = cuda.compile([[
extern "C" __global__ void incKernel(float *data) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  data[idx] = data[idx] + 1.0f;
}
]]):module()
local incr = mod:kernel("incKernel")
T.is_deeply(incr.signature, {"u64"}, "incKernel signature")
T.is(incr.name, "incKernel", "kernel name")
T.is(tostring(incr), "cuda.kernel incKernel(u64)", "kernel __tostring")
local n = 16 * 1024 * 1024
local h = cuda.host_array("float32", n)            -- zeros, as in the seed
local d = cuda.array("float32", n):fill(-5)        -- poisoned
local e0, e1 = cuda.event(), cuda.event()
e0:record()
d:copy_from(h)
incr:launch({grid = n // 512, block = 512}, d)
d:copy_to(h)
e1:record()
local ms = e0:elapsed(e1)
local maxabs = cuda.compare(h, cuda.host_array("float32", n):fill(1))
T.is(maxabs, 0.0, ("seed 000 incr: all 16M elements are 1.0 (%.2f ms with copies)"):format(ms))

-- saxpy through NVRTC on random data, against a float64 CPU reference, odd sizes
local saxpy = cuda.compile([[
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]):module():kernel("saxpy")
for _, size in ipairs{1, 255, 257, 100003, 1 << 22} do
  local hx = cuda.host_array("float32", size):random(size, -1, 1)
  local hy = cuda.host_array("float32", size):random(size + 1, -1, 1)
  local ref = cuda.host_array("float64", size)
  for i = 1, size do ref[i] = 2.5 * hx[i] + hy[i] end
  local x, y = cuda.array("float32", size), cuda.array("float32", size)
  x:copy_from(hx); y:copy_from(hy)
  saxpy:launch({grid = (size + 255) // 256, block = 256}, size, 2.5, x, y)
  local out = cuda.host_array("float32", size):fill(0 / 0)     -- poisoned with NaN
  y:copy_to(out)
  local _, _, rel = cuda.compare(out, ref)
  T.ok(rel < 1e-6, ("saxpy n=%d: relative error %.2e"):format(size, rel))
end

-- a template kernel through name expressions
local tprog = cuda.compile([[
template <typename T, int N> __global__ void fill_n(T *x) { if (threadIdx.x < N) x[threadIdx.x] = T(N) / 2; }
]], {name_expressions = {"fill_n<double,7>", "fill_n<int,5>"}})
local tmod = tprog:module()
local fd = tmod:kernel(tprog.lowered["fill_n<double,7>"])
local fi = tmod:kernel(tprog:lowered_name("fill_n<int,5>"))
local xd, xi = cuda.array("float64", 8):fill(-1), cuda.array("int32", 6):fill(-1)
fd:launch({grid = 1, block = 32}, xd)
fi:launch({grid = 1, block = 32}, xi)
T.is_deeply(xd:totable(), {3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, -1}, "fill_n<double,7> through its lowered name")
T.is_deeply(xi:totable(), {2, 2, 2, 2, 2, -1}, "fill_n<int,5>")

-- constant memory written through mod:global (seed 003's convolution filter)
local cprog = cuda.compile([[
#define R 3
__constant__ float filter[2 * R + 1];
__device__ int calls;
extern "C" __global__ void conv1d(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int k = -R; k <= R; k++) {
    int j = i + k;
    if (j >= 0 && j < n) s += filter[k + R] * in[j];
  }
  out[i] = s;
  if (i == 0) atomicAdd(&calls, 1);
}
]])
local cmod = cprog:module()
local filt = {0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05}
local gf = cmod:global("filter")
T.is(#gf, 7, "mod:global sizes the symbol: 7 floats")
gf:copy_from(filt)
local calls = cmod:global("calls", "int32"):fill(0)
local cn = 10007
local hin = cuda.host_array("float32", cn):random(11)
local din, dout = cuda.array("float32", cn), cuda.array("float32", cn):fill(0 / 0)
din:copy_from(hin)
cmod:kernel("conv1d"):launch({grid = (cn + 127) // 128, block = 128}, din, dout, cn)
local cref = cuda.host_array("float64", cn)
for i = 1, cn do
  local s = 0
  for k = -3, 3 do if i + k >= 1 and i + k <= cn then s = s + filt[k + 4] * hin[i + k] end end
  cref[i] = s
end
local _, _, crel = cuda.compare(dout, cref)
T.ok(crel < 1e-6, ("convolution with a __constant__ filter: relative error %.2e"):format(crel))
T.is(calls:totable()[1], 1, "a __device__ counter read back through mod:global")
T.error_like(function () cmod:global("nothing") end, "no symbol 'nothing' in the module", "missing symbol")
T.error_like(function () cmod:global("filter", "float64") end, "'filter' has 28 bytes, not a whole number of float64", "size mismatch")

-- seed 003: 4 streams overlapping copies and a vector add
local vadd = cuda.compile([[
extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
]]):module():kernel("vadd")
local total, nstreams = (1 << 22) + 13, 4
local ha = cuda.host_array("float32", total, {pinned = true}):random(1)
local hb = cuda.host_array("float32", total, {pinned = true}):random(2)
local hc = cuda.host_array("float32", total, {pinned = true}):fill(0 / 0)
local da, db, dc = cuda.array("float32", total), cuda.array("float32", total), cuda.array("float32", total)
local streams = {}
local chunk = (total + nstreams - 1) // nstreams
for i = 1, nstreams do
  local s = cuda.stream{non_blocking = true}
  streams[i] = s
  local first = (i - 1) * chunk + 1
  local count = math.min(chunk, total - first + 1)
  local va, vb, vc = da:view(first, count), db:view(first, count), dc:view(first, count)
  -- host halves of the chunk go through host arrays of their own size
  local pa = cuda.host_array("float32", count, {pinned = true}):copy_from(ha:bytes():sub((first - 1) * 4 + 1, (first - 1 + count) * 4))
  local pb = cuda.host_array("float32", count, {pinned = true}):copy_from(hb:bytes():sub((first - 1) * 4 + 1, (first - 1 + count) * 4))
  va:copy_from(pa, s)
  vb:copy_from(pb, s)
  vadd:launch({grid = (count + 255) // 256, block = 256, stream = s}, va, vb, vc, count)
  s:synchronize()
end
dc:copy_to(hc)
-- a float32 sum is the float64 sum of the two rounded once to float32
local vref = cuda.host_array("float32", total)
for i = 1, total do vref[i] = ha[i] + hb[i] end
T.is(select(1, cuda.compare(hc, vref)), 0.0, "4-stream vector add is exact")

-- a graph captured from a stream and replayed
local gs = cuda.stream{non_blocking = true}
local gx = cuda.array("float32", 4096):fill(0)
gs:begin_capture()
for _ = 1, 3 do incr:launch({grid = 8, block = 512, stream = gs}, gx) end
local graph = gs:end_capture()
T.is(graph.nodes, 3, "the graph holds the 3 captured launches")
T.like(tostring(graph), "^cuda%.graph %(3 nodes%)", "graph __tostring")
for _ = 1, 5 do graph:launch(gs) end
gs:synchronize()
local gt = gx:totable()
T.ok(gt[1] == 15 and gt[4096] == 15, "5 replays of 3 increments: every element is 15")

-- launch checks: each refused before anything runs
local cfg = {grid = 1, block = 32}
local bad = {
  {function () saxpy:launch(cfg, 1, 2.0, d) end, "'saxpy' takes 4 arguments, got 3", "too few arguments"},
  {function () saxpy:launch(cfg, 1, 2.0, d, d, d) end, "takes 4 arguments, got 5", "too many"},
  {function () saxpy:launch(cfg, 1.5, 2.0, d, d) end, "argument 1 must be an integer for u32, got 1%.5", "a float for an int"},
  {function () saxpy:launch(cfg, 1, d, d, d) end, "argument 2 is a cuda%.array but parameter 2 is f32", "an array for a float"},
  {function () saxpy:launch(cfg, 1, 2.0, "x", d) end, "argument 3 must be an integer for u64 %(or a cuda%.array%), got string", "a string for a pointer"},
  {function () saxpy:launch({grid = 1, block = 2048}, 1, 2.0, d, d) end, "block%.x = 2048 exceeds the device's 1024", "block too large"},
  {function () saxpy:launch({grid = 1, block = {32, 32, 2}}, 1, 2.0, d, d) end, "a block of 2048 threads exceeds the 1024", "too many threads"},
  {function () saxpy:launch({grid = {1, 70000}, block = 32}, 1, 2.0, d, d) end, "grid%.y = 70000 exceeds the device's 65535", "grid.y too large"},
  {function () saxpy:launch({grid = 0, block = 32}, 1, 2.0, d, d) end, "grid must be a positive integer", "zero grid"},
  {function () saxpy:launch({block = 32}, 1, 2.0, d, d) end, "config%.grid is required", "missing grid"},
  {function () saxpy:launch({grid = 1}, 1, 2.0, d, d) end, "config%.block is required", "missing block"},
  {function () saxpy:launch({grid = 1, block = 32, gird = 2}, 1, 2.0, d, d) end, "unknown config key 'gird' %(grid, block, shared, stream, cooperative, cluster, programmatic%)", "a misspelt key is refused"},
  {function () saxpy:launch({grid = "1", block = 32}, 1, 2.0, d, d) end, "grid must be a positive integer or {x, y, z}, got string", "a string grid"},
  {function () saxpy:launch({grid = 1, block = {1, 2, 3, 4}}, 1, 2.0, d, d) end, "block must have 1 to 3 dimensions, got 4", "4-D block"},
  {function () saxpy:launch({grid = 1, block = 32, shared = -1}, 1, 2.0, d, d) end, "shared must be a byte count", "negative shared"},
  {function () saxpy:launch({grid = 1, block = 32, shared = 1 << 20}, 1, 2.0, d, d) end, "CUDA_ERROR_INVALID_VALUE launching 'saxpy'", "too much shared memory"},
  {function () saxpy:launch(5, 1, 2.0, d, d) end, "launch: bad argument #1 %(table expected, got number%)", "config not a table"},
  {function () saxpy:launch({grid = 1, block = 32, stream = 1}, 1, 2.0, d, d) end, "cuda%.stream expected, got number", "bad stream"},
}
for _, b in ipairs(bad) do T.error_like(b[1], b[2], b[3]) end
T.error_like(function () mod:kernel("incKernal") end, "no kernel 'incKernal' in the module", "missing kernel name")

-- attributes and occupancy
local attrs = saxpy:attributes()
T.ok(attrs.num_regs > 0 and attrs.max_threads_per_block == 1024 and attrs.ptx_version >= 80,
     ("attributes: %d registers, PTX %d, binary %d"):format(attrs.num_regs, attrs.ptx_version, attrs.binary_version))
local per = saxpy:max_active_blocks(256)
T.ok(per >= 1 and per <= 32, "max_active_blocks(256) = " .. per)
local sms = dev:attribute("multiprocessor_count")
T.is(saxpy:max_cooperative_grid(256), per * sms, "max_cooperative_grid = blocks per SM x SMs")
T.error_like(function () saxpy:max_active_blocks(0) end, "block size must be 1%.%.1024", "occupancy for a bad block size")
local big = cuda.compile([[
extern "C" __global__ void big(float *x) { extern __shared__ float s[]; s[threadIdx.x] = 1; x[threadIdx.x] = s[threadIdx.x]; }
]]):module():kernel("big")
T.error_like(function () big:launch({grid = 1, block = 32, shared = 100 * 1024}, d) end, "CUDA_ERROR_INVALID_VALUE", "100 KiB of dynamic shared memory is refused by default")
big:set_max_dynamic_shared(100 * 1024)
T.lives_ok(function () big:launch({grid = 1, block = 32, shared = 100 * 1024}, d); cuda.synchronize() end,
           "set_max_dynamic_shared(100 KiB) allows it")


if dev.major >= 9 then
  local ring = cuda.compile(cluster_src):module():kernel("ring")
  -- the block a rank of the cluster holding block b reads: the cluster's next rank
  local function want_ring(grid, cl)
    local g = {grid[1], grid[2] or 1, grid[3] or 1}
    local c = {cl[1], cl[2] or 1, cl[3] or 1}
    local w = {}
    for z = 0, g[3] - 1 do for y = 0, g[2] - 1 do for x = 0, g[1] - 1 do
      local b = x + g[1] * (y + g[2] * z)
      local rx, ry, rz = x % c[1], y % c[2], z % c[3]
      local rank, size = rx + c[1] * (ry + c[2] * rz), c[1] * c[2] * c[3]
      local nr = (rank + 1) % size
      local nx, ny, nz = nr % c[1], (nr // c[1]) % c[2], nr // (c[1] * c[2])
      local nb = (x - rx + nx) + g[1] * ((y - ry + ny) + g[2] * (z - rz + nz))
      w[3 * b + 1], w[3 * b + 2], w[3 * b + 3] = rank, size, nb
    end end end
    return w
  end
  for _, c in ipairs{{{12}, {2}}, {{16}, {8}}, {{6, 4}, {3, 2}}, {{4, 2, 2}, {2, 1, 2}}, {{132}, {4}}} do
    local grid, cl = c[1], c[2]
    local blocks = grid[1] * (grid[2] or 1) * (grid[3] or 1)
    local out = cuda.array("int32", 3 * blocks):fill(-1)
    ring:launch({grid = grid, block = 64, cluster = #cl == 1 and cl[1] or cl}, out)
    T.is_deeply(out:totable(), want_ring(grid, cl),
                ("clusters of {%s} over grid {%s}: ranks, sizes and the next block's shared memory"):format(
                table.concat(cl, ", "), table.concat(grid, ", ")))
  end
  local out = cuda.array("int32", 3 * 32):fill(-1)
  local go = ring:prepare({grid = 32, block = 32, cluster = 16})
  go(out)
  T.is_deeply(out:totable(), want_ring({32}, {16}), "a prepared launch in clusters of 16 (non-portable, set for the kernel)")
  local most = ring:max_active_clusters({block = 64, cluster = 8})
  T.ok(math.type(most) == "integer" and most >= 1, ("max_active_clusters: %d clusters of 8 blocks fit"):format(most))
  T.is(ring:max_active_clusters({grid = 16, block = 64, cluster = 8}), most, "the same with a grid given")
  -- (the driver calls the figure an upper bound, not a promise: half of it, cooperatively)
  local half = math.max(1, most // 2)
  out = cuda.array("int32", 3 * 8 * half):fill(-1)
  ring:launch({grid = 8 * half, block = 64, cluster = 8, cooperative = true}, out)
  T.is_deeply(out:totable(), want_ring({8 * half}, {8}), ("a cooperative launch of %d clusters"):format(half))
  T.error_like(function () ring:launch({grid = 8 * (most + 1), block = 64, cluster = 8, cooperative = true}, out) end,
               "launch: a cooperative grid of " .. (most + 1) .. " clusters cannot be co%-resident %(at most " .. most .. "%)",
               "a cooperative grid of too many clusters is refused, not hung")
  for _, b in ipairs{
    {{grid = 10, block = 32, cluster = 4}, "launch: grid%.x = 10 is not a multiple of cluster%.x = 4", "a grid that clusters do not tile"},
    {{grid = {4, 3}, block = 32, cluster = {2, 2}}, "launch: grid%.y = 3 is not a multiple of cluster%.y = 2", "nor in y"},
    {{grid = 32, block = 32, cluster = 32}, "launch: a cluster of 32 blocks is more than 16 %(8 portably%)", "a cluster past 16"},
    {{grid = 4, block = 32, cluster = 0}, "launch: cluster must be a positive integer or {x, y, z}", "a cluster of 0"},
    {{grid = 4, block = 32, cluster = {1, 2, 3, 4}}, "launch: cluster must have 1 to 3 dimensions, got 4", "a cluster of four dimensions"},
    {{grid = 4, block = 32, cluster = "2"}, "launch: cluster must be a positive integer or {x, y, z}, got string", "a cluster string"},
  } do
    T.error_like(function () ring:launch(b[1], out) end, b[2], b[3])
  end
  T.error_like(function () ring:max_active_clusters({grid = 8, block = 64}) end,
               "max_active_clusters: config%.cluster is required", "max_active_clusters without a cluster")
  T.error_like(function () ring:max_active_clusters({block = 64, cluster = 8, shred = 0}) end,
               "max_active_clusters: unknown config key 'shred'", "max_active_clusters: a misspelt key")
  T.error_like(function () ring:max_active_clusters({grid = 10, block = 64, cluster = 4}) end,
               "max_active_clusters: grid%.x = 10 is not a multiple of cluster%.x = 4", "max_active_clusters: its own name in errors")
  T.error_like(function () ring:prepare({grid = 10, block = 32, cluster = 4}) end, "not a multiple of cluster%.x = 4",
               "prepare checks the cluster once, too")
else
  T.skip(("device %d is compute capability %d.%d: clusters need 9.0"):format(dev.ordinal, dev.major, dev.minor), 20)
end

-- programmatic dependent launches (compute capability 9.0): `produce` lets its dependents
-- be scheduled at once, then spins before it writes; `consume`, launched programmatic,
-- waits for it (griddepcontrol.wait) before reading, so it sees every write of the
-- produce before it, and the next produce sees consume's reads done. Each round r also
-- notes when produce ended (tend[r]) and when consume began, before its wait (tstart[r]):
-- consume beginning first shows that the attribute reached the driver
local pdl = cuda.compile([[
__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
extern "C" __global__ void produce(int n, int *x, long long spin, unsigned long long *tend, int r) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  long long t0 = clock64();
  while (clock64() - t0 < spin) { }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
  if (threadIdx.x == 0) atomicMax(tend + r, now());
}
extern "C" __global__ void consume(int n, const int *x, int *y, unsigned long long *tstart, int r) {
  if (threadIdx.x == 0) atomicMin(tstart + r, now());   /* (no other kernel touches tstart) */
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}
]], {options = {"-arch=compute_90"}})
T.like(pdl.ptx, "griddepcontrol%.wait", "griddepcontrol compiles for compute_90")
do   -- the same through culua/common.cuh; below 9.0 they are no-ops
  local src = '#include <culua/common.cuh>\nextern "C" __global__ void k(int *x) { culua_dep_wait(); x[0] = 1; culua_dep_release(); }'
  local p90 = cuda.compile(src, {options = {"-arch=compute_90"}}).ptx
  local p80 = cuda.compile(src, {options = {"-arch=compute_80"}}).ptx
  T.ok(p90:find("griddepcontrol.wait", 1, true) and p90:find("griddepcontrol.launch_dependents", 1, true)
       and not p80:find("griddepcontrol", 1, true), "culua_dep_wait and culua_dep_release (culua/common.cuh): 9.0 only")
end
if dev.major >= 9 then
  local m = pdl:module()
  local produce, consume = m:kernel("produce"), m:kernel("consume")
  local n, rounds = 3000, 40
  local x, y = cuda.array("int32", n):fill(0), cuda.array("int32", n):fill(0)
  local tend, tstart = cuda.array("uint64", rounds + 1):fill(0), cuda.array("uint64", rounds + 1):fill(math.maxinteger)
  local s = cuda.stream()
  local cfg = {grid = (n + 255) // 256, block = 256, stream = s, programmatic = true}
  local go = consume:prepare(cfg)
  for r = 0, rounds - 1 do
    produce:launch(cfg, n, x, 20000, tend, r)
    go(n, x, y, tstart, r)
  end
  s:synchronize()
  -- after round r x holds r and y 1 + 2 + ... + r
  local hx, hy, bad = x:totable(), y:totable(), 0
  for i = 1, n do if hx[i] ~= rounds or hy[i] ~= rounds * (rounds + 1) // 2 then bad = bad + 1 end end
  T.is(bad, 0, ("%d rounds of programmatic launches (launch and prepare) see each other's writes"):format(rounds))
  local te, ts, early = tend:totable(), tstart:totable(), 0
  for r = 1, rounds do if ts[r] < te[r] then early = early + 1 end end
  if T.sanitizer then
    -- compute-sanitizer runs kernels one after another, so none can begin early
    T.skip("the overlap of programmatic launches: kernels are serialized under " .. T.sanitizer)
  else
    T.ok(early >= 1, ("consume began before produce ended (the launch was programmatic) in %d of %d rounds"):format(early, rounds))
  end
  -- in clusters too (the attributes together)
  x:fill(0); y:fill(0)
  produce:launch({grid = 12, block = 256, cluster = 4, stream = s, programmatic = true}, n, x, 20000, tend, rounds)
  consume:launch({grid = 12, block = 256, cluster = 2, stream = s, programmatic = true}, n, x, y, tstart, rounds)
  hy = y:totable()
  bad = 0
  for i = 1, n do if hy[i] ~= 1 then bad = bad + 1 end end
  T.is(bad, 0, "programmatic launches in clusters")
else
  T.error_like(function () cuda.compile("extern \"C\" __global__ void k() {}"):module():kernel("k"):launch(
                 {grid = 1, block = 1, programmatic = true}) end,
               "launch: device %d+ cannot launch programmatic dependents %(compute capability 9%.0",
               "programmatic launches refused before compute capability 9.0")
  T.skip(("device %d is compute capability %d.%d: programmatic launches need 9.0"):format(dev.ordinal, dev.major, dev.minor), 1)
end

-- cooperative launches: refused when the grid cannot be co-resident
local coop = cuda.compile([[
#include <cooperative_groups.h>
extern "C" __global__ void twice(int *x) {
  auto g = cooperative_groups::this_grid();
  atomicAdd(x, 1);
  g.sync();
  if (g.thread_rank() == 0) atomicAdd(x + 1, x[0]);
}
]]):module():kernel("twice")
local cx = cuda.array("int32", 2):fill(0)
local maxgrid = coop:max_cooperative_grid(128)
coop:launch({grid = maxgrid, block = 128, cooperative = true}, cx)
T.is_deeply(cx:totable(), {maxgrid * 128, maxgrid * 128}, ("a cooperative grid of %d blocks syncs"):format(maxgrid))
T.error_like(function () coop:launch({grid = maxgrid + 1, block = 128, cooperative = true}, cx) end,
             "a cooperative grid of " .. (maxgrid + 1) .. " blocks cannot be co%-resident", "an oversize cooperative grid is refused, not hung")

-- binaries: CUBIN loads, and its signature comes from the driver
local cub = cuda.compile([[extern "C" __global__ void k3(int a, double b, float *c) { c[0] = a + b; }]], {output = "cubin"})
local ck = cuda.load(cub.cubin):kernel("k3")
T.is_deeply(ck.signature, {"b32", "b64", "b64"}, "a CUBIN kernel's signature: sizes from cuFuncGetParamInfo")
local cc = cuda.array("float32", 1)
ck:launch({grid = 1, block = 1}, 2, 0.5, cc)
T.is(cc:totable()[1], 2.5, "a CUBIN kernel launches (integer, float, array by size)")
local ptxfile = os.tmpname()
local f = assert(io.open(ptxfile, "w"))
f:write(tprog.ptx)
f:close()
T.ok(cuda.load{file = ptxfile}:kernel(tprog.lowered["fill_n<int,5>"]), "cuda.load{file = path}")
T.ok(cuda.load(tprog.ptx, {device = 0}):kernel(tprog.lowered["fill_n<int,5>"]), "cuda.load(image, {device = 0})")
T.error_like(function () cuda.load(tprog.ptx, {device = 99}) end, "cuda%.load: no CUDA device 99", "cuda.load on a missing device")
os.remove(ptxfile)
T.error_like(function () cuda.load(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry x( { bogus; }") end,
             "cuda%.load: CUDA_ERROR_INVALID_PTX loading a PTX module", "bad PTX names the JIT error")
T.error_like(function () cuda.load{file = "/nonexistent.ptx"} end, "cannot open /nonexistent%.ptx", "missing file")
T.error_like(function () cuda.load(42) end, "string, cuda%.program or {file = path} expected", "bad image")

-- prepared launches: the config checked once, the arguments on every call
do
  local size = 1000
  local hx = cuda.host_array("float32", size):random(77, -1, 1)
  local x, y = cuda.array("float32", size):copy_from(hx), cuda.array("float32", size):fill(1)
  local ps = cuda.stream()
  local go = saxpy:prepare{grid = (size + 255) // 256, block = 256, stream = ps}
  T.is(type(go), "function", "k:prepare(config) gives a function")
  go(size, 2.0, x, y)
  go(size, 2.0, x, y)
  ps:synchronize()
  local ref = cuda.host_array("float64", size)
  for i = 1, size do ref[i] = 1 + 2 * (2.0 * hx[i]) end
  local _, _, rel = cuda.compare(y, ref)
  T.ok(rel < 1e-6, "two prepared launches on a stream: relative error " .. rel)
  -- arguments bound to the launcher (k:prepare(config, ...)): converted once, the rest a call
  y:fill(1, ps)
  local bound = saxpy:prepare({grid = (size + 255) // 256, block = 256, stream = ps}, size, 2.0)
  bound(x, y)
  local all = saxpy:prepare({grid = (size + 255) // 256, block = 256, stream = ps}, size, 2.0, x, y)
  all()
  ps:synchronize()
  _, _, rel = cuda.compare(y, ref)
  T.ok(rel < 1e-6, "prepared with bound arguments, two and all four: relative error " .. rel)
  T.error_like(function () bound(x) end, "'saxpy' takes 4 arguments, got 3", "bound: argument count, the bound ones counted")
  T.error_like(function () all(x) end, "'saxpy' takes 4 arguments, got 5", "bound: one too many")
  T.error_like(function () saxpy:prepare({grid = 1, block = 32}, size, 2.0, x, y, y) end,
               "prepare: 'saxpy' takes 4 arguments, got 5 to bind", "prepare: too many to bind")
  T.error_like(function () saxpy:prepare({grid = 1, block = 32}, size, x) end,
               "argument 2 is a cuda%.array but parameter 2 is f32", "prepare: a bound argument is checked when bound")
  local z = cuda.array("float32", size):fill(0)
  local gz = saxpy:prepare({grid = 1, block = 32}, size, 2.0, x, z)
  z:close()
  T.error_like(function () gz() end, "attempt to use a closed cuda%.array", "bound: an array closed since is refused")
  T.error_like(function () go(size, 2.0, x) end, "'saxpy' takes 4 arguments, got 3", "prepared: argument count")
  T.error_like(function () go(size, x, x, y) end, "argument 2 is a cuda%.array but parameter 2 is f32", "prepared: argument types")
  T.error_like(function () saxpy:prepare{grid = 1, block = 4096} end, "block%.x = 4096 exceeds the device's 1024", "prepare checks the config")
  T.error_like(function () saxpy:prepare{grid = 1} end, "config%.block is required", "prepare: missing block")
  T.error_like(function () saxpy:prepare(3) end, "prepare: bad argument #1 %(table expected, got number%)", "prepare: config not a table")
  ps:close()
  T.error_like(function () go(size, 2.0, x, y) end, "attempt to use a closed cuda%.stream", "prepared: its stream was closed")
  local lonely = cuda.compile([[extern "C" __global__ void lonely() {}]]):module()
  local lgo = lonely:kernel("lonely"):prepare{grid = 1, block = 1}
  lgo()
  lonely:close()
  T.error_like(function () lgo() end, "cuda%.kernel whose module was closed", "prepared: its module was closed")
end

-- a kernel of a closed module refuses to launch
local lone = cuda.compile([[extern "C" __global__ void lone() {}]]):module()
local lk = lone:kernel("lone")
lone:close()
T.error_like(function () lk:launch({grid = 1, block = 1}) end, "cuda%.kernel whose module was closed", "closed module")
T.error_like(function () lone:kernel("lone") end, "attempt to use a closed cuda%.module", "closed module refuses lookups")

-- cuda.debug synchronizes after each launch; cuda.bench times with events
T.is(cuda.debug(true), false, "debug was off")
incr:launch({grid = 1, block = 32}, gx)
T.is(cuda.debug(false), true, "debug was on")
local r = cuda.bench(function () incr:launch({grid = n // 512, block = 512}, d) end, {warmup = 2, reps = 9})
T.ok(r.min > 0 and r.min <= r.median and r.median <= r.max and r.reps == 9 and #r.samples == 9,
     "cuda.bench: " .. tostring(r))
T.error_like(function () cuda.bench(function () end, {reps = 0}) end, "reps must be an integer >= 1", "bench checks reps")
-- setup runs before every call, warm-ups included, outside the timed events
local calls = {}
cuda.bench(function () calls[#calls + 1] = "fn" end, {warmup = 1, reps = 2, setup = function () calls[#calls + 1] = "setup" end})
T.is_deeply(calls, {"setup", "fn", "setup", "fn", "setup", "fn"}, "cuda.bench: setup before each call")
T.error_like(function () cuda.bench(function () end, {setup = 1}) end, "setup must be a function", "bench checks setup")

d, h, da, db, dc, ha, hb, hc, gx, xd, xi, din, dout, cc, cx = nil
collectgarbage()
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
