-- tenure's engine for redis://, part 20 (the parts are one library: see 00_core.lua).

-- -- sessions ----------------------------------------------------------------------

local function trim(zkey, hkey, keep)
  local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', NOW - keep, 'LIMIT', 0, TRIM_MAX)
  if #old > 0 then
    redis.call('ZREM', zkey, unpack(old))
    redis.call('HDEL', hkey, unpack(old))
  end
end

-- -- inboxes -----------------------------------------------------------------------
-- An inbox (a Stream 'in:<client>' and its sequence counter, a field of 'inseq') is
-- made by the first push to it and lives while a session of its client uses it
-- ('inref' counts them); one whose client's sessions all ended behind its back
-- stays in 'orph' (by when) for that client to read, for at most ENDED_KEEP.

local function drop_inbox(inbox)
  redis.call('HDEL', B .. 'inseq', inbox)
  redis.call('DEL', B .. 'in:' .. inbox)
  redis.call('ZREM', B .. 'orph', inbox)
end

local function orphan_inbox(inbox)
  redis.call('ZADD', B .. 'orph', NOW, inbox)
  local old = redis.call('ZRANGEBYSCORE', B .. 'orph', '-inf', NOW - ENDED_KEEP, 'LIMIT', 0, TRIM_MAX)
  for _, gone in ipairs(old) do
    if not redis.call('HGET', B .. 'inref', gone) then drop_inbox(gone) end
    redis.call('ZREM', B .. 'orph', gone)
  end
end

-- A session of client ``inbox`` starts using its inbox: whether the inbox counts
-- from 1 again (it is new, or was dropped since the client last read it).
local function use_inbox(inbox)
  redis.call('HINCRBY', B .. 'inref', inbox, 1)
  redis.call('ZREM', B .. 'orph', inbox)
  return redis.call('HEXISTS', B .. 'inseq', inbox) == 0
end

-- End a session: every hold released, every wait withdrawn, every watch disarmed;
-- ``failed`` (an expiry) starts lock-delay on what it held. Its client hears why.
local function end_session(sid, code, msg, failed)
  ENDED[sid] = true
  local s = B .. 's:' .. sid
  local holdings = redis.call('HKEYS', B .. 'sh:' .. sid)
  -- The queues are served in the engine's order (its tokens' order): the names waited
  -- for, sorted, then those only held, sorted.
  local waited, held, seen = {}, {}, {}
  for _, f in ipairs(holdings) do
    local kind = string.sub(f, 1, 1)
    local c = string.find(f, ':', 2, true)
    local hold, name = string.sub(f, 2, c - 1), string.sub(f, c + 1)
    local holder = sid .. ':' .. hold
    if kind == 'w' then
      local w = remove_waiter(name, holder)
      -- (a set's every member is this session's: each leaves here)
      if w and w.set then redis.call('HDEL', B .. 'grp', w.set) end
      if not seen[name] or seen[name] == 'o' then waited[#waited + 1] = name end
      seen[name] = 'w'
    else
      remove_owner(name, holder)
      if failed then start_lock_delay(name) end
      if not seen[name] then
        held[#held + 1] = name
        seen[name] = 'o'
      end
    end
    touch(name)
  end
  for _, name in ipairs(redis.call('HKEYS', B .. 'sw:' .. sid)) do
    redis.call('HDEL', B .. 'wt:' .. name, sid)
  end
  drop_prefix_watches(sid)
  if code ~= 0 then
    push(sid, {'k', 'E', 'code', code, 'msg', msg})
    redis.call('HSET', B .. 'ended', sid, code .. ' ' .. msg)
    redis.call('ZADD', B .. 'endz', NOW, sid)
    trim(B .. 'endz', B .. 'ended', ENDED_KEEP)
  end
  local inbox = redis.call('HGET', s, 'inbox')
  if inbox and redis.call('HINCRBY', B .. 'inref', inbox, -1) <= 0 then
    -- The client's last session here ended: nothing more is pushed to its inbox.
    redis.call('HDEL', B .. 'inref', inbox)
    if code == 0 then
      -- Closed by its client, which knows: the inbox goes (and counts from 1 again
      -- if the client opens another session).
      drop_inbox(inbox)
    else
      -- Ended behind its client's back (an expiry): the push above is how a client
      -- that is alive but whose timers stalled (a paused loop, a clock that jumped)
      -- learns it while its code still runs; deleting the inbox now would delete
      -- that news unread. It stays, as an orphan, until the client opens another
      -- session here or it is older than ENDED_KEEP (a dead client's).
      orphan_inbox(inbox)
    end
  end
  redis.call('DEL', s, B .. 'sh:' .. sid, B .. 'sw:' .. sid)
  redis.call('ZREM', B .. 'sess', sid)
  redis.call('ZREM', B .. 'sidz', sid)
  redis.call('ZREM', B .. 'due', 's:' .. sid)
  table.sort(waited)
  table.sort(held)
  for _, name in ipairs(waited) do settle(name) end
  for _, name in ipairs(held) do
    if seen[name] == 'o' then settle(name) end
  end
end

local LAST_RELEASE  -- the session's last release: "<request key> <result>"

local function check_session(sid, fence)
  local f = redis.call('HMGET', B .. 's:' .. sid, 'sec', 'epoch', 'inbox', 'lr')
  CALLER_INBOX, LAST_RELEASE = f[3], f[4]
  if not f[1] then
    if redis.call('EXISTS', B .. 'cfg') == 0 then
      fail(10, 'node was dropped (or Redis lost its data: a restart without persistence, a flush)')
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
      withdraw_set(w, 25, 'timed out waiting for ' .. quote(name))
      settle(name)
    end
  elseif kind == 'l' then
    local holder, name = parse_due(rest)
    local o = owner(name, holder)
    if o and o.dl >= 0 and o.dl <= NOW then
      remove_owner(name, holder)
      local sid, hold = split_holder(holder)
      local why = ' expired without renewal'
      if o.ends > 0 and o.ends <= NOW then why = ' ended: held for its max_hold' end
      push(sid, {'k', 'L', 'name', name, 'hold', hold, 'tok', o.tok, 'code', 12,
        'msg', 'lease on ' .. quote(name) .. why})
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
  elseif kind == 'c' then
    claim_due(rest)
  end
end

-- Expire what is due (at most REAP_MAX entries); true if more may be due.
local function reap()
  -- Mostly nothing is due: one read of the first entry says so, and when the next is.
  local head = redis.call('ZRANGE', B .. 'due', '0', '0', 'WITHSCORES')
  if #head == 0 then return false end
  local when = tonumber(head[2])
  if when > NOW then
    if not NEXT or when < NEXT then NEXT, NEXT_S = when, head[2] end
    return false
  end
  local due = redis.call('ZRANGEBYSCORE', B .. 'due', '-inf', NOW, 'LIMIT', 0, REAP_MAX)
  for _, member in ipairs(due) do
    redis.call('ZREM', B .. 'due', member)
    on_due(member)
  end
  head = redis.call('ZRANGE', B .. 'due', '0', '0', 'WITHSCORES')
  if #head > 0 then
    when = tonumber(head[2])
    if not NEXT or when < NEXT then NEXT, NEXT_S = when, head[2] end
  end
  return #due == REAP_MAX
end

-- -- replies, and answers kept for retries -------------------------------------------------

local function reply(result, more)
  fire_watches()
  local nxt = ''
  if more then nxt = NOW_S elseif NEXT then nxt = NEXT_S or fmt(NEXT) end
  return {NOW_S, nxt, result, LOCAL}
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
