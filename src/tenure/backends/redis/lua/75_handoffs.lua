-- tenure's engine for redis://, part 75 (the parts are one library: see 00_core.lua).

-- -- hand-offs: a hold moved to another session under a new token ---------------------
-- The engine's OfferHold and AdoptHold (tenure/_core/handlers/handoffs.py), rule for
-- rule. 'ho:<name>' keeps each offered hold of <name>: holder -> the SHA-256 digest
-- (hex) of the offer's secret, made by the offering client. The offer goes with its
-- hold: remove_owner, a grant that replaces the hold (an upgrade: a new token) and
-- the semaphore's deletion drop it; a restate in place (the same token) keeps it. The
-- adopter's client sends the digest of the secret it was given (Lua has no SHA-256):
-- the secret never reaches Redis, and whoever may read Redis may also write it.

-- args: sid, fence, request key, name, hold, digest (hex). Replies {token, count hex,
-- ttl}: the hold as offered. Sent again, it offers the same again.
local function offer_hold(keys, args)
  local more = begin_session(keys, args)
  local name, holder = args[4], args[1] .. ':' .. args[5]
  local o = meta(name) and owner(name, holder)
  if not o then
    fail(20, 'session ' .. args[1] .. ' holds no tokens of ' .. quote(name))
  end
  redis.call('HSET', B .. 'ho:' .. name, holder, args[6])
  return reply({o.tok, o.cnt, tostring(o.ttl)}, more)
end

-- args: sid, fence, request key, name, hold, holder's sid, holder's hold, token,
-- digest (hex). Replies {token, count hex, ttl} and '1' after them for a grant that
-- has an end (the max_hold of the hold it takes over, kept): the new grant; or {0}: no such hold
-- is offered with that digest (the client raises LeaseLostError: an error of code 12
-- here would read as the loss of the caller's own session). A retry (the request
-- key) is answered as the first try was.
local function adopt_hold(keys, args)
  local more, done = begin_session(keys, args)
  if done then return reply(done, more) end
  local sid, name, hold = args[1], args[4], args[5]
  local from = args[6] .. ':' .. args[7]
  local m = meta(name)
  local o = m and owner(name, from)
  local offer = o and redis.call('HGET', B .. 'ho:' .. name, from)
  if not offer or o.tok ~= tonumber(args[8]) or offer ~= args[9] then
    -- One answer for every case: which one it was tells a guesser nothing.
    return reply(remember(args[3], {0}), more)
  end
  local holder = sid .. ':' .. hold
  local w, mine = records(name, holder)
  if w or mine then
    fail(23, 'session ' .. sid .. "'s hold " .. hold .. ' on ' .. quote(name)
      .. ' is taken: adopt as another hold')
  end
  remove_owner(name, from, o)
  local from_sid, from_hold = split_holder(from)
  push(from_sid, {'k', 'L', 'name', name, 'hold', from_hold, 'tok', o.tok, 'code', 12,
    'msg', 'the hold on ' .. quote(name) .. ' was handed off: session ' .. sid .. ' adopted it'})
  -- (The grant keeps the offered hold's end: a hand-off is no way past a max_hold.)
  local tok, ttl, bounded = grant(name, holder, o.cnt, o.data, 0, nil, false, '0', nil, o.ends)
  touch(name)
  settle(name)
  local answer = {tok, o.cnt, tostring(ttl)}
  if bounded then answer[4] = '1' end
  return reply(remember(args[3], answer), more)
end

register('offer_hold', offer_hold)
register('adopt_hold', adopt_hold)
