# The error log: a file (or stderr, the default) with a level filter; what
# scripts log through Gateway.log and ngx_mruby's Nginx.errlogger lands there;
# SIGUSR1 (`gateway -s reopen`) reopens every log file after logrotate.
require_relative 'spec_helper'

RSpec.describe 'error_log' do
  def app(port, error_log: '"error.log"', access_log: nil)
    <<~RUBY
      error_log #{error_log}
      #{access_log ? "access_log #{access_log}" : ''}
      server listen: "127.0.0.1:#{port}" do
        location "/log" do |req|
          tag = req.query.to_s
          Gateway.log(:debug, "debug-\#{tag}")
          Gateway.log(:info, "info-\#{tag}")
          Gateway.log(:warn, "warn-\#{tag}")
          Gateway.log("plain-\#{tag}")
          Nginx.errlogger(Nginx::LOG_ERR, "ngx-err-\#{tag}")
          Nginx.log(Nginx::LOG_DEBUG, "ngx-debug-\#{tag}")
          "logged"
        end
      end
    RUBY
  end

  def children_of(pid)
    Dir.glob('/proc/[0-9]*/stat').filter_map do |f|
      cpid = f[%r{/proc/(\d+)/}, 1].to_i
      cpid if ppid_of(cpid) == pid && !process_gone?(cpid)
    end
  end

  def file(gw, name)
    File.join(File.dirname(gw.config_path), name)
  end

  def read(gw, name)
    File.exist?(file(gw, name)) ? File.read(file(gw, name)) : ''
  end

  # Lines of the error log file that end with `text`.
  def wait_line(gw, text, name: 'error.log')
    poll("#{text.inspect} in #{name}", timeout: 5) do
      read(gw, name).lines.find { |l| l.chomp.end_with?(": #{text}") }
    end
  end

  it 'writes to the file at level :notice by default: debug and info lines are dropped' do
    port = free_port
    gw = start_gateway(app(port), ports: port)
    expect(http_get(port, '/log?a').body).to eq('logged')
    expect(wait_line(gw, 'warn-a')).to match(/ \[warn\] worker #{port}:0\[\d+\]: warn-a$/)
    expect(wait_line(gw, 'plain-a')).to include('[notice]')
    expect(wait_line(gw, 'ngx-err-a')).to include('[error]')
    text = read(gw, 'error.log')
    expect(text).to match(/\[notice\] master\[#{gw.pid}\]: ready/)
    expect(text).not_to include('debug-a')
    expect(text).not_to include('info-a')
    # Nothing of it on stderr any more.
    expect(gw.log).not_to include('warn-a')
    expect(gw.log).not_to include('ready')
  end

  it 'level: :debug keeps every line; level: :error keeps only errors and worse' do
    port = free_port
    gw = start_gateway(app(port, error_log: '"debug.log", level: :debug'), ports: port)
    http_get(port, '/log?d')
    %w[debug-d info-d warn-d ngx-debug-d].each { |t| wait_line(gw, t, name: 'debug.log') }

    port2 = free_port
    gw2 = start_gateway(app(port2, error_log: '"errors.log", level: "error"'), ports: port2)
    http_get(port2, '/log?e')
    wait_line(gw2, 'ngx-err-e', name: 'errors.log')
    expect(read(gw2, 'errors.log')).not_to include('warn-e')
    expect(read(gw2, 'errors.log')).not_to include('ready')
  end

  it 'error_log :stderr, level: :warn filters what goes to stderr' do
    port = free_port
    gw = start_gateway(app(port, error_log: ':stderr, level: :warn'), ports: port)
    http_get(port, '/log?s')
    poll('warn-s on stderr', timeout: 5) { gw.log.include?(': warn-s') }
    expect(gw.log).not_to include('plain-s')
    expect(gw.log).not_to include('ready')
  end

  it 'a bad level or target is a config error at FILE:LINE' do
    status, output, path = check_config("error_log \"e.log\", level: :loud\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:1: error_log: level must be one of :debug/), output
    status, output, path = check_config("error_log :off\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:1: error_log: give a file path or :stderr/), output
  end

  it 'error_log inside a server block is a config error at FILE:LINE' do
    status, output, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        location "/" do "x" end
        error_log "e.log"
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:3: error_log: only at the top level/), output
  end

  it 'an error log that cannot be opened stops start-up: exit 1 with the path and the reason' do
    port = free_port
    path = write_config(app(port, error_log: '"/nonexistent-gateway-dir/error.log"'))
    r = run_gateway('-f', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.stderr).to match(%r{error_log /nonexistent-gateway-dir/error\.log: No such file or directory})
    expect(port_open?(port)).to be(false)
  end

  it 'a reload switches to the new error_log' do
    port = free_port
    gw = start_gateway(app(port, error_log: '"first.log"'), ports: port)
    gw.rewrite_config(app(port, error_log: '"second.log"'))
    gw.signal('HUP')
    wait_line(gw, 'reloaded: generation 1', name: 'second.log')
    poll('a new worker logging to second.log', timeout: 10) do
      http_get(port, '/log?r')
      read(gw, 'second.log').include?(': warn-r')
    end
  end

  it 'a reload whose log file cannot be opened fails and keeps serving with the running config' do
    port = free_port
    gw = start_gateway(app(port), ports: port)
    gw.rewrite_config(app(port, error_log: '"/nonexistent-gateway-dir/error.log"').sub('"logged"', '"v2"'))
    gw.signal('HUP')
    line = wait_line(gw, 'reload failed, keeping the running configuration: ' \
                         'error_log /nonexistent-gateway-dir/error.log: No such file or directory')
    expect(line).to include('[error]')
    expect(http_get(port, '/log?k').body).to eq('logged')
    expect(gw.alive?).to be(true)
  end

  # logrotate: rename the files, then `gateway -s reopen`; the master and the
  # workers write on at the old paths, into new files.
  it '-s reopen (SIGUSR1) reopens the error and access logs at their paths' do
    port = free_port
    gw = start_gateway(app(port, access_log: '"access.log"'), ports: port)
    http_get(port, '/log?before')
    wait_line(gw, 'warn-before')
    File.rename(file(gw, 'error.log'), file(gw, 'error.log.1'))
    File.rename(file(gw, 'access.log'), file(gw, 'access.log.1'))

    r = run_gateway('-s', 'reopen', '-f', gw.config_path)
    expect(r.exitstatus).to eq(0), r.output
    wait_line(gw, 'reopened the log files') # the master's line, in a new error.log
    # The workers reopen when their loop takes the signal: poll with requests.
    n = 0
    poll('a worker line in the new error.log', timeout: 5) do
      http_get(port, "/log?after#{n += 1}")
      read(gw, 'error.log').include?(': warn-after')
    end
    poll('a request line in the new access.log', timeout: 5) { read(gw, 'access.log').include?('/log?after') }
    expect(read(gw, 'error.log.1')).to include('warn-before')
    expect(read(gw, 'access.log.1')).to include('/log?before')
    expect(gw.alive?).to be(true)
    expect(http_get(port, '/log?x').status).to eq(200) # workers did not die of SIGUSR1
  end

  it 'SIGUSR1 never kills a worker, with or without log files' do
    port = free_port
    gw = start_gateway(app(port, error_log: ':stderr'), ports: port)
    workers = children_of(gw.pid)
    expect(workers.size).to eq(1)
    gw.signal('USR1')
    poll('the master to note the reopen', timeout: 5) { gw.log.include?('reopened the log files') }
    expect(http_get(port, '/log?2').status).to eq(200)
    expect(children_of(gw.pid)).to eq(workers)
    expect(gw.log).not_to match(/killed by signal/)
  end
end
