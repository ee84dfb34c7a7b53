-- culua.catalog.shares: a solve spread over several GPUs of one process
-- (devices = {...}): its shares, each with its device, kernels and streams; how
-- data moves between two devices (peer copies, a copy within one, or pinned
-- host staging: the transport beneath the algorithms), and the LU's transport
-- made of it (lu_transport, the table lu_multi.lua asks for); and the arrays a
-- call makes and closes. The several-GPU LU (lu_multi.lua) and the seed's P2P
-- program (seed.lua) are the algorithms on it; ranks.lua is the LU's other
-- transport, NCCL between processes.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"

local ceil_div = core.ceil_div
local kernels, take_status, event_on, stream_on, grid_for, view = S.kernels, S.take_status, S.event_on, S.stream_on,
                                                                 S.grid_for, S.view

-- the result's info: the devices and how data travelled between them
local function new_info(list)
  local l = {}
  for i, o in ipairs(list) do l[i] = o end
  return {devices = l, shares = #l, transfer = "local", pairs = {}}
end

-- how data goes between devices a and b: "local" (a copy within one device), "peer" (peer
-- access, enabled here both ways) or "host" (staged through pinned host memory: the pair has
-- no peer access, or peer = false, which stages every transfer, within one device too, so
-- that shares of one GPU run the staging path); noted in info.pairs["a-b"], and
-- info.transfer says the slowest way used, info.why why the host was
local function transport(info, peer, a, b)
  local key = math.min(a, b) .. "-" .. math.max(a, b)
  local t = info.pairs[key]
  if t then return t end
  if peer == false then
    t = "host"
    info.why = "peer = false"
  elseif a == b then
    t = "local"
  else
    local da, db = cuda.device(a), cuda.device(b)
    if da:can_access_peer(db) and db:can_access_peer(da) then
      da:enable_peer_access(db)
      db:enable_peer_access(da)
      t = "peer"
    else
      t = "host"
      info.why = info.why or ("devices %d and %d have no peer access"):format(a, b)
    end
  end
  info.pairs[key] = t
  if t == "host" or (t == "peer" and info.transfer == "local") then info.transfer = t end
  return t
end

-- src (on stream sa) to dst (on stream sb, after sa's work so far): peer or local copies,
-- or through hbuf (pinned, as many elements as dst) by the host
local function move(t, src, sa, ev, dst, sb, hbuf)
  if t == "host" then src:copy_to(hbuf, sa) end
  ev:record(sa)
  sb:wait(ev)
  if t == "host" then dst:copy_from(hbuf, sb) else dst:copy_from(src, sb) end
end

local function pinned(dt, count) return cuda.host_array(dt, count, {pinned = true}) end

-- the first bad pivot of several status words (each share's first), then cleared
local function first_bad(words)
  local first = 0
  for _, w in ipairs(words) do
    local s = take_status(w[1], w[2])
    if s ~= 0 and (first == 0 or math.abs(s) < math.abs(first)) then first = s end
  end
  return first
end

local function close_all(t)
  for _, x in ipairs(t) do if x then x:close() end end
end

-- x, noted in `owned` (the arrays and pinned buffers a several-GPU call closes)
local function keep(owned, x)
  owned[#owned + 1] = x
  return x
end

-- a several-GPU driver f(owned, ...) that closes what it kept at its end; when it raises
-- (an allocation that fails halfway, say) what it had kept is closed here, not left held
-- until the collector runs
local function closing(f)
  return function (...)
    local owned = {}
    local r = table.pack(pcall(f, owned, ...))
    if not r[1] then close_all(owned); error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
end

-- share g on device d, the slot-th of that device in this call: its device, kernels, streams
-- (S the steps, Q the panels at a higher priority, G the gathers; C a transport's own, where
-- own_stream asks for it, at Q's priority: its kernels carry panels to and from Q) and
-- events (kept a device for the next call: the streams, their events and so the catalog's
-- scratch memory a stream are made once, not each call; a device listed twice has two)
local function share_on(g, d, slot, dt, own_stream)
  local slots = core.device_state("solve_shares", d)
  local k = slots[slot]
  if not k then
    k = {S = stream_on(d), Q = stream_on(d, -1), G = stream_on(d), ready = event_on(d), u = event_on(d),
         done = event_on(d), recv = event_on(d), w = event_on(d), freed = {event_on(d), event_on(d)}}
    slots[slot] = k
  end
  if own_stream then k.C = k.C or stream_on(d, -1) end
  -- (V, fin and fout: the forward solve that lu_multi folds into the factorization)
  if own_stream and not k.V then k.V, k.fin, k.fout = stream_on(d), event_on(d), event_on(d) end
  return {g = g, dev = d, K = kernels(d, dt), S = k.S, Q = k.Q, G = k.G, C = k.C, ready = k.ready, u = k.u,
          done = k.done, recv = k.recv, w = k.w, freed = k.freed, V = k.V, fin = k.fin, fout = k.fout, mine = true}
end

-- shares set up on the listed devices, each with the transport from the arrays' device
local function shares_on(list, G, dev0, dt, info, peer)
  local sh = {}
  local used = {}
  for g = 1, G do
    local d = cuda.device(list[g])
    used[d.ordinal] = (used[d.ordinal] or 0) + 1
    local s = share_on(g, d, used[d.ordinal], dt)
    s.home = transport(info, peer, dev0.ordinal, d.ordinal)
    sh[g] = s
  end
  for g = 1, G do for h = 1, G do transport(info, peer, sh[g].dev.ordinal, sh[h].dev.ordinal) end end
  return sh
end

-- the start: the home stream (ours, on the arrays' device, kept as the shares' are) after
-- the caller's stream
local function home_stream(dev0, ustream)
  local home = core.device_state("solve_home", dev0)
  if not home.HS then home.HS, home.ev = stream_on(dev0), event_on(dev0) end
  local HS, ev = home.HS, home.ev
  ev:record(ustream)
  HS:wait(ev)
  return HS, ev
end

-- the i-th event of a device for the chunks of the first distribution (the arrays' device's,
-- with its home stream; over ranks, each rank's: ranks.lua); a call waits for its last before
-- it returns, so the next may record them
local function chunk_event(dev0, i)
  local home = core.device_state("solve_home", dev0)
  home.chunks = home.chunks or {}
  home.chunks[i] = home.chunks[i] or event_on(dev0)
  return home.chunks[i]
end

-- the chunks in which share s's columns first come (start_chunks): {c0, c1} in whole
-- panels of nb, the first holding those its Q works on in step 0 (lstart: lu_multi's)
local function chunks_of(s, nb, lstart)
  local per = ceil_div(ceil_div(s.nloc, math.max(S.tune.start_chunks or 1, 1)), nb) * nb
  local list, c0 = {}, 0
  while c0 < s.nloc do
    local c1 = math.min(s.nloc, c0 == 0 and math.max(per, lstart(s, 2)) or c0 + per)
    list[#list + 1] = {c0 = c0, c1 = c1}
    c0 = c1
  end
  return list
end

-- the end: the caller's stream after the home stream, which is waited for
local function home_done(HS, ev, ustream)
  ev:record(HS)
  if ustream then ustream:wait(ev) end
  HS:synchronize()
end

-- the end of a several-GPU call: the pivots home from the first share (its event u), the
-- caller's stream after the home stream, the shares' arrays closed, and the first bad
-- pivot of any share (its status read on its stream `which`, "Q" or "S")
local function finish(sh, n, ipiv, ipiv_hbuf, HS, hev, ustream, owned, which)
  move(sh[1].home, sh[1].ipiv, sh[1].S, sh[1].u, ipiv:view(1, n), HS, ipiv_hbuf)
  home_done(HS, hev, ustream)
  local words = {}
  for _, s in ipairs(sh) do words[#words + 1] = {s.status, s[which]} end
  close_all(owned)   -- ipiv_hbuf among them
  return first_bad(words)
end


-- {====================================================== the LU's transport

--[[
** lu_multi.lua's transport over the listed devices of this process, A (n x n) and ipiv on
** dev0 (its home stream HS after the caller's stream). A panel goes from its owner's send
** buffer to each share by a peer copy (or a copy within the device), or from the owner's
** pinned host copy. The columns go out at the start and come back a block row at a time,
** as each becomes final.
]]
local function lu_transport(owned, dev0, ustream, n, nb, dt, A, ipiv, list, peer, info)
  local G = math.min(#list, ceil_div(n, nb))   -- a share beyond the panels would have no columns
  info.shares = G
  local sh = shares_on(list, G, dev0, dt, info, peer)
  local HS, hev = home_stream(dev0, ustream)
  local cyclic = kernels(dev0, dt)("cyclic")
  local tp = {G = G, shares = sh, mine = sh}

  -- a pinned copy of the panels for the shares reached through the host
  function tp.setup(s, _, size)
    for h = 1, G do
      if transport(info, peer, s.dev.ordinal, sh[h].dev.ordinal) == "host" then
        s.HB = s.HB or keep(owned, pinned(dt, size))
      end
    end
  end

  -- distribute: each share's columns packed out of A into its L. A share on the arrays'
  -- device packs its own on its S; the arrays' device writes a peer's straight into the
  -- peer's L over peer access (writes over the link), in tune.start_chunks chunks of whole
  -- panels, each with an event (s.chunks), so that the peer's first step takes each as it
  -- comes rather than idle until all of its columns are there (two H200s at 32768: 2.1 GB,
  -- 5.5 ms of NVLink; session 22: 455.25 and 451.89 ms against 456.21 and 454.91 in one
  -- piece); the first chunk holds the columns its Q works on in that step. A share
  -- reached through the host gets them packed on the arrays' device (W), staged and copied
  function tp.start(lstart)
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
        s.chunks = chunks_of(s, nb, lstart)
        for _, ch in ipairs(s.chunks) do
          grid.grid = grid_for(n * (ch.c1 - ch.c0), 256, dev0)
          cyclic:launch(grid, n, n, nb, G, s.g - 1, s.nloc, ch.c0, ch.c1 - ch.c0, A, s.L, 0)
          nev = nev + 1
          ch.ev = chunk_event(dev0, nev)
          ch.ev:record(HS)
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
  end

  -- the owner's pinned copy, for the shares reached through the host (o.sent: the buffer the
  -- others take from; o sends again only once every share took this one, in the step after)
  function tp.send(o, buf, cnt)
    if o.HB then buf:view(1, cnt):copy_to(o.HB, o.Q) end
    o.ready:record(o.Q)
    o.sent = buf
  end

  function tp.stream(s) return s.S end

  function tp.take(s, o, R, buf, cnt)
    R:wait(o.ready)
    if transport(info, peer, o.dev.ordinal, s.dev.ordinal) == "host" then buf:copy_from(o.HB, R)
    else buf:view(1, cnt):copy_from(o.sent:view(1, cnt), R) end
  end

  -- rows [j0, j0 + rows) of share s's columns are final now (every later step works on the
  -- rows below): into A on G, beside the steps that follow, rather than all at the end
  -- (two H200s, float32 32768: 5.5 ms of NVLink for a share's 2.1 GB). The next panel's
  -- owner wrote those rows of its columns on Q, before it recorded `ready`. (A peer writes
  -- into A over peer access; a share reached through the host sends them all at the end)
  function tp.rows(s, j0, rows, nxt)
    if s.home == "host" then return end
    s.G:wait(s.w)
    if nxt then s.G:wait(s.ready) end
    s.K("cyclic"):launch({grid = grid_for(rows * s.nloc, 256, s.dev), block = 256, stream = s.G}, n, rows, nb, G,
                         s.g - 1, s.nloc, 0, s.nloc, view(A, j0 * n, rows * n), view(s.L, j0 * s.nloc, rows * s.nloc), 1)
  end

  -- the columns back into A (a share's rows went on its G as they became final; one reached
  -- through the host stages them all now, into W, and the arrays' device unpacks them), and
  -- share 1's pivots (every share has them all)
  function tp.finish()
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
  end
  return tp
end

-- }======================================================

return {new_info = new_info, transport = transport, move = move, pinned = pinned, close_all = close_all, keep = keep,
        closing = closing, share_on = share_on, shares_on = shares_on, home_stream = home_stream,
        chunk_event = chunk_event, chunks_of = chunks_of, finish = finish, first_bad = first_bad,
        lu_transport = lu_transport}
