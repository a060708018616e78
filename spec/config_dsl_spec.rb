# The config DSL: server listen:, location prefix/exact matching, 404.
require_relative 'spec_helper'

RSpec.describe 'config DSL' do
  it 'server listen: Integer serves on 127.0.0.1:PORT' do
    port = free_port
    start_gateway(<<~RUBY, ports: port)
      server listen: #{port} do
        location "/" do
          "integer port"
        end
      end
    RUBY
    r = http_get(port, '/')
    expect(r.status).to eq(200)
    expect(r.body).to eq('integer port')
  end

  it 'server listen: "host:port" serves on that address' do
    port = free_port
    start_gateway(<<~RUBY, ports: port)
      server listen: "127.0.0.1:#{port}" do
        location "/" do
          "string address"
        end
      end
    RUBY
    r = http_get(port, '/')
    expect(r.status).to eq(200)
    expect(r.body).to eq('string address')
  end

  it 'two server blocks in one file serve their own locations on their own ports' do
    a = free_port
    b = free_port
    start_gateway(<<~RUBY, ports: [a, b])
      server listen: "127.0.0.1:#{a}" do
        location "/" do "server a" end
      end
      server listen: "127.0.0.1:#{b}", workers: 1 do
        location "/" do "server b" end
      end
    RUBY
    expect(http_get(a, '/').body).to eq('server a')
    expect(http_get(b, '/').body).to eq('server b')
  end

  describe 'location matching' do
    before do
      @port = free_port
      start_gateway(<<~RUBY, ports: @port)
        server listen: "127.0.0.1:#{@port}" do
          location "/api" do "api" end
          location "/" do "root" end
          location "/api/v2" do "v2" end
          location "= /exact" do "exact" end
          location "/exact" do "exact-prefix" end
        end
      RUBY
    end

    {
      '/' => 'root',
      '/other' => 'root',
      '/api' => 'api',
      '/api/x' => 'api',
      '/api/v2' => 'v2',
      '/api/v2/deeper' => 'v2',
      '/api/v2?q=/' => 'v2',
      '/api?to=/api/v2' => 'api',
      '/exact' => 'exact',
      '/exact?q=1' => 'exact',
      '/exact/more' => 'exact-prefix',
      '/exactly' => 'exact-prefix'
    }.each do |path, body|
      it "GET #{path} is served by the location answering #{body.inspect} (longest prefix, exact first)" do
        r = http_get(@port, path)
        expect(r.status).to eq(200), r.inspect
        expect(r.body).to eq(body)
      end
    end
  end

  it 'a request that matches no location gets 404' do
    port = free_port
    start_gateway(<<~RUBY, ports: port)
      server listen: "127.0.0.1:#{port}" do
        location "/api" do "api" end
        location "= /x" do "x" end
      end
    RUBY
    r = http_get(port, '/elsewhere')
    expect(r.status).to eq(404)
    r = http_get(port, '/x/y')
    expect(r.status).to eq(404)
  end
end
