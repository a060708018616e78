# A data server (Redis, Tarantool) restarted under traffic: client threads
# keep requesting one path through the gateway while the server is stopped
# and started again. Every request must be answered within its bound (no
# hang); what the spec then checks is the answers of each phase.
require_relative 'spec_helper'

module RestartTraffic
  Answer = Struct.new(:phase, :status, :body, :seconds)

  # Phases: :before (asked and answered before the stop), :after (asked
  # after the first success that followed the restart, for `after`
  # seconds), :down (the rest: in flight at the stop, asked while stopped
  # or reconnecting).
  # server: #stop and #start. Returns the Answers.
  def traffic_through_restart(port, path, server, threads: 4, down_for: 0.6, after: 0.6, reconnect_within: 5)
    answers = Queue.new
    phase = :before
    done = false
    workers = threads.times.map do |i|
      Thread.new do
        n = 0
        until done
          n += 1
          sep = path.include?('?') ? '&' : '?'
          asked = phase
          t0 = GatewaySpec.now
          r = http_get(port, "#{path}#{sep}v=#{i}-#{n}", timeout: 5)
          answered = phase
          label = asked == :before && answered == :before ? :before : asked == :after ? :after : :down
          answers << Answer.new(label, r.status, r.body, GatewaySpec.now - t0)
        end
      end
    end
    sleep 0.4
    phase = :down
    server.stop
    sleep down_for
    server.start
    GatewaySpec.poll('a request to succeed after the restart', timeout: reconnect_within) do
      http_get(port, "#{path}#{path.include?('?') ? '&' : '?'}v=probe", timeout: 5).body.start_with?('ok ')
    end
    phase = :after
    sleep after
    done = true
    workers.each { |t| t.join(10) or raise 'a client thread hung' }
    Array.new(answers.size) { answers.pop }
  end

  # What every restart spec expects of the answers: each a 200 within
  # max_seconds (none hangs), the ones before the stop and after the return
  # all "ok ...", the ones in between "ok ..." or "down: " + a clear error
  # naming the server (server_re), and some of those errors.
  def expect_restart_answers(answers, server_re, max_seconds: 2.5)
    by = answers.group_by(&:phase)
    expect(by.keys).to include(:before, :down, :after)
    expect(answers.map(&:status).uniq).to eq([200])
    expect(answers.map(&:seconds).max).to be < max_seconds
    ok = /\Aok v=\d+-\d+\z/
    expect(by[:before].map(&:body)).to all(match(ok))
    expect(by[:down].map(&:body)).to all(match(/\A(ok v=\d+-\d+|down: Gateway::(UpstreamError|TimeoutError): #{server_re}.+)\z/))
    expect(by[:down].count { |a| a.body.start_with?('down: ') }).to be > 0
    expect(by[:after].map(&:body)).to all(match(ok))
  end

  # The whole spec: a gateway (the spec's own start(body, prelude:)) whose
  # /e answers "ok " + the value of the Ruby expression `call` (req.query
  # in scope) or "down: " + the error, through server's restart.
  def check_restart_mid_traffic(server, prelude, call, server_re)
    start(<<~RUBY, prelude: prelude)
      location "/e" do |req|
        begin
          "ok " + (#{call}).to_s
        rescue Gateway::UpstreamError, Gateway::TimeoutError => e
          "down: \#{e.class}: \#{e.message}"
        end
      end
    RUBY
    expect_restart_answers(traffic_through_restart(@port, '/e', server), server_re)
  end
end
