-- culua.catalog.sort_multi_run: the algorithm of the sort over several GPUs or
-- ranks (sort_multi.lua has the entry, the checks and the agreement; the data
-- moves through sort_multi_transport.lua; the kernels are kernels/sort_multi.cu):
-- the local sorts, the search for the global order's boundaries, the plan of the
-- pieces, and the merges of the pieces a part receives.

local cuda = require "cuda"
local core = require "culua.catalog.core"
local sort1 = require "culua.catalog.sort"
local X = require "culua.catalog.sort_multi_transport"

local ceil_div = core.ceil_div
local kern, copy_bytes, buffer, slot_event, slot_host = X.kern, X.copy_bytes, X.buffer, X.slot_event, X.slot_host
local slot_cands = X.slot_cands

local K = core.constants("sort_multi")
local THREADS, ITEMS = K.SORTM_THREADS, K.SORTM_ITEMS
local DESC = core.constants("culua/sort.cuh").SORT_DESC

-- the knobs (sort_multi.lua's .tune): a merge tile's keys a thread (prebuilt at
-- kernels/sort_multi.cu's SORTM_ITEMS; 1..16 built by NVRTC); candidates a boundary a
-- search round (256: eight bits of order key a round, so four rounds for 32-bit keys and
-- eight for 64-bit ones, a round's counts a few kilobytes; 2..4096); and whether the
-- pieces go in phases, the nearest first, so that the first merges overlap the farther
-- pieces (else all at once, every merge after the last piece); and whether, within one
-- process, the first merges read the pieces where they lie, over the links between the
-- devices, rather than from copies (sort_multi_transport.lua's direct; off by default: on
-- four H200s 2^30 uint32 keys took 11.93 ms copied against 13.62 read where they lie, 2.37x
-- one GPU against 2.08x, bench/RESULTS.md, session 28). timeline: each part's GPU
-- times of its steps (sorted, each piece's arrival, each merge) from the call's start, in
-- M.stats.timeline, for bench/sort_multi.lua (timing events: off by default)
-- pull: within one process, each piece is read by its receiver's multiprocessors
-- (kernels/sort_multi.cu's copy) rather than copied by the copy engines.
-- pairs: the phases pair the parts (pair_phase below) rather than following the merge tree's
-- levels (on by default: on four H200s 2^30 uint32 keys took 10.26-10.93 ms so against 12.20,
-- 2.59-2.76x one GPU against 2.32x; over four ranks 13.11 against 15.31 ms, bench/RESULTS.md,
-- session 29).
local tune = {items = ITEMS, search = 256, phased = true, direct = false, timeline = false, pull = false, pairs = true}

-- the knobs, checked before a call does anything
local function check_tune(fail, fname)
  local i, s = tune.items, tune.search
  if math.type(i) ~= "integer" or i < 1 or i > 16 then fail(fname, "tune.items must be an integer 1..16, got %s", tostring(i)) end
  if math.type(s) ~= "integer" or s < 2 or s > 4096 then fail(fname, "tune.search must be an integer 2..4096, got %s", tostring(s)) end
  for _, k in ipairs{"pairs", "pull", "timeline"} do
    if type(tune[k]) ~= "boolean" then fail(fname, "tune.%s must be a boolean, got %s", k, tostring(tune[k])) end
  end
end

-- tune.timeline's marks: part p's step `what`, done on stream s; read once the call ends
local function timeline_mark(p, what, s)
  if not p.timeline then return end
  local k = #p.timeline + 1
  local evs = p.slot.timeline or {}   -- kept with the part's slot for the next call
  p.slot.timeline = evs
  local e = evs[k] or core.event_on(p.dev, true)
  evs[k] = e
  e:record(s)
  p.timeline[k] = {what, e}
end

-- the marks as {what, ms since the call's start}, a list a part
local function timeline_read(parts)
  local all = {}
  for i, p in ipairs(parts) do
    local row = {}
    for k, m in ipairs(p.timeline or {}) do row[k] = {m[1], p.timeline[1][2]:elapsed(m[2])} end
    all[i], p.timeline = row, nil
  end
  return all
end

-- a merge kernel (corank or merge) for the knobs' tile: prebuilt, or built by NVRTC
local function merge_kernel(stem, dev)
  if tune.items == ITEMS then return kern(stem, dev) end
  local v = "_i" .. tune.items
  return core.kernel("sort_multi", "culua_sortm_" .. stem .. v, {"SORTM_ITEMS=" .. tune.items, "SORTM_V=" .. v}, dev)
end

-- a / b for a unsigned (a 64-bit order key's range) and b a small positive integer
local function udiv(a, b)
  if a >= 0 then return a // b end
  local q = ((a >> 1) // b) << 1
  if not math.ult(a - q * b, b) then q = q + 1 end
  return q
end

-- {====================================================== the algorithm

local function levels_of(P)
  local l = 0
  while (1 << l) < P do l = l + 1 end
  return l
end

-- the order parameters every kernel of sort_multi.cu takes last
local function order_args(o)
  local width = o.end_bit - o.begin_bit
  return o.kind, o.desc and DESC or 0, o.begin_bit, width == 64 and -1 or (1 << width) - 1, o.inf16 or 0
end

-- the phase in which parts s and t (1-based) exchange: 1 + the highest bit in which their
-- 0-based numbers differ (0 for a part and itself)
local function phase_of(s, t)
  local x, ph = (s - 1) ~ (t - 1), 0
  while x > 0 do x = x >> 1; ph = ph + 1 end
  return ph
end

-- tune.pairs: the phase of parts s and t is their 0-based numbers' exclusive or (1 ..
-- 2^levels - 1), so that in each phase every part sends one piece and receives one (a
-- perfect matching where P is a power of two), where phase_of's last phase has each part
-- receive half its pieces from as many senders at once
local function pair_phase(s, t) return (s - 1) ~ (t - 1) end

--[[
** The boundaries of the global order in order-key space: for each target R[j] (keys before
** boundary j), the largest order key v in [lo, hi] with f(v) <= R[j], where f(v) counts the
** keys of every part whose order key is below v (so f(lo) = 0 for lo the smallest key). A
** round evaluates f at up to tune.search candidates a boundary (eval(list) -> list), evenly apart
** in the boundary's interval, and keeps the stretch between the last candidate at or below
** R[j] and the next: eight bits of order key a round.
]]
local function boundaries(R, lo, hi, eval)
  local SEARCH = tune.search
  local L, H = {}, {}
  for j = 1, #R do L[j], H[j] = lo, hi end
  while true do
    local cands, first, count, step = {}, {}, {}, {}
    for j = 1, #R do
      if L[j] ~= H[j] then
        local W = H[j] - L[j]                  -- unsigned, at least 1
        local s = math.ult(SEARCH, W) and udiv(W, SEARCH) or 1
        local c = s == 1 and (math.ult(W, SEARCH) and W or SEARCH) or SEARCH
        first[j], count[j], step[j] = #cands + 1, c, s
        for i = 1, c do cands[#cands + 1] = L[j] + i * s end
      end
    end
    if #cands == 0 then return L end
    local f = eval(cands)
    for j = 1, #R do
      if first[j] then
        local below = 0
        for i = 1, count[j] do
          if f[first[j] + i - 1] <= R[j] then below = i else break end
        end
        if below > 0 then L[j] = cands[first[j] + below - 1] end
        if below < count[j] then H[j] = cands[first[j] + below] - 1 end
      end
    end
  end
end

-- part p's bounds of the candidates `cands` (a list, or another part's pinned copy of
-- it) into words[at, at + #cands) (and, with both, the upper bounds after them), on its
-- stream; returns its pinned copy of the candidates
local function bounds(p, o, cands, at, both)
  local n = #cands
  local cv, ov = p.words:view(at + 1, n), p.words:view(at + n + 1, both and 2 * n or n)
  if p.n == 0 then
    ov:fill(0, p.S)
    return cands
  end
  local h = slot_cands(p.slot, p.dev, n)
  if h ~= cands then h:copy_from(cands) end
  cv:copy_from(h, p.S)   -- read before the round's end, when the host waits for p.S
  kern("bounds_" .. o.wname, p.dev):launch({grid = ceil_div(n, THREADS), block = THREADS, stream = p.S},
    p.keys, p.n, cv, n, ov, both and 1 or 0, order_args(o))
  return h
end

-- a merge on part p's stream: a[0, na) and b[0, nb) (cuda.arrays or views, the keys in wire
-- units of f elements a key) into out, values alongside
local function merge(p, o, a, na, b, nb, va, vb, out, vout)
  local total = na + nb
  if total == 0 then return end
  local tiles = ceil_div(total, THREADS * tune.items)
  local co = p.co
  local cfg = {grid = ceil_div(tiles + 1, THREADS), block = THREADS, stream = p.S}
  merge_kernel("corank_" .. o.wname, p.dev):launch(cfg, a, na, b, nb, co, tiles, order_args(o))
  cfg.grid = tiles
  if va then
    merge_kernel("merge_" .. o.wname .. "_" .. o.vname, p.dev):launch(cfg, a, na, b, nb, va, vb, out, vout, co, order_args(o))
  else
    merge_kernel("merge_" .. o.wname .. "_keys", p.dev):launch(cfg, a, na, b, nb, out, co, order_args(o))
  end
end

-- the pieces merged up a tree (levels: ceil(log2 P)) on each part: level l's node i covers
-- the pieces of parts [i * 2^l, (i + 1) * 2^l) (0-based), merged from its two children's
-- output as soon as every piece of it arrived (its phase). Level 0 is where the transport
-- left the pieces (T:piece), the top the part's own arrays, and the levels between
-- alternate: the merge buffer (l odd) and the receive buffer (l even): a node writes only
-- its own stretch, which its children read before. Every part's nodes below the top come
-- first, phase by phase, then the tops, each after every read of its part's keys.
local function merge_all(T, parts, o, plan)
  local P, levels = T.P, plan.levels
  local trees = {}
  for _, p in ipairs(parts) do
    local off = {[1] = 0}
    for s = 1, P do off[s + 1] = off[s] + plan.cnt[s][p.r] end
    local function buf(l)
      if l == levels then return p.keys, p.values, 1 end
      if l % 2 == 1 then return p.tmp, p.vtmp, p.f end
      return p.recv, p.vrecv, p.f
    end
    -- a child's keys and values: [s0, s1) of the pieces, at level l
    local function child(l, s0, s1)
      local n = off[s1] - off[s0]
      if l == 0 then
        if n == 0 then return p.keys:view(1, 0), 0, p.values and p.values:view(1, 0) end
        local k, first, f, v, vfirst = T:piece(p, s0, plan)
        return k:view(first * f + 1, n * f), n, v and v:view(vfirst + 1, n)
      end
      local k, v, f = buf(l)
      return k:view(off[s0] * f + 1, n * f), n, v and v:view(off[s0] + 1, n)
    end
    local function node(l, i)
      local s0 = i * (1 << l) + 1
      local s1 = math.min(s0 + (1 << (l - 1)), P + 1)
      local s2 = math.min(s0 + (1 << l), P + 1)
      local a, na, va = child(l - 1, s0, s1)
      local b, nb, vb = child(l - 1, s1, s2)
      local dst, vdst, f = buf(l)
      merge(p, o, a, na, b, nb, va, vb, dst:view(off[s0] * f + 1, (na + nb) * f), vdst and vdst:view(off[s0] + 1, na + nb))
      timeline_mark(p, ("merge %d.%d"):format(l, i), p.S)
    end
    -- when each node may start: the last phase of its pieces
    local ready = {}
    for l = 1, levels do
      ready[l] = {}
      for i = 0, ceil_div(P, 1 << l) - 1 do
        local r = 0
        for s = i * (1 << l) + 1, math.min((i + 1) * (1 << l), P) do r = math.max(r, plan.phase(s, p.r)) end
        ready[l][i] = r
      end
    end
    trees[#trees + 1] = {p = p, node = node, ready = ready}
  end
  for phase = 0, plan.phases do
    for _, tr in ipairs(trees) do
      if phase > 0 then T:arrived(tr.p, phase) end
      for l = 1, levels - 1 do
        for i = 0, ceil_div(P, 1 << l) - 1 do
          if tr.ready[l][i] == phase then tr.node(l, i) end
        end
      end
    end
  end
  for _, tr in ipairs(trees) do T:read(tr.p) end
  for _, tr in ipairs(trees) do
    T:sent(tr.p)   -- the top writes the part's own arrays: every read of them done
    tr.node(levels, 0)
  end
end

-- the splits: s[p][j] = the keys of part p before boundary j (j = 0..P), from every
-- part's lower and upper bounds of the boundaries' order keys (rows[p] = {L_1..L_J, U_1..U_J}):
-- the keys below a boundary's key, and of the keys equal to it as many as the boundary
-- still needs, the earlier parts' first
local function splits(rows, R, ns, P)
  local J = P - 1
  local s = {}
  for p = 1, P do s[p] = {[0] = 0, [P] = ns[p]} end
  for j = 1, J do
    local below = 0
    for p = 1, P do below = below + rows[p][j] end
    local take, before = R[j] - below, 0
    for p = 1, P do
      local L, E = rows[p][j], rows[p][J + j] - rows[p][j]
      s[p][j] = L + math.max(0, math.min(take - before, E))
      before = before + E
    end
  end
  return s
end

-- the sort proper, once the parts agreed (ctx: the call's shared facts; T: the transport)
local function run(T, ctx)
  local P, o, parts = T.P, ctx.o, T.parts
  -- where the time went, in ms (ctx.stats: sort_multi.lua's M.stats), read at the points
  -- where the host waits for the parts anyway
  local stats, t0 = ctx.stats, cuda.clock()
  local function mark(what)
    local t = cuda.clock()
    stats[what] = (t - t0) * 1e3
    t0 = t
  end
  -- 2. local sorts, side by side on every part's stream (a failure here is this part's,
  -- told to every part by the gather that follows)
  for _, p in ipairs(parts) do
    if tune.timeline then p.timeline = {} end
    timeline_mark(p, "start", p.S)
  end
  T.mark = timeline_mark
  local fails = {}
  local function try(i, f)
    if fails[i] then return end
    local ok, err = pcall(f)
    if not ok then fails[i] = err end
  end
  for i, p in ipairs(parts) do
    if p.failed then fails[i] = p.failed end
    try(i, function ()
      if ctx.test_fail(p.r, "local") then error("cuda.catalog.sort: a failure for the tests", 0) end
      p.sorted = slot_event(p.slot, p.dev, "sorted")
      if p.n > 0 then
        sort1.sort(p.keys:view(1, p.n), p.values and p.values:view(1, p.n),
                   {descending = o.desc, begin_bit = o.begin_bit, end_bit = o.end_bit, stream = p.S})
        kern("ends_" .. o.wname, p.dev):launch({grid = 1, block = 32, stream = p.S}, p.keys, p.n, p.words, order_args(o))
        p.words:view(1, 2):copy_to(slot_host(p.slot, p.dev, 2), p.S)
      end
      p.sorted:record(p.S)
      timeline_mark(p, "sorted", p.S)
    end)
  end
  local rows = {}
  for i, p in ipairs(parts) do
    try(i, function () p.S:synchronize() end)
    local h, ok = p.slot.hw, not fails[i] and p.n > 0
    rows[i] = {fails[i] and 0 or 1, ok and 1 or 0, ok and h[1] or 0, ok and h[2] or 0}
  end
  local all = T:gather(rows)
  mark("sort")
  for i in ipairs(parts) do
    if fails[i] then ctx.raise(fails[i]) end
  end
  for r = 1, P do
    if all[r][1] == 0 then
      ctx.agree(("%s failed in its local sort (its error says why); no keys moved, each %s's are sorted on "
                 .. "their own"):format(ctx.who(r), ctx.who()))
    end
  end
  if P == 1 then return end

  -- 3. the boundaries
  local R, O = {}, 0
  for j = 1, P - 1 do O = O + ctx.out[j]; R[j] = O end
  local lo, hi
  for r = 1, P do
    if all[r][2] == 1 then
      if not lo or math.ult(all[r][3], lo) then lo = all[r][3] end
      if not hi or math.ult(hi, all[r][4]) then hi = all[r][4] end
    end
  end
  stats.rounds, stats.round_launch, stats.round_wait = 0, {}, {}
  local v = boundaries(R, lo, hi, function (cands)
    stats.rounds = stats.rounds + 1
    if ctx.test_fail(parts[1].r, "search") then error("cuda.catalog.sort: a failure for the tests", 0) end
    local t = cuda.clock()
    local from = cands
    for _, p in ipairs(parts) do from = bounds(p, o, from, 0, false) end
    local l = cuda.clock()
    local sums = T:sum(#cands, #cands)
    -- a round's host ms: the candidates' copies and the launches, then the wait for the counts
    stats.round_launch[stats.rounds], stats.round_wait[stats.rounds] = (l - t) * 1e3, (cuda.clock() - l) * 1e3
    return sums
  end)
  -- every part's lower and upper bounds of the boundaries' keys, gathered
  local from = v
  for _, p in ipairs(parts) do
    from = bounds(p, o, from, 0, true)
    p.words:view(P, 2 * (P - 1)):copy_to(slot_host(p.slot, p.dev, 2 * (P - 1)), p.S)
  end
  local lrows = {}
  for i, p in ipairs(parts) do
    p.S:synchronize()
    local h, row = p.slot.hw:totable(), {}
    for k = 1, 2 * (P - 1) do row[k] = h[k] end
    lrows[i] = row
  end
  local s = splits(T:gather(lrows), R, ctx.ns, P)
  mark("search")

  -- 4. the plan of the pieces, and their moves
  local plan = {cnt = {}, from = {}, to = {}, phase = phase_of, levels = levels_of(P)}
  plan.phases = plan.levels
  if T.direct or not tune.phased then
    plan.phase, plan.phases = function (a, b) return a == b and 0 or 1 end, 1
  elseif tune.pairs then
    plan.phase, plan.phases = pair_phase, (1 << plan.levels) - 1
  end
  for a = 1, P do
    plan.cnt[a], plan.from[a], plan.to[a] = {}, {}, {}
    for b = 1, P do
      plan.cnt[a][b] = s[a][b] - s[a][b - 1]
      plan.from[a][b] = s[a][b - 1]
    end
  end
  for b = 1, P do
    local at = 0
    for a = 1, P do plan.to[b][a] = at; at = at + plan.cnt[a][b] end
    if at ~= ctx.out[b] then
      ctx.agree(("internal error: %s would get %d keys, not %d"):format(ctx.who(b), at, ctx.out[b]))
    end
  end
  if ctx.test_fail(parts[1].r, "exchange") then error("cuda.catalog.sort: a failure for the tests", 0) end
  -- each part's own piece into its receive buffer, on its stream (before any merge)
  for _, p in ipairs(parts) do
    local c, from, to = plan.cnt[p.r][p.r], plan.from[p.r][p.r], plan.to[p.r][p.r]
    if c > 0 and not T.direct then
      if p.f == 1 then p.recv:view(to + 1, c):copy_from(p.keys:view(from + 1, c), p.S)
      else copy_bytes(p, p.keys:view(from + 1, c), p.recv:view(to * p.f + 1, c * p.f), c * p.f, p.S) end
      if p.vrecv then p.vrecv:view(to + 1, c):copy_from(p.values:view(from + 1, c), p.S) end
    end
  end
  T:exchange(plan)

  -- 5. the merges
  merge_all(T, parts, o, plan)
  for _, p in ipairs(parts) do p.S:synchronize() end
  mark("exchange")
  if tune.timeline then stats.timeline = timeline_read(parts) end
end

-- }======================================================

-- {====================================================== a part's buffers

-- a part's search words: a round's candidates and counts, the boundaries' bounds, and the
-- rows of the gathers (nine words a part)
local function words_for(P) return math.max(3 * (P - 1) * tune.search, 9 * (P + 1)) end

-- a part's buffers for out keys: the pieces it receives and the merges' other buffer (keys
-- in the transport's dtype, f elements a key; over_ranks: NCCL's), values alike, and its
-- search words
local function part_buffers(p, o, out, P, over_ranks)
  local wdt, f = X.wire(p.dt, o.kb, over_ranks)
  p.f = f
  p.words = core.scratch("sort_multi_words", p.dev, p.S, words_for(P))
  if P == 1 then return end
  p.recv = buffer("recv", wdt, p.dev, p.S, out * f)
  p.co = core.scratch("sort_multi_co", p.dev, p.S, ceil_div(out, THREADS * tune.items) + 2)   -- the largest merge's tiles
  if f > 1 then p.stage = buffer("stage", wdt, p.dev, p.S, p.n * f) end
  if levels_of(P) >= 2 then p.tmp = buffer("tmp", wdt, p.dev, p.S, out * f) end
  if p.values then
    p.vrecv = buffer("vrecv", p.vdt, p.dev, p.S, out)
    if levels_of(P) >= 2 then p.vtmp = buffer("vtmp", p.vdt, p.dev, p.S, out) end
  end
end

-- }======================================================

return {run = run, part_buffers = part_buffers, words_for = words_for, boundaries = boundaries, splits = splits,
        phase_of = phase_of, tune = tune, check_tune = check_tune, levels_of = levels_of}
