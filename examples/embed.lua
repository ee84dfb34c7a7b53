-- embed.lua: run by examples/embed, a C host that embeds culua.
local cuda = require "cuda"
local major, minor = cuda.nvrtc_version()
print(("embedded culua %s: NVRTC %d.%d, %d CUDA device(s)"):format(cuda.version, major, minor, cuda.device_count()))
local prog = cuda.compile("extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = 1.0f; }")
print("compiled " .. #prog.ptx .. " bytes of PTX")
return 42
