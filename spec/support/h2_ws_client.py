"""An RFC 8441 WebSocket client over HTTP/2 for spec/websocket_h2_spec.rb
(Debian's python3-h2 for the framing; RFC 6455 frames written here).

usage: h2_ws_client.py PORT MODE PATH [ARG]   (H2_TLS_CA=ca.pem: h2 over TLS, ALPN)
Modes (each prints one line per step, "ok ..." at the end on success):
  settings      the server's SETTINGS_ENABLE_CONNECT_PROTOCOL
  echo          extended CONNECT, text, binary and a 1 MiB message echoed, a
                GET on another stream while the WebSocket is open, then the
                close handshake and END_STREAM both ways
  status        extended CONNECT with :protocol ARG (default websocket)
                (or "plain": a CONNECT without :protocol): the answer
  head          extended CONNECT offering subprotocol ARG (if given): every
                field of the answer, one "field NAME VALUE" line each
  reset         echo one message, then RST_STREAM (the spec checks teardown)
  hold          echo one message, print "holding", then wait (ARG s at most)
                for the stream's end: reset, ended, or the connection closed
  slow          sends "flood ARG", reads nothing (no WINDOW_UPDATE) for 3 s,
                then reads it all
"""
import os
import socket
import ssl
import struct
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

PORT, MODE, PATH = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else None
CA = os.environ.get("H2_TLS_CA")


def out(*a):
    print(*a, flush=True)


