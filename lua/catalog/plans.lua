-- culua.catalog.plans: a catalog call made again on the arrays of an earlier one replays
-- that call's launches instead of checking and working it all out again (sort.lua and
-- scan.lua; issue 40's host path). A small call is bound by the host: a sort of 2^16 keys
-- took 6.6 us of host time a call through its checks and 0.5 us so, a scan of 2^16 1.8
-- and 0.6 (this CPU, bench/fakecuda.c's driver: none of the driver's own;
-- bench/host_paths.lua).
--
-- A family keeps one store, s = plans.new(). A call without options on arrays (a, b):
--   s:get(a, b)           the plan of an earlier call on (a, b) while it still holds: the
--                         arrays are open (C.live; a dtype, length or device never changes),
--                         the catalog's kernels the same (core.version), and the scratch
--                         arrays the call asked for, asked again in the same order and sizes,
--                         the same arrays (a larger call since, or the collector, may have
--                         replaced them; a plan keeps no array alive)
--   s:start(a, plain)     before the work of a call: records it when it is plain (no
--                         options) and a was seen before; the first plain call on a only
--                         notes a (s:finish), so arrays used once cost no plan
--   s:scratch(...)        core.scratch, and s:launch(k, cfg, ...) k:launch: noted while
--                         recording
--   s:finish(a, b, dev)   after it: the recording becomes (a, b)'s plan, its launches
--                         prepared (k:prepare) with every argument bound, arrays as their
--                         addresses
--   s:replay(p)           the plan's launches, in order
-- A family with a plan of its own making (scan's: one prepared launcher and the tile
-- state it takes afresh) asks s:again(a) after a plain call (true: a was seen before; it
-- notes a otherwise) and keeps its plan with s:keep(a, b, p); p needs version and dev, and
-- scratch = {} when it asks for none.

local cuda = require "cuda"
local core = require "culua.catalog.core"

local live, unpack = cuda._catalog.live, table.unpack
local weak_keys, weak_values = {__mode = "k"}, {__mode = "v"}

local S = {}
S.__index = S

local M = {}

function M.new()
  return setmetatable({by = setmetatable({}, weak_keys), rec = nil}, S)   -- a -> true, or {[b or a] = plan}
end

function S:get(a, b)
  local by = self.by[a]
  local p = by and by ~= true and by[b or a]
  if not p or p.version ~= core.version or not live(a, b) then return nil end
  local sc, arrays, dev = p.scratch, p.arrays, p.dev
  for i = 1, #sc do
    if core.scratch(sc[i][1], dev, nil, sc[i][2]) ~= arrays[i] then return nil end
  end
  return p
end

function S:keep(a, b, p)
  local by = self.by[a]
  if by == nil or by == true then by = setmetatable({}, weak_keys); self.by[a] = by end
  by[b or a] = p
end

function S:again(a)
  if self.by[a] ~= nil then return true end
  self.by[a] = true
  return false
end

-- (a call that raised leaves a recording behind: the next call's start drops it)
function S:start(a, plain)
  self.rec = plain and self.by[a] ~= nil and {scratch = {}, arrays = {}, launches = {}} or nil
end

function S:scratch(kind, dev, stream, size)
  local w = core.scratch(kind, dev, stream, size)
  local rec = self.rec
  if rec then
    local r = rec.scratch
    r[#r + 1] = {kind, size}
    rec.arrays[#r] = w
  end
  return w
end

function S:launch(k, cfg, ...)
  k:launch(cfg, ...)
  local rec = self.rec
  if rec then
    local l = rec.launches
    l[#l + 1] = {k, cfg, table.pack(...)}
  end
end

-- a recording as a plan: its launches prepared with every argument bound
local function plan_of(rec, dev)
  local p = {version = core.version, dev = dev, scratch = rec.scratch, arrays = setmetatable({}, weak_values),
             launches = {}}
  for i = 1, #rec.scratch do p.arrays[i] = rec.arrays[i] end
  for i, l in ipairs(rec.launches) do
    local args = l[3]
    for j = 1, args.n do   -- an array as its address: the plan keeps no array alive
      if cuda.type(args[j]) == "cuda.array" then args[j] = args[j].ptr end
    end
    p.launches[i] = l[1]:prepare(l[2], unpack(args, 1, args.n))
  end
  return p
end

function S:finish(a, b, dev, plain)
  if self.rec then
    self:keep(a, b, plan_of(self.rec, dev))
    self.rec = nil
  elseif plain then
    self.by[a] = true   -- used once: a plan the next time
  end
end

function S:replay(p)
  local l = p.launches
  for i = 1, #l do l[i]() end
end

return M
