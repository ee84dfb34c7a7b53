-- nbody.lua: seed 003's all-pairs N-body step, the seed's kernel and a tuned one.
--
-- Every body i gathers the pull of every body j, F_i = sum_j d_ij / (|d_ij|^2 + eps)^(3/2),
-- and its velocity moves by dt * F_i. Positions are float4 (x, y, z, mass);
-- the seed's bodies all weigh 1, and so do ours (a padding body weighs 0).
-- Both kernels walk the bodies a tile at a time through shared memory, a
-- block's worth of positions loaded by the block and then read by all.
--
--   seed:  the seed's kernel: float3 tiles of 256 bodies, a rolled inner loop
--          (its bounds fixed so that N need not be a multiple of 256);
--   tuned: float4 tiles (one 16-byte shared load a body, the mass folded in
--          so that no bounds test stays in the inner loop), the tile loop
--          unrolled, and the block size chosen from occupancy
--          (k:max_active_blocks) and N: the size keeping most threads resident.
--
-- Both are checked against one step computed here in Lua (double precision)
-- at a small N, then timed for N = 2^10 .. MAXN by powers of 4, reported as
-- interactions a second and GFLOP/s at 20 flops an interaction (the usual
-- count: GPU Gems 3, ch. 31).
--
--   culua examples/nbody.lua [MAXN]      (default 2^20 = 1048576)

local cuda = require "cuda"
io.stdout:setvbuf("line")

local maxn = 1 << 20
if arg[1] then
  maxn = math.tointeger(tonumber(arg[1]))
  if not maxn or maxn < 2 then error(("nbody.lua: MAXN must be an integer >= 2, got '%s'"):format(arg[1]), 0) end
end
local SOFTENING, DT = 1e-9, 0.01
local TILES = {64, 128, 256, 512, 1024}

