# Request bodies stream to proxy_pass upstreams: the upstream gets them as
# they arrive (Content-Length kept, chunked re-chunked), the worker holds at
# most a few hundred KiB of them whatever their size, and a slow upstream
# slows the client down (back-pressure) instead of filling the worker.
# digest/md5 itself, not 'digest': Digest::MD5 is otherwise loaded on first use,
# and two fake-upstream threads using it first at once can break that load
# ("Digest::Base cannot be directly inherited in Ruby").
require 'digest/md5'
require_relative 'spec_helper'

RSpec.describe 'streaming request bodies through proxy_pass' do
  MiB = 1024 * 1024

  # An upstream that reads each request's body (Content-Length or chunked),
  # counting and hashing it, and answers "<bytes> <md5>". pause: seconds to
  # wait after the head before reading the body. early: answer this status
  # right after the head, without reading the body, and close.
  class SinkUpstream
    Seen = Struct.new(:method, :target, :headers, :bytes, :md5, :complete)
    attr_reader :port, :seen, :progress

    def initialize(pause: 0, early: nil)
      @server = TCPServer.new('127.0.0.1', 0)
      @port = @server.addr[1]
      @seen = Queue.new
      @progress = 0
      @threads = []
      @acceptor = Thread.new do
        loop { @threads << Thread.new(@server.accept) { |s| serve(s, pause, early) } }
      rescue IOError, Errno::EBADF
        nil
      end
    end

    def serve(sock, pause, early)
      buf = +''.b
      seen = nil
      loop do
        while (i = buf.index("\r\n\r\n")).nil?
          buf << sock.readpartial(65536)
        end
        lines = buf.slice!(0, i + 4).split("\r\n")
        method, target, = lines.shift.split(' ')
        headers = lines.to_h { |l| k, v = l.split(':', 2); [k.downcase, v.strip] }
        seen = Seen.new(method, target, headers, 0, Digest::MD5.new, false)
        if early
          sock.write("HTTP/1.1 #{early} Early\r\nContent-Length: 5\r\nConnection: close\r\n\r\nearly")
          @seen << seen
          return
        end
        sleep pause
        take = lambda do |n|
          while n > 0
            buf << sock.readpartial(65536) if buf.empty?
            piece = buf.slice!(0, n)
            seen.md5 << piece
            seen.bytes += piece.bytesize
            @progress += piece.bytesize
            n -= piece.bytesize
          end
        end
        line = lambda do
          buf << sock.readpartial(65536) until buf.include?("\r\n")
          buf.slice!(0, buf.index("\r\n") + 2).chomp
        end
        if headers['transfer-encoding'] == 'chunked'
          while (size = line.call.to_i(16)) > 0
            take.call(size)
            line.call
          end
          line.call
        else
          take.call(headers['content-length'].to_i)
        end
        seen.complete = true
        @seen << seen
        body = "#{seen.bytes} #{seen.md5.hexdigest}"
        sock.write("HTTP/1.1 200 OK\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
      end
    rescue IOError, SystemCallError
      @seen << seen if seen && !seen.complete
    ensure
      sock.close unless sock.closed?
    end

    def stop
      @server.close
      @acceptor.join(2)
      @threads.each(&:kill)
    end
  end

  after(:each) { @up&.stop }

  def gateway_for(up, limits: '{}', location: '')
    gateway_with(<<~RUBY, 'error_log :stderr, level: :info', server: "workers: 1, limits: #{limits}", rss: true)
      location "/up", proxy_pass: "http://127.0.0.1:#{up.port}/in", max_body: 1 << 40#{location}
      location "/small", proxy_pass: "http://127.0.0.1:#{up.port}/in"
      location "/buffered", proxy_pass: "http://127.0.0.1:#{up.port}/in", request_buffering: true
      location "/script" do |req| req.body.bytesize.to_s end
      location "/filtered", proxy_pass: "http://127.0.0.1:#{up.port}/in", max_body: 1 << 30,
               header_filter: ->(req) { Async.sleep(0.05); req.headers_out["X-Filtered"] = "yes" }
    RUBY
    @worker = worker_pid
  end

  # Sends `total` bytes of a repeating pattern after `head` (chunked: in
  # `piece`-sized chunks) on a new connection; returns [conn, md5 of the body].
  def upload(head, total, chunked: false, piece: MiB)
    sock = connect(@port)
    sock.write(head)
    md5 = Digest::MD5.new
    pattern = (0...piece).map { |i| (i % 251).chr }.join.b
    left = total
    while left > 0
      data = left >= piece ? pattern : pattern[0, left]
      sock.write(chunked ? "#{data.bytesize.to_s(16)}\r\n#{data}\r\n" : data)
      md5 << data
      left -= data.bytesize
    end
    sock.write("0\r\n\r\n") if chunked
    [sock, md5.hexdigest]
  end

  def response_of(conn)
    conn.read_response(timeout: 30)
  end

  # What the upstream saw of the next request it finished or lost.
  def next_seen
    poll('the upstream to finish a request') { !@up.seen.empty? }
    @up.seen.pop
  end

  it 'a 256 MiB Content-Length upload streams through with the worker RSS flat (< 16 MiB growth)' do
    @up = SinkUpstream.new
    gateway_for(@up)
    before = rss_kib(@worker)
    sock, md5 = upload("PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: #{256 * MiB}\r\n\r\n", 256 * MiB)
    res = response_of(sock)
    expect(res.status).to eq(200)
    expect(res.body).to eq("#{256 * MiB} #{md5}")
    seen = next_seen
    expect(seen.headers['content-length']).to eq((256 * MiB).to_s)
    expect(seen.headers).not_to have_key('transfer-encoding')
    expect(rss_kib(@worker) - before).to be < 16 * 1024
  end

  it 'a streamed upload to a location with a header_filter: the body goes up, the filter runs on the answer' do
    @up = SinkUpstream.new
    gateway_for(@up)
    sock, md5 = upload("PUT /filtered HTTP/1.1\r\nHost: x\r\nContent-Length: #{4 * MiB}\r\n\r\n", 4 * MiB)
    res = response_of(sock)
    expect([res.status, res['x-filtered'], res.body]).to eq([200, 'yes', "#{4 * MiB} #{md5}"])
  end

  it 'a chunked upload goes upstream chunked, byte for byte, and the connection stays usable' do
    @up = SinkUpstream.new
    gateway_for(@up)
    sock, md5 = upload("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 8 * MiB + 7, chunked: true)
    res = response_of(sock)
    expect(res.body).to eq("#{8 * MiB + 7} #{md5}")
    expect(next_seen.headers['transfer-encoding']).to eq('chunked')
    sock.write("GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    expect(response_of(sock).body.to_i).to eq(@worker)
  end

  it 'a slow upstream holds the client back (back-pressure): the worker does not buffer the body' do
    @up = SinkUpstream.new(pause: 3)
    gateway_for(@up)
    before = rss_kib(@worker)
    sock = connect(@port).sock
    sock.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: #{512 * MiB}\r\n\r\n")
    sent = 0
    piece = 'y' * 65536
    deadline = Time.now + 1.5 # a fixed window on purpose: the client must NOT get far meanwhile
    while Time.now < deadline
      begin
        sent += sock.write_nonblock(piece)
      rescue IO::WaitWritable
        IO.select(nil, [sock], nil, 0.05)
      end
    end
    expect(sent).to be < 64 * MiB
    expect(rss_kib(@worker) - before).to be < 16 * 1024
    expect(worker_pid).to eq(@worker)
  end

  it 'an upstream that answers before reading the body: the client gets that answer, then the connection closes' do
    @up = SinkUpstream.new(early: 413)
    gateway_for(@up)
    sock = connect(@port)
    sock.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: #{64 * MiB}\r\n\r\n")
    sock.write('z' * 65536)
    res = response_of(sock)
    expect([res.status, res.body]).to eq([413, 'early'])
    expect(res['connection']).to eq('close')
    expect(worker_pid).to eq(@worker)
  end

  it 'a client that leaves mid-upload: the upstream connection is closed too and the worker goes on' do
    @up = SinkUpstream.new
    gateway_for(@up)
    sock = TCPSocket.new('127.0.0.1', @port)
    sock.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: #{64 * MiB}\r\n\r\n")
    sock.write('z' * MiB)
    poll('the upstream to get the first MiB') { @up.progress >= MiB }
    sock.close
    seen = next_seen
    expect(seen).not_to be_nil
    expect(seen.complete).to be(false)
    poll('the 499 in the log') { @gw.log =~ /client closed the connection while POST \/up/ }
    expect(worker_pid).to eq(@worker)
  end

  it 'a Content-Length over the location max_body is refused with 413 before the upstream hears of it' do
    @up = SinkUpstream.new
    gateway_for(@up, limits: '{ max_body: 1000 }')
    res = http_request(@port, 'POST', '/small', {}, 'a' * 1001)
    expect(res.status).to eq(413)
    expect(http_request(@port, 'POST', '/small', {}, 'a' * 1000).body).to start_with('1000 ')
    expect(@up.seen.size).to eq(1)
  end

  it 'a chunked body that grows over max_body mid-stream: 413, and the upstream never sees it complete' do
    @up = SinkUpstream.new
    gateway_for(@up, limits: '{ max_body: 100_000 }')
    sock, = upload("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 300_000,
                   chunked: true, piece: 50_000)
    res = response_of(sock)
    expect(res.status).to eq(413)
    expect(res['connection']).to eq('close')
    seen = next_seen
    expect(seen.complete).to be(false)
    expect(seen.bytes).to be <= 100_000
  end

  it 'location max_body: raises the limit for one location only' do
    @up = SinkUpstream.new
    gateway_for(@up, limits: '{ max_body: 10 }')
    expect(http_request(@port, 'POST', '/up', {}, 'b' * 5000).body).to start_with('5000 ')
    expect(http_request(@port, 'POST', '/script', {}, 'b' * 11).status).to eq(413)
    expect(http_request(@port, 'POST', '/script', {}, 'b' * 10).body).to eq('10')
  end

  it 'request_buffering: true reads the body whole first and sends it with a Content-Length' do
    @up = SinkUpstream.new
    gateway_for(@up)
    sock, md5 = upload("POST /buffered HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 300_000,
                       chunked: true, piece: 100_000)
    expect(response_of(sock).body).to eq("300000 #{md5}")
    seen = next_seen
    expect(seen.headers['content-length']).to eq('300000')
    expect(seen.headers).not_to have_key('transfer-encoding')
  end

  it 'Expect: 100-continue gets the interim answer at once, then the upstream response' do
    @up = SinkUpstream.new
    gateway_for(@up)
    c = connect(@port)
    c.write("PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    expect(c.read_response.status).to eq(100)
    c.write('hello')
    expect(c.read_response.body).to eq("5 #{Digest::MD5.hexdigest('hello')}")
  end

  it 'a pipelined request behind a streamed upload is answered after it, in order' do
    @up = SinkUpstream.new
    gateway_for(@up)
    c = connect(@port)
    c.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    expect(c.read_response.body).to eq("3 #{Digest::MD5.hexdigest('abc')}")
    expect(c.read_response.body.to_i).to eq(@worker)
  end

  it 'a client that stalls mid-body longer than body_timeout gets 408 and the upstream exchange is dropped' do
    @up = SinkUpstream.new
    gateway_for(@up, limits: '{ body_timeout: 0.5 }')
    c = connect(@port)
    c.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf")
    res = c.read_response(timeout: 5)
    expect(res.status).to eq(408)
    seen = next_seen
    expect([seen.complete, seen.bytes]).to eq([false, 4])
  end

  it 'body_timeout is the longest gap between two reads, not a limit on the whole upload' do
    @up = SinkUpstream.new
    gateway_for(@up, limits: '{ body_timeout: 0.6 }')
    %w[/up /buffered].each do |path|
      c = connect(@port)
      c.write("POST #{path} HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n")
      6.times do
        sleep 0.25 # 1.5 s in all, more than body_timeout
        c.write('x')
      end
      expect(c.read_response.body).to eq("6 #{Digest::MD5.hexdigest('xxxxxx')}")
    end
  end

  it 'a connect failure in a group retries the next server with the whole streamed body' do
    @up = SinkUpstream.new
    dead = free_port
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: [@port])
      upstream :pair, servers: ["127.0.0.1:#{dead}", "127.0.0.1:#{@up.port}"], balance: :round_robin
      server listen: "127.0.0.1:#{@port}", workers: 1 do
        location "/", proxy_pass: "http://pair", max_body: 4 * 1024 * 1024
      end
    RUBY
    2.times do
      sock, md5 = upload("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: #{2 * MiB}\r\n\r\n", 2 * MiB)
      expect(response_of(sock).body).to eq("#{2 * MiB} #{md5}")
      end
  end

  describe 'config errors name the file and line' do
    {
      'max_body: -1' => 'location "/u", proxy_pass: "http://127.0.0.1:9", max_body: -1',
      'max_body: "1m"' => 'location "/u", proxy_pass: "http://127.0.0.1:9", max_body: "1m"',
      'request_buffering: on a handler location' => 'location "/u", request_buffering: true do "x" end'
    }.each do |label, line|
      it label do
        status, out, path = check_config(<<~RUBY)
          server listen: "127.0.0.1:#{free_port}" do
            #{line}
          end
        RUBY
        expect(status).to eq(1), out
        expect(out).to include("#{path}:2")
        expect(out).to match(/max_body|request_buffering/)
      end
    end
  end
end
