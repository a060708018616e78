# Async::Redis: a non-blocking Redis client. Each command parks the
# handler's fiber (the worker serves others meanwhile) and resumes it with
# the reply as a Ruby object: nil, Integer, String (status replies too:
# "OK"), Array. An error reply raises Async::Redis::Error with Redis's
# message; a timeout raises Gateway::TimeoutError, a connection failure or a
# reply that is not RESP Gateway::UpstreamError.
module Async
  class Redis
    class Error < Gateway::Error; end

    # The commands with helpers; each one is `call(...)` underneath, so a
    # pipeline or a MULTI block has them too.
    module Commands
      def get(key)
        call("GET", key)
      end

      # set(k, v, ex: seconds, nx: true): "OK", or nil when nx: and the key exists.
      def set(key, value, ex: nil, nx: false)
        args = ["SET", key, value]
        if ex
          args << "EX"
          args << ex
        end
        args << "NX" if nx
        call(*args)
      end

      def incr(key)
        call("INCR", key)
      end

      def incrby(key, by)
        call("INCRBY", key, by)
      end

      def expire(key, seconds)
        call("EXPIRE", key, seconds)
      end

      def del(*keys)
        call("DEL", *keys)
      end

      def hget(key, field)
        call("HGET", key, field)
      end

      def hset(key, field, value)
        call("HSET", key, field, value)
      end

      def publish(channel, message)
        call("PUBLISH", channel, message)
      end

      # eval(script, keys = [], args = []): the script's reply.
      def eval(script, keys = [], args = [])
        call("EVAL", script, keys.size, *keys, *args)
      end

      def evalsha(sha, keys = [], args = [])
        call("EVALSHA", sha, keys.size, *keys, *args)
      end
    end
    include Commands

    # Commands gathered by pipeline { |p| ... } and multi { |m| ... }.
    class Batch
      include Commands
      attr_reader :commands

      def initialize
        @commands = []
      end

      def call(*args)
        @commands << args
        nil
      end
    end

    DEFAULT_ADDR = "127.0.0.1:6379".freeze
    AWAIT_FIBER = ::Fiber
    AWAIT_EXCEPTION = ::Exception

    attr_reader :servers, :timeout

    # Async::Redis.new("127.0.0.1:6379", db: 0, password: nil, timeout: 2.0, pool: 32)
    # Objects naming the same address, db and password share this worker's
    # pool of connections (at most pool:, more callers wait in line).
    # servers: an Array of addresses is used in turn (round robin).
    # Behind Redis Sentinel: Async::Redis.new(sentinels: ["10.0.0.1:26379", ...],
    # master_name: "mymaster") talks to the master they name, and follows
    # them when they promote a replica. A Redis Cluster:
    # Async::Redis.new(cluster: ["10.0.0.1:7000", ...]) (any of its nodes).
    def initialize(addr = DEFAULT_ADDR, db: 0, password: nil, timeout: 2.0, pool: 32, sentinels: nil, master_name: nil,
                   cluster: nil)
      list = if cluster
               [Redis._cluster_addr(cluster)]
             elsif sentinels || master_name
               [Redis._sentinel_addr(sentinels, master_name)]
             else
               addr.is_a?(Array) ? addr : [addr]
             end
      unless !list.empty? && list.all? { |a| a.is_a?(String) && (a.start_with?("unix:/") || a.include?(":")) }
        raise ArgumentError, "Async::Redis: address must be \"host:port\" or \"unix:/path\", got #{addr.inspect}"
      end
      raise ArgumentError, "Async::Redis: db must be an Integer >= 0" unless db.is_a?(Integer) && db >= 0
      raise ArgumentError, "Async::Redis: password must be a String" unless password.nil? || password.is_a?(String)
      unless timeout.nil? || (timeout.is_a?(Numeric) && timeout > 0)
        raise ArgumentError, "Async::Redis: timeout must be a positive number of seconds (or nil)"
      end
      raise ArgumentError, "Async::Redis: pool must be an Integer from 1 to 1024" unless pool.is_a?(Integer) && pool >= 1 && pool <= 1024
      @servers = list
      @timeout = timeout
      _gw_init(list, db, password, pool, timeout ? timeout.to_f : 0.0)
    end

    # call("GET", k): any command, arguments turned to Strings.
    def call(*args)
      _gw_send(args, 0)
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      v
    end

    # pipeline { |p| p.incr("a"); p.expire("a", 60) } -> [1, 1]: one round
    # trip. An error reply is an element of the result (an Async::Redis::Error
    # object, not raised), as redis-rb's pipelined(exception: false).
    def pipeline
      b = Batch.new
      yield b
      return [] if b.commands.empty?
      _gw_send(b.commands, 1)
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      v
    end

    # multi { |m| m.incr("a"); m.get("a") } -> EXEC's replies (errors of
    # commands that ran as elements); a command Redis refused to queue
    # raises the EXECABORT error; nil if a WATCHed key changed.
    def multi
      b = Batch.new
      yield b
      _gw_send(b.commands, 2)
      v = AWAIT_FIBER.yield
      raise v if v.is_a?(AWAIT_EXCEPTION)
      v
    end

    # redis.subscribe("ch1", "ch2") { |message, channel| ... }: a connection
    # of this worker's own that stays subscribed (reconnected with backoff);
    # the block runs in a fiber of its own per message, and may wait (async
    # calls). Call it from init_worker:. psubscribe takes patterns.
    def subscribe(*channels, &block)
      Redis._check_subscribe(channels, block)
      _gw_subscribe(channels, false, block)
      nil
    end

    def psubscribe(*patterns, &block)
      Redis._check_subscribe(patterns, block)
      _gw_subscribe(patterns, true, block)
      nil
    end

    def inspect
      "#<Async::Redis #{@servers.join(',')}>"
    end

    # Async::Redis.subscribe("ch", redis: "127.0.0.1:6379" or Async::Redis[:name]) { |msg, ch| }
    def self.subscribe(*channels, redis: nil, &block)
      client = redis.is_a?(Redis) ? redis : Redis.new(redis || DEFAULT_ADDR)
      client.subscribe(*channels, &block)
    end

    # "sentinel:NAME@host:port,...": the address the core reads as "ask these
    # sentinels for NAME's master".
    def self._sentinel_addr(sentinels, master_name)
      unless sentinels.is_a?(Array) && !sentinels.empty? &&
             sentinels.all? { |a| a.is_a?(String) && a.include?(":") && !a.include?(",") && !a.include?("@") }
        raise ArgumentError, "Async::Redis: sentinels: must be an Array of \"host:port\", got #{sentinels.inspect}"
      end
      unless master_name.is_a?(String) && !master_name.empty? && !master_name.include?("@") &&
             !master_name.include?(" ") && master_name.size <= 255
        raise ArgumentError, "Async::Redis: master_name: must name the master the sentinels monitor, got #{master_name.inspect}"
      end
      "sentinel:#{master_name}@#{sentinels.join(',')}"
    end

    # "cluster:host:port,...": the nodes the core asks for the slot map.
    def self._cluster_addr(nodes)
      unless nodes.is_a?(Array) && !nodes.empty? &&
             nodes.all? { |a| a.is_a?(String) && a.include?(":") && !a.include?(",") && !a.start_with?("unix:") }
        raise ArgumentError, "Async::Redis: cluster: must be an Array of \"host:port\" (nodes of the cluster), got #{nodes.inspect}"
      end
      "cluster:#{nodes.join(',')}"
    end

    def self._check_subscribe(channels, block)
      raise ArgumentError, "subscribe: a block is required" unless block
      unless !channels.empty? && channels.all? { |c| c.is_a?(String) && !c.empty? }
        raise ArgumentError, "subscribe: give channel names (Strings), got #{channels.inspect}"
      end
    end

    # The proc a message's task fiber runs (called by the core with the
    # task's request).
    def self._task_for(block, message, channel)
      lambda { |_req| block.call(message, channel); nil }
    end

    # Named pools from the config: `redis :cache, servers: [...], pool: 32`.
    def self._pools
      @pools ||= {}
    end

    # Async::Redis[:cache]: the client of a pool declared with `redis`.
    def self.[](name)
      _pools[name.to_sym] or raise ArgumentError, "Async::Redis[#{name.inspect}]: no such pool (declare it with: redis #{name.inspect}, servers: [...])"
    end
  end
