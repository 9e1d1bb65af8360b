-- tenure's engine for redis://, part 45 (the parts are one library: see 00_core.lua).

-- -- deadlock detection ------------------------------------------------------------------
-- The engine's rule (tenure/_core/deadlocks.py, whose docstring says why), step for
-- step: a request of a known task that must wait is refused if it can never be
-- granted and closes a cycle of requests that can never be. The nodes are pending
-- requests (by their arrival number, the queue's score; a set's members share it);
-- a known task with exactly one of them waits with its holds ('ow:', 'tw': see
-- lua/10_semaphores.lua); other holds are a free task's. A walk from the request
-- (holders, sets ahead, and for an upgrade every request ahead) finds whether a path
-- comes back; a cycle of hard edges is a deadlock; another is confirmed by Holt's
-- reduction with FIFO. Everything it reads counts against the caller's limit; past it,
-- no deadlock is reported. One function call: nothing changes between its reads.

local DL_LAST = 2 ^ 60   -- past every arrival number: where the asked request queues
local DL_OVER = {}       -- raised when a search looked at more than its limit
local DL                 -- the search under way
-- The broken deadlocks a node keeps: the engine's MAX_DEADLOCKS_SHOWN (put in from
-- tenure/_core/limits.py as the library is made: tenure/backends/redis/_conn.py).
local DL_KEEP = @MAX_DEADLOCKS_SHOWN@

local function dl_spend(n)
  DL.budget = DL.budget - (n or 1)
  if DL.budget < 0 then error(DL_OVER) end
end

local function dl_label(sid, task)
  if task == '0' then return 'session ' .. sid end
  return 'session ' .. sid .. ' (task ' .. task .. ')'
end

-- The owners of ``name``: {holder, sid, task, count}, as 'ow:' keeps them.
local function dl_owners(name)
  local found = DL.owners[name]
  if found then return found end
  found = {}
  local flat = redis.call('HGETALL', B .. 'ow:' .. name)
  for i = 1, #flat, 2 do
    dl_spend()
    local v = flat[i + 1]
    local c = string.find(v, ':', 1, true)
    found[#found + 1] = {holder = flat[i], sid = split_holder(flat[i]),
      task = string.sub(v, 1, c - 1), cnt = cnt(string.sub(v, c + 1))}
  end
  DL.owners[name] = found
  return found
end

-- The queue of ``name`` in service order: {holder, arrival number} each.
local function dl_queue(name)
  local found = DL.queues[name]
  if found then return found end
  found = {}
  local flat = redis.call('ZRANGE', B .. 'q:' .. name, 0, -1, 'WITHSCORES')
  for i = 1, #flat, 2 do found[#found + 1] = {flat[i], tonumber(flat[i + 1])} end
  DL.queues[name] = found
  return found
end

local dl_of_task  -- (defined below: the two look each other up)

