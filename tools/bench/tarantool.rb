# frozen_string_literal: true

# `rake bench:tarantool`: the tarantool study's question — a front talking
# to Tarantool over HTTP or over iproto, which serves more at which
# concurrency? — side by side in one run, all against ONE Tarantool
# (examples/tarantool.lua: process_request(req) served over iproto and over
# HTTP/1.1 by its Lua responder on Tarantool's socket module):
#
#   tarantool HTTP      wrk straight to Tarantool's HTTP responder
#   gateway proxy_pass  location "/http": proxy_pass to it (upstream keepalive: 16)
#   nginx proxy_pass    proxy_pass to it (upstream keepalive 64, HTTP/1.1)
#   gateway iproto      location "/tnt": Async::Tarantool[:tnt] (pool: 8) call("process_request",
#                       [{method, path, query, headers}]), its [status, headers,
#                       body] as the response (what the study's nginx tnt module
#                       does with the request)
#   gateway iproto+JSON location "/tnt/json": the same call, the reply turned
#                       into JSON in Ruby (the study's Lua + cjson column)
#
# The gateway runs examples/tarantool.rb itself (this run's ports, one
# worker). Placement: the front (gateway, one worker; nginx, one worker) AND
# Tarantool pinned to
# SERVER_CPU (1), so a column's rate is what one core does for the front and
# the backend together; wrk alone on LOAD_CPU (0). Rows: wrk -t1 with -c1,
# -c2, -c4, -c8, -c16 (the study's connection counts; one wrk thread, since
# wrk has one core and a second thread would only share it). Per cell a 1 s
# warm-up, then DURATION (3) s measured: req/s counting 2xx responses only,
# errors | non-2xx | timeouts (Load's counts: a cell with any is marked ⚠,
# a row shows their sums),
# front and Tarantool CPU µs per request (/proc/PID/stat utime+stime before
# and after), wrk's and the server core's busy share (a row where wrk used
# >= 90% of its core in every column is load-bound: there compare CPU per
# request, not req/s). ROUNDS (2) rounds, the columns taking turns in each
# row; medians reported. BASE=binary adds its two iproto columns (another
# build, same run) for before/after. About 4 min with the defaults.
# Writes build/bench/tarantool.{md,json}.
require_relative 'common'
require 'tmpdir'

