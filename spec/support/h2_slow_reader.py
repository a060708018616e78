"""A slow HTTP/2 reader for spec/http2_large_spec.rb (python3-h2 for the framing).

usage: h2_slow_reader.py PORT BIG_PATH SMALL_PATH
Stream 1 asks for BIG_PATH and then opens no window for it (it stalls
after the first 64 KiB); meanwhile SMALL_PATH is fetched 5 times on the
same connection. Prints "small N BYTES" per small response, then "holding"
and holds for 2 s without reading stream 1 (the spec measures the
gateway meanwhile), then reads stream 1 to its end opening windows as the
data comes, and prints "big STATUS BYTES" (or "timeout"/"closed")."""
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

port, big, small = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.local_settings = h2.settings.Settings(client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
c.initiate_connection()
s.sendall(c.data_to_send())


def req(sid, path):
    c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "t")], end_stream=True)
    s.sendall(c.data_to_send())


got = {}
status = {}
ended = set()


def pump(until, timeout, ack_big):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            data = s.recv(1 << 20)
        except socket.timeout:
            return False
        if not data:
            print("closed", flush=True)
            sys.exit(0)
        for e in c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived):
                status[e.stream_id] = dict(e.headers).get(":status")
            elif isinstance(e, h2.events.DataReceived):
                got[e.stream_id] = got.get(e.stream_id, 0) + len(e.data)
                if e.stream_id != 1:
                    c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif ack_big:
                    c.acknowledge_received_data(e.flow_controlled_length, 1)
                else:  # the connection window only: stream 1 stays stalled
                    c.increment_flow_control_window(e.flow_controlled_length)
            elif isinstance(e, h2.events.StreamEnded):
                ended.add(e.stream_id)
            elif isinstance(e, h2.events.ConnectionTerminated):
                print("goaway %d" % e.error_code, flush=True)
                sys.exit(0)
        out = c.data_to_send()
        if out:
            s.sendall(out)
        if until():
            return True
    return False


req(1, big)
sid = 3
for _ in range(5):
    req(sid, small)
    if pump(lambda: sid in ended, 5, False):
        print("small %d %s %d" % (sid, status.get(sid), got.get(sid, 0)), flush=True)
    else:
        print("timeout small %d" % sid, flush=True)
    sid += 2
print("holding %d" % got.get(1, 0), flush=True)
pump(lambda: False, 2, False)
c.increment_flow_control_window(1 << 30, 1)  # now read it all
s.sendall(c.data_to_send())
if pump(lambda: 1 in ended, 120, True):
    print("big %s %d" % (status.get(1), got.get(1, 0)), flush=True)
else:
    print("timeout big %d" % got.get(1, 0), flush=True)
