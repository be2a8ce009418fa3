"""Gateway throughput with 1 and 2 worker processes (issue 14, item 3): ``python bench/workers.py``
or ``bench/run.py --workers``.

Two upstreams, each behind a gateway started with ``workers: 1`` and then ``workers: 2``:

* the real HMS (Derby-backed, from PySpark's jars), where HMS's own time is part of every call;
* a scripted upstream: a tiny uvloop process answering every framed strict-binary call at once
  with a fixed ``list<string>`` reply (``get_all_databases``, and ``set_ugi`` too), so that the
  gateway's own work dominates and its scaling shows.

The load is ``wrk`` (C, one thread by default) keeping ``--connections`` HTTPS connections
busy with TJSON ``get_all_databases`` and Basic credentials (verified once, then from the
credential cache) for ``--seconds`` after a warm-up. Prints requests per second, wrk's median
and 99th-percentile latency, the gateway's CPU time per request (all its processes, from
/proc: a figure a busy machine disturbs less than throughput) and each upstream's 2-worker /
1-worker ratio; any non-200 answer or socket error is printed and makes the exit status 1.

On a 2-core machine the load generator, the upstream and the workers share the two cores, so
two workers cannot double the throughput there: the ratio is a floor of what a bigger pod gets.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.clients import PASSWORD, USER  # noqa: E402
from bench.harness import Bench  # noqa: E402
from tests.support.fake_hms import list_of_strings_reply  # noqa: E402
from tests.support.gateway import service  # noqa: E402

BODY = '[1,"get_all_databases",1,1,{}]'
DATABASES = ["default"] + [f"db{i:02d}" for i in range(20)]


# --- the scripted upstream (run as ``python bench/workers.py --scripted-upstream``) --------


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Every framed call gets a REPLY of its own name and seqid whose success is a string list."""
    try:
        while True:
            (size,) = struct.unpack("!i", await reader.readexactly(4))
            call = await reader.readexactly(size)
            name_size = struct.unpack_from("!i", call, 4)[0]
            name = call[8:8 + name_size].decode()
            seqid = struct.unpack_from("!i", call, 8 + name_size)[0]
            reply = list_of_strings_reply(name, seqid, DATABASES)
            writer.write(struct.pack("!i", len(reply)) + reply)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve_scripted() -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


def start_scripted_upstream() -> tuple[subprocess.Popen, int]:
    """The scripted upstream in its own process; (process, port)."""
    process = subprocess.Popen([sys.executable, __file__, "--scripted-upstream"], stdout=subprocess.PIPE, text=True)
    return process, int(process.stdout.readline())


# --- the load -------------------------------------------------------------------------------


def wrk_script(workdir: Path) -> Path:
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    path = workdir / "get_all_databases.lua"
    path.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = '{BODY}'\n"
        'wrk.headers["Content-Type"] = "application/vnd.apache.thrift.json"\n'
        f'wrk.headers["Authorization"] = "Basic {token}"\n'
        "done = function(summary, latency, requests)\n"
        '  io.write(string.format("p50_us %d\\np99_us %d\\n", latency:percentile(50), latency:percentile(99)))\n'
        "end\n"
    )
    return path


