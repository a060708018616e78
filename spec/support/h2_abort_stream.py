"""An HTTP/2 client that leaves a compressed stream mid-way, for
spec/compress_spec.rb (python3-h2 for the framing).

usage: h2_abort_stream.py PORT PATH CODING
Asks PATH with Accept-Encoding: CODING, reads DATA until 100 KB came (giving
the window back), resets the stream (CANCEL), then asks /pid on the same
connection. Prints "encoding CODING", "got N" and "pid BODY"; exits 0."""
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events

port, path, coding = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
hdrs = [(":method", "GET"), (":scheme", "http"), (":authority", "t")]
c.send_headers(1, hdrs + [(":path", path), ("accept-encoding", coding)], end_stream=True)
s.sendall(c.data_to_send())
got, pid, deadline = 0, None, time.time() + 20
while pid is None and time.time() < deadline:
    data = s.recv(65536)
    if not data:
        break
    for e in c.receive_data(data):
        if isinstance(e, h2.events.ResponseReceived) and e.stream_id == 1:
            print("encoding %s" % dict(e.headers).get("content-encoding"))
        elif isinstance(e, h2.events.DataReceived):
            c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            if e.stream_id == 1:
                got += len(e.data)
                if got >= 100000 and not c.get_next_available_stream_id() > 3:
                    print("got %d" % got)
                    c.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
                    c.send_headers(3, hdrs + [(":path", "/pid")], end_stream=True)
            elif e.stream_id == 3:
                pid = e.data.decode()
        elif isinstance(e, h2.events.StreamReset):
            pass
    s.sendall(c.data_to_send())
print("pid %s" % pid)
