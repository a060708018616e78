# frozen_string_literal: true

# `rake lesson`: blocking vs non-blocking, run in front of a student.
#
# Starts build/gateway -f examples/async.rb (on its ports 48080/58080, or on
# free ones when those are taken), prints the dashboard's URL, and runs three
# phases of bounded load (wrk -t1, each LESSON_PHASE_SECONDS, default 20):
#
#   1. non-blocking alone  /async_http_sub_request_with_proxy_pass, C = 20
#   2. blocking alone      /http_sub_request_with_proxy_pass,       C = 4
#   3. both together       the two loads at once
#
# announcing each on the page (GET /dashboard/note). It polls the stats each
# second, and halfway through each phase records the loop's timeline and
# traces the phase's endpoint(s) (both at once in phase 3). At the end it
# writes build/lesson/report.html: the dashboard page replaying the recorded
# data (self-contained: no server needed), with Little's law's prediction
# beside each measurement; and screenshots of the live page in phase 3
# (build/lesson/dashboard.png, build/lesson/lesson.png).
#
# Environment: LESSON_PHASE_SECONDS (20), LESSON_ASYNC_CLIENTS (20),
# LESSON_BLOCKING_CLIENTS (4), LESSON_SCREENSHOTS (1; 0: none),
# LESSON_OUT (build/lesson), GATEWAY_BIN
# (build/gateway). Everything on 127.0.0.1; every child bounded in time and
# stopped by its PID.
require 'fileutils'
require 'json'
require 'net/http'
require 'socket'
require 'timeout'
require 'uri'
require_relative '../bench/common'
require_relative 'chromium'

