# What a handler block produces: a String, a Rack-style triple, ngx_mruby
# output calls (Nginx.rputs / echo / return).
require_relative 'spec_helper'

RSpec.describe 'handler results' do
  before(:each) do
    @port = free_port
    @gw = start_gateway(<<~'RUBY'.sub('PORT', @port.to_s), ports: @port)
      server listen: "127.0.0.1:PORT" do
        location "/string" do
          "a string body"
        end
        location "/rack" do
          [201, {"x-custom" => "yes", "content-type" => "application/json"}, ["{\"a\":", "1}"]]
        end
        location "/rack_each" do
          body = Object.new
          def body.each
            yield "from "
            yield "each"
          end
          [202, [["x-pair", "1"], ["x-pair", "2"]], body]
        end
        location "/rack_bare" do
          [204, nil, nil]
        end
        location "/rack_bad" do
          [200, {}]
        end
        location "/rack_bad_header" do
          [200, {"bad name" => "v"}, ["x"]]
        end
        location "/rputs" do
          Nginx.rputs "a"
          Nginx.rputs "b"
        end
        location "/echo" do
          Nginx.echo "x"
        end
        location "/return204" do
          Nginx.return 204
        end
        location "/return200" do
          Nginx.return 200
        end
        location "/return404" do
          Nginx.return 404
        end
        location "/utf8" do
          "h\u00e9llo"
        end
      end
    RUBY
  end

  it 'a String return is a 200 with that body' do
    r = http_get(@port, '/string')
    expect(r.status).to eq(200)
    expect(r.body).to eq('a string body')
    expect(r['content-length']).to eq('13')
  end

  it 'a String return has a text content type' do
    r = http_get(@port, '/string')
    expect(r['content-type']).to match(%r{\Atext/plain})
  end

  it 'a String body is sent as its bytes with a byte Content-Length' do
    r = http_get(@port, '/utf8')
    expect(r.status).to eq(200)
    expect(r.body).to eq("h\u00e9llo".b)
    expect(r['content-length']).to eq('6')
  end

  it 'a Rack-style [status, headers, body] return sends that status, those headers and the joined body' do
    r = http_get(@port, '/rack')
    expect(r.status).to eq(201)
    expect(r['x-custom']).to eq('yes')
    expect(r['content-type']).to eq('application/json')
    expect(r.body).to eq('{"a":1}')
    expect(r['content-length']).to eq('7')
  end

  it 'a triple whose headers are pairs and whose body answers #each; nil headers and body' do
    r = http_get(@port, '/rack_each')
    expect(r.status).to eq(202)
    expect(r.header_lines.select { |k, _| k.casecmp?('x-pair') }.map(&:last)).to eq(%w[1 2]) # one field line per pair, in order
    expect(r.body).to eq('from each')
    r = http_get(@port, '/rack_bare')
    expect(r.status).to eq(204)
    expect(r.body).to eq('')
  end

  it 'an Array that is not a triple, or a bad header name, is a 500 with the reason logged' do
    expect(http_get(@port, '/rack_bad').status).to eq(500)
    expect(@gw.log).to include('must return [status, headers, body], got [200, {}]')
    expect(http_get(@port, '/rack_bad_header').status).to eq(500)
    expect(@gw.log).to include('refused response header "bad name"')
  end

  it 'Nginx.rputs twice sends both strings in order' do
    r = http_get(@port, '/rputs')
    expect(r.status).to eq(200)
    expect(r.body).to eq('ab')
  end

  it 'Nginx.echo appends a newline' do
    r = http_get(@port, '/echo')
    expect(r.status).to eq(200)
    expect(r.body).to eq("x\n")
  end

  it 'Nginx.return 204 sends 204 with no body and no Content-Length (RFC 9110 §8.6 MUST NOT), and the connection stays usable' do
    c = connect(@port)
    c.request('GET', '/return204')
    r = c.read_response
    expect(r.status).to eq(204)
    expect(r['content-length']).to be_nil
    expect(r['transfer-encoding']).to be_nil
    c.request('GET', '/string')
    r2 = c.read_response
    expect(r2.status).to eq(200)
    expect(r2.body).to eq('a string body')
  end

  it 'Nginx.return 200 with no output is a valid empty 200 (Content-Length: 0)' do
    c = connect(@port)
    c.request('GET', '/return200')
    r = c.read_response
    expect(r.status).to eq(200)
    expect(r['content-length']).to eq('0')
    expect(r.body).to eq('')
    c.request('GET', '/string')
    expect(c.read_response.body).to eq('a string body')
  end

  it 'Nginx.return 404 sends a 404' do
    r = http_get(@port, '/return404')
    expect(r.status).to eq(404)
  end
end
