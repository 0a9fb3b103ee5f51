-- Shared by every script that appends events: included at the top of each of them.
--
-- add_events(stream, first, last) appends events to ``stream`` and publishes each, whole,
-- on the events channel in the same atomic step, so subscribers receive every event in
-- stream order without reading the stream. ARGV[first] is the channel, ARGV[first + 1]
-- the stream's subject, then (type, data, expire-seconds or 0) for each event up to ARGV[last]
-- (the end of ARGV by default). A published message is "subject\nid\ntype\ndata".
-- Returns the last entry's id (false when there was none).
--
-- add_event(stream, channel, subject, kind, data, ttl) appends and publishes one event
-- given as values, for scripts whose events are not in ARGV (fair admission's positions).
local function add_event(stream, channel, subject, kind, data, ttl)
  local id = redis.call('XADD', stream, '*', 'type', kind, 'data', data)
  if ttl > 0 then
    redis.call('EXPIRE', stream, ttl)
  end
  redis.call('PUBLISH', channel, subject .. '\n' .. id .. '\n' .. kind .. '\n' .. data)
  return id
end

local function add_events(stream, first, last)
  local channel, subject, id = ARGV[first], ARGV[first + 1], false
  for i = first + 2, last or #ARGV, 3 do
    id = add_event(stream, channel, subject, ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]))
  end
  return id
end
