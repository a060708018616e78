# End-to-end harness: every example starts the real binary on loopback ports
# it picked itself, polls until it is ready, talks raw HTTP to it, and stops
# it afterwards. An example fails when the gateway died from a signal we did
# not send, exited on its own, left workers behind, or logged a sanitizer
# report — whatever the example itself asserted.
#
#   GATEWAY_BIN      binary under test (default build/gateway)
#   GATEWAY_VARIANT  "asan" for the sanitizer build: sets ASAN_OPTIONS and
#                    UBSAN_OPTIONS for the gateway, and stretches time bounds
#                    (implied by a GATEWAY_BIN under build/asan/)
#   GATEWAY_SPEC_SLACK  the factor every wall-clock bound is multiplied by
#                    (default 1.0, 3.0 for the sanitizer build); raise it on
#                    a busy machine instead of loosening a bound
#   CI               set: a skipped or pending example fails, naming what is
#                    missing (setup.sh installs every peer the specs use)
#
# Only 127.0.0.1; every wait is bounded; only PIDs started here (and the
# process group they lead) are ever signalled.
require 'socket'
require 'tmpdir'
require 'fileutils'
require 'open3'

module GatewaySpec
  ROOT = File.expand_path('..', __dir__)
  BIN = File.expand_path(ENV.fetch('GATEWAY_BIN', 'build/gateway'), ROOT)
  # BIN plus the fault-injection gem (tools/testhooks, GatewayTest): built
  # beside it by `rake build:test` / `rake test`, for the specs that need it.
  TEST_BIN = File.join(File.dirname(BIN), 'gateway-test')
  # A standalone run of the ASan binary gets the same options as `rake test:asan`.
  ASAN = ENV['GATEWAY_VARIANT'] == 'asan' || BIN.include?('/build/asan/')
  # Bounds (never sleeps) are stretched for the slower sanitizer build, and
  # by GATEWAY_SPEC_SLACK on a busy machine.
  SLACK = Float(ENV.fetch('GATEWAY_SPEC_SLACK', ASAN ? '3.0' : '1.0'))
  raise "GATEWAY_SPEC_SLACK must be >= 1.0, is #{SLACK}" if SLACK < 1.0
  # CI: a skip or pending is a red build (see the hook at the end).
  CI = !ENV['CI'].to_s.empty? && ENV['CI'] != 'false'
  SANITIZER_REPORT = /AddressSanitizer|LeakSanitizer|runtime error:/
  # A worker that crashes is restarted by the master, so the master's status
  # does not show it; its log line (or the shell-style message) does.
  CRASH_REPORT = /\b(SIGSEGV|SIGBUS|SIGABRT|SIGFPE|SIGILL)\b|Segmentation fault/

  class TimeoutError < StandardError; end
  class ConnectionClosed < StandardError; end

  def self.now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Runs the block every `interval` seconds until it returns a truthy value
  # (returned) or `timeout` seconds pass (raises TimeoutError naming `what`).
  def self.poll(what, timeout: 10, interval: 0.02)
    deadline = now + timeout * SLACK
    loop do
      v = yield
      return v if v
      raise TimeoutError, "timed out after #{timeout * SLACK}s waiting for #{what}" if now >= deadline
      sleep interval
    end
  end

  # Starts Debian's nginx as a spec's peer: in the foreground without a
  # master, its config, logs and temp files in dir, http_body inside
  # http { }; waits until every port of `ports` listens. Returns its pid,
  # which the spec stops (TERM, then wait).
  def self.start_nginx_peer(dir, http_body, ports, connections: 256)
    %w[tmp logs].each { |d| FileUtils.mkdir_p(File.join(dir, d)) }
    conf = File.join(dir, 'nginx.conf')
    File.write(conf, <<~NGINX)
      daemon off;
      master_process off;
      worker_processes 1;
      pid #{dir}/nginx.pid;
      error_log #{dir}/logs/error.log warn;
      events { worker_connections #{connections}; }
      http {
        access_log off;
        client_body_temp_path #{dir}/tmp; proxy_temp_path #{dir}/tmp; fastcgi_temp_path #{dir}/tmp;
        uwsgi_temp_path #{dir}/tmp; scgi_temp_path #{dir}/tmp;
      #{http_body.gsub(/^/, '  ')}
      }
    NGINX
    nginx = `sh -c 'command -v nginx'`.strip
    pid = Process.spawn(nginx, '-p', dir, '-e', "#{dir}/logs/error.log", '-c', conf,
                        in: File::NULL, out: File.join(dir, 'nginx.out'), err: [:child, :out], pgroup: true)
    poll('nginx to listen', timeout: 10) do
      raise "nginx exited: #{File.read(File.join(dir, 'nginx.out')) rescue ''}" if Process.waitpid(pid, Process::WNOHANG)
      ports.all? { |p| (TCPSocket.new('127.0.0.1', p).close || true) rescue false }
    end
    pid
  end

  FREE_PORTS = (20_000..32_767).to_a.shuffle
  def self.free_port
    while (port = FREE_PORTS.pop)
      begin
        TCPServer.new('127.0.0.1', port).close
        return port
      rescue SystemCallError
        next # in use by something else
      end
    end
    raise 'no free port left in 20000..32767'
  end

  def self.sanitizer_env
    return {} unless ASAN
    { 'ASAN_OPTIONS' => 'detect_leaks=1:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=0',
      'UBSAN_OPTIONS' => 'print_stacktrace=1:halt_on_error=1' }
  end

  def self.check_binary!(bin = BIN)
    return if File.executable?(bin)
    raise "gateway binary #{bin} not found: run `rake build` and `rake build:test` (or set GATEWAY_BIN)"
  end

  # Live members of process group `pgid` (zombies excluded), from /proc.
  def self.group_members(pgid)
    Dir.glob('/proc/[0-9]*/stat').filter_map do |f|
      stat = File.read(f) rescue next
      fields = stat[(stat.rindex(')') + 2)..].split
      next if fields[0] == 'Z' || fields[0] == 'X'
      f[%r{/proc/(\d+)/}, 1].to_i if fields[2].to_i == pgid
    end
  end

  def self.tail(text, lines = 40)
    t = text.to_s.b.lines.last(lines).join
    t.force_encoding('UTF-8').scrub('?')
  end

  # ---------------------------------------------------------------------------
  # One gateway master started by start_gateway.
  class GatewayProcess
    attr_reader :pid, :ports, :config_path, :log_path, :status, :signals_sent, :stray_pids

    def initialize(pid:, ports:, config_path:, log_path:)
      @pid = pid
      @ports = ports
      @config_path = config_path
      @log_path = log_path
      @status = nil
      @signals_sent = []
      @stopping = false
      @force_killed = false
      @stray_pids = []
    end

    def port
      @ports.first
    end

    # Everything the master and its workers wrote to stdout/stderr so far.
    def log
      File.binread(@log_path).force_encoding('UTF-8').scrub('?')
    rescue Errno::ENOENT
      ''
    end

    def log_tail(lines = 40)
      GatewaySpec.tail(log, lines)
    end

    def alive?
      return false if @status
      pid, st = Process.waitpid2(@pid, Process::WNOHANG)
      @status = st if pid
      @status.nil?
    rescue Errno::ECHILD
      false
    end

    # Sends `sig` to the master (and only to it). TERM, INT and QUIT announce
    # that the master is expected to exit.
    def signal(sig)
      name = sig.is_a?(Integer) ? Signal.signame(sig) : sig.to_s.upcase.delete_prefix('SIG')
      @signals_sent << name
      @stopping = true if %w[TERM INT QUIT KILL].include?(name)
      Process.kill(name, @pid) if alive?
    end

    # Waits up to `timeout` seconds for the master to exit; its status or nil.
    def wait_exit(timeout = 5)
      GatewaySpec.poll("gateway #{@pid} to exit", timeout: timeout, interval: 0.01) { !alive? }
      @status
    rescue TimeoutError
      nil
    end

    # TERM, then KILL when the master is still there after `timeout` seconds.
    # Afterwards kills any process left in the master's process group (its
    # workers) and remembers them as strays. Returns the master's status.
    def stop(timeout: 5)
      if alive?
        signal('TERM')
        unless wait_exit(timeout)
          @force_killed = true
          signal('KILL')
          wait_exit(5)
        end
      end
      reap_group
      @status
    end

    def unexpected_exit?
      !@stopping && @status && !@force_killed
    end

    def force_killed?
      @force_killed
    end

    # The spec rewrites the config (for SIGHUP reloads).
    def rewrite_config(text)
      tmp = "#{@config_path}.tmp"
      File.write(tmp, text)
      File.rename(tmp, @config_path)
    end

    # Problems that fail the example whatever it asserted.
    def problems
      out = []
      if @status&.signaled?
        sig = Signal.signame(@status.termsig)
        unless @signals_sent.include?(sig) && %w[TERM KILL].include?(sig)
          out << "gateway master #{@pid} died from SIG#{sig}"
        end
      end
      out << "gateway master #{@pid} did not exit within 5s of SIGTERM (SIGKILLed)" if @force_killed
      if @status && !@status.signaled? && !@stopping
        out << "gateway master #{@pid} exited on its own during the example (status #{@status.exitstatus})"
      end
      unless @stray_pids.empty?
        out << "processes #{@stray_pids.join(', ')} of gateway #{@pid} outlived the master (SIGKILLed)"
      end
      text = log
      out << "gateway log has a sanitizer report" if text =~ SANITIZER_REPORT
      out << "gateway log reports a crash" if text =~ CRASH_REPORT
      out
    end

    private

    def reap_group
      strays = []
      begin
        GatewaySpec.poll('workers to exit after the master', timeout: 3) do
          strays = GatewaySpec.group_members(@pid)
          strays.empty?
        end
      rescue TimeoutError
        @stray_pids = strays
        strays.each do |p|
          Process.kill('KILL', p)
        rescue Errno::ESRCH
          nil
        end
      end
    end
  end

  # ---------------------------------------------------------------------------
  # A parsed HTTP response.
  class Response
    attr_reader :version, :status, :reason, :header_lines, :body, :head

    def initialize(version, status, reason, header_lines, body, head)
      @version = version
      @status = status
      @reason = reason
      @header_lines = header_lines
      @body = body
      @head = head
    end

    # Lower-case name => value (repeated headers joined with ", ").
    def headers
      @headers ||= @header_lines.each_with_object({}) do |(k, v), h|
        key = k.downcase
        h[key] = h.key?(key) ? "#{h[key]}, #{v}" : v
      end
    end

    def [](name)
      headers[name.downcase]
    end

    # How many times the header appears.
    def count(name)
      @header_lines.count { |k, _| k.casecmp?(name) }
    end

    def inspect
      preview = @body.to_s.size > 300 ? "#{@body[0, 300].inspect}...(#{@body.size} bytes)" : @body.inspect
      "#<Response #{@head.to_s.strip.inspect} body=#{preview}>"
    end
    alias to_s inspect
  end

  # Reads HTTP messages from a socket with deadlines; shared by the client
  # connection and the fake upstream.
  module Reader
    def buffer
      @buf ||= +''.b
    end

    def eof?
      @eof
    end

    # Reads more bytes into the buffer. false on EOF/reset; raises
    # TimeoutError after the deadline.
    def fill(deadline, what = 'data')
      return false if @eof
      remaining = deadline - GatewaySpec.now
      if remaining <= 0 || !IO.select([@sock], nil, nil, remaining)
        raise TimeoutError, "timed out waiting for #{what}; have #{buffer.size} bytes: #{buffer[0, 300].inspect}"
      end
      chunk = @sock.read_nonblock(65_536, exception: false)
      return true if chunk == :wait_readable
      if chunk.nil?
        @eof = true
        return false
      end
      buffer << chunk
      true
    rescue Errno::ECONNRESET, Errno::EPIPE
      @eof = true
      @reset = true
      false
    end

    def read_head(deadline, what)
      until (i = buffer.index("\r\n\r\n"))
        next if fill(deadline, what)
        raise ConnectionClosed, "connection closed while reading #{what}; got #{buffer.inspect}" if buffer.empty?
        raise ConnectionClosed, "connection closed in the middle of #{what}: #{buffer.inspect}"
      end
      head = buffer.slice!(0, i + 4)
      lines = head.split("\r\n")
      [lines.shift, parse_header_lines(lines, head)]
    end

    def parse_header_lines(lines, head)
      lines.map do |l|
        raise "malformed header line #{l.inspect} in #{head.inspect}" if l =~ /\A[ \t]/ || !l.include?(':')
        k, v = l.split(':', 2)
        [k, v.strip]
      end
    end

    def read_exact(n, deadline, what)
      while buffer.size < n
        next if fill(deadline, what)
        raise ConnectionClosed, "connection closed after #{buffer.size} of #{n} bytes of #{what}"
      end
      buffer.slice!(0, n)
    end

    def read_line(deadline, what)
      until (i = buffer.index("\r\n"))
        next if fill(deadline, what)
        raise ConnectionClosed, "connection closed in #{what}: #{buffer.inspect}"
      end
      buffer.slice!(0, i + 2).chomp("\r\n")
    end

    def read_chunked(deadline, what)
      body = +''.b
      loop do
        line = read_line(deadline, what)
        raise "bad chunk size line #{line.inspect}" unless line =~ /\A([0-9a-fA-F]+)(;.*)?\z/
        size = Regexp.last_match(1).to_i(16)
        if size.zero?
          loop { break if read_line(deadline, "#{what} trailers").empty? }
          return body
        end
        body << read_exact(size, deadline, what)
        crlf = read_exact(2, deadline, what)
        raise "chunk not followed by CRLF: #{crlf.inspect}" unless crlf == "\r\n"
      end
    end

    def read_until_eof(deadline, what)
      loop { break unless fill(deadline, what) }
      buffer.slice!(0, buffer.size)
    end

    # Body of a message with these headers (RFC 9112 section 6.3).
    def read_body(headers, deadline, what, until_eof_ok:)
      te = headers.select { |k, _| k.casecmp?('transfer-encoding') }.map(&:last).join(',')
      cl = headers.select { |k, _| k.casecmp?('content-length') }.map(&:last)
      if te =~ /chunked\s*\z/i
        read_chunked(deadline, what)
      elsif !cl.empty?
        raise "several Content-Length headers: #{cl.inspect}" if cl.size > 1
        raise "bad Content-Length #{cl.first.inspect}" unless cl.first =~ /\A\d+\z/
        read_exact(cl.first.to_i, deadline, what)
      elsif until_eof_ok
        read_until_eof(deadline, what)
      else
        +''.b
      end
    end
  end

  # A client connection to the gateway (keep-alive capable).
  class Conn
    include Reader
    attr_reader :sock

    def initialize(port, rcvbuf: nil)
      @sock = Socket.new(:INET, :STREAM)
      @sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, rcvbuf) if rcvbuf
      @sock.connect(Socket.sockaddr_in(port, '127.0.0.1'))
      @eof = false
    end

    def write(bytes)
      @sock.write(bytes)
      self
    end

    # Sends one request (adds Host, and Content-Length when there is a body).
    def request(method, path, headers = {}, body = nil, version: '1.1', **more_headers)
      headers = headers.merge(more_headers)
      write(GatewaySpec.build_request(method, path, headers, body, version: version, port: port))
    end

    def port
      @sock.remote_address.ip_port
    end

    # Reads one response. `head: true` for a response to HEAD (no body).
    def read_response(head: false, timeout: 5)
      deadline = GatewaySpec.now + timeout * SLACK
      status_line, headers = read_head(deadline, 'a response head')
      m = %r{\AHTTP/(\d\.\d) (\d{3})(?: (.*))?\z}.match(status_line)
      raise "malformed status line #{status_line.inspect}" unless m
      status = m[2].to_i
      no_body = head || status < 200 || status == 204 || status == 304
      body = no_body ? +''.b : read_body(headers, deadline, 'a response body', until_eof_ok: true)
      raw_head = "#{status_line}\r\n#{headers.map { |k, v| "#{k}: #{v}" }.join("\r\n")}\r\n\r\n"
      Response.new(m[1], status, m[3].to_s, headers, body, raw_head)
    end

    # Bytes already received but not consumed by read_response.
    def pending
      buffer.dup
    end

    # Everything until the peer closes or `timeout` passes.
    def read_all(timeout: 5)
      deadline = GatewaySpec.now + timeout * SLACK
      loop { break unless fill(deadline, 'the connection to close') }
      buffer.slice!(0, buffer.size)
    rescue TimeoutError
      buffer.slice!(0, buffer.size)
    end

    # Seconds until the peer closed (EOF or reset), or nil if it was still
    # open after `within` seconds. Bytes that arrive meanwhile stay in
    # #pending.
    def wait_closed(within: 2)
      start = GatewaySpec.now
      deadline = start + within * SLACK
      loop { break unless fill(deadline, 'the connection to close') }
      GatewaySpec.now - start
    rescue TimeoutError
      nil
    end

    def closed?(within: 2)
      !wait_closed(within: within).nil?
    end

    def reset?
      @reset
    end

    def close
      @sock.close unless @sock.closed?
    end
  end

  # Header names are Strings; a braceless `'X-A' => 'b'` argument lands in
  # **more_headers (Ruby 3 keyword rules), so it is merged back.
  def self.build_request(method, path, headers = {}, body = nil, version: '1.1', port: nil, **more_headers)
    h = headers.merge(more_headers)
    h['Host'] = port ? "127.0.0.1:#{port}" : '127.0.0.1' unless h.keys.any? { |k| k.casecmp?('host') }
    if body && h.keys.none? { |k| k.casecmp?('content-length') || k.casecmp?('transfer-encoding') }
      h['Content-Length'] = body.bytesize.to_s
    end
    out = +"#{method} #{path} HTTP/#{version}\r\n"
    h.each { |k, v| Array(v).each { |vv| out << "#{k}: #{vv}\r\n" } }
    out << "\r\n"
    out << body if body
    out.b
  end

  # ---------------------------------------------------------------------------
  # A scripted TCP peer (for proxy specs): runs the block per accepted
  # connection, in its own thread, with a Peer.
  class FakeUpstream
    attr_reader :port, :errors

    class Peer
      include Reader
      attr_reader :sock, :index

      Request = Struct.new(:method, :target, :version, :headers, :body) do
        def [](name)
          headers.select { |k, _| k.casecmp?(name) }.map(&:last).join(', ').then { |v| v.empty? ? nil : v }
        end
      end

      def initialize(sock, index)
        @sock = sock
        @index = index
        @eof = false
      end

      # Reads one request; nil if the client closed before sending anything.
      def read_request(timeout: 5)
        deadline = GatewaySpec.now + timeout * SLACK
        begin
          line, headers = read_head(deadline, 'a request head')
        rescue ConnectionClosed
          return nil if buffer.empty?
          raise
        end
        m = %r{\A(\S+) (\S+) HTTP/(\d\.\d)\z}.match(line) or raise "malformed request line #{line.inspect}"
        body = read_body(headers, deadline, 'a request body', until_eof_ok: false)
        Request.new(m[1], m[2], m[3], headers, body)
      end

      def write(bytes)
        @sock.write(bytes)
      end

      # Writes a complete response with Content-Length.
      def respond(status, headers = {}, body = '')
        h = { 'Content-Length' => body.bytesize.to_s }.merge(headers)
        write("HTTP/1.1 #{status} X\r\n#{h.map { |k, v| "#{k}: #{v}\r\n" }.join}\r\n#{body}")
      end
    end

    def initialize(&handler)
      @server = TCPServer.new('127.0.0.1', 0)
      @port = @server.addr[1]
      @errors = Queue.new
      @threads = []
      @accepted = 0
      @lock = Mutex.new
      @acceptor = Thread.new { accept_loop(handler) }
      @acceptor.report_on_exception = false
    end

    def accepted
      @lock.synchronize { @accepted }
    end

    def stop
      @server.close unless @server.closed?
      @acceptor.join(2)
      @threads.each { |t| t.kill unless t.join(2) }
      errs = []
      errs << @errors.pop until @errors.empty?
      errs
    end

    private

    def accept_loop(handler)
      loop do
        sock = @server.accept
        n = @lock.synchronize { @accepted += 1 }
        t = Thread.new(sock, n) do |s, i|
          handler.call(Peer.new(s, i))
        rescue StandardError => e
          @errors << "fake upstream connection #{i}: #{e.class}: #{e.message}"
        ensure
          s.close unless s.closed?
        end
        t.report_on_exception = false
        @threads << t
      end
    rescue IOError, Errno::EBADF
      nil
    end
  end

  CliResult = Struct.new(:status, :stdout, :stderr) do
    def output
      stdout + stderr
    end

    def exitstatus
      status.exitstatus
    end
  end

  # ---------------------------------------------------------------------------
  # The helpers examples use (included into every example group).
  module Helpers
    def gateway_bin
      BIN
    end

    # Resident memory of a process, in KiB.
    def rss_kib(pid)
      File.read("/proc/#{pid}/status")[/VmRSS:\s+(\d+)/, 1].to_i
    end

    # Open file descriptors of a process.
    def open_fds(pid)
      Dir.children("/proc/#{pid}/fd").size
    end

    # start_gateway(env:) for specs that measure memory: under ASan freed
    # memory sits in a 256 MiB quarantine and would look like growth.
    def rss_env
      env = GatewaySpec.sanitizer_env
      env.empty? ? {} : { 'ASAN_OPTIONS' => "#{env['ASAN_OPTIONS']}:quarantine_size_mb=0" }
    end

    # A port for a gateway to listen on. Not one the kernel picks (port 0):
    # those are ephemeral ports, and between this check and the gateway's
    # bind an outgoing connection of some other test may take it (EADDRINUSE).
    # Below Linux's ephemeral range (32768-60999) nothing is assigned on its
    # own; each port is handed out once per run.
    def free_port
      GatewaySpec.free_port
    end

    # A fresh folder for this example (removed afterwards when it passed).
    def spec_dir
      @spec_dir ||= Dir.mktmpdir('gateway-spec-')
    end

    def write_config(text, name = nil)
      @config_seq = (@config_seq || 0) + 1
      path = File.join(spec_dir, name || "gateway-#{@config_seq}.rb")
      File.write(path, text)
      path
    end

    def gateways
      @gateways ||= []
    end

    def upstreams
      @upstreams ||= []
    end

    # Starts `gateway -f CONFIG` and waits until every port in `ports`
    # accepts TCP connections and answers an HTTP request (any status; pass
    # `ready: false` to skip that, or a lambda taking the GatewayProcess that
    # returns truthy once ready). `args`: extra command-line arguments;
    # `env`: extra environment variables; `bin`: another binary (TEST_BIN for
    # fault injection). Returns the GatewayProcess.
    def start_gateway(config, ports: [], ready: true, timeout: 10, name: nil, args: [], env: {}, bin: BIN)
      GatewaySpec.check_binary!(bin)
      ports = Array(ports)
      path = write_config(config, name)
      log_path = "#{path}.log"
      pid = Process.spawn(GatewaySpec.sanitizer_env.merge(env), bin, *args, '-f', path,
                          in: File::NULL, out: log_path, err: [:child, :out],
                          pgroup: true, chdir: ROOT)
      gw = GatewayProcess.new(pid: pid, ports: ports, config_path: path, log_path: log_path)
      gateways << gw
      wait_ready(gw, ports, ready, timeout)
      gw
    end

    def wait_ready(gw, ports, ready, timeout)
      deadline = GatewaySpec.now + timeout * SLACK
      left = -> { [deadline - GatewaySpec.now, 0.05].max / SLACK }
      died = lambda do
        return if gw.alive?
        raise "gateway exited during start-up (#{gw.status.inspect}):\n#{gw.log_tail}"
      end
      ports.each do |p|
        GatewaySpec.poll("port #{p} to accept connections", timeout: left.call) do
          died.call
          port_open?(p)
        end
      end
      case ready
      when Proc
        GatewaySpec.poll('the readiness check', timeout: left.call) do
          died.call
          ready.call(gw)
        end
      when true
        ports.each do |p|
          GatewaySpec.poll("port #{p} to answer HTTP", timeout: left.call, interval: 0.05) do
            died.call
            begin
              http_get(p, '/__spec_ready__', {}, timeout: 1)
            rescue StandardError
              nil
            end
          end
        end
      end
    rescue TimeoutError => e
      raise TimeoutError, "#{e.message}; gateway log:\n#{gw.log_tail}"
    end

    def port_open?(port)
      Socket.tcp('127.0.0.1', port, connect_timeout: 0.5).close
      true
    rescue SystemCallError, IOError
      false
    end

    def connect(port, **opts)
      conn = Conn.new(port, **opts)
      (@conns ||= []) << conn
      conn
    end

    # Writes raw bytes on a new connection and returns every byte received
    # until the server closes or `read_timeout` seconds pass.
    def raw_request(port, bytes, read_timeout: 5)
      c = connect(port)
      begin
        c.write(bytes)
      rescue Errno::EPIPE, Errno::ECONNRESET
        nil
      end
      c.read_all(timeout: read_timeout)
    ensure
      c&.close
    end

    # One request on its own connection (Connection: close); a Response.
    def http_request(port, method, path, headers = {}, body = nil, timeout: 5, **more_headers)
      h = { 'Connection' => 'close' }.merge(headers).merge(more_headers)
      c = connect(port)
      c.request(method, path, h, body)
      c.read_response(head: method == 'HEAD', timeout: timeout)
    ensure
      c&.close
    end

    def http_get(port, path, headers = {}, timeout: 5, **more_headers)
      http_request(port, 'GET', path, headers.merge(more_headers), timeout: timeout)
    end

    # curl -sS --max-time 10 ARGS (a real HTTP/2 client: --http2, --http2-prior-knowledge);
    # its stdout, or it raises with curl's error.
    def curl(*args)
      out, err, st = Open3.capture3('curl', '-sS', '--max-time', '10', *args)
      raise "curl #{args.join(' ')} failed: #{err}" unless st.success?
      out
    end

    def build_request(method, path, headers = {}, body = nil, version: '1.1', **more_headers)
      GatewaySpec.build_request(method, path, headers.merge(more_headers), body, version: version)
    end

    # Parses one response out of raw bytes (as returned by raw_request).
    def parse_response(bytes, head: false)
      r, w = UNIXSocket.pair
      w.write(bytes)
      w.close
      c = Conn.allocate
      c.instance_variable_set(:@sock, r)
      c.instance_variable_set(:@eof, false)
      c.read_response(head: head, timeout: 1)
    ensure
      r&.close
    end

    def fake_upstream(&handler)
      u = FakeUpstream.new(&handler)
      upstreams << u
      u
    end

    # [the block's value, seconds it took].
    def timed
      t = GatewaySpec.now
      v = yield
      [v, GatewaySpec.now - t]
    end

    def poll(what, timeout: 10, interval: 0.02, &blk)
      GatewaySpec.poll(what, timeout: timeout, interval: interval, &blk)
    end

    # Runs the binary with `args` (no server expected); a CliResult.
    def run_gateway(*args, timeout: 10)
      GatewaySpec.check_binary!
      out = File.join(spec_dir, "cli-#{(@cli_seq = (@cli_seq || 0) + 1)}")
      pid = Process.spawn(GatewaySpec.sanitizer_env, BIN, *args, in: File::NULL,
                          out: "#{out}.out", err: "#{out}.err", pgroup: true, chdir: ROOT)
      status = nil
      begin
        GatewaySpec.poll("`gateway #{args.join(' ')}` to exit", timeout: timeout, interval: 0.01) do
          _, status = Process.waitpid2(pid, Process::WNOHANG)
          status
        end
      rescue TimeoutError
        Process.kill('KILL', pid)
        Process.waitpid(pid)
        GatewaySpec.group_members(pid).each { |p| Process.kill('KILL', p) rescue nil }
        raise TimeoutError, "`gateway #{args.join(' ')}` still running after #{timeout}s (killed); " \
                            "output:\n#{GatewaySpec.tail(File.read("#{out}.out") + File.read("#{out}.err"))}"
      end
      res = CliResult.new(status, File.read("#{out}.out").scrub('?'), File.read("#{out}.err").scrub('?'))
      raise "`gateway #{args.join(' ')}` died from SIG#{Signal.signame(status.termsig)}:\n#{res.output}" if status.signaled?
      raise "`gateway #{args.join(' ')}` printed a sanitizer report:\n#{res.output}" if res.output =~ SANITIZER_REPORT
      res
    end

    # `gateway -t -f FILE` on this config: [exit status, stdout+stderr, path].
    def check_config(config)
      path = write_config(config)
      r = run_gateway('-t', '-f', path)
      [r.exitstatus, r.output, path]
    end

    # A wall-clock bound of `seconds`, stretched by GATEWAY_SPEC_SLACK.
    def slack(seconds)
      seconds * SLACK
    end

    # The probe every config_with server carries: GET /pid answers the pid
    # of the worker that served it (read by worker_pid).
    PID_LOCATION = 'location "/pid" do Gateway.pid.to_s end'
    # A scripted location that answers at once (the worker is not blocked).
    FAST_LOCATION = 'location "/fast" do "fast" end'
    STATUS_LOCATION = 'location "/status", status: true'

    # The one configuration builder: `prelude` (resolver, upstream groups,
    # logs...), then a server on 127.0.0.1:`port` holding the /pid probe
    # (unless `pid: false`), /fast (`fast: true`), the status page
    # (`status: true`) and `locations`. `server`: the server's options after
    # listen:, as Ruby source ("workers: 1, http2: true"). No blank lines:
    # with no prelude the server is line 1 (specs match FILE:LINE).
    def config_with(locations, prelude = '', port:, server: 'workers: 1', pid: true, fast: false, status: false)
      opts = server.to_s.empty? ? '' : ", #{server}"
      [prelude, %(server listen: "127.0.0.1:#{port}"#{opts} do), (PID_LOCATION if pid),
       (FAST_LOCATION if fast), (STATUS_LOCATION if status), locations, 'end']
        .map { |part| part.to_s.chomp }.reject(&:empty?).join("\n") + "\n"
    end

    # config_with on a fresh port (or `port:`, for a config that names its
    # own port), started: sets @port and @gw (returned).
    # A spec states its usual options once, as metadata
    # (`RSpec.describe 'x', gateway: { fast: true, rss: true }`); the
    # arguments win. `ports`: more ports the prelude listens on; `env`: as
    # start_gateway; `rss: true` adds rss_env (a spec that measures memory).
    def gateway_with(locations, prelude = '', **opts)
      defaults = (self.class.respond_to?(:metadata) && self.class.metadata[:gateway]) || {}
      opts = defaults.merge(opts)
      ports = Array(opts.delete(:ports))
      env = opts.delete(:env) || {}
      env = rss_env.merge(env) if opts.delete(:rss)
      @port = opts.delete(:port) || free_port
      @gw = start_gateway(config_with(locations, prelude, port: @port, **opts), ports: [@port, *ports], env: env)
    end

    # The one readiness probe: the pid of the worker that served GET /pid
    # on `port` (raises unless it answered 200 with a pid).
    # A self-signed EC certificate for localhost (subjectAltName DNS:localhost),
    # made with Ruby's OpenSSL: [certificate, key] objects.
    def self_signed_localhost
      require 'openssl'
      key = OpenSSL::PKey::EC.generate('prime256v1')
      cert = OpenSSL::X509::Certificate.new
      cert.version = 2
      cert.serial = 1
      cert.subject = cert.issuer = OpenSSL::X509::Name.parse('/CN=localhost')
      cert.public_key = key
      cert.not_before = Time.now - 60
      cert.not_after = Time.now + 86_400
      ef = OpenSSL::X509::ExtensionFactory.new(cert, cert)
      cert.add_extension(ef.create_extension('subjectAltName', 'DNS:localhost'))
      cert.sign(key, OpenSSL::Digest.new('SHA256'))
      [cert, key]
    end

    def worker_pid(port = @port, path = '/pid')
      r = http_get(port, path)
      raise "#{path} answered #{r.inspect}" unless r.status == 200 && r.body =~ /\A\d+\z/
      r.body.to_i
    end

    def ppid_of(pid)
      stat = File.read("/proc/#{pid}/stat")
      stat[(stat.rindex(')') + 2)..].split[1].to_i
    rescue Errno::ENOENT, Errno::ESRCH # gone, or exiting between the listing and the read
      nil
    end

    def process_gone?(pid)
      stat = File.read("/proc/#{pid}/stat")
      %w[Z X].include?(stat[(stat.rindex(')') + 2)..].split[0])
    rescue Errno::ENOENT, Errno::ESRCH
      true
    end

    # The pids of pid's children that are alive (a master's workers).
    def live_children_of(pid)
      Dir.glob('/proc/[0-9]*').filter_map do |d|
        cpid = File.basename(d).to_i
        cpid if ppid_of(cpid) == pid && !process_gone?(cpid)
      end
    end

    # Failure text with the log of every gateway of this example.
    def logs_of_gateways
      gateways.map { |g| "--- gateway #{g.pid} log (#{g.log_path}) ---\n#{g.log_tail}" }.join("\n")
    end
  end

  # In CI a skip or pending is a failure that names what is missing: a
  # missing peer (php-fpm, dnsmasq, grpcio...) must turn CI red, not yellow.
  # Included after RSpec's Pending module, so these win in examples and in
  # before(:all) blocks alike.
  module StrictSkips
    def skip(message = nil, *)
      raise RSpec::Expectations::ExpectationNotMetError, "CI=#{ENV['CI']}: skip is a failure here: #{message || 'skipped'}"
    end

    def pending(message = nil, *)
      raise RSpec::Expectations::ExpectationNotMetError, "CI=#{ENV['CI']}: pending is a failure here: #{message || 'pending'}"
    end
  end
end

RSpec.configure do |config|
  config.include GatewaySpec::Helpers
  config.expect_with(:rspec) { |c| c.max_formatted_output_length = 2000 }
  config.disable_monkey_patching!
  config.order = :defined
  if GatewaySpec::CI
    config.include GatewaySpec::StrictSkips
    # Examples skipped by metadata (xit, skip: true) never run a line of
    # their own: the suite fails at the end, naming them.
    skipped = []
    config.reporter.register_listener(Class.new do
      define_method(:example_pending) { |n| skipped << "#{n.example.full_description}: #{n.example.execution_result.pending_message}" }
    end.new, :example_pending)
    config.after(:suite) do
      raise "CI: #{skipped.size} example(s) skipped or pending:\n#{skipped.join("\n")}" unless skipped.empty?
    end
  end

  config.after(:each) do |example|
    problems = []
    (@conns || []).each(&:close)
    gateways.each do |gw|
      gw.stop
      problems.concat(gw.problems)
    end
    upstreams.each { |u| problems.concat(u.stop) }
    failed = example.exception || !problems.empty?
    if failed && !gateways.empty?
      lines = example.metadata[:extra_failure_lines] ||= []
      gateways.each do |gw|
        lines << "--- gateway #{gw.pid} (#{gw.status.inspect}) log tail, config #{gw.config_path} ---"
        lines.concat(gw.log_tail(40).lines.map(&:chomp))
      end
    end
    if @spec_dir
      if failed
        (example.metadata[:extra_failure_lines] ||= []) << "(files kept in #{@spec_dir})"
      else
        FileUtils.rm_rf(@spec_dir)
      end
    end
    raise RSpec::Expectations::ExpectationNotMetError, problems.join("\n") unless problems.empty?
  end
end

# If rspec is interrupted, no gateway outlives it.
at_exit do
  ObjectSpace.each_object(GatewaySpec::GatewayProcess) do |gw|
    gw.stop(timeout: 2) if gw.alive?
  rescue StandardError
    nil
  end
end
