-- Count one request in a fixed window and say whether it is over the limit.
-- KEYS[1]: the caller's counter for the current window.
-- ARGV[1]: the limit per window; ARGV[2]: the window in milliseconds.
-- Returns 0 when the request is within the limit, else the milliseconds until the window
-- ends (the request is not counted then, so refused requests do not extend the wait).
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if count > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  local left = redis.call('PTTL', KEYS[1])
  if left < 1 then
    left = 1
  end
  return left
end
return 0
