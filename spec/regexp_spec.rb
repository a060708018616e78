# Regexp in handlers (literals, $~ and $1, case/when, gsub with a block), the
# match limit, bad patterns, and regex locations in nginx's order with their
# captures.
require_relative 'spec_helper'

RSpec.describe 'Regexp' do
  context 'in handlers' do
    before(:each) do
      gateway_with(<<~'RUBY', server: '')
        location "/literal" do |req|
          if req.path =~ %r{\A/literal/?(\w*)\z}
            "matched:#{$1}:#{$~[0]}"
          else
            "no"
          end
        end
        location "/case/" do |req|
          case req.path
          when %r{/case/(\d+)\z}i then "number #{$1}"
          when /\/case\/([a-z]+)\z/ then "word #{$1}"
          else "other"
          end
        end
        location "/gsub" do |req|
          req.query.gsub(/([a-z]+)=(\d+)/) { "#{$2}=#{$1.upcase}" }
        end
        location "/named" do |req|
          m = /(?<user>\w+)@(?<host>[\w.]+)/.match(req.query)
          "#{m[:user]} at #{m['host']}"
        end
        location "/catastrophic" do
          /(a+)+$/ =~ ("a" * 40) + "b"
          "not reached"
        end
        location "/bad-pattern" do |req|
          Regexp.new("(unclosed" + req.query)
          "not reached"
        end
        location "/wait" do |req|
          m = /(\w+)/.match(req.query)  # $~ and $1 are global: keep the MatchData across a wait
          Async.sleep 0.2
          "after wait: #{m[1]}"
        end
        location "/match-other" do |req|
          /(\w+)/ =~ req.query
          "other: #{$1}"
        end
      RUBY
    end

    it 'a literal with $1 and $~ in a handler' do
      r = http_get(@port, '/literal/abc')
      expect(r.status).to eq(200)
      expect(r.body).to eq('matched:abc:/literal/abc')
    end

    it 'case/when with regexps picks the first that matches and sets $1' do
      expect(http_get(@port, '/case/42').body).to eq('number 42')
      expect(http_get(@port, '/case/abc').body).to eq('word abc')
      expect(http_get(@port, '/case/a-b').body).to eq('other')
    end

    it 'gsub with a block sees $1 and $2 of each match' do
      expect(http_get(@port, '/gsub?a=1&bc=22').body).to eq('1=A&22=BC')
    end

    it 'named groups by Symbol and String' do
      expect(http_get(@port, '/named?joe@example.com').body).to eq('joe at example.com')
    end

    it 'a catastrophic pattern gives a 500 within a second, logs the RegexpError, and the worker keeps serving' do
      pid = worker_pid(@port)
      r, secs = timed { http_get(@port, '/catastrophic') }
      expect(r.status).to eq(500)
      expect(secs).to be < 1.0 * GatewaySpec::SLACK
      poll('the RegexpError in the log', timeout: 3) { @gw.log =~ /match limit exceeded.*RegexpError|RegexpError.*match limit exceeded/ }
      expect(http_get(@port, '/literal/x').body).to eq('matched:x:/literal/x')
      expect(worker_pid(@port)).to eq(pid)
    end

    it 'a bad pattern in a handler gives a 500 with the error logged' do
      r = http_get(@port, '/bad-pattern?x')
      expect(r.status).to eq(500)
      poll('the RegexpError in the log', timeout: 3) { @gw.log.include?('missing closing parenthesis') }
      expect(@gw.log).to include('RegexpError')
      expect(http_get(@port, '/literal/y').status).to eq(200)
    end

    it 'a handler that keeps its MatchData in a local has it after a wait, whatever another handler matched' do
      slow = Thread.new { http_get(@port, '/wait?mine') }
      sleep 0.05 # (not a readiness wait: lets the slow request start and park first)
      expect(http_get(@port, '/match-other?theirs').body).to eq('other: theirs')
      expect(slow.value.body).to eq('after wait: mine')
    end
  end

  context 'regex locations' do
    before(:each) do
      @port = free_port
      @gw = start_gateway(<<~'RUBY'.sub('PORT', @port.to_s), ports: @port)
        server listen: "127.0.0.1:PORT" do
          location "/" do "root" end
          location "= /api/v1/exact" do "exact" end
          location "/api/" do "api prefix" end
          location %r{^/users/(\d+)(?:/(\w+))?$} do |req|
            "user #{req.captures.inspect}"
          end
          location "~ ^/api/v(?<version>\\d+)/" do |req|
            "api v#{req.named_captures['version']} #{req.captures.inspect}"
          end
          location "~* \\.(png|jpg)$" do |req|
            "image #{req.captures[0]}"
          end
          location "^~ /static/" do "static" end
          location "~ ^/api/v1/later" do "never: an earlier regex matches first" end
          location "/plain" do |req| "plain #{req.captures.inspect} #{req.named_captures.inspect}" end
        end
      RUBY
    end

    it 'a %r{} location takes the path and gives its captures as req.captures' do
      expect(http_get(@port, '/users/42').body).to eq('user ["42", nil]')
      expect(http_get(@port, '/users/42/posts').body).to eq('user ["42", "posts"]')
      expect(http_get(@port, '/users/x').body).to eq('root')
    end

    it 'an exact location comes before any regex' do
      expect(http_get(@port, '/api/v1/exact').body).to eq('exact')
    end

    it 'a regex location beats the longest prefix; named groups are req.named_captures' do
      expect(http_get(@port, '/api/v2/things').body).to eq('api v2 ["2"]')
    end

    it 'regex locations are tried in config order: the first that matches wins' do
      expect(http_get(@port, '/api/v1/later').body).to eq('api v1 ["1"]')
    end

    it 'when no regex matches, the longest prefix answers' do
      expect(http_get(@port, '/api/other').body).to eq('api prefix')
    end

    it '"~*" is case-insensitive, "~" is not' do
      expect(http_get(@port, '/img/a.PNG').body).to eq('image PNG')
      expect(http_get(@port, '/API/v2/x').body).to eq('root')
    end

    it 'a "^~" prefix skips the regex locations' do
      expect(http_get(@port, '/static/a.png').body).to eq('static')
    end

    it 'the query is not part of what a regex location sees' do
      expect(http_get(@port, '/users/7?x=1').body).to eq('user ["7", nil]')
    end

    it 'req.captures is [] and req.named_captures {} in a location that is not a regex' do
      expect(http_get(@port, '/plain').body).to eq('plain [] {}')
    end

    it 'a path the pattern misses as received is tried percent-decoded and normalised (as nginx\'s $uri)' do
      expect(http_get(@port, '/users/%34%32').body).to eq('user ["42", nil]') # the groups: of the decoded path
      expect(http_get(@port, '/users//42/posts').body).to eq('user ["42", "posts"]')
      expect(http_get(@port, '/img/a%2Epng').body).to eq('image png')
      # %2F: "/users/42" by $uri, the root location as received: refused rather than routed either way
      expect(http_get(@port, '/users/%2F42').status).to eq(400)
      expect(http_get(@port, '/img/a%2Egif').body).to eq('root')
    end
  end

  context 'across a reload (SIGHUP: a new VM, the old one closed)' do
    it 'literals and regex locations of the new config answer' do
      port = free_port
      conf = lambda do |word|
        <<~RUBY
          server listen: "127.0.0.1:#{port}" do
            location %r{^/w/(\\w+)$} do |req|
              "#{word} \#{req.captures[0]} \#{(/(\\d+)/ =~ req.query) && $1}"
            end
          end
        RUBY
      end
      gw = start_gateway(conf.call('one'), ports: port)
      expect(http_get(port, '/w/a?x=1').body).to eq('one a 1')
      gw.rewrite_config(conf.call('two'))
      gw.signal('HUP')
      poll('the reloaded config to answer', timeout: 10) { http_get(port, '/w/b?y=22').body == 'two b 22' }
      expect(http_get(port, '/w/c?z=3').body).to eq('two c 3')
    end
  end

  context 'at config load' do
    it 'a bad pattern in a regex location is FILE:LINE: message' do
      status, output, path = check_config(<<~RUBY)
        server listen: #{free_port} do
          location "/" do "x" end
          location "~ ^/(unclosed" do "y" end
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:3: .*missing closing parenthesis/), output
    end

    it 'a bad regexp literal in the config is FILE:LINE: message (RegexpError)' do
      status, output, path = check_config(<<~'RUBY'.sub('PORT', free_port.to_s))
        x = "["
        pat = /a#{x}/
        server listen: PORT do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:2: .*missing terminating \].*RegexpError/), output
    end

    it 'a good config with regex locations passes -t' do
      status, output, = check_config(<<~RUBY)
        server listen: #{free_port} do
          location %r{^/a/(\\d+)$}i do "a" end
          location "~* \\.css$" do "css" end
          location "^~ /s/" do "s" end
        end
      RUBY
      expect(status).to eq(0), output
    end
  end
end
