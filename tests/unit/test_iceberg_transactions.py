"""``POST /v1/transactions/commit`` against a fake HMS holding several tables: locks in one order,
all-or-nothing for requirement conflicts, compensating alters when an alter between two fails,
CommitStateUnknown naming what landed when the compensation fails too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.service_state import ServiceState
from gateway.upstream.locks import Schedule
from gateway.iceberg.files import MetadataFiles, next_metadata_location
from gateway.iceberg.hive_tables import new_table
from gateway.iceberg.routes import RouteMatch, answer
from gateway.iceberg.transactions import changes_of
from gateway.thrift.schema import load_schema
from gateway.upstream.errors import UpstreamTimeout, UpstreamUnavailable
from gateway.upstream.metastore import idl_module

IDL = idl_module(load_schema())
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
NAMES = (("db", "a"), ("db", "b"), ("other", "c"))


class View:
    def __init__(self, allowed=("update", "alter")):
        self.allowed = set(allowed)

    def visible(self, database, table=None):
        return True

    def may(self, access, database, table=None):
        return access in self.allowed

    def all_columns(self, database, table):
        return True

    def restrictions(self, database, table, columns=None, column_types=None):
        from gateway.policy.restrictions import TableRestrictions

        return TableRestrictions()  # no row filter, no mask


def _copy(table):
    return IDL.Table(**{name: getattr(table, name) for _, name, *_ in table.thrift_spec.values()})


class FakeHMS:
    """Tables by (db, name); ``calls`` records locks, alters and unlocks; ``fail_alter`` maps a
    table to the errors its next alters raise (None: succeed)."""

    def __init__(self, tables):
        self.idl = IDL
        self.tables = tables
        self.calls: list[tuple] = []
        self.fail_alter: dict[tuple[str, str], list] = {}
        self._next_lock = 0
        self.locks: dict[int, tuple[str, str]] = {}

    async def get_table(self, db, name):
        if (db, name) not in self.tables:
            raise IDL.NoSuchObjectException(message="no such table")
        return _copy(self.tables[(db, name)])

    async def get_database(self, db):
        return IDL.Database(name=db, locationUri=f"{self.warehouse}/{db}")

    async def call(self, method, **arguments):  # HMS's warehouse, for the location checks
        if method == "get_all_tables":  # the storage identity's siblings
            return [name for db, name in self.tables if db == arguments["db_name"]]
        if method == "get_table_objects_by_name":
            return [_copy(self.tables[(arguments["dbname"], n)]) for n in arguments["tbl_names"]]
        assert method == "get_config_value"
        return self.warehouse

    async def lock(self, request):
        component = request.component[0]
        self._next_lock += 1
        self.locks[self._next_lock] = (component.dbname, component.tablename)
        self.calls.append(("lock", component.dbname, component.tablename))
        return IDL.LockResponse(lockid=self._next_lock, state=IDL.LockState.ACQUIRED)

    async def check_lock(self, lockid):
        return IDL.LockResponse(lockid=lockid, state=IDL.LockState.ACQUIRED)

    async def unlock(self, lockid):
        self.calls.append(("unlock", *self.locks.pop(lockid)))

    async def heartbeat(self, lockid=None, txnid=None):
        pass

    async def alter_table(self, db, name, table, properties=None):
        self.calls.append(("alter", db, name))
        failures = self.fail_alter.get((db, name))
        failure = failures.pop(0) if failures else None
        if failure is None:
            self.tables[(db, name)] = _copy(table)
        elif failure == "lands-then-times-out":
            self.tables[(db, name)] = _copy(table)
            raise UpstreamTimeout("no answer in 60 s")
        else:
            raise failure


@pytest.fixture
def world(tmp_path: Path):
    files = MetadataFiles()
    tables, first = {}, {}
    for db, name in NAMES:
        location = (tmp_path / db / name).as_uri()
        metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location)
        first[(db, name)] = next_metadata_location(metadata, None)
        asyncio.run(files.write(metadata, first[(db, name)]))
        tables[(db, name)] = new_table(IDL, db, name, "etl", metadata, first[(db, name)], True)
    hms = FakeHMS(tables)
    hms.warehouse = tmp_path.as_uri()
    catalog = Catalog(hms, View(), files, ServiceState(lock=Schedule(check_min=0.001, check_max=0.002, heartbeat=240.0)), "etl")
    return hms, catalog, first, tmp_path


def _body(*changes: tuple[str, str, dict]) -> bytes:
    return json.dumps({"table-changes": [
        {"identifier": {"namespace": [db], "name": name},
         "updates": [{"action": "set-properties", "updates": updates}]} | extra
        for db, name, updates, extra in ((*c, {}) if len(c) == 3 else c for c in changes)
    ]}).encode()


def _files(tmp_path: Path, db: str, name: str) -> int:
    return len(list((tmp_path / db / name / "metadata").iterdir()))


def _location(hms, db, name):
    return hms.tables[(db, name)].parameters["metadata_location"]


async def _commit(catalog, body):
    return await answer(catalog, RouteMatch("commitTransaction"), None, body)


async def test_every_table_changes_and_locks_are_taken_in_one_order(world):
    hms, catalog, first, tmp_path = world
    reply = await _commit(catalog, _body(("other", "c", {"k": "3"}), ("db", "b", {"k": "2"}), ("db", "a", {"k": "1"})))
    assert reply.status == 204
    assert [c[1:] for c in hms.calls if c[0] == "lock"] == [("db", "a"), ("db", "b"), ("other", "c")]
    assert {c[1:] for c in hms.calls if c[0] == "unlock"} == set(NAMES)
    for (db, name), value in zip(NAMES, "123"):
        assert hms.tables[(db, name)].parameters["k"] == value
        assert hms.tables[(db, name)].parameters["previous_metadata_location"] == first[(db, name)]


async def test_one_failed_requirement_is_409_and_nothing_is_written(world):
    hms, catalog, first, tmp_path = world
    stale = {"requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]}
    with pytest.raises(errors.CommitFailed, match="db.b"):
        await _commit(catalog, _body(("db", "a", {"k": "1"}), ("db", "b", {"k": "2"}, stale)))
    assert not [c for c in hms.calls if c[0] == "alter"]
    assert all(_location(hms, *key) == first[key] for key in NAMES)
    assert _files(tmp_path, "db", "a") == _files(tmp_path, "db", "b") == 1
    assert len([c for c in hms.calls if c[0] == "unlock"]) == 2


async def test_a_refused_alter_between_two_rolls_the_first_back_under_the_locks(world):
    hms, catalog, first, tmp_path = world
    hms.fail_alter[("db", "b")] = [IDL.MetaException(message="refused")]
    with pytest.raises(errors.CommitFailed, match="rolled back"):
        await _commit(catalog, _body(("db", "a", {"k": "1"}), ("db", "b", {"k": "2"}), ("other", "c", {"k": "3"})))
    kinds = [c for c in hms.calls if c[0] in ("alter", "unlock")]
    # a, b (refused), then a put back, and only then the locks released; c never altered
    assert kinds[:3] == [("alter", "db", "a"), ("alter", "db", "b"), ("alter", "db", "a")]
    assert {c[1:] for c in kinds[3:]} == set(NAMES) and all(c[0] == "unlock" for c in kinds[3:])
    assert all(_location(hms, *key) == first[key] for key in NAMES)
    assert "k" not in hms.tables[("db", "a")].parameters
    assert _files(tmp_path, "db", "a") == _files(tmp_path, "db", "b") == _files(tmp_path, "other", "c") == 1


async def test_an_unreachable_hms_between_two_alters_is_rolled_back_and_503(world):
    hms, catalog, first, tmp_path = world
    hms.fail_alter[("db", "b")] = [UpstreamUnavailable("connection reset")]  # not landed: re-read shows the base
    with pytest.raises(errors.ServiceUnavailable, match="put back: db.a"):
        await _commit(catalog, _body(("db", "a", {"k": "1"}), ("db", "b", {"k": "2"})))
    assert all(_location(hms, *key) == first[key] for key in NAMES)


async def test_an_alter_that_timed_out_but_landed_counts_as_landed(world):
    hms, catalog, first, tmp_path = world
    hms.fail_alter[("db", "a")] = ["lands-then-times-out"]
    reply = await _commit(catalog, _body(("db", "a", {"k": "1"}), ("db", "b", {"k": "2"})))
    assert reply.status == 204
    assert hms.tables[("db", "a")].parameters["k"] == "1" and hms.tables[("db", "b")].parameters["k"] == "2"


async def test_a_failed_compensation_is_commit_state_unknown_naming_what_landed(world):
    hms, catalog, first, tmp_path = world
    hms.fail_alter[("db", "a")] = [None, UpstreamUnavailable("gone")]  # commit lands, rollback fails
    hms.fail_alter[("db", "b")] = [IDL.MetaException(message="refused")]
    with pytest.raises(errors.CommitStateUnknown) as caught:
        await _commit(catalog, _body(("db", "a", {"k": "1"}), ("db", "b", {"k": "2"})))
    assert caught.value.status == 502 and "landed: db.a;" in caught.value.message
    assert hms.tables[("db", "a")].parameters["k"] == "1"
    assert _files(tmp_path, "db", "a") == 2  # kept: HMS points at it


@pytest.mark.parametrize("body, words", [
    ({}, "table-changes"),
    ({"table-changes": []}, "table-changes"),
    ({"table-changes": [{"updates": []}]}, "identifier is required"),
    ({"table-changes": [{"identifier": {"namespace": ["db"], "name": "a"}},
                        {"identifier": {"namespace": ["db"], "name": "a"}}]}, "named twice"),
    ({"table-changes": [{"identifier": {"namespace": ["db"], "name": "a"},
                         "updates": [{"action": "no-such-update"}]}]}, "CommitTableRequest"),
    ({"table-changes": [{"identifier": {"namespace": ["db"], "name": "a-b"}}]}, "letters, digits"),
])
def test_bad_transaction_bodies_are_400(body, words):
    with pytest.raises(errors.BadRequest, match=words):
        changes_of(json.dumps(body).encode())


def test_a_staged_create_in_a_transaction_is_406():
    body = {"table-changes": [{"identifier": {"namespace": ["db"], "name": "a"},
                               "requirements": [{"type": "assert-create"}]}]}
    with pytest.raises(errors.Unsupported):
        changes_of(json.dumps(body).encode())


async def test_a_table_the_user_may_not_alter_is_403_before_any_lock(world):
    hms, catalog, first, tmp_path = world
    catalog.view = View(allowed=("update",))
    with pytest.raises(errors.Forbidden):
        await _commit(catalog, _body(("db", "a", {"k": "1"})))
    assert hms.calls == []
