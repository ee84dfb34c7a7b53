-- culua.catalog.lu_panel: the solve family's panel factorizations
-- (kernels/lu_panel.cu), for one GPU's LU and the several-GPU LU: a panel in
-- one thread-block cluster, in one cooperative launch, or a launch a column;
-- which one a kind names on a device, and the limits each has there.

local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"

local fail, ceil_div = core.fail, core.ceil_div
local tune, kernels, esize, dependent, shared_room = S.tune, S.kernels, S.esize, S.dependent, S.shared_room
local PANEL_THREADS, PANEL_SLOT, BARRIER_WORDS = S.shapes.PANEL_THREADS, S.shapes.PANEL_SLOT, S.BARRIER_WORDS
local CPANEL_THREADS, CLUSTER_MAX = S.shapes.CPANEL_THREADS, S.shapes.CLUSTER_MAX
local CPANEL_ALIGN, CPANEL_PAD = S.shapes.CPANEL_ALIGN, S.shapes.CPANEL_PAD
local COLUMNS_THREADS, COLUMNS_WARPS = S.shapes.COLUMNS_THREADS, S.shapes.COLUMNS_WARPS

local P = {}

-- panel = "columns": a launch a column of the panel (and one for the first search),
-- the blocks' pivot candidates combined by the last block to finish
-- (A's leading dimension is ld, n by default; column c of the panel is at c + coff in its rows)
local function panel_columns(K, dev, stream, n, A, ipiv, status, ld)
  local cap = core.sm_count(dev) * 4
  local part = core.scratch("solve_partial", dev, stream, 2 * cap)
  local counter = core.scratch("solve_counter", dev, stream, 1)
  local panel = K("panel")
  ld = ld or n
  return function (j0, jb, coff)
    coff = coff or 0
    local jend = j0 + jb
    -- ju = j0 - 1: only the search of column j0; then each column's elimination and the next one's search
    for ju = j0 - 1, jend - 1 do
      local search = ju + 1 < jend
      local rows = n - (ju + 1)
      if search or rows > 0 then
        panel:launch({grid = math.min(ceil_div(rows, COLUMNS_WARPS), cap), block = COLUMNS_THREADS, stream = stream},
                     n, j0, jb, ju, search and 1 or 0, A, ld, coff, ipiv, status, part, counter)
      end
    end
  end
end

-- the fused panel's most blocks: one a multiprocessor at most (a flat grid barrier,
-- cheapest there), fewer if they cannot all be resident; and for the kernel that keeps
-- its rows in shared memory, the bytes a block may take and its most blocks with them
-- (kept a kernel)
local fused_cap = setmetatable({}, {__mode = "k"})

local kept_fit = setmetatable({}, {__mode = "k"})

local function kept_limits(kk, dev)
  local fit = kept_fit[kk]
  if not fit then
    local room = shared_room(kk, dev)
    kk:set_max_dynamic_shared(room)
    fit = {room = room, cap = kk:max_cooperative_grid(PANEL_THREADS, room)}
    kept_fit[kk] = fit
  end
  return fit
end

-- panel = "fused": the whole panel in one cooperative launch, a grid barrier a
-- column; about 16 rows a block (a small panel takes one block: no barrier waits).
-- Each warp keeps its rows in shared memory when they fit (tune.fused_keep: false
-- leaves them in A)
local function panel_fused(K, dev, stream, n, A, ipiv, status, ld)
  local k, kk = K("panel_fused"), K("panel_fused_kept")
  ld = ld or n
  local cap = fused_cap[k]
  if not cap then
    cap = math.max(1, math.min(core.sm_count(dev), k:max_cooperative_grid(PANEL_THREADS)))
    fused_cap[k] = cap
  end
  local fit = kept_limits(kk, dev)
  local size, warps = esize(A.dtype), PANEL_THREADS // 32
  local part = core.scratch("solve_partial", dev, stream, 2 * (cap + 1) * PANEL_SLOT)
  local bar = core.scratch("solve_barrier", dev, stream, BARRIER_WORDS)
  return function (j0, jb, coff)
    local m = n - j0
    if tune.fused_keep ~= false then
      -- about tune.fused_rows rows a block, more blocks where a block's rows would not fit
      local most = fit.room // (warps * jb * size)   -- rows a warp can keep
      local grid = math.min(cap, fit.cap, math.max(ceil_div(m, tune.fused_rows), ceil_div(m, warps * math.max(most, 1))))
      local rows = ceil_div(m, grid * warps)           -- the most rows a warp has
      if rows <= most then
        kk:launch({grid = grid, block = PANEL_THREADS, stream = stream, cooperative = true, shared = warps * rows * jb * size},
                  n, j0, jb, A, ld, coff or 0, ipiv, status, part, bar, rows)
        return
      end
    end
    k:launch({grid = math.min(cap, ceil_div(m, 16)), block = PANEL_THREADS, stream = stream, cooperative = true},
             n, j0, jb, A, ld, coff or 0, ipiv, status, part, bar)
  end
