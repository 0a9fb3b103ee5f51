-- Shared by the scripts that change a workload's record: included at the top of each.
--
-- announce_state(channel, kind, name, record) tells the administrators' live feed that a
-- workload's state changed, in the same atomic step as the change. ``record`` is the new
-- record's JSON ("" when the workload is gone). The message is in the feed's wire format
-- (flask-sse's: a JSON object with ``type`` and ``data``); an empty channel sends nothing.
local function announce_state(channel, kind, name, record)
  if channel == '' then
    return
  end
  local status = 'deleted'
  if record ~= '' then
    status = cjson.decode(record)['status']
  end
  redis.call('PUBLISH', channel, cjson.encode({
    type = 'workload',
    data = {kind = kind, name = name, status = status},
  }))
end
