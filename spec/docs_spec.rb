# The documentation against the code: README.md and docs/*.md.
#
#  (a) Every option the configuration DSL accepts appears in an inline code
#      span of some docs/*.md page (each engineer documents their options in
#      their own page, so all pages count). The list is read from the DSL's
#      source (mrbgems/*/mrblib/*.rb, parsed with Ripper): the keyword
#      parameters of every top-level directive (`server`, `upstream`,
#      `redis`...) and of `Gateway::Server#location`, and the known-key lists
#      the DSL validates Hash options against (constants named ...KEYS, and
#      the Hashes of defaults in HASH_OPTION_CONSTANTS). mruby's own
#      Method#parameters cannot be used: in 3.1 it shifts the keyword names
#      of a method without positional parameters by one (`server` reports
#      `block` and loses `reuseport`). An option name shared by several
#      directives (`timeout:`) is looked for once; keys a DSL method reads
#      from a Hash without a constant list (an upstream server's `weight:`)
#      are not found.
#  (b) Every fenced block whose info string is exactly `ruby` is a complete
#      configuration: written into a folder with the files such examples name
#      (a certificate and key, handler files), it must pass
#      `$GATEWAY_BIN -t -f FILE`. Every `ruby fragment` block (a handler body,
#      a few `location` lines) must pass mruby's own syntax check
#      (build/mruby/host/bin/mrbc -c: the grammar the gateway runs, not
#      CRuby's). Any other info string starting with "ruby" is an error (a
#      typo would skip the check).
#  (c) Every relative link (and image) in README.md and docs/*.md points to
#      a file that exists and, for a .md target with #anchor, to a heading of
#      that page (GitHub's anchor rules). No page points to ../shared/.
require_relative 'spec_helper'
require 'ripper'
require 'tmpdir'
require 'open3'
require 'fileutils'

