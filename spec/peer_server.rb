# What the real servers the specs start (redis_helper.rb, tarantool_helper.rb)
# share: a free port, a temporary folder of their own, stopped by PID. An
# includer sets @port, @dir and @pid (in its start).
require 'fileutils'

module PeerServer
  attr_reader :port, :pid

  def stop
    return unless @pid
    Process.kill('TERM', @pid)
    Process.wait(@pid)
    @pid = nil
  rescue Errno::ESRCH, Errno::ECHILD
    @pid = nil
  end

  def destroy
    stop
    FileUtils.rm_rf(@dir)
  end

  def addr
    "127.0.0.1:#{@port}"
  end
end