-- The request the waiter ``w`` of ``holder`` on ``name`` (arrival ``seq``) belongs to;
-- nil if the asked request supersedes it.
local function dl_request(name, holder, w, seq)
  if seq == DL.gone then return nil end
  local found = DL.requests[seq]
  if found then return found end
  local members = {}
  local flat = w.set and set_members(w.set)
  if flat then
    for i = 1, #flat, 2 do
      dl_spend()
      local member = waiter(flat[i], flat[i + 1])
      members[#members + 1] = {flat[i], flat[i + 1], cnt(member.cnt)}
    end
  else
    members[1] = {name, holder, cnt(w.cnt)}
  end
  local sid = split_holder(holder)
  found = {seq = seq, members = members, label = dl_label(sid, w.task)}
  DL.requests[seq] = found
  if w.task ~= '0' then dl_of_task(sid, w.task) end  -- (marks it its task's, if so)
  return found
end

-- The one request the known task waits with; nil if it has none (free), several
-- (its holds count as free), or is not known ('0').
dl_of_task = function(sid, task)
  if task == '0' then return nil end
  local tid = sid .. ':' .. task
  local known = DL.tasks[tid]
  if known ~= nil then return known or nil end
  DL.tasks[tid] = false  -- (while it is looked up)
  local raw = redis.call('HGET', B .. 'tw', tid)
  if not raw then return nil end
  local first
  for _, place in ipairs(cmsgpack.unpack(raw)) do
    dl_spend()
    local c = string.find(place, ':', 1, true)
    local name, holder = string.sub(place, c + 1), sid .. ':' .. string.sub(place, 1, c - 1)
    local w = waiter(name, holder)
    if w and w.task == task then  -- (a stale entry, left by an older library: not a wait)
      local seq = tonumber(redis.call('ZSCORE', B .. 'q:' .. name, holder))
      if not first then
        first = {name, holder, w, seq}
      elseif seq ~= first[4] then
        return nil  -- two requests at once: not one task awaiting one
      end
    end
  end
  if not first then return nil end
  local found = dl_request(first[1], first[2], first[3], first[4])
  if found then
    found.task = tid
    DL.tasks[tid] = found
  end
  return found
end

-- The set members queued on ``name``: {arrival, holder} each.
local function dl_sets_on(name)
  if not DL.sets then
    DL.sets = {}
    local flat = redis.call('HGETALL', B .. 'grp')
    for i = 1, #flat, 2 do
      local seq, members = tonumber(flat[i]), cmsgpack.unpack(flat[i + 1])
      dl_spend(#members / 2)
      for j = 1, #members, 2 do
        local on = DL.sets[members[j]] or {}
        on[#on + 1] = {seq, members[j + 1]}
        DL.sets[members[j]] = on
      end
    end
  end
  return DL.sets[name] or {}
end

-- What request ``r`` waits for on ``name`` (wanting ``want`` there as ``holder``): its
-- holders, the sets ahead of it, and, for an upgrade, every request ahead of it.
local function dl_out(r, name, holder, want, edges)
  local lim = meta(name).lim
  local upgrading = false
  for _, o in ipairs(dl_owners(name)) do
    if o.holder == holder then
      upgrading = true  -- its own hold: the grant replaces it
    else
      local target = dl_of_task(o.sid, o.task)
      if target then
        edges[#edges + 1] = {target, name, 'held by', not cle(cadd(o.cnt, want), lim)}
      end
    end
  end
  local asking = r.seq == -1
  if upgrading then
    for _, entry in ipairs(dl_queue(name)) do
      if not asking and entry[2] >= r.seq then break end
      dl_spend()
      local ahead = dl_request(name, entry[1], waiter(name, entry[1]), entry[2])
      if ahead and ahead ~= r then edges[#edges + 1] = {ahead, name, 'queued behind', true} end
    end
  else
    for _, set in ipairs(dl_sets_on(name)) do
      if asking or set[1] < r.seq then
        dl_spend()
        local w = waiter(name, set[2])
        local ahead = w and dl_request(name, set[2], w, set[1])
        if ahead and ahead ~= r then edges[#edges + 1] = {ahead, name, 'queued behind', true} end
      end
    end
  end
end

-- Expand every request reachable from ``asking``; whether one waits for it.
local function dl_walk(asking)
  local todo, back = {asking}, false
  while #todo > 0 do
    local r = table.remove(todo)
    if not DL.edges[r.seq] then
      dl_spend()
      local edges = {}
      DL.edges[r.seq] = edges
      for _, m in ipairs(r.members) do dl_out(r, m[1], m[2], m[3], edges) end
      for _, e in ipairs(edges) do
        if e[1] == asking then back = true end
        if not DL.edges[e[1].seq] then todo[#todo + 1] = e[1] end
      end
    end
  end
  return back
end

-- The shortest cycle from ``asking`` back to it: along hard edges (``stuck`` nil), or
-- through the requests of ``stuck`` (arrival -> true) only.
local function dl_cycle(asking, stuck)
  local parents, seen = {}, {[asking.seq] = true}
  local frontier, at = {asking}, 1
  while at <= #frontier do
    local r = frontier[at]
    at = at + 1
    for _, e in ipairs(DL.edges[r.seq] or {}) do
      local target, allowed = e[1], e[4]
      if stuck then allowed = stuck[target.seq] end
      if allowed then
        if target == asking then
          local path, step = {e}, r
          while step ~= asking do
            local parent = parents[step.seq]
            path[#path + 1] = parent[2]
            step = parent[1]
          end
          local ordered = {}
          for i = #path, 1, -1 do ordered[#ordered + 1] = path[i] end
          return ordered
        end
        if not seen[target.seq] then
          seen[target.seq] = true
          parents[target.seq] = {r, e}
          frontier[#frontier + 1] = target
        end
      end
    end
  end
  return nil
end

-- Holt's reduction with FIFO over the queues the walk reached, each as far as its
-- furthest expanded request: the arrival numbers of the requests never granted.
local function dl_unreduced(asking)
  local reach, names = {}, {}
  for seq, _ in pairs(DL.edges) do
    local bound = seq
    if seq == -1 then bound = DL_LAST end
    for _, m in ipairs(DL.requests[seq].members) do
      if reach[m[1]] == nil then names[#names + 1] = m[1] end
      if reach[m[1]] == nil or reach[m[1]] < bound then reach[m[1]] = bound end
    end
  end
  table.sort(names)
  local queues, units = {}, {}
  for _, name in ipairs(names) do
    local queue = {}
    for _, entry in ipairs(dl_queue(name)) do
      if entry[2] > reach[name] then break end
      dl_spend()
      local w = waiter(name, entry[1])
      local r = dl_request(name, entry[1], w, entry[2])
      if r then
        queue[#queue + 1] = {r, entry[1], cnt(w.cnt)}
        units[r.seq] = true
      end
    end
    for _, m in ipairs(asking.members) do
      if m[1] == name then
        queue[#queue + 1] = {asking, m[2], m[3]}
        units[-1] = true
      end
    end
    queues[name] = queue
  end
  local held, counted, holds_of = {}, {}, {}
  for _, name in ipairs(names) do
    local total, keyed = {0, 0}, {}
    for _, o in ipairs(dl_owners(name)) do
      dl_spend()
      local h = dl_of_task(o.sid, o.task)
      -- A free task's hold is released; so is one of a request the walk did not reach.
      if h and units[h.seq] then
        total = cadd(total, o.cnt)
        keyed[o.holder] = o.cnt
        holds_of[h.seq] = holds_of[h.seq] or {}
        table.insert(holds_of[h.seq], {name, o.holder})
      end
    end
    held[name], counted[name] = total, keyed
  end
  local reduced, position = {}, {}
  local function head(name)
    local queue, i = queues[name], position[name] or 1
    while i <= #queue and reduced[queue[i][1].seq] do i = i + 1 end
    position[name] = i
    return queue[i]
  end
  local function ready(r)
    for _, m in ipairs(r.members) do
      local first = queues[m[1]] and head(m[1])
      if not first or first[1] ~= r then return false end
      -- Lock-delay is over by then; its own hold is replaced by the grant.
      local own = counted[m[1]][m[2]] or {0, 0}
      if not cle(cadd(csub(held[m[1]], own), m[3]), meta(m[1]).lim) then return false end
    end
    return true
  end
  local work, at = {}, 1
  for _, name in ipairs(names) do work[#work + 1] = name end
  while at <= #work do
    local first = head(work[at])
    at = at + 1
    if first and ready(first[1]) then
      local r = first[1]
      reduced[r.seq] = true
      for _, m in ipairs(r.members) do work[#work + 1] = m[1] end
      for _, h in ipairs(holds_of[r.seq] or {}) do
        held[h[1]] = csub(held[h[1]], counted[h[1]][h[2]])
        counted[h[1]][h[2]] = nil
        work[#work + 1] = h[1]
      end
    end
  end
  local stuck = {}
  for seq, _ in pairs(units) do
    if not reduced[seq] then stuck[seq] = true end
  end
  return stuck
end

-- The cycle the request of task ``task`` of ``sid`` would close, as text; nil if none.
-- ``asked``: {name, holder, count} of each existing semaphore it would wait on;
-- ``replaced``: the '<hold>:<name>' of the session's request it supersedes, if any.
local function dl_check(sid, task, asked, replaced)
  local raw = redis.call('HGET', B .. 'tw', sid .. ':' .. task)
  for _, place in ipairs(raw and cmsgpack.unpack(raw) or {}) do
    local c = string.find(place, ':', 1, true)
    local name, holder = string.sub(place, c + 1), sid .. ':' .. string.sub(place, 1, c - 1)
    local w = waiter(name, holder)
    if w and w.task == task then
      if place ~= replaced then return nil end  -- it waits for something else already
      DL.gone = tonumber(redis.call('ZSCORE', B .. 'q:' .. name, holder))
    end
  end
  local asking = {seq = -1, members = asked, label = dl_label(sid, task), task = sid .. ':' .. task}
  DL.requests[-1] = asking
  DL.tasks[asking.task] = asking
  if not dl_walk(asking) then return nil end
  local path = dl_cycle(asking, nil)
  if not path then
    local stuck = dl_unreduced(asking)
    if not stuck[-1] then return nil end
    path = dl_cycle(asking, stuck)
  end
  if not path then return nil end
  return dl_text(asking.label, path)
end

-- Fail the request (DeadlockError, 27) if it would close a deadlock, and keep it in
-- the node's 'dlk' (the latest DL_KEEP, each text bounded: dl_text, lua/44_deadlock_texts.lua); ``limit`` 0: not
-- checked.
local function refuse_deadlock(sid, task, asked, replaced, limit)
  if task == '0' or limit <= 0 then return end
  DL = {budget = limit, requests = {}, edges = {}, tasks = {}, owners = {}, queues = {}}
  local ok, found = pcall(dl_check, sid, task, asked, replaced)
  DL = nil
  if not ok then
    if found == DL_OVER then return end  -- past the limit: it waits, unchecked
    error(found, 0)
  end
  if found then
    redis.call('LPUSH', B .. 'dlk', cmsgpack.pack({NOW, tonumber(sid), task, found}))
    redis.call('LTRIM', B .. 'dlk', 0, DL_KEEP - 1)
    fail(27, 'refused: waiting would deadlock: ' .. found)
  end
end
