-- cuda.device: enumeration, fields, attributes. The GPU part skips without one.
local T = require "culua.tap"
local cuda = require "cuda"

local n = cuda.device_count()
T.ok(n >= 0, "device_count " .. n)
if cuda.libraries().driver then
  T.error_like(function () cuda.device(n + 3) end, "004%-device%.t:%d+: cuda%.device: no CUDA device " .. (n + 3) ..
               " %(" .. n .. " present%)", "an ordinal past the end is refused, at the caller's line")
else
  T.error_like(function () cuda.device(n + 3) end, "004%-device%.t:%d+: cuda%.device: no CUDA driver: ",
               "no driver: cuda.device says so, at the caller's line")
end
T.error_like(function () cuda.device("x") end, "cuda%.device: bad argument #1 %(number expected, got string%)",
             "a non-number ordinal")
if n == 0 then
  T.error_like(function () cuda.device(0) end, "cuda%.device: ", "cuda.device(0) raises without a device")
  T.done_testing()
  return
end

local dev = cuda.device(0)
T.ok(rawequal(dev, cuda.device(0)), "one object per ordinal")
T.ok(rawequal(dev, cuda.device()), "cuda.device() is the current device")
T.is(dev.ordinal, 0, "ordinal")
T.like(dev.name, "%S", "name: " .. dev.name)
T.like(dev.compute_capability, "^%d+%.%d$", "compute_capability " .. dev.compute_capability)
T.is(dev.arch, "sm_" .. dev.major .. dev.minor, "arch " .. dev.arch)
T.ok(dev.total_memory > 2^30, "total_memory " .. dev.total_memory)
T.like(dev.pci_bus_id, "^%x+:%x+:%x+%.%x$", "pci_bus_id " .. dev.pci_bus_id)
T.like(dev.uuid, "^GPU%-%x+%-%x+%-%x+%-%x+%-%x+$", "uuid " .. dev.uuid)
T.like(tostring(dev), "^cuda%.device%(0%): .*, sm_%d+, %d+%.%d%d GiB$", "__tostring " .. tostring(dev))
T.is(dev:attribute("warp_size"), 32, "attribute warp_size")
T.ok(dev:attribute("max_threads_per_block") >= 1024, "attribute max_threads_per_block")
T.is(dev:attribute("compute_capability_major"), dev.major, "attribute compute_capability_major")
local a = dev:attributes()
T.is(a.multiprocessor_count, dev:attribute("multiprocessor_count"), "attributes() agrees with attribute()")
local count = 0
for _ in pairs(a) do count = count + 1 end
T.ok(count > 100, count .. " attributes")
T.error_like(function () dev:attribute("warp_sizes") end, "attribute: bad argument #1 %(unknown attribute 'warp_sizes'%)",
             "unknown attribute")
T.error_like(function () dev:attribute() end, "attribute: bad argument #1 %(string expected", "missing attribute name")
local free, total = dev:memory_info()
T.ok(free > 0 and free <= total and total == dev.total_memory, "memory_info " .. free .. " of " .. total)
T.ok(rawequal(dev:use(), dev), "use() returns the device")
T.lives_ok(function () dev:synchronize() end, "dev:synchronize()")
T.lives_ok(function () cuda.synchronize() end, "cuda.synchronize()")
T.is(dev:can_access_peer(dev), false, "a device is not its own peer")
T.error_like(function () dev:enable_peer_access(dev) end, "a device is always its own peer", "enable_peer_access(self)")
if n > 1 then
  local other = cuda.device(1)
  local can = dev:can_access_peer(other)
  T.is(type(can), "boolean", "can_access_peer(other)")
  if can then T.lives_ok(function () dev:enable_peer_access(other); dev:enable_peer_access(other) end,
                         "enable_peer_access, twice") end
else
  T.diag("one GPU: peer access between two devices is not exercised here")
end
T.done_testing()
