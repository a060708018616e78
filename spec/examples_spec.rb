# Every file in examples/ is booted and exercised, so examples cannot rot.
# An example's fixed ports are replaced textually by free ones (mruby has no
# ENV): every port named in `listen:` (Integer or "host:port") and every
# other mention of that number in the file.
require 'open3'
require_relative 'spec_helper'

RSpec.describe 'examples/' do
  # name => block run in the example (after the gateway is up) with
  # `ports`: the example's own port numbers => the free ports used instead.
  exercises = {
    'chat.rb' => lambda do |ports|
      port = ports.fetch(8090)
      r = http_get(port, '/')
      expect([r.status, r['content-type']]).to eq([200, 'text/html; charset=utf-8'])
      expect(r.body).to include('new WebSocket(')
      py = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-websockets
      out, = Open3.capture2e('timeout', '30', py, File.join(__dir__, 'support', 'ws_script_client.py'),
                             "ws://127.0.0.1:#{port}/chat", 'chat_pair')
      expect(out).to include('ok chat'), out
      expect(out).to match(/^b saw guest\d+: hi from a$/)
      expect(out).to match(/^a saw guest\d+: hi from b$/)
    end,
    'hello.rb' => lambda do |ports|
      port = ports.fetch(8080)
      r = http_get(port, '/hello')
      expect([r.status, r.body]).to eq([200, "hello, world\n"])
      r = http_get(port, '/echo?x=1')
      expect([r.status, r['content-type'], r.body]).to eq([200, 'text/plain', "GET /echo?x=1\n"])
    end,
    'routing.rb' => lambda do |ports|
      front = ports.fetch(8080)
      stable = ["stable-a /api/users\n", "stable-b /api/users\n"]
      seen = 9.times.map do
        r = http_get(front, '/api/users')
        expect(r.status).to eq(200)
        expect(stable).to include(r.body)
        r.body
      end
      expect(seen.uniq.sort).to eq(stable), 'both stable servers should answer (weights 2:1)'
      r = http_get(front, '/api/users', 'x-canary' => '1')
      expect([r.status, r.body]).to eq([200, "canary /api/users\n"])
      carts = 5.times.map { http_get(front, '/cart/', 'cookie' => 'a=1; user=42').body }
      expect(carts.uniq.size).to eq(1), "user 42 went to several servers: #{carts.inspect}"
      expect(carts.first).to match(%r{\Astable-[ab] /cart/\n\z})
      r = http_get(front, '/static/app.css')
      expect([r.status, r.body]).to eq([200, "stable-a /files/app.css\n"])
      r = http_get(front, '/admin')
      expect([r.status, r.body]).to eq([403, "forbidden\n"])
    end,
    'ratelimit.rb' => lambda do |ports|
      require_relative 'redis_helper'
      redis = RedisServer.new(ports.fetch(6379)) # the example's Redis, on its free port
      port = ports.fetch(8080)
      %w[/local/fixed /local/sliding /fleet/fixed /fleet/sliding].each do |path|
        codes = 7.times.map { http_get(port, path).status }
        # The first 5 pass (the sliding ones may stop earlier right after a
        # window boundary: the previous window still counts), then 429.
        expect(codes.first(3)).to eq([200] * 3), path
        expect(codes.last(2)).to eq([429] * 2), path
        r = http_get(port, path)
        expect(r.status).to eq(429)
        expect(r['retry-after'].to_i).to be_between(1, 60)
      end
      expect(redis.cmd('KEYS', 'rl:*').size).to eq(2)
    ensure
      redis&.destroy
    end,
    'tarantool.rb' => lambda do |ports|
      require_relative 'tarantool_helper'
      # The example's Tarantool (examples/tarantool.lua), iproto and HTTP on their free ports.
      tnt = TarantoolExample.new(ports.fetch(3301), ports.fetch(8081))
      port = ports.fetch(8080)
      r = http_get(port, '/tnt')
      expect([r.status, r['x-a'], r.body]).to eq([200, '1', 'body'])
      r = http_get(port, '/http')
      expect([r.status, r['x-a'], r.body]).to eq([200, '1', 'body'])
      r = http_get(port, '/tnt/json?x=1')
      expect([r.status, r['content-type']]).to eq([200, 'application/json'])
      expect(r.body).to eq(%({"status":200,"headers":{"x-a":"1"},"body":"body","length":4}\n))
      tnt.stop
      r = http_get(port, '/tnt')
      expect(r.status).to eq(502)
      expect(http_get(port, '/http').status).to eq(502)
    ensure
      tnt&.destroy
    end,
    'async.rb' => lambda do |ports|
      backend = ports.fetch(48_080)
      front = ports.fetch(58_080)
      r = http_get(backend, '/mruby')
      expect([r.status, r.body]).to eq([200, "done\n"])
      %w[/sub_req_proxy_pass /async_http_sub_request_with_proxy_pass /http_sub_request_with_proxy_pass].each do |path|
        r = http_get(front, path)
        expect([path, r.status, r.body]).to eq([path, 200, "done\n"])
      end
      expect(http_get(front, '/dashboard').body).to include('<title>gateway dashboard</title>')
      trace = http_get(front, '/dashboard/trace?path=/async_http_sub_request_with_proxy_pass').body
      expect(trace).to include("fiber suspended, waiting for a sub-request's response")
    end
  }

  def self.port_numbers(text)
    ports = text.scan(/listen:\s*(\d{2,5})\b/).flatten +
            text.scan(/listen:\s*["'][^"':]*:(\d{2,5})["']/).flatten
    (ports.map(&:to_i) + peer_ports(text)).uniq
  end

  # Ports of servers the exercise starts itself (a Redis, a Tarantool and
  # its HTTP side), not the gateway's.
  def self.peer_ports(text)
    text.scan(/(?:(?:redis|tarantool) :\w+|upstream :tarantool\w*), servers: \["127\.0\.0\.1:(\d{2,5})"/).flatten.map(&:to_i)
  end

  def localized(text, ports)
    ports.reduce(text) { |t, (from, to)| t.gsub(/(?<!\d)#{from}(?!\d)/, to.to_s) }
  end

  examples = Dir[File.join(GatewaySpec::ROOT, 'examples', '*.rb')].sort

  it 'has examples' do
    expect(examples).not_to be_empty
  end

  examples.each do |file|
    name = File.basename(file)

    it "#{name} passes gateway -t" do
      text = File.read(file)
      ports = self.class.port_numbers(text).to_h { |p| [p, free_port] }
      status, output, = check_config(localized(text, ports))
      expect(status).to eq(0), output
    end

    it "#{name} boots and is exercised" do
      exercise = exercises[name]
      expect(exercise).not_to be_nil, "no exercise for examples/#{name} in spec/examples_spec.rb: add one"
      text = File.read(file)
      ports = self.class.port_numbers(text).to_h { |p| [p, free_port] }
      expect(ports).not_to be_empty, "examples/#{name} names no listen: port"
      listening = ports.reject { |from, _| self.class.peer_ports(text).include?(from) }.values
      start_gateway(localized(text, ports), ports: listening, name: name)
      instance_exec(ports, &exercise)
    end
  end
end
