# The load of `rake bench:ws` (tools/bench/ws.rb): CONNS WebSockets to URL,
# each sending a SIZE-byte message and waiting for its echo, for SECONDS;
# prints "messages N seconds S errors E rejected R timeouts T": N echoes that
# came back equal to what was sent; E connections lost (or a wrong echo), R
# handshakes refused with an HTTP status, T echoes not back within 10 s.
# Debian's python3-websockets.
import asyncio
import sys
import time

import websockets

URL, CONNS, SIZE, SECONDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])


async def one(deadline, counts, fails, i):
    try:
        async with websockets.connect(URL, max_size=None, compression=None) as ws:
            msg = b"m" * SIZE
            while time.monotonic() < deadline:
                await ws.send(msg)
                if await asyncio.wait_for(ws.recv(), 10) != msg:
                    fails["errors"] += 1
                    return
                counts[i] += 1
    except asyncio.TimeoutError:
        fails["timeouts"] += 1
    except websockets.exceptions.InvalidStatusCode:
        fails["rejected"] += 1
    except (OSError, websockets.exceptions.WebSocketException):
        fails["errors"] += 1


async def main():
    counts = [0] * CONNS
    fails = {"errors": 0, "rejected": 0, "timeouts": 0}
    t = time.monotonic()
    await asyncio.gather(*(one(t + SECONDS, counts, fails, i) for i in range(CONNS)))
    print("messages %d seconds %.3f errors %d rejected %d timeouts %d"
          % (sum(counts), time.monotonic() - t, fails["errors"], fails["rejected"], fails["timeouts"]), flush=True)


asyncio.run(main())
