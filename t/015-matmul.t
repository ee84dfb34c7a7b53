-- cuda.catalog.matmul against a float64 CPU reference: every variant and unroll factor,
-- sizes that are not multiples of any tile, float32 and float64, alpha and beta.
local T = require "culua.tap"
local cuda = require "cuda"
local dev = T.need_gpu()
local mm, ref = cuda.catalog.matmul, cuda.catalog.reference.matmul

-- random A, B on the host and the device; C poisoned with NaN
local function problem(dtype, m, n, k, seed)
  local hA = cuda.host_array(dtype, {m, k}):random(seed, -1, 1)
  local hB = cuda.host_array(dtype, {k, n}):random(seed + 1, -1, 1)
  local A, B = cuda.array(dtype, {m, k}):copy_from(hA), cuda.array(dtype, {k, n}):copy_from(hB)
  local Cd = cuda.array(dtype, {m, n}):fill(0 / 0)
  local R = cuda.host_array("float64", {m, n})
  ref(hA, hB, R)
  return A, B, Cd, R
end

local function check(Cd, R, tol, what)
  local _, _, rel = cuda.compare(Cd, R)
  return T.ok(rel <= tol, ("%s: relative error %.2e (<= %.0e)"):format(what, rel, tol))
end

-- float32 A, B and C (seeds seed, seed + 1, seed + 2) on the device, C on the host too,
-- and the float64 reference of alpha*A*B + beta*C
local function problem_c(m, n, k, seed, alpha, beta)
  local hA = cuda.host_array("float32", {m, k}):random(seed, -1, 1)
  local hB = cuda.host_array("float32", {k, n}):random(seed + 1, -1, 1)
  local hC = cuda.host_array("float32", {m, n}):random(seed + 2, -1, 1)
  local A, B = cuda.array("float32", {m, k}):copy_from(hA), cuda.array("float32", {k, n}):copy_from(hB)
  local R = cuda.host_array("float64", {m, n}):copy_from(cuda.host_array("float64", {m, n}):copy_from(hC:totable()))
  ref(hA, hB, R, alpha, beta)
  return A, B, hC, R, hA, hB
end

-- under compute-sanitizer (T.sanitizer) every variant runs at the smaller sizes only:
-- 1000^3 in each of them takes minutes there, and the smaller ones take every path
local sizes = {{1, 1, 1}, {17, 33, 65}, {64, 64, 64}, {130, 67, 129}, not T.sanitizer and {1000, 1000, 1000} or nil}
local f32 = 1e-5
for _, s in ipairs(sizes) do
  local m, n, k = s[1], s[2], s[3]
  local A, B, Cd, R = problem("float32", m, n, k, m + n + k)
  local tag = ("%dx%dx%d"):format(m, k, n)
  for _, u in ipairs{1, 2, 4, 8} do
    check(mm(A, B, Cd:fill(0 / 0), {variant = "naive", unroll = u}), R, f32, tag .. " naive unroll " .. u)
    check(mm(A, B, Cd:fill(0 / 0), {variant = "row", unroll = u}), R, f32, tag .. " row unroll " .. u)
    check(mm(A, B, Cd:fill(0 / 0), {variant = "column", unroll = u}), R, f32, tag .. " column unroll " .. u)
    for _, tile in ipairs{8, 16, 32} do
      check(mm(A, B, Cd:fill(0 / 0), {variant = "tiled", tile = tile, unroll = u}), R, f32, ("%s tiled %d unroll %d"):format(tag, tile, u))
    end
  end
  check(mm(A, B, Cd:fill(0 / 0)), R, f32, tag .. " fast (the default)")
  check(mm(A, B, Cd:fill(0 / 0), {variant = "tf32"}), R, 5e-3, tag .. " tf32")
  check(mm(A, B, Cd:fill(0 / 0), {variant = "naive", block = 8}), R, f32, tag .. " naive, 8x8 blocks")
  check(mm(A, B, Cd:fill(0 / 0), {variant = "row", threads = 64}), R, f32, tag .. " row, 64 threads")
  check(mm(A, B, Cd:fill(0 / 0), {variant = "column", threads = 1024}), R, f32, tag .. " column, 1024 threads")
end

