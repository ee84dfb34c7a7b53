-- bench/matmul.lua: cuda.catalog.matmul fast and tf32 against cuBLAS SGEMM (fp32 and
-- TF32 tensor ops), and float64 (dmma, fast) against DGEMM: squares, and LU's trailing
-- update (C -= A*B, k = 128 and 256), measured in the same run; float64 prints dmma's
-- tiles and its knobs (matmul.tune: dmma_group, dmma_tma) beside the default.
--   culua bench/matmul.lua [ANCHOR] [REPS] [float64 [SHAPES [ROWS]] | float32 [ROUNDS]]   (that half alone)
-- float32: the anchor's process and ours take turns, ROUNDS times (3 by default; culua.bench's
-- in_turn), each figure the median over the rounds of each round's median of REPS
-- SHAPES: all (the default), lu (LU's four update shapes, k = 128 and 256) or square (4096^3,
-- 8192^3); ROWS: all (the default) or lu (the default, the TMA kernel and the rows for LU's
-- shapes: C read in batches, k-tiles of 32, C by bulk copies)
local cuda = require "cuda"
local bench = require "culua.bench"
bench.need_devices()
local anchor = arg[1] or "bench/anchor_cublas"
local REPS = tonumber(arg[2]) or 9
local only64, only32 = arg[3] == "float64", arg[3] == "float32"
local which_shapes, which_rows = arg[4] or "all", arg[5] or "all"
local ROUNDS = math.tointeger(tonumber(only32 and arg[4] or 3))
if not ROUNDS or ROUNDS < 1 then error("ROUNDS must be an integer >= 1, got " .. tostring(arg[4])) end

