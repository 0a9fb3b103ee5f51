-- Take an elected loop's lease if nobody holds it, with the next fencing token; or extend
-- it when the caller already holds it.
-- KEYS[1]: the lease; KEYS[2]: the loop's token counter (it outlives the lease).
-- ARGV[1]: the candidate's identity; ARGV[2]: the TTL in milliseconds; ARGV[3]: a JSON
-- object describing the candidate (its replica and pid); ARGV[4]: now, in Unix seconds.
-- Returns the lease's value (a JSON object: ARGV[3] with "owner", "token" and "since"
-- added) when the caller holds it, else false.
local held = redis.call('GET', KEYS[1])
if held then
  local ok, value = pcall(cjson.decode, held)
  if ok and type(value) == 'table' and value.owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return held
  end
  return false
end
local value = cjson.decode(ARGV[3])
value.owner = ARGV[1]
value.token = redis.call('INCR', KEYS[2])
value.since = tonumber(ARGV[4])
local text = cjson.encode(value)
redis.call('SET', KEYS[1], text, 'PX', ARGV[2])
return text
