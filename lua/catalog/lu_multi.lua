-- culua.catalog.lu_multi: LU on several GPUs (kernels/lu_multi.cu), MAGMA's
-- multi-GPU getrf in one process: block-cyclic columns over the shares, a
-- panel factored by its owner and sent to every share, with the look-ahead.
-- Its shares and transport are lua/catalog/shares.lua's; its panels, steps and
-- swaps the one-GPU LU's (lu.lua, lu_panel.lua, triangular.lua).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"
local sh_ = require "culua.catalog.shares"
local lu = require "culua.catalog.lu"
local panel_maker = require("culua.catalog.lu_panel").panel_maker
local trsm = require("culua.catalog.triangular").trsm

local ceil_div = core.ceil_div
local MAXBLOCK = S.shapes.MAXBLOCK
local tune, kernels, grid_for, view, gemm_sub = S.tune, S.kernels, S.grid_for, S.view, S.gemm_sub
local transport, move, pinned, keep, closing = sh_.transport, sh_.move, sh_.pinned, sh_.keep, sh_.closing
local shares_on, home_stream, chunk_event, finish = sh_.shares_on, sh_.home_stream, sh_.chunk_event, sh_.finish
local panel_factory, lookahead_step, swaps, column_swaps = lu.panel_factory, lu.lookahead_step, lu.swaps, lu.column_swaps

