-- bench/matmul.lua: cuda.catalog.matmul fast and tf32 against cuBLAS SGEMM (fp32 and
-- TF32 tensor ops), measured in the same run.   culua bench/matmul.lua [ANCHOR] [REPS]
local cuda = require "cuda"
local anchor = arg[1] or "bench/anchor_cublas"
local REPS = tonumber(arg[2]) or 9

local function tflops(n, ms) return 2 * n ^ 3 / (ms * 1e-3) / 1e12 end
print(("matmul on %s, float32 n x n, median of %d after warm-up"):format(cuda.device().name, REPS))
print(("%-6s %-6s %10s %10s %10s %10s %7s %7s"):format("n", "", "culua ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio", "target"))
local verdict = {}
for _, n in ipairs{4096, 8192} do
  local A = cuda.array("float32", {n, n}):copy_from(cuda.host_array("float32", {n, n}):random(1, -1, 1))
  local B = cuda.array("float32", {n, n}):copy_from(cuda.host_array("float32", {n, n}):random(2, -1, 1))
  local C = cuda.array("float32", {n, n})
  local out = io.popen(("%s %d %d"):format(anchor, n, REPS)):read("a")
  local anchor_ms = {fast = tonumber(out:match("sgemm_ms (%S+)")), tf32 = tonumber(out:match("tf32_ms (%S+)"))}
  if not anchor_ms.fast then error("anchor failed: " .. out) end
  for _, v in ipairs{{"fast", 0.95}, {"tf32", 0.80}} do
    local r = cuda.bench(function () cuda.catalog.matmul(A, B, C, {variant = v[1]}) end, {warmup = 2, reps = REPS})
    local ratio = anchor_ms[v[1]] / r.median
    print(("%-6d %-6s %10.3f %10.2f %10.3f %10.2f %6.2fx %6.2fx"):format(n, v[1], r.median, tflops(n, r.median),
          anchor_ms[v[1]], tflops(n, anchor_ms[v[1]]), ratio, v[2]))
    verdict[#verdict + 1] = ("%s n=%d %s"):format(v[1], n, ratio >= v[2] and "met" or "NOT met")
  end
  A, B, C = nil
  collectgarbage()
end
print("targets: " .. table.concat(verdict, "; "))
