# The WebSocket client of spec/websocket_script_spec.rb (Debian's
# python3-websockets): ws_script_client.py URL MODE [ARG]; prints one line
# per step and "ok ..." at the end on success. wss:// URLs trust the
# certificate in $WS_CA.
import asyncio
import os
import ssl
import sys

import websockets

URL, MODE = sys.argv[1], sys.argv[2]
ARG = sys.argv[3] if len(sys.argv) > 3 else None


def out(*a):
    print(*a, flush=True)


def connect(**kw):
    if URL.startswith("wss:"):
        ctx = ssl.create_default_context(cafile=os.environ["WS_CA"])
        ctx.check_hostname = False
        kw["ssl"] = ctx
    return websockets.connect(URL, max_size=None, compression=None, open_timeout=10, close_timeout=5, **kw)


async def echo():
    async with connect() as ws:
        await ws.send("hello \u20ac")
        assert await ws.recv() == "hello \u20ac"
        data = bytes(range(256)) * 4
        await ws.send(data)
        got = await ws.recv()
        assert got == data, "binary came back as %r" % type(got)
        await ws.send(["frag", "men", "ted \u20ac"])  # three fragments
        assert await ws.recv() == "fragmented \u20ac"
        await ws.send([b"\x00\x01", b"\x02"])
        assert await ws.recv() == b"\x00\x01\x02"
        big = bytes((i * 7) & 0xFF for i in range(300000))
        await ws.send(big)
        assert await ws.recv() == big
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        out("pong")
    out("ok echo", ws.close_code)


async def protocol():
    async with connect(subprotocols=[ARG, "chat"]) as ws:
        out("protocol", ws.subprotocol)
        out("first", await ws.recv())
    out("ok protocol")


async def closed_by_server():
    async with connect() as ws:
        await ws.send(ARG or "x")
        try:
            while True:
                out("got", await asyncio.wait_for(ws.recv(), 10))
        except websockets.ConnectionClosed as e:
            out("ok closed", e.rcvd.code if e.rcvd else None, e.rcvd.reason if e.rcvd else "")


async def said(ws):
    """The next chat line, past the "* guestN joined" notices."""
    while True:
        m = await asyncio.wait_for(ws.recv(), 5)
        if not m.startswith("* "):
            return m


async def chat_pair():
    async with connect() as a, connect() as b:
        await asyncio.sleep(0.2)  # both joined
        await a.send("hi from a")
        got_b = await said(b)
        got_a = await said(a)
        await b.send("hi from b")
        got_a2 = await said(a)
        got_b2 = await said(b)
        out("b saw", got_b)
        out("a saw", got_a2)
        assert got_a == got_b and got_a2 == got_b2
    out("ok chat")


async def idle():
    ws = await connect(ping_interval=None)
    try:
        await asyncio.wait_for(ws.recv(), 30)
    except websockets.ConnectionClosed:
        out("ok idle closed")


asyncio.run({"echo": echo, "protocol": protocol, "closed_by_server": closed_by_server, "chat_pair": chat_pair,
             "idle": idle}[MODE]())
