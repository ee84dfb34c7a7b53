-- Kernel signatures read from PTX, and launch-argument checks. No GPU needed.
local T = require "culua.tap"
local cuda = require "cuda"

local src = [[
struct Pair { double a; int b[4]; };
extern "C" __global__ void many(int n, float a, const float *x, double d, unsigned char c, short s,
                                long long ll, unsigned long long u, Pair p) {}
extern "C" __global__ void none() {}
template <typename T> __global__ void scale(T *x, T f, int n) { }
]]
local prog = cuda.compile(src, {options = {"-arch=compute_90"}, name_expressions = {"scale<double>", "scale<float>"}, cache = false})

local cases = {
  {"many", {"u32", "f32", "u64", "f64", "u8", "u16", "u64", "u64", "b8[24]"}},
  {"none", {}},
  {prog.lowered["scale<double>"], {"u64", "f64", "u32"}},
  {prog.lowered["scale<float>"], {"u64", "f32", "u32"}},
}
for _, c in ipairs(cases) do
  T.is_deeply(cuda.signature(prog.ptx, c[1]), c[2], "signature of " .. c[1])
end
T.error_like(function () cuda.signature(prog.ptx, "nope") end, "no entry 'nope' in the PTX", "unknown entry")
T.error_like(function () cuda.signature(prog.ptx, "man") end, "no entry 'man' in the PTX", "a prefix of a name is not the name")

local sig = cuda.signature(prog.ptx, "many")
local pair = string.pack("<d i4 i4 i4 i4", 1.5, 1, 2, 3, 4)
T.is(#pair, 24, "a packed struct of 24 bytes")
T.ok(cuda.check_args(sig, 10, 2.0, 0, 1.5, 255, -3, -1, 5, pair), "good arguments pass")
T.ok(cuda.check_args(sig, -1, 2, 0, 1, 0, 65535, math.mininteger, math.maxinteger, pair),
     "int params take negatives (PTX says u32 for int), integers go into floats")

-- table-driven bad arguments: {position, value, expected message}
local good = {10, 2.0, 0, 1.5, 255, -3, -1, 5, pair}
local bad = {
  {1, 1.5, "argument 1 must be an integer for u32, got 1%.5"},
  {1, 2^32, "argument 1 = 4294967296 out of range for u32"},
  {1, -2^31 - 1, "argument 1 = %-2147483649 out of range for u32"},
  {1, "10", "argument 1 must be an integer for u32, got string"},
  {2, "x", "argument 2 must be a number for f32, got string"},
  {2, true, "argument 2 must be a number for f32, got boolean"},
  {3, {}, "argument 3 must be an integer for u64 %(or a cuda%.array%), got table"},
  {5, 256, "argument 5 = 256 out of range for u8"},
  {6, 65536, "argument 6 = 65536 out of range for u16"},
  {9, "short", "argument 9 must be a string of 24 bytes %(a struct by value%)"},
  {9, 7, "argument 9 must be a string of 24 bytes"},
}
for _, b in ipairs(bad) do
  local args = table.move(good, 1, #good, 1, {})
  args[b[1]] = b[2]
  T.error_like(function () cuda.check_args(sig, table.unpack(args, 1, #good)) end, "launch: " .. b[3],
               ("argument %d = %s refused"):format(b[1], tostring(b[2])))
end
T.error_like(function () cuda.check_args(sig, 1, 2) end, "launch: the kernel takes 9 arguments, got 2", "too few")
T.error_like(function () cuda.check_args(cuda.signature(prog.ptx, "none"), 1) end, "takes 0 arguments, got 1", "too many")
T.error_like(function () cuda.check_args({"q32"}, 1) end, "signature%[1%] = 'q32' is not a parameter type", "bad type name")

-- found by fuzz/run.sh (signature, check_args): widths and array lengths no launch can
-- pass were taken as they came (a .f65535 read as f-1, an array length overflowing int)
local function entry(params) return ".visible .entry k(\n" .. params .. "\n)\n{\n ret;\n}\n" end
for _, c in ipairs{
  {".param .f65535 k_param_0", "parameter 1 of 'k' is not a type a launch can pass"},
  {".param .u32 k_param_0,\n.param .u7 k_param_1", "parameter 2 of 'k' is not a type a launch can pass"},
  {".param .align 8 .b8 k_param_0[999999999999]", "parameter 1 of 'k' is not a type a launch can pass"},
  {".param .align 8 .b64 k_param_0[0]", "parameter 1 of 'k' is not a type a launch can pass"},
} do
  T.error_like(function () cuda.signature(entry(c[1]), "k") end, "cuda%.signature: " .. c[2], c[1]:gsub("\n", " "))
end
T.is_deeply(cuda.signature(entry(".param .align 8 .b8 k_param_0[4096]"), "k"), {"b8[4096]"}, "4 KiB of parameters is the limit")
T.error_like(function () cuda.check_args({"b64[999999999]"}, "x") end, "signature%[1%] = 'b64%[999999999%]' has a bad array length %(1%.%.512%)", "check_args: a huge array")
T.error_like(function () cuda.check_args({"b8[-3]"}, "x") end, "has a bad array length", "check_args: a negative array")
T.done_testing()
