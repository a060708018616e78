# Operating a running gateway from the command line, as with nginx -s: the pid
# file (written once listening, removed at exit, found through the config
# file) and `gateway -s reload|stop|quit|reopen -f FILE`.
require_relative 'spec_helper'

RSpec.describe 'gateway -s and the pid file' do
  def config(port, body: 'v1', pid: 'gateway.pid')
    <<~RUBY
      #{pid ? "pid #{pid.inspect}" : '# no pid directive: the default pid file'}
      server listen: "127.0.0.1:#{port}" do
        location "/busy" do
          t = Time.now
          while Time.now - t < 0.5; end
          "busy done"
        end
        location "/" do #{body.inspect} end
      end
    RUBY
  end

  # The pid file a relative `pid` names: next to the config file.
  def pid_path(gw, name = 'gateway.pid')
    File.join(File.dirname(gw.config_path), name)
  end

  # The documented default: /tmp/gateway-<FNV-1a 64 of the config's real path, hex>.pid
  def default_pid_path(config_path)
    h = 0xcbf29ce484222325
    File.realpath(config_path).each_byte { |b| h = ((h ^ b) * 0x100000001b3) & 0xffff_ffff_ffff_ffff }
    format('/tmp/gateway-%016x.pid', h)
  end

  # `gateway -s stop|quit` makes the master exit on purpose: tell the harness,
  # which otherwise reports a master that exited on its own.
  def expect_exit(gw)
    gw.instance_variable_set(:@stopping, true)
  end

  def gateway_s(action, gw_or_path)
    path = gw_or_path.is_a?(String) ? gw_or_path : gw_or_path.config_path
    run_gateway('-s', action, '-f', path)
  end

  it 'writes the pid file (relative paths: next to the config) once listening, and removes it at exit' do
    port = free_port
    gw = start_gateway(config(port), ports: port)
    expect(File.read(pid_path(gw))).to eq("#{gw.pid}\n")
    gw.signal('TERM')
    expect(gw.wait_exit(5)&.exitstatus).to eq(0)
    expect(File.exist?(pid_path(gw))).to be(false)
  end

  it '-s reload re-reads the config: the same master serves the new body' do
    port = free_port
    gw = start_gateway(config(port, body: 'v1'), ports: port)
    expect(http_get(port, '/').body).to eq('v1')
    gw.rewrite_config(config(port, body: 'v2'))
    r = gateway_s('reload', gw)
    expect(r.exitstatus).to eq(0), r.output
    expect(r.output).to eq('')
    poll('the reloaded body', timeout: 10) do
      http_get(port, '/').body == 'v2'
    rescue StandardError
      false
    end
    expect(gw.alive?).to be(true)
    expect(File.read(pid_path(gw))).to eq("#{gw.pid}\n")
  end

  it '-s stop stops fast: the master exits 0, the port closes, the pid file is gone' do
    port = free_port
    gw = start_gateway(config(port), ports: port)
    expect_exit(gw)
    r = gateway_s('stop', gw)
    expect(r.exitstatus).to eq(0), r.output
    status = gw.wait_exit(5)
    expect(status).not_to be_nil, 'master still running 5s after -s stop'
    expect(status.exitstatus).to eq(0), status.inspect
    expect(port_open?(port)).to be(false)
    expect(File.exist?(pid_path(gw))).to be(false)
  end

  it '-s quit stops gracefully: an in-flight request is answered, then the master exits 0' do
    port = free_port
    gw = start_gateway(config(port), ports: port)
    c = connect(port)
    c.request('GET', '/busy')
    sleep 0.1 # let the request reach its handler (it holds the worker for 0.5 s)
    expect_exit(gw)
    r = gateway_s('quit', gw)
    expect(r.exitstatus).to eq(0), r.output
    res = c.read_response(timeout: 5)
    expect([res.status, res.body]).to eq([200, 'busy done'])
    status = gw.wait_exit(5)
    expect(status).not_to be_nil, 'master still running 5s after -s quit'
    expect(status.exitstatus).to eq(0), status.inspect
    expect(File.exist?(pid_path(gw))).to be(false)
  end

  it '-s with no pid file exits 1 and names the pid file' do
    path = write_config(config(free_port, pid: 'never-started.pid'))
    r = gateway_s('stop', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.stderr).to include(File.join(File.dirname(path), 'never-started.pid'))
    expect(r.stderr).to match(/No such file/)
  end

  it '-s with a stale pid file (its process is gone) exits 1 and says so' do
    path = write_config(config(free_port, pid: 'stale.pid'))
    dead = Process.spawn('true')
    Process.wait(dead)
    File.write(File.join(File.dirname(path), 'stale.pid'), "#{dead}\n")
    r = gateway_s('reload', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.stderr).to match(/#{dead}.*not running/)
  end

  it '-s with a pid file that holds no number exits 1' do
    path = write_config(config(free_port, pid: 'junk.pid'))
    File.write(File.join(File.dirname(path), 'junk.pid'), "hello\n")
    r = gateway_s('quit', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.stderr).to match(/junk\.pid does not hold a process id/)
  end

  it '-s with an unknown signal is a usage error naming the known ones' do
    path = write_config(config(free_port))
    r = gateway_s('restart', path)
    expect(r.exitstatus).to eq(2), r.output
    expect(r.stderr).to match(/reload.*stop.*quit.*reopen/)
  end

  it '-s with a broken config exits 1 with FILE:LINE: message' do
    path = write_config("pid \"x.pid\"\nno_such_directive 1\n")
    r = gateway_s('stop', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.output).to match(/^#{Regexp.escape(path)}:2: .*no_such_directive/)
  end

  it 'without a pid directive the pid file is /tmp/gateway-<hash of the config path>.pid, and -s finds it' do
    port = free_port
    gw = start_gateway(config(port, pid: nil), ports: port)
    default = default_pid_path(gw.config_path)
    expect(File.read(default)).to eq("#{gw.pid}\n")
    expect_exit(gw)
    r = gateway_s('stop', gw)
    expect(r.exitstatus).to eq(0), r.output
    expect(gw.wait_exit(5)&.exitstatus).to eq(0)
    expect(File.exist?(default)).to be(false)
  end

  it 'a reload that changes `pid` moves the pid file' do
    port = free_port
    gw = start_gateway(config(port, pid: 'one.pid'), ports: port)
    expect(File.read(pid_path(gw, 'one.pid'))).to eq("#{gw.pid}\n")
    gw.rewrite_config(config(port, body: 'v2', pid: 'two.pid'))
    gw.signal('HUP')
    poll('the pid file to move', timeout: 10) do
      File.exist?(pid_path(gw, 'two.pid')) && !File.exist?(pid_path(gw, 'one.pid'))
    end
    expect(File.read(pid_path(gw, 'two.pid'))).to eq("#{gw.pid}\n")
    expect(gateway_s('reload', gw).exitstatus).to eq(0)
  end

  it 'a pid file that cannot be written stops start-up: exit 1 with the path and the reason' do
    port = free_port
    path = write_config(config(port, pid: '/nonexistent-gateway-dir/gw.pid'))
    r = run_gateway('-f', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.stderr).to match(%r{/nonexistent-gateway-dir/gw\.pid: No such file or directory})
    expect(port_open?(port)).to be(false)
  end

  it 'pid is a top-level directive: inside a server block it is an error at FILE:LINE' do
    status, output, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        pid "x.pid"
        location "/" do "x" end
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:2: pid: only at the top level/), output
  end

  it 'pid given twice, or not a String, is an error at FILE:LINE' do
    status, output, path = check_config(<<~RUBY)
      pid "a.pid"
      pid "b.pid"
      server listen: #{free_port} do
        location "/" do "x" end
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:2: pid is given twice/), output
    status, output, path = check_config("pid 42\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:1: pid: give a file path/), output
  end

  it '-h documents -s and each of its signals' do
    r = run_gateway('-h')
    expect(r.exitstatus).to eq(0), r.output
    expect(r.output).to match(/^\s+-s SIGNAL/)
    %w[reload stop quit reopen].each { |s| expect(r.output).to match(/^\s+#{s}\s/), "usage lacks #{s}" }
    %w[pid error_log access_log].each { |d| expect(r.output).to include(d) }
  end
end
