# The upstream of bench:ws's idle part: accepts WebSocket handshakes with a
# 101 (the Sec-WebSocket-Accept computed as RFC 6455 says) and then holds the
# connection, reading and dropping whatever comes. Raw asyncio streams, not
# the websockets library, so 10,000 connections cost this process little.
# Prints its port.
import asyncio
import base64
import hashlib
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        key = b""
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"sec-websocket-key:"):
                key = line.split(b":", 1)[1].strip()
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        await writer.drain()
        while await reader.read(65536):
            pass
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
