-- bench/matmul_lowp.lua: cuda.catalog.matmul in float16 and bfloat16 (float32 sums, C in
-- A's dtype) against cuBLAS cublasGemmEx, and fp8 e4m3 (bfloat16 C, scales) against
-- cuBLASLt, n x n x n at n = 4096 and 8192, measured in the same run (issue 37's targets:
-- 0.90x cuBLAS for float16 and bfloat16, 0.85x cuBLASLt for fp8).
--   culua bench/matmul_lowp.lua [ANCHOR] [REPS]
-- ANCHOR: bench/anchor_cublaslt by default (bench/run.sh builds it:
--   nvcc -O2 -o bench/anchor_cublaslt bench/anchor_cublaslt.cu -lcublasLt -lcublas)
local cuda = require "cuda"
require("culua.bench").need_devices(1)
local anchor = arg[1] or "bench/anchor_cublaslt"
local REPS = tonumber(arg[2]) or 9

local dev = cuda.device()
local fp8 = dev.major * 10 + dev.minor >= 89
local function tflops(n, ms) return 2 * n ^ 3 / (ms * 1e-3) / 1e12 end
local cases = {
  {"float16", "float16", "float16", "f16_ms", 0.90},
  {"bfloat16", "bfloat16", "bfloat16", "bf16_ms", 0.90},
  fp8 and {"float8_e4m3", "float8_e4m3", "bfloat16", "e4m3_ms", 0.85} or nil,
}
print(("low-precision matmul on %s, n x n x n, median of %d after warm-up"):format(dev.name, REPS))
print(("%-6s %-24s %10s %10s %10s %10s %7s %7s"):format("n", "A, B -> C", "culua ms", "TFLOP/s", "anchor ms", "TFLOP/s", "ratio", "target"))
local verdict = {}
for _, n in ipairs{4096, 8192} do
  local out = io.popen(("%s %d %d"):format(anchor, n, REPS)):read("a")
  if not out:match("f16_ms") then error("anchor failed: " .. out) end
  for _, c in ipairs(cases) do
    local da, db, dc = c[1], c[2], c[3]
    local A = cuda.array(da, {n, n}):copy_from(cuda.host_array(da, {n, n}):random(1, -1, 1))
    local B = cuda.array(db, {n, n}):copy_from(cuda.host_array(db, {n, n}):random(2, -1, 1))
    local C = cuda.array(dc, {n, n})
    local opts = da:find("float8") and {scale_a = 1, scale_b = 1} or nil
    local r = cuda.bench(function () cuda.catalog.matmul(A, B, C, opts) end, {warmup = 2, reps = REPS})
    local anchor_ms = tonumber(out:match(c[4] .. " (%S+)"))
    if not anchor_ms then error("anchor gave no " .. c[4] .. ": " .. out) end
    local ratio = anchor_ms / r.median
    print(("%-6d %-24s %10.3f %10.1f %10.3f %10.1f %6.2fx %6.2fx"):format(n, ("%s, %s -> %s"):format(da, db, dc), r.median,
          tflops(n, r.median), anchor_ms, tflops(n, anchor_ms), ratio, c[5]))
    verdict[#verdict + 1] = ("%s n=%d %s"):format(da, n, ratio >= c[5] and "met" or "NOT met")
    A, B, C = nil
    collectgarbage()
  end
end
if not fp8 then print(("fp8: %s has compute capability %d.%d (fp8 needs 8.9)"):format(dev.name, dev.major, dev.minor)) end
print("targets: " .. table.concat(verdict, "; "))
