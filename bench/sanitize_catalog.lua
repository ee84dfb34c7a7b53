-- bench/sanitize_catalog.lua: catalog families' kernels at small sizes, every
-- variant, op and dtype, for compute-sanitizer (the test files run them at sizes
-- that take racecheck and initcheck too long):
--   compute-sanitizer --tool racecheck ./culua bench/sanitize_catalog.lua [FAMILY ...]
-- FAMILY is scan, histogram, sort or ranks (default: all four).
local cuda = require "cuda"
require("culua.bench").need_devices()
local cat = cuda.catalog

local run = {}

function run.scan()
  for _, dt in ipairs{"int32", "uint32", "int64", "uint64", "float32", "float64"} do
    for _, n in ipairs{1, 33, 1000, 4097, 70001} do
      local h = cuda.host_array(dt, n):random(n, 0, 9)
      local x, y = cuda.array(dt, n):copy_from(h), cuda.array(dt, n)
      for _, op in ipairs{"add", "min", "max"} do
        cat.scan(x, y, {op = op}); cat.scan(x, y, {op = op, exclusive = true}); cat.reduce(x, {op = op})
      end
      if n <= 1024 then cat.scan(x, y, {variant = "naive"}) end
      if n <= 2048 then cat.scan(x, y, {variant = "blelloch"}) end
      cat.scan(x, y, {variant = "global"})
      if dt == "float32" then
        local flags = cuda.array("uint8", n):copy_from(cuda.host_array("uint8", n):random(1, 0, 1))
        cat.compact(x, y, flags); cat.split(x, y, flags)
      end
      -- expressions: 4-byte values take another tile shape than 8-byte ones
      cat.compact(x, y, "x > 4"); cat.split(x, y, "x > 4")
      if n > 2 then   -- into a view off a line: the warps' runs start mid-line (write_run)
        cat.compact(x:view(3, n - 2), y:view(2, n - 1), "x > 4"); cat.split(x:view(3, n - 2), y:view(2, n - 1), "x > 4")
      end
    end
  end
end

function run.histogram()
  for _, dt in ipairs{"uint8", "uint16", "int32", "uint32", "float32", "float64"} do
    for _, n in ipairs{1, 33, 1000, 4097, 70001} do
      local x = cuda.array(dt, n):copy_from(cuda.host_array(dt, n):random(n, 0, 200))
      local float = dt:sub(1, 5) == "float"
      for _, cdt in ipairs{"uint32", "uint64"} do
        -- a copy a warp (256 bins), one a block (5000), global counts (20000)
        for _, bins in ipairs{256, 5000, 20000} do
          local c = cuda.array(cdt, bins)
          local o = {lo = float and 0.0 or 0, hi = float and 200.0 or 200}
          cat.histogram(x, c, o)
          if bins <= 12288 then o.variant = "seed"; cat.histogram(x, c, o) end
        end
        if n > 1 then   -- a view one element in: not 16-byte aligned, read element by element
          cat.histogram(x:view(2, n - 1), cuda.array(cdt, 7), {lo = float and 0.0 or 0, hi = float and 200.0 or 200, bins = 7})
        end
      end
    end
    if dt == "uint8" then   -- every byte its own bin, unchecked
      local x = cuda.array("uint8", 70001):copy_from(cuda.host_array("uint8", 70001):random(3, 0, 255))
      cat.histogram(x, cuda.array("uint32", 256))
    end
  end
end

function run.sort()
  for _, dt in ipairs{"uint32", "int32", "float32", "uint64", "int64", "float64"} do
    for _, n in ipairs{1, 32, 33, 3000, 4097, 70001} do
      local h = cuda.host_array(dt, n):random(n, dt:sub(1, 1) == "u" and 0 or -1000, 1000)
      local k, v = cuda.array(dt, n), cuda.array("uint32", n)
      v:fill(1)   -- values are read: initcheck would count an unwritten array
      for _, variant in ipairs{"onesweep", "lsd"} do
        k:copy_from(h); cat.sort(k, nil, {variant = variant})
        k:copy_from(h); cat.sort(k, v, {variant = variant, descending = true})
        k:copy_from(h); cat.sort(k, nil, {variant = variant, begin_bit = 4, end_bit = 12})
      end
      cat.argsort(k)
      if n > 4096 then   -- a launch a pass (programmatic dependents), not the one-launch path
        k:copy_from(h); cat.sort(k, nil, {fused = false})   -- the upfront histogram's lanes
        k:copy_from(h); cat.sort(k, v, {fused = false})
        k:copy_from(h); cat.sort(k, v, {fused = false, upfront = "rows", descending = true})
      end
    end
  end
  -- 16- and 8-bit keys (every bit pattern, NaNs among the floats), with 1- to 4-byte values
  for _, dt in ipairs{"float16", "bfloat16", "int16", "float8_e4m3", "uint8"} do
    local w8 = dt:find("8") ~= nil
    for _, n in ipairs{1, 33, 3000, 7681, 70001} do
      local h = cuda.host_array(dt, n):copy_from(cuda.host_array(w8 and "uint8" or "uint16", n):random(n, 0, w8 and 255 or 65535):bytes())
      local k = cuda.array(dt, n)
      for _, vdt in ipairs{"uint32", "uint16", "uint8"} do
        local v = cuda.array(vdt, n):fill(1)
        k:copy_from(h); cat.sort(k, v, {descending = vdt == "uint16"})
      end
      for _, variant in ipairs{"onesweep", "lsd"} do
        k:copy_from(h); cat.sort(k, nil, {variant = variant})
        k:copy_from(h); cat.sort(k, nil, {variant = variant, begin_bit = 3, end_bit = 7})
      end
      cat.argsort(k)
      if n > 4096 then
        k:copy_from(h); cat.sort(k, nil, {fused = false})
        k:copy_from(h); cat.sort(k, nil, {fused = false, upfront = "rows", descending = true})
        cat.argsort(k, {fused = false})
      end
    end
  end
  local w = cuda.array("uint32", 32):copy_from(cuda.host_array("uint32", 32):random(5, 0, 1000))
  cat.sort(w, nil, {variant = "warp"})
end

-- the solve over ranks' steps (bstep for up to eight right-hand sides, trsm and matmul past
-- them) and the LU's transfers, on one GPU: a communicator of one rank, the columns dealt out
-- to it; blocks of 128, 100 (parts of 32 and a last of 4) and 16, partial last blocks
function run.ranks()
  local ok = pcall(cuda.nccl.version)
  if not ok then print("ranks: no NCCL here, not run"); return end
  local comm <close> = cuda.nccl.comm(cuda.nccl.unique_id(), 1, 0, {device = cuda.device().ordinal})
  for _, c in ipairs{{"float32", 300, 128}, {"float64", 250, 100}, {"float32", 77, 16}} do
    local dt, n, nb = c[1], c[2], c[3]
    local d = cat.block_cyclic(n, 1, nb)
    local hA = cuda.host_array(dt, {n, n}):random(n, -1, 1)
    for _, k in ipairs{1, 3, 8, 9} do
      local X = d:array(dt, 0):copy_from(hA)
      local B = cuda.array(dt, {n, k}):copy_from(cuda.host_array(dt, {n, k}):random(k, -1, 1))
      cat.solve(X, B, {comm = comm, distribution = d, overwrite = true})
    end
  end
end

local families = #arg > 0 and arg or {"scan", "histogram", "sort", "ranks"}
for _, f in ipairs(families) do
  assert(run[f], "sanitize_catalog.lua: no family " .. f)(f)
  cuda.synchronize()
  print(("%s done"):format(f))
end
