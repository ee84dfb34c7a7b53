-- src/ in layers: every call from one C file to another runs down this list,
-- never across or up, so the files form no circle. Read from the built
-- objects with nm: which file defines each global name, and which file uses
-- it. A new file of src/ must take its place here.
local T = require "culua.tap"

-- bottom first; a file may call only files before it
local layers = {
  -- what knows the outside: dlopen, and the files built in
  "loader", "embedded", "embed",
  -- the helpers, as lauxlib is: state, errors, options, contexts, dtypes,
  -- the checks of the objects bindings pass each other
  "auxlib", "context", "half", "dtype", "objects",
  -- the bindings, one a Lua type
  "device", "array", "hostarray", "event", "graph", "stream", "texture", "scalar",
  "kernel", "module", "program", "link", "nvtx", "nccl", "mpi",
  -- the catalog's C half, its references, the Lua modules
  "catalog", "reference", "luamods",
  -- the module and its openers, as linit is
  "cuda",
}
local rank = {}
for i, f in ipairs(layers) do rank[f] = i end

-- under memcheck, CI leaves this check of the build to the plain pass
local skip_nm = os.getenv("CULUA_TEST_SKIP_NM")
if skip_nm and skip_nm ~= "" then T.skip_all(skip_nm) end

local builddir = os.getenv("CULUA_BUILDDIR") or "."
-- libtool's objects (pic-only: one each, in .libs)
local dir = builddir .. "/src/.libs"
local probe = io.open(dir .. "/cuda.o")
if not probe then T.skip_all("no objects in " .. dir .. " (build first)") end
probe:close()
local out, status = T.run("nm -g " .. dir .. "/cuda.o")
if status ~= 0 then T.skip_all("nm does not run: " .. out) end

-- the objects, and for each its defined and undefined global names
local files = {}
local ls = io.popen("ls " .. dir .. "/*.o")
for path in ls:lines() do files[#files + 1] = path:match("([^/]+)%.o$") end
ls:close()
local defines, uses = {}, {}
for _, f in ipairs(files) do
  uses[f] = {}
  local nm = io.popen("nm -g " .. dir .. "/" .. f .. ".o")
  for line in nm:lines() do
    local kind, name = line:match("^%x*%s+(%a)%s+(%S+)$")
    if kind == "U" then uses[f][name] = true
    elseif kind and kind:match("[TDRBC]") then defines[name] = f end
  end
  nm:close()
end

for _, f in ipairs(files) do
  T.ok(rank[f], f .. ".o has its place in the layers")
end
for _, f in ipairs(files) do
  local up, calls = {}, {}
  for name in pairs(uses[f]) do
    local g = defines[name]
    if g and g ~= f then
      calls[g] = true
      if not rank[f] or not rank[g] or rank[g] >= rank[f] then up[#up + 1] = g .. "'s " .. name end
    end
  end
  local seen = {}
  for g in pairs(calls) do seen[#seen + 1] = g end
  table.sort(seen)
  table.sort(up)
  T.is(#up, 0, ("%s calls only down (%s)"):format(f, table.concat(seen, " ")))
  if #up > 0 then T.diag("across or up: " .. table.concat(up, ", ")) end
end
T.done_testing()
