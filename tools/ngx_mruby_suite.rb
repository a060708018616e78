#!/usr/bin/env ruby
# frozen_string_literal: true

# tools/ngx_mruby_suite.rb - ngx_mruby's own test suite, run against the gateway.
#
#   ruby tools/ngx_mruby_suite.rb NGX_MRUBY [--gateway build/gateway] [--verbose] [--keep]
#
# NGX_MRUBY is a local checkout of matsumotory/ngx_mruby, or a bare clone of
# it (read with `git show HEAD:...`). This tool fetches nothing; without the
# argument, or when the path holds no ngx_mruby, it says so and exits 0.
#
# What it does, mechanically:
#  1. parses the suite's test/conf/nginx.conf and turns every http `server`
#     with a plain `listen` into a gateway `server` on 127.0.0.1 and the same
#     port, and every `location` into a gateway location that runs the same
#     handler file or code, unchanged: mruby_content_handler(_code) -> the
#     location's handler; mruby_rewrite/access_handler(_code) and the output
#     filters -> the `rewrite:`/`access:`/`body_filter:`/`header_filter:`
#     phases when the gateway has them (probed with `gateway -t`); mruby_set
#     and `set` -> `set:`; proxy_pass -> proxy_pass:; a location whose
#     content is nginx's static files (its or the server's `root`, `index`)
#     -> `root:`/`index:` with its filters; mruby_add_handler -> `ruby_files:
#     true`; an `ssl` listener -> `tls:` with its certificate, protocols,
#     ciphers and mruby_ssl_handshake_handler(_code) -> `on_handshake:`
#     (a file with `cache` -> on_handshake_cache: true, without -> false),
#     the certificates made as ngx_mruby's test.sh makes them. What remains
#     nginx's own (error_page, the rewrite module, named locations, the stream
#     module, mruby_server_context_handler listeners) is "not applicable",
#     with the reason;
#  2. starts the gateway with that config (the suite's html/*.rb files laid
#     out where the config names them);
#  3. evaluates the suite's test/t/ngx_mruby.rb in this Ruby with small
#     stand-ins for its runner (SimpleTest) and client (HttpRequest: an
#     HTTP/1.0 request with Host, Connection: close and Accept: */*, as
#     mruby-httprequest sends), so every assert makes its own requests and
#     checks its own expectations; the commands it shells out to (curl
#     https, openssl s_client against the TLS listeners) run for real;
#  4. prints one line per assert (PASS, FAIL with what differed and what the
#     translation could not carry over, N/A with why) and the totals.
#
# The suite listens on fixed ports (58080...). Other test runs on this machine
# may hold them, so when it can (root, unshare(1) and ip(8) present) the tool
# re-runs itself in a private network namespace with only its own loopback;
# `--host-network` keeps the host's, where those ports must then be free.
require 'socket'
require 'json'
require 'tmpdir'
require 'fileutils'
require 'open3'
require 'timeout'