module GatewayBench
  class Tarantool
    include Util

    ROWS = [%w[-t1 -c1], %w[-t1 -c2], %w[-t1 -c4], %w[-t1 -c8], %w[-t1 -c16]].freeze
    LOAD_BOUND = 0.9

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @duration = env_int(env, 'DURATION', 3)
      @rounds = env_int(env, 'ROUNDS', 2)
      @base = env['BASE'] && File.expand_path(env['BASE'], root)
      @run = Runner.new(root: root, env: env, tag: 'tarantool')
    end

    def log(msg)
      @run.log(msg)
    end

    # examples/tarantool.lua on the server CPU: iproto on @tnt_port, HTTP on @http_port.
    def start_tarantool
      @tnt_port = free_port
      @http_port = free_port
      dir = @run.scratch('tarantool')
      bin = `sh -c 'command -v tarantool'`.strip
      script = File.join(@root, 'examples', 'tarantool.lua')
      @tnt = @run.start('tarantool', [bin, script, @tnt_port.to_s, @http_port.to_s, dir], port: @http_port, dir: dir,
                                                                                            binary: bin)
    end

    # examples/tarantool.rb itself, on this run's ports with one worker.
    def gateway_conf(port)
      subs = { '"127.0.0.1:3301"' => %("#{HOST}:#{@tnt_port}"), '"127.0.0.1:8081"' => %("#{HOST}:#{@http_port}"),
               'listen: 8080, workers: 2' => %(listen: "#{HOST}:#{port}", workers: 1) }
      subs.reduce(File.read(File.join(@root, 'examples', 'tarantool.rb'))) do |text, (from, to)|
        raise Error, "examples/tarantool.rb no longer has #{from}: update tools/bench/tarantool.rb" unless text.include?(from)

        text.gsub(from, to)
      end
    end

    def nginx_conf
      <<~NGINX
        upstream tarantool_http { server #{HOST}:#{@http_port}; keepalive 64; }
        server {
            listen #{HOST}:#{@nginx_port};
            location /http { proxy_pass http://tarantool_http; proxy_http_version 1.1; proxy_set_header Connection ""; }
        }
      NGINX
    end

    # front: the front's pids ([] for tarantool answering HTTP itself).
    def cell(url, args, front)
      @run.run_wrk(args, url, 1)
      f0 = front.sum { |p| ticks(p) || 0 }
      t0 = ticks(@tnt.pid)
      r = @run.run_wrk(args, url, @duration)
      f1 = front.sum { |p| ticks(p) || 0 }
      t1 = ticks(@tnt.pid)
      w = Runner.parse_wrk(r[:out]) # requests: the 2xx ones (Load)
      raise Error, "wrk #{args.join(' ')} #{url} failed:\n#{r[:out]}" unless w[:requests]&.positive? && w[:seconds]

      ok = w[:requests]
      per = ->(t) { ok.positive? ? t.to_f / clk_tck * 1e6 / ok : nil }
      { rps: ok / w[:seconds], front_us: per.(f1 - f0), tnt_us: per.(t1 - t0),
        **w.slice(:errors, :non2xx, :timeouts, :failures),
        wrk_busy: r[:load_cpu_s] / w[:seconds], server_busy: (f1 - f0 + t1 - t0).to_f / clk_tck / w[:seconds] }
    end

    # Each column answers what process_request answers (or its JSON) before
    # anything is measured.
    def check(name, url, json)
      res = Net::HTTP.get_response(URI(url))
      good = if json
               res.code == '200' && res.body == %({"status":200,"headers":{"x-a":"1"},"body":"body","length":4}\n)
             else
               res.code == '200' && res['x-a'] == '1' && res.body == 'body'
             end
      raise Error, "#{name}: #{url} answered #{res.code} #{res.to_hash.inspect} #{res.body.inspect}" unless good
    end

    def run
      require 'net/http'
      Util.ensure_pkgs(%w[wrk nginx tarantool], log: method(:log))
      results = {}
      @started = Time.now.utc
      @uptime = [`uptime`.strip]
      @run.with_cpu_lock do
        start_tarantool
        gport = free_port
        gw = @run.start_gateway('gateway', @bin, gateway_conf(gport), gport)
        @nginx_port = free_port
        ngx = @run.start_nginx('nginx', @nginx_port, nginx_conf)
        g = "http://#{HOST}:#{gport}"
        cols = [['tarantool HTTP', "http://#{HOST}:#{@http_port}/", nil, false],
                ['gateway proxy_pass', "#{g}/http", gw, false],
                ['nginx proxy_pass', "http://#{HOST}:#{@nginx_port}/http", ngx, false],
                ['gateway iproto', "#{g}/tnt", gw, false],
                ['gateway iproto+JSON', "#{g}/tnt/json", gw, true]]
        if @base
          bport = free_port
          base = @run.start_gateway('base', @base, gateway_conf(bport), bport)
          b = "http://#{HOST}:#{bport}"
          cols += [['base iproto', "#{b}/tnt", base, false], ['base iproto+JSON', "#{b}/tnt/json", base, true]]
        end
        cols.each { |name, url, _, json| check(name, url, json) }
        ROWS.each do |args|
          @rounds.times do |round|
            cols.each do |name, url, srv, _|
              res = cell(url, args, srv ? [srv.pid] + descendants(srv.pid) : [])
              log format('%-8s round %d %-20s %7.0f req/s  front %5.1f + tarantool %5.1f µs/req  wrk %3.0f%%  server %3.0f%%  errors %d',
                         args.join(' '), round + 1, name, res[:rps], res[:front_us] || 0, res[:tnt_us] || 0,
                         res[:wrk_busy] * 100, res[:server_busy] * 100, res[:errors])
              (results[[args.join(' '), name]] ||= []) << res
            end
          end
        end
        @names = cols.map(&:first)
      ensure
        @run.stop_all
      end
      @uptime << `uptime`.strip
      report(results)
    end

    # " ⚠ N (errors e, non-2xx x, timeouts t)" for a cell with failures in any round, else "".
    def self.error_mark(c)
      return '' unless c[:failures].positive?

      format(' ⚠ %d (errors %d, non-2xx %d, timeouts %d)', c[:failures], c[:errors], c[:non2xx], c[:timeouts])
    end

    def self.ratio(a, b)
      a && b && b.positive? ? format('%.2f×', a / b) : '—'
    end

    # A Markdown table: a row per wrk row (marked ⚠ when a cell failed), the
    # columns' cells and then `extra` ones, which the block returns for the
    # row's medians c.
    def table(md, med, extra)
      md << "| wrk | #{(@names + extra).join(' | ')} |\n|---|#{'--:|' * (@names.size + extra.size)}\n"
      ROWS.each do |args|
        row = args.join(' ')
        c = @names.to_h { |n| [n, med[[row, n]]] }
        md << "| #{([Load.label(row, Load.sum(c.values))] + yield(c)).join(' | ')} |\n"
      end
    end

    def report(results)
      keys = %i[rps front_us tnt_us wrk_busy server_busy]
      med = results.transform_values do |runs|
        keys.to_h { |k| [k, median(runs.map { |r| r[k] })] }
            .merge(Load.sum(runs))
      end
      total = ->(c) { c[:front_us].to_f + c[:tnt_us].to_f }
      md = +"# bench:tarantool\n\n"
      md << "#{@started.strftime('%Y-%m-%d %H:%M')} UTC, `#{ENV.fetch('BENCH_CMD', 'rake bench:tarantool')}` " \
            "(DURATION=#{@duration} s per cell after a 1 s warm-up, median of #{@rounds} rounds); " \
            "front and Tarantool on CPU #{@run.server_cpu}, wrk on CPU #{@run.load_cpu}.\n" \
            "uptime before: `#{@uptime[0]}`; after: `#{@uptime[1]}`\n\n"
      md << "## req/s (2xx only; ⚠ = failures in the cell, summed over its rounds; the row's #{Load::FAIL_HEAD} " \
            "summed over its cells)\n\n"
      table(md, med, ['iproto / gw proxy_pass', 'iproto / nginx proxy_pass', 'JSON / iproto', 'wrk core busy', 'errors',
                      'non-2xx', 'timeouts']) do |c|
        busy = @names.map { |n| c[n][:wrk_busy] }
        @names.map { |n| format('%.0f%s', c[n][:rps], self.class.error_mark(c[n])) } +
          [self.class.ratio(c['gateway iproto'][:rps], c['gateway proxy_pass'][:rps]),
           self.class.ratio(c['gateway iproto'][:rps], c['nginx proxy_pass'][:rps]),
           self.class.ratio(c['gateway iproto+JSON'][:rps], c['gateway iproto'][:rps]),
           busy.all? { |x| x >= LOAD_BOUND } ? 'saturated in every column' : format('%.0f–%.0f%%, not saturated', busy.min * 100, busy.max * 100),
           Load.cells(Load.sum(c.values))]
      end
      md << "\n## CPU µs per request: front + Tarantool = total (server core busy)\n\n"
      table(md, med, ['iproto / gw proxy_pass total', 'JSON / iproto total']) do |c|
        @names.map do |n|
          format('%.1f + %.1f = %.1f (%.0f%%)', c[n][:front_us].to_f, c[n][:tnt_us].to_f, total.(c[n]), c[n][:server_busy] * 100)
        end + [self.class.ratio(total.(c['gateway iproto']), total.(c['gateway proxy_pass'])),
               self.class.ratio(total.(c['gateway iproto+JSON']), total.(c['gateway iproto']))]
      end
      @run.write_report('tarantool', md, results.map { |(row, name), runs| { row: row, column: name, runs: runs } })
    end
  end
end

if $PROGRAM_NAME == __FILE__
  GatewayBench::Tarantool.new(root: File.expand_path('../..', __dir__)).run
end
