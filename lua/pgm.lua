-- culua.pgm: grey images in the netpbm PGM format, into and out of
-- cuda.host_array {rows, cols} (uint8 when maxval <= 255, uint16 up to 65535).
--
--   local pgm = require "culua.pgm"
--   local img, maxval, comments = pgm.read("a.pgm", {pinned = true})
--   pgm.write("b.pgm", img, {format = "P2", maxval = 255, comment = "made by culua"})
--   local img2 = pgm.decode(bytes, "name")      -- the same from a string
--   local bytes = pgm.encode(img2, {format = "P5"})
--
-- Both forms are read: binary P5 (one byte a sample, or two, most significant
-- first, when maxval > 255) and plain P2 (decimal text). Comments (# to the end
-- of the line) may stand wherever the header allows white space. A file that
-- is not a PGM, a header that does not parse, a raster that ends early or a
-- sample above maxval is an error naming the function and the file.

local cuda = require "cuda"

local pgm = {}

-- samples a string.pack/unpack call handles: well below Lua's C stack limit
local CHUNK = 4096

-- a malformed file: the message alone, without a position in this module
local function fail(fname, name, fmt, ...)
  error(("%s: %s: " .. fmt):format(fname, name, ...), 0)
end

-- the bytes of s shown safely: printable ASCII as is, others as \xNN
local function show(s)
  return (s:gsub("[^\32-\126]", function (c) return ("\\x%02X"):format(c:byte()) end))
end


