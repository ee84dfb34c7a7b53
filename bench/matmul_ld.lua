-- bench/matmul_ld.lua: cuda.catalog.matmul on blocks of one matrix (lda, ldb, ldc) against
-- the same product on packed arrays, to see whether leading dimensions keep the speed.
--   culua bench/matmul_ld.lua [N [KS [REPS]]]
-- LU's trailing update at its first step: in an N x N matrix (default 8192), C -= A*B
-- with A the (N-k) x k block below the panel, B the k x (N-k) block right of it and C the
-- (N-k) x (N-k) trailing block, k in KS (default "64,128"), float32 and float64 (the
-- default variants, the ones lu uses: fast, dmma), views of the matrix at the blocks' first elements. "packed": the
-- same sizes in arrays of their own. "off 16 B": the blocks one row and column further
-- (N-k-1 square), so that their rows start off 16 bytes: no TMA on an H100 (float32).
-- "tma on" / "tma off": the blocks with tma = true (the TMA kernel at any k) and false
-- (matmul.cu's kernels on an H100 too); "blocks" is the default, TMA from k = 512.
-- Events, warm-up, median (cuda.bench); TFLOP/s = 2 m n k / t.
local cuda = require "cuda"
require("culua.bench").need_devices()
local N = math.tointeger(tonumber(arg[1] or 8192))
local KS = {}
for k in (arg[2] or "64,128"):gmatch("%d+") do KS[#KS + 1] = math.tointeger(tonumber(k)) end
local REPS = math.tointeger(tonumber(arg[3] or 9))
local mm = cuda.catalog.matmul
local dev = cuda.device()

print(("matmul with leading dimensions on %s (cc %d.%d), C -= A*B, median of %d after warm-up"):format(
      dev.name, dev.major, dev.minor, REPS))
print(("%-8s %-5s %-10s %6s %6s %6s %10s %9s %8s"):format("dtype", "k", "layout", "m", "n", "ld", "ms", "TFLOP/s", "vs packed"))

local function tflops(m, n, k, ms) return 2 * m * n * k / (ms * 1e-3) / 1e12 end

local function row(dt, k, layout, m, n, ld, ms, packed_ms)
  print(("%-8s %-5d %-10s %6d %6d %6s %10.3f %9.2f %8s"):format(dt, k, layout, m, n, ld or "-", ms, tflops(m, n, k, ms),
        packed_ms and ("%.2fx"):format(packed_ms / ms) or ""))
end

for _, dt in ipairs{"float32", "float64"} do
  local P = cuda.array(dt, {N, N}):copy_from(cuda.host_array(dt, {N, N}):random(1, -1, 1))
  for _, k in ipairs(KS) do
    local m = N - k
    -- packed: the same sizes in arrays of their own
    local A = cuda.array(dt, {m, k}):copy_from(cuda.host_array(dt, {m, k}):random(2, -1, 1))
    local B = cuda.array(dt, {k, m}):copy_from(cuda.host_array(dt, {k, m}):random(3, -1, 1))
    local C = cuda.array(dt, {m, m}):fill(0)
    local packed = cuda.bench(function () mm(A, B, C, {alpha = -1, beta = 1}) end,
                              {warmup = 2, reps = REPS}).median
    row(dt, k, "packed", m, m, nil, packed)
    A, B, C = nil
    collectgarbage()
    -- blocks of P with their corners at (r, c), 0-based
    local function blocks(off, layout, tma)
      local mb = m - off
      local Av = P:view((k + off) * N + off + 1, (mb - 1) * N + k)          -- (k + off, off)
      local Bv = P:view(off * N + k + off + 1, (k - 1) * N + mb)            -- (off, k + off)
      local Cv = P:view((k + off) * N + k + off + 1, (mb - 1) * N + mb)     -- (k + off, k + off)
      local opts = {m = mb, n = mb, k = k, lda = N, ldb = N, ldc = N, alpha = -1, beta = 1, tma = tma}
      local ms = cuda.bench(function () mm(Av, Bv, Cv, opts) end, {warmup = 2, reps = REPS}).median
      row(dt, k, layout, mb, mb, N, ms, packed * (mb / m) ^ 2)   -- packed's time scaled to the size
      -- P's values grow by the repeated updates; refill so the next run starts the same
      P:copy_from(cuda.host_array(dt, {N, N}):random(1, -1, 1))
    end
    blocks(0, "blocks")
    if dt == "float32" then blocks(0, "tma on", true); blocks(0, "tma off", false) end
    blocks(1, "off 16 B")
  end
  P = nil
  collectgarbage()
end
print("vs packed: the packed product's time over this one's (for 'off 16 B', scaled to its size); 1.00x keeps the speed")
