# /etc/gateway/gateway.rb: the gateway's configuration, an mruby script
# (gateway.rb(5); /usr/share/doc/gateway). Check it with
#   gateway -t -f /etc/gateway/gateway.rb
# and apply it with `systemctl reload gateway` (no connection is refused).

# The master runs as root to bind port 80; its workers run as this user.
user "gateway"
pid "/run/gateway/gateway.pid"
error_log "/var/log/gateway/error.log", level: :notice
access_log "/var/log/gateway/access.log", format: :combined

# Your sites, upstreams and settings: every *.rb file of conf.d/, in sorted
# order (a server there may not take port 80 while the default site below
# has it: edit or remove that one).
include "conf.d/*.rb"

# The default site: the files of /var/www/html.
server listen: 80, workers: :auto do
  location "/", root: "/var/www/html", index: ["index.html", "index.htm", "index.gateway-debian.html"]
end

# The status page (JSON; ?format=prometheus) and the live dashboard, on
# the loopback interface only: curl http://127.0.0.1:8081/status
server listen: "127.0.0.1:8081", workers: 1 do
  location "/status", status: true
  location "/dashboard", dashboard: true
end
