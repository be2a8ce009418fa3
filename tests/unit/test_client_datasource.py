"""hms_gateway_client.datasource: the crawl plan and rows against a fake ThriftHiveMetastore client, the
data source's option checks, and the events stream reader against the fake event-stream server
of test_client_connection (no Spark session)."""

from __future__ import annotations

import json

import pytest
from thriftpy2.thrift import TApplicationException

from hms_gateway_client import BasicAuth, ResyncRequired, hive_metastore_idl
from hms_gateway_client.datasource import HMSEventStreamReader, reader_options
from hms_gateway_client.datasource.crawl import SCHEMAS, Batch, partition_rows, plan, plan_partitions, rows
from tests.support.fake_feed import FeedHandler

T = hive_metastore_idl()


def table(db: str, name: str, *, keys=(), params=None, table_type="MANAGED_TABLE"):
    sd = T.StorageDescriptor(
        cols=[T.FieldSchema("id", "bigint", "the id"), T.FieldSchema("name", "string", None)],
        location=f"file:/wh/{db}/{name}", inputFormat="in", outputFormat="out",
        serdeInfo=T.SerDeInfo(serializationLib="serde"))
    return T.Table(tableName=name, dbName=db, owner="etl", createTime=100, lastAccessTime=0, sd=sd,
                   partitionKeys=[T.FieldSchema(k, "string", None) for k in keys],
                   parameters=params or {}, tableType=table_type)


class FakeMetastore:
    """The calls crawl.py makes, over an in-memory catalog; ``batched=False`` behaves like a
    service without ``get_table_objects_by_name``."""

    def __init__(self, tables, partitions=None, batched=True):
        self.tables = {(t.dbName, t.tableName): t for t in tables}
        self.partitions = partitions or {}
        self.batched = batched
        self.calls: list[str] = []

    def get_databases(self, pattern):
        self.calls.append("get_databases")
        return sorted({db for db, _ in self.tables} | {"empty"})

    def get_tables(self, db, pattern):
        self.calls.append("get_tables")
        return [t for d, t in self.tables if d == db][::-1]  # HMS's order is not guaranteed

    def get_database(self, name):
        return T.Database(name=name, description="d", locationUri=f"file:/wh/{name}", parameters={"k": "v"},
                          ownerName="admin", ownerType=T.PrincipalType.ROLE)

    def get_table_objects_by_name(self, db, names):
        self.calls.append("get_table_objects_by_name")
        if not self.batched:
            raise TApplicationException(TApplicationException.UNKNOWN_METHOD, "not exposed")
        return [self.tables[(db, n)] for n in names if (db, n) in self.tables]

    def get_table(self, db, name):
        self.calls.append("get_table")
        try:
            return self.tables[(db, name)]
        except KeyError:
            raise T.NoSuchObjectException(f"{db}.{name} table not found") from None

    def get_partition_names(self, db, name, max_parts):
        return [f"p={v}" for v in self.partitions.get((db, name), [])]

    def get_partitions(self, db, name, max_parts):
        return [T.Partition(values=[v], dbName=db, tableName=name, createTime=7,
                            sd=T.StorageDescriptor(location=f"file:/wh/{db}/{name}/p={v}"),
                            parameters={"numRows": "3"})
                for v in self.partitions.get((db, name), [])]


def catalog(batched=True):
    tables = [table("a", f"t{i}") for i in range(5)] + [
        table("b", "parts", keys=["p"], params={"numRows": "12", "totalSize": "400"}),
        table("b", "view", table_type="VIRTUAL_VIEW"),
    ]
    return FakeMetastore(tables, {("b", "parts"): ["x", "a/b"]}, batched)


def test_plan_cuts_each_databases_sorted_tables_into_batches():
    hms = catalog()
    assert plan(hms, "tables", batch_size=2) == [
        Batch("a", ("t0", "t1")), Batch("a", ("t2", "t3")), Batch("a", ("t4",)), Batch("b", ("parts", "view"))]
    assert hms.calls == ["get_databases", "get_tables", "get_tables", "get_tables"]


