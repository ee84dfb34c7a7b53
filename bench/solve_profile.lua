-- bench/solve_profile.lua: where cuda.catalog.lu's time goes on one GPU. The blocked LU's
-- steps (the panel; the row swaps and the triangular solve, in one launch, the block row,
-- where lu takes it; the trailing update through cuda.catalog.matmul) on one stream, one
-- after the other, with events around each kind of step, summed over the panels; the second
-- of two runs is printed. (lu itself overlaps the panels with the updates when the panel is
-- the cluster's: the look-ahead; not here.)
--   culua bench/solve_profile.lua [N [BLOCK [DTYPE [TMA [PANEL]]]]]
-- N 8192, BLOCK 64, DTYPE float32; TMA "on" | "off" | "auto" (the update's matmul option
-- tma: true, false or nil, the default); PANEL the lu option panel ("auto", the default,
-- "cluster", "fused", "columns"), with the suffixes below. The figures are per step kind, in ms, in % of the
-- whole, and in us a column: the panel's cost a column is what bounds this LU.
local cuda = require "cuda"
local core = require "culua.catalog.core"
local n = math.tointeger(tonumber(arg[1] or 8192))
local nb = math.tointeger(tonumber(arg[2] or 64))
local dt = arg[3] or "float32"
local tma = ({on = true, off = false})[arg[4] or "auto"]
local PANEL = arg[5] or "auto"
-- "fused+rows256": the fused panel with about 256 rows a block (solve.tune.fused_rows);
-- "+inA": its rows left in A (solve.tune.fused_keep = false)
do
  local tune = require("culua.catalog.solve").tune
  tune.fused_rows = math.tointeger(tonumber(PANEL:match("%+rows(%d+)") or tune.fused_rows))
  tune.fused_keep = not PANEL:match("%+inA")
  PANEL = PANEL:match("^%a+")
end
if not n or not nb or (dt ~= "float32" and dt ~= "float64") then
  io.stderr:write("usage: culua bench/solve_profile.lua [N [BLOCK [float32|float64 [on|off|auto [PANEL]]]]]\n")
  os.exit(1)
end
require("culua.bench").need_devices()
local dev = cuda.device(0)
-- the family's kernels (each from its part's file) and the shapes they launch with
local solve_common = require "culua.catalog.solve_common"
local K, shapes = solve_common.kernels(dev, dt), solve_common.shapes
local cd = core.ceil_div
local A = cuda.array(dt, {n, n})
local hA = cuda.host_array(dt, {n, n}):random(5, -1, 1)
local ipiv = cuda.array("int32", n)
local status = cuda.array("int32", 1):fill(0)
local s = cuda.stream()
-- float32's swaps and block row of U in one launch where lu takes them (lua/catalog/lu.lua's
-- one_launch and fuse: solve.tune.trsm, fused_from[dtype]), else laswp and trsm's kernel
local lu = require "culua.catalog.lu"
local fused = lu.one_launch(K, dev, dt)
local factor = require("culua.catalog.solve").panel_factor(PANEL, dev, s, n, A, ipiv, status)
local events, steps

local function mark() local e = cuda.event(); e:record(s); events[#events + 1] = e; return #events end
local function step(kind, fn) local a = mark(); fn(); steps[#steps + 1] = {kind, a, mark()} end

for run = 1, 2 do
  A:copy_from(hA)
  events, steps = {}, {}
  local first = mark()
  for j0 = 0, n - 1, nb do
    local jb = math.min(nb, n - j0)
    local jend = j0 + jb
    step("panel", function ()
      factor(j0, jb)
    end)
    local fuses = jend < n and lu.fuse(fused, n - jend)
    if fuses then
      step("block row", function ()
        lu.block_row(K, dev, s, n, n, j0, jend, jend, j0, jb, lu.row_plan(K, dev, s, j0, jb, ipiv, 0), A, j0 * n + j0, n, A)
      end)
    else
      step("swaps", function ()
        K("laswp"):launch({grid = math.max(1, math.min(cd(n - jb, shapes.SWAP_BYTES // (dt == "float32" and 4 or 8)), core.sm_count(dev) * 8)),
                           block = shapes.SWAP_THREADS, stream = s},
                          n, n, j0, jend, j0, jend, ipiv, A)
      end)
    end
    if jend < n then
      local rest = n - jend
      if not fuses then step("trsm", function ()
        local tr = K("trsm_lower")
        tr:set_max_dynamic_shared(jb * jb * (dt == "float32" and 4 or 8))
        tr:launch({grid = cd(rest, 32), block = {32, 8}, shared = jb * jb * (dt == "float32" and 4 or 8), stream = s},
                  jb, rest, A, j0 * n + j0, n, A, j0 * n + jend, n)
      end) end
      step("update", function ()
        cuda.catalog.matmul(A:view(jend * n + j0 + 1, (rest - 1) * n + jb), A:view(j0 * n + jend + 1, (jb - 1) * n + rest),
                            A:view(jend * n + jend + 1, (rest - 1) * n + rest),
                            {m = rest, n = rest, k = jb, lda = n, ldb = n, ldc = n, alpha = -1, beta = 1,
                             stream = s, tma = tma})
      end)
    end
  end
  local last = mark()
  s:synchronize()
  if run == 2 then
    local sum = {}
    for _, st in ipairs(steps) do sum[st[1]] = (sum[st[1]] or 0) + events[st[2]]:elapsed(events[st[3]]) end
    local total = events[first]:elapsed(events[last])
    print(("lu on %s, %s n = %d, block %d, panel %s, update tma %s: %.2f ms, %.2f TFLOP/s"):format(dev.name, dt, n, nb,
          PANEL, tostring(tma == nil and "auto" or tma), total, 2 / 3 * n ^ 3 / total / 1e9))
    for _, kind in ipairs{"panel", "swaps", "trsm", "block row", "update"} do
      local ms = sum[kind]
      if ms then print(("  %-9s %9.2f ms %6.1f%% %7.2f us a column"):format(kind, ms, 100 * ms / total, 1000 * ms / n)) end
    end
  end
end
