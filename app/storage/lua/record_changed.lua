-- Shared by the scripts that change a workload's record: included at the top of each.
--
-- record_changed(channel, failed, kind, name, record) does, in the same atomic step as the
-- change, what every change of a record needs besides the record itself. ``record`` is the
-- new record's JSON ("" when the workload is gone).
--
-- * The kind's failure times (``failed``, a sorted set of names by the Unix time their
--   record became ``failed``, from Redis's clock) keep the time a record became ``failed``
--   while it stays so (a repair rewriting it keeps the time) and forget it once it says
--   anything else (a new spawn): failed labs are dropped by their age.
-- * The administrators' live feed hears of the new state, in its wire format (flask-sse's:
--   a JSON object with ``type`` and ``data``); an empty channel sends nothing.
local function record_changed(channel, failed, kind, name, record)
  local status = 'deleted'
  if record ~= '' then
    status = cjson.decode(record)['status']
  end
  if status == 'failed' then
    local now = redis.call('TIME')
    redis.call('ZADD', failed, 'NX', now[1] .. '.' .. string.format('%06d', now[2]), name)
  else
    redis.call('ZREM', failed, name)
  end
  if channel == '' then
    return
  end
  redis.call('PUBLISH', channel, cjson.encode({
    type = 'workload',
    data = {kind = kind, name = name, status = status},
  }))
end
