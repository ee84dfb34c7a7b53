-- cuda.catalog without a GPU: what is listed, argument checks, NVRTC variants of the
-- embedded sources, the device headers in user kernels, the CPU reference.
local T = require "culua.tap"
local cuda = require "cuda"

local list = cuda.catalog.list()
T.is_deeply(list.families, {"matmul", "matmul_sm90", "matmul_sm90_fast", "matmul_lowp", "matmul_lowp_sm90", "matmul_lowp_fp8",
                            "matmul_transpose", "barrier", "scan", "histogram", "sort", "sort_counts", "sort_multi", "solve", "lu",
                            "lu_panel", "lu_multi", "triangular", "seed", "cast"},
            "twenty kernel files (cast: astype; matmul_lowp, matmul_lowp_sm90, matmul_lowp_fp8: float16, bfloat16, fp8; "
            .. "matmul_transpose: B^T for fp8 and transb; sort_multi: the sort over GPUs and ranks)")
T.is_deeply(list.headers, {"culua/barrier.cuh", "culua/common.cuh", "culua/lowp.cuh", "culua/matmul_lowp.cuh", "culua/sm90.cuh",
                           "culua/solve.cuh", "culua/sort.cuh"}, "seven device headers (lowp, matmul_lowp: float16, bfloat16, fp8)")
T.is_deeply(list.matmul.variants, {"naive", "row", "column", "tiled", "fast", "tf32", "dmma"}, "matmul variants")
T.is_deeply(list.matmul.dtypes.float64, {"naive", "tiled", "fast", "dmma"}, "float64 variants")
T.is_deeply(list.barrier.kinds, {"seed", "seed_asm", "sense", "grid", "coop"}, "barrier kinds")
T.ok(rawequal(cuda.catalog, require "culua.catalog"), "cuda.catalog is the culua.catalog module")
T.is(cuda.type(cuda.catalog), nil, "cuda.type of a table is fail")

-- argument checks that need no device memory
T.error_like(function () cuda.catalog.matmul(1, 2, 3) end, "cuda%.catalog%.matmul: A must be a cuda%.array, got number", "A not an array")
T.error_like(function () cuda.catalog.matmul(cuda.host_array("float32", {2, 2}), 2, 3) end,
             "A must be a cuda%.array, got cuda%.host_array", "a host array is not a device array")
T.error_like(function () cuda.catalog.barrier.xpx("nope") end, "kind must be one of none, block, seed, seed_asm, sense, grid, coop, got nope", "unknown barrier kind")
T.error_like(function () cuda.catalog.kernel("fft", "x") end, "no kernel family 'fft'", "unknown family")

-- a misspelt option is refused, naming it and the known ones, before any device work;
-- the error points at the caller's line, not into the catalog's modules
local here = debug.getinfo(1, "S").short_src
for _, c in ipairs{
  {function () cuda.catalog.matmul(1, 2, 3, {varient = "fast"}) end, "matmul: unknown option 'varient' %(known: variant, alpha"},
  {function () cuda.catalog.matmul(1, 2, 3, "fast") end, "matmul: opts must be a table, got string"},
  {function () cuda.catalog.barrier.xpx("seed", 1, 2) end, "barrier.xpx: X must be a cuda.array, got number"},
  {function () cuda.catalog.barrier.launch(nil, {block = 32, grdi = 4}) end, "barrier.launch: unknown option 'grdi'"},
} do
  T.error_like(c[1], "^" .. here:gsub("%p", "%%%0") .. ":%d+: cuda%.catalog%." .. c[2], c[2]:gsub("%%", ""))
end

