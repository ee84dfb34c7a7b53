-- cuda.catalog.sort over several GPUs (devices = {...}) and ranks (comm = c), without a GPU:
-- lua/catalog/sort_multi*.lua run on a mock of cuda, NCCL and the catalog core. Its kernels
-- (kernels/sort_multi.cu's, transcribed, and the one-GPU sort as a stable sort) are plain
-- Lua; its streams run their work in a random order that keeps only the waits the code asked
-- for, so that a missing wait shows as a wrong result; new scratch memory is poisoned; and
-- its ranks are coroutines that meet in NCCL's collectives, so that a call that would leave
-- a rank waiting in NCCL shows as a hang. Results against a stable sort, in Lua, of the
-- concatenation of the parts. The GPU runs are t/041-sort-multi.t's.
local T = require "culua.tap"
T.mock_file()
local srcdir = os.getenv("CULUA_SRCDIR") or "."

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- {====================================================== streams

-- a stream's work is a queue of steps; a wait is a step that holds the queue until the
-- event's stream ran as far as where it was recorded. The scheduler runs a step of a
-- stream it picks at random among those that can go on.
local seed, policy = 1, "random"
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end
local streams = {}
local sync_stream
local function new_stream(dev)
  local s = {kind = "cuda.stream", device = dev, q = {}, posted = 0, done = 0}
  s.synchronize = function (self) sync_stream(self); return self end
  function s.wait(self, ev)
    assert(ev.kind == "cuda.event", "wait takes an event")
    if ev.stream then
      self.posted = self.posted + 1
      self.q[self.posted] = {on = ev.stream, pos = ev.pos}
    end
    return self
  end
  streams[#streams + 1] = s
  return s
end
local function enqueue(s, fn)
  s.posted = s.posted + 1
  s.q[s.posted] = {fn = fn}
end
local function runnable(s)
  if s.done >= s.posted then return false end
  local op = s.q[s.done + 1]
  return op.fn ~= nil or op.on.done >= op.pos
end
local function drain(until_done)
  while not until_done() do
    local ready = {}
    for _, s in ipairs(streams) do if runnable(s) then ready[#ready + 1] = s end end
    if #ready == 0 then error("mock: the streams wait on each other forever", 0) end
    -- a policy: at random, or the first stream made first (a part's own stream runs as far
    -- as its waits let it), or the last made first (the copies run first)
    local s = policy == "first" and ready[1] or policy == "last" and ready[#ready] or ready[rand(#ready)]
    local op = s.q[s.done + 1]
    s.q[s.done + 1] = nil
    s.done = s.done + 1
    if op.fn then op.fn() end
  end
end
sync_stream = function (s) drain(function () return s.done == s.posted end) end
local function sync_all()
  drain(function ()
    for _, s in ipairs(streams) do if s.done < s.posted then return false end end
    return true
  end)
end

-- }======================================================


-- {====================================================== devices, arrays, events

local sizes = {int8 = 1, uint8 = 1, int16 = 2, uint16 = 2, float16 = 2, bfloat16 = 2, int32 = 4, uint32 = 4,
               float32 = 4, int64 = 8, uint64 = 8, float64 = 8}
local POISON = 0x5a5a5a5a
local NO_PEER = {}
local devices = {}
local current = 0
local cuda = {}
local function device(o)
  o = o or current
  if not devices[o] then
    local d = {ordinal = o, peers = {}}
    d.use = function (self) current = self.ordinal end
    -- NO_PEER[a][b]: device a cannot reach b's memory
    d.can_access_peer = function (self, other) return not (NO_PEER[self.ordinal] and NO_PEER[self.ordinal][other.ordinal]) end
    d.enable_peer_access = function (self, other)
      assert(self ~= other and self:can_access_peer(other), "enable_peer_access where there is none")
      self.peers[other.ordinal] = true
    end
    d.synchronize = function () sync_all() end
    d.default = new_stream(d)
    devices[o] = d
  end
  return devices[o]
end
local Arr = {}
local arr_mt = {__index = Arr, __len = function (a) return a.n end}
local next_base = 1 << 40
local live = 0
local function newarr(dt, n, dev)
  assert(sizes[dt], "dtype " .. tostring(dt))
  local a = setmetatable({kind = "cuda.array", dtype = dt, n = n, data = {}, off = 0, device = dev, base = next_base,
                          pitched = false}, arr_mt)
  next_base = next_base + (1 << 40)
  live = live + 1
  return a
end
function Arr:view(first, count)
  count = count or self.n - first + 1
  assert(math.type(first) == "integer" and math.type(count) == "integer", "view takes integers")
  assert(first >= 1 and count >= 0 and first - 1 + count <= self.n and first <= self.n + (count == 0 and 1 or 0),
         ("view(%d, %d) of %d elements"):format(first, count, self.n))
  return setmetatable({kind = "cuda.array", dtype = self.dtype, n = count, data = self.data, off = self.off + first - 1,
                       device = self.device, base = self.base, pitched = false}, arr_mt)
end
local function elems(src)   -- a copy's source, read when the copy runs: a function i -> element
  if type(src) == "table" and src.kind == nil then
    local snap = {}
    for i = 1, #src do snap[i - 1] = src[i] end
    return snap, #src, nil
  end
  return nil, src.n, src.dtype
end
local function copy_now(dst, src)
  local snap, n, dt = elems(src)
  assert(not dt or dt == dst.dtype, ("copy: dtype mismatch (%s and %s); copies do not convert"):format(dst.dtype, tostring(dt)))
  assert(n <= dst.n, ("copy: %d elements do not fit in %d"):format(n, dst.n))
  return function ()
    for i = 0, n - 1 do
      local v
      if snap then v = snap[i] else v = src.data[src.off + i] end
      dst.data[dst.off + i] = v
    end
  end, snap
end
function Arr:copy_from(src, s)
  assert(not self.closed, "closed array")
  local fn = copy_now(self, src)
  if s then enqueue(s, fn) else sync_all(); fn() end
  return self
end
function Arr:copy_to(dst, s)
  local fn = copy_now(dst, self)
  if s then enqueue(s, fn) else sync_all(); fn() end
  return dst
end
function Arr:fill(v, s)
  local fn = function () for i = 0, self.n - 1 do self.data[self.off + i] = v end end
  if s then enqueue(s, fn) else sync_all(); fn() end
  return self
end
function Arr:close() self.closed = true; live = live - 1 end
function Arr:get(i) return self.data[self.off + i - 1] end

local Host = {}
function Host.totable(h)
  local t = {}
  for i = 1, h.n do t[i] = rawget(h, "data")[i - 1] or 0 end
  return t
end
-- a host array's copy from a list or another host array of its dtype, no longer than it
function Host.copy_from(h, src)
  local list = not src.kind
  assert(list or (src.kind == "cuda.host_array" and src.dtype == h.dtype), "host copy_from: a list or a host array of its dtype")
  local n = list and #src or src.n
  assert(n <= h.n, "host copy_from: too long")
  for i = 1, n do rawget(h, "data")[i - 1] = list and src[i] or rawget(src, "data")[i - 1] end
  return h
end
local function host_array(dt, n)
  local h = {kind = "cuda.host_array", dtype = dt, n = n, data = {}, off = 0}
  return setmetatable(h, {__len = function () return n end,
    __index = function (t, k)
      if math.type(k) == "integer" then
        assert(k >= 1 and k <= n, "host index " .. k)
        return rawget(t, "data")[k - 1] or 0
      end
      return Host[k]
    end,
    __newindex = function (t, k, v) rawget(t, "data")[k - 1] = v end})
end

local function new_event()
  local e = {kind = "cuda.event", device = device()}
  e.record = function (self, s)
    s = s or self.device.default
    self.stream, self.pos = s, s.posted
    return self
  end
  e.synchronize = function (self) sync_all() end
  -- timing events (tune.timeline): the mock has no clock, only the order of the work
  e.elapsed = function (self, e1)
    sync_all()
    return 0.0
  end
  return e
end

cuda.device = device
cuda.device_count = function () return 8 end
cuda.clock = os.clock
cuda.array = function (dt, n, opts) return newarr(dt, n, device(opts and opts.device)) end
cuda.host_array = function (dt, n) return host_array(dt, n) end
cuda.stream = function (o) return new_stream(device(o and o.device)) end
cuda.event = function () return new_event() end
cuda.type = function (x) return type(x) == "table" and x.kind or nil end

-- }======================================================


-- {====================================================== order keys and the kernels

-- the bits of a mock element: integers hold their value (16-bit floats their bits), floats
-- are Lua floats
local function bits_of(w, v)
  if math.type(v) == "float" then
    if w == 32 then return (string.unpack("<I4", string.pack("<f", v))) end
    return (string.unpack("<i8", string.pack("<d", v)))
  end
  assert(math.type(v) == "integer", "a key that is no number: " .. tostring(v))
  return w == 64 and v or v & ((1 << w) - 1)
end
local EXPMAX = {[32] = 0x7f800000, [64] = 0x7ff0000000000000}
-- kernels/sort_multi.cu's order key (with <culua/sort.cuh>'s to_radix)
local function okey(v, w, kind, desc, shift, mask, inf16)
  local b = bits_of(w, v)
  local all = w == 64 and -1 or (1 << w) - 1
  local sign = 1 << (w - 1)
  local r
  if kind == 2 and math.ult(EXPMAX[w] or inf16, b & ~sign & all) then
    r = all
  else
    if kind == 2 then r = (b & sign ~= 0) and (~b & all) or (b ~ sign)
    elseif kind == 1 then r = b ~ sign
    else r = b end
    if desc then r = ~r & all end
  end
  return (r >> shift) & mask
end
local function ult(a, b) return math.ult(a, b) end

-- the mock kernel file's shape: a tile of 4 x 3 keys, so that small sorts have many tiles
local KSRC = slurp(srcdir .. "/kernels/sort_multi.cu")
  :gsub("#define SORTM_THREADS 256", "#define SORTM_THREADS 4")
  :gsub("#define SORTM_ITEMS 12", "#define SORTM_ITEMS 3")
local MT, MI = 4, 3
local CUR_MI = MI   -- the keys a thread of the merge kernel running (NVRTC's variants: other counts)

-- a key of a kernel's width w (bits) at i of an array: 16-bit keys in a uint8 array take
-- two elements (the second a pad)
local PAD = "pad"
local function kget(x, i, w)
  if x.dtype == "uint8" and w > 8 then
    local v = x.data[x.off + i * (w // 8)]
    assert(x.data[x.off + i * (w // 8) + 1] == PAD, "a key read across its bytes")
    return v
  end
  return x.data[x.off + i]
end
local function kset(x, i, w, v)
  if x.dtype == "uint8" and w > 8 then
    x.data[x.off + i * (w // 8)] = v
    for j = 1, w // 8 - 1 do x.data[x.off + i * (w // 8) + j] = PAD end
  else
    x.data[x.off + i] = v
  end
end

local launches = {}
local KERNELS = {}
local function order(w, kind, flags, shift, mask, inf16)
  return function (v) return okey(v, w, kind, flags & 16 ~= 0, shift, mask, inf16) end
end
local function bound(keys, n, c, upper, ok, w)
  local lo, hi = 0, n
  while lo < hi do
    local mid = (lo + hi) // 2
    local d = ok(kget(keys, mid, w))
    if (upper and not ult(c, d)) or (not upper and ult(d, c)) then lo = mid + 1 else hi = mid end
  end
  return lo
end
KERNELS.bounds = function (w, keys, n, cand, count, out, both, kind, flags, shift, mask, inf16)
  local ok = order(w, kind, flags, shift, mask, inf16)
  for i = 0, count - 1 do
    local c = cand.data[cand.off + i]
    out.data[out.off + i] = bound(keys, n, c, false, ok, w)
    if both == 1 then out.data[out.off + count + i] = bound(keys, n, c, true, ok, w) end
  end
end
KERNELS.ends = function (w, keys, n, out, kind, flags, shift, mask, inf16)
  local ok = order(w, kind, flags, shift, mask, inf16)
  assert(n >= 1)
  out.data[out.off] = ok(kget(keys, 0, w))
  out.data[out.off + 1] = ok(kget(keys, n - 1, w))
end
KERNELS.corank = function (w, a, na, b, nb, co, tiles, kind, flags, shift, mask, inf16)
  local ok = order(w, kind, flags, shift, mask, inf16)
  for t = 0, tiles do
    local diag = math.min(t * MT * CUR_MI, na + nb)
    local lo, hi = diag > nb and diag - nb or 0, math.min(diag, na)
    while lo < hi do
      local mid = (lo + hi) // 2
      if not ult(ok(kget(b, diag - 1 - mid, w)), ok(kget(a, mid, w))) then lo = mid + 1 else hi = mid end
    end
    co.data[co.off + t] = lo
  end
end
-- the merge kernel as kernels/sort_multi.cu writes it, a block a tile and a thread a stretch
local function merge_tiles(w, a, na, b, nb, va, vb, out, vout, co, kind, flags, shift, mask, inf16)
  local ok = order(w, kind, flags, shift, mask, inf16)
  local total = na + nb
  local MI, MTILE = CUR_MI, MT * CUR_MI
  for tile = 0, (total + MTILE - 1) // MTILE - 1 do
    local k0 = tile * MTILE
    local k1 = math.min(k0 + MTILE, total)
    local a0, a1 = co.data[co.off + tile], co.data[co.off + tile + 1]
    local b0 = k0 - a0
    local la, len = a1 - a0, k1 - k0
    local lb = len - la
    assert(la >= 0 and lb >= 0 and a0 + la <= na and b0 + lb <= nb, "a tile's co-ranks")
    local sk = {}
    for i = 0, len - 1 do sk[i] = i < la and kget(a, a0 + i, w) or kget(b, b0 + i - la, w) end
    local rk, rs = {}, {}
    for th = 0, MT - 1 do
      local d = th * MI
      if d < len then
        local lo, hi = d > lb and d - lb or 0, math.min(d, la)
        while lo < hi do
          local mid = (lo + hi) // 2
          if not ult(ok(sk[la + d - 1 - mid]), ok(sk[mid])) then lo = mid + 1 else hi = mid end
        end
        local ia, ib = lo, d - lo
        for t = 0, MI - 1 do
          if d + t < len then
            local from_a = ib >= lb or (ia < la and not ult(ok(sk[la + ib]), ok(sk[ia])))
            local s = from_a and ia or la + ib
            rk[d + t], rs[d + t] = sk[s], s
            if from_a then ia = ia + 1 else ib = ib + 1 end
          end
        end
      end
    end
    for i = 0, len - 1 do
      kset(out, k0 + i, w, rk[i])
      if vout then
        local s = rs[i]
        vout.data[vout.off + k0 + i] = s < la and va.data[va.off + a0 + s] or vb.data[vb.off + b0 + s - la]
      end
    end
  end
end
KERNELS.merge_keys = function (w, a, na, b, nb, out, co, ...) return merge_tiles(w, a, na, b, nb, nil, nil, out, nil, co, ...) end
KERNELS.merge_pairs = function (w, ...) return merge_tiles(w, ...) end
-- n bytes, between arrays of any dtypes (the 16-bit keys into bytes over ranks; a piece
-- pulled with tune.pull), inside both
KERNELS.copy = function (_, src, dst, n)
  assert(n <= src.n * sizes[src.dtype] and n <= dst.n * sizes[dst.dtype], "copy: bytes inside both arrays")
  local function get(x, i)
    if x.dtype == "uint8" then return x.data[x.off + i] end
    local es = sizes[x.dtype]
    return i % es == 0 and x.data[x.off + i // es] or PAD
  end
  for i = 0, n - 1 do
    local v = get(src, i)
    if dst.dtype == "uint8" then dst.data[dst.off + i] = v
    elseif i % sizes[dst.dtype] == 0 then dst.data[dst.off + i // sizes[dst.dtype]] = v end
  end
end

-- each kernel's parameters: p a pointer (an array of the launch's device), the others integers
local SIG = {
  bounds = "p u64 p u32 p u32 s32 s32 s32 u64 u32", ends = "p u64 p s32 s32 s32 u64 u32",
  corank = "p u64 p u64 p u64 s32 s32 s32 u64 u32", merge_keys = "p u64 p u64 p p s32 s32 s32 u64 u32",
  merge_pairs = "p u64 p u64 p p p p p s32 s32 s32 u64 u32", copy = "p p u64"}
local function kernel(file, name, defines, dev)
  assert(file == "sort_multi", "a kernel of " .. file)
  local mi = MI
  if defines then
    -- an NVRTC variant: its keys a thread, and the name that says so
    assert(#defines == 2 and defines[1]:match("^SORTM_ITEMS=%d+$") and defines[2]:match("^SORTM_V=_i%d+$"), "the defines")
    mi = tonumber(defines[1]:match("%d+"))
    local v = defines[2]:sub(#"SORTM_V=" + 1)
    assert(v == "_i" .. mi and name:sub(-#v) == v, name .. ": a variant's name")
    assert(name:match("^culua_sortm_corank") or name:match("^culua_sortm_merge"), "only the merges vary")
    name = name:gsub("_i%d+$", "")
  end
  local stem, wname = name:match("^culua_sortm_(%a+)_?(u?%d*)")
  assert(KSRC:find("culua_sortm_" .. stem, 1, true), name .. " is not in kernels/sort_multi.cu")
  local w = wname ~= "" and tonumber(wname:sub(2)) or nil
  local kname = stem
  if stem == "merge" then
    kname = name:match("_keys$") and "merge_keys" or "merge_pairs"
    local v = name:match("_u%d+_(u%d+)$")
    assert(not v or KSRC:find("SORTM_PAIRS(" .. wname .. ", " .. wname .. ", " .. v .. ",", 1, true), name .. ": no such instance")
  end
  if w then assert(KSRC:find("SORTM_KEYS(" .. wname .. ",", 1, true), name .. ": no such width") end
  local f = assert(KERNELS[kname], "no mock kernel " .. name)
  local sig = {}
  for t in SIG[kname]:gmatch("%S+") do sig[#sig + 1] = t end
  return {launch = function (self, cfg, ...)
    local args = table.pack(...)
    assert(args.n == #sig, ("%s: %d arguments for %d parameters"):format(name, args.n, #sig))
    for i, t in ipairs(sig) do
      local a = args[i]
      if t == "p" then
        assert(type(a) == "table" and a.kind == "cuda.array", ("%s: argument %d is no array"):format(name, i))
        assert(a.device == dev or dev.peers[a.device.ordinal],
               ("%s: argument %d is on device %d, the launch on %d without peer access"):format(name, i, a.device.ordinal, dev.ordinal))
        assert(not a.closed, name .. ": a closed array")
      else
        assert(math.type(a) == "integer", ("%s: argument %d must be an integer, got %s"):format(name, i, tostring(a)))
        local bits = tonumber(t:sub(2))
        if bits < 64 then assert(a >= -(1 << (bits - 1)) and a < (1 << bits), ("%s: argument %d out of range"):format(name, i)) end
      end
    end
    assert(cfg.grid >= 1 and cfg.block >= 1, name .. ": an empty launch")
    launches[kname] = (launches[kname] or 0) + 1
    enqueue(cfg.stream or dev.default, function () CUR_MI = mi; f(w, table.unpack(args, 1, args.n)) end)
  end}
end

-- }======================================================


-- {====================================================== the one-GPU sort and the core

local SORT_DTYPES = {"uint32", "int32", "float32", "uint64", "int64", "float64"}
local KIND = {uint32 = 0, int32 = 1, float32 = 2, uint64 = 0, int64 = 1, float64 = 2, uint16 = 0, float16 = 2}
local INF16 = {float16 = 0x7c00}
local function qnan(dt)
  if dt == "float32" then return (string.unpack("<f", string.pack("<I4", 0x7fc00000))) end
  if dt == "float64" then return (string.unpack("<d", string.pack("<i8", 0x7ff8000000000000))) end
  if dt == "float16" then return 0x7e00 end
end
local function is_nan(dt, v)
  local w = 8 * sizes[dt]
  return KIND[dt] == 2 and math.ult(EXPMAX[w] or INF16[dt], bits_of(w, v) & ~(1 << (w - 1)) & ((w == 64) and -1 or (1 << w) - 1))
end

-- a stable sort of keys (and values) in Lua by the one-GPU sort's order; NaNs canonical
local function stable(keys, vals, dt, desc, b0, b1)
  local w = 8 * sizes[dt]
  local width = b1 - b0
  local mask = width == 64 and -1 or (1 << width) - 1
  local idx, ok = {}, {}
  for i = 1, #keys do idx[i] = i; ok[i] = okey(keys[i], w, KIND[dt], desc, b0, mask, INF16[dt]) end
  table.sort(idx, function (x, y)
    if ok[x] ~= ok[y] then return math.ult(ok[x], ok[y]) end
    return x < y
  end)
  local k, v = {}, {}
  for i, j in ipairs(idx) do
    k[i] = is_nan(dt, keys[j]) and qnan(dt) or keys[j]
    v[i] = vals and vals[j]
  end
  return k, v
end

local sort1 = {info = {key_dtypes = SORT_DTYPES}}
function sort1.sort(keys, values, opts)
  local function fail(fmt, ...) error(("cuda.catalog.sort: " .. fmt):format(...), 0) end
  local dt = keys.dtype
  local allowed = false
  for _, d in ipairs(SORT_DTYPES) do allowed = allowed or d == dt end
  if not allowed then fail("keys has dtype %s; expected one of %s", dt, table.concat(SORT_DTYPES, ", ")) end
  if values then
    if not ({int32 = 1, uint32 = 1, float32 = 1, int64 = 1, uint64 = 1, float64 = 1})[values.dtype] then
      fail("values has dtype %s; expected a 4- or 8-byte dtype", values.dtype)
    end
    if values.n ~= keys.n then fail("values has %d elements but keys has %d", values.n, keys.n) end
  end
  local width = 8 * sizes[dt]
  if opts.descending ~= nil and type(opts.descending) ~= "boolean" then fail("descending must be a boolean, got %s", type(opts.descending)) end
  local b0, b1 = opts.begin_bit or 0, opts.end_bit or width
  if math.type(b0) ~= "integer" or b0 < 0 or b0 >= width then fail("begin_bit must be an integer 0..%d, got %s", width - 1, tostring(b0)) end
  if math.type(b1) ~= "integer" or b1 < 1 or b1 > width then fail("end_bit must be an integer 1..%d, got %s", width, tostring(b1)) end
  if b0 >= b1 then fail("begin_bit (%d) must be less than end_bit (%d)", b0, b1) end
  if opts.stream then assert(opts.stream.device == keys.device, "the stream's device") end
  if keys.n == 0 then return keys, values end
  launches.sort = (launches.sort or 0) + 1
  enqueue(opts.stream or keys.device.default, function ()
    local k, v = {}, {}
    for i = 1, keys.n do k[i] = keys:get(i); v[i] = values and values:get(i) end
    k, v = stable(k, values and v, dt, opts.descending == true, b0, b1)
    for i = 1, keys.n do
      keys.data[keys.off + i - 1] = k[i]
      if values then values.data[values.off + i - 1] = v[i] end
    end
  end)
  return keys, values
end

local core = {}
function core.fail(fname, fmt, ...) error(("cuda.catalog.%s: " .. fmt):format(fname, ...), 0) end
function core.ceil_div(a, b) return (a + b - 1) // b end
function core.one_of(fname, what, v, allowed)
  for _, a in ipairs(allowed) do if a == v then return v end end
  core.fail(fname, "%s must be one of %s, got %s", what, table.concat(allowed, ", "), tostring(v))
end
function core.options(fname, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then core.fail(fname, "opts must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    local found = false
    for _, n in ipairs(known) do found = found or n == k end
    if not found then core.fail(fname, "unknown option '%s' (known: %s)", tostring(k), table.concat(known, ", ")) end
  end
  return opts
end
function core.open_dtype(fname, what, x)
  if type(x) ~= "table" or x.kind ~= "cuda.array" then
    core.fail(fname, "%s must be a cuda.array, got %s", what, type(x) == "table" and x.kind or type(x))
  end
  if x.closed then core.fail(fname, "%s is closed", what) end
  return x.dtype, x.n, x.device, x.base + x.off * sizes[x.dtype]
end
function core.check_stream(fname, s, dev)
  if s == nil then return nil end
  if type(s) ~= "table" or s.kind ~= "cuda.stream" then core.fail(fname, "stream must be a cuda.stream, got %s", type(s)) end
  if s.device ~= dev then core.fail(fname, "stream is on device %d but the arrays are on device %d", s.device.ordinal, dev.ordinal) end
  return s
end
function core.sm_count() return 4 end
local scratch_kinds, scratch = {}, {}
function core.scratch_kind(name, dtype) scratch_kinds[name] = scratch_kinds[name] or dtype end
function core.scratch(kind, dev, stream, n)
  local dt = assert(scratch_kinds[kind], "no scratch kind " .. kind)
  local key = kind .. "@" .. tostring(stream or dev)
  local w = scratch[key]
  if not w or w.n < n then
    w = newarr(dt, n + 7, dev)   -- larger than asked, as the core's may be
    for i = 0, w.n - 1 do w.data[i] = POISON end
    scratch[key] = w
  end
  return w
end
local states = {}
function core.device_state(key, dev)
  states[dev] = states[dev] or {}
  states[dev][key] = states[dev][key] or {}
  return states[dev][key]
end
core.kernel = kernel
cuda._catalog = {
  families = function () return {"sort", "sort_multi"} end,
  source = function (file)
    if file == "sort_multi" then return KSRC end
    return slurp(srcdir .. "/kernels/" .. file .. ".cu")
  end,
  headers = function () return {["culua/sort.cuh"] = slurp(srcdir .. "/kernels/culua/sort.cuh")} end,
}
local real_core = assert(loadfile(srcdir .. "/lua/catalog/core.lua", "t",
                                  setmetatable({require = function () return cuda end}, {__index = _G})))()
core.constants, core.event_on, core.dtype_bytes = real_core.constants, real_core.event_on, real_core.dtype_bytes

-- }======================================================


-- {====================================================== NCCL over coroutines

-- the ranks of a job: each a coroutine; a collective or a group of sends and receives
-- yields until its peers reach theirs. Nothing to run while some rank waits: a hang.
local job
local registry = {}
local ABORT = {}
registry["culua.fatal"] = function (msg)
  if job.size > 1 then
    job.aborted = ("culua: rank %d of %d failed: %s"):format(job.current, job.size, msg)
    error(ABORT, 0)
  end
end
local nccl_dtypes = {int8 = 1, uint8 = 1, int32 = 1, uint32 = 1, int64 = 1, uint64 = 1, float32 = 1, float64 = 1}
local Comm = {}
Comm.__index = Comm
local function op_array(c, x, fname)
  assert(type(x) == "table" and x.kind == "cuda.array", fname .. ": no array")
  assert(x.device == c.device, ("%s: an array of device %d on the comm of device %d"):format(fname, x.device.ordinal, c.device.ordinal))
  assert(nccl_dtypes[x.dtype], fname .. ": NCCL has no " .. x.dtype)
  return x
end
local function meet(op)
  if op.stream then sync_stream(op.stream) end
  op.rank = job.current
  coroutine.yield(op)
end
function Comm:all_gather(send, recv, o)
  op_array(self, send, "all_gather"); op_array(self, recv, "all_gather")
  assert(recv.n == send.n * self.size, "all_gather: recv must hold size x send")
  meet{kind = "all_gather", send = send, recv = recv, stream = o.stream}
  return self
end
function Comm:all_reduce(send, recv, o)
  if o == nil and type(recv) == "table" and recv.kind == nil then recv, o = nil, recv end
  recv = recv or send
  op_array(self, send, "all_reduce")
  assert(o.op == "sum", "all_reduce: sums only here")
  meet{kind = "all_reduce", send = send, recv = recv, stream = o.stream}
  return self
end
function Comm:send(buf, peer, o)
  op_array(self, buf, "send")
  assert(peer >= 0 and peer < self.size and peer ~= self.rank, "send: a peer")
  assert(job.group, "send outside a group")
  job.group[#job.group + 1] = {send = true, buf = buf, peer = peer + 1, stream = o.stream}
  return self
end
function Comm:recv(buf, peer, o)
  op_array(self, buf, "recv")
  assert(peer >= 0 and peer < self.size and peer ~= self.rank, "recv: a peer")
  assert(job.group, "recv outside a group")
  job.group[#job.group + 1] = {send = false, buf = buf, peer = peer + 1, stream = o.stream}
  return self
end
cuda.nccl = {
  group = function (fn)
    assert(not job.group, "groups do not nest here")
    job.group = {}
    local ok, err = pcall(fn)
    local ops = job.group
    job.group = nil
    if not ok then error(err, 0) end
    if #ops > 0 then
      for _, op in ipairs(ops) do sync_stream(op.stream) end
      meet{kind = "p2p", ops = ops}
    end
  end,
}

-- run body(rank, comm) on `size` ranks (rank r on device r): each rank's result ({ok, ...}
-- or {false, err}), and the job's end: "done", "hang: ..." or "aborted"
local function run_job(size, body)
  job = {size = size, cos = {}, wait = {}, results = {}}
  for r = 1, size do
    local c = setmetatable({rank = r - 1, size = size, device = device(r - 1), kind = "cuda.nccl.comm", closed = false}, Comm)
    job.cos[r] = coroutine.create(function () return table.pack(pcall(body, r - 1, c)) end)
  end
  local function resume(r, ...)
    job.current = r - 1
    local ok, res = coroutine.resume(job.cos[r], ...)
    if not ok then
      if res == ABORT then job.results[r] = {false, "aborted"} return end
      error(res, 0)
    end
    if coroutine.status(job.cos[r]) == "dead" then job.results[r] = res
    else job.wait[r] = res end
  end
  for r = 1, size do resume(r) end
  while true do
    if job.aborted then return "aborted" end
    local waiting, finished = {}, 0
    for r = 1, size do
      if job.wait[r] then waiting[#waiting + 1] = r elseif job.results[r] then finished = finished + 1 end
    end
    if #waiting == 0 then return "done" end
    local moved = false
    -- a collective: every rank at one, the same one
    local coll = true
    for r = 1, size do coll = coll and job.wait[r] ~= nil and job.wait[r].kind ~= "p2p" end
    if coll then
      local kind = job.wait[1].kind
      for r = 2, size do
        if job.wait[r].kind ~= kind or job.wait[r].send.n ~= job.wait[1].send.n then
          return ("hang: rank 0 at %s of %d, rank %d at %s of %d"):format(kind, job.wait[1].send.n, r - 1,
                 job.wait[r].kind, job.wait[r].send.n)
        end
      end
      local W = job.wait[1].send.n
      if kind == "all_gather" then
        for r = 1, size do
          local recv = job.wait[r].recv
          for q = 1, size do
            local s = job.wait[q].send
            for i = 0, W - 1 do recv.data[recv.off + (q - 1) * W + i] = s.data[s.off + i] end
          end
        end
      else
        local sums = {}
        for i = 0, W - 1 do
          local sum = 0
          for q = 1, size do local s = job.wait[q].send; sum = sum + s.data[s.off + i] end
          sums[i] = sum
        end
        for r = 1, size do
          local recv = job.wait[r].recv
          for i = 0, W - 1 do recv.data[recv.off + i] = sums[i] end
        end
      end
      local ws = job.wait
      job.wait = {}
      for r = 1, size do if ws[r] then resume(r) end end
      moved = true
    else
      -- groups of sends and receives: a group is done when each of its operations meets
      -- its peer's in the peer's waiting group, in order, of one length
      local function ops_to(r, q, send)
        local l = {}
        local w = job.wait[r]
        if w and w.kind == "p2p" then
          for _, op in ipairs(w.ops) do if op.send == send and op.peer == q then l[#l + 1] = op end end
        end
        return l
      end
      local done = {}
      for _, r in ipairs(waiting) do
        local w = job.wait[r]
        if w.kind == "p2p" then
          local ok = true
          for _, op in ipairs(w.ops) do
            local mine, theirs = ops_to(r, op.peer, op.send), ops_to(op.peer, r, not op.send)
            if #mine ~= #theirs then ok = false end
          end
          if ok then done[#done + 1] = r end
        end
      end
      for _, r in ipairs(done) do
        for q = 1, size do
          local sends, recvs = ops_to(q, r, true), ops_to(r, q, false)
          for i, rv in ipairs(recvs) do
            local sd = sends[i]
            assert(sd.buf.n == rv.buf.n and sd.buf.dtype == rv.buf.dtype,
                   ("send of %d %s from rank %d, recv of %d %s at rank %d"):format(sd.buf.n, sd.buf.dtype, q - 1, rv.buf.n, rv.buf.dtype, r - 1))
            for j = 0, rv.buf.n - 1 do rv.buf.data[rv.buf.off + j] = sd.buf.data[sd.buf.off + j] end
          end
        end
      end
      for _, r in ipairs(done) do job.wait[r] = nil end
      for _, r in ipairs(done) do resume(r) end
      moved = #done > 0
    end
    if not moved then
      local at = {}
      for r = 1, size do
        at[#at + 1] = ("rank %d %s"):format(r - 1, job.wait[r] and ("waits in " .. job.wait[r].kind) or "has ended")
      end
      return "hang: " .. table.concat(at, ", ")
    end
  end
end

-- }======================================================


-- {====================================================== the modules, on the mocks

local mods = {cuda = cuda, ["culua.catalog.core"] = core, ["culua.catalog.sort"] = sort1}
local env
local function mock_require(m)
  if mods[m] == nil then
    local part = assert(m:match("^culua%.catalog%.([%w_]+)$"), m)
    mods[m] = assert(loadfile(srcdir .. "/lua/catalog/" .. part .. ".lua", "t", env))()
  end
  return mods[m]
end
env = setmetatable({require = mock_require, debug = {getregistry = function () return registry end}}, {__index = _G})
local M = mock_require("culua.catalog.sort_multi")
local run_mod = mock_require("culua.catalog.sort_multi_run")

-- }======================================================


-- {====================================================== cases

local rng = 12345
local function rnd(n)
  rng = (rng * 6364136223846793005 + 1442695040888963407)
  return ((rng >> 33) % n)
end
local F32 = {0.0, -0.0, 1.5, -1.5, 2.0, -2.0, 0.25, 1 / 0, -1 / 0, 0 / 0, 100.0, -100.0}
-- n keys of dtype dt, from a small set (many equal keys) or spread out
local function gen_keys(dt, n, few)
  local t = {}
  for i = 1, n do
    local v
    if dt == "float32" or dt == "float64" then
      v = F32[rnd(few and 4 or #F32) + 1]
      if not few and rnd(3) == 0 then v = (rnd(2000) - 1000) / 8 end
    elseif dt == "uint64" or dt == "int64" then
      v = few and rnd(5) - 2 or ((rnd(1 << 30) << 34) ~ rnd(1 << 30))
    elseif dt == "int32" then
      v = few and rnd(5) - 2 or rnd(1 << 31) - (1 << 30)
    elseif dt == "float16" then
      v = ({0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e01, 0x4000})[rnd(few and 3 or 8) + 1]
    elseif dt == "uint16" then
      v = few and rnd(4) or rnd(65536)
    else
      v = few and rnd(6) or rnd(1 << 32)
    end
    t[i] = v
  end
  return t
end
local function same(dt, a, b)
  if a == nil or b == nil then return a == b end
  if math.type(a) == "float" or math.type(b) == "float" then
    return bits_of(8 * sizes[dt], a) == bits_of(8 * sizes[dt], b)
  end
  return a == b
end

-- case: {P, dt, vdt, sizes (keys each part sorts), caps (arrays' lengths), devs, opts, few}
-- over devices (a call) or over ranks (a job): the parts' arrays against the reference
local function check(name, c, ranks)
  local P = #c.sizes
  local inkeys, invals, all_k, all_v = {}, {}, {}, {}
  for r = 1, P do
    inkeys[r] = gen_keys(c.dt, c.sizes[r], c.few)
    invals[r] = {}
    for i = 1, c.sizes[r] do
      all_k[#all_k + 1] = inkeys[r][i]
      invals[r][i] = #all_k
      all_v[#all_v + 1] = #all_k
    end
  end
  local o = c.opts or {}
  local want_k, want_v = stable(all_k, all_v, c.dt, o.descending == true, o.begin_bit or 0, o.end_bit or 8 * sizes[c.dt])
  local outs = {}
  local N = #all_k
  for r = 1, P do outs[r] = o.balance == "even" and (N // P + (r <= N % P and 1 or 0)) or c.sizes[r] end
  local function make(r, devo)
    local cap = c.caps and c.caps[r] or c.sizes[r]
    local k = cuda.array(c.dt, cap, {device = devo})
    local v = c.vdt and cuda.array(c.vdt, cap, {device = devo})
    for i = 0, cap - 1 do k.data[i] = inkeys[r][i + 1] or 0; if v then v.data[i] = invals[r][i + 1] or -1 end end
    return k, v
  end
  local function verify(r, k, v, counts)
    local bad
    if counts[r] ~= outs[r] then bad = ("counts[%d] = %s, want %d"):format(r, tostring(counts[r]), outs[r]) end
    local first = 0
    for q = 1, r - 1 do first = first + outs[q] end
    for i = 1, outs[r] do
      if bad then break end
      local gk, gv = k.data[k.off + i - 1], v and v.data[v.off + i - 1]
      if not same(c.dt, gk, want_k[first + i]) then
        bad = ("part %d key %d: %s, want %s"):format(r, i, tostring(gk), tostring(want_k[first + i]))
      elseif v and gv ~= want_v[first + i] then
        bad = ("part %d value %d: %s, want %s (stability)"):format(r, i, tostring(gv), tostring(want_v[first + i]))
      end
    end
    return bad
  end
  if not ranks then
    local ks, vs, devs = {}, c.vdt and {} or nil, {}
    for r = 1, P do
      devs[r] = c.devs and c.devs[r] or 0
      local kr, vr = make(r, devs[r])
      ks[r] = kr
      if vs then vs[r] = vr end
    end
    local opts = {devices = devs}
    for k, v in pairs(o) do opts[k] = v end
    if c.caps then opts.counts = c.sizes end
    local ok, rk, rv, counts = pcall(M.sort, ks, vs, opts)
    if not ok then T.ok(false, name, "    " .. tostring(rk)); return end
    sync_all()
    local bad
    for r = 1, P do bad = bad or verify(r, ks[r], vs and vs[r], counts) end
    T.ok(not bad and rk == ks and rv == vs, name, bad and "    " .. bad or nil)
    return
  end
  local got = {}
  local how = run_job(P, function (rank, comm)
    local r = rank + 1
    local k, v = make(r, rank)
    local opts = {comm = comm}
    for key, val in pairs(o) do opts[key] = val end
    if c.caps then opts.count = c.sizes[r] end
    local _, _, counts = M.sort(k, v, opts)
    sync_all()
    got[r] = {k, v, counts}
  end)
  local bad = how ~= "done" and how or nil
  for r = 1, P do
    if bad then break end
    local res = job.results[r]
    if not res[1] then bad = ("rank %d: %s"):format(r - 1, tostring(res[2])); break end
    bad = verify(r, got[r][1], got[r][2], got[r][3])
  end
  T.ok(not bad, name, bad and "    " .. bad or nil)
end

-- }======================================================


for _, s in ipairs{1, 7, 99, 3} do
  seed, policy = s, s == 7 and "first" or s == 99 and "last" or "random"
  local tag = (" (streams run %s%s)"):format(policy, policy == "random" and " " .. s or "")
  check("one part, uint32" .. tag, {dt = "uint32", sizes = {40}})
  check("two shares of a device, uint32 keys" .. tag, {dt = "uint32", sizes = {37, 50}, devs = {0, 0}})
  check("four shares, uint32 pairs with many equal keys: stable" .. tag, {dt = "uint32", vdt = "int32", sizes = {30, 1, 45, 29}, devs = {0, 0, 0, 0}, few = true})
  check("three devices, int32 pairs, one part empty" .. tag, {dt = "int32", vdt = "int64", sizes = {26, 0, 41}, devs = {0, 1, 2}})
  check("five devices, float32 with -0.0, inf and NaN, descending" .. tag, {dt = "float32", vdt = "float32", sizes = {13, 20, 7, 31, 18}, devs = {0, 1, 2, 3, 4}, opts = {descending = true}})
  check("eight parts, float64 keys" .. tag, {dt = "float64", sizes = {9, 14, 3, 20, 11, 5, 17, 8}, devs = {0, 1, 2, 3, 0, 1, 2, 3}})
  check("uint64 keys of every bit, bits 5..61" .. tag, {dt = "uint64", vdt = "uint64", sizes = {33, 28, 35}, devs = {0, 1, 0}, opts = {begin_bit = 5, end_bit = 61}})
  check("int64 keys, many equal, descending bits 0..3" .. tag, {dt = "int64", vdt = "int32", sizes = {25, 25, 25, 25}, devs = {3, 2, 1, 0}, opts = {descending = true, end_bit = 3}, few = true})
  check("balance = 'even' with room" .. tag, {dt = "uint32", vdt = "uint32", sizes = {50, 4, 0, 21}, caps = {60, 25, 20, 30}, devs = {0, 1, 0, 1}, opts = {balance = "even"}})
  check("ranks: one" .. tag, {dt = "uint32", sizes = {25}}, true)
  check("ranks: two, uint32 pairs" .. tag, {dt = "uint32", vdt = "uint32", sizes = {40, 33}}, true)
  check("ranks: three, float32 descending with NaN" .. tag, {dt = "float32", vdt = "int64", sizes = {20, 31, 17}, opts = {descending = true}}, true)
  check("ranks: four, int64 many equal (stable)" .. tag, {dt = "int64", vdt = "uint64", sizes = {22, 0, 35, 18}, few = true}, true)
  check("ranks: four, uint32 bits 8..20, balance even" .. tag, {dt = "uint32", vdt = "int32", sizes = {61, 2, 9, 30}, caps = {61, 30, 30, 30}, opts = {balance = "even", begin_bit = 8, end_bit = 20}}, true)
  check("ranks: five, float64" .. tag, {dt = "float64", sizes = {12, 19, 0, 23, 7}}, true)
end

-- the pieces copied rather than read where they lie (tune.direct = false; a pair without
-- peer access), in phases and not
M.tune.direct = false
check("copies: four devices, uint32 pairs", {dt = "uint32", vdt = "uint32", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}, few = true})
check("copies: eight parts, float64", {dt = "float64", vdt = "int32", sizes = {9, 14, 3, 20, 11, 5, 17, 8}, devs = {0, 1, 2, 3, 0, 1, 2, 3}})
M.tune.direct = true
NO_PEER[1] = {[2] = true}
check("no peer access between 1 and 2: copies", {dt = "int64", vdt = "int64", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}, few = true})
NO_PEER[1] = nil
local direct_before = launches.merge_pairs
check("direct: three devices", {dt = "uint64", vdt = "uint64", sizes = {30, 41, 45}, devs = {0, 1, 2}})
T.ok(launches.merge_pairs > direct_before and cuda.device(0).peers[1] and cuda.device(2).peers[0],
     "direct: peer access enabled every way")

-- tune.pull: the pieces read by the receivers' multiprocessors, a pair without peer access
-- copied as before
M.tune.direct, M.tune.pull = false, true
local pulls = launches.copy or 0
check("pull: four devices, uint32 pairs", {dt = "uint32", vdt = "uint32", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}, few = true})
T.ok((launches.copy or 0) - pulls == 24, "pull: every piece's keys and values pulled (4 x 3 pieces, 2 arrays)")
pulls = launches.copy
check("pull: shares of two devices, float64 keys", {dt = "float64", sizes = {9, 14, 3, 20, 11}, devs = {0, 1, 0, 1, 0}})
NO_PEER[1] = {[2] = true}
pulls = launches.copy
check("pull: device 1 cannot reach device 2, that piece copied", {dt = "int64", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}})
T.is(launches.copy - pulls, 11, "pull: the piece device 1 gets from device 2 copied, the other eleven pulled")
NO_PEER[1] = nil
T.like(select(2, pcall(M.sort, {cuda.array("uint32", 4), cuda.array("uint32", 4)}, {cuda.array("uint16", 4), cuda.array("uint16", 4)},
                       {devices = {0, 1}})),
       "part 1 %(device 0%): values of dtype uint16 are not sorted over devices or ranks %(values of 4 or 8 bytes are%)",
       "16-bit values refused (the merges carry 4- and 8-byte values)")
-- tune.pairs: phases that pair the parts (each sends one piece and receives one a phase)
local pairs0 = M.tune.pairs
M.tune.direct, M.tune.pairs = false, true
check("pairs: four devices, uint32 pairs", {dt = "uint32", vdt = "uint32", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}, few = true})
check("pairs: five parts on three devices, float64", {dt = "float64", vdt = "int32", sizes = {9, 14, 3, 20, 11}, devs = {0, 1, 2, 0, 1}})
check("pairs: eight parts, int64 keys", {dt = "int64", sizes = {9, 14, 3, 20, 11, 5, 17, 8}, devs = {0, 1, 2, 3, 0, 1, 2, 3}})
check("pairs: four ranks, uint64 pairs", {dt = "uint64", vdt = "uint64", sizes = {30, 41, 45, 29}}, true)
check("pairs: three ranks, float32", {dt = "float32", sizes = {20, 13, 29}}, true)
do
  M.tune.timeline = true
  check("pairs: timeline, four devices", {dt = "uint32", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}})
  local names = {}
  for k, m in ipairs(M.stats.timeline and M.stats.timeline[2] or {}) do names[k] = m[1] end
  T.is(table.concat(names, ","), "start,sorted,piece 1,piece 4,piece 3,merge 1.0,merge 1.1,merge 2.0",
       "pairs: part 2 receives part 1's piece, then part 4's (2 xor 4 - 1 = 2), then part 3's")
  M.tune.timeline = false
end
M.tune.pairs = 1
T.like(select(2, pcall(M.sort, {cuda.array("uint32", 4)}, {devices = {0}})), "tune%.pairs must be a boolean, got 1", "tune.pairs checked")
M.tune.direct, M.tune.pairs = true, false
-- the tree's phases (tune.pairs = false): the farther pieces in one phase
check("tree phases: four devices", {dt = "uint32", vdt = "uint32", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}, few = true})
check("tree phases: four ranks", {dt = "float32", sizes = {30, 41, 45, 29}}, true)
M.tune.pairs = pairs0
M.tune.pull = "yes"
T.like(select(2, pcall(M.sort, {cuda.array("uint32", 4)}, {devices = {0}})), "tune%.pull must be a boolean, got yes", "tune.pull checked")
M.tune.direct, M.tune.pull = true, false

-- the knobs: other merge tiles (NVRTC's), fewer candidates a round, the pieces all at once
M.tune.items, M.tune.search, M.tune.phased = 2, 3, false
check("tune: 2 keys a thread, 3 candidates, no phases, devices", {dt = "int32", vdt = "uint32", sizes = {31, 17, 40, 22, 9}, devs = {0, 1, 2, 3, 0}, few = true})
check("tune: 2 keys a thread, 3 candidates, no phases, ranks", {dt = "float64", vdt = "int64", sizes = {31, 17, 40, 22}}, true)
M.tune.items, M.tune.search, M.tune.phased = 17, 256, true
T.like(select(2, pcall(M.sort, {cuda.array("uint32", 4)}, {devices = {0}})), "tune%.items must be an integer 1%.%.16, got 17", "tune.items checked")
M.tune.items = 3

-- 16-bit keys, as the one-GPU sort may take them: over ranks they travel as bytes
SORT_DTYPES[#SORT_DTYPES + 1] = "uint16"
SORT_DTYPES[#SORT_DTYPES + 1] = "float16"
check("uint16 keys over four devices", {dt = "uint16", vdt = "uint32", sizes = {20, 13, 29, 8}, devs = {0, 1, 2, 3}})
check("uint16 keys over three ranks (as bytes)", {dt = "uint16", vdt = "uint32", sizes = {20, 13, 29}}, true)
check("float16 keys over four ranks, descending (as bytes)", {dt = "float16", sizes = {15, 22, 9, 30}, opts = {descending = true}}, true)
SORT_DTYPES[#SORT_DTYPES] = nil
SORT_DTYPES[#SORT_DTYPES] = nil
local st = M.stats
T.ok(st.parts == 4 and st.transport == "nccl" and st.sort and st.search and st.exchange and st.rounds >= 1,
     "M.stats: the last call's parts, transport, rounds and times")
T.ok(#st.round_launch == st.rounds and #st.round_wait == st.rounds and type(st.round_wait[1]) == "number",
     "M.stats: each round's host time")
T.is(st.timeline, nil, "M.stats: no timeline unless tune.timeline")

-- tune.timeline: each part's steps on its GPU, in order, from the call's start
do
  local direct = M.tune.direct
  M.tune.direct, M.tune.timeline = false, true
  check("timeline: four devices, copies", {dt = "uint32", sizes = {30, 41, 45, 29}, devs = {0, 1, 2, 3}})
  local tl, names = M.stats.timeline, {}
  for k, m in ipairs(tl and tl[1] or {}) do
    names[k] = m[1]
    if type(m[2]) ~= "number" then names[k] = "not a number" end
  end
  T.is(#(tl or {}), 4, "timeline: a list a part")
  T.is(table.concat(names, ","), "start,sorted,piece 2,piece 3,piece 4,merge 1.0,merge 1.1,merge 2.0",
       "timeline: part 1's steps as they were queued")
  check("timeline: three ranks", {dt = "float32", sizes = {20, 13, 29}}, true)
  local r = {}
  for k, m in ipairs(M.stats.timeline and M.stats.timeline[1] or {}) do r[k] = m[1] end
  T.is(table.concat(r, ","), "start,sorted,phase 2,phase 3,merge 1.1,merge 1.0,merge 2.0",
       "timeline: over ranks, NCCL's phases (the last rank's, 0-based 2: rank 0's piece in phase 2, rank 1's in 3)")
  M.tune.timeline = 1
  T.like(select(2, pcall(M.sort, {cuda.array("uint32", 4)}, {devices = {0}})), "tune%.timeline must be a boolean, got 1",
         "tune.timeline checked")
  M.tune.direct, M.tune.timeline = direct, false
end

-- the search alone: boundaries of many equal keys, and of 64-bit keys of every bit
do
  local keys = {}
  for i = 1, 200 do keys[i] = (i * 7919) % 13 end
  table.sort(keys)
  local function f(c) local n = 0; for _, k in ipairs(keys) do if k < c then n = n + 1 end end return n end
  local R = {0, 1, 50, 100, 199, 200}
  local v = run_mod.boundaries(R, keys[1], keys[#keys], function (cands)
    local out = {}
    for i, c in ipairs(cands) do out[i] = f(c) end
    return out
  end)
  local ok = true
  for j, r in ipairs(R) do
    -- the largest key with f(v) <= r
    local want = keys[1]
    for c = keys[1], keys[#keys] do if f(c) <= r then want = c end end
    ok = ok and v[j] == want
  end
  T.ok(ok, "boundaries over many equal keys")
  local rounds = 0
  local big = {math.mininteger, -5, -1, 0, 3, 1 << 62, math.maxinteger}
  table.sort(big, math.ult)
  local function fu(c) local n = 0; for _, k in ipairs(big) do if math.ult(k, c) then n = n + 1 end end return n end
  v = run_mod.boundaries({2, 5}, big[1], big[#big], function (cands)
    rounds = rounds + 1
    local out = {}
    for i, c in ipairs(cands) do out[i] = fu(c) end
    return out
  end)
  T.ok(v[1] == big[3] and v[2] == big[6], "boundaries of 64-bit keys (unsigned order)", ("    got %s %s"):format(v[1], v[2]))
  T.ok(rounds <= 8, ("64-bit keys take at most 8 rounds (%d)"):format(rounds))
end

-- {====================================================== refusals

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  return not ok and tostring(e) or "(no error)"
end
local function dk(dt, n, d)
  local a = cuda.array(dt, n, {device = d or 0})
  for i = 0, n - 1 do a.data[i] = (i * 7919) % 1000 + (dt:find("float") and 0.5 or 0) end
  return a
end
T.like(err_of(M.sort, {dk("uint32", 4), dk("float32", 4)}, {devices = {0, 0}}),
       "the parts disagree on the keys' dtype: part 1 has uint32, part 2 has float32", "devices: two dtypes")
T.like(err_of(M.sort, {dk("uint32", 4), dk("uint32", 4, 1)}, {devices = {0, 0}}),
       "part 2 %(device 0%): keys is on device 1", "devices: an array on another device")
local big = dk("uint32", 10)
T.like(err_of(M.sort, {big:view(1, 6), big:view(5, 6)}, {devices = {0, 0}}),
       "part 2 %(device 0%): its arrays overlap part 1's", "devices: overlapping views")
T.like(err_of(M.sort, {big:view(1, 5), big:view(6, 5)}, {devices = {0, 0}}), "^%(no error%)$", "devices: views side by side are fine")
T.like(err_of(M.sort, {dk("uint32", 4), dk("uint32", 9, 1)}, {devices = {0, 1}, balance = "even"}),
       "part 1 would hold 7 keys afterwards but its arrays hold 4", "devices: too little room for balance = 'even'")
T.like(err_of(M.sort, {dk("uint32", 4), dk("int16", 4)}, {devices = {0, 1}}),
       "part 2 %(device 1%): keys has dtype int16", "devices: a dtype the one-GPU sort refuses, named by part")
T.like(err_of(M.sort, {dk("uint32", 4)}, {devices = {0}, counts = {5}}),
       "the count of keys must be an integer 0%.%.4", "devices: a count past the array")
T.like(err_of(M.sort, {dk("uint32", 4)}, {devices = {0}, stream = cuda.stream()}), "stream is for comm", "devices: no stream")
T.like(err_of(M.sort, {dk("uint32", 4)}, {devices = {9}}), "devices%[1%] must be a device ordinal 0%.%.7, got 9", "devices: a bad ordinal")
T.like(err_of(M.sort, {dk("uint32", 4)}, {devices = {0}, balanse = "even"}), "unknown option 'balanse'", "a misspelt option")
T.like(err_of(M.sort, {dk("uint32", 4), dk("uint32", 4)}, {dk("int32", 4)}, {devices = {0, 0}}),
       "values must be a list of 2 cuda.arrays, got 1", "devices: too few values")
T.like(err_of(M.sort, {dk("uint32", 4)}, {}), "give devices = {...}", "a list of keys without devices")

-- ranks: every rank errs, none hangs
local function job_errors(name, P, body, pattern_of)
  local how = run_job(P, body)
  local bad = how ~= "done" and how or nil
  for r = 1, P do
    if bad then break end
    local res = job.results[r]
    if res[1] then bad = ("rank %d: no error"):format(r - 1)
    elseif not tostring(res[2]):find(pattern_of(r - 1)) then bad = ("rank %d: %s"):format(r - 1, tostring(res[2])) end
  end
  T.ok(not bad, name, bad and "    " .. bad or nil)
end
job_errors("ranks that disagree on the dtype all err", 3, function (rank, comm)
  M.sort(dk(rank == 1 and "float32" or "uint32", 10, rank), {comm = comm})
end, function () return "the ranks disagree on the keys' dtype: rank 0 has uint32, rank 1 has float32" end)
job_errors("ranks that disagree on descending all err", 2, function (rank, comm)
  M.sort(dk("uint32", 10, rank), {comm = comm, descending = rank == 0})
end, function () return "disagree on descending: rank 0 has true, rank 1 has false" end)
job_errors("ranks with values and without all err", 2, function (rank, comm)
  M.sort(dk("uint32", 10, rank), rank == 1 and dk("int32", 10, rank) or nil, {comm = comm})
end, function () return "disagree on the values' dtype: rank 0 has none, rank 1 has int32" end)
job_errors("a rank's bad argument: it says why, the others name it", 3, function (rank, comm)
  M.sort(dk("uint32", 10, rank), {comm = comm, end_bit = rank == 2 and 40 or nil})
end, function (r) return r == 2 and "end_bit must be an integer 1%.%.32, got 40" or "rank 2 refused its arguments" end)
job_errors("a rank's keys on another device", 2, function (rank, comm)
  M.sort(dk("uint32", 10, rank == 0 and 5 or rank), {comm = comm})
end, function (r) return r == 0 and "keys is on device 5 but comm is on device 0" or "rank 0 refused its arguments" end)
job_errors("too little room for balance = 'even': every rank errs", 2, function (rank, comm)
  M.sort(dk("uint32", rank == 0 and 10 or 30, rank), {comm = comm, balance = "even"})
end, function () return "rank 0 would hold 20 keys afterwards but its arrays hold 10" end)
M.test_fail = function (r, where) return r == 2 and where == "local" end
job_errors("a rank that fails in its local sort: every rank errs", 2, function (rank, comm)
  M.sort(dk("uint32", 10, rank), {comm = comm})
end, function (r) return r == 1 and "a failure for the tests" or "rank 1 failed in its local sort" end)
for _, where in ipairs{"search", "exchange"} do
  M.test_fail = function (r, w) return r == 2 and w == where end
  local how = run_job(3, function (rank, comm) M.sort(dk("uint32", 100, rank), {comm = comm}) end)
  T.is(how, "aborted", ("a rank that fails in the %s ends the job"):format(where))
  T.like(job.aborted or "", "^culua: rank 1 of 3 failed: cuda%.catalog%.sort: a failure for the tests",
         "  naming the rank, as cuda.mpi does")
end
M.test_fail = nil
local how = run_job(2, function (rank, comm)
  if rank == 0 then M.sort(dk("uint32", 10, rank), {comm = comm}) end
end)
T.like(how, "^hang: rank 0 waits in all_gather, rank 1 has ended", "a rank that never calls is a hang the mock sees")

-- }======================================================

T.ok(launches.merge_keys and launches.merge_pairs and launches.corank and launches.bounds and launches.ends and launches.copy,
     "every kernel of kernels/sort_multi.cu ran")
T.done_testing()
