-- culua.catalog.cast: x:astype(dtype [, {stream = s}]) (kernels/cast.cu):
-- a new array of x's shape on x's device, every element converted by the
-- rules of doc/dtypes.md, which h:astype on host arrays follows bit for bit.
-- Every ordered pair of dtypes is prebuilt; a dtype to itself is a copy.

local cuda = require "cuda"
local core = require "culua.catalog.core"

local M = {}

local THREADS = 256
local BLOCKS_PER_SM = 8   -- enough resident blocks to hide memory latency; the kernel strides past

-- elements from one row to the next of a 2-D array (pitched or not); 1-D: n
local function stride(a)
  local p = a.pitch
  return p and p // (a.nbytes // #a) or #a
end

-- cuda.catalog.astype(x, dtype [, opts]): x:astype calls it, after checking the dtype
function M.astype(x, dtype, opts)
  local fname = "astype"
  opts = core.options(fname, opts, {"stream"})
  local from, n, dev = core.open_dtype(fname, "x", x)
  local stream = core.check_stream(fname, opts.stream, dev)
  local shape = x.shape
  local y = cuda.array(dtype, #shape == 2 and shape or shape[1], {device = dev.ordinal})
  if n == 0 then return y end
  if from == dtype then return y:copy_from(x, stream) end
  local rows, cols = #shape == 2 and shape[1] or 1, shape[#shape]
  local kern = core.kernel("cast", ("cast_%s_%s"):format(from, dtype), nil, dev)
  local grid = math.min(core.ceil_div(n, THREADS), core.sm_count(dev) * BLOCKS_PER_SM)
  kern:launch({grid = grid, block = THREADS, stream = stream}, x, stride(x), y, stride(y), rows, cols)
  return y
end

return M
