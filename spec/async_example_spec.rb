# examples/async.rb — the ngx_mruby seed benchmark in one file — booted as
# shipped (its fixed ports 48080/58080 replaced textually by free ones) and
# exercised: every endpoint, concurrency on keep-alive connections, and the
# non-blocking vs blocking contrast the example exists to show.
require_relative 'spec_helper'

RSpec.describe 'examples/async.rb' do
  before(:each) do
    @backend = free_port
    @front = free_port
    text = File.read(File.join(GatewaySpec::ROOT, 'examples', 'async.rb'))
    expect(text).to match(/(?<!\d)48080(?!\d)/)
    expect(text).to match(/(?<!\d)58080(?!\d)/)
    text = text.gsub(/(?<!\d)48080(?!\d)/, @backend.to_s).gsub(/(?<!\d)58080(?!\d)/, @front.to_s)
    @gw = start_gateway(text, ports: [@backend, @front], name: 'async.rb')
  end

  # Sends `path` once on each connection at the same time, then reads every
  # response; returns them in connection order.
  def round(conns, path)
    conns.each { |c| c.request('GET', path) }
    conns.map { |c| c.read_response(timeout: 10) }
  end

  it 'the backend /mruby answers "done\n" with 200' do
    r = http_get(@backend, '/mruby')
    expect([r.status, r.body]).to eq([200, "done\n"])
  end

  %w[/sub_req_proxy_pass /async_http_sub_request_with_proxy_pass /http_sub_request_with_proxy_pass].each do |path|
    it "the front #{path} answers \"done\\n\" with 200" do
      r = http_get(@front, path)
      expect([r.status, r.body]).to eq([200, "done\n"])
    end
  end

  it '50 concurrent keep-alive connections to the async endpoint all succeed, 4 requests each' do
    conns = Array.new(50) { connect(@front) }
    4.times do |i|
      results = round(conns, '/async_http_sub_request_with_proxy_pass')
      bad = results.each_with_index.reject { |r, _| r.status == 200 && r.body == "done\n" }
      expect(bad).to be_empty, "round #{i + 1}: #{bad.size} failures, first: #{bad.first.inspect}"
    end
    conns.each { |c| expect(c.pending).to be_empty }
  end

  # A ratio of two rounds of the same run, not a wall-clock bound: the
  # blocking endpoint serialises the 50 (each waits its 10 ms backend in
  # turn: >= 0.5 s however fast the machine), so the async round taking under
  # a quarter of it means at most ~12 of 50 ran one after another; with half
  # of them serialised it would take >= 0.25 s, half the blocking round.
  it '50 concurrent requests to the async endpoint overlap: under 1/4 of the time the blocking endpoint takes for the same 50' do
    conns = Array.new(50) { connect(@front) }
    round(conns, '/async_http_sub_request_with_proxy_pass') # warm the upstream pool
    round(conns, '/http_sub_request_with_proxy_pass')
    results, async_took = timed { round(conns, '/async_http_sub_request_with_proxy_pass') }
    expect(results.map { |r| [r.status, r.body] }.uniq).to eq([[200, "done\n"]])
    results, blocking_took = timed { round(conns, '/http_sub_request_with_proxy_pass') }
    expect(results.map { |r| [r.status, r.body] }.uniq).to eq([[200, "done\n"]])
    expect(blocking_took).to be >= 0.5
    expect(async_took).to be < blocking_took / 4, "async #{async_took.round(3)} s, blocking #{blocking_took.round(3)} s"
  end

  it '50 concurrent requests to the blocking endpoint take at least 50 x 10 ms (the worker serialises them)' do
    conns = Array.new(50) { connect(@front) }
    results, took = timed { round(conns, '/http_sub_request_with_proxy_pass') }
    expect(results.map { |r| [r.status, r.body] }.uniq).to eq([[200, "done\n"]])
    expect(took).to be >= 0.5
  end
end
