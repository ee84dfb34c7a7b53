-- Managed and mapped memory (doc/memory.md): cuda.array(dtype, n, {managed = true})
-- with host indexing, prefetch and advice, and cuda.host_array(dtype, n, {mapped = true})
-- that kernels read and write in place. Without a GPU: the option checks, a launch's
-- refusal of a host array that is not mapped, the accounting by kind. On a GPU: every
-- dtype at lengths 0, 1, 31 and 2^20 + 1 written and read from the host and by kernels
-- (raw launches and elementwise ones), views, the host's wait for the device, prefetch
-- to the device and the host, each advice, streams, and the errors where the device or
-- the driver lacks a feature, shown through t/cudashim.c's driver that hides them.
local T = require "culua.tap"
local cuda = require "cuda"

local DTYPES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                "float32", "float64", "float16", "bfloat16", "float8_e4m3", "float8_e5m2"}
local LENGTHS = {0, 1, 31, (1 << 20) + 1}

-- {====================================================== no GPU needed

T.error_like(function () cuda.array("float32", 4, {managed = "yes"}) end,
             "^.-cuda%.array: managed must be a boolean, got string", "managed must be a boolean")
T.error_like(function () cuda.array("float32", 4, {sync = false}) end,
             "cuda%.array: sync is an option of managed arrays %(give managed = true too%)", "sync without managed")
T.error_like(function () cuda.array("float32", 4, {managed = true, sync = 0}) end,
             "cuda%.array: sync must be a boolean, got 0", "sync must be a boolean")
T.error_like(function () cuda.array("float32", {2, 2}, {managed = true, pitched = true}) end,
             "cuda%.array: a managed array is not pitched", "managed and pitched refused")
T.error_like(function () cuda.array("float32", 4, {manged = true}) end,
             "cuda%.array: unknown option 'manged' %(known: device, pitched, managed, sync%)", "a misspelt option")
T.error_like(function () cuda.host_array("float32", 4, {mapped = 1}) end,
             "cuda%.host_array: mapped must be a boolean, got 1", "mapped must be a boolean")
T.error_like(function () cuda.host_array("float32", 4, {pinned = false, mapped = true}) end,
             "cuda%.host_array: mapped memory is pinned", "pinned = false and mapped = true contradict")
T.error_like(function () cuda.host_array("float32", 4, {maped = true}) end,
             "cuda%.host_array: unknown option 'maped' %(known: pinned, mapped, device%)", "a misspelt host option")
local pageable = cuda.host_array("float32", 4)
T.is(pageable.memory, "pageable", "a host array's memory: pageable")
T.is(pageable.mapped, false, "not mapped")
T.is(pageable.ptr, nil, "no device address")
T.error_like(function () cuda.check_args({"u64"}, pageable) end,
             "launch: argument 1 is a cuda%.host_array that is not mapped: kernels cannot reach it",
             "a launch refuses a host array that is not mapped")
T.error_like(function () cuda.map("y = 1", {y = pageable}) end,
             "cuda%.map: argument 'y' must be a cuda%.array or a number, got cuda%.host_array %(not mapped",
             "cuda.map says a host array must be mapped")
for _, kind in ipairs{"device", "managed", "mapped"} do
  T.is(math.type(cuda.memory_in_use(kind)), "integer", "memory_in_use('" .. kind .. "') is an integer")
end
T.is(cuda.memory_in_use(), cuda.memory_in_use("device") + cuda.memory_in_use("managed") + cuda.memory_in_use("mapped"),
     "memory_in_use() counts the three kinds")
T.error_like(function () cuda.memory_in_use("pinned") end, "cuda%.memory_in_use: bad argument #1 %(invalid option 'pinned'%)",
             "memory_in_use refuses an unknown kind")
T.is(T.cuda_enum("CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS") ~= nil, true, "the shim's attributes are read from cuda.h")

-- }======================================================


