-- tenure's engine for redis://, part 10 (the parts are one library: see 00_core.lua).

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
  -- {count hex, data, token, ttl, deadline, req, granted at, ends}; a record written by
  -- a library before grant times were kept has no 7th field (at = nil: not known), one
  -- before max_hold no 8th (ends = -1: no bound). ``ends``: when the grant ends
  -- whatever its session does (its max_hold; the lease's deadline is never after it).
  local o = cmsgpack.unpack(raw)
  return {cnt = o[1], data = o[2], tok = o[3], ttl = o[4], dl = o[5], req = o[6], at = o[7],
    ends = o[8] or -1}
end

local function owner(name, holder)
  return decode_owner(redis.call('HGET', B .. 'r:' .. name, 'o' .. holder))
end


local function decode_waiter(raw)
  if not raw then return nil end
  -- {count hex, data, req, deadline, queued at (or nil), set (its all-or-none set's
  -- arrival, as text; nil or false: of no set),
  -- task (text; nil: '0', not known: written by a library before tasks were kept),
  -- max_hold (seconds; nil or -1: none of its own)}
  local w = cmsgpack.unpack(raw)
  return {cnt = w[1], data = w[2], req = w[3], dl = w[4], at = w[5], set = w[6] or nil,
    task = w[7] or '0', mh = w[8] or -1}
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
      list[#list + 1] = {string.sub(flat[i], 2),
        {cnt = o[1], data = o[2], tok = o[3], ttl = o[4], at = o[7]}}
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

-- Whether ``count`` tokens fit for a holder whose hold is ``o`` (nil: none).
local function fits(name, o, count)
  local m = meta(name)
  if NOW < m.blk then return false end
  local rest = m.cnt
  if o then rest = csub(rest, cnt(o.cnt)) end
  return cle(cadd(rest, cnt(count)), m.lim)
end

local function queue_length(name)
  return redis.call('ZCARD', B .. 'q:' .. name)
end

-- -- who asks: the client's task numbers (deadlock detection, lua/45_deadlocks.lua) ----
-- 'ow:<name>' has each owner of ``name``: holder -> '<task>:<count hex>' (what a search
-- reads without the queue); 'tw' has each known task's waits: '<sid>:<task>' -> the
-- msgpack list of its '<hold>:<name>'. A task is text ('0': not known, not kept).

local function tw_add(sid, task, hold, name)
  if task == '0' then return end
  local field = sid .. ':' .. task
  local raw = redis.call('HGET', B .. 'tw', field)
  local places = raw and cmsgpack.unpack(raw) or {}
  places[#places + 1] = hold .. ':' .. name
  redis.call('HSET', B .. 'tw', field, cmsgpack.pack(places))
end

local function tw_remove(sid, task, hold, name)
  if task == '0' then return end
  local field = sid .. ':' .. task
  local raw = redis.call('HGET', B .. 'tw', field)
  if not raw then return end
  local place, left = hold .. ':' .. name, {}
  for _, p in ipairs(cmsgpack.unpack(raw)) do
    if p ~= place then left[#left + 1] = p end
  end
  if #left == 0 then
    redis.call('HDEL', B .. 'tw', field)
  else
    redis.call('HSET', B .. 'tw', field, cmsgpack.pack(left))
  end
end

-- The task of ``holder``'s hold on ``name`` ('0': none kept).
local function owner_task(name, holder)
  local v = redis.call('HGET', B .. 'ow:' .. name, holder)
  if not v then return '0' end
  return string.sub(v, 1, string.find(v, ':', 1, true) - 1)
end

local function remove_owner(name, holder, known)
  local o = known or owner(name, holder)
  if not o then return nil end
  local sid, hold = split_holder(holder)
  redis.call('HDEL', B .. 'r:' .. name, 'o' .. holder)
  redis.call('HDEL', B .. 'ow:' .. name, holder)
  redis.call('HDEL', B .. 'ho:' .. name, holder)  -- (its hand-off's offer: lua/75)
  redis.call('HDEL', B .. 'sh:' .. sid, 'o' .. hold .. ':' .. name)
  if o.dl >= 0 then redis.call('ZREM', B .. 'due', 'l:' .. holder .. ':' .. name) end
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
  tw_remove(sid, w.task, hold, name)
  if w.dl >= 0 then redis.call('ZREM', B .. 'due', 'w:' .. holder .. ':' .. name) end
  return w
end

-- Give ``count`` tokens to ``holder`` with the next fencing token, replacing its
-- hold ``old`` (nil: none; the caller has read it already). ``counted``: the
-- semaphore was made with this grant's count (new_semaphore), nothing to add.
-- ``task``: the client's number of the task that asked ('0' or nil: not known).
-- ``mh``: its max_hold (nil or -1: none of its own): the grant ends at the earlier of
-- it and the node's ``max_hold`` after now, and never after the end of the hold it
-- replaces (an upgrade); its lease's deadline never after that end (the engine's
-- rule, tenure/_core/shared_steps.py, grant). Returns the token, the TTL, and
-- whether the grant has such an end.
local function grant(name, holder, count, data, req, old, counted, task, mh, keep)
  local rest = meta(name).cnt
  if old then rest = csub(rest, cnt(old.cnt)) end
  -- The counter is its own key, which dropping the node keeps: tokens of a node
  -- made again keep increasing.
  local tok = redis.call('INCR', B .. 'tok')
  local ttl = tonumber(cfg_get('dl') or '') or -1
  local bound = tonumber(cfg_get('mh') or '') or -1
  mh = tonumber(mh or -1) or -1
  if mh > 0 and (bound <= 0 or mh < bound) then bound = mh end
  local ends = -1
  if bound > 0 then ends = NOW + bound end
  if old and old.ends > 0 and (ends < 0 or old.ends < ends) then ends = old.ends end
  -- ``keep``: the end of the hold a hand-off moves here (lua/75), never extended.
  if keep and keep > 0 and (ends < 0 or keep < ends) then ends = keep end
  local deadline = -1
  local sid, hold = split_holder(holder)
  if ttl > 0 then deadline = NOW + ttl end
  if ends > 0 and (deadline < 0 or ends < deadline) then deadline = ends end
  if deadline >= 0 then
    due_add(deadline, 'l:' .. holder .. ':' .. name)
  elseif old and old.dl >= 0 then
    redis.call('ZREM', B .. 'due', 'l:' .. holder .. ':' .. name)
  end
  if old then redis.call('HDEL', B .. 'ho:' .. name, holder) end  -- (a new token: lua/75)
  redis.call('HSET', B .. 'r:' .. name, 'o' .. holder,
    cmsgpack.pack({count, data, tok, ttl, deadline, req, NOW, ends}))
  -- Only the field's name is ever read (HKEYS): its value need not be the token.
  redis.call('HSET', B .. 'sh:' .. sid, 'o' .. hold .. ':' .. name, '1')
  redis.call('HSET', B .. 'ow:' .. name, holder, (task or '0') .. ':' .. count)
  if not counted then set_count(name, cadd(rest, cnt(count))) end
  return tok, ttl, ends > 0
end

local function delete_semaphore_keys(name)
  redis.call('DEL', B .. 'm:' .. name, B .. 'r:' .. name, B .. 'q:' .. name, B .. 'ow:' .. name,
    B .. 'ho:' .. name)
  redis.call('SREM', B .. 'sems', name)
  redis.call('ZREM', B .. 'semz', name)
  if meta(name).blk > 0 then redis.call('ZREM', B .. 'due', 'd:' .. name) end
  META[name] = false
end

-- -- sets: all-or-none requests (made by acquire_all, lua/55_sets.lua) ----------------
-- A set's members wait in their queues with one arrival number (their score in
-- each queue, and ``set`` in each waiter record); the node's hash 'grp' maps it to
-- the members, {name1, holder1, name2, holder2, ...} ('grp': the sets' old name, kept
-- for the data stored under it). A member is granted only with the others
-- (settle), and leaves its queue only with them (withdraw_set): the engine's rule
-- (tenure/_core/state.py, settle and withdraw_set).

local function set_members(set)
  local raw = redis.call('HGET', B .. 'grp', set)
  if not raw then return nil end
  return cmsgpack.unpack(raw)
end

-- The set's members, each {name, holder, waiter, hold}, if each heads its queue
-- and fits there (all may then be granted at once); else nil.
local function ready_set(members)
  local ready = {}
  for i = 1, #members, 2 do
    local name, holder = members[i], members[i + 1]
    local head = redis.call('ZRANGE', B .. 'q:' .. name, '0', '0')
    if #head == 0 or head[1] ~= holder then return nil end
    local w, o = records(name, holder)
    if not fits(name, o, w.cnt) then return nil end
    ready[#ready + 1] = {name, holder, w, o}
  end
  return ready
end

-- Grant the queued request ``w`` of ``holder`` (its hold ``o``) and tell its session.
local function grant_waiter(name, holder, w, o)
  remove_waiter(name, holder, w)
  local tok, ttl, bounded = grant(name, holder, w.cnt, w.data, w.req, o, false, w.task, w.mh)
  local sid, hold = split_holder(holder)
  local pushed = {'k', 'G', 'name', name, 'hold', hold, 'req', w.req, 'tok', tok, 'cnt', w.cnt,
    'ttl', ttl}
  if bounded then
    pushed[#pushed + 1] = 'b'  -- (the grant has an end: its session waits for deadlines)
    pushed[#pushed + 1] = '1'
  end
  push(sid, pushed)
  touch(name)
end

-- Serve the queue from its head while the head fits (strict FIFO, no barging), then
-- drop an idle ephemeral semaphore. A head that is a set's member goes only if
-- every member heads its queue and fits: then all go at once, and their queues are
-- served in turn; else it holds back its queue as any head does.
local function settle(name)
  local m = meta(name)
  if not m then return end
  local drained = false
  local others = {}
  while true do
    local head = redis.call('ZRANGE', B .. 'q:' .. name, '0', '0')
    if #head == 0 then
      drained = true
      break
    end
    local holder = head[1]
    local w, o = records(name, holder)
    if not fits(name, o, w.cnt) then break end
    local members = w.set and set_members(w.set)
    if members then
      local ready = ready_set(members)
      if not ready then break end
      redis.call('HDEL', B .. 'grp', w.set)
      for _, r in ipairs(ready) do
        grant_waiter(r[1], r[2], r[3], r[4])
        if r[1] ~= name then others[#others + 1] = r[1] end
      end
    else
      grant_waiter(name, holder, w, o)
    end
  end
  m = meta(name)
  if drained and m.eph and NOW >= m.blk and m.cnt[1] == 0 and m.cnt[2] == 0 then
    delete_semaphore_keys(name)
    touch(name)
  end
  for _, other in ipairs(others) do settle(other) end
end

-- ``w`` (a waiter record) has left its queue: if it was a set's member, the others
-- leave theirs too, each told AcquireFailed(``code``, ``msg``), and their queues are
-- served.
local function withdraw_set(w, code, msg)
  if not w or not w.set then return end
  local members = set_members(w.set)
  if not members then return end
  redis.call('HDEL', B .. 'grp', w.set)
  -- Every member leaves before any queue is served (as the engine's withdraw_set).
  local left = {}
  for i = 1, #members, 2 do
    local name, holder = members[i], members[i + 1]
    local other = waiter(name, holder)
    if other and other.set == w.set then
      remove_waiter(name, holder, other)
      local sid, hold = split_holder(holder)
      push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', other.req, 'code', code, 'msg', msg})
      touch(name)
      left[#left + 1] = name
    end
  end
  for _, name in ipairs(left) do settle(name) end
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

-- A new semaphore; ``held`` (hex, or nil: none) is the count of the grant that
-- makes it (an ephemeral one), written with it rather than after it.
local function new_semaphore(name, lim, data, eph, held)
  held = held or ZERO
  redis.call('HSET', B .. 'm:' .. name, 'lim', lim, 'cnt', held, 'blk', '0', 'eph', eph, 'data', data)
  META[name] = {lim = cnt(lim), cnt = cnt(held), blk = 0, eph = eph == '1', data = data}
  redis.call('SADD', B .. 'sems', name)
  redis.call('ZADD', B .. 'semz', '0', name)
  touch(name)
end
