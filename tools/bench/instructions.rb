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
#   seed    W1: examples/async.rb as shipped (ports changed), its
#           non-blocking endpoint, sent with h2load --h1 (HTTP/1.1, as wrk:
#           nginx + Lua answers it chunked); both workers counted, the front
#           and the backend
#   regex   hello through a regex location with one capture,
#           `location %r{^/regex/(\w+)$}` (GET /regex/abc), to compare with
#           hello (a prefix location); not in the default list (a binary
#           without regex locations cannot load its config)
#   fastcgi a fastcgi: location in front of php-fpm (Debian's php8.2-fpm,
#           started here on a unix socket, 12 children: more than the 10 kept
#           connections ab makes the gateway hold; stopped by PID) echoing
#           one line over a kept connection; not in the default list (it needs
#           php8.2-fpm; only the gateway's worker is counted)
#
# PEERS=nginx (the default; PEERS= for none) adds the peers of W1 and W2,
# counted the same way in the same run: for hello nginx `return 200 "ok"`,
# for seed nginx + Lua as `rake bench:w1` runs it (a front doing
# ngx.location.capture to a keepalive proxy_pass location, its backend
# answering after ngx.sleep(0.01); both processes counted). Each is one
# nginx process without a master (Debian's libnginx-mod-http-lua).
require 'fileutils'
require 'socket'
require 'tmpdir'
require_relative 'common'

