"""Issue 48: the url rule on the Thrift API (gateway.hms_thrift.steps.placing) and the one
refusal both protocols share (CatalogView.url_refusal): a location a write sets needs Ranger's
url read and write; an alter's unchanged location is looked up, and only when refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from gateway.hms_thrift.steps.placing import placing_refusal
from gateway.policy import CatalogView, load_policy_file
from gateway.thrift.hive_methods import WRITES
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import NoSuchObjectException, idl_module

IDL = idl_module(load_schema())


@pytest.fixture
def engine(tmp_path: Path):
    path = tmp_path / "policy.yaml"
    path.write_text("""policies:
  - {id: 1, resources: {database: [sandbox], table: ["*"], column: ["*"]}, allow: [{users: [dave, erin], accesses: [all]}]}
  - {id: 2, resources: {url: {values: ["s3://lake/erin"], recursive: true}}, allow: [{users: [erin], accesses: [read, write]}]}
  - {id: 3, resources: {url: {values: ["s3://lake/readonly"], recursive: true}}, allow: [{users: [erin], accesses: [read]}]}
  - {id: 4, resources: {url: {values: ["*"], recursive: true}}, allow: [{users: [root], accesses: [read, write]}]}
""")
    return load_policy_file(path)


def test_url_refusal_is_one_rule_with_one_message(engine):
    dave, erin, root = (CatalogView(engine, u) for u in ("dave", "erin", "root"))
    assert dave.url_refusal("s3://lake/erin/t", "table sandbox.t") == (
        "dave may not place table sandbox.t at s3://lake/erin/t: it needs the url permission (read) on that location")
    assert erin.url_refusal("s3a://lake/erin/t", "table sandbox.t") is None
    assert erin.url_refusal("s3://lake/readonly/t", "table sandbox.t").endswith("url permission (write) on that location")
    for dots in ("s3://lake/erin/../secret", "s3://lake/erin/%2e%2E/secret", "s3://lake/erin/.", "/lake/erin/../x",
                 "s3://lake/erin%2F..%2Fsecret"):
        assert erin.url_refusal(dots, "x").endswith("must not have '.' or '..' segments"), dots
    assert root.url_refusal("s3://anywhere/at/all", "x") is None
    assert erin.url_refusal("s3://lake/erin/a..b/.hidden", "x") is None  # dots inside a name are names
    assert CatalogView(None, "anyone").url_refusal("s3://lake/x/../y", "x") is None  # no policy, no rule


def _table(location=None, metadata=None):
    return IDL.Table(dbName="sandbox", tableName="t", sd=IDL.StorageDescriptor(location=location),
                     parameters={} if metadata is None else {"metadata_location": metadata})


class FakeMetastore:
    """What HMS holds now, and the calls asked of it."""

    def __init__(self, table=None):
        self.table, self.calls = table, []

    async def call(self, method, /, *, identity, **args):
        self.calls.append((method, identity, args))
        if self.table is None:
            raise NoSuchObjectException(message="gone")
        if method == "get_partition":
            return IDL.Partition(values=args["part_vals"], sd=IDL.StorageDescriptor(location="s3://lake/t/day=1"))
        return self.table


def refusal(engine, user, method, args, metastore=None):
    view = CatalogView(engine, user)
    return asyncio.run(placing_refusal(metastore, method, WRITES[method], args, view, ("sandbox", "t"), "ident"))


def test_creates_need_the_permission_on_each_location_they_set(engine):
    create = SimpleNamespace(tbl=_table("s3://lake/erin/t", "s3://lake/other/m.json"))
    assert refusal(engine, "erin", "create_table", create).startswith(
        "erin may not place the Iceberg metadata of table sandbox.t at s3://lake/other/m.json")
    assert refusal(engine, "erin", "create_table", SimpleNamespace(tbl=_table("s3://lake/erin/t", "s3://lake/erin/t/m.json"))) is None
    assert refusal(engine, "dave", "create_table", SimpleNamespace(tbl=_table(""))) is None  # HMS's default
    assert refusal(engine, "root", "create_table", create) is None
    parts = SimpleNamespace(request=SimpleNamespace(parts=[
        IDL.Partition(values=["1"], sd=IDL.StorageDescriptor(location="s3://lake/erin/t/1")),
        IDL.Partition(values=["2"], sd=IDL.StorageDescriptor(location="s3://lake/other/2"))]))
    assert refusal(engine, "erin", "add_partitions_req", parts).startswith(
        "erin may not place a partition of table sandbox.t at s3://lake/other/2")


def test_an_alter_keeps_its_location_without_the_permission(engine):
    held = FakeMetastore(_table("s3a://lake/t/", "s3://lake/t/m1.json"))
    same = SimpleNamespace(new_tbl=_table("s3://lake/t", "s3://lake/t/m1.json"))
    assert refusal(engine, "dave", "alter_table", same, held) is None
    assert [c[0] for c in held.calls] == ["get_table"] and held.calls[0][1] == "ident"  # read once
    moved = SimpleNamespace(new_tbl=_table("s3://lake/t", "s3://lake/t/m2.json"))
    assert "metadata of table sandbox.t at s3://lake/t/m2.json" in refusal(engine, "dave", "alter_table", moved, held)
    assert "needs the url" in refusal(engine, "dave", "alter_table", same, FakeMetastore())  # gone: judged as new
    assert "needs the url" in refusal(engine, "dave", "alter_table", same, None)

    root_calls = FakeMetastore(_table("s3://lake/t"))
    assert refusal(engine, "root", "alter_table", moved, root_calls) is None and root_calls.calls == []  # no lookup
    part = SimpleNamespace(new_parts=[IDL.Partition(values=["1"], sd=IDL.StorageDescriptor(location="s3://lake/t/day=1")),
                                      IDL.Partition(values=["2"], sd=IDL.StorageDescriptor(location="s3://lake/x"))])
    assert "partition of table sandbox.t at s3://lake/x" in refusal(engine, "dave", "alter_partitions", part, held)
    # a create is never compared with what is there
    assert "needs the url" in refusal(engine, "dave", "create_table", SimpleNamespace(tbl=same.new_tbl), held)
