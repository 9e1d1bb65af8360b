-- tenure's engine for redis://, part 60 (the parts are one library: see 00_core.lua).

-- -- listings and kill_session -----------------------------------------------------------
-- Two sorted indexes serve the paged listings: 'semz' (every semaphore name, score 0,
-- so ZRANGEBYLEX walks them in byte order, which is code point order for UTF-8) and
-- 'sidz' (every live session id, scored by itself). A node made by a library that
-- kept neither (an upgrade), or changed by one since, is found by its counts
-- differing from 'sems' and 'sess', and its index is made again from them at once.

local INDEX_BATCH = 1000  -- members added per ZADD when an index is made again

local function rebuild(index, members, score_of)
  redis.call('DEL', index)
  for i = 1, #members, INDEX_BATCH do
    local args = {'ZADD', index}
    for j = i, math.min(i + INDEX_BATCH - 1, #members) do
      args[#args + 1] = score_of(members[j])
      args[#args + 1] = members[j]
    end
    redis.call(unpack(args))
  end
end

local function semaphore_index()
  if redis.call('ZCARD', B .. 'semz') ~= redis.call('SCARD', B .. 'sems') then
    rebuild(B .. 'semz', redis.call('SMEMBERS', B .. 'sems'), function() return 0 end)
  end
end

local function session_index()
  if redis.call('ZCARD', B .. 'sidz') ~= redis.call('ZCARD', B .. 'sess') then
    rebuild(B .. 'sidz', redis.call('ZRANGE', B .. 'sess', 0, -1), function(sid) return sid end)
  end
end

-- args: prefix, the range's low and high ends as ZRANGEBYLEX takes them (the client
-- works them out: Lua compares strings by the server's locale), limit. Each entry:
-- name, limit (hex), count (hex), owners, waiters, ephemeral (1/0).
local function list_semaphores(keys, args)
  local more = begin(keys)
  semaphore_index()
  local prefix, low, high, limit = args[1], args[2], args[3], tonumber(args[4])
  local page = {}
  for _, name in ipairs(redis.call('ZRANGEBYLEX', B .. 'semz', low, high, 'LIMIT', 0, limit)) do
    local m = meta(name)
    if m and string.sub(name, 1, #prefix) == prefix then
      local waiting = redis.call('ZCARD', B .. 'q:' .. name)
      local owning = redis.call('HLEN', B .. 'r:' .. name) - waiting
      local eph = 0
      if m.eph then eph = 1 end
      page[#page + 1] = {name, chex(m.lim), chex(m.cnt), owning, waiting, eph}
    end
  end
  return reply(page, more)
end

-- args: after (a session id; 0 = from the first), limit. Each entry: id, description,
-- host, pid, client name, window, created at ('' = not known), seconds until Redis
-- ends it if its client stays silent, holds, waits.
local function list_sessions(keys, args)
  local more = begin(keys)
  session_index()
  local page = {}
  local sids = redis.call('ZRANGEBYSCORE', B .. 'sidz', '(' .. args[1], '+inf',
    'LIMIT', 0, tonumber(args[2]))
  for _, sid in ipairs(sids) do
    local f = redis.call('HMGET', B .. 's:' .. sid, 'desc', 'host', 'pid', 'cn', 'win', 'at')
    local deadline = tonumber(redis.call('ZSCORE', B .. 'sess', sid) or '')
    if f[5] and deadline and deadline >= NOW then  -- due but not reaped yet: not live
      local holds, waits = 0, 0
      for _, field in ipairs(redis.call('HKEYS', B .. 'sh:' .. sid)) do
        if string.sub(field, 1, 1) == 'o' then holds = holds + 1 else waits = waits + 1 end
      end
      page[#page + 1] = {tonumber(sid), f[1] or '', f[2] or '', f[3] or '0', f[4] or '', f[5],
        f[6] or '', fmt(deadline - NOW), holds, waits}
    end
  end
  return reply(page, more)
end

-- An operator ends a live session as its expiry would (lock-delay included); its
-- client hears SessionExpiredError saying so. args: session id, request key.
local function kill_session(keys, args)
  local more = begin(keys)
  local sid = args[1]
  -- A retry of a kill whose answer was lost is answered as its first try was.
  local done = recall(args[2])
  if done then return reply(done, more) end
  if redis.call('EXISTS', B .. 's:' .. sid) == 0 then
    fail(20, 'session ' .. sid .. ' of node ' .. node_name() .. ' does not exist (it ended, '
      .. 'or never was)')
  end
  local held = {}
  for _, field in ipairs(redis.call('HKEYS', B .. 'sh:' .. sid)) do
    if string.sub(field, 1, 1) == 'o' then
      held[#held + 1] = string.sub(field, string.find(field, ':', 2, true) + 1)
    end
  end
  end_session(sid, 11, 'session ' .. sid .. ' was ended by an operator (kill_session)', true)
  -- An expiry is found by a tick its waiters' clients armed at the session's deadline;
  -- a kill is not, so the waiters held back by lock-delay are told when it ends
  -- (their clients tick then).
  for _, name in ipairs(held) do
    local m = meta(name)
    if m and m.blk > NOW then
      for _, holder in ipairs(redis.call('ZRANGE', B .. 'q:' .. name, 0, -1)) do
        push(split_holder(holder), {'k', 'T', 'at', fmt(m.blk)})
      end
    end
  end
  return reply(remember(args[2], 1), more)
end

register('list_semaphores', list_semaphores)
register('list_sessions', list_sessions)
register('kill_session', kill_session)
