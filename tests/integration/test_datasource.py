"""The PySpark data source ``hms`` (issue 13 item 5) in a real local Spark session (local[2]),
reading through the real gateway from the real HMS; every value is checked against direct
thriftpy2 calls to the same HMS. Also runs examples/catalog_report.py, and follows the change
feed (an ``event-stream`` service over an HMS of its own) with hms_gateway_client.events and as a
Spark stream."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hms_gateway_client import BasicAuth, events, hive_metastore_idl
from gateway.hms_thrift.kind import SPEC_METHODS
from hms_gateway_client.partition_names import partition_name
from tests.support.thriftpy_client import direct_thriftpy_client
from tests.support.gateway import RunningGateway, service
from tests.support.spec_calls import DB, TABLE

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-password"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    topologies = {
        # the spec's nine methods (a service's default) plus the batch call
        "batched": {"services": [service([hms_url], methods=[*SPEC_METHODS, "get_table_objects_by_name"])]},
        "spec": {"services": [service([hms_url])]},
    }
    return module_gateway_factory(topologies, USERS)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    from hms_gateway_client.datasource import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    scratch = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.appName("test-datasource").master("local[2]")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Python workers start slowly on a loaded machine; Spark's default wait is 15 s
        .config("spark.python.authenticate.socketTimeout", "300s")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={scratch}")
        .getOrCreate()
    )
    register(session)
    try:
        yield session
    finally:
        _stop_spark(session)


def _stop_spark(session) -> None:
    """Stop the session and its JVM: ``stop()`` alone leaves PySpark's JVM running until this
    interpreter exits (the JVM ends when the pipe to its stdin breaks)."""
    from pyspark import SparkContext

    session.stop()
    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    if gateway is None:
        return
    gateway.shutdown()
    process = gateway.proc
    process.stdin.close()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def options(gw: RunningGateway, topology: str = "batched", **extra) -> dict:
    # A file, not an environment variable: Spark's planner runs in Python workers that got the
    # JVM's environment when the session started.
    password_file = gw.workdir / "admin.password"
    password_file.write_text(USERS["admin"])
    return {"url": gw.url(topology), "ca": str(gw.ca_file), "auth": "basic", "user": "admin",
            "password_file": str(password_file), **extra}


def read(spark, gw, view: str, topology: str = "batched", **extra):
    return spark.read.format("hms").options(**options(gw, topology, **extra)).load(view)


def direct_tables(direct_thriftpy) -> dict[tuple[str, str], object]:
    return {(db, t): direct_thriftpy.get_table(db, t)
            for db in direct_thriftpy.get_databases("*") for t in direct_thriftpy.get_tables(db, "*")}


def test_databases_equal_direct(spark, gateway, direct_thriftpy):
    rows = {r.database: r for r in read(spark, gateway, "databases").collect()}
    assert set(rows) == set(direct_thriftpy.get_databases("*")) >= {"default", DB, "sales"}
    for name, row in rows.items():
        d = direct_thriftpy.get_database(name)
        assert (row.description, row.location, row.owner, row.parameters) == (
            d.description, d.locationUri, d.ownerName, d.parameters or {})
        assert row.owner_type == hive_metastore_idl().PrincipalType._VALUES_TO_NAMES[d.ownerType]


@pytest.mark.parametrize("topology, threads", [("batched", "3"), ("spec", "3"), ("spec", "1")])
def test_tables_equal_direct_in_the_input_partitions_asked_for(spark, gateway, direct_thriftpy, topology, threads):
    df = read(spark, gateway, "tables", topology, batch_size="2", partitions="3", threads=threads)
    expected = direct_tables(direct_thriftpy)
    assert len(expected) > 3 and df.rdd.getNumPartitions() == 3
    rows = {(r.database, r.table): r for r in df.collect()}
    assert set(rows) == set(expected)
    for key, t in expected.items():
        row = rows[key]
        assert (row.owner, row.table_type, row.create_time, row.last_access_time) == (
            t.owner, t.tableType, t.createTime, t.lastAccessTime)
        assert (row.location, row.input_format, row.output_format, row.serde) == (
            t.sd.location, t.sd.inputFormat, t.sd.outputFormat, t.sd.serdeInfo.serializationLib)
        assert row.partition_keys == [k.name for k in t.partitionKeys]
        assert row.num_columns == len(t.sd.cols)
        assert row.parameters == (t.parameters or {})
        expected_parts = len(direct_thriftpy.get_partition_names(*key, -1)) if t.partitionKeys else None
        assert row.num_partitions == expected_parts
        assert row.has_statistics == ("numRows" in (t.parameters or {})
                                      or "spark.sql.statistics.numRows" in (t.parameters or {}))
    assert rows[(DB, TABLE)].num_partitions == 2
    assert rows[(DB, "events")].num_partitions == 200


def test_partitions_equal_direct(spark, gateway, direct_thriftpy):
    df = read(spark, gateway, "partitions", database=DB, table="test_table|events")
    rows = sorted(df.collect(), key=lambda r: (r.table, r.name))
    expected = []
    for table in ("events", TABLE):
        keys = [k.name for k in direct_thriftpy.get_table(DB, table).partitionKeys]
        for p in direct_thriftpy.get_partitions(DB, table, -1):
            expected.append((DB, table, partition_name(keys, p.values), p.values, p.sd.location, p.createTime,
                             p.parameters or {}))
    expected.sort(key=lambda e: (e[1], e[2]))
    assert len(rows) == 202
    assert [(r.database, r.table, r.name, r.values, r.location, r.create_time, r.parameters) for r in rows] == expected
    assert {r.name for r in rows if r.table == TABLE} == {"hair_color=black", "hair_color=brown"}


def test_columns_equal_direct(spark, gateway, direct_thriftpy):
    rows = read(spark, gateway, "columns", database=DB, table=TABLE).orderBy("position").collect()
    t = direct_thriftpy.get_table(DB, TABLE)
    expected = [(c.name, c.type, c.comment, False) for c in t.sd.cols]
    expected += [(c.name, c.type, c.comment, True) for c in t.partitionKeys]
    assert [(r.column, r.type, r.comment, r.is_partition_key) for r in rows] == expected
    assert [r.column for r in rows] == ["name", "age", "hair_color"]
    assert [r.position for r in rows] == [0, 1, 2]


def test_wrong_password_fails_the_read_without_the_password(spark, gateway, tmp_path):
    wrong = tmp_path / "wrong.password"
    wrong.write_text("wrong-secret-93")
    with pytest.raises(Exception) as info:
        read(spark, gateway, "tables", password_file=str(wrong)).collect()
    text = str(info.value)
    assert "HTTP 401" in text
    assert "wrong-secret-93" not in text


def test_missing_url_and_unknown_view_are_named(spark, gateway):
    with pytest.raises(Exception) as info:
        spark.read.format("hms").load("tables").collect()
    assert "option 'url'" in str(info.value)
    with pytest.raises(Exception) as info:
        read(spark, gateway, "functions").collect()
    assert "unknown view 'functions'" in str(info.value)


def test_catalog_report_example(spark, gateway, direct_thriftpy, tmp_path):
    spec = importlib.util.spec_from_file_location("catalog_report", REPO / "examples" / "catalog_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    written = report.write_report(spark, options(gateway), tmp_path / "report")
    assert sorted(written) == ["owners", "partition_counts", "tables_per_database", "tables_without_statistics"]
    expected = direct_tables(direct_thriftpy)

    per_db = {r.database: r.tables for r in spark.read.parquet(written["tables_per_database"]).collect()}
    counts: dict[str, int] = {}
    for db, _ in expected:
        counts[db] = counts.get(db, 0) + 1
    assert per_db == counts

    parts = {(r.database, r.table): r.partitions for r in spark.read.parquet(written["partition_counts"]).collect()}
    assert parts == {k: len(direct_thriftpy.get_partition_names(*k, -1)) for k, t in expected.items() if t.partitionKeys}

    no_stats = {(r.database, r.table) for r in spark.read.parquet(written["tables_without_statistics"]).collect()}
    assert no_stats == {k for k, t in expected.items() if t.tableType != "VIRTUAL_VIEW"
                        and not {"numRows", "spark.sql.statistics.numRows"} & set(t.parameters or {})}

    owners = {r.owner: r.tables for r in spark.read.parquet(written["owners"]).collect()}
    owned: dict[str, int] = {}
    for t in expected.values():
        owned[t.owner] = owned.get(t.owner, 0) + 1
    assert owners == owned


# The change feed: an HMS of its own (its notification log; test_event_stream's fixture), an
# event-stream service.
EVENTS_PATH = "catalog/events"


@pytest.fixture(scope="module")
def feed_gateway(feed_hms, module_gateway_factory) -> RunningGateway:
    svc = {"path": EVENTS_PATH, "kind": "event-stream", "upstream": {"urls": [feed_hms.uri]},
           "options": {"poll_interval_seconds": 0.2}}
    return module_gateway_factory(services=[svc], users=USERS)


@pytest.fixture(scope="module")
def feed_direct(feed_hms):
    client = direct_thriftpy_client(feed_hms)
    yield client
    client.close()


def create_database(direct_thriftpy, name: str) -> None:
    direct_thriftpy.create_database(hive_metastore_idl().Database(name=name, description="feed", parameters={}))


def notifications_after(direct_thriftpy, after: int) -> list:
    request = hive_metastore_idl().NotificationEventRequest(lastEvent=after, maxEvents=1000)
    return direct_thriftpy.get_next_notification(request).events or []


def test_events_iterator_follows_the_notification_log(feed_gateway, feed_direct):
    start = feed_direct.get_current_notificationEventId().eventId
    stream = events(feed_gateway.url(path=EVENTS_PATH), auth=BasicAuth("admin", USERS["admin"]),
                    ca=feed_gateway.ca_file, after=start, wait=5)
    create_database(feed_direct, "feed_iter_a")
    create_database(feed_direct, "feed_iter_b")
    got = [next(stream), next(stream)]
    stream.close()
    expected = notifications_after(feed_direct, start)[:2]
    assert [(e["eventId"], e["eventType"], e["db"]) for e in got] == [
        (n.eventId, n.eventType, n.dbName) for n in expected]
    assert [e["db"] for e in got] == ["feed_iter_a", "feed_iter_b"]


def test_events_stream_in_spark_has_event_ids_as_offsets(spark, feed_gateway, feed_direct, tmp_path):
    o = {**options(feed_gateway), "url": feed_gateway.url(path=EVENTS_PATH)}
    query = (spark.readStream.format("hms").options(**o).load("events").writeStream.format("memory")
             .queryName("hms_events").option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()  # the initial offset: the newest event id, before the DDL below
        start = feed_direct.get_current_notificationEventId().eventId
        create_database(feed_direct, "feed_stream_a")
        create_database(feed_direct, "feed_stream_b")
        deadline = time.monotonic() + 120
        rows = []
        while time.monotonic() < deadline and len(rows) < 2:
            query.processAllAvailable()
            rows = spark.sql("SELECT * FROM hms_events ORDER BY event_id").collect()
            time.sleep(0.5)
        expected = notifications_after(feed_direct, start)
        assert [(r.event_id, r.event_type, r.database) for r in rows] == [
            (n.eventId, n.eventType, n.dbName) for n in expected]
        assert [r.database for r in rows] == ["feed_stream_a", "feed_stream_b"]
        assert json.loads(rows[0].body)["eventId"] == rows[0].event_id
        offset = query.lastProgress["sources"][0]["endOffset"]
        assert (json.loads(offset) if isinstance(offset, str) else offset) == {"after": rows[-1].event_id}
    finally:
        query.stop()
