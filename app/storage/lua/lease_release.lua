-- Give a lease up, only for its holder.
-- KEYS[1]: the lease. ARGV[1]: the holder.
-- Returns 1 when released, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
