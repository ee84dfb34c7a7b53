-- bench/streamk.lua: matmul fast and tf32 as the catalog runs them (stream-K by size), with
-- stream-K off, and tf32 with it forced on, beside cuBLAS in the same run; at n <= 3072 also
-- split-K in 3 (what the catalog took at 1536 and 3072 before stream-K). TFLOP/s, median of 9.
--   culua bench/streamk.lua [ANCHOR] [SIZES] [ROUNDS]
io.stdout:setvbuf("line")
local cuda = require "cuda"
require("culua.bench").need_devices()
local anchor = arg[1] or "bench/anchor_cublas"
local sizes = {}
for w in (arg[2] or "1536,2048,2560,3072,4096,6144,8192"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(w) end
local rounds = tonumber(arg[3]) or 3
print(("stream-K on %s, float32 n x n, TFLOP/s, median of 9 after warm-up"):format(cuda.device().name))
print("            ------------- fast -------------   ------------------- tf32 ------------------   -- 3 splits --")
print(("%-5s %-4s %7s %7s %7s %6s   %7s %7s %7s %7s %6s   %6s %7s"):format("n", "run", "catalog", "no SK", "cuBLAS", "ratio",
      "catalog", "no SK", "SK", "cuBLAS", "ratio", "fast", "tf32"))
for _, n in ipairs(sizes) do
  local A = cuda.array("float32", {n, n}):copy_from(cuda.host_array("float32", {n, n}):random(1, -1, 1))
  local B = cuda.array("float32", {n, n}):copy_from(cuda.host_array("float32", {n, n}):random(2, -1, 1))
  local C = cuda.array("float32", {n, n})
  local function tf(ms) return 2 * n ^ 3 / (ms * 1e-3) / 1e12 end
  local function t(o) return tf(cuda.bench(function () cuda.catalog.matmul(A, B, C, o) end, {warmup = 2, reps = 9}).median) end
  for r = 1, rounds do
    local out = io.popen(("%s %d 9"):format(anchor, n)):read("a")
    local cb, ct = tf(tonumber(out:match("sgemm_ms (%S+)"))), tf(tonumber(out:match("tf32_ms (%S+)")))
    local f, f0 = t{variant = "fast"}, t{variant = "fast", streamk = false}
    local g, g0, g1 = t{variant = "tf32"}, t{variant = "tf32", streamk = false}, t{variant = "tf32", streamk = true}
    local s3, t3 = "", ""
    if n <= 3072 then s3, t3 = ("%6.1f"):format(t{variant = "fast", splits = 3}), ("%7.1f"):format(t{variant = "tf32", splits = 3}) end
    print(("%-5d %-4d %7.1f %7.1f %7.1f %5.3fx   %7.1f %7.1f %7.1f %7.1f %5.3fx   %6s %7s"):format(n, r, f, f0, cb, f / cb,
          g, g0, g1, ct, g / ct, s3, t3))
  end
  A, B, C = nil
  collectgarbage()
end
