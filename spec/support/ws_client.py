# The WebSocket client of spec/websocket_proxy_spec.rb (Debian's
# python3-websockets): ws_client.py URL MODE [ARG]; prints what happened,
# one line per step, "ok ..." at the end on success.
import asyncio
import sys
import time

import websockets

URL, MODE = sys.argv[1], sys.argv[2]
ARG = sys.argv[3] if len(sys.argv) > 3 else None


def out(*a):
    print(*a, flush=True)


def connect():
    return websockets.connect(URL, max_size=None, compression=None, open_timeout=10, close_timeout=5)


async def echo():
    async with connect() as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"
        data = bytes(range(256)) * 4
        await ws.send(data)
        assert await ws.recv() == data
        big = bytes((i * 7) & 0xFF for i in range(1 << 20))
        await ws.send(big)
        assert await ws.recv() == big
        out("ok echo")


async def one(i, rounds):
    async with connect() as ws:
        for r in range(rounds):
            m = "conn %d round %d" % (i, r)
            await ws.send(m)
            assert await ws.recv() == m
    return i


async def concurrent():
    n = int(ARG)
    done = await asyncio.wait_for(asyncio.gather(*(one(i, 10) for i in range(n))), 30)
    out("ok concurrent", len(done))


async def close_client():
    ws = await connect()
    await ws.send("x")
    assert await ws.recv() == "x"
    await ws.close()
    out("ok close_client", ws.close_code)


async def close_server():
    async with connect() as ws:
        await ws.send("close-me")
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as e:
            out("ok close_server", e.rcvd.code if e.rcvd else None)


async def handshake():
    try:
        async with connect():
            out("opened")
    except websockets.InvalidStatusCode as e:
        out("status", e.status_code)


async def idle():
    async with connect() as ws:
        await ws.send("x")
        assert await ws.recv() == "x"
        t = time.monotonic()
        try:
            await asyncio.wait_for(ws.recv(), 30)
        except websockets.ConnectionClosed:
            out("ok idle closed after %.1f" % (time.monotonic() - t))


async def slow():
    n = int(ARG)
    async with websockets.connect(URL, max_size=None, compression=None, max_queue=4) as ws:
        await ws.send("flood %d" % n)
        out("paused")
        await asyncio.sleep(3)  # read nothing meanwhile: the gateway must not buffer the flood
        out("reading")
        got = 0
        while True:
            m = await asyncio.wait_for(ws.recv(), 30)
            if m == "done":
                break
            got += len(m)
            if got % (4 << 20) == 0:
                await asyncio.sleep(0.05)  # and slowly
        out("ok slow", got)


asyncio.run({"echo": echo, "concurrent": concurrent, "close_client": close_client, "close_server": close_server,
             "handshake": handshake, "idle": idle, "slow": slow}[MODE]())
