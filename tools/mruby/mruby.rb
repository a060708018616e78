# mruby itself, built from Debian's source package with our own MRuby::Build
# config (tools/mruby/build_config.rb says what and why). Loaded by
# tools/build.rb; the rest of the build asks this file for three things: a
# variant's libmruby.a (a file task), the flags to compile against it, and
# the mrbc that compiles our gems' mrblib.
#
# The source: `apt-get source mruby` unpacked (Debian's patches applied) at
# $GATEWAY_MRUBY_SRC, by default ~/.cache/gateway/mruby ($XDG_CACHE_HOME
# honoured); setup.sh fetches it. It is only read: mruby's Rakefile runs with
# its output under build/mruby/, so `rake clean` removes it with the rest.
#
# A target is rebuilt from scratch when its inputs change (this config, the
# source's Debian version, the compiler), and otherwise left to mruby's own
# incremental rules.
require 'digest'
require 'etc'
require 'rake'

module Gateway
  class MRubyBuild
    include Rake::DSL

    CONFIG = File.expand_path('build_config.rb', __dir__)
    OUT = 'build/mruby'
    TARGETS = { default: 'host', asan: 'asan' }.freeze
    MRBC = "#{OUT}/host/bin/mrbc"

    def self.src
      ENV.fetch('GATEWAY_MRUBY_SRC') do
        File.join(ENV.fetch('XDG_CACHE_HOME') { File.join(Dir.home, '.cache') }, 'gateway', 'mruby')
      end
    end

    # The mruby build of a gateway variant (:default or :asan).
    def self.for(variant)
      (@builds ||= {})[variant] ||= new(TARGETS.fetch(variant))
    end

    # The host target's mrbc (also used for the asan variant's gems).
    def self.mrbc
      self.for(:default) # defines the task that makes it
      MRBC
    end

    attr_reader :target

    def initialize(target)
      @target = target
      define_tasks
    end

    def dir
      "#{OUT}/#{@target}"
    end

    def library
      "#{dir}/lib/libmruby.a"
    end

    # -D and -I flags of MRUBY_CFLAGS, as mruby-config --cflags gives them:
    # the defines change struct layouts (MRB_USE_DEBUG_HOOK, MRB_USE_COMPLEX,
    # ...), so every file that includes mruby.h must be compiled with them.
    # Only valid once the library is built.
    def cflags
      @cflags ||= begin
        mak = File.read("#{dir}/lib/libmruby.flags.mak")
        line = mak[/^MRUBY_CFLAGS = (.*)$/, 1] or raise "#{dir}/lib/libmruby.flags.mak: no MRUBY_CFLAGS"
        line.split.select { |f| f.start_with?('-D', '-I') }
      end
    end

    private

    def changelog
      File.join(self.class.src, 'debian', 'changelog')
    end

    def digest
      Digest::SHA256.hexdigest([File.read(CONFIG), File.read(changelog), ENV.fetch('CC', 'gcc'), @target].join("\0"))
    end

    def define_tasks
      unless Rake::Task.task_defined?(changelog)
        file changelog do
          abort "mruby: its source is not at #{self.class.src} (GATEWAY_MRUBY_SRC): run ./setup.sh, " \
                'which fetches it with `apt-get source mruby`'
        end
      end
      deps = [CONFIG, changelog]
      deps << self.class.for(:default).library unless @target == 'host' # its mrbc
      file library => deps do
        stamp = "#{dir}/.inputs"
        rm_rf dir if File.exist?(dir) && (!File.exist?(stamp) || File.read(stamp) != digest)
        mkdir_p dir
        log = "#{OUT}/#{@target}.log"
        started = Time.now
        puts "mruby: building the #{@target} target from #{self.class.src} (log: #{log})"
        env = {
          'MRUBY_CONFIG' => CONFIG,
          'GATEWAY_MRUBY_OUT' => File.expand_path(OUT),
          'GATEWAY_MRUBY_TARGETS' => @target == 'host' ? 'host' : "host,#{@target}",
          'INSTALL_DIR' => File.expand_path("#{OUT}/bin"),
          'CFLAGS' => nil, 'CXXFLAGS' => nil, 'LDFLAGS' => nil # mruby's toolchain would take them over ours
        }
        ok = system(env, 'rake', '-f', File.join(self.class.src, 'Rakefile'), "-j#{Etc.nprocessors}", 'all',
                    out: log, err: %i[child out])
        unless ok && File.exist?(library)
          puts File.readlines(log).last(40).join
          abort "mruby: building the #{@target} target failed (#{log})"
        end
        File.write(stamp, digest)
        touch library # newer than its inputs, even when mruby had nothing to do
        puts format('mruby: %s target built in %.0f s', @target, Time.now - started)
      end
      file MRBC => library if @target == 'host'
    end
  end
end
