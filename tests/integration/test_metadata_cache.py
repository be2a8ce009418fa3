"""The metadata cache against a real HMS (issue 24): Cache-Status and the audit line, a
randomized differential test with writers directly on HMS and through the gateway and readers
on two workers, and the cache below the catalog policy."""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass

import pytest

from hms_gateway_client import connect, hive_metastore_idl
from hms_gateway_client.auth import BasicAuth
from tests.support.gateway import audit_record, htpasswd_provider, metric, post, service
from tests.support.policy import CATALOG_POLICY, POLICY_FILE, POLICY_PATH
from tests.support.thriftpy_client import direct_thriftpy_client

POLL = 0.5
DB = "cachedb"
TABLES = ("t0", "t1")
PARTS = "parts"
METHODS = ["get_all_databases", "get_databases", "get_database", "get_all_tables", "get_tables", "get_table",
          "get_partition_names", "get_partitions", "get_partitions_by_names", "get_table_objects_by_name",
          "alter_table", "add_partition", "create_table"]


def cached_service(hms, **cache) -> dict:
    svc = service([hms.uri], METHODS)
    svc["options"]["cache"] = {"enabled": True, "poll_interval_seconds": POLL, **cache}
    return svc


def _table(t, name: str, params: dict):
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("a", "string", "")], location=None,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=t.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}), parameters={})
    return t.Table(tableName=name, dbName=DB, owner="alice", sd=sd, parameters=params,
                   partitionKeys=[t.FieldSchema("k", "string", "")], tableType="EXTERNAL_TABLE")


@pytest.fixture(scope="module")
def cache_hms(feed_hms):
    """``feed_hms`` with database ``cachedb``: tables t0, t1 (parameter v = 0) and ``parts``."""
    t = hive_metastore_idl()
    client = direct_thriftpy_client(feed_hms)
    client.create_database(t.Database(name=DB, description="", parameters={},
                                      locationUri=(feed_hms.warehouse_dir / f"{DB}.db").as_uri()))
    for name in (*TABLES, PARTS):
        client.create_table(_table(t, name, {"v": "0"}))
    client.close()
    return feed_hms


def _tjson(method: str, args: str = "{}") -> str:
    return f'[1,"{method}",1,0,{args}]'


def test_cache_status_hit_miss_audit_and_metrics(cache_hms, gateway_factory):
    gw = gateway_factory(services=[cached_service(cache_hms)])
    body = _tjson("get_table", f'{{"1":{{"str":"{DB}"}},"2":{{"str":"t0"}}}}')
    deadline = time.monotonic() + 15
    while True:  # the cache forwards everything until its follower has read the log once
        status, headers, first = post(gw, body)
        assert status == 200
        if headers["Cache-Status"] != "hms-gateway; fwd=bypass":
            break
        assert time.monotonic() < deadline, "the cache never started following the log"
        time.sleep(0.2)
    assert headers["Cache-Status"] in ("hms-gateway; fwd=miss; stored", "hms-gateway; hit")
    status, headers, again = post(gw, body)
    assert (status, headers["Cache-Status"]) == (200, "hms-gateway; hit")
    assert json.loads(again) == json.loads(first)
    assert audit_record(gw, headers["X-Request-Id"])["cache"] == "hit"
    # A missing table: HMS's exception goes back and is not kept.
    missing = _tjson("get_table", f'{{"1":{{"str":"{DB}"}},"2":{{"str":"nope"}}}}')
    for _ in range(2):
        status, headers, _ = post(gw, missing)
        assert (status, headers["Cache-Status"]) == (200, "hms-gateway; fwd=miss")
    # A method the cache never keeps.
    status, headers, _ = post(gw, _tjson("alter_table", "{}"))
    assert headers["Cache-Status"] == "hms-gateway; fwd=method"
    assert metric(gw, "hms_gateway_cache_lookups_total", result="hit") >= 1
    assert metric(gw, "hms_gateway_cache_entries") >= 1
    assert metric(gw, "hms_gateway_cache_bytes") > 0


@dataclass
class Version:
    value: int
    before: float  # monotonic, just before the write was sent
    after: float   # just after its reply came back
    via_gateway: bool


@dataclass
class Read:
    obj: str
    value: int
    start: float
    end: float


def _valid(history: list[Version], read: Read, slack: float) -> bool:
    """``read`` saw a value that was current at some moment of [start - slack, end]."""
    for i, version in enumerate(history):
        if version.value != read.value:
            continue
        following = history[i + 1] if i + 1 < len(history) else None
        if version.before <= read.end and (following is None or following.after >= read.start - slack):
            return True
    return False