module DocsSpec
  ROOT = GatewaySpec::ROOT
  PAGES = Dir[File.join(ROOT, 'docs', '*.md')].sort
  ALL_PAGES = [File.join(ROOT, 'README.md')] + PAGES
  MRBC = File.join(ROOT, 'build', 'mruby', 'host', 'bin', 'mrbc')
  # Hash constants whose keys are options of a Hash-valued option
  # (limits:, open_file_cache:, memory_cache:). Arrays named ...KEYS are
  # found by their name.
  HASH_OPTION_CONSTANTS = %w[DEFAULT_LIMITS OPEN_FILE_CACHE MEMORY_CACHE].freeze

  Block = Struct.new(:file, :line, :info, :text) do
    def where
      "#{File.basename(file)}:#{line}"
    end
  end

  module_function

  def rel(path)
    path.delete_prefix("#{ROOT}/")
  end

  # [[name, where]] for the options of the DSL, and the directive names.
  def dsl
    directives = []
    options = []
    hash_consts = []
    Dir[File.join(ROOT, 'mrbgems', '*', 'mrblib', '*.rb')].sort.each do |file|
      sexp = Ripper.sexp(File.read(file))
      raise "#{rel(file)}: Ripper cannot parse it" unless sexp

      walk(sexp, []) do |node, scope|
        case node[0]
        when :def
          name = node[1][1]
          top = scope.empty?
          next unless top || (scope.last == 'Server' && name == 'location')

          directives << [name, rel(file)] if top
          keywords(node).each { |k| options << [k, "#{name} (#{rel(file)})"] }
        when :assign
          target = node[1]
          next unless target[0] == :var_field && target[1][0] == :@const

          const = target[1][1]
          value = node[2]
          if const.end_with?('KEYS') && value[0] == :array
            symbols(value).each { |k| options << [k, "#{const} (#{rel(file)})"] }
          elsif HASH_OPTION_CONSTANTS.include?(const) && value[0] == :hash
            hash_consts << const
            labels(value).each { |k| options << [k, "#{const} (#{rel(file)})"] }
          end
        end
      end
    end
    { directives: directives, options: options.uniq { |k, _| k }, hash_consts: hash_consts }
  end

  # Depth-first over a Ripper tree, with the names of the enclosing
  # classes/modules.
  def walk(node, scope, &blk)
    return unless node.is_a?(Array)

    if node[0].is_a?(Symbol)
      yield node, scope
      if %i[class module].include?(node[0])
        name = node[1].flatten.select { |x| x.is_a?(String) }.last
        node[2..].each { |c| walk(c, scope + [name], &blk) }
        return
      end
      return if node[0] == :def # a method's body defines no directive

      node[1..].each { |c| walk(c, scope, &blk) }
    else
      node.each { |c| walk(c, scope, &blk) }
    end
  end

  def keywords(defn)
    params = defn[2]
    params = params[1] if params[0] == :paren
    (params[5] || []).map { |label, _| label[1].delete_suffix(':') }
  end

  def symbols(array)
    (array[1] || []).filter_map do |el|
      el[0] == :symbol_literal ? el[1][1][1] : nil
    end
  end

  def labels(hash)
    list = hash[1] && hash[1][1] || []
    list.filter_map { |assoc| assoc[1][0] == :@label ? assoc[1][1].delete_suffix(':') : nil }
  end

  # Fenced blocks of a page: ``` or ~~~ fences, the info string as written.
  def blocks(file)
    out = []
    fence = nil
    mark = nil
    indent = 0
    File.readlines(file, chomp: true).each_with_index do |l, i|
      if fence.nil? && (m = l.match(/\A( *)(```+|~~~+)\s*(.*)\z/))
        fence = Block.new(file, i + 2, m[3].strip, +'')
        indent = m[1].size # a block inside a list item: its lines are indented as its fence
        mark = m[2]
      elsif fence && l.strip.start_with?(mark) && l.strip == mark[0] * l.strip.size
        out << fence
        fence = nil
      elsif fence
        fence.text << l.sub(/\A {0,#{indent}}/, '') << "\n"
      end
    end
    raise "#{rel(file)}: a fenced block is not closed" if fence

    out
  end

  # The page's lines outside fenced blocks, with their numbers.
  def prose(file)
    inside = false
    File.readlines(file, chomp: true).each_with_index.filter_map do |l, i|
      if l.match?(/\A *(```|~~~)/)
        inside = !inside
        next
      end
      inside ? nil : [l, i + 1]
    end
  end

  def code_spans(file)
    prose(file).flat_map { |l, _| l.scan(/`([^`]+)`/).flatten }
  end

  # GitHub's anchors: lowercased, punctuation but - and _ dropped, spaces to
  # -, a repeated one numbered -1, -2...
  def anchors(file)
    seen = Hash.new(0)
    prose(file).filter_map do |l, _|
      m = l.match(/\A\#{1,6}\s+(.*?)\s*#*\s*\z/)
      next unless m

      slug = m[1].downcase.gsub(/[^\p{Word}\- ]/u, '').tr(' ', '-')
      n = seen[slug]
      seen[slug] += 1
      n.zero? ? slug : "#{slug}-#{n}"
    end
  end

  def links(file)
    prose(file).flat_map do |l, n|
      l.gsub(/`[^`]*`/, '').scan(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/).flatten.map { |t| [t, n] }
    end
  end

  # A folder with the files the complete examples name, relative to the
  # config file: a self-signed certificate under each name a page uses,
  # handler files, a static root.
  def fixtures(dir)
    key = File.join(dir, 'site.key')
    cert = File.join(dir, 'site.pem')
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost')
    raise "openssl req failed: #{out}" unless st.success?

    %w[edge a b client].each do |n|
      FileUtils.cp(cert, File.join(dir, "#{n}.pem"))
      FileUtils.cp(key, File.join(dir, "#{n}.key"))
    end
    %w[ca.pem internal-ca.pem].each { |n| FileUtils.cp(cert, File.join(dir, n)) }
    FileUtils.mkdir_p(File.join(dir, 'handlers'))
    FileUtils.mkdir_p(File.join(dir, 'public'))
    File.write(File.join(dir, 'auth.rb'), "nil\n")
    File.write(File.join(dir, 'handlers', 'api.rb'), "\"api\"\n")
  end
end

RSpec.describe 'documentation' do
  before(:all) { GatewaySpec.check_binary! }

  describe 'the configuration options' do
    dsl = DocsSpec.dsl

    it 'finds the DSL: its directives, their options and the known-key lists' do
      names = dsl[:directives].map(&:first)
      expect(names).to include('server', 'upstream', 'resolver', 'pid', 'error_log', 'access_log')
      opts = dsl[:options].map(&:first)
      # one of each source: a keyword of server, of location, a KEYS list, a Hash of defaults
      expect(opts).to include('listen', 'reuseport', 'proxy_pass', 'grpc_pass', 'root', 'cert', 'max_body', 'budget')
      expect(dsl[:hash_consts].sort).to eq(DocsSpec::HASH_OPTION_CONSTANTS.sort)
    end

    it 'documents every directive and option in an inline code span of docs/*.md' do
      spans = DocsSpec::PAGES.flat_map { |f| DocsSpec.code_spans(f) }
      missing_dirs = dsl[:directives].reject do |name, _|
        spans.any? { |s| s.match?(/(?<![\w.:@$])#{Regexp.escape(name)}(?![\w:(])/) }
      end
      # An option as it is written, `name:` (a keyword or a Hash key), or
      # alone in its span (`max_body` in a table of limits).
      missing_opts = dsl[:options].reject do |name, _|
        spans.any? { |s| s.strip == name || s.match?(/(?<![\w.:@$])#{Regexp.escape(name)}:(?!:)/) }
      end
      msg = (missing_dirs.map { |n, w| "directive `#{n}` (#{w})" } +
             missing_opts.map { |n, w| "option `#{n}:` of #{w}" }).join("\n  ")
      expect(missing_dirs + missing_opts).to be_empty, "not in any docs/*.md code span:\n  #{msg}"
    end
  end

  describe 'the Ruby blocks' do
    blocks = DocsSpec::ALL_PAGES.flat_map { |f| DocsSpec.blocks(f) }

    it 'marks Ruby as `ruby` (a complete configuration) or `ruby fragment`, nothing else' do
      odd = blocks.select { |b| b.info.match?(/\Aruby\b|\Arb\b/i) && !['ruby', 'ruby fragment'].include?(b.info) }
      expect(odd.map { |b| "#{b.where}: #{b.info}" }).to be_empty
    end

    it 'checks every complete configuration with gateway -t' do
      full = blocks.select { |b| b.info == 'ruby' }
      expect(full.size).to be >= 5
      failures = []
      Dir.mktmpdir('gw-docs-') do |dir|
        DocsSpec.fixtures(dir)
        full.each_with_index do |b, i|
          path = File.join(dir, "doc_#{i}.rb")
          File.write(path, b.text)
          out, st = Open3.capture2e(GatewaySpec.sanitizer_env, GatewaySpec::BIN, '-t', '-f', path)
          ok = st.success? && out.include?('syntax is ok') && !out.match?(GatewaySpec::SANITIZER_REPORT)
          failures << "#{b.where}: #{out.strip.lines.last(3).join.strip}" unless ok
        end
      end
      expect(failures).to be_empty, "complete configurations that gateway -t refuses:\n  #{failures.join("\n  ")}"
    end

    it 'checks every fragment with mruby\'s syntax check' do
      raise "#{DocsSpec::MRBC} not found: run `rake build`" unless File.executable?(DocsSpec::MRBC)

      frags = blocks.select { |b| b.info == 'ruby fragment' }
      expect(frags.size).to be >= 5
      failures = []
      Dir.mktmpdir('gw-docs-') do |dir|
        frags.each_with_index do |b, i|
          path = File.join(dir, "frag_#{i}.rb")
          File.write(path, b.text)
          out, st = Open3.capture2e(DocsSpec::MRBC, '-c', path)
          failures << "#{b.where}: #{out.strip}" unless st.success?
        end
      end
      expect(failures).to be_empty, "fragments that are not mruby syntax:\n  #{failures.join("\n  ")}"
    end
  end

  describe 'the links' do
    it 'points every relative link of README.md and docs/*.md to a file and heading that exist' do
      bad = []
      DocsSpec::ALL_PAGES.each do |file|
        DocsSpec.links(file).each do |target, line|
          next if target.match?(/\A[a-z][a-z0-9+.-]*:/i) # http:, https:, mailto:

          path, anchor = target.split('#', 2)
          dest = path.empty? ? file : File.expand_path(path, File.dirname(file))
          where = "#{DocsSpec.rel(file)}:#{line}: #{target}"
          if !File.exist?(dest)
            bad << "#{where} (no such file)"
          elsif anchor && dest.end_with?('.md') && !DocsSpec.anchors(dest).include?(anchor)
            bad << "#{where} (no such heading in #{DocsSpec.rel(dest)})"
          end
        end
      end
      expect(bad).to be_empty, "broken links:\n  #{bad.join("\n  ")}"
    end

    it 'never points to ../shared/, which users do not have' do
      hits = DocsSpec::ALL_PAGES.flat_map do |f|
        File.readlines(f).each_with_index.select { |l, _| l.include?('../shared') }.map { |_, i| "#{DocsSpec.rel(f)}:#{i + 1}" }
      end
      expect(hits).to be_empty
    end
  end
end
