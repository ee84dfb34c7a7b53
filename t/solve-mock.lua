-- t/solve-mock.lua: cuda and the catalog core mocked in plain Lua, on which the solve
-- family's own modules (lua/catalog/solve.lua and its parts) load as they are, for the tests
-- that run its several-GPU and several-rank drivers without a GPU (t/031-solve-multi.t,
-- t/042-lu-ranks.t). The kernels are Lua (each checked to be in the kernel file the family
-- asks for); streams run in the order the work is queued (a valid order, since every wait
-- is on an event recorded before it). dofile returns the mock: M (culua.catalog.solve),
-- cuda, K (the kernels by name), core, device, st (the state the tests set and read),
-- E and S (an element of a mock array, read and written), newarr, mods (the modules
-- loaded, by name), and the helpers rand_matrix, mkA and differ.
local srcdir = os.getenv("CULUA_SRCDIR") or "."
-- what the tests set and read: peer access between the mock devices (peer), the k-th
-- allocation from now that fails (fail_at) and the arrays made (made, when a table), the
-- kernel launches counted, the cluster panel's launches and room, lu's chain kernels
local st = {peer = true, launches = 0, cluster_cfgs = {}}
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
    can_access_peer = function (self, other) return st.peer end,
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
-- st.fail_at = k: the k-th allocation from now raises as an out-of-memory would; st.made lists them
local function allocated(a)
  if st.fail_at then
    st.fail_at = st.fail_at - 1
    if st.fail_at == 0 then st.fail_at = nil; error("cuda.array: CUDA_ERROR_OUT_OF_MEMORY allocating (mock)", 0) end
  end
  if st.made then st.made[#st.made + 1] = a end
  return a
end
cuda.array = function (dt, shape, opts)
  local n = type(shape) == "table" and shape[1] * shape[2] or shape
  return allocated(newarr(dt, n, device(opts and opts.device), type(shape) == "table" and shape or {n}))
end
cuda.host_array = function (dt, n, opts) local a = newarr(dt, n, nil); a.kind = "cuda.host_array"; return allocated(a) end
cuda.stream = function (o)
  return {kind = "cuda.stream", device = device(o and o.device), synchronize = function () end,
          wait = function (_, ev) assert(ev, "wait: cuda.event expected, got nil") end}
end
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
K.check_pivots = function (n, ipiv, st)   -- the first pivot outside 1..n, as kernels/solve.cu marks it
  for i = n - 1, 0, -1 do local p = E(ipiv, i); if p < 1 or p > n then S(st, 0, 2 + (n - 1 - i)) end end
end
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
-- row_plan and block_row (lu.cu): the swaps of pivots i0..i0+kb-1 composed into pairs (the
-- plan: the count, then as many destinations and sources, each row where another's values
-- end), moved at once on X's columns outside [lo, hi), and on those from `from` on the top
-- rows solved, as trsm_lower
K.row_plan = function (i0, kb, ipiv, plan)
  local from = {}   -- from[r]: the row whose values end in r, where that is another
  for i = i0, i0 + kb - 1 do
    local q = E(ipiv, i) - 1
    if q ~= i then from[i], from[q] = from[q] or q, from[i] or i end
  end
  local rows, half = {}, (plan.n - 1) // 2
  for d, src in pairs(from) do if d ~= src then rows[#rows + 1] = d end end
  table.sort(rows)
  assert(#rows <= half, "row_plan: more pairs than the plan holds")
  S(plan, 0, #rows)
  for e, d in ipairs(rows) do S(plan, e, d); S(plan, half + e, from[d]) end
end
K.block_row = function (ncols, ld, lo, hi, from, i0, kb, plan, L, loff, ldl, X)
  local count, half = E(plan, 0), (plan.n - 1) // 2
  for c = 0, ncols - 1 do
    if not (c >= lo and c < hi) then
      local v = {}
      for e = 1, count do v[e] = E(X, E(plan, half + e) * ld + c) end
      for e = 1, count do S(X, E(plan, e) * ld + c, v[e]) end
      if c >= from then K.trsm_lower(kb, 1, L, loff, ldl, X, i0 * ld + c, ld) end
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
-- the solve over ranks' step (triangular.cu's bstep): Y = inv(T) B, then W (m x k) -= Lb (m x jb) * Y
local function bstep_mock(which)
  return function (jb, k, T, toff, ld, B, boff, Y, yoff, m, Lb, loff, W, woff)
    assert(k <= 8, "bstep takes at most BSTEP_COLS right-hand sides")
    assert(B ~= Y, "bstep's B and Y are different arrays (a block that starts late would read Y as B)")
    for i = 0, jb * k - 1 do S(Y, yoff + i, E(B, boff + i)) end
    K["trsm_" .. which](jb, k, T, toff, ld, Y, yoff, k)
    K.gemm(m, k, jb, Lb, loff, ld, Y, yoff, k, W, woff, k)
  end
end
K.update_narrow = K.gemm   -- the same product: C (m x nc) -= L (m x kb) * U (kb x nc)
K.bstep_lower, K.bstep_upper = bstep_mock("lower"), bstep_mock("upper")
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
K.copy2d = function (rows, cols, X, xoff, ldx, Y, yoff, ldy)
  for r = 0, rows - 1 do for c = 0, cols - 1 do S(Y, yoff + r * ldy + c, E(X, xoff + r * ldx + c)) end end
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

-- (st.cluster_cfgs: the cluster panel's launches, st.cluster_room the room it was given;
-- st.chain_cfgs, when a table: the launches of lu's chain kernels, their config's programmatic and arguments)
local function kernel(file, name, defines, dev)
  local base = name:gsub("^culua_solve_", ""):gsub("_f32$", ""):gsub("_f64$", "")
  local f = assert(K[base], "no mock kernel " .. base)
  assert(cuda._catalog.source(file):find("culua_solve_" .. base .. (name == "culua_solve_" .. base and " " or "_##t"), 1, true),
         ("%s is not in kernels/%s.cu"):format(name, file))
  return {launch = function (self, cfg, ...)
            st.launches = st.launches + 1
            if base == "panel_cluster" then st.cluster_cfgs[#st.cluster_cfgs + 1] = {shared = cfg.shared, args = {...}} end
            if st.chain_cfgs and (base == "panel_cluster" or base == "narrow_step" or base == "laswp") then
              st.chain_cfgs[#st.chain_cfgs + 1] = {base = base, programmatic = cfg.programmatic, args = {...}}
            end
            for i, a in ipairs{...} do if type(a) == "table" and a.closed then error("closed array passed to " .. base) end end
            return f(...)
          end,
          max_cooperative_grid = function () return 4 end,
          -- (st.bstep_full: bstep's static shared memory leaves no room for its triangle)
          attributes = function () return {shared_size_bytes = st.bstep_full and base:find("^bstep") and 232448 or 2048} end,
          max_active_clusters = function () return 1 end,
          programmatic = (dev or device()).major >= 9,
          set_max_dynamic_shared = function (self, bytes) if base == "panel_cluster" then st.cluster_room = bytes end end}
end

local core = {}
function core.fail(fname, fmt, ...) error(("cuda.catalog.%s: " .. fmt):format(fname, ...), 2) end
function core.ceil_div(a, b) return (a + b - 1) // b end
function core.check_array(f, w, x) return x end
function core.dtype_of(f, w, x) return x.dtype end
function core.one_of(f, w, v, allowed)   -- as the core's
  local s = {}
  for _, a in ipairs(allowed) do
    if v == a then return v end
    s[#s + 1] = tostring(a)
  end
  core.fail(f, "%s must be one of %s, got %s", w, table.concat(s, ", "), tostring(v))
end
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
core.constants, core.kernel_files, core.event_on = real_core.constants, real_core.kernel_files, real_core.event_on

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
return {M = M, cuda = cuda, K = K, core = core, device = device, st = st, E = E, S = S, newarr = newarr, mods = mods,
        Arr = Arr, rand_matrix = rand_matrix, mkA = mkA, differ = differ, mock_require = mock_require}
