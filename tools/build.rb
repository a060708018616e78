# The build: reads build_config.rb and each gem's mrbgem.rake, and defines
# rake file tasks that build mruby itself (from Debian's source package, with
# tools/mruby/build_config.rb), compile gateway/**/*.c, the gems (src/*.c, and
# mrblib/*.rb through that mruby's mrbc into C), Debian's llhttp sources, and
# link build/gateway.
#
# Every generated file lives under build/ (build/asan/ for the sanitizer
# variant, build/mruby/ for mruby); nothing generated is committed.
require 'rake'
require_relative 'mruby/mruby'

# mruby's gem convention: mrbgem.rake calls MRuby::Gem::Specification.new.
module MRuby
  module Gem
    class Specification
      attr_accessor :name, :license, :authors, :summary, :version
      attr_reader :dependencies, :linker

      # mruby's `spec.linker.libraries << 'yajl'`: a gem's own C libraries,
      # linked into build/gateway and build/mrbtest (every variant) as -lNAME.
      Linker = Struct.new(:libraries)

      @last = nil
      class << self
        attr_accessor :last
      end

      def initialize(name)
        @name = name
        @dependencies = []
        @linker = Linker.new([])
        yield self if block_given?
        Specification.last = self
      end

      def add_dependency(name, *_)
        @dependencies << name
      end
      alias add_test_dependency add_dependency
    end
  end
end

