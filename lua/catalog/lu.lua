-- culua.catalog.lu: LU on one GPU (kernels/lu.cu): blocked right-looking,
-- with the look-ahead where the cluster panel runs; its default block; the
-- step between panels, the row swaps and the block row of U, which the
-- several-GPU LU (lua/catalog/lu_multi.lua) takes too. The panels are in
-- lua/catalog/lu_panel.lua, the triangular solves in triangular.lua.

local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"
local panels = require "culua.catalog.lu_panel"
local trsm = require("culua.catalog.triangular").trsm

local fail, ceil_div = core.fail, core.ceil_div
local matmul = require("culua.catalog.matmul").matmul
local tune, kernels, grid_for, view, gemm_sub, esize = S.tune, S.kernels, S.grid_for, S.view, S.gemm_sub, S.esize
local dependent, shared_room, event_on, stream_on, check_block = S.dependent, S.shared_room, S.event_on, S.stream_on,
                                                                 S.check_block
local panel_maker, panel_cluster, cluster_fit = panels.panel_maker, panels.panel_cluster, panels.cluster_fit
local MAXBLOCK, NSTEP_ROWS, NSTEP_US = S.shapes.MAXBLOCK, S.shapes.NSTEP_ROWS, S.shapes.NSTEP_US
local NSTEP_COLS, NSTEP_THREADS = S.shapes.NSTEP_COLS, S.shapes.NSTEP_THREADS
local UPDATE_TILE, UPDATE_THREADS = S.shapes.UPDATE_TILE, S.shapes.UPDATE_THREADS
local SWAP_THREADS, SWAP_BYTES = S.shapes.SWAP_THREADS, S.shapes.SWAP_BYTES
local BROW_THREADS, BROW_BYTES = S.shapes.BROW_THREADS, S.shapes.BROW_BYTES
local SWAP_PLAN_WORDS = S.shapes.SWAP_PLAN_WORDS
local DEFAULT_BLOCK = S.DEFAULT_BLOCK

-- X (jb x ncols) = inv(Tr) * X for Tr's unit lower triangle as a product, LU's full-width
-- block row of U: Tr's inverse (trsm's kernel on the identity, jb x jb), X copied aside, and
-- one matmul (float64: on tensor cores). MAGMA solves with inverted diagonal blocks too; the
-- inverse of a unit lower triangle whose entries are at most 1 in magnitude (partial
-- pivoting) can grow with jb in contrived cases, and t/030's residuals check ours. Where
-- trsm_how says: float64 from 2048 columns on compute capability 8.0 and later (tune.trsm:
-- "kernel" or "product" forces one). trsm's kernel takes a column of X a thread, through
-- FFMA: float64 LU at n = 16384 on an H100 took 175.9 ms with it, 170.3 with the product.
local function trsm_product(K, dev, stream, jb, ncols, Tr, toff, ldt, X, xoff, ldx)
  if ncols <= 0 then return end
  local dt = X.dtype
  local inv = core.scratch("solve_inv_" .. dt, dev, stream, jb * jb)
  local aside = core.scratch("solve_aside_" .. dt, dev, stream, jb * ncols)
  K("eye"):launch({grid = grid_for(jb * jb, 256, dev), block = 256, stream = stream}, jb, inv)
  trsm(K, "lower", stream, jb, jb, Tr, toff, ldt, inv, 0, jb)
  K("copy2d"):launch({grid = grid_for(jb * ncols, 256, dev), block = 256, stream = stream},
                     jb, ncols, X, xoff, ldx, aside, 0, ncols)
  matmul(inv, aside, view(X, xoff, (jb - 1) * ldx + ncols),
         {m = jb, n = ncols, k = jb, lda = jb, ldb = ncols, ldc = ldx, stream = stream})
end

local function trsm_lower(K, _, stream, ...) return trsm(K, "lower", stream, ...) end

