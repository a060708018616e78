#!/usr/bin/env bash
# rake test:package: the .deb as a new user meets it (docs/package.md).
#
#   tools/package/test.sh build/deb/gateway_VERSION_amd64.deb
#
# In a fresh `debootstrap --variant=minbase bookworm` root (build/package/root;
# debootstrap's downloads are cached in build/package/bookworm-minbase.tgz
# with --make-tarball, so later runs only unpack it), as root:
#   1. `apt-get install ./gateway_*.deb` (with its Recommends, as apt does by
#      default) pulls only runtime dependencies: no compiler, no -dev
#      package, no test peer; logrotate is installed first, as on a standard
#      Debian system;
#   2. `gateway -t -f /etc/gateway/gateway.rb` passes; `systemd-analyze
#      verify` (the root's own systemd) accepts the installed unit;
#   3. the unit's ExecStartPre and ExecStart run as systemd would run them:
#      the unit's environment (none but PATH), RuntimeDirectory=, its
#      CapabilityBoundingSet= and NoNewPrivileges= (setpriv), ProtectSystem=
#      strict with its ReadWritePaths= and PrivateTmp= (a private mount
#      namespace, the root read-only), in a private network namespace (its
#      own loopback, so port 80 is free whatever the host runs);
#      the default page answers on 127.0.0.1:80, workers run as `gateway`
#      with no capability, the status page answers on 127.0.0.1:8081;
#   4. a reload (the unit's ExecReload: HUP) and a logrotate run
#      (`logrotate -f /etc/logrotate.d/gateway`: USR1) happen under a curl
#      loop (at most 20000 requests or 60 s) with no failed request, and the
#      new logs are written;
#   5. the unit's stop (KillSignal=SIGQUIT) ends the master cleanly;
#   6. `apt-get purge gateway` (then a purge of the packages it pulled)
#      leaves no file, user or group behind: the file list equals the one
#      before the install, apt's and dpkg's own records aside.
# What no chroot can do: systemd itself is not PID 1 here, so the unit runs
# through these stand-ins (the other sandboxing options of the unit, e.g.
# ProtectKernelTunables=, are checked by systemd-analyze only).
set -euo pipefail

deb=$(realpath "$1")
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=$here/build/package
root=$dir/root
tarball=$dir/bookworm-minbase.tgz
mirror=${GATEWAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
log=$dir/test.log
started=$(date +%s)
mkdir -p "$dir"
: >"$log"

step() { printf 'test:package [%3ds] %s\n' $(($(date +%s) - started)) "$*"; }
fail() {
  echo "test:package: FAILED: $*" >&2
  echo "--- last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
}
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

unmount_all() {
  for m in dev/pts dev proc; do
    mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
  done
  return 0
}
# The root, removed only once nothing is mounted in it (never the host's /dev).
remove_root() {
  unmount_all
  if grep -q " $root/" /proc/mounts; then
    echo "test:package: something is still mounted under $root; not removing it" >&2
    exit 1
  fi
  rm -rf --one-file-system "$root"
}
# Processes this test started in the root (the gateway, chroot'ed there),
# found by their root folder: killed by pid, whatever went wrong.
kill_root_processes() {
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  return 0
}
cleanup() {
  kill_root_processes
  unmount_all
}
trap cleanup EXIT

# -- 1. a fresh root, the package installed -----------------------------------
step "a fresh debootstrap --variant=minbase bookworm in $root"
remove_root
if [ ! -s "$tarball" ]; then
  debootstrap --variant=minbase --make-tarball="$tarball" bookworm "$dir/tarball-work" "$mirror" >>"$log" 2>&1 ||
    fail "debootstrap --make-tarball"
  rm -rf "$dir/tarball-work"
fi
debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$mirror" >>"$log" 2>&1 ||
  fail "debootstrap --unpack-tarball"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The host's libraries come from bookworm's point releases and security
# updates: the root gets the same suites.
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
in_root apt-get update -q >>"$log" 2>&1 || fail "apt-get update in the root"

# logrotate and systemd, as a standard Debian system has them (not in
# minbase): the package only suggests logrotate, and systemd-analyze
# verifies the unit against the root's own systemd units.
in_root apt-get install -y -q --no-install-recommends logrotate systemd >>"$log" 2>&1 ||
  fail "apt-get install logrotate systemd"

# What the root holds now (apt's and dpkg's records aside): purge must
# come back to it.
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./sys -o -path ./run -o -path ./tmp \
    -o -path ./var/lib/apt -o -path ./var/cache/apt -o -path ./var/lib/dpkg -o -path ./var/cache/debconf \
    -o -path ./var/log/apt -o -path ./var/cache/ldconfig -o -path ./etc/ld.so.cache \) -prune -o -print |
    grep -v -E '^\./var/log/(dpkg|alternatives)\.log$' | sort)
}
snapshot >"$dir/files.before"
in_root dpkg-query -W -f='${Package}\n' | sort >"$dir/packages.before"