module Gateway
  class Build
    include Rake::DSL

    LLHTTP_SRC = '/usr/share/llhttp'
    LLHTTP_INC = '/usr/share/include/llhttp'

    # gateway/ is folders by concern (docs/DESIGN.md); basenames are unique
    # across them, and every folder is on the include path, so a file
    # includes "x.h" wherever x.h lives.
    def self.sources(ext = 'c')
      Dir["gateway/**/*.#{ext}"].sort
    end

    def self.include_flags
      sources('h').map { |f| "-I#{File.dirname(f)}" }.uniq
    end

    # gateway/FOLDER/NAME.c for a module NAME (unit tests and fuzz targets name modules).
    def self.source_of(name)
      sources.find { |f| File.basename(f, '.c') == name } or raise "no gateway source for module #{name}"
    end

    GemInfo = Struct.new(:dir, :name, :cname, :srcs, :mrblib, :tests, :libs)

    attr_reader :gems

    def self.configure(&blk)
      @current.instance_eval { blk.call(self) }
    end

    def self.load(path)
      @current = new
      Kernel.load(File.expand_path(path))
      @current.define_tasks
      @current
    end

    def initialize
      @gems = []
      @test_gems = []
      @variants = {}
      @cflags = []
      @ldflags = []
      @libs = []
    end

    # -- build_config.rb DSL --------------------------------------------------
    # libs: linked after the objects, before mruby/libevent/c-ares (a malloc
    # named here replaces glibc's for the whole process).
    attr_accessor :cflags, :ldflags, :libs

    def gem(dir)
      @gems << load_gem(dir)
    end

    # A gem linked only into the test binary (build/gateway-test), with the
    # gateway/ files it needs compiled again under -DGW_TEST_HOOKS; the specs
    # that inject faults run that binary, build/gateway never has the gem.
    def test_gem(dir, recompile: [])
      @test_gems << [load_gem(dir), recompile]
    end

    # A variant adds cflags/ldflags to the default ones; libs, if given, replace them.
    def variant(name, cflags: [], ldflags: [], libs: nil)
      @variants[name] = [cflags, ldflags, libs]
    end

    # -- queries ----------------------------------------------------------------
    def binary(variant)
      File.join(dir(variant), 'gateway')
    end

    def mrbtest(variant)
      File.join(dir(variant), 'mrbtest')
    end

    # The product plus the test gems (fault injection); only specs run it.
    def test_binary(variant)
      File.join(dir(variant), 'gateway-test')
    end

    def gem_tests
      @gems.flat_map(&:tests)
    end

    def dir(variant)
      variant == :default ? 'build' : "build/#{variant}"
    end

    # -- tasks ------------------------------------------------------------------
    def define_tasks
      ([:default] + @variants.keys).each { |v| define_variant(v) }
    end

    private

    def load_gem(dir)
      MRuby::Gem::Specification.last = nil
      Kernel.load(File.join(dir, 'mrbgem.rake'))
      spec = MRuby::Gem::Specification.last or raise "#{dir}/mrbgem.rake defines no gem"
      GemInfo.new(dir, spec.name, spec.name.tr('-', '_'),
                  Dir[File.join(dir, 'src', '*.c')].sort,
                  Dir[File.join(dir, 'mrblib', '*.rb')].sort,
                  Dir[File.join(dir, 'test', '*.rb')].sort,
                  spec.linker.libraries.map { |l| "-l#{l}" })
    end

    def variant_flags(variant)
      extra_c, extra_l, libs = @variants.fetch(variant, [[], [], nil])
      cflags = @cflags.dup
      # The sanitizer variant's -O1 replaces the default optimisation level.
      cflags.reject! { |f| f =~ /\A-O/ } if extra_c.any? { |f| f =~ /\A-O/ }
      [cflags + extra_c, @ldflags + extra_l, libs || @libs]
    end

    def cc
      ENV.fetch('CC', 'gcc')
    end

    # flags: an Array; a Proc in it is called when the command runs (the
    # mruby flags exist only once mruby is built).
    def compile(obj, src, flags, deps = [])
      file obj => [src, *deps, 'build_config.rb'] do
        mkdir_p File.dirname(obj)
        sh [cc, *flags.flat_map { |f| f.is_a?(Proc) ? f.call : f }, '-c', src, '-o', obj].join(' ')
      end
      obj
    end

    def define_variant(variant)
      out = dir(variant)
      cflags, ldflags, own_libs = variant_flags(variant)
      mrb = MRubyBuild.for(variant)
      mruby_cflags = -> { mrb.cflags }
      base = cflags + [mruby_cflags, *Build.include_flags, "-I#{LLHTTP_INC}"]
      # Every object that sees mruby's headers is rebuilt with mruby (dashboard.c includes its page).
      headers = Build.sources('{h,html}') + ["#{LLHTTP_INC}/llhttp.h", mrb.library]
      objs = []

      Build.sources.each do |src|
        next if File.basename(src) == 'mrbtest_main.c'
        objs << compile(File.join(out, 'obj', src.sub(/\.c\z/, '.o')), src, base, headers)
      end

      # llhttp: Debian's generated parser, strict mode; not our code, so no warnings.
      llhttp_flags = cflags.reject { |f| f.start_with?('-W') } + %W[-w -DLLHTTP_STRICT_MODE=1 -I#{LLHTTP_INC}]
      Dir["#{LLHTTP_SRC}/*.c"].sort.each do |src|
        objs << compile(File.join(out, 'obj', 'llhttp', File.basename(src, '.c') + '.o'), src, llhttp_flags)
      end

      @gems.each do |g|
        gdir = File.join(out, 'gems', g.name)
        g.srcs.each do |src|
          objs << compile(File.join(gdir, File.basename(src, '.c') + '.o'), src, base, headers)
        end
        unless g.mrblib.empty?
          mrblib_c = File.join(gdir, 'mrblib.c')
          file mrblib_c => [*g.mrblib, File.join(g.dir, 'mrbgem.rake'), MRubyBuild.mrbc] do
            mkdir_p gdir
            # -g keeps file:line in backtraces of errors raised inside mrblib.
            sh [MRubyBuild.mrbc, '-g', "-Bgw_mrblib_#{g.cname}", '-o', mrblib_c, *g.mrblib].join(' ')
          end
          objs << compile(File.join(gdir, 'mrblib.o'), mrblib_c, base, [mrb.library])
        end
      end

      gem_init_c = File.join(out, 'gem_init.c')
      # Its content depends on which gems have src/ and mrblib/: regenerate
      # whenever that changed, not only when build_config.rb did.
      rm_f gem_init_c, verbose: false if File.exist?(gem_init_c) && File.read(gem_init_c) != gem_init_source
      file gem_init_c => ['build_config.rb', *@gems.map { |g| File.join(g.dir, 'mrbgem.rake') }] do
        mkdir_p out
        File.write(gem_init_c, gem_init_source)
      end
      objs << compile(File.join(out, 'gem_init.o'), gem_init_c, base, [mrb.library])

      libs = own_libs + @gems.flat_map(&:libs).uniq + [mrb.library] + # pcre2: regex.c; hiredis: redis.c; z, brotlienc, zstd: encoder.c
             %w[-levent -lcares -lpcre2-8 -lhiredis -lssl -lcrypto -lnghttp2 -lz -lbrotlienc -lzstd -lm]
      bin = binary(variant)
      file bin => [*objs, mrb.library] do
        sh [cc, *cflags, *ldflags, '-o', bin, *objs, *libs].join(' ')
      end

      define_test_binary(variant, out, base, headers, objs, libs, cflags, ldflags, mrb)

      test_main = compile(File.join(out, 'obj', 'gateway', 'mrbtest_main.o'), 'gateway/process/mrbtest_main.c', base, headers)
      core_objs = objs.reject { |o| o.end_with?('/gateway/process/main.o') }
      file mrbtest(variant) => [test_main, *core_objs, mrb.library] do
        sh [cc, *cflags, *ldflags, '-o', mrbtest(variant), test_main, *core_objs, *libs].join(' ')
      end
    end

    # build/gateway-test: the product's objects, but gem_init and the
    # recompiled files swapped for test builds of them, plus the test gems'
    # C (no mrblib). A few compiles and one link, not a whole variant.
    def define_test_binary(variant, out, base, headers, objs, libs, cflags, ldflags, mrb)
      return if @test_gems.empty?
      tdir = File.join(out, 'test')
      test_flags = base + ['-DGW_TEST_HOOKS']
      swapped = @test_gems.flat_map(&:last).uniq
      tobjs = objs.reject do |o|
        o.end_with?('/gem_init.o') || swapped.any? { |src| o == File.join(out, 'obj', src.sub(/\.c\z/, '.o')) }
      end
      swapped.each { |src| tobjs << compile(File.join(tdir, 'obj', src.sub(/\.c\z/, '.o')), src, test_flags, headers) }
      @test_gems.each do |g, _|
        g.srcs.each do |src|
          tobjs << compile(File.join(tdir, 'gems', g.name, File.basename(src, '.c') + '.o'), src, test_flags, headers)
        end
      end
      init_c = File.join(tdir, 'gem_init.c')
      src = gem_init_source(@gems + @test_gems.map(&:first))
      rm_f init_c, verbose: false if File.exist?(init_c) && File.read(init_c) != src
      file init_c => ['build_config.rb', *@test_gems.map { |g, _| File.join(g.dir, 'mrbgem.rake') }] do
        mkdir_p tdir
        File.write(init_c, src)
      end
      tobjs << compile(File.join(tdir, 'gem_init.o'), init_c, base, [mrb.library])
      tlibs = @test_gems.flat_map { |g, _| g.libs }.uniq + libs
      file test_binary(variant) => [*tobjs, mrb.library] do
        sh [cc, *cflags, *ldflags, '-o', test_binary(variant), *tobjs, *tlibs].join(' ')
      end
    end

    # C glue that initialises every gem in build_config order: C first, then
    # its compiled mrblib (mruby's own rule).
    def gem_init_source(gems = @gems)
      lines = ["/* Generated by tools/build.rb from build_config.rb. */",
               '#include <stdint.h>', '#include <stdio.h>', '#include <stdlib.h>',
               '#include <mruby.h>', '#include <mruby/irep.h>', '#include <mruby/variable.h>', '']
      gems.each do |g|
        lines << "void mrb_#{g.cname}_gem_init(mrb_state *mrb);" unless g.srcs.empty?
        lines << "extern const uint8_t gw_mrblib_#{g.cname}[];" unless g.mrblib.empty?
      end
      lines << '' << '/* Returns 0, or -1 with mrb->exc set when a gem failed to load. */'
      lines << 'int gw_mrbgems_init(mrb_state *mrb)' << '{'
      lines << '  int ai = mrb_gc_arena_save(mrb);'
      gems.each do |g|
        lines << "  mrb_#{g.cname}_gem_init(mrb);" unless g.srcs.empty?
        lines << '  if (mrb->exc) return -1;' unless g.srcs.empty?
        lines << "  mrb_load_irep(mrb, gw_mrblib_#{g.cname});" unless g.mrblib.empty?
        lines << '  if (mrb->exc) return -1;' unless g.mrblib.empty?
        lines << '  mrb_gc_arena_restore(mrb, ai);'
      end
      lines << '  return 0;' << '}' << ''
      lines.join("\n")
    end
  end
end