--[[
** Blocked right-looking LU over G shares (MAGMA's multi-GPU getrf, one process): panel q
** (nb columns) belongs to share q % G; each share keeps its columns in an n x nloc array L
** (leading dimension nloc). For panel k, owned by o:
**   Q_o (o's second stream) has factored it and packed it with its pivots into a send buffer
**   (two, alternating), and recorded `ready`;
**   each share's stream S waits for `ready`, copies the buffer (peer, local, or from o's
**   pinned host copy), takes the pivots into its ipiv, applies the swaps to its columns (the
**   owner: all but the panel's), solves its block row of U (trsm) and updates its trailing
**   columns (gemm_sub);
**   the owner of panel k + 1 updates that panel's columns first, records `u`, and its Q
**   (after `u`) factors panel k + 1 and sends it while S goes on with the rest of step k:
**   the look-ahead.
** Every share waits for every panel, so a send buffer is written again (panel k + 2G) only
** after every share took panel k (each owner between factored after its S took k; o's S
** waited for them all, and o's Q waits for o's S); the pinned copy likewise (k + G).
]]
local lu_multi = closing(function (owned, fname, dev0, ustream, n, nb, dt, A, ipiv, pk, list, peer, info)
  local P = ceil_div(n, nb)
  local G = math.min(#list, P)   -- a share beyond the panels would have no columns
  info.shares = G
  local sh = shares_on(list, G, dev0, dt, info, peer)
  local HS, hev = home_stream(dev0, ustream)
  local buf_size = nb + n * nb
  for g = 1, G do
    local s = sh[g]
    local nloc = 0
    for q = g - 1, P - 1, G do nloc = nloc + math.min(nb, n - q * nb) end
    s.nloc = nloc
    s.status = core.scratch("solve_status", s.dev, s.Q, 1)
    local o = {device = s.dev.ordinal}
    s.L = keep(owned, cuda.array(dt, n * nloc, o))
    s.ipiv = keep(owned, cuda.array("int32", n, o))
    s.SB = {keep(owned, cuda.array(dt, buf_size, o)), keep(owned, cuda.array(dt, buf_size, o))}
    s.RB = {keep(owned, cuda.array(dt, buf_size, o)), keep(owned, cuda.array(dt, buf_size, o))}
    s.recvd = 0   -- panels received: the receive buffers alternate
    s.factor = panel_factory(panel_maker(fname, pk, s.K, s.dev), s.K, s.dev, s.Q, n, s.L, s.ipiv, s.status, nloc, nb)
    for h = 1, G do
      if transport(info, peer, s.dev.ordinal, sh[h].dev.ordinal) == "host" then
        s.HB = s.HB or keep(owned, pinned(dt, buf_size))
      end
    end
  end
  -- local columns of share s in the panels before panel q
  local function lstart(s, q)
    if q >= P then return s.nloc end
    local c = q - (s.g - 1)
    return c <= 0 and 0 or ceil_div(c, G) * nb
  end

  -- rows [j0, j0 + rows) of share s's columns into A, on its gather stream G (a peer writes
  -- into A over peer access)
  local function gather(s, j0, rows)
    s.K("cyclic"):launch({grid = grid_for(rows * s.nloc, 256, s.dev), block = 256, stream = s.G}, n, rows, nb, G,
                         s.g - 1, s.nloc, 0, s.nloc, view(A, j0 * n, rows * n), view(s.L, j0 * s.nloc, rows * s.nloc), 1)
  end

  -- distribute: each share's columns packed out of A into its L. A share on the arrays'
  -- device packs its own on its S; the arrays' device writes a peer's straight into the
  -- peer's L over peer access (writes over the link), in tune.start_chunks chunks of whole
  -- panels, each with an event (s.chunks), so that the peer's first step takes each as it
  -- comes rather than idle until all of its columns are there (two H200s at 32768: 2.1 GB,
  -- 5.5 ms of NVLink; session 22: 455.25 and 451.89 ms against 456.21 and 454.91 in one
  -- piece); the first chunk holds the columns its Q works on in that step. A share
  -- reached through the host gets them packed on the arrays' device (W), staged and copied
  local cyclic = kernels(dev0, dt)("cyclic")
  hev:record(HS)   -- the start, after the caller's stream
  local nev = 0
  for _, s in ipairs(sh) do
    local count = n * s.nloc
    local grid = {grid = grid_for(count, 256, dev0), block = 256, stream = HS}
    if s.home == "local" then
      s.S:wait(hev)
      grid.stream = s.S
      cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, 0, s.nloc, A, s.L, 0)
    elseif s.home == "peer" then
      s.chunks = {}
      local per = ceil_div(ceil_div(s.nloc, math.max(tune.start_chunks or 1, 1)), nb) * nb
      local c0 = 0
      while c0 < s.nloc do
        local c1 = math.min(s.nloc, c0 == 0 and math.max(per, lstart(s, 2)) or c0 + per)
        grid.grid = grid_for(n * (c1 - c0), 256, dev0)
        cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, c0, c1 - c0, A, s.L, 0)
        nev = nev + 1
        local ev = chunk_event(dev0, nev)
        ev:record(HS)
        s.chunks[#s.chunks + 1] = {c0 = c0, c1 = c1, ev = ev}
        c0 = c1
      end
      s.S:wait(s.chunks[1].ev)
    else
      s.W = keep(owned, cuda.array(dt, count, {device = dev0.ordinal}))
      s.HW = keep(owned, pinned(dt, count))
      cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, 0, s.nloc, A, s.W, 0)
      move(s.home, s.W, HS, hev, s.L, s.S, s.HW)
    end
    s.u:record(s.S)
    s.Q:wait(s.u)
  end

  -- panel k on its owner's second stream: factored, packed with its pivots, sent to the host if need be
  local function factor_and_send(k)
    local o = sh[k % G + 1]
    local j0 = k * nb
    local jb = math.min(nb, n - j0)
    local lc = lstart(o, k)
    local buf = o.SB[(k // G) % 2 + 1]
    o.factor(j0, jb, lc - j0)
    local cnt = jb + (n - j0) * jb
    o.K("panel_pack"):launch({grid = grid_for(cnt, 256, o.dev), block = 256, stream = o.Q},
                             n, j0, jb, o.L, lc, o.nloc, o.ipiv, buf)
    if o.HB then buf:view(1, cnt):copy_to(o.HB, o.Q) end
    o.ready:record(o.Q)
  end

  factor_and_send(0)
  local onQ = tune.step_on ~= "S"
  for k = 0, P - 1 do
    local o = sh[k % G + 1]
    local j0 = k * nb
    local jb = math.min(nb, n - j0)
    local jend = j0 + jb
    local cnt = jb + (n - j0) * jb
    local nxt = k + 1 < P and sh[(k + 1) % G + 1] or nil
    for _, s in ipairs(sh) do
      local S, K, ld = s.S, s.K, s.nloc
      -- the next panel's owner receives panel k on Q (step_on = "Q", as lu_lookahead), into
      -- the receive buffer S read two receives ago (freed: that step's end), not waiting for
      -- S's step k - 1, which reads the other (else S idles for each copy and its pivots)
      local R = s == nxt and onQ and s.Q or S
      R:wait(o.ready)
      local buf, bi
      if s == o then buf = o.SB[(k // G) % 2 + 1]
      else
        local t = transport(info, peer, o.dev.ordinal, s.dev.ordinal)
        s.recvd = s.recvd + 1
        bi = s.recvd % 2 + 1
        buf = s.RB[bi]
        if R ~= S then R:wait(s.freed[bi]) end
        if t == "host" then buf:copy_from(o.HB, R)
        else buf:view(1, cnt):copy_from(o.SB[(k // G) % 2 + 1]:view(1, cnt), R) end
        K("panel_pivots"):launch({grid = 1, block = MAXBLOCK, stream = R}, j0, jb, buf, s.ipiv)   -- a thread a pivot
      end
      if R ~= S then
        s.u:record(R)
        S:wait(s.u)
        -- and the step on Q after S's step k - 1, which updated the next panel's columns too
        if k > 0 then R:wait(s.w) end
      end
      local lo, hi = 0, 0
      if s == o then lo = lstart(o, k); hi = lo + jb end
      -- local columns [c0, c1): U's block row, then the trailing update
      local function update(c0, c1)
        if c1 <= c0 then return end
        trsm(K, "lower", S, jb, c1 - c0, buf, jb, jb, s.L, j0 * ld + c0, ld)
        gemm_sub(K, dt, S, n - jend, c1 - c0, jb, buf, jb + jb * jb, jb, s.L, j0 * ld + c0, ld,
                 s.L, jend * ld + c0, ld)
      end
      -- the row swaps on the local columns but [skip_lo, skip_hi), and the update of those
      -- from `from` on; in the first step, a chunk of the distribution at a time as it comes
      local function swaps_update(skip_lo, skip_hi, from)
        if not (k == 0 and s.chunks) then
          swaps(K, s.dev, S, ld, ld, skip_lo, skip_hi, j0, jend, s.ipiv, s.L)
          return update(from, ld)
        end
        for _, ch in ipairs(s.chunks) do
          local a, b = ch.c0, ch.c1
          S:wait(ch.ev)
          if skip_lo > a then column_swaps(K, s.dev, S, n, ld, a, math.min(b, skip_lo), j0, jend, s.ipiv, s.L) end
          if skip_hi < b then column_swaps(K, s.dev, S, n, ld, math.max(a, skip_hi), b, j0, jend, s.ipiv, s.L) end
          update(math.max(a, from), b)
        end
      end
      local lt = lstart(s, k + 1)
      if s == nxt then
        -- the next panel's owner: as lu_lookahead, panel k + 1's columns [lt, lt1) first
        -- (their swaps, U block and update, at their own width: narrow_step, its L the
        -- panel as it came, in buf) so that Q can factor it,
        -- then the rest of the row swaps and the update (every transfer of a panel waits
        -- for this chain: on two GPUs it is the critical path's every other step). The
        -- rest skips [lt, lt1), and panel k's columns [lo, hi) too when this share owns
        -- it as well (one share owns every panel): they lie just left, hi == lt
        local lt1 = lstart(s, k + 2)
        lookahead_step(K, s.dev, R, n, ld, j0, jb, lt, lt1 - lt, s.L, s.ipiv, buf, jb, jb)
        if R == S then
          s.u:record(S)
          s.Q:wait(s.u)
        end
        factor_and_send(k + 1)
        swaps_update(s == o and lo or lt, lt1, lt1)
      else
        swaps_update(lo, hi, lt)
      end
      s.w:record(S)
      if bi then s.freed[bi]:record(S) end
      -- rows [j0, jend) of this share's columns are final now (every later step works on the
      -- rows below): into A on G, beside the steps that follow, rather than all at the end
      -- (two H200s, float32 32768: 5.5 ms of NVLink for a share's 2.1 GB). The next panel's
      -- owner wrote those rows of its columns on Q, before it recorded `ready`
      if s.home ~= "host" then
        s.G:wait(s.w)
        if s == nxt then s.G:wait(s.ready) end
        gather(s, j0, jb)
      end
    end
  end

  -- the columns back into A (a share's rows went on its G as they became final; one reached
  -- through the host stages them all now, into W, and the arrays' device unpacks them), and
  -- share 1's pivots (every share has them all)
  local ipiv_hbuf = sh[1].home == "host" and keep(owned, pinned("int32", n)) or nil
  for _, s in ipairs(sh) do
    if s.home == "host" then
      move(s.home, s.L, s.S, s.done, s.W, HS, s.HW)
      cyclic:launch({grid = grid_for(n * s.nloc, 256, dev0), block = 256, stream = HS}, n, n, nb, G, s.g - 1, s.nloc,
                    0, s.nloc, A, s.W, 1)
    else
      s.done:record(s.G)
      HS:wait(s.done)
    end
  end
  return finish(sh, n, ipiv, ipiv_hbuf, HS, hev, ustream, owned, "Q")
end)

return lu_multi
