# frozen_string_literal: true

# `rake bench:idle` (standalone: `ruby tools/bench/idle_conns.rb`): what an
# idle keep-alive connection costs a worker, side by side.
#
# For each server — the gateway with a Ruby location answering "ok", the
# gateway with only a non-Ruby location (`status: true`; the gateway has no
# `return 200`-style directive), nginx (`return 200 "ok"`) and h2o (a 2-byte
# `file.file`), one worker each — it starts the server pinned to SERVER_CPU (1)
# on a free port with its own scratch config, finds the worker process (nginx's
# worker, not its master; the gateway's worker, a child of its master; h2o's
# only process), warms it up with 50 requests, reads the worker's VmRSS, then
# opens N keep-alive connections (IDLE_CONNS, default 5000) from this one
# process, sends one `GET / HTTP/1.1` on each and reads each full response,
# waits 1 s and reads VmRSS again (the max of 3 reads 200 ms apart):
#
#   KiB per idle connection = (RSS with N idle connections - RSS before) / N
#
# It also counts the server's ESTABLISHED sockets (ss) to show that all N are
# held, reads the gateway's own counters from its status page, and reads the
# RSS once more after the client closed everything. Writes
# build/bench/idle.md and build/bench/idle.json.
#
# Environment: IDLE_CONNS (5000), IDLE_SERVERS ("gateway-ruby,gateway-status,
# nginx,h2o"), GATEWAY_BIN (build/gateway), SERVER_CPU (1), CPU_LOCK
# (/tmp/cpu.lock, held while each server is measured), LOCK_WAIT (900 s),
# BENCH_OUT (build/bench). nginx and h2o are installed with apt-get when
# missing; a server whose binary is absent is skipped with a note.

require_relative 'common'