module NgxSuite
  ROOT = File.expand_path('..', __dir__)

  # A self-signed certificate NAME.crt / NAME.key valid `days`, as
  # ngx_mruby's test.sh makes localhost (365) and dummy (1).
  def self.make_cert(dir, name, days)
    out, st = Open3.capture2e('openssl', 'req', '-new', '-x509', '-nodes', '-days', days.to_s, '-newkey', 'rsa:2048',
                              '-subj', "/CN=#{name}", '-keyout', File.join(dir, "#{name}.key"),
                              '-out', File.join(dir, "#{name}.crt"))
    abort "openssl req failed: #{out}" unless st.success?
  end

  # -- reading the suite ---------------------------------------------------------
  class Source
    def self.open(dir)
      return nil if dir.nil? || !File.directory?(dir)
      return new(dir, nil) if File.file?(File.join(dir, 'test/conf/nginx.conf'))
      git_dir = [dir, File.join(dir, '.git')].find do |d|
        system('git', "--git-dir=#{d}", 'cat-file', '-e', 'HEAD:test/conf/nginx.conf', out: File::NULL, err: File::NULL)
      end
      git_dir ? new(dir, git_dir) : nil
    end

    def initialize(dir, git_dir)
      @dir = dir
      @git_dir = git_dir
    end

    def describe
      if @git_dir
        rev, = Open3.capture2('git', "--git-dir=#{@git_dir}", 'rev-parse', '--short', 'HEAD')
        "#{@dir} (git #{rev.strip})"
      else
        @dir
      end
    end

    def read(path)
      if @git_dir
        out, st = Open3.capture2('git', "--git-dir=#{@git_dir}", 'show', "HEAD:#{path}", binmode: true)
        st.success? ? out : nil
      else
        f = File.join(@dir, path)
        File.file?(f) ? File.binread(f) : nil
      end
    end

    def list(prefix)
      if @git_dir
        out, = Open3.capture2('git', "--git-dir=#{@git_dir}", 'ls-tree', '-r', '--name-only', 'HEAD', prefix)
        out.lines.map(&:chomp)
      else
        Dir.glob(File.join(@dir, prefix, '**/*')).select { |f| File.file?(f) }.map { |f| f.delete_prefix("#{@dir}/") }
      end
    end
  end

  # -- nginx.conf ----------------------------------------------------------------
  Directive = Struct.new(:name, :args, :block, :line)

  # nginx's config syntax: words, '...' and "..." strings (\" \' \\ \n \t \r
  # unescaped), # comments, `;` ends a directive, `{ }` a block.
  module Conf
    ESCAPES = { '"' => '"', "'" => "'", '\\' => '\\', 'n' => "\n", 't' => "\t", 'r' => "\r" }.freeze

    def self.tokens(text)
      out = []
      i = 0
      line = 1
      while i < text.size
        c = text[i]
        if c == "\n"
          line += 1
          i += 1
        elsif c =~ /\s/
          i += 1
        elsif c == '#'
          i += 1 while i < text.size && text[i] != "\n"
        elsif c == ';' || c == '{' || c == '}'
          out << [c.to_sym, line]
          i += 1
        elsif c == '"' || c == "'"
          start = line
          s = +''
          i += 1
          while i < text.size && text[i] != c
            if text[i] == '\\' && i + 1 < text.size && ESCAPES.key?(text[i + 1])
              s << ESCAPES[text[i + 1]]
              i += 2
            else
              line += 1 if text[i] == "\n"
              s << text[i]
              i += 1
            end
          end
          i += 1
          out << [s, start]
        else
          s = +''
          while i < text.size && text[i] !~ /[\s;{}]/
            s << text[i]
            i += 1
          end
          out << [s, line]
        end
      end
      out
    end

    def self.parse(text)
      toks = tokens(text)
      pos = 0
      parse_block = lambda do
        list = []
        words = []
        line = nil
        while pos < toks.size
          t, l = toks[pos]
          pos += 1
          case t
          when :';'
            list << Directive.new(words[0], words[1..], nil, line) unless words.empty?
            words = []
          when :'{'
            list << Directive.new(words[0], words[1..], parse_block.call, line)
            words = []
          when :'}'
            return list
          else
            line = l if words.empty?
            words << t
          end
        end
        list
      end
      parse_block.call
    end
  end

  # -- the translation -------------------------------------------------------------
  # One nginx location and what became of it.
  class Loc
    attr_reader :server, :modifier, :path, :dirs
    attr_accessor :na, :needs, :notes, :content, :async, :phased

    def initialize(server, modifier, path, dirs)
      @server = server
      @modifier = modifier
      @path = path
      @dirs = dirs
      @na = nil
      @needs = []
      @notes = []
      @content = false
      @async = false
    end

    def label
      [@modifier, @path].compact.join(' ')
    end

    def matches?(uri)
      case @modifier
      when '=' then uri == @path
      when '~' then Regexp.new(@path).match?(uri)
      when '~*' then Regexp.new(@path, Regexp::IGNORECASE).match?(uri)
      when '@' then false
      else uri.start_with?(@path)
      end
    end
  end

  class Server
    attr_reader :port, :dirs, :locs, :na
    attr_accessor :needs, :tls

    def initialize(port, dirs, na)
      @port = port
      @dirs = dirs
      @na = na
      @locs = []
      @needs = []
    end

    # nginx's choice: exact, then the longest prefix (^~ stops there), then
    # the first regex in order, else that prefix.
    def route(uri)
      exact = @locs.find { |l| l.modifier == '=' && l.matches?(uri) }
      return exact if exact
      prefix = @locs.select { |l| (l.modifier.nil? || l.modifier == '^~') && l.matches?(uri) }.max_by { |l| l.path.size }
      return prefix if prefix&.modifier == '^~'
      @locs.find { |l| l.modifier&.start_with?('~') && l.matches?(uri) } || prefix
    end
  end

  # What the gateway binary accepts, probed with `gateway -t`.
  class Features
    PROBES = {
      phases: 'location "/p", rewrite: ->(r) { }, access: ->(r) { }, content: ->(r) { "" }',
      files: 'location "/p", content: "probe_handler.rb"',
      set: 'location "/p", set: { "v" => ->(r) { "1" } }, content: ->(r) { "" }',
      set_proxy: 'location "/p", set: { "b" => "127.0.0.1:1" }, proxy_pass: "http://$b"',
      filters: 'location "/p", body_filter: ->(*a) { }, header_filter: ->(*a) { }, content: ->(r) { "" }',
      regex: 'location "~ \\\\.rb$", content: ->(r) { "" }',
      static_filters: 'location "/p", root: "/", header_filter: ->(*a) { }, body_filter: ->(*a) { }',
      ruby_files: 'location "/p", root: "/", ruby_files: true'
    }.freeze
    SERVER_PROBES = {
      server_phases: 'server listen: "127.0.0.1:9", rewrite: ->(r) { }, access: ->(r) { } do location("/p") { "" } end',
      init_worker: 'server listen: "127.0.0.1:9", init_worker: ->() { } do location("/p") { "" } end',
      tls_hook_file: 'server listen: "127.0.0.1:9", tls: { cert: "probe.crt", key: "probe.key", ' \
                     'on_handshake: "probe_handler.rb", on_handshake_cache: false } do location("/p") { "" } end'
    }.freeze

    def initialize(bin, dir)
      @have = {}
      File.write(File.join(dir, 'probe_handler.rb'), "Nginx.rputs 'x'\n")
      NgxSuite.make_cert(dir, 'probe', 1)
      PROBES.each do |name, loc|
        @have[name] = check(bin, dir, "server listen: \"127.0.0.1:9\" do\n  #{loc}\nend\n")
      end
      SERVER_PROBES.each { |name, text| @have[name] = check(bin, dir, "#{text}\n") }
    end

    def [](name)
      @have[name]
    end

    def to_s
      @have.map { |k, v| "#{k}:#{v ? 'yes' : 'no'}" }.join(' ')
    end

    private

    def check(bin, dir, text)
      f = File.join(dir, 'probe.rb')
      File.write(f, text)
      _, st = Open3.capture2e(bin, '-t', '-f', f)
      st.success?
    end
  end

  # Builds the gateway config from the parsed nginx.conf.
  class Translator
    NGINX_ONLY = {
      'error_page' => 'error_page: nginx answers an error with another location (an internal redirect); ' \
                      'the gateway has no such directive (its header_filter:/body_filter: run on its error pages instead)',
      'rewrite' => "the rewrite module's `rewrite` directive (nginx configuration, not handler code; " \
                   'the gateway does it with a rewrite: phase setting req.uri)'
    }.freeze
    # Directives with the gateway's behaviour already (it reads request bodies
    # whole, proxies with HTTP/1.1 keep-alive and sends no Connection header),
    # or that do not change what these tests check: `resolver` (the upstream
    # is an IP literal), proxy_intercept_errors (no error_page follows),
    # proxy_pass_request_headers off (the upstream ignores the fields).
    EQUIVALENT = %w[mruby_enable_read_request_body proxy_http_version proxy_set_header proxy_send_timeout
                    proxy_read_timeout proxy_connect_timeout resolver proxy_intercept_errors
                    proxy_pass_request_headers].freeze
    PHASES = {
      'mruby_rewrite_handler' => :rewrite, 'mruby_rewrite_handler_code' => :rewrite,
      'mruby_access_handler' => :access, 'mruby_access_handler_code' => :access,
      'mruby_content_handler' => :content, 'mruby_content_handler_code' => :content,
      'mruby_output_body_filter' => :body_filter, 'mruby_output_body_filter_code' => :body_filter,
      'mruby_output_header_filter' => :header_filter, 'mruby_output_header_filter_code' => :header_filter,
      'mruby_log_handler' => :log, 'mruby_log_handler_code' => :log
    }.freeze

    attr_reader :servers, :notes, :config

    def initialize(conf, features, html_dir, docroot)
      @features = features
      @html_dir = html_dir
      @docroot = docroot
      @servers = []
      @notes = []
      @upstreams = []
      http = conf.find { |d| d.name == 'http' }
      top = http ? http.block : []
      @http_dirs = top
      top.each do |d|
        case d.name
        when 'server' then add_server(d, top)
        when 'upstream' then add_upstream(d)
        end
      end
      @config = render
    end

    def stream_ports(stream_conf)
      return [] unless stream_conf
      ports = []
      walk = lambda do |ds|
        ds.each do |d|
          ports << d.args[0].to_s[/\d+\z/].to_i if d.name == 'listen'
          walk.call(d.block) if d.block
        end
      end
      walk.call(Conf.parse(stream_conf))
      ports
    end

    private

    def add_upstream(d)
      servers = d.block.select { |x| x.name == 'server' }.map { |x| x.args[0] }
      @upstreams << [d.args[0], servers]
    end

    def add_server(d, http_dirs)
      listen = d.block.find { |x| x.name == 'listen' }
      port = listen ? listen.args[0].to_s[/\d+\z/].to_i : 80
      na = if listen.nil?
             'a server whose listeners come from mruby_server_context_handler (Nginx::Server#add_listener at ' \
             "start-up): the gateway's listeners are each server's listen:, not added by Ruby"
           end
      srv = Server.new(port, d.block, na)
      srv.tls = tls_of(d.block) if listen&.args&.include?('ssl')
      @servers << srv
      d.block.each do |x|
        next unless x.name == 'location'
        mod, path = x.args.size > 1 ? x.args : [nil, x.args[0]]
        if path.start_with?('@')
          mod = '@'
          path = path[1..]
        end
        loc = Loc.new(srv, mod, path, x.block)
        srv.locs << loc
        translate_location(loc, http_dirs)
      end
    end

    # An ssl server's tls: options (ngx_mruby's ssl_* and handshake handler).
    def tls_of(dirs)
      arg = ->(name) { dirs.find { |x| x.name == name }&.args }
      protos = (arg.call('ssl_protocols') || %w[TLSv1.2]) & %w[TLSv1.2 TLSv1.3]
      tls = { cert: arg.call('ssl_certificate')&.first, key: arg.call('ssl_certificate_key')&.first,
              protocols: protos.empty? ? %w[TLSv1.2] : protos, ciphers: arg.call('ssl_ciphers')&.first }
      if (code = arg.call('mruby_ssl_handshake_handler_code'))
        tls[:on_handshake] = [:code, code[0]]
      elsif (file = arg.call('mruby_ssl_handshake_handler'))
        tls[:on_handshake] = [:file, file[0]]
        tls[:cache] = file[1] == 'cache'
      end
      tls
    end

    # The code or file a directive runs: its first argument, but for mruby_set
    # and mruby_set_code, which name the variable first.
    def code_of(dir)
      [dir.name.end_with?('_code') ? :code : :file, dir.args[dir.name.start_with?('mruby_set') ? 1 : 0]]
    end

    def code_text(kind, arg)
      return arg if kind == :code
      File.read(File.join(@html_dir, '..', '..', '..', arg))
    rescue Errno::ENOENT
      "raise 'handler file #{arg} not in the suite'"
    end

    def translate_location(loc, _http_dirs)
      srv = loc.server
      if srv.na
        loc.na = srv.na
        return
      end
      if loc.modifier == '@'
        loc.na = 'named location (@name): reached only through error_page'
        return
      end
      if loc.modifier&.start_with?('~') && !@features[:regex]
        loc.needs << 'regex locations'
      end
      phases = {}
      set = []
      proxy = nil
      static = {}
      loc.dirs.each do |d|
        if (ph = PHASES[d.name])
          phases[ph] = code_of(d)
        elsif d.name == 'mruby_set' || d.name == 'mruby_set_code'
          set << [d.args[0].delete_prefix('$'), code_of(d)]
        elsif d.name == 'set'
          set << [d.args[0].delete_prefix('$'), [:value, d.args[1]]]
        elsif d.name == 'proxy_pass'
          proxy = d.args[0]
        elsif d.name == 'root'
          static[:root] = d.args[0]
        elsif d.name == 'index'
          static[:index] = d.args
        elsif d.name == 'mruby_add_handler'
          static[:ruby_files] = d.args[0] == 'on'
        elsif NGINX_ONLY.key?(d.name)
          (loc.na ||= NGINX_ONLY[d.name])
        elsif !EQUIVALENT.include?(d.name)
          loc.notes << "#{d.name} ignored"
        end
      end
      # A server-level mruby_set, where this location uses its variable.
      srv.dirs.each do |d|
        next unless d.name == 'mruby_set_code' || d.name == 'mruby_set'
        name = d.args[0].delete_prefix('$')
        used = proxy.to_s.include?("$#{name}") || phases.values.any? { |k, a| code_text(k, a).include?(name) }
        set.unshift([name, code_of(d)]) if used
      end
      if loc.na.nil? && !phases.key?(:content) && proxy.nil?
        # nginx's static module answers: files from the location's root, or
        # the server's (relative to nginx's prefix, build/nginx).
        root = static[:root] || srv.dirs.find { |x| x.name == 'root' }&.args&.first
        if root.nil?
          loc.na = 'no content handler, proxy_pass or root: nginx answers from its default root'
        elsif !(@features[:static_filters] && (!static[:ruby_files] || @features[:ruby_files]))
          loc.needs << 'static files with filters (root:, ruby_files:)'
        else
          static[:root] = root.start_with?('/') ? root : File.expand_path(root, File.join(@html_dir, '..'))
        end
      else
        static = {}
      end
      return if loc.na

      loc.content = phases.key?(:content) || proxy
      loc.phased = !phases.empty?
      loc.async = phases.values.any? { |k, a| code_text(k, a).include?('Nginx::Async') }
      loc.instance_variable_set(:@plan, [phases, set, proxy, static])
    end

    def lambda_of(kind, arg)
      "->(*_a) {\n#{code_text(kind, arg)}\n}"
    end

    # A handler file the gateway compiles as ngx_mruby does its code: at the
    # top level (self is main, as for every ngx_mruby handler; a top-level
    # `return` ends it). Inline code (_code) is written into a file of its own.
    def handler_of(kind, arg)
      return lambda_of(kind, arg) unless @features[:files]
      return arg.inspect if kind == :file
      @code_files = (@code_files || 0) + 1
      dir = File.join(@html_dir, '..', 'code')
      FileUtils.mkdir_p(dir)
      path = File.expand_path(File.join(dir, "#{@code_files}.rb"))
      File.write(path, arg)
      path.inspect
    end

    def render_location(loc)
      phases, set, proxy, static = loc.instance_variable_get(:@plan)
      opts = []
      if static[:root]
        opts << "root: #{static[:root].inspect}"
        opts << "index: #{static[:index].inspect}" if static[:index]
        opts << 'ruby_files: true' if static[:ruby_files]
      end
      content = nil
      phase_list = phases.dup
      unless @features[:phases]
        # No phases: a lone rewrite or access handler runs as the content handler.
        if !phase_list.key?(:content) && proxy.nil?
          lone = %i[rewrite access].select { |k| phase_list.key?(k) }
          if lone.size == 1
            phase_list[:content] = phase_list.delete(lone[0])
            loc.notes << "#{lone[0]} handler run as the content handler (no phases)"
          end
        end
        %i[rewrite access log].each do |k|
          loc.needs << "phases (mruby_#{k}_handler)" if phase_list.delete(k)
        end
      end
      %i[body_filter header_filter].each do |k|
        next unless phase_list.key?(k)
        if @features[:filters] || (proxy && !@features[:phases])
          opts << "#{k}: #{handler_of(*phase_list.delete(k))}"
        else
          phase_list.delete(k)
          loc.needs << "phases (#{k})"
        end
      end
      %i[rewrite access log].each do |k|
        next unless phase_list.key?(k)
        h = handler_of(*phase_list[k])
        # nginx runs the server's post-read and server-rewrite handlers before
        # a location's own rewrite handler (other phases); the gateway has one
        # rewrite phase, where a location's replaces the server's: both run.
        pre = k == :rewrite ? server_rewrites(loc.server) : []
        h = "->(r) { #{pre.map { |c| "#{code_const(c)}.call(r); " }.join}#{code_const(h)}.call(r) }" unless pre.empty?
        opts << "#{k}: #{h}"
      end
      unless set.empty?
        if @features[:set]
          items = set.map do |name, (kind, arg)|
            v = kind == :value ? arg.inspect : lambda_of(kind, arg)
            "#{name.inspect} => #{v}"
          end
          opts << "set: { #{items.join(', ')} }"
        else
          loc.needs << 'set: (mruby_set / set)'
        end
      end
      if proxy
        if proxy.include?('$') && !@features[:set]
          loc.needs << 'set: variables in proxy_pass'
          proxy = nil
          content ||= '->(*_a) { Nginx.return 500 }'
        else
          opts << "proxy_pass: #{proxy.inspect}"
        end
      end
      if phase_list.key?(:content)
        if @features[:phases]
          opts << "content: #{handler_of(*phase_list[:content])}"
        else
          content = lambda_of(*phase_list[:content])
        end
      end
      path = loc.modifier == '=' ? "= #{loc.path}" : loc.modifier&.start_with?('~') ? "#{loc.modifier} #{loc.path}" : loc.path
      return nil if loc.modifier&.start_with?('~') && !@features[:regex]
      args = [path.inspect, *opts].join(', ')
      if content
        "  location(#{args}, &(#{content}))"
      elsif opts.empty?
        loc.needs << 'a handler the gateway can run'
        nil
      else
        "  location(#{args})"
      end
    end

    SERVER_REWRITES = %w[mruby_post_read_handler_code mruby_post_read_handler mruby_server_rewrite_handler_code
                         mruby_server_rewrite_handler].freeze

    def server_rewrites(srv)
      return [] unless @features[:files]
      SERVER_REWRITES.flat_map { |n| srv.dirs.select { |d| d.name == n } }.map { |d| handler_of(*code_of(d)) }
    end

    # A handler file compiled once at load, as a constant of the config.
    def code_const(path)
      @consts ||= {}
      @consts[path] ||= "NGX_CODE_#{@consts.size + 1}"
    end

    def server_opts(srv)
      opts = []
      # http-level worker hooks: every server's workers run them
      { 'mruby_init_worker_code' => :init_worker, 'mruby_init_worker' => :init_worker,
        'mruby_exit_worker_code' => :exit_worker, 'mruby_exit_worker' => :exit_worker }.each do |name, hook|
        d = @http_dirs.find { |x| x.name == name }
        next unless d
        if @features[:init_worker] then opts << [hook, handler_of(*code_of(d))]
        else srv.needs << "worker hooks (#{name})"
        end
      end
      {
        'mruby_server_rewrite_handler_code' => :rewrite, 'mruby_server_rewrite_handler' => :rewrite,
        'mruby_post_read_handler_code' => :rewrite, 'mruby_post_read_handler' => :rewrite,
        'mruby_access_handler_code' => :access, 'mruby_access_handler' => :access
      }.each do |name, phase|
        srv.dirs.select { |d| d.name == name }.each do |d|
          if @features[:server_phases]
            opts << [phase, lambda_of(*code_of(d))]
          else
            srv.needs << "server-level phases (#{name})"
          end
        end
      end
      # Several server-level handlers of one phase run in order.
      opts.group_by(&:first).map do |phase, list|
        body = list.size == 1 ? list[0][1] : "->(*_a) { #{list.map { |_, l| "(#{l}).call(*_a)" }.join('; ')} }"
        "#{phase}: #{body}"
      end
    end

    def tls_opts(tls)
      items = ["cert: #{tls[:cert].inspect}", "key: #{tls[:key].inspect}", "protocols: #{tls[:protocols].inspect}"]
      items << "ciphers: #{tls[:ciphers].inspect}" if tls[:ciphers]
      if tls[:on_handshake]
        kind, arg = tls[:on_handshake]
        if kind == :file && @features[:tls_hook_file]
          items << "on_handshake: #{arg.inspect}, on_handshake_cache: #{tls[:cache]}"
        else
          items << "on_handshake: #{handler_of(kind, arg)}, on_handshake_cache: true"
        end
      end
      "tls: { #{items.join(', ')} }"
    end

    def render
      out = +"# generated by tools/ngx_mruby_suite.rb from ngx_mruby's test/conf/nginx.conf\n"
      out << "error_log \"build/nginx/logs/error.log\", level: :info\n" # NGINX_INSTALL_DIR/logs, as the suite reads it
      out << "pid \"logs/gateway.pid\"\n"
      @upstreams.each do |name, servers|
        out << "upstream #{name.inspect}, servers: #{servers.inspect}\n"
      end
      @servers.each do |srv|
        next if srv.na
        opts = server_opts(srv)
        opts << tls_opts(srv.tls) if srv.tls
        out << "server(#{["listen: \"127.0.0.1:#{srv.port}\"", *opts].join(', ')}) do\n"
        srv.locs.each do |loc|
          next if loc.na
          line = render_location(loc)
          out << line << "\n" if line
        end
        out << "end\n"
      end
      consts = (@consts || {}).map { |path, name| "#{name} = Gateway._compile_file(#{path})\n" }.join
      head, rest = out.split("\n", 2)
      "#{head}\n#{consts}#{rest}"
    end
  end

  # -- the suite's runner and client, as stand-ins -----------------------------------
  class Assert
    attr_reader :name, :desc, :requests, :commands, :failures
    attr_accessor :error

    def initialize(name, desc)
      @name = name
      @desc = desc
      @requests = []
      @commands = []
      @failures = []
      @checks = 0
      @error = nil
    end

    def check(ok, what)
      @checks += 1
      @failures << what unless ok
    end

    def passed?
      @error.nil? && @failures.empty?
    end

    def label
      [@name, @desc].compact.join(' / ')
    end
  end

  class Recorder
    class << self
      attr_accessor :current, :results
    end
    self.results = []
  end

  class Response < Hash
    def code
      self['code']
    end

    def body
      self['body']
    end
  end
