#!/usr/bin/env bash
# Installs every Debian 12 (bookworm) package gateway needs to build, test,
# run and benchmark. Idempotent: installs only what `dpkg -s` reports
# missing, runs `apt-get update` only then, and prints nothing on success
# when everything is already there. Works as root, or through sudo.
#
#   build:      build-essential (gcc, make; gcc-12 brings libasan8/libubsan1
#               through libgcc-12-dev, so `-fsanitize=address,undefined`
#               needs nothing more), pkg-config
#   libraries:  mruby + libmruby-dev (mrbc, libmruby), libevent-dev, libmimalloc-dev,
#               libc-ares-dev, node-llhttp (llhttp's C sources),
#               libpcre2-dev (Regexp and regex locations: PCRE2 8-bit, with JIT)
#   driver:     ruby, rake, ruby-rspec (RSpec 3.12: the end-to-end specs)
#   tests:      python3 (stdlib-only scripted peers), iproute2 (ss), procps,
#               dnsmasq-base (a real DNS server on a loopback port for the DNS specs),
#               slowhttptest (a slow-client attack in the hardening specs)
#   benchmark:  wrk, apache2-utils (ab); curl (README's first requests)
#   redis:      libhiredis-dev (Async::Redis parses replies with hiredis's reader),
#               redis-server (the real server the Redis specs start on free ports)
#   browser:    chromium (the dashboard page is tested in headless Chromium)
set -euo pipefail

packages=(
  build-essential pkg-config
  mruby libmruby-dev libevent-dev libc-ares-dev node-llhttp libmimalloc-dev libpcre2-dev
  ruby rake ruby-rspec
  python3 iproute2 procps dnsmasq-base slowhttptest
  wrk apache2-utils curl
  libhiredis-dev redis-server
  chromium
)

missing=()
for p in "${packages[@]}"; do
  # `dpkg -s` succeeds for removed-but-configured packages too; check Status.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup.sh: missing packages (${missing[*]}) and not root, no sudo" >&2
  exit 1
fi

echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$log" 2>&1 ||
   ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
       "${missing[@]}" >>"$log" 2>&1 </dev/null; then
  cat "$log" >&2
  echo "setup.sh: apt-get failed" >&2
  exit 1
fi
