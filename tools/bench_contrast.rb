# frozen_string_literal: true

# The seed contrast, measured: `rake bench:contrast` (or `QUICK=1` for a fast
# check; standalone: `ruby tools/bench_contrast.rb [--quick]`).
#
# Starts `build/gateway -f examples/async.rb` pinned to SERVER_CPU (1), loads
# its two front endpoints from LOAD_CPU (0) with ab and wrk, and compares the
# numbers with ngx_mruby's published ones and with Little's law:
#
#   non-blocking  /async_http_sub_request_with_proxy_pass  C / 10 ms   (10,000 req/s at C = 100)
#   blocking      /http_sub_request_with_proxy_pass        1 / 10 ms   (100 req/s for any C >= 1)
#
# then sweeps the number of connections C (wrk) for both and draws measured vs
# predicted throughput and mean latency. Last, the ceiling: build/probe
# (tools/probe.c, `rake bench:probe_build`: the same flow in plain C on
# libevent, no scripting, on the same ports and SERVER_CPU) gets the same
# steady wrk as the gateway's row (not in QUICK runs, which have none), and
# the gateway's non-blocking wrk result is given as a share of it. Writes
# build/bench/contrast.{md,json,svg} and the raw tool output under
# build/bench/raw/.
#
# Every measurement step (warm-up, run, settle) holds /tmp/cpu.lock (CPU_LOCK),
# the lock ../shared/bench takes, so runs on this shared machine do not overlap.
# Everything is on 127.0.0.1, every child is bounded in time and stopped by its
# PID (TERM, then KILL), also on Ctrl-C.
#
# Environment: QUICK=1, SERVER_CPU, LOAD_CPU, CPU_LOCK, LOCK_WAIT (s, 900),
# SWEEP="1,2,4,..." (overrides the concurrency list), BENCH_OUT (build/bench).
# Without build/probe the ceiling row is skipped, with a note.
# `ruby tools/bench_contrast.rb --render [build/bench/contrast.json]` redraws
# contrast.md and contrast.svg from saved numbers without measuring.

require 'fileutils'
require 'json'
require 'net/http'
require 'socket'
require 'time'
require_relative 'bench/common'

