-- culua.catalog.sort_multi_transport: how the sort over several GPUs or ranks
-- (sort_multi.lua) moves what it moves, beneath its algorithm (sort_multi_run.lua):
-- within one process, copies between the devices (peer to peer where the pair
-- allows, else staged by the driver); over ranks, NCCL. Also each part's streams,
-- events, pinned words and buffers, kept a device from one call to the next.
--
-- Why copies and not NCCL within one process: the parts may share a device
-- ({0, 0}: shares of one GPU), which an NCCL communicator refuses; NCCL need not be
-- installed for a sort over the GPUs of one process; and a copy between two GPUs of
-- one process goes over their link at its speed all the same.

local cuda = require "cuda"
local core = require "culua.catalog.core"

local ceil_div = core.ceil_div

-- the dtypes cuda.nccl moves (src/nccl.c, nccl_type); keys of another travel as bytes
local nccl_dtypes = {int8 = true, uint8 = true, int32 = true, uint32 = true, int64 = true, uint64 = true,
                     float32 = true, float64 = true}

-- {====================================================== streams, events, scratch

core.scratch_kind("sort_multi_words", "int64")   -- a part's search words and the rows it gathers
core.scratch_kind("sort_multi_co", "int64")      -- a merge's tile starts
local kinds_made = {}
-- a scratch kind of dtype dt for role ("recv", "tmp", "vrecv", "vtmp", "stage"): a part's
-- received pieces and the merges' other buffer, kept by stream as the one-GPU sort's are
local function buffer(role, dt, dev, stream, n)
  local kind = "sort_multi_" .. role .. "_" .. dt
  if not kinds_made[kind] then core.scratch_kind(kind, dt); kinds_made[kind] = true end
  return core.scratch(kind, dev, stream, n)
end

local event_on = core.event_on   -- an event of device dev, the current device kept

-- the k-th slot of device dev (a part of a call; a device listed twice has two): its
-- streams, events and pinned words, kept for the next call as the one-GPU sort keeps its
-- scratch (by stream)
local function slot(dev, k)
  local slots = core.device_state("sort_multi", dev)
  local s = slots[k]
  if not s then
    s = {S = cuda.stream{device = dev.ordinal, non_blocking = true}, copy = {}, ev = {}}
    slots[k] = s
  end
  return s
end

local function slot_event(s, dev, name)
  s.ev[name] = s.ev[name] or event_on(dev)
  return s.ev[name]
end

-- s's pinned words for reading results back, at least n of them
local function slot_host(s, dev, n)
  if not s.hw or #s.hw < n then s.hw = cuda.host_array("int64", math.max(n, 64), {pinned = true, device = dev.ordinal}) end
  return s.hw
end

-- s's pinned words of exactly n elements for a search round's candidates (a device
-- view takes a host array no longer than itself), one a size, kept: the host fills them
-- with a copy of the first part's (a memcpy, where a Lua table would be converted again
-- a part) and the copies to the device run without the driver's staging
local function slot_cands(s, dev, n)
  s.cands = s.cands or {}
  local h = s.cands[n]
  if not h then
    h = cuda.host_array("int64", n, {pinned = true, device = dev.ordinal})
    s.cands[n] = h
  end
  return h
end

local function kern(stem, dev) return core.kernel("sort_multi", "culua_sortm_" .. stem, nil, dev) end

-- bytes between arrays of other dtypes (keys NCCL has no dtype for travel as bytes)
local function copy_bytes(p, src, dst, bytes, stream)
  kern("copy", p.dev):launch({grid = math.max(1, math.min(ceil_div(bytes, 256), 4 * core.sm_count(p.dev))),
                               block = 256, stream = stream}, src, dst, bytes)
end

-- }======================================================


