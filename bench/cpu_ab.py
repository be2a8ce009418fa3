"""Gateway CPU per small call, two source trees side by side (issue 14): ``old`` and ``new``.

Wall-clock medians are noise on a loaded machine; CPU per call survives load better, and
instruction counts do not depend on it at all. This starts one HMS (10 partitions in
``benchdb.parts5k``) and one gateway per tree (``hms-gateway serve`` run from that tree, with
``PYTHONPATH`` and the working directory set to it, so its own modules and C extension load;
checked in ``/proc/<pid>/maps``), then, for ``get_all_databases`` and ``get_table`` (TJSON,
keep-alive, Basic with cached credentials):

* by default, ``--rounds`` rounds of ``--seconds`` of calls on each gateway in random order,
  printing each gateway's CPU (user + system, ``/proc/<pid>/stat``, all threads) per call;
* ``--callgrind N``: each gateway runs under ``valgrind --tool=callgrind`` with instrumentation
  off; after 20 warm-up calls it is switched on for N calls and dumped: user-space
  instructions per call (system calls are not counted);
* ``--profile SIDE:SECONDS``: ``py-spy record --native --format raw`` of one gateway meanwhile;
* ``--close``: every call on a new connection (``Connection: close``) that offers the previous
  connection's TLS session, for the modes above;
* ``--latency N``: N rounds, each one call on each gateway in random order (one kept-alive
  connection per gateway), printing each side's median wall-clock time per call: both sides see
  the same load, so their difference is meaningful when absolute times are not.

An old tree: ``git worktree add --detach /tmp/old <commit>``, and copy
``gateway/thrift/_speedups*.so`` into it (or build it there).

    python bench/cpu_ab.py --old /tmp/old [--new .] [--rounds 10 --seconds 3 | --callgrind 300]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tests.support.gateway as support_gateway  # noqa: E402
from bench.clients import Gateway, hold, tjson_message  # noqa: E402
from bench.harness import Bench  # noqa: E402
from tests.support.big_table import create_partitioned_table  # noqa: E402

CALLS = {
    "get_all_databases": tjson_message("get_all_databases", "{}"),
    "get_table": tjson_message("get_table", '{"1":{"str":"benchdb"},"2":{"str":"parts5k"}}'),
}


def start(bench: Bench, side: str, tree: Path, callgrind: bool):
    """``hms-gateway serve`` from ``tree`` in ``bench`` (``tests.support.gateway.start_gateway``,
    its subprocess launched from the tree, under callgrind if asked)."""
    work = bench.work
    real = subprocess

    def popen(args, **kw):
        kw["cwd"] = str(tree)
        kw["env"] = {**kw.get("env", os.environ), "PYTHONPATH": str(tree)}
        if callgrind:
            args = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                    f"--callgrind-out-file={work}/callgrind-{side}.out", *args]
        return real.Popen(args, **kw)

    support_gateway.subprocess = types.SimpleNamespace(
        Popen=popen, run=real.run, STDOUT=real.STDOUT, TimeoutExpired=real.TimeoutExpired)
    try:
        gw = bench.gateway(services=[bench.service(timeout_seconds=300, pool_size=32)], name=side,
                           timeout=900 if callgrind else 60)
    finally:
        support_gateway.subprocess = real
    maps = Path(f"/proc/{gw.process.pid}/maps").read_text()
    loaded = [line.split()[-1] for line in maps.splitlines() if "_speedups" in line]
    if not loaded or not loaded[0].startswith(str(tree)):
        raise RuntimeError(f"the {side} gateway did not load its own tree's modules: {loaded}")
    return gw


def instructions(gw, side: str, body: bytes, n: int, work: Path, name: str) -> float:
    """User-space instructions per call over ``n`` calls (callgrind, instrumented meanwhile)."""
    pid = str(gw.process.pid)
    client = Gateway(gw)
    client.call(body)
    for args in (["--zero"], ["-i", "on"]):
        subprocess.run(["callgrind_control", *args, pid], check=True, capture_output=True)
    for _ in range(n):
        client.call(body)
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
    subprocess.run(["callgrind_control", f"--dump={name}", pid], check=True, capture_output=True)
    client.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for dump in work.glob(f"callgrind-{side}.out.*"):
            text = dump.read_text(errors="replace")
            if f"Trigger: dump {name}" in text and (m := re.search(r"^totals: (\d+)", text, re.M)):
                return int(m.group(1)) / n
        time.sleep(0.5)
    raise RuntimeError(f"no callgrind dump {name} for {side}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the old source tree (a git worktree)")
    parser.add_argument("--new", type=Path, default=REPO, help="the new source tree (default: this one)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--callgrind", type=int, default=0, metavar="N", help="instructions per call over N calls")
    parser.add_argument("--close", action="store_true",
                        help="Connection: close on every call, offering the previous TLS session (as Node's agent does)")
    parser.add_argument("--latency", type=int, default=0, metavar="N", help="interleaved wall-clock medians over N rounds")
    parser.add_argument("--profile", default="", metavar="SIDE:SECONDS", help="py-spy record one side meanwhile")
    opts = parser.parse_args(argv)
    trees = {"old": opts.old.resolve(), "new": opts.new.resolve()}

    def client_of(gw) -> Gateway:
        return Gateway(gw, keep_alive=False, resume=True) if opts.close else Gateway(gw)

    gws: dict = {}
    with Bench("cpu-ab") as bench:
        work = bench.work
        create_partitioned_table(bench.hms.uri, "benchdb", "parts5k", 10)
        for side, tree in trees.items():
            gws[side] = start(bench, side, tree, bool(opts.callgrind))
            print(f"cpu_ab: {side} gateway pid {gws[side].process.pid} from {tree}", flush=True)
        for gw in gws.values():  # warm-up: connections, identities, HMS's JIT
            client = Gateway(gw)
            for _ in range(20 if opts.callgrind else 200):
                for body in CALLS.values():
                    client.call(body)
            client.close()
        if opts.callgrind:
            for name, body in CALLS.items():
                for side, gw in gws.items():
                    per_call = instructions(gw, side, body, opts.callgrind, work, name)
                    print(f"{name:18s} {side}: {per_call / 1e3:.1f} k instructions per call", flush=True)
            return 0
        if opts.latency:
            clients = {side: client_of(gw) for side, gw in gws.items()}
            for name, body in CALLS.items():
                times: dict[str, list[float]] = {side: [] for side in clients}
                order = random.Random(opts.latency)
                sides = list(clients)
                for _ in range(opts.latency):
                    order.shuffle(sides)
                    for side in sides:
                        t0 = time.perf_counter()
                        clients[side].call(body)
                        times[side].append(time.perf_counter() - t0)
                medians = {side: statistics.median(v) * 1e3 for side, v in times.items()}
                print(f"{name:18s} " + "  ".join(f"{s} {m:.3f} ms" for s, m in medians.items())
                      + f"  new - old {medians['new'] - medians['old']:+.3f} ms; load {os.getloadavg()[0]:.1f}",
                      flush=True)
            return 0
        if opts.profile:
            side, seconds = opts.profile.split(":")
            gw, out = gws[side], work / f"profile-{side}.txt"
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--native",
                                    "--rate", "250", "--format", "raw", "--pid", str(gw.process.pid),
                                    "-o", str(out), "--duration", seconds],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            calls, cpu = hold(client_of(gw), CALLS["get_all_databases"], gw.process.pid, float(seconds) + 1)
            spy.wait()
            print(f"profile {side}: {calls} calls, {cpu * 1e3 / calls:.3f} ms CPU each -> {out}", flush=True)
            return 0
        results: dict[tuple[str, str], list[float]] = {(s, c): [] for s in gws for c in CALLS}
        order = random.Random(1)
        for r in range(opts.rounds):
            for name, body in CALLS.items():
                sides = list(gws)
                order.shuffle(sides)
                for side in sides:
                    gw = gws[side]
                    calls, cpu = hold(client_of(gw), body, gw.process.pid, opts.seconds)
                    results[(side, name)].append(cpu * 1e3 / calls)
            print(f"round {r}: " + "  ".join(f"{s}/{c} {results[(s, c)][-1]:.3f}" for s in gws for c in CALLS)
                  + f" ms CPU per call; load {os.getloadavg()[0]:.1f}", flush=True)
        for name in CALLS:
            for side in gws:
                cpu = results[(side, name)]
                print(f"{name:18s} {side}: CPU per call median {statistics.median(cpu):.3f} ms "
                      f"(min {min(cpu):.3f}, max {max(cpu):.3f})", flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
