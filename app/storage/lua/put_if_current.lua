-- Replace a workload's record while an operation is still the current one for it: a step
-- that reports how far it got (an image under test moving from pulling to validating).
-- KEYS[1]: operation; KEYS[2]: record; KEYS[3]: the kind's index of names; KEYS[4]: the
-- kind's failure times (see record_changed).
-- ARGV[1]: operation id; ARGV[2]: the new record JSON; ARGV[3]: the workload's kind;
-- ARGV[4]: its name; ARGV[5]: the admin feed's channel.
-- Returns 1 when written, or 0 (and changes nothing) when the operation is not current.
local raw = redis.call('GET', KEYS[1])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
record_changed(ARGV[5], KEYS[4], ARGV[3], ARGV[4], ARGV[2])
return 1
