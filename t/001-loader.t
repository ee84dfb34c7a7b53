-- The run-time loader: what culua does with and without a driver and NVRTC.
local T = require "culua.tap"
local cuda = require "cuda"

local builddir = os.getenv("CULUA_BUILDDIR") or "."
local libs = cuda.libraries()

T.ok(type(libs.nvrtc) == "string", "NVRTC was found: " .. tostring(libs.nvrtc or libs.nvrtc_error))
local major, minor = cuda.nvrtc_version()
T.ok(math.type(major) == "integer" and major >= 12, "nvrtc_version major " .. major)
T.ok(math.type(minor) == "integer", "nvrtc_version minor " .. minor)
T.ok(math.type(cuda.device_count()) == "integer", "device_count is an integer")
T.is(type(cuda.version), "string", "cuda.version")

if libs.driver then
  T.like(libs.driver, "libcuda", "driver found at " .. libs.driver)
  T.ok(math.type(cuda.driver_version()) == "integer" and cuda.driver_version() >= 12000,
       "driver_version " .. tostring(cuda.driver_version()))
else
  T.like(libs.driver_error, "libcuda.so.1 not found", "no driver here: " .. libs.driver_error)
  local v, msg = cuda.driver_version()
  T.ok(v == nil and msg:find("no CUDA driver: libcuda.so.1 not found", 1, true),
       "driver_version returns fail, message without a driver")
end

-- force "no driver" through the override, whatever this machine has
local function child(env, code)
  return T.run(env .. " " .. T.culua .. " -", code)
end
local out, status = child("CULUA_LIBCUDA=/nonexistent/libcuda.so.1", [[
local cuda = require "cuda"
print("count", cuda.device_count())
print("libs", cuda.libraries().driver)
print("nvrtc", (cuda.compile("__global__ void k() {}", {options = {"-arch=compute_80"}}).ptx:match("%.entry [%w_]+")))
print("device", select(2, pcall(cuda.device, 0)))
print("sync", select(2, pcall(cuda.synchronize)))
print("version", cuda.driver_version())
]])
T.is(status, 0, "culua runs with no driver")
T.like(out, "count\t0\n", "device_count() is 0 without a driver")
T.like(out, "libs\tfalse", "libraries().driver is false")
T.like(out, "nvrtc\t%.entry _Z1kv", "NVRTC still compiles without a driver")
T.like(out, "device\tcuda%.device: no CUDA driver: /nonexistent/libcuda%.so%.1 not found",
       "cuda.device raises a clear no-driver error")
T.like(out, "sync\tcuda%.synchronize: no CUDA driver", "cuda.synchronize too")
T.like(out, "version\tnil\tno CUDA driver", "driver_version says why")

out, status = child("CULUA_LIBNVRTC=/nonexistent/libnvrtc.so", [[
local cuda = require "cuda"
print("compile", select(2, pcall(cuda.compile, "__global__ void k() {}")))
print("count", cuda.device_count() >= 0)
]])
T.like(out, "compile\tcuda%.compile: NVRTC not available: /nonexistent/libnvrtc%.so not found",
       "a missing NVRTC gives a clear error")
T.like(out, "count\ttrue", "and the rest of culua still works")

-- nothing links libcuda or libnvrtc at build time
local readelf = io.popen("command -v readelf"):read("l")
if readelf then
  for _, f in ipairs{builddir .. "/culua", builddir .. "/.libs/cuda.so", builddir .. "/.libs/libculua.so",
                     builddir .. "/examples/embed"} do
    local fh = io.open(f)
    if fh then
      fh:close()
      local needed = io.popen("readelf -d " .. f .. " 2>&1"):read("a")
      T.ok(needed:find("NEEDED") and not needed:find("libcuda") and not needed:find("libnvrtc"),
           f:match("[^/]+$") .. " does not link libcuda or libnvrtc")
    else
      T.skip(f .. " not built here", 1)
    end
  end
else
  T.skip("no readelf", 4)
end
T.done_testing()
