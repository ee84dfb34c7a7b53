-- The manual (doc/*.md) and README.md: every ```lua block compiles (as
-- luac -p would), and the blocks whose first line is "-- runnable" run here;
-- "-- runnable: gpu" ones run where there is a GPU and skip, saying so,
-- where there is none. On the H100 they all run. A runnable block runs in a
-- child culua of its own, which must exit 0.
local T = require "culua.tap"
local cuda = require "cuda"
local srcdir = os.getenv("CULUA_SRCDIR") or "."

local files = {"README.md"}
do
  local p = io.popen("ls " .. srcdir .. "/doc/*.md")
  for l in p:lines() do files[#files + 1] = "doc/" .. l:match("([^/]+)$") end
  p:close()
end

local gpu = cuda.device_count() > 0
local blocks, chapters_without_example = 0, {}
for _, f in ipairs(files) do
  local h = assert(io.open(srcdir .. "/" .. f))
  local text = h:read("a")
  h:close()
  local n, line, first = 0, 1, nil
  -- ```lua ... ``` blocks with the line each starts on
  local pos = 1
  while true do
    local s, e = text:find("\n```lua\n", pos, true)
    if not s then break end
    local close = text:find("\n```", e, true)
    local code = text:sub(e + 1, close and close or #text)
    local at = select(2, text:sub(1, s):gsub("\n", "")) + 2
    n = n + 1
    blocks = blocks + 1
    first = first or at
    local name = ("%s:%d"):format(f, at)
    local chunk, err = load(code, "=" .. name)
    T.ok(chunk ~= nil, name .. " compiles", err)
    local mark = code:match("^%-%- runnable(:? ?%a*)")
    if mark then
      if mark:find("gpu") and not gpu then
        T.skip(name .. ": needs a GPU, and there is none here", 1)
      else
        local out, status = T.run(T.culua .. " -", code)
        T.is(status, 0, name .. " runs: " .. out:gsub("\n", " | "):sub(1, 300))
      end
    end
    pos = close and close + 4 or #text
  end
  -- every chapter of the manual opens with a runnable example
  if f:match("^doc/") and f ~= "doc/index.md" then
    local opening = text:match("^#[^\n]*\n\n```lua\n%-%- runnable")
    T.ok(opening ~= nil, f .. " opens with a runnable example")
  end
end
-- the environment variables: the manual's first table and culua(1) name the same ones
local function names(path, from, to)
  local h = assert(io.open(srcdir .. "/" .. path))
  local text = h:read("a")
  h:close()
  text = text:sub((text:find(from, 1, true)), to and (text:find(to, 1, true)) or -1)
  local set, list = {}, {}
  for v in text:gmatch("[A-Z][A-Z0-9]*_[A-Z0-9_]+") do
    if not set[v] and v ~= "SH" then set[v] = true; list[#list + 1] = v end
  end
  table.sort(list)
  return table.concat(list, " ")
end
T.is(names("doc/culua.1", ".SH ENVIRONMENT", ".SH FILES"),
     names("doc/environment.md", "| variable", "Used by the tests"),
     "culua(1) and doc/environment.md list the same variables")
T.ok(blocks >= 15, blocks .. " lua blocks found")
T.done_testing()
