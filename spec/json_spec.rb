# JSON in handlers: a request body parsed, a transformed document answered;
# a malformed body answered 400 by the handler's own rescue, or a 500 with
# JSON::ParserError in the error log when the handler does not rescue; a
# 10 MB body parsed without the worker dying.
require 'json'
require_relative 'spec_helper'

RSpec.describe 'JSON in handlers' do
  before(:each) do
    @port = free_port
    @gw = start_gateway(<<~'RUBY'.sub('PORT', @port.to_s), ports: @port)
      server listen: "127.0.0.1:PORT", limits: { max_body: 16_000_000 } do
        # The pattern: rescue JSON::ParserError and answer 400 with its message.
        location "/transform" do |req|
          begin
            doc = JSON.parse(req.body, symbolize_names: true)
          rescue JSON::ParserError => e
            next [400, { "content-type" => "application/json" }, [JSON.generate({ error: e.message })]]
          end
          items = doc[:items].map { |i| { id: i[:id], name: i[:name].upcase, total: i[:price] * i[:qty] } }
          out = { count: items.size, items: items, sum: items.inject(0) { |a, i| a + i[:total] } }
          [200, { "content-type" => "application/json" }, [JSON.generate(out)]]
        end

        location "/unrescued" do |req|
          JSON.generate(JSON.parse(req.body))
        end

        location "/size" do |req|
          doc = JSON.parse(req.body)
          JSON.generate({ elements: doc.size, last: doc[-1] })
        end

        location "/pretty" do |req|
          JSON.pretty_generate(JSON.parse(req.body))
        end
      end
    RUBY
  end

  def post(path, body)
    http_request(@port, 'POST', path, { 'Content-Type' => 'application/json' }, body, timeout: 30 * GatewaySpec::SLACK)
  end

  it 'a handler parses a JSON body and answers a transformed JSON document' do
    body = { items: [{ id: 1, name: 'tea', price: 2.5, qty: 2 }, { id: 2, name: "caf\u00e9", price: 3, qty: 1 }] }.to_json
    r = post('/transform', body)
    expect(r.status).to eq(200)
    expect(r['content-type']).to eq('application/json')
    expect(JSON.parse(r.body)).to eq(
      'count' => 2, 'sum' => 8.0,
      'items' => [{ 'id' => 1, 'name' => 'TEA', 'total' => 5.0 }, { 'id' => 2, 'name' => "CAF\u00e9", 'total' => 3 }]
    )
  end

  it "a malformed body gets the handler's own 400 with the parser's message and byte offset" do
    r = post('/transform', '{"items": [1, 2,]}')
    expect(r.status).to eq(400)
    expect(JSON.parse(r.body)['error']).to match(/at byte \d+/)
  end

  it 'invalid UTF-8 in a body is a parse error, answered 400 by the rescue' do
    r = post('/transform', "{\"items\": [\"\xff\"]}".b)
    expect(r.status).to eq(400)
    expect(JSON.parse(r.body)['error']).to include('invalid UTF-8')
  end

  it 'a malformed body in a handler that does not rescue gives a 500 and logs JSON::ParserError' do
    r = post('/unrescued', '{"a": nope}')
    expect(r.status).to eq(500)
    poll('JSON::ParserError in the error log', timeout: 3) { @gw.log.include?('JSON::ParserError') }
  end

  it 'the worker keeps serving after a parse error' do
    expect(post('/unrescued', '[').status).to eq(500)
    r = post('/unrescued', '[1,"x"]')
    expect(r.status).to eq(200)
    expect(r.body).to eq('[1,"x"]')
  end

  it 'a 10 MB body parses without the worker dying' do
    doc = Array.new(100_000) { |i| { 'id' => i, 'name' => "item #{i}", 'tags' => %w[a b c], 'score' => i * 0.5 } }
    body = JSON.generate(doc)
    body << ' ' * (10_000_000 - body.bytesize) if body.bytesize < 10_000_000
    expect(body.bytesize).to be >= 10_000_000
    pid_before = worker_pid_of_gateway
    r = post('/size', body)
    expect(r.status).to eq(200)
    expect(JSON.parse(r.body)).to eq('elements' => 100_000, 'last' => doc[-1])
    expect(post('/unrescued', '{"still":"alive"}').body).to eq('{"still":"alive"}')
    expect(worker_pid_of_gateway).to eq(pid_before)
  end

  # CRuby's json >= 2.7 layout (2.6, Ruby 3.1's, writes an empty {} as "{\n  }").
  it "JSON.pretty_generate answers CRuby's layout" do
    r = post('/pretty', '{"a":[1,{"b":null}],"c":{},"d":[]}')
    expect(r.status).to eq(200)
    expect(r.body).to eq(%({\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ],\n  "c": {},\n  "d": []\n}))
  end

  # The one worker's pid, from the master's children.
  def worker_pid_of_gateway
    File.read("/proc/#{@gw.pid}/task/#{@gw.pid}/children").split.map(&:to_i).first
  end
end
