-- Declare Redis complete (it holds every workload) at the end of a rebuild, unless Redis
-- was emptied while the rebuild ran: then its start marker is gone with everything else,
-- and records it had not yet rebuilt would be missing behind a "complete" claim.
-- KEYS[1]: the rebuild's start marker; KEYS[2]: the completeness marker.
-- ARGV[1]: the rebuild's id, as its start marker holds it; ARGV[2]: when it finished.
-- Fenced (the reconcile's write): KEYS[3]: the loop's lease; ARGV[3]: its value when elected.
-- Returns 1 when marked complete, -1 when the fence moved (nothing written), else 0.
if fence_moved(KEYS[3], ARGV[3]) then
  return -1
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return 1