module GatewayBench
  class Instructions
    WORKLOADS = %w[hello status proxy async seed].freeze
    PATHS = { 'regex' => '/regex/abc', 'seed' => '/async_http_sub_request_with_proxy_pass' }.freeze
    PEER_NAMES = { 'hello' => 'nginx `return 200`', 'seed' => 'nginx + Lua (front + backend)' }.freeze
    LUA_MAIN = "load_module /usr/lib/nginx/modules/ndk_http_module.so;\n" \
               'load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;'

    def initialize(root: nil, env: ENV) # root: the same call as the other benches'
      @root = root || File.expand_path('../..', __dir__)
      @n = Integer(env.fetch('N', '2000'))
      @bins = { 'base' => env['BASE'], 'new' => env.fetch('NEW', 'build/gateway') }.reject { |_, b| b.nil? || b.empty? }
      @bins.each_value { |b| raise "no executable #{b}" unless File.executable?(b) }
      @loads = env.fetch('WORKLOADS', WORKLOADS.join(',')).split(',')
      @peers = env.fetch('PEERS', 'nginx').split(',').include?('nginx')
      @keep = env['KEEP'] # a folder: keep each callgrind dump there, for callgrind_annotate
    end

    def run
      rows = @loads.map do |w|
        [w, @bins.transform_values { |bin| measure(bin, w) }, @peers && PEER_NAMES[w] && measure_nginx(w)]
      end
      two = @bins.size == 2
      peers = rows.any? { |_, _, p| p }
      puts '| workload | ' + @bins.keys.map { |k| "#{k} Ir/req" }.join(' | ') + (two ? ' | new/base' : '') +
           (peers ? ' | peer | peer Ir/req | new/peer' : '') + ' |'
      puts '|---|' + ('--:|' * (@bins.size + (two ? 1 : 0))) + (peers ? '---|--:|--:|' : '')
      rows.each do |w, r, peer|
        cells = r.values.map { |v| v.round.to_s }
        cells << format('%.3f', r['new'] / r['base']) if two
        cells += peer ? [PEER_NAMES[w], peer.round.to_s, format('%.3f', r['new'] / peer)] : %w[- - -] if peers
        puts "| #{w} | #{cells.join(' | ')} |"
      end
    end

    private

    # examples/async.rb with free ports (as `rake bench:w1` runs it).
    def seed_config(front, back)
      File.read(File.join(@root, 'examples/async.rb'))
          .gsub(/listen: 48080\b/, "listen: \"127.0.0.1:#{back}\"").gsub(/listen: 58080\b/, "listen: \"127.0.0.1:#{front}\"")
          .gsub('127.0.0.1:48080', "127.0.0.1:#{back}")
    end

    def config(front, back, workload, dir)
      return seed_config(front, back) if workload == 'seed'

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

    # The body of path, once the server answers (valgrind starts slowly).
    def wait_up(port, path = '/pid')
      300.times do
        return get(port, path)
      rescue SystemCallError
        sleep 0.1
      end
      raise "the server did not start on #{port}"
    end

    # n requests over 10 kept connections. ab speaks HTTP/1.0, which cannot
    # keep a response of unknown length (php's echo: chunked in HTTP/1.1)
    # alive: the fastcgi workload is sent with h2load --h1, as wrk sends W6.
    # Raises unless all n succeeded (2xx): a failed request costs other
    # instructions than a served one, and Ir is divided by n.
    def load(workload, n, url)
      h1 = %w[fastcgi seed].include?(workload)
      argv = if h1 then ['h2load', '--h1', '-n', n.to_s, '-c', '10', url]
             else ['ab', '-q', '-k', '-n', n.to_s, '-c', '10', url]
             end
      out = IO.popen(argv, err: %i[child out], &:read)
      r = h1 ? Load.h2load(out) : Load.ab(out)
      return true if r[:ok] == n && r[:failures].zero?

      raise Error, "#{argv.join(' ')}: #{r[:ok]} of #{n} succeeded (errors | non-2xx | timeouts: #{Load.cells(r)})"
    end

    def measure(bin, workload)
      dir = Dir.mktmpdir('gw-instr-')
      front, back = Util.free_port, Util.free_port
      fpm = Callgrind.php_fpm(dir, 12) if workload == 'fastcgi'
      File.write("#{dir}/gw.rb", config(front, back, workload, dir))
      pid = Callgrind.spawn([bin, '-f', "#{dir}/gw.rb"], dir)
      path = PATHS.fetch(workload, "/#{workload}")
      # seed: both workers (the master's children), the front and the backend
      workers = workload == 'seed' ? (wait_up(front, path) && Util.children(pid)) : wait_up(front).to_i
      count(workload, workers, dir, "http://127.0.0.1:#{front}#{path}", "#{File.basename(bin)}-#{workload}")
    ensure
      Callgrind.stop(pid, fpm)
      FileUtils.rm_rf(dir) if dir
    end

    # Warm-up, then @n requests to url counted in pids: Ir per request.
    def count(workload, pids, dir, url, name)
      load(workload, @n / 4, url)
      ir = Callgrind.count(pids, dir, @keep && File.join(@keep, "#{name}.callgrind")) { load(workload, @n, url) }
      ir.to_f / @n
    end

    # The workload's peer (PEER_NAMES): one nginx process each (seed: a
    # front and its backend), counted like the gateway.
    def measure_nginx(workload)
      dir = Dir.mktmpdir('gw-instr-nginx-') # the dumps; each nginx's files in a folder of it
      pids = []
      spawn = lambda do |main, body|
        own = File.join(dir, pids.size.to_s)
        pids << Callgrind.spawn(Callgrind.nginx(own, "keepalive_requests 1000000;\n#{body}", main: main), dir)
      end
      front = Util.free_port
      path = PATHS.fetch(workload, "/#{workload}")
      if workload == 'seed'
        back = Util.free_port
        spawn.call(LUA_MAIN, <<~NGINX)
          server { listen 127.0.0.1:#{back};
                   location /mruby { content_by_lua_block { ngx.sleep(0.01) ngx.say("done") } } }
        NGINX
        spawn.call(LUA_MAIN, <<~NGINX)
          upstream lua_backend { server 127.0.0.1:#{back}; keepalive 256; }
          server { listen 127.0.0.1:#{front};
                   location = /sub_req_proxy_pass { internal; proxy_http_version 1.1; proxy_set_header Connection "";
                                                    proxy_pass http://lua_backend/mruby; }
                   location = #{path} { content_by_lua_block {
                       local res = ngx.location.capture("/sub_req_proxy_pass")
                       ngx.print(res.body) } } }
        NGINX
      else
        spawn.call('', %(server { listen 127.0.0.1:#{front}; location #{path} { return 200 "ok"; } }))
      end
      wait_up(front, path)
      count(workload, pids, dir, "http://127.0.0.1:#{front}#{path}", "nginx-#{workload}")
    ensure
      Callgrind.stop(*pids.reverse)
      FileUtils.rm_rf(dir) if dir
    end
  end
end

if $PROGRAM_NAME == __FILE__
  env = ENV.to_h.merge(ARGV.map { |a| a.split('=', 2) }.to_h)
  GatewayBench::Instructions.new(env: env).run
end
