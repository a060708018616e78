# Debian's redis-server for the specs: started on a free port with its own
# temporary folder (no persistence), stopped by PID; and a tiny blocking RESP
# client for checking what the gateway did.
require 'socket'
require 'tmpdir'
require 'fileutils'
require_relative 'spec_helper'
require_relative 'peer_server'

class RedisServer
  include PeerServer
  BIN = '/usr/bin/redis-server'

  # args: more redis-server options (e.g. ['--replicaof', '127.0.0.1', '6379']).
  def initialize(port = GatewaySpec.free_port, args: [])
    @port = port
    @args = args
    @dir = Dir.mktmpdir('gateway-redis-')
    start
  end

  def start
    @pid = Process.spawn(*argv, in: File::NULL, out: File.join(@dir, 'redis.log'), err: [:child, :out])
    GatewaySpec.poll("#{self.class} on port #{@port}", timeout: 10) do
      ready?
    rescue SystemCallError, IOError
      false
    end
  end

  def argv
    [BIN, '--port', @port.to_s, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', @dir,
     '--daemonize', 'no', *@args]
  end

  def ready?
    cmd('PING') == 'PONG'
  end

  # One command on a connection of its own: the reply, or a RuntimeError with an error reply's message.
  def cmd(*args)
    RedisServer.cmd(@port, *args)
  end

  def self.cmd(port, *args)
    s = TCPSocket.new('127.0.0.1', port)
    s.write("*#{args.size}\r\n" + args.map { |a| "$#{a.to_s.bytesize}\r\n#{a}\r\n" }.join)
    read_reply(s)
  ensure
    s&.close
  end

  def self.read_reply(s)
    line = s.gets("\r\n") or raise IOError, 'redis closed'
    line = line.chomp("\r\n")
    case line[0]
    when '+' then line[1..]
    when '-' then raise line[1..]
    when ':' then line[1..].to_i
    when '$'
      n = line[1..].to_i
      return nil if n < 0
      data = s.read(n + 2)
      data[0, n]
    when '*'
      n = line[1..].to_i
      n < 0 ? nil : Array.new(n) { read_reply(s) }
    end
  end
end

# A TCP server that accepts and then does what the block says with each
# connection (never answering, or answering garbage); counts connections.
class FakeRedis
  attr_reader :port, :accepted

  def initialize(&on_conn)
    @server = TCPServer.new('127.0.0.1', 0)
    @port = @server.addr[1]
    @accepted = 0
    @socks = []
    @thread = Thread.new do
      loop do
        c = @server.accept
        @accepted += 1
        @socks << c
        Thread.new { on_conn&.call(c) rescue nil }
      end
    rescue IOError, SystemCallError
      nil
    end
  end

  def stop
    @server.close
    @socks.each { |s| s.close rescue nil }
    @thread.join(1)
  end
end

# One `redis-server --sentinel` watching the master on master_port under
# the name `name`, with a 1 s down-after (a failover within seconds).
class RedisSentinel < RedisServer
  def initialize(master_port, name: 'mymaster', quorum: 2, port: GatewaySpec.free_port)
    @port = port
    @master_port = master_port
    @name = name
    @dir = Dir.mktmpdir('gateway-sentinel-')
    File.write(File.join(@dir, 'sentinel.conf'), <<~CONF)
      port #{@port}
      bind 127.0.0.1
      dir #{@dir}
      sentinel monitor #{name} 127.0.0.1 #{master_port} #{quorum}
      sentinel down-after-milliseconds #{name} 1000
      sentinel failover-timeout #{name} 4000
      sentinel parallel-syncs #{name} 1
    CONF
    start
  end

  def argv
    [BIN, File.join(@dir, 'sentinel.conf'), '--sentinel']
  end

  def ready?
    cmd('SENTINEL', 'get-master-addr-by-name', @name) == ['127.0.0.1', @master_port.to_s]
  end

  # Three sentinels watching master (with one replica) that know the replica
  # and each other, so a failover can happen.
  def self.start_three(master, name: 'mymaster', ports: Array.new(3) { GatewaySpec.free_port })
    sentinels = ports.map { |p| RedisSentinel.new(master.port, name: name, port: p) }
    GatewaySpec.poll('the sentinels to see the replica and each other', timeout: 20) do
      sentinels.all? do |s|
        m = s.cmd('SENTINEL', 'master', name).each_slice(2).to_h
        m['num-slaves'] == '1' && m['num-other-sentinels'] == '2'
      end
    end
    sentinels
  end
end
