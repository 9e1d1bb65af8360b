-- tenure's engine for redis://, part 70 (the parts are one library: see 00_core.lua).

-- -- claims: a name taken once per slot ---------------------------------------------------
-- The engine's ClaimName and ReleaseClaim (tenure/_core/handlers/claims.py), rule for
-- rule, on Redis's clock. A claim of <name> is the persistent semaphore <name> (limit
-- 1, held by nobody) whose data is its record, 'claim ID TOKEN GRANTED AT_LEAST AT_MOST
-- RELEASED SESSION DATA' (tenure/_core/claims.py), and an entry of 'clm' (name ->
-- {id, token, at_least's end, the end}, by Redis's clock, NOW): live while both agree.
-- Its end is a 'c:<name>' entry of 'due', so any call's reap (and the tick of a client
-- that waits for something) ends it: the semaphore is deleted as by force. 'clm'
-- counts a node's claims (max_claims).

local CLAIM = '^claim ([0-9a-f]+) ([0-9]+) (%S+) (%S+) (%S+) (%S+) ([0-9]+) (%S+)$'

-- The words of a claim's record (nil: the data is none).
local function claim_words(data)
  local id, tok, granted, least, most, released, sid, owner = string.match(data, CLAIM)
  if not id or #id ~= 32 then return nil end
  local g, l, m = tonumber(granted), tonumber(least), tonumber(most)
  if not (finite(g) and finite(l) and finite(m) and l >= 0 and m > 0 and l <= m) then
    return nil
  end
  if released ~= '-' and not finite(tonumber(released)) then return nil end
  if owner ~= '-' and (#owner % 2 ~= 0 or string.find(owner, '[^0-9a-f]')) then return nil end
  return {id, tok, granted, least, most, released, sid, owner}
end

local function record_of(words)
  return 'claim ' .. table.concat(words, ' ')
end

local function hex(data)
  if data == '' then return '-' end
  return (string.gsub(data, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

-- The claim of ``name`` as 'clm' keeps it ({id, token, at_least's end, end}), and
-- whether it is live: its semaphore's record is that claim's.
local function claim_entry(name)
  local raw = redis.call('HGET', B .. 'clm', name)
  if not raw then return nil, false end
  local c = cmsgpack.unpack(raw)
  local m = meta(name)
  if not m or m.eph then return c, false end
  local words = claim_words(m.data)
  return c, words ~= nil and words[1] == c[1] and words[2] == c[2]
end

-- The claim of ``name`` ends: its entry and its semaphore go.
local function end_claim(name)
  redis.call('HDEL', B .. 'clm', name)
  redis.call('ZREM', B .. 'due', 'c:' .. name)
  remove_semaphore(name, 'the claim of ' .. quote(name) .. ' ended')
end

-- A 'c:<name>' entry came due: the claim ends if it is still the claim timed (else
-- its entry goes: the semaphore was deleted or rewritten meanwhile).
claim_due = function(name)
  local c, live = claim_entry(name)
  if not c or c[4] > NOW then return end
  if live then
    end_claim(name)
  else
    redis.call('HDEL', B .. 'clm', name)
  end
end

-- The live claim of ``name`` at NOW (one ended by NOW that no reap got to yet ends
-- here, as the engine's deadlines all come before a command): {entry, words}, or nil.
local function live_claim(name)
  local c, live = claim_entry(name)
  if not live then return nil end
  if c[4] <= NOW then
    end_claim(name)
    return nil
  end
  return c
end

-- args: sid, fence, request key (''), name, claim id, at_least, at_most, data. Replies
-- the record of the claim that holds the name now (the caller's, or another's).
local function claim(keys, args)
  local more = begin_session(keys, args)
  local sid, name, id, data = args[1], args[4], args[5], args[8]
  local least, most = tonumber(args[6]), tonumber(args[7])
  local md = tonumber(cfg_get('md'))
  if #data > md then
    fail(22, 'claim data is ' .. #data .. ' bytes; max_data_size is ' .. md)
  end
  if live_claim(name) then return reply(meta(name).data, more) end
  local m = meta(name)
  if m then
    if m.eph or redis.call('EXISTS', B .. 'r:' .. name) == 1 then
      fail(23, 'semaphore ' .. quote(name) .. ' is held or awaited: only a free semaphore '
        .. "whose data is a claim's record (or none) can be claimed")
    end
    if not claim_words(m.data) then
      fail(23, 'semaphore ' .. quote(name) .. " is not a claim (its data is not 'claim ID "
        .. "TOKEN GRANTED AT_LEAST AT_MOST RELEASED SESSION DATA')")
    end
  end
  local claims = redis.call('HLEN', B .. 'clm') - redis.call('HEXISTS', B .. 'clm', name)
  local limit = tonumber(cfg_get('mc') or '') or 10000
  if claims >= limit then
    fail(22, 'max_claims (' .. limit .. ') reached on node ' .. node_name())
  end
  if not m then check_room() end
  local tok = redis.call('INCR', B .. 'tok')
  local record = record_of({id, tok, NOW_S, g17(least), g17(most), '-', sid, hex(data)})
  if m then
    redis.call('HSET', B .. 'm:' .. name, 'lim', '0000000000000001', 'data', record)
    m.lim, m.data = cnt('0000000000000001'), record
    touch(name)
  else
    new_semaphore(name, '0000000000000001', record, '0')
  end
  redis.call('HSET', B .. 'clm', name, cmsgpack.pack({id, tostring(tok), NOW + least, NOW + most}))
  due_add(NOW + most, 'c:' .. name)
  return reply(record, more)
end

-- args: name, claim id, request key. Replies 1 if it shortened the live claim of that
-- id, else 0; a retry (the request key) is answered as the first try was.
local function release_claim(keys, args)
  local more = begin(keys)
  local done = recall(args[3])
  if done then return reply(done, more) end
  local name, id = args[1], args[2]
  local c = live_claim(name)
  if not c or c[1] ~= id then return reply(remember(args[3], 0), more) end
  local m = meta(name)
  local words = claim_words(m.data)
  if words[6] ~= '-' then return reply(remember(args[3], 0), more) end  -- released already
  if c[3] <= NOW then
    end_claim(name)  -- at_least has passed: it ends now
    return reply(remember(args[3], 1), more)
  end
  words[6] = NOW_S
  local record = record_of(words)
  redis.call('HSET', B .. 'm:' .. name, 'data', record)
  m.data = record
  touch(name)
  c[4] = c[3]
  redis.call('HSET', B .. 'clm', name, cmsgpack.pack(c))
  due_add(c[3], 'c:' .. name)
  return reply(remember(args[3], 1), more)
end

register('claim', claim)
register('release_claim', release_claim)
