#!lua name=tenure_@V@
-- tenure's coordination engine for redis:// as one Redis function library.
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

local B, NOW, TOUCHED
-- Per call: the node's settings and the semaphores' meta read so far (every write
-- of them goes through the helpers below, which keep these in step).
local CFG, META
-- Per call: the earliest deadline known to be in 'due' (for the reply), and the
-- sessions this call ended.
local NEXT, ENDED
-- Per call: the caller's inbox, and what this call pushed to it (the reply carries
-- it too, so the caller's client need not wait for its inbox read).
local CALLER_INBOX, LOCAL

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

local function start(keys, reap_first)
  B = keys[1]
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
  TOUCHED = {}
  CFG, META = nil, {}
  NEXT, ENDED = nil, {}
  CALLER_INBOX, LOCAL = nil, {}
end

local function due_add(when, member)
  redis.call('ZADD', B .. 'due', when, member)
  if not NEXT or when < NEXT then NEXT = when end
end

local function fmt(x)
  return string.format('%.6f', x)
end

local function cfg_get(field)
  if not CFG then
    CFG = {}
    local flat = redis.call('HGETALL', B .. 'cfg')
    for i = 1, #flat, 2 do CFG[flat[i]] = flat[i + 1] end
  end
  return CFG[field]
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

local function fire_watches()
  for name, _ in pairs(TOUCHED) do
    local sids = redis.call('HKEYS', B .. 'wt:' .. name)
    for _, sid in ipairs(sids) do
      push(sid, {'k', 'W', 'name', name})
    end
  end
  TOUCHED = {}
end

-- -- semaphores ------------------------------------------------------------------------

local function meta(name)
  local cached = META[name]
  if cached ~= nil then return cached or nil end
  local m = redis.call('HMGET', B .. 'm:' .. name, 'lim', 'cnt', 'blk', 'eph', 'data')
  if not m[1] then
    META[name] = false
    return nil
  end
  cached = {lim = cnt(m[1]), cnt = cnt(m[2]), blk = tonumber(m[3]), eph = m[4] == '1', data = m[5]}
  META[name] = cached
  return cached
end

local function set_blocked(name, until_)
  redis.call('HSET', B .. 'm:' .. name, 'blk', fmt(until_))
  meta(name).blk = until_
end

local function decode_owner(raw)
  if not raw then return nil end
  local o = cmsgpack.unpack(raw)  -- {count hex, data, token, ttl, deadline, req}
  return {cnt = o[1], data = o[2], tok = o[3], ttl = o[4], dl = o[5], req = o[6]}
end

local function owner(name, holder)
  return decode_owner(redis.call('HGET', B .. 'r:' .. name, 'o' .. holder))
end


local function decode_waiter(raw)
  if not raw then return nil end
  local w = cmsgpack.unpack(raw)  -- {count hex, data, req, deadline}
  return {cnt = w[1], data = w[2], req = w[3], dl = w[4]}
end

local function waiter(name, holder)
  return decode_waiter(redis.call('HGET', B .. 'r:' .. name, 'w' .. holder))
end

-- The holder's queued request and its hold (either may be nil), in one read.
local function records(name, holder)
  local raw = redis.call('HMGET', B .. 'r:' .. name, 'w' .. holder, 'o' .. holder)
  return decode_waiter(raw[1]), decode_owner(raw[2])
end

