-- culua.catalog.seed: seed 003's method (kernels/seed.cu), method = "seed":
-- three kernels a column on the transposed augmented matrix, on the arrays'
-- device or as the seed's P2P program over several (lua/catalog/shares.lua's
-- shares and transport).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"
local sh_ = require "culua.catalog.shares"

local ceil_div = core.ceil_div
local grid_for, take_status = S.grid_for, S.take_status
local SEED_PIVOT_THREADS, TRANSPOSE_TILE, TRANSPOSE_ROWS = S.shapes.SEED_PIVOT_THREADS, S.shapes.TRANSPOSE_TILE,
                                                     S.shapes.TRANSPOSE_ROWS
local transport, move, pinned, keep, closing = sh_.transport, sh_.move, sh_.pinned, sh_.keep, sh_.closing
local shares_on, home_stream, finish, close_all = sh_.shares_on, sh_.home_stream, sh_.finish, sh_.close_all

-- the seed's elimination on ABT ((n + k) x n, the transposed augmented matrix): lu = 1 keeps
-- the multipliers below the pivots (getrf unblocked), lu = 0 is Gauss-Jordan
local function seed_eliminate(K, dev, stream, n, ncols, ABT, ipiv, status, lu, mult, prow)
  local pivot, extract, elim = K("seed_pivot"), K("seed_extract"), K("seed_eliminate")
  for p = 0, n - 1 do
    pivot:launch({grid = 1, block = SEED_PIVOT_THREADS, stream = stream}, n, 0, p, lu, ABT, ipiv, mult, status)
    extract:launch({grid = grid_for(ncols, 256, dev), block = 256, stream = stream}, n, ncols, p, ipiv, ABT, prow)
    local lo = lu == 1 and p + 1 or 0
    if n - lo > 0 and ncols - p > 0 then
      elim:launch({grid = {ceil_div(n - lo, 256), math.min(ncols - p, 65535)}, block = 256, stream = stream},
                  n, ncols, 0, p, lu, ABT, mult, prow)
    end
  end
end

local function transpose(K, stream, rows, cols, src, soff, lds, dst, doff, ldd)
  K("transpose"):launch({grid = {ceil_div(cols, TRANSPOSE_TILE), ceil_div(rows, TRANSPOSE_TILE)},
                         block = {TRANSPOSE_TILE, TRANSPOSE_ROWS}, stream = stream},
                        rows, cols, src, soff, lds, dst, doff, ldd)
end

