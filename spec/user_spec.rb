# user "NAME", group: "GROUP": the master (root) binds the listening
# sockets and opens the logs, the workers switch to that user before they
# run anything (worker.c drop_privileges), the log files are handed over to
# it so the workers can reopen them after logrotate (USR1); a name the
# system does not know is FILE:LINE; a master that is not root ignores the
# directive with a warning, as nginx does.
require_relative 'spec_helper'
require 'etc'
require 'fileutils'

RSpec.describe 'user directive' do
  def ids_of(pid)
    status = File.read("/proc/#{pid}/status")
    { uid: status[/^Uid:\s+(.*)$/, 1].split.map(&:to_i), gid: status[/^Gid:\s+(.*)$/, 1].split.map(&:to_i),
      groups: status[/^Groups:\s*(.*)$/, 1].split.map(&:to_i) }
  end

  def workers_of(gw)
    GatewaySpec.group_members(gw.pid) - [gw.pid]
  end

  let(:nobody) { Etc.getpwnam('nobody') }
  let(:nogroup) { Etc.getgrgid(nobody.gid) }

  context 'when the master runs as root' do
    before { skip 'needs root' unless Process.euid.zero? }

    it 'runs the workers as the user (every id, its groups), keeps the master root, and serves' do
      port = free_port
      gw = start_gateway(<<~RUBY, ports: port)
        user "nobody"
        server listen: "127.0.0.1:#{port}", workers: 2 do
          location "/" do "worker #{'#{Gateway.pid}'}" end
        end
      RUBY
      ws = []
      GatewaySpec.poll('two workers') { (ws = workers_of(gw)).size == 2 }
      ws.each do |w|
        ids = ids_of(w)
        expect(ids[:uid]).to eq([nobody.uid] * 4), "worker #{w}: #{ids}"
        expect(ids[:gid]).to eq([nobody.gid] * 4), "worker #{w}: #{ids}"
        expect(ids[:groups]).not_to include(0)
      end
      expect(ids_of(gw.pid)[:uid]).to eq([0, 0, 0, 0])
      r = http_get(port, '/')
      expect(r.status).to eq(200)
      expect(ws).to include(r.body[/\d+/].to_i)
    end

    it 'group: sets the workers\' group' do
      port = free_port
      gw = start_gateway(<<~RUBY, ports: port)
        user "nobody", group: "#{Etc.getgrgid(0).name}"
        server listen: "127.0.0.1:#{port}" do
          location "/" do "ok" end
        end
      RUBY
      ws = []
      GatewaySpec.poll('the worker') { (ws = workers_of(gw)).size == 1 }
      expect(ids_of(ws[0])[:uid].uniq).to eq([nobody.uid])
      expect(ids_of(ws[0])[:gid].uniq).to eq([0])
      expect(http_get(port, '/').body).to eq('ok')
    end

    it 'hands the log files over to the user, so workers reopen them after a rotation (USR1)' do
      port = free_port
      dir = File.join(spec_dir, 'logs')
      FileUtils.mkdir_p(dir)
      File.chmod(0o711, spec_dir) # the workers (nobody) reach the folder, as /var/log/gateway
      File.chmod(0o755, dir)
      gw = start_gateway(<<~RUBY, ports: port)
        user "nobody"
        error_log "#{dir}/error.log", level: :info
        access_log "#{dir}/access.log", format: "$request_uri $status"
        server listen: "127.0.0.1:#{port}" do
          location "/" do "ok" end
        end
      RUBY
      expect(http_get(port, '/before').status).to eq(200)
      %w[error.log access.log].each do |f|
        st = File.stat(File.join(dir, f))
        expect(st.uid).to eq(nobody.uid), "#{f} owned by #{st.uid}:#{st.gid}"
        expect(st.gid).to eq(0), "#{f}: its group changed to #{st.gid}" # the owner is handed over, not the group
      end
      File.rename(File.join(dir, 'access.log'), File.join(dir, 'access.log.1'))
      File.rename(File.join(dir, 'error.log'), File.join(dir, 'error.log.1'))
      gw.signal('USR1')
      GatewaySpec.poll('the master to reopen its logs') { File.exist?(File.join(dir, 'error.log')) }
      GatewaySpec.poll('the request to be logged in the new access.log', timeout: 10) do
        http_get(port, '/after')
        File.exist?(File.join(dir, 'access.log')) && File.read(File.join(dir, 'access.log')).include?('/after 200')
      end
      expect(File.read(File.join(dir, 'access.log.1'))).to include('/before 200')
      expect(File.stat(File.join(dir, 'access.log')).uid).to eq(nobody.uid)
      expect(File.read(File.join(dir, 'error.log.1') )).not_to match(/cannot reopen|Permission denied/i)
      expect(File.read(File.join(dir, 'error.log'))).not_to match(/Permission denied/i)
    end
  end

  it 'an unknown user or group is FILE:LINE at -t' do
    status, out, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        location "/" do "x" end
      end
      user "no-such-user-gw"
    RUBY
    expect(status).to eq(1), out
    expect(out).to include("#{path}:4: user: no such user \"no-such-user-gw\"")
    status, out, path = check_config(<<~RUBY)
      user "nobody", group: "no-such-group-gw"
      server listen: #{free_port} do
        location "/" do "x" end
      end
    RUBY
    expect(status).to eq(1), out
    expect(out).to include("#{path}:1: user: no such group \"no-such-group-gw\"")
  end

  it 'is ignored with a warning when the master is not root' do
    skip 'needs root to start a gateway as another user (setpriv)' unless Process.euid.zero?
    port = free_port
    File.chmod(0o711, spec_dir)
    dir = File.join(spec_dir, 'unprivileged')
    FileUtils.mkdir_p(dir)
    File.chown(nobody.uid, nobody.gid, dir) # its pid file
    config = File.join(dir, 'gateway.rb')
    File.write(config, <<~RUBY)
      user "#{Etc.getpwuid(0).name}"
      pid "#{dir}/gateway.pid"
      server listen: "127.0.0.1:#{port}" do
        location "/" do "unprivileged" end
      end
    RUBY
    # start_gateway's own spawn, run through setpriv as nobody
    log_path = "#{config}.log"
    pid = Process.spawn(GatewaySpec.sanitizer_env, 'setpriv', "--reuid=#{nobody.uid}", "--regid=#{nobody.gid}",
                        '--clear-groups', GatewaySpec::BIN, '-f', config, in: File::NULL, out: log_path,
                        err: %i[child out], pgroup: true, chdir: GatewaySpec::ROOT)
    gw = GatewaySpec::GatewayProcess.new(pid: pid, ports: [port], config_path: config, log_path: log_path)
    gateways << gw
    wait_ready(gw, [port], true, 10)
    expect(http_get(port, '/').body).to eq('unprivileged')
    expect(gw.log).to match(/user root: ignored, the master does not run as root/)
    workers_of(gw).each { |w| expect(ids_of(w)[:uid].uniq).to eq([nobody.uid]) }
  end
end
