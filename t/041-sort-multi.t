-- cuda.catalog.sort over several GPUs (devices = {...}) and ranks (comm = c under mpirun).
-- Without a GPU: refusals that need no device memory, and kernels/sort_multi.cu compiled by
-- NVRTC with the argument lists lua/catalog/sort_multi_run.lua launches it with (t/043 runs
-- the algorithm itself on a mock). With one: shares of one GPU ({0, 0}, {0, 0, 0, 0}); with
-- two and four, {0, 1} and {0, 1, 2, 3}; every key dtype, pairs, descending, bit ranges,
-- many equal keys, empty parts, balance = "even" into longer arrays; each part's slice
-- byte for byte against the one-GPU sort of the concatenation, which is stable (values:
-- the keys' global places). Under mpirun (-np 2 on two GPUs, -np 4 on four; NCCL takes a
-- GPU once): the same over ranks, ranks that disagree, a rank with a bad argument, and a
-- rank that fails mid-call taking the job down.
local T = require "culua.tap"
local cuda = require "cuda"
local sort = cuda.catalog.sort

-- {====================================================== without a GPU

T.error_like(function () sort({1, 2}, {devices = {0}}) end, "cuda%.catalog%.sort: keys has 2 arrays but devices lists 1",
             "devices: one array a device")
T.error_like(function () sort({}, {}) end, "cuda%.catalog%.sort: keys is a list of arrays: give devices = {...}",
             "a list of keys without devices or comm")
T.error_like(function () sort({}, {devices = {0}, balanse = "even"}) end, "cuda%.catalog%.sort: unknown option 'balanse'",
             "a misspelt option, first")
T.error_like(function () sort(nil, {comm = 3}) end, "cuda%.catalog%.sort: comm must be a cuda%.nccl%.comm, got number",
             "comm: not a communicator")

-- the kernels compile under NVRTC, and take the arguments the algorithm gives them
-- (pointers as integers here)
do
  local prog
  T.lives_ok(function ()
    prog = cuda.compile(cuda._catalog.source("sort_multi"), {options = {"-std=c++17", "-arch=compute_90"}, name = "sort_multi.cu"})
  end, "kernels/sort_multi.cu compiles under NVRTC")
  if prog then
    local function fits(name, ...) return cuda.check_args(cuda.signature(prog.ptx, name), ...) end
    local big = (1 << 40) + 3
    for _, k in ipairs{"u16", "u32", "u64"} do
      T.ok(fits("culua_sortm_bounds_" .. k, 1, big, 2, 768, 3, 1, 2, 16, 3, -1, 0x7c00), "bounds_" .. k .. "'s arguments")
      T.ok(fits("culua_sortm_ends_" .. k, 1, big, 2, 0, 0, 0, 0xffffffff, 0), "ends_" .. k .. "'s arguments")
      T.ok(fits("culua_sortm_corank_" .. k, 1, big, 2, big, 3, big, 1, 0, 0, -1, 0), "corank_" .. k .. "'s arguments")
      T.ok(fits("culua_sortm_merge_" .. k .. "_keys", 1, big, 2, 0, 3, 4, 2, 16, 5, 7, 0x7f80), "merge_" .. k .. "_keys' arguments")
      for _, v in ipairs{"u32", "u64"} do
        T.ok(fits("culua_sortm_merge_" .. k .. "_" .. v, 1, big, 2, big, 3, 4, 5, 6, 7, 0, 0, 0, -1, 0),
             "merge_" .. k .. "_" .. v .. "'s arguments")
      end
    end
    T.ok(fits("culua_sortm_copy", 1, 2, big), "copy's arguments")
  end
  -- tune.items: the merges of another tile, built by NVRTC and named for it (the largest,
  -- 16 keys a thread of 64-bit keys and values, within 48 KiB of shared memory)
  local p16
  T.lives_ok(function ()
    p16 = cuda.compile(cuda._catalog.source("sort_multi"), {options = {"-std=c++17", "-arch=compute_90", "-DSORTM_ITEMS=16",
                                                                       "-DSORTM_V=_i16"}, name = "sort_multi.cu"})
  end, "kernels/sort_multi.cu compiles with 16 keys a thread")
  if p16 then
    T.like(p16.ptx, "%.entry culua_sortm_merge_u64_u64_i16%(", "  its merges named _i16")
    T.like(p16.ptx, "%.entry culua_sortm_corank_u32_i16%(", "  and its co-ranks")
    T.unlike(p16.ptx, "culua_sortm_merge_u32_keys%(", "  and no merge of the prebuilt tile")
  end
end

-- }======================================================


