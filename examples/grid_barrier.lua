-- grid_barrier.lua: seed 001, synchronizing all the threads of a grid.
--
-- Part 1: one X -> P -> X transform with no barrier, with __syncthreads only,
-- and with each grid barrier; the wrong elements come in groups of whole warps.
-- Part 2: 100 transforms, 10 times, as one launch with barriers inside (SKL)
-- against two launches per transform (MKL), over the seed's grid of blocks x
-- threads and its 1024-thread diagonal, as the seed's table of % gain of SKL.
-- Part 1 uses the seed's phase, which reads X from global memory; part 2 by
-- default the same sums with X staged in shared memory (see kernels/barrier.cu).
--
--   ./culua examples/grid_barrier.lua [kind [csv [phase]]]
--     kind: seed (default: the seed's own barrier), seed_asm, sense, grid, coop;
--     phase: shared (default), global

local cuda = require "cuda"
require("culua.bench").need_devices()
local bar = cuda.catalog.barrier
local best = arg and arg[1] or "seed"
local phase_kind = arg and arg[3] or "shared"
local dev = cuda.device()
print(("%s, %d multiprocessors"):format(dev.name, dev:attribute("multiprocessor_count")))

-- float32 on the CPU: each double result rounded once to float32
local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end
local function phase(src, n)
  local a = src[1]
  for k = 2, n do a = f32(a + src[k]) end
  local v, dst = f32(a / n), {}
  for j = 1, n do dst[j] = v end
  return dst
end

-- {====================================================== part 1
print("\nPart 1: one X -> P -> X transform, 4 blocks x 64 threads (the seed used 2 x 64), the seed's phase")
local blocks, threads = 4, 64
local n = blocks * threads
local h = cuda.host_array("float32", n):random(2024, -1, 1)
local want = phase(phase(h:totable(), n), n)
local X, P = cuda.array("float32", n), cuda.array("float32", n)
local runs = 200
print(("%-10s %s"):format("barrier", ("wrong elements over %d runs; first indices of wrong 32-element groups"):format(runs)))
for _, kind in ipairs{"none", "block", "seed", "seed_asm", "sense", "grid", "coop"} do
  local total, groups, aligned = 0, {}, true
  for _ = 1, runs do
    X:copy_from(h)
    P:fill(0)
    bar.xpx(kind, X, P, {blocks = blocks, threads = threads, phase = "global"})
    local got = X:totable()
    for j = 1, n do
      if got[j] ~= want[j] then
        total = total + 1
        local g = (j - 1) // 32 * 32
        groups[g] = (groups[g] or 0) + 1
      end
    end
  end
  local firsts = {}
  for g, c in pairs(groups) do
    firsts[#firsts + 1] = g
    aligned = aligned and c % 32 == 0
  end
  table.sort(firsts)
  print(("%-10s %6d %s"):format(kind, total,
        total == 0 and "correct every time" or
        (table.concat(firsts, " ") .. (aligned and "  (whole warps, as the seed found)" or "  (not always whole warps)"))))
end

-- blocks in two waves (twice what can be resident): later blocks write P
-- after earlier ones have read it; only the kinds without a grid barrier can
-- run so (a grid barrier would wait forever, and culua refuses the launch)
do
  local threads1 = 1024
  local probe = cuda.catalog.kernel("barrier", "culua_xpx_grid_global")
  local waves = 2 * bar.max_grid(probe, threads1)
  local nn = waves * threads1
  local hh = cuda.host_array("float32", nn):random(7, -1, 1)
  local Xw, Pw = cuda.array("float32", nn), cuda.array("float32", nn)
  -- every correct element equals the one value a correct transform gives
  local ok_run = cuda.array("float32", nn)
  local Pr = cuda.array("float32", nn)
  ok_run:copy_from(hh)
  bar.mkl(ok_run, Pr, {blocks = waves, threads = threads1})
  local want1 = ok_run:view(1, 1):totable()[1]
  print(("\n%d blocks x %d threads (two waves; %d elements):"):format(waves, threads1, nn))
  for _, kind in ipairs{"none", "block"} do
    Xw:copy_from(hh)
    Pw:fill(0)
    bar.xpx(kind, Xw, Pw, {blocks = waves, threads = threads1, phase = "global"})
    local got, wrong, groups, aligned = Xw:totable(), 0, {}, true
    for j = 1, nn do
      if got[j] ~= want1 then
        wrong = wrong + 1
        local g = (j - 1) // 32 * 32
        groups[g] = (groups[g] or 0) + 1
      end
    end
    local count = 0
    for _, c in pairs(groups) do count = count + 1; aligned = aligned and c == 32 end
    print(("%-10s %7d wrong, in %d groups of 32 consecutive elements%s"):format(kind, wrong, count,
          wrong == 0 and "" or (aligned and " (every group a whole warp, as the seed found)" or " (not all whole warps)")))
  end
end
-- }======================================================


-- {====================================================== part 2
print(("\nPart 2: 100 transforms x 10 repeats, SKL (one launch, %s barrier) vs MKL (200 launches of the same kernel), %s phase")
      :format(best, phase_kind))
local transforms, reps = 100, 10

local function time(fn)
  return cuda.bench(fn, {warmup = 1, reps = reps}).median
end

local function compare(b, t)
  local nn = b * t
  local x0 = cuda.host_array("float32", nn):random(b + t, -1, 1)
  local Xs, Ps = cuda.array("float32", nn), cuda.array("float32", nn)
  local Xm, Pm = cuda.array("float32", nn), cuda.array("float32", nn)
  local state = bar.state()
  local function run_skl() bar.xpx(best, Xs, Ps, {blocks = b, threads = t, transforms = transforms, state = state, phase = phase_kind}) end
  local function run_mkl() bar.mkl(Xm, Pm, {blocks = b, threads = t, transforms = transforms, phase = phase_kind, kind = best}) end
  Xs:copy_from(x0); run_skl()
  Xm:copy_from(x0); run_mkl()
  local same = Xs:bytes() == Xm:bytes()    -- the same transforms, bit for bit
  local skl, mkl = time(run_skl), time(run_mkl)
  return skl, mkl, (mkl - skl) / mkl * 100, same
end

local block_counts, thread_counts = {1, 2, 4, 8, 16, 32}, {32, 64, 128, 256, 512}
local rows, wins, all_same, cells = {}, 0, true, 0
io.write(("%-8s"):format("blocks"))
for _, t in ipairs(thread_counts) do io.write(("%9s"):format(t .. " thr")) end
io.write("\n")
for _, b in ipairs(block_counts) do
  io.write(("%-8d"):format(b))
  for _, t in ipairs(thread_counts) do
    local skl, mkl, gain, same = compare(b, t)
    rows[#rows + 1] = {b, t, skl, mkl, gain}
    io.write(("%8.1f%%"):format(gain))
    cells = cells + 1
    if gain > 0 then wins = wins + 1 end
    all_same = all_same and same
  end
  io.write("\n")
end
print("(% gain of SKL over MKL: (t_MKL - t_SKL) / t_MKL)")

print("\nThe 1024-thread diagonal (seed's Fig. 6): time for 100 x 10 transforms")
print(("%-14s %10s %10s %8s"):format("blocks x thr", "SKL ms", "MKL ms", "gain"))
for _, b in ipairs(block_counts) do
  local t = 1024 // b
  local skl, mkl, gain, same = compare(b, t)
  rows[#rows + 1] = {b, t, skl, mkl, gain}
  cells = cells + 1
  if gain > 0 then wins = wins + 1 end
  all_same = all_same and same
  print(("%4d x %-7d %10.3f %10.3f %7.1f%%"):format(b, t, skl * reps, mkl * reps, gain))
end

local csv = (arg and arg[2]) or "grid_barrier.csv"
require("culua.plot").csv(csv, {"blocks", "threads", "skl_ms", "mkl_ms", "gain_percent"}, rows)
print(("\nSKL beat MKL in %d of %d configurations; SKL and MKL results identical: %s; table in %s")
      :format(wins, cells, tostring(all_same), csv))
-- }======================================================
