# frozen_string_literal: true

# `rake bench:tarantool`: the tarantool study's matrix, side by side in one
# run. Each front server pinned to SERVER_CPU (1); wrk, tarantool and the
# HTTP backend to LOAD_CPU (0):
#
#   gateway iproto      location "/tnt": Async::Tarantool call("process_request"),
#                       its [status, headers, body] as the response (pool 16)
#   gateway proxy_pass  location "/http": proxy_pass to the HTTP backend (keep-alive)
#   nginx proxy_pass    proxy_pass to the same backend (upstream keepalive 64)
#
# The HTTP backend is nginx answering `return 200 "body"` with `x-a: 1`
# (what process_request answers); Debian's tarantool has no HTTP server.
# Rows: wrk -t1 -c1, -t2 -c2, -t4 -c4, -t4 -c8, -t8 -c8, -t8 -c16; per cell a
# 1 s warm-up then DURATION (3) s measured; req/s, the front server's CPU µs
# per request and the backend's (tarantool, or the HTTP backend: they share
# the load core with wrk, so a cheaper backend leaves wrk more). ROUNDS (3)
# rounds, the fronts taking turns in each row; medians reported. BASE=binary
# adds its two gateway columns (another build, same run) for before/after.
# Writes build/bench/tarantool.md.
require_relative 'common'
require 'tmpdir'

