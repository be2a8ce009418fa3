"""The gateway's own metastore client (``gateway.upstream.metastore``) against the real HMS 2.3:
typed reads, declared exceptions, DDL as a user (``set_ugi``), the environment-context alter and
the lock calls Iceberg's HiveCatalog commit uses."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import AsyncIterator

import pytest

from gateway.providers.identity import Identity
from gateway.upstream.failover import Upstream
from gateway.upstream.metastore import (
    AlreadyExistsException,
    MetastoreClient,
    NoSuchLockException,
    NoSuchObjectException,
    TApplicationException,
)
from gateway.upstream.pool import UpstreamPool

pytestmark = pytest.mark.integration

_names = itertools.count()


@pytest.fixture
async def client(hms) -> AsyncIterator[MetastoreClient]:
    upstream = Upstream([UpstreamPool(hms.uri, timeout=60)])
    yield MetastoreClient(upstream)
    await upstream.close()


@pytest.fixture
async def database(hms, client) -> AsyncIterator[str]:
    """A new database of this test, created as user ``etl``, dropped (cascade) after it."""
    name = f"mc_{os.getpid()}_{next(_names)}"
    etl = client.acting_as(Identity("etl", None, frozenset({"etl"})))
    await etl.call("create_database", database=client.idl.Database(
        name=name, description="", locationUri=(hms.warehouse_dir / f"{name}.db").as_uri(), parameters={}))
    yield name
    await etl.call("drop_database", name=name, deleteData=True, cascade=True)


def _table(idl, hms, db: str, name: str):
    sd = idl.StorageDescriptor(
        cols=[idl.FieldSchema("id", "bigint", "")],
        location=(hms.warehouse_dir / f"{db}.db" / name).as_uri(),
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=idl.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        parameters={})
    return idl.Table(tableName=name, dbName=db, owner="etl", sd=sd, partitionKeys=[],
                     parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE")


async def test_reads_are_typed_and_missing_objects_raise_typed(client):
    assert {"default", "sales"} <= set(await client.get_all_databases())
    table = await client.get_table("hmshttptestdatabase", "test_table")
    assert isinstance(table, client.idl.Table)
    assert [k.name for k in table.partitionKeys] == ["hair_color"]
    with pytest.raises(NoSuchObjectException):
        await client.get_table("hmshttptestdatabase", "no_such_table")
    with pytest.raises(NoSuchObjectException):
        await client.get_database("no_such_database")
    # as a user: HMS accepted set_ugi on that connection and answers the same
    as_alice = client.acting_as(Identity("alice", None, frozenset({"analysts"})))
    assert (await as_alice.get_database("sales")).name == "sales"


async def test_ddl_and_the_environment_context_alter(hms, client, database):
    etl = client.acting_as(Identity("etl", None))
    with pytest.raises(AlreadyExistsException):
        await etl.call("create_database", database=client.idl.Database(name=database, parameters={}))
    await etl.call("create_table", tbl=_table(client.idl, hms, database, "events"))
    table = await etl.get_table(database, "events")
    table.parameters.update(metadata_location="file:/m/2.json", previous_metadata_location="file:/m/1.json")
    await etl.alter_table(database, "events", table, {"DO_NOT_UPDATE_STATS": "true"})
    altered = await client.get_table(database, "events")
    assert altered.parameters["metadata_location"] == "file:/m/2.json"
    assert altered.parameters["previous_metadata_location"] == "file:/m/1.json"


async def test_lock_check_heartbeat_unlock(hms, client, database):
    """Iceberg's HiveCatalog commit protocol. An HMS without transaction tables answers ``lock``
    with HMS's internal error, which must then arrive typed (NOTES.md section 11)."""
    idl = client.idl
    await client.call("create_table", tbl=_table(idl, hms, database, "locked"))
    component = idl.LockComponent(type=idl.LockType.EXCLUSIVE, level=idl.LockLevel.TABLE,
                                  dbname=database, tablename="locked")
    request = idl.LockRequest(component=[component], user="etl", hostname=socket.gethostname())
    try:
        locked = await client.lock(request)
    except TApplicationException as exc:
        assert exc.message == "Internal error processing lock"
        return
    assert locked.state == idl.LockState.ACQUIRED
    assert (await client.check_lock(locked.lockid)).state == idl.LockState.ACQUIRED
    await client.heartbeat(lockid=locked.lockid)
    await client.unlock(locked.lockid)
    with pytest.raises(NoSuchLockException):
        await client.check_lock(locked.lockid)