-- every family's source compiles with NVRTC (as on-demand variants do)
local src = cuda._catalog.source("matmul")
local cases = {
  {"tiled", "f32", 32, 8}, {"tiled", "f32", 8, 2}, {"tiled", "f64", 32, 4}, {"naive", "f32", 32, 4},
  {"row", "f32", 128, 2}, {"column", "f32", 512, 8}, {"naive", "f64", 8, 1},
}
for _, c in ipairs(cases) do
  local name = ("culua_matmul_%s_%s_%d_%d"):format(c[1], c[2], c[3], c[4])
  local p = cuda.compile(src, {options = {"-std=c++17", "-arch=compute_90", "-DCULUA_ALGO=" .. c[1], "-DCULUA_T=" .. c[2],
                                           "-DCULUA_P1=" .. c[3], "-DCULUA_P2=" .. c[4]}, name = "matmul.cu"})
  T.is_deeply(cuda.signature(p.ptx, name), {"u32", "u32", "u32", c[2], "u64", "u64", c[2], "u64", "u32", "u32", "u32"},
              name .. " compiles by NVRTC with the expected signature")
end
local pb = cuda.compile(cuda._catalog.source("barrier"), {options = {"-std=c++17", "-arch=compute_90"}, name = "barrier.cu"})
T.like(pb.ptx, "%.entry culua_xpx_grid", "the barrier family compiles by NVRTC")
-- the Hopper families share <culua/sm90.cuh>, embedded like the other headers
for _, fe in ipairs{{"matmul_sm90", "culua_matmul_tf32_wgmma"}, {"matmul_sm90_fast", "culua_matmul_fast_tma"},
                    {"matmul_lowp_sm90", "culua_matmul_lowp_wgmma_bf16"}, {"matmul_lowp_fp8", "culua_matmul_lowp_fp8_e4m3_e5m2_n256s4"}} do
  local fam, entry = fe[1], fe[2]
  local p = cuda.compile(cuda._catalog.source(fam), {options = {"-std=c++17", "-arch=compute_90a", "-default-device"},
                                                  name = fam .. ".cu"})
  T.like(p.ptx, "%.entry " .. entry, fam .. " compiles by NVRTC for compute_90a")
end

