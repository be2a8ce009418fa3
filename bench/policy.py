"""Catalog policy costs (issue 11 item 10), side by side with a direct call.

``python bench/run.py --policy`` (or ``python bench/policy.py``). Starts its own Hive Metastore
with a table of 5,000 partitions (columns ``x`` and ``ssn``) and one gateway with three
topologies over it: ``plain`` (no policy), ``allowed`` (a policy granting the table) and
``columns`` (the same plus a deny of ``ssn``). Then, interleaving the sides call by call:

* ``get_partitions`` of 5,000 partitions on the allowed table, gateway / direct (target
  <= 1.1: the decision comes from the request and the reply streams untouched);
* the same with ``ssn`` denied: every partition's storage descriptor filtered (target <= 1.5);
* the gateway's CPU time per call on each topology (from ``/proc/<pid>/stat``);
* in process, on HMS's own reply of those 5,000 partitions, the CPU the catalog-policy step
  spends filtering ``ssn`` (the byte splice it takes) against the object path (decode every
  partition, filter, encode): what a loaded machine cannot blur;
* in process, the catalog-policy step alone on a ``get_all_tables`` reply of 1,000 names under
  100 policies, typical (policies on other databases, prefixes and literals) and adversarial
  (every policy on the listed database: wildcards, excludes, ``{USER}``, priorities, denials):
  milliseconds the step adds (decode, filter, re-encode; aim <= 0.3 ms).

Prints medians and ratios; exits 1 when a target is missed (the listing aim is printed only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.clients import USER, Gateway, hold, interleaved, tjson_message  # noqa: E402
from bench.harness import Bench  # noqa: E402
from demo import metastore_client  # noqa: E402
from gateway.observability.audit import AuditEvent  # noqa: E402
from gateway.hms_thrift.exchange import ThriftExchange  # noqa: E402
from gateway.hms_thrift.reply import ThriftReply  # noqa: E402
from gateway.hms_thrift.steps.catalog_policy import CatalogPolicy  # noqa: E402
from gateway.policy import CatalogView, PolicyEngine, load_policy_file  # noqa: E402
from gateway.policy.columns import filter_partition  # noqa: E402
from gateway.policy.model import Policy, PolicyItem, ResourceSpec, expand_accesses  # noqa: E402
from gateway.providers.authentication.base import Principal  # noqa: E402
from gateway.providers.identity import Identity  # noqa: E402
from gateway.thrift.binary import encode_binary_call, read_message_header  # noqa: E402
from gateway.thrift.schema import TType, load_schema  # noqa: E402
from tests.support.big_table import create_partitioned_table, get_partitions_call  # noqa: E402
from tests.support.fake_hms import list_of_strings_reply  # noqa: E402

DB, TABLE, PARTITIONS = "benchdb", "parts5k", 5000
TARGETS = {"get_partitions(5000) allowed table, gateway/direct": 1.1,
           "get_partitions(5000) one column denied, gateway/direct": 1.5}
LISTING_AIM_MS = 0.3
ALLOWED = f"""
policies:
  - id: 1
    name: bench reads {DB}
    resources: {{database: [{DB}], table: ["*"], column: ["*"]}}
    allow: [{{users: [{USER}], accesses: [select]}}]
"""
COLUMNS = ALLOWED + f"""
  - id: 2
    name: no ssn for bench
    resources: {{database: [{DB}], table: [{TABLE}], column: [ssn]}}
    deny: [{{users: [{USER}], accesses: [select]}}]
