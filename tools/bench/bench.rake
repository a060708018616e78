# frozen_string_literal: true

# Rake tasks for tools/bench/ (loaded by the Rakefile). See docs/bench.md.
#
#   rake bench:idle                       worker RSS per idle keep-alive connection:
#                                         gateway (Ruby and non-Ruby), nginx, h2o
#   rake bench:paired BASE=old/gateway    alternating base/new pairs, W2 hello + W3 proxy
#   rake bench:instructions BASE=old/gateway
#                                         instructions per request (callgrind), base vs new
namespace :bench do
  desc 'Idle keep-alive connections: worker RSS per connection, gateway vs nginx vs h2o ' \
       '(IDLE_CONNS=5000); writes build/bench/idle.{md,json}'
  task idle: :build do
    require_relative 'idle_conns'
    env = ENV.to_h
    env['GATEWAY_BIN'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::IdleConns.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:idle: #{e.message}"
  end

  desc 'No-slowdown check: BASE=old/gateway vs NEW (build/gateway) in alternating pairs (PAIRS=3), ' \
       'W2 hello and W3 proxy; writes build/bench/paired.{md,json}'
  task :paired do
    # Build build/gateway only when it is the binary under test.
    Rake::Task[:build].invoke unless ENV['NEW'] && !ENV['NEW'].empty?
    require_relative 'paired'
    env = ENV.to_h
    env['NEW'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Paired.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:paired: #{e.message}"
  end

  desc 'Static files: W4 0-byte and 100-byte files (wrk -c100/-c300, h2load --h1) and a 100 MB file (wrk -c4), ' \
       'gateway vs nginx vs h2o (DURATION=5); writes build/bench/static.{md,json}'
  task static: :build do
    require_relative 'static'
    env = ENV.to_h
    env['GATEWAY_BIN'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Static.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:static: #{e.message}"
  end

  desc 'Instructions per request (valgrind callgrind) of BASE=old/gateway and NEW (build/gateway): ' \
       'hello, status, proxy, async (N=2000 requests, WORKLOADS=..., KEEP=dir for the dumps)'
  task :instructions do
    Rake::Task[:build].invoke unless ENV['NEW'] && !ENV['NEW'].empty?
    require_relative 'instructions'
    env = ENV.to_h
    env['NEW'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Instructions.new(env).run
  end

  desc 'HTTP/2 and TLS: W5 h2c (h2load -c100 -m100, H2_REQUESTS=200000) gateway vs nginx vs h2o, ' \
       'W5 over TLS, TLS handshakes (ab, HANDSHAKES=5000) vs nginx; writes build/bench/h2.{md,json}'
  task h2: :build do
    require_relative 'h2'
    env = ENV.to_h
    env['GATEWAY_BIN'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::H2.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:h2: #{e.message}"
  end
end

# bench:script (tools/bench/script.rb): issue 13's scripting targets against nginx + Lua.
namespace :bench do
  desc 'Scripted handlers vs nginx + Lua (lua-cjson): a 4 KB JSON body parsed, transformed and answered, ' \
       'server CPU µs/request (ROUNDS=3, DURATION=5); writes build/bench/script.{md,json}'
  task :script do
    Rake::Task[:build].invoke unless ENV['NEW'] && !ENV['NEW'].empty?
    require_relative 'script'
    env = ENV.to_h
    env['NEW'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Script.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:script: #{e.message}"
  end
end

namespace :bench do
  desc 'W6 FastCGI: php-fpm echo behind the gateway vs nginx (TCP and unix socket, wrk -c16/-c100), ' \
       'and the four-way table (direct, proxy_pass, FastCGI TCP, FastCGI unix); writes build/bench/fastcgi.{md,json}'
  task fastcgi: :build do
    require_relative 'fastcgi'
    env = ENV.to_h
    env['GATEWAY_BIN'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::FastCGI.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:fastcgi: #{e.message}"
  end

  desc 'One Redis GET per request (wrk -t1 -c100): gateway Async::Redis vs its W2 hello vs OpenResty ' \
       '(cosocket RESP client, tools/bench/resp.lua); writes build/bench/data.md'
  task data: :build do
    require_relative 'data'
    env = ENV.to_h
    env['GATEWAY_BIN'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Data.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:data: #{e.message}"
  end

  desc "The tarantool study's matrix: gateway iproto (Async::Tarantool) vs gateway proxy_pass vs nginx proxy_pass " \
       'to one HTTP backend, wrk -t1 -c1 .. -t8 -c16; writes build/bench/tarantool.md'
  task tarantool: :build do
    require_relative 'tarantool'
    env = ENV.to_h
    env['GATEWAY_BIN'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Tarantool.new(root: File.expand_path('../..', __dir__), env: env).run
  rescue GatewayBench::Error => e
    abort "bench:tarantool: #{e.message}"
  end
end