module Gateway
  class Lesson
    ASYNC = '/async_http_sub_request_with_proxy_pass'
    BLOCKING = '/http_sub_request_with_proxy_pass'
    SERVICE_MS = 10.0 # the backend's Nginx::Async.sleep 10

    def initialize(env = ENV)
      @root = File.expand_path('../..', __dir__)
      @seconds = Float(env.fetch('LESSON_PHASE_SECONDS', '20'))
      raise 'LESSON_PHASE_SECONDS must be between 2 and 600' unless @seconds.between?(2, 600)

      @c_async = Integer(env.fetch('LESSON_ASYNC_CLIENTS', '20'))
      @c_block = Integer(env.fetch('LESSON_BLOCKING_CLIENTS', '4'))
      @out = File.expand_path(env.fetch('LESSON_OUT', File.join(@root, 'build/lesson')))
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', File.join(@root, 'build/gateway')))
      @screenshots = env.fetch('LESSON_SCREENSHOTS', '1') != '0'
      @samples = []
      @phases = []
    end

    def run
      FileUtils.mkdir_p(@out)
      start_gateway
      url = "http://127.0.0.1:#{@front}/dashboard"
      puts "lesson: the dashboard is at #{url} (open it now: the phases are announced on it)"
      sampler = Thread.new { sample_loop }
      watch if @screenshots # a page open from the start: its charts show every phase
      sleep 2 # a first sample or two, and every worker recording its timeline
      baseline = [trace(ASYNC), trace(BLOCKING)] # one of each, alone, on an idle gateway
      phase(1, 'non-blocking alone', [[ASYNC, @c_async]])
      phase(2, 'blocking alone', [[BLOCKING, @c_block]])
      phase(3, 'both together', [[ASYNC, @c_async], [BLOCKING, @c_block]], screenshots: @screenshots)
      note('done: the report is in build/lesson/report.html')
      sleep 1.5
      @stop = true
      sampler.join
      write_report(baseline)
      puts "lesson: wrote #{File.join(@out, 'report.html')}"
    ensure
      @browser&.close
      stop_gateway
    end

    private

    def port_free?(port)
      TCPServer.new('127.0.0.1', port).close
      true
    rescue SystemCallError
      false
    end

    # examples/async.rb as it is, unless its ports are taken: then on free ones.
    def start_gateway
      src = File.read(File.join(@root, 'examples/async.rb'))
      @back, @front = 48_080, 58_080
      unless port_free?(@back) && port_free?(@front)
        @back, @front = GatewayBench::Util.free_port, GatewayBench::Util.free_port
        puts "lesson: ports 48080/58080 are taken; using #{@back}/#{@front}"
      end
      config = File.join(@out, 'async.rb')
      File.write(config, src.gsub('48080', @back.to_s).gsub('58080', @front.to_s))
      @log = File.join(@out, 'gateway.log')
      @pid = Process.spawn(@bin, '-f', config, out: @log, err: @log)
      Timeout.timeout(15) do
        sleep 0.1 until (get('/dashboard/stats') rescue nil)
      end
    end

    def stop_gateway
      return unless @pid

      Process.kill('TERM', @pid)
      Timeout.timeout(10) { Process.wait(@pid) }
    rescue Timeout::Error
      Process.kill('KILL', @pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      @pid = nil
    end

    def get(path, timeout: 30)
      Net::HTTP.start('127.0.0.1', @front, open_timeout: 5, read_timeout: timeout) do |h|
        r = h.get(path)
        raise "GET #{path}: #{r.code}" unless r.code == '200'

        r.body
      end
    end

    def note(text)
      puts "lesson: #{text}"
      get("/dashboard/note?text=#{URI.encode_www_form_component(text)}")
    end

    def sample_loop
      until @stop
        t = (Time.now.to_f * 1000).round
        begin
          @samples << { t: t, stats: JSON.parse(get('/dashboard/stats', timeout: 5)) }
        rescue StandardError => e
          warn "lesson: a stats poll failed: #{e.message}"
        end
        sleep [0, 1 - (Time.now.to_f * 1000 - t) / 1000].max
      end
    end

    def trace(path)
      JSON.parse(get("/dashboard/trace?path=#{URI.encode_www_form_component(path)}"))
    end

    # wrk on one endpoint for the phase; its requests/s, mean and p50 (ms).
    def wrk(path, clients)
      cmd = ['wrk', '-t1', "-c#{clients}", "-d#{@seconds.round}s", '--timeout', '10s', '--latency',
             "http://127.0.0.1:#{@front}#{path}"]
      out = Timeout.timeout(@seconds + 30) { IO.popen(cmd, err: %i[child out], &:read) }
      r = GatewayBench::Runner.parse_wrk(out)
      m = out.match(/^\s*Latency\s+([\d.]+)(us|ms|s)\b/) or raise "wrk: no mean latency:\n#{out}"
      r.merge(path: path, clients: clients, mean_ms: m[1].to_f * { 'us' => 0.001, 'ms' => 1.0, 's' => 1000.0 }[m[2]])
    end

    def phase(n, title, loads, screenshots: false)
      note("phase #{n} of 3: #{title} (#{loads.map { |p, c| "#{c} clients on #{p == ASYNC ? 'the non-blocking' : 'the blocking'} endpoint" }.join(', ')})")
      started = (Time.now.to_f * 1000).round
      runs = loads.map { |path, c| Thread.new { wrk(path, c) } }
      sleep @seconds / 2
      paths = loads.map(&:first)
      traces = paths.map { |p| Thread.new { trace(p) } }.map(&:value) # at once: in phase 3 one stalls the other
      window = [(@seconds * 500).to_i, 2000].min # this phase's, not the one before
      timeline = JSON.parse(get("/dashboard/timeline?ms=#{window}&cols=500"))
      shoot if screenshots
      results = runs.map(&:value)
      @phases << { n: n, title: title, started: started, ended: (Time.now.to_f * 1000).round, results: results,
                   traces: traces, timeline: timeline }
    end

    def watch
      @browser = Chromium.new(File.join(@out, 'chromium'))
      @browser.goto("http://127.0.0.1:#{@front}/dashboard", width: 1280, height: 900)
    rescue StandardError => e
      warn "lesson: no browser, no screenshots (#{e.message})"
      @browser = nil
    end

    # The live page in phase 3: the whole dashboard (open since the start),
    # and the lesson (its waterfalls traced at once, the timeline, the stall
    # named).
    def shoot
      return unless @browser

      base = "http://127.0.0.1:#{@front}/dashboard"
      @browser.screenshot(File.join(@out, 'dashboard.png'))
      @browser.close
      @browser = nil
      Chromium.open(File.join(@out, 'chromium-lesson')) do |c|
        c.goto("#{base}?a=#{ASYNC}&b=#{BLOCKING}#lesson", width: 1280, height: 700)
        sleep 2.5
        c.screenshot(File.join(@out, 'lesson.png'))
      end
    rescue StandardError => e
      warn "lesson: no screenshots (#{e.message})"
    end

    # Little's law, L = X W: with C clients always waiting on an answer,
    # L = C, so X = C / W. The model: a non-blocking request takes S = 10 ms
    # however many run at once (W = S, X = C / S); a blocking one holds the
    # whole worker for S, so the worker serves 1 / S = 100 req/s whatever C
    # is, and each waits W = C S. Together: each turn of the loop runs the
    # C_b blocking calls that are ready, C_b S; a non-blocking request needs
    # about three turns (the one it arrived in, its request, its
    # sub-request's answer), so W ~ 3 C_b S.
    def predict(path, clients, phase_n, blocking_clients)
      if path == ASYNC && phase_n != 3
        { rps: clients / SERVICE_MS * 1000, mean_ms: SERVICE_MS, why: "W = S = #{SERVICE_MS.round} ms; X = C / W" }
      elsif path == ASYNC
        w = 3 * blocking_clients * SERVICE_MS
        { rps: clients / w * 1000, mean_ms: w,
          why: 'stalled: each turn of the loop runs the C_b ready blocking calls (C_b × S); ' \
               'it needs ~3 turns: W ≈ 3 × C_b × S' }
      else
        { rps: 1000 / SERVICE_MS, mean_ms: clients * SERVICE_MS, why: "the worker serves one at a time: X = 1 / S, W = C × S" }
      end
    end

    def fmt(v, digits = 1)
      v.nil? ? '–' : format("%.#{digits}f", v)
    end

    def phase_html(p)
      rows = p[:results].map do |r|
        pr = predict(r[:path], r[:clients], p[:n], p[:results].find { |x| x[:path] == BLOCKING }&.dig(:clients).to_i)
        little = r[:mean_ms].positive? ? r[:clients] / r[:mean_ms] * 1000 : nil
        "<tr><td>#{r[:path] == ASYNC ? 'non-blocking' : 'blocking'}</td><td>#{r[:clients]}</td>" \
          "<td>#{fmt(r[:rps])}</td><td>#{fmt(pr[:rps])}</td><td>#{fmt(little)}</td>" \
          "<td>#{fmt(r[:mean_ms], 2)}</td><td>#{fmt(r[:p50_ms], 2)}</td><td>#{fmt(pr[:mean_ms], 2)}</td>" \
          "<td>#{r[:errors]}</td><td>#{pr[:why]}</td></tr>"
      end
      <<~HTML
        <table class="little" data-phase="#{p[:n]}">
        <tr><th>endpoint</th><th>clients C</th><th>measured X (req/s)</th><th>model X</th><th>Little: C / W (req/s)</th>
        <th>measured W mean (ms)</th><th>p50 (ms)</th><th>model W (ms)</th><th>errors</th><th>why</th></tr>
        #{rows.join("\n")}
        </table>
      HTML
    end

    def write_report(baseline)
      phases = @phases.map do |p|
        { id: p[:n], title: "Phase #{p[:n]}: #{p[:title]} (#{@seconds.round} s)", html: phase_html(p),
          timeline: p[:timeline], traces: p[:traces] }
      end
      phases.unshift({ id: 0, title: 'Before the load: one request of each kind, alone',
                       html: '<p>Traced one after the other on an idle gateway: both take about S = 10 ms. ' \
                             'The blocking one holds the loop (red) all that time; the non-blocking one waits ' \
                             '(hollow) while its fiber is parked.</p>',
                       timeline: nil, traces: baseline })
      replay = { title: "rake lesson, #{Time.now.utc.strftime('%Y-%m-%d %H:%M UTC')}: #{@seconds.round} s per phase, " \
                        "S = #{SERVICE_MS.round} ms",
                 samples: @samples, phases: phases }
      page = File.read(File.join(@root, 'gateway/handler/status/dashboard.html'))
      data = JSON.generate(replay).gsub('</', '<\/')
      style = '<style>table.little { border-collapse: collapse; background: #fff; margin: 6px 0; } ' \
              'table.little td, table.little th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; } ' \
              'table.little td:first-child, table.little td:last-child { text-align: left; }</style>'
      page = page.sub('</head>', "#{style}\n</head>")
                 .sub('<script>', "<script>window.GATEWAY_REPLAY = #{data};</script>\n<script>")
      File.write(File.join(@out, 'report.html'), page)
    end
  end
end

Gateway::Lesson.new.run if $PROGRAM_NAME == __FILE__
