-- t/elementwise-mock.lua: cuda and the catalog core mocked in plain Lua, on which
-- lua/elementwise.lua loads as it is, so that the host side of a call (its checks, its
-- caches, the kernel it picks, the grid and the arguments it launches with) runs without
-- a GPU: t/044-elementwise-host.t checks it, bench/elementwise_host.lua times it.
--
--   local mock = dofile(srcdir .. "/t/elementwise-mock.lua"){record = true, source = path, srcdir = dir}
--
-- mock.M is the module; mock.array(dtype, n, {device =, offset =, pitched =, mapped =})
-- makes an array (offset: elements past a 256-byte boundary), mock.device(o) a device,
-- mock.stream(dev) a stream; mock.reset() is cuda.reset() (the arrays made before go
-- stale); mock.array_info is cuda._catalog.array. With record, every launch is appended
-- to mock.launches as {kernel =, grid =, stream =, device =, args = {...}}, every
-- compile to mock.compiles, and mock.info_calls counts the calls of C.array; without,
-- a launch is an empty function (what the bench wants). source: another elementwise.lua;
-- srcdir: the source tree (default $CULUA_SRCDIR, or .).
return function (opts)
  opts = opts or {}
  local srcdir = opts.srcdir or os.getenv("CULUA_SRCDIR") or "."
  local record = opts.record
  local mock = {launches = {}, compiles = {}, prepares = 0}

  local core = {epoch = 0}
  local cuda = {_catalog = {}}

  -- {====================================================== devices, arrays, streams

  local devs = {}
  local function device(o)
    o = o or 0
    devs[o] = devs[o] or {ordinal = o, major = 9, minor = 0, kind = "cuda.device"}
    return devs[o]
  end
  local SIZE = {int8 = 1, uint8 = 1, int16 = 2, uint16 = 2, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8,
                float32 = 4, float64 = 8, float16 = 2, bfloat16 = 2, float8_e4m3 = 1, float8_e5m2 = 1}
  local next_ptr = 1 << 32
  local function array(dt, n, o)
    o = o or {}
    assert(SIZE[dt], "no mock dtype " .. tostring(dt))
    local off = (o.offset or 0) * SIZE[dt]
    local a = {kind = o.mapped ~= nil and "cuda.host_array" or "cuda.array", mapped = o.mapped, dtype = dt, n = n,
               device = device(o.device), ptr = next_ptr + off, pitched = o.pitched or false,
               epoch = core.epoch, shape = o.shape or {n}}
    next_ptr = next_ptr + (n * SIZE[dt] + off + 255) // 256 * 256 + 256
    a.view = function (self, first, count)
      local v = {}
      for k, x in pairs(self) do v[k] = x end
      v.ptr, v.n, v.shape = self.ptr + (first - 1) * SIZE[dt], count, {count}
      return v
    end
    a.close = function (self) self.closed = true end
    return a
  end
  -- cuda._catalog.array: what C.array answers, the same values in the same order
  local function array_info(v, mapped)
    if type(v) ~= "table" then return nil, "type" end
    local k = v.kind
    if k ~= "cuda.array" and not (mapped and k == "cuda.host_array" and v.mapped) then return nil, "type" end
    if v.closed then return nil, "closed" end
    if v.epoch ~= core.epoch then return nil, "reset" end
    return v.dtype, v.n, v.device, v.ptr, v.pitched
  end
  local function stream(dev) return {kind = "cuda.stream", device = dev or device(0)} end
  -- C.keys needs no GPU: the real one where culua is (the bench's figures are then its)
  local real = package.loaded.cuda
  cuda._catalog.keys = real and real._catalog and real._catalog.keys or function (t)
    if type(t) ~= "table" then return nil end
    local n = 0
    for _ in next, t do n = n + 1 end
    return n
  end

  mock.info_calls = 0
  cuda._catalog.array = not record and array_info or function (v, mapped)
    mock.info_calls = mock.info_calls + 1
    return array_info(v, mapped)
  end
  cuda.type = function (v) return type(v) == "table" and rawget(v, "kind") or nil end
  cuda.device = device
  cuda.array = function (dt, shape, o)
    local n = type(shape) == "table" and shape[1] * shape[2] or shape
    return array(dt, n, {device = o and o.device, shape = type(shape) == "table" and shape or nil})
  end
  cuda.stream = stream

  -- }======================================================


  -- {====================================================== kernels

  local function kernel(name, dev)
    local k = {name = name, device = dev}
    function k.prepare(_, cfg)
      mock.prepares = mock.prepares + 1
      if not record then return function () end end
      local grid = cfg.grid
      return function (...)
        mock.launches[#mock.launches + 1] = {kernel = name, grid = grid, device = dev, args = table.pack(...)}
      end
    end
    function k.launch(self, cfg, ...)
      mock.launches[#mock.launches + 1] = {kernel = name, grid = cfg.grid, stream = cfg.stream, device = dev,
                                           args = table.pack(...)}
      return self
    end
    return k
  end
  cuda.compile = function (src, o)
    mock.compiles[#mock.compiles + 1] = src
    return {module = function (_, mo)
      local dev = mo.device
      return {kernel = function (_, name)
        assert(src:find("void __launch_bounds__%(%d+%) " .. name .. "%("), "no kernel " .. name .. " in the source")
        return kernel(name, dev)
      end}
    end}
  end

  -- }======================================================


  -- {====================================================== the catalog core

  function core.clear() core.epoch = core.epoch + 1 end
  function core.check_stream(fname, s, dev)
    if s == nil then return nil end
    if cuda.type(s) ~= "cuda.stream" then error(("cuda.catalog.%s: stream must be a cuda.stream, got %s"):format(fname, type(s)), 3) end
    if s.device and dev and s.device.ordinal ~= dev.ordinal then
      error(("cuda.catalog.%s: stream is on device %d but the arrays are on device %d"):format(fname, s.device.ordinal, dev.ordinal), 3)
    end
    return s
  end
  function core.sm_count() return 132 end
  function core.scratch_kind() end
  function core.scratch(_, dev, _, n) return array("uint64", math.max(n, 1), {device = dev.ordinal}) end
  function core.read_word() return 0 end

  -- }======================================================

  -- lua/elementwise.lua (and the module it requires, the source tree's too), loaded on
  -- the mock under the embedded modules' chunk names
  local function slurp(path)
    local f = assert(io.open(path, "rb"))
    local text = f:read("a")
    f:close()
    return text
  end
  local text = slurp(opts.source or (srcdir .. "/lua/elementwise.lua"))
  local call = slurp(srcdir .. "/lua/elementwise_call.lua")
  local names = {"cuda", "culua.catalog.core", "culua.elementwise_call"}
  local saved = {}
  for i, name in ipairs(names) do saved[i] = package.loaded[name] end
  package.loaded.cuda, package.loaded["culua.catalog.core"] = cuda, core
  local ok, M = pcall(function ()
    package.loaded["culua.elementwise_call"] = assert(load(call, "=[culua.elementwise_call]"))("culua.elementwise_call")
    return assert(load(text, "=[culua.elementwise]"))("culua.elementwise")
  end)
  for i, name in ipairs(names) do package.loaded[name] = saved[i] end
  if not ok then error(M, 0) end

  mock.M, mock.cuda, mock.core = M, cuda, core
  mock.array, mock.device, mock.stream, mock.array_info = array, device, stream, array_info
  function mock.reset() core.clear() end
  return mock
end
