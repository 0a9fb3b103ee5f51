-- Record a new workload and queue its spawn, unless one exists that has not failed; or, with
-- an expected record, replace exactly that record and queue the spawn that brings the workload
-- to it (an update of a workload that exists).
-- KEYS[1]: record; KEYS[2]: operation; KEYS[3]: the kind's index of names;
-- KEYS[4]: pending operations; KEYS[5]: the operation's secret; KEYS[6]: event stream;
-- KEYS[7]: the workload's lease; KEYS[8]: the completeness marker (Redis holds every workload);
-- KEYS[9]: the kind's failure times (see record_changed);
-- with admission, KEYS[10] to KEYS[14]: its places in progress, queue, waiting operations,
-- groups and state (see admission.lua).
-- ARGV[1]: record JSON; ARGV[2]: operation JSON; ARGV[3]: the workload's kind;
-- ARGV[4]: its name; ARGV[5]: pending member; ARGV[6]: queued-at score; ARGV[7]: secret
-- ("" keeps none); ARGV[8]: the secret's TTL in seconds; ARGV[9]: the admin feed's channel;
-- ARGV[10]: who takes the lease if nobody holds it ("" takes none); ARGV[11]: its TTL in
-- milliseconds; ARGV[12]: where the events written only with the lease start (0: there are
-- none); ARGV[13]: the record expected now ("": none, a new workload); ARGV[14]: the group
-- to admit the spawn for ("": it is not admitted, it starts at once); ARGV[15]: the
-- operation's id; ARGV[16]: the places in progress; ARGV[17]: the most operations waiting;
-- ARGV[18]: the key prefix; ARGV[19]: the event saying a position ('{position}' in it
-- becomes the number); then add_events' arguments for the new stream's first events, and
-- from ARGV[12] on add_events' arguments for the events that announce a run starting at
-- once, appended only when the lease was taken.
-- Returns {1, 1} when queued with the lease taken, {1, 0} when queued without, {2, position}
-- when queued to wait for a place, {-2, operations waiting} when it would wait but the
-- queue is full (nothing written), {-1} while Redis is being rebuilt (a missing record may
-- be one not rebuilt yet), else {0, current record JSON or ""} (a record that is not
-- failed, or not the one expected, or an operation still queued).
local raw = redis.call('GET', KEYS[1])
if ARGV[13] ~= '' then
  if raw ~= ARGV[13] or redis.call('EXISTS', KEYS[2]) == 1 then
    return {0, raw or ''}
  end
else
  if not raw and redis.call('EXISTS', KEYS[8]) == 0 then
    return {-1}
  end
  if raw and cjson.decode(raw)['status'] ~= 'failed' then
    return {0, raw}
  end
  if redis.call('EXISTS', KEYS[2]) == 1 then
    return {0, raw or ''}
  end
end
-- Fair admission: the spawn takes a place now if one is free and nobody waits; else it
-- waits for its turn, out of the pending operations (no runner takes it) until admitted.
local admission, waits = nil, false
if ARGV[14] ~= '' then
  admission = {
    running = KEYS[10],
    queue = KEYS[11],
    waiting = KEYS[12],
    groups = KEYS[13],
    state = KEYS[14],
    prefix = ARGV[18],
    channel = ARGV[20],
    position = ARGV[19],
  }
  local queued = redis.call('ZCARD', admission.queue)
  local limit = tonumber(ARGV[16])
  if queued == 0 and admission_in_progress(admission, limit) < limit then
    redis.call('HSET', admission.running, ARGV[5], ARGV[15])
  elseif queued >= tonumber(ARGV[17]) then
    return {-2, queued}
  else
    waits = true
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[4])
redis.call('SET', KEYS[2], ARGV[2])
if not waits then
  redis.call('ZADD', KEYS[4], ARGV[6], ARGV[5])
end
if ARGV[7] ~= '' then
  redis.call('SET', KEYS[5], ARGV[7], 'EX', ARGV[8])
end
redis.call('DEL', KEYS[6])
local leased = not waits
  and ARGV[10] ~= ''
  and redis.call('SET', KEYS[7], ARGV[10], 'NX', 'PX', ARGV[11])
local leased_events = tonumber(ARGV[12])
if leased_events > 0 then
  add_events(KEYS[6], 20, leased_events - 1)
  if leased then
    add_events(KEYS[6], leased_events)
  end
else
  add_events(KEYS[6], 20)
end
record_changed(ARGV[9], KEYS[9], ARGV[3], ARGV[4], ARGV[1])
if waits then
  return {2, admission_enqueue(admission, ARGV[14], ARGV[5], ARGV[15])}
end
if leased then
  return {1, 1}
end
return {1, 0}
