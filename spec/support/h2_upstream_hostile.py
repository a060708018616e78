"""Hostile or odd HTTP/2 upstreams for spec/grpc_spec.rb (python3-h2 for
the frames that are valid, raw bytes for the ones that are not):

  h2_upstream_hostile.py PORT SCENARIO

listens on 127.0.0.1:PORT, prints "ready", and serves every connection
(in order: the first is connection 1) with SCENARIO until it is killed:

  bad_frame  after the request, a WINDOW_UPDATE of 0 on stream 0 (a
             connection PROTOCOL_ERROR), then it keeps the connection open
  garbage    answers the connection preface with an HTTP/1.1 response
  goaway     connection 1: GOAWAY (last stream 0: the request was not
             processed); later ones answer as a gRPC server would
             (message "retried", grpc-status 0)
  echo       answers each request when it ends, as a gRPC server would, with
             the message "trailers:" + the request's trailer fields
             (name=value, comma-separated)
  ignore_deadline  never answers: prints "grpc-timeout VALUE" for each
             request and keeps the stream open, as a server that ignores
             the call's deadline (or is stuck) would
Each accepted connection is counted on stdout ("conn N").
"""
import socket
import struct
import sys
import threading

import h2.config
import h2.connection
import h2.events


def grpc_reply(conn, sid, text):
    msg = b"\x0a" + bytes([len(text)]) + text.encode()
    conn.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
    conn.send_data(sid, b"\x00" + struct.pack(">I", len(msg)) + msg)
    conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)


def serve(sock, n, scenario):
    sock.settimeout(10)
    if scenario == "garbage":
        sock.recv(65536)
        sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        sock.close()
        return
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    seen = {}
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    if scenario == "bad_frame":
                        sock.sendall(conn.data_to_send())
                        sock.sendall(b"\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00")
                    elif scenario == "goaway" and n == 1:
                        conn.close_connection(last_stream_id=0)
                    elif scenario == "echo":
                        pass  # answered when the request ends
                    elif scenario == "ignore_deadline":
                        timeout = dict(ev.headers).get(b"grpc-timeout", b"none").decode()
                        print("grpc-timeout %s" % timeout, flush=True)
                    else:
                        grpc_reply(conn, ev.stream_id, "retried")
                elif isinstance(ev, h2.events.TrailersReceived):
                    seen[ev.stream_id] = ",".join("%s=%s" % (k.decode(), v.decode()) for k, v in ev.headers)
                elif isinstance(ev, h2.events.StreamEnded) and scenario == "echo":
                    grpc_reply(conn, ev.stream_id, "trailers:" + seen.get(ev.stream_id, ""))
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    except (OSError, h2.exceptions.ProtocolError):
        pass
    finally:
        sock.close()


def main():
    port, scenario = int(sys.argv[1]), sys.argv[2]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    print("ready", flush=True)
    n = 0
    while True:
        s, _ = ls.accept()
        n += 1
        print("conn %d" % n, flush=True)
        threading.Thread(target=serve, args=(s, n, scenario), daemon=True).start()


if __name__ == "__main__":
    main()