local function trsm_how(dev, dt, ncols)
  local how = tune.trsm
  if how == "product" or (how == nil and core.dmma_for(dt, dev) and ncols >= 2048) then
    return trsm_product
  end
  return trsm_lower
end

-- block_row's kernel and its shared memory: the top rows (MAXBLOCK x W) and the triangle
local function brow_kernel(K, dt, kb)
  local size = esize(dt)
  return K("block_row"), (MAXBLOCK * (BROW_BYTES // size) + kb * kb) * size
end

-- the block row in one launch (kernels/lu.cu's block_row): a step's row swaps and its block
-- row of U together, solved in the order trsm's kernel solves (the same bits). Where
-- tune.trsm says ("fused"; by default the dtypes tune.fused_from names: float32, whose trsm
-- is that kernel too) and the kernel's shared memory fits. The result: the fewest columns
-- of a block row that takes it (0 under "fused"), or false. Float64 keeps the product on
-- tensor cores (trsm_how).
local function one_launch(K, dev, dt)
  local how = tune.trsm
  local from = how == "fused" and 0 or how == nil and tune.fused_from[dt]
  if not from then return false end
  local k, bytes = brow_kernel(K, dt, MAXBLOCK)
  if bytes > shared_room(k, dev) then return false end
  core.allow_shared(k, bytes)
  return from
end

-- whether a step whose block row of U spans `cols` columns takes block_row (from: what
-- one_launch said): always where tune.trsm is "fused", by default from tune.fused_from
-- columns. Narrower, where the chain of panels rather than the update bounds the LU (and
-- the plan's launch sits on that chain), it measured slower (float32 lu + lu_solve on an
-- H200, session 38, block_row at every step against laswp and trsm: 4096 17.12 ms against
-- 16.43, 8192 37.47 against 35.71, 12288 70.59 against 70.17, 16384 127.25 against 129.92;
-- lu alone at 32768 753.27 against 763.02). With the plan composed in parallel (session
-- 39, lu alone): 8192 34.76 at every step against 33.95 by this rule, 16384 123.67 against
-- 122.46
local function fuse(from, cols)
  return from and cols >= from
end

-- the plan of the swaps of pivots i0..i0+kb-1 that block_row takes, made on the stream the
-- panel was, in slot 0 or 1 of that stream's scratch (the look-ahead plans the next panel's
-- while S reads this one's)
local function row_plan(K, dev, stream, i0, kb, ipiv, slot)
  local plan = core.scratch("solve_plan", dev, stream, 2 * SWAP_PLAN_WORDS)
  local p = view(plan, slot * SWAP_PLAN_WORDS, SWAP_PLAN_WORDS)
  local k = K("row_plan", false)
  k:launch({grid = 1, block = 256, stream = stream, programmatic = dependent(k)}, i0, kb, ipiv, p)
  return p
end

-- block_row on the columns [0, ncols) of X (leading dimension ld) outside [lo, hi): the
-- swaps of pivots i0..i0+kb-1 (plan: row_plan's) on all of them, and U's block row (rows i0..
-- i0 + kb - 1) on those from `from` on, by the panel's triangle at L's element loff (a row
-- every ldl)
local function block_row(K, dev, stream, ncols, ld, lo, hi, from, i0, kb, plan, L, loff, ldl, X)
  local width = ncols - (hi - lo)
  if width <= 0 then return end
  local k, bytes = brow_kernel(K, X.dtype, kb)
  k:launch({grid = ceil_div(width, BROW_BYTES // esize(X.dtype)), block = BROW_THREADS, shared = bytes,
            stream = stream, programmatic = dependent(k)},
           ncols, ld, lo, hi, from, i0, kb, plan, L, loff, ldl, X)
end

-- C (m x nc) -= L (m x kb) * U (kb x nc) for nc, kb <= MAXBLOCK: the update of the next
-- panel's columns when the look-ahead's step takes three launches (tune.narrow "kernel"
-- or "matmul", or where narrow_step's shared memory does not fit). By the kernel of its own (kernels/lu.cu
-- says why not matmul's float32 tiles), except in float64 where matmul takes tensor cores
-- (dmma, compute capability 8.0 on): on an H100 (session 13) float64 LU took 49.74 ms at
-- n = 8192 so, 50.33 by the kernel; at 16384, 198.57 against 200.12. (narrow_step, one
-- launch, took 43.9 and 173.4 in session 16.)
local function update_narrow(K, stream, m, nc, kb, L, loff, ldl, U, uoff, ldu, Cm, coff, ldc)
  if m <= 0 or nc <= 0 or kb <= 0 then return end
  local how = tune.narrow
  if how == "matmul" or (how == nil and core.dmma_for(Cm.dtype, Cm.device)) then
    return gemm_sub(K, Cm.dtype, stream, m, nc, kb, L, loff, ldl, U, uoff, ldu, Cm, coff, ldc)
  end
  K("update_narrow"):launch({grid = {ceil_div(m, UPDATE_TILE), ceil_div(nc, UPDATE_TILE)}, block = UPDATE_THREADS,
                             stream = stream},
                            m, nc, kb, L, loff, ldl, U, uoff, ldu, Cm, coff, ldc)
end

-- the swaps of pivots i0..i0+kb-1 on A's columns [c0, c0 + nc) (nc <= MAXBLOCK), their
-- block row of U and the update of the rows below, in one launch (kernels/lu.cu says how
-- its blocks keep out of each other's way). The panel's rows i0.. (the triangle, then L21)
-- are at L's element loff, a row every ldl. Its shared memory holds the triangle and U:
-- false when that is more than the device gives a block (kb = 128 in float64 takes 201 KiB;
-- an H100 gives 227), when tune.narrow asks for three launches, or when no rows lie below
-- the panel (its grid would be empty, the swaps and U still owed), and the caller takes the
-- three launches; true when done (or nothing to do)
local function narrow_step(K, dev, stream, n, ld, i0, kb, c0, nc, A, ipiv, L, loff, ldl)
  if tune.narrow ~= nil and tune.narrow ~= "step" then return false end
  if nc <= 0 or kb <= 0 then return true end
  if n - i0 - kb <= 0 then return false end
  local k, size = K("narrow_step"), esize(A.dtype)
  local bytes = (kb * (kb + 1) + kb * NSTEP_US) * size
  if bytes > shared_room(k, dev) then return false end
  core.allow_shared(k, bytes)
  local held = core.scratch("solve_held_" .. A.dtype, dev, stream, kb * nc)
  local ticket = core.scratch("solve_ticket", dev, stream, ceil_div(MAXBLOCK, NSTEP_COLS))
  k:launch({grid = {ceil_div(n - i0 - kb, NSTEP_ROWS), ceil_div(nc, NSTEP_COLS)}, block = NSTEP_THREADS, shared = bytes,
            stream = stream,
            programmatic = dependent(k)},
           n, i0, kb, L, loff, ldl, c0, nc, A, ld, ipiv, held, ticket)
  return true
end

-- the swaps of pivots i0..i1-1 on the columns [0, ncols) of X (leading dimension ld) outside
-- [lo, hi): a block composes them once and moves 128 bytes of each row a turn (SWAP_COLS)
local function swaps(K, dev, stream, ncols, ld, lo, hi, i0, i1, ipiv, X)
  local width = ncols - (hi - lo)
  if width <= 0 or i1 <= i0 then return end
  local k = K("laswp")
  k:launch({grid = grid_for(width, SWAP_BYTES // esize(X.dtype), dev), block = SWAP_THREADS, stream = stream,
            programmatic = dependent(k)},
           ncols, ld, lo, hi, i0, i1, ipiv, X)
end

-- the same on the columns [c0, c1) alone of the n rows of A (leading dimension ld)
local function column_swaps(K, dev, stream, n, ld, c0, c1, i0, i1, ipiv, A)
  swaps(K, dev, stream, c1 - c0, ld, 0, 0, i0, i1, ipiv, view(A, c0, (n - 1) * ld + (c1 - c0)))
end

-- the look-ahead's step between panels (one GPU's and the several-GPU LU's): narrow_step,
-- or where it says false the three launches, the swaps, the block row of U and the update
-- of the rows below by update_narrow (L21 follows the triangle in L: row i0 + kb at loff + kb ldl)
local function lookahead_step(K, dev, stream, n, ld, i0, kb, c0, nc, A, ipiv, L, loff, ldl)
  if narrow_step(K, dev, stream, n, ld, i0, kb, c0, nc, A, ipiv, L, loff, ldl) then return end
  local i1 = i0 + kb
  column_swaps(K, dev, stream, n, ld, c0, c0 + nc, i0, i1, ipiv, A)
  trsm(K, "lower", stream, kb, nc, L, loff, ldl, A, i0 * ld + c0, ld)
  update_narrow(K, stream, n - i1, nc, kb, L, loff + kb * ldl, ldl, A, i0 * ld + c0, ld, A, i1 * ld + c0, ld)
end

-- lu's and solve's panel width: opts.block, else what measured fastest on an H100
-- (bench/solve.lua, bench/RESULTS.md's sessions 11, 13, 20, 21 and 22): with the cluster
-- panel (the one panel_maker takes), 128 from n = 8192 (tune.wide_from; float32 splits it
-- in 64s, float64 in 32s: split_width), otherwise DEFAULT_BLOCK (float64 splits it in 32s,
-- float32 from n = 8192). The second result: where the default is 128, the columns left
-- (tune.taper, 6656) at or below which the look-ahead narrows it to DEFAULT_BLOCK. A step's
-- update runs faster at k = 128 (matmul: 30.8 TFLOP/s against 23.7 at n = 8064), and early on
-- the update bounds the time; later the chain of panels does, which is shorter at 64. The
-- crossover depends on the columns left, not on n. The several-GPU LU deals out blocks of
-- one width and keeps the thresholds measured before the taper (`several`: 128 from n =
-- SEVERAL_WIDE_FROM, no taper). (Session 22, against 128 throughout and 64
-- throughout: float64 lu 8192 38.80-38.83 ms, 41.76-41.94, 40.24-40.29; 16384 164.84-164.89,
-- 167.71-167.88, 204.8; float32 lu + lu_solve 8192 37.98-38.05, 38.39-38.47, 37.96-37.99;
-- 10240 53.18, 53.94; 12288 73.50, 73.92; 16384 135.88-136.34, 136.27-136.52, 149.8-150.2.)
-- (Session 21, float32's update with C staged, lu + lu_solve:
-- 8192 64 in 32s 37.64-37.84 ms, 128 in 64s 38.24-38.46; 10240 64 in 32s 54.72, 128 53.66;
-- 12288 64 in 32s 77.80, 128 74.34; 16384 64 in 32s 150.0, 128 137.2-138.5.)
-- (Session 20, the look-ahead's step on Q, lu + lu_solve: float32 6144 64: 26.56 ms, 128:
-- 27.13; 8192 64: 39.90, 96: 39.55, 128: 38.28; 16384 96: 158.2, 128: 148.7. float64 lu
-- 4096 64: 15.40, 96: 16.92, 128: 17.65; 8192 64: 40.60, 96: 42.06, 128: 42.28; 16384 64:
-- 204.7, 96: 185.0, 128: 167.7.)
local SEVERAL_WIDE_FROM = {float32 = 10240, float64 = 12288}

-- the knobs that hold a value a dtype ({float32 = N, float64 = N}; a dtype left out: never)
local BY_DTYPE = {"wide_from", "taper", "fused_from"}

local function lu_block(fname, opts, n, dt, dev, pk, several)
  for _, k in ipairs(BY_DTYPE) do
    if type(tune[k]) ~= "table" then
      fail(fname, "solve.tune.%s must be a table by dtype ({float32 = N, float64 = N}), got %s", k, type(tune[k]))
    end
  end
  local dflt
  if opts.block == nil and pk ~= "fused" and pk ~= "columns"
     and n >= ((several and SEVERAL_WIDE_FROM or tune.wide_from)[dt] or math.huge) and cluster_fit(kernels(dev, dt), dev) then
    dflt = 128
  end
  local nb = check_block(fname, opts, dflt)
  local taper = dflt and not several and tune.taper[dt]
  return nb, taper and taper > 0 and taper or nil
end

-- the one-GPU look-ahead's streams and events, kept a device: S (the swaps, the triangular
-- solves, the updates) and Q (the panels, at a higher priority)
local function lookahead_state(dev)
  local st = core.device_state("solve_lookahead", dev)
  if not st.S then
    st.S, st.Q = stream_on(dev), stream_on(dev, -1)
    st.start, st.ready, st.u, st.done = event_on(dev), event_on(dev), event_on(dev), event_on(dev)
  end
  return st
end

--[[
** A panel of columns [j0, j0 + jb) wider than `base`, factored as two halves (LAPACK's
** recursive getrf2, one level a call): the left half; its swaps on the right half's
** columns, the right half's block row of U (trsm) and its update below (matmul); the
** right half; its swaps on the left half's columns. The trailing update then runs with
** k = the whole block (matmul's speed grows with k), each panel launch at a half's width.
** A has leading dimension ld (n by default); column c of the panel is at c + coff in its
** rows, as for the panel kernels (a share's columns, in the several-GPU LU).
** A panel no wider than `base` is split as well, down to tune.tall_split columns, while
** spills(j0, jb) says that the cluster panel could not keep its rows (all of them, by
** default: tune.tall_spill): a narrower panel's rows take less shared memory (rows in A
** run at L2's speed), and the cluster panel leaves the update beside it most
** multiprocessors, where the fused kernel, which takes a panel with over a quarter of its
** rows in A, takes them all (float32 at n = 32768 on an H200, block 128: 64-column leaves
** 951.8 ms and 596.7 on two GPUs; split down to 32 columns where over a quarter of the rows
** do not fit, 895.9 and 525.8)
]]
local function split_panel(K, dev, stream, n, A, ipiv, factor, base, ld, spills)
  ld, base = ld or n, math.max(base, 1)
  local tall = tune.tall_split and math.max(tune.tall_split, 1)   -- halves of one column at least
  local function split(j0, jb, coff)
    coff = coff or 0
    if jb <= base and not (tall and spills and jb >= 2 * tall and spills(j0, jb)) then
      return factor(j0, jb, coff)
    end
    local h = jb // 2
    local mid, jend = j0 + h, j0 + jb
    split(j0, h, coff)
    if not narrow_step(K, dev, stream, n, ld, j0, h, mid + coff, jend - mid, A, ipiv, A, j0 * ld + j0 + coff, ld) then
      column_swaps(K, dev, stream, n, ld, mid + coff, jend + coff, j0, mid, ipiv, A)
      trsm(K, "lower", stream, h, jend - mid, A, j0 * ld + j0 + coff, ld, A, j0 * ld + mid + coff, ld)
      gemm_sub(K, A.dtype, stream, n - mid, jend - mid, h, A, mid * ld + j0 + coff, ld, A, j0 * ld + mid + coff, ld,
               A, mid * ld + mid + coff, ld)
    end
    split(mid, jend - mid, coff)
    column_swaps(K, dev, stream, n, ld, j0 + coff, mid + coff, mid, jend, ipiv, A)
  end
  return split
end

-- the panel factorization that `make` (panel_maker's) builds on a stream, split in halves
-- past tune.split_at columns when it is the cluster panel (whose launches are cheapest narrow)
-- (float64: 48, so that a block of 96 goes in two panels of 48 and one of 128 in four of 32).
-- In float32 64, on one GPU and on several (two H200s, block 128, session 21: 32768 504.3 ms
-- against 508.5 in 32s, 16384 117.2 against 122.3; session 18 had measured 32s the faster
-- there, 525.8 against 539.2, before tall panels split to fit and the cluster's blocks took
-- whole multiprocessors); but a block of 64 in 32s from n = 8192 (lu_block's figures: at
-- 8192 it beats 128 in 64s; 4096: 16.27 ms unsplit, 16.67 in 32s; 6144: 26.52, 26.32)
local function split_width(dt, n, nb)
  return tune.split_at or (dt == "float32" and (nb == 64 and n >= 8192 and 32 or 64) or 48)
end

-- (nb: the block's width, which the panels' shared memory follows: cluster_whole)
local function panel_factory(make, K, dev, stream, n, A, ipiv, status, ld, nb)
  local width = split_width(A.dtype, n, nb)
  local whole = tune.cluster_whole
  if whole == nil then whole = nb > width end
  local factor, spills = make(K, dev, stream, n, A, ipiv, status, ld, whole)
  if make ~= panel_cluster then return factor end
  return split_panel(K, dev, stream, n, A, ipiv, factor, width, ld, spills)
end

--[[
** Blocked LU with look-ahead (the cluster panel's, which leaves most multiprocessors
** free; a panel it hands to the fused kernel does not, and then waits its turn): panel
** k + 1 is factored on Q as soon as its columns have step k's swaps and update, while S
** goes on with the rest of step k. The chain from one panel to the next is then: panel
** k + 1's columns' swaps, their block of U, their update (lookahead_step, at the panel's
** width), on Q right after panel k (step_on = "Q"), once S has finished step k - 1's
** full-width launches, which updated those columns too; S waits for panel k and then runs
** step k's full-width launches. So the chain crosses between the streams only where S is
** behind. Q and S touch disjoint columns between the events; the caller's stream waits
** for the end (with no stream given, the host does: lu reads its status then).
]]
local function lu_lookahead(K, dev, stream, n, nb, A, ipiv, status, make, taper, info)
  local st = lookahead_state(dev)
  local S, Q = st.S, st.Q
  st.start:record(stream)
  S:wait(st.start)
  Q:wait(st.start)
  -- the block at column j0: nb, then DEFAULT_BLOCK once at most taper columns are left
  local small = taper and nb > DEFAULT_BLOCK and DEFAULT_BLOCK
  local wide = panel_factory(make, K, dev, Q, n, A, ipiv, status, nil, nb)
  local narrow = small and panel_factory(make, K, dev, Q, n, A, ipiv, status, nil, small)
  local function tapered(j0) return small and n - j0 <= taper end
  local function width(j0) return math.min(tapered(j0) and small or nb, n - j0) end
  local function factor(j0, jb)
    if tapered(j0) then
      info.narrow_columns = info.narrow_columns or n - j0   -- the first narrow block: what the user sees
      return narrow(j0, jb)
    end
    return wide(j0, jb)
  end
  local j0, jb = 0, width(0)
  local fused, step = one_launch(K, dev, A.dtype), 0
  -- whether the step of the panel at j (jb wide) takes block_row: its block row of U
  -- starts past the next panel
  local function fuses(j, w)
    local e = j + w
    return e < n and fuse(fused, n - e - width(e))
  end
  -- by slot: row_plan's of the panel S takes next, and of the one after; nil where that
  -- panel's step takes laswp and trsm
  local plans = {}
  factor(0, jb)
  plans[0] = fuses(0, jb) and row_plan(K, dev, Q, 0, jb, ipiv, 0) or nil
  st.ready:record(Q)
  local onQ = tune.step_on ~= "S"
  while j0 < n do
    local jend = j0 + jb
    local nxt = jend < n and width(jend)
    S:wait(st.ready)
    if nxt then
      local rest = n - jend
      local c1 = jend + nxt
      if onQ then
        -- the step on Q after the panel, once S's last full-width update (of these columns
        -- too) is done: no hop between the streams on the chain when S is ahead
        if j0 > 0 then Q:wait(st.u) end
        lookahead_step(K, dev, Q, n, n, j0, jb, jend, nxt, A, ipiv, A, j0 * n + j0, n)
      else
        lookahead_step(K, dev, S, n, n, j0, jb, jend, nxt, A, ipiv, A, j0 * n + j0, n)
        st.u:record(S)
        Q:wait(st.u)
      end
      factor(jend, nxt)
      -- (the slot S read at step k - 1: Q waited for S's step k - 1 above; a panel whose
      -- step takes laswp, the last one's too, has no plan)
      plans[(step + 1) % 2] = fuses(jend, nxt) and row_plan(K, dev, Q, jend, nxt, ipiv, (step + 1) % 2) or nil
      st.ready:record(Q)
      local plan = plans[step % 2]
      if plan then
        block_row(K, dev, S, n, n, j0, c1, c1, j0, jb, plan, A, j0 * n + j0, n, A)
      else
        swaps(K, dev, S, n, n, j0, c1, j0, jend, ipiv, A)
        trsm_how(dev, A.dtype, n - c1)(K, dev, S, jb, n - c1, A, j0 * n + j0, n, A, j0 * n + c1, n)
      end
      gemm_sub(K, A.dtype, S, rest, n - c1, jb, A, jend * n + j0, n, A, j0 * n + c1, n, A, jend * n + c1, n)
      if onQ then st.u:record(S) end
    else
      swaps(K, dev, S, n, n, j0, jend, j0, jend, ipiv, A)
    end
    j0, jb, step = jend, nxt, step + 1
  end
  st.done:record(S)
  if stream then stream:wait(st.done) else st.done:synchronize() end
end

-- blocked right-looking LU of the n x n A in place, pivots into ipiv (0-based rows, 1-based values)
local function lu_blocked(fname, K, dev, stream, n, nb, A, ipiv, status, panel_kind, taper, info)
  local make = panel_maker(fname, panel_kind, K, dev)
  if make == panel_cluster and n > nb and tune.lookahead ~= false then
    return lu_lookahead(K, dev, stream, n, nb, A, ipiv, status, make, taper, info)
  end
  local factor = panel_factory(make, K, dev, stream, n, A, ipiv, status, nil, nb)
  local fused = one_launch(K, dev, A.dtype)
  for j0 = 0, n - 1, nb do
    local jb = math.min(nb, n - j0)
    local jend = j0 + jb
    factor(j0, jb)
    local fuses = jend < n and fuse(fused, n - jend)
    if fuses then
      block_row(K, dev, stream, n, n, j0, jend, jend, j0, jb, row_plan(K, dev, stream, j0, jb, ipiv, 0), A, j0 * n + j0, n, A)
    else
      swaps(K, dev, stream, n, n, j0, jend, j0, jend, ipiv, A)
    end
    if jend < n then
      local rest = n - jend
      if not fuses then trsm_how(dev, A.dtype, rest)(K, dev, stream, jb, rest, A, j0 * n + j0, n, A, j0 * n + jend, n) end
      gemm_sub(K, A.dtype, stream, rest, rest, jb, A, jend * n + j0, n, A, j0 * n + jend, n, A, jend * n + jend, n)
    end
  end
end

return {lu_blocked = lu_blocked, lu_block = lu_block, panel_factory = panel_factory, lookahead_step = lookahead_step,
        swaps = swaps, column_swaps = column_swaps, one_launch = one_launch, fuse = fuse, row_plan = row_plan,
        block_row = block_row}
