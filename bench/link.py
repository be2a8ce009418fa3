"""A wide-area link for the benchmarks (issue 50): an asyncio TCP relay that adds a round-trip
delay and caps bandwidth between a client outside the cluster and what it reaches inside.

A :class:`Link` is one client's network access: two directions (up, to the servers; down, back),
each a :class:`Pacer` shared by every connection of that link, so the client's storage reads and
its gateway calls share the bandwidth as they would on one line. A chunk read from one side is
delivered to the other after the direction is free (the chunks before it sent, each at the
rate), plus half the round trip. A connection's first chunk up waits one round trip more: the
TCP handshake a real link pays (the relay's own accept is local). Not modelled: TCP slow start,
loss, window limits; the relay buffers what it has read (at most :data:`QUEUED` chunks per
direction of a connection) and reads no further until that drains.

No toxiproxy, tc/netem or maintained Python relay is in the registries this project uses
(toxiproxy is a Go binary; PyPI has its clients only), hence this module.

Run it as its own process, so that its timers do not share a GIL with the client it delays:
``python -m bench.link --rtt-ms 20 --mbit 100 --links 17 --route gateway=127.0.0.1:8443
--route s3=127.0.0.1:9000`` prints one JSON line, ``[{"gateway": port, "s3": port}, ...]`` (the
local ports of each link's routes), and relays until stdin closes or SIGTERM; then one more,
``[{"gateway": [bytes up, bytes down], ...}, ...]``. :func:`start_links` starts that process
and reads the first line, :meth:`Links.stop` the last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CHUNK", "Link", "Links", "Pacer", "delivery", "start_links"]

#: Bytes read from a socket at once (5.2 ms of a 100 Mbit/s link).
CHUNK = 64 * 1024
#: Chunks held per direction of a connection before the relay stops reading that side.
QUEUED = 64


def delivery(now: float, free_at: float, size: int, rate: float, one_way: float) -> tuple[float, float]:
    """When a chunk of ``size`` bytes that reached a link direction at ``now`` (seconds) is
    delivered, and when the direction is free again: it starts once the direction is free
    (``free_at``, the end of the chunk before it), takes ``size / rate`` seconds on the line
    (``rate`` in bytes per second; 0: no cap), and arrives ``one_way`` seconds after its last
    byte left. Returns ``(delivered_at, free_at_after)``."""
    start = max(now, free_at)
    done = start + size / rate if rate else start
    return done + one_way, done


@dataclass
class Pacer:
    """One direction of a link: ``rate`` bytes per second (0: no cap), ``one_way`` seconds of
    delay; ``free_at`` the loop time its line is free; ``carried`` bytes and ``busy`` seconds
    of line time it has scheduled (their ratio is the rate, whatever the timers did)."""

    rate: float
    one_way: float
    free_at: float = 0.0
    carried: int = 0
    busy: float = 0.0

    def schedule(self, now: float, size: int) -> float:
        """The loop time a chunk of ``size`` bytes arriving at ``now`` is delivered."""
        at, free_at = delivery(now, self.free_at, size, self.rate, self.one_way)
        self.busy += free_at - max(now, self.free_at)
        self.free_at, self.carried = free_at, self.carried + size
        return at


@dataclass
class Link:
    """A client's access line: ``rtt`` seconds round trip, ``mbit`` megabits per second each
    way (0: no cap)."""

    rtt: float
    mbit: float
    up: Pacer = field(init=False)
    down: Pacer = field(init=False)
    #: route name → [bytes up, bytes down]
    tally: dict[str, list[int]] = field(init=False, default_factory=dict)
    _connections: set = field(init=False, default_factory=set, repr=False)

    def __post_init__(self):
        rate = self.mbit * 1e6 / 8
        self.up, self.down = Pacer(rate, self.rtt / 2), Pacer(rate, self.rtt / 2)

    async def serve(self, target: tuple[str, int], host: str = "127.0.0.1", port: int = 0,
                    name: str = "") -> asyncio.Server:
        """A listening server on ``host:port`` (0: any free port) relaying each connection to
        ``target`` over this link; the bytes carried each way are added to ``tally[name]``."""
        tally = self.tally.setdefault(name, [0, 0])

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # asyncio holds a server connection's task weakly once its socket stops reading
            # (back-pressure): held here, or it is collected mid-transfer
            task = asyncio.current_task()
            self._connections.add(task)
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
            except OSError:
                writer.close()
                self._connections.discard(task)
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer, self.up, self.rtt, tally, 0),
                                     _pipe(up_reader, writer, self.down, 0.0, tally, 1))
            except asyncio.CancelledError:
                pass  # the relay is stopping
            finally:
                for w in (writer, up_writer):
                    w.close()
                self._connections.discard(task)

        return await asyncio.start_server(connected, host, port)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, pacer: Pacer, first_extra: float,
                tally: list[int], way: int) -> None:
    """Carry ``source`` to ``sink`` through ``pacer``, in order, counted in ``tally[way]``, then
    half-close ``sink``."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue(QUEUED)

    async def carry() -> None:
        while (item := await queue.get()) is not None:
            at, data = item
            if (wait := at - loop.time()) > 0:
                await asyncio.sleep(wait)
            sink.write(data)
            await sink.drain()

    carrier = asyncio.create_task(carry())
    last, extra = 0.0, first_extra
    try:
        while data := await source.read(CHUNK):
            # monotonic per connection: the handshake's wait never lets a later chunk overtake
            last = max(last, pacer.schedule(loop.time(), len(data)) + extra)
            extra = 0.0
            tally[way] += len(data)
            await queue.put((last, data))
    except (ConnectionError, OSError):
        pass
    finally:
        await queue.put(None)
        try:
            await carrier
            if sink.can_write_eof():
                sink.write_eof()
        except (ConnectionError, OSError):
            pass


