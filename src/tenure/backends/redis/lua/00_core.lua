#!lua name=tenure_@V@
-- tenure's coordination engine for redis:// as one Redis function library: this
-- file and the others of this directory, joined in name order (each part uses what
-- the parts before it define; Redis loads them as one library, so its functions
-- share these helpers).
--
-- Every operation is one function (FCALL tenure_@V@_<op> 1 <base> ...), so each
-- is atomic; <base> is "<prefix>{<node>}:" and every key of a node starts with it,
-- so all of a node's keys share one hash slot (Redis Cluster safe). The layout and
-- the rules are in tenure/backends/redis/__init__.py and docs/backends.md; they
-- follow the in-process engine (tenure/_core) rule for rule.
--
-- Time is the server's (TIME): it decides every expiry, timeout and lock-delay.
-- Each call first expires what is due (at most REAP_MAX entries; the reply says
-- when the next one is due, and clients call tick then).
--
-- Token counts go up to 2**64-1, beyond a Lua number's 53 exact bits: they travel
-- and are stored as 16 hex digits and are added and compared as {hi, lo} pairs of
-- 32-bit halves.

local REAP_MAX = 64          -- due entries expired per call
local DONE_KEEP = 600        -- seconds a request's answer is kept for its retries
local ENDED_KEEP = 3600      -- seconds why a session ended is kept for its client
local TRIM_MAX = 4           -- old answers / endings dropped per call that adds one
local INBOX_MAX = 100000     -- entries an unread inbox keeps (a dead client's)
local TWO32 = 4294967296

-- NOW_S is NOW as text, made from TIME's two parts (no string.format on every call).
local B, NOW, NOW_S, TOUCHED
-- Per call: the node's settings and the semaphores' meta read so far (every write
-- of them goes through the helpers below, which keep these in step).
local CFG, META
-- Per call: the earliest deadline known to be in 'due' (for the reply; NEXT_S is
-- its text when it was read from 'due', so the reply need not format it), and
-- the sessions this call ended.
local NEXT, NEXT_S, ENDED
-- Per call: the caller's inbox, and what this call pushed to it (the reply carries
-- it too, so the caller's client need not wait for its inbox read).
local CALLER_INBOX, LOCAL
-- A claim's end (a 'c:' entry of 'due'), defined by lua/70_claims.lua.
local claim_due

local function fail(code, msg)
  error({err = 'TENURE ' .. code .. ' ' .. msg})
end

local function quote(name)
  return "'" .. name .. "'"
end

-- -- counts ------------------------------------------------------------------------

local function cnt(h)
  return {tonumber(string.sub(h, 1, 8), 16), tonumber(string.sub(h, 9, 16), 16)}
end

local function chex(c)
  return string.format('%08x%08x', c[1], c[2])
end

local function cadd(a, b)
  local hi, lo = a[1] + b[1], a[2] + b[2]
  if lo >= TWO32 then lo = lo - TWO32; hi = hi + 1 end
  return {hi, lo}
end

local function csub(a, b)
  local hi, lo = a[1] - b[1], a[2] - b[2]
  if lo < 0 then lo = lo + TWO32; hi = hi - 1 end
  return {hi, lo}
end

local function cle(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] <= b[2])
end

local function cdec(c)  -- decimal text, for messages
  local hi, lo, digits = c[1], c[2], ''
  repeat
    local r = hi % 10
    hi = (hi - r) / 10
    local t = r * TWO32 + lo
    local d = t % 10
    lo = (t - d) / 10
    digits = d .. digits
  until hi == 0 and lo == 0
  return digits
end

local ZERO = '0000000000000000'

-- -- keys, time, replies -------------------------------------------------------------

local function start(keys)
  B = keys[1]
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
  NOW_S = t[1] .. '.' .. string.sub('00000' .. t[2], -6)
  TOUCHED = {}
  CFG, META = nil, {}
  NEXT, NEXT_S, ENDED = nil, nil, {}
  CALLER_INBOX, LOCAL = nil, {}
end

local function due_add(when, member)
  redis.call('ZADD', B .. 'due', when, member)
  if not NEXT or when < NEXT then NEXT, NEXT_S = when, nil end
end

local function fmt(x)
  return string.format('%.6f', x)
end

-- The settings an acquire reads, fetched together on the first cfg_get of a call;
-- any other is fetched alone (a missing field is cached as false, read as nil).
local function cfg_get(field)
  if not CFG then
    local v = redis.call('HMGET', B .. 'cfg', 'md', 'mx', 'dl', 'mw', 'ld', 'mh')
    CFG = {md = v[1], mx = v[2], dl = v[3], mw = v[4], ld = v[5], mh = v[6]}
  end
  local value = CFG[field]
  if value == nil then
    value = redis.call('HGET', B .. 'cfg', field)
    CFG[field] = value
  end
  return value or nil
end

local function cfg_incr(field, by)
  local value = redis.call('HINCRBY', B .. 'cfg', field, by)
  if CFG then CFG[field] = tostring(value) end
  return value
end

local function node_name()
  return quote(cfg_get('name') or '?')
end

local function require_node()
  if redis.call('EXISTS', B .. 'cfg') == 0 then
    fail(20, 'node does not exist')
  end
end

-- -- pushes ----------------------------------------------------------------------------

local function push(sid, fields)
  local inbox = redis.call('HGET', B .. 's:' .. sid, 'inbox')
  if not inbox then return end
  local n = redis.call('HINCRBY', B .. 'inseq', inbox, 1)
  local args = {'XADD', B .. 'in:' .. inbox, 'MAXLEN', '~', INBOX_MAX, '*', 'n', n, 'sid', sid}
  for _, v in ipairs(fields) do args[#args + 1] = v end
  redis.call(unpack(args))
  if inbox == CALLER_INBOX then
    local entry = {'n', n, 'sid', sid}
    for _, v in ipairs(fields) do entry[#entry + 1] = v end
    LOCAL[#LOCAL + 1] = entry
  end
end

local function touch(name)
  TOUCHED[name] = true
end

-- The one place a change is told: each touched name's watchers get a W, and each
-- prefix watch (B pw: '<sid>:<wid>' -> prefix) whose prefix the name starts with a P.
-- A call that touched nothing reads nothing; one that did reads the node's prefix
-- watches once: per touched name, one comparison per prefix watch (at most
-- max_sessions x max_watches_per_session of them; none costs nothing).
local function fire_watches()
  if next(TOUCHED) == nil then return end
  local prefixed = redis.call('HGETALL', B .. 'pw')
  for name, _ in pairs(TOUCHED) do
    local sids = redis.call('HKEYS', B .. 'wt:' .. name)
    for _, sid in ipairs(sids) do
      push(sid, {'k', 'W', 'name', name})
    end
    for i = 1, #prefixed, 2 do
      local prefix = prefixed[i + 1]
      if string.sub(name, 1, #prefix) == prefix then
        local c = string.find(prefixed[i], ':', 1, true)
        push(string.sub(prefixed[i], 1, c - 1),
          {'k', 'P', 'name', name, 'w', string.sub(prefixed[i], c + 1)})
      end
    end
  end
  TOUCHED = {}
end

-- Forget the session's prefix watches (its end, a resume, a drop).
local function drop_prefix_watches(sid)
  for _, wid in ipairs(redis.call('SMEMBERS', B .. 'spw:' .. sid)) do
    redis.call('HDEL', B .. 'pw', sid .. ':' .. wid)
  end
  redis.call('DEL', B .. 'spw:' .. sid)
end
