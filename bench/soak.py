"""Memory soak: mixed load against the real gateway and HMS, watching the gateway's RSS (``make soak``).

Starts its own Hive Metastore (Derby, from PySpark's jars) with a table of ``--partitions``
partitions (the large replies) and the real gateway (``hms-gateway serve``, HTTPS, Basic auth),
then runs ``--clients`` client threads for ``--minutes``. Each request is drawn from a fixed mix
(:func:`mix`, weights in percent): kept-alive and ``Connection: close`` connections; TJSON,
strict binary and compact; small and large (``get_partitions`` of every partition) replies;
malformed bodies; requests without credentials; and wrong passwords, each from a fresh source
address (the client binds 127.x.y.z before connecting, so thousands of distinct addresses reach
the gateway's per-address tables).

Every 10 s the gateway's RSS (``VmRSS`` of ``/proc/<pid>/status``) is sampled. At the end the
script prints the samples, the request counts by kind and status, and the growth after warm-up:
from the median RSS of the first minute after ``--warmup`` (a fraction of the run, default 0.2)
to the median of the last minute. It exits 1 when that growth is 10 % or more, or when any
request got a 500.

``--tracemalloc`` runs the gateway with :mod:`tracemalloc` (``bench/tracemalloc_hook``) and prints
the allocation sites that grew most since warm-up; tracing slows the gateway, so use it to find a
cause, not for the figures. ``--markdown PATH`` also writes the results as Markdown.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import itertools
import os
import random
import signal
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.clients import tjson_message  # noqa: E402
from bench.harness import Bench, load, machine  # noqa: E402
from gateway.thrift.binary import encode_binary_call  # noqa: E402
from gateway.thrift.compact import binary_message_to_compact  # noqa: E402
from gateway.thrift.schema import TType  # noqa: E402
from tests.support.big_table import create_partitioned_table, get_partitions_call  # noqa: E402

DB, TABLE = "soakdb", "parts"
USER, PASSWORD = "soak", "soak-password"
SAMPLE_SECONDS = 10.0
GROWTH_LIMIT = 0.10
HOOK = REPO / "bench" / "tracemalloc_hook"

TJSON_TYPE = "application/vnd.apache.thrift.json"
BINARY_TYPE = "application/vnd.apache.thrift.binary"
COMPACT_TYPE = "application/vnd.apache.thrift.compact"


@dataclass(frozen=True)
class Kind:
    """One kind of request: its body, content type, whether the connection is kept alive, and
    the credentials (``"good"``, ``"wrong"`` from a fresh source address, or ``"none"``)."""

    name: str
    weight: float
    body: bytes
    content_type: str
    keep_alive: bool = True
    credentials: str = "good"


def _calls(partitions_table: tuple[str, str]) -> dict[str, bytes]:
    db, table = partitions_table
    get_table = encode_binary_call("get_table", 7, [(1, TType.STRING, db), (2, TType.STRING, table)])
    get_dbs = encode_binary_call("get_all_databases", 8, [])
    args = f'{{"1":{{"str":"{db}"}},"2":{{"str":"{table}"}}}}'
    return {
        "tjson_get_table": tjson_message("get_table", args, 7),
        "tjson_get_all_databases": tjson_message("get_all_databases", "{}", 8),
        "tjson_get_partitions": tjson_message("get_partitions", args[:-1] + ',"3":{"i16":-1}}', 9),
        "binary_get_table": get_table,
        "binary_get_partitions": get_partitions_call(db, table, 9),
        "compact_get_all_databases": binary_message_to_compact(get_dbs),
        "compact_get_table": binary_message_to_compact(get_table),
    }


def mix() -> list[Kind]:
    """The request mix; weights are percentages and add up to 100."""
    c = _calls((DB, TABLE))
    return [
        # good, kept alive (52 %)
        Kind("tjson get_table", 16, c["tjson_get_table"], TJSON_TYPE),
        Kind("tjson get_all_databases", 12, c["tjson_get_all_databases"], TJSON_TYPE),
        Kind("binary get_table", 12, c["binary_get_table"], BINARY_TYPE),
        Kind("compact get_all_databases", 6, c["compact_get_all_databases"], COMPACT_TYPE),
        Kind("compact get_table", 6, c["compact_get_table"], COMPACT_TYPE),
        # good, Connection: close (25 %)
        Kind("tjson get_table, close", 12, c["tjson_get_table"], TJSON_TYPE, keep_alive=False),
        Kind("binary get_table, close", 7, c["binary_get_table"], BINARY_TYPE, keep_alive=False),
        Kind("compact get_table, close", 6, c["compact_get_table"], COMPACT_TYPE, keep_alive=False),
        # large replies (5 %)
        Kind("tjson get_partitions (large)", 3, c["tjson_get_partitions"], TJSON_TYPE),
        Kind("binary get_partitions (large)", 2, c["binary_get_partitions"], BINARY_TYPE),
        # bad bodies (10 %)
        Kind("truncated TJSON", 3, c["tjson_get_table"][:-7], TJSON_TYPE),
        Kind("TJSON of the wrong type", 2, tjson_message("get_table", '{"1":{"i32":5}}'), TJSON_TYPE),
        Kind("truncated binary, close", 2, c["binary_get_table"][:-5], BINARY_TYPE, keep_alive=False),
        Kind("not Thrift", 2, b"hello, metastore", "text/plain"),
        Kind("unknown method", 1, tjson_message("no_such_method", "{}"), TJSON_TYPE),
        # refused (8 %)
        Kind("wrong password, fresh address", 3, c["tjson_get_table"], TJSON_TYPE, keep_alive=False,
             credentials="wrong"),
        Kind("no credentials", 5, c["tjson_get_all_databases"], TJSON_TYPE, credentials="none"),
    ]


def fresh_addresses():
    """127.x.y.z source addresses, never 127.0.0.1, each used once (Linux routes all of 127/8 to lo)."""
    for i in itertools.count():
        yield f"127.{1 + (i // 62_500) % 254}.{(i // 250) % 250}.{1 + i % 250}"


class Client:
    """One client thread's connections: a kept-alive one, and one per ``Connection: close`` request."""

    def __init__(self, port: int, path: str, context, addresses, lock: threading.Lock):
        self.port, self.path, self.context = port, path, context
        self.addresses, self.lock = addresses, lock
        self.kept: http.client.HTTPSConnection | None = None
        good = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.good = f"Basic {good}"

    def _connection(self, source: str | None = None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "localhost", self.port, context=self.context, timeout=120,
            source_address=(source, 0) if source else None,
        )

    def request(self, kind: Kind) -> int:
        """The HTTP status of one request of ``kind``; the reply body is read in full."""
        headers = {"Content-Type": kind.content_type}
        source = None
        if kind.credentials == "good":
            headers["Authorization"] = self.good
        elif kind.credentials == "wrong":
            with self.lock:
                source = next(self.addresses)
            wrong = base64.b64encode(f"{USER}:wrong-{random.random()}".encode()).decode()
            headers["Authorization"] = f"Basic {wrong}"
        if kind.keep_alive:
            if self.kept is None:
                self.kept = self._connection()
            conn = self.kept
        else:
            conn = self._connection(source)
            headers["Connection"] = "close"
        try:
            conn.request("POST", self.path, body=kind.body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.will_close and conn is self.kept:
                self.close()
            return response.status
        except BaseException:
            if conn is self.kept:
                self.close()
            raise
        finally:
            if conn is not self.kept:
                conn.close()

    def close(self) -> None:
        if self.kept is not None:
            self.kept.close()
            self.kept = None


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` in KiB (``VmRSS``, proc(5))."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def drive(gw, kinds: list[Kind], clients: int, seconds: float, pid: int, seed: int):
    """Run the load for ``seconds``; return (samples [(t, RSS KiB, requests so far)], counts by
    (kind, status or error), seconds taken)."""
    counts: Counter = Counter()
    done = [0]
    lock = threading.Lock()
    addresses = fresh_addresses()
    path = "/" + gw.url().split("/", 3)[3]
    weights = [k.weight for k in kinds]
    stop = threading.Event()

    def worker(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        client = Client(gw.port, path, gw.ssl_context(), addresses, lock)
        local: Counter = Counter()
        while not stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            try:
                outcome: object = client.request(kind)
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__
            local[(kind.name, outcome)] += 1
            if local.total() >= 50 or stop.is_set():
                with lock:
                    counts.update(local)
                    done[0] += local.total()
                local.clear()
        client.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    t0 = time.monotonic()
    samples = [(0.0, rss_kib(pid), 0)]
    for t in threads:
        t.start()
    print(f"{'t (s)':>7} {'RSS (MiB)':>10} {'requests':>9}  load", flush=True)
    print(f"{0:7.0f} {samples[0][1] / 1024:10.1f} {0:9d}  {load()}", flush=True)
    end = t0 + seconds
    while (now := time.monotonic()) < end:
        time.sleep(min(SAMPLE_SECONDS - (now - t0) % SAMPLE_SECONDS, end - now))
        with lock:
            n = done[0]
        t = time.monotonic() - t0
        samples.append((t, rss_kib(pid), n))
        print(f"{t:7.0f} {samples[-1][1] / 1024:10.1f} {n:9d}  {load()}", flush=True)
    stop.set()
    for t in threads:
        t.join(180)
    return samples, counts, time.monotonic() - t0


def growth(samples: list[tuple[float, int, int]], warmup_seconds: float, window: int = 6) -> dict[str, float]:
    """RSS after warm-up. The baseline is the median of the first ``window`` samples from
    ``warmup_seconds`` on, the end the median of the last ``window`` (one minute each at one
    sample per 10 s), so that one large reply in flight at a sampling instant does not decide
    the result. Also the peak, the growth from baseline to end (a fraction) and a least-squares
    slope in MiB per minute."""
    after = [(t, kib) for t, kib, _ in samples if t >= warmup_seconds] or [samples[-1][:2]]
    base = statistics.median(kib for _, kib in after[:window])
    last = statistics.median(kib for _, kib in after[-window:])
    slope = 0.0
    if len(after) >= 2:
        ts = [t / 60 for t, _ in after]
        ms = [kib / 1024 for _, kib in after]
        slope = statistics.linear_regression(ts, ms).slope
    return {"baseline_mib": base / 1024, "last_mib": last / 1024, "peak_mib": max(k for _, k in after) / 1024,
            "start_mib": samples[0][1] / 1024, "growth": (last - base) / base, "slope_mib_per_min": slope}


def report(kinds, counts: Counter, samples, result: dict, elapsed: float, info: dict) -> list[str]:
    """Markdown lines: request counts by kind and status, RSS summary, machine."""
    total = sum(counts.values())
    lines = ["| kind | share | requests | by status |", "|---|---|---|---|"]
    for kind in kinds:
        by = {o: n for (name, o), n in counts.items() if name == kind.name}
        statuses = ", ".join(f"{o}: {n}" for o, n in sorted(by.items(), key=lambda x: str(x[0])))
        lines.append(f"| {kind.name} | {kind.weight:g} % | {sum(by.values())} | {statuses} |")
    by_status = Counter()
    for (_, outcome), n in counts.items():
        by_status[outcome] += n
    lines.append(f"| all | 100 % | {total} ({total / elapsed:.0f}/s) | "
                 + ", ".join(f"{o}: {n}" for o, n in sorted(by_status.items(), key=lambda x: str(x[0]))) + " |")
    rss = [kib / 1024 for _, kib, _ in samples]
    lines += [
        "", "| RSS of the gateway | MiB |", "|---|---|",
        f"| before load | {result['start_mib']:.1f} |",
        f"| baseline: median of the first minute after warm-up | {result['baseline_mib']:.1f} |",
        f"| end: median of the last minute | {result['last_mib']:.1f} |",
        f"| peak after warm-up | {result['peak_mib']:.1f} |",
        f"| min / median / max of {len(rss)} samples | {min(rss):.1f} / {statistics.median(rss):.1f} / {max(rss):.1f} |",
        f"| growth after warm-up | {result['growth'] * 100:+.1f} % (limit < {GROWTH_LIMIT * 100:g} %) |",
        f"| slope after warm-up (least squares) | {result['slope_mib_per_min']:+.3f} MiB/min |",
    ]
    lines += ["", "| machine | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in info.items()]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="duration of the load (default 30)")
    parser.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--partitions", type=int, default=3000, help="partitions of the large table")
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of the run before the baseline")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tracemalloc", action="store_true", help="trace the gateway's allocations")
    parser.add_argument("--markdown", type=Path, help="also write the results (Markdown) here")
    opts = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop HMS and the gateway on the way out
    info = machine()
    info["load"] = load() + " before"
    with Bench("soak") as bench:
        trace_file = bench.work / "tracemalloc.txt"
        env = {}
        if opts.tracemalloc:
            env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
                   "HMS_GATEWAY_TRACEMALLOC": str(trace_file),
                   "HMS_GATEWAY_TRACEMALLOC_WARMUP": os.environ.get(
                       "HMS_GATEWAY_TRACEMALLOC_WARMUP", str(int(opts.minutes * 60 * opts.warmup)))}
        t0 = time.monotonic()
        create_partitioned_table(bench.hms.uri, DB, TABLE, opts.partitions)
        bench.say(f"{opts.partitions} partitions added in {time.monotonic() - t0:.0f} s; starting gateway")
        gw = bench.gateway(
            services=[bench.service(timeout_seconds=300, pool_size=opts.clients)], users={USER: PASSWORD}, env=env,
            timeout=120,  # a busy machine, and tracemalloc, slow the start-up
        )
        kinds = mix()
        seconds = opts.minutes * 60
        print(f"soak: gateway pid {gw.process.pid}; {opts.clients} clients for {opts.minutes:g} min", flush=True)
        samples, counts, elapsed = drive(gw, kinds, opts.clients, seconds, gw.process.pid, opts.seed)
        if gw.process.poll() is not None:
            print(f"soak: the gateway exited with {gw.process.returncode}", flush=True)
            return 1
    info["load"] += f", {load()} after (1/5/15-min load averages)"
    info["clients"] = str(opts.clients)
    info["duration"] = f"{elapsed / 60:.1f} min, RSS sampled every {SAMPLE_SECONDS:g} s, warm-up {opts.warmup:.0%}"
    result = growth(samples, seconds * opts.warmup)
    lines = report(kinds, counts, samples, result, elapsed, info)
    print("\n" + "\n".join(lines))
    if opts.tracemalloc:
        print("\ntracemalloc, growth since warm-up:\n" + (trace_file.read_text() if trace_file.exists() else "(no dump yet)"))
    if opts.markdown:
        opts.markdown.write_text("\n".join(lines) + "\n")
    failed = False
    if opts.tracemalloc:
        print("RSS is not judged under --tracemalloc: its own tables and snapshots grow it")
    elif result["growth"] >= GROWTH_LIMIT:
        print(f"FAIL: RSS grew {result['growth'] * 100:.1f} % after warm-up (limit {GROWTH_LIMIT * 100:g} %)")
        failed = True
    errors = sum(n for (_, o), n in counts.items() if o == 500)
    if errors:
        print(f"FAIL: {errors} responses were 500")
        failed = True
    if not failed and not opts.tracemalloc:
        print(f"PASS: RSS grew {result['growth'] * 100:+.1f} % after warm-up")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
