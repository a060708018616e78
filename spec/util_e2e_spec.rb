# The utility classes a config script gets (mruby-gateway-util and -json,
# mruby-gateway-nginx's Headers_in) end to end: a handler computes, the
# answer crosses a real socket, and the spec checks it against CRuby's own
# stdlib (json, base64, digest, time) or what it sent: JSON max_nesting:,
# Base64, Digest, Time, ENV (the gateway's environment), Nginx::Headers_in.new.
require 'base64'
require 'digest'
require 'json'
require 'time'
require_relative 'spec_helper'

RSpec.describe 'utility classes end to end (JSON max_nesting:, Base64, Digest, Time, ENV, Headers_in)' do
  before(:all) do
    @port = free_port
    @gw = start_gateway(<<~'RUBY'.gsub('PORT', @port.to_s), ports: @port, env: { 'GW_SPEC_VAR' => "v\u00e4lue 1", 'GW_SPEC_EMPTY' => '' })
      server listen: "127.0.0.1:PORT", workers: 1 do
        # ?DEPTH[,MAX]: an Array nested DEPTH deep, parsed with max_nesting: MAX (none: the default).
        location "/json_nest" do |req|
          depth, max = req.query.split(",")
          text = "[" * depth.to_i + "]" * depth.to_i
          begin
            v = max ? JSON.parse(text, max_nesting: (max == "false" ? false : max.to_i)) : JSON.parse(text)
            "parsed #{v.inspect.count('[')}"
          rescue JSON::ParserError => e
            "#{e.class}: #{e.message}"
          end
        end
        location "/json_gen" do |req|
          depth, max = req.query.split(",")
          v = []
          (depth.to_i - 1).times { v = [v] }
          begin
            JSON.generate(v, max_nesting: max.to_i)
          rescue JSON::NestingError, JSON::GeneratorError => e
            "#{e.class}: #{e.message}"
          end
        end
        location "/base64" do |req|
          b = req.body
          bad = begin
            Base64.strict_decode64("no!t base64")
            "accepted"
          rescue ArgumentError
            "ArgumentError"
          end
          JSON.generate([Base64.strict_encode64(b), Base64.encode64(b), Base64.urlsafe_encode64(b),
                         Base64.urlsafe_encode64(b, padding: false), Base64.decode64(Base64.encode64(b)) == b,
                         Base64.strict_decode64(Base64.strict_encode64(b)) == b,
                         Base64.urlsafe_decode64(Base64.urlsafe_encode64(b, padding: false)) == b, bad])
        end
        location "/digest" do |req|
          b = req.body
          JSON.generate([Digest::MD5.hexdigest(b), Digest::SHA1.hexdigest(b), Digest::SHA256.hexdigest(b),
                         Digest::SHA256.base64digest(b), Digest::MD5.digest(b).bytesize])
        end
        location "/time" do
          t = Time.at(784111777)
          JSON.generate([t.httpdate, t.getutc.iso8601, t.getutc.iso8601(3),
                         Time.httpdate("Sun, 06 Nov 1994 08:49:37 GMT").to_i,
                         Time.httpdate("Sunday, 06-Nov-94 08:49:37 GMT").to_i,
                         Time.httpdate("Sun Nov  6 08:49:37 1994").to_i,
                         (begin; Time.httpdate("yesterday"); "accepted"; rescue ArgumentError; "ArgumentError"; end),
                         Time.now.to_i])
        end
        location "/env" do
          JSON.generate([ENV["GW_SPEC_VAR"], ENV["GW_SPEC_EMPTY"], ENV["GW_SPEC_NOPE"], ENV.key?("GW_SPEC_VAR"),
                         ENV.fetch("GW_SPEC_NOPE", "default"), ENV.to_h["GW_SPEC_VAR"], ENV.keys.include?("GW_SPEC_VAR")])
        end
        location "/headers_in" do |req|
          h = Nginx::Headers_in.new
          JSON.generate([h["X-Spec"], h["x-spec"], h["X-Absent"], h.all["X-Spec"], h.user_agent,
                         h["x-spec"] == req.headers["x-spec"]])
        end
      end
    RUBY
    gateways.delete(@gw) # shared by the group: stopped and checked in after(:all)
    @shared_dir = @spec_dir
    @spec_dir = @gateways = nil
  end

  after(:all) do
    @gw&.stop
    problems = @gw ? @gw.problems : []
    FileUtils.rm_rf(@shared_dir) if @shared_dir && problems.empty?
    raise problems.join("\n") unless problems.empty?
  end

  def get(path, body = nil, headers = {})
    r = body ? http_request(@port, 'POST', path, headers, body) : http_get(@port, path, headers)
    expect(r.status).to eq(200), r.inspect
    r.body
  end

  describe 'JSON max_nesting:' do
    it 'parse: the default limit is 100 (101 levels are a JSON::NestingError, a ParserError, naming the depth), as CRuby' do
      expect(get('/json_nest?100')).to eq('parsed 100')
      expect(get('/json_nest?101')).to eq('JSON::NestingError: nesting of 101 is too deep at byte 100')
      expect { JSON.parse('[' * 101 + ']' * 101) }.to raise_error(JSON::NestingError) # CRuby agrees on the limit
    end

    it 'parse: max_nesting: 3 accepts 3 levels and refuses 4; false switches the limit off' do
      expect(get('/json_nest?3,3')).to eq('parsed 3')
      expect(get('/json_nest?4,3')).to eq('JSON::NestingError: nesting of 4 is too deep at byte 3')
      expect(get('/json_nest?500,false')).to eq('parsed 500')
    end

    it 'generate: max_nesting: 3 writes 3 levels and refuses 4' do
      expect(get('/json_gen?3,3')).to eq('[[[]]]')
      expect(get('/json_gen?4,3')).to match(/\AJSON::(NestingError|GeneratorError): .*4/)
    end
  end

  # Binary, UTF-8, 0 bytes and > 60 bytes (encode64 breaks lines at 60).
  BYTES = ("\x00\xff\xfe a\u00e9\u20ac +/=?" * 9).b

  it 'Base64: strict, line-broken, URL-safe (padded and not) encodings equal CRuby\'s; decoders round-trip; strict refuses junk' do
    got = JSON.parse(get('/base64', BYTES))
    expect(got).to eq([Base64.strict_encode64(BYTES), Base64.encode64(BYTES), Base64.urlsafe_encode64(BYTES),
                       Base64.urlsafe_encode64(BYTES, padding: false), true, true, true, 'ArgumentError'])
  end

  it 'Digest: MD5, SHA1, SHA256 hex digests and SHA256 base64digest equal CRuby\'s for binary input' do
    got = JSON.parse(get('/digest', BYTES))
    expect(got).to eq([Digest::MD5.hexdigest(BYTES), Digest::SHA1.hexdigest(BYTES), Digest::SHA256.hexdigest(BYTES),
                       Digest::SHA256.base64digest(BYTES), 16])
  end

  it 'Time: httpdate and iso8601 as CRuby writes them, Time.httpdate reads all three RFC 9110 forms, Time.now is now' do
    t = Time.at(784111777)
    before = Time.now.to_i
    got = JSON.parse(get('/time'))
    expect(got[0, 7]).to eq([t.httpdate, t.getutc.iso8601, t.getutc.iso8601(3), 784111777, 784111777, 784111777,
                             'ArgumentError'])
    expect(got[7]).to be_between(before - 1, Time.now.to_i + 1)
  end

  it "ENV is the gateway's environment: set, empty and missing variables, fetch's default, to_h and keys" do
    got = JSON.parse(get('/env'))
    expect(got).to eq(["v\u00e4lue 1", '', nil, true, 'default', "v\u00e4lue 1", true])
  end

  it 'Nginx::Headers_in.new is the current request\'s headers (any case, nil when absent, all, user_agent)' do
    got = JSON.parse(get('/headers_in', nil, 'X-Spec' => 'one two', 'User-Agent' => 'spec/1.0'))
    expect(got).to eq(['one two', 'one two', nil, 'one two', 'spec/1.0', true])
  end
end
