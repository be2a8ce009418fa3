"""``hms-gateway-tunnel`` plus the gateway against direct binary Thrift (issue 13's performance
targets). Run by ``bench/run.py --tunnel`` (``make bench``) or alone:
``python bench/tunnel.py [--rounds N] [--no-spark]``.

Starts its own Hive Metastore (full JIT) with a table of 5,000 partitions, the real gateway
(HTTPS, Basic) and the real tunnel (``hms-gateway-tunnel``, a subprocess, Basic as the bench
user). Both sides are the same raw strict-binary client (``bench/clients.py``: one socket, request
pre-built, reply read raw to its known length, ``set_ugi`` once after connecting): one socket to
HMS, one to the tunnel, calls interleaved in random order so both see the same machine load.

* ``get_table``: median of 200 × rounds calls; target tunnel/direct ≤ 1.6;
* ``get_partitions`` of 5,000 partitions: median of 15 × rounds; target ≤ 1.2;
* Spark ``SHOW PARTITIONS`` on the 5,000-partition table (unless ``--no-spark``): one Spark
  process on HMS directly, one through the tunnel, each timing the statement 7 times after 2
  warm-ups; target ≤ 1.3.

Prints the medians and ratios; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.clients import PASSWORD, USER, Direct, interleaved  # noqa: E402
from bench.harness import Bench  # noqa: E402
from gateway.thrift.binary import encode_binary_call  # noqa: E402
from gateway.thrift.schema import TType  # noqa: E402
from tests.support.big_table import create_partitioned_table, get_partitions_call  # noqa: E402
from tests.support.tunnel import start_tunnel  # noqa: E402

DB, TABLE, PARTITIONS = "benchdb", "parts5k", 5000
TARGETS = {
    "get_table tunnel+gateway/direct": 1.6,
    "get_partitions(5000) tunnel+gateway/direct": 1.2,
    "Spark SHOW PARTITIONS (5000) tunnel+gateway/direct": 1.3,
}
SPARK_RUNS, SPARK_WARMUP = 7, 2


def spark_show_partitions(uri: str, warehouse: Path) -> float:
    """Median seconds of Spark's ``SHOW PARTITIONS`` (all rows collected) against ``uri``, in a
    child process (one Spark JVM per metastore URI)."""
    out = subprocess.run(
        [sys.executable, __file__, "--spark-job", uri, "--warehouse", str(warehouse)],
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if out.returncode != 0:
        raise RuntimeError(f"Spark job failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median_s"]


def _spark_job(uri: str, warehouse: Path) -> int:
    import statistics

    from demo.seed_job import _spark_session

    with tempfile.TemporaryDirectory(prefix="bench-tunnel-spark-") as tmp:
        spark = _spark_session(uri, warehouse, Path(tmp))
        try:
            times = []
            for i in range(SPARK_WARMUP + SPARK_RUNS):
                t0 = time.perf_counter()
                rows = spark.sql(f"SHOW PARTITIONS {DB}.{TABLE}").collect()
                if i >= SPARK_WARMUP:
                    times.append(time.perf_counter() - t0)
            assert len(rows) == PARTITIONS, len(rows)
        finally:
            spark.stop()
    print(json.dumps({"median_s": statistics.median(times)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="multiply the number of calls measured")
    parser.add_argument("--no-spark", action="store_true", help="leave out the Spark SHOW PARTITIONS pair")
    parser.add_argument("--spark-job", metavar="URI", help=argparse.SUPPRESS)
    parser.add_argument("--warehouse", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.spark_job:
        return _spark_job(opts.spark_job, opts.warehouse)

    ratios: dict[str, float] = {}
    with Bench("tunnel") as bench:
        hms = bench.hms
        create_partitioned_table(hms.uri, DB, TABLE, PARTITIONS)
        methods = ["set_ugi", "get_table", "get_partitions", "get_database", "get_databases",
                   "get_partition_names", "get_partitions_ps_with_auth", "get_all_databases"]
        gw = bench.gateway(services=[bench.service(methods, timeout_seconds=300)])
        tunnel = start_tunnel(gw.url(), ["--auth", "basic", "--user", USER, "--password-env", "BENCH_TUNNEL_PW"],
                              ca=gw.ca_file, env={"BENCH_TUNNEL_PW": PASSWORD})
        bench.callback(tunnel.stop)
        direct, through = bench.direct(), Direct(tunnel.port)
        calls = {
            "get_table": (encode_binary_call("get_table", 1, [(1, TType.STRING, DB), (2, TType.STRING, TABLE)]), 200),
            "get_partitions(5000)": (get_partitions_call(DB, TABLE), 15),
        }
        for name, (message, n) in calls.items():
            n *= opts.rounds
            d, t = interleaved([(direct.call, message), (through.call, message)], n)
            assert through.call(message) == direct.call(message)  # the same bytes either way
            ratios[f"{name} tunnel+gateway/direct"] = t / d
            print(f"{name:22s} direct {d:8.2f} ms  tunnel+gateway {t:8.2f} ms  ratio {t / d:5.2f}  (median of {n})",
                  flush=True)
        direct.close()
        through.close()
        if not opts.no_spark:
            d = spark_show_partitions(hms.uri, hms.warehouse_dir)
            t = spark_show_partitions(tunnel.uri, hms.warehouse_dir)
            ratios["Spark SHOW PARTITIONS (5000) tunnel+gateway/direct"] = t / d
            print(f"Spark SHOW PARTITIONS  direct {d * 1000:8.0f} ms  tunnel+gateway {t * 1000:8.0f} ms  "
                  f"ratio {t / d:5.2f}  (median of {SPARK_RUNS})", flush=True)
    failed = [name for name, limit in TARGETS.items() if name in ratios and ratios[name] > limit]
    print()
    for name, limit in TARGETS.items():
        if name in ratios:
            verdict = "MISSED" if name in failed else "met"
            print(f"target {name}: {ratios[name]:.2f} (limit {limit}) {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
