-- Bad input across every binding and catalog family: each case states the error it
-- expects (a pattern naming the function and the argument), and the process goes on.
-- With a GPU, no case may leak device memory: this state's cuda.memory_in_use()
-- and its live objects (cuda.live) are compared around the whole table; never the
-- device's free memory, which other processes on the GPU move.
local T = require "culua.tap"
local cuda = require "cuda"
local gpu = cuda.device_count() > 0

local cases = {}
local function case(what, fn, pattern) cases[#cases + 1] = {what, fn, pattern} end
local NAN, INF = 0 / 0, 1 / 0

-- {====================================================== no GPU needed

-- host arrays: shapes, dtypes, values, closed objects
case("host_array: a bad dtype", function () cuda.host_array("float33", 10) end, "cuda%.host_array: bad argument #1 %(unknown dtype 'float33'; expected one of int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64, float16, bfloat16, float8_e4m3, float8_e5m2%)")
case("host_array: an uppercase dtype", function () cuda.host_array("Float32", 10) end, "unknown dtype 'Float32'")
case("host_array: no dtype", function () cuda.host_array() end, "cuda%.host_array: bad argument #1")
case("host_array: a number for the dtype", function () cuda.host_array(3, 4) end, "cuda%.host_array: bad argument #1")
case("host_array: negative size", function () cuda.host_array("float32", -1) end, "cuda%.host_array: bad argument #2 %(element count must be 0 or more, got %-1%)")
case("host_array: negative rows", function () cuda.host_array("float32", {-2, 4}) end, "cuda%.host_array: bad argument #2 %(rows and cols must be integers 0 or more%)")
case("host_array: a fractional row count", function () cuda.host_array("float32", {2.5, 4}) end, "rows and cols must be integers 0 or more")
case("host_array: a string for cols", function () cuda.host_array("float32", {2, "4"}) end, "rows and cols must be integers 0 or more")
case("host_array: 2^62 elements", function () cuda.host_array("float32", 2^62) end, "cuda%.host_array: bad argument #2 %(shape too large%)")
case("host_array: 2^62 elements as an integer", function () cuda.host_array("float64", 1 << 62) end, "shape too large")
case("host_array: NaN size", function () cuda.host_array("float32", NAN) end, "cuda%.host_array: bad argument #2 %(number has no integer representation%)")
case("host_array: inf size", function () cuda.host_array("float32", INF) end, "cuda%.host_array: bad argument #2")
case("host_array: fractional size", function () cuda.host_array("float32", 1.5) end, "number has no integer representation")
case("host_array: a string size", function () cuda.host_array("float32", "ten") end, "cuda%.host_array: bad argument #2 %(number expected, got string%)")
case("host_array: rows x cols overflow", function () cuda.host_array("float32", {2^31, 2^31}) end, "shape too large")
case("host_array: one-entry shape", function () cuda.host_array("float32", {3}) end, "shape must be {rows, cols}")
case("host_array: negative cols", function () cuda.host_array("float32", {3, -1}) end, "rows and cols must be integers 0 or more")
case("host_array: a misspelt option", function () cuda.host_array("float32", 4, {pinnned = true}) end, "cuda%.host_array: unknown option 'pinnned' %(known: pinned, mapped, device%)")
case("host_array: device -1", function () cuda.host_array("float32", 4, {pinned = true, device = -1}) end, "cuda%.host_array: device must be an ordinal 0 or more, got %-1")
case("host_array: options not a table", function () cuda.host_array("float32", 4, 5) end, "cuda%.host_array: bad argument #3 %(table expected, got number%)")
-- managed and mapped memory (t/039): options refused before any device is asked
case("host_array: mapped a number", function () cuda.host_array("float32", 4, {mapped = 1}) end, "cuda%.host_array: mapped must be a boolean, got 1")
case("host_array: mapped but not pinned", function () cuda.host_array("float32", 4, {pinned = false, mapped = true}) end, "cuda%.host_array: mapped memory is pinned %(pinned = false and mapped = true contradict%)")
case("array: managed a string", function () cuda.array("float32", 4, {managed = "yes"}) end, "cuda%.array: managed must be a boolean, got string")
case("array: sync without managed", function () cuda.array("float32", 4, {sync = false}) end, "cuda%.array: sync is an option of managed arrays %(give managed = true too%)")
case("array: sync a number", function () cuda.array("float32", 4, {managed = true, sync = 0}) end, "cuda%.array: sync must be a boolean, got 0")
case("array: managed and pitched", function () cuda.array("float32", {2, 2}, {managed = true, pitched = true}) end, "cuda%.array: a managed array is not pitched")
case("memory_in_use: an unknown kind", function () cuda.memory_in_use("pinned") end, "cuda%.memory_in_use: bad argument #1 %(invalid option 'pinned'%)")
case("map: a host array that is not mapped", function () cuda.map("y = 1", {y = cuda.host_array("float32", 2)}) end, "cuda%.map: argument 'y' must be a cuda%.array or a number, got cuda%.host_array %(not mapped: make it with {mapped = true}%)")
local h = cuda.host_array("float32", 4)
case("h[i]: past the end", function () return h[5] end, "index 5 outside 1%.%.4")
case("h[i]: index 0", function () return h[0] end, "index 0 outside 1%.%.4")
case("h[i]: index -1", function () return h[-1] end, "index %-1 outside 1%.%.4")
case("h[i] = a string", function () h[1] = "x" end, "number expected for float32, got string")
case("h[i] = nil", function () h[1] = nil end, "number expected for float32, got nil")
case("uint8 h[i] = 256", function () cuda.host_array("uint8", 1)[1] = 256 end, "256 out of range for uint8")
case("int8 h[i] = -129", function () cuda.host_array("int8", 1)[1] = -129 end, "%-129 out of range for int8")
case("int32 h[i] = 1.5", function () cuda.host_array("int32", 1)[1] = 1.5 end, "1%.5 has no exact int32 representation")
case("int32 h[i] = NaN", function () cuda.host_array("int32", 1)[1] = NAN end, "nan has no exact int32 representation")
case("uint64 h[i] = -1", function () cuda.host_array("uint64", 1)[1] = -1 end, "%-1 out of range for uint64")
case("copy_from: too many values", function () h:copy_from({1, 2, 3, 4, 5}) end, "copy_from: 5 values do not fit in 4 elements")
case("copy_from: a string value", function () h:copy_from({1, "x"}) end, "copy_from: number expected for float32, got string")
case("copy_from: another dtype", function () h:copy_from(cuda.host_array("float64", 4)) end, "dtype mismatch %(float32 and float64%); copies do not convert")
case("copy_from: a number", function () h:copy_from(5) end, "copy_from")
case("fill: a string", function () h:fill("x") end, "fill: number expected for float32, got string")
case("random: a string seed", function () h:random("seed") end, "random: bad argument #1 %(number expected, got string%)")
case("iota: a string", function () h:iota("a") end, "iota: bad argument #1")
local closed = cuda.host_array("float32", 4)
closed:close()
case("a closed host array: index", function () return closed[1] end, "attempt to use a closed cuda%.host_array")
case("a closed host array: fill", function () closed:fill(1) end, "attempt to use a closed cuda%.host_array")
case("a closed host array: copy_from", function () closed:copy_from({1}) end, "attempt to use a closed cuda%.host_array")
case("compare: sizes differ", function () cuda.compare(h, cuda.host_array("float32", 5)) end, "cuda%.compare: sizes differ %(4 and 5 elements%)")
case("compare: numbers", function () cuda.compare(1, 2) end, "cuda%.compare: bad argument #1 %(cuda%.host_array or cuda%.array expected, got number%)")

-- NVRTC: sources, options, headers
case("compile: a misspelt option", function () cuda.compile("x", {bogus = 1}) end, "cuda%.compile: unknown option 'bogus' %(known: options, headers")
case("compile: a NUL byte in the source", function () cuda.compile("__global__ void k() {}\0 int x;") end, "cuda%.compile: the source has a NUL byte at offset 22 %(NVRTC would ignore the 7 bytes after it%)")
case("compile: a NUL byte in a header", function () cuda.compile("x", {headers = {["a.h"] = "a\0b"}}) end, "cuda%.compile: header 'a%.h' has a NUL byte")
case("compile: options a string", function () cuda.compile("x", {options = "-O3"}) end, "cuda%.compile: options must be a table, got string")
case("compile: line a string", function () cuda.compile("x", {line = "3"}) end, "cuda%.compile: line must be an integer, got string")
case("compile: name a number", function () cuda.compile("x", {name = 5}) end, "cuda%.compile: name must be a string, got 5")
case("stream: priority a string", function () cuda.stream{priority = "high"} end, "cuda%.stream: priority must be an integer, got string")
case("stream: priority 1.5", function () cuda.stream{priority = 1.5} end, "cuda%.stream: priority must be an integer, got 1%.5")
case("float32 h[i] = 1e300", function () cuda.host_array("float32", 1)[1] = 1e300 end, "1e%+300 overflows float32 %(largest 3%.4028235e%+38%)")
case("float32 fill(-1e39)", function () cuda.host_array("float32", 2):fill(-1e39) end, "fill: %-1e%+39 overflows float32")
case("float32 copy_from a huge value", function () cuda.host_array("float32", 2):copy_from({1, 1e40}) end, "copy_from: 1e%+40 overflows float32")
case("uint8 iota past 255", function () cuda.host_array("uint8", 1000):iota() end, "iota: 1000 out of range for uint8")
case("int32 iota by 0.5", function () cuda.host_array("int32", 3):iota(1, 0.5) end, "iota: step 0%.5 is not a whole number, as int32 needs")
case("compile: a number source", function () cuda.compile(42) end, "cuda%.compile: NVRTC_ERROR_COMPILATION")
case("compile: options not a table", function () cuda.compile("x", 5) end, "cuda%.compile: bad argument #2 %(table expected, got number%)")
case("compile: options[1] a number", function () cuda.compile("x", {options = {42}}) end, "cuda%.compile: options%[1%] must be a string")
case("compile: output sass", function () cuda.compile("x", {output = "sass"}) end, "cuda%.compile: output must be 'ptx' or 'cubin', not 'sass'")
case("compile: headers not names", function () cuda.compile("x", {headers = {1}}) end, "cuda%.compile: headers must map names to source strings")
case("compile: -arch without =", function () cuda.compile("x", {options = {"-arch", "sm_90"}}) end, "write the target as '%-arch=NAME'")
case("compile: not C++", function () cuda.compile("this is not C++") end, "NVRTC_ERROR_COMPILATION.-expected a declaration")
case("compile: an unknown NVRTC option", function () cuda.compile('extern "C" __global__ void k() {}', {options = {"--bogus-flag"}}) end,
     "NVRTC_ERROR_INVALID_OPTION.-unrecognized option %-%-bogus%-flag")
case("compile: an unknown target", function () cuda.compile('extern "C" __global__ void k() {}', {options = {"-arch=compute_12"}}) end,
     "cuda%.compile: NVRTC_ERROR_INVALID_OPTION")
case("compile: a bad name expression", function () cuda.compile('extern "C" __global__ void k() {}', {name_expressions = {"nope<int>"}}) end,
     "NVRTC_ERROR_COMPILATION.-nope")
case("compile: a header that does not exist", function () cuda.compile('#include "nothere.h"\n') end, "cannot open source file \"nothere%.h\"")
case("compile: 100 MB of source", function () cuda.compile(("//" .. ("x"):rep(98) .. "\n"):rep(1 << 20) .. "this is not C++\n") end,
     "NVRTC_ERROR_COMPILATION")

-- PTX signatures and launch arguments, checked without a kernel
case("signature: not a string", function () cuda.signature({}, "k") end, "cuda%.signature: bad argument #1")
case("signature: an unknown entry", function () cuda.signature(".entry k()", "kk") end, "cuda%.signature: no entry 'kk' in the PTX")
case("signature: garbage", function () cuda.signature("garbage", "k") end, "cuda%.signature: no entry 'k' in the PTX")
case("check_args: not a table", function () cuda.check_args(42) end, "cuda%.check_args: bad argument #1 %(table expected, got number%)")
case("check_args: too few", function () cuda.check_args({"u32"}) end, "launch: the kernel takes 1 argument, got 0")
case("check_args: too many", function () cuda.check_args({}, 1) end, "launch: the kernel takes 0 arguments, got 1")
case("check_args: a string for u32", function () cuda.check_args({"u32"}, "x") end, "launch: argument 1 must be an integer for u32, got string")
case("check_args: 2^40 for u32", function () cuda.check_args({"u32"}, 1 << 40) end, "argument 1 = 1099511627776 out of range for u32")
case("check_args: 2^31 for s32", function () cuda.check_args({"s32"}, 1 << 31) end, "argument 1 = 2147483648 out of range for s32")
case("check_args: -1 for u8 is fine, -129 is not", function () cuda.check_args({"u8"}, -129) end, "argument 1 = %-129 out of range for u8")
case("check_args: a table for f32", function () cuda.check_args({"f32"}, {}) end, "argument 1 must be a number for f32, got table")
case("check_args: 1.5 for u64", function () cuda.check_args({"u64"}, 1.5) end, "argument 1 must be an integer for u64 %(or a cuda%.array%), got 1%.5")
case("check_args: NaN for s64", function () cuda.check_args({"s64"}, NAN) end, "argument 1 must be an integer for s64")
case("check_args: a host array for u64", function () cuda.check_args({"u64"}, h) end, "launch: argument 1 is a cuda%.host_array that is not mapped: kernels cannot reach it %(make it with {mapped = true}, or copy it to a cuda%.array%)")
case("check_args: a number for a __half", function () cuda.check_args({"b8[2]"}, 0.5) end, "argument 1 is a number but parameter 1 is b8%[2%], a __half or __nv_bfloat16 %(PTX does not tell them apart%)")
case("check_args: a float16 scalar for a float", function () cuda.check_args({"f32"}, cuda.scalar("float16", 0.5)) end, "argument 1 is a cuda%.scalar of float16 but parameter 1 is f32")
case("check_args: an fp8 number", function () cuda.check_args({"b8"}, 0.5) end, "an __nv_fp8_e4m3 or __nv_fp8_e5m2")
case("host_array: past float16's range", function () cuda.host_array("float16", 2):fill(1e5) end, "fill: 100000%.0 overflows float16 %(largest 65504%.0%)")
case("host_array: inf into e4m3", function () cuda.host_array("float8_e4m3", 2)[1] = INF end, "inf would saturate to 448%.0 in float8_e4m3")
case("scalar: a bad dtype", function () cuda.scalar("fp16", 1) end, "cuda%.scalar: bad argument #1 %(unknown dtype 'fp16'; expected one of int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64, float16, bfloat16, float8_e4m3, float8_e5m2%)")
case("astype: a bad dtype", function () cuda.host_array("float32", 2):astype("float8") end, "astype: bad argument #1 %(unknown dtype 'float8'")
case("check_args: a short struct", function () cuda.check_args({"b8[12]"}, "short") end, "argument 1 must be a string of 12 bytes %(a struct by value%), got 5 bytes")
case("check_args: an unknown type", function () cuda.check_args({"q8"}, 1) end, "signature%[1%] = 'q8' is not a parameter type")
case("check_args: b7", function () cuda.check_args({"b7"}, 1) end, "signature%[1%] = 'b7' is not a parameter type")
case("check_args: a huge struct", function () cuda.check_args({"b64[999999999]"}, "x") end, "has a bad array length")
case("load: a number", function () cuda.load(42) end, "cuda%.load: bad argument #1 %(string, cuda%.program or {file = path} expected, got number%)")
-- found by this table on an H100: the driver crashed the process on a truncated CUBIN
local cubin = cuda.compile('extern "C" __global__ void k() {}', {output = "cubin", options = {"-arch=sm_90"}}).cubin
case("load: a CUBIN cut to 100 bytes", function () cuda.load(cubin:sub(1, 100)) end, "cuda%.load: a truncated ELF image %(100 bytes")
case("load: a CUBIN short of 10 bytes", function () cuda.load(cubin:sub(1, #cubin - 10)) end, "cuda%.load: a truncated ELF image")
case("load: a 32-bit ELF header", function () cuda.load("\127ELF\1" .. ("\0"):rep(80)) end, "a truncated or 32%-bit ELF image")
case("load: a fatbin cut short", function () cuda.load(cuda._catalog.fatbin("barrier"):sub(1, 1000)) end, "cuda%.load: a truncated fatbin image %(1000 bytes%)")
case("load: a missing file", function () cuda.load({file = "/nonexistent.ptx"}) end, "cuda%.load: cannot open /nonexistent%.ptx")
case("device: a string", function () cuda.device("zero") end, "cuda%.device: bad argument #1 %(number expected, got string%)")
case("bench: not a function", function () cuda.bench(42) end, "cuda%.bench: bad argument #1 %(function expected, got number%)")
case("bench: reps 0", function () cuda.bench(function () end, {reps = 0}) end, "cuda%.bench: reps must be an integer >= 1, got 0")
case("bench: warmup -1", function () cuda.bench(function () end, {warmup = -1}) end, "cuda%.bench: warmup must be an integer >= 0, got %-1")
-- errors name the user's line, never one inside culua's Lua modules
case("bench: at the user's line", function () cuda.bench(function () end, {reps = 0}) end, "029%-bad%-input%.t:%d+: cuda%.bench: reps")
if not gpu then
  case("bench: no GPU, at the user's line", function () cuda.bench(function () end) end, "029%-bad%-input%.t:%d+: cuda%.event: ")
end
case("reference.matmul: at the user's line", function () cuda.catalog.reference.matmul(1, 2, 3) end, "029%-bad%-input%.t:%d+: cuda%.catalog%.reference%.matmul: ")
case("live: an unknown kind", function () cuda.live("threads") end, "cuda%.live: bad argument #1 %(invalid option 'threads'%)")

-- the catalog without device memory
case("matmul: numbers", function () cuda.catalog.matmul(1, 2, 3) end, "cuda%.catalog%.matmul: A must be a cuda%.array, got number")
case("matmul: host arrays", function () cuda.catalog.matmul(h, h, h) end, "cuda%.catalog%.matmul: A must be a cuda%.array, got cuda%.host_array")
case("matmul: a misspelt option", function () cuda.catalog.matmul(1, 2, 3, {aplha = 2}) end, "cuda%.catalog%.matmul: unknown option 'aplha'")
case("matmul: opts a string", function () cuda.catalog.matmul(1, 2, 3, "fast") end, "cuda%.catalog%.matmul: opts must be a table, got string")
-- sizes and leading dimensions are checked before the arrays
case("matmul: lda 1.5", function () cuda.catalog.matmul(1, 2, 3, {lda = 1.5}) end, "cuda%.catalog%.matmul: lda must be a positive integer, got 1%.5")
case("matmul: ldb -8", function () cuda.catalog.matmul(1, 2, 3, {ldb = -8}) end, "cuda%.catalog%.matmul: ldb must be a positive integer, got %-8")
case("matmul: ldc 0", function () cuda.catalog.matmul(1, 2, 3, {ldc = 0}) end, "cuda%.catalog%.matmul: ldc must be a positive integer, got 0")
case("matmul: ldc a string", function () cuda.catalog.matmul(1, 2, 3, {ldc = "64"}) end, "cuda%.catalog%.matmul: ldc must be a positive integer, got 64")
case("matmul: lda NaN", function () cuda.catalog.matmul(1, 2, 3, {lda = NAN}) end, "cuda%.catalog%.matmul: lda must be a positive integer, got .*nan")
case("matmul: k 2.5", function () cuda.catalog.matmul(1, 2, 3, {k = 2.5}) end, "cuda%.catalog%.matmul: k must be an integer 0 or more, got 2%.5")
case("matmul: transb a number", function () cuda.catalog.matmul(1, 2, 3, {transb = 1}) end, "cuda%.catalog%.matmul: transb must be a boolean, got number")
case("matmul: transb a string", function () cuda.catalog.matmul(1, 2, 3, {transb = "T"}) end, "cuda%.catalog%.matmul: transb must be a boolean, got string")
case("scan: a number", function () cuda.catalog.scan(1) end, "cuda%.catalog%.scan: x must be a cuda%.array, got number")
case("scan: a host array", function () cuda.catalog.scan(h) end, "cuda%.catalog%.scan: x must be a cuda%.array, got cuda%.host_array")
case("reduce: a string", function () cuda.catalog.reduce("x") end, "cuda%.catalog%.reduce: x must be a cuda%.array, got string")
case("compact: numbers", function () cuda.catalog.compact(1, 2, 3) end, "cuda%.catalog%.compact: x must be a cuda%.array, got number")
case("split: numbers", function () cuda.catalog.split(1, 2, 3) end, "cuda%.catalog%.split: x must be a cuda%.array, got number")
case("sort: a number", function () cuda.catalog.sort(1) end, "cuda%.catalog%.sort: keys must be a cuda%.array, got number")
case("sort: a host array", function () cuda.catalog.sort(h) end, "cuda%.catalog%.sort: keys must be a cuda%.array, got cuda%.host_array")
case("sort: a misspelt option", function () cuda.catalog.sort(1, {decending = true}) end, "cuda%.catalog%.sort: unknown option 'decending'")
case("argsort: a string", function () cuda.catalog.argsort("x") end, "cuda%.catalog%.argsort: keys must be a cuda%.array, got string")
case("sort: a list of keys without devices", function () cuda.catalog.sort({1, 2}) end, "cuda%.catalog%.sort: keys is a list of arrays: give devices = {%.%.%.}")
case("sort: devices and keys of two lengths", function () cuda.catalog.sort({1, 2}, {devices = {0}}) end, "cuda%.catalog%.sort: keys has 2 arrays but devices lists 1")
case("sort: devices not a list", function () cuda.catalog.sort({1}, {devices = 0}) end, "cuda%.catalog%.sort: devices must be a list of device ordinals, got number")
case("sort: a misspelt option of a sort over devices", function () cuda.catalog.sort({1}, {devices = {0}, balanse = "even"}) end, "cuda%.catalog%.sort: unknown option 'balanse'")
case("sort: comm a number", function () cuda.catalog.sort(1, {comm = 3}) end, "cuda%.catalog%.sort: comm must be a cuda%.nccl%.comm, got number")
case("barrier.xpx: an unknown kind", function () cuda.catalog.barrier.xpx("nope") end, "cuda%.catalog%.barrier%.xpx: kind must be one of none, block")
case("barrier.launch: config a number", function () cuda.catalog.barrier.launch(nil, 5) end, "cuda%.catalog%.barrier%.launch: config must be a table, got number")
case("barrier.launch: a misspelt key", function () cuda.catalog.barrier.launch(nil, {blokc = 32}) end, "unknown option 'blokc'")
case("catalog.kernel: an unknown family", function () cuda.catalog.kernel("fft", "x") end, "cuda%.catalog: no kernel family 'fft'")
case("reference.matmul: shapes", function ()
  cuda.catalog.reference.matmul(cuda.host_array("float32", {2, 3}), cuda.host_array("float32", {2, 3}), cuda.host_array("float64", {2, 2}))
end, "shapes 2x3 %* 2x3 %-> 2x2 do not fit")
case("reference.matmul: numbers", function () cuda.catalog.reference.matmul(1, 2, 3) end, "cuda%.catalog%.reference%.matmul: bad argument #1 %(cuda%.host_array expected, got number%)")
-- every options table refuses a key it does not know, the references' too
local hk = cuda.host_array("float32", 4)
case("reference.sort: a misspelt option", function () cuda.catalog.reference.sort(hk, {descnding = true}) end, "cuda%.catalog%.reference%.sort: unknown option 'descnding' %(known: descending, begin_bit, end_bit%)")
case("reference.sort: a misspelt option after values", function () cuda.catalog.reference.sort(hk, cuda.host_array("int32", 4), {end_bits = 8}) end, "cuda%.catalog%.reference%.sort: unknown option 'end_bits'")
case("reference.argsort: a misspelt option", function () cuda.catalog.reference.argsort(hk, {descnding = true}) end, "cuda%.catalog%.reference%.argsort: unknown option 'descnding'")
case("reference.scan: a misspelt option", function () cuda.catalog.reference.scan(hk, hk, {exclusiv = true}) end, "cuda%.catalog%.reference%.scan: unknown option 'exclusiv' %(known: op, exclusive, init%)")
case("reference.scan: float8_e4m3", function () cuda.catalog.reference.scan(cuda.host_array("float8_e4m3", 2), cuda.host_array("float8_e4m3", 2)) end,
     "cuda%.catalog%.reference%.scan: dtype float8_e4m3 is not scanned")
case("reference.scan: float16 into float64", function () cuda.catalog.reference.scan(cuda.host_array("float16", 2), cuda.host_array("float64", 2)) end,
     "cuda%.catalog%.reference%.scan: hx is float16%[2%] but hy is float64%[2%]")
case("reference.histogram: bfloat16 without lo", function () cuda.catalog.reference.histogram(cuda.host_array("bfloat16", 2), cuda.host_array("uint32", 4), {hi = 1}) end,
     "cuda%.catalog%.reference%.histogram: lo is required for bfloat16 input")
case("reference.histogram: a misspelt option", function () cuda.catalog.reference.histogram(hk, cuda.host_array("int32", 4), {bin = 4}) end, "cuda%.catalog%.reference%.histogram: unknown option 'bin'")
case("bench: a misspelt option", function () cuda.bench(function () end, {rep = 3}) end, "cuda%.bench: unknown option 'rep'")

-- NCCL and MPI arguments that are checked before anything runs
case("nccl.comm: a short id", function () cuda.nccl.comm("x", 1, 0) end, "cuda%.nccl%.comm: bad argument #1 %(an id from cuda%.nccl%.unique_id%(%) is 128 bytes, got 1%)")
case("nccl.group: a number", function () cuda.nccl.group(1) end, "cuda%.nccl%.group: bad argument #1 %(function expected, got number%)")
case("nccl.comm_all: no devices", function () cuda.nccl.comm_all({}) end, "cuda%.nccl%.comm_all: bad argument #1")
-- lu and solve over ranks: the communicator and the layout's options (t/042-lu-ranks.t has the rest)
case("lu: comm a number", function () cuda.catalog.lu(nil, {comm = 5}) end, "cuda%.catalog%.lu: comm must be a cuda%.nccl%.comm, got number")
case("solve: comm a table", function () cuda.catalog.solve(nil, nil, {comm = {}}) end, "cuda%.catalog%.solve: comm must be a cuda%.nccl%.comm, got table")
case("lu: root without comm", function () cuda.catalog.lu(nil, {root = 0}) end, "cuda%.catalog%.lu: root goes with comm")
case("solve: distribution without comm", function () cuda.catalog.solve(nil, nil, {distribution = 1}) end, "cuda%.catalog%.solve: distribution goes with comm")
case("block_cyclic: n 0", function () cuda.catalog.block_cyclic(0, 2, 64) end, "cuda%.catalog%.block_cyclic: n must be an integer >= 1, got 0")
case("block_cyclic: block 129", function () cuda.catalog.block_cyclic(1000, 2, 129) end, "cuda%.catalog%.block_cyclic: block must be an integer 1%.%.128, got 129")
case("block_cyclic: fewer blocks than ranks", function () cuda.catalog.block_cyclic(100, 4, 64) end, "n = 100 in blocks of 64 makes 2 blocks, fewer than the 4 ranks")
case("block_cyclic: a rank past the ranks", function () cuda.catalog.block_cyclic(100, 2, 8):columns(2) end, "cuda%.catalog%.block_cyclic%.columns: rank must be an integer 0%.%.1, got 2")
case("block_cyclic: column 0", function () cuda.catalog.block_cyclic(100, 2, 8):owner(0) end, "cuda%.catalog%.block_cyclic%.owner: column must be an integer 1%.%.100, got 0")


-- kernels from expressions (t/036-elementwise.t has each too)
local ew = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y"}
local ewh = cuda.host_array("float32", 3)
case("elementwise: unknown key", function () cuda.elementwise{params = "T *x", out = "T y", body = "y = x", nme = "k"} end, "cuda%.elementwise: unknown option 'nme' %(known: params, out, body, name, preamble%)")
case("elementwise: unknown dtype", function () cuda.elementwise{params = "float33 *x", out = "float32 y", body = "y = x"} end, "cuda%.elementwise: params: unknown dtype 'float33' for x")
case("elementwise: too few arguments", function () ew(1, 2) end, "cuda%.elementwise: expects 3 arguments %(a, x, y%), got 2")
case("elementwise: a number for an array", function () ew(1, 2, 3) end, "cuda%.elementwise: argument #2 %(x%) must be a cuda%.array, got a number")
case("elementwise: an array for a scalar", function () ew(ewh, 1, 3) end, "cuda%.elementwise: argument #1 %(a%) must be a number %(it is declared a scalar%)")
case("elementwise: unknown call option", function () ew(1, 2, 3, {streem = 1}) end, "cuda%.elementwise: unknown option 'streem' %(known: stream%)")
case("map: a scalar assigned", function () cuda.map("y = x", {x = 1, y = 2}) end, "cuda%.map: 'y' is assigned in the body, so it must be an array, got a number")
case("reduction: no identity", function () cuda.reduction{params = "T *x", map = "x", reduce = "a + b"} end, "cuda%.reduction: identity is missing")
case("reduction: a dtype that cannot accumulate", function () cuda.reduction{params = "T *x", map = "x", reduce = "a + b", identity = 0, dtype = "float16"} end, "cuda%.reduction: dtype float16 cannot accumulate")

-- }======================================================


-- {====================================================== with a GPU

if gpu then
  local dev = cuda.device(0)
  local x = cuda.array("float32", 1000)
  local m = cuda.array("float32", {10, 20})
  case("array: a bad dtype", function () cuda.array("f32", 10) end, "cuda%.array: bad argument #1 %(unknown dtype 'f32'; expected one of int8")
  case("array: negative size", function () cuda.array("float32", -5) end, "cuda%.array: bad argument #2 %(element count must be 0 or more, got %-5%)")
  case("array: 2^62 elements", function () cuda.array("float32", 2^62) end, "cuda%.array: bad argument #2 %(shape too large%)")
  case("array: 2^40 float64 (8 TiB)", function () cuda.array("float64", 1 << 40) end, "cuda%.array: CUDA_ERROR_OUT_OF_MEMORY allocating 8%.00 TiB on device 0")
  case("array: a device that is not there", function () cuda.array("float32", 4, {device = 99}) end, "no CUDA device 99")
  case("array: device -1", function () cuda.array("float32", 4, {device = -1}) end, "cuda%.array: device must be an ordinal 0 or more, got %-1")
  case("array: device a string", function () cuda.array("float32", 4, {device = "0"}) end, "cuda%.array: device must be a device ordinal or a cuda%.device, got string")
  case("array: a misspelt option", function () cuda.array("float32", 4, {pitch = true}) end, "cuda%.array: unknown option 'pitch' %(known: device, pitched, managed, sync%)")
  case("stream: a misspelt option", function () cuda.stream{nonblocking = true} end, "cuda%.stream: unknown option 'nonblocking'")
  case("event: a misspelt option", function () cuda.event{timeing = false} end, "cuda%.event: unknown option 'timeing'")
  case("load: a misspelt option", function () cuda.load("x", {devise = 0}) end, "cuda%.load: unknown option 'devise'")
  case("device: 99", function () cuda.device(99) end, "cuda%.device: no CUDA device 99")
  case("device: -1", function () cuda.device(-1) end, "cuda%.device: no CUDA device %-1")
  case("attribute: an unknown name", function () dev:attribute("warp_sized") end, "warp_sized")
  case("view: first 0", function () x:view(0, 1) end, "view: bad argument #1 %(first element 0 outside 1%.%.1000%)")
  case("view: past the end", function () x:view(1000, 2) end, "view: bad argument #2 %(count 2 runs past the end")
  case("view: negative count", function () x:view(1, -1) end, "view: bad argument #2")
  case("view: 2^62 count", function () x:view(1, 1 << 62) end, "view: bad argument #2")
  case("copy_from: a longer host array", function () x:copy_from(cuda.host_array("float32", 1001)) end, "copy_from")
  case("copy_from: another dtype", function () x:copy_from(cuda.host_array("float64", 1000)) end, "dtype mismatch %(float32 and float64%)")
  case("copy_from: a bad table value", function () x:copy_from({1, 2, {}}) end, "copy_from: number expected for float32, got table")
  case("copy_from: too many values", function () x:view(1, 2):copy_from({1, 2, 3}) end, "copy_from: 3 values do not fit in 2 elements")
  case("copy_from: a string of the wrong length", function () x:copy_from("abc") end, "copy_from")
  case("copy_to: a shorter array", function () x:copy_to(cuda.array("float32", 10)) end, "copy_to")
  case("copy_to: a number", function () x:copy_to(5) end, "copy_to")
  case("copy_to: a stream that is not one", function () x:copy_to(cuda.host_array("float32", 1000), 7) end, "cuda%.stream expected, got number")
  case("fill: a string", function () x:fill("x") end, "fill: number expected for float32, got string")
  case("fill: a stream that is not one", function () x:fill(1, {}) end, "cuda%.stream expected, got table")
  case("tensor_map: a 1-D array", function () x:tensor_map(8, 8) end, "tensor_map")
  -- managed and mapped memory (t/039)
  local mm = cuda.array("float32", 4, {managed = true})
  case("x[i]: device memory", function () return x[1] end, "cuda%.array: x%[i%] reaches managed arrays only; this one is device memory")
  case("x[i] = v: device memory", function () x[1] = 2 end, "cuda%.array: x%[i%] reaches managed arrays only")
  case("x.field = v", function () x.dtype = "int8" end, "cuda%.array: cannot set field 'dtype' %(only a managed array's elements can be set%)")
  case("x[i]: managed, past the end", function () return mm[5] end, "cuda%.array: index 5 outside 1%.%.4")
  case("x[i]: managed, index 0", function () mm[0] = 1 end, "cuda%.array: index 0 outside 1%.%.4")
  case("x[i]: managed, a fractional index", function () return mm[1.5] end, "number has no integer representation")
  case("x[i] = v: managed, a string", function () mm[1] = "x" end, "number expected for float32, got string")
  case("prefetch: device memory", function () x:prefetch(0) end, "prefetch: the array is device memory, not managed %(make it with cuda%.array%(dtype, n, {managed = true}%)%)")
  case("prefetch: a bad place", function () mm:prefetch("gpu") end, "prefetch: bad argument #1 %(a cuda%.device, a device ordinal or \"host\" expected, got 'gpu'%)")
  case("prefetch: no place", function () mm:prefetch() end, "prefetch: bad argument #1 %(a cuda%.device, a device ordinal or \"host\" expected, got no value%)")
  case("prefetch: a device that is not there", function () mm:prefetch(99) end, "prefetch: no CUDA device 99")
  case("prefetch: device -1", function () mm:prefetch(-1) end, "prefetch: no CUDA device %-1")
  case("prefetch: a misspelt option", function () mm:prefetch(0, {strem = 1}) end, "prefetch: unknown option 'strem' %(known: stream%)")
  case("prefetch: a stream that is not one", function () mm:prefetch(0, {stream = 1}) end, "prefetch: stream must be a cuda%.stream, got number")
  case("prefetch: a closed stream", function () local cs = cuda.stream(); cs:close(); mm:prefetch(0, {stream = cs}) end, "attempt to use a closed cuda%.stream")
  case("prefetch: device 2^40", function () mm:prefetch(1 << 40) end, "prefetch: no CUDA device 1099511627776")
  case("advise: device memory", function () x:advise("read_mostly") end, "advise: the array is device memory, not managed")
  case("advise: an unknown advice", function () mm:advise("read_mostely") end, "advise: unknown advice 'read_mostely' %(known: read_mostly, preferred_location, accessed_by, and each with unset_ before it%)")
  case("advise: a number", function () mm:advise(3) end, "advise: unknown advice '3'")
  case("advise: preferred_location without a place", function () mm:advise("preferred_location") end, "advise: 'preferred_location' needs a place: a cuda%.device, a device ordinal or \"host\"")
  case("advise: read_mostly with a place", function () mm:advise("read_mostly", 0) end, "advise: 'read_mostly' takes no place %(CUDA applies it for every processor%)")
  case("advise: a bad place", function () mm:advise("accessed_by", "cpu") end, "advise: bad argument #2 %(a cuda%.device, a device ordinal or \"host\" expected, got 'cpu'%)")
  case("advise: a device that is not there", function () mm:advise("accessed_by", 99) end, "advise: no CUDA device 99")
  case("range_attributes: device memory", function () x:range_attributes() end, "range_attributes: the array is device memory, not managed")
  case("launch: a pinned host array", function () cuda.check_args({"u64"}, cuda.host_array("float32", 2, {pinned = true})) end, "launch: argument 1 is a cuda%.host_array that is not mapped")
  -- where the device or the driver lacks the feature: a driver that hides it (t/cudashim.c)
  local shim, why = T.cuda_shim()
  if shim then
    local function shimmed(code, zero, hide)
      return function () error(T.run_shimmed("local cuda = require 'cuda'\n" .. code, zero, hide), 0) end
    end
    case("host_array: mapped on a device that cannot map", shimmed([[cuda.host_array("float32", 4, {mapped = true})]], {"CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY"}),
         "cuda%.host_array: device 0 cannot map host memory %(mapped = true%): its CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY is 0")
    case("array: managed on a device without managed memory", shimmed([[cuda.array("float32", 4, {managed = true})]], {"CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY"}),
         "cuda%.array: device 0 cannot allocate managed memory: its CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0")
    case("array: sync = false without concurrent managed access", shimmed([[cuda.array("float32", 4, {managed = true, sync = false})]], {"CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS"}),
         "cuda%.array: device 0 cannot let the host touch managed memory while kernels run %(sync = false%): its CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0")
    case("prefetch: to a device without concurrent managed access", shimmed([[cuda.array("float32", 4, {managed = true}):prefetch(0)]], {"CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS"}),
         "prefetch: device 0 cannot take managed memory by prefetch or advice: its CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0")
    case("prefetch: a driver without the CUmemLocation form", shimmed([[cuda.array("float32", 4, {managed = true}):prefetch("host")]], nil, {"cuMemPrefetchAsync"}),
         "prefetch: the driver has no cuMemPrefetchAsync that takes a CUmemLocation %(CUDA 12%.2 or newer%)")
    case("advise: a driver without the CUmemLocation form", shimmed([[cuda.array("float32", 4, {managed = true}):advise("read_mostly")]], nil, {"cuMemAdvise"}),
         "advise: the driver has no cuMemAdvise that takes a CUmemLocation %(CUDA 12%.2 or newer%)")
  else
    T.diag("the rows of features a device lacks need t/cudashim.c: " .. why)
  end
  case("tensor_map: a box past the limits", function () m:tensor_map(1000, 8) end, "tensor_map")
  local cx = cuda.array("float32", 4)
  local view = cx:view(1, 2)
  cx:close()
  case("a closed array: fill", function () cx:fill(0) end, "attempt to use a closed cuda%.array")
  case("a closed array: totable", function () cx:totable() end, "attempt to use a closed cuda%.array")
  case("a view of a closed array", function () view:fill(0) end, "its parent was closed")
  case("a closed array as a launch argument", function () cuda.check_args({"u64"}, cx) end, "closed")

  -- streams and events
  case("stream: priority past the range", function () cuda.stream{priority = 10} end, "priority 10 outside")
  case("stream: options a number", function () cuda.stream(5) end, "cuda%.stream: bad argument #1 %(table expected, got number%)")
  case("stream: a device that is not there", function () cuda.stream{device = 99} end, "no CUDA device 99")
  local s = cuda.stream()
  case("wait: not an event", function () s:wait(5) end, "cuda%.event expected, got number")
  local e0, e1 = cuda.event(), cuda.event()
  case("elapsed: events never recorded", function () e0:elapsed(e1) end, "elapsed: both events must be recorded first")
  local nt = cuda.event{timing = false}
  e0:record(); nt:record()
  case("elapsed: an event without timing", function () e0:elapsed(nt) end, "elapsed: an event was made with timing = false")
  case("elapsed: not an event", function () e0:elapsed(5) end, "elapsed: bad argument #1 %(cuda%.event expected, got number%)")
  case("record: not a stream", function () e0:record(5) end, "cuda%.stream expected, got number")
  local cs = cuda.stream(); cs:close()
  case("a closed stream", function () cs:synchronize() end, "attempt to use a closed cuda%.stream")
  case("a closed stream as an argument", function () x:fill(0, cs) end, "attempt to use a closed cuda%.stream")
  local ce = cuda.event(); ce:close()
  case("a closed event", function () ce:record() end, "attempt to use a closed cuda%.event")
  case("end_capture without begin", function () cuda.stream():end_capture() end, "end_capture")

  -- modules, kernels, launches
  local prog = cuda.compile([[
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__constant__ float coef[4];
]])
  local mod = prog:module()
  local k = mod:kernel("saxpy")
  case("load: malformed PTX", function () cuda.load(".version 8.0\n.target sm_90\n.entry broken( {") end, "cuda%.load: CUDA_ERROR_INVALID_PTX")
  case("load: random bytes", function () cuda.load(("\127ELF"):rep(64)) end, "cuda%.load: a truncated or 32%-bit ELF image %(256 bytes%)")
  case("load: a device that is not there", function () cuda.load(prog, {device = 99}) end, "no CUDA device 99")
  case("kernel: an unknown name", function () mod:kernel("saxpi") end, "saxpi")
  case("kernel: a number for the name", function () mod:kernel(5) end, "kernel")
  case("global: an unknown symbol", function () mod:global("coeff", "float32") end, "coeff")
  case("global: a bad dtype", function () mod:global("coef", "float33") end, "unknown dtype 'float33'; expected one of")
  local cfg = {grid = 4, block = 256}
  case("launch: too few arguments", function () k:launch(cfg, 1000, 2.0, x) end, "launch: 'saxpy' takes 4 arguments, got 3")
  case("launch: an array for the float", function () k:launch(cfg, 1000, x, x, x) end, "launch: argument 2 is a cuda%.array but parameter 2 is f32, not a pointer")
  case("launch: a string for n", function () k:launch(cfg, "1000", 2.0, x, x) end, "launch: argument 1 must be an integer")
  case("launch: n past u32", function () k:launch(cfg, 1 << 33, 2.0, x, x) end, "out of range for u32")
  case("launch: a block of 2048", function () k:launch({grid = 1, block = 2048}, 1000, 2.0, x, x) end, "launch: block%.x = 2048 exceeds the device's 1024")
  case("launch: a block of 0", function () k:launch({grid = 1, block = 0}, 1000, 2.0, x, x) end, "launch")
  case("launch: a grid of 2^31", function () k:launch({grid = 1 << 31, block = 32}, 1000, 2.0, x, x) end, "launch")
  case("launch: a grid of 0", function () k:launch({grid = 0, block = 32}, 1000, 2.0, x, x) end, "launch")
  case("launch: grid y past 65535", function () k:launch({grid = {1, 70000}, block = 32}, 1000, 2.0, x, x) end, "launch")
  case("launch: block z past 64", function () k:launch({grid = 1, block = {1, 1, 128}}, 1000, 2.0, x, x) end, "launch")
  case("launch: 1 MiB of shared memory", function () k:launch({grid = 1, block = 32, shared = 1 << 20}, 1000, 2.0, x, x) end, "launch")
  case("launch: negative shared memory", function () k:launch({grid = 1, block = 32, shared = -1}, 1000, 2.0, x, x) end, "launch")
  case("launch: a misspelt key", function () k:launch({grid = 1, blokc = 32}, 1000, 2.0, x, x) end, "blokc")
  case("launch: config not a table", function () k:launch(5, 1000, 2.0, x, x) end, "launch")
  case("launch: a stream that is not one", function () k:launch({grid = 1, block = 32, stream = 5}, 1000, 2.0, x, x) end, "stream")
  case("launch: a closed stream", function () k:launch({grid = 1, block = 32, stream = cs}, 1000, 2.0, x, x) end, "closed cuda%.stream")
  case("launch: a cooperative grid too large", function () k:launch({grid = 1 << 20, block = 1024, cooperative = true}, 1000, 2.0, x, x) end, "co%-resident")
  case("prepare: a bad config", function () k:prepare{grid = 1, block = 4096} end, "4096")
  case("max_active_blocks: 0 threads", function () k:max_active_blocks(0) end, "max_active_blocks")
  case("set_max_dynamic_shared: 1 GiB", function () k:set_max_dynamic_shared(1 << 30) end, "set_max_dynamic_shared")

  -- the catalog with device memory
  local A, B, Cm = cuda.array("float32", {8, 16}), cuda.array("float32", {16, 4}), cuda.array("float32", {8, 4})
  local D64 = cuda.array("float64", {16, 4})
  case("matmul: inner dimensions differ", function () cuda.catalog.matmul(A, A, Cm) end, "cuda%.catalog%.matmul: B is 8x16, expected 16x16")
  case("matmul: C of another shape", function () cuda.catalog.matmul(A, B, cuda.array("float32", {4, 8})) end, "cuda%.catalog%.matmul: C is 4x8, expected 8x4")
  case("matmul: dtypes differ", function () cuda.catalog.matmul(A, D64, Cm) end, "cuda%.catalog%.matmul: dtypes differ %(A float32, B float64, C float32%)")
  case("matmul: int32", function () local I = cuda.array("int32", {2, 2}); cuda.catalog.matmul(I, I, I) end, "cuda%.catalog%.matmul: A must be float32, float64, float16, bfloat16, float8_e4m3 or float8_e5m2, got int32")
  local H16, HB, H8 = cuda.array("float16", {4, 4}), cuda.array("bfloat16", {4, 4}), cuda.array("float8_e4m3", {4, 4})
  case("matmul: float16 A, bfloat16 B", function () cuda.catalog.matmul(H16, HB, H16) end, "cuda%.catalog%.matmul: dtypes differ %(A float16, B bfloat16, C float16%): float16 A takes float16 B")
  case("matmul: float16 A and B, float64 C", function () cuda.catalog.matmul(H16, H16, cuda.array("float64", {4, 4})) end, "cuda%.catalog%.matmul: C is float64: with float16 A and B, C is float16 or float32")
  case("matmul: bfloat16 A and B, float16 C", function () cuda.catalog.matmul(HB, HB, H16) end, "cuda%.catalog%.matmul: C is float16: with bfloat16 A and B, C is bfloat16 or float32")
  case("matmul: scale_a with float16", function () cuda.catalog.matmul(H16, H16, H16, {scale_a = 2}) end, "cuda%.catalog%.matmul: scale_a is for fp8 A and B, not float16")
  case("matmul: splits with bfloat16", function () cuda.catalog.matmul(HB, HB, HB, {splits = 2}) end, "cuda%.catalog%.matmul: splits is for float32 and float64, not bfloat16")
  local d0 = cuda.device(0)
  if d0.major * 10 + d0.minor >= 89 then
    case("matmul: fp8 A, float16 B", function () cuda.catalog.matmul(H8, H16, H16) end, "cuda%.catalog%.matmul: A is float8_e4m3 but B is float16: fp8 A takes fp8 B")
    case("matmul: fp8 C", function () cuda.catalog.matmul(H8, H8, H8) end, "cuda%.catalog%.matmul: C is float8_e4m3: with fp8 A and B, C is bfloat16, float16 or float32")
    case("matmul: scale_b a string", function () cuda.catalog.matmul(H8, H8, HB, {scale_b = "2"}) end, "cuda%.catalog%.matmul: scale_b must be a number, got string")
  else
    case("matmul: fp8 below 8.9", function () cuda.catalog.matmul(H8, H8, HB) end, "cuda%.catalog%.matmul: float8_e4m3 needs compute capability 8%.9 or later")
  end
  case("matmul: an unknown variant", function () cuda.catalog.matmul(A, B, Cm, {variant = "fastest"}) end, "variant must be one of naive, row, column, tiled, fast, tf32, dmma, got fastest")
  case("matmul: tile 12", function () cuda.catalog.matmul(A, B, Cm, {variant = "tiled", tile = 12}) end, "tile must be one of 8, 16, 32, got 12")
  case("matmul: splits 0", function () cuda.catalog.matmul(A, B, Cm, {splits = 0}) end, "splits must be an integer 1%.%.64, got 0")
  case("matmul: streamk 1.5", function () cuda.catalog.matmul(A, B, Cm, {streamk = 1.5}) end, "streamk must be a boolean or a block count 1%.%.1024, got 1%.5")
  case("matmul: a closed C", function () cuda.catalog.matmul(A, B, cx) end, "closed")
  case("matmul: 1-D without dims", function () cuda.catalog.matmul(x, x, x) end, "A is 1%-D %(1000 elements%): make it 2%-D, or give m, n and k")
  case("matmul: alpha a string", function () cuda.catalog.matmul(A, B, Cm, {alpha = "2"}) end, "alpha must be a number, got string")
  case("matmul: lda less than k", function () cuda.catalog.matmul(A, B, Cm, {m = 8, k = 16, lda = 15}) end, "cuda%.catalog%.matmul: lda = 15 is less than A's rows of 16 %(k%)")
  case("matmul: a view too short for ldc", function () cuda.catalog.matmul(A, B, x:view(1, 59), {m = 8, n = 4, ldc = 8}) end,
       "cuda%.catalog%.matmul: C has 59 elements, fewer than 8x4 with ldc = 8 needs %(60%)")
  -- transb: B given as B^T, N x K
  case("matmul: transb with B of K x N", function () cuda.catalog.matmul(A, B, Cm, {transb = true}) end,
       "cuda%.catalog%.matmul: B is 16x4 but transb wants N x K with K = 16 %(A's columns%)")
  case("matmul: transb with B of 4x15, n given", function () cuda.catalog.matmul(A, cuda.array("float32", {4, 15}), Cm, {n = 4, transb = true}) end,
       "cuda%.catalog%.matmul: B is 4x15 but transb wants N x K = 4x16")
  case("matmul: transb with C of K x N's columns", function () cuda.catalog.matmul(A, cuda.array("float32", {5, 16}), Cm, {transb = true}) end,
       "cuda%.catalog%.matmul: C is 8x4, expected 8x5")
  case("matmul: transb with ldb less than k", function () cuda.catalog.matmul(A, x:view(1, 100), Cm, {n = 4, ldb = 8, transb = true}) end,
       "cuda%.catalog%.matmul: ldb = 8 is less than K = 16: with transb, B is N x K, its rows ldb apart")
  case("matmul: transb with a view too short for ldb", function () cuda.catalog.matmul(A, x:view(1, 60), Cm, {n = 4, ldb = 20, transb = true}) end,
       "cuda%.catalog%.matmul: B has 60 elements, fewer than 4x16 with ldb = 20 needs %(76%)")
  local ints = cuda.array("int16", 100)
  case("scan: int16", function () cuda.catalog.scan(ints) end, "cuda%.catalog%.scan: x has dtype int16")
  case("scan: y of another length", function () cuda.catalog.scan(x, cuda.array("float32", 999)) end, "cuda%.catalog%.scan")
  case("scan: y of another dtype", function () cuda.catalog.scan(x, cuda.array("float64", 1000)) end, "cuda%.catalog%.scan")
  case("scan: an unknown op", function () cuda.catalog.scan(x, nil, {op = "mul"}) end, "op must be one of")
  case("scan: an unknown variant", function () cuda.catalog.scan(x, nil, {variant = "fast"}) end, "variant must be one of")
  case("scan: a misspelt option", function () cuda.catalog.scan(x, nil, {exclusiv = true}) end, "unknown option 'exclusiv'")
  case("scan: naive past its limit", function () cuda.catalog.scan(cuda.array("float32", 5000), nil, {variant = "naive"}) end, "naive")
  case("scan: a closed x", function () cuda.catalog.scan(cx) end, "closed")
  case("scan: a stream that is not one", function () cuda.catalog.scan(x, nil, {stream = 3}) end, "stream")
  case("reduce: an unknown op", function () cuda.catalog.reduce(x, {op = "avg"}) end, "op must be one of")
  case("compact: a malformed predicate", function () cuda.catalog.compact(x, cuda.array("float32", 1000), "x >>> 1") end, "cuda%.catalog%.compact")
  case("compact: flags of another length", function () cuda.catalog.compact(x, cuda.array("float32", 1000), cuda.array("uint8", 10)) end, "cuda%.catalog%.compact")
  case("compact: flags of float32", function () cuda.catalog.compact(x, cuda.array("float32", 1000), cuda.array("float32", 1000)) end, "cuda%.catalog%.compact")
  case("compact: y too short", function () cuda.catalog.compact(x, cuda.array("float32", 10), "x > 0") end, "cuda%.catalog%.compact")
  case("split: pred a number", function () cuda.catalog.split(x, cuda.array("float32", 1000), 5) end, "cuda%.catalog%.split")
  -- the low-precision dtypes (issue 37): float16 and bfloat16 scan; fp8 only in histogram
  local f16, e4m3 = cuda.array("float16", 100), cuda.array("float8_e4m3", 100)
  case("scan: float8_e4m3", function () cuda.catalog.scan(e4m3) end, "cuda%.catalog%.scan: x has dtype float8_e4m3; expected one of .*float16, bfloat16")
  case("scan: an unknown accumulate dtype", function () cuda.catalog.scan(f16, cuda.array("float32", 100), {accumulate = "float128"}) end,
       "cuda%.catalog%.scan: accumulate must be one of float16, float32, got float128")
  case("scan: accumulate float16 for float32 x", function () cuda.catalog.scan(x, {accumulate = "float16"}) end,
       "cuda%.catalog%.scan: accumulate must be one of float32, got float16")
  case("scan: accumulate float32 in place", function () cuda.catalog.scan(f16, {accumulate = "float32"}) end,
       "cuda%.catalog%.scan: accumulate is float32 but y has dtype float16 %(in place: x's%)")
  case("scan: float16 into float64", function () cuda.catalog.scan(f16, cuda.array("float64", 100)) end,
       "cuda%.catalog%.scan: y has dtype float64 but x has float16 %(y may be float32%)")
  case("scan: float16 with a seed variant", function () cuda.catalog.scan(f16, {variant = "naive"}) end,
       "cuda%.catalog%.scan: variant 'naive' takes no float16")
  case("reduce: float8_e5m2", function () cuda.catalog.reduce(cuda.array("float8_e5m2", 4)) end, "cuda%.catalog%.reduce: x has dtype float8_e5m2")
  case("reduce: accumulate float64 for bfloat16", function () cuda.catalog.reduce(cuda.array("bfloat16", 4), {accumulate = "float64"}) end,
       "cuda%.catalog%.reduce: accumulate must be one of bfloat16, float32, got float64")
  case("compact: float8_e4m3", function () cuda.catalog.compact(e4m3, cuda.array("float8_e4m3", 100), "x > 0") end,
       "cuda%.catalog%.compact: x has dtype float8_e4m3")
  case("split: float16 into float32", function () cuda.catalog.split(f16, cuda.array("float32", 100), "x > 0") end,
       "cuda%.catalog%.split: y has dtype float32 but x has float16")
  case("histogram: float16 without lo", function () cuda.catalog.histogram(f16, cuda.array("uint32", 4), {hi = 1}) end,
       "cuda%.catalog%.histogram: lo is required for float16 input")
  case("histogram: float8_e5m2 with an infinite hi", function () cuda.catalog.histogram(cuda.array("float8_e5m2", 4), cuda.array("uint32", 4), {lo = 0, hi = math.huge}) end,
       "cuda%.catalog%.histogram: lo and hi must be finite")
  case("sort: int16 keys past bit 16", function () cuda.catalog.sort(ints, {end_bit = 17}) end, "cuda%.catalog%.sort: end_bit must be an integer 1%.%.16, got 17")
  case("sort: values of another length", function () cuda.catalog.sort(x, cuda.array("int32", 999)) end, "cuda%.catalog%.sort: values has 999 elements but keys has 1000")
  case("sort: 2-byte values of another length", function () cuda.catalog.sort(x, cuda.array("int16", 999)) end, "cuda%.catalog%.sort: values has 999 elements but keys has 1000")
  case("sort: float16 keys, 65 a thread", function () cuda.catalog.sort(f16, {items = 65}) end, "cuda%.catalog%.sort: items must be an integer 1%.%.64, got 65")
  case("sort: uint8 keys from bit 8", function () cuda.catalog.sort(cuda.array("uint8", 4), {begin_bit = 8}) end, "cuda%.catalog%.sort: begin_bit must be an integer 0%.%.7, got 8")
  case("argsort: float8_e4m3 keys in a warp", function () cuda.catalog.argsort(e4m3, {variant = "warp"}) end, "cuda%.catalog%.argsort: variant 'warp' sorts uint32 keys only, got float8_e4m3")
  case("sort: float16 keys with 8-byte values, a tile too big", function () cuda.catalog.sort(f16, cuda.array("uint64", 100), {items = 64}) end, "cuda%.catalog%.sort: items x threads %(64 x 256%) need %d+ bytes of shared memory for 8%-byte keys or values; at most 49152")
  case("sort: end_bit 33", function () cuda.catalog.sort(x, {end_bit = 33}) end, "cuda%.catalog%.sort: end_bit must be an integer 1%.%.32, got 33")
  case("sort: begin_bit >= end_bit", function () cuda.catalog.sort(x, {begin_bit = 20, end_bit = 20}) end, "begin_bit %(20%) must be less than end_bit %(20%)")
  case("sort: warp past its limit", function () cuda.catalog.sort(cuda.array("uint32", 33), {variant = "warp"}) end, "at most 32 keys")
  case("sort: a closed keys", function () cuda.catalog.sort(cx) end, "cuda%.catalog%.sort: keys is a closed cuda%.array")
  case("argsort: an unknown variant", function () cuda.catalog.argsort(x, {variant = "bitonic"}) end, "cuda%.catalog%.argsort: variant must be one of")
  case("sort over devices: a part of int8 keys", function () cuda.catalog.sort({x, cuda.array("int8", 8)}, {devices = {0, 0}}) end,
       "cuda%.catalog%.sort: part 2 %(device 0%): keys of dtype int8 are not sorted over devices or ranks")
  case("sort over devices: 16-bit values", function () cuda.catalog.sort({x, cuda.array("float32", 8)}, {cuda.array("uint16", 1000), cuda.array("uint16", 8)}, {devices = {0, 0}}) end,
       "cuda%.catalog%.sort: part 1 %(device 0%): values of dtype uint16 are not sorted over devices or ranks %(values of 4 or 8 bytes are%)")
  case("sort over devices: overlapping parts", function () cuda.catalog.sort({x:view(1, 600), x:view(500, 501)}, {devices = {0, 0}}) end,
       "cuda%.catalog%.sort: part 2 %(device 0%): its arrays overlap part 1's")
  case("sort over devices: no room for balance = 'even'", function ()
    cuda.catalog.sort({x:view(1, 10), x:view(11, 990)}, {devices = {0, 0}, balance = "even"})
  end, "cuda%.catalog%.sort: part 1 would hold 500 keys afterwards but its arrays hold 10")
  case("sort over devices: a bad balance", function () cuda.catalog.sort({x}, {devices = {0}, balance = "fair"}) end,
       "cuda%.catalog%.sort: balance must be one of input, even, got fair")
  case("sort over devices: a count past the keys", function () cuda.catalog.sort({x}, {devices = {0}, counts = {1001}}) end,
       "cuda%.catalog%.sort: part 1 %(device 0%): the count of keys must be an integer 0%.%.1000")
  case("sort over devices: a stream", function () cuda.catalog.sort({x}, {devices = {0}, stream = cuda.stream()}) end,
       "cuda%.catalog%.sort: stream is for comm")
  case("sort over devices: device 99", function () cuda.catalog.sort({x}, {devices = {99}}) end,
       "cuda%.catalog%.sort: devices%[1%] must be a device ordinal 0%.%.")
  case("barrier.launch: a grid past co-residency", function ()
    local bk = cuda.catalog.kernel("barrier", "culua_xpx_grid")
    cuda.catalog.barrier.launch(bk, {grid = 1 << 20, block = 1024}, x, x, 1, x, 2)
  end, "cannot be co%-resident")
  case("barrier.xpx: blocks missing", function () cuda.catalog.barrier.xpx("seed", x, x, {threads = 32}) end, "opts%.blocks and opts%.threads are required integers")
  case("barrier.xpx: X too short", function () cuda.catalog.barrier.xpx("seed", x, x, {blocks = 100, threads = 32}) end, "X and P need 3200 elements")
  case("nccl: an array of int16", function ()
    local ok = cuda.nccl.available()
    if not ok then error("all_reduce: NCCL has no int16 (skipped: no NCCL)") end
    local comm <close> = cuda.nccl.comm_all{0}[1]   -- closed: NCCL's buffers are 200 MB of the device
    comm:all_reduce(ints)
  end, "all_reduce: NCCL has no int16")

  -- objects from before a cuda.reset() would go here, but a reset ends this
  -- state's objects: t/013-fault.t covers them in a process of their own
  if cuda.device_count() > 1 then
    local y1 = cuda.array("float32", 1000, {device = 1})
    local s1 = cuda.stream{device = 1}
    case("matmul: arrays on two devices", function () cuda.catalog.matmul(A, cuda.array("float32", {16, 4}, {device = 1}), Cm) end,
         "A, B and C must be on one device")
    case("scan: y on another device", function () cuda.catalog.scan(x, y1) end, "device")
    case("sort: values on another device", function () cuda.catalog.sort(x, y1) end, "cuda%.catalog%.sort: values is on device 1 but keys is on device 0")
    case("launch: an array of another device", function () k:launch(cfg, 1000, 2.0, x, y1) end,
         "launch: argument 4 is an array on device 1 but the kernel runs on device 0 %(copy it over, or cuda%.device%(0%):enable_peer_access")
    case("fill: a stream of another device", function () x:fill(0, s1) end, "device")
  end

  -- kernels from expressions on arrays: lengths, dtypes, overlaps
  local ewg = cuda.elementwise{params = "T a, T *x", out = "T y", body = "y = a * x + y"}
  case("elementwise: lengths differ", function () ewg(1, cuda.array("float32", 4), cuda.array("float32", 5)) end, "cuda%.elementwise: argument #3 %(y%) has 5 elements but x has 4")
  case("elementwise: dtypes differ", function () ewg(1, cuda.array("float64", 4), cuda.array("float32", 4)) end, "argument #3 %(y%) has dtype float32 but T is float64")
  case("elementwise: a fraction for an integer", function () ewg(0.5, cuda.array("int32", 4), cuda.array("int32", 4)) end, "argument #1 %(a%) must be an integer for int32")
  case("elementwise: a partial overlap", function () local a = cuda.array("float32", 8); ewg(1, a:view(1, 7), a:view(2, 7)) end, "argument #3 %(y%) overlaps argument #2 %(x%) at another offset")
  case("x:min of nothing", function () cuda.array("float32", 0):min() end, "x:min: the min of an empty array is undefined")
  case("reduction: a bad axis", function () cuda.array("float32", {2, 2}):sum({axis = 3, out = cuda.array("float32", 2)}) end, "axis must be 1 %(per column%) or 2 %(per row%)")
end



-- }======================================================


-- twice: the first round may load modules and start libraries (NCCL keeps its
-- buffers once made); the second must leave the device as it found it
local function round(report)
  for _, c in ipairs(cases) do
    local ok, err = pcall(c[2])
    if report then
      if ok then T.ok(false, c[1], "    expected an error matching '" .. c[3] .. "', got none")
      else T.like(tostring(err), c[3], c[1]) end
      io.stdout:flush()   -- the last case reported is the one before a hang
    end
  end
end
T.free_scratch()   -- kept for reuse between calls: no leak
collectgarbage()
local before_bytes = gpu and cuda.memory_in_use() or 0
round(true)
T.ok(true, "the process goes on after " .. #cases .. " bad calls")
if gpu then
  T.free_scratch()
  collectgarbage(); collectgarbage()
  if not T.is(cuda.memory_in_use(), before_bytes, "no device memory leaked by the cases (cuda.memory_in_use)") then
    T.diag_live()
  end
  -- a second round must leave nothing more alive than the first: this state's own
  -- accounting (arrays and their bytes, kernels), never the device's free memory,
  -- which other processes on the GPU move (prove -j8)
  cuda.synchronize()
  local arrays, kernels = #cuda.live("arrays"), #cuda.live("kernels")
  round(false)
  T.free_scratch()
  collectgarbage(); collectgarbage()
  cuda.synchronize()
  T.is(cuda.memory_in_use(), before_bytes, "a second round leaks no device memory (cuda.memory_in_use)")
  T.ok(#cuda.live("arrays") <= arrays and #cuda.live("kernels") <= kernels,
       ("a second round leaves no more live arrays (%d, first %d) or kernels (%d, first %d)")
       :format(#cuda.live("arrays"), arrays, #cuda.live("kernels"), kernels))
end
T.diag(("%d cases, %s"):format(#cases, gpu and "all of them (a GPU is here)" or "the half that needs no GPU"))
T.done_testing()