async def _serve(links: list[Link], routes: dict[str, tuple[str, int]], stop: asyncio.Event) -> None:
    ports, servers = [], []
    for link in links:
        found = {}
        for name, target in routes.items():
            server = await link.serve(target, name=name)
            servers.append(server)
            found[name] = server.sockets[0].getsockname()[1]
        ports.append(found)
    print(json.dumps(ports), flush=True)
    await stop.wait()
    for server in servers:
        server.close()
    print(json.dumps([link.tally for link in links]), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, required=True, help="round-trip delay added (ms)")
    parser.add_argument("--mbit", type=float, default=100.0, help="bandwidth each way per link, 0: none")
    parser.add_argument("--links", type=int, default=1, help="independent links (clients)")
    parser.add_argument("--route", action="append", required=True, metavar="NAME=HOST:PORT")
    opts = parser.parse_args(argv)
    routes = {}
    for route in opts.route:
        name, _, target = route.partition("=")
        host, _, port = target.rpartition(":")
        routes[name] = (host, int(port))

    async def run() -> None:
        loop, stop = asyncio.get_running_loop(), asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.buffer.read1(1) else None)
        await _serve([Link(opts.rtt_ms / 1000, opts.mbit) for _ in range(opts.links)], routes, stop)

    asyncio.run(run())
    return 0


@dataclass
class Links:
    """A running relay process: ``ports[i][route]`` is link ``i``'s local port for ``route``."""

    ports: list[dict[str, int]]
    process: subprocess.Popen

    tally: list[dict[str, list[int]]] | None = None

    def stop(self) -> list[dict[str, list[int]]] | None:
        """End the process (closing its stdin; killed after 10 s); idempotent. Returns what each
        link carried per route, ``[bytes up, bytes down]`` (None if it was killed)."""
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.stdin = None  # communicate() would flush it
            try:
                out, _ = self.process.communicate(timeout=10)
                self.tally = json.loads(out) if out.strip() else None
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.tally


def start_links(routes: dict[str, tuple[str, int]], *, rtt: float, mbit: float, links: int = 1) -> Links:
    """Start ``python -m bench.link`` for ``links`` links of ``rtt`` seconds and ``mbit`` to
    ``routes`` (name → (host, port)). Raises RuntimeError when it exits before naming its ports."""
    command = [sys.executable, "-m", "bench.link", "--rtt-ms", str(rtt * 1000), "--mbit", str(mbit),
               "--links", str(links), *(f"--route={n}={h}:{p}" for n, (h, p) in routes.items())]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               cwd=Path(__file__).resolve().parents[1])
    line = process.stdout.readline()
    if not line:
        process.wait()
        raise RuntimeError(f"bench.link exited with {process.returncode} before naming its ports")
    return Links(json.loads(line), process)


if __name__ == "__main__":
    sys.exit(main())
