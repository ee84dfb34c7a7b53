-- culua.catalog.sort_multi: cuda.catalog.sort over several GPUs in one process
-- (devices = {...}, a list of arrays a part) or over ranks (comm = c, a
-- cuda.nccl communicator, and each rank's own arrays); sort.lua's M.sort hands
-- such calls here. Kernels: kernels/sort_multi.cu.
--
-- The algorithm, one copy for both ways of moving data:
--   1. the parts agree on the call (dtypes, options, counts) and each one's
--      place in the global order is fixed: part r will hold the keys of global
--      places [O_r, O_r + out_r), out_r its own count by default (`balance`);
--   2. each part sorts its keys with the one-GPU sort;
--   3. the boundaries O_r are found exactly: a search over order keys (the
--      bits the one-GPU sort orders by), each round counting in every part's
--      sorted run how many keys fall below a few hundred candidates a boundary
--      and summing the counts over the parts; equal keys at a boundary are split
--      by part, the earlier parts' first, which keeps the sort stable;
--   4. every part sends each other part its piece (a contiguous range of its
--      run), in phases that pair the parts (a piece out and a piece in a part
--      a phase; tune.pairs) or by their distance in a binary tree;
--   5. each part merges the pieces it holds, pairwise up the tree, a node as
--      soon as its pieces are there (the part's own pair while the farther
--      pieces still travel), the last merge into the part's own arrays.
-- Since the boundaries are exact, a part never holds more than it was told
-- to: the bound on a part is `out_r`, and the capacity rule is that part r's
-- arrays hold at least out_r elements, checked on every part before anything
-- moves.
--
-- This file: the entry, the checks of the arguments and the agreement. The
-- algorithm is sort_multi_run.lua's, and what moves between the parts moves
-- through sort_multi_transport.lua: within one process, copies between the
-- devices; over ranks, NCCL (all_gather and all_reduce for the agreement and the
-- search, send/recv in a group a phase for the pieces).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local sort1 = require "culua.catalog.sort"
local X = require "culua.catalog.sort_multi_transport"
local R = require "culua.catalog.sort_multi_run"

local fail = core.fail

local M = {tune = R.tune}   -- the knobs: sort_multi_run.lua's tune

-- {====================================================== dtypes and options

-- a key dtype: its bytes, to_radix's kind, and for 16-bit floats the largest magnitude that
-- is no NaN (kernels/sort_multi.cu, Okey<u16>)
local key_types = {uint32 = {4, 0}, int32 = {4, 1}, float32 = {4, 2}, uint64 = {8, 0}, int64 = {8, 1},
                   float64 = {8, 2}, uint16 = {2, 0}, int16 = {2, 1}, float16 = {2, 2, 0x7c00},
                   bfloat16 = {2, 2, 0x7f80}}
local width_name = {[2] = "u16", [4] = "u32", [8] = "u64"}
local elem_bytes = core.dtype_bytes
-- dtypes by number, for the rows the parts compare
local dtype_list = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64",
                    "float16", "bfloat16"}
local dtype_code = {}
for i, d in ipairs(dtype_list) do dtype_code[d] = i end
local balances = {"input", "even"}

local options = {"devices", "comm", "descending", "begin_bit", "end_bit", "counts", "count", "balance", "stream"}

-- }======================================================