def test_differential_against_hms_with_two_workers(cache_hms, gateway_factory):
    gw = gateway_factory(services=[cached_service(cache_hms)], workers=2)
    t = hive_metastore_idl()
    auth = BasicAuth("admin", "admin-password")
    histories: dict[str, list[Version]] = {
        **{name: [Version(0, float("-inf"), float("-inf"), False)] for name in TABLES},
        PARTS: [Version(0, float("-inf"), float("-inf"), False)],
        "tables": [Version(len(TABLES) + 1, float("-inf"), float("-inf"), False)],
    }
    reads: list[Read] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    rng = random.Random(24)

    def gateway_client():
        return connect(gw.url(), auth, gw.ca_file)

    def writer() -> None:
        direct = direct_thriftpy_client(cache_hms)
        through = gateway_client()
        try:
            counters = {name: 0 for name in histories}
            while not stop.is_set():
                obj = rng.choice([*TABLES, *TABLES, PARTS, "tables"])
                via = rng.random() < 0.5
                client = through if via else direct
                counters[obj] += 1
                before = time.monotonic()
                if obj in TABLES:
                    table = direct.get_table(DB, obj)
                    table.parameters["v"] = str(counters[obj])
                    client.alter_table(DB, obj, table)
                    value = counters[obj]
                elif obj == PARTS:
                    sd = direct.get_table(DB, PARTS).sd
                    sd.location = None
                    client.add_partition(t.Partition(values=[str(counters[obj])], dbName=DB, tableName=PARTS,
                                                     sd=sd, parameters={}))
                    value = counters[obj]
                else:
                    client.create_table(_table(t, f"x{counters[obj]}", {}))
                    value = len(TABLES) + 1 + counters[obj]
                histories[obj].append(Version(value, before, time.monotonic(), via))
                time.sleep(rng.uniform(0.05, 0.3))
        except BaseException as exc:
            errors.append(exc)
        finally:
            direct.close()
            through.close()

    def reader(seed: int) -> None:
        local = random.Random(seed)
        client = gateway_client()
        try:
            calls = 0
            while not stop.is_set():
                calls += 1
                if calls % 10 == 0:  # a new connection: maybe the other worker
                    client.close()
                    client = gateway_client()
                obj = local.choice([*TABLES, PARTS, "tables"])
                start = time.monotonic()
                if obj in TABLES:
                    value = int(client.get_table(DB, obj).parameters["v"])
                elif obj == PARTS:
                    value = len(client.get_partition_names(DB, PARTS, -1))
                else:
                    value = len(client.get_all_tables(DB))
                reads.append(Read(obj, value, start, time.monotonic()))
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    def direct_reader() -> None:  # load on HMS beside the gateway's
        client = direct_thriftpy_client(cache_hms)
        try:
            while not stop.is_set():
                client.get_table(DB, rng.choice(TABLES))
                client.get_partition_names(DB, PARTS, -1)
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    # Let both workers' followers read the log before measuring.
    for _ in range(20):
        with gateway_client() as client:
            client.get_all_databases()
    time.sleep(2 * POLL)
    threads = [threading.Thread(target=writer), threading.Thread(target=direct_reader),
               *(threading.Thread(target=reader, args=(seed,)) for seed in range(3))]
    for thread in threads:
        thread.start()
    time.sleep(20)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert len(reads) > 200
    stale = [r for r in reads if not _valid(histories[r.obj], r, POLL)]
    assert not stale, f"{len(stale)} reads older than the bound, first: {stale[:3]}"
    # Read your writes: after a write through the gateway, no later read sees an older value.
    for obj, history in histories.items():
        for version in history:
            if version.via_gateway:
                older = [r for r in reads if r.obj == obj and r.start > version.after and r.value < version.value]
                assert not older, f"{obj}: read {older[0]} after the gateway's write {version}"
    hits = metric(gw, "hms_gateway_cache_lookups_total", result="hit")
    assert hits > 50, "the cache served too few reads for the test to mean anything"
    assert metric(gw, "hms_gateway_cache_invalidations_total", source="write") > 0
    assert metric(gw, "hms_gateway_cache_invalidations_total", source="event") > 0


def test_cached_replies_are_filtered_per_user_like_fresh_ones(hms, gateway_factory):
    from tests.support.policy import ANALYSTS

    svc = dict(cached_service(hms), policy_file=POLICY_PATH)
    topology = {"providers": {"authentication": [htpasswd_provider()], "identity_assertion": ANALYSTS},
                "services": [svc]}
    gw = gateway_factory({"default": topology}, {"alice": "pw-123456", "bob": "pw-123456"},
                         files={POLICY_FILE: CATALOG_POLICY})

    def call(user: str, method: str, args: str = "{}") -> tuple[str, list]:
        status, headers, body = post(gw, _tjson(method, args), auth=(user, "pw-123456"))
        assert status == 200, body
        return headers["Cache-Status"], json.loads(body)

    deadline = time.monotonic() + 15
    while call("bob", "get_all_databases")[0] == "hms-gateway; fwd=bypass":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    spec_table = '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"test_table"}}'
    for _ in range(2):  # the second round is answered from the cache, filtered the same way
        assert call("alice", "get_all_databases")[1][4]["0"]["lst"][2:] == ["sales"]
        assert call("bob", "get_all_databases")[1][4]["0"]["lst"][2:] == ["hmshttptestdatabase"]
        bob_status, reply = call("bob", "get_table", spec_table)
        columns = [c["1"]["str"] for c in reply[4]["0"]["rec"]["7"]["rec"]["1"]["lst"][2:]]
        assert "age" not in columns and columns
        _, reply = call("alice", "get_table", spec_table)  # hidden: HMS's not-found answer
        assert reply[4] == {"2": {"rec": {"1": {"str": "hmshttptestdatabase.test_table table not found"}}}}
    assert bob_status == "hms-gateway; hit"
