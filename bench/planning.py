"""Server-side scan planning against PyIceberg's own planning (issue 42's performance target).
Run alone: ``python bench/planning.py [--manifests N] [--files N] [--plans N]``, or
``bench/run.py --planning``.

Starts its own Hive Metastore and the real gateway (HTTPS, Basic, one ``iceberg-rest``
service), and writes through the gateway one table of ``--manifests`` × ``--files`` data files
(200 × 50 = 10,000 by default) in one snapshot: PyIceberg's manifest writer, each file with
the column statistics PyIceberg writes (sizes, counts, bounds), no data files (planning reads
manifests only). Both sides are PyIceberg 0.12 in this process, the same ``RestCatalog`` but
for ``scan-planning-mode``: ``client`` reads the manifest list and the 200 manifests itself
(the local warehouse's files, warm in the page cache: the fastest a client can read them);
``server`` posts the plan and takes the tasks.

Timed: ``table.scan(...).plan_files()`` to the list of tasks, the table already loaded.

* the first plan on the server (the cache cold: the gateway reads the 200 manifests), reported;
* the whole table, client vs server with the cache warm, median of ``--plans`` interleaved;
  target server/client ≤ 0.2;
* a filter that keeps 1 % of the files (``id < 100 × files``... the first two manifests' ids),
  the same; target server/client ≤ 0.2;
* the floor of the server side: PyIceberg reading the server's answer alone (the plan's and the
  ``/tasks`` answers' JSON already in hand, validated and turned into ``FileScanTask`` as
  ``RestCatalog.plan_scan`` does), as a ratio to client planning: no server can go below it;
* the cache's memory: its own estimate (``hms_gateway_iceberg_manifest_cache_bytes``) against
  its bound (``planning.manifest_cache_mib``), and the gateway's resident memory before and
  after the cold plan.

Exits 1 when a target is missed, a side plans another number of files, or the cache holds more
than its bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.clients import PASSWORD, USER, interleaved  # noqa: E402
from bench.harness import Bench, load, machine  # noqa: E402
from tests.support.gateway import metric  # noqa: E402
from tests.support.iceberg.deletes import commit_manifests, new_snapshot_id  # noqa: E402

TARGET = 0.2
CACHE_MIB = 256
ROWS_PER_FILE = 1000


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _answers(catalog, table, row_filter, planned) -> list[str]:
    """The JSON texts of one server-side plan's answers (the plan, then each ``/tasks``), in order:
    the catalog's HTTP session is wrapped for that one plan."""
    session, texts = catalog._session, []
    post = session.post

    def recording(*args, **kwargs):
        answer = post(*args, **kwargs)
        texts.append(answer.text)
        return answer

    session.post = recording
    try:
        planned(table, row_filter)
    finally:
        session.post = post
    return texts


def _reading(texts: list[str]) -> int:
    """PyIceberg 0.12's own work on answers in hand (``RestCatalog.plan_scan`` without the HTTP):
    the number of tasks read."""
    from pyiceberg.catalog.rest import _PLANNING_RESPONSE_ADAPTER
    from pyiceberg.catalog.rest.scan_planning import ScanTasks
    from pyiceberg.table import FileScanTask

    tasks = 0
    for i, text in enumerate(texts):
        answer = _PLANNING_RESPONSE_ADAPTER.validate_json(text) if i == 0 else ScanTasks.model_validate_json(text)
        tasks += len([FileScanTask.from_rest_response(task, answer.delete_files) for task in answer.file_scan_tasks])
    return tasks


