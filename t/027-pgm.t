-- culua.pgm: PGM images in and out of host arrays, P5 and P2, 8 and 16 bits,
-- comments, and a clear error for each kind of malformed file. No GPU needed.
local T = require "culua.tap"
local cuda = require "cuda"
local pgm = require "culua.pgm"

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local function path(name) return dir .. "/" .. name end
local function put(name, bytes)
  local f = assert(io.open(path(name), "wb"))
  f:write(bytes)
  f:close()
  return path(name)
end
local function slurp(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- {====================================================== round trips
-- odd shapes, single rows and columns, every format and depth
for _, case in ipairs{
  {"uint8", 7, 5, 255}, {"uint8", 1, 13, 255}, {"uint8", 11, 1, 200}, {"uint8", 64, 129, 255},
  {"uint16", 7, 5, 65535}, {"uint16", 3, 41, 1000}, {"uint16", 33, 17, 4095},
} do
  local dtype, rows, cols, maxval = table.unpack(case)
  local img = cuda.host_array(dtype, {rows, cols}):random(rows * 100 + cols, 0, maxval)
  for _, format in ipairs{"P5", "P2"} do
    local name = ("%s %dx%d maxval %d %s"):format(dtype, rows, cols, maxval, format)
    local p = pgm.write(path("rt.pgm"), img, {format = format, maxval = maxval})
    local back, mv, comments = pgm.read(p)
    T.is(back.dtype, dtype, name .. ": dtype")
    T.is_deeply(back.shape, {rows, cols}, name .. ": shape")
    T.is(mv, maxval, name .. ": maxval")
    T.ok(back:bytes() == img:bytes(), name .. ": samples round trip")
    T.is(#comments, 0, name .. ": no comments")
  end
end

-- the bytes on disk: a P5 header, 16-bit samples most significant byte first
do
  local img = cuda.host_array("uint16", {1, 3}):copy_from({{0x0102, 0xA0B0, 7}})
  T.is(slurp(pgm.write(path("be.pgm"), img)), "P5\n3 1\n65535\n\1\2\160\176\0\7", "16-bit P5 is big-endian")
  T.is(slurp(pgm.write(path("be.pgm"), img, {maxval = 50000})), "P5\n3 1\n50000\n\1\2\160\176\0\7",
       "16-bit P5 with another maxval")
  local small = cuda.host_array("uint16", {1, 3}):copy_from({{1, 200, 7}})
  T.is(slurp(pgm.write(path("be.pgm"), small, {maxval = 200})), "P5\n3 1\n200\n\1\200\7",
       "uint16 samples with maxval <= 255 take one byte each")
  local g = cuda.host_array("uint8", {2, 3}):copy_from({{0, 1, 2}, {253, 254, 255}})
  T.is(slurp(pgm.write(path("p2.pgm"), g, {format = "P2"})), "P2\n3 2\n255\n0 1 2\n253 254 255\n", "P2 text")
  T.is(pgm.encode(g), "P5\n3 2\n255\n\0\1\2\253\254\255", "pgm.encode")
  local back = pgm.decode(pgm.encode(g, {format = "P2"}))
  T.ok(back:bytes() == g:bytes(), "pgm.decode of pgm.encode")
  -- long P2 rows wrap before 70 characters and each image row starts a line
  local wide = cuda.host_array("uint16", {2, 40}):fill(65535)
  local text = pgm.encode(wide, {format = "P2"})
  local longest, lines = 0, 0
  for l in text:gmatch("[^\n]+") do longest = math.max(longest, #l); lines = lines + 1 end
  T.ok(longest <= 70, "P2 lines are at most 70 characters (longest " .. longest .. ")")
  T.is(lines, 3 + 2 * 4, "40 samples of 5 digits: 11 a line, 4 lines a row")
  T.ok(pgm.decode(text):bytes() == wide:bytes(), "wrapped P2 reads back")
end
-- }======================================================

-- {====================================================== comments
do
  local img = cuda.host_array("uint8", {2, 2}):copy_from({{1, 2}, {3, 4}})
  pgm.write(path("c.pgm"), img, {comment = "made by culua\nsecond line"})
  T.like(slurp(path("c.pgm")), "^P5\n# made by culua\n# second line\n2 2\n255\n", "comments written after the magic")
  local back, _, comments = pgm.read(path("c.pgm"))
  T.is_deeply(comments, {"made by culua", "second line"}, "comments read back")
  T.ok(back:bytes() == img:bytes(), "samples after comments")
  -- comments between every header field, with CR LF line ends, and a raster starting with '#' (35)
  local p = put("c2.pgm", "P5 #a\r\n# b\r\n2#c\n 2 # d\n255\n#\1\2\3")
  back, _, comments = pgm.read(p)
  T.is_deeply(back:totable(), {{35, 1}, {2, 3}}, "comments anywhere in the header; raster byte '#' is data")
  T.is_deeply(comments, {"a", "b", "c", "d"}, "every comment kept, in order")
  back = pgm.read(put("c3.pgm", "P2\n# size\n3 1\n# depth\n9\n1 # one\n2\n# three\n3\n"))
  T.is_deeply(back:totable(), {{1, 2, 3}}, "P2: comments between samples are skipped")
  back = pgm.read(put("c4.pgm", "P5\n2 1\n255\n\10\32trailing"))
  T.is_deeply(back:totable(), {{10, 32}}, "bytes after the raster are ignored")
end
-- }======================================================

-- {====================================================== pinned
if cuda.device_count() > 0 then
  local img = cuda.host_array("uint8", {3, 3}):iota(0)
  local back = pgm.read(pgm.write(path("pin.pgm"), img), {pinned = true})
  T.ok(back.pinned and back:bytes() == img:bytes(), "read into pinned memory")
else
  T.skip("pinned memory needs a GPU", 1)
end
-- }======================================================

-- {====================================================== malformed files
local bad = {
  {"P6\n2 2\n255\n....", "pgm%.read: .-/bad%.pgm: not a PGM %(magic 'P6'%)", "a PPM"},
  {"", "not a PGM %(empty file%)", "an empty file"},
  {"\137PNG\r\n", "not a PGM %(magic '\\x89P'%)", "binary junk shown escaped"},
  {"P5x 2 2 255\n", "not a PGM %(magic 'P5x'%)", "magic run into text"},
  {"P5\n", "bad header: it ends before the width", "header ends at once"},
  {"P5\n2 2", "bad header: it ends before the maxval", "no maxval"},
  {"P5\nabc 2 255\n", "bad header: width expected, got 'abc 2 25'", "width not a number"},
  {"P5\n2 -2 255\n", "bad header: height expected, got '%-2 255\\x0A'", "negative height"},
  {"P5\n2x 2 255\n", "bad header: width expected, got '2x 2 255'", "digits run into letters"},
  {"P5\n0 2 255\n", "bad header: width 0 %(must be at least 1%)", "zero width"},
  {"P5\n2 0 255\n", "bad header: height 0 %(must be at least 1%)", "zero height"},
  {"P5\n2 2 0\n", "bad header: maxval 0 outside 1%.%.65535", "maxval 0"},
  {"P5\n2 2 70000\n", "bad header: maxval 70000 outside 1%.%.65535", "maxval too large"},
  {"P5\n2 2 99999999999\n", "bad header: maxval 99999999999 is too large", "absurd number"},
  {"P5\n2 2 255#x\n\1\2\3\4", "bad header: white space expected after maxval, got '#'", "P5 maxval then comment"},
  {"P5\n2 2 255\n\1\2\3", "truncated data: 3 of 4 bytes", "P5 raster short"},
  {"P5\n2 2 255", "truncated data: 0 of 4 bytes", "P5 without raster"},
  {"P5\n2 2 65535\n\0\1\0\2\0\3\0", "truncated data: 7 of 8 bytes", "16-bit P5 raster short"},
  {"P5\n3 2 100\n\1\2\3\4\101\6", "sample 101 at row 2, column 2 exceeds maxval 100", "8-bit sample above maxval"},
  {"P5\n2 2 1000\n\0\1\3\233\0\3\0\4", "sample 1001 at row 1, column 2 exceeds maxval 1000", "16-bit sample above maxval"},
  {"P2\n2 2 255\n1 2 3\n", "truncated data: 3 of 4 samples", "P2 raster short"},
  {"P2\n2 2 255\n1 2 x3 4\n", "bad sample 'x3' at row 2, column 1", "P2 sample not a number"},
  {"P2\n2 2 255\n1 2 -3 4\n", "bad sample '%-3' at row 2, column 1", "P2 negative sample"},
  {"P2\n2 2 15\n1 2 3 16\n", "sample 16 at row 2, column 2 exceeds maxval 15", "P2 sample above maxval"},
}
for _, case in ipairs(bad) do
  local p = put("bad.pgm", case[1])
  T.error_like(function () pgm.read(p) end, "^pgm%.read: .-bad%.pgm: " .. case[2]:gsub("^pgm%%%.read: %.%-/bad%%%.pgm: ", ""),
               "malformed: " .. case[3])
end
T.error_like(function () pgm.decode("P7\n") end, "^pgm%.decode: %(string%): not a PGM %(magic 'P7'%)", "decode names the string")
T.error_like(function () pgm.read(path("missing.pgm")) end, "pgm%.read: cannot open .-missing%.pgm: No such file",
             "a missing file")
T.error_like(function () pgm.read(42) end, "pgm%.read: path must be a string, got number", "path not a string")
T.error_like(function () pgm.read(path("bad.pgm"), {pinnned = true}) end, "pgm%.read: unknown option 'pinnned' %(known: pinned%)",
             "misspelt read option")
-- }======================================================

-- {====================================================== bad writes
local img8 = cuda.host_array("uint8", {2, 2})
T.error_like(function () pgm.write(path("w.pgm"), {}) end, "pgm%.write: image must be a cuda%.host_array, got table",
             "write: a table")
T.error_like(function () pgm.write(path("w.pgm"), cuda.host_array("float32", {2, 2})) end,
             "pgm%.write: image must be uint8 or uint16, got float32", "write: float32")
T.error_like(function () pgm.write(path("w.pgm"), cuda.host_array("uint8", 4)) end,
             "pgm%.write: image must be 2%-D {rows, cols}", "write: 1-D")
T.error_like(function () pgm.write(path("w.pgm"), img8, {format = "P6"}) end,
             "pgm%.write: format must be 'P5' or 'P2', got 'P6'", "write: format")
T.error_like(function () pgm.write(path("w.pgm"), img8, {maxval = 0}) end,
             "pgm%.write: maxval must be an integer in 1%.%.65535, got 0", "write: maxval 0")
T.error_like(function () pgm.write(path("w.pgm"), img8, {maxval = 70000}) end,
             "pgm%.write: maxval must be an integer in 1%.%.65535, got 70000", "write: maxval too large")
T.error_like(function () pgm.write(path("w.pgm"), img8, {fromat = "P2"}) end,
             "pgm%.write: unknown option 'fromat' %(known: comment, format, maxval%)", "write: misspelt option")
local hot = cuda.host_array("uint8", {2, 3}):copy_from({{1, 2, 3}, {4, 250, 6}})
for _, format in ipairs{"P5", "P2"} do
  T.error_like(function () pgm.write(path("w.pgm"), hot, {maxval = 100, format = format}) end,
               "pgm%.write: sample 250 at row 2, column 2 exceeds maxval 100", "write " .. format .. ": sample above maxval")
end
T.error_like(function () pgm.write(dir .. "/no/such/dir/w.pgm", img8) end, "pgm%.write: cannot open .-w%.pgm",
             "write: a path that cannot be opened")
-- }======================================================

os.execute("rm -rf " .. dir)
T.done_testing()