module GatewayBench
  class IdleConns
    include Util

    SERVERS = %w[gateway-ruby gateway-status nginx h2o].freeze
    # The figures this benchmark reproduces (KiB per idle connection).
    REFERENCE = { 'nginx' => 0.58, 'h2o' => 1.03, 'gateway-ruby' => 3.36 }.freeze
    BATCH = 250
    IO_TIMEOUT = 10

    def initialize(root:, env: ENV)
      @root = root
      @env = env
      @n = env_int(env, 'IDLE_CONNS', 5000)
      raise Error, 'IDLE_CONNS must be positive' unless @n.positive?

      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @which = env.fetch('IDLE_SERVERS', SERVERS.join(',')).split(/[,\s]+/).reject(&:empty?)
      unknown = @which - SERVERS
      raise Error, "unknown server(s) #{unknown.join(', ')}; known: #{SERVERS.join(', ')}" unless unknown.empty?

      @run = Runner.new(root: root, env: env, tag: 'idle')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      raise_nofile(@n + 1024)
      if @run.nofile < @n + 64
        raise Error, "the servers may open at most #{@run.nofile} files (SERVER_NOFILE, or this shell's hard " \
                     "limit), #{@n + 64} needed; lower IDLE_CONNS"
      end
      t0 = monotonic
      rows = []
      begin
        @which.each do |name|
          rows << measure(name)
        rescue Error => e
          log "#{name}: #{e.message}"
          rows << { server: name, error: e.message.lines.first.strip }
        ensure
          @run.stop_all
        end
      ensure
        @run.stop_all
      end
      res = { meta: meta(monotonic - t0), rows: rows }
      write(res)
      res
    end

    # ------------------------------------------------------------ servers

    def start_server(name, port)
      case name
      when 'gateway-ruby', 'gateway-status'
        raise Error, "#{@bin} is not built (run `rake build`)" unless File.executable?(@bin)

        @run.start_gateway(name, @bin, gateway_conf(name, port), port)
      when 'nginx'
        Util.ensure_pkgs(%w[nginx], log: method(:log))
        # worker_connections counts the listener too; leave room.
        @run.start_nginx(name, port, <<~NGINX, worker_connections: @n + 1024)
          keepalive_timeout 300s;
          keepalive_requests 1000000;
          server {
              listen #{HOST}:#{port} backlog=4096;
              location / { return 200 "ok"; }
          }
        NGINX
      when 'h2o'
        Util.ensure_pkgs(%w[h2o], log: method(:log))
        dir = @run.scratch(name)
        File.write(File.join(dir, 'ok.txt'), 'ok')
        conf = File.join(dir, 'h2o.conf')
        File.write(conf, <<~H2O)
          num-threads: 1
          user: root
          pid-file: #{dir}/h2o.pid
          error-log: #{dir}/error.log
          max-connections: #{@n + 1024}
          http1-request-timeout: 300
          listen:
            host: #{HOST}
            port: #{port}
          hosts:
            default:
              paths:
                /:
                  file.file: #{dir}/ok.txt
                  file.mime.addtypes:
                    text/plain: .txt
        H2O
        bin = `sh -c 'command -v h2o'`.strip
        out = IO.popen([bin, '-t', '-c', conf, err: %i[child out]], &:read)
        raise Error, "h2o rejected #{conf}:\n#{out}" unless $?.success?

        @run.start(name, [bin, '-c', conf], port: port, dir: dir, binary: bin)
      end
    end

    def gateway_conf(name, port)
      limits = 'limits: { keepalive_timeout: 300 }'
      if name == 'gateway-ruby'
        <<~RUBY
          server listen: "#{HOST}:#{port}", workers: 1, #{limits} do
            location "/" do
              "ok"
            end
            location "= /gw-status", status: true
          end
        RUBY
      else
        # No Ruby in this server: `status: true` is the only non-Ruby answer
        # that needs no upstream. Its body is the status JSON.
        <<~RUBY
          server listen: "#{HOST}:#{port}", workers: 1, #{limits} do
            location "/", status: true
          end
        RUBY
      end
    end

    # The process that holds the connections.
    def worker_of(name, srv)
      case name
      when 'h2o'
        srv.pid
      else
        kids = children(srv.pid).select { |k| runs?(k, srv.binary) }
        raise Error, "#{name}: expected 1 worker under pid #{srv.pid}, found #{kids.inspect}" unless kids.size == 1

        kids.first
      end
    end

    # --------------------------------------------------------------- measure

    def measure(name)
      port = free_port
      srv = start_server(name, port)
      worker = worker_of(name, srv)
      log "#{name}: master/main pid #{srv.pid}, worker pid #{worker}, port #{port}"
      row = { server: name, pid: srv.pid, worker_pid: worker, port: port, conns: @n,
              worker_affinity: File.read("/proc/#{worker}/status")[/^Cpus_allowed_list:\s*(\S+)/, 1],
              worker_nofile: File.read("/proc/#{worker}/limits")[/^Max open files\s+(\d+)/, 1].to_i }
      raise Error, "#{name}: worker fd limit #{row[:worker_nofile]} < #{@n + 16}" if row[:worker_nofile] < @n + 16

      socks = []
      @run.with_cpu_lock do
        warm_up(port)
        sleep 0.5
        row[:before] = rss_max(worker)
        t = monotonic
        socks, row[:ok], row[:bad] = open_idle(port)
        row[:open_s] = (monotonic - t).round(2)
        sleep 1
        row[:after] = rss_max(worker)
        row[:established] = established(port)
      end
      row[:gateway_stats] = gateway_stats(name, port)
      close_all(socks)
      sleep 1
      row[:after_close] = rss_max(worker)
      row[:delta_kib] = row[:after][:rss] - row[:before][:rss]
      row[:kib_per_conn] = (row[:delta_kib].to_f / @n).round(2)
      row[:anon_kib_per_conn] = ((row[:after][:anon] - row[:before][:anon]).to_f / @n).round(2)
      row[:reference] = REFERENCE[name]
      log "#{name}: RSS #{row[:before][:rss]} -> #{row[:after][:rss]} KiB with #{row[:ok]} idle connections: " \
          "#{row[:kib_per_conn]} KiB/conn (#{row[:established]} established; #{row[:after_close][:rss]} KiB after close)"
      row
    ensure
      close_all(socks) if socks
      @run.stop(srv) if srv
    end

    def rss_max(pid, reads: 3, gap: 0.2)
      rs = Array.new(reads) do |i|
        sleep gap if i.positive?
        rss_kib(pid)
      end
      { rss: rs.map { |r| r[:rss] }.max, anon: rs.map { |r| r[:anon] }.max }
    end

    # 50 requests: 10 keep-alive connections, 5 each, then closed.
    def warm_up(port)
      10.times do
        s = TCPSocket.new(HOST, port, connect_timeout: 5)
        5.times do
          s.write(request)
          status, = read_response(s, +'')
          raise Error, "warm-up: status #{status.inspect}" unless status == 200
        end
        s.close
      end
    end

    def request
      "GET / HTTP/1.1\r\nHost: #{HOST}\r\nUser-Agent: gateway-bench-idle\r\n\r\n"
    end

    # Opens @n connections in batches, one request each, every response read
    # in full. Returns [sockets, ok, bad].
    def open_idle(port)
      socks = []
      ok = 0
      bad = 0
      req = request
      while socks.size < @n
        batch = Array.new([BATCH, @n - socks.size].min) { TCPSocket.new(HOST, port, connect_timeout: IO_TIMEOUT) }
        batch.each { |s| s.write(req) }
        batch.each do |s|
          status, close = read_response(s, +'')
          status == 200 && !close ? ok += 1 : bad += 1
        end
        socks.concat(batch)
      end
      [socks, ok, bad]
    rescue SystemCallError, IOError => e
      close_all(socks)
      raise Error, "opening idle connections failed after #{socks.size}: #{e.class}: #{e.message}"
    end

    # Reads one HTTP/1.1 response (Content-Length or chunked). Returns
    # [status, connection_close?].
    def read_response(sock, buf)
      head_end = nil
      until (head_end = buf.index("\r\n\r\n"))
        fill(sock, buf)
      end
      head = buf[0, head_end]
      status = head[/\AHTTP\/1\.\d (\d{3})/, 1].to_i
      close = head.match?(/^connection:\s*close/i)
      body = head_end + 4
      if (len = head[/^content-length:\s*(\d+)/i, 1])
        fill(sock, buf) while buf.bytesize < body + len.to_i
      elsif head.match?(/^transfer-encoding:\s*chunked/i)
        fill(sock, buf) until buf.index("\r\n0\r\n\r\n", body - 2)
      end
      [status, close]
    end

    def fill(sock, buf)
      raise Error, 'a response did not come within 10 s' unless sock.wait_readable(IO_TIMEOUT)

      buf << sock.readpartial(65_536)
    end

    def close_all(socks)
      socks.each do |s|
        s.close
      rescue IOError
        nil
      end
      socks.clear
    end

    def established(port)
      `ss -Htn state established '( sport = :#{port} )' 2>/dev/null`.lines.size
    end

    # The gateway's counters for its one worker, from its status page.
    def gateway_stats(name, port)
      path = { 'gateway-ruby' => '/gw-status', 'gateway-status' => '/' }[name]
      return nil unless path

      s = TCPSocket.new(HOST, port, connect_timeout: 5)
      s.write("GET #{path} HTTP/1.1\r\nHost: #{HOST}\r\nConnection: close\r\n\r\n")
      buf = +''
      read_response(s, buf)
      s.close
      w = JSON.parse(buf.split("\r\n\r\n", 2).last)['workers'].first
      w.slice('connections_accepted', 'requests', 'connections_active', 'connections_idle', 'fibers_parked')
    rescue StandardError => e
      { 'error' => e.message }
    end

    def raise_nofile(want)
      soft, hard = Process.getrlimit(:NOFILE)
      return if soft >= want

      if hard < want
        # Only a process with CAP_SYS_RESOURCE may raise its hard limit.
        begin
          Process.setrlimit(:NOFILE, want, want)
          return
        rescue SystemCallError
          raise Error, "this process may open at most #{hard} files (hard limit), #{want} needed; lower IDLE_CONNS"
        end
      end
      Process.setrlimit(:NOFILE, want, hard)
    end

    # ---------------------------------------------------------------- report

    def meta(elapsed)
      {
        started: Time.now.utc.iso8601,
        elapsed_s: elapsed.round(1),
        conns: @n,
        server_cpu: @run.server_cpu,
        gateway_bin: @bin,
        git: `git -C #{@root} rev-parse --short HEAD 2>/dev/null`.strip,
        versions: {
          gateway: File.executable?(@bin) ? `#{@bin} -v 2>&1`.lines.first.to_s.strip : nil,
          nginx: command?('nginx') ? `nginx -v 2>&1`.strip.sub(/.*: /, '') : nil,
          h2o: command?('h2o') ? `h2o -v 2>&1`.lines.first.to_s.strip : nil,
          kernel: `uname -r`.strip
        }
      }
    end

    def markdown(res)
      m = res[:meta]
      s = +"# Idle keep-alive connections: worker RSS per connection\n\n"
      s << "#{m[:conns]} keep-alive connections, one `GET /` answered on each, then idle; one worker, pinned to " \
           "CPU #{m[:server_cpu]}. KiB/conn = (worker VmRSS with the connections open - VmRSS after warm-up) / " \
           "#{m[:conns]}. #{m[:started]}, git #{m[:git]}.\n\n"
      s << "| server | what answers | RSS before (KiB) | RSS with #{m[:conns]} idle (KiB) | KiB/conn | anon KiB/conn | " \
           "established | RSS after close (KiB) | reference KiB/conn |\n"
      s << "|---|---|--:|--:|--:|--:|--:|--:|--:|\n"
      res[:rows].each do |r|
        what = { 'gateway-ruby' => 'Ruby block `"ok"`', 'gateway-status' => '`status: true` (no Ruby)',
                 'nginx' => '`return 200 "ok"`', 'h2o' => '`file.file` (2 bytes)' }[r[:server]]
        if r[:error]
          s << "| #{r[:server]} | #{what} | error: #{r[:error]} | | | | | | |\n"
          next
        end
        s << "| #{r[:server]} | #{what} | #{r[:before][:rss]} | #{r[:after][:rss]} | **#{format('%.2f', r[:kib_per_conn])}** | " \
             "#{format('%.2f', r[:anon_kib_per_conn])} | #{r[:established]} | #{r[:after_close][:rss]} | " \
             "#{r[:reference] ? format('%.2f', r[:reference]) : '—'} |\n"
      end
      s << "\n"
      res[:rows].each do |r|
        next if r[:error]

        s << "- #{r[:server]}: worker pid #{r[:worker_pid]} (CPU #{r[:worker_affinity]}), #{r[:ok]} responses ok" \
             "#{r[:bad].positive? ? ", #{r[:bad]} bad" : ''}, connections opened in #{r[:open_s]} s"
        s << "; gateway stats: #{r[:gateway_stats].map { |k, v| "#{k} #{v}" }.join(', ')}" if r[:gateway_stats]
        s << "\n"
      end
      v = m[:versions]
      s << "\nVersions: #{v[:gateway]}; nginx #{v[:nginx]}; #{v[:h2o]}; Linux #{v[:kernel]}. " \
           "\"reference\": the figures this benchmark reproduces (nginx 0.58, h2o 1.03, the gateway before " \
           "this tool: 3.36 KiB). RSS counts pages touched, in 4 KiB steps; kernel socket buffers are not in it.\n"
      s
    end

    def write(res)
      md = markdown(res)
      @run.write_report('idle', md, res)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  begin
    GatewayBench::IdleConns.new(root: File.expand_path('../..', __dir__)).run
  rescue GatewayBench::Error => e
    warn "bench:idle: #{e.message}"
    exit 1
  end
end
