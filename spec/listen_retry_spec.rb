# A port that is briefly taken at start-up (a lingering socket of an earlier
# run): the bind is retried 5 times, 500 ms apart, each retry logged, as
# nginx does; a port that stays taken fails with the reason.
require 'socket'
require_relative 'spec_helper'

RSpec.describe 'listening on a port that is briefly taken' do
  def config(port)
    <<~RUBY
      server listen: "127.0.0.1:#{port}" do
        location "/" do "up" end
      end
    RUBY
  end

  it 'retries the bind, logs each retry, and serves once the port is free' do
    port = free_port
    holder = TCPServer.new('127.0.0.1', port)
    gw = start_gateway(config(port), ready: false)
    GatewaySpec.poll('the first retry to be logged', timeout: 3) { gw.log.include?('trying again in 500 ms') }
    holder.close
    wait_ready(gw, [port], true, 5)
    expect(http_get(port, '/').body).to eq('up')
    expect(gw.log).to match(/listen 127\.0\.0\.1:#{port}: Address already in use; trying again in 500 ms \(1 of 4\)/)
  ensure
    holder&.close unless holder&.closed?
  end

  it 'gives up after 5 tries with the reason, exit status 1' do
    port = free_port
    holder = TCPServer.new('127.0.0.1', port)
    t = GatewaySpec.now
    r = run_gateway('-f', write_config(config(port)))
    expect(r.exitstatus).to eq(1), r.output
    expect(GatewaySpec.now - t).to be_between(1.8, 10 * GatewaySpec::SLACK)
    expect(r.output.scan('trying again').size).to eq(4)
    expect(r.output).to include("listen 127.0.0.1:#{port}: Address already in use")
  ensure
    holder&.close
  end
end
