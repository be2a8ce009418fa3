"""The upstream to a Kerberized HMS (issue 38), side by side with the same calls to an unsecured one.

``python bench/secure_upstream.py [--rounds N] [--partitions P] [--appends A]``. Starts two
embedded HMS 2.3.10 in this run, one plain and one Kerberized (KDC, SASL,
tests/support/secure_hms.py), both with HMS locks (DbTxnManager, as demo/hms.py sets it),
each with a table of ``P`` partitions (5,000). The Thrift calls drive the gateway's upstream pools
(gateway/upstream/pool.py) in-process, interleaved call by call, so their ratios are the cost SASL
adds to the upstream leg (the HTTP side is the same for both):

* ``get_table`` and ``get_partitions(P)``: SASL / plain, at ``authentication`` (goal <= 1.1) and
  at ``privacy`` (reported), as the gateway's principal (GSSAPI) and, at ``authentication``, as
  an end user (DIGEST-MD5 with a delegation token);
* a new user's first call (token fetch over the gateway's GSSAPI connection, DIGEST-MD5
  handshake, the call) in ms, and whether the second call of that user costs no handshake
  (the token cache and the user's pooled connection: no new token, no new connection);
* an Iceberg append end to end: PyIceberg's ``RestCatalog`` (HTTPS, Basic) through real gateways'
  ``iceberg-rest`` services, one in front of each HMS (the Kerberized one's ``upstream.sasl`` at
  ``authentication`` with the default ``impersonation: delegation-token``, so the commit's lock,
  get_table, alter_table and unlock run as the end user over DIGEST-MD5, and, on a second service,
  ``privacy`` with ``impersonation: none``: GSSAPI as the gateway), ``A`` one-row appends per side (40), each side on its own
  table, interleaved (``bench.clients.interleaved``). Timed: the catalog's ``commit_table`` (one
  HTTPS request; the gateway commits under an HMS lock), goal SASL / plain <= 1.1 at
  ``authentication``, and the whole ``Table.append`` (the client's data and manifest files too).

Prints the machine, the load average, medians and ratios; exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.clients import PASSWORD, USER, interleaved  # noqa: E402
from bench.harness import load, machine  # noqa: E402
from bench.iceberg import CommitTimer, _schema  # noqa: E402
from bench.writers import rows  # noqa: E402
from gateway.upstream.settings import SaslConfig  # noqa: E402
from gateway.providers.identity import Identity  # noqa: E402
from gateway.thrift.binary import encode_binary_call  # noqa: E402
from gateway.thrift.schema import TType  # noqa: E402
from gateway.upstream.failover import Upstream  # noqa: E402
from gateway.upstream.metastore import MetastoreClient  # noqa: E402
from gateway.upstream.pool import UpstreamPool  # noqa: E402
from gateway.upstream.secure import SaslConnector  # noqa: E402
from tests.support.big_table import get_partitions_call  # noqa: E402
from tests.support.gateway import GatewayFactory  # noqa: E402
from tests.support.hms import start_hms  # noqa: E402
from tests.support.secure_hms import running_secure_hms  # noqa: E402

DB, TABLE = "benchdb", "parts"
GOALS = {"get_table, authentication/plain": 1.1, "get_partitions, authentication/plain": 1.1,
         "iceberg append commit, authentication/plain": 1.1}
NAMESPACE, TABLE_ICE = "benchice", "appends"
MAX_REPLY = 1 << 30


async def seed(pool: UpstreamPool, partitions: int) -> None:
    """``DB.TABLE`` with ``partitions`` partitions, through the gateway's own client."""
    client = MetastoreClient(Upstream([pool]))
    idl = client.idl
    await client.call("create_database", database=idl.Database(name=DB, description="bench", parameters={}))
    sd = idl.StorageDescriptor(
        cols=[idl.FieldSchema("x", "int", "a column")], location=None,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=idl.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        parameters={}, compressed=False, numBuckets=-1, bucketCols=[], sortCols=[])
    await client.call("create_table", tbl=idl.Table(
        tableName=TABLE, dbName=DB, owner="bench", sd=sd, tableType="MANAGED_TABLE", parameters={},
        partitionKeys=[idl.FieldSchema("p", "string", "")]))
    table = await client.call("get_table", dbname=DB, tbl_name=TABLE)
    for start in range(0, partitions, 500):
        parts = []
        for i in range(start, min(start + 500, partitions)):
            psd = idl.StorageDescriptor(**{**sd.__dict__, "location": f"{table.sd.location}/p={i:05d}"})
            parts.append(idl.Partition(values=[f"{i:05d}"], dbName=DB, tableName=TABLE, sd=psd, parameters={}))
        await client.call("add_partitions", new_parts=parts)