-- {====================================================== with a GPU

-- a random host reference of dtype dt and n elements
local function reference(dt, n, seed)
  local h = cuda.host_array(dt, n)
  if dt:find("float") then h:random(seed, -100, 100) else h:random(seed, 0, 100) end
  return h
end

-- the host's element i + 1, rounded into dt as the kernels' stores round
local function plus_one(h)
  local r = cuda.host_array(h.dtype, #h)
  for i = 1, #h do r[i] = h[i] + 1 end
  return r
end

local function gpu()
  local dev = cuda.device(0)
  for _, a in ipairs{"managed_memory", "concurrent_managed_access", "can_map_host_memory"} do
    T.is(dev:attribute(a), 1, "device 0 has " .. a)
  end
  local incr = cuda.elementwise{params = "T *x", out = "T y", body = "y = x + 1", name = "incr"}
  local st = cuda.stream{non_blocking = true}

  -- every dtype and length: the host writes, a kernel reads and writes, the host reads
  for _, dt in ipairs(DTYPES) do
    for _, n in ipairs(LENGTHS) do
      local what = ("%s[%d]"):format(dt, n)
      local h = reference(dt, n, n + 7)
      local want = plus_one(h)
      local small = n <= 31
      local x <close> = cuda.array(dt, n, {managed = true, sync = small})
      T.ok(x.managed and x.memory == "managed" and #x == n, what .. ": a managed array")
      if small then                                   -- element by element, each waiting for the device
        for i = 1, n do x[i] = h[i] end
      else
        x:copy_from(h)
      end
      local y <close> = cuda.array(dt, n, {managed = true, sync = small}):fill(dt:find("float") and -1 or 77)   -- poison
      incr(x, y)
      if not small then cuda.synchronize() end       -- sync = false: the host waits itself
      local bad = 0
      for i = 1, n do if y[i] ~= want[i] then bad = bad + 1 end end
      T.is(bad, 0, what .. ": y = x + 1 over managed memory, read element by element from the host")
      T.is(select(1, cuda.compare(y, want)), 0.0, what .. ": and by cuda.compare (a copy)")
      -- the same kernel into mapped host memory, and from it into device memory
      local z <close> = cuda.host_array(dt, n, {mapped = true}):fill(dt:find("float") and -1 or 77)
      T.ok(z.mapped and z.pinned and z.memory == "mapped", what .. ": a mapped host array")
      incr(x, z)
      cuda.synchronize()
      T.is(select(1, cuda.compare(z, want)), 0.0, what .. ": a kernel writes mapped memory in place")
      local d <close> = cuda.array(dt, n):fill(0)
      incr(z, d)
      if n > 0 then
        local want2 = plus_one(want)
        T.is(select(1, cuda.compare(d, want2)), 0.0, what .. ": a kernel reads mapped memory in place")
      end
      -- the host reads every element of a sync = false array once the stream is done
      if not small then
        incr(x, y, {stream = st})
        st:synchronize()
        bad = 0
        for i = 1, n do if x[i] ~= h[i] then bad = bad + 1 end end
        T.is(bad, 0, what .. ": sync = false: the host reads every element after the stream's work")
      end
    end
  end

  -- tostring and fields
  local m = cuda.array("float32", 4, {managed = true}):copy_from({1, 2, 3, 4})
  T.is(tostring(m), "cuda.array(float32, 4, managed): {1.0, 2.0, 3.0, 4.0}", "tostring says managed")
  local m2 = cuda.array("int32", {2, 3}, {managed = true}):copy_from({{1, 2, 3}, {4, 5, 6}})
  T.is(tostring(m2), "cuda.array(int32, {2, 3}, managed): {1, 2, 3, 4, 5, 6}", "a 2-D managed array")
  T.is(m2[4], 4, "a 2-D managed array indexes flat, row-major")
  local mp = cuda.host_array("float64", 3, {mapped = true}):copy_from({0.5, 1.5, 2.5})
  T.is(tostring(mp), "cuda.host_array(float64, 3, mapped): {0.5, 1.5, 2.5}", "tostring says mapped")
  T.ok(math.type(mp.ptr) == "integer" and mp.ptr ~= 0, "a mapped array's ptr: the address kernels use")
  T.ok(rawequal(mp.device, dev), "its device")
  T.is(cuda.host_array("float32", 2, {pinned = true}).memory, "pinned", "pinned memory says so")
  T.is(cuda.array("float32", 2).memory, "device", "device memory says so")
  T.is(cuda.array("float32", 2).managed, false, "and is not managed")

  -- views share the managed memory and the host's view of it
  local big = cuda.array("float64", 100, {managed = true}):copy_from(cuda.host_array("float64", 100):iota())
  local v = big:view(11, 5)
  T.ok(v.managed, "a view of a managed array is managed")
  T.is(v[1], 11.0, "v[1] is the parent's 11th element")
  v[2] = -1
  T.is(big[12], -1.0, "writing v[2] writes the parent's 12th")
  incr(v, v)
  T.is_deeply(big:view(10, 7):totable(), {10, 12, 0, 14, 15, 16, 16}, "a kernel over the view writes only there")
  T.error_like(function () return v[6] end, "cuda%.array: index 6 outside 1%.%.5", "a view's bounds")
  T.error_like(function () v[0] = 1 end, "cuda%.array: index 0 outside 1%.%.5", "index 0")

  -- the host waits for the device: a kernel on a non-blocking stream, read at once
  local N = 1 << 24
  local slow = cuda.array("float32", N, {managed = true}):fill(0)
  local long = cuda.elementwise{params = "T *x", out = "T y", name = "spin",
                                body = "float s = x; for (int it = 0; it < 1000; it++) s = s * 0.5f + 1.0f; y = s"}
  long(slow, slow, {stream = st})
  T.near(slow[N], 2.0, 1e-6, "x[i] right after a launch on another stream sees the kernel's result")
  incr(slow, slow, {stream = st})
  T.near(slow:view(N - 2, 3):totable()[3], 3.0, 1e-6, "totable of a view waits as well")

  -- a raw launch takes managed and mapped arrays as pointers
  local k = cuda.compile([[
extern "C" __global__ void addto(float *x, const float *y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}]]):module():kernel("addto")
  local n = 31
  local mx = cuda.array("float32", n, {managed = true}):fill(1)
  local hy = cuda.host_array("float32", n, {mapped = true}):iota()
  k:launch({grid = {1}, block = {32}}, mx, hy, n)
  local ok = true
  for i = 1, n do ok = ok and mx[i] == i + 1 end
  T.ok(ok, "k:launch(managed, mapped): x[i] += y[i]")
  k:launch({grid = {1}, block = {32}, stream = st}, hy, mx, n)
  st:synchronize()
  T.is(hy[n], n + n + 1.0, "k:launch(mapped, managed) on a stream writes the host array")
  T.error_like(function () k:launch({grid = {1}, block = {32}}, mx, cuda.host_array("float32", n, {pinned = true}), n) end,
               "launch: argument 2 is a cuda%.host_array that is not mapped", "a pinned array that is not mapped is refused")

  -- prefetch: to the device and the host, by ordinal and by device, on streams
  local p = cuda.array("float32", 1 << 22, {managed = true}):fill(3)
  T.ok(rawequal(p:prefetch(0), p), "prefetch returns the array")
  cuda.synchronize()
  T.is(p:range_attributes().last_prefetch, 0, "prefetch(0): the driver's last prefetch is device 0")
  p:prefetch("host")
  cuda.synchronize()
  T.is(p:range_attributes().last_prefetch, "host", "prefetch('host')")
  p:prefetch(dev, {stream = st})
  st:synchronize()
  T.is(p:range_attributes().last_prefetch, 0, "prefetch(cuda.device(0), {stream = st})")
  incr(p, p, {stream = st})
  p:prefetch("host", {stream = st})
  T.is(p[1 << 22], 4.0, "a kernel between prefetches on one stream, then the host reads")
  local e0 = cuda.array("float32", 0, {managed = true})
  T.ok(rawequal(e0:prefetch(0), e0), "prefetch of an empty array does nothing")
  p:view(5, 1000):prefetch(0)
  cuda.synchronize()
  T.is(p[5], 4.0, "prefetch of a view")

  -- advice, and what the driver says of it
  local a = cuda.array("float32", 1 << 20, {managed = true}):fill(1)
  local at = a:range_attributes()
  T.is(at.read_mostly, false, "no advice yet: not read-mostly")
  T.is(at.preferred_location, nil, "no preferred location")
  T.is(#at.accessed_by, 0, "nobody in accessed_by")
  T.ok(rawequal(a:advise("read_mostly"), a), "advise returns the array")
  T.is(a:range_attributes().read_mostly, true, "read_mostly")
  a:advise("unset_read_mostly")
  T.is(a:range_attributes().read_mostly, false, "unset_read_mostly")
  a:advise("preferred_location", 0)
  T.is(a:range_attributes().preferred_location, 0, "preferred_location 0")
  a:advise("preferred_location", "host")
  T.is(a:range_attributes().preferred_location, "host", "preferred_location 'host'")
  a:advise("unset_preferred_location")
  T.is(a:range_attributes().preferred_location, nil, "unset_preferred_location")
  a:advise("accessed_by", dev)
  T.is_deeply(a:range_attributes().accessed_by, {0}, "accessed_by device 0")
  a:advise("unset_accessed_by", 0)
  T.is_deeply(a:range_attributes().accessed_by, {}, "unset_accessed_by")
  a:advise("read_mostly"):advise("preferred_location", 0):advise("accessed_by", "host")
  incr(a, a)
  T.is(a[1 << 20], 2.0, "a kernel over an advised array, read from the host")
  T.is(a:sum(), 2.0 * (1 << 20), "x:sum() of a managed array")
  T.is_deeply(cuda.array("float32", 0, {managed = true}):range_attributes(), {read_mostly = false, accessed_by = {}},
              "an empty array's range")

  -- copies in and out of managed memory, with and without streams
  local c = cuda.array("int32", 1000, {managed = true})
  local src = cuda.host_array("int32", 1000, {pinned = true}):random(5, -1000, 1000)
  c:copy_from(src, st)
  local dst = cuda.array("int32", 1000)
  c:copy_to(dst, st)
  st:synchronize()
  T.is(select(1, cuda.compare(dst, src)), 0.0, "pinned -> managed -> device on a stream")
  c:fill(0)
  c:copy_from(dst)
  T.is(c[1000], src[1000], "device -> managed without a stream")
  c:copy_from({1, 2, 3})
  T.is_deeply(c:view(1, 4):totable(), {1, 2, 3, src[4]}, "a Lua table into managed memory")

  -- accounting by kind, and its release
  collectgarbage(); collectgarbage()
  local before = {device = cuda.memory_in_use("device"), managed = cuda.memory_in_use("managed"),
                  mapped = cuda.memory_in_use("mapped")}
  local ma = cuda.array("float64", 1000, {managed = true})
  local mv = ma:view(1, 10)
  local hm = cuda.host_array("int16", 500, {mapped = true})
  T.is(cuda.memory_in_use("managed") - before.managed, 8000, "a managed array counts as managed (its view adds nothing)")
  T.is(cuda.memory_in_use("mapped") - before.mapped, 1000, "a mapped host array counts as mapped")
  T.is(cuda.memory_in_use("device"), before.device, "and neither as device memory")
  local listed = {}
  for _, e in ipairs(cuda.live("arrays")) do listed[e[1]] = e[2] end
  T.like(listed[ma] or "", "039%-managed%.t:%d+", "cuda.live lists the managed array")
  T.like(listed[hm] or "", "039%-managed%.t:%d+", "and the mapped one")
  ma:close(); hm:close(); mv:close()
  T.is(cuda.memory_in_use("managed"), before.managed, "closing gives the managed bytes back")
  T.is(cuda.memory_in_use("mapped"), before.mapped, "and the mapped ones")

  -- refusals (t/029 has each too)
  local d = cuda.array("float32", 4)
  T.error_like(function () return d[1] end, "cuda%.array: x%[i%] reaches managed arrays only; this one is device memory",
               "x[i] of device memory")
  T.error_like(function () d[1] = 1 end, "x%[i%] reaches managed arrays only", "x[i] = v of device memory")
  T.error_like(function () d.dtype = "int8" end, "cuda%.array: cannot set field 'dtype'", "fields are not settable")
  T.error_like(function () d:prefetch(0) end, "prefetch: the array is device memory, not managed", "prefetch of device memory")
  T.error_like(function () d:advise("read_mostly") end, "advise: the array is device memory, not managed", "advise of device memory")
  T.error_like(function () m:advise("read_mostely") end, "advise: unknown advice 'read_mostely' %(known: read_mostly", "an unknown advice")
  T.error_like(function () m:advise("preferred_location") end, "advise: 'preferred_location' needs a place", "a place is needed")
  T.error_like(function () m:advise("read_mostly", 0) end, "advise: 'read_mostly' takes no place", "a place is refused")
  T.error_like(function () m:prefetch("gpu") end, "prefetch: bad argument #1 %(a cuda%.device, a device ordinal or \"host\" expected, got 'gpu'%)",
               "prefetch to a bad place")
  T.error_like(function () m:prefetch() end, "prefetch: bad argument #1 %(a cuda%.device, a device ordinal or \"host\" expected, got no value%)",
               "prefetch to nowhere")
  T.error_like(function () m:prefetch(cuda.device_count()) end, "prefetch: no CUDA device " .. cuda.device_count(), "prefetch to a device not present")
  T.error_like(function () m:prefetch(-1) end, "prefetch: no CUDA device %-1", "prefetch to device -1")
  T.error_like(function () m:advise("accessed_by", 2.5) end, "advise: bad argument #2 %(a cuda%.device, a device ordinal", "a fractional device")
  T.error_like(function () m:prefetch(0, {stream = 1}) end, "prefetch: stream must be a cuda%.stream, got number", "a stream that is not one")
  T.error_like(function () m:prefetch(0, {strem = st}) end, "prefetch: unknown option 'strem' %(known: stream%)", "a misspelt option")
  T.error_like(function () m[5] = 1 end, "cuda%.array: index 5 outside 1%.%.4", "past the end")
  T.error_like(function () m[1] = "x" end, "number expected for float32, got string", "a string value")
  T.error_like(function () return d:range_attributes() end, "range_attributes: the array is device memory, not managed",
               "range_attributes of device memory")

  -- what a device or driver without the feature says (a driver that hides it)
  local shim, why = T.cuda_shim()
  if not shim then
    T.skip("no shim driver: " .. why, 9)
  else
    local out = T.run_shimmed([[
local cuda = require "cuda"
print("alloc", select(2, pcall(cuda.array, "float32", 4, {managed = true})))
]], {"CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY"})
    T.like(out, "alloc\tcuda%.array: device 0 cannot allocate managed memory: its CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0",
           "no managed memory: cuda.array says so")
    out = T.run_shimmed([[
local cuda = require "cuda"
print("nosync", select(2, pcall(cuda.array, "float32", 4, {managed = true, sync = false})))
local x = cuda.array("float32", 4, {managed = true})
x[1] = 5
print("index", x[1])
print("prefetch", select(2, pcall(x.prefetch, x, 0)))
print("host", select(2, pcall(x.prefetch, x, "host")))
print("advise", select(2, pcall(x.advise, x, "preferred_location", 0)))
]], {"CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS"})
    T.like(out, "nosync\tcuda%.array: device 0 cannot let the host touch managed memory while kernels run %(sync = false%): "
           .. "its CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0", "no concurrent access: sync = false refused")
    T.like(out, "index\t5%.0", "and the host still indexes, waiting for the device")
    T.like(out, "prefetch\tprefetch: device 0 cannot take managed memory by prefetch or advice: its CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0",
           "prefetch to such a device says so")
    T.like(out, "host\tprefetch: device 0 cannot prefetch managed memory on its streams", "prefetch from its streams too")
    T.like(out, "advise\tadvise: device 0 cannot take managed memory", "advise to it too")
    out = T.run_shimmed([[
local cuda = require "cuda"
print("mapped", select(2, pcall(cuda.host_array, "float32", 4, {mapped = true})))
local x = cuda.array("float32", 4, {managed = true})
print("prefetch", select(2, pcall(x.prefetch, x, 0)))
print("advise", select(2, pcall(x.advise, x, "read_mostly")))
]], {"CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY"}, {"cuMemPrefetchAsync", "cuMemAdvise"})
    T.like(out, "mapped\tcuda%.host_array: device 0 cannot map host memory %(mapped = true%): its CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY is 0",
           "no mapping: cuda.host_array says so")
    T.like(out, "prefetch\tprefetch: the driver has no cuMemPrefetchAsync that takes a CUmemLocation %(CUDA 12%.2 or newer%)",
           "a driver without the CUmemLocation prefetch")
    T.like(out, "advise\tadvise: the driver has no cuMemAdvise that takes a CUmemLocation", "or advise")
  end
  st:close()
end

-- }======================================================

T.gpu_part(gpu, "managed and mapped memory on the device")
T.done_testing()
