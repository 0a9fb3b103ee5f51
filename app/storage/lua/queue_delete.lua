-- Mark a workload terminating and queue its deletion; a running spawn is superseded.
-- KEYS[1]: record; KEYS[2]: operation; KEYS[3]: pending operations; KEYS[4]: event stream.
-- ARGV[1]: the record JSON the caller read (the write happens only if it is unchanged);
-- ARGV[2]: the terminating record JSON; ARGV[3]: operation JSON; ARGV[4]: the workload's
-- kind; ARGV[5]: its name; ARGV[6]: pending member; ARGV[7]: queued-at score; ARGV[8]: the
-- admin feed's channel; then add_events' arguments for the new stream's first events.
-- Returns 'queued', 'missing' (no record), 'already' (terminating already) or 'changed'
-- (the record is no longer what the caller read: read again and retry).
local raw = redis.call('GET', KEYS[1])
if not raw then
  return 'missing'
end
if cjson.decode(raw)['status'] == 'terminating' then
  return 'already'
end
if raw ~= ARGV[1] then
  return 'changed'
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[7], ARGV[6])
redis.call('DEL', KEYS[4])
add_events(KEYS[4], 9)
announce_state(ARGV[8], ARGV[4], ARGV[5], ARGV[2])
return 'queued'
