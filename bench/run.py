"""Gateway vs direct binary Thrift, side by side against one real HMS (``make bench``).

Starts its own Hive Metastore (Derby, from PySpark's jars) with a table of 5,000 partitions,
and the real gateway (``hms-gateway serve``, HTTPS, Basic auth). Then, alternating the two
sides call by call so both see the same machine load:

* direct: one persistent TCP socket, the strict-binary request sent raw and the raw reply
  read to its known length (no decoding);
* gateway: HTTPS kept alive, TJSON request, raw body bytes read (no decoding; a minimal
  HTTP/1.1 client, so that client-side HTTP parsing is not counted); also without keep-alive
  (``Connection: close``, as Microsoft's Node client sends) for information;
* 32 concurrent clients (threads, one connection each) calling ``get_table`` for a fixed time;
* translation alone on the same 5,000 partitions: the gateway's translators against Apache
  Thrift's Python ``TJSONProtocol`` writer (binary → TJSON) and reader (TJSON → binary).

Prints medians and ratios and exits 1 when a target of issue 3 is missed. ``--markdown PATH``
also writes the results table. Run with ``HMS_GATEWAY_PURE_PYTHON=1`` to measure the fallback.
"""

from __future__ import annotations

import argparse
import base64
import os
import platform
import random
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from thrift.protocol import TBinaryProtocol, TJSONProtocol  # noqa: E402

from gateway.thrift import accel  # noqa: E402
from gateway.thrift.binary import encode_binary_call  # noqa: E402
from gateway.thrift.schema import TType, load_schema  # noqa: E402
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary  # noqa: E402
from tests.support.apache_codec import read_message, write_message  # noqa: E402
from tests.support.big_table import create_partitioned_table, get_partitions_call, raw_call  # noqa: E402
from tests.support.gateway import service, start_gateway  # noqa: E402
from tests.support.hms import start_hms  # noqa: E402
from tests.support.thrift_gen import hive_metastore_modules  # noqa: E402

DB, TABLE, PARTITIONS = "benchdb", "parts5k", 5000
USER, PASSWORD = "bench", "bench-password"
CONCURRENCY, CONCURRENT_SECONDS = 32, 8.0