def sasl_pool(secure, protection: str, impersonation: str) -> UpstreamPool:
    config = SaslConfig.model_validate(secure.gateway_sasl(protection, impersonation=impersonation))
    return UpstreamPool(secure.url, connector=SaslConnector(config, "localhost", MAX_REPLY), timeout=120)


async def median_ms(pool: UpstreamPool, request: bytes, rounds: int, identity=None) -> float:
    await pool.call(request, identity=identity)  # the connection (and token) first
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await pool.call(request, identity=identity)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(plain_url: str, secure, rounds: int, partitions: int) -> int:
    plain = UpstreamPool(plain_url, timeout=120)
    auth = sasl_pool(secure, "authentication", "none")
    privacy = sasl_pool(secure, "privacy", "none")
    users = sasl_pool(secure, "authentication", "delegation-token")
    alice = Identity(user="alice", principal=None)
    await seed(plain, partitions)
    await seed(auth, partitions)
    calls = {
        "get_table": encode_binary_call("get_table", 1, [(1, TType.STRING, DB), (2, TType.STRING, TABLE)]),
        "get_partitions": get_partitions_call(DB, TABLE),
    }
    failed = 0
    try:
        for name, request in calls.items():
            n = rounds if name == "get_table" else max(5, rounds // 10)
            base, a, p, u = [], [], [], []
            for _ in range(3):  # interleaved blocks, so drift hits every path alike
                base.append(await median_ms(plain, request, n))
                a.append(await median_ms(auth, request, n))
                p.append(await median_ms(privacy, request, n))
                u.append(await median_ms(users, request, n, alice))
            plain_ms = statistics.median(base)
            print(f"{name}: plain {plain_ms:.2f} ms")
            for label, values in (("authentication", a), ("privacy", p), ("authentication as a user (DIGEST-MD5)", u)):
                ms = statistics.median(values)
                key = f"{name}, {label}/plain"
                goal = GOALS.get(key)
                verdict = "" if goal is None else (" (goal <= %.1f: %s)" % (goal, "met" if ms / plain_ms <= goal else "MISSED"))
                failed += goal is not None and ms / plain_ms > goal
                print(f"  {label}: {ms:.2f} ms, ratio {ms / plain_ms:.2f}{verdict}")

        firsts = []
        for i in range(10):
            user = Identity(user=f"newuser{i}", principal=None)
            started = time.perf_counter()
            await users.call(calls["get_table"], identity=user)
            firsts.append((time.perf_counter() - started) * 1000)
        fetched = users.connector.tokens.fetched
        idle = len(users._idle)
        started = time.perf_counter()
        await users.call(calls["get_table"], identity=Identity(user="newuser9", principal=None))
        second = (time.perf_counter() - started) * 1000
        no_handshake = users.connector.tokens.fetched == fetched and len(users._idle) == idle
        print(f"a new user's first get_table (token + DIGEST-MD5 + call): median {statistics.median(firsts):.1f} ms; "
              f"the second: {second:.2f} ms, {'no' if no_handshake else 'A'} new token or handshake")
        failed += not no_handshake
    finally:
        for pool in (plain, auth, privacy, users):
            await pool.close()
    return failed


def iceberg_appends(plain_url: str, secure, appends: int, work: Path) -> int:
    """The Iceberg append case (module docstring): gateways in front of both HMSs, PyIceberg
    appends through them, interleaved. Returns the number of goals missed."""
    from pyiceberg.catalog.rest import RestCatalog

    def mktemp(name: str) -> Path:
        path = work / name
        path.mkdir()
        return path

    gateways = GatewayFactory(mktemp)
    try:
        def iceberg(path: str, upstream: dict) -> dict:
            return {"kind": "iceberg-rest", "path": path, "upstream": upstream}

        plain_gw = gateways({"default": {"services": [iceberg("iceberg", {"urls": [plain_url]})]}},
                            {USER: PASSWORD}, name="gateway-plain")
        secure_gw = gateways({"default": {"services": [
            iceberg("iceberg", {"urls": [secure.url], "sasl": secure.gateway_sasl("authentication")}),
            iceberg("iceberg-privacy", {"urls": [secure.url], "sasl": secure.gateway_sasl("privacy", impersonation="none")}),
        ]}}, {USER: PASSWORD}, name="gateway-kerberized", env=secure.env)
        tables = {}
        for side, gw, path in (("plain", plain_gw, "iceberg"), ("authentication", secure_gw, "iceberg"),
                               ("privacy", secure_gw, "iceberg-privacy")):
            catalog = RestCatalog(side, uri=gw.url(path=path), ssl={"cabundle": str(gw.ca_file)},
                                  auth={"type": "basic", "basic": {"username": USER, "password": PASSWORD}})
            if side != "privacy":  # the privacy service shares the Kerberized HMS's namespace
                catalog.create_namespace(NAMESPACE)
            tables[side] = catalog.create_table(f"{NAMESPACE}.{TABLE_ICE}_{side}", schema=_schema())
        timers = {side: CommitTimer(table.catalog) for side, table in tables.items()}
        counter = iter(range(10**9))
        whole = dict(zip(tables, interleaved([(lambda t: t.append(rows(next(counter))), t)
                                              for t in tables.values()], appends)))
        commit = {side: statistics.median(timer.samples[3:]) * 1000 for side, timer in timers.items()}  # 3 warm-ups
        for side, table in tables.items():  # every commit landed once
            assert len(table.catalog.load_table(table.name()).snapshots()) == appends + 3, side
    finally:
        gateways.close()
    failed = 0
    print(f"iceberg append (1 row, {appends} per side): plain commit {commit['plain']:.2f} ms, "
          f"whole {whole['plain']:.2f} ms")
    how = {"authentication": "delegation token, DIGEST-MD5", "privacy": "impersonation none, GSSAPI"}
    for side in ("authentication", "privacy"):
        key = f"iceberg append commit, {side}/plain"
        ratio = commit[side] / commit["plain"]
        goal = GOALS.get(key)
        verdict = "" if goal is None else (" (goal <= %.1f: %s)" % (goal, "met" if ratio <= goal else "MISSED"))
        failed += goal is not None and ratio > goal
        print(f"  {side} ({how[side]}): commit {commit[side]:.2f} ms, ratio {ratio:.2f}{verdict}; "
              f"whole {whole[side]:.2f} ms, ratio {whole[side] / whole['plain']:.2f}")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--appends", type=int, default=40, help="Iceberg appends per side (default %(default)s)")
    args = parser.parse_args()
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    # requests prefers these to the catalog's ssl.cabundle (docs/iceberg.md)
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    print(" ".join(f"{k}={v}" for k, v in machine().items()), f"load={load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-secure-") as tmp:
        plain = start_hms(Path(tmp) / "plain")
        try:
            with running_secure_hms(Path(tmp) / "secure") as secure:
                os.environ["KRB5_CONFIG"] = secure.env["KRB5_CONFIG"]
                failed = asyncio.run(measure(plain.uri, secure, args.rounds, args.partitions))
                print(f"load {load()}", flush=True)
                failed += iceberg_appends(f"thrift://127.0.0.1:{plain.port}", secure, args.appends, Path(tmp))
                print(f"load {load()}", flush=True)
        finally:
            plain.server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
