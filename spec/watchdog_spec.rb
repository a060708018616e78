# The stall watchdog: a worker whose event loop has not turned for its
# server's stall_timeout (blocked in code that never yields) is logged with
# what it was running, killed and replaced; the status page counts it; a
# graceful stop never waits forever on such a worker.
require 'json'
require 'socket'
require_relative 'spec_helper'

RSpec.describe 'the stall watchdog' do
  # A peer that accepts and never answers: HttpRequest (the blocking client)
  # waits on it for its whole timeout, and the worker's loop with it.
  before(:each) do
    @mute = TCPServer.new('127.0.0.1', 0)
    @held = []
    @acceptor = Thread.new { loop { @held << @mute.accept } rescue nil }
  end

  after(:each) do
    @mute.close
    @acceptor.join(1)
    @held.each(&:close)
  end

  def config(port, stall)
    <<~RUBY
      server listen: "127.0.0.1:#{port}", stall_timeout: #{stall.inspect} do
        location "/block" do
          HttpRequest.new(timeout: 20).get("http://127.0.0.1:#{@mute.addr[1]}/")
          "unreachable"
        end
        location "/status", status: true
        location "/" do Gateway.pid.to_s end
      end
    RUBY
  end

  it 'kills a worker stalled past stall_timeout, logs what it ran, and a new worker serves' do
    port = free_port
    gw = start_gateway(config(port, 1), ports: port)
    first = http_get(port, '/').body.to_i
    blocked = GatewaySpec::Conn.new(port)
    blocked.request('GET', '/block?who=me')
    t = GatewaySpec.now
    GatewaySpec.poll('a new worker to answer', timeout: 8) do
      (http_get(port, '/', {}, timeout: 0.5).body.to_i rescue 0).then { |pid| pid > 0 && pid != first }
    end
    expect(GatewaySpec.now - t).to be < 6 * GatewaySpec::SLACK
    expect(gw.log).to match(%r{worker #{first} \(port #{port} #0\): its loop has not turned for [\d.]+ s \(stall_timeout 1\.0 s\) while running GET /block\?who=me; killing it})
    expect(blocked.closed?(within: 2)).to be(true)
    status = JSON.parse(http_get(port, '/status').body)
    mine = status['workers'].find { |w| w['port'] == port }
    expect([mine['restarts'], mine['stalls']]).to eq([1, 1]) # carried over to the replacement
    expect(http_get(port, '/status?format=prometheus').body).to match(/^gateway_stalls_total\{port="#{port}",worker="0",pid="\d+"\} 1$/)
  end

  it 'a graceful stop does not wait forever on a stalled worker' do
    port = free_port
    gw = start_gateway(config(port, 1), ports: port)
    blocked = GatewaySpec::Conn.new(port)
    blocked.request('GET', '/block')
    sleep 0.2 # the worker is inside the blocking call now
    gw.signal('QUIT')
    expect(gw.wait_exit(8 * GatewaySpec::SLACK)).to be_truthy
    expect(gw.log).to include('its loop has not turned')
  end

  it 'stall_timeout: nil leaves a blocked worker alone' do
    port = free_port
    gw = start_gateway(config(port, nil), ports: port)
    first = http_get(port, '/').body.to_i
    blocked = GatewaySpec::Conn.new(port)
    blocked.request('GET', '/block')
    sleep 2.5
    expect(gw.log).not_to include('its loop has not turned')
    expect(Process.kill(0, first)).to eq(1)
  end

  it 'rejects a bad stall_timeout with FILE:LINE' do
    status, output, path = check_config(<<~RUBY)
      server listen: #{free_port}, stall_timeout: 0 do
        location "/" do "x" end
      end
    RUBY
    expect(status).to eq(1)
    expect(output).to match(/^#{Regexp.escape(path)}:1: server: stall_timeout must be a number of seconds/)
  end
end
