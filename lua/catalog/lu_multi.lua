-- culua.catalog.lu_multi: LU spread over shares (kernels/lu_multi.cu), MAGMA's
-- multi-GPU getrf: block-cyclic columns over the shares, a panel factored by its
-- owner and sent to every share, with the look-ahead. The algorithm is here once,
-- whatever moves its data: beneath it a transport (the table below), shares.lua's
-- for the GPUs of one process (devices = {...}: peer copies, copies within a
-- device, pinned host staging) or ranks_transport.lua's for one GPU a rank (comm =: NCCL).
-- Its panels, steps and swaps are the one-GPU LU's (lu.lua, lu_panel.lua,
-- triangular.lua).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"
local lu = require "culua.catalog.lu"
local panel_maker = require("culua.catalog.lu_panel").panel_maker
local tri = require "culua.catalog.triangular"
local trsm, block_step = tri.trsm, tri.block_step
local sh_ = require "culua.catalog.shares"

local ceil_div = core.ceil_div
local MAXBLOCK = S.shapes.MAXBLOCK
local tune, grid_for, gemm_sub = S.tune, S.grid_for, S.gemm_sub
local keep, closing = sh_.keep, sh_.closing
local panel_factory, lookahead_step, swaps, column_swaps = lu.panel_factory, lu.lookahead_step, lu.swaps, lu.column_swaps
local one_launch, fuse, row_plan, block_row = lu.one_launch, lu.fuse, lu.row_plan, lu.block_row

-- the columns share g (0-based) of G holds when n columns are dealt out in blocks of nb
local cyclic_columns = require("culua.catalog.block_cyclic").columns_of

