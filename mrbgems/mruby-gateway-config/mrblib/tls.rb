# TLS and HTTP/2 options of `server` (the certificates are loaded by the core
# when the config is read, so a bad file is reported as FILE:LINE of the server).
#
#   server listen: 8443, tls: { cert: "site.pem", key: "site.key" } do ... end
#   server listen: 8443, tls: [{ server_name: "a.example", cert: "a.pem", key: "a.key" },
#                              { server_name: "*.b.example", cert: "b.pem", key: "b.key" }] do ... end
#   tls: { cert:, key:, ocsp: "site.ocsp.der" }   OCSP stapling from a file (per certificate)
#   tls: { cert:, key:, on_handshake: ->(ssl) { ssl.certificate = "/c/#{ssl.servername}.pem"; ... } }
#   tls: { ..., protocols: ["TLSv1.3"], ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256:...", ciphersuites: "..." }
#   server listen: 8080, http2: true do ... end   h2c (prior knowledge) next to HTTP/1.1
module Gateway
  class Server
    attr_accessor :tls, :http2, :tls_line
  end

  module TLS
    PROTOCOLS = ["TLSv1.2", "TLSv1.3"]
    CERT_KEYS = [:server_name, :cert, :key, :ocsp, :protocols, :ciphers, :ciphersuites, :on_handshake,
                 :on_handshake_cache]

    # on_handshake: a Proc (->(ssl) { ... }), or a handler file (ngx_mruby's
    # mruby_ssl_handshake_handler FILE): compiled once at load
    # (on_handshake_cache: true, the default: ngx_mruby's `cache`), or read
    # and compiled again for every handshake (false), so an edit applies to
    # the next handshake without a reload. The file is checked at load either
    # way; it reads the handshake with Nginx::SSL.new (or `req`, the same).
    def self.handshake_hook(hook, cache)
      unless cache == true || cache == false
        raise ArgumentError, "server: tls: on_handshake_cache: must be true or false, got #{cache.inspect}"
      end
      if hook.is_a?(String)
        code = Config.phase("server: tls", :on_handshake, hook) # FILE:LINE of a file that does not compile
        return ->(ssl) { code.call(ssl) } if cache
        path = hook.start_with?("/") || Config.file.nil? || !Config.file.include?("/") ? hook : Config.file[0, Config.file.rindex("/") + 1] + hook
        return ->(ssl) { Gateway._compile_file(path).call(ssl) }
      end
      unless hook.is_a?(Proc)
        raise ArgumentError, "server: tls: on_handshake must be a Proc taking the handshake (->(ssl) { ... }) or a handler file, got #{hook.inspect}"
      end
      raise ArgumentError, "server: tls: on_handshake_cache: applies to a handler file" unless cache == true
      hook
    end

    # nil, or { certs: [{ server_name:, cert:, key: }], protocols: [...], ciphers:, ciphersuites: }
    def self.parse(tls)
      return nil if tls.nil? || tls == false
      list = tls.is_a?(Hash) ? [tls] : tls
      unless list.is_a?(Array) && !list.empty? && list.all? { |h| h.is_a?(Hash) }
        raise ArgumentError, "server: tls must be { cert: \"site.pem\", key: \"site.key\" } or an Array of " \
                             "{ server_name:, cert:, key: }, got #{tls.inspect}"
      end
      out = { certs: [], protocols: PROTOCOLS, ciphers: nil, ciphersuites: nil, on_handshake: nil }
      list.each_with_index do |h, i|
        h.each_key do |k|
          raise ArgumentError, "server: tls: unknown key #{k.inspect} (known: #{CERT_KEYS.join(', ')})" unless CERT_KEYS.include?(k)
        end
        [:cert, :key].each do |k|
          unless h[k].is_a?(String) && !h[k].empty?
            raise ArgumentError, "server: tls: #{k}: must be a file path (PEM), got #{h[k].inspect}"
          end
        end
        name = h[:server_name]
        unless name.nil? || (name.is_a?(String) && !name.empty? && !name.include?(" "))
          raise ArgumentError, "server: tls: server_name must be a host name like \"a.example\" or \"*.example\", got #{name.inspect}"
        end
        if list.size > 1 && name.nil? && i > 0
          raise ArgumentError, "server: tls: only the first certificate (the default) may come without server_name"
        end
        unless h[:ocsp].nil? || (h[:ocsp].is_a?(String) && !h[:ocsp].empty?)
          raise ArgumentError, "server: tls: ocsp: must be a file path (a DER OCSP response), got #{h[:ocsp].inspect}"
        end
        out[:certs] << { server_name: name, cert: h[:cert], key: h[:key], ocsp: h[:ocsp] }
        if h.key?(:protocols)
          p = h[:protocols]
          p = [p] if p.is_a?(String)
          unless p.is_a?(Array) && !p.empty? && p.all? { |x| PROTOCOLS.include?(x) }
            raise ArgumentError, "server: tls: protocols must be a non-empty subset of #{PROTOCOLS.inspect}, got #{h[:protocols].inspect}"
          end
          out[:protocols] = p
        end
        if h.key?(:on_handshake)
          out[:on_handshake] = handshake_hook(h[:on_handshake], h.fetch(:on_handshake_cache, true))
        elsif h.key?(:on_handshake_cache)
          raise ArgumentError, "server: tls: on_handshake_cache: needs on_handshake: \"FILE\""
        end
        [:ciphers, :ciphersuites].each do |k|
          next unless h.key?(k)
          raise ArgumentError, "server: tls: #{k} must be an OpenSSL cipher String, got #{h[k].inspect}" unless h[k].is_a?(String) && !h[k].empty?
          out[k] = h[k]
        end
      end
      out
    end

    # http2: true (h2c on a plain listener; h2 by ALPN on a TLS one), false,
    # or nil: on for TLS listeners, off for plain ones.
    def self.http2(v, tls)
      raise ArgumentError, "server: http2 must be true or false, got #{v.inspect}" unless v.nil? || v == true || v == false
      v.nil? ? !tls.nil? : v
    end

    # HTTPS upstreams (proxy_pass: "https://...", "https://" servers of an
    # upstream group, req.proxy_pass and sub-requests to https:// URLs): the
    # tls_* options of a location or an upstream group. nil when none is
    # given (the defaults: verified against the system's CAs, for the URL's
    # host); else { verify:, ca:, server_name:, cert:, key:, line: } (the
    # files are loaded by the core, relative to the config file).
    def self.client(where, verify, ca, server_name, cert, key)
      return nil if verify.nil? && ca.nil? && server_name.nil? && cert.nil? && key.nil?
      unless verify.nil? || verify == true || verify == false
        raise ArgumentError, "#{where}: tls_verify must be true or false, got #{verify.inspect}"
      end
      { tls_ca: ca, tls_cert: cert, tls_key: key }.each do |k, v|
        next if v.nil? || (v.is_a?(String) && !v.empty? && !v.include?("\0"))
        raise ArgumentError, "#{where}: #{k} must be a file path (PEM), got #{v.inspect}"
      end
      unless server_name.nil? || (server_name.is_a?(String) && !server_name.empty? && server_name.bytes.all? { |b| b > 32 && b < 127 })
        raise ArgumentError, "#{where}: tls_server_name must be a host name like \"api.example\", got #{server_name.inspect}"
      end
      raise ArgumentError, "#{where}: tls_cert and tls_key go together (a client certificate and its key)" if cert.nil? != key.nil?
      { verify: verify.nil? ? true : verify, ca: ca, server_name: server_name, cert: cert, key: key, line: caller_line }
    end

    # The config file's line of the `server` call being evaluated.
    def self.caller_line
      raise "where"
    rescue => e
      f = Gateway::Config.file
      (e.backtrace || []).each do |l|
        next unless f && l.start_with?(f + ":")
        return l[f.size + 1, l.size].to_i
      end
      0
    end
  end
end
