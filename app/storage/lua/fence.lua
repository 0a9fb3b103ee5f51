-- Library: fencing, so that a leader deposed without knowing it cannot write.
-- A fenced write names the leader's lease and the exact value its holder read when it was
-- elected (the value carries the election's token); once the lease expired or moved, the
-- value differs and the write is refused.
local function fence_moved(lease_key, lease_value)
  return lease_key ~= nil and redis.call('GET', lease_key) ~= lease_value
end
