-- cuda.catalog.lu and solve with devices = {...}, without a GPU: the solve family's own
-- several-GPU drivers (lua/catalog/lu_multi.lua: block-cyclic LU with look-ahead; seed.lua:
-- the seed's P2P elimination) run on a mock of cuda and the catalog core (t/solve-mock.lua)
-- whose kernels are plain Lua (each checked to be in the kernel file the family asks for) and
-- whose streams run in the order the work is queued (a valid order, since every wait is on an
-- event recorded before it).
-- The pivots, factors and solutions must equal the one-device run's, over shares of one
-- device, three devices with and without peer access, peer = false, more shares than panels,
-- and odd sizes, and on a device with clusters (the cluster panel, the look-ahead, blocks
-- split in halves, tall panels split further). This checks the indexing and the data each
-- share gets; the GPU runs in t/030-solve.t check the streams and events. Also lu_solve's two
-- ways (by substitution up to solve.tune.trsv_max right-hand sides, by blocks past it)
-- against each other, with their launches counted.
local T = require "culua.tap"
T.mock_file()
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local mock = dofile(srcdir .. "/t/solve-mock.lua")
local M, cuda, K, device, st = mock.M, mock.cuda, mock.K, mock.device, mock.st
local rand_matrix, mkA, differ = mock.rand_matrix, mock.mkA, mock.differ

local function check(n, nb, devices, method, peer)
  local t = rand_matrix(n, n * 7 + nb)
  local A1 = mkA(n, t)
  local p1 = M.lu(A1, {block = nb, method = method})
  local A2 = mkA(n, t)
  local p2, info = M.lu(A2, {block = nb, devices = devices, method = method, peer = peer, growth = true})
  local bad = differ(n, p1, A1, p2, A2)
  -- growth = true: max|U| / max|A|, measured on A's device after the shares sent the factors back
  local u, a = 0, 0
  for i = 0, n - 1 do for j = 0, n - 1 do
    a = math.max(a, math.abs(t[i * n + j]))
    if j >= i then u = math.max(u, math.abs(A1.data[i * n + j])) end
  end end
  if math.abs(info.growth - u / a) > 1e-12 * u / a then bad = (bad or "") .. (" growth %.17g, want %.17g"):format(info.growth, u / a) end
  -- solve
  local B = cuda.array("float64", {n, 2}, {device = 0})
  for i = 0, 2 * n - 1 do B.data[i] = (i % 7) / 7 - 0.3 end
  local A3 = mkA(n, t)
  local X1 = M.solve(A3, B, {block = nb, method = method})
  local X2, _, sinfo = M.solve(A3, B, {block = nb, method = method, devices = devices, peer = peer})
  local dx = 0
  for i = 0, 2 * n - 1 do dx = math.max(dx, math.abs(X1.data[i] - X2.data[i])) end
  if dx > 1e-8 then bad = (bad or "") .. " solve differs by " .. dx end
  local what = ("n %d nb %d devices {%s} %s peer %s: transfer %s/%s shares %d"):format(n, nb, table.concat(devices, ","), method, tostring(peer), info.transfer, sinfo.transfer, info.shares)
  if not T.ok(not bad, what) then T.diag(bad) end
end
for _, peer in ipairs{true, false} do
st.peer = peer
T.diag(peer and "devices with peer access" or "devices without peer access")
for _, m in ipairs{"lu", "seed"} do
  check(13, 4, {0, 0}, m)
  check(13, 4, {0, 0, 0}, m, false)
  check(20, 3, {0, 1, 2}, m)
  check(20, 3, {1, 0}, m, false)
  check(17, 5, {2}, m)
  check(9, 16, {0, 1}, m)
  check(25, 2, {0, 1, 0, 2, 1}, m)
  check(6, 1, {0, 1, 2, 0, 1, 2, 0, 1}, m)
end
end
-- the first distribution to a peer in one chunk (start_chunks = 1) and in two, against the
-- default's (as many chunks as the share has panels here): the first step takes each chunk's
-- swaps and update in turn, and the first chunk holds the columns Q works on
T.diag("the first distribution to a peer in one chunk and in two")
st.peer = true
for _, c in ipairs{1, 2} do
  M.tune.start_chunks = c
  check(20, 3, {0, 1, 2}, "lu")
  check(23, 2, {1, 2}, "lu")
  check(17, 5, {2}, "lu")
end
M.tune.start_chunks = 8
-- the next panel's owner's step (its columns' swaps, block row of U and update) in three
-- launches (solve.tune.narrow = "kernel") rather than narrow_step's one; and narrow_step's
-- launches counted: one a panel but the last, less the three launches' two more each
T.diag("the look-ahead's step in three launches")
st.peer = true
M.tune.narrow = "kernel"
check(20, 3, {0, 1, 2}, "lu")
check(25, 2, {0, 1, 0, 2, 1}, "lu")
local function count(narrow)
  M.tune.narrow = narrow
  st.launches = 0
  M.lu(mkA(20, rand_matrix(20, 5)), {block = 4, devices = {0, 1}})
  return st.launches
end
local three, one = count("kernel"), count(nil)
T.is(three - one, 2 * (20 // 4 - 1), "narrow_step: one launch a step for the three's, for each of the 4 steps before the last panel")
-- an allocation that fails halfway through: what the call had made is closed, but for the
-- pivots it was to return (the first), and the next call works
for _, m in ipairs{"lu", "seed"} do
  for _, peer in ipairs{true, false} do
    st.peer = peer
    for _, at in ipairs{3, 6, 9} do
      local A = mkA(12, rand_matrix(12, 3))
      st.made, st.fail_at = {}, at
      local ok, err = pcall(M.lu, A, {block = 4, devices = {0, 1}, method = m, peer = peer})
      local open = 0
      for i = 2, #st.made do if not st.made[i].closed then open = open + 1 end end
      T.ok(not ok and tostring(err):find("CUDA_ERROR_OUT_OF_MEMORY", 1, true) and open == 0,
           ("%s, peer %s: allocation %d of the call fails: it raises, and the %d arrays made before are closed (%d open)")
           :format(m, tostring(peer), at, #st.made - 1, open))
      st.made, st.fail_at = nil, nil
    end
  end
end
st.peer = true
do
  local ok = pcall(M.lu, mkA(12, rand_matrix(12, 3)), {block = 4, devices = {0, 1}})
  T.ok(ok, "and the next call works")
end
-- lu_solve's two ways: by substitution (two launches, a triangle each) up to
-- solve.tune.trsv_max right-hand sides, by blocks (trsm and matmul a block row) past it;
-- the same X either way, and the default threshold (16) picks as it says
do
  local function solve_with(n, k, nb, max)
    local LU = mkA(n, rand_matrix(n, n + k))
    local ipiv = M.lu(LU, {block = nb})
    local B = k == 1 and cuda.array("float64", n, {device = 0}) or cuda.array("float64", {n, k}, {device = 0})
    for i = 0, n * k - 1 do B.data[i] = ((i * 7) % 11) / 11 - 0.4 end
    local saved = M.tune.trsv_max
    M.tune.trsv_max = max or saved
    local before = st.launches
    M.lu_solve(LU, ipiv, B, {block = nb})
    M.tune.trsv_max = saved
    return B, st.launches - before
  end
  -- the input checks (B, the pivots), the permutation, the gather and the copy, then the solves
  local FIXED = 5
  for _, c in ipairs{{1, 1, 4}, {70, 1, 16}, {70, 3, 16}, {130, 5, 64}, {65, 17, 8}} do
    local n, k, nb = c[1], c[2], c[3]
    local X1, l1 = solve_with(n, k, nb, math.maxinteger)
    local X2, l2 = solve_with(n, k, nb, 0)
    local d = 0
    for i = 0, n * k - 1 do d = math.max(d, math.abs(X1.data[i] - X2.data[i])) end
    if not T.ok(d < 1e-9 and l1 == FIXED + 2 and l2 == FIXED + 2 * ((n + nb - 1) // nb),
                ("lu_solve n %d k %d block %d: substitution (%d launches) and blocks (%d) agree"):format(n, k, nb, l1, l2)) then
      T.diag("  max difference " .. d)
    end
  end
  local _, l16 = solve_with(40, 16, 8)
  local _, l17 = solve_with(40, 17, 8)
  T.ok(M.tune.trsv_max == 16 and l16 == FIXED + 2 and l17 == FIXED + 2 * 5,
       ("by default 16 right-hand sides go by substitution (%d launches), 17 by blocks (%d)"):format(l16, l17))
end
-- lu_solve refuses pivots outside 1..n before B is touched, the first by place and value
-- (kernels/solve.cu's check_pivots, mocked), and solves right after
do
  local n = 6
  local LU = mkA(n, rand_matrix(n, 5))
  local ipiv = M.lu(LU, {block = 4})
  local B = cuda.array("float64", n, {device = 0})
  for i = 0, n - 1 do B.data[i] = i / n - 0.5 end
  local p2, p4 = ipiv.data[2], ipiv.data[4]
  ipiv.data[2], ipiv.data[4] = 0, 9
  T.error_like(function () M.lu_solve(LU, ipiv, B) end, "cuda%.catalog%.lu_solve: ipiv%[3%] = 0 is out of 1%.%.6",
               "lu_solve: the first pivot outside 1..n named")
  T.ok(B.data[1] == 1 / n - 0.5, "  and B is as it was")
  ipiv.data[2] = p2
  T.error_like(function () M.lu_solve(LU, ipiv, B) end, "ipiv%[5%] = 9 is out of 1%.%.6", "lu_solve: a pivot past n named")
  ipiv.data[4] = p4
  T.ok(pcall(M.lu_solve, LU, ipiv, B), "lu_solve with the pivots back: solved")
end
-- the knobs by dtype (solve.tune.wide_from, taper, fused_from) refuse anything but a table;
-- a dtype left out of one leaves it off
do
  for _, k in ipairs{"wide_from", "taper", "fused_from"} do
    local saved = M.tune[k]
    M.tune[k] = 8192
    T.error_like(function () M.lu(mkA(8, rand_matrix(8, 1)), {block = 4}) end,
                 "cuda%.catalog%.lu: solve%.tune%." .. k .. " must be a table by dtype %(%{float32 = N, float64 = N%}%), got number",
                 "lu: solve.tune." .. k .. " a number refused")
    M.tune[k] = {}
    T.ok(pcall(M.lu, mkA(8, rand_matrix(8, 1)), {block = 4}), "  and {} leaves it off")
    M.tune[k] = saved
  end
end
-- a device with thread-block clusters (compute capability 9.0): the cluster panel (mocked
-- with the fused one's arithmetic), so on one device the look-ahead, and blocks split in
-- halves (split_panel: narrow_step between them, at a share's column offset on several
-- devices); with solve.tune.cluster_bytes small, panels whose rows the cluster cannot keep
-- split further, down to solve.tune.tall_split (16) columns, then handed to the fused panel.
-- The widths each panel kernel took are recorded: "c32" a cluster panel of 32 columns, "f16"
-- a fused one of 16
T.diag("a device with clusters: the cluster panel, split blocks, tall panels")
local widths
local fused_mock = K.panel_fused
K.panel_fused = function (n, j0, jb, ...)
  if widths then widths["f" .. jb] = true end
  return fused_mock(n, j0, jb, ...)
end
K.panel_cluster = function (n, j0, jb, A, ld, coff, ipiv, status, ks)
  assert(math.type(ks) == "integer" and ks >= 1 and ks <= n - j0, "rows a block keeps")
  widths["c" .. jb] = true
  return fused_mock(n, j0, jb, A, ld, coff, ipiv, status)
end
for o = 0, 2 do device(o).major = 9 end
local function took(w)
  local t = {}
  for k in pairs(w) do t[#t + 1] = k end
  table.sort(t)
  return table.concat(t, " ")
end
-- float64 splits past 48 columns (a block of 64 in two panels of 32; the last block, 6
-- columns of 6 rows, always fits), and a row of 32 columns takes 272 bytes, of 16 columns
-- 144: 7700 bytes keep 28 rows at 32 columns (under three quarters of the first half's 70
-- rows and the second's 38) and 53 at 16 (enough); 2000 bytes keep 7 and 13 (too few).
-- 16320 bytes keep 60 rows at 32 columns: over three quarters of the first half's 70, so
-- that a panel split only past tall_spill = 0.25 stays at 32 columns; by default (0) the
-- first half splits down to 16 (113 rows: all), the second keeps its 38 at 32
for _, c in ipairs{{nil, 16, "c32 c6"}, {7700, 16, "c16 c6"}, {2000, 16, "c6 f16"}, {2000, false, "c6 f32"},
                   {16320, 16, "c16 c32 c6"}, {16320, 16, "c32 c6", 0.25}} do
  local bytes, tall, want = c[1], c[2], c[3]
  M.tune.cluster_bytes, M.tune.tall_split, M.tune.tall_spill = bytes, tall, c[4] or 0
  widths = {}
  check(70, 64, {0, 1}, "lu")
  check(70, 64, {0, 0, 1}, "lu", false)
  local got = took(widths)
  T.is(got, want, ("cluster bytes %s, tall_split %s, tall_spill %s: the panel kernels and widths"):format(
       tostring(bytes), tostring(tall), tostring(c[4] or 0)))
end
M.tune.cluster_bytes, M.tune.tall_split, M.tune.tall_spill = nil, 16, 0
-- solve.tune.cluster_whole: the cluster panel's blocks ask for all the room there is (false:
-- their rows', ks rows of jbs values and 16 bytes; nil, the default: all of it where the
-- block is split in panels (float64: past 48 columns), on one GPU and on several)
for _, c in ipairs{{"false", 64, false}, {"true", 64, true}, {"default", 64, true}, {"default", 32, false}} do
  local w, nb, all = c[1], c[2], c[3]
  M.tune.cluster_whole = ({["false"] = false, ["true"] = true})[w]
  st.cluster_cfgs, widths = {}, {}
  check(70, nb, {0, 1}, "lu")
  local ok = #st.cluster_cfgs > 0 and st.cluster_room ~= nil
  for _, cfg in ipairs(st.cluster_cfgs) do
    local jb, ks = cfg.args[3], cfg.args[9]
    local rows = ((jb + 3) // 4 * 4) * 8 + 16
    ok = ok and cfg.shared == (all and st.cluster_room or ks * rows) and ks * rows <= st.cluster_room
  end
  T.ok(ok, ("cluster_whole %s, block %d: %d cluster launches, each asking for %s"):format(w, nb, #st.cluster_cfgs,
       all and ("all the room, " .. tostring(st.cluster_room) .. " bytes") or "its rows' bytes"))
end
M.tune.cluster_whole = nil
-- both look-aheads (one device's and the several-GPU one) with their step between panels on
-- the update's stream (step_on = "S", as before session 20; the default puts it on the panels')
M.tune.step_on = "S"
check(70, 64, {0, 1}, "lu")
M.tune.step_on = "Q"
-- the row swaps and U's block row in one launch (solve.tune.trsm = "fused": block_row, on
-- a plan composed by row_plan), on one device and over the shares, against the
-- one-device run's as always; float32's default from solve.tune.fused_from columns
M.tune.trsm = "fused"
check(70, 64, {0, 1}, "lu")
check(20, 3, {0, 1, 2}, "lu")
check(13, 4, {0, 0}, "lu")
do   -- and against laswp and trsm's on one device (the same arithmetic in the same order)
  local t = rand_matrix(70, 11)
  M.tune.trsm = "kernel"
  local A1 = mkA(70, t)
  local p1 = M.lu(A1, {block = 64})
  M.tune.trsm = "fused"
  local A2 = mkA(70, t)
  local p2 = M.lu(A2, {block = 64, devices = {0, 1}})
  local bad = differ(70, p1, A1, p2, A2)
  if not T.ok(not bad, "block_row over two devices: the pivots and factors of laswp and trsm on one") then T.diag(bad) end
end
M.tune.trsm = nil
-- and the look-ahead's step in three launches there too (one device's look-ahead and the
-- several-GPU one, both through lookahead_step's fallback)
M.tune.narrow = "kernel"
check(70, 64, {0, 1}, "lu")
M.tune.narrow = nil
-- the default block tapered (solve.tune.wide_from, taper): 128 while more than 100 columns
-- are left, then 64 (from column 128 of 200: the look-ahead's step at 128 columns, then at
-- 64, the last block 8 wide); the factors as with blocks of 64 throughout, info saying
-- which; the chain's kernels launched programmatic (solve.tune.programmatic = false: not);
-- several GPUs keep one block (64 at this size: no taper there)
do
  local saved_wide, saved_taper = M.tune.wide_from, M.tune.taper
  M.tune.wide_from, M.tune.taper = {float32 = 1, float64 = 1}, {float32 = 100, float64 = 100}
  local n = 200
  local t = rand_matrix(n, 31)
  local A1, A2 = mkA(n, t), mkA(n, t)
  widths, st.chain_cfgs = {}, {}
  local p1, info = M.lu(A1)
  local steps, all = {}, true
  for _, c in ipairs(st.chain_cfgs) do
    all = all and c.programmatic == true
    if c.base == "narrow_step" then steps[#steps + 1] = c.args[2] .. ":" .. c.args[3] end
  end
  local p2 = M.lu(A2, {block = 64})
  local bad = differ(n, p1, A1, p2, A2)
  if not T.ok(not bad, "a tapered default block (128, then 64): the factors of blocks of 64") then T.diag(bad) end
  T.ok(info.block == 128 and info.narrow_columns == 72, ("info: block %s, narrow_columns %s (want 128, 72)"):format(
       info.block, info.narrow_columns))
  -- the look-ahead's steps (narrow_step's i0 and kb, i0 + kb = the next panel's first column):
  -- after the panel at 0 (128 columns), at 128 (64), and between the halves of 64 too
  local seen = " " .. table.concat(steps, " ") .. " "
  T.ok(seen:find(" 0:128 ", 1, true) and seen:find(" 128:64 ", 1, true) and not seen:find(" 128:128 ", 1, true),
       "the look-ahead's steps: 128 columns at column 0, then 64 from column 128")
  T.ok(#st.chain_cfgs > 0 and all, ("%d launches of the chain's kernels, all programmatic"):format(#st.chain_cfgs))
  M.tune.programmatic = false
  st.chain_cfgs = {}
  M.lu(mkA(n, t))
  local none = true
  for _, c in ipairs(st.chain_cfgs) do none = none and not c.programmatic end
  T.ok(#st.chain_cfgs > 0 and none, "solve.tune.programmatic = false: none programmatic")
  M.tune.programmatic = nil
  st.chain_cfgs = nil
  local _, minfo = M.lu(mkA(n, t), {devices = {0, 1}})
  T.ok(minfo.block == 64 and minfo.narrow_columns == nil, ("several GPUs: one block, 64 at n = %d (got %s)"):format(n, minfo.block))
  M.tune.wide_from, M.tune.taper = saved_wide, saved_taper
end
widths = nil
for o = 0, 2 do device(o).major = 8 end
-- the checks come before any array
T.error_like(function () M.lu(nil, {devices = {}}) end, "cuda%.catalog%.lu: devices is an empty list", "an empty devices list")
T.done_testing()
