/**
 * The Lua scripts of the Redis quota store: the sliding-window log of quota-store.ts, both windows checked and
 * taken in one atomic call. A subject's log is one sorted set: a member per request taken (its id), scored by the
 * moment it was taken (ms). Members older than the day are deleted as the log is read; the hour counts the
 * members younger than an hour. The time is Redis's own (TIME): every instance's requests are logged by one clock,
 * so one whose clock runs ahead cannot make the others' waits look shorter than they are. Tests give theirs (ARGV).
 */

/**
 * KEYS: the log. ARGV: now (ms; empty: Redis's time), take ('1' takes slots when both windows have room, '0' only looks), the hour's
 * limit and length (ms), the day's limit and length (ms), how many slots to take (a bulk create takes as many as
 * fit, up to that many, in one call), and the prefix of the ids (`<prefix>:1`, `<prefix>:2`…).
 * Returns: the slots taken, then per window: the count, free-at (ms; see WindowCount); then the time used (ms).
 */
export const RESERVE_SCRIPT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local hourLimit, hourMs = tonumber(ARGV[3]), tonumber(ARGV[4])
local dayLimit, dayMs = tonumber(ARGV[5]), tonumber(ARGV[6])
-- A request taken at t counts while now - t < the window: at t + window it stops.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - dayMs)
local hourStart = '(' .. string.format('%d', now - hourMs)
local day = redis.call('ZCARD', key)
local hour = redis.call('ZCOUNT', key, hourStart, '+inf')
local taking = 0
if ARGV[2] == '1' then taking = math.max(0, math.min(tonumber(ARGV[7]), hourLimit - hour, dayLimit - day)) end
-- Should the clock step back, a request counts from the newest time instead (longer, never shorter), as in the
-- in-process store.
local at = now
local newest = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
if #newest > 0 then at = math.max(now, tonumber(newest[2])) end
for i = 1, taking do redis.call('ZADD', key, at, ARGV[8] .. ':' .. i) end
if taking > 0 then
  hour = hour + taking
  day = day + taking
  -- Kept a day after the newest request, which is when the last of them stops counting.
  redis.call('PEXPIRE', key, dayMs + 1000)
end
-- When the need-th oldest request the window counts stops counting.
local function freeAt(used, limit, from, windowMs)
  if used == 0 then return 0 end
  local need = math.max(1, used - limit + 1)
  if need > used then return -1 end
  local found = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
  if #found == 0 then return -1 end
  return tonumber(found[2]) + windowMs
end
return { taking, hour, freeAt(hour, hourLimit, hourStart, hourMs), day, freeAt(day, dayLimit, '-inf', dayMs), now }
`

/**
 * KEYS: the log. ARGV: the ids to give back (those no longer in the log are left alone), a thousand at a time: Lua
 * unpacks at most about 8,000 values at once.
 */
export const REFUND_SCRIPT = `
for i = 1, #ARGV, 1000 do redis.call('ZREM', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return 1
`
