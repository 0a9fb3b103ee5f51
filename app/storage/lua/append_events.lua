-- Append events to a stream.
-- KEYS[1]: the event stream.
-- ARGV: add_events' arguments.
-- Returns the last entry's id.
return add_events(KEYS[1], 1)