local function tflops(n, ms) return 2 * n ^ 3 / (ms * 1e-3) / 1e12 end
local verdict = {}
if not only64 then
  print(("matmul on %s, float32 n x n, median of %d after warm-up, %d round%s"):format(
        cuda.device().name, REPS, ROUNDS, ROUNDS == 1 and "" or "s of cuBLAS and culua in turn"))
  print(("%-6s %-14s %10s %10s %10s %10s %7s %7s"):format("n", "", "culua ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio", "target"))
  -- (issue 40's targets; tf32 also with C written from registers, tune.tma_store = false)
  local kinds = {{"fast", 0.95}, {"tf32", 1.0}, {"tf32", 1.0, {tma_store = false}, "tf32 direct C"}}
  local tune = require("culua.catalog.matmul").tune
  for _, n in ipairs{4096, 8192} do
    local A = cuda.array("float32", {n, n}):copy_from(cuda.host_array("float32", {n, n}):random(1, -1, 1))
    local B = cuda.array("float32", {n, n}):copy_from(cuda.host_array("float32", {n, n}):random(2, -1, 1))
    local C = cuda.array("float32", {n, n})
    local anchor_ms, ours = {fast = {}, tf32 = {}}, {}
    bench.in_turn(ROUNDS, function ()
      local out = io.popen(("%s %d %d"):format(anchor, n, REPS)):read("a")
      local fast, tf32 = tonumber(out:match("sgemm_ms (%S+)")), tonumber(out:match("tf32_ms (%S+)"))
      if not (fast and tf32) then error("anchor failed: " .. out) end
      table.insert(anchor_ms.fast, fast)
      table.insert(anchor_ms.tf32, tf32)
    end, function ()
      for i, v in ipairs(kinds) do
        for key, val in pairs(v[3] or {}) do tune[key] = val end
        local r = cuda.bench(function () cuda.catalog.matmul(A, B, C, {variant = v[1]}) end, {warmup = 2, reps = REPS})
        for key in pairs(v[3] or {}) do tune[key] = nil end
        ours[i] = ours[i] or {}
        table.insert(ours[i], r.median)
      end
    end)
    for i, v in ipairs(kinds) do
      local ms, ams = bench.median(ours[i]), bench.median(anchor_ms[v[1]])
      local ratio = ams / ms
      local each = {}
      for r = 1, ROUNDS do each[r] = ("%.2fx"):format(anchor_ms[v[1]][r] / ours[i][r]) end
      print(("%-6d %-14s %10.3f %10.2f %10.3f %10.2f %6.2fx %6.2fx  rounds: %s"):format(n, v[4] or v[1], ms, tflops(n, ms),
            ams, tflops(n, ams), ratio, v[2], table.concat(each, " ")))
      if not v[3] then verdict[#verdict + 1] = ("%s n=%d %s"):format(v[1], n, ratio >= v[2] and "met" or "NOT met") end
    end
    A, B, C = nil
    collectgarbage()
  end
end

if only32 then
  print("targets: " .. table.concat(verdict, "; "))
  return
end

-- float64: n x n x n, and the update's n x n x k with C read (beta = 1)
print(("matmul on %s, float64, median of %d after warm-up"):format(cuda.device().name, REPS))
print(("%-18s %-22s %10s %10s %10s %10s %7s  %s"):format("m x n x k", "", "culua ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio",
      "max |C - C by fast| of one call"))
local tune = require("culua.catalog.matmul").tune
-- dmma's rows: the default (on 9.0 the TMA kernel where k >= 1024, session 27's sweep; below,
-- 128x64b in groups of 8 tile rows, session 29's), the tiles by k with no knob (128x64b below
-- k = 1024 and 128x64 above, in no groups),
-- each tile, and the knobs of matmul.tune: tile rows in groups of 8 or 16 (dmma_group), and on
-- compute capability 9.0 the TMA-fed 128 x 128 kernel, persistent (dmma_tma) or a block a
-- tile (dmma_persistent = false), each with stream-K by size (the default) and without
-- (opts.streamk = false: the rows "no stream-K", "no sk"). Then the variants for LU's shapes (C read, k = 128 and 256):
-- the tiles that read C in batches (128x64w8e1, 128x64w8e2, 128x64e2; kernels/matmul.cu's EB),
-- 128x64w8k32 (k-tiles of 32 in 2 stages), the tiles whose tiles inside C go out by bulk
-- copies from shared memory, added to C in L2 (128x64w8b, 128x64b, 128x64w8k32b).
-- Rows marked lu are those of ROWS = lu.
local rows64 = {
  {"dmma", "default", lu = true}, {"dmma", "by k, no knob", {dmma_tma = false, dmma_group = 1}}, {"dmma", "128x128", {dmma_tile = "128x128"}}, {"dmma", "128x64", {dmma_tile = "128x64"}},
  {"dmma", "64x128", {dmma_tile = "64x128"}}, {"dmma", "128x64w8", {dmma_tile = "128x64w8"}},
  {"dmma", "by k group8", {dmma_group = 8}}, {"dmma", "by k group16", {dmma_group = 16}},
  {"dmma", "tma", {dmma_tma = true}, lu = true}, {"dmma", "tma a tile", {dmma_tma = true, dmma_persistent = false}},
  {"dmma", "tma no stream-K", {dmma_tma = true}, opts = {streamk = false}, lu = true},
  {"dmma", "tma a tile no sk", {dmma_tma = true, dmma_persistent = false}, opts = {streamk = false}},
  {"dmma", "w8e1 group8", {dmma_tile = "128x64w8e1", dmma_group = 8}, lu = true},
  {"dmma", "w8e2 group8", {dmma_tile = "128x64w8e2", dmma_group = 8}, lu = true},
  {"dmma", "w8e2 group16", {dmma_tile = "128x64w8e2", dmma_group = 16}, lu = true},
  {"dmma", "w8e2 no group", {dmma_tile = "128x64w8e2"}, lu = true},
  {"dmma", "128x64e2 group8", {dmma_tile = "128x64e2", dmma_group = 8}, lu = true},
  {"dmma", "w8k32 group8", {dmma_tile = "128x64w8k32", dmma_group = 8}, lu = true},
  {"dmma", "w8b group8", {dmma_tile = "128x64w8b", dmma_group = 8}, lu = true},
  {"dmma", "128x64b group8", {dmma_tile = "128x64b", dmma_group = 8}, lu = true},
  {"dmma", "w8k32b group8", {dmma_tile = "128x64w8k32b", dmma_group = 8}, lu = true},
  {"fast", ""},
}
local shapes64 = {{4096, 4096}, {8192, 8192}, {8192, 128}, {8192, 256}, {16384, 128}, {16384, 256}}
if which_shapes == "lu" then shapes64 = {{8192, 128}, {8192, 256}, {16384, 128}, {16384, 256}}
elseif which_shapes == "square" then shapes64 = {{4096, 4096}, {8192, 8192}} end
if which_rows == "lu" then
  local keep = {}
  for _, v in ipairs(rows64) do if v.lu then keep[#keep + 1] = v end end
  rows64 = keep
end
for _, c in ipairs(shapes64) do
  local n, k = c[1], c[2]
  local A = cuda.array("float64", {n, k}):copy_from(cuda.host_array("float64", {n, k}):random(1, -1, 1))
  local B = cuda.array("float64", {k, n}):copy_from(cuda.host_array("float64", {k, n}):random(2, -1, 1))
  local Cm = cuda.array("float64", {n, n}):fill(0.5)
  local square = k == n
  local out = io.popen(("%s %d %d %s"):format(anchor, n, REPS, square and "" or k)):read("a")
  local anchor_ms = tonumber(out:match("dgemm_ms (%S+)"))
  if not anchor_ms then error("anchor failed: " .. out) end
  local flop = 2 * n * n * k
  local opts = square and {} or {alpha = -1, beta = 1}
  local target = square and 0.95 or 0.90
  local best, best_ratio = nil, 0
  -- each row's product checked once against the FFMA kernel's (fast: other code, no tensor
  -- cores), from the same C, on the device: a fast wrong kernel shows as WRONG
  local Cref = cuda.array("float64", {n, n}):fill(0.5)
  cuda.catalog.matmul(A, B, Cref, {variant = "fast", alpha = opts.alpha, beta = opts.beta})
  for _, v in ipairs(rows64) do
    opts.variant = v[1]
    for key, val in pairs(v[3] or {}) do tune[key] = val end
    for key, val in pairs(v.opts or {}) do opts[key] = val end
    cuda.catalog.matmul(A, B, Cm:fill(0.5), opts)
    cuda.map("c = fabs(c - r)", {c = Cm, r = Cref})
    local err = Cm:max()
    Cm:fill(0.5)
    local r = cuda.bench(function () cuda.catalog.matmul(A, B, Cm, opts) end, {warmup = 2, reps = REPS})
    for key in pairs(v[3] or {}) do tune[key] = nil end
    for key in pairs(v.opts or {}) do opts[key] = nil end
    local ratio = anchor_ms / r.median
    print(("%-18s %-22s %10.3f %10.2f %10.3f %10.2f %6.2fx  %.1e%s"):format(("%dx%dx%d"):format(n, n, k),
          v[1] .. " " .. v[2], r.median, flop / r.median / 1e9, anchor_ms, flop / anchor_ms / 1e9, ratio, err,
          (err == err and err <= 1e-8) and "" or "  WRONG"))
    if v[1] == "dmma" and v[2] == "default" then
      verdict[#verdict + 1] = ("dmma %dx%dx%d %.2fx DGEMM (target %.2fx %s)"):format(n, n, k, ratio, target,
                                                                                   ratio >= target and "met" or "NOT met")
    end
    if v[1] == "dmma" and ratio > best_ratio and err == err and err <= 1e-8 then best, best_ratio = v[2], ratio end
  end
  verdict[#verdict + 1] = ("  best dmma row there: %s %.2fx"):format(best, best_ratio)
  A, B, Cm, Cref = nil
  collectgarbage()
end
print("targets:\n" .. table.concat(verdict, "\n"))
