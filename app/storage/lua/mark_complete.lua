-- Declare Redis complete (it holds every workload) at the end of a rebuild, unless Redis
-- was emptied while the rebuild ran: then its start marker is gone with everything else,
-- and records it had not yet rebuilt would be missing behind a "complete" claim.
-- KEYS[1]: the rebuild's start marker; KEYS[2]: the completeness marker.
-- ARGV[1]: the rebuild's id, as its start marker holds it; ARGV[2]: when it finished.
-- Returns 1 when marked complete, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return 1
