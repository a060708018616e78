# HAProxy (Debian's) as a spec's balancer: started with its own config in
# the example's folder, in the foreground (-db), stopped by PID afterwards.
module HAProxyHelper
  def haproxy?
    system('which haproxy > /dev/null')
  end

  # Writes cfg to spec_dir/haproxy.cfg and starts haproxy on it; its pid.
  def start_haproxy_cfg(cfg)
    path = File.join(spec_dir, 'haproxy.cfg')
    File.write(path, cfg)
    @haproxy = Process.spawn('haproxy', '-db', '-f', path, out: "#{path}.log", err: [:child, :out], pgroup: true)
  end

  def stop_haproxy
    return unless @haproxy

    Process.kill('TERM', @haproxy) rescue nil
    Process.wait(@haproxy) rescue nil
    @haproxy = nil
  end
end
