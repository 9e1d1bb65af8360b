-- tenure's engine for redis://, part 57 (the parts are one library: see 00_core.lua).

-- -- prefix watches --------------------------------------------------------------------
--
-- A prefix watch is a field of the node's 'pw' hash, '<sid>:<wid>' -> the prefix, and
-- a member of the session's 'spw:<sid>' set; it counts in the session's 'nw' with its
-- single watches (max_watches_per_session). fire_watches (00_core.lua) pushes a P
-- with the name and <wid> for every touched name under it. <wid> is the client's (a
-- request id of the session: unique across its owners), so the client knows where a
-- push goes before its arming is answered, and a retried arming finds itself armed.

-- Arm the prefix watch <wid>. args: sid, fence, request key, wid, prefix, and the most
-- prefix watches the node may have (max_prefix_watches_per_node, the client's: every
-- call of the node that changes a name compares it with each of them, inside Redis;
-- absent from an older client: not checked).
local function watch_prefix(keys, args)
  local more = begin_session(keys, args)
  local sid, wid, prefix, per_node = args[1], args[4], args[5], tonumber(args[6])
  if redis.call('SISMEMBER', B .. 'spw:' .. sid, wid) == 1 then
    return reply(1, more)  -- a retry: armed already
  end
  local s = B .. 's:' .. sid
  local limit = tonumber(cfg_get('mwa'))
  if tonumber(redis.call('HGET', s, 'nw') or '0') >= limit then
    fail(22, 'max_watches_per_session (' .. limit .. ') reached')
  end
  if per_node and redis.call('HLEN', B .. 'pw') >= per_node then
    fail(22, 'max_prefix_watches_per_node (' .. per_node .. ') reached on node ' .. node_name())
  end
  redis.call('HINCRBY', s, 'nw', 1)
  redis.call('SADD', B .. 'spw:' .. sid, wid)
  redis.call('HSET', B .. 'pw', sid .. ':' .. wid, prefix)
  return reply(1, more)
end

-- Disarm the prefix watch <wid>; whether it was armed. args: sid, fence, request key, wid.
local function unwatch_prefix(keys, args)
  local more = begin_session(keys, args)
  local sid, wid = args[1], args[4]
  if redis.call('SREM', B .. 'spw:' .. sid, wid) == 0 then
    return reply(0, more)
  end
  redis.call('HDEL', B .. 'pw', sid .. ':' .. wid)
  redis.call('HINCRBY', B .. 's:' .. sid, 'nw', -1)
  return reply(1, more)
end

register('watch_prefix', watch_prefix)
register('unwatch_prefix', unwatch_prefix)