"""


def _item(*accesses: str, users=(), groups=()) -> PolicyItem:
    return PolicyItem(expand_accesses(list(accesses)), frozenset(users), frozenset(groups))


def typical_policies() -> list[Policy]:
    """100 policies over 20 databases, each granting a group a table prefix and a table."""
    return [Policy(i + 1, f"p{i}", (ResourceSpec((f"db{i % 20}",)), ResourceSpec((f"t{i}_*", f"fact_{i}")),
                                    ResourceSpec(("*",))), allow=(_item("select", groups=[f"g{i % 10}"]),))
            for i in range(100)]


def adversarial_policies() -> list[Policy]:
    """100 policies all on the listed database: wildcards, excluding levels, ``{USER}``,
    literals; a third deny a group, half have the override priority."""
    out = []
    for i in range(100):
        table = [ResourceSpec((f"*{i}?x*",)), ResourceSpec((f"t{i}_*",), True),
                 ResourceSpec((f"{{USER}}_{i}*",)), ResourceSpec((f"tab{i}",))][i % 4]
        out.append(Policy(i + 1, f"p{i}", (ResourceSpec(("sales", "db*")), table, ResourceSpec(("*",))),
                          allow=(_item("select", groups=["analysts"], users=["{USER}"]),),
                          deny=(_item("select", groups=[f"g{i}"]),) if i % 3 == 0 else (), priority=i % 2))
    return out


def listing_cost(policies: list[Policy], database: str, n: int) -> tuple[float, float, int]:
    """Median wall-clock ms the catalog-policy step adds to a ``get_all_tables`` reply of 1,000
    names (reply decode, filter, re-encode), mean CPU ms of the same (``time.process_time``:
    what other work on the machine cannot blur), and how many names it kept."""
    schema = load_schema()
    step = CatalogPolicy("bench", "/hms", PolicyEngine(policies), schema)
    names = [f"t{i}_tab{i % 37}" for i in range(1000)]
    message = list_of_strings_reply("get_all_tables", 1, names)
    call = encode_binary_call("get_all_tables", 1, [(1, TType.STRING, database)])
    identity = Identity(USER, Principal(USER, "basic"), frozenset({"analysts", "g3", "g6"}))
    header, _ = read_message_header(call)
    samples, kept, cpu = [], 0, 0.0

    async def run() -> None:
        nonlocal kept, cpu
        for _ in range(n):
            exchange = ThriftExchange(None, AuditEvent("bench", None),  # type: ignore[arg-type]
                                identity=identity, header=header, call=call)
            reply = ThriftReply(message, schema)
            c0, t0 = time.process_time(), time.perf_counter()
            await step.on_reply(exchange, reply)
            samples.append(time.perf_counter() - t0)
            cpu += time.process_time() - c0
            kept = len(reply.result.success)

    asyncio.run(run())
    return statistics.median(samples) * 1000, cpu / n * 1000, kept


def column_filter_cpu(message: bytes, policy_file: Path, n: int) -> tuple[float, float, int]:
    """Median CPU ms of the catalog-policy step on a ``get_partitions`` reply (``message``,
    strict binary) under ``policy_file``, and of the object path (decode every partition, filter
    as a ``CatalogView`` keeps them, encode); and how many bytes the filtered reply lost."""
    schema = load_schema()
    engine = load_policy_file(policy_file)
    step = CatalogPolicy("bench", "/hms", engine, schema)
    call = get_partitions_call(DB, TABLE)
    header, _ = read_message_header(call)
    identity = Identity(USER, Principal(USER, "basic"))
    step_ms, object_ms, removed = [], [], 0

    async def run() -> None:
        nonlocal removed
        for _ in range(n):
            exchange = ThriftExchange(None, AuditEvent("bench", None),  # type: ignore[arg-type]
                                identity=identity, header=header, call=call)
            reply = ThriftReply(message, schema)
            t0 = time.process_time()
            await step.on_reply(exchange, reply)
            step_ms.append(time.process_time() - t0)
            removed = len(message) - len(reply.message)
            t0 = time.process_time()
            reply = ThriftReply(message, schema)
            view = CatalogView(engine, identity.user, identity.groups)
            for part in reply.result.success:
                filter_partition(view, part)
            reply.replace(reply.result)
            object_ms.append(time.process_time() - t0)

    asyncio.run(run())
    return statistics.median(step_ms) * 1000, statistics.median(object_ms) * 1000, removed


def add_denied_column(uri: str) -> None:
    """Add ``ssn`` to the table and, cascading, to every partition's storage descriptor."""
    hms = metastore_client.load_idl()
    with metastore_client.connect(uri, timeout=1800) as client:
        table = client.get_table(DB, TABLE)
        table.sd.cols.append(hms.FieldSchema("ssn", "string", "denied to the bench user"))
        client.alter_table_with_cascade(DB, TABLE, table, True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="multiply the number of calls measured")
    parser.add_argument("--listing-only", action="store_true", help="only the in-process listing cost")
    opts = parser.parse_args(argv)
    results: dict[str, float] = {}
    for label, policies, database in (("typical", typical_policies(), "db3"),
                                      ("adversarial", adversarial_policies(), "sales")):
        ms, cpu_ms, kept = listing_cost(policies, database, 500 * opts.rounds)
        print(f"get_all_tables of 1,000 names under 100 policies, {label}: step adds {ms:.3f} ms "
              f"(CPU {cpu_ms:.3f} ms; kept {kept}; aim <= {LISTING_AIM_MS}; load average "
              f"{os.getloadavg()[0]:.2f})", flush=True)
    if opts.listing_only:
        return 0
    with Bench("policy") as bench:
        work = bench.work
        create_partitioned_table(bench.hms.uri, DB, TABLE, PARTITIONS)
        add_denied_column(bench.hms.uri)
        (work / "allowed.yaml").write_text(ALLOWED)
        (work / "columns.yaml").write_text(COLUMNS)

        def topology(policy: str | None) -> dict:
            svc = bench.service(timeout_seconds=300)
            return {"services": [dict(svc, policy_file=str(work / policy)) if policy else svc]}

        gw = bench.gateway({"plain": topology(None), "allowed": topology("allowed.yaml"),
                            "columns": topology("columns.yaml")})
        sides = {name: Gateway(gw, topology=name) for name in ("plain", "allowed", "columns")}
        direct = bench.direct()
        binary = get_partitions_call(DB, TABLE)
        tjson = tjson_message("get_partitions", f'{{"1":{{"str":"{DB}"}},"2":{{"str":"{TABLE}"}},"3":{{"i16":-1}}}}')
        sizes = {name: len(client.call(tjson)) for name, client in sides.items()}
        n = 15 * opts.rounds
        d, plain, allowed, columns = interleaved([(direct.call, binary)] + [(c.call, tjson) for c in sides.values()], n)
        results = {"get_partitions(5000) allowed table, gateway/direct": allowed / d,
                   "get_partitions(5000) one column denied, gateway/direct": columns / d}
        print(f"get_partitions(5000), median of {n} (ms): direct {d:.1f}, gateway without policy {plain:.1f}, "
              f"allowed {allowed:.1f}, one column denied {columns:.1f}; TJSON bytes {sizes}", flush=True)
        print(f"  ratios to direct: no policy {plain / d:.2f}, allowed {allowed / d:.2f}, column denied "
              f"{columns / d:.2f}; allowed / no policy {allowed / plain:.2f}", flush=True)
        # CPU the gateway spends per call: what a loaded machine cannot blur (wall time can)
        seconds = 8.0 * opts.rounds
        cpu = {name: hold(client, tjson, gw.process.pid, seconds) for name, client in sides.items()}
        print(f"  gateway CPU per call (ms, /proc/<pid>/stat over {seconds:g} s of calls each): "
              + ", ".join(f"{name} {used / calls * 1000:.1f}" for name, (calls, used) in cpu.items()), flush=True)
        step_ms, object_ms, removed = column_filter_cpu(direct.call(binary), work / "columns.yaml", 10 * opts.rounds)
        print(f"  in process, ssn filtered from HMS's reply (CPU ms, median): catalog-policy step {step_ms:.1f}, "
              f"object path {object_ms:.1f} ({removed} bytes removed)", flush=True)
        direct.close()
        for client in sides.values():
            client.close()
    failed = [name for name, limit in TARGETS.items() if results.get(name, 0) > limit]
    for name, limit in TARGETS.items():
        print(f"{'MISS' if name in failed else 'PASS'}  {name:55s} {results[name]:6.2f}  (target <= {limit:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
