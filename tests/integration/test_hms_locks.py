"""The embedded HMS answers HMS's lock calls: PyIceberg's HiveCatalog commits, lock queues, restarts.

Before, any commit of Iceberg's HiveCatalog failed with ``TApplicationException: Internal error
processing lock``: the transaction tables were missing (listener/.../EmbeddedMetastore.java).
"""

from __future__ import annotations

import socket

import pyarrow as pa
import pytest
from pyiceberg.catalog.hive import HiveCatalog

from tests.support.hms import RunningHMS, start_hms
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = pytest.mark.integration


@pytest.fixture
def thrift(module_hms: RunningHMS):
    client, transport = hive_metastore_client(module_hms.host, module_hms.port)
    yield client
    transport.close()


def _hive_catalog(hms: RunningHMS) -> HiveCatalog:
    return HiveCatalog("hms", uri=hms.uri, warehouse=hms.warehouse_dir.as_uri())


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)], pa.string())})


def _exclusive_lock(ttypes, db: str, table: str):
    component = ttypes.LockComponent(type=ttypes.LockType.EXCLUSIVE, level=ttypes.LockLevel.TABLE,
                                     dbname=db, tablename=table)
    return ttypes.LockRequest(component=[component], user="tester", hostname=socket.gethostname())


def test_hive_catalog_commits_twice_and_reads_back(module_hms):
    catalog = _hive_catalog(module_hms)
    catalog.create_namespace("ice_commits")
    table = catalog.create_table("ice_commits.events", schema=_rows(0).schema)
    table.append(_rows(3))
    table.append(_rows(2, start=3))

    loaded = catalog.load_table("ice_commits.events")
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4]
    assert [s.summary.operation.value for s in loaded.snapshots()] == ["append", "append"]
    # the metadata_location HMS holds is the file of the second commit
    assert loaded.metadata_location.rsplit("/", 1)[1].startswith("00002-")


def test_an_exclusive_lock_queues_the_next_until_unlocked(module_hms, thrift):
    _, ttypes = hive_metastore_modules()
    catalog = _hive_catalog(module_hms)
    catalog.create_namespace("ice_locks")
    catalog.create_table("ice_locks.t", schema=_rows(0).schema)

    first = thrift.lock(_exclusive_lock(ttypes, "ice_locks", "t"))
    assert first.state == ttypes.LockState.ACQUIRED
    second = thrift.lock(_exclusive_lock(ttypes, "ice_locks", "t"))
    assert second.state == ttypes.LockState.WAITING
    assert thrift.check_lock(ttypes.CheckLockRequest(lockid=second.lockid)).state == ttypes.LockState.WAITING
    held = thrift.show_locks(ttypes.ShowLocksRequest(dbname="ice_locks", tablename="t")).locks
    assert sorted(lock.lockid for lock in held) == sorted([first.lockid, second.lockid])

    thrift.heartbeat(ttypes.HeartbeatRequest(lockid=first.lockid))  # what a long commit sends
    thrift.unlock(ttypes.UnlockRequest(lockid=first.lockid))
    assert thrift.check_lock(ttypes.CheckLockRequest(lockid=second.lockid)).state == ttypes.LockState.ACQUIRED
    thrift.unlock(ttypes.UnlockRequest(lockid=second.lockid))
    assert thrift.show_locks(ttypes.ShowLocksRequest(dbname="ice_locks", tablename="t")).locks == []


def test_a_restarted_metastore_keeps_its_lock_tables(tmp_path_factory):
    """The tables are made once; a second start on the same Derby database finds them and commits work."""
    workdir = tmp_path_factory.mktemp("hms-locks-restart")
    first = start_hms(workdir)
    try:
        catalog = _hive_catalog(first)
        catalog.create_namespace("ice_restart")
        catalog.create_table("ice_restart.t", schema=_rows(0).schema).append(_rows(1))
    finally:
        first.server.stop()
    second = start_hms(workdir)
    try:
        log = second.server.log_path.read_text()
        assert log.count("created HMS transaction and lock tables") == 1
        table = _hive_catalog(second).load_table("ice_restart.t")
        table.append(_rows(1, start=1))
        assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [0, 1]
    finally:
        second.server.stop()
