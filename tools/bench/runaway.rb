# frozen_string_literal: true

# `rake bench:runaway` (issue 12's target): how much a runaway handler costs
# its neighbours. One worker serves W2 hello on `/` (wrk -t1 -c100, DURATION
# s) while, in the "runaway" runs, another client asks for a `loop {}`
# location once a second; cpu_limit (CPU_LIMIT s, default 0.1) stops each of
# those with a 500. Rounds (ROUNDS, 3) alternate quiet and runaway runs;
# reported: median req/s of `/` in each, their ratio (target >= 0.90), the
# slowest `/` request of every run (target: <= cpu_limit + 100 ms), and the
# status and time of every `loop {}` request. The gateway is pinned to
# SERVER_CPU, wrk and the runaway client to LOAD_CPU. Writes
# build/bench/runaway.{md,json}.
require 'json'
require 'net/http'
require_relative 'common'

module GatewayBench
  class Runaway
    include Util

    def initialize(root:, env: ENV)
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @duration = env_int(env, 'DURATION', 5)
      @rounds = env_int(env, 'ROUNDS', 3)
      @limit = Float(env.fetch('CPU_LIMIT', '0.1'))
      @run = Runner.new(root: root, env: env, tag: 'runaway')
    end

    def log(msg) = @run.log(msg)

    def conf(port)
      <<~RUBY
        server listen: "#{HOST}:#{port}", workers: 1, cpu_limit: #{@limit} do
          location "/loop" do loop {} end
          location "/" do "ok" end
        end
      RUBY
    end

    # One `loop {}` request a second until stop is set: [[status, seconds]].
    def runaway_client(port, stop)
      Thread.new do
        hits = []
        until stop[0]
          t0 = monotonic
          begin
            http = Net::HTTP.new(HOST, port)
            http.read_timeout = @limit + 30
            hits << [http.request(Net::HTTP::Get.new('/loop')).code.to_i, monotonic - t0]
          rescue StandardError => e
            hits << [e.class.name, monotonic - t0]
          end
          sleep [1 - (monotonic - t0), 0].max
        end
        hits
      end
    end

    def max_latency_ms(out)
      m = out.match(/^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\b/)
      m && m[1].to_f * { 'us' => 0.001, 'ms' => 1.0, 's' => 1000.0 }[m[2]]
    end

    def measure(srv, port, runaway)
      url = "http://#{HOST}:#{port}/"
      @run.run_wrk(%w[-t1 -c100], url, 1)
      pids = [srv.pid] + descendants(srv.pid)
      t0 = pids.sum { |p| ticks(p) || 0 }
      stop = [false]
      client = runaway && pin_load { runaway_client(port, stop) }
      out = @run.run_wrk(%w[-t1 -c100], url, @duration)
      stop[0] = true
      hits = client ? client.value : []
      t1 = pids.sum { |p| ticks(p) || 0 }
      w = Runner.parse_wrk(out[:out])
      raise Error, "wrk failed:\n#{out[:out]}" unless w[:requests]&.positive?

      w.merge(max_ms: max_latency_ms(out[:out]), us: (t1 - t0).to_f / clk_tck * 1e6 / w[:requests], loops: hits)
    end

    # The runaway client's thread runs in this process: pin it to the load CPU
    # for the run (the process's mask; wrk is pinned by taskset anyway).
    def pin_load
      system('taskset', '-pc', @run.load_cpu.to_s, Process.pid.to_s, out: File::NULL)
      yield
    end

    def run
      ensure_pkgs(%w[wrk], log: method(:log))
      runs = []
      @run.with_cpu_lock do
        port = free_port
        srv = @run.start_gateway('runaway', @bin, conf(port), port)
        @rounds.times do |i|
          [false, true].each do |runaway|
            r = measure(srv, port, runaway).merge(round: i + 1, runaway: runaway)
            log format('round %d %-8s %9.0f req/s  %5.1f µs/req  max %7.1f ms  failures %d  loop {}: %s', i + 1,
                       runaway ? 'runaway' : 'quiet', r[:rps], r[:us], r[:max_ms] || 0, r[:failures],
                       r[:loops].map { |s, t| "#{s} in #{(t * 1000).round} ms" }.join(', '))
            runs << r
          end
        end
      ensure
        @run.stop_all
      end
      write(runs)
    end

    def write(runs)
      quiet, loud = runs.partition { |r| !r[:runaway] }
      q = median(quiet.map { |r| r[:rps] })
      l = median(loud.map { |r| r[:rps] })
      loops = loud.flat_map { |r| r[:loops] }
      md = +"# bench:runaway\n\n#{Time.now.utc.iso8601}: W2 hello on `/` (wrk -t1 -c100, #{@duration} s), one worker " \
             "(CPU #{@run.server_cpu}), cpu_limit #{@limit} s; runaway runs add one `loop {}` request a second. " \
             "#{@rounds} rounds, medians.\n\n"
      md << "`/` req/s counts successful (2xx) requests only; a row with any failure is marked ⚠.\n\n"
      md << "| run | `/` req/s | µs/req | slowest `/` (ms) | #{Load::FAIL_HEAD} |\n|---|--:|--:|--:|#{Load::FAIL_ALIGN}|\n"
      runs.each do |r|
        md << format("| %s | %.0f | %.1f | %.1f | %s |\n", Load.label("#{r[:runaway] ? 'runaway' : 'quiet'} #{r[:round]}", r),
                     r[:rps], r[:us], r[:max_ms] || 0, Load.cells(r))
      end
      md << format("\n`/` under the runaway client: **%.2f×** its quiet throughput (target ≥ 0.90); slowest `/` request " \
                   "%.1f ms (target ≤ cpu_limit + 100 ms = %.0f ms).\n", l / q, loud.map { |r| r[:max_ms] || 0 }.max,
                   @limit * 1000 + 100)
      md << "\n`loop {}` requests: #{loops.size}, answered #{loops.map(&:first).tally.map { |s, n| "#{s} × #{n}" }.join(', ')}; " \
            "slowest #{format('%.0f', (loops.map(&:last).max || 0) * 1000)} ms.\n"
      @run.write_report('runaway', md, runs)
    end
  end
end
