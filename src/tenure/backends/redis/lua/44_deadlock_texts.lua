-- tenure's engine for redis://, part 44 (the parts are one library: see 00_core.lua).

-- -- a deadlock's text -------------------------------------------------------------------
-- The engine's (tenure/_core/deadlocks.py: cycle_text, cut_name), byte for byte, for
-- the search of lua/45_deadlocks.lua: a cycle's first DL_LINKS waits, each name cut to
-- DL_NAME_BYTES, and how many more there are, however long the cycle and its names.
-- The limits are the engine's (tenure/_core/limits.py), put in as the library is made
-- (tenure/backends/redis/_conn.py): one value for both.

local DL_LINKS = @MAX_DEADLOCK_LINKS@
local DL_NAME_BYTES = @MAX_DEADLOCK_NAME_BYTES@
local DL_ESCAPES = {['\\'] = '\\\\', ['\t'] = '\\t', ['\n'] = '\\n', ['\r'] = '\\r'}

-- ``s`` quoted as Python's repr quotes a str: in single quotes, or double ones if it
-- holds a single quote and no double one; that quote, backslashes and ASCII control
-- characters escaped. (Names have no control characters; a non-ASCII character
-- repr escapes, a space other than ' ' or a format character, is shown as is.)
local function dl_repr(s)
  local q = "'"
  if string.find(s, "'", 1, true) and not string.find(s, '"', 1, true) then q = '"' end
  local body = string.gsub(s, '[%c\\' .. q .. ']', function(ch)
    if ch == q then return '\\' .. q end
    return DL_ESCAPES[ch] or string.format('\\x%02x', string.byte(ch))
  end)
  return q .. body .. q
end

-- ``name`` quoted (dl_repr), cut to its first DL_NAME_BYTES bytes at a character's
-- boundary (a UTF-8 character the cut would split is left out whole) and followed by
-- '...' if longer.
local function dl_cut(name)
  if #name <= DL_NAME_BYTES then return dl_repr(name) end
  local stop = DL_NAME_BYTES + 1  -- the first byte left out
  while stop > 1 do
    local b = string.byte(name, stop)
    if b < 128 or b >= 192 then break end  -- (not a continuation byte: a boundary)
    stop = stop - 1
  end
  return dl_repr(string.sub(name, 1, stop - 1)) .. '...'
end

-- The cycle ``path`` from the request labelled ``asking`` back to it: its first
-- DL_LINKS waits, and how many more there are ('..., and K more waits back to
-- <asking>: a cycle of N'), however long the cycle and its names.
local function dl_text(asking, path)
  local steps = {}
  for i = 1, math.min(#path, DL_LINKS) do
    local e = path[i]
    steps[i] = 'waits for ' .. dl_cut(e[2]) .. ' ' .. e[3] .. ' ' .. e[1].label
  end
  local text = asking .. ' ' .. table.concat(steps, ', which ')
  local more = #path - #steps
  if more > 0 then
    text = text .. ', and ' .. more .. ' more waits back to ' .. asking .. ': a cycle of ' .. #path
  end
  return text
end
