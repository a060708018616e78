# Async::Tarantool against Debian's tarantool (started here on a free port
# with its own init script, stopped by PID) and against scripted fake
# servers: every request kind, replies as Ruby objects, names of spaces and
# indexes, auth (chap-sha1), errors, pooled and pipelined connections, a slow
# call not delaying a fast one, timeouts, aborts that never desync a
# connection, refused and dropped connections, garbage.
require_relative 'spec_helper'
require_relative 'redis_helper' # FakeRedis: a scripted TCP server
require_relative 'tarantool_helper'
require_relative 'restart_helper'

RSpec.describe 'Async::Tarantool' do
  include RestartTraffic
  before(:all) { @tnt = TarantoolServer.new }
  after(:all) { @tnt&.destroy }

  def start(body, prelude: '')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      #{prelude}
      server listen: "127.0.0.1:#{@port}" do
        #{body}
      end
    RUBY
  end

  def get(path, timeout: 5)
    http_get(@port, path, timeout: timeout)
  end

  describe 'requests' do
    before(:each) do
      start(<<~RUBY, prelude: %(tarantool :tnt, servers: ["#{@tnt.addr}"], pool: 1, timeout: 2.0))
        location "/api" do
          t = Async::Tarantool.new("#{@tnt.addr}", timeout: 2.0)
          t.eval("box.space.kv:truncate()")
          out = []
          out << t.ping
          out << t.call("process_request", [{ "path" => "/" }])
          out << t.call("echo", [1, -2, 1.5, "s", nil, true, [1, [2]], { "a" => { "b" => 1 } }])
          out << t.eval("return ... + 1, 'x'", [41])
          out << t.insert("kv", [1, "one", 10])
          out << t.insert(512, [2, "two", 20])
          out << t.replace("kv", [3, "three", 30])
          out << t.select("kv", 0, 1)
          out << t.select("kv", "by_name", "two")
          out << t.select(:kv, "primary", [], iterator: :ge, limit: 2, offset: 1)
          out << t.select("kv", 0, [2], iterator: :lt)
          out << t.update("kv", 0, 1, [["+", 2, 5], ["=", 1, "uno"]])
          out << t.update("kv", 0, 99, [["+", 2, 5]])
          out << t.delete("kv", "primary", 3)
          out << t.delete("kv", 0, 3)
          out << t.upsert("kv", [4, "four", 1], [["+", 2, 1]])
          out << t.upsert("kv", [4, "four", 1], [["+", 2, 1]])
          out << t.select("kv", 0, 4)
          out.inspect
        end
        location "/named" do Async::Tarantool[:tnt].call("echo", "hi").inspect end
        location "/err" do
          begin
            Async::Tarantool[:tnt].call("fail", ["boom"])
          rescue Async::Tarantool::Error => e
            "\#{e.class} \#{e.is_a?(Gateway::Error)} \#{e.code} \#{e.message}"
          end
        end
        location "/dup" do
          begin
            Async::Tarantool[:tnt].insert("kv", [7, "seven"])
            Async::Tarantool[:tnt].insert("kv", [7, "seven"])
          rescue Async::Tarantool::Error => e
            "\#{e.code} \#{e.message}"
          end
        end
        location "/nospace" do
          begin
            Async::Tarantool[:tnt].select("nope", 0, 1)
          rescue Async::Tarantool::Error => e
            e.message
          end
        end
        location "/nofn" do Async::Tarantool[:tnt].call("no_such_function") end
        location "/slow" do Async::Tarantool[:tnt].call("slow", [0.8, "late"]).inspect end
        location "/echo" do |req| Async::Tarantool[:tnt].call("echo", [req.target.split("?", 2)[1]]).inspect end
        location "/counts" do Async::Tarantool[:tnt].call("conn_counts").inspect end
        location "/nopool" do Async::Tarantool[:nope] end
        location "/auth" do
          Async::Tarantool.new("#{@tnt.addr}", user: "gw", password: "secret").eval("return box.session.user()").inspect
        end
        location "/badauth" do
          begin
            Async::Tarantool.new("#{@tnt.addr}", user: "gw", password: "wrong").ping
          rescue Gateway::UpstreamError => e
            "\#{e.class}: \#{e.message}"
          end
        end
        location "/guest" do Async::Tarantool[:tnt].eval("return box.session.user()").inspect end
      RUBY
    end

    it 'each request kind, replies as Ruby objects, spaces and indexes by id or name' do
      r = get('/api')
      expect(r.status).to eq(200), @gw.log_tail
      expect(r.body).to eq('[true, [[200, {"x-a"=>"1"}, "body"]], ' \
                           '[1, -2, 1.5, "s", nil, true, [1, [2]], {"a"=>{"b"=>1}}], [42, "x"], ' \
                           '[1, "one", 10], [2, "two", 20], [3, "three", 30], [[1, "one", 10]], [[2, "two", 20]], ' \
                           '[[2, "two", 20], [3, "three", 30]], [[1, "one", 10]], [1, "uno", 15], nil, ' \
                           '[3, "three", 30], nil, nil, nil, [[4, "four", 2]]]')
    end

    it 'a config-level pool: Async::Tarantool[:name]; an unknown one is a clear error' do
      expect(get('/named').body).to eq('["hi"]')
      expect(get('/nopool').status).to eq(500)
      expect(@gw.log).to include('Async::Tarantool[:nope]: no such pool')
    end

    it "an error reply raises Async::Tarantool::Error (a Gateway::Error) with Tarantool's message and code" do
      expect(get('/err').body).to match(/\AAsync::Tarantool::Error true 32 .*boom\z/)
      expect(get('/dup').body).to match(/\A3 Duplicate key exists in unique index 'primary' in space 'kv'/)
      expect(get('/nospace').body).to eq('Async::Tarantool: no space named "nope"')
      expect(get('/nofn').status).to eq(500)
      expect(@gw.log).to include("Procedure 'no_such_function' is not defined")
    end

    it 'auth with chap-sha1; a wrong password fails the call (logged with the reason)' do
      expect(get('/guest').body).to eq('["guest"]')
      expect(get('/auth').body).to eq('["gw"]')
      expect(get('/badauth').body).to match(/Gateway::UpstreamError: tarantool 127.0.0.1:\d+: tarantool refused the user or password/)
      expect(@gw.log).to match(/AUTH as gw failed: Incorrect password supplied for user 'gw'/)
    end

    it 'requests are pipelined on one connection (pool: 1): a slow call does not delay a fast one' do
      t0 = GatewaySpec.now
      slow = Thread.new { get('/slow') }
      sleep 0.1
      fast = 3.times.map { |i| get("/echo?#{i}").body }
      expect(fast).to eq(['["0"]', '["1"]', '["2"]'])
      expect(GatewaySpec.now - t0).to be < slack(0.6)
      expect(slow.value.body).to eq('["late"]')
    end

    it 'connections are pooled per worker and reused across requests' do
      before = eval(get('/counts').body)
      20.times { |i| expect(get("/echo?#{i}").body).to eq("[\"#{i}\"]") }
      after = eval(get('/counts').body)
      expect(after[0] - before[0]).to eq(0)
    end

    it 'a client that goes away cancels the call; its connection is closed, never reused with a stale reply' do
      before = eval(get('/counts').body)
      c = connect(@port)
      c.request('GET', '/slow', { 'Host' => 'x' })
      sleep 0.2
      c.close
      GatewaySpec.poll('the retired connection to be closed') { eval(get('/counts').body)[1] > before[1] }
      sleep 0.8 # the aborted call's reply would arrive now
      10.times { |i| expect(get("/echo?n#{i}").body).to eq("[\"n#{i}\"]") }
    end
  end

  it 'a slow server: Gateway::TimeoutError after timeout:, the next call works on a new connection' do
    start(<<~RUBY)
      location "/t" do
        t = Async::Tarantool.new("#{@tnt.addr}", timeout: 0.3, pool: 1)
        begin
          t.call("slow", [1, "x"])
        rescue Gateway::TimeoutError => e
          "\#{e.class}: \#{e.message} / \#{t.call('echo', 'after').inspect}"
        end
      end
    RUBY
    t0 = GatewaySpec.now
    expect(get('/t').body).to match(/\AGateway::TimeoutError: tarantool 127.0.0.1:\d+ timed out after 0.3 s \/ \["after"\]\z/)
    expect(GatewaySpec.now - t0).to be_between(0.25, slack(1.0))
  end

  it 'refused: Gateway::UpstreamError' do
    dead = free_port
    start(<<~RUBY)
      location "/r" do
        begin
          Async::Tarantool.new("127.0.0.1:#{dead}").ping
        rescue Gateway::UpstreamError => e
          "\#{e.class}: \#{e.message}"
        end
      end
    RUBY
    expect(get('/r').body).to match(/Gateway::UpstreamError: tarantool 127.0.0.1:\d+: (connection to tarantool refused|tarantool is down)/)
  end

  greeting = "Tarantool 2.6.0 (Binary) 7b1d9c3e-0000-0000-0000-000000000000".ljust(63) + "\n" +
             'c2FsdHNhbHRzYWx0c2FsdHNhbHRzYWx0c2FsdHNhbHQ='.ljust(63) + "\n"

  {
    'garbage instead of a greeting' => ->(c, _) { c.write("HTTP/1.1 200 OK\r\n" * 10) },
    'garbage after the greeting' => ->(c, g) { c.write(g); c.readpartial(100); c.write("\xce\x00\x00\x00\x03\xc1\xc1\xc1") },
    'a reply to no request' => ->(c, g) { c.write(g); c.readpartial(100); c.write("\xce\x00\x00\x00\x06\x82\x00\x00\x01\xcd\x30\x39".b) },
    'a connection dropped mid-request' => ->(c, g) { c.write(g); c.readpartial(100); c.close }
  }.each do |what, script|
    it "#{what}: Gateway::UpstreamError, the connection closed, the next call opens a new one" do
      fake = FakeRedis.new { |c| script.call(c, greeting); sleep 3 }
      start(<<~RUBY)
        location "/g" do
          begin
            Async::Tarantool.new("127.0.0.1:#{fake.port}", timeout: 2).ping
          rescue Gateway::UpstreamError => e
            "\#{e.class}: \#{e.message}"
          end
        end
      RUBY
      expect(get('/g').body).to match(/\AGateway::UpstreamError: tarantool 127.0.0.1:\d+: /)
      expect(get('/g').body).to start_with('Gateway::UpstreamError')
      expect(fake.accepted).to eq(2)
    ensure
      fake&.stop
    end
  end
  it 'a restart mid-traffic: calls during it fail clearly or succeed, none hangs, all succeed once it is back' do
    other = TarantoolServer.new
    check_restart_mid_traffic(other, %(tarantool :other, servers: ["#{other.addr}"], pool: 4, timeout: 1.0),
                              %(Async::Tarantool[:other].call('echo', [req.query]).first), /tarantool 127.0.0.1:\d+/) # timeout: 1.0 bounds each call
  ensure
    other&.destroy
  end

  it 'many concurrent calls share few connections (one send per loop iteration) and each gets its own reply' do
    start(<<~RUBY, prelude: %(tarantool :tnt, servers: ["#{@tnt.addr}"], pool: 8, timeout: 2.0))
      location "/e" do |req| Async::Tarantool[:tnt].call("echo", [req.query]).first end
      location "/counts" do Async::Tarantool[:tnt].call("conn_counts").inspect end
    RUBY
    before = eval(get('/counts').body)
    bodies = 16.times.map do |i|
      Thread.new { 10.times.map { |j| get("/e?#{i}-#{j}").body } }
    end.map(&:value)
    expect(bodies).to eq(16.times.map { |i| 10.times.map { |j| "#{i}-#{j}" } })
    after = eval(get('/counts').body)
    expect(after[0] - before[0]).to be <= 1 # connects: 16 concurrent callers, under 64 in flight each
  end

  it 'a reply nested deeper than 32 levels: Gateway::UpstreamError, the connection stays usable' do
    start(<<~RUBY)
      location "/deep" do
        t = Async::Tarantool.new("#{@tnt.addr}", pool: 1)
        begin
          t.eval("local v = 1 for i = 1, 40 do v = {v} end return v")
          "no error"
        rescue Gateway::UpstreamError => e
          "\#{e.message} / \#{t.eval('return 1').inspect} / \#{t.eval('local v = 1 for i = 1, 20 do v = {v} end return v').flatten.inspect}"
        end
      end
    RUBY
    expect(get('/deep').body).to eq('tarantool sent a reply nested too deeply / [1] / [1]')
  end

  describe 'SQL: execute' do
    before(:each) do
      start(<<~RUBY)
        location "/sql" do
          t = Async::Tarantool.new("#{@tnt.addr}", timeout: 2.0)
          out = []
          t.execute("DROP TABLE IF EXISTS people")
          r = t.execute("CREATE TABLE people (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, age INTEGER)")
          out << [r.row_count, r.rows, r.columns]
          r = t.execute("INSERT INTO people (name, age) VALUES (?, ?), (?, ?)", ["ann", 31, "bob", nil])
          out << [r.row_count, r.autoincrement_ids]
          r = t.execute("SELECT id, name, age FROM people WHERE id = ?", [1])
          out << [r.columns, r.metadata, r.rows, r.row_count, r.size, r.to_h_rows]
          r = t.execute("SELECT name FROM people WHERE age IS NULL OR name = :n ORDER BY id", { n: "ann" })
          out << r.map(&:first)
          r = t.execute("UPDATE people SET age = age + 1 WHERE name = ?", ["ann"])
          out << r.row_count
          out << t.execute("SELECT COUNT(*) AS n FROM people").rows
          out.inspect
        end
        location "/sqlerr" do
          t = Async::Tarantool.new("#{@tnt.addr}")
          begin
            t.execute("SELEKT 1")
          rescue Async::Tarantool::Error => e
            "\#{e.class} \#{e.code} \#{e.message}"
          end
        end
        location "/sqlarg" do
          begin
            Async::Tarantool.new("#{@tnt.addr}").execute("SELECT 1", 5)
          rescue ArgumentError => e
            e.message
          end
        end
      RUBY
    end

    it 'DDL, DML with ? and :named binds, SELECT rows with column names and types' do
      r = get('/sql')
      expect(r.status).to eq(200), @gw.log_tail
      expect(r.body).to eq('[[1, [], []], [2, [1, 2]], ' \
                           '[["ID", "NAME", "AGE"], [{"name"=>"ID", "type"=>"integer"}, {"name"=>"NAME", "type"=>"string"}, ' \
                           '{"name"=>"AGE", "type"=>"integer"}], [[1, "ann", 31]], nil, 1, ' \
                           '[{"ID"=>1, "NAME"=>"ann", "AGE"=>31}]], ["ann", "bob"], 1, [[2]]]')
    end

    it 'an SQL error raises Async::Tarantool::Error with the message and code; bad binds an ArgumentError' do
      expect(get('/sqlerr').body).to match(/\AAsync::Tarantool::Error \d+ Syntax error .*SELEKT/)
      expect(get('/sqlarg').body).to eq('Async::Tarantool#execute: binds must be an Array or a Hash')
    end
  end
end