-- {====================================================== the transports

--[[
** A transport moves what the algorithm needs between the parts:
**   T.P               the parts in all; T.parts: this process's parts
**   T:gather(rows)    every part's row of integers, given this process's parts' rows
**   T:sum(at, count)  sums over every part of each local part's words[at, at + count)
**                     (int64 on its device, written on its stream S)
**   T:exchange(plan)  queue the moves of every piece (plan.cnt[s][t] keys of part s from
**                     plan.from[s][t] to part t's receive buffer at plan.to[t][s]), in
**                     plan.phase(s, t) order (1..plan.phases)
**   T:piece(t, s)     where part t's merges find the piece of part s: keys array, first
**                     element, elements a key; values array, first element
**   T:arrived(t, ph)  t.S waits for the pieces t gets in phase ph
**   T:read(t)         t's merges that read other parts' keys are queued (after its first level)
**   T:sent(t)         t.S waits for every read of t's keys (before t's arrays are written)
** Rows and sums are Lua integers (order keys are unsigned 64-bit values in them).
]]

-- within one process: every part is here. The pieces go by copies between the devices, or,
-- `direct`, are not moved at all: the first level of merges reads them where they lie, over
-- the link between the devices (peer access; the same memory for shares of one device), which
-- saves writing them and reading them back. Direct wants every pair of the parts' devices
-- able to reach each other, and two levels of merges or more, so that the merges that read
-- other parts' keys write only into their own buffers: two parts ({0, 1}) would each write
-- their keys while the other still reads them
local Peer = {}
Peer.__index = Peer

local function peer(parts, P, levels, direct, pull)
  local T = setmetatable({P = P, parts = parts, direct = direct and levels >= 2, pull = pull}, Peer)
  if T.direct then
    for _, a in ipairs(parts) do
      for _, b in ipairs(parts) do
        if a.dev ~= b.dev and not (a.dev:can_access_peer(b.dev) and b.dev:can_access_peer(a.dev)) then T.direct = false end
      end
    end
  end
  if T.direct then
    for _, a in ipairs(parts) do
      for _, b in ipairs(parts) do if a.dev ~= b.dev then a.dev:enable_peer_access(b.dev) end end
    end
  end
  if T.pull and not T.direct then   -- pull: the pairs whose reader can reach the other's memory
    T.can_pull = {}
    for _, a in ipairs(parts) do
      for _, b in ipairs(parts) do
        if a.dev == b.dev or a.dev:can_access_peer(b.dev) then
          if a.dev ~= b.dev then a.dev:enable_peer_access(b.dev) end
          T.can_pull[a.r * (P + 1) + b.r] = true
        end
      end
    end
  end
  return T
end

-- c elements of src into dst (arrays of one dtype) on stream st of t's device: a copy by
-- the copy engines, or with `pull` (tune.pull) read by t's multiprocessors where t can
-- reach src's device (copy_bytes)
function Peer:move(t, s, src, dst, st)
  if self.can_pull and self.can_pull[t.r * (self.P + 1) + s.r] then
    copy_bytes(t, src, dst, #src * core.dtype_bytes[src.dtype], st)
  else
    dst:copy_from(src, st)
  end
end

function Peer:gather(rows) return rows end

function Peer:sum(at, count)
  for _, p in ipairs(self.parts) do
    if p.n > 0 then p.words:view(at + 1, count):copy_to(slot_host(p.slot, p.dev, count), p.S) end
  end
  local sums = {}
  for i = 1, count do sums[i] = 0 end
  for _, p in ipairs(self.parts) do
    if p.n > 0 then
      p.S:synchronize()
      local h = p.slot.hw:totable()   -- one call into C, not one an element
      for i = 1, count do sums[i] = sums[i] + h[i] end
    end
  end
  return sums
end

-- a piece of part s for part t goes on a stream of t's device kept for s (the copies into
-- t run side by side), after s sorted and after the pieces of t's previous phase (so that
-- the nearer pieces, which the first merges need, are not slowed by the farther ones)
function Peer:exchange(plan)
  local P, parts = self.P, self.parts
  self.arrive, self.reads = {}, {}
  for _, t in ipairs(parts) do self.arrive[t.r], self.reads[t.r] = {}, {} end
  if self.direct then   -- nothing moves: every piece is there once its part sorted
    local sorted = {}
    for _, s in ipairs(parts) do sorted[#sorted + 1] = s.sorted end
    for _, t in ipairs(parts) do self.arrive[t.r][1] = sorted end
    return
  end
  for phase = 1, plan.phases do
    for _, t in ipairs(parts) do
      local prev = self.arrive[t.r][phase - 1]
      local evs = {}
      for _, s in ipairs(parts) do
        local c = plan.cnt[s.r][t.r]
        if s ~= t and c > 0 and plan.phase(s.r, t.r) == phase then
          local st = t.slot.copy[s.r]
          if not st then
            st = cuda.stream{device = t.dev.ordinal, non_blocking = true}
            t.slot.copy[s.r] = st
          end
          st:wait(s.sorted)
          for _, e in ipairs(prev or {}) do st:wait(e) end
          local from, to = plan.from[s.r][t.r], plan.to[t.r][s.r]
          self:move(t, s, s.keys:view(from + 1, c), t.recv:view(to + 1, c), st)
          if t.vrecv then self:move(t, s, s.values:view(from + 1, c), t.vrecv:view(to + 1, c), st) end
          local e = slot_event(t.slot, t.dev, "copy" .. s.r)
          e:record(st)
          if self.mark then self.mark(t, "piece " .. s.r, st) end
          evs[#evs + 1] = e
          self.reads[s.r][#self.reads[s.r] + 1] = e
        end
      end
      self.arrive[t.r][phase] = #evs > 0 and evs or prev
    end
  end
end

function Peer:piece(t, s, plan)
  if self.direct then
    local src = self.parts[s]
    return src.keys, plan.from[s][t.r], 1, src.values, plan.from[s][t.r]
  end
  return t.recv, plan.to[t.r][s], t.f, t.vrecv, plan.to[t.r][s]
end

function Peer:arrived(p, phase)
  for _, e in ipairs(self.arrive[p.r][phase] or {}) do p.S:wait(e) end
end

function Peer:read(p)
  if not self.direct then return end
  local e = slot_event(p.slot, p.dev, "read")
  e:record(p.S)
  for _, s in ipairs(self.parts) do
    if s ~= p then self.reads[s.r][#self.reads[s.r] + 1] = e end
  end
end

function Peer:sent(p)
  for _, e in ipairs(self.reads[p.r]) do p.S:wait(e) end
end

-- over ranks: this process has one part; NCCL moves everything, on the part's second stream
-- X for the pieces (so that its merges on S overlap the farther phases)
local Nccl = {}
Nccl.__index = Nccl

function Nccl:gather(rows)
  local p, P = self.parts[1], self.P
  local W = #rows[1]
  local send, recv = p.words:view(1, W), p.words:view(W + 1, P * W)
  send:copy_from(rows[1], p.S)
  self.comm:all_gather(send, recv, {stream = p.S})
  recv:copy_to(slot_host(p.slot, p.dev, P * W), p.S)
  p.S:synchronize()
  local h = p.slot.hw:totable()
  local all = {}
  for r = 1, P do
    local row = {}
    for w = 1, W do row[w] = h[(r - 1) * W + w] end
    all[r] = row
  end
  return all
end

function Nccl:sum(at, count)
  local p = self.parts[1]
  local v = p.words:view(at + 1, count)
  self.comm:all_reduce(v, {op = "sum", stream = p.S})
  v:copy_to(slot_host(p.slot, p.dev, count), p.S)
  p.S:synchronize()
  return p.slot.hw:totable()   -- (its words past count: stale, never read)
end

function Nccl:exchange(plan)
  local p, comm, nccl = self.parts[1], self.comm, cuda.nccl
  local me = p.r
  local X = p.slot.X
  if not X then
    X = cuda.stream{device = p.dev.ordinal, non_blocking = true}
    p.slot.X = X
  end
  X:wait(p.sorted)
  self.done = {}
  -- keys of a dtype NCCL lacks travel as bytes: a copy of the sorted run to send from
  local send_keys, f = p.keys, p.f
  if f > 1 and p.n > 0 then
    send_keys = p.stage
    copy_bytes(p, p.keys:view(1, p.n), send_keys:view(1, p.n * f), p.n * f, X)
  end
  for phase = 1, plan.phases do
    local ops = false
    nccl.group(function ()
      for q = 1, self.P do
        if q ~= me and plan.phase(me, q) == phase then
          local out, inn = plan.cnt[me][q], plan.cnt[q][me]
          local from, to = plan.from[me][q], plan.to[me][q]
          if out > 0 then
            comm:send(send_keys:view(from * f + 1, out * f), q - 1, {stream = X})
            if p.values then comm:send(p.values:view(from + 1, out), q - 1, {stream = X}) end
            ops = true
          end
          if inn > 0 then
            comm:recv(p.recv:view(to * f + 1, inn * f), q - 1, {stream = X})
            if p.vrecv then comm:recv(p.vrecv:view(to + 1, inn), q - 1, {stream = X}) end
            ops = true
          end
        end
      end
    end)
    if ops then
      local e = slot_event(p.slot, p.dev, "phase" .. phase)
      e:record(X)
      if self.mark then self.mark(p, "phase " .. phase, X) end
      self.done[phase] = e
    end
  end
end

function Nccl:piece(t, s, plan)
  return t.recv, plan.to[t.r][s], t.f, t.vrecv, plan.to[t.r][s]
end

function Nccl:read() end

function Nccl:arrived(p, phase)
  if self.done[phase] then p.S:wait(self.done[phase]) end
end

function Nccl:sent(p)
  for _, e in pairs(self.done) do p.S:wait(e) end
end

-- }======================================================

-- the dtype a part's pieces of keys of dtype dt travel in, and its elements a key
local function wire(dt, bytes, over_ranks)
  if over_ranks and not nccl_dtypes[dt] then return "uint8", bytes end
  return dt, 1
end

return {peer = peer, Nccl = Nccl, wire = wire, kern = kern, copy_bytes = copy_bytes, buffer = buffer, slot = slot,
        slot_event = slot_event, slot_host = slot_host, slot_cands = slot_cands}
