#!/usr/bin/env python3
"""delay_proxy.py: a TCP relay that holds every chunk it relays for a fixed
time in each direction: a link's one-way latency, made in user space since
this kernel has no netem (tests/net/README.md).

    delay_proxy.py --listen HOST:PORT --to HOST:PORT --delay-ms 50
                   [--max-conns 64] [--buffer-kib 1024] [--max-seconds 900]

Each accepted connection gets one to --to; what one side sends reaches the
other --delay-ms after the proxy read it. Each direction holds at most
--buffer-kib in flight (then it stops reading: TCP's own flow control pushes
back), so a direction moves at most buffer/delay (1 MiB / 50 ms = 20 MB/s,
well above the links the scenarios make). Connections past --max-conns are
refused (closed at once, counted). The proxy exits by itself after
--max-seconds, on SIGTERM, or when its parent dies (the harness sets
PR_SET_PDEATHSIG). It prints `delay_proxy: listening` once it accepts, and
its counts at its end.
"""
import argparse
import asyncio
import collections
import signal
import sys

CHUNK = 64 << 10
CONNECT_TIMEOUT = 5.0


def hostport(s):
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{s!r} is not HOST:PORT")
    return host, int(port)


def bounded(lo, hi):
    """An argparse type: an integer in [lo, hi]."""

    def parse(s):
        if not s.isdigit() or not lo <= int(s) <= hi:
            raise argparse.ArgumentTypeError(f"{s!r} is not an integer in {lo}..{hi}")
        return int(s)

    return parse


class Pipe:
    """One direction: chunks stamped with the time they may leave, bounded
    in bytes."""

    def __init__(self, delay, cap):
        self.delay, self.cap = delay, cap
        self.q = collections.deque()
        self.bytes = 0
        self.cond = asyncio.Condition()

    async def put(self, data):
        async with self.cond:
            await self.cond.wait_for(lambda: self.bytes < self.cap)
            self.q.append((asyncio.get_running_loop().time() + self.delay, data))
            self.bytes += len(data)
            self.cond.notify_all()

    async def get(self):
        async with self.cond:
            await self.cond.wait_for(lambda: self.q)
            return self.q.popleft()

    async def done(self, n):
        async with self.cond:
            self.bytes -= n
            self.cond.notify_all()


async def read_side(reader, pipe):
    """Reads until EOF; b'' in the pipe carries the EOF over, delayed too."""
    while True:
        data = await reader.read(CHUNK)
        await pipe.put(data)
        if not data:
            return


async def write_side(writer, pipe, stats):
    loop = asyncio.get_running_loop()
    while True:
        due, data = await pipe.get()
        # a fixed time is the point: the delay this proxy adds to each chunk
        await asyncio.sleep(max(0.0, due - loop.time()))
        if not data:
            if writer.can_write_eof():
                writer.write_eof()
            return
        writer.write(data)
        await writer.drain()
        stats["bytes"] += len(data)
        await pipe.done(len(data))


class Proxy:

    def __init__(self, a):
        self.a, self.live = a, 0
        self.stats = collections.Counter()

    async def relay(self, creader, cwriter):
        if self.live >= self.a.max_conns:
            self.stats["refused"] += 1
            cwriter.close()
            return
        self.live += 1
        self.stats["conns"] += 1
        swriter = None
        try:
            sreader, swriter = await asyncio.wait_for(
                asyncio.open_connection(*self.a.to), CONNECT_TIMEOUT)
            await self.pump(creader, cwriter, sreader, swriter)
        except (OSError, asyncio.TimeoutError):
            self.stats["errors"] += 1
        finally:
            self.live -= 1
            for w in (cwriter, swriter):
                if w:
                    w.close()

    async def pump(self, creader, cwriter, sreader, swriter):
        """Both directions, each delayed; ends when both saw EOF or one fails."""
        delay, cap = self.a.delay_ms / 1000.0, self.a.buffer_kib << 10
        up, down = Pipe(delay, cap), Pipe(delay, cap)
        tasks = [asyncio.ensure_future(c) for c in (
            read_side(creader, up), write_side(swriter, up, self.stats),
            read_side(sreader, down), write_side(cwriter, down, self.stats))]
        try:
            for t in asyncio.as_completed(tasks):
                await t  # the first failure cancels the rest
        finally:
            for t in tasks:
                t.cancel()

    async def serve(self):
        server = await asyncio.start_server(self.relay, *self.a.listen, reuse_address=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        print(f"delay_proxy: listening on {self.a.listen[0]}:{self.a.listen[1]} to "
              f"{self.a.to[0]}:{self.a.to[1]}, {self.a.delay_ms} ms each way", flush=True)
        try:
            await asyncio.wait_for(stop.wait(), self.a.max_seconds)
        except asyncio.TimeoutError:
            print("delay_proxy: --max-seconds reached", flush=True)
        server.close()
        s = self.stats
        print(f"delay_proxy: conns={s['conns']} refused={s['refused']} errors={s['errors']} "
              f"bytes={s['bytes']}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", type=hostport, required=True)
    ap.add_argument("--to", type=hostport, required=True)
    ap.add_argument("--delay-ms", type=bounded(0, 10000), required=True)
    ap.add_argument("--max-conns", type=bounded(1, 1024), default=64)
    ap.add_argument("--buffer-kib", type=bounded(16, 65536), default=1024)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    a = ap.parse_args()
    if not 0 < a.max_seconds <= 86400:
        ap.error("--max-seconds must be in (0, 86400]")
    asyncio.run(Proxy(a).serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