# (name, limit, higher_is_better): the targets of issue 3.
TARGETS = {
    "get_partitions(5000) gateway/direct": 1.3,
    "get_table gateway/direct": 1.5,
    "get_all_databases gateway/direct": 3.0,
    "32 clients get_table throughput gateway/direct": 0.70,
    "binary->TJSON speed-up vs Apache TJSONProtocol writer": 15.0,
    "TJSON->binary speed-up vs Apache TJSONProtocol reader": 50.0,
}
HIGHER_IS_BETTER = {
    "32 clients get_table throughput gateway/direct",
    "binary->TJSON speed-up vs Apache TJSONProtocol writer",
    "TJSON->binary speed-up vs Apache TJSONProtocol reader",
}


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
    so neither side spends time decoding; only the status code is checked.
    """

    def __init__(self, gw, keep_alive: bool = True):
        self.gw, self.keep_alive = gw, keep_alive
        path = "/" + gw.url().split("/", 3)[3]
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.head = (
            f"POST {path} HTTP/1.1\r\nHost: localhost:{gw.port}\r\nAuthorization: Basic {token}\r\n"
            "Content-Type: application/vnd.apache.thrift.json\r\n"
            + ("" if keep_alive else "Connection: close\r\n")
        )
        self.context = gw.ssl_context()
        self.sock: ssl.SSLSocket | None = None

    def _connect(self) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.gw.port))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.context.wrap_socket(raw, server_hostname="localhost")

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
            self.sock.close()
            self.sock = None


def side_by_side(direct: Direct, gateway: Gateway, binary: bytes, tjson: bytes, n: int) -> tuple[float, float]:
    """Median milliseconds of ``n`` calls on each side, interleaved pair by pair.

    Which side goes first in a pair is random (fixed seed): with a strict alternation, HMS's
    garbage collections, which come every k calls, can lock onto one side and bias the ratio.
    """
    for _ in range(3):  # warm-up: connections, HMS's JIT
        direct.call(binary)
        gateway.call(tjson)
    order = random.Random(n)
    d, g = [], []
    for _ in range(n):
        sides = [(direct.call, binary, d), (gateway.call, tjson, g)]
        order.shuffle(sides)
        for call, message, samples in sides:
            t0 = time.perf_counter()
            call(message)
            samples.append(time.perf_counter() - t0)
    return median_ms(d), median_ms(g)


def throughput(make_client, message: bytes, threads: int, seconds: float) -> float:
    """Calls per second of ``threads`` clients, each calling in a loop for ``seconds``."""
    clients = [make_client() for _ in range(threads)]
    for c in clients:
        c.call(message)  # connect and warm up outside the measured time
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def worker(i: int) -> None:
        start.wait()
        while time.perf_counter() < stop_at[0]:
            clients[i].call(message)
            counts[i] += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    stop_at[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    for c in clients:
        c.close()
    return sum(counts) / elapsed


def timed(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return median_ms(samples)


def translation_alone(binary_reply: bytes) -> dict[str, float]:
    """Medians (ms) of the gateway's and Apache's translators on the same 5,000 partitions."""
    service_mod, _ = hive_metastore_modules()
    schema = load_schema()

    _, result = read_message(TBinaryProtocol.TBinaryProtocolAccelerated, binary_reply, service_mod.get_partitions_result)
    args = service_mod.add_partitions_args(new_parts=result.success)
    tjson_call = write_message(TJSONProtocol.TJSONProtocol, "add_partitions", 1, 1, args)
    out: dict[str, float] = {"tjson_call_bytes": len(tjson_call)}
    out["apache_writer"] = timed(lambda: write_message(TJSONProtocol.TJSONProtocol, "get_partitions", 2, 1, result), 3)
    out["apache_reader"] = timed(lambda: read_message(TJSONProtocol.TJSONProtocol, tjson_call, service_mod.add_partitions_args), 3)
    out["gateway_b2j"] = timed(lambda: binary_reply_to_tjson(binary_reply, schema), 15)
    out["gateway_j2b"] = timed(lambda: tjson_call_to_binary(tjson_call, schema), 15)
    with accel.using("python"):
        out["python_b2j"] = timed(lambda: binary_reply_to_tjson(binary_reply, schema), 3)
        out["python_j2b"] = timed(lambda: tjson_call_to_binary(tjson_call, schema), 3)
    return out


def machine() -> dict[str, str]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "translation": accel.implementation(),
    }


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, help="also write the results table (Markdown) here")
    parser.add_argument("--rounds", type=int, default=1, help="multiply the number of calls measured")
    opts = parser.parse_args(argv)
    info = machine()
    load_before = load()
    work = Path(tempfile.mkdtemp(prefix="hms-gateway-bench-"))
    print(f"bench: workdir {work}; starting HMS", flush=True)
    hms = start_hms(work / "hms")
    gw = None
    try:
        t0 = time.perf_counter()
        create_partitioned_table(hms.uri, DB, TABLE, PARTITIONS)
        print(f"bench: {PARTITIONS} partitions added in {time.perf_counter() - t0:.0f} s; starting gateway", flush=True)
        gw = start_gateway(
            work / "gateway",
            {"default": {"services": [service([f"thrift://127.0.0.1:{hms.port}"], timeout_seconds=300,
                                              pool_size=CONCURRENCY)]}},
            {USER: PASSWORD},
        )
        info["translation"] = accel.implementation()
        db_args = f'{{"1":{{"str":"{DB}"}},"2":{{"str":"{TABLE}"}}}}'
        calls = {
            "get_all_databases": (encode_binary_call("get_all_databases", 1, []), tjson_message("get_all_databases", "{}"), 300),
            "get_table": (
                encode_binary_call("get_table", 1, [(1, TType.STRING, DB), (2, TType.STRING, TABLE)]),
                tjson_message("get_table", db_args), 200),
            "get_partitions(5000)": (
                get_partitions_call(DB, TABLE),
                tjson_message("get_partitions", db_args[:-1] + ',"3":{"i16":-1}}'), 15),
        }
        rows: list[tuple[str, str]] = []
        ratios: dict[str, float] = {}
        direct, keep, close = Direct(hms.port), Gateway(gw), Gateway(gw, keep_alive=False)
        sizes = {}
        for name, (binary, tjson, n) in calls.items():
            n *= opts.rounds
            d, g = side_by_side(direct, keep, binary, tjson, n)
            dc, gc = side_by_side(direct, close, binary, tjson, max(5, n // 4))
            reply = direct.call(binary)
            sizes[name] = (len(reply), len(keep.call(tjson)))
            ratios[f"{name} gateway/direct"] = g / d
            rows.append((f"{name}: direct / gateway keep-alive (ms, median of {n})", f"{d:.2f} / {g:.2f}"))
            rows.append((f"{name}: direct / gateway with Connection: close (ms, median of {max(5, n // 4)}, "
                         "for information)", f"{dc:.2f} / {gc:.2f}"))
            print(f"{name:24s} direct {d:8.2f} ms  gateway {g:8.2f} ms  (close: {dc:.2f} / {gc:.2f} ms)  "
                  f"ratio {g / d:5.2f}  reply {sizes[name][0]} B binary, {sizes[name][1]} B TJSON", flush=True)
        binary_reply = direct.call(calls["get_partitions(5000)"][0])
        direct.close()
        keep.close()

        get_table = calls["get_table"]
        direct_tp = throughput(lambda: Direct(hms.port), get_table[0], CONCURRENCY, CONCURRENT_SECONDS)
        gateway_tp = throughput(lambda: Gateway(gw), get_table[1], CONCURRENCY, CONCURRENT_SECONDS)
        ratios["32 clients get_table throughput gateway/direct"] = gateway_tp / direct_tp
        rows.append((f"{CONCURRENCY} clients get_table for {CONCURRENT_SECONDS:g} s: direct / gateway (calls/s)",
                     f"{direct_tp:.0f} / {gateway_tp:.0f}"))
        print(f"{CONCURRENCY} clients get_table: direct {direct_tp:.0f}/s gateway {gateway_tp:.0f}/s", flush=True)

        tr = translation_alone(binary_reply)
        ratios["binary->TJSON speed-up vs Apache TJSONProtocol writer"] = tr["apache_writer"] / tr["gateway_b2j"]
        ratios["TJSON->binary speed-up vs Apache TJSONProtocol reader"] = tr["apache_reader"] / tr["gateway_j2b"]
        rows.append(("binary->TJSON of the 5,000 partitions: gateway / pure Python / Apache writer (ms)",
                     f"{tr['gateway_b2j']:.1f} / {tr['python_b2j']:.0f} / {tr['apache_writer']:.0f}"))
        rows.append((f"TJSON->binary of add_partitions with them ({tr['tjson_call_bytes'] / 1e6:.2f} MB): "
                     "gateway / pure Python / Apache reader (ms)",
                     f"{tr['gateway_j2b']:.1f} / {tr['python_j2b']:.0f} / {tr['apache_reader']:.0f}"))
    finally:
        if gw is not None:
            gw.stop()
        hms.server.stop()
    info["load"] = f"{load_before} before, {load()} after (1/5/15-min load averages)"

    failed = []
    lines = ["| target | measured | limit | result |", "|---|---|---|---|"]
    print()
    for name, limit in TARGETS.items():
        value = ratios[name]
        ok = value >= limit if name in HIGHER_IS_BETTER else value <= limit
        sign = ">=" if name in HIGHER_IS_BETTER else "<="
        if not ok:
            failed.append(name)
        print(f"{'PASS' if ok else 'MISS'}  {name:55s} {value:7.2f}  (target {sign} {limit:g})")
        lines.append(f"| {name} | {value:.2f} | {sign} {limit:g} | {'pass' if ok else '**miss**'} |")
    lines += ["", "| measurement | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "| machine | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in info.items()]
    for key, value in info.items():
        print(f"{key}: {value}")
    if opts.markdown:
        opts.markdown.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
