# frozen_string_literal: true

# `rake bench:fastcgi` (issue 15, W6): php-fpm answering a one-line echo,
# the gateway vs nginx in front of identical php-fpm pools, via TCP and via a
# unix socket, wrk -t1 -c16 and -c100; then the study's four-way table for
# the gateway: backend direct, proxy_pass, FastCGI TCP, FastCGI unix.
#
# php-fpm has no HTTP side, so "backend direct" is a 1-worker nginx answering
# the same line itself (`return 200`), and "proxy_pass" is the gateway's
# proxy_pass to that nginx: the HTTP path the study compares FastCGI with.
#
# Everything runs side by side in one run: the front (gateway or nginx, one
# worker) and the backend (php-fpm: one master; for each front a pool on TCP
# and one on a unix socket, pm static with FPM_CHILDREN children each, so
# that no pooled keep-alive connection ever holds the last free child)
# pinned to SERVER_CPU, wrk pinned to LOAD_CPU. Per run: req/s, p99, wrk's
# errors, and CPU µs per request of the front and of its pool's children
# (utime+stime from /proc over the measured window / requests). Every run is repeated ROUNDS times, the fronts taking
# turns; the tables show medians. Writes build/bench/fastcgi.{md,json}.
#
# Environment: DURATION (5), WARMUP (1), ROUNDS (3), FPM_CHILDREN (128), KEEPALIVE (128),
# SERVER_CPU, LOAD_CPU, CPU_LOCK, BENCH_OUT, GATEWAY_BIN. php8.2-fpm, nginx
# and wrk are installed with apt-get when missing.

require_relative 'common'

