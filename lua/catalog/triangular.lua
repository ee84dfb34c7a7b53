-- culua.catalog.triangular: the solve family's triangular solves
-- (kernels/triangular.cu): trsm, a block row (LU's block row of U, and
-- lu_solve's blocks), and lu_solve's plan: the right-hand sides permuted,
-- then substituted in one launch a triangle (a few of them) or by blocks.

local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"

local ceil_div = core.ceil_div
local tune, view, gemm_sub, esize, copy, grid_for = S.tune, S.view, S.gemm_sub, S.esize, S.copy, S.grid_for
local shared_room = S.shared_room
local MAXBLOCK = S.shapes.MAXBLOCK
local TRSV_ROWS, TRSV_THREADS, TRSV_COLS, TRSV_SYNC = S.shapes.TRSV_ROWS, S.shapes.TRSV_THREADS, S.shapes.TRSV_COLS,
                                                      S.shapes.TRSV_SYNC
local TRSM_COLS, TRSM_ROWS, PERM_THREADS = S.shapes.TRSM_COLS, S.shapes.TRSM_ROWS, S.shapes.PERM_THREADS
local BSTEP_COLS, BSTEP_THREADS, BSTEP_ROWS = S.shapes.BSTEP_COLS, S.shapes.BSTEP_THREADS, S.shapes.BSTEP_ROWS

-- X (jb x ncols) = inv(Tr) * X for Tr's unit lower (which = "lower") or upper triangle;
-- the kernel keeps the triangle in the launch's shared memory (up to MAXBLOCK^2 elements)
local function trsm(K, which, stream, jb, ncols, Tr, toff, ldt, X, xoff, ldx)
  if ncols <= 0 then return end
  local k, size = K("trsm_" .. which), esize(X.dtype)
  -- (the triangle's columns padded to a multiple of 32 rows: kernels/triangular.cu's trsm;
  -- opted in for what is launched: MAXBLOCK^2 float64s and the kernel's 33 KB static pass
  -- the 99 KB a block may have on compute capability 8.6 and 8.9)
  local bytes = jb * ceil_div(jb, 32) * 32 * size
  core.allow_shared(k, bytes)
  k:launch({grid = ceil_div(ncols, TRSM_COLS), block = {TRSM_COLS, TRSM_ROWS}, shared = bytes,
            stream = stream},
           jb, ncols, Tr, toff, ldt, X, xoff, ldx)
end

-- a step of the solve over ranks (the forward one in lu_multi.lua's rhs, from a panel's
-- buffer; the backward one in ranks.lua): Y (jb x k at Y + yoff, a row every k) = inv(T) * B
-- (at B + boff; B is not Y: kernels/triangular.cu's bstep says why) for the triangle at
-- T + toff (a row every ld; which = "lower": unit lower, "upper": with its diagonal), then
-- W (m x k, a row every k) -= T's block column at T + loff (m x jb) * Y. For a few
-- right-hand sides, where the triangle fits a block's shared memory, one launch (bstep: the
-- chain of steps waits on no launch between the two); else B copied to Y, trsm and matmul
local function block_step(K, dev, stream, which, jb, k, T, toff, ld, B, boff, Y, yoff, m, loff, W, woff)
  if k <= 0 then return end
  local size = esize(Y.dtype)
  local bytes = jb * (jb + 1) * size
  if k <= BSTEP_COLS then
    local kern = K("bstep_" .. which)
    if bytes <= shared_room(kern, dev) then
      core.allow_shared(kern, bytes)
      return kern:launch({grid = math.max(1, math.min(ceil_div(m, BSTEP_THREADS // 32 * BSTEP_ROWS), core.sm_count(dev))),
                          block = BSTEP_THREADS, shared = bytes, stream = stream},
                         jb, k, T, toff, ld, B, boff, Y, yoff, m, T, loff, W, woff)
    end
  end
  copy(K, dev, stream, jb * k, view(B, boff, jb * k), view(Y, yoff, jb * k))
  trsm(K, which, stream, jb, k, T, toff, ld, Y, yoff, k)
  if m > 0 then gemm_sub(K, Y.dtype, stream, m, k, jb, T, loff, ld, Y, yoff, k, W, woff, k) end
end

--[[
** L y = P b, then U x = y, in one launch a triangle (kernels/triangular.cu's substitutions):
** a block of threads a block of TRSV_ROWS rows and a group of TRSV_COLS right-hand
** sides (one for k = 1, which has kernels of its own: a quarter of the registers and
** of the shuffles a step). The blocks of a group take tickets and publish the block
** rows they solve through TRSV_SYNC words of scratch (the upper solve's after the
** lower's), which the kernels leave at zero: no fill a call (a fill without a stream
** would wait for the device).
]]
local function substitute(K, dev, stream, n, k, LU, B)
  local cols = k == 1 and 1 or TRSV_COLS
  local groups = ceil_div(k, cols)
  local words = groups * TRSV_SYNC
  local sync = core.scratch("solve_trsv", dev, stream, 2 * words)
  local name = k == 1 and "trsv1_" or "trsv_"
  local cfg = {grid = {ceil_div(n, TRSV_ROWS), groups}, block = TRSV_THREADS, stream = stream}
  K(name .. "lower"):launch(cfg, n, k, LU, B, view(sync, 0, words))
  K(name .. "upper"):launch(cfg, n, k, LU, B, view(sync, words, words))
end

-- B's rows (n x k) permuted by the pivots, as getrs does first
local function permute(K, dev, stream, n, k, ipiv, B)
  local dt = B.dtype
  local perm = core.scratch("solve_perm", dev, stream, n)
  local pk = K("permutation", false)
  -- (in shared memory where n words fit: the chain of swaps waits on each one's loads;
  -- opted in at any size, since the kernel's static 8 KB of pivots count against the 48 KB
  -- a launch gets without: n = 10241..12288 once failed to launch)
  local shared = n * 4 <= shared_room(pk, dev)
  if shared then core.allow_shared(pk, n * 4) end
  pk:launch({grid = 1, block = PERM_THREADS, shared = shared and n * 4 or 0, stream = stream}, n, ipiv, perm, shared and 1 or 0)
  local W = core.scratch("solve_rhs_" .. dt, dev, stream, n * k)
  K("gather"):launch({grid = grid_for(n * k, 256, dev), block = 256, stream = stream}, n, k, perm, B, W)
  copy(K, dev, stream, n * k, W, B)
end

-- permute B's rows by the pivots, then the two triangular solves: for at most
-- tune.trsv_max right-hand sides by substitute, else by blocks (a trsm launch and
-- a matmul a block row each way: about 4 n / nb launches)
local function solve_factored(K, dev, stream, n, k, nb, LU, ipiv, B)
  local dt = LU.dtype
  permute(K, dev, stream, n, k, ipiv, B)
  -- (gridDim.y, the column groups, is at most 65535)
  if k <= math.min(tune.trsv_max, 65535 * TRSV_COLS) then return substitute(K, dev, stream, n, k, LU, B) end
  -- L y = P b: each block row solved, then taken from the rows below
  for i0 = 0, n - 1, nb do
    local jb = math.min(nb, n - i0)
    trsm(K, "lower", stream, jb, k, LU, i0 * n + i0, n, B, i0 * k, k)
    gemm_sub(K, dt, stream, n - i0 - jb, k, jb, LU, (i0 + jb) * n + i0, n, B, i0 * k, k, B, (i0 + jb) * k, k)
  end
  -- U x = y, from the last block row up
  local i0 = ((n - 1) // nb) * nb
  while i0 >= 0 do
    local jb = math.min(nb, n - i0)
    trsm(K, "upper", stream, jb, k, LU, i0 * n + i0, n, B, i0 * k, k)
    gemm_sub(K, dt, stream, i0, k, jb, LU, i0, n, B, i0 * k, k, B, 0, k)
    i0 = i0 - nb
  end
end

return {trsm = trsm, block_step = block_step, permute = permute, solve_factored = solve_factored}