-- The owners of ``name`` in grant order (by token): {holder, record} pairs.
local function owners_in_order(name)
  local flat = redis.call('HGETALL', B .. 'r:' .. name)
  local list = {}
  for i = 1, #flat, 2 do
    if string.sub(flat[i], 1, 1) == 'o' then
      local o = cmsgpack.unpack(flat[i + 1])
      list[#list + 1] = {string.sub(flat[i], 2), {cnt = o[1], data = o[2], tok = o[3], ttl = o[4]}}
    end
  end
  table.sort(list, function(a, b) return a[2].tok < b[2].tok end)
  return list
end

local function split_holder(holder)
  local c = string.find(holder, ':', 1, true)
  return string.sub(holder, 1, c - 1), string.sub(holder, c + 1)
end

local function set_count(name, c)
  redis.call('HSET', B .. 'm:' .. name, 'cnt', chex(c))
  meta(name).cnt = c
end

local function fits(name, holder, count)
  local m = meta(name)
  if NOW < m.blk then return false end
  local o = owner(name, holder)
  local rest = m.cnt
  if o then rest = csub(rest, cnt(o.cnt)) end
  return cle(cadd(rest, cnt(count)), m.lim)
end

local function queue_length(name)
  return redis.call('ZCARD', B .. 'q:' .. name)
end

local function can_grant_now(name, holder, count)
  local o = owner(name, holder)
  if o and cle(cnt(count), cnt(o.cnt)) then return true end
  return queue_length(name) == 0 and fits(name, holder, count)
end

local function remove_owner(name, holder, known)
  local o = known or owner(name, holder)
  if not o then return nil end
  local sid, hold = split_holder(holder)
  redis.call('HDEL', B .. 'r:' .. name, 'o' .. holder)
  redis.call('HDEL', B .. 'sh:' .. sid, 'o' .. hold .. ':' .. name)
  if o.ttl > 0 then redis.call('ZREM', B .. 'due', 'l:' .. holder .. ':' .. name) end
  set_count(name, csub(meta(name).cnt, cnt(o.cnt)))
  return o
end

local function remove_waiter(name, holder, known)
  local w = known or waiter(name, holder)
  if not w then return nil end
  local sid, hold = split_holder(holder)
  redis.call('HDEL', B .. 'r:' .. name, 'w' .. holder)
  redis.call('ZREM', B .. 'q:' .. name, holder)
  redis.call('HDEL', B .. 'sh:' .. sid, 'w' .. hold .. ':' .. name)
  if w.dl >= 0 then redis.call('ZREM', B .. 'due', 'w:' .. holder .. ':' .. name) end
  return w
end

-- Give ``count`` tokens to ``holder`` with the next fencing token (replacing its hold).
local function grant(name, holder, count, data, req)
  local old = owner(name, holder)
  local rest = meta(name).cnt
  if old then rest = csub(rest, cnt(old.cnt)) end
  -- The counter is its own key, which dropping the node keeps: tokens of a node
  -- made again keep increasing.
  local tok = redis.call('INCR', B .. 'tok')
  local ttl = tonumber(cfg_get('dl') or '') or -1
  local deadline = -1
  local sid, hold = split_holder(holder)
  if ttl > 0 then
    deadline = NOW + ttl
    due_add(deadline, 'l:' .. holder .. ':' .. name)
  elseif old and old.ttl > 0 then
    redis.call('ZREM', B .. 'due', 'l:' .. holder .. ':' .. name)
  end
  redis.call('HSET', B .. 'r:' .. name, 'o' .. holder, cmsgpack.pack({count, data, tok, ttl, deadline, req}))
  redis.call('HSET', B .. 'sh:' .. sid, 'o' .. hold .. ':' .. name, tok)
  set_count(name, cadd(rest, cnt(count)))
  return tok, ttl
end

local function delete_semaphore_keys(name)
  redis.call('DEL', B .. 'm:' .. name, B .. 'r:' .. name, B .. 'q:' .. name)
  redis.call('SREM', B .. 'sems', name)
  if meta(name).blk > 0 then redis.call('ZREM', B .. 'due', 'd:' .. name) end
  META[name] = false
end

-- Serve the queue from its head while the head fits (strict FIFO, no barging), then
-- drop an idle ephemeral semaphore.
local function settle(name)
  local m = meta(name)
  if not m then return end
  local drained = false
  while true do
    local head = redis.call('ZRANGE', B .. 'q:' .. name, 0, 0)
    if #head == 0 then
      drained = true
      break
    end
    local holder = head[1]
    local w = waiter(name, holder)
    if not fits(name, holder, w.cnt) then break end
    remove_waiter(name, holder)
    local tok, ttl = grant(name, holder, w.cnt, w.data, w.req)
    local sid, hold = split_holder(holder)
    push(sid, {'k', 'G', 'name', name, 'hold', hold, 'req', w.req, 'tok', tok, 'cnt', w.cnt, 'ttl', ttl})
    touch(name)
  end
  m = meta(name)
  if drained and m.eph and NOW >= m.blk and m.cnt[1] == 0 and m.cnt[2] == 0 then
    delete_semaphore_keys(name)
    touch(name)
  end
end

local function start_lock_delay(name)
  local delay = tonumber(cfg_get('ld') or '0')
  if delay <= 0 then return end
  local m = meta(name)
  if NOW + delay > m.blk then
    set_blocked(name, NOW + delay)
    due_add(NOW + delay, 'd:' .. name)
  end
end

local function check_room()
  local limit = tonumber(cfg_get('mx'))
  if redis.call('SCARD', B .. 'sems') >= limit then
    fail(22, 'max_semaphores (' .. limit .. ') reached on node ' .. node_name())
  end
end

local function new_semaphore(name, lim, data, eph)
  redis.call('HSET', B .. 'm:' .. name, 'lim', lim, 'cnt', ZERO, 'blk', '0', 'eph', eph, 'data', data)
  META[name] = {lim = cnt(lim), cnt = cnt(ZERO), blk = 0, eph = eph == '1', data = data}
  redis.call('SADD', B .. 'sems', name)
  touch(name)
end

-- -- sessions ----------------------------------------------------------------------

local function trim(zkey, hkey, keep)
  local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', NOW - keep, 'LIMIT', 0, TRIM_MAX)
  if #old > 0 then
    redis.call('ZREM', zkey, unpack(old))
    redis.call('HDEL', hkey, unpack(old))
  end
end

-- End a session: every hold released, every wait withdrawn, every watch disarmed;
-- ``failed`` (an expiry) starts lock-delay on what it held. Its client hears why.
local function end_session(sid, code, msg, failed)
  ENDED[sid] = true
  local s = B .. 's:' .. sid
  local holdings = redis.call('HKEYS', B .. 'sh:' .. sid)
  local names = {}
  for _, f in ipairs(holdings) do
    local kind = string.sub(f, 1, 1)
    local c = string.find(f, ':', 2, true)
    local hold, name = string.sub(f, 2, c - 1), string.sub(f, c + 1)
    local holder = sid .. ':' .. hold
    if kind == 'w' then
      remove_waiter(name, holder)
    else
      remove_owner(name, holder)
      if failed then start_lock_delay(name) end
    end
    names[name] = true
    touch(name)
  end
  for _, name in ipairs(redis.call('HKEYS', B .. 'sw:' .. sid)) do
    redis.call('HDEL', B .. 'wt:' .. name, sid)
  end
  if code ~= 0 then
    push(sid, {'k', 'E', 'code', code, 'msg', msg})
    redis.call('HSET', B .. 'ended', sid, code .. ' ' .. msg)
    redis.call('ZADD', B .. 'endz', NOW, sid)
    trim(B .. 'endz', B .. 'ended', ENDED_KEEP)
  end
  local inbox = redis.call('HGET', s, 'inbox')
  if inbox and redis.call('HINCRBY', B .. 'inref', inbox, -1) <= 0 then
    -- The client's last session here ended: nothing more is pushed to its inbox (a
    -- client still alive learns why the session ended from 'ended' and starts
    -- counting its inbox again if it opens another).
    redis.call('HDEL', B .. 'inref', inbox)
    redis.call('HDEL', B .. 'inseq', inbox)
    redis.call('DEL', B .. 'in:' .. inbox)
  end
  redis.call('DEL', s, B .. 'sh:' .. sid, B .. 'sw:' .. sid)
  redis.call('ZREM', B .. 'sess', sid)
  redis.call('ZREM', B .. 'due', 's:' .. sid)
  for name, _ in pairs(names) do settle(name) end
