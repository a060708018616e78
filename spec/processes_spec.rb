# Master and workers: pools, restart of a dead worker, signals (TERM/INT
# fast stop, QUIT graceful stop, HUP reload).
require_relative 'spec_helper'

RSpec.describe 'master and workers' do
  def config(port, body: 'v1', workers: 1)
    config_with(<<~RUBY, port: port, server: "workers: #{workers}")
      location "/spin" do
        t = Time.now
        while Time.now - t < 0.02; end
        Gateway.pid.to_s
      end
      location "/busy" do
        t = Time.now
        while Time.now - t < 1.0; end
        "busy done"
      end
      location "/" do #{body.inspect} end
    RUBY
  end


  it 'serves from a worker process, a child of the master' do
    port = free_port
    gw = start_gateway(config(port), ports: port)
    pid = worker_pid(port)
    expect(pid).not_to eq(gw.pid)
    expect(ppid_of(pid)).to eq(gw.pid)
  end

  it 'workers: 2 runs two worker processes that both answer' do
    port = free_port
    gw = start_gateway(config(port, workers: 2), ports: port)
    poll('two worker children of the master', timeout: 5) { live_children_of(gw.pid).size == 2 }
    seen = {}
    poll('answers from two different workers', timeout: 10) do
      # Concurrent connections to a handler that holds its worker for 20 ms.
      threads = 4.times.map { Thread.new { worker_pid(port, '/spin') } }
      threads.each { |t| seen[t.value] = true }
      seen.size >= 2
    end
    expect(seen.keys.map { |p| ppid_of(p) }.uniq).to eq([gw.pid])
  end

  it 'restarts a worker killed with SIGKILL, and serves again' do
    port = free_port
    gw = start_gateway(config(port), ports: port)
    old = worker_pid(port)
    Process.kill('KILL', old)
    fresh = poll('a new worker to answer', timeout: 10) do
      begin
        p = worker_pid(port)
        p if p != old
      rescue StandardError
        nil
      end
    end
    expect(ppid_of(fresh)).to eq(gw.pid)
    expect(gw.alive?).to be(true)
    expect(http_get(port, '/').body).to eq('v1')
  end

  %w[TERM INT].each do |sig|
    it "SIGTERM-style fast stop: SIG#{sig} makes master and workers exit quickly with status 0" do
      port = free_port
      gw = start_gateway(config(port, workers: 2), ports: port)
      workers = poll('two workers', timeout: 5) { (w = live_children_of(gw.pid)).size == 2 && w }
      gw.signal(sig)
      status = gw.wait_exit(3)
      expect(status).not_to be_nil, "master still running 3s after SIG#{sig}"
      expect(status.exitstatus).to eq(0), status.inspect
      poll('workers to be gone', timeout: 3) { workers.all? { |w| process_gone?(w) } }
      expect(port_open?(port)).to be(false)
    end
  end

  it 'SIGQUIT lets an in-flight request finish, then the master exits 0' do
    port = free_port
    gw = start_gateway(config(port), ports: port)
    c = connect(port)
    c.request('GET', '/busy')
    sleep 0.2 # let the request reach the handler (it holds the worker for 1 s)
    gw.signal('QUIT')
    r = c.read_response(timeout: 5)
    expect([r.status, r.body]).to eq([200, 'busy done'])
    status = gw.wait_exit(5)
    expect(status).not_to be_nil, 'master still running 5s after SIGQUIT'
    expect(status.exitstatus).to eq(0), status.inspect
  end

  it 'SIGQUIT closes the listener at once while an async request is still running' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: port)
      server listen: "127.0.0.1:#{port}" do
        location "/slow" do
          Async.sleep 1.0
          "slow done"
        end
      end
    RUBY
    c = connect(port)
    c.request('GET', '/slow')
    sleep 0.2 # let the request reach Async.sleep
    gw.signal('QUIT')
    poll('new connections to be refused', timeout: 0.9) { !port_open?(port) }
    r = c.read_response(timeout: 5)
    expect([r.status, r.body]).to eq([200, 'slow done'])
    status = gw.wait_exit(5)
    expect(status).not_to be_nil, 'master still running 5s after SIGQUIT'
    expect(status.exitstatus).to eq(0), status.inspect
  end

  it 'SIGHUP reloads the config: the new handler is served by the same master' do
    port = free_port
    gw = start_gateway(config(port, body: 'v1'), ports: port)
    expect(http_get(port, '/').body).to eq('v1')
    gw.rewrite_config(config(port, body: 'v2'))
    gw.signal('HUP')
    poll('the reloaded handler to answer', timeout: 10) do
      http_get(port, '/').body == 'v2'
    rescue StandardError
      false
    end
    expect(gw.alive?).to be(true)
    poll('old workers to be gone and one new worker left', timeout: 5) { live_children_of(gw.pid).size == 1 }
  end

  it 'SIGHUP with a broken new config logs FILE:LINE and keeps serving the old one' do
    port = free_port
    gw = start_gateway(config(port, body: 'v1'), ports: port)
    gw.rewrite_config(<<~RUBY)
      server listen: "127.0.0.1:#{port}" do
        location "/" do "v2" end
        no_such_directive 1
      end
    RUBY
    gw.signal('HUP')
    poll('the reload error in the log', timeout: 5) do
      gw.log.include?("#{gw.config_path}:3:")
    end
    expect(gw.alive?).to be(true)
    r = http_get(port, '/')
    expect([r.status, r.body]).to eq([200, 'v1'])
  end

  it 'SIGHUP after a broken config was fixed loads the fixed one' do
    port = free_port
    gw = start_gateway(config(port, body: 'v1'), ports: port)
    gw.rewrite_config("server listen: \"127.0.0.1:#{port}\" do\n  nope(\nend\n")
    gw.signal('HUP')
    poll('the reload error in the log', timeout: 5) { gw.log.include?(gw.config_path) }
    gw.rewrite_config(config(port, body: 'v3'))
    gw.signal('HUP')
    poll('the fixed config to answer', timeout: 10) do
      http_get(port, '/').body == 'v3'
    rescue StandardError
      false
    end
  end

  it 'SIGHUP can move a server to another port' do
    a = free_port
    b = free_port
    gw = start_gateway(config(a, body: 'on a'), ports: a)
    gw.rewrite_config(config(b, body: 'on b'))
    gw.signal('HUP')
    poll('the new port to answer', timeout: 10) do
      port_open?(b) && http_get(b, '/').body == 'on b'
    rescue StandardError
      false
    end
    poll('the old port to close', timeout: 5) { !port_open?(a) }
  end
end
