# frozen_string_literal: true

# `rake bench:paired BASE=/path/to/old/gateway [NEW=build/gateway]`
# (standalone: `BASE=... ruby tools/bench/paired.rb`): the "no slowdown" check
# for a refactor. Two gateway binaries are measured in alternating runs —
# base, new, base, new, ... (PAIRS pairs, default 3) — on the same workloads,
# the server pinned to SERVER_CPU (1) and wrk to LOAD_CPU (0), as
# ../shared/bench does (same configs as its contestants/gateway):
#
#   W2 hello   location "/hello" do "ok" end           wrk -t1 -c100
#   W3 proxy   location "/proxy", proxy_pass: to a 1-worker nginx
#              `return 200 "ok"` backend (also on SERVER_CPU), upstream
#              keepalive 256                           wrk -t1 -c16, wrk -t1 -c100
#
# Each run: a fresh gateway with that workload's config, body checked, then per
# load a 1 s wrk warm-up, 0.5 s settle and the measured wrk (DURATION, 5 s),
# holding CPU_LOCK throughout. Reported per run: req/s, latency p50/p99, and
# server CPU µs per request — utime+stime of the gateway's master and workers
# (/proc/PID/stat) over the measured window divided by the requests wrk
# completed; for W3 the backend's separately; and CPU 1's busy share from
# /proc/stat as µs/req (everything on that core, the kernel's loopback work
# included). Then per pair the ratios new/base, and their median per load.
# Writes build/bench/paired.md and build/bench/paired.json.
#
# Environment: BASE (required), NEW (build/gateway), PAIRS (3), DURATION (5),
# WARMUP (1), PAIRED_LOADS ("w2-c100,w3-c16,w3-c100": a subset),
# GATEWAY_KEEPALIVE (256), SLOWDOWN_PCT (3: the median change flagged),
# SERVER_CPU, LOAD_CPU, CPU_LOCK, LOCK_WAIT, BENCH_OUT. nginx and wrk are
# installed with apt-get when missing.

require 'net/http'
require_relative 'common'

