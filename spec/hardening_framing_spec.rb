# Hardening: request framing under hostile bytes (request smuggling).
#
# A generated grid puts each control byte at each position around the two
# framing headers, `Transfer-Encoding: chunked` and `Content-Length: 5`, of a
# POST with a 5-byte body ("hello"), followed on the same connection by a
# harmless `GET /after` (Connection: close). For every cell the gateway must
# either
#   - answer 400 with `Connection: close`, alone, and close the connection; or
#   - only where the byte is legal (RFC 9110 §5.6.3 OWS: a tab after the
#     colon, or trailing), frame the message exactly as a strict parser does:
#     the echo of the body is "hello", then /after is answered, nothing else.
# Any other outcome (a 200 whose body differs, a third response, a request
# answered out of what should have been body) means the gateway framed the
# message differently from a strict peer: the ingredient of smuggling.
#
# The same grid runs through proxy_pass locations to a fake upstream that
# records the raw bytes it receives: it must only ever see requests framed in
# one way it can trust, never both: one Content-Length and a body of exactly
# that length, or (a streamed chunked body) the gateway's own canonical
# chunked encoding (no extensions, no trailers); and no leftover bytes. With
# request_buffering: true a body always arrives with a Content-Length.
#
# Then: Transfer-Encoding other than a final chunked, bad chunk sizes, Host
# rules (RFC 9112 §3.2), absolute-form and asterisk-form targets.
#
# One gateway (one worker) serves the whole file: each example checks that
# its worker is the same process and the log has no crash or sanitizer
# report; the file's after(:all) stops it and fails on any harness problem.
require_relative 'spec_helper'

module HardeningFraming
  CONTROL_BYTES = [0x00, 0x01, 0x08, 0x09, 0x0b, 0x0c, 0x0d, 0x0a, 0x7f].freeze
  POSITIONS = %i[before_name inside_name before_colon after_colon inside_value after_value].freeze
  BODY = 'hello'
  # name, value, the wire body that carries BODY under that framing
  FIELDS = {
    'Transfer-Encoding: chunked' => ['Transfer-Encoding', 'chunked', "5\r\nhello\r\n0\r\n\r\n"],
    'Content-Length: 5' => ['Content-Length', '5', 'hello']
  }.freeze

  # The header line with byte `c` put at `pos`. A one-character value
  # ("5") gets the byte between a leading zero and it ("0<c>5": the strict
  # reading of "05" is 5).
  def self.field_line(name, value, pos, c)
    case pos
    when :before_name then "#{c}#{name}: #{value}"
    when :inside_name then "#{name[0, 5]}#{c}#{name[5..]}: #{value}"
    when :before_colon then "#{name}#{c}: #{value}"
    when :after_colon then "#{name}:#{c} #{value}"
    when :inside_value then value.size > 1 ? "#{name}: #{value[0, 4]}#{c}#{value[4..]}" : "#{name}: 0#{c}#{value}"
    when :after_value then "#{name}: #{value}#{c}"
    end
  end

  # RFC 9110 §5.6.3 / §5.5: HTAB is OWS after the colon and after the value;
  # everywhere else in this grid a control byte makes the message invalid.
  def self.legal?(byte, pos)
    byte == 0x09 && %i[after_colon after_value].include?(pos)
  end

  # What the gateway answers to a legal line: OWS before the value is framed
  # as every strict parser does; a trailing HTAB in a framing field
  # (Content-Length, Transfer-Encoding) is refused by llhttp's strict mode
  # ("Invalid character in Content-Length"): RFC 9112 §5.1's OWS allows it,
  # but 400 never frames a message two ways, and a server may refuse any
  # request with 400. Exactly one outcome each, so a change is a red example.
  def self.framed?(byte, pos)
    legal?(byte, pos) && pos == :after_colon
  end

  AFTER = "GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
  UP_AFTER = "GET /up/after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

  def self.byte_name(b)
    { 0x09 => 'tab', 0x0d => 'bare CR', 0x0a => 'bare LF', 0x7f => 'DEL' }.fetch(b, format('0x%02x', b))
  end