end

# The suite's runner (mruby's SimpleTest): what test/t/ngx_mruby.rb calls.
class SimpleTest
  def initialize(_title); end

  def assert(name, desc = nil)
    a = NgxSuite::Assert.new(name, desc)
    NgxSuite::Recorder.current = a
    begin
      yield
    rescue StandardError, ScriptError => e
      a.error = "#{e.class}: #{e.message[0, 200]}"
    end
    NgxSuite::Recorder.current = nil
    NgxSuite::Recorder.results << a
  end

  def assert_equal(expected, actual, msg = nil)
    NgxSuite::Recorder.current.check(expected == actual,
                                     "expected #{expected.inspect[0, 120]}, got #{actual.inspect[0, 160]}#{msg ? " (#{msg})" : ''}")
  end

  def assert_not_equal(expected, actual, msg = nil)
    NgxSuite::Recorder.current.check(expected != actual, "expected anything but #{expected.inspect}#{msg ? " (#{msg})" : ''}")
  end

  def assert_true(v, msg = nil)
    NgxSuite::Recorder.current.check(v == true, "expected true, got #{v.inspect}#{msg ? " (#{msg})" : ''}")
  end

  def assert_false(v, msg = nil)
    NgxSuite::Recorder.current.check(v == false, "expected false, got #{v.inspect}#{msg ? " (#{msg})" : ''}")
  end

  def report; end
end

# mruby-httprequest as the suite uses it: one HTTP/1.0 request per call.
class HttpRequest
  def get(url, body = nil, headers = {})
    request('GET', url, body, headers)
  end

  def post(url, body = nil, headers = {})
    request('POST', url, body, headers)
  end

  def put(url, body = nil, headers = {})
    request('PUT', url, body, headers)
  end

  def head(url, body = nil, headers = {})
    request('HEAD', url, body, headers)
  end

  def request(method, url, body, headers)
    m = %r{\Ahttp://([^/:]+):(\d+)(/.*)?\z}.match(url) or raise ArgumentError, "unsupported URL #{url}"
    host, port, path = m[1], m[2].to_i, m[3] || '/'
    NgxSuite::Recorder.current&.requests&.push([port, path])
    h = { 'Host' => "#{host}:#{port}", 'Connection' => 'close', 'Accept' => '*/*' }
    (headers || {}).each do |k, v|
      h.delete_if { |kk, _| kk.casecmp?(k) }
      h[k] = v.to_s
    end
    h['Content-Length'] = body.bytesize.to_s if body && h.keys.none? { |k| k.casecmp?('content-length') }
    wire = +"#{method} #{path} HTTP/1.0\r\n"
    h.each { |k, v| wire << "#{k}: #{v}\r\n" }
    wire << "\r\n" << body.to_s
    raw = Timeout.timeout(15) do
      Socket.tcp(host, port, connect_timeout: 5) do |s|
        s.write(wire) # no half-close: a server may take that for a client that left
        s.read
      end
    end
    NgxSuite.parse_response(raw)
  end
end

module NgxSuite
  def self.parse_response(raw)
    head, body = raw.b.split("\r\n\r\n", 2)
    lines = head.to_s.split("\r\n")
    status = lines.shift.to_s[/\AHTTP\/\d\.\d (\d{3})/, 1].to_i
    res = Response.new
    lines.each do |l|
      k, v = l.split(':', 2)
      next unless v
      k = k.downcase
      v = v.strip
      res[k] = res.key?(k) ? [*res[k], v] : v
    end
    res['code'] = status
    res['header'] = head.to_s
    res['body'] = body.to_s
    res
  end

  # -- the run ---------------------------------------------------------------------
  class Runner
    PORT_WAIT = 10

    def initialize(src, bin, verbose:, keep:)
      @stops = []
      @src = src
      @bin = bin
      @verbose = verbose
      @keep = keep
    end

    def run
      @dir = Dir.mktmpdir('ngx-mruby-suite-')
      FileUtils.mkdir_p(File.join(@dir, 'logs'))
      FileUtils.mkdir_p(File.join(@dir, 'build/nginx/logs'))
      html = File.join(@dir, 'build/nginx/html')
      FileUtils.mkdir_p(html)
      @src.list('test/html').each do |f|
        dst = File.join(html, f.delete_prefix('test/html/'))
        FileUtils.mkdir_p(File.dirname(dst))
        body = @src.read(f)
        # test.sh puts the docroot into this one file as it does into nginx.conf
        body = body.gsub('__NGXDOCROOT__', "#{html}/") if f.end_with?('/set_ssl_cert_and_key.rb')
        File.binwrite(dst, body)
      end
      NgxSuite.make_cert(html, 'localhost', 365)
      NgxSuite.make_cert(html, 'dummy', 1)
      features = Features.new(@bin, @dir)
      conf_text = @src.read('test/conf/nginx.conf').gsub('__NGXDOCROOT__', html)
      tr = Translator.new(Conf.parse(conf_text), features, html, html)
      @translator = tr
      @stream_ports = tr.stream_ports(@src.read('test/conf/nginx.stream.conf'))
      cfg = File.join(@dir, 'gateway.conf.rb')
      File.write(cfg, tr.config)
      puts "ngx_mruby suite: #{@src.describe}"
      puts "gateway: #{@bin} (#{features})"
      puts "config: #{cfg}" if @keep || @verbose
      ports = tr.servers.reject(&:na).map(&:port)
      busy = ports.select { |p| port_open?(p) }
      abort "ports #{busy.join(', ')} are in use: the suite's fixed ports must be free" unless busy.empty?
      out, st = Open3.capture2e(@bin, '-t', '-f', cfg)
      abort "the translated config does not load:\n#{out}" unless st.success?
      pid = spawn(@bin, '-f', cfg, chdir: @dir, out: File.join(@dir, 'gateway.out'), err: %i[child out], pgroup: true)
      begin
        wait_ports(ports, pid)
        run_suite
      ensure
        stop(pid)
      end
      report
    ensure
      FileUtils.rm_rf(@dir) if @dir && !@keep
    end

    private

    def port_open?(port)
      Socket.tcp('127.0.0.1', port, connect_timeout: 0.2).close
      true
    rescue SystemCallError, SocketError
      false
    end

    def wait_ports(ports, pid)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PORT_WAIT
      until ports.all? { |p| port_open?(p) }
        if Process.waitpid(pid, Process::WNOHANG)
          abort "the gateway exited at start-up:\n#{File.read(File.join(@dir, 'gateway.out'))}"
        end
        abort 'the gateway did not open its ports' if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        sleep 0.02
      end
    end

    def stop(pid)
      Process.kill('TERM', pid)
      Timeout.timeout(10) { Process.wait(pid) }
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    rescue Timeout::Error
      Process.kill('KILL', pid)
      Process.wait(pid)
    end

    # Evaluates test/t/ngx_mruby.rb with the stand-ins above, one top-level
    # statement at a time in one binding: a statement that raises (say, a
    # version check on an unexpected answer) is reported and the rest still
    # run.
    def run_suite
      text = @src.read('test/t/ngx_mruby.rb').force_encoding('UTF-8')
      @all = text.scan(/^\s*t\.assert\((['"])(.*?)\1(?:,\s*(['"])(.*?)\3)?\)/).map { |_, n, _, d| [n, d] }
      ENV['NGINX_INSTALL_DIR'] = File.join(@dir, 'build/nginx') # the suite's html/ and logs/ are there
      sandbox = Object.new
      src = @src
      dir = @dir
      # The suite shells out (curl, openssl s_client, a helper script) from
      # its own classes too: Kernel#` itself is replaced for the run.
      Kernel.send(:define_method, :`) do |cmd|
        cur = Recorder.current
        cur&.commands&.push(cmd)
        if cmd.include?('issue-268-test.rb')
          script = src.read('test/t/issue-268-test.rb')
          f = File.join(dir, 'issue-268-test.rb')
          File.write(f, script)
          cur&.requests&.push([58080, '/issue-268'])
          out, = Open3.capture2('ruby', f)
          out
        else # curl https, openssl s_client: the real clients, against the TLS listeners
          out, = Timeout.timeout(30) { Open3.capture2('sh', '-c', cmd) }
          out
        end
      end
      b = sandbox.instance_eval { binding }
      lines = text.lines
      top = RubyVM::AbstractSyntaxTree.parse(text).children[2]
      stmts = top.type == :BLOCK ? top.children : [top]
      stmts.each do |node|
        code = lines[(node.first_lineno - 1)..(node.last_lineno - 1)].join
        begin
          b.eval(code, 'test/t/ngx_mruby.rb', node.first_lineno)
        rescue StandardError, ScriptError => e
          @stops << "test/t/ngx_mruby.rb:#{node.first_lineno}: #{e.class}: #{e.message[0, 160]}"
        end
      end
    end

    def classify(a)
      reasons = []
      needs = []
      locs = []
      a.commands.each do |c|
        port = c[/(?:localhost|127\.0\.0\.1):(\d+)/, 1].to_i
        srv = @translator.servers.find { |x| x.port == port }
        locs << Loc.new(srv, nil, '(TLS)', []) if srv && !srv.na # counted with all asserts, not the content bucket
      end
      a.requests.each do |port, path|
        uri = path.split('?', 2)[0]
        srv = @translator.servers.find { |s| s.port == port }
        if srv.nil?
          reasons << (@stream_ports.include?(port) ? "nginx's stream module (ngx_stream_mruby, port #{port}): TCP proxying, which the gateway does not do" : "listener #{port} added by Ruby at start-up (mruby_server_context_handler's Nginx::Server#add_listener): the gateway's listeners are its servers' listen:")
          next
        end
        reasons << srv.na if srv.na
        loc = srv.route(uri)
        next reasons << "no location for #{uri} on #{port}" unless loc
        locs << loc
        reasons << "#{loc.label}: #{loc.na}" if loc.na
        needs.concat(loc.needs.map { |n| "#{loc.label}: #{n}" })
      end
      [reasons.uniq, needs.uniq, locs.uniq]
    end

    def report
      @translator.servers.each do |srv|
        puts "server #{srv.port}: not translated: #{srv.needs.uniq.join('; ')}" unless srv.needs.empty?
      end
      @stops.each { |st| puts "suite statement failed (the suite's own code; the rest ran): #{st}" }
      rows = Recorder.results.map { |a| [a, *classify(a)] }
      pass = fail = na = 0
      bucket_total = bucket_pass = 0
      rows.each do |a, reasons, needs, locs|
        if !reasons.empty?
          na += 1
          puts "N/A   #{a.label}: #{reasons.join('; ')}"
          next
        end
        in_bucket = locs.any? { |l| l.content || l.async || l.phased }
        bucket_total += 1 if in_bucket
        if a.passed?
          pass += 1
          bucket_pass += 1 if in_bucket
          puts "PASS  #{a.label}"
        else
          fail += 1
          why = [a.error, *a.failures.first(3)].compact.join('; ')
          tag = needs.empty? ? 'FAIL ' : 'NEEDS'
          puts "#{tag} #{a.label}: #{why}"
          puts "        untranslated: #{needs.join('; ')}" unless needs.empty?
          locs.each { |l| puts "        #{l.label}: #{l.notes.join('; ')}" unless l.notes.empty? } if @verbose
        end
      end
      ran = Recorder.results.map { |a| [a.name, a.desc] }
      skipped = @all.reject { |x| ran.include?(x) }
      skipped.each do |n, d|
        why = if n =~ /upstream keepalive/
                'not run: the suite gates it on nginx >= 1.7 (for Nginx::Upstream) and /nginx-version answers the ' \
                "gateway's own version"
              elsif n =~ /\bstream\b|linstener/i
                "not run: the suite runs it only against nginx's stream module (ngx_stream_mruby: TCP proxying), which the gateway does not have"
              else
                "not run (the suite's version gate, or its statement failed)"
              end
        puts "SKIP  #{[n, d].compact.join(' / ')}: #{why}"
      end
      puts
      puts "asserts: #{@all.size} in the suite, #{rows.size} run, #{skipped.size} skipped by the suite itself"
      puts "not applicable: #{na}"
      puts "applicable: #{pass + fail}, passed #{pass}, failed #{fail}"
      puts "content/phase/async asserts (a location with a content handler, proxy_pass, a phase or filter, " \
           "or Nginx::Async): #{bucket_pass} of #{bucket_total} pass"
    end
  end
end

if $PROGRAM_NAME == __FILE__
  args = ARGV.dup
  host_net = !args.delete('--host-network').nil?
  if !host_net && ENV['NGX_SUITE_NETNS'].nil? && Process.uid.zero? &&
     system('sh', '-c', 'command -v unshare >/dev/null && command -v ip >/dev/null')
    ENV['NGX_SUITE_NETNS'] = '1'
    exec('unshare', '-n', 'sh', '-c', 'ip link set lo up && exec "$0" "$@"', RbConfig.ruby, __FILE__, *ARGV)
  end
  verbose = !args.delete('--verbose').nil?
  keep = !args.delete('--keep').nil?
  bin = File.join(NgxSuite::ROOT, 'build/gateway')
  if (i = args.index('--gateway'))
    bin = File.expand_path(args[i + 1])
    args.slice!(i, 2)
  end
  src = NgxSuite::Source.open(args[0])
  unless src
    puts "ngx_mruby suite: skipped: give the path of a local ngx_mruby checkout or bare clone " \
         "(#{args[0] ? "#{args[0]} holds no test/conf/nginx.conf" : 'no path given'}); this tool fetches nothing"
    exit 0
  end
  abort "gateway binary #{bin} not found: run `rake`" unless File.executable?(bin)
  NgxSuite::Runner.new(src, bin, verbose: verbose, keep: keep).run
end
