-- Shared by the scripts of fair admission (queue_spawn.lua, admit.lua): included at the top
-- of each, after add_events.lua.
--
-- Creations beyond a number in progress wait in one queue, fair between groups and first
-- come, first served within a group. Each waiting operation gets a turn: one past the last
-- turn its group holds in the queue, and never before the turn after the one last admitted.
-- Operations are admitted by turn, then by arrival: every turn admits one operation of each
-- group with one waiting (round-robin between groups), and a group that starts waiting
-- joins the next turn.
--
-- ``a`` names the keys and texts:
--   a.running: hash, workload key -> id of its admitted operation: the places in progress.
--     An entry whose operation ended or was superseded is dropped when the places are
--     counted full, so a place never outlives its operation, whoever died meanwhile;
--   a.queue: sorted set of waiting operations, score the turn, member
--     "<arrival, 16 digits>\n<group>\n<workload key>\n<operation id>" (by arrival in a turn);
--   a.waiting: hash, workload key -> "<position last announced>\n<its member of a.queue>";
--   a.groups: hash, group -> "<last turn it holds> <operations it has waiting>";
--   a.state: hash, 'turn' (the turn of the operation last admitted), 'arrivals' (a counter);
--   a.prefix: the key prefix: an operation is at prefix .. 'op:' .. workload key and its
--     events at prefix .. 'events:' .. workload key. The queue names the workloads, so
--     these keys are derived here: admission lives on the same Redis as the workloads;
--   a.channel: the events channel; a.position: the event saying a position, '{position}'
--     in it replaced by the number; a.started: the event saying the wait is over.

-- The admission context ``a``: its five keys from KEYS[first] on (running, queue, waiting,
-- groups, state, in that order) and ``texts`` (prefix, channel, position, started).
local function admission_context(first, texts)
  return {
    running = KEYS[first],
    queue = KEYS[first + 1],
    waiting = KEYS[first + 2],
    groups = KEYS[first + 3],
    state = KEYS[first + 4],
    prefix = texts.prefix,
    channel = texts.channel,
    position = texts.position,
    started = texts.started,
  }
end

-- The group, workload key and operation id of a member of the queue.
local function admission_entry(member)
  return string.match(member, '^%d+\n([^\n]*)\n([^\n]*)\n(.*)$')
end

-- The operation of ``wkey`` (decoded) if it is still the one with ``id``, else false.
local function admission_current(a, wkey, id)
  local raw = redis.call('GET', a.prefix .. 'op:' .. wkey)
  if not raw then
    return false
  end
  local operation = cjson.decode(raw)
  if operation['id'] ~= id then
    return false
  end
  return operation
end

-- The places in progress, counting only operations still current when the count reaches
-- ``limit`` (the others are dropped then: only a full count needs to be exact).
local function admission_in_progress(a, limit)
  local held = redis.call('HLEN', a.running)
  if held < limit then
    return held
  end
  local flat = redis.call('HGETALL', a.running)
  for i = 1, #flat, 2 do
    if not admission_current(a, flat[i], flat[i + 1]) then
      redis.call('HDEL', a.running, flat[i])
      held = held - 1
    end
  end
  return held
end

local function admission_say(a, wkey, text)
  add_event(a.prefix .. 'events:' .. wkey, a.channel, wkey, 'info', text, 0)
end

local function admission_position_text(a, position)
  return (string.gsub(a.position, '{position}', tostring(position)))
end

