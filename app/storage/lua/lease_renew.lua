-- Extend a lease, only for its holder.
-- KEYS[1]: the lease. ARGV[1]: the holder; ARGV[2]: the new TTL in milliseconds.
-- Returns 1 when renewed, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
