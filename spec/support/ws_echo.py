# A WebSocket echo upstream for spec/websocket_proxy_spec.rb (Debian's
# python3-websockets). Prints its port, then echoes every message.
# "close-me": the server closes (1000). "flood N": it sends N bytes in 64 KiB
# binary messages as fast as the peer takes them, then "done".
# ws_echo.py [PORT [CERT KEY]]: with a certificate and key (PEM) it serves
# wss:// (TLS) instead.
import asyncio
import ssl
import sys

import websockets


async def handler(ws, path=None):
    async for msg in ws:
        if msg == "close-me":
            await ws.close(1000, "bye")
            return
        if isinstance(msg, str) and msg.startswith("flood "):
            n = int(msg.split()[1])
            chunk = b"x" * 65536
            sent = 0
            while sent < n:
                await ws.send(chunk)
                sent += len(chunk)
            await ws.send("done")
            continue
        await ws.send(msg)


async def main():
    tls = None
    if len(sys.argv) > 3:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[2], sys.argv[3])
    async with websockets.serve(handler, "127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0,
                                max_size=None, compression=None, ssl=tls) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


asyncio.run(main())
