-- Record a new workload and queue its spawn, unless one exists that has not failed; or, with
-- an expected record, replace exactly that record and queue the spawn that brings the workload
-- to it (an update of a workload that exists). Fair admission, when asked, decides in the
-- same step whether the spawn starts or waits (admission.lua's ``admission_ask``).
-- KEYS, in this order: record, operation, index (the kind's names), pending (operations),
-- secret (the operation's), events (the workload's stream), complete (Redis holds every
-- workload), failed (the kind's failure times, see record_changed); with admission, its
-- five keys after them (admission_context).
-- ARGV[1]: the arguments, one JSON object:
--   record, operation: the JSON texts to write; kind, name: the workload's;
--   member, queued_at: its entry among the pending operations and its score;
--   secret ("": none) and secret_ttl (seconds); feed: the admin feed's channel;
--   expect: the record expected now ("": none, a new workload);
--   events: the new stream's first events, an add_batch batch;
--   admission (absent: the spawn is not admitted, it starts at once): group, operation_id,
--   places, max_waiting, and admission_context's texts (prefix, channel, position).
-- Returns {1} when queued to start at once (whichever runner leases it first), {2, position}
-- when queued to wait for a place, {-2, operations waiting} when it would wait but the
-- queue is full (nothing written), {-1} while Redis is being rebuilt (a missing record may
-- be one not rebuilt yet), else {0, current record JSON or ""} (a record that is not
-- failed, or not the one expected, or an operation still queued).
local k = {
  record = KEYS[1],
  operation = KEYS[2],
  index = KEYS[3],
  pending = KEYS[4],
  secret = KEYS[5],
  events = KEYS[6],
  complete = KEYS[7],
  failed = KEYS[8],
}
local arg = cjson.decode(ARGV[1])
local raw = redis.call('GET', k.record)
if arg.expect ~= '' then
  if raw ~= arg.expect or redis.call('EXISTS', k.operation) == 1 then
    return {0, raw or ''}
  end
else
  if not raw and redis.call('EXISTS', k.complete) == 0 then
    return {-1}
  end
  if raw and cjson.decode(raw)['status'] ~= 'failed' then
    return {0, raw}
  end
  if redis.call('EXISTS', k.operation) == 1 then
    return {0, raw or ''}
  end
end
-- Fair admission: the spawn takes a place now, or waits for its turn out of the pending
-- operations (no runner takes it) until admitted.
local admission, waits = nil, false
if arg.admission then
  local ask = arg.admission
  admission = admission_context(9, ask)
  local answer = admission_ask(
    admission, arg.member, ask.operation_id, ask.places, ask.max_waiting
  )
  if type(answer) == 'number' then
    return {-2, answer}
  end
  waits = answer == 'waits'
end
redis.call('SET', k.record, arg.record)
redis.call('SADD', k.index, arg.name)
redis.call('SET', k.operation, arg.operation)
if not waits then
  redis.call('ZADD', k.pending, arg.queued_at, arg.member)
end
if arg.secret ~= '' then
  redis.call('SET', k.secret, arg.secret, 'EX', arg.secret_ttl)
end
redis.call('DEL', k.events)
add_batch(k.events, arg.events)
record_changed(arg.feed, k.failed, arg.kind, arg.name, arg.record)
if waits then
  local ask = arg.admission
  return {2, admission_enqueue(admission, ask.group, arg.member, ask.operation_id)}
end
return {1}