-- {====================================================== reading

-- the header's white space and comments from pos on; returns the next position
local function skip_space(s, pos)
  while true do
    local p = s:match("^[ \t\r\n\v\f]*()", pos)
    if s:sub(p, p) ~= "#" then return p end
    local eol = s:find("[\r\n]", p)
    if not eol then return #s + 1 end
    pos = eol
  end
end

-- a header number (width, height or maxval) at pos; returns it and the position after
local function header_number(s, pos, what, fname, name, comments)
  local start = pos
  pos = skip_space(s, pos)
  for c in s:sub(start, pos - 1):gmatch("#([^\r\n]*)") do comments[#comments + 1] = c:gsub("^ ", "") end
  local digits = s:match("^%d+", pos)
  if not digits then
    if pos > #s then fail(fname, name, "bad header: it ends before the %s", what) end
    fail(fname, name, "bad header: %s expected, got '%s'", what, show(s:sub(pos, pos + 7)))
  end
  local after = pos + #digits
  if after <= #s and not s:find("^[ \t\r\n\v\f#]", after) then
    fail(fname, name, "bad header: %s expected, got '%s'", what, show(s:sub(pos, pos + 7)))
  end
  local v = math.tointeger(tonumber(digits))
  if not v or #digits > 9 then fail(fname, name, "bad header: %s %s is too large", what, digits) end
  return v, after
end

-- the header of s: kind ("P5" or "P2"), cols, rows, maxval, where the raster
-- starts (P5: after the single white-space byte that ends the header), comments
local function header(s, fname, name)
  local magic = s:sub(1, 2)
  if magic ~= "P5" and magic ~= "P2" then
    if #s == 0 then fail(fname, name, "not a PGM (empty file)") end
    fail(fname, name, "not a PGM (magic '%s')", show(magic))
  end
  if #s > 2 and not s:find("^[ \t\r\n\v\f#]", 3) then
    fail(fname, name, "not a PGM (magic '%s')", show(s:sub(1, 3)))
  end
  local comments = {}
  local cols, rows, maxval, pos
  cols, pos = header_number(s, 3, "width", fname, name, comments)
  rows, pos = header_number(s, pos, "height", fname, name, comments)
  maxval, pos = header_number(s, pos, "maxval", fname, name, comments)
  if cols < 1 then fail(fname, name, "bad header: width %d (must be at least 1)", cols) end
  if rows < 1 then fail(fname, name, "bad header: height %d (must be at least 1)", rows) end
  if maxval < 1 or maxval > 65535 then fail(fname, name, "bad header: maxval %d outside 1..65535", maxval) end
  if magic == "P5" then
    -- exactly one white-space byte ends the header; the raster may start with '#' or a space
    if pos <= #s and not s:find("^[ \t\r\n\v\f]", pos) then
      fail(fname, name, "bad header: white space expected after maxval, got '%s'", show(s:sub(pos, pos)))
    end
    if pos > #s then fail(fname, name, "truncated data: 0 of %d bytes", rows * cols * (maxval > 255 and 2 or 1)) end
    pos = pos + 1
  end
  return magic, cols, rows, maxval, pos, comments
end

-- where sample k (0-based) of a cols-wide image is, for messages
local function where(k, cols)
  return k // cols + 1, k % cols + 1
end

-- the little-endian uint16 bytes of big-endian samples at s[pos..], checked against maxval
local function swap16(s, pos, n, cols, maxval, fname, name)
  local out, done = {}, 0
  while done < n do
    local k = math.min(CHUNK, n - done)
    local v = table.pack(string.unpack(">" .. ("I2"):rep(k), s, pos + 2 * done))
    for j = 1, k do
      if v[j] > maxval then
        local r, col = where(done + j - 1, cols)
        fail(fname, name, "sample %d at row %d, column %d exceeds maxval %d", v[j], r, col, maxval)
      end
    end
    out[#out + 1] = string.pack("<" .. ("I2"):rep(k), table.unpack(v, 1, k))
    done = done + k
  end
  return table.concat(out)
end

local function check_u8(raster, maxval, cols, fname, name)
  if maxval >= 255 then return end
  -- a set of the bytes maxval+1 .. 255; the characters a set treats specially
  -- are escaped one by one, since an escaped one cannot start a range
  local lo, set = maxval + 1, {}
  while ("%]^-"):find(string.char(lo), 1, true) do
    set[#set + 1] = "%" .. string.char(lo)
    lo = lo + 1
  end
  local first = raster:find("[" .. table.concat(set) .. string.char(lo) .. "-\255]")
  if first then
    local r, col = where(first - 1, cols)
    fail(fname, name, "sample %d at row %d, column %d exceeds maxval %d", raster:byte(first), r, col, maxval)
  end
end

-- the P5 raster: a string of native (little-endian) samples of the array's dtype
local function raster_p5(s, pos, rows, cols, maxval, fname, name)
  local n, width = rows * cols, maxval > 255 and 2 or 1
  local have = #s - pos + 1
  if have < n * width then fail(fname, name, "truncated data: %d of %d bytes", have, n * width) end
  if width == 1 then
    local raster = s:sub(pos, pos + n - 1)
    check_u8(raster, maxval, cols, fname, name)
    return raster
  end
  return swap16(s, pos, n, cols, maxval, fname, name)
end

-- the P2 raster: decimal samples, white space and (leniently) comments between them
local function raster_p2(s, pos, rows, cols, maxval, fname, name)
  local n = rows * cols
  local function pack(vals)
    return string.pack(maxval > 255 and "<" .. ("I2"):rep(#vals) or ("B"):rep(#vals), table.unpack(vals))
  end
  local out, vals, count = {}, {}, 0
  local text = s:sub(pos):gsub("#[^\r\n]*", "")
  for tok in text:gmatch("%S+") do
    if count == n then break end   -- anything after the raster is ignored, as for P5
    local v = tok:match("^%d+$") and math.tointeger(tonumber(tok))
    local r, col = where(count, cols)
    if not v then fail(fname, name, "bad sample '%s' at row %d, column %d", show(tok:sub(1, 12)), r, col) end
    if v > maxval then fail(fname, name, "sample %d at row %d, column %d exceeds maxval %d", v, r, col, maxval) end
    count = count + 1
    vals[#vals + 1] = v
    if #vals == CHUNK then
      out[#out + 1] = pack(vals)
      vals = {}
    end
  end
  if count < n then fail(fname, name, "truncated data: %d of %d samples", count, n) end
  if #vals > 0 then out[#out + 1] = pack(vals) end
  return table.concat(out)
end

local function decode(s, name, opts, fname)
  local magic, cols, rows, maxval, pos, comments = header(s, fname, name)
  local raster = (magic == "P5" and raster_p5 or raster_p2)(s, pos, rows, cols, maxval, fname, name)
  local img = cuda.host_array(maxval > 255 and "uint16" or "uint8", {rows, cols}, {pinned = opts.pinned})
  img:copy_from(raster)
  return img, maxval, comments
end

local function check_opts(fname, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(("%s: options must be a table, got %s"):format(fname, type(opts)), 3) end
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(("%s: unknown option '%s' (known: %s)"):format(fname, tostring(k), table.concat(names, ", ")), 3)
    end
  end
  return opts
end

-- pgm.read(path [, {pinned = false}]) -> image, maxval, comments
function pgm.read(path, opts)
  if type(path) ~= "string" then error(("pgm.read: path must be a string, got %s"):format(type(path)), 2) end
  opts = check_opts("pgm.read", opts, {pinned = true})
  local f, why = io.open(path, "rb")
  if not f then error(("pgm.read: cannot open %s"):format(why), 2) end
  local s = f:read("a")
  f:close()
  return decode(s, path, opts, "pgm.read")
end

-- pgm.decode(bytes [, name [, {pinned = false}]]) -> image, maxval, comments
function pgm.decode(s, name, opts)
  if type(s) ~= "string" then error(("pgm.decode: bytes must be a string, got %s"):format(type(s)), 2) end
  opts = check_opts("pgm.decode", opts, {pinned = true})
  return decode(s, name or "(string)", opts, "pgm.decode")
end

-- }======================================================


-- {====================================================== writing

-- the image's samples as Lua integers, CHUNK at a time: fn(values, count, first) (first 0-based)
local function each_chunk(img, fn)
  local bytes, n, w = img:bytes(), #img, img.dtype == "uint8" and 1 or 2
  local done = 0
  while done < n do
    local k = math.min(CHUNK, n - done)
    local spec = w == 1 and ("B"):rep(k) or "<" .. ("I2"):rep(k)
    fn(table.pack(string.unpack(spec, bytes, 1 + w * done)), k, done)
    done = done + k
  end
end

local function encode(img, opts, fname)
  local mt = type(img) == "userdata" and getmetatable(img)
  if not (type(mt) == "table" and mt.__name == "cuda.host_array") then
    error(("%s: image must be a cuda.host_array, got %s"):format(fname, type(mt) == "table" and mt.__name or type(img)), 3)
  end
  local shape, dtype = img.shape, img.dtype
  if dtype ~= "uint8" and dtype ~= "uint16" then
    error(("%s: image must be uint8 or uint16, got %s"):format(fname, dtype), 3)
  end
  if not shape or #shape ~= 2 then error(("%s: image must be 2-D {rows, cols}"):format(fname), 3) end
  local rows, cols = shape[1], shape[2]
  local format = opts.format or "P5"
  if format ~= "P5" and format ~= "P2" then
    error(("%s: format must be 'P5' or 'P2', got '%s'"):format(fname, tostring(format)), 3)
  end
  local maxval = opts.maxval or (dtype == "uint8" and 255 or 65535)
  if math.type(maxval) ~= "integer" or maxval < 1 or maxval > 65535 then
    error(("%s: maxval must be an integer in 1..65535, got %s"):format(fname, tostring(maxval)), 3)
  end
  local out = {format, "\n"}
  if opts.comment then
    for line in (tostring(opts.comment) .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = "# " .. line .. "\n" end
  end
  out[#out + 1] = ("%d %d\n%d\n"):format(cols, rows, maxval)
  local function too_big(v, k)
    local r, c = where(k, cols)
    error(("%s: sample %d at row %d, column %d exceeds maxval %d"):format(fname, v, r, c, maxval), 0)
  end
  -- the fast paths: bytes as they are, or swapped
  if format == "P5" and dtype == "uint8" and maxval == 255 then
    out[#out + 1] = img:bytes()
  elseif format == "P5" and dtype == "uint16" and maxval == 65535 then
    out[#out + 1] = (img:bytes():gsub("(.)(.)", "%2%1"))
  elseif format == "P5" then
    local spec1 = maxval > 255 and "I2" or "B"
    each_chunk(img, function (v, k, first)
      for j = 1, k do if v[j] > maxval then too_big(v[j], first + j - 1) end end
      out[#out + 1] = string.pack(">" .. spec1:rep(k), table.unpack(v, 1, k))
    end)
  else
    -- P2: an image row on its own lines, none longer than 70 characters
    local line, len = {}, 0
    each_chunk(img, function (v, k, first)
      for j = 1, k do
        local x = v[j]
        if x > maxval then too_big(x, first + j - 1) end
        local t = tostring(x)
        if len > 0 and len + 1 + #t > 70 then
          out[#out + 1] = table.concat(line, " ") .. "\n"
          line, len = {}, 0
        end
        line[#line + 1] = t
        len = len + (len > 0 and 1 or 0) + #t
        if (first + j) % cols == 0 then
          out[#out + 1] = table.concat(line, " ") .. "\n"
          line, len = {}, 0
        end
      end
    end)
  end
  return table.concat(out)
end

-- pgm.encode(image [, {format = "P5" | "P2", maxval =, comment =}]) -> bytes
function pgm.encode(img, opts)
  opts = check_opts("pgm.encode", opts, {format = true, maxval = true, comment = true})
  return encode(img, opts, "pgm.encode")
end

-- pgm.write(path, image [, {format = "P5" | "P2", maxval =, comment =}]) -> path
function pgm.write(path, img, opts)
  if type(path) ~= "string" then error(("pgm.write: path must be a string, got %s"):format(type(path)), 2) end
  opts = check_opts("pgm.write", opts, {format = true, maxval = true, comment = true})
  local s = encode(img, opts, "pgm.write")
  local f, why = io.open(path, "wb")
  if not f then error(("pgm.write: cannot open %s"):format(why), 2) end
  f:write(s)
  f:close()
  return path
end

-- }======================================================

return pgm