-- {====================================================== arguments

-- an open, packed cuda.array's dtype, length, device and address
local function open_array(fname, what, x)
  local dt, n, dev, ptr = core.open_dtype(fname, what, x)
  if x.pitched then fail(fname, "%s is a pitched array (copy it to a packed array first)", what) end
  return dt, n, dev, ptr
end

-- a part's arrays, checked as the one-GPU sort checks them (its own checks, run on empty
-- views: the same dtypes, options and words) and as this sort needs them; `count`: how many
-- of the keys are sorted (the rest is room). Returns the part.
local function check_part(fname, keys, values, count, opts)
  local dt, cap, dev, kptr = open_array(fname, "keys", keys)
  local vdt, vptr
  if values ~= nil then
    local vn, vdev
    vdt, vn, vdev, vptr = open_array(fname, "values", values)
    if vn ~= cap then fail(fname, "values has %d elements but keys has %d", vn, cap) end
    if vdev ~= dev then fail(fname, "values is on device %d but keys is on device %d", vdev.ordinal, dev.ordinal) end
  end
  -- the merges carry 4- and 8-byte values (kernels/sort_multi.cu's SORTM_PAIRS)
  if vdt and elem_bytes[vdt] < 4 then
    fail(fname, "values of dtype %s are not sorted over devices or ranks (values of 4 or 8 bytes are)", vdt)
  end
  sort1.sort(keys:view(1, 0), values and values:view(1, 0),
             {descending = opts.descending, begin_bit = opts.begin_bit, end_bit = opts.end_bit})
  if not key_types[dt] then fail(fname, "keys of dtype %s are not sorted over devices or ranks", dt) end
  local n = cap
  if count ~= nil then
    if math.type(count) ~= "integer" or count < 0 or count > cap then
      fail(fname, "the count of keys must be an integer 0..%d (the keys' length), got %s", cap, tostring(count))
    end
    n = count
  end
  return {keys = keys, values = values, dev = dev, dt = dt, vdt = vdt, n = n, cap = cap, kptr = kptr, vptr = vptr}
end

-- the options every part shares, checked (the one-GPU sort checked descending and the bits)
local function shared_opts(fname, opts, width)
  R.check_tune(fail, fname)
  local o = {desc = opts.descending == true, begin_bit = opts.begin_bit or 0, end_bit = opts.end_bit or width}
  o.balance = core.one_of(fname, "balance", opts.balance or "input", balances)
  return o
end

-- a part's row for the agreement: ok, keys' dtype, values' dtype (0: none), descending,
-- begin_bit, end_bit, balance, keys sorted, room
local function agreement_row(part, o)
  if not part then return {0, 0, 0, 0, 0, 0, 0, 0, 0} end
  return {1, dtype_code[part.dt], part.vdt and dtype_code[part.vdt] or 0, o.desc and 1 or 0, o.begin_bit, o.end_bit,
          o.balance == "even" and 2 or 1, part.n, part.cap}
end

local row_fields = {
  {2, "the keys' dtype", function (v) return dtype_list[v] end},
  {3, "the values' dtype", function (v) return v == 0 and "none" or dtype_list[v] end},
  {4, "descending", function (v) return tostring(v == 1) end},
  {5, "begin_bit", tostring},
  {6, "end_bit", tostring},
  {7, "balance", function (v) return balances[v] end},
}

-- the agreement: every part's row compared; on any difference every part raises the same
-- words (ctx.agree). Returns the keys a part will hold afterwards, and the keys each sorts.
local function agree(ctx, all)
  local P = #all
  for r = 1, P do
    if all[r][1] == 0 then
      if ctx.err then ctx.raise(ctx.err) end   -- this rank's own
      ctx.agree(("%s refused its arguments (its error says why); nothing was sorted"):format(ctx.who(r)))
    end
  end
  for _, f in ipairs(row_fields) do
    for r = 2, P do
      if all[r][f[1]] ~= all[1][f[1]] then
        ctx.agree(("the %ss disagree on %s: %s has %s, %s has %s; nothing was sorted"):format(ctx.who(), f[2],
                  ctx.who(1), f[3](all[1][f[1]]), ctx.who(r), f[3](all[r][f[1]])))
      end
    end
  end
  local N, ns, out = 0, {}, {}
  for r = 1, P do ns[r] = all[r][8]; N = N + ns[r] end
  for r = 1, P do
    if all[1][7] == 2 then out[r] = N // P + (r <= N % P and 1 or 0) else out[r] = ns[r] end
    if out[r] > all[r][9] then
      ctx.agree(("%s would hold %d keys afterwards but its arrays hold %d (balance = 'even' gives each %s %d or %d "
                 .. "of the %d keys: give it longer arrays, and the count of its keys); nothing was sorted")
                :format(ctx.who(r), out[r], all[r][9], ctx.who(), N // P, N // P + 1, N))
    end
  end
  return ns, out, N
end

-- the order of keys of dtype dt by options o (o gains them)
local function order_of(o, dt, vdt)
  local kt = key_types[dt]
  o.kind, o.kb, o.inf16 = kt[2], kt[1], kt[3]
  o.wname = width_name[kt[1]]
  o.vname = vdt and width_name[elem_bytes[vdt]]
  return o
end

-- }======================================================

-- {====================================================== the two entries

-- M.test_fail(part, where), when the tests set it: true makes that part raise at `where`
-- ("arguments", "local", "search", "exchange"): how a rank that fails is seen by the others
local function test_fail(r, where) return M.test_fail ~= nil and M.test_fail(r, where) end

-- M.stats: the last call's parts and how the pieces went ("direct": read where they lie;
-- "copies": copied between the devices; "nccl"), and where its time went (host ms):
-- sort (the local sorts), search (the boundaries: `rounds` rounds, each one's host ms in
-- round_launch, the candidates' copies and the launches, and round_wait, the wait for the
-- counts), exchange (the pieces and the merges, which overlap)
local function new_stats(P, transport)
  M.stats = {parts = P, transport = transport}
  return M.stats
end

-- the counts of keys every part holds afterwards
local function counts_of(out)
  local t = {}
  for i, c in ipairs(out) do t[i] = c end
  return t
end

-- devices = {d1, ..., dP}: keys (and values) are lists of P arrays, part i's on device di
local function by_devices(fname, keys, values, opts)
  local devices = opts.devices
  if type(keys) ~= "table" or cuda.type(keys) then
    fail(fname, "with devices, keys must be a list of cuda.arrays (one a device), got %s", cuda.type(keys) or type(keys))
  end
  if type(devices) ~= "table" or #devices < 1 then
    fail(fname, "devices must be a list of device ordinals, got %s", type(devices) == "table" and "an empty table" or type(devices))
  end
  local P = #devices
  if #keys ~= P then fail(fname, "keys has %d arrays but devices lists %d", #keys, P) end
  if values ~= nil and (type(values) ~= "table" or cuda.type(values) or #values ~= P) then
    fail(fname, "with devices, values must be a list of %d cuda.arrays, got %s", P,
         type(values) == "table" and not cuda.type(values) and ("%d"):format(#values) or (cuda.type(values) or type(values)))
  end
  local counts = opts.counts
  if counts ~= nil and (type(counts) ~= "table" or #counts ~= P) then
    fail(fname, "counts must be a list of %d integers (the keys of each part), got %s", P, type(counts))
  end
  if opts.count ~= nil then fail(fname, "count is for comm; with devices give counts = {...}") end
  if opts.stream ~= nil then fail(fname, "stream is for comm; with devices each part runs on a stream of the catalog's") end
  local parts, used, ranges = {}, {}, {}
  for i = 1, P do
    local d = devices[i]
    local count = cuda.device_count()
    if count == 0 then fail(fname, "devices[%d]: no CUDA device (none found)", i) end
    if math.type(d) ~= "integer" or d < 0 or d >= count then
      fail(fname, "devices[%d] must be a device ordinal 0..%d, got %s", i, count - 1, tostring(d))
    end
    local label = ("part %d (device %d)"):format(i, d)
    local ok, p = pcall(check_part, fname, keys[i], values and values[i], counts and counts[i], opts)
    if not ok then error((tostring(p):gsub("cuda%.catalog%.sort: ", "cuda.catalog.sort: " .. label .. ": ", 1)), 0) end
    if p.dev.ordinal ~= d then fail(fname, "%s: keys is on device %d", label, p.dev.ordinal) end
    -- the parts' arrays may share a device (views of one array, say) but not memory
    for _, r in ipairs(ranges) do
      for _, mine in ipairs{{p.kptr, p.cap * key_types[p.dt][1]}, p.values and {p.vptr, p.cap * elem_bytes[p.vdt]} or nil} do
        if r.dev == d and mine[1] < r.ptr + r.bytes and r.ptr < mine[1] + mine[2] then
          fail(fname, "%s: its arrays overlap part %d's", label, r.part)
        end
      end
    end
    ranges[#ranges + 1] = {dev = d, ptr = p.kptr, bytes = p.cap * key_types[p.dt][1], part = i}
    if p.values then ranges[#ranges + 1] = {dev = d, ptr = p.vptr, bytes = p.cap * elem_bytes[p.vdt], part = i} end
    used[d] = (used[d] or 0) + 1
    p.r, p.slot = i, X.slot(p.dev, used[d])
    p.S = p.slot.S
    parts[i] = p
  end
  local o = order_of(shared_opts(fname, opts, 8 * key_types[parts[1].dt][1]), parts[1].dt, parts[1].vdt)
  local ctx = {fname = fname, o = o, test_fail = test_fail, stats = new_stats(P, "copies")}
  ctx.who = function (r) return r and ("part %d"):format(r) or "part" end
  ctx.agree = function (msg) fail(fname, "%s", msg) end
  ctx.raise = function (err) error(err, 0) end
  local rows = {}
  for i, p in ipairs(parts) do rows[i] = agreement_row(p, o) end
  local ns, out, N = agree(ctx, rows)
  ctx.ns, ctx.out = ns, out
  local T = X.peer(parts, P, R.levels_of(P), R.tune.direct, R.tune.pull)
  ctx.stats.transport = T.direct and "direct" or "copies"
  if N > 0 then
    for _, p in ipairs(parts) do
      -- each part's stream after the work queued so far on its device's default stream
      local start = X.slot_event(p.slot, p.dev, "start")
      start:record()
      p.S:wait(start)
      R.part_buffers(p, o, out[p.r], P, false)
    end
    R.run(T, ctx)
  end
  return keys, values, counts_of(out)
end

-- the job ends when a rank fails where the others already wait for it in NCCL: nothing can
-- release them (cuda.mpi's handler, as for an uncaught error: "culua: rank N of M failed")
local function abort_job(msg)
  local reg = debug and debug.getregistry and debug.getregistry()
  local fatal = reg and reg["culua.fatal"]
  if type(fatal) == "function" then fatal(tostring(msg)) end
end

-- comm = c: this rank's keys (and values); every rank of c calls with its own
local function by_ranks(fname, keys, values, opts)
  local comm = opts.comm
  if cuda.type(comm) ~= "cuda.nccl.comm" then
    fail(fname, "comm must be a cuda.nccl.comm, got %s", cuda.type(comm) or type(comm))
  end
  if comm.closed then fail(fname, "comm is closed") end
  local P, me, dev = comm.size, comm.rank + 1, comm.device
  local ctx = {fname = fname, test_fail = test_fail, stats = new_stats(P, "nccl")}
  ctx.who = function (r) return r and ("rank %d"):format(r - 1) or "rank" end
  -- the errors every rank raises alike, after a gather: the job goes on
  ctx.agree = function (msg)
    ctx.agreed = true
    fail(fname, "%s", msg)
  end
  ctx.raise = function (err)
    ctx.agreed = true
    error(err, 0)
  end
  -- this rank's arguments, checked; an error is kept for the agreement, so that every rank
  -- hears of it instead of waiting in NCCL for this one
  local ok, p = pcall(function ()
    if test_fail(me, "arguments") then error("cuda.catalog.sort: a failure for the tests", 0) end
    if opts.devices ~= nil then fail(fname, "give devices or comm, not both") end
    if opts.counts ~= nil then fail(fname, "counts is for devices; with comm give count = n") end
    local part = check_part(fname, keys, values, opts.count, opts)
    if part.dev ~= dev then fail(fname, "keys is on device %d but comm is on device %d", part.dev.ordinal, dev.ordinal) end
    part.o = order_of(shared_opts(fname, opts, 8 * key_types[part.dt][1]), part.dt, part.vdt)
    part.stream = core.check_stream(fname, opts.stream, dev)
    return part
  end)
  if not ok then ctx.err, p = p, nil end
  local part = p or {dev = dev, n = 0}
  part.r, part.slot = me, X.slot(dev, 1)
  part.S = part.slot.S
  local T = setmetatable({P = P, parts = {part}, comm = comm}, X.Nccl)
  local function body()
    part.words = core.scratch("sort_multi_words", dev, part.S, R.words_for(P))
    local ns, out, N = agree(ctx, T:gather{agreement_row(p, p and p.o)})
    ctx.ns, ctx.out, ctx.o = ns, out, part.o
    if N == 0 then return end
    local start = X.slot_event(part.slot, dev, "start")
    start:record(part.stream)
    part.S:wait(start)
    -- a rank short of memory for its buffers says so in the next gather, as a failed
    -- local sort does
    local bok, err = pcall(R.part_buffers, part, part.o, out[me], P, true)
    if not bok then part.failed = err end
    R.run(T, ctx)
  end
  local ok2, err = pcall(body)
  if not ok2 then
    if not ctx.agreed then abort_job(err) end
    error(err, 0)
  end
  return keys, values, counts_of(ctx.out)
end

-- cuda.catalog.sort(keys [, values], {devices = {...} | comm = c, ...}) -> keys, values, counts
function M.sort(keys, values, opts)
  local fname = "sort"
  if opts == nil and type(values) == "table" and values[1] == nil and not cuda.type(values) then values, opts = nil, values end
  opts = core.options(fname, opts, options)
  if opts.comm ~= nil then return by_ranks(fname, keys, values, opts) end
  if opts.devices == nil then
    fail(fname, "keys is a list of arrays: give devices = {...} (a device a part) or comm = c")
  end
  return by_devices(fname, keys, values, opts)
end

-- }======================================================

return M
