-- tenure's engine for redis://, part 40 (the parts are one library: see 00_core.lua).

-- -- session functions -----------------------------------------------------------------

-- args: request key, window ('' = the node's), description, inbox, secret, and the
-- client's identity: host, pid, client name.
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
    'sec', args[5], 'epoch', 1, 'host', args[6] or '', 'pid', args[7] or '0',
    'cn', args[8] or '', 'at', fmt(NOW))
  redis.call('ZADD', B .. 'sidz', sid, sid)
  -- A new inbox (or one deleted since) counts its entries from 1 again.
  local fresh = use_inbox(args[4])
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
  -- As the engine's resume: name by name in name order, the session's waits on it
  -- leave, then its queue is served. A set's members are all this session's: its
  -- record goes with them.
  local waits, names = {}, {}
  for _, field in ipairs(redis.call('HKEYS', B .. 'sh:' .. sid)) do
    if string.sub(field, 1, 1) == 'w' then
      local c = string.find(field, ':', 2, true)
      local name = string.sub(field, c + 1)
      if not waits[name] then
        waits[name] = {}
        names[#names + 1] = name
      end
      table.insert(waits[name], sid .. ':' .. string.sub(field, 2, c - 1))
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    for _, holder in ipairs(waits[name]) do
      local w = remove_waiter(name, holder)
      if w and w.set then redis.call('HDEL', B .. 'grp', w.set) end
    end
    touch(name)
    settle(name)
  end
  -- Its watches are dropped (the new owner arms its own).
  for _, name in ipairs(redis.call('HKEYS', B .. 'sw:' .. sid)) do
    redis.call('HDEL', B .. 'wt:' .. name, sid)
  end
  redis.call('DEL', B .. 'sw:' .. sid)
  drop_prefix_watches(sid)
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
    if not redis.call('HGET', B .. 'inref', old) then orphan_inbox(old) end
    fresh = use_inbox(inbox)
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
    -- The tasks that asked were the previous owner's: no task of the new one holds
    -- them (as the engine's resume: no deadlock is found through them).
    redis.call('HSET', B .. 'ow:' .. name, sid .. ':' .. hold, '0:' .. o.cnt)
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