end

local LAST_RELEASE  -- the session's last release: "<request key> <result>"

local function check_session(sid, fence)
  local f = redis.call('HMGET', B .. 's:' .. sid, 'sec', 'epoch', 'inbox', 'lr')
  CALLER_INBOX, LAST_RELEASE = f[3], f[4]
  if not f[1] then
    if redis.call('EXISTS', B .. 'cfg') == 0 then
      fail(10, 'node was dropped')
    end
    local why = redis.call('HGET', B .. 'ended', sid)
    if why then
      local c = string.find(why, ' ', 1, true)
      fail(tonumber(string.sub(why, 1, c - 1)), string.sub(why, c + 1))
    end
    fail(11, 'session ' .. sid .. ' does not exist (expired or closed)')
  end
  local c = string.find(fence, ':', 1, true)
  if string.sub(fence, 1, c - 1) ~= f[1] then
    fail(11, 'session ' .. sid .. ' does not exist (expired or closed)')
  end
  if string.sub(fence, c + 1) ~= f[2] then
    fail(11, 'session ' .. sid .. ' was taken over by a newer client (resumed elsewhere)')
  end
end

-- -- expiry ------------------------------------------------------------------------------

local function parse_due(rest)
  local a = string.find(rest, ':', 1, true)
  local b = string.find(rest, ':', a + 1, true)
  return string.sub(rest, 1, b - 1), string.sub(rest, b + 1)
end

local function on_due(member)
  local kind, rest = string.sub(member, 1, 1), string.sub(member, 3)
  if kind == 's' then
    local window = redis.call('HGET', B .. 's:' .. rest, 'win')
    if window then
      end_session(rest, 11, 'session ' .. rest .. ' was not re-attached within ' .. window .. 's', true)
    end
  elseif kind == 'w' then
    local holder, name = parse_due(rest)
    local w = waiter(name, holder)
    if w and w.dl >= 0 and w.dl <= NOW then
      remove_waiter(name, holder)
      local sid, hold = split_holder(holder)
      push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 25,
        'msg', 'timed out waiting for ' .. quote(name)})
      touch(name)
      settle(name)
    end
  elseif kind == 'l' then
    local holder, name = parse_due(rest)
    local o = owner(name, holder)
    if o and o.dl >= 0 and o.dl <= NOW then
      remove_owner(name, holder)
      local sid, hold = split_holder(holder)
      push(sid, {'k', 'L', 'name', name, 'hold', hold, 'tok', o.tok, 'code', 12,
        'msg', 'lease on ' .. quote(name) .. ' expired without renewal'})
      start_lock_delay(name)
      touch(name)
      settle(name)
    end
  elseif kind == 'd' then
    local m = meta(rest)
    if m and m.blk > 0 and m.blk <= NOW then
      set_blocked(rest, 0)
      settle(rest)
    end
  end
end

