# What the WebSocket specs share: Debian's python3 with its modules, the
# echo upstream (spec/support/ws_echo.py) started here on a free port and
# stopped by PID, and the status entry of the worker that answered.
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
end