module GatewayBench
  class FastCGI
    include Util

    PHP_FPM = '/usr/sbin/php-fpm8.2'
    BODY = "hello from php\n"
    LOADS = [['c16', %w[-t1 -c16]], ['c100', %w[-t1 -c100]]].freeze

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @duration = env_int(env, 'DURATION', 5)
      @warmup = env_int(env, 'WARMUP', 1)
      @children = env_int(env, 'FPM_CHILDREN', 128)
      @keepalive = env_int(env, 'KEEPALIVE', 128)
      @rounds = env_int(env, 'ROUNDS', 3)
      @runner = Runner.new(root: root, env: env, tag: 'fastcgi')
    end

    def log(msg) = @runner.log(msg)

    def run
      ensure_pkgs(%w[php8.2-fpm nginx wrk], log: method(:log))
      results = []
      @runner.with_cpu_lock do
        fpm = start_fpm
        static = @runner.start_nginx('static', (sport = free_port), <<~NGINX)
          server { listen 127.0.0.1:#{sport}; location / { return 200 "#{BODY.chomp}\\n"; } }
        NGINX
        gw_port = free_port
        gw = @runner.start_gateway('gateway', @bin, gateway_conf(gw_port, sport), gw_port)
        ng_port = free_port
        ng = @runner.start_nginx('nginx', ng_port, nginx_conf(ng_port))
        rows = [
          ['gateway', 'FastCGI TCP', gw, '/tcp/echo.php', fpm_pool(fpm, 'gateway_tcp')],
          ['nginx', 'FastCGI TCP', ng, '/tcp/echo.php', fpm_pool(fpm, 'nginx_tcp')],
          ['gateway', 'FastCGI unix', gw, '/unix/echo.php', fpm_pool(fpm, 'gateway_unix')],
          ['nginx', 'FastCGI unix', ng, '/unix/echo.php', fpm_pool(fpm, 'nginx_unix')],
          ['nginx static', 'backend direct', static, '/', nil],
          ['gateway', 'proxy_pass', gw, '/proxy', static],
        ]
        rows.each { |_, _, srv, path, _| check_body(srv.port, path) }
        # Rounds interleave the fronts, so a burst of load from elsewhere on
        # this shared machine hits both sides; the tables take medians.
        @rounds.times do |round|
          rows.each do |front, path_kind, srv, path, backend|
            LOADS.each do |load_id, args|
              r = measure(srv, "http://#{HOST}:#{srv.port}#{path}", args, backend)
              r.merge!(front: front, kind: path_kind, load: load_id, round: round + 1)
              log format('round %d  %-12s %-15s %-5s %8.0f req/s  front %6.1f µs/req  backend %6s µs/req  failures %d',
                         round + 1, front, path_kind, load_id, r[:rps] || 0, r[:front_us] || 0,
                         r[:backend_us] ? format('%.1f', r[:backend_us]) : '-', r[:failures] || 0)
              results << r
            end
          end
        end
      ensure
        @runner.stop_all
      end
      write(results)
    end

    # One php-fpm master with identical pools for each front, a TCP and a
    # unix one: a php-fpm child stays bound to a kept-alive connection until
    # the front closes it, so fronts sharing a pool would pin each other's
    # children (the one measured second then waits in php-fpm's accept
    # queue: wrk timeouts, p99 in seconds, php-fpm with fewer runnable
    # children and so cheaper per request).
    def start_fpm
      dir = @runner.scratch('php-fpm')
      File.write(File.join(dir, 'echo.php'), "<?php echo \"#{BODY.chomp}\\n\";\n")
      @www = dir
      @listen = {}
      root = Process.uid.zero?
      pools = %w[gateway nginx].flat_map do |front|
        tcp = "127.0.0.1:#{free_port}"
        @listen[front] = { tcp: tcp, unix: File.join(dir, "#{front}.sock") }
        [["#{front}_tcp", tcp], ["#{front}_unix", @listen[front][:unix]]]
      end
      conf = File.join(dir, 'fpm.conf')
      File.write(conf, "[global]\nerror_log = #{dir}/fpm.log\ndaemonize = no\n" + pools.map { |name, listen| <<~INI }.join)
        [#{name}]
        #{root ? 'user = root' : ''}
        listen = #{listen}
        listen.backlog = 4096
        pm = static
        pm.max_children = #{@children}
      INI
      argv = [PHP_FPM, '-F', '-y', conf, '-p', dir]
      argv << '-R' if root
      @runner.start('php-fpm', argv, port: Integer(@listen['gateway'][:tcp].split(':').last), dir: dir,
                                    binary: PHP_FPM, timeout: 30)
    end

    # The children of one pool (php-fpm titles them "php-fpm: pool NAME"),
    # as a Server whose pid_list the CPU measure reads.
    def fpm_pool(fpm, name)
      kids = descendants(fpm.pid).select do |k|
        File.read("/proc/#{k}/cmdline").start_with?("php-fpm: pool #{name}")
      rescue SystemCallError
        false
      end
      raise Error, "php-fpm pool #{name} has no children" if kids.empty?

      PoolProcs.new(kids)
    end

    PoolProcs = Struct.new(:pids)

    def gateway_conf(port, static_port)
      <<~RUBY
        upstream :php_tcp, servers: ["#{@listen['gateway'][:tcp]}"], protocol: :fastcgi, keepalive: #{@keepalive}
        upstream :php_unix, servers: ["unix:#{@listen['gateway'][:unix]}"], protocol: :fastcgi, keepalive: #{@keepalive}
        upstream :static, servers: ["127.0.0.1:#{static_port}"], keepalive: #{@keepalive}
        server listen: "127.0.0.1:#{port}", workers: 1, stall_timeout: nil do
          location "/tcp/", fastcgi: "php_tcp", script_filename: "#{@www}/echo.php"
          location "/unix/", fastcgi: "php_unix", script_filename: "#{@www}/echo.php"
          location "/proxy", proxy_pass: "http://static/"
        end
      RUBY
    end

    def nginx_conf(port)
      <<~NGINX
        upstream php_tcp { server #{@listen['nginx'][:tcp]}; keepalive #{@keepalive}; }
        upstream php_unix { server unix:#{@listen['nginx'][:unix]}; keepalive #{@keepalive}; }
        server {
          listen 127.0.0.1:#{port} reuseport backlog=4096;
          location /tcp/ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME #{@www}/echo.php;
                           fastcgi_keep_conn on; fastcgi_pass php_tcp; }
          location /unix/ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME #{@www}/echo.php;
                            fastcgi_keep_conn on; fastcgi_pass php_unix; }
        }
      NGINX
    end

    def check_body(port, path)
      body = nil
      5.times do
        body = Net::HTTP.get(URI("http://#{HOST}:#{port}#{path}")) rescue nil
        return if body == BODY
        sleep 0.2
      end
      raise Error, "GET #{path} on port #{port} answered #{body.inspect}, want #{BODY.inspect}"
    end

    def pids_of(srv)
      return [] unless srv
      return srv.pids if srv.is_a?(PoolProcs)

      [srv.pid] + descendants(srv.pid).select { |k| runs?(k, srv.binary) }
    end

    def ticks_sum(pids) = pids.sum { |p| ticks(p) || 0 }

    def measure(srv, url, args, backend)
      @runner.run_wrk(args, url, @warmup)
      sleep 0.5
      fp = pids_of(srv)
      bp = pids_of(backend)
      f0 = ticks_sum(fp)
      b0 = ticks_sum(bp)
      out = @runner.run_wrk(args, url, @duration)
      f1 = ticks_sum(fp)
      b1 = ticks_sum(bp)
      w = Runner.parse_wrk(out[:out])
      us = ->(t) { w[:requests].to_i.positive? ? t * 1e6 / clk_tck / w[:requests] : nil }
      w.merge(front_us: us.call(f1 - f0), backend_us: bp.empty? ? nil : us.call(b1 - b0), wrk: out[:cmd])
    end

    # The median of each measure over the rounds of one (front, path, load).
    def medians(runs)
      med = ->(key) { (xs = runs.map { |r| r[key] }.compact).empty? ? nil : median(xs) }
      runs.first.slice(:front, :kind, :load).merge(
        rps: med.call(:rps), front_us: med.call(:front_us), backend_us: med.call(:backend_us),
        p99_ms: med.call(:p99_ms), **Load.sum(runs), rounds: runs.size
      )
    end

    def write(runs)
      results = runs.group_by { |r| r.values_at(:front, :kind, :load) }.values.map { |g| medians(g) }
      find = ->(front, kind, load) { results.find { |r| r[:front] == front && r[:kind] == kind && r[:load] == load } }
      f = ->(v, fmt = '%.1f') { v ? format(fmt, v) : '-' }
      md = +"# bench:fastcgi (W6)\n\n#{Time.now.utc.iso8601}, #{@duration} s per run, medians of #{@rounds} rounds, server CPU #{@runner.server_cpu}, " \
            "load CPU #{@runner.load_cpu}, php-fpm pm static #{@children} children per pool, keepalive #{@keepalive}\n\n"
      md << "| path | load | gateway req/s | gateway µs/req | nginx req/s | nginx µs/req | req/s ratio | µs ratio (nginx/gateway) | php-fpm µs/req (gw, nginx) | p99 ms (gw, nginx) | errors / non-2xx / timeouts (gw; nginx) |\n"
      md << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
      ['FastCGI TCP', 'FastCGI unix'].each do |kind|
        LOADS.each do |load, _|
          g = find.call('gateway', kind, load)
          n = find.call('nginx', kind, load)
          next unless g && n
          fails = g[:failures] + n[:failures]
          md << "| #{kind}#{fails.positive? ? " ⚠ #{fails} failed" : ''} | #{load} | #{f.call(g[:rps], '%.0f')} | #{f.call(g[:front_us])} | #{f.call(n[:rps], '%.0f')} | " \
                "#{f.call(n[:front_us])} | #{f.call(g[:rps] && n[:rps] && g[:rps] / n[:rps], '%.2f')}× | " \
                "#{f.call(g[:front_us] && n[:front_us] && n[:front_us] / g[:front_us], '%.2f')}× | " \
                "#{f.call(g[:backend_us])}, #{f.call(n[:backend_us])} | #{f.call(g[:p99_ms])}, #{f.call(n[:p99_ms])} | " \
                "#{g.values_at(:errors, :non2xx, :timeouts).join(' / ')}; #{n.values_at(:errors, :non2xx, :timeouts).join(' / ')} |\n"
        end
      end
      md << "\nThe study's four-way table (gateway; backend direct = nginx `return 200` alone):\n\n"
      md << "| path | load | req/s | front µs/req | backend µs/req | req/s vs direct | #{Load::FAIL_HEAD} |\n|---|---|--:|--:|--:|--:|#{Load::FAIL_ALIGN}|\n"
      [['nginx static', 'backend direct'], ['gateway', 'proxy_pass'], ['gateway', 'FastCGI TCP'], ['gateway', 'FastCGI unix']].each do |front, kind|
        LOADS.each do |load, _|
          r = find.call(front, kind, load)
          d = find.call('nginx static', 'backend direct', load)
          next unless r
          md << "| #{Load.label(kind, r)} | #{load} | #{f.call(r[:rps], '%.0f')} | #{f.call(r[:front_us])} | #{f.call(r[:backend_us])} | " \
                "#{f.call(d && r[:rps] && d[:rps] && r[:rps] / d[:rps], '%.2f')}× | #{Load.cells(r)} |\n"
        end
      end
      errs = results.sum { |r| r[:failures].to_i }
      md << "\nreq/s counts successful (2xx) requests only. wrk failures (socket errors, non-2xx, timeouts) over all runs: #{errs}\n"
      @runner.write_report('fastcgi', md, { medians: results, runs: runs })
    end
  end
end

require 'net/http'