def frame(opcode, payload):
    """A masked client frame (FIN set)."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 4096 else _mask_big(payload, mask)
    return head + mask + masked


def _mask_big(payload, mask):
    m = int.from_bytes((mask * (len(payload) // 4 + 1))[: len(payload)], "big")
    return (int.from_bytes(payload, "big") ^ m).to_bytes(len(payload), "big")


def parse(buf):
    """(opcode, payload, rest) of the first whole server frame in buf, or None."""
    if len(buf) < 2:
        return None
    b0, b1 = buf[0], buf[1]
    n = b1 & 0x7F
    off = 2
    if n == 126:
        if len(buf) < 4:
            return None
        n = struct.unpack("!H", buf[2:4])[0]
        off = 4
    elif n == 127:
        if len(buf) < 10:
            return None
        n = struct.unpack("!Q", buf[2:10])[0]
        off = 10
    if b1 & 0x80:
        raise ValueError("a server frame is masked")
    if len(buf) < off + n:
        return None
    return b0 & 0x0F, bytes(buf[off : off + n]), buf[off + n :]


class Client:
    def __init__(self):
        raw = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        if CA:
            ctx = ssl.create_default_context(cafile=CA)
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
            assert self.sock.selected_alpn_protocol() == "h2", "ALPN did not pick h2"
        else:
            self.sock = raw
        # "status plain" sends a CONNECT python3-h2 would refuse to build
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=(MODE != "status"))
        self.c = h2.connection.H2Connection(cfg)
        self.c.initiate_connection()
        self.send()
        self.events = []
        self.data = {}
        self.headers = {}
        self.ended = set()
        self.reset = {}
        self.ack = True
        self.unacked = {}
        self.settings_seen = False
        self.closed = False
        self.goaway = False

    def send(self):
        d = self.c.data_to_send()
        if d:
            self.sock.sendall(d)

    def pump(self, until, timeout=20):
        deadline = time.time() + timeout
        while not until():
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("timed out")
            self.sock.settimeout(min(left, 1.0))
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:  # closed with our last bytes unread: an RST
                self.closed = True
                raise
            if not d:
                self.closed = True
                raise ConnectionError("connection closed")
            try:
                evs = self.c.receive_data(d)
            except h2.exceptions.ProtocolError:
                if self.c.state_machine.state != h2.connection.ConnectionState.CLOSED:
                    raise
                self.goaway = True  # a GOAWAY came (the same read) and closed python3-h2's state
                evs = []  # python3-h2 takes nothing after a GOAWAY (an RST_STREAM behind it is legal)
            for ev in evs:
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    self.settings_seen = True
                elif isinstance(ev, h2.events.ResponseReceived):
                    self.headers[ev.stream_id] = dict(ev.headers)
                elif isinstance(ev, h2.events.DataReceived):
                    self.data.setdefault(ev.stream_id, bytearray()).extend(ev.data)
                    if self.ack:
                        self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    else:
                        self.unacked[ev.stream_id] = self.unacked.get(ev.stream_id, 0) + ev.flow_controlled_length
                elif isinstance(ev, h2.events.StreamEnded):
                    self.ended.add(ev.stream_id)
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    self.goaway = True
                elif isinstance(ev, h2.events.StreamReset):
                    self.reset[ev.stream_id] = ev.error_code
            self.send()

    def connect_ws(self, protocol="websocket", extra=()):
        self.pump(lambda: self.settings_seen)
        sid = self.c.get_next_available_stream_id()
        hs = [(":method", "CONNECT")]
        if protocol != "plain":
            hs += [(":protocol", protocol), (":scheme", "https" if CA else "http"), (":path", PATH)]
        hs += [(":authority", "localhost"), ("sec-websocket-version", "13")] + list(extra)
        self.c.send_headers(sid, hs, end_stream=False)
        self.send()
        self.pump(lambda: sid in self.headers or sid in self.reset or sid in self.ended)
        return sid

    def ws_send(self, sid, opcode, payload):
        data = frame(opcode, payload)
        while data:  # as the windows allow
            self.pump(lambda: self.c.local_flow_control_window(sid) > 0 or sid in self.reset)
            n = min(len(data), self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
            self.c.send_data(sid, data[:n])
            self.send()
            data = data[n:]

    def ws_recv(self, sid, timeout=20):
        got = []

        def have():
            buf = self.data.get(sid, bytearray())
            f = parse(buf)
            if f is None:
                return sid in self.ended or sid in self.reset
            self.data[sid] = bytearray(f[2])
            got.append(f)
            return True

        self.pump(have, timeout)
        if not got:
            return None
        return got[0][0], got[0][1]

    def get(self, path):
        sid = self.c.get_next_available_stream_id()
        self.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "t")],
                            end_stream=True)
        self.send()
        self.pump(lambda: sid in self.ended or sid in self.reset)
        return self.headers.get(sid, {}).get(":status"), bytes(self.data.get(sid, b""))


def expect_echo(cl, sid, opcode, payload):
    cl.ws_send(sid, opcode, payload)
    f = cl.ws_recv(sid)
    assert f == (opcode, payload), "echo mismatch: %r" % (None if f is None else (f[0], len(f[1])),)


def main():
    cl = Client()
    if MODE == "settings":
        cl.pump(lambda: cl.settings_seen)
        out("enable_connect_protocol", cl.c.remote_settings.enable_connect_protocol)
        out("ok settings")
        return
    if MODE == "status":
        sid = cl.connect_ws(ARG or "websocket")
        if sid in cl.headers:
            out("status", cl.headers[sid].get(":status"))
        else:
            out("reset", cl.reset.get(sid))
        out("ok status")
        return
    if MODE == "head":
        sid = cl.connect_ws(extra=[("sec-websocket-protocol", ARG)] if ARG else [])
        for name, value in cl.headers.get(sid, {}).items():
            out("field", name, value)
        out("ok head")
        return
    sid = cl.connect_ws()
    st = cl.headers.get(sid, {}).get(":status")
    out("status", st, "protocol", cl.headers.get(sid, {}).get("sec-websocket-protocol"))
    if st != "200":
        return
    if MODE == "echo":
        expect_echo(cl, sid, 1, b"hello")
        expect_echo(cl, sid, 2, bytes(range(256)) * 400)
        status, body = cl.get("/pid")  # another stream, the WebSocket open
        out("other stream", status, len(body))
        assert status == "200"
        expect_echo(cl, sid, 2, bytes((i * 7) & 0xFF for i in range(1 << 20)))
        expect_echo(cl, sid, 1, b"after")
        cl.ws_send(sid, 8, struct.pack("!H", 1000))
        f = cl.ws_recv(sid)
        out("close", f[0] if f else None, struct.unpack("!H", f[1][:2])[0] if f and len(f[1]) >= 2 else None)
        cl.c.end_stream(sid)
        cl.send()
        cl.pump(lambda: sid in cl.ended or sid in cl.reset)
        out("ended", sid in cl.ended, "reset", cl.reset.get(sid))
        out("ok echo")
    elif MODE == "reset":
        expect_echo(cl, sid, 1, b"one")
        cl.c.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        cl.send()
        status, _ = cl.get("/pid")  # the connection goes on
        out("other stream", status)
        out("ok reset")
        time.sleep(float(ARG or 0))
    elif MODE == "hold":
        expect_echo(cl, sid, 1, b"one")
        out("holding")
        try:
            cl.pump(lambda: sid in cl.reset or sid in cl.ended, float(ARG or 10))
            cl.pump(lambda: False, 2)  # the connection's end, if it comes
        except (ConnectionError, TimeoutError):
            pass
        out("goaway" if cl.goaway else "no goaway")
        out("stream", "reset %s" % cl.reset[sid] if sid in cl.reset else "ended" if sid in cl.ended else "open",
            "connection", "closed" if cl.closed else "open")
        out("ok hold")
    elif MODE == "slow":
        n = int(ARG)
        cl.ack = False
        cl.ws_send(sid, 1, ("flood %d" % n).encode())
        t = time.time()
        try:
            cl.pump(lambda: False, 3)
        except TimeoutError:
            pass
        out("paused", int(time.time() - t))
        cl.ack = True
        for s, k in cl.unacked.items():
            cl.c.acknowledge_received_data(k, s)
        cl.send()
        got = 0
        while True:
            f = cl.ws_recv(sid, 30)
            assert f is not None, "the stream ended early"
            if f[0] == 1 and f[1] == b"done":
                break
            got += len(f[1])
        out("ok slow", got)


main()