local source = [[
#define SOFTENING 1e-9f
#define BLOCK_SIZE 256
#ifndef TILE
#define TILE 256
#endif

// The seed's kernel: a tile of BLOCK_SIZE positions in shared memory, loaded by
// the block, then every thread sums over it. Launched with BLOCK_SIZE threads a
// block. All threads of a block pass both barriers of every tile; threads past
// n load nothing and store nothing.
extern "C" __global__ void body_force_seed(const float4 *p, float4 *v, float dt, int n)
{
  __shared__ float3 shared_position[BLOCK_SIZE];
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  float4 pi = i < n ? p[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  float Fx = 0.f, Fy = 0.f, Fz = 0.f;
  for (int tile = 0; tile < gridDim.x; tile++) {
    int j = tile * BLOCK_SIZE + threadIdx.x;
    float4 q = j < n ? p[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    shared_position[threadIdx.x] = make_float3(q.x, q.y, q.z);
    __syncthreads();   // the whole tile is in shared memory
    int count = min(BLOCK_SIZE, n - tile * BLOCK_SIZE);
    for (int k = 0; k < count; k++) {
      float dx = shared_position[k].x - pi.x;
      float dy = shared_position[k].y - pi.y;
      float dz = shared_position[k].z - pi.z;
      float distSqr = dx * dx + dy * dy + dz * dz + SOFTENING;
      float invDist = rsqrtf(distSqr);
      float invDist3 = invDist * invDist * invDist;
      Fx += dx * invDist3; Fy += dy * invDist3; Fz += dz * invDist3;
    }
    __syncthreads();   // everyone is done with the tile before it is overwritten
  }
  if (i < n) {
    float4 vi = v[i];
    vi.x += dt * Fx; vi.y += dt * Fy; vi.z += dt * Fz;
    v[i] = vi;
  }
}

// Tuned: TILE threads a block (the block size picked by the script), float4
// tiles with the mass in w, padding bodies of mass 0 so the inner loop has a
// fixed trip count and unrolls.
extern "C" __global__ void __launch_bounds__(TILE)
body_force_tuned(const float4 *__restrict__ p, float4 *__restrict__ v, float dt, int n)
{
  __shared__ float4 tile_pos[TILE];
  int i = blockIdx.x * TILE + threadIdx.x;
  float4 pi = i < n ? p[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  float ax = 0.f, ay = 0.f, az = 0.f;
  for (int base = 0; base < n; base += TILE) {
    int j = base + threadIdx.x;
    tile_pos[threadIdx.x] = j < n ? p[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    __syncthreads();
#pragma unroll 16
    for (int k = 0; k < TILE; k++) {
      float4 q = tile_pos[k];
      float dx = q.x - pi.x, dy = q.y - pi.y, dz = q.z - pi.z;
      float d2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, SOFTENING)));
      float inv = rsqrtf(d2);
      float s = q.w * (inv * inv * inv);
      ax = fmaf(dx, s, ax); ay = fmaf(dy, s, ay); az = fmaf(dz, s, az);
    }
    __syncthreads();
  }
  if (i < n) {
    float4 vi = v[i];
    vi.x += dt * ax; vi.y += dt * ay; vi.z += dt * az;
    v[i] = vi;
  }
}
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernels
local progs = {}
for _, t in ipairs(TILES) do progs[t] = cuda.compile(source, {name = "nbody.cu", options = {"-DTILE=" .. t}}) end
require("culua.bench").need_devices()

local dev = cuda.device()
local sms = dev:attribute("multiprocessor_count")
local per_sm = dev:attribute("max_threads_per_multiprocessor")
local seed_k = progs[256]:module():kernel("body_force_seed")
local tuned = {}
for _, t in ipairs(TILES) do
  local k = progs[t]:module():kernel("body_force_tuned")
  tuned[t] = {kernel = k, active = k:max_active_blocks(t)}
end

print(("%s: %d multiprocessors, %d threads each"):format(dev.name, sms, per_sm))
io.write("Tuned kernel, blocks resident a multiprocessor (occupancy):")
for _, t in ipairs(TILES) do
  io.write(("  %d: %d (%.0f%%)"):format(t, tuned[t].active, 100 * tuned[t].active * t / per_sm))
end
io.write("\n")

-- the block size for n bodies, from occupancy: the largest tile whose grid
-- fills every multiprocessor to the number of blocks it can hold (fewer tiles
-- to load and barriers to pass a body); when no tile fills them, the largest
-- whose grid still gives every multiprocessor a block; else the smallest
local function pick(n)
  local best
  for _, t in ipairs(TILES) do
    if tuned[t].active > 0 and (n + t - 1) // t >= tuned[t].active * sms then best = t end
  end
  if best then return best end
  for _, t in ipairs(TILES) do
    if tuned[t].active > 0 and (n + t - 1) // t >= sms then best = t end
  end
  return best or TILES[1]
end

-- {====================================================== the bodies
-- positions in [-1, 1)^3 of mass 1, velocities in [-1, 1)^3, for the largest N
local hp = cuda.host_array("float32", 4 * maxn):random(2024, -1, 1)
local hv = cuda.host_array("float32", 4 * maxn):random(2025, -1, 1)
for i = 4, 4 * maxn, 4 do hp[i] = 1 end
local P = cuda.array("float32", 4 * maxn):copy_from(hp)
local V = cuda.array("float32", 4 * maxn)

local function step_seed(n)
  seed_k:launch({grid = {(n + 255) // 256}, block = {256}}, P, V, DT, n)
end
local function step_tuned(n, t)
  t = t or pick(n)
  tuned[t].kernel:launch({grid = {(n + t - 1) // t}, block = {t}}, P, V, DT, n)
end
-- }======================================================

-- {====================================================== the check
local all_ok = true
do
  local n = math.min(maxn, 1000)
  local x, y, z, vx, vy, vz = {}, {}, {}, {}, {}, {}
  for i = 1, n do
    x[i], y[i], z[i] = hp[4 * i - 3], hp[4 * i - 2], hp[4 * i - 1]
    vx[i], vy[i], vz[i] = hv[4 * i - 3], hv[4 * i - 2], hv[4 * i - 1]
  end
  -- one step in double; mag: the size of the sums' terms, the scale of float32 rounding
  local want, mag = {}, {}
  local t0 = cuda.clock()
  for i = 1, n do
    local fx, fy, fz, m = 0.0, 0.0, 0.0, 0.0
    local xi, yi, zi = x[i], y[i], z[i]
    for j = 1, n do
      local dx, dy, dz = x[j] - xi, y[j] - yi, z[j] - zi
      local inv = 1 / math.sqrt(dx * dx + dy * dy + dz * dz + SOFTENING)
      local inv3 = inv * inv * inv
      fx, fy, fz = fx + dx * inv3, fy + dy * inv3, fz + dz * inv3
      m = m + (math.abs(dx) + math.abs(dy) + math.abs(dz)) * inv3
    end
    want[i] = {vx[i] + DT * fx, vy[i] + DT * fy, vz[i] + DT * fz}
    mag[i] = math.abs(vx[i]) + math.abs(vy[i]) + math.abs(vz[i]) + DT * m
  end
  local cpu_s = cuda.clock() - t0
  local function verify(label, run)
    V:copy_from(hv)
    run()
    local got = cuda.host_array("float32", 4 * maxn)
    V:copy_to(got)
    local worst = 0
    for i = 1, n do
      for c = 1, 3 do
        local err = math.abs(got[4 * (i - 1) + c] - want[i][c]) / mag[i]
        worst = (err == err) and math.max(worst, err) or math.huge
      end
    end
    -- bodies past n are untouched
    local untouched = n == maxn or got[4 * n + 1] == hv[4 * n + 1]
    local ok = worst < 1e-5 and untouched
    all_ok = all_ok and ok
    return ("%s %s (%.1e)"):format(label, ok and "ok" or "WRONG", worst)
  end
  local line = {verify("seed", function () step_seed(n) end)}
  for _, t in ipairs(TILES) do line[#line + 1] = verify("tuned/" .. t, function () step_tuned(n, t) end) end
  print(("Check, one step of N = %d against the CPU (%.2f s in Lua): %s"):format(n, cpu_s, table.concat(line, ", ")))
end
-- }======================================================

-- {====================================================== the sweep
local sizes = {}
local n = 1 << 10
while n <= maxn do sizes[#sizes + 1] = n; n = n * 4 end
if sizes[#sizes] ~= maxn then sizes[#sizes + 1] = maxn end
V:copy_from(hv)

-- median ms of a step; fewer repeats where one step is long
local function time(fn)
  local once = cuda.bench(fn, {warmup = 1, reps = 1}).median
  if once > 300 then return once end
  local reps = math.max(1, math.min(20, math.floor(300 / math.max(once, 1e-3))))
  return cuda.bench(fn, {warmup = 0, reps = reps}).median
end

print(("\n%9s | %10s %14s %9s | %5s %10s %14s %9s | %7s"):format("N", "seed (ms)", "interactions/s", "GFLOP/s",
      "block", "tuned (ms)", "interactions/s", "GFLOP/s", "speedup"))
for _, nb in ipairs(sizes) do
  local pairs_ = nb * nb
  local ts = time(function () step_seed(nb) end)
  local t = pick(nb)
  local tt = time(function () step_tuned(nb, t) end)
  print(("%9d | %10.3f %14.4g %9.1f | %5d %10.3f %14.4g %9.1f | %6.2fx"):format(nb,
        ts, pairs_ / (ts * 1e-3), 20 * pairs_ / (ts * 1e-3) / 1e9,
        t, tt, pairs_ / (tt * 1e-3), 20 * pairs_ / (tt * 1e-3) / 1e9, ts / tt))
end
-- the choice against the alternatives, at the largest N
do
  local line = {}
  for _, t in ipairs(TILES) do
    line[#line + 1] = ("%d: %.3f ms"):format(t, time(function () step_tuned(maxn, t) end))
  end
  print(("Tuned at N = %d with every block size (the choice: %d): %s"):format(maxn, pick(maxn), table.concat(line, ", ")))
end
-- }======================================================

print(all_ok and "Check: both kernels agree with the CPU: SUCCESS" or "Check FAILED")
if not all_ok then os.exit(1) end