-- {====================================================== several GPUs

local kbytes = {uint32 = 4, int32 = 4, float32 = 4, uint64 = 8, int64 = 8, float64 = 8, uint16 = 2, float16 = 2}

-- n host keys of dtype dt: "random" (every bit pattern: NaNs, -0.0, denormals among the
-- floats) or "few" (four values: long runs of equal keys across the parts' boundaries)
local function make_keys(dt, n, how, seed)
  local h = cuda.host_array(dt, n)
  if n == 0 then return h end
  if how == "few" then
    local i = cuda.host_array(kbytes[dt] == 4 and "int32" or "int64", n):random(seed, 0, 3)
    if dt:find("float") then
      for j = 1, n do h[j] = i[j] - 1.5 end
      return h
    end
    return h:copy_from(i:bytes())
  end
  local bits = kbytes[dt] == 2 and cuda.host_array("int16", n):random(seed, -32768, 32767)
               or kbytes[dt] == 4 and cuda.host_array("int32", n):random(seed, -2147483648, 2147483647)
               or cuda.host_array("int64", n):random(seed, math.mininteger, math.maxinteger)
  return h:copy_from(bits:bytes())
end

-- the reference: the concatenation of every part's keys sorted by the one-GPU sort (stable),
-- its values the keys' global places; as strings of bytes
local function reference(dt, hk, vdt, opts)
  local N = #hk
  local dk = cuda.array(dt, math.max(N, 1)):view(1, N)
  if N > 0 then dk:copy_from(hk) end
  local dv = vdt and cuda.array(vdt, math.max(N, 1)):view(1, N)
  if vdt and N > 0 then dv:copy_from(cuda.host_array(vdt, N):iota(1)) end
  sort(dk, dv, {descending = opts.descending, begin_bit = opts.begin_bit, end_bit = opts.end_bit})
  local keys = N > 0 and dk:copy_to(cuda.host_array(dt, N)):bytes() or ""
  local vals = vdt and N > 0 and dv:copy_to(cuda.host_array(vdt, N)):bytes() or ""
  return keys, vals
end

-- the first difference of two byte strings of es-byte elements, said
local function differ(got, want, es, what)
  if got == want then return nil end
  if #got ~= #want then return ("%s: %d bytes, expected %d"):format(what, #got, #want) end
  for i = 1, #got // es do
    if got:sub((i - 1) * es + 1, i * es) ~= want:sub((i - 1) * es + 1, i * es) then
      return ("%s: first difference at element %d"):format(what, i)
    end
  end
end

local POISON = 0x5a5a5a5a   -- the room past a part's keys, and the scratch
local function poison(dt) return kbytes[dt] == 2 and 0x5a5a or POISON end   -- what a 16-bit dtype holds
-- under compute-sanitizer (T.sanitizer) the parts are smaller: the case of 2^21 keys a part
-- takes 2^14, the others a tenth
local SCALE, BIG = T.sanitizer and 10 or 1, T.sanitizer and 1 << 14 or 1 << 21

-- sort over `devs` (a list of ordinals): parts of `sizes` keys of dtype dt (values of vdt:
-- their global places) in arrays of `caps` elements, by opts; each part's slice checked
local function multi(name, dt, devs, sizes, opts, vdt, how, caps)
  if not T.share() then return end
  opts = opts or {}
  local P, N = #devs, 0
  for _, n in ipairs(sizes) do N = N + n end
  local hk = make_keys(dt, N, how or "random", N + P)
  local kall = hk:bytes()
  local es, ves = kbytes[dt], vdt and kbytes[vdt]
  local keys, values, at = {}, vdt and {} or nil, 0
  for r = 1, P do
    local n, cap = sizes[r], caps and caps[r] or sizes[r]
    keys[r] = cuda.array(dt, math.max(cap, 1), {device = devs[r]}):view(1, cap):fill(poison(dt))
    if n > 0 then keys[r]:view(1, n):copy_from(kall:sub(at * es + 1, (at + n) * es)) end
    if vdt then
      values[r] = cuda.array(vdt, math.max(cap, 1), {device = devs[r]}):view(1, cap):fill(poison(vdt))
      if n > 0 then values[r]:view(1, n):copy_from(cuda.host_array(vdt, n):iota(at + 1)) end
    end
    at = at + n
  end
  local o = {devices = devs}
  for k, v in pairs(opts) do o[k] = v end
  if caps then o.counts = sizes end
  local ok, rk, rv, counts = pcall(sort, keys, values, o)
  if not T.ok(ok, name .. ": sorts", not ok and tostring(rk) or nil) then return end
  local wk, wv = reference(dt, hk, vdt, opts)
  local bad = (rk ~= keys or rv ~= values) and "the call returns other arrays" or nil
  at = 0
  for r = 1, P do
    local out = opts.balance == "even" and N // P + (r <= N % P and 1 or 0) or sizes[r]
    if counts[r] ~= out then bad = bad or ("part %d: count %s, expected %d"):format(r, tostring(counts[r]), out) end
    if out > 0 then
      bad = bad or differ(keys[r]:view(1, out):copy_to(cuda.host_array(dt, out)):bytes(), wk:sub(at * es + 1, (at + out) * es),
                          es, ("part %d's keys"):format(r))
      if vdt then
        bad = bad or differ(values[r]:view(1, out):copy_to(cuda.host_array(vdt, out)):bytes(),
                            wv:sub(at * ves + 1, (at + out) * ves), ves, ("part %d's values (stability)"):format(r))
      end
    end
    at = at + out
  end
  T.ok(not bad, name .. ": every part's slice as the one-GPU sort's", bad)
end

-- the buffers of the parts' streams on device 0 filled with a pattern before a call that
-- reuses them, so that a place no step writes shows (kept by stream, as the one-GPU sort's)
local function poison_scratch()
  local core = require "culua.catalog.core"
  local dev = cuda.device(0)
  for _, s in ipairs(core.device_state("sort_multi", dev)) do
    for _, role in ipairs{"recv", "tmp", "vrecv", "vtmp"} do
      for _, dt in ipairs{"uint32", "int32", "uint64"} do
        local ok, w = pcall(core.scratch, "sort_multi_" .. role .. "_" .. dt, dev, s.S, 1)
        if ok then w:fill(POISON, s.S) end
      end
    end
  end
end

local function cases(devs, tag)
  local P = #devs
  local function sizes_of(base)
    local s = {}
    for r = 1, P do s[r] = (base // SCALE * (r * 7 + 3)) // 10 + r * 13 end
    return s
  end
  for _, dt in ipairs{"uint32", "int32", "float32", "uint64", "int64", "float64"} do
    multi(("%s keys %s"):format(dt, tag), dt, devs, sizes_of(20000))
    multi(("%s pairs (uint32 values) %s"):format(dt, tag), dt, devs, sizes_of(3000), nil, "uint32")
    multi(("%s pairs (int64 values), many equal keys %s"):format(dt, tag), dt, devs, sizes_of(5000), nil, "int64", "few")
    multi(("%s descending pairs %s"):format(dt, tag), dt, devs, sizes_of(2000), {descending = true}, "int32")
  end
  local z = sizes_of(1000)
  z[1] = 0
  multi("one part empty " .. tag, "uint32", devs, z, nil, "uint32")
  local one = {}
  for r = 1, P do one[r] = r == P and 1 or 0 end
  multi("one key in all " .. tag, "float64", devs, one, nil, "uint64")
  multi("uint32 bits 4..21, many equal keys " .. tag, "uint32", devs, sizes_of(4000), {begin_bit = 4, end_bit = 21}, "uint32", "few")
  multi("int64 descending bits 7..50 " .. tag, "int64", devs, sizes_of(4000), {descending = true, begin_bit = 7, end_bit = 50}, "float64")
  multi("float32 bit 31 alone (signs) " .. tag, "float32", devs, sizes_of(3000), {begin_bit = 31}, "int32")
  local skew, room = {}, {}
  for r = 1, P do skew[r] = r == 1 and 30011 or 17 * r; room[r] = 30011 end
  multi("balance = 'even' from skewed parts " .. tag, "float32", devs, skew, {balance = "even"}, "uint32", "random", room)
  multi("uint32 keys, 2^21 a part " .. tag, "uint32", devs, sizes_of(BIG * SCALE * 10 // 17))
  multi("uint64 pairs, 2^20 a part " .. tag, "uint64", devs, sizes_of(BIG * SCALE * 5 // 17), nil, "uint64")
end

T.gpu_part(function ()
  cases({0, 0}, "on {0, 0}")
  cases({0, 0, 0, 0}, "on {0, 0, 0, 0}")
  multi("three shares, keys " .. "on {0, 0, 0}", "int32", {0, 0, 0}, {12345, 999, 54321}, nil, "int32")
  multi("one share is the one-GPU sort", "uint64", {0}, {77777}, {descending = true}, "uint32")
  -- a call on the streams and buffers of the calls before, their contents poisoned
  poison_scratch()
  multi("again, its buffers poisoned", "uint32", {0, 0, 0, 0}, {4321, 1234, 999, 5000}, nil, "uint32")
  poison_scratch()
  multi("again, 64-bit keys", "uint64", {0, 0, 0}, {4321, 12345, 999}, {descending = true}, "int32", "few")
  -- the knobs: merge tiles NVRTC builds, fewer candidates a round (more rounds), no phases
  local tune = require("culua.catalog.sort_multi").tune
  local saved = {tune.items, tune.search, tune.phased, tune.direct}
  tune.direct = true   -- the pieces read where they lie, not copied (the default copies them)
  multi("direct, on {0, 0, 0, 0}", "uint32", {0, 0, 0, 0}, {40000, 1, 30000, 20001}, nil, "int32", "few")
  if cuda.device_count() >= 4 then
    multi("direct, on {0, 1, 2, 3}", "float32", {0, 1, 2, 3}, {40000, 1, 30000, 20001}, nil, "int64")
    multi("direct, on {3, 2, 1, 0, 0}", "uint64", {3, 2, 1, 0, 0}, {40000, 1, 30000, 20001, 777}, nil, "int64")
  end
  -- tune.pull: the pieces read by the receivers' multiprocessors, 16-bit keys among them
  -- (pieces at offsets of 2 bytes: the kernel's narrower words and single bytes)
  tune.direct, tune.pull = false, true
  multi("pull, on {0, 0, 0, 0}", "uint32", {0, 0, 0, 0}, {40000, 1, 30000, 20001}, nil, "int32", "few")
  multi("pull, float16 keys on {0, 0, 0}", "float16", {0, 0, 0}, {12345, 777, 30001}, nil, "uint32")
  if cuda.device_count() >= 2 then
    multi("pull, on {0, 1, 1, 0}", "uint64", {0, 1, 1, 0}, {40001, 3, 29999, 20000}, nil, "int64")
    multi("pull, uint16 keys on {1, 0, 1}", "uint16", {1, 0, 1}, {9999, 20001, 12347}, {descending = true}, "uint32")
  else
    T.skip("one GPU: pulls between GPUs need two", 1)
  end
  tune.pull = false
  -- tune.pairs: phases that pair the parts, a piece in and a piece out a part a phase
  local pairs0 = tune.pairs
  tune.pairs = true
  multi("pairs, on {0, 0, 0, 0}", "uint32", {0, 0, 0, 0}, {40000, 1, 30000, 20001}, nil, "uint32")
  multi("pairs, three shares", "float64", {0, 0, 0}, {12345, 777, 30001}, {descending = true})
  if cuda.device_count() >= 4 then
    multi("pairs, on {0, 1, 2, 3}", "float32", {0, 1, 2, 3}, {40000, 777, 30000, 20001}, nil, "int64")
  else
    T.skip(("%d GPU(s): pairs over four GPUs needs four"):format(cuda.device_count()), 1)
  end
  tune.pairs = false   -- the tree's phases, the default before
  multi("tree phases, on {0, 0, 0, 0}", "int32", {0, 0, 0, 0}, {40000, 1, 30000, 20001}, nil, "int32")
  tune.pairs = pairs0
  tune.items, tune.search, tune.phased = 3, 7, false
  multi("tune: 3 keys a thread, 7 candidates, no phases", "float32", {0, 0, 0}, {20000, 777, 30001}, nil, "uint64", "few")
  tune.items, tune.search, tune.phased = 16, 4096, true
  multi("tune: 16 keys a thread, 4096 candidates", "int64", {0, 0, 0, 0, 0}, {9999, 20000, 1, 0, 30000}, {descending = true}, "int64")
  tune.items, tune.search, tune.phased, tune.direct = saved[1], saved[2], saved[3], saved[4]
  if cuda.device_count() >= 2 then
    cases({0, 1}, "on {0, 1}")
    multi("int64 pairs on {1, 0}", "int64", {1, 0}, {70001, 30002}, nil, "int64")
    multi("uint32 pairs on {0, 1, 1, 0, 0} (direct where peer access is)", "uint32", {0, 1, 1, 0, 0}, {7001, 30002, 5, 999, 12345}, nil, "uint32")
  else
    T.skip("one GPU: the {0, 1} cases need two", 1)
  end
  if cuda.device_count() >= 4 then
    cases({0, 1, 2, 3}, "on {0, 1, 2, 3}")
  else
    T.skip(("%d GPU(s): the {0, 1, 2, 3} cases need four"):format(cuda.device_count()), 1)
  end

  -- refusals with device memory
  local function a(dt, n, d) return cuda.array(dt, n, {device = d or 0}) end
  T.error_like(function () sort({a("uint32", 8), a("float32", 8)}, {devices = {0, 0}}) end,
               "cuda%.catalog%.sort: the parts disagree on the keys' dtype: part 1 has uint32, part 2 has float32", "two dtypes")
  local whole = a("uint32", 100)
  T.error_like(function () sort({whole:view(1, 60), whole:view(50, 51)}, {devices = {0, 0}}) end,
               "part 2 %(device 0%): its arrays overlap part 1's", "overlapping views")
  T.error_like(function () sort({a("uint32", 8), a("uint32", 40)}, {devices = {0, 0}, balance = "even"}) end,
               "part 1 would hold 24 keys afterwards but its arrays hold 8", "too little room for balance = 'even'")
  T.error_like(function () sort({a("int8", 8)}, {devices = {0}}) end,
               "part 1 %(device 0%): keys of dtype int8 are not sorted over devices or ranks",
               "8-bit keys (the one-GPU sort takes them, the sort over parts not), named by part")
  T.error_like(function () sort({a("uint32", 8)}, {a("int32", 9)}, {devices = {0}}) end,
               "part 1 %(device 0%): values has 9 elements but keys has 8", "values of another length")
  T.error_like(function () sort({a("uint32", 8)}, {devices = {0}, counts = {9}}) end,
               "the count of keys must be an integer 0%.%.8", "a count past the array")
  T.error_like(function () sort({a("uint32", 8)}, {devices = {0}, end_bit = 33}) end,
               "part 1 %(device 0%): end_bit must be an integer 1%.%.32, got 33", "the one-GPU sort's option checks")
  if cuda.device_count() >= 2 then
    T.error_like(function () sort({a("uint32", 8), a("uint32", 8)}, {devices = {0, 1}}) end,
                 "part 2 %(device 1%): keys is on device 0", "an array on another device than its part's")
  else
    T.skip("one GPU: an array on the wrong device needs two", 1)
  end
end, "the sorts over devices")

-- }======================================================


-- {====================================================== ranks under mpirun

local function mpi_skip()
  local skip = os.getenv("CULUA_TEST_SKIP_MPI")
  if skip and skip ~= "" then return "MPI tests skipped in this pass: " .. skip end
  local have, why = cuda.mpi.available()
  if not have then return "cuda.mpi not built: " .. tostring(why) end
  local nok, nwhy = cuda.nccl.available()
  if not nok then return "NCCL not available: " .. tostring(nwhy) end
  if cuda.device_count() < 2 then return ("%d GPU(s): NCCL takes a GPU once, two ranks need two"):format(cuda.device_count()) end
end
local mpirun = T.mpirun()
local why = mpi_skip() or (not mpirun and "no mpirun on PATH")

local function script(text)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  f:write(text)
  f:close()
  return name
end

-- every check prints "R name: ok" or "R name: FAIL ..." on rank R
local child = [=[
local cuda = require "cuda"
local mpi, nccl = cuda.mpi, cuda.nccl
local me, np = mpi.rank, mpi.size
local d = me % cuda.device_count()
local id = mpi.bcast(me == 0 and nccl.unique_id() or "")
local comm = nccl.comm(id, np, me, {device = d})
local sort = cuda.catalog.sort
local kbytes = {uint32 = 4, int32 = 4, float32 = 4, uint64 = 8, int64 = 8, float64 = 8}
local function check(name, cond, detail)
  io.write(("%d %s: %s\n"):format(me, name, cond and "ok" or ("FAIL " .. tostring(detail))))
  io.flush()
end
-- every rank makes every rank's keys on the host (the same everywhere), sorts its own
-- with comm, and checks its slice against the one-GPU sort of all of them on its GPU
local function case(name, dt, sizes, opts, vdt, how, caps)
  local N, first = 0, 0
  for r = 1, np do
    if r - 1 < me then first = first + sizes[r] end
    N = N + sizes[r]
  end
  local es = kbytes[dt]
  local bits = es == 4 and cuda.host_array("int32", N):random(N, how == "few" and 0 or -2147483648, how == "few" and 3 or 2147483647)
                       or cuda.host_array("int64", N):random(N, how == "few" and 0 or math.mininteger, how == "few" and 3 or math.maxinteger)
  local hk = cuda.host_array(dt, N):copy_from(bits:bytes())
  local all = hk:bytes()
  local n, cap = sizes[me + 1], caps and caps[me + 1] or sizes[me + 1]
  local k = cuda.array(dt, math.max(cap, 1), {device = d}):view(1, cap):fill(0x5a5a5a5a)
  if n > 0 then k:view(1, n):copy_from(all:sub(first * es + 1, (first + n) * es)) end
  local v
  if vdt then
    v = cuda.array(vdt, math.max(cap, 1), {device = d}):view(1, cap):fill(0x5a5a5a5a)
    if n > 0 then v:view(1, n):copy_from(cuda.host_array(vdt, n):iota(first + 1)) end
  end
  local o = {comm = comm, count = caps and n or nil}
  for key, val in pairs(opts or {}) do o[key] = val end
  local ok, rk, rv, counts = pcall(sort, k, v, o)
  if not ok then return check(name, false, rk) end
  local dk = cuda.array(dt, N, {device = d}):copy_from(hk)
  local dv = vdt and cuda.array(vdt, N, {device = d}):copy_from(cuda.host_array(vdt, N):iota(1))
  sort(dk, dv, {descending = o.descending, begin_bit = o.begin_bit, end_bit = o.end_bit})
  local at = 0
  for r = 1, me do at = at + counts[r] end
  local out = counts[me + 1]
  local want = (o.balance == "even") and (N // np + (me < N % np and 1 or 0)) or n
  local good = out == want and rk == k and rv == v
  if good and out > 0 then
    good = k:view(1, out):copy_to(cuda.host_array(dt, out)):bytes() == dk:view(at + 1, out):copy_to(cuda.host_array(dt, out)):bytes()
    if good and vdt then
      good = v:view(1, out):copy_to(cuda.host_array(vdt, out)):bytes() == dv:view(at + 1, out):copy_to(cuda.host_array(vdt, out)):bytes()
    end
  end
  check(name, good, ("count %d (expected %d), slice at %d differs"):format(out, want, at))
end
local function sizes(base)
  local s = {}
  for r = 1, np do s[r] = (base * (r * 7 + 3)) // 10 + r * 13 end
  return s
end
for _, dt in ipairs{"uint32", "int32", "float32", "uint64", "int64", "float64"} do
  case(dt .. " keys", dt, sizes(30000))
  case(dt .. " pairs, many equal keys", dt, sizes(7000), nil, "int64", "few")
  case(dt .. " descending pairs", dt, sizes(3000), {descending = true}, "uint32")
end
case("uint32 bits 3..17", "uint32", sizes(9000), {begin_bit = 3, end_bit = 17}, "uint32", "few")
case("uint64 keys, 2^21 a rank", "uint64", sizes((1 << 21) * 10 // 17))
local skew, room = {}, {}
for r = 1, np do skew[r] = r == 1 and 40009 or 3 * r; room[r] = 40009 end
case("balance = 'even' from skewed ranks", "int32", skew, {balance = "even"}, "int32", "random", room)
case("on the rank's own stream", "float64", sizes(5000), {stream = cuda.stream{device = d}}, "uint64")

-- refusals: every rank errs, none waits
local function errs(name, f, pattern)
  local ok, err = pcall(f)
  check(name, not ok and tostring(err):find(pattern), err)
end
local function a(dt, n) return cuda.array(dt, n, {device = d}):fill(me) end
errs("ranks that disagree on the dtype", function () sort(a(me == 1 and "float32" or "uint32", 100), {comm = comm}) end,
     "the ranks disagree on the keys' dtype: rank 0 has uint32, rank 1 has float32")
errs("ranks that disagree on descending", function () sort(a("uint32", 100), {comm = comm, descending = me == 0}) end,
     "the ranks disagree on descending")
errs("a rank's bad argument", function () sort(a("uint32", 100), {comm = comm, end_bit = me == 1 and 40 or nil}) end,
     me == 1 and "end_bit must be an integer 1%.%.32, got 40" or "rank 1 refused its arguments")
errs("too little room for balance = 'even'", function () sort(a("uint32", me == 0 and 10 or 1000), {comm = comm, balance = "even"}) end,
     "rank 0 would hold")
case("and a sort after the refusals", "uint32", sizes(1000), nil, "uint32")
comm:close()
io.write(me, " done\n")
]=]

-- a rank that fails in the middle of the call, when the others wait for it in NCCL
local failing = [=[
local cuda = require "cuda"
local mpi, nccl = cuda.mpi, cuda.nccl
local me, np = mpi.rank, mpi.size
local d = me % cuda.device_count()
local comm = nccl.comm(mpi.bcast(me == 0 and nccl.unique_id() or ""), np, me, {device = d})
require("culua.catalog.sort_multi").test_fail = function (part, where) return part == 2 and where == "exchange" end
local k = cuda.array("uint32", 100000, {device = d}):copy_from(cuda.host_array("uint32", 100000):random(me, 0, 1000000))
local ok, err = pcall(cuda.catalog.sort, k, {comm = comm})
print("rank " .. me .. " came back: " .. tostring(err))
]=]

local function ranks(np)
  local launch = ("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " ..
                  "NCCL_NVLS_ENABLE=0 timeout 300 %s -np %d %s "):format(mpirun, np, T.culua)
  local name = script(child)
  local out, status = T.run(launch .. name)
  os.remove(name)
  T.is(status, 0, ("%d ranks ran the checks and exited 0"):format(np))
  local seen, checks = {}, {}
  for rank, cname, verdict in out:gmatch("\n?(%d) ([^\n:]+): ([^\n]+)") do
    if not seen[cname] then checks[#checks + 1] = cname end
    seen[cname] = seen[cname] or {}
    seen[cname][tonumber(rank)] = verdict
  end
  for _, cname in ipairs(checks) do
    local bad = {}
    for r = 0, np - 1 do
      local v = seen[cname][r]
      if v ~= "ok" then bad[#bad + 1] = ("rank %d: %s"):format(r, v or "(said nothing)") end
    end
    T.ok(#bad == 0, ("%d ranks: %s"):format(np, cname), #bad > 0 and ("    " .. table.concat(bad, "\n    ")) or nil)
  end
  T.ok(#checks >= 25, ("%d ranks: %d checks reported (of at least 25)"):format(np, #checks), #checks < 25 and out or nil)
  for r = 0, np - 1 do T.like(out, "\n?" .. r .. " done", ("rank %d of %d finished"):format(r, np)) end

  name = script(failing)
  local t0 = cuda.clock()
  out, status = T.run(launch .. name)
  os.remove(name)
  T.isnt(status, 0, ("%d ranks: a rank failing mid-call fails the job"):format(np))
  T.like(out, "culua: rank 1 of " .. np .. " failed: [^\n]*a failure for the tests", "  naming the rank")
  T.unlike(out, "came back", "  and no rank came back from the call")
  T.ok(cuda.clock() - t0 < 120, ("  nothing hung (%.1f s)"):format(cuda.clock() - t0))
end

if why then
  T.skip("ranks: " .. why, 1)
else
  ranks(2)
  if cuda.device_count() >= 4 then ranks(4) else T.skip(("ranks: %d GPUs: -np 4 needs four"):format(cuda.device_count()), 1) end
end

-- }======================================================

T.done_testing()
