-- examples/gauss_mpi.lua without a GPU: the script runs on a mock of cuda, MPI and NCCL.
-- Its kernels (the script's CUDA, transcribed) are plain Lua; its streams run their work
-- in a random order, streams slowed and sped at random, that keeps only the waits the
-- script asked for, so that a missing wait shows as a wrong result; new memory is NaN;
-- its ranks are coroutines that meet in MPI's calls and NCCL's (a collective completes
-- when every rank's call heads its stream, a send when its receive does), so that calls
-- in an order that would leave a rank waiting show as a hang. The script itself checks
-- the ranks' solution against one GPU's, to the bit, and says SUCCESS. The GPU runs are
-- t/026-mpi.t's.
local T = require "culua.tap"
T.mock_file()
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local example = srcdir .. "/examples/gauss_mpi.lua"

--[[
** One run of the script on G mock ranks, the scheduler's choices from seed; nccl false
** for a world without NCCL. Returns what rank 0 printed, and an error or nil.
]]
local function run(G, seed, args, nccl_here)
  local rng = seed
  local function rand()   -- in [0, 1)
    rng = (rng * 1103515245 + 12345) % 2147483648
    return rng / 2147483648
  end
  local CUR = 0           -- the rank whose coroutine runs
  local streams, printed = {}, {}

  -- {====== memory: arrays and views over a table, host arrays indexed 1-based
  local Arr = {}
  Arr.__index = Arr
  local function new(kind, n)
    local t = {}
    for i = 0, n - 1 do t[i] = 0 / 0 end
    return setmetatable({t = t, off = 0, n = n, kind = kind}, Arr)
  end
  local function get(a, i)
    assert(i >= 0 and i < a.n, ("read of element %d outside 0..%d"):format(i, a.n - 1))
    return a.t[a.off + i]
  end
  local function set(a, i, v)
    assert(i >= 0 and i < a.n, ("write of element %d outside 0..%d"):format(i, a.n - 1))
    a.t[a.off + i] = v
  end
  function Arr:view(first, count)
    assert(first >= 1 and count >= 0 and first - 1 + count <= self.n, "a view past the array")
    return setmetatable({t = self.t, off = self.off + first - 1, n = count, kind = self.kind}, Arr)
  end
  function Arr:close() end
  function Arr:fill(v) for i = 0, self.n - 1 do set(self, i, v) end return self end
  local function copy(dst, src)
    assert(src.n <= dst.n, ("a copy of %d elements into %d"):format(src.n, dst.n))
    for i = 0, src.n - 1 do set(dst, i, get(src, i)) end
  end
  local Host = {__index = function (h, k)
    if math.type(k) == "integer" then return get(h, k - 1) end
    return Arr[k]
  end, __newindex = function (h, k, v) set(h, k - 1, v) end}
  local function host_array(_, n) return setmetatable(new("host", n), Host) end
  -- }======

  -- {====== streams and events: a wait holds its stream until the event's record ran
  local Stream, Event = {}, {}
  Stream.__index, Event.__index = Stream, Event
  local function block(cond) while not cond() do coroutine.yield(cond) end end
  local function put(s, op) s.q[#s.q + 1] = op end
  function Stream:wait(e) put(self, {kind = "wait", ev = e, id = e.recorded}) end
  function Stream:synchronize() block(function () return #self.q == 0 end) end
  function Event:record(s) self.recorded = self.recorded + 1; put(s, {kind = "record", ev = self, id = self.recorded}) end
  function Event:synchronize() local id = self.recorded; block(function () return self.done >= id end) end
  function Arr:copy_from(src, s)
    if s then put(s, {kind = "run", fn = function () copy(self, src) end}) else copy(self, src) end
    return self
  end
  function Arr:copy_to(dst, s)
    if s then put(s, {kind = "run", fn = function () copy(dst, self) end}) else copy(dst, self) end
    return dst
  end
  -- }======

  -- {====== the kernels, as the CUDA does them
  local MAXNB = 64
  local function fma(a, b, c) return a * b + c end
  local function column_start(c, N, GG, nb)
    local P, p = (N + nb) // nb, c // nb
    local last, r = N + 1 - (P - 1) * nb, p % GG
    local base = 0
    for q = 0, r - 1 do
      local cols = (q < P and (P - 1 - q) // GG + 1 or 0) * nb
      base = base + ((P - 1) % GG == q and cols - (nb - last) or cols)
    end
    return (base + (p // GG) * nb + c % nb) * N
  end
  local function entry(i, j, N)
    if j == N then return math.sin(i + 1) end
    local z = i * N + j + 0x9E3779B97F4A7C15
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    z = z ~ (z >> 31)
    return (z >> 11) * (2.0 / 9007199254740992.0) - 1.0
  end
  local K = {}
  function K.make_system(_, m, N, GG, nb)
    for c = 0, N do for i = 0, N - 1 do set(m, column_start(c, N, GG, nb) + i, entry(i, c, N)) end end
  end
  function K.panel_step(cfg, pa, N, k0, w, wp, j, L, m, piv, stash, cand, count)
    assert(cfg.grid * cfg.block >= N - k0, "panel_step: the grid misses rows")
    assert(get(count, 0) == 0, "panel_step: the blocks' count was not reset")
    assert(cand.n >= 2 * cfg.grid, "panel_step: too few candidates' places")
    local function U(v) return get(stash, v) end
    local function R(v) return get(stash, MAXNB + v) end
    local vj = {}
    if j > 0 then
      local s = j - 1
      local n, p = k0 + s, math.tointeger(get(piv, s))
      for i = n, N - 1 do
        if i > n then
          local l = ((i == p) and R(s) or get(pa, s * N + i)) / U(s)
          set(L, s * m + (i - k0), l)
          for v = s + 1, wp - 1 do
            local x = fma(-l, U(v), (i == p) and R(v) or get(pa, v * N + i))
            set(pa, v * N + i, x)
            if v == j then vj[i] = x end
          end
          if i == p then for v = 0, s - 1 do set(L, v * m + (p - k0), R(v)) end end
        else
          for v = s, wp - 1 do set(pa, v * N + n, U(v)) end
          for v = 0, s - 1 do set(L, v * m + (n - k0), U(v)) end
        end
      end
    end
    if j >= w then return end
    local n = k0 + j
    local b, p = -1.0, n
    for i = n, N - 1 do
      local a = math.abs(j > 0 and vj[i] or get(pa, i))
      if a > b then b, p = a, i end
    end
    for v = 0, wp - 1 do
      if v < j then set(stash, v, get(L, v * m + (p - k0))); set(stash, MAXNB + v, get(L, v * m + (n - k0)))
      else set(stash, v, get(pa, v * N + p)); set(stash, MAXNB + v, get(pa, v * N + n)) end
    end
    set(piv, j, p)
  end
  function K.apply_top(cfg, a, N, nc, k0, w, L, m, piv, solve)
    assert(cfg.grid * cfg.block >= 32 * nc, "apply_top: a warp a column")
    for c = 0, nc - 1 do
      local seg, out = {}, {}
      for r = 0, w - 1 do seg[r] = get(a, c * N + k0 + r) end
      for s = 0, w - 1 do
        local p = math.tointeger(get(piv, s))
        if p < k0 + w then seg[s], seg[p - k0] = seg[p - k0], seg[s]
        else
          if out[p] == nil then out[p] = get(a, c * N + p) end
          seg[s], out[p] = out[p], seg[s]
        end
      end
      for s = 0, solve == 1 and w - 2 or -1 do
        for r = s + 1, w - 1 do seg[r] = fma(-get(L, s * m + r), seg[s], seg[r]) end
      end
      for r = 0, w - 1 do set(a, c * N + k0 + r, seg[r]) end
      for p, v in pairs(out) do set(a, c * N + p, v) end
    end
  end
  function K.apply_rest(cfg, a, N, nc, k0, w, L, m)
    assert(cfg.grid[1] * 64 >= N - k0 - w and cfg.grid[2] * 64 >= nc, "apply_rest: the grid misses tiles")
    for c = 0, nc - 1 do
      for i = k0 + w, N - 1 do
        local acc = get(a, c * N + i)
        for s = 0, w - 1 do acc = fma(-get(L, s * m + (i - k0)), get(a, c * N + k0 + s), acc) end
        set(a, c * N + i, acc)
      end
    end
  end
  function K.eliminate_step(cfg, a, N, nc, n, l, k0)
    assert(cfg.grid[1] * cfg.block >= N - n - 1 and cfg.grid[2] == nc, "eliminate_step: the grid misses rows")
    for c = 0, nc - 1 do
      local u = get(a, c * N + n)
      for i = n + 1, N - 1 do set(a, c * N + i, fma(-get(l, i - k0), u, get(a, c * N + i))) end
    end
  end
  function K.back_substitute(_, mat, x, N, GG, nb)
    local b = column_start(N, N, GG, nb)
    for j = 0, N - 1 do set(x, j, get(mat, b + j)) end
    for i = N - 1, 0, -1 do
      local col = column_start(i, N, GG, nb)
      local xi = get(x, i) / get(mat, col + i)
      set(x, i, xi)
      for j = 0, i - 1 do set(x, j, fma(-get(mat, col + j), xi, get(x, j))) end
    end
  end
  function K.residual(_, x, r, rs, N)
    for i = 0, N - 1 do
      local s, sum = -entry(i, N, N), 0.0
      for j = 0, N - 1 do
        local e = entry(i, j, N)
        s, sum = fma(e, get(x, j), s), sum + math.abs(e)
      end
      set(r, i, s)
      set(rs, i, sum)
    end
  end
  local Kernel = {}
  Kernel.__index = Kernel
  function Kernel:launch(cfg, ...)
    local args, fn = table.pack(...), K[self.name]
    local go = function () fn(cfg, table.unpack(args, 1, args.n)) end
    -- without a stream: the legacy stream, which the script's non-blocking streams do not wait for
    if cfg.stream then put(cfg.stream, {kind = "run", fn = go}) else go() end
  end
  -- }======

  -- {====== MPI: each call a meeting of every rank; the last to come does the work
  local meetings, calls = {}, {}
  local function meet(name, mine, finish)
    local r = CUR
    calls[r] = (calls[r] or 0) + 1
    local m = meetings[calls[r]] or {n = 0, at = {}}
    meetings[calls[r]] = m
    m.at[r], mine.name, m.n = mine, name, m.n + 1
    if m.n == G then
      for q = 0, G - 1 do
        assert(m.at[q].name == name, ("MPI: rank %d calls %s where rank %d calls %s"):format(q, m.at[q].name, r, name))
      end
      m.result = finish(m.at)
    end
    block(function () return m.result ~= nil end)
    return m.result[r]
  end
  local function each(f) local t = {} for q = 0, G - 1 do t[q] = f(q) end return t end
  local mpi = {path = "host-staged"}
  function mpi.available() return true end
  function mpi.barrier() meet("barrier", {}, function () return each(function () return true end) end) end
  function mpi.allreduce(v, o)
    return meet("allreduce", {v = v}, function (at)
      local acc = at[0].v
      for q = 1, G - 1 do
        local x = at[q].v
        acc = o.op == "max" and math.max(acc, x) or o.op == "min" and math.min(acc, x) or acc + x
      end
      return each(function () return acc end)
    end)
  end
  function mpi.bcast(v, o)
    return meet("bcast", {v = v, root = o.root}, function (at)
      local src = at[o.root].v
      return each(function (q)
        assert(at[q].root == o.root, "bcast: the roots differ")
        if type(src) ~= "table" then return src end
        if q ~= o.root then copy(at[q].v, src) end
        return at[q].v
      end)
    end)
  end
  local function vector(name, scatter)
    return function (a1, a2, a3)
      local part, whole, counts
      if scatter then whole, counts, part = a1, a2, a3 else part, whole, counts = a1, a2, a3 end
      return meet(name, {part = part, whole = whole}, function (at)
        local off = 0
        for q = 0, G - 1 do
          for i = 0, counts[q + 1] - 1 do
            if scatter then set(at[q].part, i, get(at[0].whole, off + i))
            else set(at[0].whole, off + i, get(at[q].part, i)) end
          end
          off = off + counts[q + 1]
        end
        return each(function (q) return at[q].part end)
      end)
    end
  end
  mpi.scatterv, mpi.gatherv = vector("scatterv", true), vector("gatherv", false)
  -- }======

  -- {====== NCCL: its calls are steps of their streams, done when every end heads its stream
  local Comm = {}
  Comm.__index = Comm
  function Comm:broadcast(buf, o)
    self.colls = self.colls + 1
    put(o.stream, {kind = "coll", seq = self.colls, rank = self.rank, root = o.root, buf = buf})
    return self
  end
  local function p2p(kind)
    return function (self, buf, peer, o)
      local t = kind == "send" and self.sends or self.recvs
      t[peer] = (t[peer] or 0) + 1
      put(o.stream, {kind = kind, seq = t[peer], rank = self.rank, peer = peer, buf = buf})
      return self
    end
  end
  Comm.send, Comm.recv = p2p("send"), p2p("recv")
  function Comm:close() end
  local nccl = {}
  function nccl.available() if nccl_here then return true, "mock" end return nil, "libnccl.so.2 not found" end
  function nccl.version() return 2, 99, 0 end
  function nccl.unique_id() return string.rep("\0", 128) end
  function nccl.comm(_, size, rank) return setmetatable({rank = rank, size = size, colls = 0, sends = {}, recvs = {}}, Comm) end
  function nccl.group(fn) return fn() end
  -- }======

  -- {====== the scheduler
  local function heading(kind)
    local t = {}
    for _, s in ipairs(streams) do
      local op = s.q[1]
      if op and op.kind == kind then t[#t + 1] = {s = s, op = op} end
    end
    return t
  end
  local function partner(op)   -- the other end of a send or receive, heading its stream
    for _, h in ipairs(heading(op.kind == "send" and "recv" or "send")) do
      if h.op.rank == op.peer and h.op.peer == op.rank and h.op.seq == op.seq then return h end
    end
  end
  local function ready(s)
    local op = s.q[1]
    if not op then return false end
    if op.kind == "wait" then return op.ev.done >= op.id end
    if op.kind == "coll" then
      local n = 0
      for _, h in ipairs(heading("coll")) do if h.op.seq == op.seq then n = n + 1 end end
      return n == G
    end
    if op.kind == "send" or op.kind == "recv" then return partner(op) ~= nil end
    return true
  end
  local function step(s)
    local op = table.remove(s.q, 1)
    if op.kind == "wait" then return end   -- ready() saw its event reached
    if op.kind == "run" then op.fn()
    elseif op.kind == "record" then op.ev.done = op.id
    elseif op.kind == "coll" then
      local all = {[op.rank] = {s = s, op = op}}
      for _, h in ipairs(heading("coll")) do if h.op.seq == op.seq then all[h.op.rank] = h end end
      local src = all[op.root].op.buf
      for q = 0, G - 1 do
        local h = all[q]
        assert(h.op.root == op.root and h.op.buf.n == src.n,
               ("broadcast %d: rank %d has root %d and %d elements, rank %d root %d and %d"):format(
               op.seq, q, h.op.root, h.op.buf.n, op.root, op.root, src.n))
        if q ~= op.root then copy(h.op.buf, src) end
        if h.s ~= s then table.remove(h.s.q, 1) end
      end
    else
      local h = partner(op)
      local snd, rcv = op.kind == "send" and op or h.op, op.kind == "send" and h.op or op
      assert(snd.buf.n == rcv.buf.n, ("rank %d sends %d elements, rank %d receives %d"):format(
             snd.rank, snd.buf.n, rcv.rank, rcv.buf.n))
      copy(rcv.buf, snd.buf)
      table.remove(h.s.q, 1)
    end
  end
  -- }======

  local cuda = {nccl = nccl, host_array = host_array}
  cuda.mpi = setmetatable({}, {__index = function (_, k)
    if k == "rank" then return CUR elseif k == "size" then return G end
    return mpi[k]
  end})
  function cuda.array(_, n) return new("dev", n) end
  function cuda.stream()
    local s = setmetatable({q = {}, speed = 1}, Stream)
    streams[#streams + 1] = s
    return s
  end
  function cuda.event() return setmetatable({recorded = 0, done = 0}, Event) end
  function cuda.compile()
    return {module = function ()
      return {kernel = function (_, name)
        assert(K[name], "no kernel " .. name)
        return setmetatable({name = name}, Kernel)
      end}
    end}
  end
  cuda.clock = os.clock
  function cuda.device() return {ordinal = 0} end

  local saved = {cuda = package.loaded.cuda, bench = package.loaded["culua.bench"], print = print, exit = os.exit}
  package.loaded.cuda = cuda
  package.loaded["culua.bench"] = {need_devices = function () return 1 end}
  print = function (...) if CUR == 0 then printed[#printed + 1] = table.concat(table.pack(...), "\t") end end
  os.exit = function (code) error("os.exit(" .. tostring(code) .. ")", 0) end
  local saved_arg = arg
  arg = args
  local ok, err = pcall(function ()
    local chunk = assert(loadfile(example))
    local co, blocked, live, steps = {}, {}, G, 0
    for r = 0, G - 1 do co[r] = coroutine.create(chunk) end
    while live > 0 do
      local can = {}
      for r = 0, G - 1 do
        if coroutine.status(co[r]) == "suspended" and (blocked[r] == nil or blocked[r]()) then can[#can + 1] = {rank = r} end
      end
      for _, s in ipairs(streams) do if ready(s) then can[#can + 1] = {s = s} end end
      if #can == 0 then
        local heads = {}
        for i, s in ipairs(streams) do if s.q[1] then heads[#heads + 1] = ("stream %d: %s"):format(i, s.q[1].kind) end end
        error("every rank and stream waits (a hang under NCCL): " .. table.concat(heads, ", "))
      end
      -- now and then the streams change speed: some run far ahead of others
      steps = steps + 1
      if steps % 100 == 0 then for _, s in ipairs(streams) do s.speed = rand() ^ 4 end end
      local total = 0
      for _, c in ipairs(can) do c.w = c.s and c.s.speed or 1; total = total + c.w end
      local x, pick = rand() * total, can[#can]
      for _, c in ipairs(can) do x = x - c.w; if x <= 0 then pick = c; break end end
      if pick.s then step(pick.s)
      else
        CUR = pick.rank
        local fine, cond = coroutine.resume(co[pick.rank])
        if not fine then error(("rank %d: %s"):format(pick.rank, tostring(cond)), 0) end
        if coroutine.status(co[pick.rank]) == "dead" then live = live - 1 else blocked[pick.rank] = cond end
      end
    end
    for i, s in ipairs(streams) do assert(#s.q == 0, ("stream %d has work left"):format(i)) end
  end)
  package.loaded.cuda, package.loaded["culua.bench"], print, os.exit, arg =
    saved.cuda, saved.bench, saved.print, saved.exit, saved_arg
  return table.concat(printed, "\n") .. "\n", (not ok) and tostring(err) or nil
end

local cases = {
  -- G, args, seeds
  {1, "29 block=8", 1},
  {1, "40 block=8 update=gemm", 1},
  {2, "37 block=4", 3},
  {2, "29 block=1", 2},
  {2, "50 block=8 update=gemm onestream", 2},
  {3, "45 block=3 update=gemm", 2},
  {3, "70 block=64", 1},
  {4, "41 block=4", 2},
  {4, "33 block=16 update=gemm", 1},
}
for _, c in ipairs(cases) do
  local G, args, seeds = c[1], c[2], c[3]
  for seed = 1, seeds do
    local argv = {}
    for a in (args .. (G > 1 and " both" or "") .. " reps=2"):gmatch("%S+") do argv[#argv + 1] = a end
    local out, err = run(G, seed * 7919, argv, true)
    local what = ("%d rank%s, %s, seed %d"):format(G, G == 1 and "" or "s", args, seed)
    T.ok(err == nil, what .. ": runs to the end", err)
    local names = G == 1 and {"1 rank"} or {"nccl, " .. G .. " ranks", "host, " .. G .. " ranks"}
    local good = out:find("\nSUCCESS\n$") ~= nil
    for _, name in ipairs(names) do
      good = good and out:find("\n" .. name .. ": residual ratio [^\n]*identical to the one%-GPU solution: SUCCESS") ~= nil
    end
    T.ok(good, what .. ": the same solution as one GPU, to the bit", out)
  end
end

-- without NCCL the script says so, and the host's way runs alone
local out, err = run(2, 5, {"30", "both", "block=8", "reps=1"}, false)
T.ok(err == nil, "no NCCL: runs to the end", err)
T.like(out, "\nnccl: not available here %(NCCL not available: libnccl%.so%.2 not found%); the host%-staged way runs instead\n",
       "  it says NCCL is not there, and why")
T.unlike(out, "nccl, 2 ranks", "  and runs no NCCL")
T.like(out, "\nhost, 2 ranks: residual ratio [^\n]*SUCCESS\n", "  the host's way runs")

T.done_testing()
