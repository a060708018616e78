# The access log: one line per answered client request, nginx's combined
# format plus request time and what the upstream did (the default format), or
# a format of $variables; to a file, to stderr, or off (the default).
require 'time'
require_relative 'spec_helper'

RSpec.describe 'access_log' do
  COMBINED = %r{\A(?<addr>\S+) - - \[(?<time>\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] "(?<request>[^"]*)" (?<status>\d{3}) (?<bytes>\d+) "(?<referer>[^"]*)" "(?<agent>[^"]*)" rt=(?<rt>\d+\.\d{3}) ua="(?<ua>[^"]*)" us=(?<us>\S+) ut=(?<ut>\S+) ur=(?<ur>\S+)\z}

  def log_file(gw, name = 'access.log')
    File.join(File.dirname(gw.config_path), name)
  end

  def log_lines(gw, name = 'access.log')
    File.exist?(log_file(gw, name)) ? File.read(log_file(gw, name)).lines.map(&:chomp) : []
  end

  # The last line that has `mark` (by default the request line of a request
  # for `path`: readiness probes are logged too), once it is there.
  def line_for(gw, path, mark: " #{path} HTTP/1.")
    poll("an access log line for #{path}", timeout: 5) do
      log_lines(gw).select { |l| l.include?(mark) }.last
    end
  end

  def app(port, upstream_port: nil, log: '"access.log"', format: nil)
    <<~RUBY
      access_log #{log}#{format ? ", format: #{format}" : ''}
      server listen: "127.0.0.1:#{port}" do
        location "/hello" do "hello world" end
        location "/out" do |req|
          req.headers_out["X-Out"] = "o1"
          "out"
        end
        #{upstream_port ? "location \"/p\", proxy_pass: \"http://127.0.0.1:#{upstream_port}/\"" : ''}
      end
      #{upstream_port ? "server listen: \"127.0.0.1:#{upstream_port}\" do\n  location(\"/\") { \"from upstream\" }\nend" : ''}
    RUBY
  end

  it 'writes a combined line per request: address, time, request line, status, body bytes, referer, agent, rt=' do
    port = free_port
    gw = start_gateway(app(port), ports: port)
    r = http_get(port, '/hello?x=1', 'User-Agent' => 'spec-agent/1.0', 'Referer' => 'http://ref/')
    expect(r.status).to eq(200)
    line = line_for(gw, '/hello?x=1')
    m = COMBINED.match(line)
    expect(m).not_to be_nil, "not the combined format: #{line.inspect}"
    expect(m[:addr]).to eq('127.0.0.1')
    expect(m[:request]).to eq('GET /hello?x=1 HTTP/1.1')
    expect(m[:status]).to eq('200')
    expect(m[:bytes].to_i).to eq('hello world'.bytesize)
    expect(m[:referer]).to eq('http://ref/')
    expect(m[:agent]).to eq('spec-agent/1.0')
    expect(m[:rt].to_f).to be < slack(1.0)
    expect([m[:ua], m[:us], m[:ut], m[:ur]]).to eq(['-', '-', '-', '-'])
    expect((Time.now - Time.strptime(m[:time], '%d/%b/%Y:%H:%M:%S %z')).abs).to be < 60
  end

  it 'logs a 404, and 0 body bytes for HEAD' do
    port = free_port
    gw = start_gateway(app(port), ports: port)
    expect(http_get(port, '/nope').status).to eq(404)
    expect(http_request(port, 'HEAD', '/hello').status).to eq(200)
    m = COMBINED.match(line_for(gw, '/nope'))
    expect(m[:status]).to eq('404')
    m = COMBINED.match(line_for(gw, '/hello'))
    expect(m[:request]).to eq('HEAD /hello HTTP/1.1')
    expect(m[:bytes]).to eq('0')
  end

  it 'escapes quotes and non-ASCII bytes in logged values as \\xHH' do
    port = free_port
    gw = start_gateway(app(port), ports: port)
    http_get(port, '/hello', 'User-Agent' => "a\"b\xC3\xA9".b)
    m = COMBINED.match(line_for(gw, '/hello'))
    expect(m).not_to be_nil
    expect(m[:agent]).to eq('a\x22b\xC3\xA9')
  end

  it 'a proxied request logs the upstream address, status and time; over keep-alive the second shows ur=1' do
    port = free_port
    up = free_port
    gw = start_gateway(app(port, upstream_port: up), ports: [port, up])
    c = connect(port)
    2.times do
      c.request('GET', '/p')
      r = c.read_response
      expect([r.status, r.body]).to eq([200, 'from upstream'])
    end
    lines = poll('two lines for /p', timeout: 5) do
      l = log_lines(gw).select { |x| x.include?('"GET /p HTTP/1.1"') }
      l.size >= 2 && l
    end
    first, second = lines.map { |l| COMBINED.match(l) }
    expect(first).not_to be_nil, lines.first
    [first, second].each do |m|
      expect(m[:status]).to eq('200')
      expect(m[:ua]).to eq("127.0.0.1:#{up}")
      expect(m[:us]).to eq('200')
      expect(m[:ut]).to match(/\A\d+\.\d{3}\z/)
      expect(m[:bytes]).to eq('from upstream'.bytesize.to_s)
    end
    expect(first[:ur]).to eq('0')
    expect(second[:ur]).to eq('1')
  end

  it 'a proxied request to a closed port logs 502 with the upstream address and no upstream status' do
    port = free_port
    dead = free_port
    gw = start_gateway(<<~RUBY, ports: port)
      access_log "access.log"
      server listen: "127.0.0.1:#{port}" do
        location "/p", proxy_pass: "http://127.0.0.1:#{dead}/"
      end
    RUBY
    expect(http_get(port, '/p').status).to eq(502)
    m = COMBINED.match(line_for(gw, '/p'))
    expect([m[:status], m[:ua], m[:us]]).to eq(['502', "127.0.0.1:#{dead}", '-'])
  end

  it 'a custom format: $variables, ${braced}, request and response headers, bytes_sent as received' do
    port = free_port
    fmt = '$request_method $uri $args $status $bytes_sent $body_bytes_sent $http_x_test ${server_port}x $sent_http_x_out $server_protocol'
    gw = start_gateway(app(port, format: fmt.inspect), ports: port)
    raw = raw_request(port, build_request('GET', '/out?a=1&b=2', 'Host' => 'x', 'X-Test' => 'tv', 'Connection' => 'close'))
    expect(parse_response(raw).body).to eq('out')
    line = line_for(gw, '/out', mark: ' /out ')
    expect(line).to eq("GET /out a=1&b=2 200 #{raw.bytesize} 3 tv #{port}x o1 HTTP/1.1")
  end

  it 'accepts every documented variable' do
    port = free_port
    vars = %w[remote_addr time_local time_iso8601 msec pid request method request_method uri request_uri args
              server_protocol server_port status bytes_sent body_bytes_sent request_time upstream_addr
              upstream_status upstream_response_time upstream_reused http_host sent_http_x_out]
    gw = start_gateway(app(port, format: vars.map { |v| "$#{v}" }.join('|').inspect), ports: port)
    http_get(port, '/out?q=1')
    line = line_for(gw, '/out', mark: '|/out|')
    fields = line.split('|')
    expect(fields.size).to eq(vars.size), line
    h = vars.zip(fields).to_h
    expect(h['time_iso8601']).to match(/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d\z/)
    expect(h['msec']).to match(/\A\d{10}\.\d{3}\z/)
    expect(h['pid'].to_i).not_to eq(gw.pid) # a worker wrote it
    expect(h['request_uri']).to eq('/out?q=1')
    expect(h['http_host']).to eq("127.0.0.1:#{port}")
  end

  it 'format: :nginx_combined is exactly nginx\'s combined line (no rt=/ua=/us=/ut=/ur= tail)' do
    port = free_port
    gw = start_gateway(app(port, format: ':nginx_combined'), ports: port)
    http_get(port, '/hello?n=1', 'User-Agent' => 'spec-agent/2.0', 'Referer' => 'http://ref/n')
    line = line_for(gw, '/hello?n=1')
    m = %r{\A127\.0\.0\.1 - - \[(?<time>[^\]]+)\] "GET /hello\?n=1 HTTP/1\.1" 200 11 "http://ref/n" "spec-agent/2\.0"\z}.match(line)
    expect(m).not_to be_nil, line
    expect((Time.now - Time.strptime(m[:time], '%d/%b/%Y:%H:%M:%S %z')).abs).to be < 60
  end

  # Each variable checked for its value, through a proxied request whose
  # upstream (a fake one) answers 201 after 0.3 s, twice on one keep-alive
  # upstream connection: $upstream_reused 0, then 1.
  it 'each variable has its value: time_local time_iso8601 msec pid request request_uri server_port request_time ' \
     'upstream_addr upstream_status upstream_response_time upstream_reused' do
    up = fake_upstream do |peer|
      while peer.read_request
        sleep 0.3
        peer.respond(201, {}, 'slow')
      end
    end
    port = free_port
    vars = %w[time_local time_iso8601 msec pid request request_uri server_port request_time upstream_addr
              upstream_status upstream_response_time upstream_reused]
    gw = start_gateway(config_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/u"),
                                   %(access_log "access.log", format: #{vars.map { |v| "$#{v}" }.join('|').inspect}),
                                   port: port), ports: port)
    worker = worker_pid(port)
    lines = (1..2).map do |i|
      before = Time.now
      r = http_get(port, "/p/x?i=#{i}&a=%20b")
      expect(r.status).to eq(201)
      [before, Time.now, vars.zip(line_for(gw, "/p/x?i=#{i}", mark: "|/p/x?i=#{i}&").split('|')).to_h]
    end
    lines.each_with_index do |(before, after, h), i|
      n = i + 1
      t_local = Time.strptime(h['time_local'], '%d/%b/%Y:%H:%M:%S %z')
      expect(t_local.to_i).to be_between(before.to_i - 1, after.to_i + 1), h.inspect
      expect(Time.iso8601(h['time_iso8601']).to_i).to be_between(before.to_i - 1, after.to_i + 1), h.inspect
      expect(h['msec']).to match(/\A\d{10}\.\d{3}\z/)
      expect(h['msec'].to_f).to be_between(before.to_f - 1, after.to_f + 1), h.inspect
      expect(h['pid'].to_i).to eq(worker)
      expect(h['request']).to eq("GET /p/x?i=#{n}&a=%20b HTTP/1.1")
      expect(h['request_uri']).to eq("/p/x?i=#{n}&a=%20b")
      expect(h['server_port']).to eq(port.to_s)
      expect(h['request_time']).to match(/\A\d+\.\d{3}\z/)
      expect(h['request_time'].to_f).to be_between(0.3, after - before + 0.001), h.inspect
      expect(h['upstream_addr']).to eq("127.0.0.1:#{up.port}")
      expect(h['upstream_status']).to eq('201')
      expect(h['upstream_response_time']).to match(/\A\d+\.\d{3}\z/)
      expect(h['upstream_response_time'].to_f).to be_between(0.3, h['request_time'].to_f), h.inspect
      expect(h['upstream_reused']).to eq(n == 1 ? '0' : '1'), h.inspect
    end
    expect(up.accepted).to eq(1)
  end

  it 'an unknown variable in a format is a config error at FILE:LINE' do
    status, output, path = check_config(<<~RUBY)
      # logs
      access_log :stderr, format: "$remote_addr $nope"
      server listen: #{free_port} do
        location "/" do "x" end
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:2: access_log: unknown variable \$nope/), output
  end

  it 'an unknown format name or target is a config error at FILE:LINE' do
    status, output, path = check_config("access_log :stderr, format: :fancy\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:1: access_log: unknown format :fancy/), output
    status, output, path = check_config("access_log 42\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:1: access_log: give a file path, :stderr or :off/), output
  end

  it 'access_log :stderr writes the lines to stderr' do
    port = free_port
    gw = start_gateway(app(port, log: ':stderr'), ports: port)
    http_get(port, '/hello')
    poll('the line on stderr', timeout: 5) { gw.log.lines.any? { |l| l.include?('"GET /hello HTTP/1.1" 200 11 ') } }
  end

  it 'access_log :off, and no access_log at all, write nothing' do
    [':off', nil].each do |log|
      port = free_port
      text = log ? app(port, log: log) : app(port).sub(/^access_log.*\n/, '')
      gw = start_gateway(text, ports: port)
      expect(http_get(port, '/hello').status).to eq(200)
      gw.signal('TERM')
      gw.wait_exit(5)
      expect(gw.log).not_to include('/hello')
      expect(Dir.glob(File.join(File.dirname(gw.config_path), '*access*'))).to eq([])
    end
  end

  it 'an access log that cannot be opened stops start-up: exit 1 with the path and the reason' do
    port = free_port
    path = write_config(app(port, log: '"/nonexistent-gateway-dir/access.log"'))
    r = run_gateway('-f', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.stderr).to match(%r{access_log /nonexistent-gateway-dir/access\.log: No such file or directory})
    expect(port_open?(port)).to be(false)
  end

  it 'requests rejected while parsing are logged with their status, as nginx does (400, 414, 431)' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: port)
      access_log "access.log"
      server listen: "127.0.0.1:#{port}", limits: { max_request_line: 64, max_headers: 5 } do
        location "/" do "x" end
      end
    RUBY
    raw_request(port, "GET /no-host HTTP/1.1\r\n\r\n")
    raw_request(port, "GET /#{'a' * 100} HTTP/1.1\r\nHost: x\r\n\r\n")
    raw_request(port, "GET /many HTTP/1.1\r\nHost: x\r\n#{(1..10).map { |i| "X-#{i}: v\r\n" }.join}\r\n")
    lines = poll('three rejected requests in the log', timeout: 5) do
      l = log_lines(gw).reject { |x| x.include?('__spec_ready__') }
      l.size >= 3 && l
    end
    ms = lines.map { |l| COMBINED.match(l) }
    expect(ms).to all(be_truthy), lines.join("\n")
    expect(ms.map { |m| m[:status] }).to eq(%w[400 414 431])
    expect(ms[0][:request]).to eq('GET /no-host HTTP/1.1')
    expect(ms[2][:request]).to eq('GET /many HTTP/1.1')
  end

  it 'a client that leaves before its answer is logged with 499, as nginx does' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: port)
      access_log "access.log"
      server listen: "127.0.0.1:#{port}" do
        location "/slow" do
          Async.sleep 2
          "slow"
        end
      end
    RUBY
    c = connect(port)
    c.request('GET', '/slow')
    sleep 0.1 # let the request reach Async.sleep, then leave
    c.close
    m = COMBINED.match(line_for(gw, '/slow'))
    expect([m[:request], m[:status], m[:bytes]]).to eq(['GET /slow HTTP/1.1', '499', '0'])
  end

  it 'sub-requests are not logged, only the client request' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: port)
      access_log "access.log"
      server listen: "127.0.0.1:#{port}" do
        location "/inner" do "inner" end
        location "/outer" do
          Async::HTTP.sub_request("/inner").body + "+outer"
        end
      end
    RUBY
    expect(http_get(port, '/outer').body).to eq('inner+outer')
    line_for(gw, '/outer')
    expect(log_lines(gw).grep(/inner/)).to eq([])
  end
end
