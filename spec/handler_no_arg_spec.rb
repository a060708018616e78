# A handler block that takes no argument (`do ... end`) is run without a
# Gateway::Request being made for it (mruby_handler.c); one made later on
# demand, by Gateway::Request.current, lives until the request ends, even
# when the handler drops it and parks while the GC runs.
require_relative 'spec_helper'

RSpec.describe 'a handler that takes no argument' do
  before(:each) do
    prelude = <<~'RUBY'
      module Peek
        # in a frame of its own: nothing of the object stays in the handler's registers
        def self.path = Gateway::Request.current.path
      end
    RUBY
    gateway_with(<<~'RUBY', prelude, server: 'http2: true')
      location "/current" do
        first = Peek.path
        Async.sleep(0.01)
        GC.start
        junk = Array.new(2000) { |i| "junk#{i}" } # fills what the GC freed
        "#{first} #{Gateway::Request.current.path} #{junk.size}"
      end
      location "/raise" do raise "no-arg-boom" end
      location "/rack" do [201, {"x-a" => "1"}, ["made"]] end
    RUBY
  end

  it 'gets the request on demand, still the same after a park and a GC' do
    3.times do
      r = http_get(@port, '/current')
      expect(r.status).to eq(200)
      expect(r.body).to eq('/current /current 2000')
    end
  end

  it 'that raises gives a 500 and the log names the request' do
    expect(http_get(@port, '/raise').status).to eq(500)
    poll('the error in the log', timeout: 3) { @gw.log =~ %r{GET /raise raised RuntimeError: no-arg-boom} }
  end

  it 'returns a Rack triple' do
    r = http_get(@port, '/rack')
    expect([r.status, r.headers['x-a'], r.body]).to eq([201, '1', 'made'])
  end
end
