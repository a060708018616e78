# cpu_limit: a handler that runs on the CPU past its limit without waiting is
# interrupted with Gateway::CPULimitExceeded (a 500), and the worker goes on
# serving; waits (Async.sleep, a blocking HttpRequest) do not count.
#
# The limit is CPU time, so the checks are too: the worker's CPU time over a
# request (/proc/PID/stat), and handlers that burn a given amount of their
# own user CPU time. On a shared machine a second of CPU can take several of
# wall time, which would say nothing about the limit.
require 'etc'
require_relative 'spec_helper'

RSpec.describe 'cpu_limit' do
  # burn(s): runs Ruby until this process has used s more seconds of user CPU
  # time (what ITIMER_VIRTUAL counts), checking /proc every 2000 additions.
  CPU_LIMIT_BURN = <<~'RUBY'
    def user_cpu
      (File.open("/proc/self/stat") { |f| f.read }).split(") ").last.split(" ")[11].to_i / 100.0
    end

    def burn(s)
      t = user_cpu
      x = 0
      while user_cpu - t < s
        i = 0
        while i < 2000; x += 1; i += 1; end
      end
      x
    end
  RUBY

  # CPU seconds (user + system) process pid has used.
  def cpu_of(pid)
    f = File.read("/proc/#{pid}/stat").split(') ').last.split
    (f[11].to_i + f[12].to_i) / Etc.sysconf(Etc::SC_CLK_TCK).to_f
  end

  # The worker's CPU time over the block, and the block's value.
  def cpu_used(pid)
    before = cpu_of(pid)
    r = yield
    [r, cpu_of(pid) - before]
  end

  describe 'with a server cpu_limit of 1 s' do
    before(:each) do
      @back = free_port
      back = config_with('location "/slow" do Async.sleep 2; "slow" end', port: @back, server: '', pid: false)
      # A blank line after the back server: the `loop {}` line is CPU_LIMIT_BURN + 8.
      gateway_with(<<~RUBY, "#{CPU_LIMIT_BURN}#{back}\n", server: 'workers: 1, cpu_limit: 1', ports: [@back])
        location "/loop" do
          loop {}
        end
        location "/while" do
          x = 0
          while true; x += 1; end
        end
        location "/each" do
          (1..Float::INFINITY).each { |i| [1, 2, 3].each { |j| [j, i].map { |k| k + 1 } } }
        end
        location "/finite" do
          burn(0.5)
          "finite"
        end
        location "/rescue_std" do
          begin
            loop {}
          rescue => e
            "swallowed \#{e.class}"
          end
        end
        location "/rescue_all" do
          begin
            loop {}
          rescue Exception
            loop {}
          end
        end
        location "/bursts" do
          burn(0.6)
          Async.sleep 0.05
          burn(0.6)
          "two bursts"
        end
        location "/sleep" do
          Async.sleep 1.5
          "slept"
        end
        location "/blocking" do
          HttpRequest.new(timeout: 5).get("http://127.0.0.1:#{@back}/slow")["body"]
        end
        location "/partial" do
          Nginx.rputs "partial"
          loop {}
        end
        location "/own", cpu_limit: 0.3 do
          loop {}
        end
        location "/near", cpu_limit: 0.1 do
          burn(0.07)
          "near"
        end
        location "/more", cpu_limit: 3 do
          burn(1.5)
          "more"
        end
        location "/unlimited", cpu_limit: nil do
          burn(1.5)
          "unlimited"
        end
        location "/" do "fine" end
      RUBY
    end

    { 'loop {}' => '/loop', 'while true; x += 1; end' => '/while', 'a deep each chain' => '/each' }.each do |what, path|
      it "interrupts `#{what}` with a 500 within cpu_limit + 0.5 s of CPU, and the same worker serves the next request" do
        pid = worker_pid(@port)
        r, cpu = cpu_used(pid) { http_get(@port, path, timeout: 15) }
        expect(r.status).to eq(500)
        expect(cpu).to be_between(0.8, 1.5)
        r = http_get(@port, '/')
        expect([r.status, r.body]).to eq([200, 'fine'])
        expect(worker_pid(@port)).to eq(pid)
      end
    end

    it 'logs Gateway::CPULimitExceeded with the location, the limit and the handler file:line' do
      expect(http_get(@port, '/while', timeout: 20).status).to eq(500)
      path = Regexp.escape(@gw.config_path)
      poll('the interruption in the error log', timeout: 3) do
        @gw.log =~ %r{Gateway::CPULimitExceeded: cpu_limit of 1 s exceeded in location "/while" at #{path}:\d+}
      end
    end

    it 'logs the handler file:line for `loop {}` too (mruby\'s own `loop` has no file)' do
      expect(http_get(@port, '/loop', timeout: 20).status).to eq(500)
      line = CPU_LIMIT_BURN.lines.size + 8 # the `loop {}` line of the config
      path = Regexp.escape(@gw.config_path)
      poll('the handler line in the error log', timeout: 3) { @gw.log =~ %r{location "/loop" at #{path}:#{line}\b} }
    end

    it 'never interrupts a CPU-heavy handler that stays under the limit' do
      r = http_get(@port, '/finite', timeout: 20)
      expect([r.status, r.body]).to eq([200, 'finite'])
      expect(@gw.log).not_to include('CPULimitExceeded')
    end

    # The 50 ms tick runs on between requests, so a request's first tick comes
    # after anything from 0 to 50 ms of its own CPU: counted as a whole tick,
    # it stopped handlers up to 50 ms before their limit.
    it 'never stops a handler before its limit (0.07 s of CPU under a 0.1 s limit, 8 times)' do
      8.times do
        r = http_get(@port, '/near', timeout: 10)
        expect([r.status, r.body]).to eq([200, 'near'])
      end
    end

    it 'is not a StandardError: `rescue => e` does not swallow it' do
      r = http_get(@port, '/rescue_std', timeout: 20)
      expect(r.status).to eq(500)
      expect(r.body).not_to include('swallowed')
    end

    it '`rescue Exception` cannot swallow it for good: the second limit stops the request' do
      r, cpu = cpu_used(worker_pid(@port)) { http_get(@port, '/rescue_all', timeout: 20) }
      expect(r.status).to eq(500)
      expect(cpu).to be_between(1.7, 2.5) # twice the limit
      path = Regexp.escape(@gw.config_path)
      poll('the forced stop in the error log', timeout: 3) do
        @gw.log =~ %r{stopped: it rescued Gateway::CPULimitExceeded .* location "/rescue_all" at #{path}:\d+}
      end
      r = http_get(@port, '/')
      expect([r.status, r.body]).to eq([200, 'fine'])
    end

    it 'counts CPU between two waits only: two 0.6 s bursts around an Async.sleep pass a 1 s limit' do
      r = http_get(@port, '/bursts', timeout: 20)
      expect([r.status, r.body]).to eq([200, 'two bursts'])
    end

    it 'does not count a blocking HttpRequest wait (2 s under a 1 s limit)' do
      t = GatewaySpec.now
      r = http_get(@port, '/blocking', timeout: 20)
      expect([r.status, r.body]).to eq([200, 'slow'])
      expect(GatewaySpec.now - t).to be >= 1.9
    end

    it 'leaves fibers parked on async calls alone while another request is interrupted' do
      sleeper = connect(@port)
      sleeper.request('GET', '/sleep')
      expect(http_get(@port, '/loop', timeout: 20).status).to eq(500)
      r = sleeper.read_response(timeout: 5)
      expect([r.status, r.body]).to eq([200, 'slept'])
    end

    it 'closes the connection (never a truncated 200) when the response had begun' do
      c = connect(@port)
      c.request('GET', '/partial')
      r = begin
        c.read_response(timeout: 5)
      rescue GatewaySpec::ConnectionClosed
        nil
      end
      expect(r.status).to eq(500) if r
    end

    it "a location's own cpu_limit overrides the server's, lower" do
      r, cpu = cpu_used(worker_pid(@port)) { http_get(@port, '/own', timeout: 15) }
      expect(r.status).to eq(500)
      expect(cpu).to be < 0.3 + 0.4 # not the server's 1 s
      poll('the 0.3 s limit in the log', timeout: 3) { @gw.log.include?('cpu_limit of 0.3 s exceeded in location "/own"') }
    end

    it "a location's own cpu_limit overrides the server's, higher" do
      r = http_get(@port, '/more', timeout: 20)
      expect([r.status, r.body]).to eq([200, 'more'])
    end

    it 'cpu_limit: nil on a location disables it' do
      r = http_get(@port, '/unlimited', timeout: 20)
      expect([r.status, r.body]).to eq([200, 'unlimited'])
    end
  end

  it 'cpu_limit: nil on a server disables it for its locations' do
    port = free_port
    start_gateway(CPU_LIMIT_BURN + <<~RUBY, ports: port)
      server listen: "127.0.0.1:#{port}", cpu_limit: nil do
        location "/burn" do burn(1.2); "no limit" end
        location "/" do "fine" end
      end
    RUBY
    r = http_get(port, '/burn', timeout: 20)
    expect([r.status, r.body]).to eq([200, 'no limit'])
  end

  it 'defaults to 5 s' do
    status, out, = check_config(<<~RUBY)
      s = server listen: "127.0.0.1:1" do
        location "/" do "x" end
        location "/own", cpu_limit: 2 do "x" end
      end
      raise "server: \#{s.cpu_limit.inspect}" unless s.cpu_limit == 5
      raise "location: \#{s.locations[0].cpu_limit.inspect}" unless s.locations[0].cpu_limit == 5
      raise "own: \#{s.locations[1].cpu_limit.inspect}" unless s.locations[1].cpu_limit == 2
    RUBY
    expect(status).to eq(0), out
  end

  [['server listen: "127.0.0.1:1", cpu_limit: 0 do location "/" do "x" end end', 'server: cpu_limit'],
   ['server listen: "127.0.0.1:1", cpu_limit: "5" do location "/" do "x" end end', 'server: cpu_limit'],
   ["server listen: \"127.0.0.1:1\" do\n  location \"/\", cpu_limit: -1 do \"x\" end\nend", 'location "/": cpu_limit']]
    .each do |config, message|
    it "rejects #{config.lines.grep(/cpu_limit/).first.strip[/cpu_limit: \S+/]} with FILE:LINE and a clear message" do
      status, out, path = check_config(config)
      expect(status).to eq(1)
      expect(out).to include("#{path}:")
      expect(out).to include(message)
      expect(out).to include('positive number of seconds')
    end
  end
end
