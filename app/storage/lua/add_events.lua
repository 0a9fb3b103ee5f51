-- Shared by every script that appends events: included at the top of each of them.
--
-- add_events(stream, first, last) appends events to ``stream`` and publishes each, whole,
-- on the events channel in the same atomic step, so subscribers receive every event in
-- stream order without reading the stream. ARGV[first] is the channel, ARGV[first + 1]
-- the stream's subject, ARGV[first + 2] the id of the request behind the events ("": none),
-- then (type, data, expire-seconds or 0) for each event up to ARGV[last] (the end of ARGV
-- by default). A published message is "subject\nid\ntype\ndata"; the request id is kept
-- in the entry only (a field "request"), so the message and the event stream's format
-- stay as they were. Returns the last entry's id (false when there was none).
--
-- add_event(stream, channel, subject, kind, data, ttl, request) appends and publishes one
-- event given as values, for scripts whose events are not in ARGV (fair admission's
-- positions, without a request).
--
-- add_batch(stream, batch) appends the events of a batch given as a table (a script's named
-- JSON argument): batch.channel, batch.subject, batch.request ("": none) and batch.events,
-- each {type, data, expire-seconds or 0}. Returns the last entry's id (false: none).
local function add_event(stream, channel, subject, kind, data, ttl, request)
  local id
  if request and request ~= '' then
    id = redis.call('XADD', stream, '*', 'type', kind, 'data', data, 'request', request)
  else
    id = redis.call('XADD', stream, '*', 'type', kind, 'data', data)
  end
  if ttl > 0 then
    redis.call('EXPIRE', stream, ttl)
  end
  redis.call('PUBLISH', channel, subject .. '\n' .. id .. '\n' .. kind .. '\n' .. data)
  return id
end

local function add_events(stream, first, last)
  local channel, subject, request, id = ARGV[first], ARGV[first + 1], ARGV[first + 2], false
  for i = first + 3, last or #ARGV, 3 do
    id = add_event(stream, channel, subject, ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), request)
  end
  return id
end

local function add_batch(stream, batch)
  local id = false
  for _, event in ipairs(batch.events) do
    id = add_event(
      stream, batch.channel, batch.subject, event[1], event[2], tonumber(event[3]), batch.request
    )
  end
  return id
end
