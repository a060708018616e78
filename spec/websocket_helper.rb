# What the WebSocket specs share: Debian's python3 with its modules, the
# echo upstream (spec/support/ws_echo.py) started here on a free port and
# stopped by PID, the status entry of the worker that answered, the
# ws_client.py runs, the tunnels' tear-down and the slow reader's RSS.
require 'io/wait'
require 'json'
require 'open3'

module WebSocketHelper
  PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with its python3-* modules
  SUPPORT = File.join(__dir__, 'support')

  # For before(:all): skips the group unless python3 imports these modules.
  def require_python_modules(*mods)
    _, st = Open3.capture2e(PY, '-c', "import #{mods.join(', ')}")
    skip "python3 cannot import #{mods.join(', ')} (./setup.sh)" unless st.success?
  end

  # Starts ws_echo.py (args: PORT CERT KEY for a wss:// one); returns its port.
  def start_echo(*args)
    r, w = IO.pipe
    pid = Process.spawn(PY, File.join(SUPPORT, 'ws_echo.py'), *args, out: w, err: w)
    w.close
    (@echo_pids ||= []) << pid
    raise 'ws_echo.py did not start' unless r.wait_readable(10)
    port = r.gets.to_i
    r.close
    raise 'ws_echo.py printed no port' unless port.positive?
    port
  end

  # For after(:each): the echo upstreams this example started.
  def stop_echoes
    (@echo_pids || []).each do |pid|
      Process.kill('TERM', pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  # The /status entry of the worker that answered on port.
  def own_status(port)
    j = JSON.parse(http_get(port, '/status').body)
    j['workers'].find { |w| w['pid'] == j['served_by'] }
  end

  # Runs spec/support/ws_client.py MODE [ARG] against url; its output
  # (stdout+stderr).
  def run_ws_client(url, mode, arg = nil, timeout: 60, env: {})
    args = [PY, File.join(SUPPORT, 'ws_client.py'), url, mode]
    args << arg.to_s if arg
    out, = Open3.capture2e(env, 'timeout', timeout.to_s, *args)
    out
  end

  # Everything closed again: no tunnel, only the status request's connection
  # (the spec's my_status); with fds_before, pid's descriptors are back too.
  def expect_tunnels_torn_down(fds_before = nil, pid = nil)
    poll('the tunnels to be gone', timeout: 5) do
      s = my_status
      s['tunnels_active'].zero? && s['connections_active'] == 1
    end
    return unless fds_before

    poll('the sockets to be closed', timeout: 5) { open_fds(pid) <= fds_before }
  end

  # Runs a slow reading client (a support script's argv, bounded by 90 s):
  # once it prints a line starting with `cue` it reads nothing while the
  # upstream floods, and pid's RSS is sampled every 0.1 s, `samples` times.
  # Returns [the client's output, the peak RSS above the start, KiB].
  def slow_reader_rss_growth(pid, argv, cue:, samples:)
    rss0 = rss_kib(pid)
    peak = rss0
    out = +''
    Open3.popen2e('timeout', '90', *argv) do |_in, io, wait|
      until (line = io.gets).nil?
        out << line
        next unless line.start_with?(cue)

        samples.times do
          sleep 0.1
          peak = [peak, rss_kib(pid)].max
        end
      end
      wait.value
    end
    [out, [peak, rss_kib(pid)].max - rss0]
  end
end
