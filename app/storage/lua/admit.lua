-- An admission pass: give a place back, withdraw a superseded waiting operation, admit
-- waiting operations while places are free, and tell those still waiting where they are.
-- Any worker runs it: when an operation of its ends, when it queues a delete, and on
-- every scan (which also heals what a worker that died between two steps left).
-- KEYS[1]: places in progress; KEYS[2]: the queue; KEYS[3]: waiting operations by
-- workload; KEYS[4]: groups; KEYS[5]: the queue's state; KEYS[6]: pending operations.
-- ARGV[1]: the number of places (0: no limit, admit everything waiting); ARGV[2]: the key
-- prefix; ARGV[3]: the events channel; ARGV[4]: the position event ('{position}' in it
-- becomes the number); ARGV[5]: the event saying the wait is over; ARGV[6]: a workload
-- whose place to give back if its operation ARGV[7] is no longer current ("": none);
-- ARGV[8]: a workload whose waiting operation to withdraw if it is no longer current
-- ("": none).
-- Returns the workload keys admitted, in order.
local a = admission_context(1, {
  prefix = ARGV[2], channel = ARGV[3], position = ARGV[4], started = ARGV[5],
})
if ARGV[6] ~= '' and redis.call('HGET', a.running, ARGV[6]) == ARGV[7] then
  if not admission_current(a, ARGV[6], ARGV[7]) then
    redis.call('HDEL', a.running, ARGV[6])
  end
end
local moved = false
if ARGV[8] ~= '' then
  local held = redis.call('HGET', a.waiting, ARGV[8])
  local member = held and string.match(held, '^%d+\n(.*)$')
  if member then
    local _, wkey, id = admission_entry(member)
    if not admission_current(a, wkey, id) then
      admission_forget(a, member)
      moved = true
    end
  end
end
if redis.call('ZCARD', a.queue) == 0 then
  return {}
end
local admitted = admission_admit(a, tonumber(ARGV[1]), KEYS[6])
if moved or #admitted > 0 then
  admission_announce(a)
end
return admitted
