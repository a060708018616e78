# frozen_string_literal: true

# `rake bench:cores`: W2 hello ("ok" from a Ruby handler) with wrk -t1 -c100
# keep-alive connections against one server on all cores, side by side in
# one run, ROUNDS (3) rounds in alternation:
#
#   1 worker                    workers: 1
#   2 workers, shared listener  workers: 2, reuseport: false, cpu_affinity: :auto
#   2 workers, SO_REUSEPORT     workers: 2, reuseport: true,  cpu_affinity: :auto
#   (and both 2-worker modes without cpu_affinity)
#
# Nothing is pinned by taskset (the workers must use both cores; wrk shares
# them), so compare cost and balance, not throughput: the server's CPU µs per
# request (utime+stime of master and workers over the DURATION (5) s window /
# requests) and each worker's share of the window's requests and accepted
# connections, read from the status page before and after. The imbalance is
# the largest distance of a worker's share from the even share, relative to
# it (0%: even; the issue's target is within 10%), for the requests and for
# the accepted connections: SO_REUSEPORT's hash makes the connection split
# binomial (one standard deviation is 1/sqrt(CONNS) of the even share: 10% at
# the default CONNS=100, 3% at 1000), while the request split also follows
# which worker shares a core with wrk. Writes build/bench/cores.md.
require_relative 'common'

