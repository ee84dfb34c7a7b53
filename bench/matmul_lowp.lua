-- bench/matmul_lowp.lua: cuda.catalog.matmul in float16 and bfloat16 (float32 sums, C in
-- A's dtype) against cuBLAS cublasGemmEx, and fp8 e4m3 (bfloat16 C, scales) against
-- cuBLASLt, n x n x n at n = 4096 and 8192, measured in the same run (issue 37's targets:
-- 0.90x cuBLAS for float16 and bfloat16, 0.85x cuBLASLt for fp8).
--   culua bench/matmul_lowp.lua [sweep] [ANCHOR] [REPS] [ROUNDS]
-- ROUNDS (3 by default, 1 with sweep): the anchor's process and our kernels take turns,
-- a round each (the anchor first in odd rounds, last in even ones), and every figure is
-- the median over the rounds of each round's median of REPS. One anchor run and then
-- ours left the GPU warmer for ours: at n = 4096 the ratios of single runs spread over
-- 0.08 (bench/RESULTS.md, session 33).
-- sweep: every kernel of a dtype side by side (float16 and bfloat16 on compute capability
-- 9.0: the wgmma kernels rs and ss of require("culua.catalog.matmul").tune.lowp_sm90, each
-- as by default and a block a tile (tune.lowp_persistent = false), ss persistent too (true),
-- ss writing C from registers (tune.tma_store = false), and mma.sync by tma = false; fp8
-- on 9.0: the wgmma tiles of tune.fp8_tile, the default tile with a block a tile
-- (tune.fp8_persistent = false), not launched as a programmatic dependent
-- (tune.fp8_programmatic = false) and writing C from registers, and mma.sync), each C
-- checked against the first kernel's.
-- fp8 also runs with B given as B^T (transb), the form the anchor takes (cuBLASLt's "TN": it
-- is given B^T): on 9.0 the product reads it as it is, where with a row-major B it transposes
-- B into scratch first, inside the call and inside its time. Both are timed against the same
-- anchor, each with its ratio (sweep: every wgmma tile both ways); fp8 on 9.0 also prints
-- that transpose alone.
-- ANCHOR: bench/anchor_cublaslt by default (bench/run.sh builds it:
--   nvcc -O2 -o bench/anchor_cublaslt bench/anchor_cublaslt.cu -lcublasLt -lcublas)
local cuda = require "cuda"
local bench = require "culua.bench"
bench.need_devices(1)
local median = bench.median
local mmod = require "culua.catalog.matmul"
local sweep = arg[1] == "sweep"
local first = sweep and 2 or 1
local anchor = arg[first] or "bench/anchor_cublaslt"
local REPS = tonumber(arg[first + 1]) or 9
local ROUNDS = math.tointeger(tonumber(arg[first + 2] or (sweep and 1 or 3)))
if not ROUNDS or ROUNDS < 1 then error("ROUNDS must be an integer >= 1, got " .. tostring(arg[first + 2])) end

local dev = cuda.device()
local fp8 = dev.major * 10 + dev.minor >= 89
local sm90 = dev.major == 9 and dev.minor == 0
local function tflops(n, ms) return 2 * n ^ 3 / (ms * 1e-3) / 1e12 end
local cases = {
  {"float16", "float16", "float16", "f16_ms", 0.90},
  {"bfloat16", "bfloat16", "bfloat16", "bf16_ms", 0.90},
  fp8 and {"float8_e4m3", "float8_e4m3", "bfloat16", "e4m3_ms", 0.85} or nil,
}
-- a case's kernels: {name, the tune fields it sets, tma, transb}; the default alone unless
-- sweeping (fp8: and with B^T given)
local function kernels(da)
  local fp8 = da:find("float8") ~= nil
  if not sweep then return fp8 and {{"default", {}}, {"transb", {}, nil, true}} or {{"default", {}}} end
  if sm90 and not fp8 then
    return {{"wgmma rs", {lowp_sm90 = "rs"}}, {"rs 1/tile", {lowp_sm90 = "rs", lowp_persistent = false}},
            {"wgmma ss", {lowp_sm90 = "ss"}}, {"ss persistent", {lowp_sm90 = "ss", lowp_persistent = true}},
            {"ss 1/tile", {lowp_sm90 = "ss", lowp_persistent = false}},
            {"ss direct C", {lowp_sm90 = "ss", tma_store = false}}, {"mma.sync", {}, false}}
  end
  if sm90 then
    local list = {}
    for _, tile in ipairs(mmod._fp8_plans().pairs.e4m3_e4m3.names) do
      list[#list + 1] = {tile, {fp8_tile = tile}}
      list[#list + 1] = {tile .. " transb", {fp8_tile = tile}, nil, true}
    end
    list[#list + 1] = {"n256s4 1/tile", {fp8_persistent = false}}
    list[#list + 1] = {"n256s4 1/tile transb", {fp8_persistent = false}, nil, true}
    list[#list + 1] = {"n256s4 no PDL", {fp8_programmatic = false}}
    list[#list + 1] = {"n256s4 direct C", {tma_store = false}}
    list[#list + 1] = {"n256s4 direct C transb", {tma_store = false}, nil, true}
    list[#list + 1] = {"mma.sync", {}, false}
    list[#list + 1] = {"mma.sync transb", {}, false, true}
    return list
  end
  return {{"mma.sync", {}}, fp8 and {"mma.sync transb", {}, nil, true} or nil}
end
local tune_fields = {"lowp_sm90", "lowp_persistent", "tma_store", "fp8_tile", "fp8_persistent", "fp8_programmatic"}

-- B^T (n x n, B's dtype) by the catalog's transpose (kernels/matmul_transpose.cu), as an fp8
-- product with a row-major B runs it first
local transpose = require("culua.catalog.matmul_lowp").transpose
local function transposed(B, n)
  local Bt = cuda.array(B.dtype, {n, n})
  transpose(dev, 1, B, n, n, n, Bt, n)
  return Bt
end

-- that transpose alone: ms
local function transpose_ms(B, Bt, n)
  local r = cuda.bench(function () transpose(dev, 1, B, n, n, n, Bt, n) end, {warmup = 2, reps = REPS})
  return r.median
end

print(("low-precision matmul on %s, n x n x n, median of %d after warm-up, %d round%s"):format(dev.name, REPS, ROUNDS,
      ROUNDS == 1 and "" or "s of anchor and culua in turn"))
print(("%-6s %-38s %-20s %10s %8s %10s %8s %7s %7s%s"):format("n", "A, B -> C", "kernel", "culua ms", "TFLOP/s", "anchor ms",
      "TFLOP/s", "ratio", "target", sweep and "  rel. diff" or ""))
local verdict, algo = {}, {}
for _, n in ipairs{4096, 8192} do
  -- every case's arrays at once, so that the rounds reuse them
  local data = {}
  for _, c in ipairs(cases) do
    local da, db, dc = c[1], c[2], c[3]
    local A = cuda.array(da, {n, n}):copy_from(cuda.host_array(da, {n, n}):random(1, -1, 1))
    local B = cuda.array(db, {n, n}):copy_from(cuda.host_array(db, {n, n}):random(2, -1, 1))
    data[#data + 1] = {c = c, A = A, B = B, Bt = da:find("float8") and transposed(B, n), C = cuda.array(dc, {n, n}),
                       anchor = {}, ms = {}}
  end
  local function run_anchor()
    local out = io.popen(("%s %d %d"):format(anchor, n, REPS)):read("a")
    if not out:match("f16_ms") then error("anchor failed: " .. out) end
    algo[n] = out:match("e4m3_algo ([^\n]*)")
    for _, d in ipairs(data) do
      local ms = tonumber(out:match(d.c[4] .. " (%S+)"))
      if not ms then error("anchor gave no " .. d.c[4] .. ": " .. out) end
      d.anchor[#d.anchor + 1] = ms
    end
  end
  local function run_ours()
    for _, d in ipairs(data) do
      local da = d.c[1]
      for j, kern in ipairs(kernels(da)) do
        local opts = da:find("float8") and {scale_a = 1, scale_b = 1} or {}
        opts.tma, opts.transb = kern[3], kern[4]
        local Bk = kern[4] and d.Bt or d.B
        for f, v in pairs(kern[2]) do mmod.tune[f] = v end
        local r = cuda.bench(function () cuda.catalog.matmul(d.A, Bk, d.C, opts) end, {warmup = 2, reps = REPS})
        for _, f in ipairs(tune_fields) do mmod.tune[f] = nil end
        d.ms[j] = d.ms[j] or {}
        table.insert(d.ms[j], r.median)
        if sweep then   -- each kernel's C against the first's
          if j == 1 then
            d.C0 = d.C0 or cuda.array(d.c[3], {n, n})
            d.C0:copy_from(d.C)
          else
            local _, _, rel = cuda.compare(d.C, d.C0)
            d.rel = d.rel or {}
            if not (d.rel[j] and d.rel[j] >= rel) then d.rel[j] = rel end   -- (a NaN stays: math.max drops it)
          end
        end
      end
    end
  end
  bench.in_turn(ROUNDS, run_anchor, run_ours)
  for _, d in ipairs(data) do
    local da, db, dc = d.c[1], d.c[2], d.c[3]
    local anchor_ms = median(d.anchor)
    for j, kern in ipairs(kernels(da)) do
      local ms = median(d.ms[j])
      local diff = ""
      if sweep then
        local rel = d.rel and d.rel[j]
        diff = rel and ("  %.1e%s"):format(rel, not (rel <= 1e-2) and " WRONG" or "") or "  (reference)"
      end
      local ratio = anchor_ms / ms
      print(("%-6d %-38s %-20s %10.3f %8.1f %10.3f %8.1f %6.2fx %6.2fx%s"):format(n, ("%s, %s -> %s"):format(da, db, dc), kern[1],
            ms, tflops(n, ms), anchor_ms, tflops(n, anchor_ms), ratio, d.c[5], diff))
      if ROUNDS > 1 then
        local each = {}
        for r = 1, ROUNDS do each[r] = ("%.2fx"):format(d.anchor[r] / d.ms[j][r]) end
        print(("%-6s %-38s %-20s rounds: %s"):format("", "", "", table.concat(each, " ")))
      end
      verdict[#verdict + 1] = ("%s%s n=%d %s"):format(da, (sweep or kern[4]) and " " .. kern[1] or "", n,
                                                   ratio >= d.c[5] and "met" or "NOT met")
    end
    if sm90 and da:find("float8") then
      local ms = transpose_ms(d.B, d.Bt, n)
      print(("%-6d %-38s %-20s %10.3f ms, %.0f GB/s (inside each fp8 time above with a row-major B, not with transb)"):format(
            n, "B^T alone (" .. db .. ")", "transpose", ms, 2 * n * n / (ms * 1e-3) / 1e9))
    end
  end
  data = nil
  collectgarbage()
end
for _, n in ipairs{4096, 8192} do
  if algo[n] then print(("cuBLASLt fp8 algorithm, n = %d: %s"):format(n, algo[n])) end
end
if not fp8 then print(("fp8: %s has compute capability %d.%d (fp8 needs 8.9)"):format(dev.name, dev.major, dev.minor)) end
print("targets: " .. table.concat(verdict, "; "))
