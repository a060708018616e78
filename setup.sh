#!/usr/bin/env bash
# Installs every Debian 12 (bookworm) package gateway needs to build, test,
# run and benchmark, and fetches the source of Debian's mruby package, which
# the build compiles itself (tools/mruby/build_config.rb: Debian's prebuilt
# libmruby lacks the VM hook that cpu_limit: needs to interrupt a handler).
# Idempotent: installs only what `dpkg -s` reports missing, runs `apt-get
# update` only then, and prints nothing on success when everything is
# already there. Works as root, or through sudo.
#
#   build:      build-essential (gcc, make; gcc-12 brings libasan8/libubsan1
#               through libgcc-12-dev, so `-fsanitize=address,undefined`
#               needs nothing more), pkg-config
#   mruby:      dpkg-dev (`apt-get source` unpacks with dpkg-source and applies
#               Debian's patches), bison (in Debian's Build-Depends of mruby:
#               mruby's build regenerates its parser with it if parse.y is
#               newer than the shipped y.tab.c); ruby and rake below run
#               mruby's own Rakefile
#   libraries:  libevent-dev, libmimalloc-dev, libc-ares-dev, node-llhttp
#               (llhttp's C sources),
#               libpcre2-dev (Regexp and regex locations: PCRE2 8-bit, with JIT),
#               libyajl-dev (JSON.parse's event parser: mruby-gateway-json),
#               libssl-dev (libcrypto: Digest and Base64 in mruby-gateway-util)
#   driver:     ruby, rake, ruby-rspec (RSpec 3.12: the end-to-end specs)
#   tests:      python3 (stdlib-only scripted peers), iproute2 (ss), procps,
#               dnsmasq-base (a real DNS server on a loopback port for the DNS specs),
#               slowhttptest (a slow-client attack in the hardening specs)
#   benchmark:  wrk, apache2-utils (ab); curl (README's first requests)
#   redis:      libhiredis-dev (Async::Redis parses replies with hiredis's reader),
#               redis-server (the real server the Redis specs start on free ports)
#   tarantool:  libmsgpack-dev (Async::Tarantool encodes and decodes iproto's
#               msgpack with msgpack-c), tarantool (2.6: the real server the
#               Tarantool specs and examples/tarantool.rb start on free ports)
#   browser:    chromium (the dashboard page is tested in headless Chromium)
#   fastcgi:    php8.2-fpm (the real FastCGI backend of spec/fastcgi_spec.rb and
#               rake bench:fastcgi; its binary is run by them, never the service)
#   TLS, HTTP/2: libssl-dev (OpenSSL 3: server-side TLS), libnghttp2-dev (the
#               HTTP/2 frame layer), openssl (the specs make their certificates),
#               nghttp2-client (nghttp, h2load), python3-h2 (hostile frame
#               sequences in spec/http2_spec.rb); curl (--http2 in the specs)
#   static:     media-types (/etc/mime.types: Content-Type of static files)
#   websocket:  python3-websockets (the real client and echo upstream of
#               spec/websocket_proxy_spec.rb)
#   HTTPS upstreams: ca-certificates (the system CAs that https:// upstreams
#               are verified against by default); nginx (the TLS upstream of
#               spec/https_upstream_spec.rb and rake bench:https_upstream)
#   fuzzing:    clang, libclang-rt-14-dev (libFuzzer's runtime and clang's
#               ASan/UBSan for it: `rake fuzz:ci`, which .ci/run runs, builds
#               every target in spec/fuzz/ with -fsanitize=fuzzer)
#   grpc:       python3-grpcio, python3-grpc-tools (the real gRPC server and
#               client of spec/grpc_spec.rb and rake bench:grpc, stubs made
#               with grpc_tools.protoc; it imports pkg_resources without
#               depending on python3-pkg-resources, so that is listed too);
#               nginx (grpc_pass, the bench's peer)
#   fleet:      haproxy (the L4 balancer in front of the gateway with send-proxy /
#               send-proxy-v2 in spec/proxy_protocol_spec.rb; its binary is run
#               by the spec on free ports, never the service)
#   compression: zlib1g-dev, libbrotli-dev, libzstd-dev (gzip, br and zstd on
#               the fly: gateway/core/encoder.c); brotli and zstd (the CLI decoders
#               spec/compress_spec.rb checks bodies with)
#   package:    debhelper (dpkg-buildpackage of debian/: `rake deb`), lintian
#               (its check), ronn (gateway(8) and gateway.rb(5) from
#               docs/man/*.md; lighter than pandoc: ruby is here already),
#               debootstrap (the fresh bookworm root of `rake test:package`)
#
# mruby's source: `apt-get source mruby` (3.1.0 in bookworm, Debian's patches
# applied) unpacked into $GATEWAY_MRUBY_SRC, by default
# ${XDG_CACHE_HOME:-~/.cache}/gateway/mruby, where tools/mruby/mruby.rb looks
# for it; never into the checkout. If apt has no deb-src entry for bookworm,
# this script adds its own, /etc/apt/sources.list.d/gateway-deb-src.sources,
# with the URIs, components and key of the system's bookworm `deb` entry.
set -euo pipefail

