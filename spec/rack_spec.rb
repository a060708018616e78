# Rack-style handlers, ngx_mruby's `run app`: app.call(env) answers.
require_relative 'spec_helper'

RSpec.describe 'run(app): Rack-style handlers' do
  before(:each) do
    @port = free_port
    dir = spec_dir
    File.write(File.join(dir, 'app.rb'), <<~'RUBY')
      class EchoApp
        def call(env)
          input = env["rack.input"].read
          env["rack.logger"].info("rack app saw #{env["PATH_INFO"]}")
          [201, { "content-type" => "text/plain", "x-app" => "echo" },
           ["#{env["REQUEST_METHOD"]} #{env["PATH_INFO"]}?#{env["QUERY_STRING"]} ",
            "#{env["SERVER_NAME"]}:#{env["SERVER_PORT"]} #{env["HTTP_X_TOKEN"]} #{env["CONTENT_TYPE"]} [#{input}]"]]
        end
      end
      run EchoApp.new
    RUBY
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}" do
        location "/app", content: "app.rb"
        location "/bad" do
          run ->(env) { "not a triple" }
        end
      end
    RUBY
  end

  it 'passes the Rack env (method, path, query, server, HTTP_*, CONTENT_TYPE, rack.input) and sends the triple' do
    r = http_request(@port, 'POST', '/app/x?y=1', { 'host' => 'example.test:8080', 'x-token' => 't1',
                                                     'content-type' => 'text/plain' }, 'payload')
    expect(r.status).to eq(201)
    expect(r.headers['x-app']).to eq('echo')
    expect(r.body).to eq('POST /app/x?y=1 example.test:8080 t1 text/plain [payload]')
  end

  it 'an app that does not return a triple is a 500 with the reason logged' do
    expect(http_get(@port, '/bad').status).to eq(500)
    expect(@gw.log).to include('run: app.call(env) must return [status, headers, body]')
  end
end
