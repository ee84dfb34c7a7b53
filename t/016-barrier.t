-- cuda.catalog.barrier: seed 001's X -> P -> X with every grid barrier, bit for bit
-- against a CPU reference; many launches (MKL) give the same; unsafe grids are refused.
local T = require "culua.tap"
local cuda = require "cuda"
T.need_gpu()
local bar = cuda.catalog.barrier

-- float32 arithmetic on the CPU: each double result rounded once to float32
local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end
local function phase(src, n)
  local a = src[1]
  for k = 2, n do a = f32(a + src[k]) end
  local v = f32(a / n)
  local dst = {}
  for j = 1, n do dst[j] = v end
  return dst
end
local function reference(x0, n, transforms)
  local x = x0
  for _ = 1, transforms do x = phase(phase(x, n), n) end
  return x
end

local function setup(n, seed)
  local h = cuda.host_array("float32", n):random(seed, -1, 1)
  local X, P = cuda.array("float32", n):copy_from(h), cuda.array("float32", n):fill(0 / 0)
  return h, X, P
end

-- both phases (X staged in shared memory, or read from global memory); 132 x 128
-- is n = 16896, more than one staged chunk
local configs = {{1, 64}, {2, 64}, {4, 128}, {32, 32}, {8, 256}, {132, 128}}
for _, phase in ipairs{"shared", "global"} do
  for _, kind in ipairs(bar.kinds) do
    for _, c in ipairs(configs) do
      local blocks, threads = c[1], c[2]
      local n = blocks * threads
      for _, transforms in ipairs{1, 10} do
        local h, X, P = setup(n, n + transforms)
        bar.xpx(kind, X, P, {blocks = blocks, threads = threads, transforms = transforms, phase = phase})
        local want = reference(h:totable(), n, transforms)
        local got = X:totable()
        local wrong = 0
        for j = 1, n do if got[j] ~= want[j] then wrong = wrong + 1 end end
        T.is(wrong, 0, ("%s barrier, %s phase, %d x %d, %d transform%s: exact"):format(kind, phase, blocks, threads,
             transforms, transforms > 1 and "s" or ""))
      end
    end
  end
end

-- without a grid barrier the result may be wrong; with many launches it is right
do
  local blocks, threads, transforms = 32, 32, 10
  local n = blocks * threads
  local h, X, P = setup(n, 5)
  local want = reference(h:totable(), n, transforms)
  for _, kind in ipairs{"none", "block"} do
    local X2, P2 = cuda.array("float32", n):copy_from(h), cuda.array("float32", n)
    bar.xpx(kind, X2, P2, {blocks = blocks, threads = threads, transforms = transforms})
    local got, wrong = X2:totable(), 0
    for j = 1, n do if got[j] ~= want[j] then wrong = wrong + 1 end end
    T.diag(("no grid barrier (%s): %d of %d elements differ this time"):format(kind, wrong, n))
  end
  for _, phase in ipairs{"shared", "global"} do
    for _, kind in ipairs{"none", "seed", "grid", "coop"} do   -- MKL launches that kind's kernel a phase at a time
      X:copy_from(h)
      bar.mkl(X, P, {blocks = blocks, threads = threads, transforms = transforms, phase = phase, kind = kind})
      local got, wrong = X:totable(), 0
      for j = 1, n do if got[j] ~= want[j] then wrong = wrong + 1 end end
      T.is(wrong, 0, ("MKL (two launches per transform) is exact, %s phase, %s's kernel"):format(phase, kind))
    end
  end
end

-- unsafe grids are refused before anything runs
local big = cuda.array("float32", 1 << 22)
T.error_like(function () bar.xpx("grid", big, big, {blocks = 100000, threads = 32}) end,
             "barrier%.launch: a grid of 100000 blocks of 32 threads cannot be co%-resident on .- %(at most %d+%); the barrier would wait forever",
             "an oversize grid is refused instead of hanging")
T.error_like(function () bar.xpx("coop", big, big, {blocks = 100000, threads = 32}) end, "cannot be co%-resident",
             "the cooperative kind too")
T.error_like(function () bar.xpx("grid", big, big, {blocks = 4}) end, "opts%.blocks and opts%.threads are required", "missing threads")
T.error_like(function () bar.xpx("grid", cuda.array("float32", 10), big, {blocks = 4, threads = 32}) end,
             "X and P need 128 elements %(blocks x threads%), have 10", "arrays too small")
T.error_like(function () bar.xpx("grid", big, big, {blocks = 4, threads = 32, phase = "texture"}) end,
             "barrier%.xpx: phase must be one of shared, global, got texture", "an unknown phase")
T.error_like(function () bar.mkl(big, big, {blocks = 4, threads = 32, phase = 1}) end,
             "barrier%.mkl: phase must be one of shared, global, got 1", "an unknown phase for MKL")
T.error_like(function () bar.mkl(big, big, "fast") end, "barrier%.mkl: opts must be a table, got string", "opts not a table")
T.error_like(function () bar.mkl(big, big, {blocks = 4, threads = 32, kind = "fast"}) end,
             "barrier%.mkl: kind must be one of none, block, seed, seed_asm, sense, grid, coop, got fast", "an unknown kind for MKL")

-- a user kernel with <culua/barrier.cuh>, launched through the helper at the full co-resident grid
local k = cuda.compile([[
#include <culua/barrier.cuh>
extern "C" __global__ void blocksum(unsigned *state, int *slot, long long *out) {
  culua::grid_barrier bar(state);
  if (threadIdx.x == 0) slot[blockIdx.x] = blockIdx.x + 1;
  bar.sync();
  if (threadIdx.x == 0) {          /* every block sees every slot */
    long long s = 0;
    for (unsigned b = 0; b < gridDim.x; b++) s += slot[b];
    out[blockIdx.x] = s;
  }
}
]]):module():kernel("blocksum")
local state = bar.state()
-- 256 threads: 8 blocks per SM on an H100 (the flat barrier); 64 threads: the tree beyond 1536 blocks
for _, threads in ipairs{256, 64} do
  local maxgrid = bar.max_grid(k, threads)
  local slot, out = cuda.array("int32", maxgrid):fill(0), cuda.array("int64", maxgrid):fill(-1)
  local used = bar.launch(k, {block = threads, state = state}, state, slot, out)
  T.is(used, maxgrid, ("launch sizes the grid from occupancy: %d blocks of %d threads"):format(used, threads))
  local sums, all = out:totable(), true
  for b = 1, used do all = all and sums[b] == used * (used + 1) // 2 end
  T.ok(all, "after the barrier every block saw all " .. used .. " slots")
end

-- latency loops run to completion at the full grid, for every kind
for _, kind in ipairs(bar.kinds) do
  local name = kind == "seed_asm" and "seed" or kind
  local loop = cuda.catalog.kernel("barrier", "culua_barrier_loop_" .. name)
  -- (5 under compute-sanitizer, where every spin of the full grid is checked)
  local count = T.sanitizer and 5 or 100
  local g = bar.launch(loop, {block = 128, state = state, cooperative = name == "coop"}, state, count)
  cuda.synchronize()
  T.ok(g > 0, ("%d %s barriers across %d blocks complete"):format(count, name, g))
end

big, state = nil
collectgarbage()
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
