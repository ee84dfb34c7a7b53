-- culua.catalog: cuda.catalog, the prebuilt kernel families.
--
-- Each family is a module of its own, lua/catalog/<family>.lua, with its
-- kernels in kernels/<family>.cu; culua.catalog.core alone loads kernels and
-- holds the checks and scratch memory they share. This file only gathers the
-- families: adding one is a line in `families` below. A family module returns
-- a table of what it adds to cuda.catalog, plus `reference` (CPU references,
-- gathered into cuda.catalog.reference) and `info` (its part of list()).

local cuda = require "cuda"
local core = require "culua.catalog.core"
local C = cuda._catalog

local families = {
  "matmul",
  "barrier",
  "scan",
  "histogram",
  "sort",
  "solve",
  "cast",
}

-- every catalog call is an NVTX range of its name, so Nsight Systems shows
-- a script's catalog work (nanoseconds when no tool is attached)
local nvtx_range = cuda.nvtx.range
local function ranged(name, f)
  return function (...) return nvtx_range(name, f, ...) end
end

local catalog = {
  kernel = core.kernel,   -- catalog.kernel(file, name [, defines, device])
  clear = core.clear,     -- what cuda.reset() calls (as culua.catalog.core.clear)
  free_scratch = core.free_scratch,
  reference = {},
}
local info = {}

for _, name in ipairs(families) do
  local fam = require("culua.catalog." .. name)
  for k, v in pairs(fam) do
    if k == "reference" then
      for rk, rv in pairs(v) do catalog.reference[rk] = rv end
    elseif k == "info" then
      info[name] = v
    elseif k == "tune" then
      -- a family's tuning knobs stay its own: require("culua.catalog.<family>").tune
    else
      assert(catalog[k] == nil, "two catalog families export " .. k)
      catalog[k] = type(v) == "function" and ranged("cuda.catalog." .. k, v) or v
    end
  end
end

-- cuda.catalog.list() -> what is there: the kernel files, the device headers,
-- and each family's variants and knobs
function catalog.list()
  local h = {}
  for name in pairs(C.headers()) do h[#h + 1] = name end
  table.sort(h)
  local l = {families = C.families(), headers = h}
  for name, v in pairs(info) do l[name] = v end
  return l
end

return catalog
