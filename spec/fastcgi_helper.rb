# The FastCGI peers of the specs (fastcgi_spec.rb, cache_spec.rb): Debian's
# php8.2-fpm started as our own process (PhpFpm), and a FastCGI responder
# scripted in Ruby (FakeFcgi).
require 'socket'
require_relative 'spec_helper'

PHP_FPM = '/usr/sbin/php-fpm8.2'

# A php-fpm master with two pools (unix socket, TCP port) serving `dir`.
class PhpFpm
  attr_reader :dir, :sock, :port

  def initialize(dir, port)
    @dir = dir
    @sock = File.join(dir, 'php.sock')
    @port = port
    root = Process.uid.zero?
    pool = lambda do |name, listen|
      <<~INI
        [#{name}]
        #{root ? 'user = root' : ''}
        listen = #{listen}
        pm = static
        pm.max_children = 4
        catch_workers_output = yes
        php_admin_flag[log_errors] = on
        php_admin_value[display_errors] = off
        php_admin_value[post_max_size] = 16M
      INI
    end
    File.write(File.join(dir, 'fpm.conf'), <<~INI + pool.call('unix', @sock) + pool.call('tcp', "127.0.0.1:#{port}"))
      [global]
      error_log = #{File.join(dir, 'fpm.log')}
      daemonize = no
      pid = #{File.join(dir, 'fpm.pid')}
    INI
    args = [PHP_FPM, '-F', '-n', '-y', File.join(dir, 'fpm.conf'), '-p', dir]
    args << '-R' if root
    @pid = Process.spawn(*args, out: File.join(dir, 'fpm.out'), err: [:child, :out], pgroup: true)
    GatewaySpec.poll('php-fpm to listen', timeout: 10) do
      raise "php-fpm exited: #{File.read(File.join(dir, 'fpm.out')) rescue ''}" if Process.waitpid(@pid, Process::WNOHANG)
      File.socket?(@sock) && (TCPSocket.new('127.0.0.1', port).close || true) rescue false
    end
  end

  def stop
    Process.kill('TERM', @pid)
    Process.waitpid(@pid) # php-fpm stops its children first
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end
end

# A scripted FastCGI responder: reads a request's records and answers with
# what `respond.(params, stdin, conn_index)` returns (raw bytes; :close to
# close without answering; :hang to say nothing). Counts connections.
class FakeFcgi
  attr_reader :path, :port

  def self.rec(type, content, id: 1, pad: 0)
    [1, type, id >> 8, id & 0xff, content.bytesize, pad, 0].pack('CCCCnCC') + content.b + ("\0" * pad)
  end

  def self.stdout(s, **o) = rec(6, s, **o)
  def self.stderr(s) = rec(7, s)
  def self.end_request(app = 0, proto = 0) = rec(3, [app, proto, 0, 0, 0].pack('NCCCC'))

  # A whole normal answer.
  def self.answer(head_and_body)
    out = +''.b
    head_and_body.b.scan(/.{1,65535}/m) { |piece| out << stdout(piece) }
    out << stdout('') << end_request
  end

  def initialize(unix: nil, &respond)
    @server = unix ? UNIXServer.new(unix) : TCPServer.new('127.0.0.1', 0)
    @path = unix
    @port = unix ? nil : @server.addr[1]
    @respond = respond
    @conns = 0
    @lock = Mutex.new
    @errors = Queue.new
    @threads = []
    @acceptor = Thread.new do
      loop do
        s = @server.accept
        n = @lock.synchronize { @conns += 1 }
        @threads << Thread.new(s, n) { |sock, idx| serve(sock, idx) }
      end
    rescue IOError, Errno::EBADF
      nil
    end
  end

  def connections = @lock.synchronize { @conns }

  # One record, checked against the FastCGI spec; a violation is an error
  # of the example (read by the spec's after hook), the answer goes out anyway.
  def read_record(sock)
    h = sock.read(8)
    return nil unless h && h.bytesize == 8
    version, type, id, len, pad = h.unpack('CCnnC')
    body = len.positive? ? sock.read(len) : ''
    raise "a record cut short: #{body.to_s.bytesize} of #{len} bytes" unless body && body.bytesize == len
    sock.read(pad) if pad.positive?
    @errors << "record version #{version}, not 1 (FCGI_VERSION_1)" unless version == 1
    @errors << "record type #{type} for request id #{id}, not 1" if type != 9 && id != 1
    if type == 1
      role = body.unpack1('n')
      @errors << "FCGI_BEGIN_REQUEST with role #{role}, not 1 (FCGI_RESPONDER)" unless role == 1
      @errors << "FCGI_BEGIN_REQUEST body of #{len} bytes, not 8" unless len == 8
    end
    [type, body]
  end

  def decode_params(s)
    out = {}
    i = 0
    while i < s.bytesize
      lens = []
      2.times do
        b = s.getbyte(i)
        if b < 128
          lens << b
          i += 1
        else
          lens << (s.byteslice(i, 4).unpack1('N') & 0x7fffffff)
          i += 4
        end
      end
      out[s.byteslice(i, lens[0])] = s.byteslice(i + lens[0], lens[1])
      i += lens[0] + lens[1]
    end
    out
  end

  def serve(sock, idx)
    loop do
      params = +''.b
      stdin = +''.b
      keep = false
      params_done = false
      loop do
        rec = read_record(sock)
        return unless rec
        type, body = rec
        keep = (body.getbyte(2) & 1) == 1 if type == 1
        params << body if type == 4
        params_done = true if type == 4 && body.empty?
        @errors << 'FCGI_STDIN before the empty FCGI_PARAMS that ends the parameters' if type == 5 && !params_done
        stdin << body if type == 5
        break if type == 5 && body.empty?
      end
      out = @respond.call(decode_params(params), stdin, idx)
      return if out == :close
      if out.is_a?(Array) && out[0] == :close_after # a hostile answer, then EOF
        sock.write(out[1])
        return
      end
      if out == :hang
        sleep 30
        return
      end
      out.is_a?(Array) ? out.each { |piece| sock.write(piece); sleep 0.05 } : sock.write(out)
      return unless keep
    end
  rescue Exception => e # rubocop:disable Lint/RescueException -- an `expect` in a responder raises a non-StandardError
    # The gateway closing or resetting the connection is its right; anything
    # else (a malformed stream, a failed expectation in the responder) fails the example.
    @errors << "fake FastCGI connection #{idx}: #{e.class}: #{e.message}" unless e.is_a?(Errno::EPIPE) || e.is_a?(Errno::ECONNRESET) || e.is_a?(IOError)
  ensure
    sock.close unless sock.closed?
  end

  # Stops accepting and serving; returns the errors the connections saw.
  def stop
    @server.close unless @server.closed?
    @acceptor.join(2)
    @threads.each { |t| t.kill unless t.join(0.5) }
    errs = []
    errs << @errors.pop until @errors.empty?
    errs
  end
end
