-- The TAP helper itself: every assertion passes and fails the way it should.
local T = require "culua.tap"

T.plan(20)
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
-- CULUA_TEST_SKIP_MOCK (CI's memcheck pass): a mock file skips whole, with the reason; unset, it runs
local mock = 'local T = require("culua.tap"); T.mock_file(); print("ran")'
T.like(T.run("CULUA_TEST_SKIP_MOCK='the pass' " .. T.culua .. " -", mock), "^1%.%.0 # SKIP [^\n]*the pass\n$",
       "mock_file skips the file whole under CULUA_TEST_SKIP_MOCK, saying why")
T.is(T.run("CULUA_TEST_SKIP_MOCK= " .. T.culua .. " -", mock), "ran\n", "and runs it where the variable is unset or empty")

-- CULUA_TEST_SHARE=k/m: T.share() picks every m-th unit of work from the k-th; unset, all
local shares = [[
local T = require "culua.tap"
local picked = {}
for i = 1, 7 do if T.share() then picked[#picked + 1] = i end end
print("picked " .. table.concat(picked, ","))
]]
T.like(T.run("CULUA_TEST_SHARE=2/3 " .. T.culua .. " -", shares), "picked 2,5\n", "T.share(): share 2 of 3 takes units 2 and 5 of 7")
T.like(T.run("CULUA_TEST_SHARE=3/3 " .. T.culua .. " -", shares), "picked 3,6\n", "share 3 of 3 takes 3 and 6")
T.like(T.run("CULUA_TEST_SHARE= " .. T.culua .. " -", shares), "picked 1,2,3,4,5,6,7\n", "unset: every unit")
T.like(T.run("CULUA_TEST_SHARE=4/3 " .. T.culua .. " -", shares), "picked 1,2,3,4,5,6,7\n", "a share past m is no share: every unit")
