# Several ranges of a static file: 206 multipart/byteranges written as nginx
# writes it (compared byte for byte with a real nginx, the boundary string
# normalised), for files from the memory cache and files read part by part
# (larger than the memory cache), over HTTP/1.1, HTTP/2 and TLS; overlapping
# or touching ranges coalesced; max_ranges:; If-Range; HEAD.
require 'open3'
require_relative 'spec_helper'

RSpec.describe 'multi-range requests' do
  # A file whose every byte says where it is (a wrong offset shows).
  def pattern(size, seed)
    Array.new(size) { |i| ((i * 7 + seed + i / 251) % 256).chr }.join.b
  end

  before(:all) do
    @dir = Dir.mktmpdir('gateway-ranges-')
    File.binwrite(File.join(@dir, 'small'), pattern(10_000, 1))      # in the memory cache
    File.binwrite(File.join(@dir, 'big'), pattern(1_500_000, 2))     # larger than it: read part by part
    File.write(File.join(@dir, 'page.html'), '<p>range</p>' * 1000)
  end

  after(:all) { FileUtils.rm_rf(@dir) }

  def start(server_opts = '', location_opts = '', tls: false)
    @port = free_port
    tls_opt = tls ? ', tls: { cert: "s.pem", key: "s.key" }' : ''
    @gw = start_gateway(<<~RUBY, ports: [@port], ready: tls ? false : true)
      server listen: "127.0.0.1:#{@port}", http2: true#{tls_opt}#{server_opts} do
        location "/f/", alias: "#{@dir}/"#{location_opts}
        location "/two/", alias: "#{@dir}/", max_ranges: 2
        location "/none/", alias: "#{@dir}/", max_ranges: 0
        location "/z/", alias: "#{@dir}/", compress: true
      end
    RUBY
  end

  def start_nginx
    @nginx_port = free_port
    ndir = File.join(spec_dir, 'nginx')
    @nginx = GatewaySpec.start_nginx_peer(ndir, <<~NGINX, [@nginx_port])
      default_type application/octet-stream;
      server {
        listen 127.0.0.1:#{@nginx_port};
        location /f/ { alias #{@dir}/; }
      }
    NGINX
  end

  after do
    if @nginx
      Process.kill('TERM', @nginx)
      Process.wait(@nginx)
    end
  end

  def get(path, headers = {}, port = @port)
    http_get(port, path, headers, timeout: 10)
  end

  def normalise(text)
    text.b.gsub(/\d{20}/, 'BOUNDARY')
  end

  # The parts of a multipart/byteranges body: [[content-range, bytes], ...],
  # checking the framing on the way (CRLF, --boundary, two fields, blank line).
  def parts(r, type = 'application/octet-stream')
    boundary = r['content-type'][/\Amultipart\/byteranges; boundary=(\d{20})\z/, 1] or raise "not multipart: #{r['content-type']}"
    body = r.body.b
    out = []
    pos = 0
    loop do
      head = "\r\n--#{boundary}"
      expect(body[pos, head.bytesize]).to eq(head)
      pos += head.bytesize
      break if body[pos, 4] == "--\r\n"
      fields_end = body.index("\r\n\r\n", pos)
      fields = body[pos + 2...fields_end].split("\r\n")
      expect(fields[0]).to eq("Content-Type: #{type}")
      m = fields[1].match(/\AContent-Range: bytes (\d+)-(\d+)\/(\d+)\z/) or raise "bad part fields #{fields.inspect}"
      len = m[2].to_i - m[1].to_i + 1
      pos = fields_end + 4
      out << ["#{m[1]}-#{m[2]}/#{m[3]}", body[pos, len]]
      pos += len
    end
    expect(pos + 4).to eq(body.bytesize)
    out
  end

  # Ranges apart (overlapping ones are coalesced here, unlike nginx: below).
  RANGES = { 'small' => ['bytes=0-4,10-14', 'bytes=10-14,0-4', 'bytes=-5,0-2', 'bytes=100-199,300-,50-59',
                         'bytes=0-0,2-2,4-4,6-6,8-8', 'bytes=0-1,999999999-', 'bytes=5-9,20-29,999999999-1999999999'],
             'big' => ['bytes=0-4,10-14', 'bytes=-5,0-2', 'bytes=1-70000,100000-100010,-70000',
                       'bytes=0-599999,700000-1299999', 'bytes=1400000-,0-99999,200000-299999'] }.freeze

  it 'answers several ranges byte for byte as nginx does, from memory and read part by part' do
    start
    start_nginx
    RANGES.each do |f, list|
      list.each do |range|
        ours = get("/f/#{f}", 'Range' => range)
        theirs = get("/f/#{f}", { 'Range' => range }, @nginx_port)
        what = "#{f} #{range}"
        expect(ours.status).to eq(theirs.status), what
        expect(normalise(ours['content-type'])).to eq(normalise(theirs['content-type'])), what
        expect(ours['content-length']).to eq(theirs['content-length']), what
        expect(ours['content-range']).to eq(theirs['content-range']), what
        expect(normalise(ours.body)).to eq(normalise(theirs.body)), what
      end
    end
    # a few that are really multipart, checked part by part against the file
    whole = File.binread(File.join(@dir, 'big'))
    r = get('/f/big', 'Range' => 'bytes=0-599999,700000-1299999,-10')
    expect(r.status).to eq(206)
    expect(r['content-length'].to_i).to eq(r.body.bytesize)
    expect(parts(r)).to eq([['0-599999/1500000', whole[0, 600_000]], ['700000-1299999/1500000', whole[700_000, 600_000]],
                            ['1499990-1499999/1500000', whole[-10..]]])
  end

  it 'coalesces overlapping or touching ranges (nginx sends them as asked): never more than the file' do
    start
    small = File.binread(File.join(@dir, 'small'))
    r = get('/f/small', 'Range' => 'bytes=0-4,3-8')
    expect([r.status, r['content-range'], r.body]).to eq([206, 'bytes 0-8/10000', small[0, 9]])
    r = get('/f/small', 'Range' => 'bytes=0-4,5-9')
    expect([r.status, r['content-range'], r.body]).to eq([206, 'bytes 0-9/10000', small[0, 10]])
    r = get('/f/small', 'Range' => 'bytes=200-299,0-9,250-400,5-14')
    expect(r.status).to eq(206)
    expect(parts(r)).to eq([['0-14/10000', small[0, 15]], ['200-400/10000', small[200, 201]]])
    # a thousand times the whole file, asked: one range, the file once
    r = get('/f/big', 'Range' => "bytes=#{(['0-'] * 90).join(',')}")
    expect([r.status, r['content-range'], r.body.bytesize]).to eq([206, 'bytes 0-1499999/1500000', 1_500_000])
  end

  it 'sends the whole file (200) past max_ranges:, and no ranges at all with max_ranges: 0' do
    start(', max_ranges: 3')
    small = File.binread(File.join(@dir, 'small'))
    expect(get('/f/small', 'Range' => 'bytes=0-0,2-2,4-4').status).to eq(206)
    r = get('/f/small', 'Range' => 'bytes=0-0,2-2,4-4,6-6')
    expect([r.status, r.body]).to eq([200, small])
    expect(get('/two/small', 'Range' => 'bytes=0-0,2-2').status).to eq(206)
    expect(get('/two/small', 'Range' => 'bytes=0-0,2-2,4-4').status).to eq(200)
    r = get('/none/small', 'Range' => 'bytes=0-0')
    expect([r.status, r['accept-ranges'], r.body]).to eq([200, nil, small])
    expect(get('/f/small')['accept-ranges']).to eq('bytes')
  end

  it 'respects If-Range, answers HEAD with the length, and never compresses a 206' do
    start
    etag = get('/f/small')['etag']
    expect(get('/f/small', 'Range' => 'bytes=0-0,2-2', 'If-Range' => etag).status).to eq(206)
    expect(get('/f/small', 'Range' => 'bytes=0-0,2-2', 'If-Range' => '"other"').status).to eq(200)
    full = get('/f/big', 'Range' => 'bytes=0-99,1000-1099,-100')
    head = http_request(@port, 'HEAD', '/f/big', { 'Range' => 'bytes=0-99,1000-1099,-100' })
    expect([head.status, head['content-length'].to_i, head.body]).to eq([206, full.body.bytesize, ''])
    r = get('/z/page.html', 'Range' => 'bytes=0-9,20-29', 'Accept-Encoding' => 'gzip')
    expect([r.status, r['content-encoding']]).to eq([206, nil])
    expect(parts(r, 'text/html').map(&:last)).to eq([('<p>range</p>' * 1000)[0, 10], ('<p>range</p>' * 1000)[20, 10]])
  end

  it 'answers the same over HTTP/2 and over TLS (HTTP/1.1 and h2)' do
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', "#{spec_dir}/s.key", '-out', "#{spec_dir}/s.pem", '-days', '2',
                              '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost')
    raise out unless st.success?
    start('', '', tls: true)
    plain_port = @port
    base = ['--resolve', "localhost:#{plain_port}:127.0.0.1", '--cacert', "#{spec_dir}/s.pem"]
    %w[small big].each do |f|
      range = f == 'small' ? 'bytes=0-4,10-14,-3' : 'bytes=0-199999,400000-699999,-70000'
      h1 = curl(*base, '--http1.1', '-H', "Range: #{range}", "https://localhost:#{plain_port}/f/#{f}")
      h2 = curl(*base, '--http2', '-H', "Range: #{range}", '-D', "#{spec_dir}/h2head", "https://localhost:#{plain_port}/f/#{f}")
      expect(File.read("#{spec_dir}/h2head")).to match(%r{\AHTTP/2 206})
      expect(normalise(h2)).to eq(normalise(h1))
      whole = File.binread(File.join(@dir, f))
      first = f == 'small' ? whole[0, 5] : whole[0, 200_000]
      expect(h1.b).to include(first)
      expect(h1.bytesize).to be < whole.bytesize / (f == 'small' ? 100 : 1) + 500 if f == 'big'
    end
    start # plain h2c (prior knowledge) against the plain HTTP/1.1 answer
    range = 'bytes=0-199999,400000-699999,-70000'
    h1 = get('/f/big', 'Range' => range).body
    h2c = curl('--http2-prior-knowledge', '-H', "Range: #{range}", "http://127.0.0.1:#{@port}/f/big")
    expect(normalise(h2c)).to eq(normalise(h1))
    expect(h1.bytesize).to be < 570_000 + 500
  end

  it 'rejects a bad max_ranges with the config file and line' do
    path = write_config(<<~RUBY)
      server listen: "127.0.0.1:#{free_port}" do
        location "/", root: "/tmp", max_ranges: -1
      end
    RUBY
    res = run_gateway('-t', '-f', path)
    expect(res.exitstatus).to eq(1)
    expect(res.output).to match(/#{Regexp.escape(path)}:2: .*max_ranges must be an Integer from 0 \(ranges off\) to 10000/)
  end
end
