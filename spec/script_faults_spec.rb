# Script faults: whatever a handler does wrong costs its own request a 500,
# is logged, and leaves the worker (same process) serving everyone else.
require_relative 'spec_helper'

RSpec.describe 'script faults' do
  before(:each) do
    gateway_with(<<~RUBY, 'vm_memory_limit 64 * 1024 * 1024')
      location "/huge" do "x" * 200_000_000 end
      location "/deep" do
        def deep(n) deep(n + 1) end
        deep(0)
      end
      location "/crlf" do |req|
        req.headers_out["x-bad"] = "a\\r\\nSet-Cookie: evil=1"
        "never sent"
      end
      location "/nul" do |req| [200, { "x-bad" => "a\\0b" }, ["never sent"]] end
      location "/badname" do |req| [200, { "bad name" => "v" }, ["never sent"]] end
      location "/rack" do [200, "not a hash"] end
    RUBY
    @pid = worker_pid
  end

  def expect_500_and_alive(path, log_pattern)
    r = http_get(@port, path)
    expect(r.status).to eq(500)
    expect(r.body).not_to include('never sent')
    poll("the log to mention #{log_pattern.inspect}") { @gw.log =~ log_pattern }
    expect(worker_pid).to eq(@pid)
  end

  it 'an allocation past vm_memory_limit is a 500 (NoMemoryError), the worker serves on' do
    expect_500_and_alive('/huge', /NoMemoryError/)
    expect_500_and_alive('/huge', /NoMemoryError/)
  end

  it 'infinite recursion is a 500 (SystemStackError) with a short backtrace in the log' do
    expect_500_and_alive('/deep', /SystemStackError/)
    expect(@gw.log).to match(/\.\.\. \d+ more frames/)
    expect(@gw.log.lines.count { |l| l.include?('in deep') }).to be <= 16
  end

  it 'a header value with CR LF from a script is refused: 500, never on the wire' do
    raw = raw_request(@port, "GET /crlf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    expect(raw).to start_with('HTTP/1.1 500')
    expect(raw).not_to include('evil')
    expect(@gw.log).to match(/refused response header/)
  end

  it 'a header value with NUL from a Rack result is refused' do
    raw = raw_request(@port, "GET /nul HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    expect(raw).to start_with('HTTP/1.1 500')
    expect(raw).not_to include("a\0b")
  end

  it 'a header name that is not a token is refused' do
    expect_500_and_alive('/badname', /invalid response header/)
  end

  it 'a malformed Rack result is a 500 that says what was expected' do
    expect_500_and_alive('/rack', /status, headers, body/)
  end
end