--[[
** The transport tp, what the algorithm asks of whatever moves its data:
**   tp.G        the shares in all: panel q (nb columns) belongs to share q % G + 1
**   tp.shares   the G shares, each {g =}; those this process drives (s.mine) also have
**               their device s.dev, kernels s.K, streams S (the steps), Q (the panels,
**               ahead) and G, and events ready, u, w, done, freed[2]; with rhs (below),
**               mine[1] also the stream V and events fin, fout (share_on's own_stream)
**   tp.mine     the shares this process drives, in order
**   tp.setup(s, owned, size)   after the driver made s's arrays (s.L, its columns, unless
**               the transport gave it one); size: the elements of a panel's buffer
**   tp.start(lstart)           each share's columns into its L (s.chunks: the pieces in
**               which they come, each with the event that says it came)
**   tp.send(o, buf, cnt)       panel k, packed in buf on o.Q: record o.ready (o's own
**               steps wait for it) and send it on to the other shares
**   tp.stream(s)               the stream on which share s takes a panel (unless it owns
**               the next one: then on Q, the look-ahead's chain)
**   tp.take(s, o, R, buf, cnt) the panel that o sent into s's buf, on stream R
**   tp.rows(s, j0, rows, nxt)  rows [j0, j0 + rows) of s's columns are final (after s.w;
**               nxt: s owns the next panel, whose rows its Q wrote before s.ready)
**   tp.taken(s)                (optional) s took panel k, and nothing of step k + 1 has
**               been sent: the one point of a step at which every share (every rank) has
**               made the same transfers, in the same order
**   tp.finish()                the columns and the pivots home; the first bad pivot
**
** Blocked right-looking LU over the G shares (MAGMA's multi-GPU getrf): each share keeps its
** columns in an n x nloc array L (leading dimension nloc). For panel k, owned by o:
**   Q_o has factored it and packed it with its pivots into a send buffer (two, alternating),
**   and sent it (tp.send);
**   each share takes it (into one of two receive buffers, tp.take), takes the pivots into its
**   ipiv, applies the swaps to its columns (the owner: all but the panel's), solves its block
**   row of U (trsm) and updates its trailing columns (gemm_sub);
**   the owner of panel k + 1 updates that panel's columns first, records `u`, and its Q
**   (after `u`) factors panel k + 1 and sends it while S goes on with the rest of step k:
**   the look-ahead.
** Every share waits for every panel, so a send buffer is written again (panel k + 2G) only
** after every share took panel k (each owner between factored after its S took k; o's S
** waited for them all, and o's Q waits for o's S); a pinned copy likewise (k + G).
**
** rhs (optional; the solve over ranks, on root): right-hand sides X (n x k, a row every k)
** on the device of the first share this process drives, and Y (n x k, not X). The forward
** solve comes folded into the factorization, as HPL factors [A b]: as each panel k comes,
** X's rows take its swaps, then Y's block k = inv(L_kk) X's (block_step, X's rows below
** less L_ik Y_k). So X's columns go as the trailing columns of [A X] would, and Y ends
** as inv(L) P X, without a chain of steps after the factorization: on the share's V, after
** the panel came (fin); S waits (fout) before the panel's buffer may be written again.
** Y's every block is written; X's rows are spent.
]]
local function lu_multi(owned, fname, n, nb, dt, pk, tp, rhs)
  local P = ceil_div(n, nb)
  local G, sh, mine = tp.G, tp.shares, tp.mine
  local buf_size = nb + n * nb
  for g = 1, G do sh[g].nloc = cyclic_columns(n, nb, G, g - 1) end
  for _, s in ipairs(mine) do
    local nloc = s.nloc
    s.status = core.scratch("solve_status", s.dev, s.Q, 1)
    local o = {device = s.dev.ordinal}
    s.L = s.L or keep(owned, cuda.array(dt, n * nloc, o))
    s.ipiv = keep(owned, cuda.array("int32", n, o))
    s.SB = {keep(owned, cuda.array(dt, buf_size, o)), keep(owned, cuda.array(dt, buf_size, o))}
    s.RB = {keep(owned, cuda.array(dt, buf_size, o)), keep(owned, cuda.array(dt, buf_size, o))}
    s.recvd = 0   -- panels received: the receive buffers alternate
    s.factor = panel_factory(panel_maker(fname, pk, s.K, s.dev), s.K, s.dev, s.Q, n, s.L, s.ipiv, s.status, nloc, nb)
    s.fused = one_launch(s.K, s.dev, dt)   -- the swaps and the block row of U in one launch, as one GPU's
    tp.setup(s, owned, buf_size)
  end
  -- local columns of share s in the panels before panel q
  local function lstart(s, q)
    if q >= P then return s.nloc end
    local c = q - (s.g - 1)
    return c <= 0 and 0 or ceil_div(c, G) * nb
  end
  tp.start(lstart)

  -- panel k on its owner's second stream, where this process drives it: factored, packed
  -- with its pivots, sent
  local function factor_and_send(k)
    local o = sh[k % G + 1]
    if not o.mine then return end
    local j0 = k * nb
    local jb = math.min(nb, n - j0)
    local lc = lstart(o, k)
    local buf = o.SB[(k // G) % 2 + 1]
    o.factor(j0, jb, lc - j0)
    local cnt = jb + (n - j0) * jb
    o.K("panel_pack"):launch({grid = grid_for(cnt, 256, o.dev), block = 256, stream = o.Q},
                             n, j0, jb, o.L, lc, o.nloc, o.ipiv, buf)
    tp.send(o, buf, cnt)
  end

  -- panel k (in buf, which stream R has) applied to the right-hand sides, as above
  local function forward(s, R, buf, j0, jb)
    local V, X, k = s.V, rhs.X, rhs.k
    s.fin:record(R)
    V:wait(s.fin)
    swaps(s.K, s.dev, V, k, k, 0, 0, j0, j0 + jb, s.ipiv, X)
    block_step(s.K, s.dev, V, "lower", jb, k, buf, jb, jb, X, j0 * k, rhs.Y, j0 * k, n - j0 - jb, jb + jb * jb, X,
               (j0 + jb) * k)
    s.fout:record(V)
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
    for _, s in ipairs(mine) do
      local S, K, ld = s.S, s.K, s.nloc
      local folds = rhs and s == mine[1]   -- (s takes the panel to the right-hand sides too)
      -- the next panel's owner takes panel k on Q (step_on = "Q", as lu_lookahead), into
      -- the receive buffer S read two receives ago (freed: that step's end), not waiting for
      -- S's step k - 1, which reads the other (else S idles for each copy and its pivots);
      -- the owner reads its own on S, the others take it on the transport's stream
      local R = s == nxt and onQ and s.Q or (s == o and S or tp.stream(s))
      local buf, bi
      if s == o then
        R:wait(o.ready)
        buf = o.SB[(k // G) % 2 + 1]
      else
        s.recvd = s.recvd + 1
        bi = s.recvd % 2 + 1
        buf = s.RB[bi]
        if R ~= S then R:wait(s.freed[bi]) end
        tp.take(s, o, R, buf, cnt)
        K("panel_pivots"):launch({grid = 1, block = MAXBLOCK, stream = R}, j0, jb, buf, s.ipiv)   -- a thread a pivot
      end
      if folds then forward(s, R, buf, j0, jb) end
      if R ~= S then
        s.u:record(R)
        S:wait(s.u)
        -- and the look-ahead's step (on Q, or over ranks with step_on = "S" on C) after S's
        -- step k - 1, which updated the next panel's columns too (and read the panel whose
        -- send buffer Q packs again after it)
        if s == nxt and k > 0 then R:wait(s.w) end
      end
      -- (after S's wait for the panel: what the transport queues now on C is not S's to wait
      -- for; over ranks, NCCL's order still puts it before panel k + 1, which S takes at step
      -- k + 1: a lag of two steps between the ranks rather than one)
      if tp.taken then tp.taken(s) end
      local lo, hi = 0, 0
      if s == o then lo = lstart(o, k); hi = lo + jb end
      -- local columns [c0, c1): U's block row (unless block_row solved it), then the
      -- trailing update
      local function update(c0, c1, solved)
        if c1 <= c0 then return end
        if not solved then trsm(K, "lower", S, jb, c1 - c0, buf, jb, jb, s.L, j0 * ld + c0, ld) end
        gemm_sub(K, dt, S, n - jend, c1 - c0, jb, buf, jb + jb * jb, jb, s.L, j0 * ld + c0, ld,
                 s.L, jend * ld + c0, ld)
      end
      -- the row swaps on the local columns but [skip_lo, skip_hi), and the update of those
      -- from `from` on (float32, where the trailing columns are as many as one GPU's rule
      -- asks, lu.lua's fuse: the swaps and U's block row in one launch, on a plan made on S,
      -- whose scratch no other share's stream takes); in the first step, a chunk of the
      -- distribution at a time as it comes
      local function swaps_update(skip_lo, skip_hi, from)
        if not (k == 0 and s.chunks) then
          if fuse(s.fused, n - jend) then
            block_row(K, s.dev, S, ld, ld, skip_lo, skip_hi, from, j0, jb, row_plan(K, s.dev, S, j0, jb, s.ipiv, 0),
                      buf, jb, jb, s.L)
            return update(from, ld, true)
          end
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
        -- (off Q, as with step_on = "S": on S, or over ranks on C, Q waits for it)
        if R ~= s.Q then
          s.u:record(R)
          s.Q:wait(s.u)
        end
        factor_and_send(k + 1)
        swaps_update(s == o and lo or lt, lt1, lt1)
      else
        swaps_update(lo, hi, lt)
      end
      if folds then S:wait(s.fout) end
      s.w:record(S)
      if bi then s.freed[bi]:record(S) end
      tp.rows(s, j0, jb, s == nxt)
    end
  end
  return tp.finish()
end

-- LU over the listed devices of this process (solve.lua's devices = {...}), A and ipiv on
-- dev0: shares.lua's transport beneath the algorithm; the first bad pivot
local devices = closing(function (owned, fname, dev0, ustream, n, nb, dt, A, ipiv, pk, list, peer, info)
  local tp = sh_.lu_transport(owned, dev0, ustream, n, nb, dt, A, ipiv, list, peer, info)
  return lu_multi(owned, fname, n, nb, dt, pk, tp)
end)

return {lu_multi = lu_multi, devices = devices}
