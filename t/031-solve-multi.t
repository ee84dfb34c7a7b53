-- cuda.catalog.lu and solve with devices = {...}, without a GPU: the solve family's own
-- several-GPU drivers (lua/catalog/lu_multi.lua: block-cyclic LU with look-ahead; seed.lua:
-- the seed's P2P elimination) run on a mock of cuda and the catalog core whose kernels are
-- plain Lua (each checked to be in the kernel file the family asks for) and whose streams
-- run in the order the work is queued (a valid order, since every wait is on an event
-- recorded before it).
-- The pivots, factors and solutions must equal the one-device run's, over shares of one
-- device, three devices with and without peer access, peer = false, more shares than panels,
-- and odd sizes, and on a device with clusters (the cluster panel, the look-ahead, blocks
-- split in halves, tall panels split further). This checks the indexing and the data each
-- share gets; the GPU runs in t/030-solve.t check the streams and events. Also lu_solve's two
-- ways (by substitution up to solve.tune.trsv_max right-hand sides, by blocks past it)
-- against each other, with their launches counted.
local T = require "culua.tap"
local srcdir = os.getenv("CULUA_SRCDIR") or "."
local PEER = true
local Arr = {}
Arr.__index = Arr
Arr.__len = function (a) return a.n end
local function newarr(dt, n, dev, shape)
  local d = {}
  for i = 0, n - 1 do d[i] = 0 end
  return setmetatable({data = d, off = 0, n = n, dtype = dt, device = dev, shape = shape or {n}, kind = "cuda.array"}, Arr)
end
function Arr:view(first, count)
  assert(first >= 1 and first - 1 + count <= self.n, "view out of range")
  return setmetatable({data = self.data, off = self.off + first - 1, n = count, dtype = self.dtype, device = self.device, shape = {count}, kind = self.kind}, Arr)
end
local function cp(src, dst)
  assert(not dst.closed and not src.closed, "closed")
  assert(src.dtype == dst.dtype, "dtype")
  assert(src.n <= dst.n, ("%d elements do not fit in %d"):format(src.n, dst.n))
  for i = 0, src.n - 1 do dst.data[dst.off + i] = src.data[src.off + i] end
end
function Arr:copy_from(src, s) cp(src, self); return self end
function Arr:copy_to(dst, s) cp(self, dst); return dst end
function Arr:fill(v) for i = 0, self.n - 1 do self.data[self.off + i] = v end return self end
function Arr:close() self.closed = true end
local devs = {}
local cur = 0
local function device(o)
  o = o or cur
  devs[o] = devs[o] or {ordinal = o, major = 8, minor = 0,   -- 8.0: no clusters, the fused panel (mocked)
    can_access_peer = function (self, other) return PEER end,
    enable_peer_access = function () end,
    attribute = function (self, name)
      assert(name == "max_shared_memory_per_block_optin", "no mock attribute " .. name)
      return 232448
    end,
    use = function (self) cur = self.ordinal end}
  return devs[o]
end
local cuda = {}
cuda.device = device
cuda.device_count = function () return 3 end
-- FAIL_AT = k: the k-th allocation from now raises as an out-of-memory would; MADE lists them
local FAIL_AT, MADE
local function allocated(a)
  if FAIL_AT then
    FAIL_AT = FAIL_AT - 1
    if FAIL_AT == 0 then FAIL_AT = nil; error("cuda.array: CUDA_ERROR_OUT_OF_MEMORY allocating (mock)", 0) end
  end
  if MADE then MADE[#MADE + 1] = a end
  return a
end
cuda.array = function (dt, shape, opts)
  local n = type(shape) == "table" and shape[1] * shape[2] or shape
  return allocated(newarr(dt, n, device(opts and opts.device), type(shape) == "table" and shape or {n}))
end
cuda.host_array = function (dt, n, opts) local a = newarr(dt, n, nil); a.kind = "cuda.host_array"; return allocated(a) end
cuda.stream = function (o) return {kind = "cuda.stream", device = device(o and o.device), wait = function () end, synchronize = function () end} end
cuda.event = function () return {record = function () end, synchronize = function () end} end
cuda.type = function (x) return type(x) == "table" and x.kind or nil end
-- the kernels' sources and the family's header as the binary embeds them: the family reads
-- which file holds a kernel, and the kernels' shapes (culua/solve.cuh), from them
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
cuda._catalog = {
  source = function (file) return slurp(srcdir .. "/kernels/" .. file .. ".cu") end,
  headers = function ()
    return {["culua/solve.cuh"] = slurp(srcdir .. "/kernels/culua/solve.cuh"),
            ["culua/barrier.cuh"] = slurp(srcdir .. "/kernels/culua/barrier.cuh")}
  end,
  families = function () return {"solve", "lu", "lu_panel", "lu_multi", "triangular", "seed"} end,
}

local function E(a, i) return a.data[a.off + i] end
local function S(a, i, v) assert(i >= 0 and i < a.n, "index " .. i .. " out of " .. a.n); a.data[a.off + i] = v end
local K = {}
K.check = function (count, x, st) end
K.absmax = function (n, X, upper, out)     -- out's word a double here, not its bits
  local m = E(out, 0)
  for i = 0, n - 1 do for j = upper == 1 and i or 0, n - 1 do m = math.max(m, math.abs(E(X, i * n + j))) end end
  S(out, 0, m)
end
K.panel_fused = function (n, j0, jb, A, ld, coff, ipiv, status, part, bar)
  local function at(r, c) return r * ld + c + coff end
  for j = j0, j0 + jb - 1 do
    local p, best = j, -1
    for r = j, n - 1 do local m = math.abs(E(A, at(r, j))); if m > best then best, p = m, r end end
    S(ipiv, j, p + 1)
    local pv = E(A, at(p, j))
    if pv == 0 and E(status, 0) == 0 then S(status, 0, j + 1) end
    for c = j0, j0 + jb - 1 do local a, b = E(A, at(j, c)), E(A, at(p, c)); S(A, at(j, c), b); S(A, at(p, c), a) end
    for r = j + 1, n - 1 do
      local l = pv ~= 0 and E(A, at(r, j)) / pv or 0
      if pv ~= 0 then S(A, at(r, j), l) end
      for c = j + 1, j0 + jb - 1 do S(A, at(r, c), E(A, at(r, c)) - l * E(A, at(j, c))) end
    end
  end
end
-- the same panel with its rows kept in shared memory (where they fit): the same arithmetic
K.panel_fused_kept = function (n, j0, jb, A, ld, coff, ipiv, status, part, bar, rows)
  assert(math.type(rows) == "integer" and rows >= 1, "rows a warp")
  return K.panel_fused(n, j0, jb, A, ld, coff, ipiv, status, part, bar)
end
K.laswp = function (ncols, ld, lo, hi, i0, i1, ipiv, X)
  for c = 0, ncols - 1 do
    if not (c >= lo and c < hi) then
      for i = i0, i1 - 1 do
        local p = E(ipiv, i) - 1
        if p ~= i then local a = E(X, i * ld + c); S(X, i * ld + c, E(X, p * ld + c)); S(X, p * ld + c, a) end
      end
    end
  end
end
K.trsm_lower = function (jb, ncols, T, toff, ldt, X, xoff, ldx)
  for c = 0, ncols - 1 do
    for k = 0, jb - 2 do
      local xk = E(X, xoff + k * ldx + c)
      for i = k + 1, jb - 1 do S(X, xoff + i * ldx + c, E(X, xoff + i * ldx + c) - E(T, toff + i * ldt + k) * xk) end
    end
  end
end
K.trsm_upper = function (jb, ncols, T, toff, ldt, X, xoff, ldx)
  for c = 0, ncols - 1 do
    for k = jb - 1, 0, -1 do
      S(X, xoff + k * ldx + c, E(X, xoff + k * ldx + c) / E(T, toff + k * ldt + k))
      local xk = E(X, xoff + k * ldx + c)
      for i = 0, k - 1 do S(X, xoff + i * ldx + c, E(X, xoff + i * ldx + c) - E(T, toff + i * ldt + k) * xk) end
    end
  end
end
-- lu_solve's substitutions (kernels/triangular.cu's trsv, trsv1): X (n x k) solved in place with
-- LU's unit lower or upper triangle; their tickets and counters must come zero and be left so
local function trsv_mock(upper)
  return function (n, k, LU, X, sync)
    for i = 0, #sync - 1 do assert(E(sync, i) == 0, "the substitutions' words are zero at launch") end
    for c = 0, k - 1 do
      for step = 0, n - 1 do
        local i = upper and n - 1 - step or step
        local s = E(X, i * k + c)
        if upper then
          for j = i + 1, n - 1 do s = s - E(LU, i * n + j) * E(X, j * k + c) end
          s = s / E(LU, i * n + i)
        else
          for j = 0, i - 1 do s = s - E(LU, i * n + j) * E(X, j * k + c) end
        end
        S(X, i * k + c, s)
      end
    end
  end
end
K.trsv_lower, K.trsv_upper = trsv_mock(false), trsv_mock(true)
K.trsv1_lower, K.trsv1_upper = K.trsv_lower, K.trsv_upper
K.gemm = function (m, nn, k, A, aoff, lda, B, boff, ldb, C, coff, ldc)
  for r = 0, m - 1 do for c = 0, nn - 1 do
    local acc = 0
    for q = 0, k - 1 do acc = acc + E(A, aoff + r * lda + q) * E(B, boff + q * ldb + c) end
    S(C, coff + r * ldc + c, E(C, coff + r * ldc + c) - acc)
  end end
end
K.update_narrow = K.gemm   -- the same product: C (m x nc) -= L (m x kb) * U (kb x nc)
-- the look-ahead's step in one launch: pivots i0..i0+kb-1's swaps on A's columns [c0, c0 + nc),
-- their block row of U (the unit triangle of the panel's rows at L + loff, a row every ldl)
-- and the rows below less L21 * U; its tickets come zero and are left so
K.narrow_step = function (n, i0, kb, L, loff, ldl, c0, nc, A, ld, ipiv, held, ticket)
  for i = 0, #ticket - 1 do assert(E(ticket, i) == 0, "narrow_step's tickets are zero at launch") end
  assert(#held >= kb * nc, "narrow_step's held rows fit")
  for i = i0, i0 + kb - 1 do
    local p = E(ipiv, i) - 1
    if p ~= i then
      for c = c0, c0 + nc - 1 do local a = E(A, i * ld + c); S(A, i * ld + c, E(A, p * ld + c)); S(A, p * ld + c, a) end
    end
  end
  local function l(r, k) return E(L, loff + (r - i0) * ldl + k) end
  for c = c0, c0 + nc - 1 do
    for i = i0 + 1, i0 + kb - 1 do
      local s = E(A, i * ld + c)
      for k = 0, i - i0 - 1 do s = s - l(i, k) * E(A, (i0 + k) * ld + c) end
      S(A, i * ld + c, s)
    end
    for r = i0 + kb, n - 1 do
      local s = E(A, r * ld + c)
      for k = 0, kb - 1 do s = s - l(r, k) * E(A, (i0 + k) * ld + c) end
      S(A, r * ld + c, s)
    end
  end
end
K.cyclic = function (n, rows, nb, G, g, nloc, c0, w, A, X, back)
  assert(c0 >= 0 and w >= 1 and c0 + w <= nloc, "cyclic's columns")
  for r = 0, rows - 1 do for lc = c0, c0 + w - 1 do
    local gc = ((lc // nb) * G + g) * nb + lc % nb
    assert(gc < n)
    if back == 1 then S(A, r * n + gc, E(X, r * nloc + lc)) else S(X, r * nloc + lc, E(A, r * n + gc)) end
  end end
end
K.panel_pack = function (n, j0, jb, A, aoff, ld, ipiv, buf)
  for i = 0, jb - 1 do S(buf, i, E(ipiv, j0 + i)) end
  for r = j0, n - 1 do for c = 0, jb - 1 do S(buf, jb + (r - j0) * jb + c, E(A, aoff + r * ld + c)) end end
end
K.panel_pivots = function (j0, jb, buf, ipiv) for i = 0, jb - 1 do S(ipiv, j0 + i, E(buf, i)) end end
K.transpose = function (rows, cols, src, soff, lds, dst, doff, ldd)
  for r = 0, rows - 1 do for c = 0, cols - 1 do S(dst, doff + c * ldd + r, E(src, soff + r * lds + c)) end end
end
K.copy = function (count, src, dst) for i = 0, count - 1 do S(dst, i, E(src, i)) end end
K.permutation = function (n, ipiv, perm)
  for i = 0, n - 1 do S(perm, i, i) end
  for i = 0, n - 1 do local p = E(ipiv, i) - 1; local a = E(perm, i); S(perm, i, E(perm, p)); S(perm, p, a) end
end
K.gather = function (n, k, perm, B, W) for i = 0, n - 1 do for c = 0, k - 1 do S(W, i * k + c, E(B, E(perm, i) * k + c)) end end end
K.seed_pivot = function (n, c0, p, lu, ABT, ipiv, mult, status)
  local col = (p - c0) * n
  local bi, best = p, -1
  for r = p, n - 1 do local m = math.abs(E(ABT, col + r)); if m > best then best, bi = m, r end end
  S(ipiv, p, bi + 1)
  local pv = E(ABT, col + bi)
  if pv == 0 and E(status, 0) == 0 then S(status, 0, p + 1) end
  for r = (lu == 1 and p + 1 or 0), n - 1 do
    local src = r == p and bi or (r == bi and p or r)
    S(mult, r, (r == p or pv == 0) and 0 or E(ABT, col + src) / pv)
  end
end
K.seed_extract = function (n, ncols, p, ipiv, ABT, prow)
  local piv = E(ipiv, p) - 1
  for c = 0, ncols - 1 do
    local a, b = E(ABT, c * n + p), E(ABT, c * n + piv)
    S(ABT, c * n + p, b); S(ABT, c * n + piv, a); S(prow, c, b)
  end
end
K.seed_eliminate = function (n, ncols, c0, p, lu, ABT, mult, prow)
  for r = (lu == 1 and p + 1 or 0), n - 1 do
    if r ~= p then
      local m = E(mult, r)
      for c = math.max(p - c0, 0), ncols - 1 do
        if c + c0 == p then S(ABT, c * n + r, lu == 1 and m or 0)
        else S(ABT, c * n + r, E(ABT, c * n + r) - m * E(prow, c)) end
      end
    end
  end
end
K.seed_divide = function (n, k, ABT, X)
  for r = 0, n - 1 do for j = 0, k - 1 do S(X, r * k + j, E(ABT, (n + j) * n + r) / E(ABT, r * n + r)) end end
end

local launches = 0
local cluster_cfgs, cluster_room = {}, nil   -- the cluster panel's launches, and the room it was given
local chain_cfgs   -- when a table: the launches of lu's chain kernels, their config's programmatic and arguments
local function kernel(file, name, defines, dev)
  local base = name:gsub("^culua_solve_", ""):gsub("_f32$", ""):gsub("_f64$", "")
  local f = assert(K[base], "no mock kernel " .. base)
  assert(cuda._catalog.source(file):find("culua_solve_" .. base .. (name == "culua_solve_" .. base and " " or "_##t"), 1, true),
         ("%s is not in kernels/%s.cu"):format(name, file))
  return {launch = function (self, cfg, ...)
            launches = launches + 1
            if base == "panel_cluster" then cluster_cfgs[#cluster_cfgs + 1] = {shared = cfg.shared, args = {...}} end
            if chain_cfgs and (base == "panel_cluster" or base == "narrow_step" or base == "laswp") then
              chain_cfgs[#chain_cfgs + 1] = {base = base, programmatic = cfg.programmatic, args = {...}}
            end
            for i, a in ipairs{...} do if type(a) == "table" and a.closed then error("closed array passed to " .. base) end end
            return f(...)
          end,
          max_cooperative_grid = function () return 4 end,
          attributes = function () return {shared_size_bytes = 2048} end,
          max_active_clusters = function () return 1 end,
          programmatic = (dev or device()).major >= 9,
          set_max_dynamic_shared = function (self, bytes) if base == "panel_cluster" then cluster_room = bytes end end}
end

local core = {}
function core.fail(fname, fmt, ...) error(("cuda.catalog.%s: " .. fmt):format(fname, ...), 2) end
function core.ceil_div(a, b) return (a + b - 1) // b end
function core.check_array(f, w, x) return x end
function core.dtype_of(f, w, x) return x.dtype end
function core.one_of(f, w, v) return v end
function core.flag(f, o, name) return o[name] end
function core.options(f, o) return o or {} end
function core.same_device(f, names, a) return a.device end
function core.check_stream(f, s) return s end
function core.scratch_kind() end
function core.scratch(kind, dev, stream, n)
  local dt = kind:match("float64") and "float64" or "int32"
  return newarr(dt, math.max(n, 1), dev)
end
core.kernel = kernel
function core.sm_count() return 4 end
function core.read_word(w) return E(w, 0) end
function core.device_state() return {} end
function core.dmma_for(dt, dev) return dt == "float64" and dev.major >= 8 end   -- as the core's
function core.allow_shared(k, bytes) k:set_max_dynamic_shared(bytes) end

-- cuda.catalog.matmul, as solve_common.lua's gemm_sub calls it: C -= A*B on views with leading dimensions
local matmul = {matmul = function (A, B, C, o)
  assert(o.alpha == -1 and o.beta == 1, "gemm_sub asks for C -= A*B")
  assert(A.device == B.device and B.device == C.device, "matmul: A, B and C on one device")
  K.gemm(o.m, o.n, o.k, A, 0, o.lda, B, 0, o.ldb, C, 0, o.ldc)
  return C
end}

-- the core's readers of the kernels' constants and of which file holds a kernel, as they
-- are (on the sources above)
local real_core = assert(loadfile(srcdir .. "/lua/catalog/core.lua", "t",
                                  setmetatable({require = function () return cuda end}, {__index = _G})))()
core.constants, core.kernel_files = real_core.constants, real_core.kernel_files

-- the family's own modules (solve.lua and its parts, lua/catalog/*.lua) load as they are,
-- on the mocks
local mods = {cuda = cuda, ["culua.catalog.core"] = core, ["culua.catalog.matmul"] = matmul}
local env
local function mock_require(m)
  if mods[m] == nil then
    local part = assert(m:match("^culua%.catalog%.([%w_]+)$"), m)
    mods[m] = assert(loadfile(srcdir .. "/lua/catalog/" .. part .. ".lua", "t", env))()
  end
  return mods[m]
end
env = setmetatable({require = mock_require}, {__index = _G})
local M = mock_require("culua.catalog.solve")

-- reference: unblocked LU with partial pivoting, the same arithmetic order per element roughly
local function rand_matrix(n, seed)
  local x = seed
  local t = {}
  for i = 0, n * n - 1 do x = (x * 1103515245 + 12345) % 2147483648; t[i] = x / 2147483648 * 2 - 1 end
  return t
end
local function mkA(n, t)
  local A = cuda.array("float64", {n, n}, {device = 0})
  for i = 0, n * n - 1 do A.data[i] = t[i] end
  return A
end
-- how two factorizations of one n x n matrix differ (pivots p, factors A), or false
local function differ(n, p1, A1, p2, A2)
  local bad = false
  for i = 0, n - 1 do if p1.data[i] ~= p2.data[i] then bad = ("ipiv[%d] %s vs %s"):format(i, p1.data[i], p2.data[i]); break end end
  local d = 0
  for i = 0, n * n - 1 do d = math.max(d, math.abs(A1.data[i] - A2.data[i])) end
  if d > 1e-9 then bad = (bad or "") .. " factors differ by " .. d end
  return bad
end
local function check(n, nb, devices, method, peer)
  local t = rand_matrix(n, n * 7 + nb)
  local A1 = mkA(n, t)
  local p1 = M.lu(A1, {block = nb, method = method})
  local A2 = mkA(n, t)
  local p2, info = M.lu(A2, {block = nb, devices = devices, method = method, peer = peer, growth = true})
  local bad = differ(n, p1, A1, p2, A2)
  -- growth = true: max|U| / max|A|, measured on A's device after the shares sent the factors back
  local u, a = 0, 0
  for i = 0, n - 1 do for j = 0, n - 1 do
    a = math.max(a, math.abs(t[i * n + j]))
    if j >= i then u = math.max(u, math.abs(A1.data[i * n + j])) end
  end end
  if math.abs(info.growth - u / a) > 1e-12 * u / a then bad = (bad or "") .. (" growth %.17g, want %.17g"):format(info.growth, u / a) end
  -- solve
  local B = cuda.array("float64", {n, 2}, {device = 0})
  for i = 0, 2 * n - 1 do B.data[i] = (i % 7) / 7 - 0.3 end
  local A3 = mkA(n, t)
  local X1 = M.solve(A3, B, {block = nb, method = method})
  local X2, _, sinfo = M.solve(A3, B, {block = nb, method = method, devices = devices, peer = peer})
  local dx = 0
  for i = 0, 2 * n - 1 do dx = math.max(dx, math.abs(X1.data[i] - X2.data[i])) end
  if dx > 1e-8 then bad = (bad or "") .. " solve differs by " .. dx end
  local what = ("n %d nb %d devices {%s} %s peer %s: transfer %s/%s shares %d"):format(n, nb, table.concat(devices, ","), method, tostring(peer), info.transfer, sinfo.transfer, info.shares)
  if not T.ok(not bad, what) then T.diag(bad) end
end
for _, peer in ipairs{true, false} do
PEER = peer
T.diag(peer and "devices with peer access" or "devices without peer access")
for _, m in ipairs{"lu", "seed"} do
  check(13, 4, {0, 0}, m)
  check(13, 4, {0, 0, 0}, m, false)
  check(20, 3, {0, 1, 2}, m)
  check(20, 3, {1, 0}, m, false)
  check(17, 5, {2}, m)
  check(9, 16, {0, 1}, m)
  check(25, 2, {0, 1, 0, 2, 1}, m)
  check(6, 1, {0, 1, 2, 0, 1, 2, 0, 1}, m)
end
end
-- the first distribution to a peer in one chunk (start_chunks = 1) and in two, against the
-- default's (as many chunks as the share has panels here): the first step takes each chunk's
-- swaps and update in turn, and the first chunk holds the columns Q works on
T.diag("the first distribution to a peer in one chunk and in two")
PEER = true
for _, c in ipairs{1, 2} do
  M.tune.start_chunks = c
  check(20, 3, {0, 1, 2}, "lu")
  check(23, 2, {1, 2}, "lu")
  check(17, 5, {2}, "lu")
end
M.tune.start_chunks = 8
-- the next panel's owner's step (its columns' swaps, block row of U and update) in three
-- launches (solve.tune.narrow = "kernel") rather than narrow_step's one; and narrow_step's
-- launches counted: one a panel but the last, less the three launches' two more each
T.diag("the look-ahead's step in three launches")
PEER = true
M.tune.narrow = "kernel"
check(20, 3, {0, 1, 2}, "lu")
check(25, 2, {0, 1, 0, 2, 1}, "lu")
local function count(narrow)
  M.tune.narrow = narrow
  launches = 0
  M.lu(mkA(20, rand_matrix(20, 5)), {block = 4, devices = {0, 1}})
  return launches
end
local three, one = count("kernel"), count(nil)
T.is(three - one, 2 * (20 // 4 - 1), "narrow_step: one launch a step for the three's, for each of the 4 steps before the last panel")
-- an allocation that fails halfway through: what the call had made is closed, but for the
-- pivots it was to return (the first), and the next call works
for _, m in ipairs{"lu", "seed"} do
  for _, peer in ipairs{true, false} do
    PEER = peer
    for _, at in ipairs{3, 6, 9} do
      local A = mkA(12, rand_matrix(12, 3))
      MADE, FAIL_AT = {}, at
      local ok, err = pcall(M.lu, A, {block = 4, devices = {0, 1}, method = m, peer = peer})
      local open = 0
      for i = 2, #MADE do if not MADE[i].closed then open = open + 1 end end
      T.ok(not ok and tostring(err):find("CUDA_ERROR_OUT_OF_MEMORY", 1, true) and open == 0,
           ("%s, peer %s: allocation %d of the call fails: it raises, and the %d arrays made before are closed (%d open)")
           :format(m, tostring(peer), at, #MADE - 1, open))
      MADE, FAIL_AT = nil, nil
    end
  end
end
PEER = true
do
  local ok = pcall(M.lu, mkA(12, rand_matrix(12, 3)), {block = 4, devices = {0, 1}})
  T.ok(ok, "and the next call works")
end
-- lu_solve's two ways: by substitution (two launches, a triangle each) up to
-- solve.tune.trsv_max right-hand sides, by blocks (trsm and matmul a block row) past it;
-- the same X either way, and the default threshold (16) picks as it says
do
  local function solve_with(n, k, nb, max)
    local LU = mkA(n, rand_matrix(n, n + k))
    local ipiv = M.lu(LU, {block = nb})
    local B = k == 1 and cuda.array("float64", n, {device = 0}) or cuda.array("float64", {n, k}, {device = 0})
    for i = 0, n * k - 1 do B.data[i] = ((i * 7) % 11) / 11 - 0.4 end
    local saved = M.tune.trsv_max
    M.tune.trsv_max = max or saved
    local before = launches
    M.lu_solve(LU, ipiv, B, {block = nb})
    M.tune.trsv_max = saved
    return B, launches - before
  end
  -- the input check, the permutation, the gather and the copy, then the solves
  local FIXED = 4
  for _, c in ipairs{{1, 1, 4}, {70, 1, 16}, {70, 3, 16}, {130, 5, 64}, {65, 17, 8}} do
    local n, k, nb = c[1], c[2], c[3]
    local X1, l1 = solve_with(n, k, nb, math.maxinteger)
    local X2, l2 = solve_with(n, k, nb, 0)
    local d = 0
    for i = 0, n * k - 1 do d = math.max(d, math.abs(X1.data[i] - X2.data[i])) end
    if not T.ok(d < 1e-9 and l1 == FIXED + 2 and l2 == FIXED + 2 * ((n + nb - 1) // nb),
                ("lu_solve n %d k %d block %d: substitution (%d launches) and blocks (%d) agree"):format(n, k, nb, l1, l2)) then
      T.diag("  max difference " .. d)
    end
  end
  local _, l16 = solve_with(40, 16, 8)
  local _, l17 = solve_with(40, 17, 8)
  T.ok(M.tune.trsv_max == 16 and l16 == FIXED + 2 and l17 == FIXED + 2 * 5,
       ("by default 16 right-hand sides go by substitution (%d launches), 17 by blocks (%d)"):format(l16, l17))
end
-- a device with thread-block clusters (compute capability 9.0): the cluster panel (mocked
-- with the fused one's arithmetic), so on one device the look-ahead, and blocks split in
-- halves (split_panel: narrow_step between them, at a share's column offset on several
-- devices); with solve.tune.cluster_bytes small, panels whose rows the cluster cannot keep
-- split further, down to solve.tune.tall_split (16) columns, then handed to the fused panel.
-- The widths each panel kernel took are recorded: "c32" a cluster panel of 32 columns, "f16"
-- a fused one of 16
T.diag("a device with clusters: the cluster panel, split blocks, tall panels")
local widths
local fused_mock = K.panel_fused
K.panel_fused = function (n, j0, jb, ...)
  if widths then widths["f" .. jb] = true end
  return fused_mock(n, j0, jb, ...)
end
K.panel_cluster = function (n, j0, jb, A, ld, coff, ipiv, status, ks)
  assert(math.type(ks) == "integer" and ks >= 1 and ks <= n - j0, "rows a block keeps")
  widths["c" .. jb] = true
  return fused_mock(n, j0, jb, A, ld, coff, ipiv, status)
end
for o = 0, 2 do device(o).major = 9 end
local function took(w)
  local t = {}
  for k in pairs(w) do t[#t + 1] = k end
  table.sort(t)
  return table.concat(t, " ")
end
-- float64 splits past 48 columns (a block of 64 in two panels of 32; the last block, 6
-- columns of 6 rows, always fits), and a row of 32 columns takes 272 bytes, of 16 columns
-- 144: 7700 bytes keep 28 rows at 32 columns (under three quarters of the first half's 70
-- rows and the second's 38) and 53 at 16 (enough); 2000 bytes keep 7 and 13 (too few).
-- 16320 bytes keep 60 rows at 32 columns: over three quarters of the first half's 70, so
-- that a panel split only past tall_spill = 0.25 stays at 32 columns; by default (0) the
-- first half splits down to 16 (113 rows: all), the second keeps its 38 at 32
for _, c in ipairs{{nil, 16, "c32 c6"}, {7700, 16, "c16 c6"}, {2000, 16, "c6 f16"}, {2000, false, "c6 f32"},
                   {16320, 16, "c16 c32 c6"}, {16320, 16, "c32 c6", 0.25}} do
  local bytes, tall, want = c[1], c[2], c[3]
  M.tune.cluster_bytes, M.tune.tall_split, M.tune.tall_spill = bytes, tall, c[4] or 0
  widths = {}
  check(70, 64, {0, 1}, "lu")
  check(70, 64, {0, 0, 1}, "lu", false)
  local got = took(widths)
  T.is(got, want, ("cluster bytes %s, tall_split %s, tall_spill %s: the panel kernels and widths"):format(
       tostring(bytes), tostring(tall), tostring(c[4] or 0)))
end
M.tune.cluster_bytes, M.tune.tall_split, M.tune.tall_spill = nil, 16, 0
-- solve.tune.cluster_whole: the cluster panel's blocks ask for all the room there is (false:
-- their rows', ks rows of jbs values and 16 bytes; nil, the default: all of it where the
-- block is split in panels (float64: past 48 columns), on one GPU and on several)
for _, c in ipairs{{"false", 64, false}, {"true", 64, true}, {"default", 64, true}, {"default", 32, false}} do
  local w, nb, all = c[1], c[2], c[3]
  M.tune.cluster_whole = ({["false"] = false, ["true"] = true})[w]
  cluster_cfgs, widths = {}, {}
  check(70, nb, {0, 1}, "lu")
  local ok = #cluster_cfgs > 0 and cluster_room ~= nil
  for _, cfg in ipairs(cluster_cfgs) do
    local jb, ks = cfg.args[3], cfg.args[9]
    local rows = ((jb + 3) // 4 * 4) * 8 + 16
    ok = ok and cfg.shared == (all and cluster_room or ks * rows) and ks * rows <= cluster_room
  end
  T.ok(ok, ("cluster_whole %s, block %d: %d cluster launches, each asking for %s"):format(w, nb, #cluster_cfgs,
       all and ("all the room, " .. tostring(cluster_room) .. " bytes") or "its rows' bytes"))
end
M.tune.cluster_whole = nil
-- both look-aheads (one device's and the several-GPU one) with their step between panels on
-- the update's stream (step_on = "S", as before session 20; the default puts it on the panels')
M.tune.step_on = "S"
check(70, 64, {0, 1}, "lu")
M.tune.step_on = "Q"
-- and the look-ahead's step in three launches there too (one device's look-ahead and the
-- several-GPU one, both through lookahead_step's fallback)
M.tune.narrow = "kernel"
check(70, 64, {0, 1}, "lu")
M.tune.narrow = nil
-- the default block tapered (solve.tune.wide_from, taper): 128 while more than 100 columns
-- are left, then 64 (from column 128 of 200: the look-ahead's step at 128 columns, then at
-- 64, the last block 8 wide); the factors as with blocks of 64 throughout, info saying
-- which; the chain's kernels launched programmatic (solve.tune.programmatic = false: not);
-- several GPUs keep one block (64 at this size: no taper there)
do
  local saved_wide, saved_taper = M.tune.wide_from, M.tune.taper
  M.tune.wide_from, M.tune.taper = {float32 = 1, float64 = 1}, {float32 = 100, float64 = 100}
  local n = 200
  local t = rand_matrix(n, 31)
  local A1, A2 = mkA(n, t), mkA(n, t)
  widths, chain_cfgs = {}, {}
  local p1, info = M.lu(A1)
  local steps, all = {}, true
  for _, c in ipairs(chain_cfgs) do
    all = all and c.programmatic == true
    if c.base == "narrow_step" then steps[#steps + 1] = c.args[2] .. ":" .. c.args[3] end
  end
  local p2 = M.lu(A2, {block = 64})
  local bad = differ(n, p1, A1, p2, A2)
  if not T.ok(not bad, "a tapered default block (128, then 64): the factors of blocks of 64") then T.diag(bad) end
  T.ok(info.block == 128 and info.narrow_columns == 72, ("info: block %s, narrow_columns %s (want 128, 72)"):format(
       info.block, info.narrow_columns))
  -- the look-ahead's steps (narrow_step's i0 and kb, i0 + kb = the next panel's first column):
  -- after the panel at 0 (128 columns), at 128 (64), and between the halves of 64 too
  local seen = " " .. table.concat(steps, " ") .. " "
  T.ok(seen:find(" 0:128 ", 1, true) and seen:find(" 128:64 ", 1, true) and not seen:find(" 128:128 ", 1, true),
       "the look-ahead's steps: 128 columns at column 0, then 64 from column 128")
  T.ok(#chain_cfgs > 0 and all, ("%d launches of the chain's kernels, all programmatic"):format(#chain_cfgs))
  M.tune.programmatic = false
  chain_cfgs = {}
  M.lu(mkA(n, t))
  local none = true
  for _, c in ipairs(chain_cfgs) do none = none and not c.programmatic end
  T.ok(#chain_cfgs > 0 and none, "solve.tune.programmatic = false: none programmatic")
  M.tune.programmatic = nil
  chain_cfgs = nil
  local _, minfo = M.lu(mkA(n, t), {devices = {0, 1}})
  T.ok(minfo.block == 64 and minfo.narrow_columns == nil, ("several GPUs: one block, 64 at n = %d (got %s)"):format(n, minfo.block))
  M.tune.wide_from, M.tune.taper = saved_wide, saved_taper
end
widths = nil
for o = 0, 2 do device(o).major = 8 end
-- the checks come before any array
T.error_like(function () M.lu(nil, {devices = {}}) end, "cuda%.catalog%.lu: devices is an empty list", "an empty devices list")
T.done_testing()
