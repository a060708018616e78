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
    @pid = Process.spawn(BIN, '--port', @port.to_s, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                         '--dir', @dir, '--daemonize', 'no', *@args, in: File::NULL,
                         out: File.join(@dir, 'redis.log'), err: [:child, :out])
    GatewaySpec.poll("redis-server on port #{@port}", timeout: 10) do
      cmd('PING') == 'PONG'
    rescue SystemCallError, IOError
      false
    end
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