-- Expire what is due (at most REAP_MAX entries); true if more may be due.
local function reap()
  -- Mostly nothing is due: one read of the first entry says so, and when the next is.
  local head = redis.call('ZRANGE', B .. 'due', 0, 0, 'WITHSCORES')
  if #head == 0 then return false end
  if tonumber(head[2]) > NOW then
    local when = tonumber(head[2])
    if not NEXT or when < NEXT then NEXT = when end
    return false
  end
  local due = redis.call('ZRANGEBYSCORE', B .. 'due', '-inf', NOW, 'LIMIT', 0, REAP_MAX)
  for _, member in ipairs(due) do
    redis.call('ZREM', B .. 'due', member)
    on_due(member)
  end
  head = redis.call('ZRANGE', B .. 'due', 0, 0, 'WITHSCORES')
  if #head > 0 then
    local when = tonumber(head[2])
    if not NEXT or when < NEXT then NEXT = when end
  end
  return #due == REAP_MAX
end

-- -- replies, and answers kept for retries -------------------------------------------------

local function reply(result, more)
  fire_watches()
  local nxt = ''
  if more then nxt = fmt(NOW) elseif NEXT then nxt = fmt(NEXT) end
  return {fmt(NOW), nxt, result, LOCAL}
end

local function recall(rk)
  if rk == '' then return nil end
  local raw = redis.call('HGET', B .. 'done', rk)
  if raw then return cmsgpack.unpack(raw) end
  return nil
end

local function remember(rk, result)
  if rk ~= '' then
    redis.call('HSET', B .. 'done', rk, cmsgpack.pack(result))
    redis.call('ZADD', B .. 'donez', NOW, rk)
    trim(B .. 'donez', B .. 'done', DONE_KEEP)
  end
  return result
end

-- Every operation: expire what is due, then (on a session) check the session and
-- answer a retried request as the first try was answered.
local function begin(keys)
  start(keys)
  require_node()
  return reap()
end

local function begin_session(keys, args)
  start(keys)
  check_session(args[1], args[2])  -- it exists, so its node does
  local more = reap()
  if ENDED[args[1]] then check_session(args[1], args[2]) end  -- expired just now: why
  local done = nil
  if args[3] ~= '' then done = recall(args[3]) end
  return more, done
end

-- -- node functions --------------------------------------------------------------------

local CONFIG_FIELDS = {'st', 'ld', 'dl', 'ms', 'mx', 'mw', 'md', 'mwa', 'mm', 'name'}

