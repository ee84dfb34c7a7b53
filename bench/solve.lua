-- bench/solve.lua: cuda.catalog.lu / lu_solve against cuSOLVER, in the same run.
--   culua bench/solve.lua [ANCHOR [BLOCKS [SIZES [PANELS [DEVICES [DTYPES]]]]]]
-- ANCHOR (bench/anchor_cusolver, built by nvcc with -lcusolver -lcublas) times
-- <t>getrf and <t>getrs (one right-hand side) with events, median:
--   ANCHOR f32|f64 N REPS  ->  "getrf_ms X" and "getrs_ms Y"
-- BLOCKS: panel widths to time, "64" or "32,64,128" (default: the catalog's
-- default alone); SIZES: "8192,16384" (the default); PANELS: the panel
-- factorizations to time, "auto" (the default) or "cluster,fused,columns";
-- "cluster:128" sets the cluster panel's most rows a block (solve.tune); a suffix
-- "+nola" turns the look-ahead off, "+split" splits blocks over 64 columns in halves
-- ("+split32": over 32, "+split128": no split; by default solve.lua's split_width: 64 in
-- float32, 32 for a block of 64 from n = 8192, 48 in float64), "+spillP" hands a panel to the fused kernel only past P% of its rows
-- in A (solve.tune.cluster_spill; "+spill100": never), "+tallN" splits a panel whose rows
-- the cluster panel cannot keep down to N columns (solve.tune.tall_split; "+tall0": not),
-- "+rowsN" has the fused panel take about N rows a block (solve.tune.fused_rows), "+inA"
-- leaves its rows in A (fused_keep), "+narrowK" / "+narrowM" has the look-ahead update the
-- next panel's columns by its own kernel / by matmul (solve.tune.narrow), "+trsmK" / "+trsmP"
-- its full-width triangular solve by its kernel / as a product with the triangle's inverse
-- (solve.tune.trsm; "+trsmF": with the swaps in one launch at every step), "+fromN" that
-- launch where the block row spans N columns or more (solve.tune.fused_from), "+stepS" its
-- step between panels on the update's stream (solve.tune.step_on),
-- "+whole1" / "+whole0" its blocks with a whole multiprocessor's shared memory or
-- their rows' (solve.tune.cluster_whole), "+taperC" narrows the default block of 128 to 64
-- once at most C columns are left (solve.tune.taper; "+taper0": never), "+wideN" starts
-- the default at 128 from n = N (solve.tune.wide_from; an explicit block does neither),
-- "+pdl0" launches the chain's kernels without the programmatic attribute (solve.tune.programmatic),
-- "+chunksN" the several-GPU LU's first distribution to a peer in N chunks
-- (solve.tune.start_chunks, 8; "+chunks1": one piece), "+p2p" over ranks sends each panel
-- to each rank in an NCCL group rather than broadcasting it (solve.tune.rank_panels),
-- "+ctasN" over ranks caps NCCL's blocks at N on the transfers' communicator
-- (solve.tune.rank_ctas; "+ctas0": comm as it is; neither: the default).
-- float64's products (the trailing update and the other matmul calls) take matmul.tune's
-- dmma knobs from suffixes: "+dtileNAME" (tune.dmma_tile = NAME, e.g. +dtile128x64w8e2),
-- "+dgroupG" (tune.dmma_group = G), "+dtma" (tune.dmma_tma = true: the TMA-fed kernel at any
-- k), "+dtma0" (never).
-- DEVICES: "0,1" (or "all") also times float32 lu + lu_solve with devices =
-- that list (peer copies where the pair allows; "0,1:host" forces pinned-host
-- staging), beside the one-GPU time. DEVICES "comm", under mpirun (one GPU a
-- rank), times float32 lu + lu_solve over the ranks (comm = an NCCL communicator
-- set up through cuda.mpi) beside rank 0's one GPU: A whole on rank 0 (root
-- layout: dealt out, factored, gathered, lu_solve there) and already dealt out
-- (solve with distribution =: the triangular solves over the ranks too); rank 0
-- prints (DEVICES "comm:root": the root layout only). DTYPES: "float32", "float64" or both (the
-- default). Target on two H200s (issue 12): n = 32768
-- float32 >= 1.7x one GPU:  culua bench/solve.lua "" 64 32768 auto all
-- Targets over ranks (issue 39, x4 and x2 kinds, NCCL_NVLS_ENABLE=0):
--   mpirun -np 4 culua bench/solve.lua "" "" 32768,49152 auto comm float32
--     (>= 3.3x one GPU at 49152, >= 2.7x at 32768)
--   mpirun -np 2 culua bench/solve.lua "" "" 32768 auto comm float32   (>= 1.7x)
-- TFLOP/s = (2/3) n^3 / t. Targets on the H100 (issue 12): float32 solve
-- (getrf + getrs) >= 1.0x cuSOLVER at n = 8192 and 16384; float64 LU >= 0.8x
-- dgetrf. Ours includes its two read-backs (the input check and the pivots'
-- status), which synchronize. The seed's method (three kernels a column) is
-- timed once at n <= 8192 as the baseline.
local cuda = require "cuda"
local COMM_MODE = arg[5] == "comm" or arg[5] == "comm:root"
local ROOT_ONLY = arg[5] == "comm:root"
local mpi = COMM_MODE and cuda.mpi or nil
local me = COMM_MODE and mpi.rank or 0   -- (cuda.mpi picks each rank's GPU: its node-local rank)
require("culua.bench").need_devices(1, {quiet = me ~= 0})
local cat = cuda.catalog
local ANCHOR = arg[1]
if ANCHOR == "" then ANCHOR = nil end
local BLOCKS, SIZES = {}, {}
for b in (arg[2] or ""):gmatch("%d+") do BLOCKS[#BLOCKS + 1] = math.tointeger(tonumber(b)) end
for s in (arg[3] or "8192,16384"):gmatch("%d+") do SIZES[#SIZES + 1] = math.tointeger(tonumber(s)) end
local PANELS = {}
for p in (arg[4] or "auto"):gmatch("[%a:%d+]+") do PANELS[#PANELS + 1] = p end
local tune = require("culua.catalog.solve").tune
local mtune = require("culua.catalog.matmul").tune
local ROWS0, SPLIT0, SPILL0, FROWS0 = tune.cluster_rows, tune.split_at, tune.cluster_spill, tune.fused_rows   -- the defaults
local TALL0, TSPILL0, RANK_CTAS0 = tune.tall_split, tune.tall_spill, tune.rank_ctas
local TAPER0, WIDE0, FROM0 = {}, {}, {}
for k, v in pairs(tune.taper) do TAPER0[k] = v end
for k, v in pairs(tune.fused_from) do FROM0[k] = v end
for k, v in pairs(tune.wide_from) do WIDE0[k] = v end
local DEVICES, PEER, COMM
if COMM_MODE then
  local id = mpi.bcast(me == 0 and cuda.nccl.unique_id() or nil, {root = 0})
  COMM = cuda.nccl.comm(id, mpi.size, me, {device = cuda.device().ordinal})
elseif arg[5] and arg[5] ~= "" then
  DEVICES = {}
  if arg[5]:match("^all") then
    for i = 0, cuda.device_count() - 1 do DEVICES[#DEVICES + 1] = i end
  else
    for d in arg[5]:gmatch("%d+") do DEVICES[#DEVICES + 1] = math.tointeger(tonumber(d)) end
  end
  if arg[5]:match(":host$") then PEER = false end
end
if #BLOCKS == 0 then BLOCKS = {false} end
local REPS = 5
local dev = cuda.device()

local run_anchor = require "culua.anchor"
if ANCHOR then
  local f = io.open(ANCHOR)
  if not f then print(("anchor %s is missing: ours alone"):format(ANCHOR)); ANCHOR = nil else f:close() end
end

-- rank 0 alone prints, under mpirun
local print = me == 0 and print or function () end

print(("cuda.catalog lu on %s, median of %d%s"):format(dev.name, REPS,
      ANCHOR and (", anchor " .. ANCHOR) or " (no anchor given: ours alone)"))
if COMM then
  local major, minor, patch = cuda.nccl.version()
  print(("mpirun -np %d: %d ranks, NCCL %d.%d.%d, one GPU a rank (rank 0: device %d)"):format(COMM.size, COMM.size,
        major, minor, patch, dev.ordinal))
end

local function tflops(n, ms) return 2 / 3 * n ^ 3 / (ms * 1e-3) / 1e12 end

-- the median time (ms) of f(A, b) on fresh copies of A0 and b0 (the copies not timed), after a warm-up
local function time(A0, b0, A, b, reps, f)
  return cuda.bench(function () f(A, b) end,
                    {warmup = 1, reps = reps, setup = function () A:copy_from(A0); b:copy_from(b0) end}).median
end

local function line(what, n, ms, anchor_ms, target)
  local s = ("%-44s %10.2f ms %7.2f TFLOP/s"):format(what, ms, tflops(n, ms))
  if anchor_ms then
    s = s .. ("   cuSOLVER %10.2f ms %7.2f TFLOP/s   %.2fx (target >= %.1fx)"):format(anchor_ms, tflops(n, anchor_ms),
                                                                                  anchor_ms / ms, target)
  end
  print(s)
end

-- the median over REPS (after a warm-up) of the slowest rank's time (ms) for f, every rank
-- starting together (setup, untimed, before each)
local function time_ranks(reps, setup, f)
  local ts = {}
  for i = 0, reps do
    setup()
    dev:synchronize()
    mpi.barrier()
    local t0 = cuda.clock()
    f()
    dev:synchronize()
    local t = mpi.allreduce((cuda.clock() - t0) * 1e3, {op = "max"})
    if i > 0 then ts[#ts + 1] = t end
  end
  table.sort(ts)
  return ts[(#ts + 1) // 2]
end

local function moved(info)
  local m = info.moved
  return ("NCCL's blocks %s; rank 0 moved %.2f GB at the start, %.2f GB of panels, %.2f GB at the end"):format(
         info.ctas and "capped at " .. info.ctas or "not capped", m.start / 1e9, m.panels / 1e9, m.finish / 1e9)
end

-- float32 lu + lu_solve over the ranks, both layouts, beside one GPU's ms (rank 0's)
-- (A0, b0: the matrix and right-hand side, A, b the arrays timed: rank 0's, nil elsewhere)
local function over_ranks(n, nb, pname, panel, A0, b0, A, b, ms)
  local G = COMM.size
  local ropts = {block = nb or nil, panel = pname or panel, comm = COMM}
  local info
  local rms = time_ranks(REPS, function ()
    if me == 0 then A:copy_from(A0); b:copy_from(b0) end
  end, function ()
    local piv
    piv, info = cat.lu(A, ropts)
    if me == 0 then cat.lu_solve(A, piv, b, {block = nb or nil}) end
  end)
  print(("%-44s %10.2f ms %7.2f TFLOP/s"):format(("  mpirun -np %d, comm, A on rank 0: lu + lu_solve"):format(G), rms,
      tflops(n, rms)))
  local want = ({[4] = {[32768] = 2.7, [49152] = 3.3}, [2] = {[32768] = 1.7}})[G]
  want = want and want[n]
  print(("  %.2fx one GPU%s; block %d, panels by %s, gathered by %s; %s"):format(ms / rms,
        want and (" (target >= %.1fx)"):format(want) or "", info.block, info.panels_by, info.gathered_by, moved(info)))
  if ROOT_ONLY then return end
  -- already dealt out: each rank's columns (scattered once, untimed), solve over the ranks
  local d = cat.block_cyclic(n, G, info.block)
  local X0 = d:array("float32", me)
  d:scatter(A0, X0, COMM)
  local X, bx = d:array("float32", me), cuda.array("float32", n)
  local dopts = {comm = COMM, distribution = d, overwrite = true, panel = pname or panel}
  local dms = time_ranks(REPS, function ()
    X:copy_from(X0)
    if me == 0 then bx:copy_from(b0) end
  end, function ()
    local _, _, i = cat.solve(X, bx, dopts)
    info = i
  end)
  print(("%-44s %10.2f ms %7.2f TFLOP/s"):format(("  mpirun -np %d, comm, dealt out: solve"):format(G), dms, tflops(n, dms)))
  print(("  %.2fx one GPU%s; %s"):format(ms / dms, want and (" (target >= %.1fx)"):format(want) or "", moved(info)))
  X0:close(); X:close(); bx:close()
  collectgarbage()
end

local DTYPES = {}
for d in (arg[6] or "float32,float64"):gmatch("float%d+") do DTYPES[#DTYPES + 1] = d end
for _, dt in ipairs(DTYPES) do
  local t = dt == "float32" and "f32" or "f64"
  for _, n in ipairs(SIZES) do
    -- (over ranks, rank 0 alone holds the matrix and times one GPU)
    local one = me == 0
    local hA = one and cuda.host_array(dt, {n, n}):random(1, -1, 1)
    local hb = one and cuda.host_array(dt, n):random(2, -1, 1)
    local A0, b0 = one and cuda.array(dt, {n, n}):copy_from(hA), one and cuda.array(dt, n):copy_from(hb)
    hA = nil
    collectgarbage()
    local A, b = one and cuda.array(dt, {n, n}), one and cuda.array(dt, n)
    local getrf, getrs
    if ANCHOR and one then
      getrf = run_anchor(ANCHOR, ("%s %d %d"):format(t, n, REPS), "getrf_ms")
      getrs = run_anchor(ANCHOR, ("%s %d %d"):format(t, n, REPS), "getrs_ms")
    end
    for _, nb in ipairs(BLOCKS) do for _, panel in ipairs(PANELS) do
      local opts = {block = nb or nil}
      -- "cluster:R": the cluster panel with at most R rows a block (solve.tune.cluster_rows)
      local pname, rows = panel:match("^(%a+):(%d+)")
      tune.cluster_rows = rows and math.tointeger(tonumber(rows)) or ROWS0
      -- "+nola": no look-ahead (one stream); "+split": a block over 64 split in halves ("+splitN": over N)
      tune.lookahead = not panel:match("%+nola")
      tune.split_at = panel:match("%+split") and math.tointeger(tonumber(panel:match("%+split(%d+)") or 64)) or SPLIT0
      tune.cluster_spill = panel:match("%+spill(%d+)") and tonumber(panel:match("%+spill(%d+)")) / 100 or SPILL0
      tune.fused_rows = math.tointeger(tonumber(panel:match("%+rows(%d+)") or FROWS0))
      tune.fused_keep = not panel:match("%+inA")
      -- "+tallN": tall panels split down to N columns (solve.tune.tall_split; "+tall0": not split)
      -- "+tspillP": split while more than P% of the rows would stay in A (solve.tune.tall_spill)
      tune.tall_spill = panel:match("%+tspill(%d+)") and tonumber(panel:match("%+tspill(%d+)")) / 100 or TSPILL0
      local tall = panel:match("%+tall(%d+)")
      if tall then tune.tall_split = tall ~= "0" and math.tointeger(tonumber(tall)) or false else tune.tall_split = TALL0 end
      -- "+narrowK" / "+narrowM": the look-ahead's narrow update by its kernel / by matmul
      tune.narrow = ({K = "kernel", M = "matmul", S = "step"})[panel:match("%+narrow(%u)") or ""]
      -- "+whole1" / "+whole0": the cluster panel's blocks ask for all the shared memory there is
      -- (no other block beside them) / only their rows' (solve.tune.cluster_whole; neither: its
      -- default, all of it where the block is split in panels, on one GPU or several)
      local whole = panel:match("%+whole(%d)")
      if whole then tune.cluster_whole = whole == "1" else tune.cluster_whole = nil end
      -- "+stepS": the look-ahead's step between panels on the update's stream (solve.tune.step_on;
      -- "+stepQ" or neither: on the panels', the default)
      tune.step_on = panel:match("%+stepS") and "S" or "Q"
      -- "+chunksN": the first distribution to a peer in N chunks (solve.tune.start_chunks; 8)
      tune.start_chunks = math.tointeger(tonumber(panel:match("%+chunks(%d+)") or 8))
      -- "+p2p": over ranks, each panel sent to each rank rather than broadcast (solve.tune.rank_panels)
      tune.rank_panels = panel:match("%+p2p") and "send" or "broadcast"
      -- "+gatherE": over ranks, the factors back to root after the last step (solve.tune.rank_gather;
      -- else a block row at a time as it becomes final)
      tune.rank_gather = panel:match("%+gatherE") and "end" or "rows"
      -- "+scatterS": over ranks, the columns dealt out by sends (solve.tune.rank_scatter; else broadcasts)
      tune.rank_scatter = panel:match("%+scatterS") and "send" or "broadcast"
      -- "+ctasN": over ranks, NCCL's blocks capped at N (solve.tune.rank_ctas; "+ctas0": no cap)
      local ctas = panel:match("%+ctas(%d+)")
      if ctas == nil then tune.rank_ctas = RANK_CTAS0
      else tune.rank_ctas = ctas ~= "0" and math.tointeger(tonumber(ctas)) end
      -- "+trsmK" / "+trsmP" / "+trsmF": the full-width triangular solve by its kernel / as a
      -- product / with the swaps in one launch at every step (block_row)
      tune.trsm = ({K = "kernel", P = "product", F = "fused"})[panel:match("%+trsm(%u)") or ""]
      -- "+fromN": block_row where the block row spans at least N columns, in this dtype too
      -- (solve.tune.fused_from[dtype])
      local from = panel:match("%+from(%d+)")
      tune.fused_from[dt] = from and math.tointeger(tonumber(from)) or FROM0[dt]
      -- "+taperC": the default block of 128 narrowed to 64 for the last C columns
      -- (solve.tune.taper; "+taper0": never); "+wideN": that block from n = N (solve.tune.wide_from)
      local taper, wide = panel:match("%+taper(%d+)"), panel:match("%+wide(%d+)")
      tune.taper[dt] = taper and math.tointeger(tonumber(taper)) or TAPER0[dt]
      tune.wide_from[dt] = wide and math.tointeger(tonumber(wide)) or WIDE0[dt]
      tune.programmatic = not panel:match("%+pdl0") and nil
      -- float64's products: matmul.tune's dmma knobs ("+dtileNAME", "+dgroupG", "+dtma", "+dtma0")
      mtune.dmma_tile = panel:match("%+dtile(%w+)")
      mtune.dmma_group = math.tointeger(tonumber(panel:match("%+dgroup(%d+)") or ""))
      local dtma = panel:match("%+dtma(%w*)")
      mtune.dmma_tma = ({[""] = true, ["0"] = false})[dtma or "none"]
      pname = pname or panel:match("^(%a+)")
      local lopts = {block = nb or nil, panel = pname or panel}
      local what = ("%s n = %d block %s %s"):format(dt, n, nb or "default", panel)
      if dt == "float32" then
        local ms = one and time(A0, b0, A, b, REPS, function (a, x) local piv = cat.lu(a, lopts); cat.lu_solve(a, piv, x, opts) end)
        line(what .. ": lu + lu_solve", n, ms or 0, getrf and getrs and getrf + getrs, 1.0)
        if COMM then over_ranks(n, nb, pname, panel, A0 or nil, b0 or nil, A or nil, b or nil, mpi.bcast(ms or 0)) end
        if DEVICES then
          local mopts = {block = nb or nil, panel = pname or panel, devices = DEVICES, peer = PEER}
          local info
          local mms = time(A0, b0, A, b, REPS, function (a, x)
            local piv
            piv, info = cat.lu(a, mopts)
            cat.lu_solve(a, piv, x, opts)
          end)
          line(("%s, devices {%s}: lu + lu_solve"):format(what, table.concat(DEVICES, ",")), n, mms)
          print(("  %.2fx one GPU (target on two H200s at n = 32768: >= 1.7x); transfer %s%s"):format(
                ms / mms, info.transfer, info.why and (" (" .. info.why .. ")") or ""))
        end
      elseif one then
        local ms = time(A0, b0, A, b, REPS, function (a) cat.lu(a, lopts) end)
        line(what .. ": lu", n, ms, getrf, 1.0)   -- (issue 40: >= 1.0x cuSOLVER getrf)
      end
    end end
    -- the residual of one solve, so that a fast wrong answer shows
    local x = one and cat.solve(A0, b0)
    if one then
      local hx = cuda.host_array(dt, n)
      x:copy_to(hx)
      hA = cuda.host_array(dt, {n, n})
      A0:copy_to(hA)
      local ratio = cat.reference.lu_residual(hA, hx, hb) / (n * (dt == "float32" and 2.0 ^ -24 or 2.0 ^ -53))
      print(("%-44s ratio %.3f%s"):format("  residual ||b - A x|| / (||A|| ||x|| n eps)", ratio, ratio <= 10 and "" or "  WRONG"))
      if n <= 8192 and dt == "float32" then
        local ms = time(A0, b0, A, b, 1, function (a, bb) cat.solve(a, bb, {method = "seed", overwrite = true}) end)
        line(("  seed method (Gauss-Jordan, 3 kernels a column)"), n, ms)
      end
    end
    A0, b0, A, b, x, hA = nil, nil, nil, nil, nil, nil
    collectgarbage()
  end
end
