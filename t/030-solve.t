-- cuda.catalog.lu, lu_solve and solve: the C references on hand-made and random
-- matrices, the kernels' source under NVRTC and their argument lists, and the
-- argument checks that need no device; with a GPU, both methods on random,
-- diagonally dominant (rows permuted), badly scaled, permuted-identity, 1 x 1,
-- odd-sized (not a multiple of the panel), 1000, 3000 (the fused and cluster panels over
-- many blocks, and the column kernels beside them) and 4096 matrices in float32
-- and float64, against LAPACK's residual ratio ||B - A X|| / (||A|| ||X|| n eps)
-- <= 10 and the reference's pivots; several right-hand sides, views, a stream,
-- singular and non-finite inputs refused, bad arguments named; lu_solve both ways (by
-- substitution, a launch a triangle, up to 16 right-hand sides, and by blocks past them) on
-- sizes around the substitutions' 64-row blocks, their scratch words left at zero, their
-- kernels' arguments and synchronization in their PTX; devices = {...}: shares of
-- one GPU ({0, 0}, {0, 0, 0}; peer = false stages through the host) and two GPUs against the
-- one-device pivots and factors, and the devices and peer checks, which need no GPU.
local T = require "culua.tap"
local cuda = require "cuda"
local cat = cuda.catalog
local ref = cat.reference

local EPS = {float32 = 2.0 ^ -24, float64 = 2.0 ^ -53}