-- the kernels' numbers that Lua reads (core.constants), against what the compiler makes of
-- them: a kernel a number stores it, and its PTX shows the value; and the families' copies
-- of them are what they read
local core = require "culua.catalog.core"
for _, hdr in ipairs{{"culua/solve.cuh", "culua::solve::"}, {"culua/barrier.cuh", ""}, {"culua/sort.cuh", ""}} do
  local nums, names, src = core.constants(hdr[1]), {}, {"#include <" .. hdr[1] .. ">"}
  for name, v in pairs(nums) do
    if math.type(v) == "integer" then names[#names + 1] = name end   -- (functions: below)
  end
  table.sort(names)
  for _, name in ipairs(names) do
    src[#src + 1] = ('extern "C" __global__ void k_%s(long long *x) { *x = %s%s; }'):format(name, hdr[2], name)
  end
  local ptx = cuda.compile(table.concat(src, "\n"), {options = {"-std=c++17", "-arch=compute_80"}}).ptx
  local bad = {}
  for _, name in ipairs(names) do
    local body = ptx:match("%.entry k_" .. name .. "%(.-\n}") or ""
    local v = body:match("mov%.[bu]64%s+%%rd%d+,%s*(%-?%d+);") or body:match("st%.global%.[bu]64%s+%[[^%]]+%],%s*(%-?%d+);")
    if math.tointeger(v) ~= nums[name] then bad[#bad + 1] = ("%s: %s, the compiler %s"):format(name, nums[name], v) end
  end
  T.ok(#names >= 8 and #bad == 0, ("core.constants(%q): %d numbers, as the compiler has them"):format(hdr[1], #names),
       table.concat(bad, "; "))
end
-- a function-like macro is a Lua function of integers, evaluated as the compiler does
do
  local cases = {{"culua/sort.cuh", "SORT_TILE_REST", {384}}, {"culua/sort.cuh", "SORT_TILE_ITEMS", {512, 13, 4}},
                 {"culua/sm90.cuh", "CULUA_SM90_SHARED", {256, 128, 32, 4}}}
  local src, want = {}, {}
  for i, c in ipairs(cases) do
    do
      local args = table.concat(c[3], ", ")
      src[#src + 1] = ('#include <%s>\nextern "C" __global__ void f%d(long long *x) { *x = %s(%s); }'):format(c[1], i, c[2], args)
      want[i] = core.constants(c[1])[c[2]](table.unpack(c[3]))
    end
  end
  local ptx = cuda.compile(table.concat(src, "\n"), {options = {"-std=c++17", "-arch=compute_90a"}}).ptx
  local bad = {}
  for i in pairs(want) do
    local body = ptx:match("%.entry f" .. i .. "%(.-\n}") or ""
    local v = body:match("mov%.[bu]64%s+%%rd%d+,%s*(%-?%d+);") or body:match("st%.global%.[bu]64%s+%[[^%]]+%],%s*(%-?%d+);")
    if math.tointeger(v) ~= want[i] then bad[#bad + 1] = ("%s: %s, the compiler %s"):format(cases[i][2], want[i], v) end
  end
  T.ok(#bad == 0, "core.constants: function-like macros (SORT_TILE_*, CULUA_SM90_SHARED) as the compiler has them",
       table.concat(bad, "; "))
  T.is(#core.instances("matmul", "CULUA_DMMA"), 11, "core.instances: matmul.cu's eleven dmma tiles")
  T.is_deeply(core.instances("matmul", "CULUA_DMMA")[2], {"128x64", 128, 64, 2, 2, 3, 2, 0, 16, "false"}, "with their shapes")
end
local solve_nums = core.constants("culua/solve.cuh")
T.is(solve_nums.PANEL_SLOT, 2 + solve_nums.MAXBLOCK, "core.constants: an expression of names above it")
T.is(cuda.catalog.barrier.words, core.constants("culua/barrier.cuh").CULUA_BARRIER_WORDS, "barrier.words is the header's")
local sort_nums = core.constants("sort")
local sort_shared = core.constants("culua/sort.cuh")
T.ok(sort_nums.SORT_THREADS == 256 and sort_nums.SORT_SHARED == 48 * 1024 and sort_shared.SORT_COUNT == (1 << 30) - 1
     and sort_shared.SORT_FULL == 0xffffffff,
     "core.constants of a kernel file and a header: a name given a name (#ifdef) then a number, suffixed and hex literals")
T.error_like(function () core.constants("culua/nope.cuh") end, "no device header or kernel file 'culua/nope.cuh'",
             "core.constants: an unknown header")

-- the device headers in a user kernel, no flags
local user = cuda.compile([[
#include <culua/barrier.cuh>
extern "C" __global__ void twophase(float *x, unsigned *state) {
  culua::grid_barrier bar(state);
  culua_seed_barrier_init();
  x[culua_block_rank()] = 1.0f;
  bar.sync();
  culua_sense_barrier(state);
  culua_seed_barrier(state);
  culua_seed_barrier_asm(state);
}
]], {options = {"-arch=compute_90"}})
T.like(user.ptx, "%.entry twophase", "<culua/barrier.cuh> is found by user kernels")
T.like(user.ptx, "atom%.global%.inc%.u32", "with the grid barrier's counters")
local mine = cuda.compile('#include <culua/common.cuh>\nextern "C" __global__ void k(int *x) { x[0] = MINE; }',
                          {headers = {["culua/common.cuh"] = "#define MINE 42\n"}, options = {"-arch=compute_90"}})
T.like(mine.ptx, "42", "a user header of the same name wins over the catalog's")

-- the CPU reference
local A = cuda.host_array("float32", {2, 3}):copy_from({{1, 2, 3}, {4, 5, 6}})
local B = cuda.host_array("float64", {3, 2}):copy_from({{1, 0}, {0, 1}, {1, 1}})
local Cr = cuda.host_array("float64", {2, 2}):fill(1)
cuda.catalog.reference.matmul(A, B, Cr, 2, 1)
T.is_deeply(Cr:totable(), {{9, 11}, {21, 23}}, "reference.matmul computes alpha*A*B + beta*C")
T.error_like(function () cuda.catalog.reference.matmul(A, A, Cr) end, "shapes 2x3 %* 2x3 %-> 2x2 do not fit", "reference checks shapes")
-- every catalog call is an NVTX range of its name, closed when the call raises
pcall(cuda.catalog.scan, 1)
T.is(cuda.nvtx.depth(), 0, "a catalog call that raised left no NVTX range open")
-- the float64 TMA kernel's grid and stream-K on bench/fakecuda.c (an H100 of 132
-- multiprocessors, nothing behind it), in a child culua: the launch's grid, stream-K blocks
-- and their tiles, by default (where it saves 2% of the waves, 10% under one) and by option
do
  local cases = {   -- m, n, k, opts, tune.dmma_persistent, "grid sk sk_tiles", what
    {4096, 4096, 4096, nil, nil, "264 132 100", "1024 tiles, the last wave 0.76 full: 132 blocks share 100 tiles"},
    {8192, 8192, 8192, nil, nil, "264 132 136", "4096 tiles, the last wave 4 tiles: 132 blocks share 136"},
    {4096, 4096, 4096, {streamk = false}, nil, "132 0 0", "streamk = false"},
    {4096, 4096, 4096, nil, false, "1056 132 100", "a block a tile: 924 tiles, then 132 blocks share 100"},
    {4096, 4096, 4096, nil, 5, "137 132 100", "dmma_persistent = 5: 5 blocks take the 924 tiles, then 132 share 100"},
    {16384, 16384, 1024, nil, nil, "132 0 0", "16384 tiles: the last wave saves under 2%"},
    {1024, 1024, 4096, nil, nil, "64 0 0", "64 tiles, under half a wave"},
    {1152, 1152, 2048, nil, nil, "132 132 81", "81 tiles: 132 blocks share them all"},
    {1000, 1030, 1024, {streamk = 7}, nil, "70 7 9", "streamk = 7, 72 tiles: 63 in 63 blocks, 7 share 9"},
  }
  local code = [[
local cuda = require "cuda"
local mmod = require "culua.catalog.matmul"
local seen
function on_launch (k, c, ...)
  if k.name == "culua_matmul_dmma_tma" then
    local a = table.pack(...)
    seen = ("%d %d %d"):format(c.grid, a[11], a[12])
  end
end
local function case(i, m, n, k, opts, pers)
  seen = nil
  mmod.tune.dmma_persistent = pers
  local A, B, C = cuda.array("float64", {m, k}), cuda.array("float64", {k, n}), cuda.array("float64", {m, n})
  opts.variant = "dmma"
  local ok, err = pcall(cuda.catalog.matmul, A, B, C, opts)
  print(("case %d: %s"):format(i, ok and tostring(seen) or err))
end
]]
  local calls = {}
  for i, c in ipairs(cases) do
    local o = c[4] and ("{streamk = %s}"):format(tostring(c[4].streamk)) or "{}"
    calls[i] = ("case(%d, %d, %d, %d, %s, %s)"):format(i, c[1], c[2], c[3], o, tostring(c[5]))
  end
  T.fake_each(code, calls, function (i, got)
    local c = cases[i]
    T.is(got, c[6], ("fake H100: float64 %dx%dx%d: %s"):format(c[1], c[3], c[2], c[7]))
  end)
end

-- float32 tf32 on a fake H100 writes C by TMA stores (the launch's last argument 1, C's map
-- before it) where C's first element, ldc and a row are whole 16 bytes, with no split-K, and
-- tune.tma_store is not false; else 0. fast takes neither argument.
do
  local cases = {   -- m, n, k, ldc, C's first element, opts, tune.tma_store, the launch's last argument, what
    {4000, 4160, 256, 4160, 1, {variant = "tf32"}, nil, "1", "rows of 16640 bytes: TMA stores"},
    {4000, 4160, 256, 4164, 1, {variant = "tf32"}, nil, "1", "ldc 4164"},
    {4000, 4160, 256, 4162, 1, {variant = "tf32"}, nil, "0", "ldc 4162 (16648 bytes): from registers"},
    {4000, 4159, 256, 4160, 1, {variant = "tf32"}, nil, "0", "n 4159: a row ends inside 16 bytes"},
    {4000, 4160, 256, 4160, 3, {variant = "tf32"}, nil, "0", "C from its third element"},
    {4000, 4160, 256, 4160, 5, {variant = "tf32"}, nil, "1", "C from its fifth (16 bytes in)"},
    {4000, 4160, 256, 4160, 1, {variant = "tf32"}, false, "0", "tune.tma_store = false"},
    {4000, 4160, 256, 4160, 1, {variant = "tf32", splits = 3}, nil, "0", "split-K: the partials, then the sum"},
    {4000, 4160, 256, 4160, 1, {variant = "tf32", streamk = 7}, nil, "1", "stream-K"},
    {1, 4160, 256, (1 << 31) - 4, 1, {variant = "tf32", splits = 1}, nil, "0",
     "rows 2^33 bytes apart: from registers (a tensor map's stride stops at 2^32)"},
    {4000, 4160, 2048, 4160, 1, {variant = "fast"}, nil, "-", "fast: no TMA stores"},
    {4000, 4160, 2048, 4160, 1, {variant = "fast"}, 0, "cuda%.catalog%.matmul: tune%.tma_store must be a boolean, got 0",
     "fast: tune.tma_store = 0 refused all the same"},
    {4000, 4160, 256, 4160, 1, {variant = "tf32", splits = 2}, "no",
     "cuda%.catalog%.matmul: tune%.tma_store must be a boolean, got no", "split-K: 'no' refused all the same"},
    {4000, 4160, 256, 4160, 1, {variant = "tf32"}, "no", "cuda%.catalog%.matmul: tune%.tma_store must be a boolean, got no",
     "'no' refused"},
  }
  local code = [[
local cuda = require "cuda"
local mmod = require "culua.catalog.matmul"
local seen
function on_launch (k, c, ...)
  if seen and (k.name == "culua_matmul_tf32_wgmma" or k.name == "culua_matmul_fast_tma") then
    local n = select("#", ...)
    seen[#seen + 1] = n == 15 and tostring(select(15, ...)) or n == 13 and "-" or n .. " arguments"
  end
end
local function case(i, m, n, k, ldc, first, opts, tma_store)
  mmod.tune.tma_store = tma_store
  local A, B = cuda.array("float32", {m, k}), cuda.array("float32", k * 4160)   -- (B's rows 4160 apart)
  local C = cuda.array("float32", first - 1 + (m - 1) * ldc + n):view(first, (m - 1) * ldc + n)
  opts.m, opts.n, opts.k, opts.ldb, opts.ldc = m, n, k, 4160, ldc
  seen = {}
  local ok, err = pcall(cuda.catalog.matmul, A, B, C, opts)
  print(("case %d: %s"):format(i, ok and table.concat(seen, "; ") or tostring(err)))
  mmod.tune.tma_store, seen = nil, nil
end
]]
  local calls = {}
  for i, c in ipairs(cases) do
    local o = {}
    for f, v in pairs(c[6]) do o[#o + 1] = ("%s = %q"):format(f, v) end
    calls[i] = ("case(%d, %d, %d, %d, %d, %d, {%s}, %q)"):format(i, c[1], c[2], c[3], c[4], c[5], table.concat(o, ", "), c[7])
  end
  T.fake_each(code, calls, function (i, got)
    local c = cases[i]
    local name = ("fake H100: float32 %dx%dx%d, ldc %d, C from element %d, %s, tma_store %s: %s"):format(
                 c[1], c[3], c[2], c[4], c[5], c[6].variant .. (c[6].splits and " splits" or c[6].streamk and " streamk" or ""),
                 tostring(c[7]), c[9])
    if c[8]:find("must be") then T.like(got, c[8], name) else T.is(got, c[8], name) end
  end)
end

T.done_testing()
