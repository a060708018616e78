# frozen_string_literal: true

# Rake tasks for tools/bench/ (loaded by the Rakefile). See docs/bench.md.
# Each task loads tools/bench/FILE.rb and runs GatewayBench::CLASS with the
# environment; the binary under test is build/gateway unless GATEWAY_BIN (or,
# for the base-vs-new comparisons, NEW) names another.
module GatewayBenchTasks
  extend Rake::DSL

  ROOT = File.expand_path('../..', __dir__)

  # A base-vs-new task (binary: 'NEW') builds build/gateway only when it is
  # the binary under test.
  def self.define(name, file, klass, binary: 'GATEWAY_BIN')
    task name do
      Rake::Task[:build].invoke unless binary == 'NEW' && ENV['NEW'] && !ENV['NEW'].empty?
      require_relative file
      env = ENV.to_h
      env[binary] ||= File.expand_path(BUILD.binary(:default))
      GatewayBench.const_get(klass).new(root: ROOT, env: env).run
    rescue GatewayBench::Error => e
      abort "bench:#{name}: #{e.message}"
    end
  end
end

namespace :bench do
  desc 'W1-W3 against their peers (WORKLOADS=w1,w2,w3): W1 examples/async.rb non-blocking and blocking vs the C probe ' \
       'and nginx + Lua, W2 Ruby "ok" vs nginx return 200, W3 proxy_pass vs nginx proxy_pass (keepalive); wrk -t1 -c100, ' \
       'median of ROUNDS=3 alternating runs of DURATION=5 s; writes build/bench/seed.{md,json}'
  GatewayBenchTasks.define(:seed, 'seed', :Seed)
  task seed: 'bench:probe_build'

  { w1: 'W1 the seed (examples/async.rb) vs the C probe and nginx + Lua', w2: 'W2 hello vs nginx return 200',
    w3: 'W3 proxy vs nginx proxy_pass' }.each do |w, what|
    desc "bench:seed WORKLOADS=#{w}: #{what}"
    task w do
      ENV['WORKLOADS'] = w.to_s
      Rake::Task['bench:seed'].invoke
    end
  end

  desc 'Idle keep-alive connections: worker RSS per connection, gateway vs nginx vs h2o ' \
       '(IDLE_CONNS=5000); writes build/bench/idle.{md,json}'
  GatewayBenchTasks.define(:idle, 'idle_conns', :IdleConns)

  desc 'No-slowdown check: BASE=old/gateway vs NEW (build/gateway) in alternating pairs (PAIRS=3), ' \
       'W2 hello and W3 proxy; writes build/bench/paired.{md,json}'
  GatewayBenchTasks.define(:paired, 'paired', :Paired, binary: 'NEW')

  desc 'PROXY protocol: gateway CPU per request, plain vs proxy_protocol: true, both through HAProxy (send-proxy-v2), ' \
       'keep-alive and a connection per request (PAIRS=3, DURATION=5); writes build/bench/proxy_protocol.{md,json}'
  GatewayBenchTasks.define(:proxy_protocol, 'proxy_protocol', :ProxyProtocol)

  desc 'Instructions per request (valgrind callgrind) of BASE=old/gateway and NEW (build/gateway): ' \
       'hello, status, proxy, async (N=2000 requests, WORKLOADS=..., KEEP=dir for the dumps)'
  GatewayBenchTasks.define(:instructions, 'instructions', :Instructions, binary: 'NEW')

  desc 'Instructions (valgrind callgrind) per TLS handshake, HTTP/2 request and HTTP/1.1 static request, gateway vs nginx vs h2o in ' \
       'one run: ab handshakes (HANDSHAKES=300), h2load -c10 -m10 h2c/static/TLS and --h1 static (N=20000; SERVERS=, WORKLOADS=, ' \
       'KEEP=dir); writes build/bench/h2_instructions.{md,json}'
  GatewayBenchTasks.define(:h2_instructions, 'h2_instructions', :H2Instructions)

  desc 'Instructions (valgrind callgrind) per proxied WebSocket echo, gateway vs nginx in one run ' \
       '(WS_CONNS=20, WS_SIZE=64, DURATION=6, KEEP=dir); writes build/bench/ws_instructions.{md,json}'
  GatewayBenchTasks.define(:ws_instructions, 'ws_instructions', :WsInstructions)

  desc 'Static files: W4 0-byte and 100-byte files (wrk -c100/-c300, h2load --h1) and a 100 MB file (wrk -c4), ' \
       'gateway vs nginx vs h2o (DURATION=5); writes build/bench/static.{md,json}'
  GatewayBenchTasks.define(:static, 'static', :Static)

  desc 'HTTP/2 and TLS: W5 h2c (h2load -c100 -m100, H2_REQUESTS=200000) gateway vs nginx vs h2o, ' \
       'W5 over TLS, TLS handshakes (ab, HANDSHAKES=5000) vs nginx; writes build/bench/h2.{md,json}'
  GatewayBenchTasks.define(:h2, 'h2', :H2)

  desc 'Scripted handlers vs nginx + Lua (lua-cjson): a 4 KB JSON body parsed, transformed and answered, ' \
       'server CPU µs/request (ROUNDS=3, DURATION=5); writes build/bench/script.{md,json}'
  GatewayBenchTasks.define(:script, 'script', :Script, binary: 'NEW')

  desc 'W6 FastCGI: php-fpm echo behind the gateway vs nginx (TCP and unix socket, wrk -c16/-c100, ROUNDS=3), ' \
       'and the four-way table (direct, proxy_pass, FastCGI TCP, FastCGI unix); writes build/bench/fastcgi.{md,json}'
  GatewayBenchTasks.define(:fastcgi, 'fastcgi', :FastCGI)

  desc 'One Redis GET per request (wrk -t1 -c100): gateway Async::Redis vs its W2 hello vs OpenResty ' \
       '(cosocket RESP client, tools/bench/resp.lua); writes build/bench/data.md'
  GatewayBenchTasks.define(:data, 'data', :Data)

  desc 'All cores: W2 hello (wrk -t1 -c100) with 1 worker vs 2 workers, shared listener vs SO_REUSEPORT, ' \
       'with and without cpu_affinity: :auto: CPU µs/req and requests per worker (DURATION=5 ROUNDS=3); ' \
       'writes build/bench/cores.md'
  GatewayBenchTasks.define(:cores, 'cores', :Cores)

  desc 'WebSocket echo through proxy_pass, gateway vs nginx (WS_CONNS=100, WS_SIZE=64, DURATION=5); ' \
       'writes build/bench/ws.{md,json}'
  GatewayBenchTasks.define(:ws, 'ws', :WebSocket)

  desc 'Compression on the fly: a 10 KB JSON through proxy_pass, gzip level 1, gateway vs nginx (gzip on), with the ' \
       "gateway's br and zstd beside, server CPU µs/request (CONNS=50, DURATION=5, ROUNDS=2); writes build/bench/compress.{md,json}; " \
       'COUNT=instructions: Ir per request under callgrind, in zlib and outside (N=5000), build/bench/compress_instructions.{md,json}'
  GatewayBenchTasks.define(:compress, 'compress', :Compress)

  desc 'Response cache hits through proxy_pass, gateway cache: vs nginx proxy_cache (valid 600 s): a 1 KB body ' \
       '(wrk -t1 -c100: req/s, server CPU µs/request) and a 1 MB body (bytes/s) (CONNS=100, BIG_CONNS=10, DURATION=5, ' \
       'ROUNDS=2); writes build/bench/cache.{md,json}'
  GatewayBenchTasks.define(:cache, 'cache', :Cache)

  desc 'HTTPS upstream: proxy_pass https:// over kept-alive TLS connections, gateway vs nginx (keepalive, ' \
       'proxy_ssl_session_reuse), server CPU µs/request (CONNS=50, DURATION=5, ROUNDS=3); writes build/bench/https_upstream.{md,json}'
  GatewayBenchTasks.define(:https_upstream, 'https_upstream', :HTTPSUpstream)

  desc 'Runaway neighbour: W2 hello on / (wrk -t1 -c100) with and without a `loop {}` request a second under ' \
       'cpu_limit (CPU_LIMIT=0.1, ROUNDS=3, DURATION=5); writes build/bench/runaway.{md,json}'
  GatewayBenchTasks.define(:runaway, 'runaway', :Runaway)

  desc 'gRPC unary calls (h2load, GRPC_CALLS=20000) directly to a Python gRPC server, through the gateway ' \
       '(grpc_pass:) and through nginx (grpc_pass): calls/s and proxy CPU µs/call; writes build/bench/grpc.{md,json}'
  GatewayBenchTasks.define(:grpc, 'grpc', :GRPC)

  desc "The tarantool study: one Tarantool (examples/tarantool.lua) over HTTP (directly, gateway proxy_pass, nginx " \
       'proxy_pass) vs over iproto (gateway Async::Tarantool, with and without a Ruby JSON step), wrk -t1 -c1 .. -c16, ' \
       'req/s and front + Tarantool CPU µs/req (DURATION=3 ROUNDS=2); writes build/bench/tarantool.{md,json}'
  GatewayBenchTasks.define(:tarantool, 'tarantool', :Tarantool)
end