-- the scalar paths of fast and tf32 (rows not whole float4s) and aligned ones
for _, s in ipairs{{128, 128, 128}, {257, 255, 131}, {4096 // 8, 4096 // 8, 4096 // 8}} do
  local A, B, Cd, R = problem("float32", s[1], s[2], s[3], 7)
  check(mm(A, B, Cd:fill(0 / 0), {variant = "fast"}), R, f32, ("fast %dx%dx%d"):format(s[1], s[3], s[2]))
  check(mm(A, B, Cd:fill(0 / 0), {variant = "tf32"}), R, 5e-3, ("tf32 %dx%dx%d"):format(s[1], s[3], s[2]))
end

-- fast and tf32 on compute capability 9.0 take the TMA-fed kernels when TMA can
-- address the operands: partial tiles in every dimension, K over several turns
-- of the ring (4 stages of 32 in tf32, 8 of 16 in fast), beta; tma = false keeps
-- the other kernels
local hopper = (dev.major == 9 and dev.minor == 0) and " (TMA)" or ""
for _, s in ipairs{{4, 4, 4}, {1001, 1000, 1004}, {257, 132, 36}, {300, 516, 2052}, {129, 260, 100}} do
  local m, n, k = s[1], s[2], s[3]
  local A, B, Cd, R = problem("float32", m, n, k, 11)
  local tag = ("%dx%dx%d"):format(m, k, n)
  check(mm(A, B, Cd:fill(0 / 0), {variant = "tf32"}), R, 5e-3, "tf32 " .. tag .. hopper)
  check(mm(A, B, Cd:fill(0 / 0), {variant = "tf32", tma = false}), R, 5e-3, "tf32 " .. tag .. " (mma.sync)")
  check(mm(A, B, Cd:fill(0 / 0), {variant = "fast"}), R, f32, "fast " .. tag .. hopper)
  check(mm(A, B, Cd:fill(0 / 0), {variant = "fast", tma = false}), R, f32, "fast " .. tag .. " (registers)")
end
do
  local m, n = 260, 136
  local A, B, hC, R = problem_c(m, n, 68, 5, -1.5, 0.25)
  local Cd = cuda.array("float32", {m, n}):copy_from(hC)
  check(mm(A, B, Cd, {variant = "tf32", alpha = -1.5, beta = 0.25}), R, 5e-3, "tf32 260x68x136: alpha -1.5, beta 0.25")
  Cd:copy_from(hC)
  check(mm(A, B, Cd, {variant = "fast", alpha = -1.5, beta = 0.25}), R, f32, "fast 260x68x136: alpha -1.5, beta 0.25")
end

-- tf32 on 9.0 writes its tiles through shared memory and TMA stores where C's first element,
-- ldc and rows are whole 16 bytes and there is no split-K (split-K's partials, and tune.tma_store
-- = false, go from registers): partial tiles, stream-K's last contributor, beta; C past n in
-- each row (ldc > n) and before the view (the last: from its fifth element) checked untouched
do
  local mmod = require "culua.catalog.matmul"
  for _, s in ipairs{{1001, 1004, 1000, 1008, 1}, {257, 36, 132, 40, 1}, {300, 2052, 516, 2060, 1}, {520, 1028, 700, 1032, 5}} do
    local m, n, k, ldc, first = s[1], s[2], s[3], s[4], s[5]
    local A, B, hC, R = problem_c(m, n, k, 21, 0.5, -2)
    local big = cuda.host_array("float32", first - 1 + m * ldc):fill(7)
    for i = 0, m - 1 do for j = 1, n do big[first - 1 + i * ldc + j] = hC[i * n + j] end end
    for _, o in ipairs{{splits = 1}, {streamk = 3}, {splits = 1, tma_store = false}} do
      local Cd = cuda.array("float32", #big):copy_from(big)
      mmod.tune.tma_store = o.tma_store
      mm(A, B, Cd:view(first, (m - 1) * ldc + n), {variant = "tf32", m = m, n = n, k = k, ldc = ldc, alpha = 0.5, beta = -2,
                                                   splits = o.splits, streamk = o.streamk})
      mmod.tune.tma_store = nil
      local out, pad = T.block_of(Cd:totable(), first - 1, m, n, ldc, 7)
      local what = ("tf32 %dx%dx%d ldc %d from element %d, alpha 0.5 beta -2%s%s"):format(m, k, n, ldc, first,
                   o.streamk and ", stream-K 3" or "", o.tma_store == false and ", tma_store = false" or "")
      check(out, R, 5e-3, what)
      T.ok(pad, "  and C past each row and before the view untouched")
    end
  end
end

-- split-K on the TMA kernels: blocks share a tile's k-tiles and a second kernel adds
-- their partial sums; chosen by size (on an H100 the sizes above take it too:
-- 1001x1004x1000 in 4 splits, 300x2052x516 in 13 or 14) or given, including more
-- splits than k-tiles
for _, s in ipairs{{128, 256, 4096}, {257, 300, 1000}, {64, 64, 96}} do
  local m, n, k = s[1], s[2], s[3]
  local A, B, Cd, R = problem("float32", m, n, k, 13)
  local tag = ("%dx%dx%d"):format(m, k, n)
  for _, splits in ipairs{1, 3, 7, 64} do
    check(mm(A, B, Cd:fill(0 / 0), {variant = "fast", splits = splits}), R, f32, ("fast %s in %d splits"):format(tag, splits))
    check(mm(A, B, Cd:fill(0 / 0), {variant = "tf32", splits = splits}), R, 5e-3, ("tf32 %s in %d splits"):format(tag, splits))
  end
  check(mm(A, B, Cd:fill(0 / 0), {variant = "fast"}), R, f32, ("fast %s, splits by size"):format(tag))
end
do   -- the partial sums meet alpha and beta only in the second kernel
  local m, n = 96, 200
  local A, B, hC, R, hA, hB = problem_c(m, n, 3000, 21, 0.5, -2)
  for _, v in ipairs{"fast", "tf32"} do
    local Cd = cuda.array("float32", {m, n}):copy_from(hC)
    check(mm(A, B, Cd, {variant = v, alpha = 0.5, beta = -2, splits = 5}), R, v == "tf32" and 5e-3 or f32,
          v .. " 96x3000x200 in 5 splits: alpha 0.5, beta -2")
  end
  -- on two streams at once: each stream has its own workspace, not the default stream's
  -- (which the first call leaves big enough for both)
  local s1, s2 = cuda.stream(), cuda.stream()
  local R0 = cuda.host_array("float64", {m, n})
  ref(hA, hB, R0)
  local C0 = mm(A, B, cuda.array("float32", {m, n}), {splits = 12})
  local C1, C2 = cuda.array("float32", {m, n}):fill(0 / 0), cuda.array("float32", {m, n}):fill(0 / 0)
  mm(A, B, C1, {stream = s1, splits = 6})
  mm(A, B, C2, {stream = s2, splits = 6})
  s1:synchronize(); s2:synchronize()
  check(C1, R0, f32, "split-K on stream 1 beside stream 2")
  check(C2, R0, f32, "split-K on stream 2 beside stream 1")
  check(C0, R0, f32, "split-K on the default stream before them")
end

-- stream-K on the TMA kernels: the last blocks share the last tiles' k-tiles end to end and
-- the last of a tile's contributors adds the partial sums. Block counts given, so that small
-- products take it on any machine: 1000x1000 is 32 tiles in both kernels; 5 blocks share 7
-- tiles (7/5 tiles each), 7 share 4 (4/7 each: tiles with three contributors), 31 share all
-- 32 (most tiles with two), 40 share all 32 (less than a wave); k from 1 k-tile to many
-- turns of the ring; then by size (on an H100, 2100x2100 is 153 tiles of either kernel: more
-- than a wave of 132, all shared; 1536x1536 is 72 tiles of fast, shared under a wave).
-- Each call runs three times: the counts must be left at zero for the next launch, and the
-- sums must not depend on which contributor comes last.
for _, s in ipairs{{1000, 1000, 4}, {1000, 1000, 20}, {1000, 1000, 516}, {999, 1004, 1000}} do
  local m, n, k = s[1], s[2], s[3]
  local A, B, Cd, R = problem("float32", m, n, k, 17)
  local tag = ("%dx%dx%d"):format(m, k, n)
  for _, sk in ipairs{5, 7, 31, 40} do
    for _, v in ipairs{"fast", "tf32"} do
      local first
      for round = 1, 3 do
        check(mm(A, B, Cd:fill(0 / 0), {variant = v, streamk = sk}), R, v == "tf32" and 5e-3 or f32,
              ("%s %s, stream-K in %d blocks (%d)"):format(v, tag, sk, round))
        if round == 1 then first = Cd:copy_to(cuda.host_array("float32", {m, n}))
        else T.is(cuda.compare(Cd, first), 0.0, ("%s %s, stream-K in %d blocks: run %d the same as run 1"):format(v, tag, sk, round)) end
      end
    end
  end
end
do
  local m, n, k = 2100, 2100, 300
  local A, B, Cd, R = problem("float32", m, n, k, 19)
  for _, v in ipairs{"fast", "tf32"} do
    check(mm(A, B, Cd:fill(0 / 0), {variant = v}), R, v == "tf32" and 5e-3 or f32, v .. " 2100x300x2100, stream-K by size")
    check(mm(A, B, Cd:fill(0 / 0), {variant = v, streamk = true}), R, v == "tf32" and 5e-3 or f32, v .. " 2100x300x2100, streamk = true")
    check(mm(A, B, Cd:fill(0 / 0), {variant = v, streamk = false}), R, v == "tf32" and 5e-3 or f32, v .. " 2100x300x2100, streamk = false")
  end
  A, B, Cd, R = problem("float32", 1536, 1536, 256, 27)
  check(mm(A, B, Cd:fill(0 / 0)), R, f32, "fast 1536x256x1536, by size")
end
do   -- alpha and beta once a tile, by its last contributor; two streams, counts of their own
  local m, n = 520, 1030
  local A, B, hC, R = problem_c(m, n, 700, 23, 0.5, -2)
  for _, v in ipairs{"fast", "tf32"} do
    local Cd = cuda.array("float32", {m, n}):copy_from(hC)
    check(mm(A, B, Cd, {variant = v, alpha = 0.5, beta = -2, streamk = 6}), R, v == "tf32" and 5e-3 or f32,
          v .. " 520x700x1030 in 6 stream-K blocks: alpha 0.5, beta -2")
  end
  local A2, B2, C0, R0 = problem("float32", m, n, 700, 29)
  local s1, s2 = cuda.stream(), cuda.stream()
  local C1, C2 = cuda.array("float32", {m, n}):fill(0 / 0), cuda.array("float32", {m, n}):fill(0 / 0)
  for _ = 1, 3 do
    mm(A2, B2, C1, {stream = s1, streamk = 9})
    mm(A2, B2, C2, {stream = s2, streamk = 9})
  end
  s1:synchronize(); s2:synchronize()
  check(C1, R0, f32, "stream-K on stream 1 beside stream 2")
  check(C2, R0, f32, "stream-K on stream 2 beside stream 1")
  check(mm(A2, B2, C0:fill(0 / 0), {streamk = 9, splits = 1}), R0, f32, "stream-K with splits = 1")
end

-- integer alpha and beta reach the kernels as floats (the prebuilt kernels' parameters are
-- only sizes to the driver), in every variant and both paths of fast and tf32
do
  local m, n = 48, 64
  local A, B, hC, R = problem_c(m, n, 80, 31, 2, -1)
  for _, o in ipairs{{variant = "naive"}, {variant = "tiled"}, {variant = "fast"}, {variant = "fast", tma = false},
                     {variant = "tf32"}, {variant = "tf32", tma = false}} do
    local Cd = cuda.array("float32", {m, n}):copy_from(hC)
    o.alpha, o.beta = 2, -1
    check(mm(A, B, Cd, o), R, o.variant == "tf32" and 5e-3 or f32,
          ("%s%s: alpha 2, beta -1 (integers)"):format(o.variant, o.tma == false and " (no TMA)" or ""))
  end
end

-- float64
for _, s in ipairs{{1, 1, 1}, {17, 33, 65}, {300, 200, 100}} do
  local A, B, Cd, R = problem("float64", s[1], s[2], s[3], 3)
  local tag = ("float64 %dx%dx%d"):format(s[1], s[3], s[2])
  for _, u in ipairs{1, 4} do
    check(mm(A, B, Cd:fill(0 / 0), {variant = "naive", unroll = u}), R, 1e-13, tag .. " naive unroll " .. u)
    check(mm(A, B, Cd:fill(0 / 0), {variant = "tiled", tile = 16, unroll = u}), R, 1e-13, tag .. " tiled unroll " .. u)
  end
  check(mm(A, B, Cd:fill(0 / 0), {variant = "tiled", tile = 32, unroll = 8}), R, 1e-13, tag .. " tiled 32 unroll 8")
  check(mm(A, B, Cd:fill(0 / 0), {variant = "fast"}), R, 1e-13, tag .. " fast")
end

-- float64 on tensor cores (dmma, the default from compute capability 8.0): each tile shape
-- (matmul.tune.dmma_tile), sizes over several tiles and k-tiles, most no multiple of 16, odd
-- k or n (8-byte copies: rows of A or B not 16 bytes apart) and even ones (16-byte copies)
do
  local tune = require("culua.catalog.matmul").tune
  local dmma = dev.major >= 8
  local shapes = {{1, 1, 1}, {17, 33, 65}, {300, 200, 100}, {130, 67, 1029}, {259, 301, 130},
                  {520, 390, 262}, not T.sanitizer and {1000, 1000, 1000} or nil}
  -- the knobs (off by default) besides the tiles: tile rows in groups (matmul.tune.dmma_group;
  -- 3 leaves a short last group at 300 and 520 rows), and on 9.0 the TMA-fed kernel where
  -- lda and ldb are even (300x200x100, 520x390x262, 1000^3; odd ones fall back to mma.sync),
  -- a block a multiprocessor, a block a tile, and two blocks that take turns over the tiles
  -- (its ring going on from tile to tile, k-tiles 7, 17 and 63 a tile)
  local knobs = {{"dmma_group", 3}, {"dmma_group", 2, "128x64w8"}, {"dmma_group", 3, "128x64w8k32"}, {"dmma_tma", true},
                 {"dmma_tma", true, nil, false}, {"dmma_tma", true, nil, 2}}
  for _, s in ipairs(shapes) do
    local A, B, Cd, R = problem("float64", s[1], s[2], s[3], 5)
    local tag = ("float64 %dx%dx%d dmma"):format(s[1], s[3], s[2])
    for _, tile in ipairs{false, "128x128", "128x64", "64x128", "128x64w8", "128x64w8e1", "128x64w8e2", "128x64e2",
                          "128x64w8k32", "128x64w8b", "128x64b", "128x64w8k32b"} do
      if not dmma then
        T.skip(tag .. ": needs compute capability 8.0, the device has " .. dev.major .. "." .. dev.minor)
      else
        tune.dmma_tile = tile or nil
        check(mm(A, B, Cd:fill(0 / 0), {variant = "dmma"}), R, 1e-13, tag .. " " .. (tile or "tile by k"))
        tune.dmma_tile = nil
      end
    end
    for _, kn in ipairs(knobs) do
      local what = ("%s %s = %s%s%s"):format(tag, kn[1], tostring(kn[2]), kn[3] and ", tile " .. kn[3] or "",
                                             kn[4] ~= nil and ", dmma_persistent = " .. tostring(kn[4]) or "")
      if not dmma then
        T.skip(what .. ": needs compute capability 8.0")
      else
        tune[kn[1]], tune.dmma_tile, tune.dmma_persistent = kn[2], kn[3], kn[4]
        check(mm(A, B, Cd:fill(0 / 0), {variant = "dmma"}), R, 1e-13, what)
        tune[kn[1]], tune.dmma_tile, tune.dmma_persistent = nil, nil, nil
      end
    end
    if dmma then check(mm(A, B, Cd:fill(0 / 0)), R, 1e-13, tag .. ": the float64 default") end
  end
  if dmma then
    local m, n = 33, 47
    local hA = cuda.host_array("float64", {m, 29}):random(21, -1, 1)
    local hB = cuda.host_array("float64", {29, n}):random(22, -1, 1)
    local hC = cuda.host_array("float64", {m, n}):random(23, -1, 1)
    local A, B = cuda.array("float64", {m, 29}):copy_from(hA), cuda.array("float64", {29, n}):copy_from(hB)
    -- beta = 0 (C not read), beta = +-alpha and others: C read in pairs or one at a time
    for _, ab in ipairs{{2.5, -0.5}, {-1, 1}, {0.5, -0.5}, {2, 2}, {1, 0}} do
      for _, kn in ipairs{{}, {"dmma_group", 2}, {"dmma_tma", true}, {"dmma_tile", "128x64w8e2"}} do
        local R = cuda.host_array("float64", {m, n}):copy_from(hC)
        ref(hA, hB, R, ab[1], ab[2])
        local Cd = cuda.array("float64", {m, n}):copy_from(hC)
        if kn[1] then tune[kn[1]] = kn[2] end
        check(mm(A, B, Cd, {variant = "dmma", alpha = ab[1], beta = ab[2]}), R, 1e-13, ("dmma%s: alpha %g, beta %g"):format(
              kn[1] and (" %s = %s"):format(kn[1], tostring(kn[2])) or "", ab[1], ab[2]))
        if kn[1] then tune[kn[1]] = nil end
      end
    end
    -- the TMA kernel's k-tiles with alpha and beta: rows of A and B 16 bytes apart
    local hA2 = cuda.host_array("float64", {m, 30}):random(24, -1, 1)
    local hB2 = cuda.host_array("float64", {30, 48}):random(25, -1, 1)
    local hC2 = cuda.host_array("float64", {m, 48}):random(26, -1, 1)
    local A2, B2 = cuda.array("float64", {m, 30}):copy_from(hA2), cuda.array("float64", {30, 48}):copy_from(hB2)
    for _, ab in ipairs{{-1, 1}, {2.5, -0.5}} do
      local R = cuda.host_array("float64", {m, 48}):copy_from(hC2)
      ref(hA2, hB2, R, ab[1], ab[2])
      local Cd = cuda.array("float64", {m, 48}):copy_from(hC2)
      tune.dmma_tma = true
      check(mm(A2, B2, Cd, {variant = "dmma", alpha = ab[1], beta = ab[2]}), R, 1e-13,
            ("dmma_tma = true, 33x30x48: alpha %g, beta %g"):format(ab[1], ab[2]))
      tune.dmma_tma = nil
    end
  end
end

-- float64 stream-K (the TMA kernel on 9.0, tune.dmma_tma = true at any k; culua/sm90.cuh's
-- shares, as float32's): its tiles are 128 x 128 and its k-tiles 16, so 300x1000x200 is 6
-- tiles of 63 k-tiles. 4 blocks share the last 2 tiles (after 4 blocks of a tile each), 5
-- all 6 (with none before them), 10 all 6 (0.6 of a tile each: tile 1 has three
-- contributors); 1000x1000x1030 is 72 tiles: 7 blocks share the last 9, after the first 63
-- in a block a tile, or in 7 persistent blocks of 9 tiles each (tune.dmma_persistent = 7).
-- Each call three times: the counts go back to zero, and the sums do not depend on which
-- contributor comes last. Then alpha and beta (C read once, by the tile's last contributor),
-- and two streams with scratch of their own (520x700x1030: 45 tiles, 7 blocks share the last
-- 10). bench/fakecuda.c's launches of these are t/014's kind of check: done once by hand.
do
  local tune = require("culua.catalog.matmul").tune
  local sm90 = dev.major == 9 and dev.minor == 0
  local cases = {{300, 200, 1000, 4}, {300, 200, 1000, 5}, {300, 200, 1000, 10}, {1000, 1030, 1000, 7, false},
                 {1000, 1030, 1000, 7, 7}, {1000, 1030, 1000, true}, {130, 132, 14, 3}}
  for _, c in ipairs(cases) do
    local m, n, k, sk, pers = c[1], c[2], c[3], c[4], c[5]
    local what = ("float64 %dx%dx%d, dmma_tma, streamk = %s%s"):format(m, k, n, tostring(sk),
                                                                        pers ~= nil and ", dmma_persistent = " .. tostring(pers) or "")
    if not sm90 then
      T.skip(what .. ": needs compute capability 9.0, the device has " .. dev.major .. "." .. dev.minor, 5)
    else
      local A, B, Cd, R = problem("float64", m, n, k, 31)
      tune.dmma_tma, tune.dmma_persistent = true, pers
      local first
      for round = 1, 3 do
        check(mm(A, B, Cd:fill(0 / 0), {variant = "dmma", streamk = sk}), R, 1e-13, ("%s (%d)"):format(what, round))
        if round == 1 then first = Cd:copy_to(cuda.host_array("float64", {m, n}))
        else T.is(cuda.compare(Cd, first), 0.0, ("%s: run %d the same as run 1"):format(what, round)) end
      end
      tune.dmma_tma, tune.dmma_persistent = nil, nil
    end
  end
  local m, n, k = 520, 1030, 700
  local hA = cuda.host_array("float64", {m, k}):random(41, -1, 1)
  local hB = cuda.host_array("float64", {k, n}):random(42, -1, 1)
  local hC = cuda.host_array("float64", {m, n}):random(43, -1, 1)
  local A, B = cuda.array("float64", {m, k}):copy_from(hA), cuda.array("float64", {k, n}):copy_from(hB)
  local R = cuda.host_array("float64", {m, n}):copy_from(hC)
  ref(hA, hB, R, 0.5, -2)
  local R0 = cuda.host_array("float64", {m, n})
  ref(hA, hB, R0)
  if not sm90 then
    T.skip("float64 stream-K with alpha and beta, and on two streams: needs compute capability 9.0", 3)
  else
    tune.dmma_tma = true
    local Cd = cuda.array("float64", {m, n}):copy_from(hC)
    check(mm(A, B, Cd, {variant = "dmma", alpha = 0.5, beta = -2, streamk = 6}), R, 1e-13,
          "float64 520x700x1030 in 6 stream-K blocks: alpha 0.5, beta -2")
    local s1, s2 = cuda.stream(), cuda.stream()
    local C1, C2 = cuda.array("float64", {m, n}):fill(0 / 0), cuda.array("float64", {m, n}):fill(0 / 0)
    for _ = 1, 3 do
      mm(A, B, C1, {variant = "dmma", stream = s1, streamk = 7})
      mm(A, B, C2, {variant = "dmma", stream = s2, streamk = 7})
    end
    s1:synchronize(); s2:synchronize()
    check(C1, R0, 1e-13, "float64 stream-K on stream 1 beside stream 2")
    check(C2, R0, 1e-13, "float64 stream-K on stream 2 beside stream 1")
    tune.dmma_tma = nil
  end
end

-- the float64 default at 8192^3 (on 9.0 the persistent TMA kernel, 31 tiles a block, and
-- stream-K): a stage given back before its reads were done showed as rows of one warp's
-- fragments from the next k-tile in every such product on an H100 (session 32; culua/sm90.cuh's
-- release_read). Three calls must agree bit for bit, and with the FFMA kernel (fast) to 1e-12.
if not T.sanitizer then
  local n = 8192
  local A = cuda.array("float64", {n, n}):copy_from(cuda.host_array("float64", {n, n}):random(51, -1, 1))
  local B = cuda.array("float64", {n, n}):copy_from(cuda.host_array("float64", {n, n}):random(52, -1, 1))
  local R, Cd = cuda.array("float64", {n, n}), cuda.array("float64", {n, n})
  mm(A, B, R, {variant = "fast"})
  local first
  for round = 1, 3 do
    mm(A, B, Cd:fill(0 / 0))
    if round == 1 then
      local _, _, rel = cuda.compare(Cd, R)
      T.ok(rel <= 1e-12, ("float64 8192^3 by default: relative error %.2e against fast (<= 1e-12)"):format(rel))
      first = Cd:copy_to(cuda.host_array("float64", {n, n}))
    else
      T.is(cuda.compare(Cd, first), 0.0, ("float64 8192^3 by default: call %d the same as call 1"):format(round))
    end
  end
end

-- alpha and beta: C is read only when beta ~= 0
do
  local m, n = 33, 47
  local A, B, hC, R = problem_c(m, n, 29, 1, 2.5, -0.5)
  for _, v in ipairs{"naive", "row", "column", "tiled", "fast", "tf32"} do
    local Cd = cuda.array("float32", {m, n}):copy_from(hC)
    check(mm(A, B, Cd, {variant = v, alpha = 2.5, beta = -0.5}), R, v == "tf32" and 5e-3 or f32, v .. ": alpha 2.5, beta -0.5")
  end
end

-- 1-D arrays and views, with the dims given
do
  local m, n, k = 5, 6, 7
  local hA = cuda.host_array("float32", {m, k}):random(9)
  local hB = cuda.host_array("float32", {k, n}):random(10)
  local R = cuda.host_array("float64", {m, n})
  ref(hA, hB, R)
  local big = cuda.array("float32", 1000)
  local A, B, Cd = big:view(1, m * k), big:view(101, k * n), big:view(501, m * n):fill(0 / 0)
  A:copy_from(hA); B:copy_from(hB)
  mm(A, B, Cd, {m = m, n = n, k = k, variant = "tiled"})
  local _, _, rel = cuda.compare(Cd, cuda.host_array("float64", m * n):copy_from(R:bytes()))
  T.ok(rel < 1e-5, "views of one array, dims given: relative error " .. rel)
end

-- leading dimensions: A, B and C are blocks of larger row-major matrices, their rows lda,
-- ldb and ldc elements apart, given as views that start at the blocks' first elements (or
-- the 2-D arrays themselves for blocks at their corners), as LU's trailing update takes
-- them. Sizes that are no multiple of any tile; blocks that start on 16 bytes (on an
-- H100, float32 fast and tf32 then go through TMA, the maps describing the blocks) and off
-- it, and rows not 16 bytes apart (no TMA); alpha = -1, beta = 1 (C -= A*B) and beta = 0
-- (the block of C poisoned with NaN). The whole of each matrix is compared with the
-- reference, so a write outside C's block fails too.
do
  -- the rows x cols block at 0-based (r0, c0) of the host matrix h (its rows ld apart), as a
  -- new host array of dtype; into (put): the block of h replaced by b's values
  local function block(h, ld, r0, c0, rows, cols, dtype)
    local b = cuda.host_array(dtype, {rows, cols})
    for i = 0, rows - 1 do
      for j = 1, cols do b[i * cols + j] = h[(r0 + i) * ld + c0 + j] end
    end
    return b
  end
  local function put(h, ld, r0, c0, b, rows, cols)
    for i = 0, rows - 1 do
      for j = 1, cols do h[(r0 + i) * ld + c0 + j] = b[i * cols + j] end
    end
  end
  local function f64(h) return cuda.host_array("float64", h.shape):copy_from(h:totable()) end

  -- P: {rows, cols} of the storage of A, B and C ("one": one matrix holds all three);
  -- a, b, c: the blocks' 0-based corners; returns a function that runs opts and checks
  local function ld_case(dtype, m, n, k, shapes, a, b, c, alpha, beta)
    local seed = m + n + k
    local hP = {}
    for i, what in ipairs{"A", "B", "C"} do
      local shape = shapes[what] or shapes.one
      hP[what] = (shapes.one and hP.A) or cuda.host_array(dtype, shape):random(seed + i, -1, 1)
    end
    local ld = {A = (shapes.A or shapes.one)[2], B = (shapes.B or shapes.one)[2], C = (shapes.C or shapes.one)[2]}
    local hA, hB = block(hP.A, ld.A, a[1], a[2], m, k, dtype), block(hP.B, ld.B, b[1], b[2], k, n, dtype)
    if beta == 0 then   -- C's block poisoned: it must not be read
      local nan = cuda.host_array(dtype, {m, n}):fill(0 / 0)
      put(hP.C, ld.C, c[1], c[2], nan, m, n)
    end
    local R = f64(hP.C)   -- the reference: all of C's storage, its block replaced
    local Rb = beta == 0 and cuda.host_array("float64", {m, n}):fill(0) or block(R, ld.C, c[1], c[2], m, n, "float64")
    ref(hA, hB, Rb, alpha, beta)
    put(R, ld.C, c[1], c[2], Rb, m, n)
    local P = {}
    P.A = cuda.array(dtype, hP.A.shape)
    P.B = shapes.one and P.A or cuda.array(dtype, hP.B.shape)
    P.C = shapes.one and P.A or cuda.array(dtype, hP.C.shape)
    local function at(what, corner, rows, cols)
      if corner[1] == 0 and corner[2] == 0 and not shapes.one then return P[what] end   -- the 2-D array itself
      return P[what]:view(corner[1] * ld[what] + corner[2] + 1, (rows - 1) * ld[what] + cols)
    end
    return function (opts, tol, what)
      P.A:copy_from(hP.A)
      if not shapes.one then P.B:copy_from(hP.B); P.C:copy_from(hP.C) end
      local o = {m = m, n = n, k = k, lda = ld.A, ldb = ld.B, ldc = ld.C, alpha = alpha, beta = beta}
      for key, v in pairs(opts) do o[key] = v end
      mm(at("A", a, m, k), at("B", b, k, n), at("C", c, m, n), o)
      local knobs = {}
      for _, key in ipairs{"tile", "block", "threads", "unroll", "tma", "splits", "streamk"} do
        if opts[key] ~= nil then knobs[#knobs + 1] = ("%s %s"):format(key, tostring(opts[key])) end
      end
      return check(P.C, R, tol, ("%s %s %dx%dx%d in %s: %s%s"):format(what, dtype, m, k, n,
                   shapes.one and ("one %dx%d"):format(shapes.one[1], shapes.one[2]) or "blocks", o.variant or "fast",
                   #knobs > 0 and " (" .. table.concat(knobs, ", ") .. ")" or ""))
    end
  end

  local variants32 = {{variant = "naive"}, {variant = "naive", block = 8, unroll = 4}, {variant = "row"},
                      {variant = "row", threads = 64, unroll = 2}, {variant = "column"}, {variant = "column", threads = 128},
                      {variant = "tiled", tile = 8}, {variant = "tiled"}, {variant = "tiled", tile = 32, unroll = 8},
                      {variant = "fast"}, {variant = "fast", tma = false}, {variant = "tf32"}, {variant = "tf32", tma = false},
                      {variant = "fast", splits = 3}, {variant = "tf32", splits = 2}, {variant = "fast", streamk = 5},
                      {variant = "tf32", streamk = 3}}
  local variants64 = {{variant = "naive"}, {variant = "naive", unroll = 2}, {variant = "tiled"}, {variant = "tiled", tile = 32},
                      {variant = "fast"}, dev.major >= 8 and {variant = "dmma"} or nil}
  local m, n, k = 77, 45, 33
  -- blocks of three 100x120 matrices: on 16 bytes (corners at columns 0, 4, 40: TMA on an
  -- H100), and off it (columns 5, 3, 7)
  local separate = {A = {100, 120}, B = {100, 120}, C = {100, 120}}
  -- rows 121 elements apart: not 16 bytes (no TMA in float32)
  local odd = {A = {100, 121}, B = {100, 121}, C = {100, 121}}
  -- LU's update: in one 120x120 matrix, A below-left, B above-right, C below-right of it
  local one = {one = {120, 120}}
  local layouts = {
    {"on 16 bytes", separate, {0, 0}, {10, 4}, {20, 40}},
    {"off 16 bytes", separate, {3, 5}, {10, 3}, {21, 7}},
    {"rows of 121", odd, {1, 4}, {60, 8}, {2, 40}},
    {"one matrix", one, {40, 0}, {0, 40}, {40, 40}},
    {"one matrix, off 16 bytes", one, {41, 1}, {1, 43}, {41, 43}},
  }
  for _, dt in ipairs{"float32", "float64"} do
    local tol = dt == "float32" and f32 or 1e-13
    for _, l in ipairs(layouts) do
      for _, ab in ipairs{{-1, 1}, {1, 0}, {0.5, -2}} do
        if not (l[2].one and ab[2] == 0) then   -- one matrix: B and C hold A's values, no NaN
          local run = ld_case(dt, m, n, k, l[2], l[3], l[4], l[5], ab[1], ab[2])
          for _, o in ipairs(dt == "float32" and variants32 or variants64) do
            run(o, o.variant == "tf32" and 5e-3 or tol, ("%s, alpha %g beta %g"):format(l[1], ab[1], ab[2]))
          end
          -- dmma's knobs (matmul.tune): tile rows in groups; the TMA-fed kernel (9.0, where
          -- the blocks start on 16 bytes) with one block over the tiles
          if dt == "float64" and dev.major >= 8 then
            local mtune = require("culua.catalog.matmul").tune
            for _, kn in ipairs{{"dmma_group", 2}, {"dmma_tma", true}, {"dmma_tile", "128x64w8e2"},
                                {"dmma_tile", "128x64w8k32"}, {"dmma_tile", "128x64w8b"}, {"dmma_tile", "128x64b"}} do
              mtune[kn[1]], mtune.dmma_persistent = kn[2], kn[1] == "dmma_tma" and 1 or nil
              run({variant = "dmma"}, tol, ("%s, alpha %g beta %g, tune.%s = %s"):format(l[1], ab[1], ab[2], kn[1],
                  tostring(kn[2])))
              mtune[kn[1]], mtune.dmma_persistent = nil, nil
            end
          end
        end
      end
    end
  end
  -- larger, over several tiles and turns of the TMA ring, and LU's shape: a thin k
  for _, s in ipairs{{300, 260, 200}, {257, 300, 64}} do
    local run = ld_case("float32", s[1], s[2], s[3], {one = {600, 600}}, {300, 0}, {0, 300}, {300, 300}, -1, 1)
    for _, o in ipairs{{variant = "fast"}, {variant = "fast", tma = false}, {variant = "tf32"}, {variant = "tiled"}} do
      run(o, o.variant == "tf32" and 5e-3 or f32, "C -= A*B")
    end
    local run64 = ld_case("float64", s[1], s[2], s[3], {one = {600, 600}}, {300, 0}, {0, 300}, {300, 300}, -1, 1)
    run64({variant = "fast"}, 1e-13, "C -= A*B")
    if dev.major >= 8 then
      run64({variant = "dmma"}, 1e-13, "C -= A*B")
      local mtune = require("culua.catalog.matmul").tune
      mtune.dmma_tma, mtune.dmma_persistent = true, 3
      run64({variant = "dmma"}, 1e-13, "C -= A*B, tune.dmma_tma (3 blocks)")
      mtune.dmma_tma, mtune.dmma_group, mtune.dmma_persistent = nil, 4, nil
      run64({variant = "dmma"}, 1e-13, "C -= A*B, tune.dmma_group = 4")
      mtune.dmma_group = nil
      -- the tiles that read C in batches, and k-tiles of 32: tiles inside C, C read (beta = 1)
      for _, tile in ipairs{"128x64w8e1", "128x64w8e2", "128x64e2", "128x64w8k32"} do
        mtune.dmma_tile = tile
        run64({variant = "dmma"}, 1e-13, "C -= A*B, tune.dmma_tile = " .. tile)
      end
      -- the tiles whose tiles inside C go by bulk copies (9.0; elsewhere as 128x64w8e2): added
      -- in L2 (beta = 1, any alpha), written (beta = 0), other betas read in batches
      for _, tile in ipairs{"128x64w8b", "128x64b", "128x64w8k32b"} do
        mtune.dmma_tile = tile
        for _, ab in ipairs{{-1, 1}, {2.5, 1}, {0.5, 0}, {2, -0.5}} do
          local runb = ld_case("float64", s[1], s[2], s[3], {one = {600, 600}}, {300, 0}, {0, 300}, {300, 300}, ab[1], ab[2])
          runb({variant = "dmma"}, 1e-13, ("alpha %g beta %g, tune.dmma_tile = %s"):format(ab[1], ab[2], tile))
        end
      end
      mtune.dmma_tile = nil
    end
  end
  -- float32 fast without TMA stages C in shared memory where it is read (compute capability
  -- 9.0: matmul.tune.stage_c), and not with stage_c = false: both against the reference, in
  -- LU's shape and over partial tiles at the bottom (rows 301) and right (columns 260)
  do
    local mtune = require("culua.catalog.matmul").tune
    local run = ld_case("float32", 301, 260, 128, {one = {700, 700}}, {300, 0}, {0, 300}, {300, 300}, -1, 1)
    local runb = ld_case("float32", 301, 260, 64, {one = {700, 700}}, {300, 0}, {0, 300}, {300, 300}, 0.5, -2)
    for _, stage in ipairs{false, true} do
      if stage then mtune.stage_c = nil else mtune.stage_c = false end
      local what = stage and "C staged (by default on cc 9.0)" or "stage_c = false"
      run({variant = "fast", tma = false}, f32, "C -= A*B, " .. what)
      runb({variant = "fast", tma = false}, f32, "alpha 0.5 beta -2, " .. what)
    end
    mtune.stage_c = nil
    -- a beta that is 0 as a float32 (1e-50): C is not read, staged or not (its NaN stays out)
    local A, B, Cd, R = problem("float32", 300, 260, 64, 43)
    check(mm(A, B, Cd:fill(0 / 0), {alpha = 1, beta = 1e-50, tma = false}), R, f32, "beta 1e-50 (0 as a float32): C not read")
  end
  -- ld equal to the row length is the packed case, given explicitly
  do
    local A, B, Cd, R = problem("float32", 33, 47, 29, 41)
    check(mm(A, B, Cd:fill(0 / 0), {m = 33, n = 47, k = 29, lda = 29, ldb = 47, ldc = 47}), R, f32, "lda = k, ldb = ldc = n: packed")
  end
end

-- transb: B given as its transpose, B^T (N x K, built on the host), so C = alpha*A*B^T + beta*C.
-- float32 and float64 kernels read a row-major B, which each call takes back from B^T first
-- (a transpose of 4- or 8-byte elements into scratch): every variant, sizes odd and even and
-- past a tile, beta = 0 over a poisoned C, alpha and beta with C read, B^T as a block of a
-- larger matrix (rows ldb apart, on 16 bytes and off them, a view at an odd element), on a
-- stream; and transb = false the same C, bit for bit, as no option.
do
  local mtune = require("culua.catalog.matmul").tune
  local transposed = T.transposed
  local variants = {
    float32 = {{variant = "fast"}, {variant = "fast", tma = false}, {variant = "tf32"}, {variant = "tf32", tma = false},
               {variant = "naive"}, {variant = "row"}, {variant = "column"}, {variant = "tiled", tile = 32, unroll = 4},
               {variant = "fast", splits = 3}, {variant = "tf32", streamk = 3}},
    float64 = {{variant = "naive"}, {variant = "tiled"}, {variant = "fast"}, dev.major >= 8 and {variant = "dmma"} or nil,
               dev.major >= 8 and {variant = "dmma", tune = "dmma_tma"} or nil},
  }
  local function what(o)
    local t = {o.variant}
    for _, key in ipairs{"tile", "unroll", "tma", "splits", "streamk"} do
      if o[key] ~= nil then t[#t + 1] = ("%s %s"):format(key, tostring(o[key])) end
    end
    if o.tune then t[#t + 1] = "tune." .. o.tune end
    return table.concat(t, ", ")
  end
  local function run(A, B, Cd, o, extra)
    local opts = {variant = o.variant, tile = o.tile, unroll = o.unroll, tma = o.tma, splits = o.splits, streamk = o.streamk}
    for key, v in pairs(extra) do opts[key] = v end
    if o.tune then mtune[o.tune] = true end
    mm(A, B, Cd, opts)
    if o.tune then mtune[o.tune] = nil end
    return Cd
  end
  for _, dt in ipairs{"float32", "float64"} do
    local sizes = {{1, 1, 1}, {17, 33, 65}, {130, 67, 129}, {257, 132, 36}, {300, 516, 1030}}
    for si, s in ipairs(sizes) do
      local m, n, k = s[1], s[2], s[3]
      local hA = cuda.host_array(dt, {m, k}):random(60 + si, -1, 1)
      local hB = cuda.host_array(dt, {k, n}):random(70 + si, -1, 1)
      local hC = cuda.host_array(dt, {m, n}):random(80 + si, -1, 1)
      local R = cuda.host_array("float64", {m, n})
      ref(hA, hB, R)
      local R2 = cuda.host_array("float64", {m, n}):copy_from(hC:totable())
      ref(hA, hB, R2, -1.5, 0.5)
      local A, B = cuda.array(dt, {m, k}):copy_from(hA), cuda.array(dt, {k, n}):copy_from(hB)
      local Bt = cuda.array(dt, {n, k}):copy_from(transposed(hB))
      local Cd = cuda.array(dt, {m, n})
      local tag = ("%s %dx%dx%d"):format(dt, m, k, n)
      for _, o in ipairs(variants[dt]) do
        local tol = dt == "float64" and 1e-13 or o.variant == "tf32" and 5e-3 or f32
        check(run(A, Bt, Cd:fill(0 / 0), o, {transb = true}), R, tol, ("%s transb, %s: beta 0 over NaN"):format(tag, what(o)))
        Cd:copy_from(hC)
        check(run(A, Bt, Cd, o, {transb = true, alpha = -1.5, beta = 0.5}), R2, tol,
              ("%s transb, %s: alpha -1.5, beta 0.5"):format(tag, what(o)))
      end
      local first = mm(A, B, Cd:fill(0 / 0)):copy_to(cuda.host_array(dt, {m, n}))
      T.is(cuda.compare(mm(A, B, Cd:fill(0 / 0), {transb = false}), first), 0.0, tag .. ": transb = false, the same C as no option")
    end
    -- B^T a block of a larger matrix: rows ldb apart from a view's first element (a corner
    -- on 16 bytes, rows 16 bytes apart; and off both), A and C blocks too; on a stream
    local m, n, k = 77, 45, 33
    local hA = cuda.host_array(dt, {m, k}):random(91, -1, 1)
    local hB = cuda.host_array(dt, {k, n}):random(92, -1, 1)
    local hC = cuda.host_array(dt, {m, n}):random(93, -1, 1)
    local R = cuda.host_array("float64", {m, n}):copy_from(hC:totable())
    ref(hA, hB, R, 0.5, -2)
    local stream = cuda.stream()
    for _, l in ipairs{{"on 16 bytes", 40, 8, 64, 4}, {"off 16 bytes", 41, 3, 37, 5}} do
      local name, lda, off, ldbt, offc = l[1], l[2], l[3], l[4], l[5]
      local ldc = n + 3
      local bigA = cuda.host_array(dt, off + m * lda):fill(7)
      local bigBt = cuda.host_array(dt, off + n * ldbt):fill(7)
      local bigC = cuda.host_array(dt, offc + m * ldc):fill(7)
      for i = 0, m - 1 do for j = 1, k do bigA[off + i * lda + j] = hA[i * k + j] end end
      for i = 0, n - 1 do for j = 1, k do bigBt[off + i * ldbt + j] = hB[(j - 1) * n + i + 1] end end
      for i = 0, m - 1 do for j = 1, n do bigC[offc + i * ldc + j] = hC[i * n + j] end end
      local dA, dBt = cuda.array(dt, #bigA):copy_from(bigA), cuda.array(dt, #bigBt):copy_from(bigBt)
      local dC = cuda.array(dt, #bigC)
      for _, o in ipairs(variants[dt]) do
        dC:copy_from(bigC)
        run(dA:view(off + 1, (m - 1) * lda + k), dBt:view(off + 1, (n - 1) * ldbt + k), dC:view(offc + 1, (m - 1) * ldc + n), o,
            {transb = true, m = m, n = n, k = k, lda = lda, ldb = ldbt, ldc = ldc, alpha = 0.5, beta = -2, stream = stream})
        stream:synchronize()
        local out, pad = T.block_of(dC:totable(), offc, m, n, ldc, 7)
        local tol = dt == "float64" and 1e-13 or o.variant == "tf32" and 5e-3 or f32
        check(out, R, tol, ("%s transb, B^T a block %s (ldb %d), %s, on a stream"):format(dt, name, ldbt, what(o)))
        T.ok(pad, "  and C outside its block untouched")
      end
    end
  end
end

-- on a stream, without synchronizing
do
  local s = cuda.stream()
  local A, B, Cd, R = problem("float32", 200, 300, 100, 4)
  mm(A, B, Cd, {stream = s})
  s:synchronize()
  check(Cd, R, f32, "fast on a stream")
end

-- refusals
local A = cuda.array("float32", {4, 3})
local B = cuda.array("float32", {3, 5})
local Cd = cuda.array("float32", {4, 5})
local P = cuda.array("float32", {10, 10})
local bad = {
  {function () mm(A, A, Cd) end, "A is 4x3 but B is 4x3: inner dimensions differ|B is 4x3, expected 3x", "inner dimensions"},
  {function () mm(A, B, cuda.array("float32", {5, 4})) end, "C is 5x4, expected 4x5", "C shape"},
  {function () mm(A, cuda.array("float64", {3, 5}), Cd) end, "dtypes differ %(A float32, B float64, C float32%)", "mixed dtypes"},
  {function () mm(cuda.array("int32", {4, 3}), B, Cd) end, "A must be float32, float64, float16, bfloat16, float8_e4m3 or float8_e5m2, got int32", "integer matrices"},
  {function () mm(A, B, Cd, {variant = "strassen"}) end, "variant must be one of naive, row, column, tiled, fast, tf32, dmma, got strassen", "unknown variant"},
  {function () mm(A, B, Cd, {variant = "dmma"}) end, "variant 'dmma' is float64 only", "dmma in float32"},
  {function () mm(A, B, Cd, {variant = "tiled", tile = 12}) end, "tile must be one of 8, 16, 32, got 12", "bad tile"},
  {function () mm(A, B, Cd, {variant = "tiled", unroll = 3}) end, "unroll must be one of 1, 2, 4, 8, got 3", "bad unroll"},
  {function () mm(A, B, Cd, {variant = "naive", block = 33}) end, "block must be a side of 1%.%.32", "naive block too big"},
  {function () mm(cuda.array("float64", {4, 3}), cuda.array("float64", {3, 5}), cuda.array("float64", {4, 5}), {variant = "tf32"}) end,
   "variant 'tf32' is float32 only", "tf32 in float64"},
  {function () mm(cuda.array("float32", 12), B, Cd) end, "A is 1%-D %(12 elements%): make it 2%-D, or give m, n and k", "1-D without dims"},
  {function () mm(A, B, Cd, 5) end, "opts must be a table, got number", "opts not a table"},
  {function () mm(A, B, Cd, {variant = "tf32", tma = 1}) end, "tma must be a boolean, got number", "tma not a boolean"},
  {function () mm(A, B, Cd, {alpha = "2"}) end, "alpha must be a number, got string", "alpha as a string"},
  {function () mm(A, B, Cd, {beta = true}) end, "beta must be a number, got boolean", "beta as a boolean"},
  {function () mm(A, B, Cd, {splits = 0}) end, "splits must be an integer 1%.%.64, got 0", "no splits"},
  {function () mm(A, B, Cd, {splits = 65}) end, "splits must be an integer 1%.%.64, got 65", "too many splits"},
  {function () mm(A, B, Cd, {splits = 2.5}) end, "splits must be an integer 1%.%.64, got 2%.5", "fractional splits"},
  {function () mm(A, B, Cd, {splits = "4"}) end, "splits must be an integer 1%.%.64, got 4", "splits as a string"},
  {function () mm(A, B, Cd, {streamk = 0}) end, "streamk must be a boolean or a block count 1%.%.1024, got 0", "no stream-K blocks"},
  {function () mm(A, B, Cd, {streamk = 1025}) end, "streamk must be a boolean or a block count 1%.%.1024, got 1025", "too many stream-K blocks"},
  {function () mm(A, B, Cd, {streamk = 1.5}) end, "streamk must be a boolean or a block count 1%.%.1024, got 1%.5", "fractional stream-K blocks"},
  {function () mm(A, B, Cd, {streamk = "on"}) end, "streamk must be a boolean or a block count 1%.%.1024, got on", "streamk as a string"},
  {function () mm(A, B, Cd, {streamk = 8, splits = 3}) end, "streamk and splits > 1 exclude each other %(splits 3%)", "stream-K and split-K"},
  -- leading dimensions
  {function () mm(P, B, Cd, {m = 4, k = 3, lda = 2}) end, "lda = 2 is less than A's rows of 3 %(k%)", "lda < k"},
  {function () mm(A, P, Cd, {n = 5, ldb = 4}) end, "ldb = 4 is less than B's rows of 5 %(n%)", "ldb < n"},
  {function () mm(A, B, P, {m = 4, n = 5, ldc = 3}) end, "ldc = 3 is less than C's rows of 5 %(n%)", "ldc < n"},
  {function () mm(P:view(1, 30), B, Cd, {m = 4, k = 3, lda = 10}) end,
   "A has 30 elements, fewer than 4x3 with lda = 10 needs %(33%)", "A's view too short for its rows"},
  {function () mm(A, P:view(5, 20), Cd, {n = 5, ldb = 8}) end,
   "B has 20 elements, fewer than 3x5 with ldb = 8 needs %(21%)", "B's view too short"},
  {function () mm(A, B, P:view(50, 28), {m = 4, n = 5, ldc = 8}) end,
   "C has 28 elements, fewer than 4x5 with ldc = 8 needs %(29%)", "C's view one element short"},
  {function () mm(P, B, Cd, {lda = 10}) end, "A has lda: give its sizes, m and k", "lda without m and k"},
  {function () mm(A, P, Cd, {ldb = 10}) end, "B has ldb: give its sizes, k and n", "ldb without n"},
  {function () mm(A, B, Cd, {lda = 3.5}) end, "lda must be a positive integer, got 3%.5", "fractional lda"},
  {function () mm(A, B, Cd, {ldb = -5}) end, "ldb must be a positive integer, got %-5", "negative ldb"},
  {function () mm(A, B, Cd, {ldc = 0}) end, "ldc must be a positive integer, got 0", "ldc 0"},
  {function () mm(A, B, Cd, {lda = "3"}) end, "lda must be a positive integer, got 3", "lda as a string"},
  {function () mm(A, B, Cd, {m = -1}) end, "m must be an integer 0 or more, got %-1", "m = -1"},
  {function () mm(cuda.array("float32", {4, 3}, {pitched = true}), B, Cd) end, "A is pitched: the catalog expects packed arrays", "pitched A"},
}
for _, b in ipairs(bad) do
  local ok, err = pcall(b[1])
  local pass = not ok
  if pass then
    pass = false
    for alt in (b[2] .. "|"):gmatch("(.-)|") do pass = pass or err:find(alt) ~= nil end
  end
  T.ok(pass, "refused: " .. b[3], err)
end

-- matmul.tune's dmma knobs refuse values that are no count (compute capability 8.0 and later)
do
  local mtune = require("culua.catalog.matmul").tune
  local D = {cuda.array("float64", {4, 2}), cuda.array("float64", {2, 6}), cuda.array("float64", {4, 6})}
  for _, c in ipairs{{"dmma_group", 0, "tune%.dmma_group must be a positive integer, got 0"},
                     {"dmma_group", 2.5, "tune%.dmma_group must be a positive integer, got 2%.5"},
                     {"dmma_persistent", "x", "tune%.dmma_persistent must be a boolean or a block count, got x"},
                     {"dmma_persistent", 0, "tune%.dmma_persistent must be a boolean or a block count, got 0"},
                     {"dmma_tile", "96x96", "tune%.dmma_tile must be one of 128x128, 128x64, 128x64b, 128x64e2, .*, got 96x96"}} do
    if dev.major < 8 then
      T.skip("refused: tune." .. c[1] .. " = " .. tostring(c[2]) .. ": dmma needs compute capability 8.0")
    else
      mtune[c[1]] = c[2]
      local ok, err = pcall(mm, D[1], D[2], D[3], {variant = "dmma"})
      mtune[c[1]] = nil
      T.ok(not ok and err:find(c[3]) ~= nil, "refused: tune." .. c[1] .. " = " .. tostring(c[2]), err)
    end
  end
  -- a block count given as a float that is an integer is taken, as tune.lowp_persistent takes one
  if dev.major >= 8 then
    mtune.dmma_persistent = 4.0
    local ok, err = pcall(mm, D[1], D[2], D[3], {variant = "dmma"})
    mtune.dmma_persistent = nil
    T.ok(ok, "tune.dmma_persistent = 4.0 taken", err)
  else
    T.skip("tune.dmma_persistent = 4.0: dmma needs compute capability 8.0")
  end
end

-- more tiles of rows than a grid may have in y (65535): the plain kernels' launches go in
-- slices of rows (of columns for "column"), each on views of A and C; they once refused
-- such a product ("grid.y = 78125 exceeds the device's 65535"). Tall, thin products as a
-- user makes them (points times a small matrix), rows not a multiple of any tile
if not T.sanitizer then
  for _, c in ipairs{
    {"float32", "fast", 65535 * 128 + 1001, 3, 3},    -- lda = 3: no 16-byte loads, no TMA
    {"float32", "fast", 65535 * 128 + 7, 8, 16},      -- 16-byte loads, each slice's base aligned
    {"float64", "fast", 65535 * 64 + 333, 3, 5},
    {"float32", "tiled", 65535 * 16 + 5, 2, 3, {tile = 16}},
    {"float32", "row", 70001, 5, 4},
    {"float32", "column", 3, 70001, 2},
    {"float32", "fast", 65535 * 16 + 9, 2, 0},       -- k = 0: C = beta*C by the naive kernel
  } do
    local dt, variant, m, n, k = c[1], c[2], c[3], c[4], c[5]
    local what = ("%s %s %dx%dx%d"):format(dt, variant, m, n, k)
    local hA = cuda.host_array(dt, {m, k}):random(m, -1, 1)
    local hB = cuda.host_array(dt, {k, n}):random(n, -1, 1)
    local hC = cuda.host_array(dt, {m, n}):random(k + 5, -1, 1)
    local R = hC:astype("float64")
    ref(hA, hB, R, 1.5, 0.5)
    local Cd = cuda.array(dt, {m, n}):copy_from(hC)
    local opts = {variant = variant, alpha = 1.5, beta = 0.5}
    for key, v in pairs(c[6] or {}) do opts[key] = v end
    local ok, err = pcall(mm, cuda.array(dt, {m, k}):copy_from(hA), cuda.array(dt, {k, n}):copy_from(hB), Cd, opts)
    if T.ok(ok, what .. ": taken, in slices of rows", err) then check(Cd, R, dt == "float32" and 1e-5 or 1e-12, what) end
    hA, hB, hC, R, Cd = nil
    collectgarbage()
  end
end

A, B, Cd, P = nil
collectgarbage()
collectgarbage()
T.is(cuda.memory_in_use(), 0, "no device memory leaked by this file")
T.done_testing()