-- {====================================================== host matrices

local function host(dt, rows)
  local n = #rows
  return cuda.host_array(dt, {n, #rows[1]}):copy_from(rows)
end

-- n x n of a kind: "random" (uniform in [-1, 1)), "dominant" (random, diagonal n + 1,
-- rows then permuted: every pivot is clear), "scaled" (random rows times 2^-20..2^20),
-- "identity" (a permuted identity: a swap at most steps)
local function matrix(dt, n, kind, seed)
  local h = cuda.host_array(dt, {n, n}):random(seed, -1, 1)
  if kind == "random" then return h end
  local perm = {}
  for i = 1, n do perm[i] = i end
  local r = cuda.host_array("int64", n):random(seed + 1, 0, 1 << 30)
  for i = n, 2, -1 do
    local j = r[i] % i + 1
    perm[i], perm[j] = perm[j], perm[i]
  end
  if kind == "dominant" then
    local m = cuda.host_array(dt, {n, n})
    for i = 1, n do
      local src = perm[i]
      for j = 1, n do m[(i - 1) * n + j] = h[(src - 1) * n + j] end
      m[(i - 1) * n + src] = n + 1.0 + (src % 7) / 8
    end
    return m
  elseif kind == "scaled" then
    for i = 1, n do
      local s = 2.0 ^ (r[i] % 41 - 20)
      for j = 1, n do h[(i - 1) * n + j] = h[(i - 1) * n + j] * s end
    end
    return h
  elseif kind == "identity" then
    h:fill(0)
    for i = 1, n do h[(i - 1) * n + perm[i]] = 1 end
    return h
  end
  error("no kind " .. kind)
end

local function copy_of(h)
  local c = cuda.host_array(h.dtype, #h.shape == 2 and h.shape or #h)
  return c:copy_from(h)
end

local function ratio(hA, hX, hB)
  local n = hA.shape[1]
  return ref.lu_residual(hA, hX, hB) / (n * EPS[hA.dtype])
end

-- }======================================================


-- {====================================================== without a GPU

do
  local A = host("float64", {{0, 1}, {2, 3}})
  local piv = cuda.host_array("int32", 2)
  T.is(ref.lu(A, piv), 0, "reference.lu: a 2 x 2 that needs a swap")
  T.is_deeply(piv:totable(), {2, 2}, "  pivots 2, 2")
  T.is_deeply(A:totable(), {{2, 3}, {0, 1}}, "  L and U in place")
  A = host("float32", {{1, 2, 3}, {4, 5, 6}, {7, 8, 10}})
  piv = cuda.host_array("int32", 3)
  T.is(ref.lu(A, piv), 0, "reference.lu: 3 x 3")
  T.is_deeply(piv:totable(), {3, 3, 3}, "  pivots as LAPACK's getrf gives them")
  local t = A:totable()
  T.is_deeply(t[1], {7, 8, 10}, "  U's first row is the pivot row")
  T.near(t[2][1], 1 / 7, 1e-7, "  L's multipliers")
  local B = cuda.host_array("float32", 3):copy_from({1, 2, 3})
  ref.lu_solve(A, piv, B)
  local hA = host("float32", {{1, 2, 3}, {4, 5, 6}, {7, 8, 10}})
  T.ok(ratio(hA, B, cuda.host_array("float32", 3):copy_from({1, 2, 3})) < 10, "reference.lu_solve: residual ratio below 10")
  T.is(ref.lu(host("float64", {{1, 2}, {2, 4}}), cuda.host_array("int32", 2)), 2, "reference.lu: a singular matrix's info")
  T.is(ref.lu(host("float64", {{0, 0}, {0, 1}}), cuda.host_array("int32", 2)), 1, "reference.lu: a zero first column")
  -- a random one through the references
  local n = 60
  local M = matrix("float64", n, "random", 5)
  local LU, p = copy_of(M), cuda.host_array("int32", n)
  ref.lu(LU, p)
  local hb = cuda.host_array("float64", {n, 3}):random(6, -1, 1)
  local hx = copy_of(hb)
  ref.lu_solve(LU, p, hx)
  T.ok(ratio(M, hx, hb) < 10, "reference: random 60 x 60, three right-hand sides, ratio below 10")
  T.error_like(function () ref.lu(host("int32", {{1}}), cuda.host_array("int32", 1)) end,
               "reference%.lu: the matrix has dtype int32", "reference.lu refuses integers")
  T.error_like(function () ref.lu(host("float32", {{1, 2}}), cuda.host_array("int32", 2)) end,
               "reference%.lu: the matrix is 1x2, not square", "reference.lu refuses a non-square")
  T.error_like(function () ref.lu(host("float32", {{1}}), cuda.host_array("float32", 1)) end,
               "ipiv must be an int32 host array", "reference.lu: ipiv's dtype")
end

-- the kernels' sources (kernels/solve.cu and the files of its parts) compile under NVRTC,
-- each on its own, and the launch arguments fit the signatures: the PTX of all of them
-- (nil when one does not compile)
local FILES = {"solve", "lu", "lu_panel", "lu_multi", "triangular", "seed"}
local function compiled(arch)
  local ptx, all = {}, true
  for _, f in ipairs(FILES) do
    local p
    all = T.lives_ok(function () p = cuda.compile(cuda._catalog.source(f), {options = {"-std=c++17", "-arch=" .. arch}}) end,
                     ("kernels/%s.cu compiles under NVRTC for %s"):format(f, arch)) and all
    ptx[#ptx + 1] = p and p.ptx or ""
  end
  return all and {ptx = table.concat(ptx, "\n")} or nil
end
local prog = compiled("compute_80")
if prog then
  local function fits(name, ...) return cuda.check_args(cuda.signature(prog.ptx, name), ...) end
  local big = (1 << 33) + 5
  T.ok(fits("culua_solve_panel_f32", 1000, 64, 64, 63, 1, 1, 1000, -64, 2, 3, 4, 5), "panel arguments (leading dimension, column offset)")
  T.ok(fits("culua_solve_panel_fused_f64", 1000, 64, 64, 1, 500, -64, 2, 3, 4, 5), "fused panel arguments (leading dimension, column offset)")
  T.ok(fits("culua_solve_panel_fused_kept_f32", 1000, 64, 64, 1, 500, -64, 2, 3, 4, 5, 8), "fused panel (rows kept) arguments")
  T.ok(fits("culua_solve_trsm_lower_f32", 64, 100, 1, big, 100, 2, big, 100), "trsm arguments")
  T.ok(fits("culua_solve_laswp_f64", 100, 100, 0, 64, 0, 64, 1, 2), "laswp arguments")
  T.ok(fits("culua_solve_update_narrow_f32", 8128, 64, 64, 1, big, 8192, 2, big, 8192, 3, big, 8192),
       "narrow update arguments")
  T.ok(fits("culua_solve_check_f32", big, 1, 2), "check arguments")
  T.ok(fits("culua_solve_permutation", 100, 1, 2, 1), "permutation arguments")
  T.ok(fits("culua_solve_seed_pivot_f64", 100, 50, 63, 1, 1, 2, 3, 4), "seed pivot arguments (first column)")
  T.ok(fits("culua_solve_seed_eliminate_f32", 100, 51, 50, 3, 0, 1, 2, 3), "seed elimination arguments (first column)")
  T.ok(fits("culua_solve_cyclic_f32", 1000, 64, 64, 3, 1, 320, 128, 64, 1, 2, 0), "block-cyclic packing arguments (a block row, a chunk)")
  T.ok(fits("culua_solve_panel_pack_f64", 1000, 64, 64, 1, big, 320, 2, 3), "panel packing arguments")
  T.ok(fits("culua_solve_panel_pivots_f32", 64, 64, 1, 2), "panel pivots arguments")
  T.ok(fits("culua_solve_transpose_f64", 10, 20, 1, 0, 20, 2, big, 10), "transpose arguments")
  T.ok(fits("culua_solve_panel_cluster_f32", 1000, 64, 64, 1, 500, -64, 2, 3, 227), "cluster panel arguments")
  -- lu_solve's substitutions (a launch a triangle), four right-hand sides a column group and one
  for _, name in ipairs{"trsv_lower_f32", "trsv_upper_f32", "trsv_lower_f64", "trsv_upper_f64",
                        "trsv1_lower_f32", "trsv1_upper_f32", "trsv1_lower_f64", "trsv1_upper_f64"} do
    T.ok(fits("culua_solve_" .. name, 4097, 17, 1, 2, 3), name .. " arguments")
  end
  -- what their blocks meet through: a ticket (atomic add), the counter of block rows solved
  -- read with an acquire and published with a release after a fence; and every lane's partial
  -- sums in registers (no local array: reduce_scatter's indices are all known when compiled)
  for _, name in ipairs{"trsv_lower_f64", "trsv1_upper_f32"} do
    local body = prog.ptx:match("%.entry culua_solve_" .. name .. "%(.-\n}") or ""
    T.ok(body:find("atom%.global%.add%.u32") and body:find("ld%.acquire%.gpu") and body:find("membar%.gl")
         and body:find("st%.release%.gpu"), name .. ": ticket, acquire, fence and release in its PTX")
    T.ok(body ~= "" and not body:find("__local_depot", 1, true), name .. ": no local memory in its PTX")
  end
end
-- the cluster panel's body exists for compute capability 9.0 only: there it meets the
-- other blocks through the cluster barrier and their shared memory
local ptx90 = (compiled("compute_90") or {}).ptx
T.like(ptx90 or "", "barrier%.cluster%.arrive%.relaxed", "the cluster panel's barrier (compute_90)")
T.like(ptx90 or "", "mapa%.u64", "the cluster panel reads the other blocks' posts (compute_90)")

local info = cat.list().solve
T.is_deeply(info.methods, {"lu", "seed"}, "list(): methods")
T.is(info.default, "lu", "list(): the default")
T.ok(info.knobs.panel:find("fused", 1, true) and info.knobs.panel:find("cluster", 1, true), "list(): the panel knob")

T.error_like(function () cat.lu(1) end, "cuda%.catalog%.lu: A must be a cuda%.array, got number", "lu: A not an array")
T.error_like(function () cat.lu(cuda.host_array("float32", {2, 2})) end, "A must be a cuda%.array, got cuda%.host_array", "lu: a host array")
T.error_like(function () cat.lu(nil, {blok = 64}) end, "cuda%.catalog%.lu: unknown option 'blok' %(known: stream, method, block, panel, devices, peer, growth, comm, root, distribution%)", "lu: unknown option")
T.error_like(function () cat.solve(nil, nil, {overwrite = true, x = 1}) end, "cuda%.catalog%.solve: unknown option 'x'", "solve: unknown option")
T.error_like(function () cat.lu_solve(nil, nil, nil, {method = "seed"}) end, "cuda%.catalog%.lu_solve: unknown option 'method'", "lu_solve: no method")
T.error_like(function () cat.lu_solve(1, 2, 3, "x") end, "lu_solve: opts must be a table, got string", "lu_solve: opts not a table")

-- devices and peer are checked before the arrays: these need no GPU
for _, c in ipairs{
  {function () cat.lu(nil, {devices = 0}) end, "lu: devices must be a list of device ordinals, got number"},
  {function () cat.solve(nil, nil, {devices = "0,1"}) end, "solve: devices must be a list of device ordinals, got string"},
  {function () cat.lu(nil, {devices = {}}) end, "lu: devices is an empty list: give at least one device ordinal"},
  {function () cat.lu(nil, {devices = {0, x = 1}}) end, "lu: devices must be a list of device ordinals, got a key x"},
  {function () cat.lu(nil, {devices = {99}}) end, "lu: devices%[1%] is 99, but there is no device 99 %(%d+ devices? present%)"},
  {function () cat.solve(nil, nil, {devices = {-1}}) end, "solve: devices%[1%] is %-1, but there is no device %-1"},
  {function () cat.lu(nil, {devices = {0.5}}) end, "lu: devices%[1%] must be an integer device ordinal, got 0%.5"},
  {function () cat.lu(nil, {devices = {"0"}}) end, "lu: devices%[1%] must be an integer device ordinal, got string"},
  {function () cat.lu(nil, {peer = 1}) end, "lu: peer must be a boolean, got number"},
  {function () cat.solve(nil, nil, {peer = "no", devices = {0}}) end, "solve: peer must be a boolean, got string"},
  {function () cat.lu(nil, {growth = 1}) end, "lu: growth must be a boolean, got number"},
  {function () cat.solve(nil, nil, {growth = "yes"}) end, "solve: growth must be a boolean, got string"},
} do
  T.error_like(c[1], "cuda%.catalog%." .. c[2], c[2]:gsub("%%", ""))
end
T.ok(info.knobs.devices:find("shares of one GPU", 1, true), "list(): the devices knob")

-- }======================================================


-- {====================================================== with a GPU

-- n = 1000 in the cases below; 400 under the slowest compute-sanitizer tools
local N1000 = (T.sanitizer == "racecheck" or T.sanitizer == "initcheck") and 400 or 1000

local function gpu_tests()
  local function device_of(h) return cuda.array(h.dtype, #h.shape == 2 and h.shape or #h):copy_from(h) end
  local function to_host(d) local h = cuda.host_array(d.dtype, #d.shape == 2 and d.shape or #d); d:copy_to(h); return h end
  -- every multiplier (below hLU's diagonal) at most 1 in magnitude, as partial pivoting makes them
  local function multipliers(hLU, n, what)
    local worst = 0
    for i = 1, n - 1 do
      for j = 0, i - 1 do local a = math.abs(hLU[i * n + j + 1]); if a > worst then worst = a end end
    end
    if not T.ok(worst <= 1, what .. ": every multiplier at most 1 (partial pivoting)") then T.diag("  largest " .. worst) end
  end
  -- the factors hLU and pivots hpiv solve A X = B through the reference's substitution
  local function factors_solve(hA, hLU, hpiv, hB, what)
    local hX = copy_of(hB)
    ref.lu_solve(hLU, hpiv, hX)
    local r = ratio(hA, hX, hB)
    if not T.ok(r <= 10, what .. ": the factors solve (reference substitution)") then T.diag("  ratio " .. r) end
  end

  -- lu on the GPU: its pivots against the reference's (when `pivots`), its factors through the
  -- reference's solve, lu_solve's, and solve's (both methods), each by the residual ratio
  local function check(what, hA, opts)
    if not T.share() then return end   -- CULUA_TEST_SHARE: another run's case
    local dt, n = hA.dtype, hA.shape[1]
    local k = opts.k or 1
    local hB = k == 1 and opts.vector and cuda.host_array(dt, n):random(11, -1, 1)
               or cuda.host_array(dt, {n, k}):random(11, -1, 1)
    local dA = device_of(hA)
    local ok, piv = pcall(cat.lu, dA, {method = opts.method, block = opts.block, panel = opts.panel})
    if not T.ok(ok, what .. ": lu") then T.diag(piv); return end
    local hLU, hpiv = to_host(dA), to_host(piv)
    if opts.pivots then
      local rLU, rpiv = copy_of(hA), cuda.host_array("int32", n)
      ref.lu(rLU, rpiv)
      local same = hpiv:bytes() == rpiv:bytes()
      if not T.ok(same, what .. ": pivots as the reference's") then
        local g, w = hpiv:totable(), rpiv:totable()
        for i = 1, n do if g[i] ~= w[i] then T.diag(("  ipiv[%d] = %d, reference %d"):format(i, g[i], w[i])); break end end
      end
    end
    factors_solve(hA, hLU, hpiv, hB, what)
    local dB = device_of(hB)
    cat.lu_solve(dA, piv, dB, {block = opts.block})
    local r = ratio(hA, to_host(dB), hB)
    if not T.ok(r <= 10, what .. ": lu_solve") then T.diag("  ratio " .. r) end
    if opts.solve ~= false then
      local dA2, dB2 = device_of(hA), device_of(hB)
      for _, m in ipairs{"lu", "seed"} do
        local X = cat.solve(dA2, dB2, {method = m, block = opts.block, panel = opts.panel})
        r = ratio(hA, to_host(X), hB)
        if not T.ok(r <= 10, what .. ": solve, method " .. m) then T.diag("  ratio " .. r) end
      end
      T.ok(to_host(dA2):bytes() == hA:bytes() and to_host(dB2):bytes() == hB:bytes(), what .. ": solve left A and B as they were")
    end
  end

  for _, dt in ipairs{"float32", "float64"} do
    local f64 = dt == "float64"
    for _, m in ipairs{"lu", "seed"} do
      check(("%s %s 1 x 1"):format(dt, m), host(dt, {{-3}}), {method = m, pivots = true, vector = true})
      check(("%s %s random 50"):format(dt, m), matrix(dt, 50, "random", 1), {method = m, pivots = true, k = 3})
      check(("%s %s random 67, block 16"):format(dt, m), matrix(dt, 67, "random", 2), {method = m, block = 16, pivots = true, k = 2, solve = false})
      check(("%s %s random 130 (2 panels and 2 columns)"):format(dt, m), matrix(dt, 130, "random", 3), {method = m, pivots = f64, k = 5})
      check(("%s %s dominant 200, rows permuted"):format(dt, m), matrix(dt, 200, "dominant", 4), {method = m, pivots = true, vector = true, solve = false})
      check(("%s %s permuted identity 150"):format(dt, m), matrix(dt, 150, "identity", 5), {method = m, pivots = true, k = 1, solve = false})
      check(("%s %s badly scaled 100"):format(dt, m), matrix(dt, 100, "scaled", 6), {method = m, pivots = f64, k = 2, solve = false})
    end
    -- (400 under racecheck and initcheck, where n = 1000 takes minutes a case: the same kernels)
    check(("%s lu random %d, block 128, 130 right-hand sides"):format(dt, N1000), matrix(dt, N1000, "random", 7),
          {block = 128, pivots = f64, k = 130, solve = false})
    check(("%s lu dominant %d"):format(dt, N1000), matrix(dt, N1000, "dominant", 8), {pivots = true, k = 1, vector = true})
    check(dt .. " lu random 333, block 1", matrix(dt, 333, "random", 9), {block = 1, pivots = f64, k = 2, solve = false})
    -- the column kernels (panel = "columns"), kept beside the fused panel
    check(dt .. " lu random 130, panel columns", matrix(dt, 130, "random", 3), {panel = "columns", pivots = f64, k = 2})
    check(dt .. " lu dominant 200, panel columns, block 16", matrix(dt, 200, "dominant", 4),
          {panel = "columns", block = 16, pivots = true, vector = true, solve = false})
  end

  -- the row swaps (laswp), which compose a panel's swaps into one permutation: against the
  -- swaps done in order on the host, for pivots that hit one row outside the panel again
  -- and again, pivots inside the panel, more than the kernel's 128 a turn, a skipped range
  -- of columns, and widths that are not whole turns of columns
  local core = require "culua.catalog.core"
  local function laswp_case(dt, rows, ncols, lo, hi, i0, i1, seed)
    if not T.share() then return end
    local x = seed
    local function rnd(k) x = (x * 1103515245 + 12345) % 2147483648; return x % k end
    local piv = {}
    for i = 0, rows - 1 do piv[i] = i + 1 end
    for i = i0, i1 - 1 do
      local kind = rnd(4)
      if kind == 0 then piv[i] = i + 1                                   -- no swap
      elseif kind == 1 then piv[i] = i + 1 + rnd(math.min(i1, rows) - i)  -- inside the panel
      elseif kind == 2 then piv[i] = rows                                -- the last row, again and again
      else piv[i] = i + 1 + rnd(rows - i) end                            -- anywhere below
    end
    local hX = cuda.host_array(dt, rows * ncols)
    local want = {}
    for e = 0, rows * ncols - 1 do want[e] = e; hX[e + 1] = e end
    for c = 0, ncols - 1 do
      if c < lo or c >= hi then
        for i = i0, i1 - 1 do
          local p = piv[i] - 1
          want[i * ncols + c], want[p * ncols + c] = want[p * ncols + c], want[i * ncols + c]
        end
      end
    end
    local hp = cuda.host_array("int32", rows)
    for i = 0, rows - 1 do hp[i + 1] = piv[i] end
    local X, ip = device_of(hX), device_of(hp)
    local dev = X.device
    local k = core.kernel("lu", "culua_solve_laswp_" .. (dt == "float32" and "f32" or "f64"), nil, dev)
    local cols = dt == "float32" and 32 or 16
    k:launch({grid = math.min(core.ceil_div(ncols - (hi - lo), cols), 7), block = 256}, ncols, ncols, lo, hi, i0, i1, ip, X)
    local got, bad = to_host(X), nil
    for e = 0, rows * ncols - 1 do if got[e + 1] ~= want[e] then bad = e; break end end
    if not T.ok(bad == nil, ("laswp %s: %d x %d, pivots %d..%d, columns %d..%d skipped"):format(dt, rows, ncols, i0, i1 - 1, lo, hi - 1)) then
      T.diag(("  element %d (row %d, column %d): %s, want %s"):format(bad, bad // ncols, bad % ncols, got[bad + 1], want[bad]))
    end
  end
  for _, dt in ipairs{"float32", "float64"} do
    laswp_case(dt, 300, 37, 0, 0, 0, 64, 1)
    laswp_case(dt, 300, 100, 10, 45, 20, 84, 2)
    laswp_case(dt, 500, 250, 0, 5, 3, 260, 3)        -- 257 pivots: three turns
    laswp_case(dt, 70, 33, 32, 33, 0, 70, 4)          -- every row a pivot, to the last
  end

  -- the fused panel with many blocks a panel (3000 rows: the grid is capped at the
  -- multiprocessors, 16 rows a block wanted): the pivots as the reference's (float64) or as
  -- the column kernels' (float32: the same arithmetic, the reference rounds otherwise),
  -- the factors through the reference's substitution and through lu_solve. Under
  -- compute-sanitizer 1500 rows (94 blocks a panel at first: still many), 700 under the
  -- slower initcheck (44 blocks), 300 under racecheck (19; the cluster panel's variants
  -- there take 2 blocks, 5 with 64 rows a block, and rows in A with 8 KiB)
  --
  -- The same for the cluster panel (compute capability 9.0), the default there with the
  -- look-ahead (the panels on a stream of their own): 3000 rows take 12 blocks; with its
  -- knobs (solve.tune) set, also clusters of 16 blocks of a few rows, blocks that keep
  -- 8 KiB of rows (the rest of the panel in A: 3000 x 128 floats are 15 rows a block in
  -- shared memory, 235 in A), the same handing panels with over a quarter of their rows
  -- in A to the fused kernel (on the look-ahead's stream), one stream (no look-ahead),
  -- a block of 128 split in two panels of 64 (LAPACK's recursive getrf2; by default a block
  -- of 128 is split, in 64s in float32 and 32s in float64 (split past 48)), and no split at all
  local tune = require("culua.catalog.solve").tune
  local clusters = cuda.device():attribute("compute_capability_major") >= 9
  -- (the fused panel keeps each warp's rows in shared memory where they fit, about 16 rows
  -- a block by default and 256 in a variant; fused_keep = false leaves them in A, as the
  -- kernel did before). Under racecheck, which takes minutes a case for a cluster of 16
  -- blocks of a few rows, 64 rows a block: 5 blocks at 300 rows (t/012 racechecks clusters
  -- of 16 blocks)
  local few = T.sanitizer == "racecheck" and 64 or 16
  local variants = {{panel = "fused"}, {panel = "fused", keep = false, label = "fused, rows in A"},
                    {panel = "fused", frows = 256, label = "fused, 256 rows a block"}}
  if clusters then
    variants[4] = {panel = "cluster"}
    variants[5] = {panel = "cluster", rows = few, label = ("cluster, %d rows a block"):format(few)}
    -- (tall = true where the rows do not fit and tall panels split, by default since session
    -- 20 whenever a row would stay in A: a matmul between the halves, as below)
    variants[6] = {panel = "cluster", bytes = 8192, spill = 1, tall = true, label = "cluster, 8 KiB of rows a block"}
    variants[7] = {panel = "cluster", nola = true, label = "cluster, no look-ahead"}
    variants[8] = {panel = "cluster", split = 64, label = "cluster, split past 64 columns"}
    variants[9] = {panel = "cluster", bytes = 8192, tall = true,
                   label = "cluster, 8 KiB of rows a block, split to 16 columns, fused past a quarter in A"}
    variants[10] = {panel = "cluster", split = 128, label = "cluster, no split (a launch a block)"}
    -- the look-ahead's step between panels as three launches (swaps, trsm, update: by the
    -- kernel in float32, by matmul's tensor cores in float64) rather than narrow_step's one,
    -- and the full-width triangular solve by the other way than the dtype's default
    -- (solve.tune.narrow and trsm)
    variants[11] = {panel = "cluster", narrow = "other", label = "cluster, narrow step in three launches, trsm the other way"}
    -- a panel whose rows the cluster cannot keep split in halves (solve.tune.tall_split, 16)
    -- until they fit: with 20000 bytes a block, 250 rows a block (3000 rows, 12 blocks) keep
    -- 73 at 64 columns and 138 at 32 (under three quarters: fused), 250 at 16 in float32
    -- (float64 takes 16 columns and the fused panel); and not split (tall_split = false):
    -- the panels of 32 and 64 columns to the fused kernel
    variants[12] = {panel = "cluster", bytes = 20000, tall = true, label = "cluster, 20000 bytes of rows a block, tall panels split"}
    variants[13] = {panel = "cluster", bytes = 8192, notall = true, label = "cluster, 8 KiB of rows a block, fused without a split"}
  else
    T.error_like(function () cat.lu(cuda.array("float32", {4, 4}):fill(1), {panel = "cluster"}) end,
                 "cuda%.catalog%.lu: panel = 'cluster' needs thread%-block clusters %(compute capability 9%.0",
                 "panel = 'cluster' refused before compute capability 9.0")
  end
  for _, dt in ipairs{"float32", "float64"} do
    local n = T.sanitizer and (T.sanitizer == "memcheck" and 1500 or T.sanitizer == "racecheck" and 300 or 700) or 3000
    local hA = matrix(dt, n, "random", 20)
    local hB = cuda.host_array(dt, {n, 2}):random(21, -1, 1)
    local rpiv
    if dt == "float64" then
      rpiv = cuda.host_array("int32", n)
      ref.lu(copy_of(hA), rpiv)
    end
    for _, nb in ipairs{32, 128} do
     for _, v in ipairs(variants) do
      if T.share() then
        local what = ("%s lu random %d, block %d, %s panel"):format(dt, n, nb, v.label or v.panel)
        local dA = device_of(hA)
        local saved = {}
        for key, val in pairs(tune) do saved[key] = val end
        tune.cluster_rows, tune.cluster_bytes, tune.lookahead = v.rows or saved.cluster_rows, v.bytes, not v.nola
        tune.split_at, tune.cluster_spill = v.split or tune.split_at, v.spill or tune.cluster_spill
        tune.fused_keep, tune.fused_rows = v.keep ~= false, v.frows or tune.fused_rows
        if v.notall then tune.tall_split = false end
        if v.narrow then
          tune.narrow, tune.trsm = dt == "float64" and "matmul" or "kernel", dt == "float64" and "kernel" or "product"
        end
        local ok, piv = pcall(cat.lu, dA, {block = nb, panel = v.panel})
        for key in pairs(tune) do tune[key] = saved[key] end
        if not ok then error(piv, 0) end
        local hpiv = to_host(piv)
        -- float32 against the column kernels, which do the same arithmetic: not when the block
        -- is split in halves (by default past 64 columns), where a matmul between the halves
        -- rounds otherwise than the panel's rank-1 updates, and a near tie may go to another
        -- row (session 11: ipiv[1852] 1991 against 1968): then every multiplier is at most 1
        -- in magnitude, as partial pivoting makes them, and the residuals below check the rest
        -- (likewise when float32's triangular solve is a product through matmul, which sums
        -- otherwise, and when tall panels are split)
        local split = v.panel == "cluster" and (nb > (v.split or tune.split_at or (dt == "float32" and 64 or 48))
                                                or v.narrow and dt == "float32" or v.tall)
        local want = rpiv or not split and to_host(cat.lu(device_of(hA), {block = nb, panel = "columns"}))
        if not want then
          multipliers(to_host(dA), n, what)
        elseif not T.ok(hpiv:bytes() == want:bytes(), what .. ": pivots as the " .. (rpiv and "reference's" or "column kernels'")) then
          local g, w = hpiv:totable(), want:totable()
          for i = 1, n do if g[i] ~= w[i] then T.diag(("  ipiv[%d] = %d, want %d"):format(i, g[i], w[i])); break end end
        end
        factors_solve(hA, to_host(dA), hpiv, hB, what)
        local dB = device_of(hB)
        cat.lu_solve(dA, piv, dB, {block = nb})
        local r = ratio(hA, to_host(dB), hB)
        if not T.ok(r <= 10, what .. ": lu_solve") then T.diag("  ratio " .. r) end
      end
     end
    end
  end
  -- the block row in one launch (block_row: the swaps, then the triangular solve in shared
  -- memory; solve.tune.trsm "fused", or nil in the dtypes fused_from names): the factors and
  -- pivots the same bits as with laswp and trsm's kernel (trsm = "kernel"), which it solves
  -- as: with the look-ahead (the cluster panel) and without, blocks of 37 (n not a multiple)
  -- and 128, float32 and float64
  for _, dt in ipairs{"float32", "float64"} do
    local n = T.sanitizer and 300 or 1500
    local hA = matrix(dt, n, "random", 24)
    local cases = {{panel = "fused"}}
    if clusters then cases[2] = {panel = "cluster"} end
    -- the factors' and the pivots' bytes with solve.tune.trsm = way
    local function bytes(way, opts)
      local dA = device_of(hA)
      tune.trsm = way
      local ok, piv = pcall(cat.lu, dA, opts)
      tune.trsm = nil
      if not ok then error(piv, 0) end
      return to_host(dA):bytes() .. to_host(piv):bytes()
    end
    for _, c in ipairs(cases) do
      for _, nb in ipairs{37, 128} do
        local opts = {block = nb, panel = c.panel}
        if T.share() then
          T.ok(bytes("fused", opts) == bytes("kernel", opts),
               ("%s lu random %d, block %d, %s panel: block_row's factors and pivots as laswp and trsm's"):format(dt,
                n, nb, c.panel))
        end
        -- the several-GPU LU's (two shares of GPU 0, and GPUs 0 and 1 where there are two)
        if c.panel == "fused" and T.share() then
          for _, devs in ipairs(cuda.device_count() > 1 and {{0, 0}, {0, 1}} or {{0, 0}}) do
            opts.devices = devs
            T.ok(bytes("fused", opts) == bytes("kernel", opts),
                 ("%s lu random %d, block %d, devices {%s}: block_row's factors and pivots as laswp and trsm's"):format(
                  dt, n, nb, table.concat(devs, ", ")))
          end
        end
      end
    end
  end
  -- the default block tapered (solve.tune.wide_from, taper): 128 at first, 64 once half the
  -- columns are left (here from column 1536 of 3000, the last block 56 wide), through lu and
  -- through solve; float64's pivots against the reference's, float32's multipliers at most 1
  -- (its blocks are split in halves, as above)
  if clusters then
    for _, dt in ipairs{"float32", "float64"} do
      local n = T.sanitizer and (T.sanitizer == "memcheck" and 1500 or T.sanitizer == "racecheck" and 300 or 700) or 3000
      if T.share() then
        local what = ("%s lu random %d, the default block 128 tapered to 64"):format(dt, n)
        local hA = matrix(dt, n, "random", 22)
        local hB = cuda.host_array(dt, {n, 2}):random(23, -1, 1)
        local saved_wide, saved_taper = tune.wide_from, tune.taper
        tune.wide_from, tune.taper = {float32 = 1, float64 = 1}, {float32 = n // 2, float64 = n // 2}
        local dA = device_of(hA)
        local ok, piv, info = pcall(cat.lu, dA)
        local ok2, X, _, sinfo = pcall(cat.solve, device_of(hA), device_of(hB))
        local ok3, err3, einfo = pcall(cat.lu, device_of(hA), {block = 128})
        tune.wide_from, tune.taper = saved_wide, saved_taper
        if not ok3 then error(err3, 0) end
        T.ok(einfo.block == 128 and einfo.narrow_columns == nil, what .. ": an explicit block 128 holds throughout")
        if not ok then error(piv, 0) end
        if not ok2 then error(X, 0) end
        -- blocks of 128 while more than n // 2 columns are left: the first of 64 at the first
        -- multiple of 128 past n - n // 2
        local narrow = n - (n - n // 2 + 127) // 128 * 128
        T.ok(info.block == 128 and info.narrow_columns == narrow and sinfo.block == 128 and sinfo.narrow_columns == narrow,
             ("%s: info says block 128, the last %d columns in 64s (lu: %s, %s; solve: %s, %s)"):format(what, narrow,
             info.block, info.narrow_columns, sinfo.block, sinfo.narrow_columns))
        local hpiv = to_host(piv)
        if dt == "float64" then
          local rpiv = cuda.host_array("int32", n)
          ref.lu(copy_of(hA), rpiv)
          T.ok(hpiv:bytes() == rpiv:bytes(), what .. ": pivots as the reference's")
        else
          multipliers(to_host(dA), n, what)
        end
        factors_solve(hA, to_host(dA), hpiv, hB, what)
        local r = ratio(hA, to_host(X), hB)
        if not T.ok(r <= 10, what .. ": solve") then T.diag("  ratio " .. r) end
      end
    end
  end

  -- 4096 in float64: the ratio only (the C reference's LU would take a while); not under
  -- compute-sanitizer, where it takes minutes (the kernels are those of the 3000 cases)
  if T.sanitizer then
    T.skip("4096 under compute-sanitizer " .. T.sanitizer .. ": the 3000 cases run the same kernels", 2)
  else
    local n = 4096
    local hA = matrix("float64", n, "random", 10)
    local hB = cuda.host_array("float64", {n, 2}):random(12, -1, 1)
    local X, piv = cat.solve(device_of(hA), device_of(hB))
    local r = ratio(hA, to_host(X), hB)
    if not T.ok(r <= 10, "float64 lu random 4096: solve") then T.diag("  ratio " .. r) end
    T.is(#piv, n, "  ipiv has n elements")
  end

  -- views: A a view inside a larger array (the elements around it untouched), B a vector view
  for _, dt in ipairs{"float32", "float64"} do
    local n = 70
    local hA = matrix(dt, n, "random", 13)
    local big = cuda.array(dt, n * n + 10):fill(-7.5)
    local A = big:view(4, n * n)
    A:copy_from(hA)
    local hb = cuda.host_array(dt, n):random(14, -1, 1)
    local bbig = cuda.array(dt, n + 6):fill(-7.5)
    local b = bbig:view(3, n)
    b:copy_from(hb)
    local piv = cat.lu(A)
    cat.lu_solve(A, piv, b)
    local r = ratio(hA, to_host(b), hb)
    T.ok(r <= 10, dt .. ": lu and lu_solve on views") 
    local hbig, hbb = to_host(big), to_host(bbig)
    T.ok(hbig[1] == -7.5 and hbig[3] == -7.5 and hbig[n * n + 4] == -7.5 and hbig[n * n + 10] == -7.5, "  around A untouched")
    T.ok(hbb[1] == -7.5 and hbb[2] == -7.5 and hbb[n + 3] == -7.5 and hbb[n + 6] == -7.5, "  around b untouched")
  end

  -- lu_solve's two ways: by substitution (a launch a triangle, kernels/triangular.cu's
  -- substitutions) up to solve.tune.trsv_max (16) right-hand sides, by blocks (trsm and
  -- matmul) past it. Sizes around the substitutions' 64 rows a block (1; 33 and 64: one
  -- block; 1000: a last block of 40 rows; 4097: of 1 row, 65 blocks), k = 1 as a vector
  -- (the one-column kernels) and as n x 1, 3 (a column group short), 5 (two groups), 16
  -- (four: the most substituted), 17 (the first by blocks); and each way on the other's
  -- ground: k = 3 by blocks (trsv_max = 0), k = 17 by substitution (five groups). One
  -- factorization a size and dtype, each solve against A by the residual ratio. Under
  -- compute-sanitizer 1025 for 4097 (a last block of 1 row; the factorization takes minutes)
  -- and N1000 for 1000 (400: a last block of 16 rows); under racecheck, where the blocks'
  -- waits on each other's counters take minutes at 1025 rows, 129 (a last block of 1 row,
  -- three blocks) and 232 (a last block of 40 rows)
  local tune_solve = require("culua.catalog.solve").tune
  local trsv_sizes = T.sanitizer == "racecheck" and {1, 33, 64, 232, 129}
                     or {1, 33, 64, N1000, T.sanitizer and 1025 or 4097}
  for _, dt in ipairs{"float32", "float64"} do
    for _, n in ipairs(trsv_sizes) do
      if T.share() then
        local hA = matrix(dt, n, "random", 50 + n % 7)
        local dA = device_of(hA)
        local piv = cat.lu(dA)
        for _, c in ipairs{{k = 1, vector = true}, {k = 1}, {k = 3}, {k = 5}, {k = 16}, {k = 17},
                           {k = 3, max = 0}, {k = 17, max = 64}} do
          local k, max = c.k, c.max or tune_solve.trsv_max
          local hB = c.vector and cuda.host_array(dt, n):random(60 + k, -1, 1)
                     or cuda.host_array(dt, {n, k}):random(60 + k, -1, 1)
          local dB = device_of(hB)
          local saved = tune_solve.trsv_max
          tune_solve.trsv_max = max
          local ok, err = pcall(cat.lu_solve, dA, piv, dB)
          tune_solve.trsv_max = saved
          local what = ("%s lu_solve n = %d, k = %d%s, by %s"):format(dt, n, k, c.vector and " (a vector)" or "",
                                                                   k <= max and "substitution" or "blocks")
          local r = ok and ratio(hA, to_host(dB), hB)
          if not T.ok(ok and r <= 10, what) then T.diag(ok and ("  ratio " .. r) or err) end
        end
      end
    end
  end
  -- the substitutions leave their tickets and counters at zero (the next launch needs them so:
  -- else it would wait for ever), on the default stream and on a stream of its own, two calls
  -- in a row each
  do
    local core = require "culua.catalog.core"
    local n = 200
    local hA = matrix("float64", n, "random", 70)
    local dA = device_of(hA)
    local piv = cat.lu(dA)
    local s = cuda.stream()
    collectgarbage("stop")   -- the default stream's scratch is kept weakly: keep it for the read
    for _, st in ipairs{false, s} do
      local ok = true
      for rep = 1, 2 do
        local hB = cuda.host_array("float64", {n, 6}):random(71 + rep, -1, 1)
        local dB = device_of(hB)
        cat.lu_solve(dA, piv, dB, {stream = st or nil})
        if st then st:synchronize() end
        ok = ok and ratio(hA, to_host(dB), hB) <= 10
      end
      local words = to_host(core.scratch("solve_trsv", cuda.device(), st or nil, 1))
      local zero = true
      for i = 1, #words do zero = zero and words[i] == 0 end
      T.ok(ok and zero, ("lu_solve twice %s: solved, the substitutions' %d words back at zero"):format(
        st and "on a stream" or "on the default stream", #words))
    end
    collectgarbage("restart")
  end

  -- a stream; overwrite
  do
    local s = cuda.stream()
    local hA, hB = matrix("float32", 90, "random", 15), cuda.host_array("float32", {90, 4}):random(16, -1, 1)
    local dA, dB = device_of(hA), device_of(hB)
    local X = cat.solve(dA, dB, {stream = s, overwrite = true})
    s:synchronize()
    T.ok(rawequal(X, dB), "overwrite: X is B")
    T.ok(ratio(hA, to_host(dB), hB) <= 10, "  on a stream, solved in place")
    T.ok(to_host(dA):bytes() ~= hA:bytes(), "  A holds the factors")
  end

  -- singular and non-finite inputs
  for _, dt in ipairs{"float32", "float64"} do
    for _, m in ipairs{"lu", "seed"} do
      T.error_like(function () cat.lu(device_of(host(dt, {{1, 2}, {2, 4}})), {method = m}) end,
                   "^[^\n]*030%-solve%.t:%d+: cuda%.catalog%.lu: the matrix is singular: pivot 2 is zero",
                   dt .. " " .. m .. ": 2 x 2 singular")
      local h = matrix(dt, 100, "random", 17)
      for i = 1, 100 do h[(i - 1) * 100 + 38] = 0 end
      T.error_like(function () cat.lu(device_of(h), {method = m, block = 32}) end,
                   "cuda%.catalog%.lu: the matrix is singular: pivot 38 is zero", dt .. " " .. m .. ": a zero column")
      T.error_like(function () cat.solve(device_of(h), cuda.array(dt, 100):fill(1), {method = m}) end,
                   "cuda%.catalog%.solve: the matrix is singular: pivot 38 is zero", dt .. " " .. m .. ": solve refuses it too")
      for _, bad in ipairs{0 / 0, math.huge} do
        local hb = matrix(dt, 20, "random", 18)
        hb[55] = bad
        local d = device_of(hb)
        T.error_like(function () cat.lu(d, {method = m}) end, "cuda%.catalog%.lu: A contains NaN or inf", dt .. " " .. m .. ": " .. tostring(bad) .. " refused")
        T.ok(to_host(d):bytes() == hb:bytes(), "  A untouched")
      end
    end
    local B = cuda.array(dt, 4):fill(0 / 0)
    T.error_like(function () cat.solve(device_of(matrix(dt, 4, "random", 19)), B) end, "solve: B contains NaN or inf", dt .. ": a NaN in B")
  end

  -- several GPUs (devices = {...}): each entry a share of the columns, so {0, 0} runs the
  -- whole distribution on one GPU; peer = false stages every transfer through pinned host
  -- memory. Against the one-device run: the same pivots, the factors within a few eps of
  -- its (the same arithmetic, whatever gemm_sub does), the residual ratio below 10, the
  -- info result saying how the data travelled, and its growth (growth = true) as one device's.
  local function max_diff(h1, h2)
    local a, b = h1:totable(), h2:totable()
    local d, m = 0, 0
    for i = 1, #a do
      local x, y = a[i], b[i]
      if type(x) == "table" then
        for j = 1, #x do d = math.max(d, math.abs(x[j] - y[j])); m = math.max(m, math.abs(x[j])) end
      else d = math.max(d, math.abs(x - y)); m = math.max(m, math.abs(x)) end
    end
    return d, m
  end
  local function multi(dt, n, opts, devices, peer, want_transfer)
    if not T.share() then return end
    local what = ("%s %s %d, block %s%s, devices {%s}%s"):format(dt, opts.method or "lu", n, opts.block or "default",
      opts.panel and (", panel " .. opts.panel) or "", table.concat(devices, ", "), peer == false and ", peer = false" or "")
    local hA = matrix(dt, n, "random", 40 + n)
    local hB = cuda.host_array(dt, {n, 2}):random(41, -1, 1)
    local one = {method = opts.method, block = opts.block, panel = opts.panel, growth = true}
    local many = {method = opts.method, block = opts.block, panel = opts.panel, devices = devices, peer = peer, growth = true}
    local A1, A2 = device_of(hA), device_of(hA)
    -- (the one-device run splits its cluster panels as the several-GPU run does: lu.lua's
    -- split_width, the same on one GPU and several since session 21)
    local p1, info1 = cat.lu(A1, one)
    local ok, p2, info = pcall(cat.lu, A2, many)
    if not T.ok(ok, what .. ": lu") then T.diag(p2); return end
    local hp1, hp2 = to_host(p1), to_host(p2)
    if not T.ok(hp1:bytes() == hp2:bytes(), what .. ": pivots as one device's") then
      local g, w = hp2:totable(), hp1:totable()
      for i = 1, n do if g[i] ~= w[i] then T.diag(("  ipiv[%d] = %d, one device %d"):format(i, g[i], w[i])); break end end
    end
    local d, m = max_diff(to_host(A1), to_host(A2))
    if not T.ok(d <= 64 * EPS[dt] * math.max(m, 1), what .. ": factors as one device's") then T.diag("  max difference " .. d) end
    local hX = copy_of(hB)
    ref.lu_solve(to_host(A2), hp2, hX)
    local r = ratio(hA, hX, hB)
    if not T.ok(r <= 10, what .. ": the factors solve") then T.diag("  ratio " .. r) end
    T.is_deeply(info.devices, devices, what .. ": info.devices")
    T.is(info.transfer, want_transfer, what .. ": info.transfer")
    if not T.ok(math.abs(info.growth - info1.growth) <= 64 * EPS[dt] * info1.growth, what .. ": info.growth as one device's") then
      T.diag(("  growth %.9g, one device %.9g"):format(info.growth, info1.growth))
    end
    -- solve, spread the same way (the seed's Gauss-Jordan measures no growth)
    many.growth = opts.method ~= "seed" or nil
    local dA, dB = device_of(hA), device_of(hB)
    local X, sp, sinfo = cat.solve(dA, dB, many)
    r = ratio(hA, to_host(X), hB)
    if not T.ok(r <= 10, what .. ": solve") then T.diag("  ratio " .. r) end
    if opts.method ~= "seed" then T.ok(to_host(sp):bytes() == hp1:bytes(), what .. ": solve's pivots as one device's") end
    T.is(sinfo.transfer, want_transfer, what .. ": solve's info.transfer")
    if many.growth then
      T.ok(math.abs(sinfo.growth - info1.growth) <= 64 * EPS[dt] * info1.growth, what .. ": solve's info.growth as one device's")
    end
    T.ok(to_host(dA):bytes() == hA:bytes() and to_host(dB):bytes() == hB:bytes(), what .. ": solve left A and B as they were")
  end
  do
    local p, info = cat.lu(device_of(matrix("float32", 10, "random", 1)), {devices = {0}})
    T.is(info.transfer, "local", "devices = {0}, the arrays' device: one GPU, info.transfer local")
    T.is_deeply(info.devices, {0}, "  info.devices")
    p = nil
    local _, _, sinfo = cat.solve(device_of(matrix("float64", 10, "random", 1)), cuda.array("float64", 10):fill(1))
    T.is(sinfo.transfer, "local", "solve without devices: info.transfer local")
  end
  for _, dt in ipairs{"float32", "float64"} do
    multi(dt, 200, {block = 64}, {0, 0}, nil, "local")
    multi(dt, 200, {block = 64}, {0, 0}, false, "host")
    multi(dt, 130, {block = 16}, {0, 0, 0}, nil, "local")
    multi(dt, 130, {block = 16}, {0, 0, 0}, false, "host")
    multi(dt, 333, {block = 32, panel = "columns"}, {0, 0, 0}, nil, "local")
    multi(dt, 100, {block = 8}, {0, 0, 0, 0, 0}, nil, "local")
    multi(dt, 50, {}, {0, 0}, nil, "local")                       -- one panel: one share works
    multi(dt, N1000, {block = 128}, {0, 0}, nil, "local")
    multi(dt, 90, {method = "seed"}, {0, 0}, nil, "local")
    multi(dt, 67, {method = "seed"}, {0, 0, 0}, false, "host")
  end
  -- singular, on shares: the first zero pivot, whichever share found it
  do
    local h = matrix("float64", 100, "random", 17)
    for i = 1, 100 do h[(i - 1) * 100 + 38] = 0 end
    for _, m in ipairs{"lu", "seed"} do
      T.error_like(function () cat.lu(device_of(h), {method = m, block = 16, devices = {0, 0, 0}}) end,
                   "cuda%.catalog%.lu: the matrix is singular: pivot 38 is zero", m .. " on shares {0, 0, 0}: a zero column")
    end
  end
  -- two GPUs: peer copies where the pair allows (else the host, said in info.transfer), and the host forced
  if cuda.device_count() < 2 then
    T.skip("one GPU: the {0, 1} cases need two", 1)
  else
    local want = cuda.device(0):can_access_peer(cuda.device(1)) and cuda.device(1):can_access_peer(cuda.device(0)) and "peer" or "host"
    for _, dt in ipairs{"float32", "float64"} do
      multi(dt, 1000, {block = 64}, {0, 1}, nil, want)
      multi(dt, 333, {block = 32}, {1, 0}, false, "host")
      multi(dt, 130, {method = "seed"}, {0, 1}, nil, want)
      multi(dt, 200, {block = 16}, {1}, nil, want)                 -- the work on device 1 alone
    end
  end

  -- growth = true: info.growth = max|U| / max|A|. Wilkinson's matrix (1 on the diagonal, -1
  -- below it, 1 in the last column) grows by exactly 2^(n-1) under partial pivoting (every
  -- pivot a tie that the diagonal wins, as LAPACK's first-row rule has it; U's last column
  -- doubles a row); a permuted identity by 1; random matrices as the reference's factors
  -- do, within n eps. Every method and panel, several panels (block 8), shares of one
  -- GPU, and solve; the factors and pivots unchanged by the option.
  local function ref_growth(hA)
    local n = hA.shape[1]
    local LU, p = copy_of(hA), cuda.host_array("int32", n)
    ref.lu(LU, p)
    local a, u = 0, 0
    for i = 1, n do
      for j = 1, n do
        a = math.max(a, math.abs(hA[(i - 1) * n + j]))
        if j >= i then u = math.max(u, math.abs(LU[(i - 1) * n + j])) end
      end
    end
    return u / a
  end
  local function wilkinson(dt, n)
    local h = cuda.host_array(dt, {n, n}):fill(0)
    for i = 1, n do
      for j = 1, i - 1 do h[(i - 1) * n + j] = -1 end
      h[(i - 1) * n + i] = 1
      h[(i - 1) * n + n] = 1
    end
    return h
  end
  for _, dt in ipairs{"float32", "float64"} do
    for _, o in ipairs{{}, {block = 8}, {block = 8, panel = "columns"}, {block = 8, panel = "fused"},
                       {method = "seed"}, {block = 8, devices = {0, 0}}} do
      local what = ("%s growth, %s"):format(dt, o.method or ("block " .. (o.block or "default") ..
        (o.panel and (", panel " .. o.panel) or "") .. (o.devices and ", devices {0, 0}" or "")))
      local opts = {growth = true, method = o.method, block = o.block, panel = o.panel, devices = o.devices}
      local _, info = cat.lu(device_of(wilkinson(dt, 24)), opts)
      T.is(info.growth, 2.0 ^ 23, what .. ": Wilkinson's 24 x 24 grows by 2^23")
      _, info = cat.lu(device_of(matrix(dt, 40, "identity", 21)), opts)
      T.is(info.growth, 1.0, what .. ": a permuted identity by 1")
      local hA = matrix(dt, 150, "random", 22)
      local dA, dB = device_of(hA), device_of(hA)
      local p1 = cat.lu(dA, {method = o.method, block = o.block, panel = o.panel, devices = o.devices})
      local p2
      p2, info = cat.lu(dB, opts)
      local want = ref_growth(hA)
      if not T.ok(math.abs(info.growth - want) <= 150 * EPS[dt] * want, what .. ": random 150 x 150 as the reference's") then
        T.diag(("  growth %.17g, reference %.17g"):format(info.growth, want))
      end
      local d, m = max_diff(to_host(dA), to_host(dB))
      T.ok(to_host(p1):bytes() == to_host(p2):bytes() and d <= 64 * EPS[dt] * math.max(m, 1),
           what .. ": the factors and pivots as without it")
    end
    local hA, hB = matrix(dt, 150, "random", 22), cuda.host_array(dt, {150, 2}):random(23, -1, 1)
    local want = ref_growth(hA)
    for _, ow in ipairs{false, true} do
      local X, _, info = cat.solve(device_of(hA), device_of(hB), {growth = true, overwrite = ow})
      T.ok(math.abs(info.growth - want) <= 150 * EPS[dt] * want and ratio(hA, to_host(X), hB) <= 10,
           ("%s solve, growth%s: as lu's, and solved"):format(dt, ow and ", overwrite" or ""))
    end
    local _, info = cat.lu(device_of(matrix(dt, 150, "random", 22)))
    T.is(info.growth, nil, dt .. ": no growth unless asked")
  end
  T.error_like(function () cat.solve(device_of(matrix("float32", 4, "random", 1)), cuda.array("float32", 4):fill(1),
                                     {method = "seed", growth = true}) end,
               "cuda%.catalog%.solve: growth needs method lu: the seed's Gauss%-Jordan keeps no U to measure",
               "solve: growth with method seed refused")

  -- lu_solve's permutation (the swaps replayed in order, the pivots prefetched to shared
  -- memory): against the reference's, on factors with a large diagonal (well conditioned),
  -- with pivots that chain (the last row every time, the next row every time), repeat, and
  -- go above their row (as getrs takes them and no LU makes them) in rows 129..256 or all
  do
    local n = 300
    local hLU = cuda.host_array("float32", {n, n}):random(41, -1, 1)
    for i = 1, n do hLU[(i - 1) * n + i] = n + 1.0 end
    local hb = cuda.host_array("float32", {n, 2}):random(42, -1, 1)
    local r = cuda.host_array("int64", n):random(43, 0, 1 << 30)
    local patterns = {
      {"the last row every time", function (i) return n end},
      {"the next row every time", function (i) return math.min(i + 1, n) end},
      {"random at or below the row", function (i) return i + r[i] % (n - i + 1) end},
      {"one of 3 rows past each 128", function (i) return math.min(n, (i - 1) // 128 * 128 + 129 + r[i] % 3) end},
      {"above the row in rows 129..256", function (i) return (i > 128 and i <= 256) and r[i] % n + 1 or i end},
      {"anywhere in 1..n", function (i) return r[i] % n + 1 end},
    }
    local dLU = device_of(hLU)
    for _, pat in ipairs(patterns) do
      local hpiv = cuda.host_array("int32", n)
      for i = 1, n do hpiv[i] = pat[2](i) end
      local want = copy_of(hb)
      cat.reference.lu_solve(hLU, hpiv, want)
      local got = to_host(cat.lu_solve(dLU, device_of(hpiv), device_of(hb)))
      local worst = 0
      for e = 1, 2 * n do worst = math.max(worst, math.abs(got[e] - want[e]) / math.max(1e-3, math.abs(want[e]))) end
      if not T.ok(worst < 1e-4, "lu_solve, pivots " .. pat[1] .. ": X as the reference's") then
        T.diag("  largest relative difference " .. worst)
      end
    end
  end

  -- the permutation's rows in shared memory, at the sizes about the 48 KB a launch gets
  -- without opting in (with the kernel's own 8 KB, n = 10241..12288 once failed to launch),
  -- with A the identity (L = U = I): X = P B exactly, the swaps applied in order here
  for _, n in ipairs{10240, 10241, 12288, 12289} do
    local hI = cuda.host_array("float32", {n, n}):fill(0)
    for i = 1, n do hI[(i - 1) * n + i] = 1 end
    local dI = device_of(hI)
    hI = nil
    local r = cuda.host_array("int64", n):random(44 + n, 0, 1 << 30)
    local hpiv, hb = cuda.host_array("int32", n), cuda.host_array("float32", n)
    for i = 1, n do hpiv[i] = i + r[i] % (n - i + 1); hb[i] = i end
    local want = copy_of(hb)
    for i = 1, n do local p = hpiv[i]; want[i], want[p] = want[p], want[i] end
    local ok, got = pcall(function () return to_host(cat.lu_solve(dI, device_of(hpiv), device_of(hb))) end)
    local bad = 0
    if ok then for i = 1, n do if got[i] ~= want[i] then bad = bad + 1 end end end
    if not T.ok(ok and bad == 0, ("lu_solve's permutation at n = %d: X = P B exactly"):format(n)) then
      T.diag(ok and ("  %d rows differ"):format(bad) or ("  " .. tostring(got)))
    end
    dI:close()
    collectgarbage()
  end

  -- bad arguments
  local A = cuda.array("float32", {4, 4}):fill(1)
  for _, c in ipairs{
    {function () cat.lu(cuda.array("int32", {2, 2})) end, "lu: A has dtype int32; expected one of float32, float64"},
    {function () cat.lu(cuda.array("float32", {2, 3})) end, "lu: A must be square, got 2x3"},
    {function () cat.lu(cuda.array("float32", 5)) end, "lu: A is 1%-D with 5 elements, not a square number"},
    {function () cat.lu(A, {method = "qr"}) end, "lu: method must be one of lu, seed, got qr"},
    {function () cat.lu(A, {block = 0}) end, "lu: block must be an integer 1..128, got 0"},
    {function () cat.lu(A, {block = 256}) end, "lu: block must be an integer 1..128, got 256"},
    {function () cat.lu(A, {panel = "rows"}) end, "lu: panel must be one of auto, cluster, fused, columns, got rows"},
    {function () cat.solve(A, cuda.array("float32", 4), {panel = 1}) end, "solve: panel must be one of auto, cluster, fused, columns"},
    {function () cat.lu(A, {stream = 3}) end, "lu: stream must be a cuda.stream, got number"},
    {function () cat.solve(A, cuda.array("float32", {3, 2})) end, "solve: B is 3x2 but A is 4x4: B must have 4 rows"},
    {function () cat.solve(A, cuda.array("float32", 6)) end, "solve: B is 1%-D with 6 elements, not a multiple of n = 4"},
    {function () cat.solve(A, cuda.array("float64", 4)) end, "solve: B has dtype float64 but A has float32"},
    {function () cat.solve(A, cuda.array("float32", 4), {overwrite = 1}) end, "solve: overwrite must be a boolean, got number"},
    {function () cat.lu_solve(A, cuda.array("int64", 4), cuda.array("float32", 4)) end, "lu_solve: ipiv has dtype int64; expected int32"},
    {function () cat.lu_solve(A, cuda.array("int32", 3), cuda.array("float32", 4)) end, "lu_solve: ipiv has 3 elements, fewer than n = 4"},
    {function () cat.lu_solve(A, nil, cuda.array("float32", 4)) end, "lu_solve: ipiv must be a cuda.array, got nil"},
    -- pivots outside 1..n (the permutation would reach rows outside B): the first is named
    {function () cat.lu_solve(A, cuda.array("int32", 4):copy_from{1, 2, 0, 4}, cuda.array("float32", 4):fill(1)) end,
     "lu_solve: ipiv%[3%] = 0 is out of 1%.%.4"},
    {function () cat.lu_solve(A, cuda.array("int32", 4):copy_from{2, 5, -1, 4}, cuda.array("float32", 4):fill(1)) end,
     "lu_solve: ipiv%[2%] = 5 is out of 1%.%.4"},
    {function () cat.lu_solve(A, cuda.array("int32", 5):copy_from{1, 2, 3, 4, 9}, cuda.array("float32", 4):fill(0 / 0)) end,
     "lu_solve: B contains NaN or inf"},
    {function () cat.lu_solve(A, cuda.array("int32", 4):copy_from{1, 2, 3, 7}, cuda.array("float32", 4):fill(0 / 0)) end,
     "lu_solve: ipiv%[4%] = 7 is out of 1%.%.4"},
  } do
    T.error_like(c[1], "cuda%.catalog%." .. c[2], c[2]:gsub("%%", ""))
  end
  do   -- and after them, lu_solve is right again (the status word was cleared)
    local h = cuda.host_array("float32", {4, 4}):copy_from{4, 1, 0, 0, 1, 4, 1, 0, 0, 1, 4, 1, 0, 0, 1, 4}
    local M = cuda.array("float32", {4, 4}):copy_from(h)
    local piv = cat.lu(M)
    local x = cat.lu_solve(M, piv, cuda.array("float32", 4):copy_from{5, 6, 6, 5}):totable()
    local err = 0
    for i = 1, 4 do err = math.max(err, math.abs(x[i] - 1)) end
    T.ok(err < 1e-5, "lu_solve after refused pivots: A x = b solved (x all ones)")
  end
  local closed = cuda.array("float32", {4, 4})
  closed:close()
  T.error_like(function () cat.lu(closed) end, "closed cuda%.array", "lu: a closed array")
  T.error_like(function () cat.solve(A, closed) end, "closed cuda%.array", "solve: a closed B")
end

T.gpu_part(gpu_tests, "the GPU half of the solve tests")

-- }======================================================

T.done_testing()
