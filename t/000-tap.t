-- The TAP helper itself: every assertion passes and fails the way it should.
local T = require "culua.tap"

T.plan(14)
T.ok(true, "ok passes on true")
T.is(1 + 1, 2, "is compares with ==")
T.isnt("a", "b", "isnt")
T.like("cuda.array: CUDA_ERROR_OUT_OF_MEMORY", "OUT_OF_MEMORY", "like matches a pattern")
T.unlike("fine", "ERROR", "unlike")
T.is_deeply({1, {2, 3}, k = "v"}, {1, {2, 3}, k = "v"}, "is_deeply on nested tables")
T.near(1.0 + 1e-9, 1.0, 1e-6, "near within tolerance")
T.error_like(function () error("bad thing 42") end, "bad thing %d+", "error_like")
T.error_has(function () error("a.b(c)") end, "a.b(c)", "error_has takes plain text")
T.lives_ok(function () return 1 end, "lives_ok")

-- a failing assertion must say what it got; run it in a child culua
local out = T.run(T.culua .. " -", [[
local T = require "culua.tap"
T.plan(2)
T.is(3, 4, "three is four")
T.is_deeply({1, 2}, {1, 3}, "deep")
]])
T.like(out, "not ok 1 %- three is four", "failure printed as not ok")
T.like(out, "#%s+got: 3\n#%s+expected: 4", "diagnostics show got and expected")
T.like(out, "value%[2%]: got 2, expected 3", "is_deeply names the differing key")
T.like(T.run(T.culua .. " -", 'require("culua.tap").skip_all("no reason")'), "^1%.%.0 # SKIP no reason",
       "skip_all prints a TAP skip plan")
