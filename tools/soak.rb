# Soak: drives a long, bounded load at the real binary and reports how the
# workers' memory (RSS) and open file descriptors move, so leaks show as a
# slope. Loopback only; every phase is bounded by time.
#
#   ruby tools/soak.rb [--requests N] [--mix hello|async|proxy|all] [--aborts]
#
# It writes its own config (a hello handler, the seed's async chain, a proxy)
# on free ports, starts build/gateway (GATEWAY_BIN to override), runs wrk in
# phases until N requests were made, samples each worker's VmRSS and fd count
# after every phase, and prints the samples and the slope between the second
# sample (after warm-up) and the last.
require 'socket'
require 'optparse'

opts = { requests: 1_000_000, mix: 'all', aborts: false, bin: ENV.fetch('GATEWAY_BIN', 'build/gateway') }
OptionParser.new do |o|
  o.on('--requests N', Integer) { |v| opts[:requests] = v }
  o.on('--mix M', %w[hello async proxy all]) { |v| opts[:mix] = v }
  o.on('--aborts', 'also open and drop connections mid-request between phases') { opts[:aborts] = true }
end.parse!

def free_port
  s = TCPServer.new('127.0.0.1', 0)
  s.addr[1]
ensure
  s&.close
end

front = free_port
back = free_port
config = <<~RUBY
  server listen: "127.0.0.1:#{back}", workers: 1 do
    location "/mruby" do
      Nginx::Async.sleep 10
      Nginx.echo "done"
    end
    location "/ok" do
      "ok"
    end
  end
  server listen: "127.0.0.1:#{front}", workers: 1 do
    location "/hello" do
      "ok"
    end
    location "/sub", proxy_pass: "http://127.0.0.1:#{back}/mruby"
    location "/async" do
      Nginx::Async::HTTP.sub_request "/sub"
      Nginx.rputs Nginx::Async::HTTP.last_response.body
    end
    location "/proxy", proxy_pass: "http://127.0.0.1:#{back}/ok"
    location "/sleep" do
      Async.sleep 0.2
      "slept"
    end
  end
RUBY
path = "/tmp/gateway-soak-#{Process.pid}.rb"
File.write(path, config)
log = "/tmp/gateway-soak-#{Process.pid}.log"
pid = Process.spawn(opts[:bin], '-f', path, out: log, err: log)

def wait_port(port)
  200.times do
    begin
      TCPSocket.new('127.0.0.1', port).close
      return
    rescue SystemCallError
      sleep 0.05
    end
  end
  raise "port #{port} never opened"
end

def workers_of(master)
  Dir['/proc/[0-9]*/stat'].filter_map do |f|
    fields = File.read(f).split(') ').last.split
    f[%r{/proc/(\d+)/}, 1].to_i if fields[1].to_i == master
  rescue SystemCallError
    nil
  end
end

def sample(pids)
  pids.map do |p|
    rss = File.read("/proc/#{p}/status")[/VmRSS:\s+(\d+)/, 1].to_i
    fds = Dir["/proc/#{p}/fd/*"].size
    [p, rss, fds]
  end
end

def abort_burst(port, paths, n)
  n.times do |i|
    s = TCPSocket.new('127.0.0.1', port)
    s.write("GET #{paths[i % paths.size]} HTTP/1.1\r\nHost: x\r\n\r\n")
    s.close
  end
end

begin
  wait_port(front)
  wait_port(back)
  paths = case opts[:mix]
          when 'hello' then ['/hello']
          when 'async' then ['/async']
          when 'proxy' then ['/proxy']
          else %w[/hello /async /proxy]
          end
  workers = workers_of(pid)
  samples = []
  done = 0
  phase = 0
  deadline = Time.now + 1800
  while done < opts[:requests] && Time.now < deadline
    path_now = paths[phase % paths.size]
    out = `wrk -t1 -c50 -d5s http://127.0.0.1:#{front}#{path_now} 2>&1`
    n = out[/(\d+) requests in/, 1].to_i
    raise "wrk failed: #{out}" if n.zero?
    done += n
    abort_burst(front, %w[/sleep /async], 500) if opts[:aborts]
    phase += 1
    s = sample(workers)
    samples << [done, s]
    puts format('%10d requests  %s', done, s.map { |p, rss, fds| "pid #{p}: rss #{rss} KiB, fds #{fds}" }.join(' | '))
  end
  if samples.size >= 3
    first = samples[1]
    last = samples[-1]
    puts "\nslope from #{first[0]} to #{last[0]} requests:"
    first[1].zip(last[1]).each do |(p, rss0, fd0), (_, rss1, fd1)|
      per_m = (rss1 - rss0) * 1_000_000.0 / (last[0] - first[0])
      puts format('  worker %d: RSS %+d KiB (%+.1f KiB per million requests), fds %+d', p, rss1 - rss0, per_m, fd1 - fd0)
    end
  end
  crashed = File.read(log).lines.grep(/AddressSanitizer|runtime error|killed by signal/)
  puts(crashed.empty? ? 'log: no crash, no sanitizer report' : "log:\n#{crashed.join}")
ensure
  Process.kill('TERM', pid) rescue nil
  Process.wait(pid) rescue nil
  File.delete(path) rescue nil
end