end

RSpec.describe 'hardening: request framing' do
  # ---------------------------------------------------------------------------
  # A fake upstream that records every request it is sent, parsed strictly
  # from the raw bytes: each record is a Hash; every framing problem
  # (Transfer-Encoding other than a canonical chunked, both, several or bad
  # Content-Length, leftover bytes) is recorded in `errors`; a request whose
  # chunked body never ended (the gateway cut a streamed body it found
  # malformed) is recorded in `cut`. It answers "up:" + the body it read.
  class RawRecordingUpstream
    attr_reader :port

    def initialize
      @server = TCPServer.new('127.0.0.1', 0)
      @port = @server.addr[1]
      @lock = Mutex.new
      @records = []
      @errors = []
      @cut = []
      @threads = []
      @acceptor = Thread.new do
        loop do
          s = @server.accept
          t = Thread.new(s) { |sock| serve(sock) }
          t.report_on_exception = false
          @lock.synchronize { @threads << t }
        end
      rescue IOError, SystemCallError
        nil
      end
      @acceptor.report_on_exception = false
    end

    def records
      @lock.synchronize { @records.dup }
    end

    def errors
      @lock.synchronize { @errors.dup }
    end

    def cut
      @lock.synchronize { @cut.dup }
    end

    def clear
      @lock.synchronize do
        @records.clear
        @errors.clear
        @cut.clear
      end
    end

    def stop
      @server.close unless @server.closed?
      @acceptor.join(2)
      @lock.synchronize { @threads.dup }.each { |t| t.kill.join(2) }
    end

    private

    def error(msg)
      @lock.synchronize { @errors << msg }
    end

    # Reads until `cond` holds on the buffer; false on EOF or after 10 s.
    def fill_until(sock, buf)
      deadline = GatewaySpec.now + 10
      until yield(buf)
        left = deadline - GatewaySpec.now
        return false if left <= 0 || !IO.select([sock], nil, nil, left)
        data = sock.read_nonblock(65_536, exception: false)
        next if data == :wait_readable
        return false if data.nil?
        buf << data
      end
      true
    rescue SystemCallError, IOError
      false
    end

    # The gateway's chunked encoding, strictly: lower-case hex sizes without
    # leading zeros or extensions, no trailers. nil when the connection ended
    # first (recorded as cut) or the encoding is not that (an error).
    def read_chunked(sock, buf, request_line)
      body = +''.b
      loop do
        unless fill_until(sock, buf) { |b| b.include?("\r\n") }
          @lock.synchronize { @cut << request_line }
          return nil
        end
        size_line = buf.slice!(0, buf.index("\r\n") + 2).chomp("\r\n")
        unless size_line =~ /\A(0|[1-9a-f][0-9a-f]*)\z/
          error("non-canonical chunk size line #{size_line.inspect}")
          return nil
        end
        size = size_line.to_i(16)
        unless fill_until(sock, buf) { |b| b.bytesize >= size + 2 }
          @lock.synchronize { @cut << request_line }
          return nil
        end
        data = buf.slice!(0, size + 2)
        unless data.end_with?("\r\n")
          error("chunk of #{size} not followed by CRLF: #{data[-10..].inspect}")
          return nil
        end
        return body if size.zero?
        body << data[0, size]
      end
    end

    def serve(sock)
      buf = +''.b
      loop do
        unless fill_until(sock, buf) { |b| b.include?("\r\n\r\n") }
          error("#{buf.bytesize} leftover bytes when the connection ended: #{buf[0, 200].inspect}") unless buf.empty?
          return
        end
        i = buf.index("\r\n\r\n")
        head = buf.slice!(0, i + 4)
        lines = head.split("\r\n")
        request_line = lines.shift
        fields = lines.map { |l| l.split(':', 2).map(&:to_s) }
        bad = lines.reject { |l| l =~ /\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[ \t]*[^\r\n\x00]*\z/ }
        error("malformed head lines #{bad.inspect} in #{head.inspect}") unless bad.empty?
        te = fields.select { |k, _| k.casecmp?('transfer-encoding') }.map { |_, v| v.strip }
        cl = fields.select { |k, _| k.casecmp?('content-length') }.map { |_, v| v.strip }
        error("Transfer-Encoding other than one \"chunked\" sent upstream: #{head.inspect}") unless te.empty? || te == ['chunked']
        error("both Transfer-Encoding and Content-Length sent upstream: #{head.inspect}") if !te.empty? && !cl.empty?
        error("#{cl.size} Content-Length fields: #{head.inspect}") if cl.size > 1
        error("bad Content-Length #{cl.first.inspect}: #{head.inspect}") if cl.size == 1 && cl.first !~ /\A\d+\z/
        if te == ['chunked']
          body = read_chunked(sock, buf, request_line)
          return if body.nil?
        else
          len = cl.size == 1 && cl.first =~ /\A\d+\z/ ? cl.first.to_i : 0
          unless fill_until(sock, buf) { |b| b.bytesize >= len }
            error("body shorter than its Content-Length #{len}: #{buf.inspect}")
            return
          end
          body = buf.slice!(0, len)
        end
        @lock.synchronize do
          @records << { line: request_line, head: head, content_length: te.empty? ? cl.first : 'chunked', body: body }
        end
        answer = "up:#{body}"
        sock.write("HTTP/1.1 200 OK\r\nContent-Length: #{answer.bytesize}\r\n\r\n#{answer}")
      end
    rescue SystemCallError, IOError
      nil
    ensure
      sock.close unless sock.closed?
    end
  end

  # ---------------------------------------------------------------------------
  # One gateway for the whole file (not in the harness's per-example list:
  # stopped and checked in after(:all)).
  before(:all) do
    @up = RawRecordingUpstream.new
    gateway_with(<<~RUBY)
      location "/echo" do |req| "echo:" + req.body end
      location "/hdr" do |req| [req.headers["x-a"], req.headers["content-length"]].inspect end
      location "/up/", proxy_pass: "http://127.0.0.1:#{@up.port}"
      location "/upbuf/", proxy_pass: "http://127.0.0.1:#{@up.port}/up/", request_buffering: true
      location "/host" do |req| "host \#{req.headers["host"]} \#{req.target}" end
      location "/" do |req| "served \#{req.target}" end
    RUBY
    gateways.delete(@gw)
    @shared_dir = @spec_dir
    @spec_dir = @gateways = @conns = nil
    @worker = worker_pid(@port)
    @conns = nil
  end

  after(:all) do
    @gw&.stop
    @up&.stop
    problems = @gw ? @gw.problems : []
    if problems.empty?
      FileUtils.rm_rf(@shared_dir) if @shared_dir
    else
      raise "#{problems.join("\n")}\n(files kept in #{@shared_dir})\n#{@gw.log_tail}"
    end
  end

  # Every example: the one worker is still the same process, nothing crashed.
  after(:each) do
    next unless @gw
    log = @gw.log
    raise "gateway log has a sanitizer report:\n#{GatewaySpec.tail(log)}" if log =~ GatewaySpec::SANITIZER_REPORT
    raise "gateway log reports a crash:\n#{GatewaySpec.tail(log)}" if log =~ GatewaySpec::CRASH_REPORT
    raise "gateway master exited: #{@gw.status.inspect}" unless @gw.alive?
    now = worker_pid(@port)
    raise "the worker changed: #{@worker} -> #{now} (it died)" unless now == @worker
  end

  before(:each) { @up.clear }

  # Sends `bytes` on a new connection; [responses, closed?, raw bytes].
  # closed? is whether the gateway closed within 2 s.
  def exchange(bytes)
    c = connect(@port)
    begin
      c.write(bytes)
    rescue Errno::EPIPE, Errno::ECONNRESET
      nil
    end
    closed = !c.wait_closed(within: 2).nil?
    raw = c.pending
    c.close
    [parse_responses(raw), closed, raw]
  end

  # Every complete response in `raw`, in order (a trailing fragment raises).
  def parse_responses(raw)
    r, w = UNIXSocket.pair
    w.write(raw)
    w.close
    c = GatewaySpec::Conn.allocate
    c.instance_variable_set(:@sock, r)
    c.instance_variable_set(:@eof, false)
    out = []
    out << c.read_response(timeout: 1) until c.pending.empty? && !c.fill(GatewaySpec.now + 1)
    out
  ensure
    r&.close
  end

  def summary(responses)
    responses.map { |x| "#{x.status} #{x.body[0, 60].inspect}" }
  end

  # The 400 outcome: one response, 400, Connection: close, then closed.
  def rejected?(responses, closed)
    responses.size == 1 && responses[0].status == 400 && responses[0]['connection'].to_s =~ /close/i && closed
  end

  def expect_rejected(bytes, allowed: [400])
    responses, closed, raw = exchange(bytes)
    expect(responses.size).to eq(1), "expected one #{allowed.join('/')} response, got #{summary(responses)} " \
                                     "(raw #{raw[0, 400].inspect})"
    expect(allowed).to include(responses[0].status), "got #{summary(responses)}"
    expect(responses[0]['connection']).to match(/close/i)
    expect(closed).to be(true), 'the connection stayed open after the rejection'
    responses[0]
  end

  # ---------------------------------------------------------------------------
  describe 'control bytes around the framing headers (direct, echoing handler)' do
    HardeningFraming::FIELDS.each do |label, (name, value, wire_body)|
      HardeningFraming::POSITIONS.each do |pos|
        HardeningFraming::CONTROL_BYTES.each do |b|
          legal = HardeningFraming.legal?(b, pos)
          # OWS (SP / HTAB) around a field value is valid (RFC 9112 §5.1): it
          # MUST be framed as a strict parser does; any other control byte
          # makes the field line invalid: 400 and close.
          framed = HardeningFraming.framed?(b, pos)
          outcome = if framed then '200 framed as a strict parser does (OWS is valid, RFC 9112 §5.1)'
                    elsif legal then '400 + close (llhttp strict: a trailing HTAB in a framing field)'
                    else '400 + close (an invalid field line)'
                    end
          it "#{label}, #{HardeningFraming.byte_name(b)} #{pos.to_s.tr('_', ' ')}: #{outcome}" do
            line = HardeningFraming.field_line(name, value, pos, b.chr)
            bytes = "POST /echo HTTP/1.1\r\nHost: x\r\n#{line}\r\n\r\n#{wire_body}#{HardeningFraming::AFTER}".b
            responses, closed, raw = exchange(bytes)
            got = "#{summary(responses)}, closed: #{closed}, raw #{raw[0, 500].inspect}"
            unless framed
              expect(rejected?(responses, closed)).to be(true), "#{line.inspect} must be rejected with 400 + close; got #{got}"
              next
            end
            expect(summary(responses)).to eq(['200 "echo:hello"', '200 "served /after"']), got
          end
        end
      end
    end
  end

  { 'streamed' => '/up', 'request_buffering' => '/upbuf' }.each do |mode, prefix|
    describe "control bytes around the framing headers (through proxy_pass, #{mode}: what the upstream receives)" do
      HardeningFraming::FIELDS.each do |label, (name, value, wire_body)|
        # A streamed chunked body goes on chunked (re-encoded); anything else with its length.
        framing = prefix == '/up' && name == 'Transfer-Encoding' ? 'chunked' : '5'
        HardeningFraming::POSITIONS.each do |pos|
          HardeningFraming::CONTROL_BYTES.each do |b|
            framed = HardeningFraming.framed?(b, pos)
            it "#{label}, #{HardeningFraming.byte_name(b)} #{pos.to_s.tr('_', ' ')}: upstream sees " \
               "#{framed ? "POST framed #{framing == '5' ? 'by Content-Length: 5' : 'chunked'} and GET" : 'nothing (400 + close)'}" do
              line = HardeningFraming.field_line(name, value, pos, b.chr)
              bytes = "POST #{prefix}/echo HTTP/1.1\r\nHost: x\r\n#{line}\r\n\r\n#{wire_body}" \
                      "GET #{prefix}/after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".b
              responses, closed, raw = exchange(bytes)
              got = "client got #{summary(responses)}, closed: #{closed}, raw #{raw[0, 300].inspect}"
              seen = @up.records.map { |r| [r[:line], r[:content_length], r[:body]] }
              expect(@up.errors).to eq([]), got
              expect(@up.cut).to eq([]), got
              if !framed
                expect(rejected?(responses, closed)).to be(true), "#{line.inspect} must be rejected with 400 + close; #{got}; " \
                                                                  "upstream saw #{seen.inspect}"
                expect(seen).to eq([]), "rejected with 400, yet forwarded: #{seen.inspect}"
              else
                expect(seen).to eq([['POST /up/echo HTTP/1.1', framing, 'hello'], ['GET /up/after HTTP/1.1', nil, '']]), got
                expect(summary(responses)).to eq(['200 "up:hello"', '200 "up:"']), got
              end
            end
          end
        end
      end
    end
  end

  # ---------------------------------------------------------------------------
  describe 'a bare LF' do
    it 'is not taken as the empty line that ends the head (a request hidden behind it is never run)' do
      responses, closed, raw = exchange("POST /echo HTTP/1.1\r\nHost: x\r\n\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
      expect(raw).not_to include('served /smuggled'), "the hidden request was answered: #{summary(responses)}"
      expect(rejected?(responses, closed)).to be(true), "got #{summary(responses)}, closed: #{closed}"
    end

    it 'is not taken as the empty line through proxy_pass either (the upstream never sees the hidden request)' do
      responses, closed, = exchange("POST /up/a HTTP/1.1\r\nHost: x\r\n\nGET /up/smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
      seen = @up.records.map { |r| r[:line] }
      expect(seen).not_to include('GET /up/smuggled HTTP/1.1'), "the upstream got the hidden request: #{seen.inspect}"
      expect(rejected?(responses, closed)).to be(true), "got #{summary(responses)}, upstream saw #{seen.inspect}"
    end
  end

  # ---------------------------------------------------------------------------
  describe 'Transfer-Encoding other than a final chunked (RFC 9112 §6.1, §6.3): never forwarded' do
    # [lines, status, why]: RFC 9112 §6.3 — chunked not the final coding: the
    # server MUST answer 400 and close; chunked applied twice is a message no
    # sender may make (§6.1 MUST NOT): 400; a final chunked over a coding the
    # server does not understand: 501 (§6.1 SHOULD).
    {
      'gzip' => [['Transfer-Encoding: gzip'], 400, 'chunked not final: 400 (MUST)'],
      'chunked, gzip' => [['Transfer-Encoding: chunked, gzip'], 400, 'chunked not final: 400 (MUST)'],
      'chunked, chunked' => [['Transfer-Encoding: chunked, chunked'], 400, 'chunked applied twice: 400'],
      'chunked on two lines' => [['Transfer-Encoding: chunked', 'Transfer-Encoding: chunked'], 400, 'chunked applied twice: 400'],
      'identity' => [['Transfer-Encoding: identity'], 400, 'chunked not final: 400 (MUST)'],
      # A final chunked the gateway can de-chunk, but a gzip coding under it
      # that it cannot decode: stripping the (hop-by-hop) header and sending
      # the still-gzipped bytes under a plain Content-Length corrupts the body.
      'gzip, chunked (a coding the gateway cannot decode)' => [['Transfer-Encoding: gzip, chunked'], 501, 'a coding not understood: 501 (SHOULD)']
    }.each do |label, (lines, status, why)|
      it "Transfer-Encoding: #{label} (#{why})" do
        bytes = "POST /up/te HTTP/1.1\r\nHost: x\r\n#{lines.join("\r\n")}\r\n\r\n5\r\nhello\r\n0\r\n\r\n#{HardeningFraming::UP_AFTER}"
        responses, closed, = exchange(bytes)
        seen = @up.records.map { |r| [r[:line], r[:body]] }
        expect(seen).to eq([]), "forwarded: #{seen.inspect}; client got #{summary(responses)}"
        expect(responses.size).to eq(1), "got #{summary(responses)}"
        expect(responses[0].status).to eq(status)
        expect(responses[0]['connection']).to match(/close/i)
        expect(closed).to be(true)
      end
    end
  end

  describe 'bad chunk sizes and chunk framing: 400, never forwarded whole' do
    {
      'a negative size (-1)' => "-1\r\nhello\r\n0\r\n\r\n",
      'a 0x prefix (0x5)' => "0x5\r\nhello\r\n0\r\n\r\n",
      'a size that overflows 64 bits (10000000000000005)' => "10000000000000005\r\nhello\r\n0\r\n\r\n",
      'a huge size (ffffffffffffffffffff)' => "ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
      'a plus sign (+5)' => "+5\r\nhello\r\n0\r\n\r\n",
      'no CRLF after the chunk data' => "5\r\nhello0\r\n\r\n",
      'other bytes instead of the CRLF after the chunk data' => "5\r\nhelloXX0\r\n\r\n",
      'a bare LF after the chunk size' => "5\nhello\r\n0\r\n\r\n",
      'a bare LF after the chunk data' => "5\r\nhello\n0\r\n\r\n"
    }.each do |label, body|
      # Streamed, the head has gone upstream before the body turns out bad:
      # the gateway cuts it there, so the upstream never sees it complete.
      it "#{label} (streamed: the upstream sees it cut, never complete)" do
        responses, closed, = exchange("POST /up/chunks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n#{body}#{HardeningFraming::UP_AFTER}")
        expect(rejected?(responses, closed)).to be(true), "got #{summary(responses)}, closed: #{closed}"
        expect(@up.records).to eq([])
        expect(@up.errors).to eq([])
      end

      it "#{label} (request_buffering: the upstream hears nothing)" do
        responses, closed, = exchange("POST /upbuf/chunks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n#{body}#{HardeningFraming::UP_AFTER}")
        expect(rejected?(responses, closed)).to be(true), "got #{summary(responses)}, closed: #{closed}"
        sleep 0.1 # anything sent would have arrived by now
        expect([@up.records, @up.cut, @up.errors]).to eq([[], [], []])
      end
    end

    { '/up' => 'chunked', '/upbuf' => '5' }.each do |prefix, framing|
      it "control: leading zeros, an extension and a trailer field are a valid chunked body (#{prefix}: forwarded " \
         "#{framing == '5' ? 'with Content-Length: 5' : 'chunked, canonical'})" do
        body = "0000000000000000000005;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"
        responses, = exchange("POST #{prefix}/ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n#{body}" \
                              "GET #{prefix}/after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        expect(summary(responses)).to eq(['200 "up:hello"', '200 "up:"'])
        expect(@up.records.map { |r| [r[:line], r[:content_length], r[:body]] })
          .to eq([['POST /up/ok HTTP/1.1', framing, 'hello'], ['GET /up/after HTTP/1.1', nil, '']])
        expect(@up.errors).to eq([])
      end
    end
  end

  describe 'whitespace around a field value (RFC 9110 §5.5: OWS is not part of the value)' do
    it 'leading and trailing spaces and tabs are stripped before the handler sees the value' do
      responses, = exchange("POST /hdr HTTP/1.1\r\nHost: x\r\nX-A: \t b \t\r\nContent-Length: 5 \r\n" \
                            "Connection: close\r\n\r\nhello")
      expect(responses.map(&:status)).to eq([200])
      expect(responses[0].body).to eq('["b", "5"]') # [X-A, Content-Length] as the handler sees them
    end
  end

  # ---------------------------------------------------------------------------
  describe 'Host (RFC 9112 §3.2)' do
    it 'two Host lines with the same value: 400' do
      expect_rejected("GET /a HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n#{HardeningFraming::AFTER}")
    end

    it 'two Host lines with different values: 400' do
      expect_rejected("GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n#{HardeningFraming::AFTER}")
    end

    it 'two Host lines are never forwarded upstream' do
      exchange("GET /up/a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
      expect(@up.records.map { |r| r[:line] }).to eq([])
    end

    it 'a Host value that is not a valid uri-host[:port] ("a b"): 400' do
      expect_rejected("GET /a HTTP/1.1\r\nHost: a b\r\n\r\n#{HardeningFraming::AFTER}")
    end

    it 'a Host value with a path in it ("a/b"): 400' do
      expect_rejected("GET /a HTTP/1.1\r\nHost: a/b\r\n\r\n#{HardeningFraming::AFTER}")
    end

    it 'an empty Host is a valid field value (RFC 9112 §3.2: 400 only for a missing, repeated or invalid one): 200' do
      responses, closed, = exchange("GET /a HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n")
      expect(summary(responses)).to eq(['200 "served /a"'])
      expect(closed).to be(true)
    end

    it 'a missing Host in HTTP/1.1: 400' do
      expect_rejected("GET /a HTTP/1.1\r\n\r\n#{HardeningFraming::AFTER}")
    end
  end

  describe 'absolute-form and asterisk-form request targets (answered, no crash)' do
    # RFC 9112 §3.2.2: a server MUST accept the absolute-form, and MUST take
    # the host from it (ignoring Host); its path is what is routed.
    it 'GET http://x/ HTTP/1.1 is accepted and routed by its path, "/" (RFC 9112 §3.2.2 MUST accept): 200' do
      responses, = exchange("GET http://x/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      expect(summary(responses)).to eq(['200 "served /"'])
    end

    it 'an absolute-form target with no path is routed as "/", its query kept (RFC 9112 §3.2.2): 200' do
      responses, = exchange("GET http://y.example:81?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      expect(summary(responses)).to eq(['200 "served /?q=1"'])
    end

    it "an absolute-form target's authority replaces the Host field (RFC 9112 §3.2.2: MUST ignore Host)" do
      responses, = exchange("GET HTTP://y.example:81/host?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      expect(summary(responses)).to eq(['200 "host y.example:81 /host?q=1"'])
    end

    it 'an absolute-form target with userinfo is refused (RFC 9110 §4.2.4: treat it as an error): 400' do
      expect_rejected("GET http://u@x/a HTTP/1.1\r\nHost: x\r\n\r\n#{HardeningFraming::AFTER}")
    end

    it 'an absolute-form target is never forwarded upstream as an origin of its own (GET http://x/up/a)' do
      responses, = exchange("GET http://evil.example/up/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      expect(responses.size).to eq(1)
      lines = @up.records.map { |r| r[:line] }
      expect(lines).to all(start_with('GET /')), "upstream request line: #{lines.inspect}"
      puts "    (absolute-form GET http://evil.example/up/a: #{summary(responses).first}, upstream saw #{lines.inspect})"
    end

    # A valid request (RFC 9112 §3.2.4) for the server as a whole; RFC 9110
    # §9.3.7 asks no particular answer, and no location is that resource.
    it 'OPTIONS * HTTP/1.1 is a valid request (RFC 9112 §3.2.4) that no location serves: 404, the connection kept' do
      responses, closed, = exchange("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n#{HardeningFraming::AFTER}")
      expect(summary(responses)).to eq(['404 "404 Not Found\n"', '200 "served /after"'])
      expect(closed).to be(true) # by AFTER's Connection: close
    end

    it 'GET * HTTP/1.1 (asterisk-form is for OPTIONS only, RFC 9112 §3.2.4; an invalid request-line, §3): 400' do
      expect_rejected("GET * HTTP/1.1\r\nHost: x\r\n\r\n#{HardeningFraming::AFTER}")
    end

    it 'a target that is none of the four forms ("GET a/b"; an invalid request-line, RFC 9112 §3): 400' do
      expect_rejected("GET a/b HTTP/1.1\r\nHost: x\r\n\r\n#{HardeningFraming::AFTER}")
    end
  end
end
