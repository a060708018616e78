"""An HTTP/2 client that starts its connection with a PROXY protocol header,
for spec/proxy_protocol_spec.rb (python3-h2 for the framing).

usage: pp_h2_client.py PORT VERSION SRC_IP [tls]
VERSION: 1 or 2 (the header written before anything else), SRC_IP the
client address it carries. With `tls` the header is followed by a TLS
handshake offering ALPN h2 (certificate not verified), else h2c with prior
knowledge. Prints "STATUS BODY" of GET / and exits 0."""
import socket
import ssl
import struct
import sys

import h2.config
import h2.connection
import h2.events

port, version, src = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
use_tls = len(sys.argv) > 4 and sys.argv[4] == "tls"

s = socket.create_connection(("127.0.0.1", port), timeout=5)
if version == 1:
    s.sendall(b"PROXY TCP4 %s 127.0.0.1 40000 %d\r\n" % (src.encode(), port))
else:
    addrs = socket.inet_aton(src) + socket.inet_aton("127.0.0.1") + struct.pack(">HH", 40000, port)
    s.sendall(b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack(">H", len(addrs)) + addrs)
if use_tls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(s, server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()

c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
c.send_headers(1, [(":method", "GET"), (":path", "/"), (":scheme", "https" if use_tls else "http"),
                   (":authority", "localhost")], end_stream=True)
s.sendall(c.data_to_send())
status, body, done = None, b"", False
while not done:
    data = s.recv(65536)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            status = dict(ev.headers)[":status"]
        elif isinstance(ev, h2.events.DataReceived):
            body += ev.data
            c.acknowledge_received_data(len(ev.data), ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            done = True
    s.sendall(c.data_to_send())
print(status, body.decode())