def test_plan_of_databases_is_one_batch_each_and_lists_no_tables():
    hms = catalog()
    assert plan(hms, "databases") == [Batch("a"), Batch("b"), Batch("empty")]
    assert hms.calls == ["get_databases"]


def test_partitions_are_balanced_contiguous_shares_cut_per_database():
    hms = catalog()  # a: t0..t4, b: parts, view
    assert plan_partitions(hms, "tables", partitions=3, batch_size=2) == [
        (Batch("a", ("t0", "t1")), Batch("a", ("t2",))),
        (Batch("a", ("t3", "t4")),),
        (Batch("b", ("parts", "view")),)]
    assert hms.calls == ["get_databases", "get_tables", "get_tables", "get_tables"]
    assert plan_partitions(catalog(), "tables", partitions=2) == [
        (Batch("a", ("t0", "t1", "t2", "t3")),), (Batch("a", ("t4",)), Batch("b", ("parts", "view")))]


def test_partitions_never_outnumber_the_tables_or_databases():
    assert [len(p) for p in plan_partitions(catalog(), "columns", partitions=50)] == [1] * 7
    assert plan_partitions(catalog(), "databases", partitions=2) == [(Batch("a"), Batch("b")), (Batch("empty"),)]
    assert plan_partitions(FakeMetastore([]), "tables", partitions=4) == []


class Connections:
    """``connect`` for :func:`partition_rows`: each call a new client over the one catalog."""

    def __init__(self, hms: FakeMetastore):
        self.hms, self.opened, self.closed = hms, 0, 0

    def __call__(self):
        self.opened += 1
        return self

    def __enter__(self):
        return self.hms

    def __exit__(self, *exc_info):
        self.closed += 1

    def close(self):
        self.closed += 1

    def __getattr__(self, name):  # a thread's client: the catalog's calls
        return getattr(self.hms, name)


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("view", ["tables", "columns", "partitions"])
def test_partition_rows_in_flight_equal_rows_in_order(view, batched):
    batches = (Batch("a", ("t0", "t1")), Batch("a", ("t2", "t3")), Batch("a", ("t4",)), Batch("b", ("parts", "view")))
    expected = [r for b in batches for r in rows(catalog(batched), view, b)]
    for threads in (1, 3):
        connect = Connections(catalog(batched))
        assert list(partition_rows(connect, view, batches, threads=threads)) == expected
        assert connect.opened == connect.closed >= 1
        calls = connect.hms.calls
        if not batched:  # the batch call is asked once per connection at most, then get_table per table
            assert calls.count("get_table_objects_by_name") <= connect.opened
            assert calls.count("get_table") == 7


def test_partition_rows_of_databases_and_of_nothing():
    connect = Connections(catalog())
    assert [r[0] for r in partition_rows(connect, "databases", (Batch("a"), Batch("b")), threads=2)] == ["a", "b"]
    empty = Connections(catalog())
    assert list(partition_rows(empty, "tables", (), threads=2)) == [] and empty.opened == 0


@pytest.mark.parametrize("view, size, reason", [("functions", 1, "unknown view 'functions'"),
                                                ("tables", 0, "batch_size must be at least 1")])
def test_plan_refuses(view, size, reason):
    with pytest.raises(ValueError, match=reason):
        plan(catalog(), view, batch_size=size)


def test_table_rows_follow_the_schema():
    got = {r[1]: r for r in rows(catalog(), "tables", Batch("b", ("parts", "view")))}
    assert len(got["parts"]) == len(SCHEMAS["tables"].split(", "))
    assert got["parts"] == ("b", "parts", "etl", "MANAGED_TABLE", 100, 0, "file:/wh/b/parts", "in", "out", "serde",
                            ["p"], 2, 2, 12, 400, True, {"numRows": "12", "totalSize": "400"})
    assert got["view"][12:16] == (None, None, None, False)  # not partitioned, no statistics


def test_missing_table_objects_call_falls_back_to_get_table_and_skips_dropped_tables():
    hms = catalog(batched=False)
    got = list(rows(hms, "tables", Batch("a", ("t1", "gone", "t0"))))
    assert [r[1] for r in got] == ["t0", "t1"]
    assert hms.calls == ["get_table_objects_by_name", "get_table", "get_table", "get_table"]


