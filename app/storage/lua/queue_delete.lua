-- Mark a workload terminating and queue its deletion; a running spawn is superseded.
-- KEYS[1]: record; KEYS[2]: operation; KEYS[3]: pending operations; KEYS[4]: event stream;
-- KEYS[5]: the kind's failure times (see record_changed).
-- ARGV[1]: the record JSON the caller read (the write happens only if it is unchanged);
-- ARGV[2]: the terminating record JSON; ARGV[3]: operation JSON; ARGV[4]: the workload's
-- kind; ARGV[5]: its name; ARGV[6]: pending member; ARGV[7]: queued-at score; ARGV[8]: the
-- admin feed's channel; ARGV[9]: '1' to delete only a failed workload no operation is
-- queued for (a sweep of old failures must never cancel a new spawn), else '0'; then
-- add_events' arguments for the new stream's first events.
-- Returns 'queued', 'missing' (no record), 'already' (terminating already), 'changed'
-- (the record is no longer what the caller read: read again and retry) or, with ARGV[9]
-- '1', 'not_failed' (the record no longer says failed, or an operation is queued).
local raw = redis.call('GET', KEYS[1])
if not raw then
  return 'missing'
end
local status = cjson.decode(raw)['status']
if status == 'terminating' then
  return 'already'
end
if ARGV[9] == '1' and (status ~= 'failed' or redis.call('EXISTS', KEYS[2]) == 1) then
  return 'not_failed'
end
if raw ~= ARGV[1] then
  return 'changed'
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[7], ARGV[6])
redis.call('DEL', KEYS[4])
add_events(KEYS[4], 10)
record_changed(ARGV[8], KEYS[5], ARGV[4], ARGV[5], ARGV[2])
return 'queued'
