-- bench/sanitize_scan.lua: the scan family's kernels at small sizes, for compute-sanitizer (every variant, op, dtype)
local cuda = require "cuda"
local cat = cuda.catalog
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
      cat.compact(x, y, flags); cat.compact(x, y, "x > 4.0f"); cat.split(x, y, flags)
    end
  end
end
cuda.synchronize()
print("san_scan done")