module GatewayBench
  class Tarantool
    include Util

    ROWS = [%w[-t1 -c1], %w[-t2 -c2], %w[-t4 -c4], %w[-t4 -c8], %w[-t8 -c8], %w[-t8 -c16]].freeze

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @duration = env_int(env, 'DURATION', 3)
      @rounds = env_int(env, 'ROUNDS', 3)
      @base = env['BASE'] && File.expand_path(env['BASE'], root)
      @run = Runner.new(root: root, env: env, tag: 'tarantool')
    end

    def log(msg)
      @run.log(msg)
    end

    def start_tarantool
      @tnt_port = free_port
      @tnt_dir = Dir.mktmpdir('gateway-bench-tarantool-')
      init = File.join(@tnt_dir, 'init.lua')
      File.write(init, <<~LUA)
        box.cfg{listen = '#{HOST}:#{@tnt_port}', work_dir = '#{@tnt_dir}', memtx_dir = '#{@tnt_dir}',
                wal_mode = 'none', log = '#{@tnt_dir}/tarantool.log'}
        box.schema.user.grant('guest', 'execute', 'universe')
        function process_request(req) return {200, {["x-a"] = "1"}, "body"} end
      LUA
      @tnt_pid = Process.spawn('taskset', '-c', @run.load_cpu.to_s, 'tarantool', init, chdir: @tnt_dir,
                               in: File::NULL, out: File.join(@tnt_dir, 'stdout.log'), err: %i[child out])
      deadline = monotonic + 10
      sleep 0.05 until accepts?(@tnt_port) || monotonic > deadline
      sleep 0.3 # the grant after box.cfg
    end

    def stop_tarantool
      return unless @tnt_pid

      signal(:TERM, @tnt_pid)
      wait_exit(@tnt_pid, 5)
      FileUtils.rm_rf(@tnt_dir)
    end

    # The backend: nginx on the load CPU (Runner#start pins to the server CPU, so spawned here).
    def start_backend
      @be_port = free_port
      @be_dir = Dir.mktmpdir('gateway-bench-backend-')
      conf = File.join(@be_dir, 'nginx.conf')
      File.write(conf, <<~NGINX)
        daemon off; master_process on; worker_processes 1; user root;
        pid #{@be_dir}/nginx.pid; error_log #{@be_dir}/error.log warn;
        events { worker_connections 4096; }
        http { access_log off; client_body_temp_path #{@be_dir};
          server { listen #{HOST}:#{@be_port}; keepalive_requests 100000;
            location / { add_header x-a 1; return 200 "body"; } } }
      NGINX
      bin = `sh -c 'command -v nginx'`.strip
      @be_pid = Process.spawn('taskset', '-c', @run.load_cpu.to_s, bin, '-p', @be_dir, '-e', "#{@be_dir}/error.log",
                              '-c', conf, in: File::NULL, out: File::NULL, err: File::NULL, pgroup: true)
      deadline = monotonic + 10
      sleep 0.05 until accepts?(@be_port) || monotonic > deadline
    end

    def stop_backend
      return unless @be_pid

      signal(:TERM, @be_pid)
      wait_exit(@be_pid, 5)
      FileUtils.rm_rf(@be_dir)
    end

    def gateway_conf(port)
      <<~RUBY
        tarantool :tnt, servers: ["#{HOST}:#{@tnt_port}"], pool: 16, timeout: 2.0
        upstream :backend, servers: ["#{HOST}:#{@be_port}"], keepalive: 64
        server listen: "#{HOST}:#{port}", workers: 1 do
          location "/tnt" do
            status, headers, body = Async::Tarantool[:tnt].call("process_request", [{}]).first
            [status, headers, [body]]
          end
          location "/http", proxy_pass: "http://backend"
        end
      RUBY
    end

    def nginx_conf(_port)
      <<~NGINX
        upstream backend { server #{HOST}:#{@be_port}; keepalive 64; }
        server {
            listen #{HOST}:#{@nginx_port};
            location /http { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
        }
      NGINX
    end

    # pids: the front's; backend: the upstream's (tarantool, or the HTTP backend).
    def cell(url, args, pids, backend)
      @run.run_wrk(args, url, 1)
      t0 = pids.sum { |p| ticks(p) || 0 }
      b0 = backend.sum { |p| ticks(p) || 0 }
      r = @run.run_wrk(args, url, @duration)
      t1 = pids.sum { |p| ticks(p) || 0 }
      b1 = backend.sum { |p| ticks(p) || 0 }
      w = Runner.parse_wrk(r[:out])
      raise Error, "wrk #{args.join(' ')} #{url} failed:\n#{r[:out]}" unless w[:requests]&.positive?

      per = ->(t) { t.to_f / clk_tck * 1e6 / w[:requests] }
      { rps: w[:rps], us: per.(t1 - t0), backend_us: per.(b1 - b0), errors: w[:errors] }
    end

    def run
      require 'net/http'
      Util.ensure_pkgs(%w[wrk nginx tarantool], log: method(:log))
      results = {}
      @run.with_cpu_lock do
        start_tarantool
        start_backend
        gport = free_port
        gw = @run.start_gateway('gateway', @bin, gateway_conf(gport), gport)
        @nginx_port = free_port
        ngx = @run.start_nginx('nginx', @nginx_port, nginx_conf(@nginx_port))
        fronts = [['gateway iproto', "http://#{HOST}:#{gport}/tnt", gw, :tnt],
                  ['gateway proxy_pass', "http://#{HOST}:#{gport}/http", gw, :http],
                  ['nginx proxy_pass', "http://#{HOST}:#{@nginx_port}/http", ngx, :http]]
        if @base
          bport = free_port
          base = @run.start_gateway('base', @base, gateway_conf(bport), bport)
          fronts += [['base iproto', "http://#{HOST}:#{bport}/tnt", base, :tnt],
                     ['base proxy_pass', "http://#{HOST}:#{bport}/http", base, :http]]
        end
        fronts.each do |name, url, _|
          body = Net::HTTP.get(URI(url))
          raise Error, "#{name}: #{url} answered #{body.inspect}" unless body == 'body'
        end
        backends = { tnt: [@tnt_pid], http: [@be_pid] + descendants(@be_pid) }
        ROWS.each do |args|
          @rounds.times do |round|
            fronts.each do |name, url, srv, kind|
              res = cell(url, args, [srv.pid] + descendants(srv.pid), backends[kind])
              log format('%-8s round %d %-20s %9.0f req/s %6.1f µs/req, backend %5.1f µs/req, errors %d', args.join(' '),
                         round + 1, name, res[:rps], res[:us], res[:backend_us], res[:errors])
              (results[[args.join(' '), name]] ||= []) << res
            end
          end
        end
        @names = fronts.map(&:first)
      ensure
        @run.stop_all
        stop_backend
        stop_tarantool
      end
      report(results)
    end

    def report(results)
      names = @names
      med = results.transform_values { |runs| %i[rps us backend_us errors].to_h { |k| [k, median(runs.map { |r| r[k] })] } }
      md = +"# bench:tarantool (wrk, #{@duration} s per cell, median of #{@rounds} rounds; " \
            "req/s (front CPU µs/req, backend CPU µs/req))\n\n"
      ratios = ['iproto / gw proxy_pass', 'iproto / nginx']
      ratios << 'base iproto / base proxy_pass' if @base
      md << "| wrk | #{names.join(' | ')} | #{ratios.join(' | ')} |\n|---|#{'--:|' * (names.size + ratios.size)}\n"
      ROWS.each do |args|
        row = args.join(' ')
        c = names.to_h { |n| [n, med[[row, n]]] }
        r = [c['gateway iproto'][:rps] / c['gateway proxy_pass'][:rps], c['gateway iproto'][:rps] / c['nginx proxy_pass'][:rps]]
        r << c['base iproto'][:rps] / c['base proxy_pass'][:rps] if @base
        md << format("| %s | %s | %s |\n", row,
                     names.map { |n| format('%.0f (%.1f, %.1f)', c[n][:rps], c[n][:us], c[n][:backend_us]) }.join(' | '),
                     r.map { |x| format('%.2f×', x) }.join(' | '))
      end
      @run.write_report('tarantool', md, results.map { |(row, name), runs| { row: row, front: name, runs: runs } })
    end
  end
end

if $PROGRAM_NAME == __FILE__
  GatewayBench::Tarantool.new(root: File.expand_path('../..', __dir__)).run
end
