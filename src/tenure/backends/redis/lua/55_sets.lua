-- tenure's engine for redis://, part 55 (the parts are one library: see 00_core.lua).

-- -- all or none: several semaphores in one step --------------------------------------
-- The engine's AcquireAll (tenure/_core/handlers/sets.py), rule for rule: granted at
-- once if every name can be (nobody waits, the count fits), busy with a timeout of 0,
-- else queued in every name's queue with one arrival number (a set: 10_semaphores.lua
-- serves and withdraws it). The request key answers a retry as the first try was.
-- args: sid, fence, request key, count (hex), data, timeout ('' = forever), ephemeral
-- ('1'/'0'), n, then n times: name, hold, req; then the task ('0' or missing: not
-- known) and the deadlock search's limit (0 or missing: not checked).
local function acquire_all(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local sid, count, data, timeout, eph = args[1], args[4], args[5], args[6], args[7]
  local n = tonumber(args[8])
  local task, limit = args[9 + 3 * n] or '0', tonumber(args[10 + 3 * n] or '0')
  local md = tonumber(cfg_get('md'))
  if #data > md then
    fail(22, 'owner data is ' .. #data .. ' bytes; max_data_size is ' .. md)
  end
  local want = cnt(count)
  local names, holders, reqs, holds = {}, {}, {}, {}
  local missing, at_once = 0, true
  for i = 1, n do
    local name, hold, req = args[6 + 3 * i], args[7 + 3 * i], args[8 + 3 * i]
    local holder = sid .. ':' .. hold
    names[i], holders[i], reqs[i], holds[i] = name, holder, req, hold
    local m = meta(name)
    if not m then
      if eph ~= '1' then
        fail(20, 'semaphore ' .. quote(name) .. ' does not exist (create it or use ephemeral)')
      end
      missing = missing + 1
    else
      if not cle(want, m.lim) then
        fail(22, 'count ' .. cdec(want) .. ' exceeds the limit ' .. cdec(m.lim) .. ' of ' .. quote(name))
      end
      local w, o = records(name, holder)
      if w or o then
        fail(23, 'session ' .. sid .. ' already holds or waits for ' .. quote(name) .. ' as hold ' .. hold)
      end
      if queue_length(name) > 0 or not fits(name, nil, count) then at_once = false end
    end
  end
  if missing > 0 then
    local limit = tonumber(cfg_get('mx'))
    if redis.call('SCARD', B .. 'sems') + missing > limit then
      fail(22, 'max_semaphores (' .. limit .. ') reached on node ' .. node_name())
    end
  end
  if not at_once and timeout ~= '0' then
    local mw = tonumber(cfg_get('mw'))
    for i = 1, n do
      if meta(names[i]) and queue_length(names[i]) >= mw then
        fail(22, 'max_waiters (' .. mw .. ') reached on semaphore ' .. quote(names[i]))
      end
    end
    if task ~= '0' then  -- (one request, in every queue; a name it makes waits for nobody)
      local asked = {}
      for i = 1, n do
        if meta(names[i]) then asked[#asked + 1] = {names[i], holders[i], want} end
      end
      refuse_deadlock(sid, task, asked, nil, limit)
    end
  end
  -- Checked: from here on the request succeeds.
  local result
  if not at_once and timeout == '0' then
    result = {'B'}
  else
    for i = 1, n do
      if not meta(names[i]) then new_semaphore(names[i], 'ffffffffffffffff', '', '1') end
    end
    if at_once then
      result = {'G'}
      local ttl, bounded
      for i = 1, n do
        local tok
        tok, ttl, bounded = grant(names[i], holders[i], count, data, reqs[i], nil, false, task)
        result[#result + 1] = tok
        touch(names[i])
      end
      result[#result + 1] = tostring(ttl)
      -- (the node's max_hold bounds them: '1' after the TTL, as acquire's reply says it)
      if bounded then result[#result + 1] = '1' end
    else
      local seq = cfg_incr('qs', 1)
      local set = tostring(seq)
      local deadline = -1
      if timeout ~= '' then
        deadline = NOW + tonumber(timeout)
        -- One deadline for the set: its first member's (its timeout ends them all).
        due_add(deadline, 'w:' .. holders[1] .. ':' .. names[1])
      end
      local members = {}
      for i = 1, n do
        local name, holder = names[i], holders[i]
        redis.call('ZADD', B .. 'q:' .. name, seq, holder)
        local record = {count, data, reqs[i], deadline, NOW, n > 1 and set, task}
        redis.call('HSET', B .. 'r:' .. name, 'w' .. holder, cmsgpack.pack(record))
        redis.call('HSET', B .. 'sh:' .. sid, 'w' .. holds[i] .. ':' .. name, reqs[i])
        tw_add(sid, task, holds[i], name)
        members[#members + 1] = name
        members[#members + 1] = holder
        touch(name)
      end
      if n > 1 then redis.call('HSET', B .. 'grp', set, cmsgpack.pack(members)) end
      result = {'Q'}
    end
  end
  return reply(remember(args[3], result), more)
end

register('acquire_all', acquire_all)
