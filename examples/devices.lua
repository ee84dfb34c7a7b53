-- devices.lua: the device query of seed 000, as a culua script.
-- Prints, for every CUDA device, the properties the seed's deviceQuery
-- prints (cudaGetDeviceProperties), read here through the driver API.
--
--   ./culua examples/devices.lua

local cuda = require "cuda"

local n = require("culua.bench").need_devices()

local function mib(bytes) return ("%.0f MiB (%d bytes)"):format(bytes / 2^20, bytes) end
local function kib(bytes) return ("%d KiB (%d bytes)"):format(bytes // 1024, bytes) end

print(("Found %d device%s; driver %d, NVRTC %d.%d"):format(
  n, n == 1 and "" or "s", cuda.driver_version(), cuda.nvrtc_version()))
for i = 0, n - 1 do
  local dev = cuda.device(i)
  local a = dev:attributes()
  local rows = {
    {"Name", dev.name},
    {"Compute capability", dev.compute_capability},
    {"Total global memory", mib(dev.total_memory)},
    {"Shared memory per block", kib(a.max_shared_memory_per_block)},
    {"Registers per block", a.max_registers_per_block},
    {"Warp size", a.warp_size},
    {"Max threads per block", a.max_threads_per_block},
    {"Max block dimensions", ("%d x %d x %d"):format(a.max_block_dim_x, a.max_block_dim_y, a.max_block_dim_z)},
    {"Max grid dimensions", ("%d x %d x %d"):format(a.max_grid_dim_x, a.max_grid_dim_y, a.max_grid_dim_z)},
    {"Total constant memory", kib(a.total_constant_memory)},
    {"Multiprocessor count", a.multiprocessor_count},
    {"Clock rate", ("%.0f MHz"):format(a.clock_rate / 1000)},
    {"Memory clock rate", ("%.0f MHz"):format(a.memory_clock_rate / 1000)},
    {"Memory bus width", a.global_memory_bus_width .. " bits"},
    {"L2 cache size", mib(a.l2_cache_size)},
    {"PCI bus id", dev.pci_bus_id},
  }
  print(("Device %d"):format(i))
  for _, r in ipairs(rows) do print(("  %-24s: %s"):format(r[1], tostring(r[2]))) end
end
