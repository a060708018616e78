# Rate limits per client IP, answered with 429 and Retry-After.
#
#   /local/fixed    a fixed window in a shared dictionary: exact for one gateway
#                   (every worker of it counts in the same memory)
#   /local/sliding  a sliding window (two fixed windows, the previous one
#                   weighted by how much of it still overlaps) in the same dictionary
#   /fleet/fixed    the fixed window in Redis (INCR + EXPIRE in one pipeline):
#                   every gateway of a fleet pointing at one Redis shares it
#   /fleet/sliding  the sliding window in Redis, as one Lua script (atomic)
#
# Run: redis-server --port 6379 & gateway -f examples/ratelimit.rb
#      for i in $(seq 7); do curl -si localhost:8080/fleet/fixed | head -1; done
shared_dict :limits, size: "10m"
redis :fleet, servers: ["127.0.0.1:6379"], pool: 32, timeout: 0.5

module RateLimit
  LIMIT = 5     # requests per window
  WINDOW = 60   # seconds

  # One window's counter in Redis: KEYS[1] current, KEYS[2] previous.
  SLIDING_LUA = <<~LUA
    local cur = redis.call("INCR", KEYS[1])
    if cur == 1 then redis.call("EXPIRE", KEYS[1], ARGV[1] * 2) end
    local prev = tonumber(redis.call("GET", KEYS[2]) or "0")
    return {cur, prev}
  LUA

  def self.too_many(retry_after)
    [429, { "retry-after" => retry_after.to_s, "content-type" => "text/plain" }, ["too many requests\n"]]
  end

  # [window index, seconds into it]
  def self.window(now)
    [now.to_i / WINDOW, now - (now.to_i / WINDOW) * WINDOW]
  end

  # The sliding estimate: the previous window's count weighted by the share
  # of it that the last WINDOW seconds still cover, plus the current count.
  def self.sliding_count(prev, cur, elapsed)
    prev * (WINDOW - elapsed) / WINDOW.to_f + cur
  end

  def self.local_fixed(req)
    idx, elapsed = window(Time.now.to_f)
    n = Gateway::SharedDict[:limits].incr("f:#{req.remote_addr}:#{idx}", 1, ttl: WINDOW)
    n > LIMIT ? too_many((WINDOW - elapsed).ceil) : nil
  end

  def self.local_sliding(req)
    dict = Gateway::SharedDict[:limits]
    idx, elapsed = window(Time.now.to_f)
    cur = dict.incr("s:#{req.remote_addr}:#{idx}", 1, ttl: WINDOW * 2)
    prev = dict.get("s:#{req.remote_addr}:#{idx - 1}") || 0
    sliding_count(prev, cur, elapsed) > LIMIT ? too_many((WINDOW - elapsed).ceil) : nil
  end

  def self.fleet_fixed(req)
    idx, elapsed = window(Time.now.to_f)
    key = "rl:f:#{req.remote_addr}:#{idx}"
    n, = Async::Redis[:fleet].pipeline { |p| p.incr(key); p.expire(key, WINDOW) }
    n > LIMIT ? too_many((WINDOW - elapsed).ceil) : nil
  end

  def self.fleet_sliding(req)
    idx, elapsed = window(Time.now.to_f)
    base = "rl:s:#{req.remote_addr}:"
    cur, prev = Async::Redis[:fleet].eval(SLIDING_LUA, ["#{base}#{idx}", "#{base}#{idx - 1}"], [WINDOW])
    sliding_count(prev, cur, elapsed) > LIMIT ? too_many((WINDOW - elapsed).ceil) : nil
  end
end

server listen: 8080, workers: 2 do
  location "/local/fixed", access: ->(req) { RateLimit.local_fixed(req) } do "ok\n" end
  location "/local/sliding", access: ->(req) { RateLimit.local_sliding(req) } do "ok\n" end
  location "/fleet/fixed", access: ->(req) { RateLimit.fleet_fixed(req) } do "ok\n" end
  location "/fleet/sliding", access: ->(req) { RateLimit.fleet_sliding(req) } do "ok\n" end
end
