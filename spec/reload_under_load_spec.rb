# Reloads and graceful stops lose nothing: clients under steady keep-alive load
# see no error while the master replaces its workers again and again.
require_relative 'spec_helper'

RSpec.describe 'reload under load' do
  def wrk(port, seconds)
    cmd = ['wrk', '-t2', '-c50', "-d#{seconds}s", "http://127.0.0.1:#{port}/"]
    IO.popen(cmd, err: %i[child out], &:read)
  end

  it '10 SIGHUP reloads during a wrk -c50 run give zero socket errors and no non-2xx' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: [port])
      server listen: "127.0.0.1:#{port}", workers: 2 do
        location "/" do "ok" end
      end
    RUBY
    out = nil
    load = Thread.new { out = wrk(port, 6) }
    sleep 0.5 # let wrk open its connections (a start, not a wait for a condition)
    10.times do
      gw.signal('HUP')
      sleep 0.4
    end
    load.join(30) or raise 'wrk did not finish'
    expect(out).to match(/\d+ requests in/)
    expect(out).not_to match(/Socket errors/), out
    expect(out).not_to match(/Non-2xx/), out
    poll('ten reloads in the log') { gw.log.scan('reloaded').size == 10 }
  end

  it 'SIGQUIT under load: in-flight requests are answered and the master exits 0' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: [port])
      server listen: "127.0.0.1:#{port}", workers: 1 do
        location "/slow" do Async.sleep 0.3; "slow" end
      end
    RUBY
    conns = 5.times.map do
      c = connect(port)
      c.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
      c
    end
    sleep 0.1 # the requests are in flight
    gw.signal('QUIT')
    conns.each do |c|
      r = c.read_response
      expect([r.status, r.body]).to eq([200, 'slow'])
    end
    status = gw.wait_exit(10)
    expect(status.exitstatus).to eq(0)
  end
end
