# frozen_string_literal: true

# Instructions per request, counted by valgrind's callgrind: repeatable for
# the same binary and load whatever else the machine is doing, so a small
# change in the per-request cost shows where wall-clock benchmarks on a
# shared machine only show noise. Each binary (BASE, NEW) serves one config
# under callgrind; after a warm-up the front worker's counters are zeroed,
# N requests are sent (ab -k, 10 connections; h2load --h1 for fastcgi), the
# counters dumped, and the instructions (Ir) divided by N.
#
#   ruby tools/bench/instructions.rb BASE=/tmp/old-gateway NEW=build/gateway [N=2000]
#        [WORKLOADS=hello,proxy] [KEEP=/tmp/dumps]
#
# Workloads (one front worker, one backend worker, on free loopback ports):
#   hello   a Ruby handler answering "ok"
#   status  the status page's handler (no Ruby): the core's own path
#   proxy   proxy_pass to the backend, pooled keep-alive
#   async   the seed's non-blocking flow: Async::HTTP.sub_request to a
#           proxy_pass location whose backend sleeps 10 ms (Async.sleep)
#   regex   hello through a regex location with one capture,
#           `location %r{^/regex/(\w+)$}` (GET /regex/abc), to compare with
#           hello (a prefix location); not in the default list (a binary
#           without regex locations cannot load its config)
#   fastcgi a fastcgi: location in front of php-fpm (Debian's php8.2-fpm,
#           started here on a unix socket, 12 children: more than the 10 kept
#           connections ab makes the gateway hold; stopped by PID) echoing
#           one line over a kept connection; not in the default list (it needs
#           php8.2-fpm; only the gateway's worker is counted)
require 'fileutils'
require 'socket'
require 'tmpdir'
require_relative 'common'

module GatewayBench
  class Instructions
    WORKLOADS = %w[hello status proxy async].freeze
    PATHS = { 'regex' => '/regex/abc' }.freeze

    def initialize(root: nil, env: ENV) # root: the same call as the other benches'
      @n = Integer(env.fetch('N', '2000'))
      @bins = { 'base' => env['BASE'], 'new' => env.fetch('NEW', 'build/gateway') }.reject { |_, b| b.nil? || b.empty? }
      @bins.each_value { |b| raise "no executable #{b}" unless File.executable?(b) }
      @loads = env.fetch('WORKLOADS', WORKLOADS.join(',')).split(',')
      @keep = env['KEEP'] # a folder: keep each callgrind dump there, for callgrind_annotate
    end

    def run
      rows = @loads.map { |w| [w, @bins.transform_values { |bin| measure(bin, w) }] }
      puts '| workload | ' + @bins.keys.map { |k| "#{k} Ir/req" }.join(' | ') + (@bins.size == 2 ? ' | new/base |' : ' |')
      puts '|---|' + ('--:|' * (@bins.size + (@bins.size == 2 ? 1 : 0)))
      rows.each do |w, r|
        cells = r.values.map { |v| v.round.to_s }
        cells << format('%.3f', r['new'] / r['base']) if @bins.size == 2
        puts "| #{w} | #{cells.join(' | ')} |"
      end
    end

    private

    def config(front, back, workload, dir)
      regex = workload == 'regex' ? 'location %r{^/regex/(\\w+)$} do "ok" end' : ''
      fcgi = workload == 'fastcgi' ? %(location "/fastcgi", fastcgi: "unix:#{dir}/php.sock", script_filename: "#{dir}/echo.php") : ''
      <<~RUBY
        server listen: "127.0.0.1:#{back}" do
          location "/ok" do "ok" end
          location "/sleep" do Async.sleep(0.01); "done" end
        end
        server listen: "127.0.0.1:#{front}" do
          location "/pid" do Gateway.pid.to_s end
          location "/hello" do "ok" end
          location "/status", status: true
          location "/proxy", proxy_pass: "http://127.0.0.1:#{back}/ok"
          location "/inner", proxy_pass: "http://127.0.0.1:#{back}/sleep"
          location "/async" do
            Async::HTTP.sub_request("/inner").body
          end
          #{regex}
          #{fcgi}
        end
      RUBY
    end

    def get(port, path)
      s = TCPSocket.new('127.0.0.1', port)
      s.write("GET #{path} HTTP/1.0\r\nHost: b\r\n\r\n")
      s.read.split("\r\n\r\n", 2)[1]
    ensure
      s&.close
    end

    # The front worker's pid, once it answers (valgrind starts slowly).
    def wait_up(port)
      300.times do
        return get(port, '/pid')
      rescue SystemCallError
        sleep 0.1
      end
      raise "the gateway did not start on #{port}"
    end

    # n requests over 10 kept connections. ab speaks HTTP/1.0, which cannot
    # keep a response of unknown length (php's echo: chunked in HTTP/1.1)
    # alive: the fastcgi workload is sent with h2load --h1, as wrk sends W6.
    # Raises unless all n succeeded (2xx): a failed request costs other
    # instructions than a served one, and Ir is divided by n.
    def load(workload, n, url)
      argv = if workload == 'fastcgi' then ['h2load', '--h1', '-n', n.to_s, '-c', '10', url]
             else ['ab', '-q', '-k', '-n', n.to_s, '-c', '10', url]
             end
      out = IO.popen(argv, err: %i[child out], &:read)
      r = workload == 'fastcgi' ? Load.h2load(out) : Load.ab(out)
      return true if r[:ok] == n && r[:failures].zero?

      raise Error, "#{argv.join(' ')}: #{r[:ok]} of #{n} succeeded (errors | non-2xx | timeouts: #{Load.cells(r)})"
    end

    def measure(bin, workload)
      dir = Dir.mktmpdir('gw-instr-')
      front, back = Util.free_port, Util.free_port
      fpm = Callgrind.php_fpm(dir, 12) if workload == 'fastcgi'
      File.write("#{dir}/gw.rb", config(front, back, workload, dir))
      pid = Callgrind.spawn([bin, '-f', "#{dir}/gw.rb"], dir)
      worker = wait_up(front).to_i
      path = PATHS.fetch(workload, "/#{workload}")
      url = "http://127.0.0.1:#{front}#{path}"
      load(workload, @n / 4, url)
      ir = Callgrind.count(worker, dir, @keep && File.join(@keep, "#{File.basename(bin)}-#{workload}.callgrind")) do
        load(workload, @n, url)
      end
      ir.to_f / @n
    ensure
      Callgrind.stop(pid, fpm)
      FileUtils.rm_rf(dir) if dir
    end
  end
end

if $PROGRAM_NAME == __FILE__
  env = ENV.to_h.merge(ARGV.map { |a| a.split('=', 2) }.to_h)
  GatewayBench::Instructions.new(env: env).run
end