local function config_reply()
  local values = redis.call('HMGET', B .. 'cfg', unpack(CONFIG_FIELDS))
  values[#values + 1] = redis.call('ZCARD', B .. 'sess')
  values[#values + 1] = redis.call('SCARD', B .. 'sems')
  return values
end

local function create_node(keys, args)
  start(keys)
  if redis.call('EXISTS', B .. 'cfg') == 1 then
    fail(21, 'node ' .. quote(args[10]) .. ' already exists')
  end
  local set = {'HSET', B .. 'cfg'}
  for i, f in ipairs(CONFIG_FIELDS) do
    set[#set + 1] = f
    set[#set + 1] = args[i]
  end
  redis.call(unpack(set))
  return reply(1, false)
end

local function describe_node(keys, args)
  local more = begin(keys)
  return reply(config_reply(), more)
end

-- args: the settings expected now (as describe_node gave them), then the new ones.
local function alter_node(keys, args)
  local more = begin(keys)
  local now = redis.call('HMGET', B .. 'cfg', unpack(CONFIG_FIELDS))
  for i = 1, #CONFIG_FIELDS - 1 do
    if now[i] ~= args[i] then return reply(0, more) end
  end
  local set = {'HSET', B .. 'cfg'}
  for i = 1, #CONFIG_FIELDS - 1 do
    set[#set + 1] = CONFIG_FIELDS[i]
    set[#set + 1] = args[#CONFIG_FIELDS - 1 + i]
  end
  redis.call(unpack(set))
  CFG = nil
  return reply(config_reply(), more)
end

local function drop_node(keys, args)
  local more = begin(keys)
  local sids = redis.call('ZRANGE', B .. 'sess', 0, -1)
  if #sids > 0 and args[1] ~= '1' then
    fail(23, 'node ' .. node_name() .. ' has ' .. #sids .. ' live session(s); use force=True')
  end
  local msg = 'node ' .. node_name() .. ' was dropped'
  for _, name in ipairs(redis.call('SMEMBERS', B .. 'sems')) do
    for _, holder in ipairs(redis.call('ZRANGE', B .. 'q:' .. name, 0, -1)) do
      local w = waiter(name, holder)
      local sid, hold = split_holder(holder)
      push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 20, 'msg', msg})
    end
    for _, pair in ipairs(owners_in_order(name)) do
      local holder, o = pair[1], pair[2]
      local sid, hold = split_holder(holder)
      push(sid, {'k', 'L', 'name', name, 'hold', hold, 'tok', o.tok, 'code', 12, 'msg', msg})
    end
    redis.call('DEL', B .. 'm:' .. name, B .. 'r:' .. name, B .. 'q:' .. name, B .. 'wt:' .. name)
  end
  for _, sid in ipairs(sids) do
    push(sid, {'k', 'E', 'code', 10, 'msg', msg})
    redis.call('DEL', B .. 's:' .. sid, B .. 'sh:' .. sid, B .. 'sw:' .. sid)
  end
  -- The token and session-id counters ('tok', 'ids') stay: a node made again under
  -- this name keeps counting up. Inboxes stay for their clients to read.
  redis.call('DEL', B .. 'cfg', B .. 'sess', B .. 'due', B .. 'sems', B .. 'done', B .. 'donez',
    B .. 'ended', B .. 'endz', B .. 'inref')
  TOUCHED = {}
  return {fmt(NOW), '', 1}
end

local function tick(keys, args)
  start(keys)
  if redis.call('EXISTS', B .. 'cfg') == 0 then return {fmt(NOW), '', 0} end
  return reply(1, reap())
end

-- -- session functions -----------------------------------------------------------------

-- args: request key, window ('' = the node's), description, inbox, secret.
local function open_session(keys, args)
  local more = begin(keys)
  local done = recall(args[1])
  if done then return reply(done, more) end
  local limit = tonumber(cfg_get('ms'))
  if redis.call('ZCARD', B .. 'sess') >= limit then
    fail(22, 'max_sessions (' .. limit .. ') reached on node ' .. node_name())
  end
  local window = args[2]
  if window == '' then window = cfg_get('st') end
  local sid = redis.call('INCR', B .. 'ids')
  redis.call('HSET', B .. 's:' .. sid, 'win', window, 'desc', args[3], 'inbox', args[4],
    'sec', args[5], 'epoch', 1)
  -- A new inbox (or one deleted since) counts its entries from 1 again.
  local fresh = redis.call('HINCRBY', B .. 'inref', args[4], 1) == 1
  local deadline = NOW + tonumber(window)
  redis.call('ZADD', B .. 'sess', deadline, sid)
  due_add(deadline, 's:' .. sid)
  local answer = {sid, window, 0}
  if fresh then answer[3] = 1 end
  return reply(remember(args[1], answer), more)
end

-- Take a live session back by its secret (a ticket), for a new client (inbox): its
-- holds stay with their tokens, its queued requests are withdrawn, the fence's
-- epoch goes up (the old client's calls are refused from now on) and the old client
-- is told. args: session id, secret, new inbox.
local function resume_session(keys, args)
  local more = begin(keys)
  local sid, inbox = args[1], args[3]
  local s = B .. 's:' .. sid
  local f = redis.call('HMGET', s, 'sec', 'inbox', 'win')
  if not f[1] then
    local why = redis.call('HGET', B .. 'ended', sid)
    if why then
      local c = string.find(why, ' ', 1, true)
      fail(11, 'session ' .. sid .. ' cannot be resumed: ' .. string.sub(why, c + 1))
    end
    fail(11, 'session ' .. sid .. ' cannot be resumed: it does not exist (expired or closed)')
  end
  if f[1] ~= args[2] then
    fail(11, 'session ' .. sid .. ' cannot be resumed: the ticket\'s secret is wrong')
  end
  for _, field in ipairs(redis.call('HKEYS', B .. 'sh:' .. sid)) do
    if string.sub(field, 1, 1) == 'w' then
      local c = string.find(field, ':', 2, true)
      local name = string.sub(field, c + 1)
      remove_waiter(name, sid .. ':' .. string.sub(field, 2, c - 1))
      touch(name)
      settle(name)
    end
  end
  -- Its watches are dropped (the new owner arms its own).
  for _, name in ipairs(redis.call('HKEYS', B .. 'sw:' .. sid)) do
    redis.call('HDEL', B .. 'wt:' .. name, sid)
  end
  redis.call('DEL', B .. 'sw:' .. sid)
  redis.call('HSET', s, 'nw', 0)
  local old, fresh = f[2], false
  if old ~= inbox then
    if redis.call('HINCRBY', B .. 'inref', old, -1) <= 0 then
      -- The old client has no other session here: its inbox keeps only the news
      -- below (one entry, for an owner that is alive; a dead one's inbox stays that
      -- small until its client id is used again, which it never is).
      redis.call('HDEL', B .. 'inref', old)
      redis.call('DEL', B .. 'in:' .. old)
    end
    push(sid, {'k', 'E', 'code', 11, 'msg', 'session ' .. sid .. ' was resumed by another client'})
    fresh = redis.call('HINCRBY', B .. 'inref', inbox, 1) == 1
  end
  local epoch = redis.call('HINCRBY', s, 'epoch', 1)
  redis.call('HSET', s, 'inbox', inbox)
  local deadline = NOW + tonumber(f[3])
  redis.call('ZADD', B .. 'sess', deadline, sid)
  due_add(deadline, 's:' .. sid)
  local holds = {}
  for _, field in ipairs(redis.call('HKEYS', B .. 'sh:' .. sid)) do
    local c = string.find(field, ':', 2, true)
    local hold, name = string.sub(field, 2, c - 1), string.sub(field, c + 1)
    local o = owner(name, sid .. ':' .. hold)
    holds[#holds + 1] = {name, tonumber(hold), o.tok, o.cnt, tostring(o.ttl), o.data}
  end
  local renumbered = 0
  if fresh then renumbered = 1 end
  return reply({f[3], epoch, holds, renumbered}, more)
end

-- The client is alive: its session's window starts again from now.
local function heartbeat(keys, args)
  local more = begin_session(keys, args)
  local sid = args[1]
  local deadline = NOW + tonumber(redis.call('HGET', B .. 's:' .. sid, 'win'))
  redis.call('ZADD', B .. 'sess', deadline, sid)
  due_add(deadline, 's:' .. sid)
  return reply(1, more)
end

local function close_session(keys, args)
  start(keys)
  local f = redis.call('HMGET', B .. 's:' .. args[1], 'sec', 'epoch')
  if not f[1] or f[1] .. ':' .. f[2] ~= args[2] then
    return {fmt(NOW), '', 0}  -- gone already (or not ours): closing is idempotent
  end
  local more = reap()
  if redis.call('EXISTS', B .. 's:' .. args[1]) == 1 then
    end_session(args[1], 0, '', false)
  end
  return reply(1, more)
end

-- args: sid, fence, request key, name, hold, req, count (hex), data, timeout ('' =
-- forever), ephemeral ('1'/'0').
local function acquire(keys, args)
  local more = begin_session(keys, args)
  local sid, name, hold, req, count, data, timeout, eph =
    args[1], args[4], args[5], args[6], args[7], args[8], args[9], args[10]
  local holder = sid .. ':' .. hold
  local m = meta(name)
  local w, o = nil, nil
  if m then
    w, o = records(name, holder)
    -- A retry of this very request (its answer was lost): answer as the first try.
    if w and tostring(w.req) == req then return reply({'Q'}, more) end
    if o and tostring(o.req) == req then return reply({'G', o.tok, tostring(o.ttl)}, more) end
  end
  local md = tonumber(cfg_get('md'))
  if #data > md then
    fail(22, 'owner data is ' .. #data .. ' bytes; max_data_size is ' .. md)
  end
  if not m and eph ~= '1' then
    fail(20, 'semaphore ' .. quote(name) .. ' does not exist (create it or use ephemeral)')
  end
  local want = cnt(count)
  local queued = 0
  local function grantable()
    if o and cle(want, cnt(o.cnt)) then return true end  -- takes no token from anyone
    if queued > 0 or NOW < m.blk then return false end
    local rest = m.cnt
    if o then rest = csub(rest, cnt(o.cnt)) end
    return cle(cadd(rest, want), m.lim)
  end
  if not m then
    check_room()
  else
    queued = queue_length(name)
    if not cle(want, m.lim) then
      fail(22, 'count ' .. cdec(want) .. ' exceeds the limit ' .. cdec(m.lim) .. ' of ' .. quote(name))
    elseif timeout ~= '0' and not w and not grantable() then
      local mw = tonumber(cfg_get('mw'))
      if queued >= mw then
        fail(22, 'max_waiters (' .. mw .. ') reached on semaphore ' .. quote(name))
      end
    end
  end
  -- Checked: from here on the request succeeds.
  if not m then
    new_semaphore(name, 'ffffffffffffffff', '', '1')
    m = meta(name)
  end
  if w then
    remove_waiter(name, holder, w)
    queued = queued - 1
    push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 26,
      'msg', 'superseded by a newer acquire'})
    touch(name)
  end
  local result
  if grantable() then
    if o and cle(want, cnt(o.cnt)) then
      -- Shrink or restate in place: same grant, same token, same place in grant order.
      redis.call('HSET', B .. 'r:' .. name, 'o' .. holder,
        cmsgpack.pack({count, data, o.tok, o.ttl, o.dl, o.req}))
      set_count(name, cadd(csub(m.cnt, cnt(o.cnt)), want))
      if o.cnt ~= count or o.data ~= data then touch(name) end
      result = {'G', o.tok, tostring(o.ttl)}
    else
      local tok, ttl = grant(name, holder, count, data, req)
      touch(name)
      result = {'G', tok, tostring(ttl)}
    end
  elseif timeout == '0' then
    result = {'B'}
  else
    local seq = cfg_incr('qs', 1)
    local deadline = -1
    if timeout ~= '' then
      deadline = NOW + tonumber(timeout)
      due_add(deadline, 'w:' .. holder .. ':' .. name)
    end
    redis.call('ZADD', B .. 'q:' .. name, seq, holder)
    redis.call('HSET', B .. 'r:' .. name, 'w' .. holder, cmsgpack.pack({count, data, req, deadline}))
    redis.call('HSET', B .. 'sh:' .. sid, 'w' .. hold .. ':' .. name, req)
    touch(name)
    result = {'Q'}
  end
  if w or queued > 0 then settle(name) end
  return reply(result, more)
end

-- The asker gave up: withdraw the request ``req`` if queued ('Q'); else, unless the
-- hold was held before (``kept`` '1': an upgrade), release a grant that raced it ('R').
-- args: sid, fence, request key, name, hold, req, kept.
local function withdraw(keys, args)
  local more = begin_session(keys, args)
  local sid, name, hold, req = args[1], args[4], args[5], args[6]
  local holder = sid .. ':' .. hold
  if not meta(name) then return reply('N', more) end
  local w = waiter(name, holder)
  local result = 'N'
  if w and tostring(w.req) == req then
    remove_waiter(name, holder)
    result = 'Q'
  elseif not w and args[7] ~= '1' and remove_owner(name, holder) then
    result = 'R'
  end
  if result ~= 'N' then
    touch(name)
    settle(name)
  end
  return reply(result, more)
end

-- args: sid, fence, request key, name, hold.
-- A release's answer is kept in its session's record (the last one only: a hash
-- field, not an entry of 'done'): a retry of the session's latest release is
-- answered as its first try was.
local function release(keys, args)
  start(keys)
  check_session(args[1], args[2])
  local more = reap()
  if ENDED[args[1]] then check_session(args[1], args[2]) end
  local rk = args[3]
  if LAST_RELEASE and rk ~= '' and string.sub(LAST_RELEASE, 1, #rk + 1) == rk .. ' ' then
    return reply(tonumber(string.sub(LAST_RELEASE, #rk + 2)), more)
  end
  local function remember_release(result)
    if rk ~= '' then redis.call('HSET', B .. 's:' .. args[1], 'lr', rk .. ' ' .. result) end
    return result
  end
  local name, holder = args[4], args[1] .. ':' .. args[5]
  if not meta(name) then return reply(remember_release(0), more) end
  local w, o = records(name, holder)
  if w then remove_waiter(name, holder, w) end
  if w then
    push(args[1], {'k', 'F', 'name', name, 'hold', args[5], 'req', w.req, 'code', 26,
      'msg', 'released while waiting'})
  end
  if o then remove_owner(name, holder, o) end
  local result = 0
  if o or w then
    result = 1
    touch(name)
  end
  settle(name)
  return reply(remember_release(result), more)
end

-- args: sid, fence, request key, name, hold.
local function renew(keys, args)
  local more = begin_session(keys, args)
  local name, holder = args[4], args[1] .. ':' .. args[5]
  local o = meta(name) and owner(name, holder)
  if not o then
    fail(20, 'session ' .. args[1] .. ' holds no tokens of ' .. quote(name))
  end
  if o.ttl < 0 then
    fail(23, 'the grant of ' .. quote(name) .. ' has no lease TTL to renew')
  end
  local deadline = NOW + o.ttl
  redis.call('HSET', B .. 'r:' .. name, 'o' .. holder,
    cmsgpack.pack({o.cnt, o.data, o.tok, o.ttl, deadline, o.req}))
  due_add(deadline, 'l:' .. holder .. ':' .. name)
  return reply(tostring(o.ttl), more)
end

-- args: sid, fence, request key, name, limit (hex), data.
local function create_semaphore(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local name, data = args[4], args[6]
  local md = tonumber(cfg_get('md'))
  if #data > md then
    fail(22, 'semaphore data is ' .. #data .. ' bytes; max_data_size is ' .. md)
  end
  if meta(name) then fail(21, 'semaphore ' .. quote(name) .. ' already exists') end
  check_room()
  new_semaphore(name, args[5], data, '0')
  return reply(remember(args[3], 1), more)
end

-- args: sid, fence, request key, name, data.
local function update_semaphore(keys, args)
  local more = begin_session(keys, args)
  local name, data = args[4], args[5]
  local m = meta(name)
  if not m then fail(20, 'semaphore ' .. quote(name) .. ' does not exist') end
  local md = tonumber(cfg_get('md'))
  if #data > md then
    fail(22, 'semaphore data is ' .. #data .. ' bytes; max_data_size is ' .. md)
  end
  if m.data ~= data then
    redis.call('HSET', B .. 'm:' .. name, 'data', data)
    m.data = data
    touch(name)
  end
  return reply(1, more)
end

-- args: sid, fence, request key, name, force ('1'/'0').
local function delete_semaphore(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local name = args[4]
  if not meta(name) then fail(20, 'semaphore ' .. quote(name) .. ' does not exist') end
  local owners = {}
  for _, pair in ipairs(owners_in_order(name)) do owners[#owners + 1] = pair[1] end
  local waiters = redis.call('ZRANGE', B .. 'q:' .. name, 0, -1)
  if (#owners > 0 or #waiters > 0) and args[5] ~= '1' then
    fail(23, 'semaphore ' .. quote(name) .. ' has ' .. #owners .. ' owner(s) and ' .. #waiters
      .. ' waiter(s); use force=True')
  end
  local msg = 'semaphore ' .. quote(name) .. ' was deleted'
  -- The caller's client hears of its own sessions' losses in the answer too, at once.
  local failed, lost = {}, {}
  for _, holder in ipairs(waiters) do
    local w = remove_waiter(name, holder)
    local sid, hold = split_holder(holder)
    push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 20, 'msg', msg})
    failed[#failed + 1] = {tonumber(sid), tonumber(hold), tonumber(w.req)}
  end
  for _, holder in ipairs(owners) do
    local o = remove_owner(name, holder)
    local sid, hold = split_holder(holder)
    push(sid, {'k', 'L', 'name', name, 'hold', hold, 'tok', o.tok, 'code', 12, 'msg', msg})
    lost[#lost + 1] = {tonumber(sid), tonumber(hold), o.tok}
  end
  delete_semaphore_keys(name)
  touch(name)
  return reply(remember(args[3], {msg, failed, lost}), more)
end

local function describe(name, with_owners, with_waiters)
  local m = meta(name)
  if not m then return {0} end
  local owners, waiters = {}, {}
  if with_owners then
    for _, pair in ipairs(owners_in_order(name)) do
      local o = pair[2]
      local sid = split_holder(pair[1])
      owners[#owners + 1] = {tonumber(sid), o.cnt, o.data, o.tok}
    end
  end
  if with_waiters then
    for _, holder in ipairs(redis.call('ZRANGE', B .. 'q:' .. name, 0, -1)) do
      local w = waiter(name, holder)
      local sid = split_holder(holder)
      waiters[#waiters + 1] = {tonumber(sid), w.cnt, w.data}
    end
  end
  local eph = 0
  if m.eph then eph = 1 end
  return {1, chex(m.lim), chex(m.cnt), m.data, eph, owners, waiters}
end

-- args: sid, fence, request key, name, owners ('1'/'0'), waiters ('1'/'0').
local function describe_semaphore(keys, args)
  local more = begin_session(keys, args)
  return reply(describe(args[4], args[5] == '1', args[6] == '1'), more)
end

-- Arm (delta 1) or disarm (-1) one watch of the session on a name; with the state.
-- args: sid, fence, request key, name, delta, owners, waiters.
local function watch(keys, args)
  local more = begin_session(keys, args)
  local sid, name, delta = args[1], args[4], tonumber(args[5])
  local s = B .. 's:' .. sid
  if delta > 0 then
    local limit = tonumber(cfg_get('mwa'))
    if tonumber(redis.call('HGET', s, 'nw') or '0') >= limit then
      fail(22, 'max_watches_per_session (' .. limit .. ') reached')
    end
  elseif tonumber(redis.call('HGET', B .. 'sw:' .. sid, name) or '0') <= 0 then
    return reply(0, more)  -- disarmed already
  end
  redis.call('HINCRBY', s, 'nw', delta)
  local n = redis.call('HINCRBY', B .. 'sw:' .. sid, name, delta)
  if n <= 0 then
    redis.call('HDEL', B .. 'sw:' .. sid, name)
    redis.call('HDEL', B .. 'wt:' .. name, sid)
  else
    redis.call('HSET', B .. 'wt:' .. name, sid, n)
  end
  if delta < 0 then return reply(0, more) end
  return reply(describe(name, args[6] == '1', args[7] == '1'), more)
end

-- What the session holds and waits for (read back after its client missed pushes).
local function describe_session(keys, args)
  local more = begin_session(keys, args)
  local sid = args[1]
  local holds, waits = {}, {}
  for _, f in ipairs(redis.call('HKEYS', B .. 'sh:' .. sid)) do
    local c = string.find(f, ':', 2, true)
    local hold, name = string.sub(f, 2, c - 1), string.sub(f, c + 1)
    if string.sub(f, 1, 1) == 'o' then
      local o = owner(name, sid .. ':' .. hold)
      holds[#holds + 1] = {name, tonumber(hold), o.tok, o.cnt, tostring(o.ttl), o.data}
    else
      local w = waiter(name, sid .. ':' .. hold)
      waits[#waits + 1] = {name, tonumber(hold), tonumber(w.req), w.cnt}
    end
  end
  return reply({holds, waits}, more)
end

local function register(name, fn)
  redis.register_function('tenure_@V@_' .. name, fn)
end

register('create_node', create_node)
register('describe_node', describe_node)
register('alter_node', alter_node)
register('drop_node', drop_node)
register('tick', tick)
register('open_session', open_session)
register('heartbeat', heartbeat)
register('resume_session', resume_session)
register('close_session', close_session)
register('acquire', acquire)
register('withdraw', withdraw)
register('release', release)
register('renew', renew)
register('create_semaphore', create_semaphore)
register('update_semaphore', update_semaphore)
register('delete_semaphore', delete_semaphore)
register('describe_semaphore', describe_semaphore)
register('watch', watch)
register('describe_session', describe_session)
