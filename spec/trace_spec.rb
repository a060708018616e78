# --trace / GATEWAY_TRACE=1: every fiber start, suspend and resume of a
# request is logged; without it nothing is.
require_relative 'spec_helper'

RSpec.describe 'trace mode' do
  def config(port)
    <<~RUBY
      server listen: "127.0.0.1:#{port}" do
        location "/sleep" do
          Async.sleep 0.01
          "slept"
        end
      end
    RUBY
  end

  def trace_lines(gw)
    gw.log.lines.grep(/trace #\d+ GET \/sleep/)
  end

  it '--trace logs the fiber start, suspend and resume of a request' do
    port = free_port
    gw = start_gateway(config(port), ports: port, args: ['--trace'])
    expect(http_get(port, '/sleep').body).to eq('slept')
    poll('the trace of the request', timeout: 3) { trace_lines(gw).any? { |l| l.include?('fiber resumed') } }
    text = trace_lines(gw).join
    expect(text).to include('fiber started')
    expect(text).to match(/fiber suspended.*Async\.sleep/)
    expect(text).to match(/fiber resumed.*Async\.sleep/)
  end

  it 'GATEWAY_TRACE=1 turns tracing on as well' do
    port = free_port
    gw = start_gateway(config(port), ports: port, env: { 'GATEWAY_TRACE' => '1' })
    http_get(port, '/sleep')
    poll('the trace of the request', timeout: 3) { trace_lines(gw).any? { |l| l.include?('fiber started') } }
  end

  it 'logs no trace lines without --trace' do
    port = free_port
    gw = start_gateway(config(port), ports: port, env: { 'GATEWAY_TRACE' => nil })
    expect(http_get(port, '/sleep').body).to eq('slept')
    gw.stop
    expect(gw.log).not_to match(/trace #\d+/)
  end
end
