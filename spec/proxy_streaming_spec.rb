# Proxied response bodies stream: they go out as they arrive, the worker's
# memory stays flat whatever their size, and a slow client slows the upstream
# down (back-pressure) instead of filling the worker's memory.
require_relative 'spec_helper'

RSpec.describe 'streaming proxy_pass responses' do
  MIB = 1024 * 1024

  # An upstream that answers every request with `total` bytes of 'x', framed by
  # Content-Length, chunked, or by closing (HTTP/1.0). It counts what it wrote.
  class BulkUpstream
    attr_reader :port, :written

    def initialize(total, framing, cut_after: nil)
      @server = TCPServer.new('127.0.0.1', 0)
      @port = @server.addr[1]
      @written = 0
      @threads = []
      @acceptor = Thread.new do
        loop do
          sock = @server.accept
          @threads << Thread.new(sock) { |s| serve(s, total, framing, cut_after) }
        end
      rescue IOError, Errno::EBADF
        nil
      end
    end

    def serve(sock, total, framing, cut_after)
      head = +''
      head << sock.readpartial(4096) until head.include?("\r\n\r\n")
      piece = 'x' * MIB
      case framing
      when :length then sock.write("HTTP/1.1 200 OK\r\nContent-Length: #{total}\r\n\r\n")
      when :chunked then sock.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
      when :close then sock.write("HTTP/1.0 200 OK\r\n\r\n")
      end
      left = total
      while left > 0
        n = [left, MIB].min
        data = n == MIB ? piece : 'x' * n
        sock.write(framing == :chunked ? "#{n.to_s(16)}\r\n#{data}\r\n" : data)
        @written += n
        left -= n
        return sock.close if cut_after && @written >= cut_after
      end
      sock.write("0\r\n\r\n") if framing == :chunked
      framing == :close ? sock.close : sleep(0.2)
    rescue IOError, SystemCallError
      nil
    ensure
      sock.close unless sock.closed?
    end

    def stop
      @server.close
      @acceptor.join(2)
      @threads.each { |t| t.kill }
    end
  end

  def gateway_for(up)
    gateway_with(%(location "/big", proxy_pass: "http://127.0.0.1:#{up.port}/"), rss: true)
    @worker = worker_pid
  end

  # Reads the whole response on a raw socket; returns [head, body bytes, closed?].
  def download(request, max_seconds: 60)
    sock = TCPSocket.new('127.0.0.1', @port)
    sock.write(request)
    head = +''
    head << sock.readpartial(65536) until head.include?("\r\n\r\n")
    head, rest = head.split("\r\n\r\n", 2)
    count = rest.bytesize
    deadline = Time.now + max_seconds
    buf = +''
    begin
      while Time.now < deadline
        sock.readpartial(MIB, buf)
        count += buf.bytesize
      end
    rescue EOFError
      return [head, count, true]
    ensure
      sock.close
    end
    [head, count, false]
  end

  after(:each) { @up&.stop }

  it 'a 256 MiB Content-Length response streams through with the worker RSS flat (< 16 MiB growth)' do
    @up = BulkUpstream.new(256 * MIB, :length)
    gateway_for(@up)
    before = rss_kib(@worker)
    head, count, = download("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    expect(head).to start_with('HTTP/1.1 200')
    expect(head).to match(/^Content-Length: #{256 * MIB}\r?$/i)
    expect(count).to eq(256 * MIB)
    expect(rss_kib(@worker) - before).to be < 16 * 1024
  end

  it 'a chunked upstream response goes to an HTTP/1.1 client chunked, complete' do
    @up = BulkUpstream.new(8 * MIB + 5, :chunked)
    gateway_for(@up)
    r = connect(@port)
    r.write("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    res = r.read_response(timeout: 30)
    expect(res.status).to eq(200)
    expect(res['transfer-encoding']).to match(/chunked/i)
    expect(res.body.bytesize).to eq(8 * MIB + 5)
    r.write("GET /pid HTTP/1.1\r\nHost: x\r\n\r\n") # keep-alive still works after a streamed body
    expect(r.read_response.body.to_i).to eq(@worker)
  end

  it 'an HTTP/1.0 client gets a close-delimited body when the upstream length is unknown' do
    @up = BulkUpstream.new(3 * MIB, :close)
    gateway_for(@up)
    head, count, closed = download("GET /big HTTP/1.0\r\nHost: x\r\n\r\n")
    expect(head).to start_with('HTTP/1.1 200')
    expect(head).not_to match(/^Content-Length/i)
    expect(head).not_to match(/chunked/i)
    expect([count, closed]).to eq([3 * MIB, true])
  end

  it 'a slow client holds the upstream back (back-pressure): the worker does not buffer the body' do
    @up = BulkUpstream.new(512 * MIB, :length)
    gateway_for(@up)
    before = rss_kib(@worker)
    sock = TCPSocket.new('127.0.0.1', @port)
    sock.write("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    sock.readpartial(65536) # the head and a first piece, then the client stops reading
    sleep 1.5 # a fixed pause on purpose: the upstream must NOT get far meanwhile
    expect(@up.written).to be < 64 * MIB
    expect(rss_kib(@worker) - before).to be < 16 * 1024
    sock.close
    expect(worker_pid).to eq(@worker)
  end

  it 'an upstream that dies mid-body: the client sees the body end early and the connection close' do
    @up = BulkUpstream.new(64 * MIB, :length, cut_after: 4 * MIB)
    gateway_for(@up)
    head, count, closed = download("GET /big HTTP/1.1\r\nHost: x\r\n\r\n", max_seconds: 20)
    expect(head).to start_with('HTTP/1.1 200')
    expect(count).to be < 64 * MIB
    expect(closed).to be(true)
    expect(@gw.log).to match(/after the response began/)
  end

  it 'a chunked response cut mid-body ends without the last chunk' do
    @up = BulkUpstream.new(64 * MIB, :chunked, cut_after: 2 * MIB)
    gateway_for(@up)
    head, count, closed = download("GET /big HTTP/1.1\r\nHost: x\r\n\r\n", max_seconds: 20)
    expect(head).to match(/chunked/i)
    expect(closed).to be(true)
    expect(count).to be < 64 * MIB
  end

  it 'HEAD through a streaming proxy: the upstream length, no body' do
    @up = BulkUpstream.new(5 * MIB, :length)
    gateway_for(@up)
    c = connect(@port)
    c.write("HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n")
    res = c.read_response(head: true)
    expect(res.status).to eq(200)
    expect(res['content-length']).to eq((5 * MIB).to_s)
  end
end