def _write_table(table, manifests: int, files: int):
    """``manifests`` manifests of ``files`` data files each, ids ``ROWS_PER_FILE`` per file in
    order, committed as one append."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
    from pyiceberg.manifest import write_manifest
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, StringType

    metadata, io = table.metadata, table.io
    snapshot_id = new_snapshot_id()
    written = []
    for m in range(manifests):
        path = f"{metadata.location}/metadata/bench-{snapshot_id}-m{m}.avro"
        with write_manifest(2, metadata.spec(), metadata.schema(), io.new_output(path), snapshot_id,
                            "deflate") as writer:
            for f in range(files):
                first = (m * files + f) * ROWS_PER_FILE
                data = DataFile.from_args(
                    content=DataFileContent.DATA, file_path=f"{metadata.location}/data/m{m}-f{f}.parquet",
                    file_format=FileFormat.PARQUET, partition=Record(), record_count=ROWS_PER_FILE,
                    file_size_in_bytes=40_000, column_sizes={1: 8_000, 2: 30_000},
                    value_counts={1: ROWS_PER_FILE, 2: ROWS_PER_FILE}, null_value_counts={1: 0, 2: 0},
                    lower_bounds={1: to_bytes(LongType(), first), 2: to_bytes(StringType(), f"name-{first}")},
                    upper_bounds={1: to_bytes(LongType(), first + ROWS_PER_FILE - 1),
                                  2: to_bytes(StringType(), f"name-{first + ROWS_PER_FILE - 1}")},
                    split_offsets=[4])
                data.spec_id = metadata.default_spec_id
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                         data_file=data))
        written.append(writer.to_manifest_file())
    return commit_manifests(table, written, snapshot_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=200, help="manifests (default %(default)s)")
    parser.add_argument("--files", type=int, default=50, help="data files per manifest (default %(default)s)")
    parser.add_argument("--plans", type=int, default=9, help="plans per side and case (default %(default)s)")
    opts = parser.parse_args(argv)

    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.expressions import AlwaysTrue, LessThan
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    print(" ".join(f"{k}={v}" for k, v in machine().items()), f"load={load()}", flush=True)
    with Bench("planning") as bench:
        service = {"kind": "iceberg-rest", "path": "iceberg", "upstream": {"urls": [bench.upstream]},
                   "options": {"planning": {"manifest_cache_mib": CACHE_MIB}}}
        gw = bench.gateway(services=[service])
        props = {"uri": gw.url(path="iceberg"), "ssl": {"cabundle": str(gw.ca_file)},
                 "auth": {"type": "basic", "basic": {"username": USER, "password": PASSWORD}}}
        client = RestCatalog("client", **props, **{"scan-planning-mode": "client"})
        server = RestCatalog("server", **props, **{"scan-planning-mode": "server"})
        assert server.supports_server_side_planning()
        client.create_namespace("benchplan")
        schema = Schema(NestedField(1, "id", LongType(), required=False),
                        NestedField(2, "name", StringType(), required=False))
        table = client.create_table("benchplan.big", schema=schema)
        total = opts.manifests * opts.files
        bench.say(f"writing {opts.manifests} manifests of {opts.files} data files")
        _write_table(table, opts.manifests, opts.files)
        local, remote = client.load_table("benchplan.big"), server.load_table("benchplan.big")
        cases = {"whole table": AlwaysTrue(), "1 % of the files": LessThan("id", 2 * opts.files * ROWS_PER_FILE)}

        def planned(table, row_filter) -> int:
            return len(list(table.scan(row_filter=row_filter).plan_files()))

        pid = gw.process.pid
        rss = _rss_mib(pid)
        t0 = time.perf_counter()
        cold_files = planned(remote, AlwaysTrue())
        cold = (time.perf_counter() - t0) * 1000
        grown = _rss_mib(pid) - rss
        held = metric(gw, "hms_gateway_iceberg_manifest_cache_bytes") / 2**20
        print(f"cold server plan ({total} files in {opts.manifests} manifests): {cold:8.1f} ms, {cold_files} tasks; "
              f"cache holds {held:.1f} MiB (estimate; bound {CACHE_MIB} MiB), gateway RSS +{grown:.1f} MiB",
              flush=True)
        failed = [] if cold_files == total and held <= CACHE_MIB else ["cold plan or cache bound"]
        for name, row_filter in cases.items():
            counts = {planned(local, row_filter), planned(remote, row_filter)}
            texts = _answers(server, remote, row_filter, planned)
            c, s, floor = interleaved([(lambda f: planned(local, f), row_filter),
                                       (lambda f: planned(remote, f), row_filter), (_reading, texts)], opts.plans)
            ratio = s / c
            if len(counts) != 1 or ratio > TARGET:
                failed.append(name)
            print(f"{name:18s} client {c:8.1f} ms  server (warm) {s:8.1f} ms  ratio {ratio:5.2f} "
                  f"(target <= {TARGET})  tasks {sorted(counts)}  (median of {opts.plans})  load {load()}", flush=True)
            print(f"{'':18s} of the server side, PyIceberg reading the answers alone ({len(texts)} answers, "
                  f"{sum(map(len, texts)) / 2**20:.1f} MiB, {_reading(texts)} tasks): {floor:8.1f} ms = "
                  f"{floor / c:5.2f} x client planning, the least any server can reach", flush=True)
        print(f"gateway RSS {_rss_mib(pid):.0f} MiB; cache "
              f"{metric(gw, 'hms_gateway_iceberg_manifest_cache_bytes') / 2**20:.1f} MiB; hits "
              f"{metric(gw, 'hms_gateway_iceberg_manifest_cache_lookups_total', result='hit'):.0f}, misses "
              f"{metric(gw, 'hms_gateway_iceberg_manifest_cache_lookups_total', result='miss'):.0f}")
        for name in failed:
            print(f"MISSED: {name}")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
