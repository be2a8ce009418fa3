"""Allocation tracing for a gateway under ``bench/soak.py --tracemalloc`` (diagnosis only).

Python imports ``sitecustomize`` at start-up from the first ``sys.path`` entry that has one;
``bench/soak.py`` puts this directory first on the gateway subprocess's ``PYTHONPATH`` and sets
``HMS_GATEWAY_TRACEMALLOC`` to a file name. Then a daemon thread starts :mod:`tracemalloc`
(10 frames), takes a baseline snapshot after ``HMS_GATEWAY_TRACEMALLOC_WARMUP`` seconds
(default 60) and, every ``HMS_GATEWAY_TRACEMALLOC_INTERVAL`` seconds (default 60), rewrites the
file with the net growth and the 30 allocation sites (grouped by traceback) that grew most since
the baseline.
Without the variable this module does nothing. tracemalloc sees Python-level allocations only
(OpenSSL's, libuv's and the C allocator's own fragmentation are invisible to it), and its own
tables and snapshots grow the process's RSS: judge growth by the dump, not by RSS.
"""

import os

_PATH = os.environ.get("HMS_GATEWAY_TRACEMALLOC")


def _trace(path: str, warmup: float, interval: float) -> None:
    import linecache
    import time
    import tracemalloc

    keep = (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"))
    time.sleep(warmup)
    baseline = tracemalloc.take_snapshot().filter_traces(keep)
    started = time.monotonic()
    while True:
        time.sleep(interval)
        snapshot = tracemalloc.take_snapshot().filter_traces(keep)
        current, peak = tracemalloc.get_traced_memory()
        stats = snapshot.compare_to(baseline, "traceback")
        grown = sum(s.size_diff for s in stats)
        lines = [f"# {time.monotonic() - started:.0f} s after the baseline; traced {current / 2**20:.1f} MiB "
                 f"(peak {peak / 2**20:.1f} MiB), {grown / 1024:+.1f} KiB since the baseline; tracemalloc's "
                 f"own tables {tracemalloc.get_tracemalloc_memory() / 2**20:.1f} MiB"]
        for stat in sorted(stats, key=lambda s: s.size_diff, reverse=True)[:30]:
            lines.append(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks "
                         f"(now {stat.size / 1024:.1f} KiB)")
            lines.extend("    " + line for line in stat.traceback.format(limit=10))
        tmp = path + ".tmp"
        with open(tmp, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
        del snapshot, stats
        linecache.clearcache()  # the source lines read for this dump would count as growth next time


if _PATH:
    import threading
    import tracemalloc as _tracemalloc

    _tracemalloc.start(10)
    threading.Thread(
        target=_trace, name="tracemalloc-dump", daemon=True,
        args=(_PATH, float(os.environ.get("HMS_GATEWAY_TRACEMALLOC_WARMUP", "60")),
              float(os.environ.get("HMS_GATEWAY_TRACEMALLOC_INTERVAL", "60"))),
    ).start()
