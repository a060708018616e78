# examples/fleet/fleet.rb - one gateway of a fleet: several identical
# instances behind HAProxy (haproxy.cfg next to this file), each running
# this same file (docs/fleet.md).
#
#   8081  the public listener: HAProxy connects here with send-proxy-v2, so
#         every connection starts with a PROXY header naming the client;
#         only HAProxy (proxy_protocol_from) may connect
#   9081  the status page, for HAProxy's health checks (`check port 9081`)
#         and Prometheus; plain HTTP, no PROXY header
#
# Shared and per instance: the upstream group's health state is shared by
# the workers of one instance (each instance checks its upstreams itself);
# the shared dictionary :local counts per instance (every worker of it);
# counters that span the fleet live in Redis, found through its Sentinels
# (a master, a replica and three sentinels watching it as "fleet"), so a
# Redis failover moves every instance to the promoted replica by itself.
#
# Run one instance per machine with the same file:
#   gateway -f examples/fleet/fleet.rb
# (on one machine, give each instance its own ports: the spec does that.)
shared_dict :local, size: "1m"
redis :fleet, sentinels: ["127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"], master_name: "fleet", timeout: 0.5

upstream :app, servers: ["127.0.0.1:9101", "127.0.0.1:9102"], keepalive: 32,
               health_check: { path: "/health", interval: 1.0, timeout: 0.5, fails: 2, passes: 2, expect: 200 }

server listen: "127.0.0.1:8081", workers: 2, proxy_protocol: true, proxy_protocol_from: ["127.0.0.1", "10.0.0.0/8"] do
  # Who am I talking to, and which instance answers (its status port names it).
  location "/whoami" do |req|
    n = Gateway::SharedDict[:local].incr("whoami", 1)
    "#{req.remote_addr} instance=9081 seen=#{n}\n"
  end

  # A limit for the whole fleet: 100 requests a minute per client address,
  # counted in Redis. If Redis cannot answer, this limiter fails open (the
  # request goes through and says so); a strict one would answer 503.
  location "/limited" do |req|
    begin
      window = Time.now.to_i / 60
      n, = Async::Redis[:fleet].pipeline { |p| p.incr("rl:#{req.remote_addr}:#{window}"); p.expire("rl:#{req.remote_addr}:#{window}", 120) }
      n > 100 ? [429, { "retry-after" => "60" }, ["too many requests\n"]] : "count=#{n}\n"
    rescue Gateway::UpstreamError, Gateway::TimeoutError
      "count=unknown (redis unavailable: not limited)\n"
    end
  end

  location "/", proxy_pass: "http://app"
end

server listen: "127.0.0.1:9081" do
  location "/status", status: true
end