def wrk(url: str, script: Path, seconds: float, connections: int, threads: int) -> dict:
    """One wrk run: requests/s, p50/p99 latency (ms), non-200 answers, socket errors."""
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "60s",
         "-s", str(script), url],
        capture_output=True, text=True, check=True,
    ).stdout
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50": int(re.search(r"p50_us (\d+)", out).group(1)) / 1000,
        "p99": int(re.search(r"p99_us (\d+)", out).group(1)) / 1000,
        "non-200": int(non_2xx.group(1)) if non_2xx else 0,
        "socket errors": sum(map(int, errors.groups())) if errors else 0,
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and of its children that are running now (Linux /proc)."""
    pids = [pid] + [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    ticks = 0
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(bench: Bench, upstreams: dict[str, dict], *, seconds: float, connections: int,
            threads: int, counts=(1, 2)) -> tuple[list[tuple[str, str]], dict[str, float], int]:
    """For each upstream (name → service keyword arguments) and worker count, start a gateway
    in ``bench``, load it and stop it. Returns (table rows, ratios "<upstream> 2 workers / 1
    worker", bad answers)."""
    script = wrk_script(bench.work)
    rows: list[tuple[str, str]] = []
    ratios: dict[str, float] = {}
    bad = 0
    for name, svc in upstreams.items():
        rps = {}
        for count in counts:
            gw = bench.gateway(services=[service(**svc)], name=f"gateway-{re.sub(r'[^a-z0-9]+', '-', name)}-{count}",
                               workers=count, logging={"level": "WARNING"}, audit={"enabled": False})
            try:
                url = gw.url()
                wrk(url, script, max(2.0, seconds / 2), connections, threads)  # pools, caches, HMS's JIT
                cpu = cpu_seconds(gw.process.pid)
                result = wrk(url, script, seconds, connections, threads)
                result["cpu_ms"] = (cpu_seconds(gw.process.pid) - cpu) * 1000 / (result["rps"] * seconds)
            finally:
                gw.stop()
            rps[count] = result["rps"]
            bad += result["non-200"] + result["socket errors"]
            label = f"{name}, {count} worker{'s' if count > 1 else ''}"
            rows.append((f"{label}: requests/s; p50 / p99 ms; gateway CPU ms per request",
                         f"{result['rps']:.0f}; {result['p50']:.2f} / {result['p99']:.2f}; {result['cpu_ms']:.3f}"))
            print(f"workers: {label:34s} {result['rps']:8.0f} req/s  p50 {result['p50']:6.2f} ms  "
                  f"p99 {result['p99']:6.2f} ms  gateway CPU {result['cpu_ms']:.3f} ms/request  "
                  f"non-200 {result['non-200']}  socket errors {result['socket errors']}", flush=True)
        key = f"{name}: {counts[-1]} workers / {counts[0]}"
        ratios[key] = rps[counts[-1]] / rps[counts[0]]
        rows.append((key, f"{ratios[key]:.2f}"))
        print(f"workers: {key} = {ratios[key]:.2f}", flush=True)
    return rows, ratios, bad


def both_upstreams(bench: Bench, hms_port: int | None, *, seconds: float = 10.0, connections: int = 32,
                   threads: int = 1) -> tuple[list[tuple[str, str]], dict[str, float], int]:
    """:func:`measure` in ``bench`` against the scripted upstream, then the HMS on ``hms_port``
    (skipped when None)."""
    scripted, scripted_port = start_scripted_upstream()
    try:
        upstreams = {"scripted upstream": {"urls": [f"thrift://127.0.0.1:{scripted_port}"],
                                           "transport": "framed", "pool_size": connections}}
        if hms_port is not None:
            upstreams["real HMS"] = {"urls": [f"thrift://127.0.0.1:{hms_port}"], "pool_size": connections}
        return measure(bench, upstreams, seconds=seconds, connections=connections, threads=threads)
    finally:
        scripted.terminate()
        scripted.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="load per measurement (default 10)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    parser.add_argument("--hms-port", type=int, help="a running HMS to use (default: start one)")
    parser.add_argument("--scripted-only", action="store_true", help="only the scripted upstream")
    parser.add_argument("--scripted-upstream", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.scripted_upstream:
        import uvloop

        uvloop.run(_serve_scripted())
        return 0
    if shutil.which("wrk") is None:
        print("bench/workers.py needs wrk (apt-get install wrk; scripts/install-system-deps.sh)", file=sys.stderr)
        return 2
    with Bench("workers", hms=opts.hms_port is None and not opts.scripted_only) as bench:
        port = opts.hms_port if bench.hms is None else bench.hms.port
        started = time.monotonic()
        _, _, bad = both_upstreams(bench, None if opts.scripted_only else port, seconds=opts.seconds,
                                   connections=opts.connections, threads=opts.threads)
        print(f"workers: done in {time.monotonic() - started:.0f} s; {bad} non-200 answers or socket errors")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
