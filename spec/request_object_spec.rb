# The request object passed to a handler block.
require_relative 'spec_helper'

RSpec.describe 'the request object' do
  before(:each) do
    @port = free_port
    start_gateway(<<~'RUBY'.sub('PORT', @port.to_s), ports: @port)
      server listen: "127.0.0.1:PORT" do
        location "/method" do |req| req.method end
        location "/path" do |req| req.path end
        location "/query" do |req| req.query.inspect end
        location "/header" do |req|
          "#{req.headers["x-foo"].inspect} #{req.headers["X-FOO"].inspect} #{req.headers["x-absent"].inspect}"
        end
        location "/body" do |req| "#{req.body.class}:#{req.body}" end
        location "/remote" do |req| req.remote_addr end
      end
    RUBY
  end

  it 'req.method is the request method' do
    expect(http_request(@port, 'POST', '/method', {}, '').body).to eq('POST')
    expect(http_get(@port, '/method').body).to eq('GET')
    expect(http_request(@port, 'DELETE', '/method').body).to eq('DELETE')
  end

  it 'req.path is the path without the query string' do
    expect(http_get(@port, '/path/a/b?x=1&y=2').body).to eq('/path/a/b')
  end

  it 'req.query is the query string without "?"' do
    expect(http_get(@port, '/query?x=1&y=%20').body).to eq('"x=1&y=%20"')
  end

  it 'req.query is "" when there is none' do
    expect(http_get(@port, '/query').body).to eq('""')
  end

  it 'req.headers looks names up case-insensitively, nil when absent' do
    r = http_get(@port, '/header', 'X-Foo' => 'bar baz')
    expect(r.body).to eq('"bar baz" "bar baz" nil')
  end

  it 'req.body is the request body (Content-Length)' do
    r = http_request(@port, 'POST', '/body', {}, 'hello body')
    expect(r.status).to eq(200)
    expect(r.body).to eq('String:hello body')
  end

  it 'req.body is "" for a request without a body' do
    expect(http_get(@port, '/body').body).to eq('String:')
  end

  it 'req.remote_addr is the client address' do
    expect(http_get(@port, '/remote').body).to eq('127.0.0.1')
  end
end
