# Debian's tarantool for the specs: started on a free port with its own Lua
# init script and temporary work directory (no WAL, nothing persisted),
# stopped by PID. The script makes a space, a user with a password, and the
# functions the specs and examples/tarantool.rb call.
require 'socket'
require 'tmpdir'
require 'fileutils'
require_relative 'spec_helper'
require_relative 'peer_server'

class TarantoolServer
  include PeerServer
  BIN = '/usr/bin/tarantool'
  USER = 'gw'
  PASSWORD = 'secret'
  attr_reader :dir

  INIT = <<~'LUA'
    local port, dir = arg[1], arg[2]
    box.cfg{work_dir = dir, memtx_dir = dir, wal_mode = 'none', log = dir .. '/tarantool.log', background = false}
    box.schema.user.create('gw', {password = 'secret'})
    box.schema.user.grant('gw', 'read,write,execute', 'universe')
    box.schema.user.grant('guest', 'read,write,execute,create,drop,alter', 'universe') -- SQL DDL in the specs
    local kv = box.schema.space.create('kv')
    kv:create_index('primary', {parts = {1, 'unsigned'}})
    kv:create_index('by_name', {parts = {2, 'string'}, unique = false})
    local fiber = require('fiber')
    connects, disconnects = 0, 0
    box.session.on_connect(function() connects = connects + 1 end)
    box.session.on_disconnect(function() disconnects = disconnects + 1 end)
    function process_request(req) return {200, {["x-a"] = "1"}, "body"} end
    function echo(...) return ... end
    function slow(seconds, v) fiber.sleep(seconds) return v end
    function fail(msg) error(msg) end
    function conn_counts() return connects, disconnects end
    box.cfg{listen = '127.0.0.1:' .. port} -- only now: a client (a restart spec's) never meets a half-made schema
    local f = io.open(dir .. '/ready', 'w') f:write('ok') f:close()
  LUA

  def initialize(port = GatewaySpec.free_port)
    @port = port
    @dir = Dir.mktmpdir('gateway-tarantool-')
    File.write(File.join(@dir, 'init.lua'), INIT)
    start
  end

  def start
    @pid = Process.spawn(BIN, File.join(@dir, 'init.lua'), @port.to_s, @dir, chdir: @dir, in: File::NULL,
                         out: File.join(@dir, 'stdout.log'), err: [:child, :out])
    ready = File.join(@dir, 'ready')
    File.delete(ready) if File.exist?(ready)
    GatewaySpec.poll("tarantool on port #{@port}", timeout: 10) do
      next false unless File.exist?(ready)
      s = TCPSocket.new('127.0.0.1', @port)
      (s.read(128) || '').start_with?('Tarantool')
    rescue SystemCallError, IOError
      false
    ensure
      s&.close
    end
  end
end

# examples/tarantool.lua, the example's and the bench's Tarantool: iproto on
# port, its Lua HTTP/1.1 responder on http_port (both free ports by
# default), a temporary work directory; stopped by PID.
class TarantoolExample
  include PeerServer
  SCRIPT = File.join(GatewaySpec::ROOT, 'examples', 'tarantool.lua')
  attr_reader :http_port, :dir

  def initialize(port = GatewaySpec.free_port, http_port = GatewaySpec.free_port)
    @port = port
    @http_port = http_port
    @dir = Dir.mktmpdir('gateway-tarantool-example-')
    @log = File.join(@dir, 'tarantool.log')
    @pid = Process.spawn(TarantoolServer::BIN, SCRIPT, @port.to_s, @http_port.to_s, @dir, chdir: @dir,
                         in: File::NULL, out: @log, err: [:child, :out])
    # The responder listens last: once it accepts, iproto and the grant are there.
    GatewaySpec.poll("examples/tarantool.lua on ports #{@port}, #{@http_port}", timeout: 10) do
      raise "examples/tarantool.lua exited:\n#{log}" if Process.waitpid(@pid, Process::WNOHANG)
      TCPSocket.new('127.0.0.1', @http_port).close
      true
    rescue SystemCallError
      false
    end
  end

  def log
    File.exist?(@log) ? File.read(@log) : ''
  end
end
