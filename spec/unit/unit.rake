# C unit tests of the core's pure parts (loaded by the Rakefile).
#
#   rake test:unit         build and run every spec/unit/**/test_*.c (-O1 -g)
#   rake test:unit:asan    the same under AddressSanitizer + UBSan
#
# `rake test` runs the first, `rake test:asan` the second. UNIT=router,headers
# runs only those tests.
#
# Each test_NAME.c is a standalone program (its own main(), spec/unit/unit.h)
# linked against only the modules it tests, which it names itself in a comment
# line (the first line that starts with `unit:` after `/*` or a comment's `*`):
#
#   /* unit: router headers */
#
# Each word is gateway/**/WORD.c, or `llhttp` (Debian's llhttp C sources), or a
# library flag such as `-lcares`; libevent and libm are always linked. A test
# without such a line gets gateway/**/NAME.c if there is one. So a new test needs
# no edit here.

module GatewayUnit
  extend Rake::DSL

  SRC_DIR = 'spec/unit'
  TIMEOUT = 300 # seconds per test binary
  VARIANTS = {
    default: { dir: 'build/unit', cflags: %w[-O1 -g], env: {} },
    asan: {
      dir: 'build/asan/unit',
      cflags: %w[-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined],
      env: { 'ASAN_OPTIONS' => 'detect_leaks=1:abort_on_error=0',
             'UBSAN_OPTIONS' => 'print_stacktrace=1:halt_on_error=1' }
    }
  }.freeze

  def self.cc
    ENV.fetch('CC', 'gcc')
  end

  # The headers of the mruby we build (request.h includes mruby.h): its
  # defines change struct layouts. Valid once MRUBY.library is built.
  MRUBY = Gateway::MRubyBuild.for(:default)

  def self.base_cflags(variant)
    %w[-std=c11 -D_GNU_SOURCE -Wall -Wextra -fno-strict-aliasing] + VARIANTS[variant][:cflags] +
      [*Gateway::Build.include_flags, "-I#{SRC_DIR}", "-I#{Gateway::Build::LLHTTP_INC}"]
  end

  def self.cflags(variant)
    base_cflags(variant) + MRUBY.cflags
  end

  def self.tests
    Dir["#{SRC_DIR}/**/test_*.c"].sort
  end

  def self.name_of(src)
    File.basename(src, '.c').delete_prefix('test_')
  end

  # The words of the test's `unit:` comment line (see above).
  def self.modules(src)
    line = File.foreach(src).find { |l| l =~ %r{\A\s*(/\*|\*)\s*unit:} }
    words = line&.sub(%r{\A\s*(/\*|\*)\s*unit:}, '')&.sub(%r{\*/.*}m, '')&.split
    return words if words

    module_source(name_of(src)) ? [name_of(src)] : []
  end

  # gateway/FOLDER/NAME.c for a module NAME, or nil.
  def self.module_source(name)
    Gateway::Build.sources.find { |f| File.basename(f, '.c') == name }
  end

  def self.binary(variant, src)
    File.join(VARIANTS[variant][:dir], File.basename(src, '.c'))
  end

  # Debian's llhttp, compiled once per variant without our warnings.
  def self.llhttp_objects(variant)
    dir = File.join(VARIANTS[variant][:dir], 'llhttp')
    Dir["#{Gateway::Build::LLHTTP_SRC}/*.c"].sort.map do |src|
      obj = File.join(dir, File.basename(src, '.c') + '.o')
      unless Rake::Task.task_defined?(obj)
        file obj => src do
          mkdir_p dir
          flags = base_cflags(variant).reject { |f| f.start_with?('-W') } + %w[-w -DLLHTTP_STRICT_MODE=1]
          sh [cc, *flags, '-c', src, '-o', obj].join(' ')
        end
      end
      obj
    end
  end

  def self.define_binary(variant, src)
    words = modules(src)
    libs = words.grep(/\A-l/)
    names = words - libs - ['llhttp']
    missing = names.reject { |w| module_source(w) }
    gw = names.filter_map { |w| module_source(w) }
    llhttp = words.include?('llhttp') ? llhttp_objects(variant) : []
    bin = binary(variant, src)
    headers = Gateway::Build.sources('h') + Dir["#{SRC_DIR}/*.h"]
    file bin => [src, *gw, *headers, *llhttp, __FILE__, MRUBY.library] do
      abort "#{src}: unit: names missing #{missing.join(', ')}" unless missing.empty?
      mkdir_p File.dirname(bin)
      sh [cc, *cflags(variant), '-o', bin, src, *gw, *llhttp, *libs, '-levent', '-lm'].join(' ')
    end
    bin
  end

  def self.selected(bins)
    only = ENV['UNIT']&.split(',')
    return bins unless only

    bins.select { |b| only.include?(File.basename(b).delete_prefix('test_')) }
  end

  # Runs each binary (TIMEOUT seconds at most); prints one line per test, the
  # output of those that failed, and aborts if any did.
  def self.run(variant, bins)
    $stdout.sync = true
    failed = []
    totals = [0, 0]
    bins.each do |bin|
      log = "#{bin}.log"
      started = Time.now
      pid = Process.spawn(VARIANTS[variant][:env], bin, out: log, err: %i[child out])
      status = nil
      until (status = Process.wait2(pid, Process::WNOHANG)&.last)
        if Time.now - started > TIMEOUT
          Process.kill('KILL', pid)
          status = Process.wait2(pid).last
          File.write(log, "\n(killed after #{TIMEOUT}s)\n", mode: 'a')
          break
        end
        sleep 0.02
      end
      text = File.read(log)
      summary = text.scan(/^(\d+) passed, (\d+) failed$/).last
      ok = status.success? && summary && summary[1] == '0'
      if summary
        totals[0] += summary[0].to_i
        totals[1] += summary[1].to_i
      end
      why = status.signaled? ? "killed by signal #{status.termsig}" : "exit #{status.exitstatus}"
      line = summary ? "#{summary[0]} passed, #{summary[1]} failed" : 'no summary line'
      puts format('unit: %-20s %s%s', File.basename(bin), line, ok ? '' : " (#{why}) FAILED")
      next if ok

      failed << bin
      puts text.lines.last(200).map { |l| "  | #{l}" }.join
    end
    puts "unit: #{bins.size} tests, #{totals[0]} checks passed, #{totals[1]} failed"
    abort "unit: FAILED: #{failed.map { |b| File.basename(b) }.join(', ')}" unless failed.empty?
  end

  def self.define
    VARIANTS.each_key do |variant|
      bins = tests.map { |src| define_binary(variant, src) }
      name = variant == :default ? 'test:unit' : "test:unit:#{variant}"
      task "#{name}:build" => bins
      task name => "#{name}:build" do
        run(variant, selected(bins))
      end
    end
  end
end

GatewayUnit.define
Rake::Task['test:unit'].add_description('Build and run the C unit tests (spec/unit/FOLDER/test_*.c)')
Rake::Task['test:unit:asan'].add_description('The C unit tests under AddressSanitizer + UBSan')
