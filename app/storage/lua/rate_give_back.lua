-- Give back one request counted in a window that has not ended (a refused request).
-- KEYS[1]: the caller's counter for the current window.
-- Returns the count left; nothing happens once the window has ended (the key is gone).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local left = redis.call('DECR', KEYS[1])
if left < 0 then
  redis.call('SET', KEYS[1], 0, 'KEEPTTL')
  return 0
end
return left
