-- Replace a workload's record when no operation runs for it and the record is still the
-- one the caller read (reconciles and watchers must never undo an operation's outcome).
-- KEYS[1]: record; KEYS[2]: operation; KEYS[3]: the kind's index of names; KEYS[4]: the
-- kind's failure times (see record_changed).
-- ARGV[1]: the new record JSON; ARGV[2]: the record JSON read ("" when there was none);
-- ARGV[3]: the workload's kind; ARGV[4]: its name; ARGV[5]: the admin feed's channel.
-- Fenced (an elected loop's write): KEYS[5]: the loop's lease; ARGV[6]: its value when elected.
-- Returns 1 when written, -1 when the fence moved (nothing written), else 0.
if fence_moved(KEYS[5], ARGV[6]) then
  return -1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local raw = redis.call('GET', KEYS[1])
if (raw or '') ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[4])
if raw ~= ARGV[1] then
  record_changed(ARGV[5], KEYS[4], ARGV[3], ARGV[4], ARGV[1])
end
return 1
