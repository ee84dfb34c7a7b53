-- culua.catalog.shares: a solve spread over several GPUs (devices = {...}):
-- its shares, each with its device, kernels and streams; how data moves
-- between two devices (peer copies, a copy within one, or pinned host
-- staging: the transport beneath the algorithms); and the arrays a call makes
-- and closes. The several-GPU LU (lu_multi.lua) and the seed's P2P program
-- (seed.lua) are the algorithms on it.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local S = require "culua.catalog.solve_common"

local kernels, take_status, event_on, stream_on = S.kernels, S.take_status, S.event_on, S.stream_on

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

-- shares set up on the listed devices: each with its device, kernels and streams, the
-- transport from the arrays' device, and the events it records
-- (kept a device for the next call: the streams, their events and so the catalog's
-- scratch memory a stream are made once, not each call; a device listed twice has two)
local function shares_on(list, G, dev0, dt, info, peer)
  local sh = {}
  local used = {}
  for g = 1, G do
    local d = cuda.device(list[g])
    local slots = core.device_state("solve_shares", d)
    used[d.ordinal] = (used[d.ordinal] or 0) + 1
    local k = slots[used[d.ordinal]]
    if not k then
      k = {S = stream_on(d), Q = stream_on(d, -1), G = stream_on(d), ready = event_on(d), u = event_on(d),
           done = event_on(d), recv = event_on(d), w = event_on(d), freed = {event_on(d), event_on(d)}}
      slots[used[d.ordinal]] = k
    end
    local s = {g = g, dev = d, K = kernels(d, dt), S = k.S, Q = k.Q, G = k.G, ready = k.ready, u = k.u,
               done = k.done, recv = k.recv, w = k.w, freed = k.freed}
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

-- the i-th event of the arrays' device for the chunks of the first distribution (kept with
-- the home stream; a call waits for its last before it returns, so the next may record them)
local function chunk_event(dev0, i)
  local home = core.device_state("solve_home", dev0)
  home.chunks = home.chunks or {}
  home.chunks[i] = home.chunks[i] or event_on(dev0)
  return home.chunks[i]
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

return {new_info = new_info, transport = transport, move = move, pinned = pinned, close_all = close_all, keep = keep,
        closing = closing, shares_on = shares_on, home_stream = home_stream, chunk_event = chunk_event, finish = finish}
