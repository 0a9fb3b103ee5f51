-- Append events only while an operation is still the workload's current one, so an
-- operation that was just superseded never writes into its successor's stream.
-- KEYS[1]: the event stream; KEYS[2]: the workload's operation.
-- ARGV[1]: the operation's id; then add_events' arguments.
-- Returns the last entry's id, or false when the operation is not current.
local raw = redis.call('GET', KEYS[2])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return false
end
return add_events(KEYS[1], 2)
