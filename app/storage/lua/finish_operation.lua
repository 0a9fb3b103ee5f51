-- End an operation: store its workload's final record (or remove the workload), dequeue
-- it, and append its last events, in one atomic step: a client that reads the terminal
-- event then finds the final record.
-- KEYS[1]: operation; KEYS[2]: record; KEYS[3]: the kind's index of names;
-- KEYS[4]: the operation's secret; KEYS[5]: pending operations; KEYS[6]: event stream;
-- KEYS[7]: the kind's failure times (see record_changed).
-- ARGV[1]: operation id; ARGV[2]: record JSON ("" removes the workload); ARGV[3]: the
-- workload's kind; ARGV[4]: its name; ARGV[5]: pending member; ARGV[6]: the admin feed's
-- channel; then add_events' arguments, if any.
-- Returns 1, or 0 (and changes nothing) when the operation is no longer current.
local raw = redis.call('GET', KEYS[1])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[4])
else
  redis.call('SET', KEYS[2], ARGV[2])
  redis.call('SADD', KEYS[3], ARGV[4])
end
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[5])
if #ARGV > 6 then
  add_events(KEYS[6], 7)
end
record_changed(ARGV[6], KEYS[7], ARGV[3], ARGV[4], ARGV[2])
return 1