--[[
** Seed 003's P2P program: the transposed augmented matrix ABT's rows (the columns of
** [A | B]) split in contiguous parts, one a share. For each column p the share that holds
** it finds the pivot and the multipliers (seed_pivot) and broadcasts them, the pivot row's
** number and the n multipliers, to the others by peer copies (or the host); every share
** then swaps and eliminates its own columns. The owner waits until the others took the
** last step's broadcast before it writes the next one (the seed's cudaMemcpyPeer, which
** waits too). ABT (ncols x n, on the arrays' device) is reduced in place, the pivots into ipiv.
]]
local seed_multi = closing(function (owned, dev0, ustream, n, ncols, dt, ABT, ipiv, lu, list, peer, info)
  local G = math.min(#list, ncols)
  info.shares = G
  local sh = shares_on(list, G, dev0, dt, info, peer)
  local HS, hev = home_stream(dev0, ustream)
  for g = 1, G do
    local s = sh[g]
    local o = s.dev.ordinal
    s.c0, s.c1 = (g - 1) * ncols // G, g * ncols // G
    local w = s.c1 - s.c0
    s.w = w
    s.X = keep(owned, cuda.array(dt, w * n, {device = o}))
    s.ipiv = keep(owned, cuda.array("int32", n, {device = o}))
    -- zeroed: seed_pivot writes rows p+1.. of it (lu), and the whole of it travels
    s.mult = keep(owned, cuda.array(dt, n, {device = o})):fill(0, s.S)
    s.prow = keep(owned, cuda.array(dt, w, {device = o}))
    s.status = core.scratch("solve_status", s.dev, s.S, 1)
    if s.home == "host" then s.HW = keep(owned, pinned(dt, w * n)) end
    for h = 1, G do
      if transport(info, peer, o, sh[h].dev.ordinal) == "host" then
        s.HI = s.HI or keep(owned, pinned("int32", 1))
        s.HM = s.HM or keep(owned, pinned(dt, n))
      end
    end
  end
  for _, s in ipairs(sh) do
    move(s.home, ABT:view(s.c0 * n + 1, s.w * n), HS, hev, s.X, s.S, s.HW)
  end
  local owner = 1
  for p = 0, n - 1 do
    while p >= sh[owner].c1 do owner = owner + 1 end
    local o = sh[owner]
    if p > 0 then
      for _, s in ipairs(sh) do if s ~= o then o.S:wait(s.recv) end end
    end
    o.K("seed_pivot"):launch({grid = 1, block = SEED_PIVOT_THREADS, stream = o.S}, n, o.c0, p, lu, o.X, o.ipiv, o.mult, o.status)
    if o.HI then
      o.ipiv:view(p + 1, 1):copy_to(o.HI, o.S)
      o.mult:copy_to(o.HM, o.S)
    end
    o.ready:record(o.S)
    for _, s in ipairs(sh) do
      if s ~= o then
        s.S:wait(o.ready)
        if transport(info, peer, o.dev.ordinal, s.dev.ordinal) == "host" then
          s.ipiv:view(p + 1, 1):copy_from(o.HI, s.S)
          s.mult:copy_from(o.HM, s.S)
        else
          s.ipiv:view(p + 1, 1):copy_from(o.ipiv:view(p + 1, 1), s.S)
          s.mult:copy_from(o.mult, s.S)
        end
        s.recv:record(s.S)
      end
    end
    local lo = lu == 1 and p + 1 or 0
    for _, s in ipairs(sh) do
      s.K("seed_extract"):launch({grid = grid_for(s.w, 256, s.dev), block = 256, stream = s.S},
                                 n, s.w, p, s.ipiv, s.X, s.prow)
      local first = math.max(p - s.c0, 0)
      if n - lo > 0 and s.w - first > 0 then
        s.K("seed_eliminate"):launch({grid = {ceil_div(n - lo, 256), math.min(s.w - first, 65535)}, block = 256, stream = s.S},
                                     n, s.w, s.c0, p, lu, s.X, s.mult, s.prow)
      end
    end
  end
  for _, s in ipairs(sh) do
    move(s.home, s.X, s.S, s.done, ABT:view(s.c0 * n + 1, s.w * n), HS, s.HW)
  end
  local ipiv_hbuf = sh[1].home == "host" and keep(owned, pinned("int32", n)) or nil
  return finish(sh, n, ipiv, ipiv_hbuf, HS, hev, ustream, owned, "S")
end)

-- the seed's elimination of ABT (ncols x n, lu as seed_eliminate's) on the arrays'
-- device or spread over the listed ones: returns the first bad pivot (0: none), the
-- stream waited for and the work arrays closed; ABT is the caller's, closed here only
-- when this raises
local function seed_run(K, dev, stream, n, ncols, dt, ABT, ipiv, status, lu, multi, list, peer, info)
  if multi then
    local ok, bad = pcall(seed_multi, dev, stream, n, ncols, dt, ABT, ipiv, lu, list, peer, info)
    if not ok then ABT:close(); error(bad, 0) end
    return bad
  end
  local mult, prow = cuda.array(dt, n, {device = dev.ordinal}), cuda.array(dt, ncols, {device = dev.ordinal})
  seed_eliminate(K, dev, stream, n, ncols, ABT, ipiv, status, lu, mult, prow)
  local bad = take_status(status, stream)
  close_all{mult, prow}
  return bad
end

return {seed_run = seed_run, transpose = transpose}
