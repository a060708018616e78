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

  desc 'Instructions per request (valgrind callgrind) of BASE=old/gateway and NEW (build/gateway): ' \
       'hello, status, proxy, async (N=2000 requests, WORKLOADS=..., KEEP=dir for the dumps)'
  task :instructions do
    Rake::Task[:build].invoke unless ENV['NEW'] && !ENV['NEW'].empty?
    require_relative 'instructions'
    env = ENV.to_h
    env['NEW'] ||= File.expand_path(BUILD.binary(:default))
    GatewayBench::Instructions.new(env).run
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
end
