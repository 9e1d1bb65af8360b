-- tenure's engine for redis://, part 50 (the parts are one library: see 00_core.lua).

-- The reply of a grant: {'G', token, TTL} and, for a grant that has an end (its
-- max_hold), '1' after them.
local function granted(tok, ttl, bounded)
  if bounded then return {'G', tok, tostring(ttl), '1'} end
  return {'G', tok, tostring(ttl)}
end

-- args: sid, fence, request key, name, hold, req, count (hex), data, timeout ('' =
-- forever), ephemeral ('1'/'0'), task ('0' or missing: not known), the deadlock
-- search's limit (0 or missing: not checked), and max_hold (seconds; '' or missing:
-- none of its own).
local function acquire(keys, args)
  local more = begin_session(keys, args)
  local sid, name, hold, req, count, data, timeout, eph =
    args[1], args[4], args[5], args[6], args[7], args[8], args[9], args[10]
  local task, limit = args[11] or '0', tonumber(args[12] or '0')
  local mh = tonumber(args[13] or '') or -1
  local holder = sid .. ':' .. hold
  local m = meta(name)
  local w, o = nil, nil
  if m then
    w, o = records(name, holder)
    -- A retry of this very request (its answer was lost): answer as the first try.
    if w and tostring(w.req) == req then return reply({'Q'}, more) end
    if o and tostring(o.req) == req then return reply(granted(o.tok, o.ttl, o.ends > 0), more) end
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
    if task ~= '0' and timeout ~= '0' then
      -- Would it wait, once its hold's earlier request is superseded? Then: a deadlock?
      local ahead = queued
      if w then ahead = ahead - 1 end
      local at_once = (o and cle(want, cnt(o.cnt))) or (ahead == 0 and NOW >= m.blk and
        cle(cadd(o and csub(m.cnt, cnt(o.cnt)) or m.cnt, want), m.lim))
      if not at_once then
        local replaced = w and (hold .. ':' .. name) or nil
        refuse_deadlock(sid, task, {{name, holder, want}}, replaced, limit)
      end
    end
  end
  -- Checked: from here on the request succeeds.
  if not m then
    -- A new ephemeral semaphore is granted at once (nobody holds or waits): made
    -- with the grant's count, so its meta is written once.
    new_semaphore(name, 'ffffffffffffffff', '', '1', count)
    return reply(granted(grant(name, holder, count, data, req, nil, true, task, mh)), more)
  end
  if w then
    remove_waiter(name, holder, w)
    queued = queued - 1
    push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 26,
      'msg', 'superseded by a newer acquire'})
    touch(name)
    withdraw_set(w, 26, 'superseded by a newer acquire')
  end
  local result
  if grantable() then
    if o and cle(want, cnt(o.cnt)) then
      -- Shrink or restate in place: same grant, same token, same place in grant order.
      redis.call('HSET', B .. 'r:' .. name, 'o' .. holder,
        cmsgpack.pack({count, data, o.tok, o.ttl, o.dl, o.req, o.at, o.ends}))
      -- (the same grant: asked for by the task that asked then)
      redis.call('HSET', B .. 'ow:' .. name, holder, owner_task(name, holder) .. ':' .. count)
      set_count(name, cadd(csub(m.cnt, cnt(o.cnt)), want))
      if o.cnt ~= count or o.data ~= data then touch(name) end
      result = granted(o.tok, o.ttl, o.ends > 0)
    else
      result = granted(grant(name, holder, count, data, req, o, false, task, mh))
      touch(name)
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
    redis.call('HSET', B .. 'r:' .. name, 'w' .. holder,
      cmsgpack.pack({count, data, req, deadline, NOW, false, task, mh}))
    redis.call('HSET', B .. 'sh:' .. sid, 'w' .. hold .. ':' .. name, req)
    tw_add(sid, task, hold, name)
    touch(name)
    result = {'Q'}
  end
  -- The queue's head did not fit before this call (every change serves it). Only a
  -- superseded wait (the head may go) or a shrink in place (tokens freed) can let
  -- it fit now; a request queued or refused behind it changes neither.
  if w or (queued > 0 and result[1] == 'G') then settle(name) end
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
    remove_waiter(name, holder, w)
    withdraw_set(w, 26, 'acquire cancelled')
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

-- A release's answer is kept in its session's record (the last one only: a hash
-- field, not an entry of 'done'): a retry of the session's latest release is
-- answered as its first try was.
local function remember_release(sid, rk, result)
  if rk ~= '' then
    local text = ' 0'
    if result == 1 then text = ' 1' end
    redis.call('HSET', B .. 's:' .. sid, 'lr', rk .. text)
  end
  return result
end

