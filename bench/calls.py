"""Gateway vs direct binary Thrift, side by side against one real HMS (``make bench``).

Run by ``python bench/run.py`` (or ``python bench/calls.py``).

Starts its own Hive Metastore (Derby, from PySpark's jars) with a table of 5,000 partitions,
and the real gateway (``hms-gateway serve``, HTTPS, Basic auth). Then, alternating the two
sides call by call so both see the same machine load:

* direct: one persistent TCP socket, the strict-binary request sent raw and the raw reply
  read to its known length (no decoding);
* gateway: HTTPS kept alive, TJSON request, raw body bytes read (no decoding; a minimal
  HTTP/1.1 client, so that client-side HTTP parsing is not counted); also without keep-alive
  (``Connection: close``, as Microsoft's Node client sends) for information;
* the floor (issue 14): ``bench/floor.py``, a bare aiohttp HTTPS handler on uvloop with the
  gateway's TLS context, answering the gateway's own ``get_all_databases`` reply. Direct,
  gateway and floor interleaved kept alive (the gateway's own work = gateway - floor - direct;
  measured with a 0.5 ms untimed pause after each call, so that what the gateway does after
  its response does not slow the next side's call, and back to back without it),
  with the bare proxy beside them (``bench/bare_proxy.py``: the gateway's TLS, aiohttp server
  and C translators in front of one HMS connection, no features; bare proxy - floor - direct is
  what proxying costs in Python, gateway - bare proxy what the gateway's features cost),
  then ``Connection: close`` against the gateway and the floor, each with a full handshake and
  with the previous connection's TLS session offered (resumption checked on every connection);
* 32 concurrent clients (threads, one connection each) calling ``get_table`` for a fixed time;
* translation alone on the same 5,000 partitions: the gateway's translators against Apache
  Thrift's Python ``TJSONProtocol`` writer (binary → TJSON) and reader (TJSON → binary).

Prints medians and ratios and exits 1 when a target of issue 3 is missed (the aims of issue 14
are printed, met or not, and do not change the exit status). ``--markdown PATH`` also writes
the results table; ``--small`` measures only the small calls, the floor and the handshakes;
``--workers`` adds ``bench/workers.py`` (throughput with 1 and 2 worker processes, against this
HMS and a scripted upstream, with wrk);
``--hold SECONDS`` then calls the gateway and the floor for that long each, printing each
process's CPU time per call (attach ``py-spy record --pid`` meanwhile). Run with
``HMS_GATEWAY_PURE_PYTHON=1`` to measure the fallback.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from thrift.protocol import TBinaryProtocol, TJSONProtocol  # noqa: E402

from bench.clients import (  # noqa: E402
    SETTLE_SECONDS, USER, Direct, Gateway, hold, interleaved, median_ms, tjson_message,
)
from bench.harness import Bench, load, machine  # noqa: E402
from gateway.thrift import accel  # noqa: E402
from gateway.thrift.binary import encode_binary_call  # noqa: E402
from gateway.thrift.schema import TType, load_schema  # noqa: E402
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary  # noqa: E402
from tests.support.apache_codec import read_message, write_message  # noqa: E402
from tests.support.big_table import create_partitioned_table, get_partitions_call  # noqa: E402
from tests.support.gateway import stop_process  # noqa: E402
from tests.support.thrift_gen import hive_metastore_modules  # noqa: E402

DB, TABLE, PARTITIONS = "benchdb", "parts5k", 5000
CONCURRENCY, CONCURRENT_SECONDS = 32, 8.0

# (name, limit, higher_is_better): the targets of issue 3.
TARGETS = {
    "get_partitions(5000) gateway/direct": 1.3,
    "get_table gateway/direct": 1.5,
    "get_all_databases gateway/direct": 3.0,
    "32 clients get_table throughput gateway/direct": 0.70,
    "binary->TJSON speed-up vs Apache TJSONProtocol writer": 15.0,
    "TJSON->binary speed-up vs Apache TJSONProtocol reader": 50.0,
}
HIGHER_IS_BETTER = {
    "32 clients get_table throughput gateway/direct",
    "binary->TJSON speed-up vs Apache TJSONProtocol writer",
    "TJSON->binary speed-up vs Apache TJSONProtocol reader",
}


def side_by_side(direct: Direct, gateway: Gateway, binary: bytes, tjson: bytes, n: int) -> tuple[float, float]:
    """Median milliseconds of ``n`` calls on each side, interleaved (see :func:`interleaved`)."""
    d, g = interleaved([(direct.call, binary), (gateway.call, tjson)], n)
    return d, g



def warm_up(direct: Direct, gateway: Gateway, calls: list[tuple[bytes, bytes]], seconds: float) -> None:
    """Call each small call directly and through the gateway for ``seconds`` in all before
    measuring: HMS's JIT compiles its hot paths in the first thousands of calls, and until
    then the direct call is slower than it will be (in the first runs, twice as slow), which
    made the first ratios look better than they are."""
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        for binary, tjson in calls:
            direct.call(binary)
            gateway.call(tjson)



def _start_server(gw, script: str, *args: str) -> tuple[subprocess.Popen, int]:
    """Start ``bench/<script>`` with the gateway's certificate; (process, port)."""
    tls = yaml.safe_load((gw.workdir / "gateway.yaml").read_text())["tls"]
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / script), "--certificate", tls["certificate"],
         "--private-key", tls["private_key"], *args],
        stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        stop_process(proc)
        raise RuntimeError(f"bench/{script} did not start: {line!r}")
    return proc, int(line.split()[1])


