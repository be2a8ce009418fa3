"""Longer fuzzing of the gateway (``make fuzz``, issue 9): the hostile battery against a real
gateway and a real HMS for a given time, then the C/Python translator differential.

* Battery: batches of seeded hostile bodies (``tests/support/hostile.py``: mutations and
  truncations of the nine MS-HMSHTTP read calls in TJSON, strict binary and compact) sent over
  kept-alive HTTPS by several clients to a gateway whose service exposes only the nine read
  methods. Each batch is judged as the integration test judges it: no 5xx but upstream
  faults, each answer within ``--max-seconds``, replies only ever to their own caller, the
  upstream counter equal to the answers HMS gave; then ordinary calls in all three protocols
  must equal direct calls.
* Differential: the C and pure-Python translators on mutated TJSON calls and mutated real
  HMS replies (fetched from the HMS directly), same bytes or same ProtocolError.

Starts its own HMS (Derby, spec sample catalog) unless ``--hms HOST:PORT`` names a running
one filled by the demo pipeline. Exits 1 on any violation, printing the first ones.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gateway.thrift.schema import load_schema  # noqa: E402
from bench.harness import Bench  # noqa: E402
from tests.support.gateway import service, upstream_calls  # noqa: E402
from tests.support.hostile import (  # noqa: E402
    PROTOCOLS,
    READ_METHODS,
    SPEC_CALLS,
    check_answers,
    differential,
    expected_results,
    hostile_bodies,
    mutated_replies,
    original,
    read_reply,
    run_battery,
)
from tests.support.thrift_gen import hive_metastore_client  # noqa: E402

USER, PASSWORD = "admin", "admin-password"
BATCH = 2000


def raw_replies(host: str, port: int) -> list[bytes]:
    """The nine spec calls' strict-binary replies, read raw from the HMS."""
    from gateway.thrift.binary import BinaryMessageScanner

    replies = []
    with socket.create_connection((host, port), timeout=60) as sock:
        for name in READ_METHODS:
            sock.sendall(original("binary", name, seqid=3))
            scanner, data, end = BinaryMessageScanner(1 << 30), b"", None
            while end is None:
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("HMS closed the connection")
                data += chunk
                end = scanner.feed(chunk)
            replies.append(data[:end])
    return replies


def ordinary_round(gw, expected: dict, seed: int) -> list[str]:
    """The nine spec calls in each protocol, concurrently; the ones whose reply is wrong."""
    items = [(f"{p}:{name}:valid", original(p, name, seqid=seed % 2**31 + i))
             for i, (p, name) in enumerate((p, n) for p in PROTOCOLS for n in SPEC_CALLS)]
    answers = asyncio.run(run_battery(gw, items, concurrency=6, prefix=f"ord{seed}"))
    wrong = []
    for a in answers:
        name = a.label.split(":")[1]
        try:
            got = read_reply(a.protocol, a.reply) if a.status == 200 else None
        except Exception as exc:  # noqa: BLE001 - reported
            got = exc
        if got is None or isinstance(got, Exception) or got[0] != name or got[3].success != expected[name]:
            wrong.append(f"ordinary {a.label}: {a.status} {a.reply[:120]!r}")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600, help="time for the battery (the differential adds about a fifth)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=1.0, help="bound on each answer (issue 9: 1 s)")
    parser.add_argument("--hms", help="HOST:PORT of a running HMS with the demo catalog (default: start one)")
    opts = parser.parse_args(argv)
    print(f"fuzz: seed {opts.seed}", flush=True)
    problems: list[str] = []
    with Bench("fuzz", hms=not opts.hms, catalog=True, short_lived=True) as bench:
        if opts.hms:
            host, _, port = opts.hms.rpartition(":")
            host, port = host or "127.0.0.1", int(port)
        else:
            host, port = bench.hms.host, bench.hms.port
        gw = bench.gateway(services=[service([f"thrift://{host}:{port}"], methods=READ_METHODS)],
                           users={USER: PASSWORD})
        direct, transport = hive_metastore_client(host, port)
        expected = expected_results(direct)
        transport.close()
        deadline, batch, sent, upstream_total = time.monotonic() + opts.seconds, 0, 0, 0
        while time.monotonic() < deadline and not problems:
            seed = opts.seed * 1000 + batch
            bodies = list(hostile_bodies(seed, BATCH))
            before = upstream_calls(gw)
            answers = asyncio.run(run_battery(gw, bodies, concurrency=opts.concurrency, prefix=f"b{batch}"))
            upstream = upstream_calls(gw) - before
            verdict = check_answers(gw, answers, expected, max_seconds=opts.max_seconds)
            problems += [f"batch seed {seed}: {v}" for v in verdict.violations]
            if upstream != verdict.upstream:
                problems.append(f"batch seed {seed}: upstream counter +{upstream}, answers from HMS {verdict.upstream}")
            problems += ordinary_round(gw, expected, seed)
            sent += len(answers)
            upstream_total += upstream
            slowest = max(a.elapsed for a in answers)
            print(f"fuzz: batch {batch} (seed {seed}): {verdict.counts}, slowest {slowest:.3f} s", flush=True)
            batch += 1
        print(f"fuzz: battery sent {sent} bodies, {upstream_total} reached HMS", flush=True)

        schema = load_schema()
        replies = raw_replies(host, port)
        diff_deadline = time.monotonic() + max(10.0, opts.seconds / 5)
        inputs, round_ = 0, 0
        while time.monotonic() < diff_deadline and not problems:
            seed = opts.seed * 1000 + round_
            calls = [(label, body) for label, body in hostile_bodies(seed, 4000) if body[:1] in (b"[", b"\x82")]
            n, found = differential(schema, calls, mutated_replies(replies, seed, 4000), seed=seed)
            inputs += n
            problems += [f"differential seed {seed}: {p}" for p in found]
            round_ += 1
        print(f"fuzz: differential ran {inputs} inputs", flush=True)
    if problems:
        print(f"fuzz: {len(problems)} problems; first ones:", *problems[:20], sep="\n  ")
        print(f"fuzz: gateway log in {gw.workdir / 'gateway.log'}")
        return 1
    print("fuzz: no problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
