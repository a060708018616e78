# HttpRequest: the deliberately BLOCKING client (ngx_mruby's mruby-httprequest).
# It works against another server block of the same config (its own worker),
# and it really stalls the calling worker's whole event loop while it waits —
# the opposite of Async::HTTP, which is shown side by side here.
require_relative 'spec_helper'

RSpec.describe 'HttpRequest (blocking client)' do
  before(:each) do
    @front = free_port
    @back = free_port
    @dead = free_port # nothing listens there
    # Accepts connections (kernel backlog) but never reads or answers.
    @mute = TCPServer.new('127.0.0.1', 0)
    config = <<~'RUBY'
      server listen: "127.0.0.1:BACK", workers: 1 do
        location "/fast" do [201, {"x-back" => "yes"}, ["backend-body"]] end
        location "/slow" do Async.sleep 1; "slow-body" end
      end

      server listen: "127.0.0.1:FRONT", workers: 1 do
        location "/trivial" do "trivial" end
        location "/get" do
          r = HttpRequest.new.get("http://127.0.0.1:BACK/fast")
          "#{r["code"]}|#{r["body"]}|#{r.code}|#{r.body}|#{r.headers["x-back"]}"
        end
        location "/blocked" do
          Gateway.log(:notice, "blocking-call-starts")
          HttpRequest.new.get("http://127.0.0.1:BACK/slow")["body"]
        end
        location "/async" do
          Gateway.log(:notice, "async-call-starts")
          Async::HTTP.sub_request("http://127.0.0.1:BACK/slow").body
        end
        location "/timeout" do
          begin
            HttpRequest.new(timeout: 0.3).get("http://127.0.0.1:MUTE/")
            "no error"
          rescue => e
            "#{e.class}|#{e.message}"
          end
        end
        location "/refused" do
          begin
            HttpRequest.new.get("http://127.0.0.1:DEAD/")
            "no error"
          rescue HttpRequest::Error => e
            "#{e.class}|#{e.is_a?(Gateway::UpstreamError)}"
          end
        end
      end
    RUBY
    { 'FRONT' => @front, 'BACK' => @back, 'DEAD' => @dead, 'MUTE' => @mute.addr[1] }
      .each { |k, v| config = config.gsub(k, v.to_s) }
    @gw = start_gateway(config, ports: [@front, @back])
  end

  after(:each) { @mute.close }

  it 'HttpRequest.new.get reaches another server block and returns its body and code' do
    r = http_get(@front, '/get')
    expect([r.status, r.body]).to eq([200, '201|backend-body|201|backend-body|yes'])
  end

  it 'while one request waits in HttpRequest on a 1 s backend, the same single worker answers nobody' do
    blocked = connect(@front)
    t0 = GatewaySpec.now
    blocked.request('GET', '/blocked', 'Connection' => 'close')
    poll('the blocking call to start', timeout: 3) { @gw.log.include?('blocking-call-starts') }
    trivial, took = timed { http_get(@front, '/trivial', timeout: 5) }
    expect([trivial.status, trivial.body]).to eq([200, 'trivial'])
    expect(took).to be >= 0.8
    # The blocked request was answered first (its response is already here).
    expect(IO.select([blocked.sock], nil, nil, 0)).not_to be_nil
    r = blocked.read_response
    expect([r.status, r.body]).to eq([200, 'slow-body'])
    expect(GatewaySpec.now - t0).to be >= 1.0
  end

  it 'by contrast, while one request waits in Async::HTTP on the same 1 s backend, the worker answers at once' do
    waiting = connect(@front)
    waiting.request('GET', '/async', 'Connection' => 'close')
    poll('the async call to start', timeout: 3) { @gw.log.include?('async-call-starts') }
    trivial, took = timed { http_get(@front, '/trivial') }
    expect([trivial.status, trivial.body]).to eq([200, 'trivial'])
    expect(took).to be < slack(0.5) # the backend takes 1 s; the pending check below is the proof
    expect(IO.select([waiting.sock], nil, nil, 0)).to be_nil
    expect(waiting.read_response.body).to eq('slow-body')
  end

  it 'HttpRequest.new(timeout: 0.3) against a server that never answers raises, saying it blocked the worker' do
    r, took = timed { http_get(@front, '/timeout', timeout: 10) }
    expect(r.status).to eq(200)
    klass, message = r.body.split('|', 2)
    expect(klass).not_to eq('no error')
    expect(message).to match(/block|stall/i)
    expect(took).to be >= 0.28
    expect(took).to be < 1.0 * GatewaySpec::SLACK
  end

  it 'connection refused raises HttpRequest::Error (a Gateway::UpstreamError)' do
    r = http_get(@front, '/refused')
    expect([r.status, r.body]).to eq([200, 'HttpRequest::Error|true'])
  end
end
