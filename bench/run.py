"""The benchmarks' command line (``make bench``): ``python bench/run.py [--policy | --datasource |
--tunnel | --feed | --iceberg | --planning | --memory] [the benchmark's own options]``.

Without a choice it runs the gateway against direct binary Thrift (``bench/calls.py``: the small
calls, the floor, handshakes, 5,000 partitions, 32 clients, translation alone; its options
``--small``, ``--rounds``, ``--warm-up``, ``--markdown``, ``--hold``, ``--workers``). ``--policy``
runs the catalog-policy benchmark instead (``bench/policy.py``, issue 11), ``--datasource`` the
PySpark data source benchmark (``bench/datasource.py``, issue 13), ``--tunnel``
``bench/tunnel.py`` (``hms-gateway-tunnel`` plus the gateway against direct calls, and Spark
through it, issue 13), ``--feed`` the change-feed benchmark (``bench/feed.py``, issue 12: delay
from an HMS call to an SSE client, 1,000 subscribers on one gateway process), ``--iceberg``
``bench/iceberg.py`` (the ``iceberg-rest`` service against PyIceberg's ``HiveCatalog`` directly,
issue 22), ``--planning`` ``bench/planning.py`` (server-side scan planning against PyIceberg's
own, the client behind a link, issues 42 and 50), ``--memory`` ``bench/memory.py`` (the RSS of
``serve`` and its workers, idle and after requests, issue 41). The options that
follow go to the chosen benchmark (``--help`` after the choice lists them). Each benchmark
starts its own HMS and gateway (``bench/harness.py``) and sets the exit status: 1 when a
target is missed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: Command-line choice → the module whose ``main(argv)`` runs that benchmark.
BENCHMARKS = {"calls": "bench.calls", "policy": "bench.policy", "datasource": "bench.datasource",
              "tunnel": "bench.tunnel", "feed": "bench.feed", "iceberg": "bench.iceberg",
              "planning": "bench.planning", "memory": "bench.memory"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    choice = parser.add_mutually_exclusive_group()
    for name in BENCHMARKS:
        if name != "calls":
            choice.add_argument(f"--{name}", dest="benchmark", action="store_const", const=name,
                                help=f"run {BENCHMARKS[name].replace('.', '/')}.py")
    opts, rest = parser.parse_known_args(argv)
    module = importlib.import_module(BENCHMARKS[opts.benchmark or "calls"])
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