step "apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/"
in_root apt-get install -y -q "/tmp/$(basename "$deb")" >>"$log" 2>&1 || fail "apt-get install ./$(basename "$deb")"
in_root dpkg-query -W -f='${Package}\n' | sort >"$dir/packages.after"
pulled=$(comm -13 "$dir/packages.before" "$dir/packages.after" | tr '\n' ' ')
step "it pulled: $pulled"
for p in $pulled; do
  case $p in
  gcc* | cpp* | g++* | clang* | llvm* | build-essential | make | binutils* | libc6-dev | linux-libc-dev | *-dev | \
    ruby* | rake | bison | ronn | debhelper | dpkg-dev | redis* | nginx* | php* | tarantool* | chromium* | \
    python3* | curl | wrk | apache2* | dnsmasq* | slowhttptest | nghttp2-client)
    fail "apt-get install pulled $p, which is no runtime dependency" ;;
  esac
done

# -- 2. the configuration check, the unit -----------------------------------
step "gateway -t -f /etc/gateway/gateway.rb"
in_root gateway -t -f /etc/gateway/gateway.rb >>"$log" 2>&1 || fail "gateway -t -f /etc/gateway/gateway.rb"
unit=$root/lib/systemd/system/gateway.service
step "systemd-analyze verify gateway.service"
verify=$(in_root systemd-analyze verify --man=no /lib/systemd/system/gateway.service 2>&1) ||
  fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify complains: $verify"

# -- 3. the service as systemd runs it ---------------------------------------
unit_value() { sed -n "s/^$1=//p" "$unit"; }
start_pre=$(unit_value ExecStartPre)
start=$(unit_value ExecStart)
caps=$(unit_value CapabilityBoundingSet)
bounding=$(for c in $caps; do printf -- '-all,+%s\n' "${c#CAP_}"; done | tr 'A-Z' 'a-z' | sort -u | tr '\n' ',' |
  sed 's/-all,//g; s/^/-all,/; s/,$//')
rw_paths=$(unit_value ReadWritePaths)
[ "$(unit_value NoNewPrivileges)" = yes ] || fail "the unit has no NoNewPrivileges=yes"
[ "$(unit_value ProtectSystem)" = strict ] || fail "the unit has no ProtectSystem=strict"
[ "$(unit_value KillSignal)" = SIGQUIT ] || fail "the unit's stop is not graceful (KillSignal=SIGQUIT)"
run_dir=$(unit_value RuntimeDirectory)
step "the unit: ExecStart=$start; CapabilityBoundingSet=$caps; ReadWritePaths=$rw_paths"

# Everything from here runs in private mount and network namespaces, in
# $dir/service.sh, so that the read-only root and the loopback vanish with it.
cat >"$dir/service.sh" <<'SERVICE'
#!/usr/bin/env bash
# (written by tools/package/test.sh; runs inside unshare --mount --net)
set -euo pipefail
root=$1 bounding=$2 run_dir=$3 rw_paths=$4 start_pre=$5 start=$6 log=$7
fail() { echo "FAILED: $*"; exit 1; }
ip link set lo up
mount --make-rprivate /
# ProtectSystem=strict: the whole root read-only, but /proc, /dev and the
# ReadWritePaths=; RuntimeDirectory=: /run/gateway (root, 0755) in a /run
# read-only otherwise; PrivateTmp=: a /tmp of its own
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/tmp"
mount -t tmpfs tmpfs "$root/run"
mkdir -p "$root/run/$run_dir"
mount -o remount,bind,ro "$root/run"
for p in $rw_paths; do
  mount --bind "$root$p" "$root$p"
  mount -o remount,bind,rw "$root$p"
