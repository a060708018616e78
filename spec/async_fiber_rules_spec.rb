# Where a handler may wait, and what happens where it may not. A handler's
# fiber survives Ruby that runs blocks through C methods (instance_exec,
# instance_eval, class_eval: mruby 3.1 loses a fiber resumed from C there,
# so the core resumes fibers from Ruby); an async call that would suspend the
# wrong thing (a Fiber the handler made, a block run by a C method) raises a
# FiberError that says why; a bare Fiber.yield fails the request at once
# instead of leaving it parked for ever. The worker lives on in every case.
require_relative 'spec_helper'

RSpec.describe 'Handler fibers: where a handler may wait' do
  before(:each) do
    @port = free_port
    prelude = <<~'RUBY'
      class Box
        def initialize(v) @v = v end
      end
    RUBY
    locations = <<~'RUBY'
      # Blocks run by C methods, in a handler's fiber.
      location "/exec_plain" do
        Box.new(7).instance_exec(2) { |x| "#{@v * x}" }
      end
      location "/exec_sleep" do
        Box.new(5).instance_exec { Async.sleep 0.01; "#{@v}" }
      end
      location "/eval_sleep" do
        Box.new(6).instance_eval { Async.sleep 0.01; "#{@v}" }
      end
      location "/exec_sub" do
        Object.new.instance_exec { Async::HTTP.sub_request("/fast").body }
      end
      # An immediate receiver (no singleton class) takes another path in mruby.
      location "/exec_immediate" do
        a = 1.instance_exec(2) { |x| (self + x).to_s }
        b = 40.instance_exec { Async.sleep 0.01; (self + 2).to_s }
        c = nil.instance_eval { "nil:#{inspect}" }
        "#{a} #{b} #{c}"
      end
      location "/class_eval" do
        k = Class.new
        k.class_eval { Async.sleep 0.01; def hi; "hi"; end }
        k.new.hi
      end

      # A Fiber of the handler's own: fine to use, not to wait in.
      location "/user_fiber" do
        f = Fiber.new { Fiber.yield 1; 2 }
        "#{f.resume},#{f.resume}"
      end
      location "/sleep_in_user_fiber" do
        begin
          Fiber.new { Async.sleep 0.01 }.resume
          "no error"
        rescue FiberError => e
          e.message
        end
      end
      location "/join_in_user_fiber" do
        t = Async::HTTP.start("/fast")
        begin
          Fiber.new { t.join }.resume
          "no error"
        rescue FiberError => e
          "#{e.message}|#{t.join.body}"
        end
      end
      location "/sleep_in_user_fiber_unrescued" do
        Fiber.new { Async.sleep 0.01 }.resume
        "not reached"
      end

      # A block given to a C method (Hash's default proc) cannot be left.
      location "/sleep_in_c_block" do
        begin
          Hash.new { |h, k| Async.sleep 0.01 }[:x]
          "no error"
        rescue FiberError => e
          e.message
        end
      end

      # The data clients make the same check (before they connect: the
      # address is never dialled).
      location "/redis_in_c_block" do
        r = Async::Redis.new("127.0.0.1:1")
        begin
          Hash.new { |h, k| r.get("k") }[:x]
        rescue FiberError => e
          e.message
        end
      end
      location "/tarantool_in_user_fiber" do
        t = Async::Tarantool.new("127.0.0.1:1")
        begin
          Fiber.new { t.ping }.resume
        rescue FiberError => e
          e.message
        end
      end

      # A request's own fiber, kept and resumed by another request.
      location "/keep" do
        $kept = Fiber.current
        Async.sleep 0.5
        "kept request done"
      end
      location "/kept" do $kept ? "yes" : "no" end
      location "/resume_kept" do
        begin
          $kept.resume(:hijack)
          "no error"
        rescue FiberError => e
          e.message
        end
      end
      location "/transfer_kept" do
        begin
          $kept.transfer(:hijack)
          "no error"
        rescue FiberError => e
          e.message
        end
      end
      location "/resume_self" do
        begin
          Fiber.current.resume
          "no error"
        rescue FiberError => e
          e.message
        end
      end

      # Parked on nothing.
      location "/bare_yield" do
        Fiber.yield
        "not reached"
      end
      location "/inner" do "inner" end
      location "/bf_yield", proxy_pass: "http://127.0.0.1:PORT/inner",
                            body_filter: ->(body, req) { Fiber.yield; "x" }
      location "/hf_yield", proxy_pass: "http://127.0.0.1:PORT/inner",
                            header_filter: ->(req) { Fiber.yield }
    RUBY
    gateway_with(locations.gsub('PORT', @port.to_s), prelude, port: @port, fast: true)
  end

  it 'instance_exec, instance_eval and class_eval blocks run in a handler, with and without async calls in them' do
    expect(http_get(@port, '/exec_plain').body).to eq('14')
    expect(http_get(@port, '/exec_sleep').body).to eq('5')
    expect(http_get(@port, '/eval_sleep').body).to eq('6')
    expect(http_get(@port, '/exec_sub').body).to eq('fast')
    expect(http_get(@port, '/class_eval').body).to eq('hi')
    expect(http_get(@port, '/exec_immediate').body).to eq('3 42 nil:nil')
  end

  it 'the same, 200 times over one keep-alive connection: every answer right, one worker throughout' do
    pid = worker_pid(@port)
    c = connect(@port)
    200.times do |i|
      path = %w[/exec_plain /exec_sleep /eval_sleep /exec_sub /exec_immediate][i % 5]
      c.request('GET', path)
      r = c.read_response(timeout: 5)
      expect([path, r.status, r.body]).to eq([path, 200, { '/exec_plain' => '14', '/exec_sleep' => '5',
                                                           '/eval_sleep' => '6', '/exec_sub' => 'fast',
                                                           '/exec_immediate' => '3 42 nil:nil' }[path]])
    end
    expect(worker_pid(@port)).to eq(pid)
  end

  it 'a Fiber the handler creates works as in Ruby' do
    expect(http_get(@port, '/user_fiber').body).to eq('1,2')
  end

  it 'an async call inside a Fiber the handler created raises FiberError saying why' do
    expect(http_get(@port, '/sleep_in_user_fiber').body)
      .to eq('Async.sleep cannot wait inside a Fiber the handler created: the wait would suspend that ' \
             'Fiber, not the request; call it in the handler itself')
    r = http_get(@port, '/join_in_user_fiber')
    expect(r.body).to start_with('Async::HTTP (join) cannot wait inside a Fiber the handler created')
    expect(r.body).to end_with('|fast') # the task is still there to join from the handler
  end

  it 'unrescued, it is a 500 with the error logged, and the worker serves on' do
    pid = worker_pid(@port)
    5.times { expect(http_get(@port, '/sleep_in_user_fiber_unrescued').status).to eq(500) }
    poll('the FiberError in the log', timeout: 3) { @gw.log.include?('cannot wait inside a Fiber the handler created') }
    expect(http_get(@port, '/fast').body).to eq('fast')
    expect(worker_pid(@port)).to eq(pid)
  end

  it 'an async call in a block run by a C method raises FiberError saying why' do
    expect(http_get(@port, '/sleep_in_c_block').body)
      .to start_with('Async.sleep cannot wait here: it was called inside a block passed to a method written in C')
  end

  it 'Async::Redis and Async::Tarantool raise the same FiberError, naming themselves' do
    expect(http_get(@port, '/redis_in_c_block').body)
      .to start_with('Async::Redis cannot wait here: it was called inside a block passed to a method written in C')
    expect(http_get(@port, '/tarantool_in_user_fiber').body)
      .to start_with('Async::Tarantool cannot wait inside a Fiber the handler created')
  end

  it "a request's fiber cannot be resumed or transferred to by a handler; the request it belongs to is untouched" do
    keeper = Thread.new { http_get(@port, '/keep', timeout: 10) }
    poll('the kept request to be parked', timeout: 5) { http_get(@port, '/kept').body == 'yes' }
    expect(http_get(@port, '/resume_kept').body)
      .to eq("a request's fiber cannot be resumed by a handler: only the gateway resumes it")
    expect(http_get(@port, '/transfer_kept').body)
      .to eq("a request's fiber cannot be transferred to by a handler: only the gateway resumes it")
    r = keeper.value
    expect([r.status, r.body]).to eq([200, 'kept request done'])
    expect(http_get(@port, '/resume_self').body)
      .to eq("a request's fiber cannot be resumed by a handler: only the gateway resumes it")
  end

  it 'a bare Fiber.yield in a handler is a 500 at once (logged), not a request parked for ever' do
    pid = worker_pid(@port)
    r, dt = timed { http_get(@port, '/bare_yield', timeout: 5) }
    expect(r.status).to eq(500)
    expect(dt).to be < slack(2)
    poll('the error in the log', timeout: 3) { @gw.log.include?('its fiber yielded without waiting for anything') }
    c = connect(@port)
    3.times do
      c.request('GET', '/bare_yield')
      expect(c.read_response(timeout: 5).status).to eq(500)
    end
    c.request('GET', '/fast')
    expect(c.read_response(timeout: 5).body).to eq('fast')
    expect(worker_pid(@port)).to eq(pid)
  end

  it 'so is a bare Fiber.yield in a body filter or a header filter (the upstream held meanwhile)' do
    pid = worker_pid(@port)
    %w[/bf_yield /hf_yield /bf_yield /hf_yield].each do |path|
      r, dt = timed { http_get(@port, path, timeout: 5) }
      expect([path, r.status]).to eq([path, 500])
      expect(dt).to be < slack(2)
    end
    poll('four errors in the log', timeout: 3) { @gw.log.scan('its fiber yielded without waiting for anything').size >= 4 }
    expect(http_get(@port, '/inner').body).to eq('inner')
    expect(worker_pid(@port)).to eq(pid)
  end
end
