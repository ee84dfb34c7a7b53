-- culua.elementwise_call: the hot path of a cuda.elementwise call and of cuda.map,
-- as Lua source made for each declaration's shape (which arguments are scalars,
-- arrays, outputs) and compiled with load(), for lua/elementwise.lua.
--
-- A call of a kernel from Lua is bound by the host (issue 38: 2^16 elements in
-- <= 6 us, of which the launch takes 4.3), and the general path spends it on
-- what a loop repeats: select(j, ...) over the arguments, the placeholders bound
-- again, a signature compared, tables looked up, the arguments unpacked from a
-- table. The code made here does, per call, one C.array an array and compares
-- what it answers with the last launch's facts (the dtypes, length, device, the
-- cuda.reset() epoch and the tuning knobs): where they are the same, the last
-- verdict holds, and what is left to check is what the addresses decide (an
-- output overlapping another array, the alignment that picks the vector
-- kernel) and each scalar's type. Then the prepared launcher, with fixed
-- arity. Anything else (another arity, options, a dtype or length changed, an
-- argument that is not what it was) goes to the general path, which checks
-- everything, raises its errors, and tells remember() its facts after a launch:
-- so the messages are the general path's, one place.

local G = {}

-- {====================================================== source

-- lines for each index in list, with every $ the index
local function each(list, fmt, sep)
  local out = {}
  for i, j in ipairs(list) do out[i] = (fmt:gsub("%$", tostring(j))) end
  return table.concat(out, sep or "\n")
end

local function source(kinds)
  local np = #kinds
  local all, arrays, scalars, outs = {}, {}, {}, {}
  for j = 1, np do
    local k = kinds:sub(j, j)
    all[j] = j
    if k == "s" then scalars[#scalars + 1] = j else arrays[#arrays + 1] = j end
    if k == "o" then outs[#outs + 1] = j end
  end
  -- an output and another array: the same elements, or none in common
  local disjoint = {}
  for _, j in ipairs(arrays) do
    for _, l in ipairs(arrays) do
      if l > j and (kinds:sub(j, j) == "o" or kinds:sub(l, l) == "o") then
        disjoint[#disjoint + 1] = ("(p%d == p%d or p%d >= p%d + c_nb%d or p%d >= p%d + c_nb%d)"):format(j, l, j, l, l, l, j, j)
      end
    end
  end
  local vs = each(all, "v$", ", ")
  -- the checks and the launch, v1 .. vn bound; `map` takes a scalar's Lua type as it is
  -- (cuda.map made the kernel for that type), a call converts as the general path does
  local function block(map)
    local conv = map and "local s$ = math_type(v$) == (c_f$ and \"float\" or \"integer\") and v$"
                      or "local s$; if c_f$ then s$ = math_type(v$) and v$ + 0.0 else s$ = math_type(v$) == \"integer\" and v$ end"
    local args, cond = {}, {}
    for j = 1, np do args[j] = kinds:sub(j, j) == "s" and "s" .. j or "v" .. j end
    for _, j in ipairs(scalars) do cond[#cond + 1] = "s" .. j end
    for _, d in ipairs(disjoint) do cond[#cond + 1] = d end
    return
      each(arrays, "local dt$, n$, dev$, p$, pt$ = array_info(v$, true)") .. "\n" ..
      "if " .. each(arrays, "dt$ == c_dt$ and n$ == c_n and dev$ == c_dev and not pt$", "\n    and ") ..
      (#arrays > 0 and "\n    and " or "") ..
      "core.epoch == c_epoch and M.blocks_per_sm == c_bps and M.unroll == c_unroll then\n" ..
      each(scalars, conv) .. "\n" ..
      (#cond > 0 and ("if " .. table.concat(cond, "\n    and ") .. " then\n") or "do\n") ..
      "local go = c_gs\n" ..
      "if c_vec and " .. each(arrays, "p$ % c_al$ == 0", " and ") .. " then go = c_gv end\n" ..
      "if go then\n" ..
      "go(" .. table.concat(args, ", ") .. ", c_n)\n" ..
      "return " .. each(outs, "v$", ", ") .. "\n" ..
      "end\nend\nend\n"
  end
  return
    "local env = ...\n" ..
    "local select, math_type = select, math.type\n" ..
    "local array_info, keys, core, M, SIZE, KIND = env.array_info, env.keys, env.core, env.M, env.size, env.kind\n" ..
    "local slow, map_slow, fname, decl, argv = env.slow, env.map_slow, env.fname, env.decl, env.argv\n" ..
    "local names = env.names or {}\n" ..
    each(all, "local N$ = names[$]") .. "\n" ..
    -- the last launch's facts (false: none yet, which no call matches)
    "local c_epoch, c_dev, c_n, c_bps, c_unroll, c_vec = false, false, false, false, false, false\n" ..
    "local c_gv, c_gs\n" ..
    each(arrays, "local c_dt$, c_nb$, c_al$ = false, 0, 1") .. "\n" ..
    each(scalars, "local c_f$ = false") .. "\n" ..
    -- parts: the dtype of each argument (the general path's), al: each array's
    -- alignment for the vector kernel where vec, go: the launcher that ran (isvec: the vector kernel's)
    "local function remember(parts, dev, n, vec, al, isvec, go)\n" ..
    "  if not (c_epoch == core.epoch and c_dev == dev and c_n == n and c_bps == M.blocks_per_sm\n" ..
    "          and c_unroll == M.unroll and c_vec == vec" .. each(arrays, " and c_dt$ == parts[$]", "") .. ") then\n" ..
    "    c_gv, c_gs = nil, nil\n" ..
    "    c_epoch, c_dev, c_n, c_bps, c_unroll, c_vec = core.epoch, dev, n, M.blocks_per_sm, M.unroll, vec\n" ..
    each(arrays, "    c_dt$, c_nb$, c_al$ = parts[$], n * SIZE[parts[$]], vec and al[$] or 1") .. "\n" ..
    each(scalars, "    c_f$ = KIND[parts[$]] == \"f\"") .. "\n" ..
    "  end\n" ..
    "  if isvec then c_gv = go else c_gs = go end\n" ..
    "end\n" ..
    "local function call(_, ...)\n" ..
    "if select(\"#\", ...) == " .. np .. " then\n" ..
    "local " .. vs .. " = ...\n" ..
    block(false) ..
    "end\n" ..
    "return slow(fname, decl, argv, ...)\n" ..
    "end\n" ..
    "local function mapcall(body, args, opts)\n" ..
    "if opts == nil and keys(args) == " .. np .. " then\n" ..
    "local " .. vs .. " = " .. each(all, "args[N$]", ", ") .. "\n" ..
    block(true) ..
    "end\n" ..
    "return map_slow(body, args, opts)\n" ..
    "end\n" ..
    "return call, mapcall, remember\n"
end

-- }======================================================

-- the made code by shape, compiled once: each declaration gets its own upvalues
local made = {}

-- arguments a fast path takes at most: its function has six locals an array, and Lua
-- allows a function 200 (a longer declaration keeps the general path only)
G.MAX_ARGS = 24

-- G.make(kinds, env, chunkname) -> call, mapcall, remember (nothing past G.MAX_ARGS)
-- kinds: a letter an argument, "s" scalar, "a" array, "o" output array (at least one
-- array). env: array_info (C.array), keys (C.keys), core (its epoch), M (blocks_per_sm, unroll),
-- size and kind (a dtype's bytes and "i"/"u"/"f"), slow and map_slow (the general
-- paths), fname, decl, argv (slow's arguments before the call's), names (for mapcall:
-- cuda.map's argument names in the kernel's order). chunkname: the module's, so that
-- its errors' levels skip these frames as they skip the module's.
--   call(self, ...)           the __call of the kernel
--   mapcall(body, args, opts) cuda.map's, for the kernel its variant made
--   remember(parts, dev, n, vec, al, isvec, go)   the general path's facts after a launch
function G.make(kinds, env, chunkname)
  if #kinds > G.MAX_ARGS then return end
  local f = made[kinds]
  if not f then
    f = assert(load(source(kinds), chunkname, "t"))
    made[kinds] = f
  end
  return f(env)
end

G.source = source

return G