module GatewayBench
  class Cores
    include Util

    VARIANTS = [
      ['1 worker', 'workers: 1, reuseport: false'],
      ['2 workers, shared listener, affinity', 'workers: 2, reuseport: false, cpu_affinity: :auto'],
      ['2 workers, SO_REUSEPORT, affinity', 'workers: 2, reuseport: true, cpu_affinity: :auto'],
      ['2 workers, shared listener', 'workers: 2, reuseport: false'],
      ['2 workers, SO_REUSEPORT', 'workers: 2, reuseport: true']
    ].freeze

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @duration = env_int(env, 'DURATION', 5)
      @rounds = env_int(env, 'ROUNDS', 3)
      @conns = env_int(env, 'CONNS', 100)
      @run = Runner.new(root: root, env: env, tag: 'cores')
    end

    def log(msg)
      @run.log(msg)
    end

    def conf(port, opts)
      <<~RUBY
        server listen: "#{HOST}:#{port}", #{opts} do
          location "/status", status: true
          location "/hello" do "ok" end
        end
      RUBY
    end

    # { index => [requests, connections_accepted] } of the current generation.
    def per_worker(port)
      body = Net::HTTP.get(URI("http://#{HOST}:#{port}/status"))
      JSON.parse(body)['workers'].to_h { |w| [w['index'], [w['requests'], w['connections_accepted']]] }
    end

    def imbalance(counts)
      total = counts.sum.to_f
      return 0.0 if total.zero?

      even = total / counts.size
      counts.map { |c| (c - even).abs / even }.max
    end

    def wrk(url, seconds)
      cmd = ['wrk', '-t1', "-c#{@conns}", "-d#{seconds}s", '--latency', url]
      out = IO.popen(cmd, err: %i[child out], &:read)
      raise Error, "wrk failed:\n#{out}" unless $?.success?

      Runner.parse_wrk(out)
    end

    def measure(name, opts)
      port = free_port
      # Runner#start pins to SERVER_CPU: start through it with taskset over every CPU instead.
      srv = @run.start(name.tr(' ,', '-'), ['taskset', '-c', "0-#{Etc.nprocessors - 1}", @bin, '-f',
                                            write_conf(name, port, opts)], port: port, dir: @dir, binary: @bin)
      url = "http://#{HOST}:#{port}/hello"
      body = Net::HTTP.get(URI(url))
      raise Error, "#{name}: /hello answered #{body.inspect}" unless body == 'ok'

      wrk(url, 1)
      sleep 0.3
      pids = [srv.pid] + descendants(srv.pid)
      before = per_worker(port)
      t0 = pids.sum { |p| ticks(p) || 0 }
      w = wrk(url, @duration)
      t1 = pids.sum { |p| ticks(p) || 0 }
      after = per_worker(port)
      raise Error, "#{name}: wrk made no request" unless w[:requests]&.positive?

      reqs = after.keys.sort.map { |i| after[i][0] - before.fetch(i, [0, 0])[0] - 1 }
      accepted = after.keys.sort.map { |i| after[i][1] - before.fetch(i, [0, 0])[1] }
      us = (t1 - t0).to_f / clk_tck * 1e6 / w[:requests]
      r = { rps: w[:rps], us: us, reqs: reqs, accepted: accepted, imbalance: imbalance(reqs),
            conn_imbalance: imbalance(accepted), **w.slice(:errors, :non2xx, :timeouts, :failures) }
      log format('%-38s %9.0f req/s  %5.2f µs/req  requests %-17s (%4.1f%% off even)  connections %s',
                 name, r[:rps], us, reqs.join('/'), r[:imbalance] * 100, accepted.join('/'))
      r
    ensure
      @run.stop(srv) if srv
    end

    def write_conf(name, port, opts)
      @dir = @run.scratch(name.tr(' ,', '-'))
      path = File.join(@dir, 'gateway.rb')
      File.write(path, conf(port, opts))
      @run.gateway_conf_check(@bin, path)
      path
    end

    def run
      require 'net/http'
      require 'etc'
      Util.ensure_pkgs(%w[wrk], log: method(:log))
      results = Hash.new { |h, k| h[k] = [] }
      @run.with_cpu_lock do
        @rounds.times do |i|
          log "round #{i + 1} of #{@rounds}"
          VARIANTS.each { |name, opts| results[name] << measure(name, opts) }
        end
      end
      report(results)
    ensure
      @run.stop_all
    end

    def report(results)
      base = median(results['1 worker'].map { |r| r[:us] })
      lines = ["# bench:cores: W2 hello, wrk -t1 -c#{@conns}, #{@duration} s, median of #{@rounds} rounds, " \
               "#{Etc.nprocessors} CPUs shared with wrk", '',
               "#{Time.now.utc.strftime('%F %H:%M UTC')}, load average #{File.read('/proc/loadavg').split.first(3).join(' ')}; " \
               "command: `wrk -t1 -c#{@conns} -d#{@duration}s --latency URL/hello`. req/s counts successful (2xx) requests " \
               'only; failures are summed over the rounds, a row with any is marked ⚠.', '',
               '| server | req/s | CPU µs/req | vs 1 worker | requests per worker | off even (worst round) | ' \
               "connections per worker | connections off even (worst round) | #{Load::FAIL_HEAD} |",
               "|---|---:|---:|---:|---|---:|---|---:|#{Load::FAIL_ALIGN}|"]
      VARIANTS.each do |name, opts|
        rs = results[name]
        us = median(rs.map { |r| r[:us] })
        mid = rs.min_by { |r| (r[:us] - us).abs }
        fails = Load.sum(rs)
        lines << format('| %s (`%s`) | %.0f | %.2f | %+.1f%% | %s | %.1f%% (%.1f%%) | %s | %.1f%% (%.1f%%) | %s |', Load.label(name, fails), opts,
                        median(rs.map { |r| r[:rps] }), us, (us / base - 1) * 100, mid[:reqs].join(' / '),
                        median(rs.map { |r| r[:imbalance] }) * 100, rs.map { |r| r[:imbalance] }.max * 100,
                        mid[:accepted].join(' / '), median(rs.map { |r| r[:conn_imbalance] }) * 100,
                        rs.map { |r| r[:conn_imbalance] }.max * 100, Load.cells(fails))
      end
      text = lines.join("\n") + "\n"
      File.write(File.join(@run.out_dir, 'cores.md'), text)
      puts text
    end
  end
end
