# frozen_string_literal: true

# `rake bench:proxy_protocol` (standalone: `ruby tools/bench/proxy_protocol.rb`):
# what the PROXY protocol costs the gateway (docs/fleet.md). One HAProxy
# (Debian's, mode tcp) in front of two gateways in alternating runs, plain
# and PROXY (`proxy_protocol: true`, HAProxy `send-proxy-v2`), same config
# otherwise: W2 hello, a Ruby location answering "hello".
#
#   keep-alive   wrk -t1 -c50: one header per connection, amortised
#   close        wrk -t1 -c20 -H "Connection: close": a new connection (and
#                header) per request, the worst case
#
# The gateway is pinned to SERVER_CPU (1), HAProxy and wrk to LOAD_CPU (0);
# each run holds CPU_LOCK. Reported per run: req/s and the gateway's CPU µs
# per request (utime+stime of its master and worker over the measured
# window / requests); then per pair the ratio proxy/plain and its median per
# load. Writes build/bench/proxy_protocol.{md,json}.
#
# Environment: GATEWAY_BIN (build/gateway), PAIRS (3), DURATION (5), WARMUP
# (1), SERVER_CPU, LOAD_CPU, CPU_LOCK, LOCK_WAIT, BENCH_OUT.

require 'net/http'
require_relative 'common'