def start_floor(gw, body: bytes, workdir: Path) -> tuple[subprocess.Popen, int]:
    """Start ``bench/floor.py`` with the gateway's certificate, answering ``body``; (process, port)."""
    (workdir / "floor-body").write_bytes(body)
    return _start_server(gw, "floor.py", "--body", str(workdir / "floor-body"))


def start_bare_proxy(gw, hms_port: int) -> tuple[subprocess.Popen, int]:
    """Start ``bench/bare_proxy.py`` in front of the HMS at ``hms_port``; (process, port)."""
    return _start_server(gw, "bare_proxy.py", "--hms-port", str(hms_port), "--user", USER)


def floor_and_handshakes(gw, floor_port: int, bare_port: int, direct: Direct, binary: bytes, tjson: bytes,
                         n: int) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """The gateway against the floor and the bare proxy for one small call: keep-alive, then
    ``Connection: close`` with and without TLS session resumption. Returns (figures, table rows)."""
    keep, floor, bare = Gateway(gw), Gateway(gw, port=floor_port), Gateway(gw, port=bare_port)
    sides = [(direct.call, binary), (keep.call, tjson), (floor.call, tjson), (bare.call, tjson)]
    bd, bg, bf, bb = interleaved(sides, n)  # back to back
    d, g, f, b = interleaved(sides, n, settle=SETTLE_SECONDS)
    keep.close()
    floor.close()
    bare.close()
    nc = max(20, n // 3)
    clients = {
        "gateway": Gateway(gw, keep_alive=False), "gateway resumed": Gateway(gw, keep_alive=False, resume=True),
        "floor": Gateway(gw, keep_alive=False, port=floor_port),
        "floor resumed": Gateway(gw, keep_alive=False, resume=True, port=floor_port),
    }
    close = dict(zip(clients, interleaved([(direct.call, binary)] + [(c.call, tjson) for c in clients.values()],
                                         nc)[1:]))
    for name, client in clients.items():
        want = client.connections - 1 if client.resume else 0  # only the first has nothing to offer
        if client.reused != want:
            raise RuntimeError(f"{name}: {client.reused} of {client.connections} connections resumed, want {want}")
    fig = {
        "direct": d, "gateway": g, "floor": f, "own": g - f - d, "own back to back": bg - bf - bd,
        "bare": b, "bare own": b - f - d, "bare/direct": b / d, "features": g - b, "features back to back": bg - bb,
        **{f"close {k}": v for k, v in close.items()},
        "resumed/floor": close["gateway resumed"] / close["floor"],
        "resumed/floor resumed": close["gateway resumed"] / close["floor resumed"],
    }
    rows = [
        (f"get_all_databases keep-alive: direct / gateway / floor (ms, median of {n})", f"{d:.3f} / {g:.3f} / {f:.3f}"),
        ("get_all_databases keep-alive: gateway minus floor minus direct, the gateway's own work (ms)",
         f"{fig['own']:.3f}"),
        ("the same back to back, no pause between calls: direct / gateway / floor (ms); own work",
         f"{bd:.3f} / {bg:.3f} / {bf:.3f}; {fig['own back to back']:.3f}"),
        ("bare proxy (bench/bare_proxy.py, no features): its time (ms); minus floor minus direct; / direct",
         f"{b:.3f}; {fig['bare own']:.3f}; {fig['bare/direct']:.2f}"),
        ("the gateway's features: gateway minus bare proxy (ms); back to back",
         f"{fig['features']:.3f}; {fig['features back to back']:.3f}"),
        (f"get_all_databases Connection: close, full handshake: gateway / floor (ms, median of {nc})",
         f"{close['gateway']:.2f} / {close['floor']:.2f}"),
        (f"get_all_databases Connection: close, TLS session resumed: gateway / floor (ms, median of {nc})",
         f"{close['gateway resumed']:.2f} / {close['floor resumed']:.2f}"),
        ("Connection: close, gateway resumed / floor full handshake; / floor resumed",
         f"{fig['resumed/floor']:.2f}; {fig['resumed/floor resumed']:.2f}"),
    ]
    print(f"floor: keep-alive direct {d:.3f} gateway {g:.3f} floor {f:.3f} ms, gateway's own {fig['own']:.3f} ms "
          f"(back to back: {bd:.3f} / {bg:.3f} / {bf:.3f}, own {fig['own back to back']:.3f}); "
          f"bare proxy {b:.3f} ms, its own {fig['bare own']:.3f} ms, {fig['bare/direct']:.2f}x direct; "
          f"the gateway's features {fig['features']:.3f} ms (back to back {fig['features back to back']:.3f}); "
          f"close full {close['gateway']:.2f} / {close['floor']:.2f}, resumed {close['gateway resumed']:.2f} / "
          f"{close['floor resumed']:.2f} ms (gateway / floor)", flush=True)
    return fig, rows


def throughput(make_client, message: bytes, threads: int, seconds: float) -> float:
    """Calls per second of ``threads`` clients, each calling in a loop for ``seconds``."""
    clients = [make_client() for _ in range(threads)]
    for c in clients:
        c.call(message)  # connect and warm up outside the measured time
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def worker(i: int) -> None:
        start.wait()
        while time.perf_counter() < stop_at[0]:
            clients[i].call(message)
            counts[i] += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    stop_at[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    for c in clients:
        c.close()
    return sum(counts) / elapsed


def timed(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return median_ms(samples)


def translation_alone(binary_reply: bytes) -> dict[str, float]:
    """Medians (ms) of the gateway's and Apache's translators on the same 5,000 partitions."""
    service_mod, _ = hive_metastore_modules()
    schema = load_schema()

    _, result = read_message(TBinaryProtocol.TBinaryProtocolAccelerated, binary_reply, service_mod.get_partitions_result)
    args = service_mod.add_partitions_args(new_parts=result.success)
    tjson_call = write_message(TJSONProtocol.TJSONProtocol, "add_partitions", 1, 1, args)
    out: dict[str, float] = {"tjson_call_bytes": len(tjson_call)}
    out["apache_writer"] = timed(lambda: write_message(TJSONProtocol.TJSONProtocol, "get_partitions", 2, 1, result), 3)
    out["apache_reader"] = timed(lambda: read_message(TJSONProtocol.TJSONProtocol, tjson_call, service_mod.add_partitions_args), 3)
    out["gateway_b2j"] = timed(lambda: binary_reply_to_tjson(binary_reply, schema), 15)
    out["gateway_j2b"] = timed(lambda: tjson_call_to_binary(tjson_call, schema), 15)
    with accel.using("python"):
        out["python_b2j"] = timed(lambda: binary_reply_to_tjson(binary_reply, schema), 3)
        out["python_j2b"] = timed(lambda: tjson_call_to_binary(tjson_call, schema), 3)
    return out


def concurrency_and_translation(hms_port: int, gw, get_table: tuple, binary_reply: bytes,
                                rows: list[tuple[str, str]], ratios: dict[str, float]) -> None:
    """32 concurrent ``get_table`` clients direct and through the gateway, then translation alone."""
    direct_tp = throughput(lambda: Direct(hms_port), get_table[0], CONCURRENCY, CONCURRENT_SECONDS)
    gateway_tp = throughput(lambda: Gateway(gw), get_table[1], CONCURRENCY, CONCURRENT_SECONDS)
    ratios["32 clients get_table throughput gateway/direct"] = gateway_tp / direct_tp
    rows.append((f"{CONCURRENCY} clients get_table for {CONCURRENT_SECONDS:g} s: direct / gateway (calls/s)",
                 f"{direct_tp:.0f} / {gateway_tp:.0f}"))
    print(f"{CONCURRENCY} clients get_table: direct {direct_tp:.0f}/s gateway {gateway_tp:.0f}/s", flush=True)

    tr = translation_alone(binary_reply)
    ratios["binary->TJSON speed-up vs Apache TJSONProtocol writer"] = tr["apache_writer"] / tr["gateway_b2j"]
    ratios["TJSON->binary speed-up vs Apache TJSONProtocol reader"] = tr["apache_reader"] / tr["gateway_j2b"]
    rows.append(("binary->TJSON of the 5,000 partitions: gateway / pure Python / Apache writer (ms)",
                 f"{tr['gateway_b2j']:.1f} / {tr['python_b2j']:.0f} / {tr['apache_writer']:.0f}"))
    rows.append((f"TJSON->binary of add_partitions with them ({tr['tjson_call_bytes'] / 1e6:.2f} MB): "
                 "gateway / pure Python / Apache reader (ms)",
                 f"{tr['gateway_j2b']:.1f} / {tr['python_j2b']:.0f} / {tr['apache_reader']:.0f}"))



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, help="also write the results table (Markdown) here")
    parser.add_argument("--rounds", type=int, default=1, help="multiply the number of calls measured")
    parser.add_argument("--warm-up", type=float, default=10.0, metavar="SECONDS",
                        help="small calls on both sides before measuring (HMS's JIT)")
    parser.add_argument("--small", action="store_true",
                        help="only the small calls, the floor and the handshakes (no 5,000 partitions, "
                             "throughput or translation; the targets of issue 3 not measured are left out)")
    parser.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                        help="after the measurements, call get_all_databases kept alive for SECONDS more "
                             "(to attach a profiler to the gateway, whose pid is printed)")
    parser.add_argument("--workers", action="store_true",
                        help="also measure throughput with 1 and 2 worker processes (bench/workers.py, needs wrk)")
    opts = parser.parse_args(argv)
    info = machine()
    load_before = load()
    with Bench("calls") as bench:
        hms = bench.hms
        t0 = time.perf_counter()
        create_partitioned_table(hms.uri, DB, TABLE, 10 if opts.small else PARTITIONS)
        bench.say(f"partitions added in {time.perf_counter() - t0:.0f} s; starting gateway")
        gw = bench.gateway(services=[bench.service(timeout_seconds=300, pool_size=CONCURRENCY)])
        info["translation"] = accel.implementation()
        db_args = f'{{"1":{{"str":"{DB}"}},"2":{{"str":"{TABLE}"}}}}'
        calls = {
            "get_all_databases": (encode_binary_call("get_all_databases", 1, []), tjson_message("get_all_databases", "{}"), 300),
            "get_table": (
                encode_binary_call("get_table", 1, [(1, TType.STRING, DB), (2, TType.STRING, TABLE)]),
                tjson_message("get_table", db_args), 200),
            "get_partitions(5000)": (
                get_partitions_call(DB, TABLE),
                tjson_message("get_partitions", db_args[:-1] + ',"3":{"i16":-1}}'), 15),
        }
        rows: list[tuple[str, str]] = []
        ratios: dict[str, float] = {}
        if opts.small:
            del calls["get_partitions(5000)"]
        direct, keep, close = bench.direct(), Gateway(gw), Gateway(gw, keep_alive=False)
        warm_up(direct, keep, [(b, j) for name, (b, j, _) in calls.items() if name != "get_partitions(5000)"],
                opts.warm_up)
        sizes = {}
        for name, (binary, tjson, n) in calls.items():
            n *= opts.rounds
            d, g = side_by_side(direct, keep, binary, tjson, n)
            dc, gc = side_by_side(direct, close, binary, tjson, max(5, n // 4))
            reply = direct.call(binary)
            sizes[name] = (len(reply), len(keep.call(tjson)))
            ratios[f"{name} gateway/direct"] = g / d
            rows.append((f"{name}: direct / gateway keep-alive (ms, median of {n})", f"{d:.2f} / {g:.2f}"))
            rows.append((f"{name}: direct / gateway with Connection: close (ms, median of {max(5, n // 4)}, "
                         "for information)", f"{dc:.2f} / {gc:.2f}"))
            print(f"{name:24s} direct {d:8.2f} ms  gateway {g:8.2f} ms  (close: {dc:.2f} / {gc:.2f} ms)  "
                  f"ratio {g / d:5.2f}  reply {sizes[name][0]} B binary, {sizes[name][1]} B TJSON", flush=True)
        small = calls["get_all_databases"]
        floor_proc, floor_port = start_floor(gw, keep.call(small[1]), bench.work)
        bench.callback(stop_process, floor_proc)
        bare_proc, bare_port = start_bare_proxy(gw, hms.port)
        bench.callback(stop_process, bare_proc)
        fig, floor_rows = floor_and_handshakes(gw, floor_port, bare_port, direct, small[0], small[1],
                                               small[2] * opts.rounds)
        aims = {
            "get_all_databases keep-alive: gateway/direct": (ratios["get_all_databases gateway/direct"], 2.0),
            "get_table keep-alive: gateway/direct": (ratios["get_table gateway/direct"], 1.3),
            "get_all_databases keep-alive: gateway's own work (ms)": (fig["own"], 0.15),
            "the same, back to back (ms)": (fig["own back to back"], 0.15),
            "Connection: close with resumption, gateway / floor full handshake": (fig["resumed/floor"], 1.2),
            "Connection: close with resumption, gateway / floor resumed": (fig["resumed/floor resumed"], 1.2),
        }
        rows += floor_rows
        if opts.hold:
            for name, pid, port in (("gateway", gw.process.pid, gw.port), ("floor", floor_proc.pid, floor_port)):
                bench.say(f"calling get_all_databases on the {name} for {opts.hold:g} s (pid {pid})")
                calls_made, cpu = hold(Gateway(gw, port=port), small[1], pid, opts.hold)
                bench.say(f"{name}: {calls_made} calls, {opts.hold * 1000 / calls_made:.3f} ms each, "
                          f"{cpu * 1000 / calls_made:.3f} ms of its CPU (user + system) each")
        binary_reply = None if opts.small else direct.call(calls["get_partitions(5000)"][0])
        direct.close()
        keep.close()
        if binary_reply is not None:
            concurrency_and_translation(hms.port, gw, calls["get_table"], binary_reply, rows, ratios)
        if opts.workers:
            from bench.workers import both_upstreams

            rows += both_upstreams(bench, hms.port)[0]
    info["load"] = f"{load_before} before, {load()} after (1/5/15-min load averages)"

    failed = []
    lines = ["| target | measured | limit | result |", "|---|---|---|---|"]
    print()
    for name, limit in TARGETS.items():
        if name not in ratios:
            continue  # --small
        value = ratios[name]
        ok = value >= limit if name in HIGHER_IS_BETTER else value <= limit
        sign = ">=" if name in HIGHER_IS_BETTER else "<="
        if not ok:
            failed.append(name)
        print(f"{'PASS' if ok else 'MISS'}  {name:55s} {value:7.2f}  (target {sign} {limit:g})")
        lines.append(f"| {name} | {value:.2f} | {sign} {limit:g} | {'pass' if ok else '**miss**'} |")
    lines += ["", "| aim of issue 14 (not a pass/fail target) | measured | aim |", "|---|---|---|"]
    for name, (value, limit) in aims.items():
        print(f"{'met ' if value <= limit else 'not met'}  {name:66s} {value:7.3f}  (aim <= {limit:g})")
        lines.append(f"| {name} | {value:.3f} | <= {limit:g} |")
    lines += ["", "| measurement | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "| machine | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in info.items()]
    for key, value in info.items():
        print(f"{key}: {value}")
    if opts.markdown:
        opts.markdown.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
