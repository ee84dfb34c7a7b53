-- culua.plot: CSV files, and line plots through gnuplot when it is installed.
--
--   local plot = require "culua.plot"
--   plot.csv("out.csv", {"n", "ms"}, {{256, 0.1}, {512, 0.7}})
--   local ok, why = plot.lines{output = "out.png", title = "...", xlabel = "N", ylabel = "GFLOP/s",
--                              logx = true, series = {{name = "tiled", x = {...}, y = {...}}}}
--   -- ok is false, with the reason, when gnuplot is missing: scripts go on without the picture
--   plot.gantt{output = "t.png", title = "...", xlabel = "ms", rows = {"stream 1", "stream 2"},
--              kinds = {"H2D", "kernel", "D2H"},
--              bars = {{row = 1, kind = "H2D", start = 0.0, stop = 0.12}, ...}}
--   -- a timeline: one bar per operation, a row per stream (or device), a colour per kind

local plot = {}

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- gnuplot runs a script of lines over the data file; both files go afterwards
local function run_gnuplot(gp, script, data)
  local sf = os.tmpname()
  local f = assert(io.open(sf, "w"))
  f:write(table.concat(script, "\n"), "\n")
  f:close()
  local ok = os.execute(shell_quote(gp) .. " " .. shell_quote(sf) .. " 2>/dev/null")
  os.remove(sf)
  os.remove(data)
  if not ok then return false, "gnuplot failed" end
  return true
end

-- write rows (tables of values) under a header line; returns the path
function plot.csv(path, header, rows)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(header, ","), "\n")
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #header do
      local v = r[i]
      cells[i] = type(v) == "number" and (math.type(v) == "integer" and tostring(v) or ("%.6g"):format(v)) or tostring(v == nil and "" or v)
    end
    f:write(table.concat(cells, ","), "\n")
  end
  f:close()
  return path
end

-- the gnuplot program, or nil
function plot.gnuplot()
  local p = io.popen("command -v gnuplot 2>/dev/null")
  local path = p:read("l")
  p:close()
  return path
end

-- a PNG of one or more series; false and a reason when it cannot be drawn
function plot.lines(spec)
  local gp = plot.gnuplot()
  if not gp then return false, "gnuplot is not installed" end
  local data = os.tmpname()
  local f = assert(io.open(data, "w"))
  for i, s in ipairs(spec.series) do
    if i > 1 then f:write("\n\n") end   -- gnuplot data blocks: index i-1
    for j = 1, #s.x do
      if s.y[j] == s.y[j] and s.y[j] ~= nil then f:write(("%.10g %.10g\n"):format(s.x[j], s.y[j])) end
    end
  end
  f:close()
  local script = {
    "set terminal pngcairo size 900,600 noenhanced",
    "set output " .. shell_quote(spec.output):gsub("^'", '"'):gsub("'$", '"'),
    "set title " .. ("%q"):format(spec.title or ""),
    "set xlabel " .. ("%q"):format(spec.xlabel or ""),
    "set ylabel " .. ("%q"):format(spec.ylabel or ""),
    "set key outside right",
    "set grid",
  }
  if spec.logx then script[#script + 1] = "set logscale x 2" end
  if spec.logy then script[#script + 1] = "set logscale y" end
  local parts = {}
  for i, s in ipairs(spec.series) do
    parts[#parts + 1] = ("%q index %d with linespoints title %q"):format(data, i - 1, s.name)
  end
  script[#script + 1] = "plot " .. table.concat(parts, ", ")
  return run_gnuplot(gp, script, data)
end

-- a PNG timeline (Gantt chart): spec.rows names the rows top to bottom, each
-- bar {row = i, kind = name, start = t0, stop = t1} is drawn in its kind's colour
function plot.gantt(spec)
  local gp = plot.gnuplot()
  if not gp then return false, "gnuplot is not installed" end
  local nrows, kinds = #spec.rows, spec.kinds
  local data = os.tmpname()
  local f = assert(io.open(data, "w"))
  for i, kind in ipairs(kinds) do
    if i > 1 then f:write("\n\n") end
    f:write("# ", kind, "\n")
    local any = false
    for _, b in ipairs(spec.bars) do
      if b.kind == kind then
        -- row 1 at the top: y = nrows - row + 1
        local y = nrows - b.row + 1
        f:write(("%.10g %d %.10g %.10g %.3f %.3f\n"):format((b.start + b.stop) / 2, y, b.start, b.stop, y - 0.35, y + 0.35))
        any = true
      end
    end
    if not any then f:write("nan nan nan nan nan nan\n") end   -- keeps the block (and its key entry)
  end
  f:close()
  local tics = {}
  for i, name in ipairs(spec.rows) do tics[#tics + 1] = ("%q %d"):format(name, nrows - i + 1) end
  local script = {
    "set terminal pngcairo size 1200," .. math.max(300, 60 * nrows + 150) .. " noenhanced",
    "set output " .. ("%q"):format(spec.output),
    "set title " .. ("%q"):format(spec.title or ""),
    "set xlabel " .. ("%q"):format(spec.xlabel or ""),
    "set ytics (" .. table.concat(tics, ", ") .. ")",
    ("set yrange [0.4:%f]"):format(nrows + 0.6),
    "set key outside right",
    "set grid xtics",
    "set style fill solid 0.8 border -1",
  }
  local parts = {}
  for i, kind in ipairs(kinds) do
    parts[#parts + 1] = ("%q index %d using 1:2:3:4:5:6 with boxxyerror title %q"):format(data, i - 1, kind)
  end
  script[#script + 1] = "plot " .. table.concat(parts, ", ")
  return run_gnuplot(gp, script, data)
end

return plot
