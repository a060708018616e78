module Gateway
  # The connection a `websocket:` location's block gets (RFC 6455 is done in
  # C: handshake, frames, pings, the close handshake; see docs/protocols.md,
  # "WebSocket handlers in Ruby").
  #
  #   location "/echo", websocket: ->(ws, req) {
  #     while (msg = ws.receive)             # a String; nil once the peer closed
  #       ws.send("echo: #{msg}", binary: ws.last_binary?)
  #     end
  #   }
  class WebSocket
    # What the handler fiber calls: handler.call(req) -> block.call(ws, req).
    class Runner
      def initialize(block)
        @block = block
      end

      def call(req)
        @block.call(WebSocket._attach(req), req)
        nil
      end
    end

    # The next message (text or binary: see #last_binary?), parking this
    # handler until it comes; nil once the connection is closing or closed.
    # Only in the connection's own handler.
    def receive
      return nil unless _receive_start
      v = Fiber.yield
      raise v if v.is_a?(Exception)
      v
    end

    # Queues a message (text, or binary: true). In the connection's own
    # handler it parks while more than 256 KiB wait to be written; from any
    # other fiber it only queues. true, or false when the connection is
    # closing or closed (nothing sent).
    def send(data, binary: false)
      r = _send(data.to_s, binary ? true : false)
      return r unless r == :wait
      v = Fiber.yield
      raise v if v.is_a?(Exception)
      v
    end

    def inspect
      "#<Gateway::WebSocket #{closed? ? 'closed' : 'open'}>"
    end
  end
end
