# Which mruby gems are linked into build/gateway, and how the C is compiled.
# Same shape as mruby's own build_config.rb: `conf.gem 'path'` per gem, in
# dependency order (each gem's C init runs first, then its mrblib).
Gateway::Build.configure do |conf|
  conf.gem 'mrbgems/mruby-gateway-core'      # Gateway module, errors, logging
  conf.gem 'mrbgems/mruby-gateway-regexp'    # Regexp, MatchData, String#sub/gsub/scan/split with one (PCRE2)
  conf.gem 'mrbgems/mruby-gateway-config'    # server / location / upstream DSL
  conf.gem 'mrbgems/mruby-gateway-request'   # Gateway::Request, responses
  conf.gem 'mrbgems/mruby-gateway-async'     # Async.sleep, Async::HTTP
  conf.gem 'mrbgems/mruby-httprequest'       # the deliberately blocking client
  conf.gem 'mrbgems/mruby-gateway-nginx'     # ngx_mruby compatibility names
  conf.gem 'mrbgems/mruby-gateway-json'      # JSON.parse / generate (YAJL)
  conf.gem 'mrbgems/mruby-gateway-util'      # Digest, Base64, URL escaping, Time formats, ENV
  conf.gem 'mrbgems/mruby-gateway-shdict'    # Gateway::SharedDict (shared_dict)
  conf.gem 'mrbgems/mruby-gateway-cache'     # Gateway::Cache (cache zones, a location's cache:, purge)
  conf.gem 'mrbgems/mruby-gateway-redis'     # Async::Redis (hiredis's reader)
  conf.gem 'mrbgems/mruby-gateway-tarantool' # Async::Tarantool (iproto, msgpack-c)
  conf.gem 'mrbgems/mruby-gateway-websocket' # Gateway::WebSocket (websocket: locations)

  # Fault injection (GatewayTest.hold_shdict_lock) for the specs: linked only
  # into build/gateway-test, with gateway/shm/shdict.c compiled under -DGW_TEST_HOOKS.
  conf.test_gem 'tools/testhooks', recompile: %w[gateway/shm/shdict.c]

  conf.cflags  = %w[-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fno-strict-aliasing]
  conf.ldflags = %w[]
  # The Debian package's hardening flags (debian/rules sets these from
  # dpkg-buildflags); empty otherwise.
  conf.cflags += ENV.fetch('GATEWAY_CFLAGS', '').split
  conf.ldflags += ENV.fetch('GATEWAY_LDFLAGS', '').split
  # mimalloc replaces glibc's malloc for the whole process (mruby, libevent,
  # c-ares, ours): a proxied request frees and allocates in bursts that overflow
  # glibc's small per-size caches (7 blocks each), and mimalloc's free lists do
  # not; ~14% fewer instructions per request in the async front.
  conf.libs = %w[-lmimalloc]

  # `rake test:asan` builds build/asan/gateway with these and runs every test.
  # ASan brings its own allocator (and must see every malloc): no mimalloc.
  conf.variant :asan,
    cflags:  %w[-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined],
    ldflags: %w[-fsanitize=address,undefined],
    libs:    %w[]
end