-- args: sid, fence, request key, name, hold.
local function release(keys, args)
  start(keys)
  local sid, rk, name, hold = args[1], args[3], args[4], args[5]
  check_session(sid, args[2])
  local more = reap()
  if ENDED[sid] then check_session(sid, args[2]) end
  if LAST_RELEASE and rk ~= '' and string.sub(LAST_RELEASE, 1, #rk + 1) == rk .. ' ' then
    return reply(tonumber(string.sub(LAST_RELEASE, #rk + 2)), more)
  end
  local m = meta(name)
  if not m then return reply(remember_release(sid, rk, 0), more) end
  local holder = sid .. ':' .. hold
  local w, o = records(name, holder)
  if o and not w and m.eph and NOW >= m.blk then
    local rest = csub(m.cnt, cnt(o.cnt))
    if rest[1] == 0 and rest[2] == 0 and queue_length(name) == 0 then
      -- The common release: the last hold of an ephemeral semaphore nobody waits
      -- for. The semaphore goes with it (what settle would do after remove_owner),
      -- without writing its owner and count first.
      redis.call('HDEL', B .. 'sh:' .. sid, 'o' .. hold .. ':' .. name)
      if o.dl >= 0 then redis.call('ZREM', B .. 'due', 'l:' .. holder .. ':' .. name) end
      delete_semaphore_keys(name)
      touch(name)
      return reply(remember_release(sid, rk, 1), more)
    end
  end
  if w then
    remove_waiter(name, holder, w)
    push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 26,
      'msg', 'released while waiting'})
    withdraw_set(w, 26, 'released while waiting')
  end
  if o then remove_owner(name, holder, o) end
  local result = 0
  if o or w then
    result = 1
    touch(name)
  end
  settle(name)
  return reply(remember_release(sid, rk, result), more)
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
  -- A max_hold: no renewal takes the lease past its end.
  if o.ends > 0 and o.ends < deadline then deadline = o.ends end
  redis.call('HSET', B .. 'r:' .. name, 'o' .. holder,
    cmsgpack.pack({o.cnt, o.data, o.tok, o.ttl, deadline, o.req, o.at, o.ends}))
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

-- The request key answers a retry as the first try was answered: an update applied,
-- then overwritten by another client's, must not be applied again when its answer was
-- lost and it is sent again.
-- args: sid, fence, request key, name, data.
local function update_semaphore(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
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
  return reply(remember(args[3], 1), more)
end

-- Compare and swap: the data replaced only if it is `expected` now; 1 if it was, else
-- 0. The request key answers a retry as the first try was answered (a swap that
-- happened must not be told 0 when its answer was lost and it is asked again).
-- args: sid, fence, request key, name, expected, data.
local function swap_semaphore_data(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local name, expected, data = args[4], args[5], args[6]
  local m = meta(name)
  if not m then fail(20, 'semaphore ' .. quote(name) .. ' does not exist') end
  local md = tonumber(cfg_get('md'))
  if #data > md then
    fail(22, 'semaphore data is ' .. #data .. ' bytes; max_data_size is ' .. md)
  end
  if m.data ~= expected then return reply(remember(args[3], 0), more) end
  if m.data ~= data then
    redis.call('HSET', B .. 'm:' .. name, 'data', data)
    m.data = data
    touch(name)
  end
  return reply(remember(args[3], 1), more)
end

-- A rate limiter's reservation: tenure._core.rates restated (GCRA over the bucket
-- 'limiter RATE BURST TAT' in the semaphore's data), on Redis's clock (NOW, UNIX
-- seconds). The reply is text, 'GRANTED WAIT AT' (a Lua number would reach the
-- client as an integer); the request key answers a retry as the first try was.
-- args: sid, fence, request key, name, count, max wait ('': no limit).
local function finite(x)
  return x ~= nil and x == x and x ~= math.huge and x ~= -math.huge
end

local function g17(x)
  return string.format('%.17g', x)
end

local function reserve_units(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local name, count, max_wait = args[4], tonumber(args[5]), args[6]
  local m = meta(name)
  if not m then fail(20, 'semaphore ' .. quote(name) .. ' does not exist') end
  local rate_s, burst_s, tat_s = string.match(m.data, '^limiter (%S+) (%S+) (%S+)$')
  local rate, burst, tat = tonumber(rate_s), tonumber(burst_s), tonumber(tat_s)
  if not (finite(rate) and finite(burst) and finite(tat) and rate > 0 and burst > 0
      and rate <= 1e15 and burst <= 1e15) then
    fail(23, 'semaphore ' .. quote(name) ..
      " is not a rate limiter (its data is not 'limiter RATE BURST TAT')")
  end
  if count > burst then
    fail(22, string.format('%g', count) .. ' units exceed the burst ' ..
      string.format('%g', burst) .. ' of rate limiter ' .. quote(name))
  end
  local new_tat = math.max(tat, NOW) + count / rate
  local at = math.max(new_tat - burst / rate, NOW)
  local wait = at - NOW
  local granted = '0'
  if max_wait == '' or wait <= tonumber(max_wait) then
    granted = '1'
    local data = 'limiter ' .. rate_s .. ' ' .. burst_s .. ' ' .. g17(new_tat)
    redis.call('HSET', B .. 'm:' .. name, 'data', data)
    m.data = data
    touch(name)
  end
  return reply(remember(args[3], granted .. ' ' .. g17(wait) .. ' ' .. g17(at)), more)
end

-- Delete ``name`` as a forced delete does: its waiters fail with NotFound and its
-- owners lose their grants, each told ``msg``. Returns what the caller's client hears
-- in the answer too, at once: {sid, hold, req} of each failed waiter, {sid, hold,
-- token} of each lost grant.
local function remove_semaphore(name, msg)
  local owners = {}
  for _, pair in ipairs(owners_in_order(name)) do owners[#owners + 1] = pair[1] end
  local waiters = redis.call('ZRANGE', B .. 'q:' .. name, 0, -1)
  local failed, lost, left = {}, {}, {}
  for i, holder in ipairs(waiters) do
    local w = remove_waiter(name, holder)
    local sid, hold = split_holder(holder)
    push(sid, {'k', 'F', 'name', name, 'hold', hold, 'req', w.req, 'code', 20, 'msg', msg})
    failed[i], left[i] = {tonumber(sid), tonumber(hold), tonumber(w.req)}, w
  end
  -- Every waiter is out before a set is withdrawn: its withdrawal serves the other
  -- queues, which could else grant a set still waiting here (and gone next).
  for _, w in ipairs(left) do withdraw_set(w, 20, msg) end
  for _, holder in ipairs(owners) do
    local o = remove_owner(name, holder)
    local sid, hold = split_holder(holder)
    push(sid, {'k', 'L', 'name', name, 'hold', hold, 'tok', o.tok, 'code', 12, 'msg', msg})
    lost[#lost + 1] = {tonumber(sid), tonumber(hold), o.tok}
  end
  delete_semaphore_keys(name)
  touch(name)
  return failed, lost
end

-- args: sid, fence, request key, name, force ('1'/'0').
local function delete_semaphore(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local name = args[4]
  if not meta(name) then fail(20, 'semaphore ' .. quote(name) .. ' does not exist') end
  local owners = redis.call('HLEN', B .. 'r:' .. name)
  local waiters = redis.call('ZCARD', B .. 'q:' .. name)
  if owners > 0 and args[5] ~= '1' then
    -- (its record hash holds owners and waiters: count the owners alone)
    owners = #owners_in_order(name)
  end
  if (owners > 0 or waiters > 0) and args[5] ~= '1' then
    fail(23, 'semaphore ' .. quote(name) .. ' has ' .. owners .. ' owner(s) and ' .. waiters
      .. ' waiter(s); use force=True')
  end
  local msg = 'semaphore ' .. quote(name) .. ' was deleted'
  local failed, lost = remove_semaphore(name, msg)
  -- A claim's semaphore deleted: the claim is over (lua/70_claims.lua).
  if redis.call('HDEL', B .. 'clm', name) == 1 then
    redis.call('ZREM', B .. 'due', 'c:' .. name)
  end
  return reply(remember(args[3], {msg, failed, lost}), more)
end

-- Who a session is, for owners and waiters: {description, host, pid, client name}
-- (a session opened by a library before identities were kept has none: '').
local function who(sid, seen)
  local found = seen[sid]
  if not found then
    found = redis.call('HMGET', B .. 's:' .. sid, 'desc', 'host', 'pid', 'cn')
    for i = 1, 4 do found[i] = found[i] or '' end
    seen[sid] = found
  end
  return found
end

local function since(at)
  if at then return fmt(at) end
  return ''
end

local function describe(name, with_owners, with_waiters)
  local m = meta(name)
  if not m then return {0} end
  local owners, waiters, seen = {}, {}, {}
  if with_owners then
    for _, pair in ipairs(owners_in_order(name)) do
      local o = pair[2]
      local sid = split_holder(pair[1])
      owners[#owners + 1] = {tonumber(sid), o.cnt, o.data, o.tok, since(o.at), who(sid, seen)}
    end
  end
  if with_waiters then
    for _, holder in ipairs(redis.call('ZRANGE', B .. 'q:' .. name, 0, -1)) do
      local w = waiter(name, holder)
      local sid = split_holder(holder)
      waiters[#waiters + 1] = {tonumber(sid), w.cnt, w.data, since(w.at), who(sid, seen)}
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
-- args: sid, fence, request key, name, delta, owners, waiters. The request key makes
-- a retry whose first try was applied (its answer lost) count once: it moves no count
-- again (an arm's retry reads the state afresh).
local function watch(keys, args)
  local more, done = begin_session(keys, args)
  local sid, name, delta = args[1], args[4], tonumber(args[5])
  if done then
    if delta < 0 then return reply(0, more) end
    return reply(describe(name, args[6] == '1', args[7] == '1'), more)
  end
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
  remember(args[3], delta)  -- (only that it was done: a retry's answer is made afresh)
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
register('swap_semaphore_data', swap_semaphore_data)
register('reserve_units', reserve_units)
register('delete_semaphore', delete_semaphore)
register('describe_semaphore', describe_semaphore)
register('watch', watch)
register('describe_session', describe_session)