end

-- the cluster panel's limits on a device, per kernel (dtype): the largest cluster that
-- fits with every block's shared memory at its most, and the bytes of rows a block
-- keeps; false where clusters cannot run (before compute capability 9.0, or a driver
-- without cuLaunchKernelEx)
local cluster_limits = setmetatable({}, {__mode = "k"})

local function cluster_fit(K, dev)
  if dev.major < 9 then return false end
  local k = K("panel_cluster")
  local lim = cluster_limits[k]
  if lim ~= nil then return lim end
  lim = false
  local bytes = shared_room(k, dev)
  k:set_max_dynamic_shared(bytes)
  for _, c in ipairs{CLUSTER_MAX, 8} do
    local ok, most = pcall(k.max_active_clusters, k, {block = CPANEL_THREADS, cluster = c, shared = bytes})
    if ok and most >= 1 then lim = {cluster = c, bytes = bytes}; break end
  end
  cluster_limits[k] = lim
  return lim
end

-- panel = "cluster": the whole panel in one thread-block cluster, its rows in the blocks'
-- shared memory (those that do not fit stay in A), a cluster barrier a column
-- (a second result: spills(j0, jb), true when the cluster panel would leave more than
-- tune.tall_spill of the rows of the panel of columns [j0, j0 + jb) in A, for split_panel)
local function panel_cluster(K, dev, stream, n, A, ipiv, status, ld, whole)
  local k = K("panel_cluster")
  local lim = cluster_fit(K, dev)
  local size = esize(A.dtype)
  local fused
  ld = ld or n
  -- the cluster's blocks for the panel's m rows, the rows a block keeps in shared memory
  -- (ks of each block's rows), their bytes a row, and whether the panel goes to the fused
  -- kernel: a panel whose rows are over a quarter in A (L2's speed) does, which is as fast
  -- there (measured: float64 16384 x 64, 58% of the rows in A: 38 us a column, fused 14.5;
  -- float32, 18%: 13.7 and 13.9)
  local function shape(m, jb)
    local c = math.max(1, math.min(lim.cluster, ceil_div(m, tune.cluster_rows)))
    local rowbytes = ceil_div(jb, CPANEL_ALIGN) * CPANEL_ALIGN * size + CPANEL_PAD   -- the kernel's jst values
    local rows = ceil_div(m, c)
    local ks = math.min(rows, math.min(lim.bytes, tune.cluster_bytes or lim.bytes) // rowbytes)
    return c, ks, rowbytes, ks < (1 - tune.cluster_spill) * rows, rows
  end
  return function (j0, jb, coff)
    local c, ks, rowbytes, spill = shape(n - j0, jb)
    if spill then
      fused = fused or panel_fused(K, dev, stream, n, A, ipiv, status, ld)
      return fused(j0, jb, coff)
    end
    local bytes = whole and lim.bytes or ks * rowbytes
    k:launch({grid = c, block = CPANEL_THREADS, cluster = c, shared = bytes, stream = stream, programmatic = dependent(k)},
             n, j0, jb, A, ld, coff or 0, ipiv, status, ks)
  end, function (j0, jb)   -- split_panel's question: more than tall_spill of the rows in A
    local _, ks, _, _, rows = shape(n - j0, jb)
    return ks < (1 - tune.tall_spill) * rows
  end
end

-- the panel factorization a kind names, for a device: "auto" is the cluster panel where
-- clusters run, else the fused one
local function panel_maker(fname, kind, K, dev)
  if kind == "columns" then return panel_columns end
  if kind == "fused" then return panel_fused end
  if cluster_fit(K, dev) then return panel_cluster end
  if kind == "cluster" then
    fail(fname, "panel = 'cluster' needs thread-block clusters (compute capability 9.0 and a driver with cuLaunchKernelEx); device %d is %d.%d",
         dev.ordinal, dev.major, dev.minor)
  end
  return panel_fused
end

-- for bench/solve_profile.lua: the panel factorization of a kind, factor(j0, jb [, coff])
-- (rows j0..n-1 of A, leading dimension ld, n by default)
function P.panel_factor(kind, dev, stream, n, A, ipiv, status, ld)
  local K = kernels(dev, A.dtype)
  return panel_maker("lu", kind, K, dev)(K, dev, stream, n, A, ipiv, status, ld, tune.cluster_whole)
end

P.panel_maker, P.panel_cluster, P.cluster_fit = panel_maker, panel_cluster, cluster_fit

return P
