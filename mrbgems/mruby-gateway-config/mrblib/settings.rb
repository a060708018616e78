# Process-wide directives, nginx's "main" context: the pid file, the error log
# and the access log. Each may appear once, at the top level of the config
# file; the values are stored on Gateway::Config.current, where the C core
# reads them (gateway/core/settings.c). Relative paths are relative to the config
# file's folder.
#
#   pid "/run/gateway.pid"         default: /tmp/gateway-<hash of the config path>.pid
#   error_log "logs/error.log", level: :info          default: :stderr, level: :notice
#   access_log "logs/access.log"                      default: :off
#   access_log :stderr, format: "$remote_addr $status $request_time"
#   user "gateway", group: "gateway"                  default: none (workers run as the master)
module Gateway
  class Config
    attr_reader :pid, :error_log, :error_log_level, :access_log, :access_log_format, :user, :group, :user_ids

    # Variables of an access_log format. Each is written as "-" when it has
    # no value (no upstream, no such header).
    ACCESS_LOG_VARIABLES = %w[
      remote_addr time_local time_iso8601 msec pid
      request method request_method uri request_uri args server_protocol server_port
      status bytes_sent body_bytes_sent request_time
      upstream_addr upstream_status upstream_response_time upstream_reused
      http2 stream_id proxy_protocol_addr realip_remote_addr cache_status
    ]

    # nginx's combined format, then the request time and what the upstream did:
    # rt= request time, ua= upstream address, us= upstream status,
    # ut= upstream response time (seconds), ur= 1 if the upstream connection
    # came from the keep-alive pool.
    ACCESS_LOG_FORMATS = {
      combined: '$remote_addr - - [$time_local] "$request" $status $body_bytes_sent ' \
                '"$http_referer" "$http_user_agent" rt=$request_time ua="$upstream_addr" ' \
                'us=$upstream_status ut=$upstream_response_time ur=$upstream_reused',
      nginx_combined: '$remote_addr - - [$time_local] "$request" $status $body_bytes_sent ' \
                      '"$http_referer" "$http_user_agent"',
    }

    def set_pid(path)
      raise ArgumentError, "pid is given twice" if @pid
      unless path.is_a?(String) && !path.empty? && !path.include?("\0")
        raise ArgumentError, "pid: give a file path like \"/run/gateway.pid\", got #{path.inspect}"
      end
      @pid = path
    end

    # The user (and group) the workers run as; looked up now, so a name the
    # system does not know is this line's error.
    def set_user(name, group)
      raise ArgumentError, "user is given twice" if @user
      { "user" => name, "group:" => group }.each do |what, v|
        next if v.nil? && what == "group:"
        unless v.is_a?(String) && !v.empty? && !v.include?("\0")
          raise ArgumentError, "user: #{what} must be a name like \"gateway\", got #{v.inspect}"
        end
      end
      @user_ids = Gateway._user_ids(name, group)
      @user = name
      @group = group
    end

    def set_error_log(target, level)
      raise ArgumentError, "error_log is given twice" if @error_log
      @error_log = Config.log_target("error_log", target, false)
      lv = level.is_a?(String) ? level.to_sym : level
      unless Gateway::LOG_LEVELS.include?(lv)
        raise ArgumentError, "error_log: level must be one of #{Gateway::LOG_LEVELS.map(&:inspect).join(', ')}, got #{level.inspect}"
      end
      @error_log_level = lv
    end

    def set_access_log(target, format)
      raise ArgumentError, "access_log is given twice" if @access_log
      @access_log = Config.log_target("access_log", target, true)
      template = format
      if format.is_a?(Symbol)
        template = ACCESS_LOG_FORMATS[format]
        unless template
          raise ArgumentError, "access_log: unknown format #{format.inspect} (known: #{ACCESS_LOG_FORMATS.keys.map(&:inspect).join(', ')}, or a String with $variables)"
        end
      end
      @access_log_format = Config.parse_log_format(template)
    end

    # :stderr, :off (false) when allowed, or a path String.
    def self.log_target(directive, target, off_ok)
      return :stderr if target == :stderr
      return :off if off_ok && (target == :off || target == false)
      unless target.is_a?(String) && !target.empty? && !target.include?("\0")
        allowed = off_ok ? "a file path, :stderr or :off" : "a file path or :stderr"
        raise ArgumentError, "#{directive}: give #{allowed}, got #{target.inspect}"
      end
      target
    end

    # "$a x ${b}y" -> [:a, " x ", :b, "y"]: literal Strings and variable
    # Symbols; http_NAME and sent_http_NAME are request and response headers.
    def self.parse_log_format(template)
      unless template.is_a?(String)
        raise ArgumentError, "access_log: format must be :combined, :nginx_combined or a String with $variables, got #{template.inspect}"
      end
      parts = []
      lit = ""
      i = 0
      n = template.size
      while i < n
        c = template[i]
        if c != "$"
          lit << c
          i += 1
          next
        end
        braced = template[i + 1] == "{"
        j = braced ? i + 2 : i + 1
        name = ""
        while j < n && Config.name_char?(template[j])
          name << template[j]
          j += 1
        end
        if braced
          unless template[j] == "}"
            raise ArgumentError, "access_log: unterminated ${ in format #{template.inspect}"
          end
          j += 1
        end
        if name.empty?
          raise ArgumentError, "access_log: a $ without a variable name in format #{template.inspect} (the variables: #{ACCESS_LOG_VARIABLES.map { |v| "$#{v}" }.join(' ')} $http_NAME $sent_http_NAME)"
        end
        unless ACCESS_LOG_VARIABLES.include?(name) || Config.header_variable?(name)
          raise ArgumentError, "access_log: unknown variable $#{name} (known: #{ACCESS_LOG_VARIABLES.map { |v| "$#{v}" }.join(' ')} $http_NAME $sent_http_NAME)"
        end
        parts << lit unless lit.empty?
        lit = ""
        parts << name.to_sym
        i = j
      end
      parts << lit unless lit.empty?
      parts
    end

    def self.name_char?(c)
      b = c.getbyte(0)
      (b >= 97 && b <= 122) || (b >= 65 && b <= 90) || (b >= 48 && b <= 57) || b == 95
    end

    def self.header_variable?(name)
      (name.start_with?("http_") && name.size > 5) || (name.start_with?("sent_http_") && name.size > 10)
    end

    # The directives below exist only at the top level of a config file.
    def self.top_level!(directive, receiver)
      if receiver.is_a?(Gateway::Server)
        raise ArgumentError, "#{directive}: only at the top level of the config file, not inside a server block"
      end
    end
  end
end

# pid "/run/gateway.pid": where the master writes its process id, and where
# `gateway -s reload|stop|quit|reopen -f FILE` finds it.
def pid(path)
  Gateway::Config.top_level!("pid", self)
  Gateway::Config.current.set_pid(path)
end

# error_log "/var/log/gateway/error.log", level: :notice
# error_log :stderr, level: :debug
def error_log(target = :stderr, level: :notice)
  Gateway::Config.top_level!("error_log", self)
  Gateway::Config.current.set_error_log(target, level)
end

# access_log "/var/log/gateway/access.log"                  # format: :combined
# access_log :stderr, format: '$remote_addr "$request" $status $request_time'
# access_log :off
def access_log(target, format: :combined)
  Gateway::Config.top_level!("access_log", self)
  Gateway::Config.current.set_access_log(target, format)
end

# user "gateway", group: "gateway": the master (run as root) binds the
# listening sockets and opens the logs, then each worker switches to this
# user (its groups, or group:) before it runs anything of the config. When
# the master is not root it is ignored, with a warning (nginx's rule).
def user(name, group: nil)
  Gateway::Config.top_level!("user", self)
  Gateway::Config.current.set_user(name, group)
end
