-- culua.catalog.ranks_transport: how the LU over ranks (ranks.lua) moves what it moves,
-- beneath lu_multi.lua's algorithm: the panels from their owner to every rank by NCCL
-- broadcasts on streams, A's columns dealt out from root in chunks at the start and
-- gathered back a block row at a time (the root layout), and the communicator the
-- transfers run on, split from the caller's with NCCL's blocks capped.

local cuda = require "cuda"
local S = require "culua.catalog.solve_common"
local sh_ = require "culua.catalog.shares"
local bc = require "culua.catalog.block_cyclic"

local view, esize, grid_for, keep = S.view, S.esize, S.grid_for, sh_.keep

local M = {}

-- {====================================================== the transport

--[[
** lu_multi.lua's transport over the ranks of comm, share s this rank's (its device's first
** shares slot, with a stream C of its own for NCCL). A panel goes out by an NCCL broadcast
** from its owner, on C after the owner's Q packed it (o.ready), and comes in on the stream
** lu_multi names (C, or Q for the next panel's owner). NCCL runs a communicator's calls in
** the order a rank makes them, whatever their streams; every rank makes them in the order
** of the panels (the owner of panel k + 1 sends it in step k, after it took panel k; the
** others take it in step k + 1), so they pair up. A rank's S and Q wait for no other rank
** but through the panels they take; C holds the rank's part of each broadcast.
** The root layout deals A's columns out from root at the start, in chunks that the first
** step takes as they come (the first before panel 0's broadcast, the rest after it), and
** gathers them back a block row at a time as they become final (both below); the
** distributed one factors the ranks' own columns in place.
** info.moved counts the bytes that left or reached this rank by NCCL, at the start, in
** panels and on the way back.
]]
local function transport(owned, comm, s, ustream, n, nb, dt, layout, A, root, ipiv, info)
  local G, me = comm.size, comm.rank
  local sh = {}
  for g = 1, G do sh[g] = {g = g} end
  sh[me + 1] = s
  local tp = {G = G, shares = sh, mine = {s}}
  local esz, moved = esize(dt), info.moved
  local cols = {n = n, ranks = G, block = nb}   -- block_cyclic.lua's descriptor, as its moves read it
  local W
  local function make(t, count) return keep(owned, cuda.array(t, count, {device = s.dev.ordinal})) end

  -- the root layout's way back (below): by block rows unless tune.rank_gather = "end"; root's
  -- receive buffers, a rank each (a block row of its columns), made before the steps
  local by_rows = layout == "root" and S.tune.rank_gather ~= "end"
  local RW = {}
  function tp.setup()
    if by_rows and me == root then
      for r = 0, G - 1 do if r ~= me then RW[r] = make(dt, nb * sh[r + 1].nloc) end end
    end
  end

  --[[
  ** The root layout's start: every rank's columns dealt out from root (on C; root packs its
  ** own on S). In tune.start_chunks chunks (shares.lua's chunks_of), each with an event
  ** (s.chunks) that the first step waits for, as the shares of one process do: rank r's
  ** chunk [c0, c1) is packed by root in the kernel's own order (its panels i0 .. are the
  ** matrix's i0 G + r, ...: the cyclic kernel over A from column i0 G nb), packed ahead on
  ** G, goes out whole, and is set into L's columns on its rank. By an NCCL broadcast from
  ** root a chunk (tune.rank_scatter = "broadcast", the default: every rank takes each chunk,
  ** and those it is not for are dropped; four H200s, float32 n = 32768: 465.64 ms on two
  ** ranks and 342.48 on four, against 470.42 and 344.89 by sends), or sent to its rank
  ** alone (tune.rank_scatter = "send": a group of sends a round of chunks)
  ]]
  local rest   -- the start's rounds of chunks after the first, for step 0's tp.taken
  local function scatter_chunks(lstart)
    local K, C = s.K, s.C
    local by_bcast = S.tune.rank_scatter ~= "send"
    local lists, most, widest = {}, 0, 0
    for r = 0, G - 1 do
      if r ~= root then
        lists[r] = sh_.chunks_of(sh[r + 1], nb, lstart)
        most = math.max(most, #lists[r])
        if by_bcast or r == me then
          for _, ch in ipairs(lists[r]) do widest = math.max(widest, ch.c1 - ch.c0) end
        end
      end
    end
    local T
    if me == root then
      bc.cyclic(cols, s.dev, dt, s.S, me, A, s.L, 0)
      s.G:wait(s.recv)
      W = {}
      for r in pairs(lists) do W[r] = make(dt, n * sh[r + 1].nloc) end
    else
      T = make(dt, n * widest)
    end
    -- chunk ch of rank r, taken into T on this rank (r's own: into its L, and its event)
    local function taken(r, i, ch)
      local w = ch.c1 - ch.c0
      if r ~= me then return end
      K("copy2d"):launch({grid = grid_for(n * w, 256, s.dev), block = 256, stream = C},
                         n, w, T, 0, w, s.L, ch.c0, s.nloc)
      ch.ev = sh_.chunk_event(s.dev, i)
      ch.ev:record(C)
    end
    -- root packs every round now, on G, each round's event recorded before C waits for it
    local packed = {}
    if me == root then
      for i = 1, most do
        for r, list in pairs(lists) do
          local ch = list[i]
          if ch then
            local w, off = ch.c1 - ch.c0, (ch.c0 // nb) * G * nb
            K("cyclic"):launch({grid = grid_for(n * w, 256, s.dev), block = 256, stream = s.G}, n, n, nb, G, r, w, 0, w,
                               view(A, off, n * n - off), view(W[r], n * ch.c0, n * w), 0)
          end
        end
        packed[i] = sh_.chunk_event(s.dev, i)
        packed[i]:record(s.G)
      end
    end
    local function round(i)
      if me == root then C:wait(packed[i]) end
      if by_bcast then
        for r = 0, G - 1 do
          local ch = lists[r] and lists[r][i]
          if ch then
            local cnt = n * (ch.c1 - ch.c0)
            comm:broadcast(me == root and view(W[r], n * ch.c0, cnt) or view(T, 0, cnt), {root = root, stream = C})
            moved.start = moved.start + cnt * esz
            taken(r, i, ch)
          end
        end
      elseif me == root then
        cuda.nccl.group(function ()
          for r = 0, G - 1 do
            local ch = lists[r] and lists[r][i]
            if ch then
              comm:send(view(W[r], n * ch.c0, n * (ch.c1 - ch.c0)), r, {stream = C})
              moved.start = moved.start + n * (ch.c1 - ch.c0) * esz
            end
          end
        end)
      elseif lists[me][i] then
        local ch = lists[me][i]
        comm:recv(view(T, 0, n * (ch.c1 - ch.c0)), root, {stream = C})
        moved.start = moved.start + n * (ch.c1 - ch.c0) * esz
        taken(me, i, ch)
      end
    end
    -- the first round now, the others at step 0's tp.taken, after panel 0's broadcast (NCCL
    -- runs a communicator's calls in order: made after them all, panel 0 would wait for every
    -- chunk); the first step waits for each chunk's event, recorded by then
    if most > 0 then round(1) end   -- (one rank: nothing to deal out)
    rest = function () for i = 2, most do round(i) end end
    if me ~= root then
      s.chunks = lists[me]
      s.S:wait(lists[me][1].ev)
    end
  end

  function tp.start(lstart)
    s.recv:record(ustream)   -- the start, after the caller's stream
    s.S:wait(s.recv)
    s.Q:wait(s.recv)
    s.C:wait(s.recv)
    if layout == "root" then
      if (S.tune.start_chunks or 1) > 1 then
        scatter_chunks(lstart)
      else
        local m = {0}
        W = bc.scatter(cols, comm, root, A, s.L, dt, s.C, make, s.S, nil, m)
        moved.start = m[1]
        if me ~= root then
          s.u:record(s.C)
          s.S:wait(s.u)
        end
      end
    end
    s.u:record(s.S)
    s.Q:wait(s.u)
  end

  -- (solve.tune.rank_panels: one broadcast, or a send to each rank in one group)
  local by_send = S.tune.rank_panels == "send"
  info.panels_by = by_send and "send" or "broadcast"

  function tp.send(o, buf, cnt)
    o.ready:record(o.Q)
    o.C:wait(o.ready)
    local v = view(buf, 0, cnt)
    if by_send then
      cuda.nccl.group(function ()
        for r = 0, G - 1 do if r ~= me then comm:send(v, r, {stream = o.C}) end end
      end)
      moved.panels = moved.panels + (G - 1) * cnt * esz
    else
      comm:broadcast(v, {root = me, stream = o.C})
      moved.panels = moved.panels + cnt * esz
    end
  end

  function tp.stream(x) return x.C end

  function tp.take(_, o, R, buf, cnt)
    if by_send then comm:recv(view(buf, 0, cnt), o.g - 1, {stream = R})
    else comm:broadcast(view(buf, 0, cnt), {root = o.g - 1, stream = R}) end
    moved.panels = moved.panels + cnt * esz
  end

  --[[
  ** The root layout's way back, a block row at a time (solve.tune.rank_gather, "rows" by
  ** default; "end": all of it after the last step): rows [j0, j0 + rows) of every rank's
  ** columns are final after its step k (and, on the owner of panel k + 1, after its Q's
  ** `ready`); they go to root in step k + 1, at tp.taken, where every rank has made the same
  ** NCCL calls (panel k + 1 taken, none of step k + 2's sent), and root puts them into A's
  ** rows, beside the steps that follow; the last step's go in tp.finish
  ]]
  info.gathered_by = layout == "root" and (by_rows and "rows" or "end") or nil
  local pending   -- the final rows not yet sent: {j0, rows, nxt}

  function tp.rows(_, j0, rows, nxt)
    if by_rows then pending = {j0, rows, nxt} end
  end

  local function send_rows()
    if not pending then return end
    local j0, rows, nxt = pending[1], pending[2], pending[3]
    pending = nil
    local C, K = s.C, s.K
    C:wait(s.w)
    if nxt then C:wait(s.ready) end
    if me ~= root then
      comm:send(view(s.L, j0 * s.nloc, rows * s.nloc), root, {stream = C})
      moved.finish = moved.finish + rows * s.nloc * esz
      return
    end
    cuda.nccl.group(function ()
      for r = 0, G - 1 do
        if r ~= me then
          local nl = sh[r + 1].nloc
          comm:recv(view(RW[r], 0, rows * nl), r, {stream = C})
          moved.finish = moved.finish + rows * nl * esz
        end
      end
    end)
    local rowsA = view(A, j0 * n, rows * n)
    for r = 0, G - 1 do
      local nl = sh[r + 1].nloc
      K("cyclic"):launch({grid = grid_for(rows * nl, 256, s.dev), block = 256, stream = C},
                         n, rows, nb, G, r, nl, 0, nl, rowsA, r == me and view(s.L, j0 * nl, rows * nl) or RW[r], 1)
    end
  end

  function tp.taken()
    if rest then
      local f = rest
      rest = nil
      f()
    end
    if by_rows then send_rows() end
  end

  -- after the last step (S) and panel (Q): the last block row back to root (root layout;
  -- all the columns with rank_gather = "end"), every rank's status word to every rank, this
  -- rank's pivots into ipiv; the caller's stream after it all. Returns the first bad pivot
  -- of any rank, the same on every rank
  function tp.finish()
    s.done:record(s.S)
    s.C:wait(s.done)
    s.u:record(s.Q)
    s.C:wait(s.u)
    if by_rows then
      send_rows()
    elseif layout == "root" then
      local m = {0}
      bc.gather(cols, comm, root, s.L, A, dt, s.C, make, W or {}, m)
      moved.finish = m[1]
    end
    local words = make("int32", G)
    comm:all_gather(view(s.status, 0, 1), words, {stream = s.C})
    ipiv:view(1, n):copy_from(s.ipiv, s.C)
    s.done:record(s.C)
    if ustream then ustream:wait(s.done) end
    local h = cuda.host_array("int32", G)
    words:copy_to(h, s.C)
    s.C:synchronize()
    local first = 0
    for r = 1, G do
      local v = math.tointeger(h[r])
      if v ~= 0 and (first == 0 or math.abs(v) < math.abs(first)) then first = v end
    end
    if math.tointeger(h[me + 1]) ~= 0 then s.status:fill(0, s.Q) end
    return first
  end
  return tp
end

-- }======================================================


-- {====================================================== the transfers' communicator

--[[
** NCCL runs each operation in blocks (CTAs) on the multiprocessors, as many as it has
** channels, and they take those from the trailing update running beside a panel's
** broadcast. The transfers run on a communicator split once from the caller's (comm:split,
** which every rank makes in the same call: the call is collective already) with NCCL's
** blocks capped at solve.tune.rank_ctas; false runs them on the caller's as it is. Kept
** while the caller's lives, one a cap.
]]
local split_of = setmetatable({}, {__mode = "k"})

local function transport_comm(comm, ctas)
  if not ctas then return comm end
  local by = split_of[comm] or {}
  split_of[comm] = by
  if by[ctas] == nil or by[ctas].closed then by[ctas] = comm:split(0, comm.rank, {max_ctas = ctas}) end
  return by[ctas]
end

-- }======================================================


M.transport, M.comm = transport, transport_comm

return M
