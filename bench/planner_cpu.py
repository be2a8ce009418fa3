"""The scan planner's CPU per plan, in this process: no HMS, no S3, no HTTP (issue 50). Run alone:
``python bench/planner_cpu.py [--manifests 200] [--files 50] [--plans 12] [--filter JSON]
[--stats-fields id,name]``.

A local table as bench/planning.py writes it (``--manifests`` × ``--files`` data files,
identity-partitioned on ``part``, two columns' statistics per file), planned ``--plans`` times
through the gateway's functions as a planning thread runs them (``scope``, ``manifests``,
``plan`` of every data manifest, the answer's text) with the manifest cache warm; the objects
made before the first plan frozen out of the collector's sight, as ``serve`` freezes its
start-up's (the cache is filled after). Prints the CPU seconds
per plan (median and least), the share of it spent in Python's cyclic garbage collector, and
the answer's digest (its table location left out), the same for two trees whose answers are the
same (run each tree's copy of this file). For where the time goes, run it under py-spy.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class _Collector:
    """CPU seconds spent in the cyclic garbage collector, and its full collections."""

    def __init__(self):
        self.seconds, self.full, self._started = 0.0, 0, 0.0
        gc.callbacks.append(self._event)

    def _event(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.full += info["generation"] == 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=200, help="manifests (default %(default)s)")
    parser.add_argument("--files", type=int, default=50, help="data files per manifest (default %(default)s)")
    parser.add_argument("--plans", type=int, default=12, help="plans timed (default %(default)s)")
    parser.add_argument("--filter", type=json.loads, help="the request's filter (the REST spec's JSON)")
    parser.add_argument("--stats-fields", help="the request's stats-fields, comma-separated")
    opts = parser.parse_args(argv)

    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    from bench.planning import _write_table
    from gateway.iceberg.manifest_cache import ManifestCache
    from gateway.iceberg.plan_models import PlanTableScanRequest
    from gateway.iceberg.planning import Residuals, manifests, plan, scope
    from gateway.lakehouse.file_io import file_io
    from tests.support.iceberg.local_table import empty_table

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False),
                    NestedField(3, "part", IntegerType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="part"))
    body = {"filter": opts.filter} if opts.filter else {}
    if opts.stats_fields:
        body["stats-fields"] = opts.stats_fields.split(",")
    ask = PlanTableScanRequest.model_validate(body)
    with tempfile.TemporaryDirectory(prefix="planner-cpu-") as folder:
        table = _write_table(empty_table(Path(folder), schema, spec), opts.manifests, opts.files)
        metadata, cache = table.metadata, ManifestCache(1 << 30)
        io = file_io({}, metadata.location)

        def planned() -> str:
            found = scope(metadata, ask)
            data, deletes = manifests(found, io, cache)
            return plan(found, io, data, deletes, Residuals(found.filter, 1 << 20, found.required),
                        threading.Event()).text()

        gc.collect()
        gc.freeze()  # as serve does once started: the manifest cache fills after it
        text = planned()
        collector, samples = _Collector(), []
        for _ in range(opts.plans):
            started = time.process_time()
            planned()
            samples.append(time.process_time() - started)
    tasks = text.count('"data-file"')
    digest = hashlib.sha256(text.replace(metadata.location, "<table>").encode()).hexdigest()[:16]
    print(f"{tasks} tasks, {len(text) / 2**20:.1f} MiB answer, digest {digest} (the table's location left out)")
    print(f"CPU per plan: median {statistics.median(samples):.3f} s, least {min(samples):.3f} s "
          f"({opts.plans} plans); the collector {collector.seconds / opts.plans:.3f} s per plan "
          f"({collector.full} full collections)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