packages=(
  build-essential pkg-config
  dpkg-dev bison
  libevent-dev libc-ares-dev node-llhttp libmimalloc-dev libpcre2-dev
  libyajl-dev libssl-dev
  ruby rake ruby-rspec
  python3 iproute2 procps dnsmasq-base slowhttptest
  wrk apache2-utils curl
  libhiredis-dev redis-server
  libmsgpack-dev tarantool
  chromium
  php8.2-fpm
  libssl-dev libnghttp2-dev openssl nghttp2-client python3-h2 media-types
  python3-websockets
  ca-certificates nginx
  python3-grpcio python3-grpc-tools python3-pkg-resources
  clang libclang-rt-14-dev
  haproxy
  zlib1g-dev libbrotli-dev libzstd-dev brotli zstd
  debhelper lintian ronn debootstrap
)

missing=()
for p in "${packages[@]}"; do
  # `dpkg -s` succeeds for removed-but-configured packages too; check Status.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

mruby_src=${GATEWAY_MRUBY_SRC:-${XDG_CACHE_HOME:-$HOME/.cache}/gateway/mruby}
[ ${#missing[@]} -eq 0 ] && [ -f "$mruby_src/debian/changelog" ] && exit 0

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    env DEBIAN_FRONTEND=noninteractive "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo env DEBIAN_FRONTEND=noninteractive "$@"
  else
    echo "setup.sh: need root for: $* (not root, no sudo)" >&2
    exit 1
  fi
}

log=$(mktemp)
work=
trap 'rm -f "$log"; [ -z "$work" ] || rm -rf "$work"' EXIT
fail() {
  cat "$log" >&2
  echo "setup.sh: $1" >&2
  exit 1
}

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  as_root apt-get update -q >"$log" 2>&1 || fail "apt-get update failed"
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1 </dev/null ||
    fail "apt-get install failed"
fi

# A deb-src entry for bookworm, in deb822 form, derived from the system's
# `deb` entry for bookworm: debian.sources (deb822, Debian 12's default) or
# an old-style sources.list.
deb_src_entry() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ]; then
    awk '
      function flush() {
        if (!done && types ~ /(^| )deb( |$)/ && suites ~ /(^| )bookworm( |$)/) {
          printf "Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: %s\n", uris, comps
          if (key != "") printf "Signed-By: %s\n", key
          done = 1
        }
        types = uris = suites = comps = key = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { v = $0; sub(/^[^:]*:[ \t]*/, "", v) }
      tolower($1) == "types:" { types = v }
      tolower($1) == "uris:" { uris = v }
      tolower($1) == "suites:" { suites = v }
      tolower($1) == "components:" { comps = v }
      tolower($1) == "signed-by:" { key = v }
      END { flush() }' "$f"
    return
  fi
  [ -f /etc/apt/sources.list ] || return 0
  awk '
    $1 == "deb" && !done {
      key = ""; i = 2
      if ($2 ~ /^\[/) {
        for (; i <= NF; i++) {
          if ($i ~ /^\[?signed-by=/) { key = $i; sub(/^\[?signed-by=/, "", key); sub(/\]$/, "", key) }
          if ($i ~ /\]$/) { i++; break }
        }
      }
      if ($(i + 1) != "bookworm") next
      comps = ""
      for (j = i + 2; j <= NF && $j !~ /^#/; j++) comps = comps (comps == "" ? "" : " ") $j
      printf "Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: %s\n", $i, comps
      if (key != "") printf "Signed-By: %s\n", key
      done = 1
    }' /etc/apt/sources.list
}

fetch_mruby_source() {
  work=$(mktemp -d)
  (cd "$work" && apt-get source -q mruby) >>"$log" 2>&1 || return 1
  local dir
  dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'mruby-*' | head -n 1)
  [ -n "$dir" ] && [ -f "$dir/debian/changelog" ] || return 1
  mkdir -p "$(dirname "$mruby_src")"
  rm -rf "$mruby_src"
  mv "$dir" "$mruby_src"
}

if [ ! -f "$mruby_src/debian/changelog" ]; then
  echo "setup.sh: fetching mruby's source package (apt-get source mruby) into $mruby_src" >&2
  if ! apt-get source -q --print-uris mruby >>"$log" 2>&1; then
    # No deb-src entry yet: add ours, then refresh the package lists.
    entry=$(deb_src_entry)
    [ -n "$entry" ] || fail "no 'deb' entry for bookworm in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list to derive a deb-src entry from"
    list=/etc/apt/sources.list.d/gateway-deb-src.sources
    printf '# Added by gateway'"'"'s setup.sh: Debian'"'"'s source packages, for `apt-get source mruby`.\n%s\n' "$entry" |
      as_root tee "$list" >/dev/null || fail "cannot write $list"
    as_root apt-get update -q >>"$log" 2>&1 || fail "apt-get update failed"
  fi
  fetch_mruby_source || fail "apt-get source mruby failed"
fi
