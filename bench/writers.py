"""Concurrent appenders on one Iceberg table, each in a process of its own (issue 33), as real
writers are (8 Spark or PyIceberg clients, not 8 threads under one GIL).

A writer process builds its own PyIceberg catalog from a picklable :data:`Spec`
(``("rest" | "hive", properties)``), waits at a barrier with the others, then appends
``commits`` one-row batches to the table; a loser (``CommitFailedException`` after PyIceberg's
own retries, or ``WaitingForLockException``) reloads the table and tries again. It reports its
landed appends, the seconds of each (first try to success), its ``commit_table`` calls and the
CPU seconds it spent from the barrier on.

Also the CPU seconds of a process tree (:func:`cpu_seconds`, ``/proc``), the medians of the
gateway's audit lines of ``updateTable`` (:func:`server_medians`) and the gateway's calls to
HMS (:func:`hms_calls`), for the report.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import statistics
import time
from collections import Counter
from pathlib import Path

__all__ = ["Spec", "concurrent_appends", "cpu_by_thread", "cpu_seconds", "hms_calls", "rows", "server_medians"]

#: how a writer builds its catalog: ``("rest", RestCatalog properties)`` or ``("hive", ...)``
Spec = tuple[str, dict]
_TICKS = os.sysconf("SC_CLK_TCK")


def rows(start: int, n: int = 1):
    """``n`` rows ``(id, name, value)`` from ``start``, as a PyArrow table."""
    import pyarrow as pa

    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"row-{i}" for i in range(start, start + n)], pa.string()),
                     "value": pa.array([i / 4 for i in range(start, start + n)], pa.float64())})


def catalog(spec: Spec):
    """A PyIceberg catalog of ``spec``."""
    kind, properties = spec
    if kind == "rest":
        from pyiceberg.catalog.rest import RestCatalog
        return RestCatalog("gw", **properties)
    from pyiceberg.catalog.hive import HiveCatalog
    return HiveCatalog("hms", **properties)


def _writer(spec: Spec, identifier: str, w: int, commits: int, start, results) -> None:
    """One writer process: its report (a dict) goes to ``results``; its failure as ``error``."""
    import logging

    from pyiceberg.exceptions import CommitFailedException, WaitingForLockException

    logging.getLogger("pyiceberg").setLevel(logging.ERROR)  # each lock wait and retry is a warning
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests prefers them to ssl.cabundle
        os.environ.pop(name, None)
    report = {"writer": w, "successes": 0, "latencies": [], "attempts": 0, "cpu": 0.0, "error": None}
    try:
        cat = catalog(spec)
        attempts = []
        commit = cat.commit_table

        def counted(*args, **kwargs):  # PyIceberg's own retries call it too
            attempts.append(1)
            return commit(*args, **kwargs)
        cat.commit_table = counted
        # warm before the start, as a long-lived client is: its connections, and the modules an
        # append imports on first use (PyIceberg's schema check imports rich's console and table)
        cat.load_table(identifier)
        for module in ("pyiceberg.io.pyarrow", "rich.console", "rich.table"):
            importlib.import_module(module)
        start.wait(300)
        cpu0 = time.process_time()
        for i in range(commits):
            began = time.perf_counter()
            while True:
                try:
                    cat.load_table(identifier).append(rows(1_000_000 * (w + 1) + i))
                    break
                except (CommitFailedException, WaitingForLockException):
                    if len(attempts) > 50 * commits:
                        raise
            report["successes"] += 1
            report["latencies"].append(time.perf_counter() - began)
        report["cpu"] = time.process_time() - cpu0
        report["attempts"] = len(attempts)
    except BaseException as exc:  # reported by the parent
        report["error"] = repr(exc)[:500]
        start.abort()  # a writer that never reached the start must not hold up the others
    results.put(report)


def concurrent_appends(spec: Spec, identifier: str, writers: int, commits: int,
                       watch: dict[str, int] | None = None) -> dict:
    """``writers`` processes append ``commits`` rows each to ``identifier``, all started at
    once. Returns ``successes``, ``attempts`` (``commit_table`` calls), the table's new
    ``snapshots``, ``lost`` (successes − new snapshots), ``seconds`` (barrier to the last
    writer's end), ``per_second``, ``per_writer`` (landed appends), ``p50_ms``/``p99_ms`` of one
    append (first try to success), ``client_cpu`` (CPU seconds of all writers), ``cpu`` (CPU
    seconds of each process tree in ``watch``, name → pid, over the run) and ``threads`` (the
    same per thread name, :func:`cpu_by_thread`). Raises RuntimeError when a writer failed."""
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as separate clients are
    before = len(catalog(spec).load_table(identifier).snapshots())
    start, results = context.Barrier(writers + 1), context.Queue()
    processes = [context.Process(target=_writer, args=(spec, identifier, w, commits, start, results),
                                 name=f"appender-{w}", daemon=True) for w in range(writers)]
    for p in processes:
        p.start()
    reports = []
    try:
        start.wait(300)
    except Exception:  # a writer failed before the start: its report says why
        pass
    cpu0 = {name: cpu_seconds(pid) for name, pid in (watch or {}).items()}
    threads0 = {name: cpu_by_thread(pid) for name, pid in (watch or {}).items()}
    t0 = time.perf_counter()
    while len(reports) < writers:
        reports.append(results.get(timeout=3600))
    seconds = time.perf_counter() - t0
    cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in (watch or {}).items()}
    threads = {name: cpu_by_thread(pid) - threads0[name] for name, pid in (watch or {}).items()}
    for p in processes:
        p.join(60)
    errors = [r["error"] for r in reports if r["error"]]
    if errors:
        raise RuntimeError(f"{len(errors)} appenders failed: {errors[0]}")
    reports.sort(key=lambda r: r["writer"])
    latencies = [s for r in reports for s in r["latencies"]]
    successes = sum(r["successes"] for r in reports)
    snapshots = len(catalog(spec).load_table(identifier).snapshots()) - before
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    return {"successes": successes, "attempts": sum(r["attempts"] for r in reports), "snapshots": snapshots,
            "lost": successes - snapshots, "seconds": seconds, "per_second": successes / seconds,
            "per_writer": [r["successes"] for r in reports], "p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000,
            "client_cpu": sum(r["cpu"] for r in reports), "cpu": cpu, "threads": threads}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its live descendants (``/proc``); 0 for
    a process that is gone."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, IndexError, ValueError):
            continue
    return total


def cpu_by_thread(pid: int) -> Counter:
    """CPU seconds of process ``pid``'s threads by name (``/proc/<pid>/task/*/comm``, digits
    dropped: a JVM's ``C2 CompilerThre`` is its JIT, ``VM Thread`` and ``GC Thread#`` its
    collector, ``TThreadPoolServ`` HMS's Thrift handlers)."""
    seconds: Counter = Counter()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return seconds
    for task in tasks:
        try:
            name = (task / "comm").read_text().strip().rstrip("#0123456789 ")
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            seconds[name] += (int(fields[11]) + int(fields[12])) / _TICKS
        except (OSError, IndexError, ValueError):
            continue
    return seconds


def server_medians(log: str, table: str, method: str = "updateTable") -> dict[int, tuple[int, float]]:
    """Per HTTP status: how many audit lines of ``method`` on ``table`` the gateway log ``log``
    holds and their median ``duration_ms``."""
    durations: dict[int, list[float]] = {}
    for line in log.splitlines():
        if line.startswith("{") and f'"{method}"' in line:
            record = json.loads(line)
            if record.get("method") == method and record.get("table") == table:
                durations.setdefault(record.get("status"), []).append(record.get("duration_ms", 0.0))
    return {status: (len(d), statistics.median(d)) for status, d in sorted(durations.items())}


def hms_calls(management_url: str) -> float:
    """The calls the gateway made to HMS so far (``hms_gateway_upstream_requests_total`` of its
    ``/metrics``, every origin and outcome)."""
    from urllib.request import urlopen

    with urlopen(f"{management_url}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("hms_gateway_upstream_requests_total{"))
