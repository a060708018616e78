# A tiny broadcast chat: every message one browser sends, all of them see.
# One room per worker (workers: 1 here, so everyone is in the same room).
#   build/gateway -f examples/chat.rb      then open http://127.0.0.1:8090/
#
# The page is served by the same file ("/" below); its script connects to
# "/chat", a websocket: location whose block runs once per connection, in a
# fiber of its own, for as long as the connection lasts.
ROOM = [] # the open connections of this worker (Gateway::WebSocket objects)

PAGE = <<~HTML
  <!doctype html>
  <meta charset="utf-8">
  <title>gateway chat</title>
  <style>body{font:16px sans-serif;max-width:40em;margin:2em auto}#log{border:1px solid #ccc;height:20em;overflow:auto;padding:.5em}</style>
  <h1>chat</h1>
  <div id="log"></div>
  <form id="f"><input id="msg" autocomplete="off" size="50" autofocus> <button>send</button></form>
  <script>
    const log = document.getElementById("log");
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/chat");
    const show = (text) => { const p = document.createElement("div"); p.textContent = text; log.append(p); log.scrollTop = log.scrollHeight; };
    ws.onmessage = (e) => show(e.data);
    ws.onclose = (e) => show("(disconnected: " + e.code + ")");
    document.getElementById("f").onsubmit = (e) => {
      e.preventDefault();
      const input = document.getElementById("msg");
      if (input.value) ws.send(input.value);
      input.value = "";
    };
  </script>
HTML

server listen: 8090, workers: 1 do
  location "= /" do
    [200, { "content-type" => "text/html; charset=utf-8" }, [PAGE]]
  end

  location "/chat", websocket_max_message: 4096, websocket: ->(ws, req) {
    $guests = $guests.to_i + 1
    name = "guest#{$guests}"
    ROOM << ws
    begin
      ROOM.each { |peer| peer.send("* #{name} joined") }
      while (msg = ws.receive)
        next if ws.last_binary?
        line = "#{name}: #{msg}"
        ROOM.each { |peer| peer.send(line) } # another connection's send only queues
      end
    ensure
      ROOM.delete(ws)
      ROOM.each { |peer| peer.send("* #{name} left") }
    end
  }
end
