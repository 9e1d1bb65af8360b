-- tenure's engine for redis://, part 30 (the parts are one library: see 00_core.lua).

-- -- node functions --------------------------------------------------------------------

-- ('mc', max_claims, came with claims, and 'mh', max_hold, with max_hold: a node made
-- before has none, read as '')
local CONFIG_FIELDS = {'st', 'ld', 'dl', 'ms', 'mx', 'mw', 'md', 'mwa', 'mm', 'mc', 'mh', 'name'}

-- The settings, the counts of sessions and semaphores, and the deadlocks broken on
-- the node lately, newest first: {at, session id, task, cycle} each.
local function config_reply()
  local values = redis.call('HMGET', B .. 'cfg', unpack(CONFIG_FIELDS))
  values[#values + 1] = redis.call('ZCARD', B .. 'sess')
  values[#values + 1] = redis.call('SCARD', B .. 'sems')
  local broken = {}
  for _, raw in ipairs(redis.call('LRANGE', B .. 'dlk', 0, -1)) do
    local d = cmsgpack.unpack(raw)
    broken[#broken + 1] = {fmt(d[1]), d[2], d[3], d[4]}
  end
  values[#values + 1] = broken
  return values
end

local function create_node(keys, args)
  start(keys)
  if redis.call('EXISTS', B .. 'cfg') == 1 then
    fail(21, 'node ' .. quote(args[#CONFIG_FIELDS]) .. ' already exists')
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
    if (now[i] or '') ~= args[i] then return reply(0, more) end
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
    redis.call('DEL', B .. 'm:' .. name, B .. 'r:' .. name, B .. 'q:' .. name, B .. 'wt:' .. name,
      B .. 'ow:' .. name, B .. 'ho:' .. name)
  end
  for _, sid in ipairs(sids) do
    push(sid, {'k', 'E', 'code', 10, 'msg', msg})
    redis.call('DEL', B .. 's:' .. sid, B .. 'sh:' .. sid, B .. 'sw:' .. sid, B .. 'spw:' .. sid)
  end
  -- The token and session-id counters ('tok', 'ids') stay: a node made again under
  -- this name keeps counting up. Inboxes stay for their clients to read.
  redis.call('DEL', B .. 'cfg', B .. 'sess', B .. 'due', B .. 'sems', B .. 'semz', B .. 'sidz',
    B .. 'done', B .. 'donez', B .. 'grp', B .. 'pw', B .. 'tw', B .. 'dlk', B .. 'clm',
    B .. 'ended', B .. 'endz', B .. 'inref')
  TOUCHED = {}
  return {fmt(NOW), '', 1}
end

local function tick(keys, args)
  start(keys)
  if redis.call('EXISTS', B .. 'cfg') == 0 then return {fmt(NOW), '', 0} end
  return reply(1, reap())
end
