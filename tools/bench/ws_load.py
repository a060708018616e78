# The load of `rake bench:ws` (tools/bench/ws.rb): CONNS WebSockets to URL,
# each sending a SIZE-byte message and waiting for its echo, for SECONDS;
# prints "messages N seconds S". Debian's python3-websockets.
import asyncio
import sys
import time

import websockets

URL, CONNS, SIZE, SECONDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])


async def one(deadline, counts, i):
    async with websockets.connect(URL, max_size=None, compression=None) as ws:
        msg = b"m" * SIZE
        n = 0
        while time.monotonic() < deadline:
            await ws.send(msg)
            await ws.recv()
            n += 1
        counts[i] = n


async def main():
    counts = [0] * CONNS
    t = time.monotonic()
    await asyncio.gather(*(one(t + SECONDS, counts, i) for i in range(CONNS)))
    print("messages %d seconds %.3f" % (sum(counts), time.monotonic() - t), flush=True)


asyncio.run(main())
