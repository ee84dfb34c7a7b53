-- t/replay-check.lua: the launches a catalog call replays from its plan (lua/catalog/sort.lua,
-- scan.lua) are those its full call makes: kernel, config and every argument, calls 1-4 on the
-- same arrays, and after a larger sort or free_scratch against a call on a view (no plan).
-- Not a test file: run it on bench/fakecuda.c's driver (no GPU needed), or on a GPU:
--   CULUA_LIBCUDA=./fakecuda.so culua t/replay-check.lua     -> ends "all the same"
local cuda = require "cuda"
local cat = cuda.catalog
local methods = debug.getregistry()["cuda.kernel"].methods
local log
local function arg_str(v)
  if cuda.type(v) == "cuda.array" then return ("integer:%d"):format(v.ptr) end
  return ("%s:%s"):format(math.type(v) or type(v), tostring(v))
end
local function cfg_str(c)
  local g = type(c.grid) == "table" and table.concat(c.grid, "x") or tostring(c.grid)
  local b = type(c.block) == "table" and table.concat(c.block, "x") or tostring(c.block)
  return ("grid=%s block=%s shared=%s coop=%s prog=%s stream=%s"):format(g, b, tostring(c.shared), tostring(c.cooperative),
         tostring(c.programmatic), tostring(c.stream))
end
local function entry(k, c, args)
  local t = {}
  for i = 1, args.n do t[i] = arg_str(args[i]) end
  return k.name .. " " .. cfg_str(c) .. " (" .. table.concat(t, ", ") .. ")"
end
local launch, prepare = methods.launch, methods.prepare
methods.launch = function (k, c, ...)
  if log then log[#log + 1] = entry(k, c, table.pack(...)) end
  return launch(k, c, ...)
end
methods.prepare = function (k, c, ...)
  local bound = table.pack(...)
  local go = prepare(k, c, ...)
  return function (...)
    if log then
      local all = table.pack(table.unpack(bound, 1, bound.n))
      local more = table.pack(...)
      for i = 1, more.n do all[bound.n + i] = more[i] end
      all.n = bound.n + more.n
      log[#log + 1] = entry(k, c, all)
    end
    return go(...)
  end
end
local bad = 0
-- (the collector stopped over the four calls: scratch kept by device, for the default
-- stream, is a weak value of core.scratch's and goes with a collection, and a call after
-- one plans anew with new scratch, other pointers; which call a collection falls before
-- moves with any change in what the state allocates)
local function check(name, f, mask)
  local logs = {}
  collectgarbage("stop")
  for call = 1, 4 do
    log = {}
    f()
    logs[call] = table.concat(log, "\n")
    log = nil
  end
  collectgarbage("restart")
  if mask then for i = 1, 4 do logs[i] = logs[i]:gsub(mask, "") end end
  local same = logs[1] == logs[2] and logs[2] == logs[3] and logs[3] == logs[4]
  print(("%-40s %s (%d launches a call)"):format(name, same and "same launches on calls 1-4" or "DIFFERENT", select(2, logs[1]:gsub("\n", "")) + 1))
  if not same then bad = bad + 1; for i = 1, 4 do print("call " .. i .. ":\n" .. logs[i]) end end
end
for _, c in ipairs{{"uint32", 3000}, {"uint32", 1 << 16}, {"uint32", 100003, "uint32"}, {"float64", 70001, "int32"},
                   {"uint32", (1 << 22) + 3}, {"int64", 300007, "uint64"}, {"uint16", 200001}, {"uint8", 50001, "uint16"},
                   {"float32", 1 << 22, "float32"}, {"uint32", 1 << 24}} do
  local k, v = cuda.array(c[1], c[2]), c[3] and cuda.array(c[3], c[2])
  check(("sort %s %d%s"):format(c[1], c[2], c[3] and " +" .. c[3] or ""), function () cat.sort(k, v) end)
end
for _, c in ipairs{{"float32", 1 << 16}, {"float64", 5000}, {"int32", 100001}, {"float16", 1 << 16, "float32"}} do
  local x, y = cuda.array(c[1], c[2]), cuda.array(c[3] or c[1], c[2])
  -- the look-back's base and epoch advance a call by design: masked
  check(("scan %s %d"):format(c[1], c[2]), function () cat.scan(x, y) end, "integer:%d+, integer:%d+, integer:%d+, integer:0%)")
  check(("scan %s %d in place"):format(c[1], c[2]), function () cat.scan(x) end, "integer:%d+, integer:%d+, integer:%d+, integer:0%)")
end
print(bad == 0 and "replays: all the same" or ("replays: %d DIFFERENT"):format(bad))
-- one pass (odd: the copy back), and a plan after a larger sort replaced the scratch: the
-- replay (or the new plan) launches what a full call (a view: no plan) launches then
for _, c in ipairs{{"uint8", 1 << 22}, {"int8", 1 << 22, "uint32"}, {"uint32", 1 << 16}, {"uint32", 1 << 20, "uint64"}} do
  local k, v = cuda.array(c[1], c[2]), c[3] and cuda.array(c[3], c[2])
  check(("sort %s %d%s"):format(c[1], c[2], c[3] and " +" .. c[3] or ""), function () cat.sort(k, v) end)
  local big = cuda.array(c[1], 4 * c[2])
  cat.sort(big)
  local logs = {}
  for i, f in ipairs{function () cat.sort(k, v) end, function () cat.sort(k:view(1, c[2]), v and v:view(1, c[2])) end,
                     function () cat.sort(k, v) end} do
    log = {}; f(); logs[i] = table.concat(log, "\n"); log = nil
  end
  local same = logs[1] == logs[2] and logs[2] == logs[3]
  print(("%-40s %s"):format("  after a larger sort", same and "same as a full call" or "DIFFERENT"))
  if not same then bad = bad + 1 end
  cuda.catalog.free_scratch()
  local logs2 = {}
  for i, f in ipairs{function () cat.sort(k, v) end, function () cat.sort(k:view(1, c[2]), v and v:view(1, c[2])) end} do
    log = {}; f(); logs2[i] = table.concat(log, "\n"); log = nil
  end
  print(("%-40s %s"):format("  after free_scratch", logs2[1] == logs2[2] and "same as a full call" or "DIFFERENT"))
  if logs2[1] ~= logs2[2] then bad = bad + 1 end
end
print(bad == 0 and "all the same" or ("%d DIFFERENT"):format(bad))
