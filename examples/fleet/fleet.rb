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
# counters that must span the fleet belong in Redis (examples/ratelimit.rb).
#
# Run one instance per machine with the same file:
#   gateway -f examples/fleet/fleet.rb
# (on one machine, give each instance its own ports: the spec does that.)
shared_dict :local, size: "1m"

upstream :app, servers: ["127.0.0.1:9101", "127.0.0.1:9102"], keepalive: 32,
               health_check: { path: "/health", interval: 1.0, timeout: 0.5, fails: 2, passes: 2, expect: 200 }

server listen: "127.0.0.1:8081", workers: 2, proxy_protocol: true, proxy_protocol_from: ["127.0.0.1", "10.0.0.0/8"] do
  # Who am I talking to, and which instance answers (its status port names it).
  location "/whoami" do |req|
    n = Gateway::SharedDict[:local].incr("whoami", 1)
    "#{req.remote_addr} instance=9081 seen=#{n}\n"
  end

  location "/", proxy_pass: "http://app"
end

server listen: "127.0.0.1:9081" do
  location "/status", status: true
end