end

# redis :cache, servers: ["127.0.0.1:6379"], pool: 32, db: 0, password: nil, timeout: 2.0
# A named Redis pool for handlers: Async::Redis[:cache]. Several servers are
# used in turn. Or behind Redis Sentinel:
# redis :fleet, sentinels: ["10.0.0.1:26379", ...], master_name: "mymaster"
# or a Redis Cluster: redis :fleet, cluster: ["10.0.0.1:7000", ...]
def redis(name, servers: nil, sentinels: nil, master_name: nil, cluster: nil, pool: 32, db: 0, password: nil, timeout: 2.0)
  raise ArgumentError, "redis: the name must be a Symbol like :cache, got #{name.inspect}" unless name.is_a?(Symbol)
  raise ArgumentError, "redis #{name.inspect} is defined twice" if Async::Redis._pools.key?(name)
  if [servers, sentinels || master_name, cluster].compact.size != 1
    raise ArgumentError, "redis #{name.inspect}: give one of servers: [...], sentinels: [...] with master_name:, " \
                         "or cluster: [...] (not both)"
  end
  raise ArgumentError, "redis #{name.inspect}: a Redis Cluster has only db 0" if cluster && db != 0
  list = servers.is_a?(Array) ? servers : [servers]
  Async::Redis._pools[name] = Async::Redis.new(list, db: db, password: password, timeout: timeout, pool: pool,
                                                     sentinels: sentinels, master_name: master_name, cluster: cluster)
end
