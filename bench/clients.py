"""The raw clients every benchmark times: direct strict-binary calls on one socket
(:class:`Direct`) and TJSON over HTTPS through the gateway (:class:`Gateway`), both reading
replies as bytes without decoding; and how sides are timed against each other
(:func:`interleaved`) or held for a profiler (:func:`hold`)."""

from __future__ import annotations

import base64
import os
import random
import socket
import ssl
import statistics
import time
from pathlib import Path

from gateway.thrift.binary import encode_binary_call
from gateway.thrift.schema import TType
from tests.support.big_table import raw_call

__all__ = ["PASSWORD", "SETTLE_SECONDS", "USER", "Direct", "Gateway", "hold", "interleaved", "median_ms",
           "tjson_message"]

#: The user every benchmark's gateway knows (htpasswd), and the direct calls' ``set_ugi`` user.
USER, PASSWORD = "bench", "bench-password"


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def tjson_message(name: str, args: str, seqid: int = 1) -> bytes:
    return f'[1,"{name}",1,{seqid},{args}]'.encode()


class Direct:
    """Raw strict-binary calls on one persistent socket, reading replies of known length.

    Like Hive's own ``HiveMetaStoreClient`` in an unsecured cluster (and like the gateway's
    pool, which propagates the caller's identity), the connection first calls
    ``set_ugi(user, [])``; HMS then runs every call as that user (``doAs``).
    """

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lengths: dict[bytes, int] = {}
        raw_call(self.sock, encode_binary_call("set_ugi", 1, [(1, TType.STRING, USER), (2, TType.LIST, [])]))

    def call(self, message: bytes) -> bytes:
        length = self.lengths.get(message)
        reply = raw_call(self.sock, message, length)
        if length is None:
            self.lengths[message] = len(reply)
        return reply

    def close(self) -> None:
        self.sock.close()


class Gateway:
    """TJSON over HTTPS through the gateway, kept alive or not (``Connection: close``).

    A minimal HTTP/1.1 client on an ``ssl`` socket: the request is pre-built, and the reply is
    read as raw bytes up to its end (``Content-Length``, or the last chunk of a chunked body),
    so neither side spends time decoding; only the status code is checked. ``port`` points it
    at another server with the gateway's certificate (the floor); ``topology`` at another of the
    gateway's topologies (the spec's service path). With ``resume``, each new
    connection offers the TLS session of the previous one (RFC 8446 2.2 tickets, RFC 5077 for
    TLS 1.2), as Node's https agent does; :attr:`reused` counts the connections that resumed.
    """

    def __init__(self, gw, keep_alive: bool = True, *, resume: bool = False, port: int | None = None,
                 topology: str = "default"):
        self.gw, self.keep_alive, self.resume = gw, keep_alive, resume
        self.port = gw.port if port is None else port
        path = "/" + gw.url(topology).split("/", 3)[3]
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.head = (
            f"POST {path} HTTP/1.1\r\nHost: localhost:{self.port}\r\nAuthorization: Basic {token}\r\n"
            "Content-Type: application/vnd.apache.thrift.json\r\n"
            + ("" if keep_alive else "Connection: close\r\n")
        )
        self.context = gw.ssl_context()
        self.sock: ssl.SSLSocket | None = None
        self.session: ssl.SSLSession | None = None
        self.connections = self.reused = 0

    def _connect(self) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = self.context.wrap_socket(raw, server_hostname="localhost", session=self.session)
        self.connections += 1
        self.reused += sock.session_reused
        return sock

    def call(self, body: bytes) -> bytes:
        if self.sock is None:
            self.sock = self._connect()
        sock = self.sock
        sock.sendall(f"{self.head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        buf = bytearray()
        while (split := buf.find(b"\r\n\r\n")) < 0:
            buf += self._recv(sock)
        head, data = bytes(buf[:split]).lower(), buf[split + 4:]
        if not head.startswith(b"http/1.1 200"):
            raise RuntimeError(f"gateway answered {head[:200]!r}")
        if b"transfer-encoding: chunked" in head:
            pos = 0  # walk the chunk headers; stop after the zero-length chunk
            while True:
                while (eol := data.find(b"\r\n", pos)) < 0:
                    data += self._recv(sock)
                size = int(data[pos:eol].split(b";")[0], 16)
                pos = eol + 2 + size + 2
                while len(data) < pos:
                    data += self._recv(sock)
                if size == 0:
                    break
        else:
            length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            while len(data) < length:
                data += self._recv(sock)
        if not self.keep_alive:
            self.close()
        return bytes(data)

    @staticmethod
    def _recv(sock: ssl.SSLSocket) -> bytes:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        return chunk

    def close(self) -> None:
        if self.sock is not None:
            if self.resume:
                # Read after the reply: a TLS 1.3 ticket arrives after the handshake.
                self.session = self.sock.session
            self.sock.close()
            self.sock = None


#: Untimed spin after each call of the floor comparison (see :func:`interleaved`).
SETTLE_SECONDS = 0.0005


class Elapsed(float):
    """Seconds a call timed itself (what it waited for, leaving out its own work after):
    :func:`interleaved` takes it in place of the call's wall time."""


def interleaved(sides: list[tuple], n: int, settle: float = 0.0, warm_up: int = 3) -> list[float]:
    """Median milliseconds of ``n`` calls of each ``(call, message)`` side, one round at a time,
    after ``warm_up`` untimed rounds (connections, HMS's JIT); a call returning :class:`Elapsed`
    is timed by it.

    The order within a round is random (fixed seed): with a strict alternation, HMS's garbage
    collections, which come every k calls, can lock onto one side and bias the ratio. With
    ``settle`` (seconds), the client spins that long after each call, untimed: work a server does
    after its response (the gateway's metrics and audit line) then finishes before the next call
    starts instead of competing with it, as it does for a client that does anything between calls.
    The client spins rather than sleeps so that no core goes idle (waking one costs every side).
    """
    for _ in range(warm_up):
        for call, message in sides:
            call(message)
    order = random.Random(n)
    samples: list[list[float]] = [[] for _ in sides]
    rounds = list(zip(sides, samples))
    for _ in range(n):
        order.shuffle(rounds)
        for (call, message), out in rounds:
            t0 = time.perf_counter()
            result = call(message)
            t1 = time.perf_counter()
            out.append(result if isinstance(result, Elapsed) else t1 - t0)
            while time.perf_counter() - t1 < settle:
                pass
    return [median_ms(out) for out in samples]


def hold(client: Gateway, tjson: bytes, pid: int, seconds: float) -> tuple[int, float]:
    """Call for ``seconds`` on one kept-alive connection (for a profiler attached to ``pid``);
    returns (calls made, CPU seconds ``pid`` used meanwhile, from ``/proc/<pid>/stat``)."""
    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    client.call(tjson)
    calls, start = 0, cpu()
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        client.call(tjson)
        calls += 1
    used = cpu() - start
    client.close()
    return calls, used

