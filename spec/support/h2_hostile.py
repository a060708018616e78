"""Hostile HTTP/2 clients for spec/http2_spec.rb (python3-h2 for the framing).

usage: h2_hostile.py PORT SCENARIO
Prints one line per observation ("goaway CODE", "closed", "response STREAM
STATUS BYTES", "timeout") and exits 0; the spec reads the lines."""
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

port, scenario = int(sys.argv[1]), sys.argv[2]


def connect(settings=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.local_settings = h2.settings.Settings(client=True, initial_values=settings or {})
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


def headers(path, method="GET", extra=()):
    return [(":method", method), (":path", path), (":scheme", "http"), (":authority", "t")] + list(extra)


bodies = {}


def pump(s, c, until, timeout=5.0):
    """Reads events until until(event) is true; prints what it sees."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            print("closed")
            return
        if not data:
            print("closed")
            return
        try:
            events = c.receive_data(data)
        except Exception as e:  # the server's frames after a GOAWAY may not parse for us
            print("client-error %s" % type(e).__name__)
            return
        for e in events:
            if isinstance(e, h2.events.ConnectionTerminated):
                print("goaway %d" % e.error_code)
            elif isinstance(e, h2.events.ResponseReceived):
                st = dict(e.headers).get(":status")
                bodies[e.stream_id] = [st, 0]
            elif isinstance(e, h2.events.DataReceived):
                bodies.setdefault(e.stream_id, ["?", 0])[1] += len(e.data)
            elif isinstance(e, h2.events.StreamEnded):
                st, n = bodies.get(e.stream_id, ["?", 0])
                print("response %d %s %d" % (e.stream_id, st, n))
            elif isinstance(e, h2.events.StreamReset):
                print("reset %d %d" % (e.stream_id, e.error_code))
            if until(e):
                return
        try:
            out = c.data_to_send()
            if out:
                s.sendall(out)
        except (BrokenPipeError, ConnectionResetError):
            print("closed")
            return
    print("timeout")


def raw_frame(ftype, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


if scenario == "bad_preface":
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + b"\x00" * 16)
    try:
        data = s.recv(65536)
        while data:
            data = s.recv(65536)
        print("closed")
    except socket.timeout:
        print("timeout")
    except ConnectionResetError:
        print("closed")

elif scenario == "rapid_reset":
    s, c = connect()
    sid = 1
    for _ in range(500):  # open and cancel, as CVE-2023-44487
        c.send_headers(sid, headers("/slow"))
        c.reset_stream(sid)
        sid += 2
        try:
            s.sendall(c.data_to_send())
        except (BrokenPipeError, ConnectionResetError):
            print("closed")
            break
    pump(s, c, lambda e: isinstance(e, h2.events.ConnectionTerminated))

elif scenario == "continuation_flood":
    s, c = connect()
    from hpack import Encoder
    block = Encoder().encode(headers("/"))
    out = raw_frame(0x1, 0x0, 1, block)  # HEADERS without END_HEADERS
    big = Encoder().encode([("x-flood", "a" * 1000)])
    try:
        s.sendall(out)
        for _ in range(2000):
            s.sendall(raw_frame(0x9, 0x0, 1, big))  # CONTINUATION, never the last
    except (BrokenPipeError, ConnectionResetError):
        pass
    pump(s, c, lambda e: isinstance(e, h2.events.ConnectionTerminated))

elif scenario == "ping_flood":
    s, c = connect()
    try:
        for i in range(5000):
            s.sendall(raw_frame(0x6, 0x0, 0, i.to_bytes(8, "big")))
    except (BrokenPipeError, ConnectionResetError):
        pass
    pump(s, c, lambda e: isinstance(e, h2.events.ConnectionTerminated))

elif scenario == "zero_window":
    # The client never opens its window: the big response cannot leave.
    s, c = connect({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.send_headers(1, headers("/big"), end_stream=True)
    s.sendall(c.data_to_send())
    t0 = time.time()
    pump(s, c, lambda e: False, timeout=8)
    print("after %.1f" % (time.time() - t0))

elif scenario == "slow_stream":
    # Stream 1 (big) gets no stream window; stream 3 (small) must still be answered.
    s, c = connect({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.send_headers(1, headers("/big"), end_stream=True)
    c.send_headers(3, headers("/small"), end_stream=True)
    s.sendall(c.data_to_send())
    pump(s, c, lambda e: isinstance(e, h2.events.ResponseReceived) and e.stream_id == 3, timeout=3)
    c.increment_flow_control_window(1000, stream_id=3)
    s.sendall(c.data_to_send())
    pump(s, c, lambda e: isinstance(e, h2.events.StreamEnded) and e.stream_id == 3, timeout=3)

else:
    sys.exit("unknown scenario " + scenario)
