/**
 * The Lua scripts of the Redis quota store: the buckets of quota-store.ts, both windows checked and
 * taken in one atomic call. Each window is one hash: a field per bucket index holding its count, `t`
 * (the sum of the bucket fields, so checking the quota never adds up the buckets) and `o` (no bucket
 * field below this index). Old buckets are deleted as the window moves on, so a hash holds at most the
 * window's bucket count. The time comes from the service (ARGV), never from Redis: tests drive it.
 */

const SHARED = `
local function field(index) return string.format('%d', index) end

-- Deletes the buckets below the window (index < current - n); answers the count and the low mark.
local function prune(key, current, n)
  local cutoff = current - n
  local state = redis.call('HMGET', key, 't', 'o')
  local total = tonumber(state[1])
  if not total then return 0, cutoff end
  local low = tonumber(state[2]) or cutoff
  if low >= cutoff then return total, low end
  local newLow = cutoff
  if cutoff - low > n + 1 then
    -- Idle for longer than the window: look at what is there rather than at every index passed.
    total = 0
    local first = nil
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      local index = tonumber(all[i])
      if index then
        if index < cutoff then
          redis.call('HDEL', key, all[i])
        else
          total = total + tonumber(all[i + 1])
          if not first or index < first then first = index end
        end
      end
    end
    if first then newLow = first end
  else
    for index = low, cutoff - 1 do
      local count = redis.call('HGET', key, field(index))
      if count then
        total = total - tonumber(count)
        redis.call('HDEL', key, field(index))
      end
    end
  end
  if total <= 0 then
    redis.call('DEL', key)
    return 0, cutoff
  end
  redis.call('HSET', key, 't', field(total), 'o', field(newLow))
  return total, newLow
end

-- When (ms) the need-th oldest counted request stops counting: the end of its bucket's counting time.
-- 0 when nothing is counted, -1 when fewer than need are (no expiry makes room).
local function freeAt(key, total, low, need, current, n, bucketMs)
  if total == 0 then return 0 end
  if need > total then return -1 end
  local seen = 0
  for index = low, current + n do
    local count = redis.call('HGET', key, field(index))
    if count then
      -- Nothing below the first bucket found: move the low mark up so the next walk starts there.
      if seen == 0 and index > low then redis.call('HSET', key, 'o', field(index)) end
      seen = seen + tonumber(count)
      if seen >= need then return (index + n + 1) * bucketMs end
    end
  end
  return -1
end
`

/**
 * KEYS: the hour hash, the day hash (one hash tag: one Cluster slot).
 * ARGV: now (ms), take ('1' takes a slot when both windows have room, '0' only looks), then for the hour
 * and the day: limit, bucket length (ms), buckets counted besides the current one; then, optionally, how many
 * slots to take (default 1: a bulk create takes as many as fit, up to that many, in one call).
 * Returns: the slots taken (1/0 for a single one: allowed), then per window: bucket index, count, free-at (ms).
 */
export const RESERVE_SCRIPT = `${SHARED}
local now = tonumber(ARGV[1])
local taking = 0
if ARGV[2] == '1' then taking = tonumber(ARGV[9]) or 1 end
local windows = {}
for i = 1, 2 do
  local w = { key = KEYS[i], limit = tonumber(ARGV[i * 3]), bucketMs = tonumber(ARGV[i * 3 + 1]), n = tonumber(ARGV[i * 3 + 2]) }
  w.current = math.floor(now / w.bucketMs)
  w.total, w.low = prune(w.key, w.current, w.n)
  taking = math.min(taking, w.limit - w.total)
  windows[i] = w
end
if taking < 0 then taking = 0 end
local allowed = taking >= 1
local result = { taking }
for i = 1, 2 do
  local w = windows[i]
  if allowed then
    redis.call('HINCRBY', w.key, field(w.current), taking)
    redis.call('HINCRBY', w.key, 't', taking)
    if w.total == 0 or w.current < w.low then
      w.low = math.min(w.low, w.current)
      redis.call('HSET', w.key, 'o', field(w.low))
    end
    -- Kept until the last bucket stops counting (window + one bucket), plus one bucket of margin.
    redis.call('PEXPIRE', w.key, (w.n + 2) * w.bucketMs)
    w.total = w.total + taking
  end
  result[#result + 1] = w.current
  result[#result + 1] = w.total
  result[#result + 1] = freeAt(w.key, w.total, w.low, math.max(1, w.total - w.limit + 1), w.current, w.n, w.bucketMs)
end
return result
`

/**
 * KEYS: the hour hash, the day hash. ARGV: the bucket each counted the reservation in.
 * A bucket that has stopped counting (deleted) is left alone: there is nothing to give back.
 */
export const REFUND_SCRIPT = `
for i = 1, 2 do
  local key, bucket = KEYS[i], ARGV[i]
  local count = tonumber(redis.call('HGET', key, bucket))
  if count and count > 0 then
    if count == 1 then redis.call('HDEL', key, bucket) else redis.call('HINCRBY', key, bucket, -1) end
    if redis.call('HINCRBY', key, 't', -1) <= 0 then redis.call('DEL', key) end
  end
end
return 1
`
