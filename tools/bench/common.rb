# frozen_string_literal: true

# Helpers shared by the benches of tools/bench/ (Ruby stdlib only): servers
# pinned with taskset and stopped by their own PID, free loopback ports, the
# shared CPU lock, Debian packages installed only when missing, /proc readings
# (RSS, CPU ticks, CPU busy shares), wrk runs, and the one reading of wrk's,
# h2load's and ab's output (Load) that every table's failure columns use.
#
# Everything talks to 127.0.0.1 only. A process is only ever signalled by the
# PID this code got when it spawned it (or read from /proc as that process's
# child and checked to still run the same binary): never by name.

require 'fileutils'
require 'json'
require 'socket'
require 'time'
require 'tmpdir'

module GatewayBench
  HOST = '127.0.0.1'

  class Error < StandardError; end

  # One started server: its PID (the process we spawned; taskset and prlimit
  # exec, so it is the server's own master), the binary it runs, a label.
  Server = Struct.new(:name, :pid, :binary, :port, :dir, :log, keyword_init: true)

  module Util
    module_function

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def env_int(env, key, default)
      v = env[key]
      v.nil? || v.strip.empty? ? default : Integer(v)
    end

    def command?(tool)
      system('sh', '-c', "command -v #{tool} >/dev/null 2>&1")
    end

    # apt-get install PKG... only for those not installed (as ../shared/bench
    # does), holding the CPU lock while dpkg unpacks.
    def ensure_pkgs(pkgs, lock: '/tmp/cpu.lock', log: nil)
      missing = pkgs.reject do |p|
        `dpkg-query -W -f='${Status}' #{p} 2>/dev/null`.include?('install ok installed')
      end
      return if missing.empty?

      log&.call("installing Debian packages: #{missing.join(' ')}")
      env = { 'DEBIAN_FRONTEND' => 'noninteractive' }
      apt = ['flock', lock, 'apt-get', '-o', 'DPkg::Lock::Timeout=600']
      out = '/tmp/gateway-bench-apt.log'
      ok = system(env, *apt, 'install', '-y', '--no-install-recommends', *missing, out: out, err: %i[child out])
      unless ok
        system(env, *apt, 'update', out: [out, 'a'], err: %i[child out])
        ok = system(env, *apt, 'install', '-y', '--no-install-recommends', *missing, out: [out, 'a'], err: %i[child out])
      end
      raise Error, "apt-get install #{missing.join(' ')} failed, see #{out}" unless ok
    end

    # Runs the block holding an exclusive flock on path (the CPU lock that
    # ../shared/bench and every bench here take around a measurement), waiting
    # at most wait seconds for another holder; raises error after that.
    def with_lock(path, wait, log:, error: Error)
      File.open(path, File::RDWR | File::CREAT, 0o666) do |f|
        unless f.flock(File::LOCK_EX | File::LOCK_NB)
          log.call("waiting for #{path} (another benchmark is measuring)...")
          deadline = monotonic + wait
          until f.flock(File::LOCK_EX | File::LOCK_NB)
            raise error, "#{path} still held after #{wait.to_i} s; giving up" if monotonic > deadline

            sleep 0.25
          end
        end
        begin
          yield
        ensure
          f.flock(File::LOCK_UN)
        end
      end
    end

    # A port nothing listens on now (bind(0), then closed).
    def free_port
      s = TCPServer.new(HOST, 0)
      s.addr[1]
    ensure
      s&.close
    end

    # n different ports nothing listens on now.
    def free_ports(n)
      ports = []
      ports |= [free_port] while ports.size < n
      ports
    end

    # The text of examples/async.rb (path) with its fixed ports replaced: the
    # backend's 48080 by back, the front's 58080 by front, both listening on
    # HOST only, so two runs or another program on 48080/58080 never collide.
    def async_example(path, front:, back:)
      conf = File.read(path)
                 .gsub(/listen: 48080\b/, "listen: \"#{HOST}:#{back}\"").gsub(/listen: 58080\b/, "listen: \"#{HOST}:#{front}\"")
                 .gsub('127.0.0.1:48080', "127.0.0.1:#{back}")
      raise Error, "#{path}: its ports 48080/58080 were not found" unless conf.include?(":#{back}") && conf.include?(":#{front}")

      conf
    end

    def accepts?(port)
      TCPSocket.new(HOST, port, connect_timeout: 0.2).close
      true
    rescue SystemCallError, IOError
      false
    end

    def children(pid)
      File.read("/proc/#{pid}/task/#{pid}/children").split.map(&:to_i)
    rescue SystemCallError
      []
    end

    def descendants(pid)
      kids = children(pid)
      kids + kids.flat_map { |k| descendants(k) }
    end

    def exe(pid)
      File.readlink("/proc/#{pid}/exe")
    rescue SystemCallError
      nil
    end

    def runs?(pid, binary)
      e = exe(pid)
      return false unless e

      e.sub(/ \(deleted\)\z/, '') == File.realpath(binary)
    rescue SystemCallError
      false
    end

    def signal(sig, pid)
      Process.kill(sig, pid)
      true
    rescue SystemCallError
      false
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

    # VmRSS (and RssAnon) of a process, in KiB.
    def rss_kib(pid)
      st = File.read("/proc/#{pid}/status")
      { rss: st[/^VmRSS:\s+(\d+)/, 1].to_i, anon: st[/^RssAnon:\s+(\d+)/, 1].to_i }
    end

    # utime + stime clock ticks (/proc/PID/stat fields 14, 15).
    def ticks(pid)
      user_sys_ticks(pid)&.sum
    end

    # [utime, stime] clock ticks, or nil (the process is gone).
    def user_sys_ticks(pid)
      File.read("/proc/#{pid}/stat").split(') ', 2).last.split.values_at(11, 12).map(&:to_i)
    rescue SystemCallError
      nil
    end

    def clk_tck
      @clk_tck ||= Integer(`getconf CLK_TCK`.strip, exception: false) || 100
    end

    # Per-CPU [busy, total] jiffies from /proc/stat.
    def cpu_snap
      File.readlines('/proc/stat').grep(/^cpu\d+ /).to_h do |l|
        f = l.split
        v = f[1..].map(&:to_i)
        busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] || 0)
        [f[0], [busy, busy + v[3] + v[4]]]
      end
    end

    # Busy share (0..1) of CPU cpu between two snaps.
    def cpu_busy(before, after, cpu)
      k = "cpu#{cpu}"
      return nil unless before[k] && after[k]

      busy = after[k][0] - before[k][0]
      tot = after[k][1] - before[k][1]
      tot.positive? ? busy.to_f / tot : nil
    end

    # The median of key over the rows that match (e.g. server: 'nginx'),
    # rounded to 0.1; nil when none has it.
    def median_of(rows, key, **match)
      m = median(rows.select { |r| match.all? { |k, v| r[k] == v } }.map { |r| r[key] })
      m&.to_f&.round(1)
    end

    def median(xs)
      xs = xs.compact.sort
      return nil if xs.empty?

      n = xs.size
      n.odd? ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    end
  end

  # Instruction counts of a server under valgrind's callgrind, which do not
  # move with the machine's load (bench:instructions, bench:h2_instructions,
  # bench:ws_instructions).
  module Callgrind
    module_function

    # Starts argv under callgrind, children followed, their dumps and its
    # output in dir (a process group of its own); returns the pid.
    def spawn(argv, dir)
      Process.spawn('valgrind', '--tool=callgrind', '--trace-children=yes', "--callgrind-out-file=#{dir}/cg.%p",
                    *argv, out: "#{dir}/log", err: %i[child out], pgroup: true)
    end

    # Zeroes the counters of pid (one of spawn's processes), runs the block
    # (the load), dumps them: the instructions pid ran meanwhile. keep: a
    # path to copy the dump to, for callgrind_annotate (nil: none).
    # pid may be a list (a front and its backend): their instructions added
    # up, each one's dump kept as keep.N.
    def count(pid, dir, keep = nil)
      pids = Array(pid)
      pids.each { |p| system('callgrind_control', '-z', p.to_s, out: File::NULL, err: File::NULL) }
      yield
      pids.each_with_index.sum do |p, i|
        system('callgrind_control', '-d', p.to_s, out: File::NULL, err: File::NULL)
        dump = Dir["#{dir}/cg.#{p}.*"].max_by { |f| File.mtime(f) } or raise Error, "no callgrind dump for #{p}"
        FileUtils.cp(dump, pids.size > 1 ? "#{keep}.#{i}" : keep) if keep
        File.read(dump)[/^(?:summary|totals):\s+(\d+)/, 1].to_i
      end
    end

    # Writes dir/nginx.conf for an nginx counted under callgrind (in the
    # foreground, no master: the process spawned is the one serving, its
    # files in dir) with http_body inside http { }, main in the main
    # context (load_module lines); returns nginx's argv.
    def nginx(dir, http_body, main: '')
      FileUtils.mkdir_p("#{dir}/tmp")
      File.write("#{dir}/nginx.conf", <<~NGINX)
        #{main}
        daemon off;
        master_process off;
        #{Process.uid.zero? ? 'user root;' : ''}
        pid #{dir}/nginx.pid;
        error_log #{dir}/error.log warn;
        events { worker_connections 1024; }
        http {
          access_log off;
          client_body_temp_path #{dir}/tmp; proxy_temp_path #{dir}/tmp; fastcgi_temp_path #{dir}/tmp;
          uwsgi_temp_path #{dir}/tmp; scgi_temp_path #{dir}/tmp;
        #{http_body.gsub(/^/, '  ')}
        }
      NGINX
      ['nginx', '-p', dir, '-e', "#{dir}/error.log", '-c', "#{dir}/nginx.conf"]
    end

    # Stops the processes spawned for a count (TERM, then reaped); nil ones
    # and ones already gone are skipped.
    def stop(*pids)
      pids.compact.each do |p|
        Process.kill('TERM', p) rescue nil
        next if Util.wait_exit(p, 15) # valgrind may take a while to write its files

        Process.kill('KILL', p) rescue nil # one that ignored TERM (seen once: nginx under callgrind)
        Process.wait(p) rescue nil
      end
    end

    # Prints the table and writes it with its numbers to
    # root/build/bench/NAME.{md,json}.
    def write_report(root, name, text, data)
      puts text
      out = File.join(root, 'build', 'bench')
      FileUtils.mkdir_p(out)
      File.write(File.join(out, "#{name}.md"), text)
      File.write(File.join(out, "#{name}.json"), JSON.pretty_generate(data))
    end

    PHP_FPM = '/usr/sbin/php-fpm8.2'
    ECHO_PHP = "<?php echo \"hello from php\\n\";\n"

    # Debian's php-fpm (not counted: the front is) on dir/php.sock with
    # `children` static children, no php.ini (-n), serving dir/echo.php;
    # returns its pid once the socket is there (the caller stops it).
    def php_fpm(dir, children)
      raise Error, "#{PHP_FPM} is not installed (setup.sh installs php8.2-fpm)" unless File.executable?(PHP_FPM)

      File.write("#{dir}/echo.php", ECHO_PHP)
      File.write("#{dir}/fpm.conf", <<~INI)
        [global]
        error_log = #{dir}/fpm.log
        daemonize = no
        [www]
        #{Process.uid.zero? ? 'user = root' : ''}
        listen = #{dir}/php.sock
        pm = static
        pm.max_children = #{children}
      INI
      argv = [PHP_FPM, '-F', '-n', '-y', "#{dir}/fpm.conf", '-p', dir]
      argv << '-R' if Process.uid.zero?
      pid = Process.spawn(*argv, out: "#{dir}/fpm.out", err: %i[child out], pgroup: true)
      100.times { File.socket?("#{dir}/php.sock") ? break : sleep(0.1) }
      pid
    end
  end

  # What a load generator's output says, in one shape for wrk, h2load and ab,
  # so that every table counts failures the same way:
  #
  #   total     responses and failed requests the tool counted
  #   ok        requests answered 2xx (wrk: 2xx or 3xx, which it does not tell apart)
  #   errors    socket errors (connect, read, write; h2load's "errored", ab's
  #             failed connects, receives and exceptions)
  #   non2xx    answers with another status (wrk: 4xx and 5xx)
  #   timeouts  requests the tool gave up waiting for
  #   failures  errors + non2xx + timeouts
  #   rps       ok / seconds: successful requests only (raw_rps: the tool's own figure)
  #
  # `requests` is `ok` too: the divisor of a server's CPU time per request.
  module Load
    module_function

    FAIL_HEAD = 'errors | non-2xx | timeouts'
    FAIL_ALIGN = '--:|--:|--:'

    def seconds(value, unit)
      value.to_f * { 'us' => 1e-6, 'ms' => 1e-3, 's' => 1, 'm' => 60, 'h' => 3600 }.fetch(unit, 1)
    end

    # A tool that printed no summary (it could not connect, it was killed)
    # counts as one error: the row is marked, not left blank.
    def result(tool, total:, ok:, errors:, non2xx:, timeouts:, seconds:, raw_rps:, **more)
      ok = [ok.to_i, 0].max
      errors = 1 if seconds.nil? && errors.to_i.zero? && non2xx.to_i.zero? && timeouts.to_i.zero?
      secs = seconds.to_f
      { tool: tool, total: total.to_i, ok: ok, requests: ok, errors: errors.to_i, non2xx: non2xx.to_i,
        timeouts: timeouts.to_i, failures: errors.to_i + non2xx.to_i + timeouts.to_i,
        seconds: secs.positive? ? secs : nil, rps: secs.positive? ? ok / secs : nil, raw_rps: raw_rps, **more }
    end

    def wrk(out)
      lat = lambda do |pct|
        m = out.match(/^\s+#{pct}%\s+([\d.]+)(us|ms|s)\b/)
        m && seconds(m[1], m[2]) * 1000
      end
      sock = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/)
      c, r, w, t = sock ? sock.captures.map(&:to_i) : [0, 0, 0, 0]
      total = out[/(\d+) requests in/, 1].to_i
      non2xx = out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i
      m = out.match(/requests in ([\d.]+)(ms|s|m)\b/)
      raw = out[%r{Requests/sec:\s+([\d.]+)}, 1]&.to_f
      result('wrk', total: total, ok: total - non2xx, errors: c + r + w, non2xx: non2xx, timeouts: t,
                    seconds: m && seconds(m[1], m[2]), raw_rps: raw, p50_ms: lat.call(50), p99_ms: lat.call(99),
                    error_detail: sock && sock[0])
    end

    # h2load -n or -D: "succeeded" counts 2xx and 3xx (the status line tells them
    # apart); "errored" counts requests lost with their connection or never sent.
    def h2load(out)
      req = out.match(/requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/)
      total, _started, _done, _succ, _failed, errored, timeout = req ? req.captures.map(&:to_i) : [0] * 7
      codes = out.match(/status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/)
      s2, s3, s4, s5 = codes ? codes.captures.map(&:to_i) : [0] * 4
      m = out.match(/finished in ([\d.]+)(us|ms|s|m)\b/)
      result('h2load', total: total, ok: s2, errors: errored, non2xx: s3 + s4 + s5, timeouts: timeout,
                       seconds: m && seconds(m[1], m[2]), raw_rps: out[%r{finished in [\d.]+\w+, ([\d.]+) req/s}, 1]&.to_f,
                       error_detail: req && req[0])
    end

    # ab's "Length" failures (a body of another length than the first one's)
    # are not errors: a dynamic page (the status page, a counter) varies.
    def ab(out)
      complete = out[/Complete requests:\s+(\d+)/, 1].to_i
      failed = out[/Failed requests:\s+(\d+)/, 1].to_i - out[/\(Connect: \d+, Receive: \d+, Length: (\d+),/, 1].to_i
      non2xx = out[/Non-2xx responses:\s+(\d+)/, 1].to_i
      timeouts = out.include?('The timeout specified has expired') ? 1 : 0
      result('ab', total: complete, ok: complete - failed - non2xx, errors: failed, non2xx: non2xx, timeouts: timeouts,
                   seconds: out[/Time taken for tests:\s+([\d.]+) seconds/, 1]&.to_f,
                   raw_rps: out[/Requests per second:\s+([\d.]+)/, 1]&.to_f,
                   error_detail: out[/\(Connect: \d+, Receive: \d+, Length: \d+, Exceptions: \d+\)/])
    end

    # The failure counts of several runs (rounds of one row) added up.
    def sum(results)
      %i[errors non2xx timeouts failures].to_h { |k| [k, results.sum { |r| r[k].to_i }] }
    end

    # "errors | non-2xx | timeouts" cells of a row (r: a result or a sum).
    def cells(r)
      "#{r[:errors].to_i} | #{r[:non2xx].to_i} | #{r[:timeouts].to_i}"
    end

    # A row's label, marked when anything failed: "gateway ⚠ 12 failed".
    def label(name, r)
      n = r[:failures].to_i
      n.positive? ? "#{name} ⚠ #{n} failed" : name.to_s
    end
  end

  # Starts and stops servers; holds the CPU lock around measurement steps.
  class Runner
    include Util

    attr_reader :server_cpu, :load_cpu, :out_dir, :nofile

    def initialize(root:, env: ENV, tag: 'bench')
      @root = root
      @tag = tag
      @server_cpu = env_int(env, 'SERVER_CPU', 1)
      @load_cpu = env_int(env, 'LOAD_CPU', 0)
      @lock_path = env.fetch('CPU_LOCK', '/tmp/cpu.lock')
      @lock_wait = Float(env.fetch('LOCK_WAIT', '900'))
      # The servers' open-file limit: SERVER_NOFILE, at most our hard limit
      # (raising a hard limit needs CAP_SYS_RESOURCE, which a container may lack).
      @nofile = [env_int(env, 'SERVER_NOFILE', 65_536), Process.getrlimit(:NOFILE)[1]].min
      @out_dir = File.expand_path(env.fetch('BENCH_OUT', File.join(root, 'build/bench')), root)
      @servers = []
      FileUtils.mkdir_p(@out_dir)
    end

    def log(msg)
      $stderr.puts "[bench:#{@tag} #{Time.now.strftime('%H:%M:%S')}] #{msg}"
    end

    # A fresh scratch directory for one server's config and logs.
    def scratch(name)
      Dir.mktmpdir("gateway-bench-#{name}-")
    end

    # Spawns argv with a raised fd limit and pinned to the server CPU (prlimit
    # and taskset both exec: the PID is the server's), waits until port
    # accepts. The server is stopped by stop_all (also on errors).
    def start(name, argv, port:, dir:, binary:, timeout: 15)
      log_path = File.join(dir, "#{name}.log")
      cmd = ['prlimit', "--nofile=#{@nofile}", 'taskset', '-c', @server_cpu.to_s, *argv]
      pid = Process.spawn(*cmd, chdir: dir, pgroup: true, in: File::NULL, out: [log_path, 'w'], err: %i[child out])
      srv = Server.new(name: name, pid: pid, binary: binary, port: port, dir: dir, log: log_path)
      @servers << srv
      deadline = monotonic + timeout
      loop do
        if Process.waitpid(pid, Process::WNOHANG)
          @servers.delete(srv)
          raise Error, "#{name} exited during start-up (#{$?}); log:\n#{tail(log_path)}"
        end
        break if accepts?(port)
        raise Error, "#{name} did not accept on #{HOST}:#{port} within #{timeout} s; log:\n#{tail(log_path)}" if monotonic > deadline

        sleep 0.05
      end
      srv
    end

    def tail(path, n = 15)
      File.exist?(path) ? File.readlines(path).last(n).join : '(no log)'
    end

    # TERM to the PID we spawned (KILL after 5 s), then by PID to any child
    # (read before) still running the same binary.
    def stop(srv)
      return unless srv && @servers.delete(srv)

      kids = descendants(srv.pid).select { |k| runs?(k, srv.binary) }
      signal(:TERM, srv.pid)
      unless wait_exit(srv.pid, 5)
        log "#{srv.name} (pid #{srv.pid}) ignored TERM for 5 s: KILL"
        signal(:KILL, srv.pid)
        wait_exit(srv.pid, 5)
      end
      left = kids.select { |k| runs?(k, srv.binary) }
      left.each { |k| signal(:TERM, k) }
      sleep 0.5 unless left.empty?
      left.select { |k| runs?(k, srv.binary) }.each { |k| signal(:KILL, k) }
    end

    def stop_all
      @servers.dup.reverse_each { |s| stop(s) }
    end

    # Writes out_dir/NAME.md and NAME.json (data) and prints the Markdown.
    def write_report(name, md, data)
      File.write(File.join(@out_dir, "#{name}.md"), md)
      File.write(File.join(@out_dir, "#{name}.json"), JSON.pretty_generate(data))
      puts md
      log "wrote #{File.join(@out_dir, "#{name}.md")} and #{name}.json"
    end

    def with_cpu_lock(&block)
      Util.with_lock(@lock_path, @lock_wait, log: method(:log), &block)
    end

    # ------------------------------------------------------------ servers

    def gateway_conf_check(bin, conf)
      out = IO.popen([bin, '-t', '-f', conf, err: %i[child out]], &:read)
      raise Error, "#{bin} -t -f #{conf} rejected the config:\n#{out}" unless $?.success?
    end

    def start_gateway(name, bin, conf_text, port)
      dir = scratch(name)
      conf = File.join(dir, 'gateway.rb')
      File.write(conf, conf_text)
      gateway_conf_check(bin, conf)
      start(name, [bin, '-f', conf], port: port, dir: dir, binary: bin)
    end

    # nginx, one worker, everything under dir; body is the http{} content,
    # main: lines for the main context (load_module ...).
    def start_nginx(name, port, http_body, worker_connections: 8192, main: '')
      dir = scratch(name)
      %w[tmp_body tmp_proxy tmp_fcgi tmp_uwsgi tmp_scgi].each { |d| FileUtils.mkdir_p(File.join(dir, d)) }
      conf = File.join(dir, 'nginx.conf')
      File.write(conf, <<~NGINX)
        #{main}
        daemon off;
        master_process on;
        worker_processes 1;
        user root;
        pid #{dir}/nginx.pid;
        error_log #{dir}/error.log warn;
        worker_rlimit_nofile #{[@nofile, worker_connections * 2 + 64].min};
        events { worker_connections #{worker_connections}; multi_accept on; }
        http {
            access_log off;
            client_body_temp_path #{dir}/tmp_body;
            proxy_temp_path #{dir}/tmp_proxy;
            fastcgi_temp_path #{dir}/tmp_fcgi;
            uwsgi_temp_path #{dir}/tmp_uwsgi;
            scgi_temp_path #{dir}/tmp_scgi;
            default_type text/plain;
        #{http_body.gsub(/^/, '    ')}
        }
      NGINX
      bin = `sh -c 'command -v nginx'`.strip
      out = IO.popen([bin, '-t', '-q', '-p', dir, '-e', "#{dir}/error.log", '-c', conf, err: %i[child out]], &:read)
      raise Error, "nginx rejected #{conf}:\n#{out}" unless $?.success?

      start(name, [bin, '-p', dir, '-e', "#{dir}/error.log", '-c', conf], port: port, dir: dir, binary: bin)
    end

    # The worker of a one-worker server (forked a moment after the port
    # accepts, so it is waited for).
    def worker_of(srv, timeout: 5)
      deadline = monotonic + timeout
      loop do
        worker = children(srv.pid).find { |k| runs?(k, srv.binary) }
        return worker if worker
        raise Error, "#{srv.name}: no worker under #{srv.pid}" if monotonic > deadline

        sleep 0.05
      end
    end

    # Moves a server (an upstream) next to the load, off the server CPU, so
    # that the server CPU holds only the front being measured.
    def pin_to_load(srv)
      ([srv.pid] + descendants(srv.pid)).each do |pid|
        system('taskset', '-a', '-p', '-c', @load_cpu.to_s, pid.to_s, out: File::NULL)
      end
    end

    # The line under a table's title: when, how many rounds, the CPUs, the load.
    def conditions(rounds)
      load = File.read('/proc/loadavg').split.first(3).join(' ')
      "#{Time.now.utc.iso8601}, medians of #{rounds} rounds, server CPU #{server_cpu}, load CPU #{load_cpu}, " \
        "load average at the end #{load}"
    end

    # Stops every server but `keep` (the fronts, not their upstream).
    def stop_except(keep)
      @servers.reject { |s| s.equal?(keep) }.each { |s| stop(s) }
    end

    # Every case of every round, alternating (cases: [name, value] pairs; key,
    # if any, names the value in a failed case's row). Returns the rows the block measured, each
    # with its round; a case that fails is a row with its error instead. The
    # fronts are stopped after each case, `keep` (their upstream) at the end.
    def rounds(count, cases, key, keep:)
      rows = []
      count.times do |round|
        cases.each do |name, value|
          rows << yield(name, value).merge(round: round + 1)
        rescue Error => e
          log "#{name} #{value}: #{e.message}"
          row = { server: name, round: round + 1, error: e.message.lines.first.strip }
          row[key] = value if key
          rows << row
        ensure
          stop_except(keep)
        end
      end
      rows
    ensure
      stop_all
    end

    # wrk on url for duration under the CPU lock, and the worker's CPU time
    # (utime + stime) over it: {requests:, rps:, p99_ms:, errors:, non2xx:,
    # timeouts:, failures:, cpu_s:, cpu_us_per_req:, user_us_per_req:,
    # sys_us_per_req:} (Load's counts).
    def cpu_per_request(name, worker, args, url, duration)
      with_cpu_lock do
        u0, s0 = user_sys_ticks(worker)
        out = run_wrk(args, url, duration)
        u1, s1 = user_sys_ticks(worker)
        w = Runner.parse_wrk(out[:out])
        raise Error, "#{name}: wrk failed:\n#{out[:out]}" unless w[:requests].to_i.positive?

        us = ->(ticks) { (ticks.to_f / clk_tck * 1e6 / w[:requests]).round(1) }
        cpu_s = (u1 - u0 + s1 - s0).to_f / clk_tck
        { requests: w[:requests], rps: w[:rps]&.round, p99_ms: w[:p99_ms], **w.slice(:errors, :non2xx, :timeouts, :failures),
          cpu_s: cpu_s.round(2), cpu_us_per_req: (cpu_s * 1e6 / w[:requests]).round(1), user_us_per_req: us.call(u1 - u0),
          sys_us_per_req: us.call(s1 - s0) }
      end
    end

    # ---------------------------------------------------------------- wrk

    # wrk pinned to the load CPU, bounded (killed after duration + 30 s).
    # Returns its output.
    def run_wrk(args, url, duration)
      cmd = ['taskset', '-c', @load_cpu.to_s, 'wrk', *args, "-d#{duration}s", '--latency', url]
      t0 = Process.times
      out = +''
      r, w = IO.pipe
      pid = Process.spawn(*cmd, in: File::NULL, out: w, err: w)
      w.close
      reader = Thread.new { r.read }
      unless wait_exit(pid, duration + 30)
        signal(:TERM, pid)
        signal(:KILL, pid) unless wait_exit(pid, 3)
        wait_exit(pid, 2)
        out << "# killed after #{duration + 30} s\n"
      end
      out.prepend(reader.value.to_s)
      r.close
      t1 = Process.times
      # wrk's own CPU seconds (a reaped child's): near `duration`, the load
      # generator and not the server set the rate.
      load_cpu_s = (t1.cutime + t1.cstime) - (t0.cutime + t0.cstime)
      { cmd: cmd.join(' '), out: out, status: $?&.exitstatus, load_cpu_s: load_cpu_s }
    end

    # wrk's output as Load.wrk reads it (rps: successful requests only).
    def self.parse_wrk(out)
      Load.wrk(out)
    end
  end
end
