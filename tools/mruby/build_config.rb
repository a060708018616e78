# mruby 3.1.0, built from Debian's source package (fetched by setup.sh with
# `apt-get source mruby`, Debian's patches applied) instead of linking
# Debian's prebuilt libmruby.a: that one lacks MRB_USE_DEBUG_HOOK, and the
# gateway needs the VM's code-fetch hook to interrupt a handler stuck in a CPU
# loop (cpu_limit:, gateway/script/cpu_limit.c).
#
# tools/build.rb runs mruby's own Rakefile with this file as MRUBY_CONFIG,
# out of tree: everything goes to $GATEWAY_MRUBY_OUT (build/mruby), the
# source folder is only read. Two targets, as the gateway has:
#   host  libmruby.a (-O3) and the mrbc that compiles our gems' mrblib
#   asan  libmruby.a under AddressSanitizer + UBSan, for `rake test:asan`
#
# The gems are Debian's (build_config/default.rb: the default gembox), so a
# script sees the same mruby as before; the tools other than mrbc and
# mruby-config (mirb, mruby, mruby-strip) are left out, they link nothing
# into the library. Debian's package gets MRB_USE_RATIONAL and
# MRB_USE_COMPLEX from the mruby-rational and mruby-complex gems; the same
# happens here. The defines every user of the headers must share end up in
# lib/libmruby.flags.mak, which tools/build.rb reads.
out = ENV.fetch('GATEWAY_MRUBY_OUT')
MRuby::Lockfile.disable # no build_config.rb.lock written next to this file

# Every define here changes struct layouts (mrb_state grows a
# code_fetch_hook): the gateway is compiled with the same ones.
GATEWAY_MRUBY_DEFINES = %w[MRB_USE_DEBUG_HOOK].freeze

def gateway_gems(conf)
  %w[stdlib stdlib-ext stdlib-io math metaprog].each { |box| conf.gembox box }
  conf.gem core: 'mruby-bin-config' # writes lib/libmruby.flags.mak
end

MRuby::Build.new('host', out) do |conf|
  conf.toolchain :gcc
  conf.cc.flags = %w[-std=gnu99 -O3 -g -Wall -Wundef -Wwrite-strings]
  conf.cc.defines += GATEWAY_MRUBY_DEFINES
  gateway_gems(conf)
  conf.gem core: 'mruby-bin-mrbc'
end

# GATEWAY_MRUBY_TARGETS=host (the default) or host,asan: mruby's `rake all`
# builds every target defined.
targets = ENV.fetch('GATEWAY_MRUBY_TARGETS', 'host').split(',')

targets.include?('asan') and MRuby::Build.new('asan', out) do |conf|
  conf.toolchain :gcc
  conf.cc.flags = %w[-std=gnu99 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
                     -fno-sanitize-recover=undefined]
  conf.linker.flags = %w[-fsanitize=address,undefined]
  conf.cc.defines += GATEWAY_MRUBY_DEFINES
  gateway_gems(conf) # mrblib through the host's mrbc
end