done
touch "$root/etc/gateway/probe" 2>/dev/null && fail "the root is writable: ProtectSystem=strict is not in force"

# What systemd does for this unit: a bare environment, the capability
# bounding set, no_new_privs (as_unit and the ExecStart line below).
as_unit() {
  chroot "$root" /usr/bin/setpriv --bounding-set="$bounding" --no-new-privs \
    /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin "$@"
}
as_unit $start_pre || fail "ExecStartPre ($start_pre) failed"
(exec chroot "$root" /usr/bin/setpriv --bounding-set="$bounding" --no-new-privs \
  /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin $start) >"$root/var/log/gateway/stdout.log" 2>&1 &
master=$!
trap 'kill -KILL $master 2>/dev/null || true' EXIT
echo "master $master"

get() { curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$@" 2>&1 || true; }
deadline=$(($(date +%s) + 15))
until [ "$(curl -sS --max-time 1 -o /dev/null -w '%{http_code}' http://127.0.0.1/ 2>/dev/null)" = 200 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "no answer on port 80 within 15 s: $(tail -n 5 "$root/var/log/gateway/error.log")"
  sleep 0.1
done
page=$(curl -sS --max-time 5 http://127.0.0.1/) || fail "GET / on port 80: $(cat "$root/var/log/gateway/stdout.log")"
grep -q 'Welcome to gateway' <<<"$page" || fail "GET / is not the default page: $page"
echo "default page: ok"
[ "$(get http://127.0.0.1:8081/status)" = 200 ] || fail "the status page does not answer on 127.0.0.1:8081"

workers=$(pgrep -P "$master" | tr '\n' ' ')
[ -n "$workers" ] || fail "no worker processes"
gw_uid=$(chroot "$root" id -u gateway)
for w in $workers; do
  uid=$(awk '/^Uid:/ { print $2 $3 $4 $5 }' "/proc/$w/status")
  [ "$uid" = "$gw_uid$gw_uid$gw_uid$gw_uid" ] || fail "worker $w runs as uid $uid, not gateway ($gw_uid)"
  eff=$(awk '/^CapEff:/ { print $2 }' "/proc/$w/status")
  [ "$eff" = 0000000000000000 ] || fail "worker $w keeps capabilities $eff"
done
echo "workers $workers: uid $gw_uid (gateway), no capability; master $(awk '/^CapBnd:/ { print $2 }' /proc/$master/status)"

# A bounded loop of requests across a reload and a log rotation.
loop_out=$(mktemp)
( n=0; failed=0; until_s=$(($(date +%s) + 60))
  while [ $n -lt 20000 ] && [ ! -e "$loop_out.stop" ] && [ "$(date +%s)" -lt "$until_s" ]; do
    code=$(get http://127.0.0.1/)
    [ "$code" = 200 ] || { failed=$((failed + 1)); echo "request $n: $code" >>"$loop_out.errors"; }
    n=$((n + 1))
  done
  echo "$n $failed" >"$loop_out" ) &
loop=$!
sleep 1
kill -HUP "$master"     # ExecReload=
for _ in $(seq 100); do grep -q 'reloaded: generation 1' "$root/var/log/gateway/error.log" && break; sleep 0.1; done
grep -q 'reloaded: generation 1' "$root/var/log/gateway/error.log" || fail "no reload in error.log"
for _ in $(seq 100); do
  left=$(for w in $workers; do [ -e "/proc/$w" ] && [ "$(awk '{ print $3 }' "/proc/$w/stat")" != Z ] && echo "$w"; done || true)
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "the old workers ($left) still run 10 s after the reload: the master cannot stop them"
echo "reload: ok (the old workers finished)"
sleep 1
# logrotate as its own service would run it (its state file is its own
# business: kept in /tmp here, the root being read-only)
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin logrotate -f --state /tmp/logrotate.status \
  /etc/logrotate.d/gateway ||
  fail "logrotate -f /etc/logrotate.d/gateway"
for _ in $(seq 100); do grep -q 'reopened the log files' "$root/var/log/gateway/error.log" 2>/dev/null && break; sleep 0.1; done
grep -q 'reopened the log files' "$root/var/log/gateway/error.log" || fail "the master did not reopen its logs after logrotate"
sleep 1
[ -s "$loop_out" ] && fail "the request loop ended before the rotation: $(cat "$loop_out")"
touch "$loop_out.stop"
wait "$loop"
read -r total failed <"$loop_out"
echo "requests across the reload and the rotation: $total, failed: $failed"
[ "$failed" = 0 ] || fail "$failed of $total requests failed: $(head -5 "$loop_out.errors")"
[ "$total" -ge 50 ] || fail "only $total requests ran"
[ -s "$root/var/log/gateway/access.log.1" ] || fail "logrotate left no access.log.1"
get http://127.0.0.1/after-rotation >/dev/null
for _ in $(seq 50); do grep -q after-rotation "$root/var/log/gateway/access.log" 2>/dev/null && break; sleep 0.1; done
grep -q after-rotation "$root/var/log/gateway/access.log" || fail "the new access.log gets no request after the rotation"
echo "logrotate: ok ($(chroot "$root" stat -c '%U:%G %a' /var/log/gateway/access.log) access.log)"
problems=$(cat "$root"/var/log/gateway/error.log* | grep -E '\[(warn|error|crit)\]' || true)
[ -z "$problems" ] || fail "error.log: $problems"

kill -QUIT "$master"    # KillSignal=SIGQUIT: a graceful stop
for _ in $(seq 300); do kill -0 "$master" 2>/dev/null || break; sleep 0.1; done
kill -0 "$master" 2>/dev/null && fail "the master is still running 30 s after SIGQUIT"
wait "$master" && rc=0 || rc=$?
[ "$rc" = 0 ] || fail "the master exited with status $rc after SIGQUIT"
[ ! -e "$root/run/$run_dir/gateway.pid" ] || fail "the pid file is left after the stop"
trap - EXIT
echo "graceful stop: ok"
SERVICE
step "the service (unshare --mount --net): start, default page, reload and logrotate under load, stop"
if ! unshare --mount --net --fork bash "$dir/service.sh" "$root" "$bounding" "$run_dir" "$rw_paths" \
  "$start_pre" "$start" "$log" >"$dir/service.log" 2>&1; then
  cat "$dir/service.log" >>"$log"
  fail "the service: $(tail -n 3 "$dir/service.log")"
fi
sed 's/^/    /' "$dir/service.log"

# -- 6. removal ----------------------------------------------------------------
step "apt-get purge gateway; then the packages it pulled (apt's Recommends keep some from autoremove)"
in_root apt-get purge -y -q gateway >>"$log" 2>&1 || fail "apt-get purge gateway"
deps=$(for p in $pulled; do [ "$p" = gateway ] || printf '%s ' "$p"; done)
in_root apt-get purge -y -q $deps >>"$log" 2>&1 || fail "apt-get purge $deps"
in_root apt-get autoremove --purge -y -q >>"$log" 2>&1 || fail "apt-get autoremove --purge"
rm -f "$root/tmp/$(basename "$deb")"
snapshot >"$dir/files.after"
left=$(diff "$dir/files.before" "$dir/files.after" | grep '^[<>]' || true)
[ -z "$left" ] || fail "purge left the file list changed: $(echo "$left" | head -20)"
in_root getent passwd gateway >/dev/null && fail "purge left the user gateway"
in_root getent group gateway >/dev/null && fail "purge left the group gateway"
step "purge: nothing left behind ($(wc -l <"$dir/files.before") paths as before)"
remove_root # kept only when the test fails, to look into
step "passed in $(($(date +%s) - started)) s"
