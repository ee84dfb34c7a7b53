-- cuda.catalog.matmul in low precision (kernels/matmul_lowp*.cu): float16 and bfloat16 A and B
-- with float32 sums, fp8 (e4m3, e5m2) with scales; against the float64 CPU reference.
-- Without a GPU: the kernels' NVRTC compiles and signatures, the reference, the refusals.
local T = require "culua.tap"
local cuda = require "cuda"
local core = require "culua.catalog.core"
local mmod = require "culua.catalog.matmul"
local mm, ref = cuda.catalog.matmul, cuda.catalog.reference.matmul

-- {------ without a GPU

local info = cuda.catalog.list().matmul
for _, dt in ipairs{"float16", "bfloat16", "float8_e4m3", "float8_e5m2"} do
  T.is_deeply(info.dtypes[dt], {"mma"}, dt .. ": the mma kernel")
end

-- every pair compiles by NVRTC (as the variants not prebuilt are), with the signature the
-- catalog launches; fp8 for compute 8.9 and 9.0, and for 8.0 too (a trap there: refused first)
local src = cuda._catalog.source("matmul_lowp")
local sig = {"u32", "u32", "u32", "f32", "u64", "u64", "f32", "u64", "u32", "u32", "u32"}
local pairs16 = {{"f16", "f16", "f16"}, {"f16", "f16", "f32"}, {"bf16", "bf16", "bf16"}, {"bf16", "bf16", "f32"}}
local pairs8 = {{"e4m3", "e4m3", "bf16"}, {"e4m3", "e5m2", "f16"}, {"e5m2", "e4m3", "f32"}, {"e5m2", "e5m2", "bf16"}}
local function compile(c, arch)
  return cuda.compile(src, {options = {"-std=c++17", "-arch=" .. arch, "-DCULUA_LOWP_A=" .. c[1], "-DCULUA_LOWP_B=" .. c[2],
                                       "-DCULUA_LOWP_C=" .. c[3]}, name = "matmul_lowp.cu"})
end
for _, list in ipairs{{pairs16, "compute_80"}, {pairs8, "compute_89"}, {{pairs8[1]}, "compute_90"}, {{pairs8[2]}, "compute_80"}} do
  for _, c in ipairs(list[1]) do
    local p = compile(c, list[2])
    local name = ("culua_matmul_lowp_%s_%s_%s"):format(c[1], c[2], c[3])
    T.is_deeply(cuda.signature(p.ptx, name), sig, name .. " compiles by NVRTC for " .. list[2])
    T.is_deeply(cuda.signature(p.ptx, name .. "_vec"), sig, name .. "_vec too")
    if list[2] ~= "compute_80" or c[1]:find("f") then
      local shape = c[1]:find("e") and "m16n8k32" or "m16n8k16"
      T.like(p.ptx, "mma%.sync%.aligned%." .. shape, name .. ": " .. shape .. " on tensor cores")
    end
  end
end
-- the prebuilt ones are in the fatbin's entries
local entries = cuda._catalog.entries("matmul_lowp")
for _, c in ipairs{pairs16[1], pairs16[3]} do
  local name = ("culua_matmul_lowp_%s_%s_%s_vec"):format(c[1], c[2], c[3])
  T.like(entries, "%.entry " .. name .. "%(", name .. " is prebuilt")
end
local entries90 = cuda._catalog.entries("matmul_lowp_sm90")
local sig90 = {"u32", "u32", "u32", "f32", "b8[128]", "b8[128]", "f32", "u64", "u32", "u32"}
for _, t in ipairs{"f16", "bf16"} do
  local name = "culua_matmul_lowp_wgmma_" .. t
  T.is_deeply(cuda.signature(entries90, name), sig90, name .. " is prebuilt (sm_90a): two tensor maps by value")
end
-- ss and fp8 also take C's map (TMA stores) and whether to use it
local sig90c = {"u32", "u32", "u32", "f32", "b8[128]", "b8[128]", "f32", "u64", "u32", "u32", "b8[128]", "u32"}
for _, t in ipairs{"ss_f16", "ss_bf16"} do
  local name = "culua_matmul_lowp_wgmma_" .. t
  T.is_deeply(cuda.signature(entries90, name), sig90c, name .. " is prebuilt (sm_90a): three tensor maps by value")
end
-- the transposes of kernels/matmul_transpose.cu (built for every device): fp8's B^T before its
-- product on 9.0, and B from the B^T that transb gives, elements of 1, 2, 4 and 8 bytes
local entriesT = cuda._catalog.entries("matmul_transpose")
for _, e in ipairs{1, 2, 4, 8} do
  T.is_deeply(cuda.signature(entriesT, "culua_matmul_transpose_" .. e), {"u32", "u32", "u64", "u32", "u64", "u32"},
              "culua_matmul_transpose_" .. e .. " is prebuilt")
end
-- fp8 on 9.0: the products of kernels/matmul_lowp_fp8.cu (sm_90a), every pair in the default
-- tile, and their PTX (NVRTC for compute_90a) on wgmma's fp8 shapes
local entries8 = cuda._catalog.entries("matmul_lowp_fp8")
local fp8_plans = mmod._fp8_plans()
local n8 = core.constants("matmul_lowp_fp8")
for _, pair in ipairs{"e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3", "e5m2_e5m2"} do
  local p = fp8_plans.pairs[pair]
  T.is(p and p.default, "n256s4", pair .. ": built, 128 x 256 tiles and 4 stages by default")
  for _, tile in ipairs(p and p.names or {}) do
    local name = ("culua_matmul_lowp_fp8_%s_%s"):format(pair, tile)
    T.is_deeply(cuda.signature(entries8, name), sig90c, name .. " is prebuilt (sm_90a): three tensor maps by value")
    local t = p.tiles[tile]
    T.ok(t.shared == t.stages * (n8.LOWP_FP8_BM + t.bn) * n8.LOWP_FP8_BK + 2 * t.stages * 8 + 1024 + 2 * 2 * 64 * 128 + 1024
         and t.shared <= 227 * 1024, name .. ": LOWP_FP8_SHARED, the ring, its barriers and C's staging, within 227 KiB")
  end
end
T.is_deeply(fp8_plans.pairs.e4m3_e4m3.names, {"n256s4", "n256s3", "n128s4", "n128s6", "n256s4c2"},
            "e4m3 x e4m3: the sweep's tiles too, and clusters of two")
T.is(fp8_plans.pairs.e4m3_e4m3.tiles.n256s4c2.cluster, 2, "  n256s4c2: clusters of two blocks")
do
  local p = cuda.compile(cuda._catalog.source("matmul_lowp_fp8"), {options = {"-std=c++17", "-arch=compute_90a"},
                                                                    name = "matmul_lowp_fp8.cu"})
  for _, ins in ipairs{"m64n256k32.f32.e4m3.e4m3", "m64n256k32.f32.e4m3.e5m2", "m64n256k32.f32.e5m2.e4m3",
                       "m64n256k32.f32.e5m2.e5m2", "m64n128k32.f32.e4m3.e4m3"} do
    T.like(p.ptx, "wgmma%.mma_async%.sync%.aligned%." .. ins:gsub("%.", "%%."), "the fp8 PTX has wgmma " .. ins)
  end
  T.like(p.ptx, "cp%.async%.bulk%.tensor%.2d", "  fed by TMA")
  T.like(p.ptx, "griddepcontrol%.wait", "  waiting for the transpose (a programmatic dependent)")
end
local n90 = core.constants("matmul_lowp_sm90")
for _, p in ipairs{"LOWP_SM90", "LOWP_SS"} do
  local bm, bn, bk, st, sh = n90[p .. "_BM"], n90[p .. "_BN"], n90[p .. "_BK"], n90[p .. "_STAGES"], n90[p .. "_SHARED"]
  local staging = p == "LOWP_SS" and 2 * 2 * 64 * 128 + 1024 or 0   -- (ss: C's staging for its TMA stores)
  T.ok(sh == st * (bm + bn) * bk * 2 + 2 * st * 8 + 1024 + staging and sh <= 227 * 1024,
       ("core.constants: %s_SHARED, the ring and its barriers (and C's staging), within 227 KiB"):format(p))
end
T.ok(n90.LOWP_SS_BM == 128 and n90.LOWP_SS_BN == 256 and n90.LOWP_SS_BK == 64,
     "ss: 128 x 256 tiles (two warpgroups of m64n256), 64 of K a stage (one 128-byte swizzled row)")
local codes = core.constants("culua/matmul_lowp.cuh")
T.ok(codes.CULUA_F16 == 0 and codes.CULUA_BF16 == 1 and codes.CULUA_F32 == 4, "core.constants: C's dtype codes for the wgmma kernel")
-- the shared memory Lua asks for is the kernel's
local nums = core.constants("matmul_lowp")
T.is(nums.LOWP_SHARED, nums.LOWP_STAGES * nums.LOWP_STAGE_BYTES, "core.constants: LOWP_SHARED")
T.ok(nums.LOWP_STAGE_BYTES >= nums.LOWP_BM * nums.LOWP_ROW + nums.LOWP_BN * nums.LOWP_ROW
     and nums.LOWP_STAGE_BYTES >= (nums.LOWP_KBYTES // 2) * nums.LOWP_BROW16 and nums.LOWP_SHARED <= 99 * 1024,
     "a stage holds A's and B's tiles; the stages fit compute capability 8.6's 99 KiB")

-- the float64 reference reads the new dtypes exactly and rounds C once into its dtype
do
  local a, b = cuda.host_array("float16", {1, 1}):fill(1), cuda.host_array("float16", {1, 1}):fill(1)
  local c = cuda.host_array("float16", {1, 1})
  ref(a, b, c, 1 / 3)
  T.is(c[1], 0.333251953125, "reference: float16 C rounded once to nearest even")
  local a8 = cuda.host_array("float8_e4m3", {2, 3}):copy_from{0.5, 2, -1.5, 448, 0.015625, 3}
  local b8 = cuda.host_array("float8_e5m2", {3, 2}):copy_from{1, 2, 3, 0.25, -4, 57344}
  local c8 = cuda.host_array("bfloat16", {2, 2}):fill(1)
  ref(a8, b8, c8, 2, 0.5, 0.25, 4)   -- 2 * 0.25 * 4 * A*B + 0.5 * C
  local ab = {0.5 * 1 + 2 * 3 + -1.5 * -4, 0.5 * 2 + 2 * 0.25 + -1.5 * 57344,
              448 * 1 + 0.015625 * 3 + 3 * -4, 448 * 2 + 0.015625 * 0.25 + 3 * 57344}
  local want = {}
  for i, v in ipairs(ab) do
    local h = cuda.host_array("bfloat16", 1)
    h[1] = 2 * v + 0.5
    want[i] = h[1]
  end
  T.is_deeply(c8:totable(), {{want[1], want[2]}, {want[3], want[4]}}, "reference: fp8 A and B with scales, bfloat16 C")
  local c32 = cuda.host_array("float32", {2, 2})
  ref(a8, b8, c32, 1, 0, 2)
  T.is(c32[1], 2 * ab[1], "reference: scale_a alone")
end

-- the refusals that need no device memory: dtypes, options, compute capability
do
  local check = mmod._check_lowp
  local h100 = {name = "H100", major = 9, minor = 0}
  local a100 = {name = "A100", major = 8, minor = 0}
  local v100 = {name = "V100", major = 7, minor = 0}
  local function arr(dt) return {dtype = dt} end
  local f16, bf16, f32 = arr("float16"), arr("bfloat16"), arr("float32")
  local e4, e5, f64 = arr("float8_e4m3"), arr("float8_e5m2"), arr("float64")
  for _, c in ipairs{
    {h100, f16, bf16, f16, nil, "dtypes differ %(A float16, B bfloat16, C float16%): float16 A takes float16 B", "float16 A, bfloat16 B"},
    {h100, bf16, bf16, f16, nil, "C is float16: with bfloat16 A and B, C is bfloat16 or float32", "bfloat16 A and B, float16 C"},
    {h100, f16, f16, f64, nil, "C is float64: with float16 A and B, C is float16 or float32", "float64 C"},
    {h100, e4, f16, bf16, nil, "A is float8_e4m3 but B is float16: fp8 A takes fp8 B", "fp8 A, float16 B"},
    {h100, f16, e4, f16, nil, "dtypes differ %(A float16, B float8_e4m3, C float16%)", "float16 A, fp8 B"},
    {h100, e4, e5, e4, nil, "C is float8_e4m3: with fp8 A and B, C is bfloat16, float16 or float32", "fp8 C"},
    {h100, e4, e4, f64, nil, "C is float64: with fp8 A and B", "float64 C of fp8"},
    {a100, e4, e4, bf16, nil, "float8_e4m3 needs compute capability 8%.9 or later %(tensor%-core fp8%), A100 has 8%.0", "fp8 on 8.0"},
    {v100, bf16, bf16, f32, nil, "bfloat16 needs compute capability 8%.0 or later %(tensor%-core 16%-bit%), V100 has 7%.0", "bfloat16 on 7.0"},
    {h100, f16, f16, f16, {scale_a = 2}, "scale_a is for fp8 A and B, not float16", "scale_a with float16"},
    {h100, e4, e4, f32, {scale_b = "2"}, "scale_b must be a number, got string", "scale_b a string"},
    {h100, f16, f16, f32, {variant = "tf32"}, "variant 'tf32' is for float32 and float64; float16 takes 'mma'", "a float32 variant"},
    {h100, bf16, bf16, f32, {splits = 2}, "splits is for float32 and float64, not bfloat16", "splits"},
    {h100, e5, e4, f32, {streamk = true}, "streamk is for float32 and float64, not float8_e5m2", "streamk"},
    {h100, f16, f16, f32, {tma = 1}, "tma must be a boolean, got number", "tma a number"},
  } do
    T.error_like(function () check(c[1], c[2], c[3], c[4], c[5]) end, "cuda%.catalog%.matmul: " .. c[6], "refused: " .. c[7])
  end
  T.lives_ok(function () check({name = "L4", major = 8, minor = 9}, e4, e5, bf16, {scale_a = 0.5, scale_b = 2}) end,
             "fp8 on compute capability 8.9, with scales")
  T.lives_ok(function () check(a100, bf16, bf16, f32, {variant = "mma"}) end, "bfloat16 on 8.0, variant 'mma'")
end

-- the grids of the 16-bit wgmma kernels (tune.lowp_persistent) on bench/fakecuda.c, the driver
-- with no device behind it (an H100 of 132 multiprocessors), in a child culua; and the knob's
-- refusals. ss tiles are 128 x 256, rs 256 x 128: 512 of either at n = 4096; 8 waves are 1056
do
  local bad = "tune%.lowp_persistent must be a boolean or a block count, got "
  local cases = {   -- dtype, m, n, k, tune.lowp_sm90, tune.lowp_persistent, the launch, what
    {"float16", 4096, 4096, 4096, "ss", nil, "ss_f16 132", "512 tiles (under 8 waves): by default persistent, a block an SM"},
    {"bfloat16", 4096, 4096, 4096, "ss", true, "ss_bf16 132", "true: a block an SM"},
    {"float16", 4096, 4096, 4096, "ss", false, "ss_f16 512", "false: a block a tile"},
    {"float16", 4096, 4096, 4096, "ss", 3, "ss_f16 3", "3: three blocks"},
    {"float16", 4096, 4096, 4096, "ss", 1000, "ss_f16 512", "1000: no more blocks than tiles"},
    {"float16", 4096, 4096, 4096, "ss", 128.0, "ss_f16 128", "128.0, a float that is an integer"},
    {"float16", 4224, 8192, 64, "ss", nil, "ss_f16 132", "1056 tiles, 8 waves: by default persistent"},
    {"float16", 4225, 8192, 64, "ss", nil, "ss_f16 1088", "1088 tiles, past 8 waves: by default a block a tile"},
    {"bfloat16", 4225, 8192, 64, "ss", true, "ss_bf16 132", "1088 tiles, true"},
    {"bfloat16", 4225, 8192, 64, "ss", 1000, "ss_bf16 1000", "1088 tiles, 1000"},
    {"float16", 300, 520, 200, "ss", nil, "ss_f16 9", "9 tiles: 9 blocks"},
    {"bfloat16", 300, 520, 200, "ss", 3, "ss_bf16 3", "9 tiles, 3"},
    {"float16", 4096, 4096, 4096, "rs", nil, "f16 132", "rs: persistent too"},
    {"bfloat16", 4096, 4096, 4096, "rs", false, "bf16 512", "rs, false"},
    {"float16", 300, 520, 200, "rs", 3, "f16 3", "rs, 3 (10 tiles)"},
    {"float16", 300, 520, 200, "ss", 0, bad .. "0", "0 refused"},
    {"float16", 300, 520, 200, "ss", -2, bad .. "%-2", "-2 refused"},
    {"bfloat16", 300, 520, 200, "rs", 2.5, bad .. "2%.5", "2.5 refused"},
    {"float16", 300, 520, 200, "ss", "yes", bad .. "yes", "'yes' refused"},
  }
  local code = [[
local cuda = require "cuda"
local mmod = require "culua.catalog.matmul"
local seen
function on_launch (k, c)
  local wg = k.name:match("^culua_matmul_lowp_wgmma_(.*)")
  if wg and seen then seen[#seen + 1] = wg .. " " .. tostring(c.grid) end
end
local function case(i, dt, m, n, k, which, pers)
  mmod.tune.lowp_sm90, mmod.tune.lowp_persistent = which, pers
  local A, B, C = cuda.array(dt, {m, k}), cuda.array(dt, {k, n}), cuda.array(dt, {m, n})
  seen = {}
  local ok, err = pcall(cuda.catalog.matmul, A, B, C)
  print(("case %d: %s"):format(i, ok and table.concat(seen, "; ") or tostring(err)))
  mmod.tune.lowp_sm90, mmod.tune.lowp_persistent, seen = nil, nil, nil
end
]]
  local calls = {}
  for i, c in ipairs(cases) do
    calls[i] = ("case(%d, %q, %d, %d, %d, %q, %q)"):format(i, c[1], c[2], c[3], c[4], c[5], c[6])
  end
  T.fake_each(code, calls, function (i, got)
    local c = cases[i]
    local name = ("fake H100: %s %dx%dx%d, tune.lowp_sm90 %s, lowp_persistent %s: %s"):format(
                 c[1], c[2], c[4], c[3], c[5], tostring(c[6]), c[8])
    if c[7]:find("must be") then T.like(got, "cuda%.catalog%.matmul: " .. c[7], name) else T.is(got, c[7], name) end
  end)
end

-- how ss and fp8 write C, on bench/fakecuda.c's driver (an H100): through TMA stores (their
-- last argument 1, C's map before it) where C's first element, the distance between its rows
-- and a row's n elements are whole 16 bytes and tune.tma_store is not false, else from
-- registers (0); rs has neither argument
do
  local bad = "cuda%.catalog%.matmul: tune%.tma_store must be a boolean, got "
  local cases = {   -- dtype of A and B, of C, m, n, k, ldc, C's first element, kernel, tune.tma_store, the launch, what
    {"float16", "float16", 300, 520, 200, 520, 1, "ss", nil, "ss_f16 1", "rows of 1040 bytes: TMA stores"},
    {"bfloat16", "float32", 300, 520, 200, 524, 1, "ss", nil, "ss_bf16 1", "float32 C, rows of 2096 bytes"},
    {"float16", "float16", 300, 520, 200, 528, 1, "ss", nil, "ss_f16 1", "ldc 528 (1056 bytes)"},
    {"float16", "float16", 300, 520, 200, 522, 1, "ss", nil, "ss_f16 0", "ldc 522 (1044 bytes): from registers"},
    {"float16", "float16", 300, 512, 200, 519, 1, "ss", nil, "ss_f16 0", "ldc 519: from registers"},
    {"float16", "float16", 300, 520, 200, 520, 2, "ss", nil, "ss_f16 0", "C from its second element: from registers"},
    {"float16", "float16", 300, 520, 200, 520, 9, "ss", nil, "ss_f16 1", "C from its ninth (16 bytes in)"},
    {"float16", "float16", 300, 516, 200, 520, 1, "ss", nil, "ss_f16 0", "n 516 (rows of 1032 bytes): from registers"},
    {"bfloat16", "float32", 300, 516, 200, 516, 1, "ss", nil, "ss_bf16 1", "n 516, float32 C (2064 bytes)"},
    {"bfloat16", "float32", 300, 515, 200, 516, 1, "ss", nil, "ss_bf16 0", "n 515, float32 C (2060 bytes): from registers"},
    {"float16", "float16", 300, 520, 200, 520, 1, "ss", false, "ss_f16 0", "tune.tma_store = false"},
    {"float16", "float16", 300, 520, 200, 520, 1, "ss", true, "ss_f16 1", "tune.tma_store = true"},
    {"float16", "float16", 300, 520, 200, 520, 1, "rs", nil, "f16 -", "rs: no TMA stores"},
    {"float8_e4m3", "bfloat16", 300, 512, 256, 512, 1, "ss", nil, "fp8 1", "fp8, bfloat16 C"},
    {"float8_e4m3", "float32", 300, 512, 256, 516, 1, "ss", nil, "fp8 1", "fp8, float32 C, ldc 516"},
    {"float8_e4m3", "float16", 300, 512, 256, 513, 1, "ss", nil, "fp8 0", "fp8, ldc 513: from registers"},
    {"float8_e4m3", "float32", 300, 523, 256, 528, 1, "ss", nil, "fp8 0", "fp8, float32 C, n 523 (B^T given): from registers"},
    {"float8_e4m3", "float32", 300, 524, 256, 528, 1, "ss", nil, "fp8 1", "fp8, float32 C, n 524 (B^T given)"},
    {"float8_e4m3", "bfloat16", 300, 512, 256, 512, 1, "ss", false, "fp8 0", "fp8, tune.tma_store = false"},
    {"float16", "float16", 300, 520, 200, 520, 1, "ss", "yes", bad .. "yes", "'yes' refused"},
    {"float8_e4m3", "bfloat16", 300, 512, 256, 512, 1, "ss", 1, bad .. "1", "1 refused"},
  }
  local code = [[
local cuda = require "cuda"
local mmod = require "culua.catalog.matmul"
local seen
function on_launch (k, c, ...)
  local wg, fp8 = k.name:match("^culua_matmul_lowp_wgmma_(.*)"), k.name:match("^culua_matmul_lowp_fp8_")
  if (wg or fp8) and seen then
    local n = select("#", ...)
    seen[#seen + 1] = (wg or "fp8") .. " " .. (n == 12 and tostring(select(12, ...)) or n == 10 and "-" or n .. " arguments")
  end
end
local function case(i, da, dc, m, n, k, ldc, first, which, tma_store)
  mmod.tune.lowp_sm90, mmod.tune.tma_store = which, tma_store
  -- B's rows (B^T's for fp8 where n is no multiple of 16) are 528 elements apart, whole 16 bytes
  local fp8, ldb = da:find("float8") ~= nil, 528
  local transb = fp8 and n % 16 ~= 0 or nil
  local A, B = cuda.array(da, {m, k}), cuda.array(da, (transb and n or k) * ldb)
  local C = cuda.array(dc, first - 1 + (m - 1) * ldc + n):view(first, (m - 1) * ldc + n)
  seen = {}
  local ok, err = pcall(cuda.catalog.matmul, A, B, C, {m = m, n = n, k = k, ldb = ldb, ldc = ldc, transb = transb,
                                                       scale_a = fp8 and 1 or nil})
  print(("case %d: %s"):format(i, ok and table.concat(seen, "; ") or tostring(err)))
  mmod.tune.lowp_sm90, mmod.tune.tma_store, seen = nil, nil, nil
end
]]
  local calls = {}
  for i, c in ipairs(cases) do
    calls[i] = ("case(%d, %q, %q, %d, %d, %d, %d, %d, %q, %q)"):format(i, c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9])
  end
  T.fake_each(code, calls, function (i, got)
    local c = cases[i]
    local name = ("fake H100: %s -> %s %dx%dx%d, ldc %d, C from element %d, %s, tma_store %s: %s"):format(
                 c[1], c[2], c[3], c[5], c[4], c[6], c[7], c[8], tostring(c[9]), c[11])
    if c[10]:find("must be") then T.like(got, c[10], name) else T.is(got, c[10], name) end
  end)
end

-- what a call launches, on bench/fakecuda.c's driver (an H100 with nothing behind it: kernels
-- are names, launches run nothing; t/046 builds it the same way): fp8 on 9.0 transposes a
-- row-major B into scratch first, and with transb reads the B^T given as it is (no transpose,
-- and no programmatic launch); where TMA cannot address that B^T (ldb = k + 8), and for the
-- other dtypes, B comes back from B^T by the transpose of its element size, then the call
-- launches what a row-major B launches. transb = false launches what no option does.
do
  local dts = {"float8_e4m3", "float16", "bfloat16", "float32", "float64"}
  local planned = 3 * #dts
  local so, skip = T.fakecuda()
  if not so then
    T.skip(skip, planned)
  else
    local out = T.run(("CULUA_LIBCUDA=%s %s -"):format(so, T.culua), [[
      local cuda = require "cuda"
      local methods = debug.getregistry()["cuda.kernel"].methods
      local launch, log = methods.launch, nil
      methods.launch = function (k, c, ...)
        log[#log + 1] = k.name .. (c.programmatic and "/programmatic" or "")
        return launch(k, c, ...)
      end
      local m, n, k = 200, 272, 320
      for _, dt in ipairs{]] .. '"' .. table.concat(dts, '", "') .. '"' .. [[} do
        local A, B, Bt = cuda.array(dt, {m, k}), cuda.array(dt, {k, n}), cuda.array(dt, {n, k})
        local C = cuda.array(dt:find("float8") and "bfloat16" or dt, {m, n})
        for _, c in ipairs{{"row-major", B}, {"transb", Bt, {transb = true}}, {"transb = false", B, {transb = false}},
                           {"ldb", cuda.array(dt, n * (k + 8)), {transb = true, n = n, ldb = k + 8}}} do
          log = {}
          cuda.catalog.matmul(A, c[2], C, c[3])
          print(dt .. " " .. c[1] .. ": " .. table.concat(log, " "))
        end
      end
    ]])
    local got = {}
    for dt, what, l in out:gmatch("([%w_]+) ([^:\n]+): ([^\n]*)") do got[dt .. " " .. what] = l end
    for _, dt in ipairs(dts) do
      local row = got[dt .. " row-major"] or ("(none: " .. out:sub(1, 300) .. ")")
      T.is(got[dt .. " transb = false"], row, dt .. ": transb = false launches what no option does: " .. row)
      if dt:find("float8") then
        local prod = row:match("^culua_matmul_transpose_1 (culua_matmul_lowp_fp8_e4m3_e4m3_%w+)/programmatic$")
        T.is(got[dt .. " transb"], prod or "(a product after the transpose)",
             dt .. " on 9.0: transb launches the product alone, on the B^T given (a row-major B: " .. row .. ")")
        T.is(got[dt .. " ldb"], "culua_matmul_transpose_1 " .. row,
             dt .. ": transb with rows of B^T TMA cannot address: B from it, then as a row-major B")
      else
        local tr = "culua_matmul_transpose_" .. ({float16 = 2, bfloat16 = 2, float32 = 4, float64 = 8})[dt]
        T.is(got[dt .. " transb"], tr .. " " .. row, dt .. ": transb launches " .. tr .. ", then what a row-major B launches")
        T.is(got[dt .. " ldb"], tr .. " " .. row, dt .. ": the same with B^T's rows ldb apart")
      end
    end
  end
end

-- ------}


-- {------ on a GPU: against the float64 reference

local eps = {float16 = 2^-11, bfloat16 = 2^-8, float32 = 2^-24}
local transposed = T.transposed   -- transb's B^T, built on the host
-- the norm-wise error allowed: C's rounding, and float32 sums over k (fp8's with room
-- for the tensor cores' narrower fp8 sums)
local function tolerance(dta, dtc, k)
  return 2 * eps[dtc] + k * (dta:find("float8") and 2^-16 or 2^-22) + 1e-6
end

T.gpu_part(function ()
  local dev = cuda.device(0)
  local cc = dev.major * 10 + dev.minor
  local configs = {{"float16", "float16", "float16"}, {"float16", "float16", "float32"},
                   {"bfloat16", "bfloat16", "bfloat16"}, {"bfloat16", "bfloat16", "float32"}}
  if cc >= 89 then
    -- e4m3 x e4m3 and e4m3 x e5m2 into every C dtype; the other pairs once
    for _, c in ipairs{{"float8_e4m3", "float8_e4m3", "bfloat16"}, {"float8_e4m3", "float8_e5m2", "bfloat16"},
                       {"float8_e4m3", "float8_e4m3", "float16"}, {"float8_e4m3", "float8_e5m2", "float32"},
                       {"float8_e4m3", "float8_e4m3", "float32"}, {"float8_e4m3", "float8_e5m2", "float16"},
                       {"float8_e5m2", "float8_e4m3", "float32"}, {"float8_e5m2", "float8_e5m2", "bfloat16"}} do
      configs[#configs + 1] = c
    end
  else
    T.skip("fp8 matmul needs compute capability 8.9 (" .. dev.name .. ")", 1)
  end
  if cc < 80 then T.skip("low-precision matmul needs compute capability 8.0", 1); return end

  -- the transposes alone (kernels/matmul_transpose.cu, as fp8's B^T and transb run them): Y =
  -- X^T bit for bit, elements of 1, 2, 4 and 8 bytes, odd shapes, X a view at an odd element
  -- with rows not 16 bytes apart (element by element) and a packed one (16-byte loads where its
  -- rows allow; 256 x 384 and 300 x 512: the byte kernel's whole 128 x 128 tiles, and whole
  -- rows with a partial last tile), Y's rows padded to 16 bytes; and more rows of tiles than
  -- a grid's 65535 (one column of 2^21 + 1 8-byte elements, of 2^23 + 2^16 + 5 bytes: blocks
  -- take several rows of tiles)
  do
    local transpose = require("culua.catalog.matmul_lowp").transpose
    for _, dt in ipairs{"float8_e4m3", "bfloat16", "float32", "float64"} do
      local es = ({float8_e4m3 = 1, bfloat16 = 2, float32 = 4, float64 = 8})[dt]
      for _, s in ipairs{{1, 1}, {17, 33}, {255, 257}, {64, 512}, {300, 520}, {256, 384}, {300, 512}} do
        local r, c = s[1], s[2]
        local h = cuda.host_array(dt, {r, c}):random(r + c, -1, 1)
        local ht = transposed(h)
        local ldy = (r * es + 15) // 16 * 16 // es
        for _, off in ipairs{0, 1} do
          local ldx = off == 0 and c or c + 3
          local big = cuda.host_array(dt, off + r * ldx):fill(9)
          for i = 0, r - 1 do for j = 1, c do big[off + i * ldx + j] = h[i * c + j] end end
          local X, Y = cuda.array(dt, #big):copy_from(big), cuda.array(dt, c * ldy):fill(7)
          transpose(dev, es, X:view(off + 1, (r - 1) * ldx + c), r, c, ldx, Y, ldy)
          local y, want = Y:copy_to(cuda.host_array(dt, c * ldy)), cuda.host_array(dt, c * ldy):fill(0)
          for i = 0, c - 1 do for j = 1, r do want[i * ldy + j] = ht[i * r + j] end end
          T.ok(y:bytes() == want:bytes(), ("transpose of %dx%d %s (%d bytes), X at element %d, ldx %d: bit for bit, zeros past its rows"):format(
               r, c, dt, es, off + 1, ldx))
        end
      end
    end
    local r = (1 << 21) + 1
    local h = cuda.host_array("float64", r):random(5, -1, 1)
    local X, Y = cuda.array("float64", r):copy_from(h), cuda.array("float64", r + 1):fill(7)
    transpose(dev, 8, X, r, 1, 1, Y, r + 1)
    T.ok(Y:view(1, r):copy_to(cuda.host_array("float64", r)):bytes() == h:bytes(),
         ("transpose of %d x 1 float64: %d rows of tiles, more than a grid's 65535"):format(r, (r + 31) // 32))
    local rb = (1 << 23) + (1 << 16) + 5
    local hb = cuda.host_array("uint8", rb):random(6, 0, 255)
    local Xb, Yb = cuda.array("float8_e4m3", rb):copy_from(hb:bytes()), cuda.array("float8_e4m3", rb + 11):fill(7)
    transpose(dev, 1, Xb, rb, 1, 1, Yb, rb + 11)
    local yb = Yb:copy_to(cuda.host_array("float8_e4m3", rb + 11))
    T.ok(yb:bytes() == hb:bytes() .. ("\0"):rep(11),
         ("transpose of %d x 1 bytes: %d rows of tiles, more than a grid's 65535; zeros to 16 bytes"):format(rb, (rb + 127) // 128))
  end

  -- m, n, k: odd ones (element-by-element copies), and rows of whole 16 bytes (cp.async)
  -- (on 9.0, float16 and bfloat16 with rows of whole 16 bytes take wgmma; tma = false, mma.sync)
  -- (and on 9.0 both wgmma kernels, rs and ss: tune.lowp_sm90; 140 x 48 x 264 is one k-tile;
  -- and each persistent in 3 blocks, "rs grid 3" and "ss grid 3": tune.lowp_persistent = 3)
  -- (fp8 on 9.0: k and n multiples of 16 take B^T and wgmma, 64 x 512 x 256, 255 x 1040 x 48,
  -- 200 x 336 x 272 and 392 x 1040 x 528, the rest mma.sync; and the persistent blocks taking
  -- several tiles each (tune.fp8_persistent = 3, not a programmatic launch: "fp8 grid 3"))
  -- Each also with B given as B^T (transb, N x K, built on the host): fp8 on 9.0 where k is a
  -- multiple of 16 reads it as it is, n odd too (129 x 160 x 77), and every other path takes B
  -- back from it first; and transb = false bit for bit as no option.
  local sizes = {{1, 1, 1}, {17, 33, 65}, {257, 129, 31}, {130, 136, 72}, {64, 256, 512}, {255, 48, 1040},
                 {300, 520, 200}, {513, 264, 1000}, {140, 264, 48}, {200, 272, 336}, {392, 528, 1040},
                 {129, 77, 160}, {0, 5, 7}, {9, 7, 0}}
  if not T.sanitizer then sizes[#sizes + 1] = {1000, 999, 1001} end
  local stream = cuda.stream()
  for _, cfg in ipairs(configs) do
    local da, db, dc = cfg[1], cfg[2], cfg[3]
    local fp8 = da:find("float8") ~= nil
    local scale = fp8 and {scale_a = 0.5, scale_b = 4} or {}
    -- the paths: the wgmma kernels by name (tune.lowp_sm90), or false (tma = false: mma.sync)
    -- (and on 9.0 ss and fp8 with C written from registers: "ss direct", "fp8 direct",
    -- tune.tma_store = false; by default they write it by TMA stores where they can)
    local paths = cc ~= 90 and {"default"} or fp8 and {"default", "fp8 grid 3", "fp8 direct", false}
                  or {"rs", "ss", "rs grid 3", "ss grid 3", "ss direct", false}
    for si, s in ipairs(sizes) do
      local m, n, k = s[1], s[2], s[3]
      -- (the largest, whose references are most of this file's time, for fp8 into bfloat16 only)
      if m * n * k > 5e8 and fp8 and dc ~= "bfloat16" then goto next_size end
      local seed = 100 * si + #da
      local hA = cuda.host_array(da, {m, k}):random(seed, -1, 1)
      local hB = cuda.host_array(db, {k, n}):random(seed + 1, -1, 1)
      local hC = cuda.host_array(dc, {m, n}):random(seed + 2, -1, 1)
      local A, B = cuda.array(da, {m, k}):copy_from(hA), cuda.array(db, {k, n}):copy_from(hB)
      local Bt = cuda.array(db, {n, k}):copy_from(transposed(hB))
      local Cd = cuda.array(dc, {m, n})
      local tol = tolerance(da, dc, k)
      -- the references, once for both paths (the same inputs): a float64 product of
      -- 1000 x 1001 x 999 on the CPU is seconds
      local R, R2
      if m > 0 and n > 0 then
        R = cuda.host_array("float64", {m, n})
        ref(hA, hB, R, 1.5, 0, scale.scale_a, scale.scale_b)
        R2 = cuda.host_array("float64", {m, n}):copy_from(hC:totable())
        ref(hA, hB, R2, -1, 0.75, scale.scale_a, scale.scale_b)
      end
      for _, tma in ipairs(paths) do
        local tag = ("%s x %s -> %s, %dx%dx%d%s"):format(da, db, dc, m, k, n,
                                                      tma == "default" and "" or tma and ", wgmma " .. tma or ", tma = false")
        scale.tma = (not tma) and false or nil
        mmod.tune.lowp_sm90 = type(tma) == "string" and tma:match("^[rs]s") or nil
        mmod.tune.lowp_persistent = (tma == "rs grid 3" or tma == "ss grid 3") and 3 or nil
        mmod.tune.fp8_persistent = tma == "fp8 grid 3" and 3 or nil
        mmod.tune.fp8_programmatic = tma ~= "fp8 grid 3"
        mmod.tune.tma_store = (tma == "ss direct" or tma == "fp8 direct") and false or nil
        if m == 0 or n == 0 then
          Cd:fill(7)
          mm(A, B, Cd, {alpha = 2, scale_a = scale.scale_a, scale_b = scale.scale_b, tma = scale.tma})
          mm(A, Bt, Cd, {alpha = 2, scale_a = scale.scale_a, scale_b = scale.scale_b, tma = scale.tma, transb = true})
          T.ok(true, tag .. ": nothing to do (B and B^T given)")
        else
          -- beta = 0 over a poisoned C (NaN: never read), alpha and the scales
          Cd:fill(0 / 0)
          mm(A, B, Cd, {alpha = 1.5, scale_a = scale.scale_a, scale_b = scale.scale_b, tma = scale.tma})
          local _, _, rel = cuda.compare(Cd, R)
          T.ok(rel <= tol, ("%s: beta 0 over NaN, error %.2e (<= %.1e)"):format(tag, rel, tol))
          local C0 = Cd:copy_to(cuda.host_array(dc, {m, n}))
          Cd:fill(0 / 0)
          mm(A, B, Cd, {alpha = 1.5, scale_a = scale.scale_a, scale_b = scale.scale_b, tma = scale.tma, transb = false})
          T.is(cuda.compare(Cd, C0), 0.0, tag .. ": transb = false, the same C as no option")
          -- transb: B given as B^T, beta = 0 over NaN
          Cd:fill(0 / 0)
          mm(A, Bt, Cd, {alpha = 1.5, scale_a = scale.scale_a, scale_b = scale.scale_b, tma = scale.tma, transb = true})
          _, _, rel = cuda.compare(Cd, R)
          T.ok(rel <= tol, ("%s: transb (B^T given), beta 0 over NaN, error %.2e"):format(tag, rel))
          -- beta ~= 0, on a stream, B and B^T given
          for _, bt in ipairs{false, true} do
            Cd:copy_from(hC)
            mm(A, bt and Bt or B, Cd, {alpha = -1, beta = 0.75, stream = stream, scale_a = scale.scale_a, scale_b = scale.scale_b,
                                       tma = scale.tma, transb = bt or nil})
            stream:synchronize()
            _, _, rel = cuda.compare(Cd, R2)
            T.ok(rel <= tol, ("%s%s: beta 0.75 on a stream, error %.2e"):format(tag, bt and ", transb" or "", rel))
          end
        end
      end
      ::next_size::
    end
    scale.tma = nil
    mmod.tune.lowp_sm90, mmod.tune.lowp_persistent, mmod.tune.fp8_persistent, mmod.tune.fp8_programmatic = nil, nil, nil, nil
    mmod.tune.tma_store = nil

    -- blocks of larger matrices (lda, ldb, ldc past the rows) through views that start off
    -- 16 bytes: the element-by-element path; and at 16-byte offsets, the cp.async one (on 9.0,
    -- 16-bit: wgmma, ldc odd: C written an element at a time). The last: n odd, rows 16
    -- bytes apart (ldb) and ldc even: on 9.0 ss writes pairs of C but the last column.
    -- (fp8 on 9.0: the second and the fourth take B^T and wgmma, the fourth with n odd)
    -- Each again with B given as B^T (transb), a block of rows ldbt apart (the last number):
    -- off 16 bytes, and on it (fp8 on 9.0: the second and the fourth read it as it is; the
    -- third's rows are not 16 bytes apart, so B comes back from it first)
    -- The last, on 9.0, goes through the TMA stores of C (ss, fp8): 16 bytes in, ldc past n.
    local blocks = {{3, 70, 40, 96, 112, 64, 45, 101}, {fp8 and 16 or 8, 70, 40, 96, 112, 64, 45, 112},
                    {fp8 and 16 or 8, 200, 131, 136, 136, 136, 132, 139}}
    if fp8 then blocks[4] = {16, 200, 131, 136, 144, 144, 132, 152} end
    blocks[#blocks + 1] = {fp8 and 16 or 8, 200, 144, 128, 144, 144, 152, 160}
    for bi, b in ipairs(blocks) do
      for _, kern in ipairs((not fp8 and cc == 90 and bi > 1) and {"rs", "ss"} or {"default"}) do
        mmod.tune.lowp_sm90 = kern ~= "default" and kern or nil
        local off, m, n, k, lda, ldb, ldc, ldbt = table.unpack(b)
        local hA = cuda.host_array(da, {m, k}):random(7, -1, 1)
        local hB = cuda.host_array(db, {k, n}):random(8, -1, 1)
        local R = cuda.host_array("float64", {m, n})
        ref(hA, hB, R, 1, 0, scale.scale_a, scale.scale_b)
        local bigA = cuda.host_array(da, off + m * lda):fill(5)
        local bigB = cuda.host_array(db, off + k * ldb):fill(5)
        local bigBt = cuda.host_array(db, off + n * ldbt):fill(5)
        for i = 0, m - 1 do for j = 1, k do bigA[off + i * lda + j] = hA[i * k + j] end end
        for i = 0, k - 1 do for j = 1, n do bigB[off + i * ldb + j] = hB[i * n + j] end end
        for i = 0, n - 1 do for j = 1, k do bigBt[off + i * ldbt + j] = hB[(j - 1) * n + i + 1] end end
        local dA = cuda.array(da, #bigA):copy_from(bigA)
        local dB = cuda.array(db, #bigB):copy_from(bigB)
        local dBt = cuda.array(db, #bigBt):copy_from(bigBt)
        for _, bt in ipairs{false, true} do
          local dC = cuda.array(dc, off + m * ldc):fill(3)
          mm(dA:view(off + 1, m * lda), bt and dBt:view(off + 1, n * ldbt) or dB:view(off + 1, k * ldb),
             dC:view(off + 1, m * ldc - (ldc - n)), {m = m, n = n, k = k, lda = lda, ldb = bt and ldbt or ldb, ldc = ldc,
                                                     scale_a = scale.scale_a, scale_b = scale.scale_b, transb = bt or nil})
          local out, pad = T.block_of(dC:totable(), off, m, n, ldc, 3)
          local _, _, rel = cuda.compare(out, R)
          T.ok(rel <= tolerance(da, dc, k), ("%s x %s -> %s%s: %dx%dx%d views at element %d, lda %d, %s %d, ldc %d: error %.2e"):format(
               da, db, dc, kern == "default" and "" or ", wgmma " .. kern, m, k, n, off + 1, lda, bt and "transb, ldb" or "ldb",
               bt and ldbt or ldb, ldc, rel))
          T.ok(pad, "  and C past its rows and before the view untouched")
        end
      end
    end
    mmod.tune.lowp_sm90 = nil
  end

  -- 16-bit on 9.0, both wgmma kernels persistent in 3 blocks (tune.lowp_persistent = 3), each
  -- taking 7 tiles, partial at C's edges: M, N and K odd (A's and B's rows padded to 16 bytes
  -- by lda and ldb, so TMA takes them), 6 k-tiles a tile, so that tiles start their turns in
  -- stages 0 and 2 of the 4; C of A's dtype and float32, contiguous (ldc odd: written an
  -- element at a time) and poisoned, then a block with ldc even (pairs), beta 0.75, its
  -- padding checked untouched
  if cc == 90 then
    local m, n, k, lda, ldb, ldc = 777, 517, 331, 336, 520, 520
    for ci, cfg in ipairs(configs) do
      local da, dc = cfg[1], cfg[3]
      if da:find("float8") then goto next_config end
      local hA = cuda.host_array(da, {m, k}):random(40 + ci, -1, 1)
      local hB = cuda.host_array(da, {k, n}):random(50 + ci, -1, 1)
      local hC = cuda.host_array(dc, {m, n}):random(60 + ci, -1, 1)
      local R = cuda.host_array("float64", {m, n})
      ref(hA, hB, R, 1.5)
      local R2 = cuda.host_array("float64", {m, n}):copy_from(hC:totable())
      ref(hA, hB, R2, -1, 0.75)
      local bigA, bigB = cuda.host_array(da, m * lda):fill(5), cuda.host_array(da, k * ldb):fill(5)
      for i = 0, m - 1 do for j = 1, k do bigA[i * lda + j] = hA[i * k + j] end end
      for i = 0, k - 1 do for j = 1, n do bigB[i * ldb + j] = hB[i * n + j] end end
      local bigC = cuda.host_array(dc, m * ldc):fill(3)
      for i = 0, m - 1 do for j = 1, n do bigC[i * ldc + j] = hC[i * n + j] end end
      local dA, dB = cuda.array(da, m * lda):copy_from(bigA), cuda.array(da, k * ldb):copy_from(bigB)
      local vA, vB = dA:view(1, (m - 1) * lda + k), dB:view(1, (k - 1) * ldb + n)
      local tol = tolerance(da, dc, k)
      for _, kern in ipairs{"ss", "rs"} do
        mmod.tune.lowp_sm90, mmod.tune.lowp_persistent = kern, 3
        local tag = ("%s -> %s, %dx%dx%d (lda %d, ldb %d), wgmma %s in 3 persistent blocks"):format(da, dc, m, k, n, lda, ldb, kern)
        local Cd = cuda.array(dc, {m, n}):fill(0 / 0)
        mm(vA, vB, Cd, {m = m, n = n, k = k, lda = lda, ldb = ldb, alpha = 1.5})
        local _, _, rel = cuda.compare(Cd, R)
        T.ok(rel <= tol, ("%s: beta 0 over NaN, error %.2e (<= %.1e)"):format(tag, rel, tol))
        local dC = cuda.array(dc, m * ldc):copy_from(bigC)
        mm(vA, vB, dC:view(1, (m - 1) * ldc + n), {m = m, n = n, k = k, lda = lda, ldb = ldb, ldc = ldc, alpha = -1, beta = 0.75})
        local got, out, pad = dC:totable(), cuda.host_array("float64", {m, n}), true
        for i = 0, m - 1 do
          for j = 1, n do out[i * n + j] = got[i * ldc + j] end
          for j = n + 1, ldc do if got[i * ldc + j] ~= 3 then pad = false end end
        end
        _, _, rel = cuda.compare(out, R2)
        T.ok(rel <= tol, ("%s: ldc %d, beta 0.75, error %.2e"):format(tag, ldc, rel))
        T.ok(pad, "  and C's padding past n untouched")
      end
      ::next_config::
    end
    mmod.tune.lowp_sm90, mmod.tune.lowp_persistent = nil, nil
  end

  -- a kernel name the knob does not know
  do
    local a = cuda.array("float16", {16, 16})
    mmod.tune.lowp_sm90 = "xx"
    if cc == 90 then
      T.error_like(function () mm(a, a, a) end, "tune%.lowp_sm90 must be 'rs' or 'ss', got xx", "tune.lowp_sm90 unknown: refused")
    else
      T.lives_ok(function () mm(a, a, a) end, "tune.lowp_sm90 is not asked off 9.0")
    end
    mmod.tune.lowp_sm90, mmod.tune.lowp_persistent = nil, 0
    if cc == 90 then
      T.error_like(function () mm(a, a, a) end, "tune%.lowp_persistent must be a boolean or a block count, got 0",
                   "tune.lowp_persistent 0: refused")
    else
      T.lives_ok(function () mm(a, a, a) end, "tune.lowp_persistent is not asked off 9.0")
    end
    mmod.tune.lowp_persistent = nil
  end

  -- fp8 on 9.0: every tile tune.fp8_tile may pick (the bench's sweep), a block a tile
  -- (fp8_persistent = false), clusters of two taking several pairs of tiles (one cluster:
  -- fp8_persistent = 3), and the knobs' refusals; m = 300 is 3 rows of tiles, so a
  -- cluster's last pair has a tile below C. Each with B, and with B^T given (transb: the
  -- product on it, no transpose)
  if cc == 90 then
    local m, n, k = 300, 528, 1040
    local hA = cuda.host_array("float8_e4m3", {m, k}):random(31, -1, 1)
    local hB = cuda.host_array("float8_e4m3", {k, n}):random(32, -1, 1)
    local hC = cuda.host_array("bfloat16", {m, n}):random(33, -1, 1)
    local R = cuda.host_array("float64", {m, n}):copy_from(hC:totable())
    ref(hA, hB, R, 2, -0.5, 0.25, 2)
    local A, B = cuda.array("float8_e4m3", {m, k}):copy_from(hA), cuda.array("float8_e4m3", {k, n}):copy_from(hB)
    local Bt = cuda.array("float8_e4m3", {n, k}):copy_from(transposed(hB))
    local Cd = cuda.array("bfloat16", {m, n})
    local runs = {}
    for _, tile in ipairs(mmod._fp8_plans().pairs.e4m3_e4m3.names) do runs[#runs + 1] = {tile, nil} end
    runs[#runs + 1] = {nil, false}
    runs[#runs + 1] = {"n256s4c2", 3}
    runs[#runs + 1] = {"n256s4c2", false}
    for _, r in ipairs(runs) do
      mmod.tune.fp8_tile, mmod.tune.fp8_persistent = r[1], r[2]
      for _, bt in ipairs{false, true} do
        Cd:copy_from(hC)
        mm(A, bt and Bt or B, Cd, {alpha = 2, beta = -0.5, scale_a = 0.25, scale_b = 2, transb = bt or nil})
        local _, _, rel = cuda.compare(Cd, R)
        T.ok(rel <= tolerance("float8_e4m3", "bfloat16", k), ("fp8 %dx%dx%d%s, tune.fp8_tile %s%s: error %.2e"):format(
             m, k, n, bt and ", transb" or "", r[1] or "default",
             r[2] == false and ", a block a tile" or r[2] and ", at most " .. r[2] .. " blocks" or "", rel))
      end
    end
    mmod.tune.fp8_tile, mmod.tune.fp8_persistent = "n64s2", nil
    T.error_like(function () mm(A, B, Cd) end, "tune%.fp8_tile is n64s2: float8_e4m3 x float8_e4m3 is built in n256s4, n256s3",
                 "tune.fp8_tile unknown: refused, naming those built")
    mmod.tune.fp8_tile = "n128s4"
    local B5 = cuda.array("float8_e5m2", {k, n})
    T.error_like(function () mm(A, B5, Cd) end, "tune%.fp8_tile is n128s4: float8_e4m3 x float8_e5m2 is built in n256s4",
                 "tune.fp8_tile not built for e4m3 x e5m2: refused")
    mmod.tune.fp8_tile, mmod.tune.fp8_persistent = nil, 0
    T.error_like(function () mm(A, B, Cd) end, "tune%.fp8_persistent must be a boolean or a block count, got 0", "tune.fp8_persistent 0: refused")
    mmod.tune.fp8_persistent = nil
    A, B, Bt, B5, Cd = nil
  end

  -- the refusals with device arrays (t/029 has them too)
  local h = cuda.array("float16", {4, 4})
  T.error_like(function () mm(h, cuda.array("bfloat16", {4, 4}), h) end, "dtypes differ %(A float16, B bfloat16, C float16%)", "mixed 16-bit dtypes")
  T.error_like(function () mm(h, h, cuda.array("float64", {4, 4})) end, "C is float64: with float16 A and B, C is float16 or float32", "float64 C")
  T.error_like(function () mm(h, h, h, {scale_a = 2}) end, "scale_a is for fp8 A and B, not float16", "scales with float16")
  T.error_like(function () mm(cuda.array("float32", {4, 4}), cuda.array("float32", {4, 4}), cuda.array("float32", {4, 4}), {scale_b = 2}) end,
               "scale_b is for fp8 A and B, not float32", "scales with float32")
  local e4 = cuda.array("float8_e4m3", {4, 4})
  if cc >= 89 then
    T.error_like(function () mm(e4, h, h) end, "A is float8_e4m3 but B is float16: fp8 A takes fp8 B", "fp8 A, float16 B")
    T.error_like(function () mm(e4, e4, e4) end, "C is float8_e4m3: with fp8 A and B, C is bfloat16, float16 or float32", "fp8 C")
  else
    T.error_like(function () mm(e4, e4, h) end, "float8_e4m3 needs compute capability 8%.9 or later", "fp8 below 8.9")
  end
  h, e4, stream = nil
end, "low-precision matmul against the float64 reference")

-- ------}

T.done_testing()
