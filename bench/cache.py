"""The metadata cache (issue 24), side by side with direct calls to HMS.

``python bench/cache.py [--rounds N] [--seconds S]``. Starts its own Hive Metastore with a table
of 5,000 partitions and three hot tables of 50, and one gateway with two topologies over it:
``plain`` (no cache) and ``cached`` (``cache: {enabled: true}``). Clients speak strict binary
to the gateway (what Hive's and Spark's clients send), interleaved call by call with a direct
client on one persistent socket:

* ``get_table`` on a hit, gateway / direct (goal <= 0.6);
* ``get_partitions`` of 5,000 partitions on a hit, gateway / direct (goal <= 0.3);
* an engine-like trace replayed for ``--seconds`` by 4 clients on each topology: 70 %
  ``get_table`` and 30 % ``get_partitions_by_names`` (5 names) on the three hot tables, while
  another client alters one of them directly on HMS every second (the cache learns it from
  the notification log): throughput (calls/s) and the hit rate.

Prints medians and ratios; exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.clients import Gateway, interleaved  # noqa: E402
from bench.harness import Bench, load  # noqa: E402
from demo import metastore_client  # noqa: E402
from gateway.thrift.binary import encode_binary_call  # noqa: E402
from gateway.thrift.schema import TType  # noqa: E402
from tests.support.big_table import create_partitioned_table, get_partitions_call  # noqa: E402
from tests.support.gateway import metric  # noqa: E402

DB, BIG, PARTITIONS = "benchdb", "parts5k", 5000
HOT = ("hot0", "hot1", "hot2")
GOALS = {"get_table hit, gateway/direct": 0.6, "get_partitions(5000) hit, gateway/direct": 0.3}
METHODS = ["get_table", "get_partitions", "get_partitions_by_names", "get_partition_names"]


class BinaryGateway(Gateway):
    """:class:`bench.clients.Gateway` sending strict binary (``application/x-thrift``)."""

    def __init__(self, gw, topology: str):
        super().__init__(gw, topology=topology)
        self.head = self.head.replace("application/vnd.apache.thrift.json", "application/x-thrift")


def get_table_call(table: str, seqid: int = 1) -> bytes:
    return encode_binary_call("get_table", seqid, [(1, TType.STRING, DB), (2, TType.STRING, table)])


def by_names_call(table: str, names: list[str]) -> bytes:
    return encode_binary_call("get_partitions_by_names", 1, [
        (1, TType.STRING, DB), (2, TType.STRING, table), (3, TType.LIST, names)])


def replay(gw, topology: str, seconds: float, uri: str, clients: int = 4) -> tuple[float, int]:
    """Calls per second of the trace on ``topology`` and the number of writes made meanwhile."""
    stop = threading.Event()
    counts = [0] * clients
    writes = [0]

    def client(i: int) -> None:
        rng = random.Random(i)
        gateway = BinaryGateway(gw, topology)
        messages = [get_table_call(t) for t in HOT] + [
            by_names_call(t, [f"p={n:05d}" for n in rng.sample(range(50), 5)]) for t in HOT for _ in range(4)]
        weights = [70 / len(HOT)] * len(HOT) + [30 / (len(messages) - len(HOT))] * (len(messages) - len(HOT))
        try:
            while not stop.is_set():
                gateway.call(rng.choices(messages, weights)[0])
                counts[i] += 1
        finally:
            gateway.close()

    def writer() -> None:
        with metastore_client.connect(uri) as hms:
            while not stop.wait(1.0):
                table = hms.get_table(DB, HOT[writes[0] % len(HOT)])
                table.parameters["bench.version"] = str(writes[0])
                hms.alter_table(DB, table.tableName, table)
                writes[0] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)] + [threading.Thread(target=writer)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - start), writes[0]


def lookups(gw) -> dict[str, float]:
    return {r: metric(gw, "hms_gateway_cache_lookups_total", topology="cached", result=r)
            for r in ("hit", "miss", "stale", "bypass")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="multiply the number of calls measured")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each trace replay")
    opts = parser.parse_args(argv)
    with Bench("cache") as bench:
        uri = bench.hms.uri
        create_partitioned_table(uri, DB, BIG, PARTITIONS)
        for table in HOT:
            create_partitioned_table(uri, DB, table, 50)
        plain = bench.service(METHODS, timeout_seconds=300)
        cached = dict(plain, options={"methods": METHODS, "cache": {"enabled": True}})
        gw = bench.gateway({"plain": {"services": [plain]}, "cached": {"services": [cached]}})
        direct = bench.direct()
        through, without = BinaryGateway(gw, "cached"), BinaryGateway(gw, "plain")
        time.sleep(2)  # the follower's first poll
        n = 200 * opts.rounds
        table = get_table_call(BIG)
        d, hit, miss = interleaved([(direct.call, table), (through.call, table), (without.call, table)], n)
        bench.say(f"get_table, median of {n} (ms): direct {d:.3f}, gateway hit {hit:.3f}, gateway without "
                  f"cache {miss:.3f}; load {load()}")
        n = 15 * opts.rounds
        parts = get_partitions_call(DB, BIG)
        pd, phit, pmiss = interleaved([(direct.call, parts), (through.call, parts), (without.call, parts)], n)
        bench.say(f"get_partitions(5000), median of {n} (ms): direct {pd:.1f}, gateway hit {phit:.1f}, gateway "
                  f"without cache {pmiss:.1f}; load {load()}")
        results = {"get_table hit, gateway/direct": hit / d, "get_partitions(5000) hit, gateway/direct": phit / pd}
        before = lookups(gw)
        cached_rate, writes = replay(gw, "cached", opts.seconds, uri)
        after = lookups(gw)
        plain_rate, _ = replay(gw, "plain", opts.seconds, uri)
        done = {r: after[r] - before[r] for r in after}
        hit_rate = done["hit"] / max(1.0, sum(done.values()))
        bench.say(f"trace, 4 clients, {opts.seconds:g} s each, {writes} writes: cached {cached_rate:.0f} calls/s "
                  f"(hit rate {hit_rate:.3f}; {', '.join(f'{k} {v:.0f}' for k, v in done.items())}), without "
                  f"cache {plain_rate:.0f} calls/s ({cached_rate / plain_rate:.2f}x); load {load()}")
        for client in (direct, through, without):
            client.close()
    failed = [name for name, limit in GOALS.items() if results[name] > limit]
    for name, limit in GOALS.items():
        print(f"{'MISS' if name in failed else 'PASS'}  {name:45s} {results[name]:6.2f}  (goal <= {limit:g})")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