-- Queue operation ``id`` of ``wkey`` for ``group``, and tell it its position (returned).
local function admission_enqueue(a, group, wkey, id)
  local turn = tonumber(redis.call('HGET', a.state, 'turn') or '0')
  local last, count = turn, 0
  local entry = redis.call('HGET', a.groups, group)
  if entry then
    local held, waiting = string.match(entry, '^(%d+) (%d+)$')
    last, count = math.max(turn, tonumber(held)), tonumber(waiting)
  end
  local mine = last + 1
  local arrival = redis.call('HINCRBY', a.state, 'arrivals', 1)
  local member = string.format('%016d', arrival) .. '\n' .. group .. '\n' .. wkey .. '\n' .. id
  redis.call('ZADD', a.queue, mine, member)
  redis.call('HSET', a.groups, group, mine .. ' ' .. (count + 1))
  local position = redis.call('ZRANK', a.queue, member) + 1
  redis.call('HSET', a.waiting, wkey, position .. '\n' .. member)
  admission_say(a, wkey, admission_position_text(a, position))
  return position
end

-- Take ``member`` out of the queue, of its workload's entry and of its group's count.
local function admission_forget(a, member)
  local group, wkey = admission_entry(member)
  if redis.call('ZREM', a.queue, member) == 0 then
    return
  end
  local held = redis.call('HGET', a.waiting, wkey)
  if held and string.match(held, '^%d+\n(.*)$') == member then
    redis.call('HDEL', a.waiting, wkey)
  end
  local entry = redis.call('HGET', a.groups, group)
  if entry then
    local turn, waiting = string.match(entry, '^(%d+) (%d+)$')
    if tonumber(waiting) <= 1 then
      redis.call('HDEL', a.groups, group)
    else
      redis.call('HSET', a.groups, group, turn .. ' ' .. (tonumber(waiting) - 1))
    end
  end
end

-- Admit waiting operations in order while places are free (all of them when ``limit`` is
-- 0): each joins the pending operations (``pending``), where any worker's runner takes it.
-- An operation no longer current (superseded, gone) is dropped without taking a place.
-- Returns the workload keys admitted, in order.
local function admission_admit(a, limit, pending)
  local admitted = {}
  local free = 1
  if limit > 0 then
    free = limit - admission_in_progress(a, limit)
  end
  while free > 0 do
    local head = redis.call('ZRANGE', a.queue, 0, 0, 'WITHSCORES')
    if #head == 0 then
      break
    end
    local member = head[1]
    local _, wkey, id = admission_entry(member)
    admission_forget(a, member)
    redis.call('HSET', a.state, 'turn', head[2])
    local operation = admission_current(a, wkey, id)
    if operation then
      if limit > 0 then
        redis.call('HSET', a.running, wkey, id)
        free = free - 1
      end
      redis.call('ZADD', pending, operation['started'], wkey)
      admission_say(a, wkey, a.started)
      admitted[#admitted + 1] = wkey
    end
  end
  return admitted
end

-- Tell each waiting operation its position when it moved forward enough to be worth an
-- event: every place among the last ten, else a tenth of the way at least. A position is
-- only ever announced lower than the last (a group joining may put one back a place).
local function admission_announce(a)
  local members = redis.call('ZRANGE', a.queue, 0, -1)
  for position, member in ipairs(members) do
    local _, wkey, id = admission_entry(member)
    local held = redis.call('HGET', a.waiting, wkey)
    local last = tonumber(string.match(held or '', '^(%d+)\n') or '0')
    if
      position < last
      and (position <= 10 or last - position >= math.floor(last / 10))
      and admission_current(a, wkey, id)
    then
      admission_say(a, wkey, admission_position_text(a, position))
      redis.call('HSET', a.waiting, wkey, position .. '\n' .. member)
    end
  end
end

-- A creation asks for a place: it takes one now if one of ``places`` is free and nobody
-- waits ('admitted'), else it waits its turn ('waits'), unless ``max_waiting`` wait
-- already: then the number waiting, and nothing is written.
local function admission_ask(a, member, id, places, max_waiting)
  local queued = redis.call('ZCARD', a.queue)
  if queued == 0 and admission_in_progress(a, places) < places then
    redis.call('HSET', a.running, member, id)
    return 'admitted'
  end
  if queued >= max_waiting then
    return queued
  end
  return 'waits'
end
