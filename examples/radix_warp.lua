-- radix_warp.lua: seed 003's radix sort of 32 keys by one warp.
--
-- Bit by bit from the lowest, every lane asks __ballot_sync which lanes hold a
-- 1 there: that mask is the bit's histogram (__popc of it and of its
-- complement count the ones and zeros). A key's new place is the exclusive
-- prefix sum of the histogram for its bucket (0 for zeros, the number of
-- zeros for ones) plus its offset, the count of lanes below it in the same
-- bucket (__popc of the mask under the lane). Keys move through two buffers
-- in shared memory, one written while the other is read (the seed's
-- ping-pong), so that a single __syncwarp a bit suffices.
--
-- First the seed's worked example, 7 14 4 1 over 4 bits: each bit's
-- histogram, prefix sum, offsets and new indices, as the kernel recorded
-- them. Then random keys of 32 bits, checked against table.sort, LOOPS times
-- (the seed's 1000 by default).
--
--   culua examples/radix_warp.lua [LOOPS]

local cuda = require "cuda"

local loops = 1000
if arg[1] then
  loops = math.tointeger(tonumber(arg[1]))
  if not loops or loops < 1 then error(("radix_warp.lua: LOOPS must be a positive integer, got '%s'"):format(arg[1]), 0) end
end

local source = [[
#define WARP_SIZE 32
#define FIELDS 6   // a bit's trace: key, bit, bucket base, offset, new index, histogram

// Sorts keys[0 .. n-1] (n <= 32) on bits 0 .. nbits-1, stably. One block of
// exactly one warp. Lanes at n and beyond hold no key but take part in every
// ballot and __syncwarp, so the full mask is always right. With trace, bit b's
// steps go to trace[(b * FIELDS + field) * 32 + lane].
extern "C" __global__ void radix_warp_sort(unsigned *keys, int n, int nbits, unsigned *trace)
{
  __shared__ unsigned s_data[2][WARP_SIZE];
  unsigned lane = threadIdx.x;
  bool valid = lane < (unsigned)n;
  unsigned key = valid ? keys[lane] : 0u;
  unsigned below = (1u << lane) - 1u;                 // lanes under mine
  unsigned members = __ballot_sync(0xffffffffu, valid);
  for (int b = 0; b < nbits; b++) {
    unsigned bit = (key >> b) & 1u;
    unsigned ones = __ballot_sync(0xffffffffu, valid && bit);
    unsigned zeroes = members & ~ones;
    unsigned base = bit ? __popc(zeroes) : 0u;       // exclusive prefix sum of the histogram
    unsigned offset = __popc((bit ? ones : zeroes) & below);
    unsigned pos = base + offset;
    if (valid) s_data[b & 1][pos] = key;
    if (trace) {
      unsigned *t = trace + (size_t)b * FIELDS * WARP_SIZE;
      if (valid) {
        t[0 * WARP_SIZE + lane] = key;
        t[1 * WARP_SIZE + lane] = bit;
        t[2 * WARP_SIZE + lane] = base;
        t[3 * WARP_SIZE + lane] = offset;
        t[4 * WARP_SIZE + lane] = pos;
      }
      if (lane < 2) t[5 * WARP_SIZE + lane] = lane == 0 ? __popc(zeroes) : __popc(ones);
    }
    __syncwarp();                                      // every key is in its new place
    if (valid) key = s_data[b & 1][lane];
    // no second __syncwarp: the next bit writes the other buffer, and this one
    // is written again only after the next bit's __syncwarp, when all have read it
  }
  if (valid) keys[lane] = key;
}
]]
-- compiled before looking for a GPU, so that a machine without one still checks the kernel
local prog = cuda.compile(source, {name = "radix_warp.cu"})
require("culua.bench").need_devices()

local dev = cuda.device()
local sort = prog:module():kernel("radix_warp_sort")
local FIELDS, W = 6, 32
local keys = cuda.array("uint32", W)
local trace = cuda.array("uint32", 32 * FIELDS * W)
local cfg = {grid = {1}, block = {W}}

-- {====================================================== the worked example
local example = {7, 14, 4, 1}
local nbits = 4
keys:copy_from(example)
trace:fill(0)
sort:launch(cfg, keys, #example, nbits, trace)
local sorted = keys:view(1, #example):totable()
local t = trace:totable()
local function field(b, f, lane) return t[(b * FIELDS + f) * W + lane + 1] end
local function row(b, f)
  local r = {}
  for lane = 0, #example - 1 do r[#r + 1] = ("%4d"):format(field(b, f, lane)) end
  return table.concat(r)
end
local function binary(v)
  local s = {}
  for i = nbits - 1, 0, -1 do s[#s + 1] = (v >> i) & 1 end
  return table.concat(s)
end
print(("%s: the seed's example, keys %s, %d bits"):format(dev.name, table.concat(example, " "), nbits))
local bins = {}
for i, v in ipairs(example) do bins[i] = binary(v) end
print(("  binary: %s"):format(table.concat(bins, " ")))
local seed_bit0 = {2, 0, 1, 3}
local agree, after = true, {}
for b = 0, nbits - 1 do
  print(("\n  bit %d: histogram: %d keys with a 0, %d with a 1; its exclusive prefix sum {0, %d}"):format(b, field(b, 5, 0),
        field(b, 5, 1), field(b, 5, 0)))
  print(("    %-32s%s"):format("keys before this bit", row(b, 0)))
  print(("    %-32s%s"):format("bit " .. b, row(b, 1)))
  print(("    %-32s%s"):format("prefix sum of the histogram", row(b, 2)))
  print(("    %-32s%s"):format("offset", row(b, 3)))
  print(("    %-32s%s"):format("new index (prefix sum + offset)", row(b, 4)))
  local order = {}
  for lane = 0, #example - 1 do order[field(b, 4, lane) + 1] = field(b, 0, lane) end
  after[b] = table.concat(order, " ")
  print(("    %-32s%s"):format("keys after this bit", (" %3d"):rep(#order):format(table.unpack(order))))
end
for lane = 0, 3 do agree = agree and field(0, 4, lane) == seed_bit0[lane + 1] end
print(("\n  the seed's table for bit 0 gives new indices 2 0 1 3: %s"):format(agree and "the same" or "DIFFERENT"))
-- the seed's text then lists 4 14 7 1 after bit 1; a stable split on bit 1
-- (14 and 7 have a 1 there, 4 and 1 a 0) gives 4 1 14 7
print(("  after bit 1 the seed's text lists 4 14 7 1, which is not a stable split on bit 1; the kernel gives %s")
      :format(after[1]))
print(("  sorted: %s"):format(table.concat(sorted, " ")))
local example_ok = agree and table.concat(sorted, " ") == "1 4 7 14"
-- }======================================================

-- {====================================================== random keys
local h = cuda.host_array("uint32", W)
local first_run, bad = nil, 0
for loop = 1, loops do
  h:random(loop, 0, 0xffffffff)
  local want = h:totable()
  table.sort(want)
  keys:copy_from(h)
  sort:launch(cfg, keys, W, 32, 0)      -- 0: no trace (a null pointer)
  local got = keys:totable()
  if loop == 1 then first_run = {h:totable(), got} end
  for i = 1, W do
    if got[i] ~= want[i] then bad = bad + 1; break end
  end
end
print(("\nRandom 32-bit keys, run 1:\n  in:  %s\n  out: %s"):format(table.concat(first_run[1], " "),
      table.concat(first_run[2], " ")))
print(("%d runs of 32 random keys against table.sort: %s"):format(loops, bad == 0 and "all sorted" or bad .. " WRONG"))
-- }======================================================

local ok = example_ok and bad == 0
print(ok and "Sorting Successful! (SUCCESS)" or "Sorting FAILED")
if not ok then os.exit(1) end