module GatewayBench
  class ProxyProtocol
    include Util

    LOADS = [['keep-alive', %w[-t1 -c50]], ['close', %w[-t1 -c20 -H Connection:\ close]]].freeze
    SIDES = %i[plain proxy].freeze

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @pairs = env_int(env, 'PAIRS', 3)
      @duration = env_int(env, 'DURATION', 5)
      @warmup = env_int(env, 'WARMUP', 1)
      @run = Runner.new(root: root, env: env, tag: 'proxy_protocol')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      raise Error, 'haproxy is not installed (setup.sh installs it)' unless command?('haproxy')

      Util.ensure_pkgs(%w[wrk], log: method(:log)) unless command?('wrk')
      runs = []
      load_before = File.read('/proc/loadavg').split.first(3).join(' ')
      t0 = monotonic
      begin
        @pairs.times do |i|
          SIDES.each { |side| runs.concat(measure_side(i + 1, side)) }
        end
      ensure
        @run.stop_all
      end
      load_after = File.read('/proc/loadavg').split.first(3).join(' ')
      res = { meta: { binary: @bin, pairs: @pairs, duration_s: @duration, seconds: (monotonic - t0).round(1),
                      loadavg_before: load_before, loadavg_after: load_after, nproc: `nproc`.strip },
              runs: runs, summary: summarize(runs) }
      write(res)
      res
    end

    def gateway_conf(side, port)
      <<~RUBY
        server listen: "#{HOST}:#{port}", workers: 1#{side == :proxy ? ', proxy_protocol: true' : ''} do
          location "/hello" do
            "hello"
          end
        end
      RUBY
    end

    def start_haproxy(side, gw_port)
      port = free_port
      dir = @run.scratch("haproxy-#{side}")
      cfg = File.join(dir, 'haproxy.cfg')
      File.write(cfg, <<~CFG)
        global
          maxconn 4096
        defaults
          mode tcp
          timeout connect 5s
          timeout client 30s
          timeout server 30s
        frontend f
          bind #{HOST}:#{port}
          default_backend b
        backend b
          server g #{HOST}:#{gw_port}#{side == :proxy ? ' send-proxy-v2' : ''}
      CFG
      srv = @run.start("haproxy-#{side}", ['haproxy', '-db', '-f', cfg], port: port, dir: dir, binary: `sh -c 'command -v haproxy'`.strip)
      # Runner#start pins to the server CPU; HAProxy is load-side: move it.
      system('taskset', '-pc', @run.load_cpu.to_s, srv.pid.to_s, out: File::NULL)
      srv
    end

    def pids_of(srv)
      [srv.pid] + descendants(srv.pid).select { |k| runs?(k, srv.binary) }
    end

    def measure_side(pair, side)
      gw_port = free_port
      gw = @run.start_gateway("gw-#{side}", @bin, gateway_conf(side, gw_port), gw_port)
      hp = start_haproxy(side, gw_port)
      res = Net::HTTP.start(HOST, hp.port, open_timeout: 2, read_timeout: 5) { |h| h.get('/hello') }
      raise Error, "#{side}: GET /hello through HAProxy answered #{res.code} #{res.body.inspect}" unless res.body == 'hello'

      url = "http://#{HOST}:#{hp.port}/hello"
      LOADS.map do |id, args|
        r = @run.with_cpu_lock { measure_load(gw, url, args) }
        log format('pair %d %-5s %-10s %8.0f req/s  gateway %6.1f µs/req%s', pair, side, id, r[:rps] || 0,
                   r[:gw_us] || 0, r[:failures].to_i.positive? ? "  #{Load::FAIL_HEAD}: #{Load.cells(r)}" : '')
        { pair: pair, side: side.to_s, load: id, wrk: "wrk #{args.join(' ')} -d#{@duration}s" }.merge(r)
      end
    ensure
      @run.stop(hp) if hp
      @run.stop(gw) if gw
    end

    def measure_load(gw, url, args)
      @run.run_wrk(args, url, @warmup) if @warmup.positive?
      sleep 0.5
      pids = pids_of(gw)
      t0 = pids.to_h { |p| [p, ticks(p)] }
      w = @run.run_wrk(args, url, @duration)
      t1 = pids.to_h { |p| [p, ticks(p)] }
      p = Runner.parse_wrk(w[:out])
      reqs = p[:requests].to_i
      tk = t0.sum { |pid, t| t && t1[pid] ? t1[pid] - t : 0 }
      { rps: p[:rps]&.round(1), requests: reqs, **p.slice(:errors, :non2xx, :timeouts, :failures),
        gw_us: reqs.positive? ? (tk * 1e6 / clk_tck / reqs).round(2) : nil }
    end

    def summarize(runs)
      LOADS.to_h do |id, _|
        ratios = (1..@pairs).map do |i|
          a = runs.find { |r| r[:pair] == i && r[:side] == 'plain' && r[:load] == id }
          b = runs.find { |r| r[:pair] == i && r[:side] == 'proxy' && r[:load] == id }
          a && b && a[:gw_us] && b[:gw_us] ? (b[:gw_us] / a[:gw_us]).round(4) : nil
        end
        fails = Load.sum(runs.select { |r| r[:load] == id })
        [id, { ratios: ratios, median_ratio: median(ratios), **fails,
               plain_us: median(runs.select { |r| r[:load] == id && r[:side] == 'plain' }.map { |r| r[:gw_us] }),
               proxy_us: median(runs.select { |r| r[:load] == id && r[:side] == 'proxy' }.map { |r| r[:gw_us] }) }]
      end
    end

    def write(res)
      md = +"# PROXY protocol: gateway CPU per request, plain vs proxy_protocol: true, both through HAProxy\n\n"
      md << "#{res[:meta][:nproc]} CPUs, load average #{res[:meta][:loadavg_before]} before, #{res[:meta][:loadavg_after]} after; " \
            "gateway on CPU #{@run.server_cpu}, HAProxy and wrk on CPU #{@run.load_cpu}; #{@pairs} alternating pairs of #{@duration} s.\n\n"
      md << "req/s counts 2xx answers only; each side's #{Load::FAIL_HEAD} (docs/bench.md); a run with any is marked ⚠.\n\n"
      md << "| run | load | plain req/s | plain µs/req | plain #{Load::FAIL_HEAD} | proxy req/s | proxy µs/req | " \
            "proxy #{Load::FAIL_HEAD} | proxy/plain |\n|---|---|--:|--:|#{Load::FAIL_ALIGN}|--:|--:|#{Load::FAIL_ALIGN}|--:|\n"
      (1..@pairs).each do |i|
        LOADS.each do |id, _|
          a = res[:runs].find { |r| r[:pair] == i && r[:side] == 'plain' && r[:load] == id }
          b = res[:runs].find { |r| r[:pair] == i && r[:side] == 'proxy' && r[:load] == id }
          next unless a && b

          md << "| #{Load.label(i, Load.sum([a, b]))} | #{id} | #{a[:rps]} | #{a[:gw_us]} | #{Load.cells(a)} | #{b[:rps]} | " \
                "#{b[:gw_us]} | #{Load.cells(b)} | #{a[:gw_us] && b[:gw_us] ? (b[:gw_us] / a[:gw_us]).round(3) : '-'} |\n"
        end
      end
      md << "\n"
      res[:summary].each do |id, s|
        md << "- #{id}: median proxy/plain #{s[:median_ratio]} (plain #{s[:plain_us]} µs, proxy #{s[:proxy_us]} µs per request), " \
              "#{Load::FAIL_HEAD}: #{Load.cells(s)}\n"
      end
      @run.write_report('proxy_protocol', md, res)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  begin
    GatewayBench::ProxyProtocol.new(root: File.expand_path('../..', __dir__)).run
  rescue GatewayBench::Error => e
    abort "bench:proxy_protocol: #{e.message}"
  end
end
