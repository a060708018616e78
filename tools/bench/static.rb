# frozen_string_literal: true

# rake bench:static - static files, gateway vs nginx vs h2o, side by side in
# one run (one worker each, pinned to SERVER_CPU; load on LOAD_CPU):
#
#   W4: a 0-byte and a 100-byte file, wrk -t1 -c100 and -c300, then
#       h2load --h1 -t1 -c100 (the second tool: weighttp is not in Debian);
#   a 100 MB file, wrk -t1 -c4: bytes/s and server CPU seconds per GB.
#
# Peers: nginx (worker_processes 1, sendfile on, tcp_nopush on,
# open_file_cache max=1000 inactive=20s as in the Go study's config) and h2o
# (num-threads 1, file.dir). Server CPU is read from /proc (the server and
# its children) around each run: µs per request; the load generator's CPU
# as a share of its core ("load core busy"). Writes
# build/bench/static.{md,json}. The servers run side by side and take turns
# in each row; ROUNDS (default 1) repeats the rows, the tables show medians.
# DURATION (s, default 5), ROUNDS, SERVERS.
require_relative 'common'

module GatewayBench
  class Static
    include Util

    SERVERS = %w[gateway nginx h2o].freeze

    def initialize(root:, env: ENV)
      @root = root
      @env = env
      @run = Runner.new(root: root, env: env, tag: 'static')
      @duration = env_int(env, 'DURATION', 5)
      @servers = env.fetch('SERVERS', SERVERS.join(',')).split(',')
      @rounds = env_int(env, 'ROUNDS', 1)
      @bin = env.fetch('GATEWAY_BIN', File.join(root, 'build/gateway'))
    end

    def docroot
      @docroot ||= begin
        d = @run.scratch('docroot')
        File.write(File.join(d, 'zero.txt'), '')
        File.write(File.join(d, 'b100.txt'), 'x' * 99 + "\n")
        File.open(File.join(d, 'big.bin'), 'wb') do |f|
          chunk = Random.new(1).bytes(1 << 20)
          100.times { f.write(chunk) }
        end
        d
      end
    end

    def start(name, port)
      case name
      when 'gateway'
        @run.start_gateway(name, @bin, <<~RUBY, port)
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/", root: #{docroot.inspect}
          end
        RUBY
      when 'nginx'
        ensure_pkgs(%w[nginx-light], log: @run.method(:log)) unless command?('nginx')
        @run.start_nginx(name, port, <<~NGINX)
          sendfile on;
          tcp_nopush on;
          open_file_cache max=1000 inactive=20s;
          keepalive_requests 1000000;
          server {
              listen #{HOST}:#{port} backlog=4096;
              root #{docroot};
          }
        NGINX
      when 'h2o'
        ensure_pkgs(%w[h2o], log: @run.method(:log)) unless command?('h2o')
        dir = @run.scratch(name)
        conf = File.join(dir, 'h2o.conf')
        File.write(conf, <<~H2O)
          num-threads: 1
          user: root
          pid-file: #{dir}/h2o.pid
          error-log: #{dir}/error.log
          max-connections: 4096
          listen:
            host: #{HOST}
            port: #{port}
          hosts:
            default:
              paths:
                /:
                  file.dir: #{docroot}
        H2O
        bin = `sh -c 'command -v h2o'`.strip
        @run.start(name, [bin, '-c', conf], port: port, dir: dir, binary: bin)
      end
    end

    # utime + stime ticks of a server and its descendants.
    def server_ticks(srv)
      ([srv.pid] + descendants(srv.pid)).sum { |p| ticks(p) || 0 }
    end

    def measure(srv)
      t0 = server_ticks(srv)
      res = yield
      res[:cpu_s] = (server_ticks(srv) - t0).to_f / clk_tck
      res
    end

    def wrk(srv, path, conns)
      measure(srv) do
        r = @run.run_wrk(['-t1', "-c#{conns}"], "http://#{HOST}:#{srv.port}#{path}", @duration)
        p = Runner.parse_wrk(r[:out])
        tr = r[:out][%r{Transfer/sec:\s+([\d.]+)(B|KB|MB|GB)}, 1]
        unit = r[:out][%r{Transfer/sec:\s+[\d.]+(B|KB|MB|GB)}, 1]
        p[:bytes_per_s] = tr && tr.to_f * { 'B' => 1, 'KB' => 1024, 'MB' => 1 << 20, 'GB' => 1 << 30 }[unit]
        p[:load_busy] = r[:load_cpu_s] / @duration
        p
      end
    end

    def h2load(srv, path, conns)
      measure(srv) do
        cmd = ['taskset', '-c', @run.load_cpu.to_s, 'h2load', '--h1', '-t1', "-c#{conns}", '-D', @duration.to_s,
               "http://#{HOST}:#{srv.port}#{path}"]
        t0 = Process.times
        out = IO.popen(cmd, err: %i[child out], &:read)
        t1 = Process.times
        Load.h2load(out).merge(
          load_busy: ((t1.cutime + t1.cstime) - (t0.cutime + t0.cstime)) / @duration
        )
      end
    end

    # The servers run side by side; each row measures them in turn (a burst
    # of load from elsewhere on this shared machine then hits all of them),
    # ROUNDS times, and the tables take each row's median.
    def run
      ensure_pkgs(%w[wrk nghttp2-client], log: @run.method(:log)) unless command?('wrk') && command?('h2load')
      rows = []
      @run.with_cpu_lock do
        srvs = @servers.to_h { |name| [name, start(name, free_port)] }
        srvs.each_value { |srv| @run.run_wrk(['-t1', '-c10'], "http://#{HOST}:#{srv.port}/b100.txt", 1) } # warm-up
        @rounds.times do
          [['/zero.txt', '0 B'], ['/b100.txt', '100 B']].each do |path, label|
            [100, 300].each do |c|
              srvs.each do |name, srv|
                r = wrk(srv, path, c)
                rows << r.merge(server: name, work: "W4 #{label}", tool: "wrk -t1 -c#{c}")
                @run.log format('%-8s %-8s wrk c%-3d %9.0f req/s %6.1f us/req  load core %3.0f%%', name, label, c,
                                r[:rps].to_f, us_per(r), r[:load_busy].to_f * 100)
              end
            end
            srvs.each do |name, srv|
              r = h2load(srv, path, 100)
              rows << r.merge(server: name, work: "W4 #{label}", tool: 'h2load --h1 -t1 -c100')
              @run.log format('%-8s %-8s h2load    %9.0f req/s %6.1f us/req  load core %3.0f%%', name, label, r[:rps],
                              us_per(r), r[:load_busy].to_f * 100)
            end
          end
          srvs.each do |name, srv|
            r = wrk(srv, '/big.bin', 4)
            rows << r.merge(server: name, work: '100 MB file', tool: 'wrk -t1 -c4')
            @run.log format('%-8s 100MB    wrk c4   %9.1f MB/s %6.2f CPU s/GB', name, r[:bytes_per_s].to_f / (1 << 20),
                            cpu_per_gb(r))
          end
        end
      end
      report(rows)
    ensure
      @run.stop_all
      FileUtils.rm_rf(@docroot) if @docroot
    end

    # One row per (workload, tool, server): the median of its rounds by req/s
    # (MB/s for the 100 MB file), with that round's CPU figures.
    # Each carries the failures of all its rounds (fails).
    def medians(rows)
      rows.group_by { |r| r.values_at(:work, :tool, :server) }.values.map do |rs|
        key = rs.first[:work] == '100 MB file' ? :bytes_per_s : :rps
        rs.sort_by { |r| r[key].to_f }[rs.size / 2].merge(fails: Load.sum(rs))
      end
    end

    def us_per(r)
      r[:requests].to_i.positive? ? r[:cpu_s] * 1e6 / r[:requests] : 0
    end

    def cpu_per_gb(r)
      bytes = r[:bytes_per_s].to_f * r[:seconds].to_f
      bytes.positive? ? r[:cpu_s] / (bytes / (1 << 30)) : 0
    end

    def report(runs)
      rows = medians(runs)
      # A load core near 100% busy sets the rate itself: then req/s ratios
      # say little, and server CPU per request is the figure to read.
      s = +"bench:static — #{Time.now.utc.strftime('%F %H:%M UTC')}, load average #{File.read('/proc/loadavg').split.first(3).join(' ')}; " \
            "#{@duration} s per run, median of #{@rounds} round(s); every server serves the same files from disk (like for like). " \
            "req/s counts successful (2xx) requests only; failures are summed over the rounds, a row with any is marked ⚠.\n\n"
      s << "| workload | tool | server | req/s | server CPU µs/req | load core busy | ratio gateway/peer | #{Load::FAIL_HEAD} |\n" \
           "|---|---|---|--:|--:|--:|--:|#{Load::FAIL_ALIGN}|\n"
      rows.reject { |r| r[:work] == '100 MB file' }.group_by { |r| [r[:work], r[:tool]] }.each do |(w, t), rs|
        gw = rs.find { |r| r[:server] == 'gateway' }
        rs.each do |r|
          ratio = gw && r != gw && r[:rps].to_f.positive? ? format('%.2f×', gw[:rps] / r[:rps]) : ''
          s << format("| %s | %s | %s | %.0f | %.1f | %.0f%% | %s | %s |\n", w, t, Load.label(r[:server], r[:fails]), r[:rps].to_f,
                      us_per(r), r[:load_busy].to_f * 100, ratio, Load.cells(r[:fails]))
        end
      end
      s << "\n| 100 MB file, wrk -t1 -c4 | MB/s | server CPU s per GB | #{Load::FAIL_HEAD} |\n|---|--:|--:|#{Load::FAIL_ALIGN}|\n"
      rows.select { |r| r[:work] == '100 MB file' }.each do |r|
        s << format("| %s | %.0f | %.3f | %s |\n", Load.label(r[:server], r[:fails]), r[:bytes_per_s].to_f / (1 << 20),
                    cpu_per_gb(r), Load.cells(r[:fails]))
      end
      @run.write_report('static', s, { medians: rows, runs: runs })
    end
  end
end
