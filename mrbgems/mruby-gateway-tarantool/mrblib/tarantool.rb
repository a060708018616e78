# Async::Tarantool: a non-blocking Tarantool client speaking iproto. Each
# request parks the handler's fiber (the worker serves others meanwhile) and
# resumes it with the reply as Ruby objects (msgpack map -> Hash, array ->
# Array, str/bin -> String, ext (decimal, uuid) -> its raw bytes). An error
# reply raises Async::Tarantool::Error with Tarantool's message (#code: its
# error code); a timeout raises Gateway::TimeoutError, a refused or dropped
# connection or a reply that is not iproto Gateway::UpstreamError.
module Async
  class Tarantool
    class Error < Gateway::Error
      # Tarantool's error code (ER_*), nil for errors of this client.
      def code
        @code
      end
    end

    # iproto request types and body keys (Tarantool's iproto_constants.h).
    SELECT = 1
    INSERT = 2
    REPLACE = 3
    UPDATE = 4
    DELETE = 5
    EVAL = 8
    UPSERT = 9
    CALL = 10
    EXECUTE = 11
    PING = 64
    K_SPACE = 0x10
    K_INDEX = 0x11
    K_LIMIT = 0x12
    K_OFFSET = 0x13
    K_ITERATOR = 0x14
    K_KEY = 0x20
    K_TUPLE = 0x21
    K_FUNCTION = 0x22
    K_EXPR = 0x27
    K_OPS = 0x28
    VSPACE = 281 # _vspace: index 2 is the name
    VINDEX = 289 # _vindex: index 2 is [space id, name]

    ITERATORS = { eq: 0, req: 1, all: 2, lt: 3, le: 4, ge: 5, gt: 6, bits_all_set: 7, bits_any_set: 8,
                  bits_all_not_set: 9, overlaps: 10, neighbor: 11 }.freeze

    DEFAULT_ADDR = "127.0.0.1:3301".freeze
    AWAIT_FIBER = ::Fiber
    AWAIT_EXCEPTION = ::Exception

    attr_reader :servers, :timeout

    # Async::Tarantool.new("127.0.0.1:3301", user: nil, password: nil, timeout: 2.0, pool: 8)
    # Objects naming the same address, user and password share this worker's
    # pool (at most pool: connections; requests are pipelined on them).
    # An Array of addresses is used in turn (round robin).
    def initialize(addr = DEFAULT_ADDR, user: nil, password: nil, timeout: 2.0, pool: 8)
      list = addr.is_a?(Array) ? addr : [addr]
      unless !list.empty? && list.all? { |a| a.is_a?(String) && (a.start_with?("unix:/") || a.include?(":")) }
        raise ArgumentError, "Async::Tarantool: address must be \"host:port\" or \"unix:/path\", got #{addr.inspect}"
      end
      raise ArgumentError, "Async::Tarantool: user must be a String" unless user.nil? || user.is_a?(String)
      raise ArgumentError, "Async::Tarantool: password must be a String" unless password.nil? || password.is_a?(String)
      unless timeout.nil? || (timeout.is_a?(Numeric) && timeout > 0)
        raise ArgumentError, "Async::Tarantool: timeout must be a positive number of seconds (or nil)"
      end
      unless pool.is_a?(Integer) && pool >= 1 && pool <= 1024
        raise ArgumentError, "Async::Tarantool: pool must be an Integer from 1 to 1024"
      end
      @servers = list
      @timeout = timeout
      @space_ids = {}
      @index_ids = {}
      _gw_init(list, user, password, pool, timeout ? timeout.to_f : 0.0)
    end

    # One request: its DATA (or nil), or raises.
    def request(type, body)
      _gw_send(type, body)
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      v
    end

    def ping
      request(PING, {})
      true
    end

    # call("fn", [args]) -> the function's return values (an Array).
    # (Natives that build no Hash and an inline wait: this is the hot path
    # of a handler calling Tarantool.)
    def call(fn, args = [])
      _gw_call(fn.to_s, args.is_a?(Array) ? args : [args])
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      v
    end

    # eval("return ...", [args]) -> the chunk's return values (an Array).
    def eval(expr, args = [])
      _gw_eval(expr.to_s, args.is_a?(Array) ? args : [args])
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      v
    end

    # execute("SELECT * FROM t WHERE id = ?", [1]) -> an SQLResult (SQL,
    # Tarantool 2.x; iproto EXECUTE). binds: an Array for `?` placeholders,
    # or a Hash for named ones (`:name`; keys with or without the colon).
    def execute(sql, binds = [])
      raise ArgumentError, "Async::Tarantool#execute: sql must be a String" unless sql.is_a?(String)
      list = case binds
             when Array then binds
             when Hash then binds.map { |k, v| { (k.to_s.start_with?(":") ? k.to_s : ":#{k}") => v } }
             else raise ArgumentError, "Async::Tarantool#execute: binds must be an Array or a Hash"
             end
      _gw_execute(sql, list)
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      SQLResult.new(v)
    end

    # The result of #execute: rows (Arrays, in the columns' order) with the
    # columns' names and types for a SELECT; row_count (and the ids an
    # autoincrement made) for INSERT, UPDATE, DELETE and DDL.
    class SQLResult
      include Enumerable

      # [{"name" => "ID", "type" => "integer"}, ...]; [] for a statement without rows
      attr_reader :metadata
      attr_reader :rows       # [[1, "a"], ...]; [] without rows
      attr_reader :row_count  # rows changed (DML, DDL), nil for a SELECT
      attr_reader :autoincrement_ids # ids generated by this statement, [] if none

      # body: the reply's body by iproto keys (METADATA 0x32, DATA 0x30, SQL_INFO 0x42).
      def initialize(body)
        @metadata = (body[0x32] || []).map { |f| { "name" => f[0], "type" => f[1] } }
        @rows = body[0x30] || []
        info = body[0x42]
        @row_count = info ? info[0] : nil
        @autoincrement_ids = (info && info[1]) || []
      end

      def columns
        @metadata.map { |f| f["name"] }
      end

      def each(&block)
        @rows.each(&block)
        self
      end

      def size
        @rows.size
      end

      def [](i)
        @rows[i]
      end

      def to_a
        @rows
      end

      # Rows as Hashes, column name => value.
      def to_h_rows
        names = columns
        @rows.map { |r| names.each_with_index.map { |n, i| [n, r[i]] }.to_h }
      end

      def inspect
        "#<Async::Tarantool::SQLResult columns=#{columns.inspect} rows=#{@rows.size} row_count=#{@row_count.inspect}>"
      end
    end

    # select(space, index = 0, key = [], limit:, offset:, iterator:) -> tuples.
    # space and index: ids, or names (looked up once per object in
    # _vspace/_vindex). iterator: :eq, :req, :all, :lt, :le, :ge, :gt, ... or its number.
    def select(space, index = 0, key = [], limit: 0xffffffff, offset: 0, iterator: :eq)
      it = iterator.is_a?(Integer) ? iterator : ITERATORS[iterator]
      raise ArgumentError, "Async::Tarantool#select: unknown iterator #{iterator.inspect}" unless it
      sid = space_id(space)
      request(SELECT, { K_SPACE => sid, K_INDEX => index_id(sid, index), K_LIMIT => limit, K_OFFSET => offset,
                        K_ITERATOR => it, K_KEY => Tarantool._list(key) })
    end

    # insert(space, tuple) -> the tuple inserted (a duplicate key raises Error).
    def insert(space, tuple)
      request(INSERT, { K_SPACE => space_id(space), K_TUPLE => tuple }).first
    end

    # replace(space, tuple) -> the tuple stored.
    def replace(space, tuple)
      request(REPLACE, { K_SPACE => space_id(space), K_TUPLE => tuple }).first
    end

    # update(space, index, key, [["+", 2, 1], ["=", 3, "x"]]) -> the new tuple, or nil (no such key).
    def update(space, index, key, ops)
      sid = space_id(space)
      # UPDATE carries its operations as the tuple (UPSERT has a key of its own).
      request(UPDATE, { K_SPACE => sid, K_INDEX => index_id(sid, index), K_KEY => Tarantool._list(key),
                        K_TUPLE => ops }).first
    end

    # delete(space, index, key) -> the tuple deleted, or nil.
    def delete(space, index, key)
      sid = space_id(space)
      request(DELETE, { K_SPACE => sid, K_INDEX => index_id(sid, index), K_KEY => Tarantool._list(key) }).first
    end

    # upsert(space, tuple, ops) -> nil.
    def upsert(space, tuple, ops)
      request(UPSERT, { K_SPACE => space_id(space), K_TUPLE => tuple, K_OPS => ops })
      nil
    end

    # A space's id: an Integer as is, a name looked up (and remembered).
    def space_id(space)
      return space if space.is_a?(Integer)
      name = space.to_s
      @space_ids[name] ||= begin
        row = request(SELECT, { K_SPACE => VSPACE, K_INDEX => 2, K_LIMIT => 1, K_KEY => [name] }).first
        raise Error, "Async::Tarantool: no space named #{name.inspect}" unless row
        row[0]
      end
    end

    def index_id(sid, index)
      return index if index.is_a?(Integer)
      name = index.to_s
      @index_ids[[sid, name]] ||= begin
        row = request(SELECT, { K_SPACE => VINDEX, K_INDEX => 2, K_LIMIT => 1, K_KEY => [sid, name] }).first
        raise Error, "Async::Tarantool: space #{sid} has no index named #{name.inspect}" unless row
        row[1]
      end
    end

    def inspect
      "#<Async::Tarantool #{@servers.join(',')}>"
    end

    def self._list(v)
      v.is_a?(Array) ? v : [v]
    end

    # Named pools from the config: `tarantool :tnt, servers: [...]`.
    def self._pools
      @pools ||= {}
    end

    # Async::Tarantool[:tnt]: the client of a pool declared with `tarantool`.
    def self.[](name)
      _pools[name.to_sym] or
        raise ArgumentError, "Async::Tarantool[#{name.inspect}]: no such pool (declare it with: tarantool #{name.inspect}, servers: [...])"
    end
  end
end

# tarantool :tnt, servers: ["127.0.0.1:3301"], user: nil, password: nil, pool: 8, timeout: 2.0
# A named Tarantool pool for handlers: Async::Tarantool[:tnt].
def tarantool(name, servers:, user: nil, password: nil, pool: 8, timeout: 2.0)
  raise ArgumentError, "tarantool: the name must be a Symbol like :tnt, got #{name.inspect}" unless name.is_a?(Symbol)
  raise ArgumentError, "tarantool #{name.inspect} is defined twice" if Async::Tarantool._pools.key?(name)
  list = servers.is_a?(Array) ? servers : [servers]
  Async::Tarantool._pools[name] = Async::Tarantool.new(list, user: user, password: password, timeout: timeout, pool: pool)
end