module Gateway
  class BenchContrast
    HOST = '127.0.0.1'
    BACKEND_MS = 10.0 # the backend's Nginx::Async.sleep 10
    EXPECT_BODY = "done\n"

    ENDPOINTS = {
      async: { path: '/async_http_sub_request_with_proxy_pass', label: 'non-blocking',
               published: 3941.80 },
      blocking: { path: '/http_sub_request_with_proxy_pass', label: 'blocking',
                  published: 81.41 }
    }.freeze
    PUBLISHED_SOURCE = 'ngx_mruby, ab -k -c 100 -n 1000 (two single-worker nginx)'
    # build/probe answers any path: it gets the non-blocking endpoint's, so wrk
    # sends the same bytes.
    PROBE = { path: ENDPOINTS[:async][:path], label: 'C probe' }.freeze
    PROBE_LABEL = 'C probe (libevent, no scripting): the ceiling of this machine'
    AB_C = 100
    AB_N = 1000
    STEADY_C = 100
    STEADY_S = 10 # the steady wrk rows' duration (not in QUICK runs)
    SWEEP_FULL = [1, 2, 4, 8, 16, 32, 64, 128, 256].freeze
    SWEEP_QUICK = [1, 4, 16, 64].freeze

    class Error < StandardError; end

    attr_reader :out_dir

    def initialize(root:, binary:, probe: 'build/probe', config: 'examples/async.rb', quick: false, env: ENV)
      @root = File.expand_path(root)
      @binary = File.expand_path(binary, @root)
      @probe = File.expand_path(probe, @root)
      @config = config
      @quick = quick
      @server_cpu = Integer(env.fetch('SERVER_CPU', '1'))
      @load_cpu = Integer(env.fetch('LOAD_CPU', '0'))
      @lock_path = env.fetch('CPU_LOCK', '/tmp/cpu.lock')
      @lock_wait = Float(env.fetch('LOCK_WAIT', '900'))
      @sweep = if env['SWEEP'] && !env['SWEEP'].strip.empty?
                 env['SWEEP'].split(/[,\s]+/).map { |c| Integer(c) }.select(&:positive?)
               else
                 quick ? SWEEP_QUICK : SWEEP_FULL
               end
      @out_dir = File.expand_path(env.fetch('BENCH_OUT', File.join(@root, 'build/bench')), @root)
      @raw_dir = File.join(@out_dir, 'raw')
      @log_path = File.join(@out_dir, 'gateway.log')
      @probe_log = File.join(@out_dir, 'probe.log')
      @pid = nil
      @probe_pid = nil
      # Free ports of this run (examples/async.rb's 58080/48080 replaced), so
      # two runs, or anything else on those ports, never collide.
      @front_port, @backend_port = GatewayBench::Util.free_ports(2)
    end

    # ---------------------------------------------------------------- driver

    def run
      check_tools
      FileUtils.mkdir_p(@raw_dir)
      Dir.glob(File.join(@raw_dir, '*')).each { |f| File.delete(f) }
      t0 = monotonic
      results = { meta: meta, headline: [], sweep: [] }
      begin
        start_gateway
        results[:meta][:worker_affinity] = worker_affinity
        check_bodies
        results[:traces] = traces
        results[:headline] = headline
        results[:sweep] = sweep
      ensure
        stop_gateway
      end
      results[:probe] = probe_ceiling(results[:headline], results[:meta])
      results[:meta][:elapsed_s] = (monotonic - t0).round(1)
      results[:meta][:gateway_log] = log_findings
      write_outputs(results)
      results
    end

    # ------------------------------------------------------------ the server

    def check_tools
      %w[ab wrk taskset].each do |tool|
        next if system('sh', '-c', "command -v #{tool} >/dev/null 2>&1")

        raise Error, "#{tool} not found (apt-get install #{tool == 'ab' ? 'apache2-utils' : tool})"
      end
      raise Error, "#{@binary} is not built (run `rake build`)" unless File.executable?(@binary)
    end

    def port_busy?(port)
      TCPSocket.new(HOST, port, connect_timeout: 0.5).close
      true
    rescue SystemCallError, IOError, Timeout::Error
      begin
        TCPServer.new(HOST, port).close
        false
      rescue Errno::EADDRINUSE, Errno::EACCES
        true
      end
    end

    # The config (examples/async.rb) on this run's free ports, written next
    # to the raw output: the file the gateway runs.
    def start_gateway
      conf = File.join(@raw_dir, 'async.rb')
      File.write(conf, GatewayBench::Util.async_example(File.expand_path(@config, @root), front: @front_port,
                                                                                  back: @backend_port))
      spawn_server([@binary, '-f', conf], @log_path, 'gateway', 15) { |pid| @pid = pid }
      log "gateway up: master pid #{@pid}, front #{HOST}:#{@front_port}, backend #{HOST}:#{@backend_port}"
    rescue GatewayBench::Error => e
      raise Error, e.message
    end

    # Starts argv pinned to the server CPU, its output in log_path, and waits
    # until both ports accept. The block gets the PID at once (so a failed
    # start-up can still be stopped); returns the PID.
    def spawn_server(argv, log_path, name, timeout)
      argv = ['taskset', '-c', @server_cpu.to_s, *argv]
      log "starting: #{argv.join(' ')}   (log: #{rel(log_path)})"
      pid = Process.spawn(*argv, chdir: @root, pgroup: true, in: File::NULL, out: [log_path, 'w'], err: %i[child out])
      yield pid
      deadline = monotonic + timeout
      loop do
        if Process.waitpid(pid, Process::WNOHANG)
          yield nil
          raise Error, "#{name} exited during start-up (#{$?}); log tail:\n#{log_tail(path: log_path)}"
        end
        break if [@front_port, @backend_port].all? { |p| accepts?(p) }
        if monotonic > deadline
          raise Error, "#{name} did not accept on #{@front_port} and #{@backend_port} within #{timeout} s; " \
                       "log tail:\n#{log_tail(path: log_path)}"
        end

        sleep 0.05
      end
      pid
    end

    def accepts?(port)
      TCPSocket.new(HOST, port, connect_timeout: 0.2).close
      true
    rescue SystemCallError, IOError, Timeout::Error
      false
    end

    def alive?(pid = @pid)
      pid && Process.waitpid(pid, Process::WNOHANG).nil?
    rescue Errno::ECHILD
      false
    end

    # The master's children (its workers), read before stopping it, so that a
    # worker left behind by a KILLed master can be stopped by its own PID.
    def descendants(pid)
      kids = File.read("/proc/#{pid}/task/#{pid}/children").split.map(&:to_i)
      kids + kids.flat_map { |k| descendants(k) }
    rescue SystemCallError
      []
    end

    def ours?(pid, binary = @binary)
      File.read("/proc/#{pid}/cmdline").split("\0").include?(binary) ||
        File.readlink("/proc/#{pid}/exe") == binary
    rescue SystemCallError
      false
    end

    def worker_affinity
      descendants(@pid).to_h do |pid|
        cpus = File.read("/proc/#{pid}/status")[/^Cpus_allowed_list:\s*(\S+)/, 1]
        [pid, cpus]
      end
    rescue SystemCallError
      {}
    end

    def stop_gateway
      pid, @pid = @pid, nil
      stop_tree(pid, @binary, 'gateway') if pid
    end

    # TERM (KILL after 5 s) to a server we spawned, then by PID to any of its
    # children (read before) still running our binary.
    def stop_tree(pid, binary, name)
      workers = descendants(pid)
      begin
        Process.kill(:TERM, pid)
        unless wait_exit(pid, 5)
          log "#{name} master #{pid} ignored TERM for 5 s: KILL"
          Process.kill(:KILL, pid)
          wait_exit(pid, 5)
        end
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end
      # Workers normally exit with their master; stop any straggler by PID.
      left = workers.select { |w| ours?(w, binary) }
      left.each { |w| signal(:TERM, w) }
      sleep 0.5 unless left.empty?
      left.select { |w| ours?(w, binary) }.each { |w| signal(:KILL, w) }
      log "#{name} stopped#{left.empty? ? '' : " (#{left.size} worker(s) had to be stopped by PID)"}"
    end

    # build/probe on the gateway's ports, pinned to the same CPU. Run after the
    # gateway stopped: its ports may take a moment to be free.
    def start_probe
      deadline = monotonic + 5
      while (busy = [@front_port, @backend_port].select { |p| port_busy?(p) }).any?
        raise Error, "port(s) #{busy.join(', ')} on #{HOST} still in use; not touching it" if monotonic > deadline

        sleep 0.1
      end
      argv = [@probe, '--front-port', @front_port.to_s, '--backend-port', @backend_port.to_s]
      spawn_server(argv, @probe_log, 'C probe', 10) { |pid| @probe_pid = pid }
      log "C probe up: pid #{@probe_pid}, front and backend #{descendants(@probe_pid).join(', ')}"
    end

    def stop_probe
      pid, @probe_pid = @probe_pid, nil
      stop_tree(pid, @probe, 'C probe') if pid
    end

    def wait_exit(pid, seconds)
      deadline = monotonic + seconds
      loop do
        return true if Process.waitpid(pid, Process::WNOHANG)
        return false if monotonic > deadline

        sleep 0.05
      end
    rescue Errno::ECHILD
      true
    end

    def log_tail(lines = 15, path: @log_path)
      File.exist?(path) ? File.readlines(path).last(lines).join : '(no log)'
    end

    # Anything worth a look in the gateway's log: errors, worker restarts.
    def log_findings
      return {} unless File.exist?(@log_path)

      lines = File.readlines(@log_path, chomp: true)
      odd = lines.grep(/\[(error|crit|alert|emerg|warn)\]|exited|signal (?!15)|restart|abort|sanitizer/i)
      { lines: lines.size, notable: odd.size, first_notable: odd.first(10) }
    end

    # ----------------------------------------------------------- measurement

    def endpoint(key)
      key == :probe ? PROBE : ENDPOINTS.fetch(key)
    end

    def url(key)
      "http://#{HOST}:#{@front_port}#{endpoint(key)[:path]}"
    end

    def http_get(key, timeout: 10)
      http = Net::HTTP.new(HOST, @front_port, nil)
      http.open_timeout = 2
      http.read_timeout = timeout
      http.start { |h| h.get(endpoint(key)[:path]) }
    end

    # One request of each kind, recorded by the config's dashboard before
    # any load (examples/async.rb has one): the waterfalls of contrast.html.
    def traces
      ENDPOINTS.each_key.to_h do |key|
        http = Net::HTTP.new(HOST, @front_port, nil)
        http.read_timeout = 10
        res = http.start { |h| h.get("/dashboard/trace?path=#{endpoint(key)[:path]}") }
        [key, res.code == '200' ? JSON.parse(res.body, symbolize_names: true) : nil]
      end
    rescue StandardError => e
      log "no traces (#{e.message}): the config has no `dashboard: true` location?"
      {}
    end

    def check_bodies
      ENDPOINTS.each_key do |key|
        res = http_get(key)
        next if res.code == '200' && res.body == EXPECT_BODY

        raise Error, "GET #{url(key)} answered #{res.code} #{res.body.inspect}, expected 200 #{EXPECT_BODY.inspect}"
      end
    end

    # Wait until the gateway has no queued work left from the previous run
    # (a closed wrk connection can leave a request queued behind the blocking
    # worker): a probe request must come back fast. Bounded.
    def quiesce(key)
      deadline = monotonic + 30
      loop do
        t = monotonic
        ok = begin
          http_get(key, timeout: 30).code == '200'
        rescue StandardError
          false
        end
        return if ok && monotonic - t < 0.1 + BACKEND_MS / 1000
        raise Error, "#{url(key)} still slow or failing 30 s after the last run; log tail:\n#{log_tail}" if monotonic > deadline

        sleep 0.2
      end
    end

    def with_cpu_lock(&block)
      GatewayBench::Util.with_lock(@lock_path, @lock_wait, log: method(:log), error: Error, &block)
    end

    # Runs one pinned load-generator command, output to a raw file, killed
    # by PID if it overruns (or on Ctrl-C).
    def run_load(argv, raw, timeout)
      cmd = ['taskset', '-c', @load_cpu.to_s, *argv]
      File.write(raw, "# #{Time.now.utc.iso8601} #{cmd.join(' ')}\n")
      pid = Process.spawn(*cmd, in: File::NULL, out: [raw, 'a'], err: %i[child out])
      deadline = monotonic + timeout
      status = nil
      loop do
        break if (status = Process.waitpid2(pid, Process::WNOHANG)&.last)

        if monotonic > deadline
          File.write(raw, "# killed after #{timeout} s\n", mode: 'a')
          Process.kill(:TERM, pid)
          Process.kill(:KILL, pid) unless wait_exit(pid, 3)
          status = :timeout
          pid = nil
          break
        end
        sleep 0.02
      end
      pid = nil
      status
    ensure
      if pid
        signal(:KILL, pid)
        wait_exit(pid, 2)
      end
    end

    def cpu_snap
      File.readlines('/proc/stat').grep(/^cpu\d+ /).to_h do |l|
        f = l.split
        v = f[1..].map(&:to_i)
        busy = v[0] + v[1] + v[2] + v[5] + v[6]
        [f[0], [busy, v[3] + v[4] + (v[7] || 0)]]
      end
    end

    def cpu_busy(before, after, cpu)
      k = "cpu#{cpu}"
      return nil unless before[k] && after[k]

      busy = after[k][0] - before[k][0]
      tot = busy + after[k][1] - before[k][1]
      tot.positive? ? (100.0 * busy / tot).round(1) : nil
    end

    # The server's worker processes (the gateway's workers, the probe's front
    # and backend): their own CPU time, whatever else runs on the core.
    def server_pids(key)
      descendants(key == :probe ? @probe_pid : @pid)
    end

    # utime + stime clock ticks of each pid (/proc/PID/stat fields 14 and 15).
    def proc_ticks(pids)
      pids.to_h do |pid|
        f = File.read("/proc/#{pid}/stat").split(') ', 2).last.split
        [pid, f[11].to_i + f[12].to_i]
      rescue SystemCallError
        [pid, nil]
      end
    end

    # Server CPU µs per request over a run: the ticks of the processes seen
    # both before and after, divided by the requests the tool completed.
    def us_per_request(before, after, requests)
      return nil unless requests&.positive?

      ticks = before.sum { |pid, t| t && after[pid] ? after[pid] - t : 0 }
      (ticks * 1e6 / Etc.sysconf(Etc::SC_CLK_TCK) / requests).round(1)
    end

    # One locked step: warm-up with the same tool and concurrency, settle,
    # the measured run (server/load CPU busy shares recorded), then drain.
    def measure(key, tool, c, name:, n: nil, duration: nil, settle: 0.5)
      blocking = key == :blocking
      args, warm =
        case tool
        when :ab
          base = ['ab', '-k', '-c', c.to_s]
          [base + ['-n', n.to_s, url(key)], base + ['-n', [n / 10, c].max.to_s, url(key)]]
        when :wrk
          base = ['wrk', '-t1', "-c#{c}", '--latency']
          base += ['--timeout', '30s'] if blocking
          [base + ["-d#{duration}s", url(key)], base + ['-d1s', url(key)]]
        end
      # bound: the expected time (blocking: 10 ms per request, serial) with a margin
      expect = if tool == :ab
                 blocking ? n * BACKEND_MS / 1000 : 5
               else
                 duration
               end
      limit = (expect * 2 + 30).ceil
      raw = File.join(@raw_dir, "#{name}.txt")
      r = nil
      with_cpu_lock do
        quiesce(key)
        run_load(warm, "#{raw}.warmup", limit)
        quiesce(key)
        sleep settle
        pids = server_pids(key)
        before = cpu_snap
        ticks = proc_ticks(pids)
        t = monotonic
        status = run_load(args, raw, limit)
        wall = monotonic - t
        after = cpu_snap
        ticks_after = proc_ticks(pids)
        r = tool == :ab ? parse_ab(File.read(raw)) : parse_wrk(File.read(raw))
        r.merge!(tool: tool.to_s, endpoint: key.to_s, c: c, command: "taskset -c #{@load_cpu} #{args.join(' ')}",
                 exit: status == :timeout ? 'timeout' : status&.exitstatus, wall_s: wall.round(2),
                 srv_cpu_busy: cpu_busy(before, after, @server_cpu),
                 load_cpu_busy: cpu_busy(before, after, @load_cpu),
                 srv_us_per_req: us_per_request(ticks, ticks_after, r[:requests]), raw: rel(raw))
        r[:n] = n if n
        r[:duration_s] = duration if duration
        if key == :probe
          raise Error, "C probe died during #{r[:command]}; log tail:\n#{log_tail(path: @probe_log)}" unless alive?(@probe_pid)
        elsif !alive?
          raise Error, "gateway died during #{r[:command]}; log tail:\n#{log_tail}"
        end

        quiesce(key)
        sleep settle
      end
      log format('  %-12s %-4s c=%-4d %9s req/s  mean %8s ms  p99 %8s ms  failures %s%s',
                 endpoint(key)[:label], tool, c, fmt(r[:rps], 1), fmt(r[:mean_ms], 2), fmt(r[:p99_ms], 2),
                 r[:failures].inspect, r[:exit].to_i.zero? ? '' : "  (exit #{r[:exit]})")
      r
    end

    def ms(value, unit)
      value.to_f * { 'us' => 1e-3, 'ms' => 1.0, 's' => 1e3, 'm' => 60e3, 'h' => 3600e3 }.fetch(unit)
    end

    # The failure counts and rates are GatewayBench::Load's (bench/common.rb):
    # req/s counts successful (2xx) requests only; here also the mean latency.
    def parse_wrk(text)
      r = GatewayBench::Load.wrk(text)
      if (m = text.match(/^\s+Latency\s+([\d.]+)(us|ms|s|m|h)\s/))
        r[:mean_ms] = ms(m[1], m[2])
      end
      { p50_ms: '50', p99_ms: '99' }.each do |k, p|
        m = text.match(/^\s+#{p}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$/)
        r[k] = m && ms(m[1], m[2])
      end
      r
    end

    def parse_ab(text)
      r = GatewayBench::Load.ab(text)
      r[:mean_ms] = text[/Time per request:\s+([\d.]+) \[ms\] \(mean\)\s*$/, 1]&.to_f
      { p50_ms: '50', p99_ms: '99' }.each { |k, p| r[k] = text[/^\s+#{p}%\s+(\d+)/, 1]&.to_f }
      r[:keepalive] = text[/Keep-Alive requests:\s+(\d+)/, 1]&.to_i
      r[:ab_error] = text[/^(apr_\S+.*)$/, 1]
      r
    end

    # ------------------------------------------------------------- the plan

    def little_limit(key, c)
      key == :async ? c * 1000.0 / BACKEND_MS : 1000.0 / BACKEND_MS
    end

    def predicted_latency(key, c)
      key == :async ? BACKEND_MS : c * BACKEND_MS
    end

    def headline
      log "headline: ab -k -c #{AB_C} -n #{AB_N}#{@quick ? '' : " and wrk -t1 -c#{STEADY_C} -d#{STEADY_S}s"} on both endpoints"
      rows = []
      ENDPOINTS.each_key do |key|
        rows << measure(key, :ab, AB_C, n: AB_N, name: "ab-#{key}", settle: 1)
      end
      unless @quick
        ENDPOINTS.each_key do |key|
          rows << measure(key, :wrk, STEADY_C, duration: STEADY_S, name: "wrk-#{key}", settle: 1)
        end
      end
      rows.each do |r|
        key = r[:endpoint].to_sym
        limit = little_limit(key, r[:c])
        r[:little_limit] = limit
        r[:pct_of_limit] = r[:rps] && (100.0 * r[:rps] / limit)
        if r[:tool] == 'ab'
          pub = ENDPOINTS[key][:published]
          r[:published_rps] = pub
          r[:published_pct_of_limit] = 100.0 * pub / limit
          r[:measured_over_published] = r[:rps] && r[:rps] / pub
        end
      end
      rows
    end

    # Blocking: C connections queue behind one worker, a request waits ~C x 10 ms,
    # so the run must last several of those rounds to reach steady state.
    def sweep_duration(key, c)
      base = @quick ? 1 : 3
      return base if key == :async

      [[base, (c * BACKEND_MS / 1000 * 4).ceil].max, @quick ? 4 : 10].min
    end

    def sweep
      log "sweep: wrk -t1 -cC (C = #{@sweep.join(', ')})"
      points = []
      ENDPOINTS.each_key do |key|
        @sweep.each do |c|
          d = sweep_duration(key, c)
          r = measure(key, :wrk, c, duration: d, name: "sweep-#{key}-c#{c}", settle: 0.3)
          r[:predicted_rps] = little_limit(key, c)
          r[:predicted_mean_ms] = predicted_latency(key, c)
          # Little's law read backwards: what each request cost beyond the 10 ms.
          r[:implied_ms_per_request] = r[:rps]&.positive? ? c * 1000.0 / r[:rps] : nil
          points << r
        end
      end
      points
    end

    # The ceiling: the same steady wrk as the gateway's row, on build/probe.
    # Only when that row exists (not in QUICK runs) and build/probe is built;
    # a probe that fails is noted, and the gateway's results are kept.
    def probe_ceiling(head, meta)
      note = if @quick
               'skipped: QUICK run (no steady wrk row to compare with)'
             elsif !File.executable?(@probe)
               "skipped: #{rel(@probe)} is not built (rake bench:probe_build)"
             end
      if note.nil?
        log "ceiling: wrk -t1 -c#{STEADY_C} -d#{STEADY_S}s on #{rel(@probe)} (#{PROBE_LABEL})"
        begin
          start_probe
          r = measure(:probe, :wrk, STEADY_C, duration: STEADY_S, name: 'wrk-probe', settle: 1)
        rescue Error => e
          log "C probe: #{e.message}"
          note = "failed: #{e.message.lines.first.chomp.sub(/;? log tail:\z/, '')} (see #{rel(@probe_log)})"
        ensure
          stop_probe
        end
      end
      meta[:probe] = { binary: rel(@probe), note: note }.compact
      if note
        log "C probe #{note}"
        return nil
      end

      r[:little_limit] = little_limit(:async, r[:c])
      r[:pct_of_limit] = r[:rps] && (100.0 * r[:rps] / r[:little_limit])
      r[:gateway_pct_of_probe] = gateway_pct_of_probe(head, r)
      log "  gateway non-blocking wrk = #{pct(r[:gateway_pct_of_probe])} of the C probe" if r[:gateway_pct_of_probe]
      r
    end

    def gateway_async_wrk(head)
      head.find { |x| x[:tool] == 'wrk' && x[:endpoint] == 'async' }
    end

    def gateway_pct_of_probe(head, probe)
      gw = gateway_async_wrk(head)
      gw && gw[:rps] && probe[:rps]&.positive? ? 100.0 * gw[:rps] / probe[:rps] : nil
    end

    def meta
      {
        started: Time.now.utc.iso8601,
        host: Socket.gethostname,
        nproc: Etc.respond_to?(:nprocessors) ? Etc.nprocessors : nil,
        cpu_model: File.read('/proc/cpuinfo')[/^model name\s*:\s*(.+)$/, 1],
        kernel: `uname -r`.strip,
        gateway: `#{@binary} -v 2>&1`.strip,
        git: `git -C #{@root} describe --always --dirty 2>/dev/null`.strip,
        wrk: `wrk --version 2>&1`.lines.first.to_s.strip,
        ab: `ab -V 2>&1`.lines.first.to_s.strip,
        config: @config, front_port: @front_port, backend_port: @backend_port,
        server_cpu: @server_cpu, load_cpu: @load_cpu, cpu_lock: @lock_path,
        quick: @quick, sweep_c: @sweep, backend_ms: BACKEND_MS,
        published: { source: PUBLISHED_SOURCE, async: ENDPOINTS[:async][:published],
                     blocking: ENDPOINTS[:blocking][:published] },
        model: {
          async: 'X = C / 10 ms (no overhead term: the Little-law bound), mean latency = 10 ms',
          blocking: 'X = 1 / 10 ms = 100 req/s for any C >= 1, mean latency = C x 10 ms'
        }
      }
    end

    # --------------------------------------------------------------- outputs

    # Re-renders contrast.md and contrast.svg from a saved contrast.json.
    def render(json_path)
      results = JSON.parse(File.read(json_path), symbolize_names: true)
      write_outputs(results, json: false)
    end

    def write_outputs(results, json: true)
      FileUtils.mkdir_p(@out_dir)
      md = markdown(results)
      File.write(File.join(@out_dir, 'contrast.json'), JSON.pretty_generate(results) + "\n") if json
      File.write(File.join(@out_dir, 'contrast.md'), md)
      File.write(File.join(@out_dir, 'contrast.svg'), svg(results))
      File.write(File.join(@out_dir, 'contrast.html'), html(results, md))
      puts
      puts md
      puts
      puts 'Written:'
      %w[contrast.md contrast.json contrast.svg contrast.html].each { |f| puts "  #{rel(File.join(@out_dir, f))}" }
      puts "  #{rel(@raw_dir)}/ (raw ab/wrk output), #{rel(@log_path)} (gateway log)" \
           "#{results[:probe] ? ", #{rel(@probe_log)} (C probe log)" : ''}"
    end

    def fmt(v, digits = 1)
      return '—' if v.nil?
      return v.to_s if v.is_a?(Integer)

      s = format("%.#{digits}f", v)
      int, frac = s.split('.')
      int = int.reverse.scan(/\d{1,3}/).join(',').reverse.then { |i| v.negative? ? "-#{i}" : i }
      frac ? "#{int}.#{frac}" : int
    end

    def pct(v)
      v.nil? ? '—' : "#{fmt(v, 1)}%"
    end

    # errors / non-2xx / timeouts, marked ⚠ when any.
    def errors_cell(r)
      cell = "#{r[:errors].to_i} / #{r[:non2xx].to_i} / #{r[:timeouts].to_i}"
      cell = "⚠ #{cell}" if r[:errors].to_i + r[:non2xx].to_i + r[:timeouts].to_i > 0
      extra = [r[:ab_error], (r[:error_detail] if r[:failures].to_i.positive?)].compact
      extra << "exit #{r[:exit]}" unless r[:exit].to_i.zero? && r[:exit] != 'timeout'
      extra.empty? ? cell : "#{cell} (#{extra.join(', ')})"
    end

    # The gateway against the C probe (older JSON files have neither the row
    # nor the note: nothing).
    def probe_line(res)
      pr = res[:probe]
      note = res[:meta].dig(:probe, :note)
      return "**C probe:** #{note.lines.first.chomp}.  \n" if pr.nil? && note
      return '' if pr.nil?

      gw = gateway_async_wrk(res[:headline])
      share = gw && (pr[:gateway_pct_of_probe] || gateway_pct_of_probe(res[:headline], pr))
      line = +"**gateway non-blocking / C probe (wrk):** "
      line << if share
                "#{pct(share)} of the ceiling (#{fmt(gw[:rps], 1)} vs #{fmt(pr[:rps], 1)} req/s)"
              else
                "— (no gateway wrk row)"
              end
      cpu = [gw && gw[:srv_us_per_req] && "gateway #{fmt(gw[:srv_us_per_req], 1)}",
             pr[:srv_us_per_req] && "C probe #{fmt(pr[:srv_us_per_req], 1)}"].compact
      line << "; server CPU per request (the server processes' utime + stime): #{cpu.join(', ')} µs" unless cpu.empty?
      line << "; CPU #{res[:meta][:server_cpu]} busy during the probe's run #{pct(pr[:srv_cpu_busy])}" if pr[:srv_cpu_busy]
      "#{line}  \n"
    end

    def tool_cell(r)
      if r[:tool] == 'ab'
        "ab -k -c #{r[:c]} -n #{r[:n]}"
      else
        "wrk -t1 -c#{r[:c]} -d#{r[:duration_s]}s#{r[:endpoint] == 'blocking' ? ' --timeout 30s' : ''}"
      end
    end

    def markdown(res)
      m = res[:meta]
      head = res[:headline]
      out = +"# gateway: the seed contrast (non-blocking vs blocking sub-request)\n\n"
      out << "#{m[:started]} · #{m[:gateway]} (#{m[:git]}) · `#{m[:config]}` · server on CPU #{m[:server_cpu]}, " \
             "load on CPU #{m[:load_cpu]} · #{m[:nproc]} CPUs, #{m[:cpu_model]} · #{m[:quick] ? 'QUICK run' : 'full run'}\n\n"
      out << "Backend: 10 ms non-blocking sleep. Little's law at C concurrent requests: non-blocking ≤ C / 10 ms " \
             "(10,000 req/s at C = 100); one blocking worker ≤ 1 / 10 ms = 100 req/s. Published: #{PUBLISHED_SOURCE}. " \
             "Measured req/s counts successful (2xx) requests only; a run with any failure is marked ⚠.\n\n"
      out << "| endpoint | tool | published req/s | measured req/s | mean ms | p50 ms | p99 ms | errors / non-2xx / timeouts " \
             "| Little limit req/s | measured % of limit | published % of limit | measured / published |\n"
      out << "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|\n"
      head.each do |r|
        key = r[:endpoint].to_sym
        out << "| #{ENDPOINTS[key][:label]} `#{ENDPOINTS[key][:path]}` | #{tool_cell(r)} | " \
               "#{r[:published_rps] ? fmt(r[:published_rps], 2) : '— (ab only)'} | #{fmt(r[:rps], 1)} | " \
               "#{fmt(r[:mean_ms], 2)} | #{fmt(r[:p50_ms], r[:tool] == 'ab' ? 0 : 2)} | " \
               "#{fmt(r[:p99_ms], r[:tool] == 'ab' ? 0 : 2)} | #{errors_cell(r)} | #{fmt(r[:little_limit], 0)} | " \
               "#{pct(r[:pct_of_limit])} | #{pct(r[:published_pct_of_limit])} | " \
               "#{r[:measured_over_published] ? "#{fmt(r[:measured_over_published], 2)}×" : '—'} |\n"
      end
      if (pr = res[:probe])
        out << "| #{PROBE_LABEL} | #{tool_cell(pr)} | — | #{fmt(pr[:rps], 1)} | #{fmt(pr[:mean_ms], 2)} | " \
               "#{fmt(pr[:p50_ms], 2)} | #{fmt(pr[:p99_ms], 2)} | #{errors_cell(pr)} | #{fmt(pr[:little_limit], 0)} | " \
               "#{pct(pr[:pct_of_limit])} | — | — |\n"
      end
      out << "\n"
      %w[ab wrk].each do |tool|
        a = head.find { |r| r[:tool] == tool && r[:endpoint] == 'async' }
        b = head.find { |r| r[:tool] == tool && r[:endpoint] == 'blocking' }
        next unless a && b && a[:rps] && b[:rps]&.positive?

        line = "**async / blocking (#{tool}):** #{fmt(a[:rps] / b[:rps], 1)}× measured"
        line << "; #{fmt(ENDPOINTS[:async][:published] / ENDPOINTS[:blocking][:published], 1)}× published (ngx_mruby)" \
                "; #{fmt(little_limit(:async, AB_C) / little_limit(:blocking, AB_C), 0)}× by Little's law" if tool == 'ab'
        out << "#{line}  \n"
      end
      out << probe_line(res)
      ka = head.select { |r| r[:tool] == 'ab' }.map { |r| "#{ENDPOINTS[r[:endpoint].to_sym][:label]} #{r[:keepalive].inspect}/#{r[:requests].inspect}" }
      out << "ab keep-alive requests: #{ka.join(', ')}. ab's mean is its \"time per request (mean)\", its percentiles whole ms.  \n"
      out << "Server CPU #{m[:server_cpu]} busy during each run: " +
             head.map { |r| "#{ENDPOINTS[r[:endpoint].to_sym][:label]}/#{r[:tool]} #{pct(r[:srv_cpu_busy])}" }.join(', ') +
             "; load CPU #{m[:load_cpu]}: " +
             head.map { |r| "#{ENDPOINTS[r[:endpoint].to_sym][:label]}/#{r[:tool]} #{pct(r[:load_cpu_busy])}" }.join(', ') +
             " (whole-core busy shares from /proc/stat: other users of the core count too).\n\n"

      out << "## Concurrency sweep (wrk -t1 -cC --latency)\n\n"
      out << "Prediction (no overhead term): non-blocking X = C / 10 ms, mean = 10 ms; blocking X = 100 req/s, mean = C × 10 ms. " \
             "\"ms per request\" = C / X (Little's law read backwards; 10 ms is the backend, the rest is overhead or queueing). " \
             "Blocking runs last longer at high C (several queue rounds of C × 10 ms each) and use `--timeout 30s`.\n\n"
      out << "| mode | C | duration s | measured req/s | predicted req/s | % of predicted | mean ms | predicted mean ms | p99 ms " \
             "| ms per request (C/X) | errors / non-2xx / timeouts | CPU #{m[:server_cpu]} busy |\n"
      out << "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|\n"
      res[:sweep].each do |r|
        out << "| #{ENDPOINTS[r[:endpoint].to_sym][:label]} | #{r[:c]} | #{r[:duration_s]} | #{fmt(r[:rps], 1)} | " \
               "#{fmt(r[:predicted_rps], 0)} | #{pct(r[:rps] && 100.0 * r[:rps] / r[:predicted_rps])} | " \
               "#{fmt(r[:mean_ms], 2)} | #{fmt(r[:predicted_mean_ms], 0)} | #{fmt(r[:p99_ms], 2)} | " \
               "#{fmt(r[:implied_ms_per_request], 2)} | #{errors_cell(r)} | #{pct(r[:srv_cpu_busy])} |\n"
      end
      lf = m[:gateway_log] || {}
      out << "\nGateway log: #{lf[:lines].inspect} lines, #{lf[:notable].inspect} notable"
      out << (lf[:first_notable].to_a.empty? ? ".\n" : ":\n\n```\n#{lf[:first_notable].join("\n")}\n```\n")
      out << "\nRaw ab/wrk output: `#{rel(@raw_dir)}/`. Chart: `#{rel(File.join(@out_dir, 'contrast.svg'))}`. " \
             "Run took #{m[:elapsed_s]} s. The machine is shared: expect noise.\n"
      out
    end

    # ------------------------------------------------------------------ SVG

    COLORS = { async: '#1f6fb4', blocking: '#d4551c' }.freeze

    def esc(s)
      s.to_s.gsub('&', '&amp;').gsub('<', '&lt;').gsub('>', '&gt;').gsub('"', '&quot;')
    end

    def nice_num(v)
      return "#{fmt(v / 1000.0, v % 1000 == 0 ? 0 : 1)}k" if v >= 1000

      v >= 1 ? v.round.to_s : v.to_s
    end

    def ms_label(v)
      v >= 1000 ? "#{nice_num(v / 1000.0)} s" : "#{nice_num(v)} ms"
    end

    # One log-log panel. series: [{pts: [[c, y]], color:, dash:, marker:}]
    def panel(x0, y0, w, h, title:, ylabel:, cs:, yrange:, series:, ylab: ->(v) { nice_num(v) }, notes: [])
      cmin, cmax = cs.minmax
      cmax = cmin * 2 if cmax == cmin
      lo = Math.log10(yrange[0])
      hi = Math.log10(yrange[1])
      xf = ->(c) { x0 + (Math.log2(c) - Math.log2(cmin)) / (Math.log2(cmax) - Math.log2(cmin)) * w }
      yf = ->(v) { y0 + h - (Math.log10(v.clamp(yrange[0], yrange[1])) - lo) / (hi - lo) * h }
      s = +''
      s << %(<text x="#{x0 + w / 2}" y="#{y0 - 12}" class="ptitle">#{esc(title)}</text>\n)
      s << %(<rect x="#{x0}" y="#{y0}" width="#{w}" height="#{h}" class="frame"/>\n)
      # y grid: decades (labelled) and 2, 5 (light)
      (lo.floor..hi.ceil).each do |e|
        [1, 2, 5].each do |mult|
          v = mult * 10.0**e
          next if v < yrange[0] * 0.999 || v > yrange[1] * 1.001

          y = yf.call(v).round(1)
          s << %(<line x1="#{x0}" y1="#{y}" x2="#{x0 + w}" y2="#{y}" class="#{mult == 1 ? 'grid' : 'grid2'}"/>\n)
          s << %(<text x="#{x0 - 6}" y="#{y + 4}" class="ytick">#{esc(ylab.call(v))}</text>\n) if mult == 1
        end
      end
      # x grid: powers of two
      c = 1
      while c <= cmax
        if c >= cmin
          x = xf.call(c).round(1)
          s << %(<line x1="#{x}" y1="#{y0}" x2="#{x}" y2="#{y0 + h}" class="grid2"/>\n)
          s << %(<text x="#{x}" y="#{y0 + h + 16}" class="xtick">#{c}</text>\n)
        end
        c *= 2
      end
      s << %(<text x="#{x0 + w / 2}" y="#{y0 + h + 36}" class="axis">concurrent connections C (log₂)</text>\n)
      s << %(<text x="#{x0 - 52}" y="#{y0 + h / 2}" class="axis" transform="rotate(-90 #{x0 - 52} #{y0 + h / 2})">#{esc(ylabel)}</text>\n)
      notes.each do |n|
        y = yf.call(n[:y]).round(1)
        if n[:ref]
          s << %(<line x1="#{x0}" y1="#{y}" x2="#{x0 + w}" y2="#{y}" stroke="#{n[:color]}" stroke-width="1" stroke-dasharray="2 3" opacity="0.8"/>\n)
        end
        x = n[:at] ? xf.call(n[:at]).round(1) : x0 + 4
        s << %(<text x="#{x}" y="#{n[:below] ? y + 13 : y - 4}" class="note" fill="#{n[:color] || '#555'}">#{esc(n[:text])}</text>\n)
      end
      series.each do |ser|
        pts = ser[:pts].select { |_, v| v&.positive? }
        next if pts.empty?

        xy = pts.map { |cc, v| [(xf.call(cc) + ser[:dx].to_f).round(1), yf.call(v).round(1)] }
        if ser[:line] != false && xy.size > 1
          s << %(<polyline points="#{xy.map { |a, b| "#{a},#{b}" }.join(' ')}" fill="none" stroke="#{ser[:color]}" ) +
               %(stroke-width="#{ser[:dash] ? 1.8 : 2.2}"#{ser[:dash] ? ' stroke-dasharray="7 5"' : ''}/>\n)
        end
        xy.each_with_index do |(a, b), i|
          s << marker(ser[:marker], a, b, ser[:color], ser[:bad]&.[](i))
        end
      end
      s
    end

    def marker(kind, x, y, color, bad = false)
      s = case kind
          when :dot then %(<circle cx="#{x}" cy="#{y}" r="3.6" fill="#{color}"/>\n)
          when :diamond
            %(<path d="M#{x},#{y - 6} L#{x + 6},#{y} L#{x},#{y + 6} L#{x - 6},#{y} Z" fill="#{color}" stroke="#fff" stroke-width="1"/>\n)
          when :square
            %(<rect x="#{x - 5}" y="#{y - 5}" width="10" height="10" fill="#fff" stroke="#{color}" stroke-width="2"/>\n)
          else ''
          end
      s << %(<circle cx="#{x}" cy="#{y}" r="8" fill="none" stroke="#c00" stroke-width="1.5"/>\n) if bad
      s
    end

    # contrast.html: the table, the chart (Little's law vs measured) and the
    # waterfall of one request of each kind, in one file.
    def html(res, md)
      esc = ->(t) { t.to_s.gsub('&', '&amp;').gsub('<', '&lt;').gsub('>', '&gt;') }
      falls = (res[:traces] || {}).map do |key, t|
        next '' unless t

        "<h3>#{esc.(endpoint(key.to_sym)[:path])}</h3>#{waterfall_svg(t)}"
      end
      <<~HTML
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>bench:contrast</title>
        <style>body{font:13px system-ui,sans-serif;margin:16px;max-width:1100px}pre{background:#f4f4f4;padding:8px;overflow:auto}</style></head>
        <body><h1>Blocking vs non-blocking, measured</h1>
        <h2>Throughput against Little's law</h2>#{svg(res)}
        <h2>One request of each kind (filled: its fiber runs; hollow: it waits)</h2>#{falls.join}
        <h2>The numbers</h2><pre>#{esc.(md)}</pre></body></html>
      HTML
    end

    # A trace (GET /dashboard/trace) as rows of running and waiting spans.
    def waterfall_svg(t)
      events = t[:events] || []
      return '<p>(no events)</p>' if events.empty?

      ids = events.map { |e| e[:req] }.uniq
      last = [events.map { |e| e[:t] }.max, 1].max.to_f
      x = ->(us) { (180 + us * 600 / last).round(1) }
      rows = ids.each_with_index.map do |id, row|
        evs = events.select { |e| e[:req] == id }
        y = 8 + row * 24
        spans = evs.each_cons(2).map do |a, b|
          wait = a[:event] =~ /suspended|waiting/
          %(<rect x="#{x.(a[:t])}" y="#{y}" width="#{[x.(b[:t]) - x.(a[:t]), 1].max.round(1)}" height="14" ) +
            %(fill="#{wait ? 'none' : '#1f77b4'}" stroke="#1f77b4"><title>#{a[:event].to_s.gsub('<', '&lt;')}</title></rect>)
        end
        %(<text x="0" y="#{y + 11}" font-size="10">##{id} #{evs.first[:path].to_s.gsub('<', '&lt;')[0, 28]}</text>#{spans.join})
      end
      h = 8 + ids.size * 24 + 16
      %(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 800 #{h}" width="800">#{rows.join}) +
        %(<text x="180" y="#{h - 4}" font-size="10">status #{t[:status]}, #{(last / 1000).round(2)} ms</text></svg>)
    end

    def svg(res)
      cs = (res[:sweep].map { |r| r[:c] } + [1]).uniq.sort
      cs << AB_C if res[:headline].any?
      cs = cs.uniq.sort
      cmax = 1
      cmax *= 2 while cmax < cs.max
      cs = [1, cmax]
      ab_cmax_ok = AB_C <= cmax
      by = ->(key) { res[:sweep].select { |r| r[:endpoint] == key.to_s }.sort_by { |r| r[:c] } }
      sweep_c = res[:sweep].map { |r| r[:c] }.uniq.sort
      ab = res[:headline].select { |r| r[:tool] == 'ab' }

      thr = []
      lat = []
      ENDPOINTS.each_key do |key|
        pts = by.call(key)
        col = COLORS[key]
        thr << { pts: pts.map { |r| [r[:c], r[:rps]] }, color: col, marker: :dot,
                 bad: pts.map { |r| (r[:failures] || r[:errors]).to_i.positive? } }
        lat << { pts: pts.map { |r| [r[:c], r[:mean_ms]] }, color: col, marker: :dot,
                 bad: pts.map { |r| (r[:failures] || r[:errors]).to_i.positive? } }
        pc = ([1] + sweep_c + [cmax]).uniq.sort
        thr << { pts: pc.map { |c| [c, little_limit(key, c)] }, color: col, dash: true }
        lat << { pts: pc.map { |c| [c, predicted_latency(key, c)] }, color: col, dash: true }
        next unless ab_cmax_ok

        # published (square) a little left of C = 100, ab (diamond) a little right: both stay visible
        thr << { pts: [[AB_C, ENDPOINTS[key][:published]]], color: col, marker: :square, line: false, dx: -7 }
        a = ab.find { |r| r[:endpoint] == key.to_s }
        next unless a

        thr << { pts: [[AB_C, a[:rps]]], color: col, marker: :diamond, line: false, dx: 7 }
        lat << { pts: [[AB_C, a[:mean_ms]]], color: col, marker: :diamond, line: false }
      end

      range = lambda do |sers|
        vals = sers.flat_map { |s| s[:pts].map(&:last) }.compact.select(&:positive?)
        [10.0**Math.log10(vals.min * 0.8).floor, 10.0**Math.log10(vals.max * 1.25).ceil]
      end

      width = 1120
      pw = 430
      ph = 330
      top = 118
      lx = 90
      rx = lx + pw + 130
      m = res[:meta]
      s = +%(<svg xmlns="http://www.w3.org/2000/svg" width="#{width}" height="612" viewBox="0 0 #{width} 612" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">\n)
      s << <<~CSS
        <style>
          .title { font-size: 19px; font-weight: bold; text-anchor: middle; fill: #222; }
          .sub { font-size: 12.5px; text-anchor: middle; fill: #555; }
          .ptitle { font-size: 14.5px; font-weight: bold; text-anchor: middle; fill: #333; }
          .frame { fill: #fff; stroke: #888; stroke-width: 1; }
          .grid { stroke: #ccc; stroke-width: 1; }
          .grid2 { stroke: #eee; stroke-width: 1; }
          .xtick { font-size: 11.5px; text-anchor: middle; fill: #444; }
          .ytick { font-size: 11.5px; text-anchor: end; fill: #444; }
          .axis { font-size: 12.5px; text-anchor: middle; fill: #333; }
          .note { font-size: 11px; }
          .leg { font-size: 12.5px; fill: #333; }
        </style>
        <rect width="100%" height="100%" fill="#fafafa"/>
      CSS
      s << %(<text x="#{width / 2}" y="30" class="title">gateway: non-blocking vs blocking sub-request to a 10 ms backend — measured vs Little's law</text>\n)
      s << %(<text x="#{width / 2}" y="54" class="sub">#{esc("build/gateway -f #{m[:config]} pinned to CPU #{m[:server_cpu]}, load generator on CPU #{m[:load_cpu]} · #{m[:gateway].split.first} #{m[:git]} · #{m[:started]}#{m[:quick] ? ' · QUICK run' : ''}")}</text>\n)
      s << %(<text x="#{width / 2}" y="73" class="sub">solid: measured (wrk) · dashed: predicted · ◆ ab -k -c100 -n1000 (this gateway) · □ ngx_mruby published (ab) · red ring: errors</text>\n)
      ty = range.call(thr)
      s << panel(lx, top, pw, ph, title: 'Throughput', ylabel: 'requests / s (log)', cs: cs, yrange: ty, series: thr,
                                  notes: [{ y: 10_000, text: 'Little limit at C = 100: 10,000 req/s', color: COLORS[:async], ref: true },
                                          { y: 100, text: 'one blocking worker: 100 req/s', color: COLORS[:blocking], at: 6 }]
                                          .select { |n| n[:y] >= ty[0] && n[:y] <= ty[1] })
      lyr = range.call(lat)
      s << panel(rx, top, pw, ph, title: 'Mean latency', ylabel: 'mean latency (log)', cs: cs, yrange: lyr, series: lat,
                                  ylab: ->(v) { ms_label(v) })
      # legend
      ly = top + ph + 62
      items = [
        [:async, false, :dot, 'non-blocking, measured'],
        [:async, true, nil, 'non-blocking, predicted: X = C / 10 ms, latency 10 ms'],
        [:blocking, false, :dot, 'blocking, measured'],
        [:blocking, true, nil, 'blocking, predicted: X = 100 req/s, latency C × 10 ms']
      ]
      items.each_with_index do |(key, dash, mk, text), i|
        x = lx + (i.odd? ? 470 : 0)
        y = ly + (i / 2) * 24
        s << %(<line x1="#{x}" y1="#{y}" x2="#{x + 36}" y2="#{y}" stroke="#{COLORS[key]}" stroke-width="2.2"#{dash ? ' stroke-dasharray="7 5"' : ''}/>\n)
        s << marker(mk, x + 18, y, COLORS[key]) if mk
        s << %(<text x="#{x + 46}" y="#{y + 4.5}" class="leg">#{esc(text)}</text>\n)
      end
      y = ly + 48
      s << marker(:diamond, lx + 18, y, '#666')
      s << %(<text x="#{lx + 46}" y="#{y + 4.5}" class="leg">ab -k -c 100 -n 1000, this gateway (ab mean = time per request)</text>\n)
      s << marker(:square, lx + 470 + 18, y, '#666')
      s << %(<text x="#{lx + 470 + 46}" y="#{y + 4.5}" class="leg">ngx_mruby published, ab -k -c 100 -n 1000 (81.41 / 3941.80)</text>\n)
      s << "</svg>\n"
      s
    end

    # ----------------------------------------------------------------- util

    def signal(sig, pid)
      Process.kill(sig, pid)
    rescue SystemCallError
      nil
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def rel(path)
      path.start_with?("#{@root}/") ? path.delete_prefix("#{@root}/") : path
    end

    def log(msg)
      $stderr.puts "[bench:contrast] #{msg}"
    end
  end
end

require 'etc'

if $PROGRAM_NAME == __FILE__
  root = File.expand_path('..', __dir__)
  quick = ARGV.include?('--quick') || !ENV.fetch('QUICK', '').empty? && ENV['QUICK'] != '0'
  if (i = ARGV.index('--render'))
    json = ARGV[i + 1] || File.join(root, 'build/bench/contrast.json')
    Gateway::BenchContrast.new(root: root, binary: File.join(root, 'build/gateway')).render(json)
    exit
  end
  bin = ARGV.find { |a| !a.start_with?('--') } || File.join(root, 'build/gateway')
  begin
    Gateway::BenchContrast.new(root: root, binary: bin, quick: quick).run
  rescue Gateway::BenchContrast::Error => e
    warn "bench:contrast: #{e.message}"
    exit 1
  end
end
