-- culua.catalog.barrier: cuda.catalog.barrier, grid-wide barriers inside one
-- launch (kernels/barrier.cu, <culua/barrier.cuh>) and seed 001's experiment,
-- one launch with barriers (SKL) against a launch a phase (MKL).

local cuda = require "cuda"
local core = require "culua.catalog.core"

local fail, one_of, check_array = core.fail, core.one_of, core.check_array

-- {====================================================== grid barrier

local barrier = {}

barrier.kinds = {"seed", "seed_asm", "sense", "grid", "coop"}
barrier.words = core.constants("culua/barrier.cuh").CULUA_BARRIER_WORDS

-- the barrier state: CULUA_BARRIER_WORDS words, zeroed before each launch
function barrier.state(device)
  return cuda.array("uint32", barrier.words, device and {device = device} or nil)
end

-- the most blocks of `block` threads that are all resident at once
function barrier.max_grid(kern, block, shared)
  return kern:max_cooperative_grid(block, shared or 0)
end

-- barrier.launch(kernel, {grid =, block =, shared =, stream =, state =, cooperative =}, ...)
-- sizes the grid from occupancy when grid is not given, refuses a grid that cannot
-- be co-resident (it would hang at the first barrier), zeroes state, launches.
function barrier.launch(kern, cfg, ...)
  local fname = "barrier.launch"
  if type(cfg) ~= "table" then fail(fname, "config must be a table, got %s", type(cfg)) end
  core.options(fname, cfg, {"grid", "block", "shared", "stream", "state", "cooperative"})
  local block = cfg.block
  if math.type(block) ~= "integer" then fail(fname, "block must be a thread count (1-D), got %s", tostring(block)) end
  local max = barrier.max_grid(kern, block, cfg.shared)
  local grid = cfg.grid or max
  if math.type(grid) ~= "integer" or grid < 1 then fail(fname, "grid must be a positive block count, got %s", tostring(grid)) end
  if grid > max then
    fail(fname, "a grid of %d blocks of %d threads cannot be co-resident on %s (at most %d); " ..
         "the barrier would wait forever", grid, block, cuda.device().name, max)
  end
  if cfg.state then cfg.state:fill(0, cfg.stream) end
  kern:launch({grid = grid, block = block, shared = cfg.shared, stream = cfg.stream, cooperative = cfg.cooperative}, ...)
  return grid
end

local xpx_kinds = {"none", "block", "seed", "seed_asm", "sense", "grid", "coop"}
local xpx_phases = {"shared", "global"}
local xpx_options = {"blocks", "threads", "transforms", "phase", "state", "stream"}
local mkl_options = {"blocks", "threads", "transforms", "phase", "stream", "kind"}

-- the experiment's common options: blocks, threads, phase; the kernel's name suffix
local function xpx_opts(fname, X, P, opts)
  check_array(fname, "X", X); check_array(fname, "P", P)
  opts = core.options(fname, opts, fname == "barrier.mkl" and mkl_options or xpx_options)
  local blocks, threads = opts.blocks, opts.threads
  if math.type(blocks) ~= "integer" or math.type(threads) ~= "integer" then fail(fname, "opts.blocks and opts.threads are required integers") end
  local n = blocks * threads
  if X.dtype ~= "float32" or P.dtype ~= "float32" then fail(fname, "X and P must be float32") end
  if #X < n or #P < n then fail(fname, "X and P need %d elements (blocks x threads), have %d and %d", n, #X, #P) end
  local phase = one_of(fname, "phase", opts.phase or "shared", xpx_phases)
  return opts, blocks, threads, n, phase == "global" and "_global" or ""
end

-- seed 001's experiment: `transforms` X -> P -> X transforms in one launch (SKL).
-- opts: blocks, threads, transforms (1), phase ("shared": X staged in shared
-- memory; "global": read from global memory as the seed's kernel does), state, stream.
-- X and P hold blocks*threads floats.
function barrier.xpx(kind, X, P, opts)
  local fname = "barrier.xpx"
  one_of(fname, "kind", kind, xpx_kinds)
  local blocks, threads, n, suffix
  opts, blocks, threads, n, suffix = xpx_opts(fname, X, P, opts)
  local state = opts.state or barrier.state(X.device.ordinal)
  local kern = core.kernel("barrier", "culua_xpx_" .. kind .. suffix, nil, X.device)
  local args = {X, P, n, state, 2 * (opts.transforms or 1)}
  if kind == "none" or kind == "block" then
    kern:launch({grid = blocks, block = threads, stream = opts.stream}, table.unpack(args))
  else
    barrier.launch(kern, {grid = blocks, block = threads, state = state, stream = opts.stream, cooperative = kind == "coop"},
                   table.unpack(args))
  end
  return X
end

-- the words MKL's launches pass (their one phase meets no barrier), one array a device
local mkl_state = setmetatable({}, {__mode = "v"})

-- the same transforms as two launches each (MKL): the kernel boundary is the barrier.
-- opts as for xpx, and kind ("none"): whose kernel to launch once a phase, so that
-- SKL with that kind and MKL run the same machine code
function barrier.mkl(X, P, opts)
  local fname = "barrier.mkl"
  local blocks, threads, n, suffix
  opts, blocks, threads, n, suffix = xpx_opts(fname, X, P, opts)
  local kind = one_of(fname, "kind", opts.kind or "none", xpx_kinds)
  local dev = X.device.ordinal
  local state = mkl_state[dev] or barrier.state(dev)   -- held here: the table's hold is weak
  mkl_state[dev] = state
  local kern = core.kernel("barrier", "culua_xpx_" .. kind .. suffix, nil, X.device)
  local cfg = {grid = blocks, block = threads, stream = opts.stream}
  for _ = 1, opts.transforms or 1 do
    kern:launch(cfg, X, P, n, state, 1)
    kern:launch(cfg, P, X, n, state, 1)
  end
  return X
end

-- }======================================================

return {
  barrier = barrier,
  info = {kinds = barrier.kinds, experiment = xpx_kinds, phases = xpx_phases},
}