def test_column_rows_number_data_columns_then_partition_keys():
    got = list(rows(catalog(), "columns", Batch("b", ("parts",))))
    assert got == [("b", "parts", 0, "id", "bigint", "the id", False),
                   ("b", "parts", 1, "name", "string", None, False),
                   ("b", "parts", 2, "p", "string", None, True)]


def test_partition_rows_have_hive_escaped_names():
    got = list(rows(catalog(), "partitions", Batch("b", ("parts", "view"))))
    assert [(r[2], r[3], r[4], r[6]) for r in got] == [
        ("p=x", ["x"], "file:/wh/b/parts/p=x", 3), ("p=a%2Fb", ["a/b"], "file:/wh/b/parts/p=a/b", 3)]


def test_database_rows_name_the_owner_type():
    assert list(rows(catalog(), "databases", Batch("a"))) == [
        ("a", "d", "file:/wh/a", "admin", "ROLE", {"k": "v"})]


def test_reader_options_build_the_auth_on_the_driver(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    got = reader_options({"url": "https://gw:8443/gateway/default/hms", "auth": "basic", "user": "alice",
                          "password_file": str(secret), "batch_size": "10", "database": "sales*"})
    assert isinstance(got["auth"], BasicAuth) and got["auth"].password == "s3cret"
    assert (got["batch_size"], got["database"], got["table"], got["protocol"]) == (10, "sales*", "*", "binary")
    assert (got["partitions"], got["threads"]) == (4, 2)  # the defaults
    assert "s3cret" not in repr(got)


@pytest.mark.parametrize("options, reason", [
    ({}, "option 'url'"),
    ({"url": "https://gw/x", "protocol": "compact"}, "option 'protocol'"),
    ({"url": "https://gw/x", "batch_size": "many"}, "are numbers"),
    ({"url": "https://gw/x", "batch_size": "0"}, "at least 1"),
    ({"url": "https://gw/x", "partitions": "0"}, "at least 1"),
    ({"url": "https://gw/x", "threads": "two"}, "are numbers"),
    ({"url": "https://gw/x", "auth": "basic", "user": "alice"}, "exactly one of password"),
])
def test_reader_options_refuse(options, reason):
    with pytest.raises(ValueError, match=reason):
        reader_options(options)


def test_event_stream_reader_offsets_follow_the_feed(feed_server):
    url, ca = feed_server
    reader = HMSEventStreamReader(url=url, auth=None, ca=str(ca), timeout=10, starting_after=None,
                                  db="sales", table="*", types=["CREATE_TABLE", "DROP_TABLE"])
    assert reader.initialOffset() == {"after": 5}  # the newest id, after one 503 retried
    rows_iter, end = reader.read({"after": 5})
    got = list(rows_iter)
    assert end == {"after": 7}
    assert [r[:5] for r in got] == [(6, None, "CREATE_TABLE", None, None), (7, None, "DROP_TABLE", None, None)]
    assert json.loads(got[0][5]) == {"eventId": 6, "eventType": "CREATE_TABLE"}
    assert [r[0] for r in reader.readBetweenOffsets({"after": 5}, {"after": 6})] == [6]
    assert list(reader.read({"after": 7})[0]) == [] and reader.read({"after": 7})[1] == {"after": 9}
    with pytest.raises(ResyncRequired):
        reader.read({"after": 9})
    sent = FeedHandler.seen[-1]
    assert (sent["db"], sent["types"], sent["wait"]) == ("sales", "CREATE_TABLE,DROP_TABLE", "0.0")
    assert "table" not in sent  # "*" is no filter


def test_starting_after_is_the_initial_offset_without_a_call(feed_server):
    url, ca = feed_server
    reader = HMSEventStreamReader(url=url, auth=None, ca=str(ca), timeout=10, starting_after=42,
                                  db=None, table=None, types=[])
    assert reader.initialOffset() == {"after": 42}
    assert FeedHandler.seen == []