module GatewayBench
  class Paired
    include Util

    # workload => its gateway config and its loads (id, wrk args, path).
    WORKLOADS = {
      'W2-hello' => { path: '/hello', loads: [['w2-c100', %w[-t1 -c100]]] },
      'W3-proxy' => { path: '/proxy', loads: [['w3-c16', %w[-t1 -c16]], ['w3-c100', %w[-t1 -c100]]] }
    }.freeze

    def initialize(root:, env: ENV)
      @root = root
      base = env['BASE'].to_s
      raise Error, 'BASE=/path/to/old/gateway is required (the binary to compare against)' if base.empty?

      @bins = {
        base: File.expand_path(base, root),
        new: File.expand_path(env.fetch('NEW', 'build/gateway'), root)
      }
      @bins.each do |side, bin|
        raise Error, "#{side.upcase}=#{bin} is not an executable file" unless File.file?(bin) && File.executable?(bin)
      end
      @pairs = env_int(env, 'PAIRS', 3)
      @duration = env_int(env, 'DURATION', 5)
      @warmup = env_int(env, 'WARMUP', 1)
      @keepalive = env_int(env, 'GATEWAY_KEEPALIVE', 256)
      @slowdown = Float(env.fetch('SLOWDOWN_PCT', '3'))
      all = WORKLOADS.values.flat_map { |w| w[:loads].map(&:first) }
      @loads = env.fetch('PAIRED_LOADS', all.join(',')).split(/[,\s]+/).reject(&:empty?)
      unknown = @loads - all
      raise Error, "unknown load(s) #{unknown.join(', ')}; known: #{all.join(', ')}" unless unknown.empty?
      raise Error, 'PAIRS and DURATION must be positive' unless @pairs.positive? && @duration.positive?

      @run = Runner.new(root: root, env: env, tag: 'paired')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[wrk], log: method(:log)) unless command?('wrk')
      need_backend = @loads.any? { |l| l.start_with?('w3') }
      Util.ensure_pkgs(%w[nginx], log: method(:log)) if need_backend
      t0 = monotonic
      runs = []
      begin
        @backend = start_backend if need_backend
        @pairs.times do |i|
          WORKLOADS.each do |wl, spec|
            loads = spec[:loads].select { |id, _| @loads.include?(id) }
            next if loads.empty?

            %i[base new].each do |side|
              runs.concat(measure_side(i + 1, side, wl, spec[:path], loads))
            end
          end
        end
      ensure
        @run.stop_all
      end
      res = { meta: meta(monotonic - t0), runs: runs, summary: summarize(runs) }
      write(res)
      res
    end

    # ------------------------------------------------------------ servers

    def start_backend
      port = free_port
      srv = @run.start_nginx('backend', port, <<~NGINX)
        keepalive_timeout 65;
        keepalive_requests 1000000;
        server {
            listen #{HOST}:#{port} backlog=4096;
            location / { return 200 "ok"; }
        }
      NGINX
      log "backend: nginx pid #{srv.pid} on #{HOST}:#{port}"
      srv
    end

    def gateway_conf(wl, port)
      case wl
      when 'W2-hello'
        <<~RUBY
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/hello" do
              "ok"
            end
          end
        RUBY
      when 'W3-proxy'
        <<~RUBY
          upstream :w3, servers: ["#{HOST}:#{@backend.port}"], keepalive: #{@keepalive}

          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/proxy", proxy_pass: "http://w3/"
          end
        RUBY
      end
    end

    def check_body(port, path)
      res = Net::HTTP.start(HOST, port, open_timeout: 2, read_timeout: 5) { |h| h.get(path) }
      return if res.code == '200' && res.body == 'ok'

      raise Error, "GET #{path} answered #{res.code} #{res.body.inspect}, expected 200 \"ok\""
    end

    # Processes whose CPU counts for a server: the PID we started and every
    # descendant running the same binary.
    def pids_of(srv)
      [srv.pid] + descendants(srv.pid).select { |k| runs?(k, srv.binary) }
    end

    def ticks_of(pids)
      pids.to_h { |p| [p, ticks(p)] }
    end

    def ticks_delta(before, after)
      before.sum { |p, t| t && after[p] ? after[p] - t : 0 }
    end

    # ---------------------------------------------------------------- measure

    def measure_side(pair, side, wl, path, loads)
      bin = @bins[side]
      port = free_port
      srv = @run.start_gateway("#{side}-#{wl}", bin, gateway_conf(wl, port), port)
      check_body(port, path)
      url = "http://#{HOST}:#{port}#{path}"
      loads.map do |id, args|
        r = @run.with_cpu_lock { measure_load(srv, url, args) }
        row = { pair: pair, side: side.to_s, workload: wl, load: id, wrk: "wrk #{args.join(' ')} -d#{@duration}s" }.merge(r)
        log format('pair %d %-4s %-7s %9.0f req/s  gateway %6.1f µs/req%s  cpu%d %6.1f µs/req%s',
                   pair, side, id, r[:rps] || 0, r[:gw_us] || 0,
                   r[:backend_us] ? format('  backend %5.1f µs/req', r[:backend_us]) : '',
                   @run.server_cpu, r[:cpu_us] || 0, r[:failures].to_i.positive? ? "  ⚠ #{r[:failures]} failed" : '')
        row
      end
    ensure
      @run.stop(srv) if srv
    end

    def measure_load(srv, url, args)
      @run.run_wrk(args, url, @warmup) if @warmup.positive?
      sleep 0.5
      gw_pids = pids_of(srv)
      be_pids = @backend && url.end_with?('/proxy') ? pids_of(@backend) : []
      gw0 = ticks_of(gw_pids)
      be0 = ticks_of(be_pids)
      c0 = cpu_snap
      t0 = monotonic
      w = @run.run_wrk(args, url, @duration)
      wall = monotonic - t0
      c1 = cpu_snap
      gw1 = ticks_of(gw_pids)
      be1 = ticks_of(be_pids)
      p = Runner.parse_wrk(w[:out])
      reqs = p[:requests].to_i
      us = ->(tk) { reqs.positive? ? (tk * 1e6 / clk_tck / reqs).round(2) : nil }
      busy = cpu_busy(c0, c1, @run.server_cpu)
      {
        rps: p[:rps]&.round(1), requests: reqs, p50_ms: p[:p50_ms], p99_ms: p[:p99_ms],
        **p.slice(:errors, :non2xx, :timeouts, :failures),
        gw_us: us.call(ticks_delta(gw0, gw1)),
        backend_us: be_pids.empty? ? nil : us.call(ticks_delta(be0, be1)),
        cpu_us: busy && reqs.positive? ? (busy * wall * 1e6 / reqs).round(2) : nil,
        cpu_busy_pct: busy && (busy * 100).round(1),
        wall_s: wall.round(3), gateway_pids: gw_pids, cmd: w[:cmd], wrk_out: w[:out]
      }
    end

    # ----------------------------------------------------------------- report

    METRICS = { rps: 'req/s', gw_us: 'gateway µs/req', cpu_us: 'CPU µs/req', backend_us: 'backend µs/req' }.freeze

    def summarize(runs)
      @loads.to_h do |id|
        rs = runs.select { |r| r[:load] == id }
        pairs = rs.group_by { |r| r[:pair] }.sort.filter_map do |pair, two|
          b = two.find { |r| r[:side] == 'base' }
          n = two.find { |r| r[:side] == 'new' }
          next unless b && n

          { pair: pair }.merge(METRICS.keys.to_h { |k| [k, ratio(n[k], b[k])] })
        end
        med = METRICS.keys.to_h { |k| [k, median(pairs.map { |p| p[k] })&.round(3)] }
        sides = %w[base new].to_h do |s|
          [s, METRICS.keys.to_h { |k| [k, median(rs.select { |r| r[:side] == s }.map { |r| r[k] })] }]
        end
        [id, { pairs: pairs, median_ratio: med, median: sides, verdict: verdict(med) }]
      end
    end

    def ratio(n, b)
      n && b && b.positive? ? (n.to_f / b).round(3) : nil
    end

    # Slower: more gateway CPU per request, by more than SLOWDOWN_PCT in the
    # median over pairs. req/s is not judged: on a 2-core machine wrk (on the
    # shared CPU 0) often limits it, not the gateway; it is shown, with a note
    # when it dropped too.
    def verdict(med)
      lim = @slowdown / 100.0
      g = med[:gw_us]
      return 'no data' unless g

      v = if g > 1 + lim then format('SLOWER: gateway µs/req %+.1f%%', (g - 1) * 100)
          elsif g < 1 - lim then format('faster: gateway µs/req %+.1f%%', (g - 1) * 100)
          else 'ok'
          end
      v += format(' (req/s %+.1f%%)', (med[:rps] - 1) * 100) if med[:rps] && (med[:rps] - 1).abs > lim
      v
    end

    def meta(elapsed)
      {
        started: Time.now.utc.iso8601, elapsed_s: elapsed.round(1),
        base: @bins[:base], new: @bins[:new],
        base_version: `#{@bins[:base]} -v 2>&1`.lines.first.to_s.strip,
        new_version: `#{@bins[:new]} -v 2>&1`.lines.first.to_s.strip,
        same_file: File.binread(@bins[:base]) == File.binread(@bins[:new]),
        pairs: @pairs, duration_s: @duration, warmup_s: @warmup, upstream_keepalive: @keepalive,
        server_cpu: @run.server_cpu, load_cpu: @run.load_cpu, clk_tck: clk_tck,
        slowdown_pct: @slowdown, git: `git -C #{@root} rev-parse --short HEAD 2>/dev/null`.strip,
        backend: command?('nginx') ? `nginx -v 2>&1`.strip.sub(/.*: /, '') : nil,
        wrk: `wrk -v 2>&1`.lines.first.to_s.strip, kernel: `uname -r`.strip
      }
    end

    def f(v, fmt = '%.1f')
      v.nil? ? '—' : format(fmt, v)
    end

    def markdown(res)
      m = res[:meta]
      s = +"# Paired runs: new vs base gateway\n\n"
      s << "- base: `#{m[:base]}` (#{m[:base_version]})\n- new: `#{m[:new]}` (#{m[:new_version]})" \
           "#{m[:same_file] ? ' — **the same bytes as base** (a noise check: every ratio should be ~1.0)' : ''}\n"
      s << "- #{m[:pairs]} pairs, base then new, each a fresh gateway (1 worker) on CPU #{m[:server_cpu]}, " \
           "wrk on CPU #{m[:load_cpu]}: #{m[:warmup_s]} s warm-up, #{m[:duration_s]} s measured. " \
           "W3 backend: nginx #{m[:backend]} `return 200 \"ok\"` (1 worker, CPU #{m[:server_cpu]}), " \
           "upstream keepalive #{m[:upstream_keepalive]}. #{m[:started]}, #{m[:elapsed_s]} s, git #{m[:git]}.\n\n"
      s << "## Median ratio new/base per load\n\n"
      s << "| load | req/s | gateway µs/req | CPU #{m[:server_cpu]} µs/req | backend µs/req | base req/s | new req/s | " \
           "base gw µs/req | new gw µs/req | verdict (±#{m[:slowdown_pct]}%) |\n"
      s << "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n"
      res[:summary].each do |id, sm|
        r = sm[:median_ratio]
        b = sm[:median]['base']
        n = sm[:median]['new']
        s << "| #{label(id)} | **#{f(r[:rps], '%.3f')}** | **#{f(r[:gw_us], '%.3f')}** | #{f(r[:cpu_us], '%.3f')} | " \
             "#{f(r[:backend_us], '%.3f')} | #{f(b[:rps], '%.0f')} | #{f(n[:rps], '%.0f')} | #{f(b[:gw_us])} | " \
             "#{f(n[:gw_us])} | #{sm[:verdict]} |\n"
      end
      s << "\n## Every run\n\n"
      s << "| pair | load | side | req/s | p50 ms | p99 ms | #{GatewayBench::Load::FAIL_HEAD} | gateway µs/req | backend µs/req | " \
           "CPU #{m[:server_cpu]} busy | CPU #{m[:server_cpu]} µs/req |\n"
      s << "|--:|---|---|--:|--:|--:|#{GatewayBench::Load::FAIL_ALIGN}|--:|--:|--:|--:|\n"
      res[:runs].each do |r|
        s << "| #{r[:pair]} | #{label(r[:load])} | #{GatewayBench::Load.label(r[:side], r)} | #{f(r[:rps], '%.0f')} | #{f(r[:p50_ms], '%.2f')} | " \
             "#{f(r[:p99_ms], '%.2f')} | #{GatewayBench::Load.cells(r)} | #{f(r[:gw_us])} | #{f(r[:backend_us])} | " \
             "#{f(r[:cpu_busy_pct])}% | #{f(r[:cpu_us])} |\n"
      end
      s << "\n## Ratios new/base per pair\n\n| load | pair | req/s | gateway µs/req | CPU µs/req | backend µs/req |\n" \
           "|---|--:|--:|--:|--:|--:|\n"
      res[:summary].each do |id, sm|
        sm[:pairs].each do |p|
          s << "| #{label(id)} | #{p[:pair]} | #{f(p[:rps], '%.3f')} | #{f(p[:gw_us], '%.3f')} | " \
               "#{f(p[:cpu_us], '%.3f')} | #{f(p[:backend_us], '%.3f')} |\n"
        end
      end
      s << "\ngateway µs/req: utime+stime of the gateway's master and worker over the measured window / requests " \
           "(clock ticks of #{(1e6 / m[:clk_tck]).round} µs). CPU µs/req: CPU #{m[:server_cpu]}'s busy share " \
           "(/proc/stat: gateway, backend, kernel, and anyone else on that core) × window / requests. " \
           "The verdict judges gateway µs/req only: when CPU #{m[:server_cpu]} is well below 100% busy, req/s " \
           "is limited by wrk on the shared CPU #{m[:load_cpu]}, not by the gateway. Compare ratios; the " \
           "absolute numbers move with the machine's load.\n"
      s
    end

    def label(id)
      { 'w2-c100' => 'W2 hello -c100', 'w3-c16' => 'W3 proxy -c16', 'w3-c100' => 'W3 proxy -c100' }.fetch(id, id)
    end

    def write(res)
      md = markdown(res)
      @run.write_report('paired', md, res)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  begin
    GatewayBench::Paired.new(root: File.expand_path('../..', __dir__)).run
  rescue GatewayBench::Error => e
    warn "bench:paired: #{e.message}"
    exit 1
  end
end
