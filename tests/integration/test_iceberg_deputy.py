"""The ``iceberg-rest`` service as a storage deputy (issue 31), against the real gateway, a real
HMS (with lock support) and a local warehouse, under a Ranger-style policy: alice does all on
``sec_a`` and on namespaces ``alice_*``, with the url permission on the warehouse; bob does all
on ``sec_b``, without any url permission. Each attack of the issue is replayed and must be
refused, and nothing outside the attacker's own table may change: bob's files are listed (with
their bytes) before and after every attack, and canary files sit beside the warehouse."""

from __future__ import annotations

import json
import os
import time
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import BadRequestError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from tests.support.gateway import RunningGateway, in_workdir
from tests.support.iceberg.clients import call, error_of, rest_catalog

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

ALICE, BOB = ("alice", "alice-password"), ("bob", "bob-password")
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def _policy(warehouse: Path) -> str:
    return f"""
policies:
  - id: 1
    name: alice owns sec_a and her own namespaces
    resources: {{database: [sec_a, "alice_*"], table: ["*"], column: ["*"]}}
    allow: [{{users: [alice], accesses: [all]}}]
  - id: 2
    name: bob owns sec_b
    resources: {{database: [sec_b], table: ["*"], column: ["*"]}}
    allow: [{{users: [bob], accesses: [all]}}]
  - id: 3
    name: alice may name locations in the warehouse
    resources: {{url: {{values: ["{warehouse.as_uri()}"], recursive: true}}}}
    allow: [{{users: [alice], accesses: [read, write]}}]
"""


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory) -> RunningGateway:
    service = {"path": "iceberg", "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
               "policy_file": in_workdir("policy.yaml"), "options": {"lock_check_min_wait_seconds": 0.02}}
    return module_gateway_factory(services=[service], files={"policy.yaml": _policy(module_hms.warehouse_dir)},
                                  users=dict([ALICE, BOB]))


@pytest.fixture(scope="module")
def world(gw, module_hms, tmp_path_factory):
    """sec_a.t (alice) and sec_b.trips (bob, two appends); canaries outside the warehouse."""
    alice = rest_catalog(gw, user=ALICE[0], password=ALICE[1], name="alice", validate=False)
    bob = rest_catalog(gw, user=BOB[0], password=BOB[1], name="bob", validate=False)
    for catalog, namespace in ((alice, "sec_a"), (bob, "sec_b")):
        catalog.create_namespace(namespace)
    alice.create_table("sec_a.t", schema=SCHEMA)
    trips = bob.create_table("sec_b.trips", schema=SCHEMA)
    for start in (0, 10):
        trips.append(pa.table({"id": pa.array(range(start, start + 3), pa.int64())}))
    canaries = tmp_path_factory.mktemp("canaries")
    (canaries / "keep.txt").write_text("canary")
    return {"alice": alice, "bob": bob, "wh": module_hms.warehouse_dir, "canaries": canaries,
            "bob_dir": module_hms.warehouse_dir / "sec_b.db"}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def untouched(world):
    """Bob's namespace folder and the canaries, byte for byte, before and after the test."""
    before = (_tree(world["bob_dir"]), _tree(world["canaries"]))
    yield
    assert (_tree(world["bob_dir"]), _tree(world["canaries"])) == before


def _as(user):
    return partial(call, auth=user, validate=False)


def _table(name: str, **fields) -> dict:
    return {"name": name, "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False}]}, **fields}


def _commit(*updates: dict) -> dict:
    return {"requirements": [], "updates": list(updates)}


# --- 1. no client-chosen code --------------------------------------------------------------------

def test_properties_naming_code_are_400_on_every_route(gw, world, untouched, tmp_path):
    marker = tmp_path / "ran"
    alice = _as(ALICE)
    hostile = [{"py-io-impl": "subprocess.Popen"}, {"write.py-location-provider.impl": "shutil.rmtree"},
               {"s3.retry-strategy-impl": "os.system"}, {"io-impl": "x.Y"}, {"client.factory": "x.Y"},
               {"storage_handler": "org.apache.hive.storage.jdbc.JdbcStorageHandler"}]
    table_dir = world["wh"] / "sec_a.db" / "t"
    for properties in hostile:
        answers = [
            alice(gw, "POST", "/v1/namespaces/sec_a/tables", _table("evil", properties=properties)),
            alice(gw, "POST", "/v1/namespaces/sec_a/tables/t", _commit({"action": "set-properties", "updates": properties})),
            alice(gw, "POST", "/v1/transactions/commit", {"table-changes": [{
                "identifier": {"namespace": ["sec_a"], "name": "t"}, **_commit(
                    {"action": "set-properties", "updates": properties})}]}),
            alice(gw, "POST", "/v1/namespaces", {"namespace": ["alice_code"], "properties": properties}),
            alice(gw, "POST", "/v1/namespaces/sec_a/properties", {"removals": [], "updates": properties}),
            alice(gw, "POST", "/v1/namespaces/sec_a/views", {
                "name": "v", "properties": properties, "schema": _table("x")["schema"],
                "view-version": {"version-id": 1, "timestamp-ms": 1, "schema-id": 0, "summary": {},
                                 "default-namespace": ["sec_a"], "representations": [
                                     {"type": "sql", "sql": "select 1", "dialect": "spark"}]}}),
        ]
        for answer in answers:
            assert "implementation" in error_of(answer, 400, "BadRequestException")["message"]
    assert not marker.exists() and table_dir.is_dir() and (table_dir / "metadata").is_dir()
    assert world["alice"].load_table("sec_a.t").properties.get("py-io-impl") is None


def test_storage_client_properties_are_refused(gw, world):
    """A writer's ``s3.endpoint`` or ``s3.proxy-uri`` would steer every other reader's PyIceberg
    (``RestCatalog`` builds a loaded table's FileIO from its properties): refused on create and
    on commit, and the table keeps none."""
    steering = {"s3.endpoint": "http://127.0.0.1:9", "s3.proxy-uri": "http://127.0.0.1:9",
                "client.access-key-id": "x"}
    alice = world["alice"]
    for key, value in steering.items():
        with pytest.raises(BadRequestError, match="configures a storage client"):
            alice.create_table("sec_a.steered", schema=SCHEMA, properties={key: value})
    table = alice.create_table("sec_a.steered", schema=SCHEMA)
    with pytest.raises(BadRequestError, match="configures a storage client"):
        with table.transaction() as tx:
            tx.set_properties({"S3.Proxy-Uri": "http://127.0.0.1:9"})
    loaded = alice.load_table("sec_a.steered")
    assert not any(k.lower().startswith(("s3.", "client.")) for k in loaded.properties)


# --- 2. every path confined ----------------------------------------------------------------------

def test_locations_outside_the_table_are_refused(gw, world, untouched):
    alice, wh = _as(ALICE), world["wh"]
    bobs = (world["bob_dir"] / "trips").as_uri()
    refused = {
        bobs: 403, (wh / "elsewhere").as_uri(): 403, "file:///etc/hms-gateway-deputy": 403,
        (wh / "sec_a.db" / ".." / "sec_b.db" / "x").as_uri(): 400, "": 400, "relative/path": 400,
        "ftp://host/x": 400, (wh / "sec_a.db").as_uri() + "/a\u0000b": 400,
        "file://localhost" + str(wh / "sec_a.db" / "lh"): 400,  # PyArrow: relative to the gateway's folder
        (wh / "sec_a.db").as_uri() + "/*": 400, (wh / "sec_a.db").as_uri() + "/" + "x" * 5000: 400,
    }
    for location, status in refused.items():
        error_of(alice(gw, "POST", "/v1/namespaces/sec_a/tables", _table("escape", location=location)), status)
        error_of(alice(gw, "POST", "/v1/namespaces/sec_a/tables/t", _commit(
            {"action": "set-location", "location": location})), status)
    for key in ("write.data.path", "write.metadata.path"):
        for location in (bobs, "file:///tmp"):
            error_of(alice(gw, "POST", "/v1/namespaces/sec_a/tables/t", _commit(
                {"action": "set-properties", "updates": {key: location}})), 403)
    assert not Path("/etc/hms-gateway-deputy").exists()
    assert not any((where / "localhost").exists() for where in (gw.workdir, Path.cwd()))
    assert world["alice"].load_table("sec_a.t").location().endswith("/sec_a.db/t")


def test_a_chosen_location_needs_the_url_permission(gw, world):
    mine = (world["wh"] / "sec_a.db" / "placed").as_uri()
    answer = _as(ALICE)(gw, "POST", "/v1/namespaces/sec_a/tables", _table("placed", location=mine))
    assert answer.status_code == 200 and answer.json()["metadata"]["location"] == mine
    theirs = (world["bob_dir"] / "elsewhere").as_uri()  # not sec_b's default for "chosen"
    error = error_of(_as(BOB)(gw, "POST", "/v1/namespaces/sec_b/tables", _table("chosen", location=theirs)), 403)
    assert "url permission" in error["message"]
    assert _as(BOB)(gw, "POST", "/v1/namespaces/sec_b/tables", _table("defaulted")).status_code == 200


# --- 3. purge deletes only what the table owns ---------------------------------------------------

def test_a_commit_pointing_at_another_tables_files_is_refused(gw, world, untouched):
    """Issue 39: a snapshot whose manifest list is bob's, a statistics or partition-statistics
    file outside the table (a canary): each refused with 403 before anything is written, so the
    table never points at another table's files (a purge skipped them; a read would not). The
    purge of unit tests (test_iceberg_locations) still skips such files of a table placed by
    other means."""
    bob_table = world["bob"].load_table("sec_b.trips")
    bob_rows = sorted(bob_table.scan().to_arrow()["id"].to_pylist())
    canary = (world["canaries"] / "keep.txt").as_uri()
    world["alice"].create_table("sec_a.purged", schema=SCHEMA)
    own = world["wh"] / "sec_a.db" / "purged"
    written = sorted(own.rglob("*.metadata.json"))
    snapshot = {"snapshot-id": 7, "sequence-number": 1, "timestamp-ms": int(time.time() * 1000), "schema-id": 0,
                "manifest-list": bob_table.current_snapshot().manifest_list, "summary": {"operation": "append"}}
    own_snapshot = {**snapshot, "manifest-list": (own / "metadata" / "snap-7.avro").as_uri()}
    for updates, named in (
            (({"action": "add-snapshot", "snapshot": snapshot},), "add-snapshot manifest-list"),
            (({"action": "add-snapshot", "snapshot": own_snapshot},
              {"action": "set-statistics", "snapshot-id": 7, "statistics": {
                  "snapshot-id": 7, "statistics-path": canary, "file-size-in-bytes": 6,
                  "file-footer-size-in-bytes": 1, "blob-metadata": []}}), "set-statistics statistics-path"),
            (({"action": "add-snapshot", "snapshot": own_snapshot},
              {"action": "set-partition-statistics", "partition-statistics": {
                  "snapshot-id": 7, "statistics-path": canary, "file-size-in-bytes": 6}}),
             "set-partition-statistics statistics-path")):
        error = error_of(_as(ALICE)(gw, "POST", "/v1/namespaces/sec_a/tables/purged", _commit(*updates)), 403)
        assert error["message"].startswith(named) and "is not below the table location" in error["message"]
    assert sorted(own.rglob("*.metadata.json")) == written  # nothing was written
    assert world["alice"].load_table("sec_a.purged").current_snapshot() is None
    assert _as(ALICE)(gw, "DELETE", "/v1/namespaces/sec_a/tables/purged?purgeRequested=true").status_code == 204
    assert not any(own.rglob("*.metadata.json"))
    assert sorted(world["bob"].load_table("sec_b.trips").scan().to_arrow()["id"].to_pylist()) == bob_rows


def test_purge_and_commits_do_not_follow_a_symbolic_link_out_of_the_table(gw, world, untouched):
    """On a local warehouse clients write their data files themselves, so a client can put a
    symbolic link inside its own table folder pointing at bob's. A purge deleting
    ``<own>/data/link/<bob's file>`` (named as a statistics file) and a commit writing
    ``<own>/meta2/...`` (its ``write.metadata.path``), a link to bob's metadata, would reach bob's files with the
    gateway's authority: the purge skips the file, the commit is refused, bob's folder is unchanged."""
    bob_data = next(p for p in (world["bob_dir"] / "trips" / "data").rglob("*.parquet"))
    linked = world["alice"].create_table("sec_a.linked", schema=SCHEMA)
    linked.append(pa.table({"id": pa.array([1], pa.int64())}))  # a real snapshot, manifest list and all
    own = world["wh"] / "sec_a.db" / "linked"
    (own / "data").mkdir(exist_ok=True)
    (own / "data" / "link").symlink_to(bob_data.parent, target_is_directory=True)
    snapshot_id = world["alice"].load_table("sec_a.linked").current_snapshot().snapshot_id
    stats = {"snapshot-id": snapshot_id, "statistics-path": (own / "data" / "link" / bob_data.name).as_uri(),
             "file-size-in-bytes": 1, "file-footer-size-in-bytes": 1, "blob-metadata": []}
    answer = _as(ALICE)(gw, "POST", "/v1/namespaces/sec_a/tables/linked", _commit(
        {"action": "set-statistics", "snapshot-id": snapshot_id, "statistics": stats}))
    assert answer.status_code == 200, answer.text
    (own / "meta2").symlink_to(world["bob_dir"] / "trips" / "metadata", target_is_directory=True)
    error_of(_as(ALICE)(gw, "POST", "/v1/namespaces/sec_a/tables/linked", _commit(
        {"action": "set-properties", "updates": {"write.metadata.path": (own / "meta2").as_uri()}})), 403)
    assert _as(ALICE)(gw, "DELETE", "/v1/namespaces/sec_a/tables/linked?purgeRequested=true").status_code == 204
    assert bob_data.is_file()
    assert f"purge of sec_a.linked skips {stats['statistics-path']}" in gw.log()


def test_a_namespace_folder_linked_elsewhere_gets_no_files(gw, world, untouched):
    """The same with the link one level up: alice's namespace folder replaced by a link to
    bob's, then a table named as his. The gateway would have written its metadata into bob's
    table folder; no link below the warehouse is followed, so the create is 403."""
    alice = _as(ALICE)
    assert alice(gw, "POST", "/v1/namespaces", {"namespace": ["alice_ln"]}).status_code == 200
    folder = world["wh"] / "alice_ln.db"
    if folder.exists():
        folder.rmdir()
    folder.symlink_to(world["bob_dir"], target_is_directory=True)
    try:
        error_of(alice(gw, "POST", "/v1/namespaces/alice_ln/tables", _table("trips")), 403)
        assert alice(gw, "GET", "/v1/namespaces/alice_ln/tables/trips").status_code == 404
    finally:
        folder.unlink()


def test_purge_of_a_table_placed_over_another_is_refused(gw, world, untouched, hive_catalog):
    """A table placed by other means than the gateway (here PyIceberg's HiveCatalog straight on
    HMS, as any Thrift client could) whose metadata names bob's location cannot steer a purge
    there: 403, and nothing is dropped or deleted."""
    bob_table = world["bob"].load_table("sec_b.trips")
    bob_rows = sorted(bob_table.scan().to_arrow()["id"].to_pylist())
    hive_catalog.register_table("sec_a.forged", bob_table.metadata_location)
    answer = _as(ALICE)(gw, "DELETE", "/v1/namespaces/sec_a/tables/forged?purgeRequested=true")
    assert answer.status_code == 403, answer.text
    assert "purge of sec_a.forged refused" in error_of(answer)["message"]
    assert hive_catalog.table_exists("sec_a.forged")  # nothing refused reached HMS
    assert sorted(world["bob"].load_table("sec_b.trips").scan().to_arrow()["id"].to_pylist()) == bob_rows
    assert _as(ALICE)(gw, "DELETE", "/v1/namespaces/sec_a/tables/forged").status_code == 204  # a plain drop is fine


def test_a_commit_on_a_table_placed_over_another_writes_nothing_there(gw, world, untouched, hive_catalog):
    """The same forged table (a Thrift client's create_table naming bob's metadata): a commit
    would have written its new metadata file into bob's folder. 403 by the storage-identity
    rule, and bob's folder is
    unchanged (``untouched``); a transaction is refused the same way."""
    hive_catalog.register_table("sec_a.forged_commit", world["bob"].load_table("sec_b.trips").metadata_location)
    change = _commit({"action": "set-properties", "updates": {"k": "v"}})
    answer = _as(ALICE)(gw, "POST", "/v1/namespaces/sec_a/tables/forged_commit", change)
    message = error_of(answer, 403, "ForbiddenException")["message"]  # refused before the commit (issue 48)
    assert "sec_a.forged_commit refused" in message and "storage-identity rule" in message
    error_of(_as(ALICE)(gw, "POST", "/v1/transactions/commit", {"table-changes": [
        {"identifier": {"namespace": ["sec_a"], "name": "forged_commit"}, **change}]}), 403)
    assert _as(ALICE)(gw, "DELETE", "/v1/namespaces/sec_a/tables/forged_commit").status_code == 204


def test_a_table_renamed_out_of_its_namespace_is_not_written_through(gw, world):
    """Renamed into another namespace, a table keeps its location, where a new table of its old
    name now lands too: commits of the renamed one are refused (it can be renamed back)."""
    alice = _as(ALICE)
    world["alice"].create_table("sec_a.mover", schema=SCHEMA)
    assert alice(gw, "POST", "/v1/namespaces", {"namespace": ["alice_moved"]}).status_code == 200
    assert alice(gw, "POST", "/v1/tables/rename", {"source": {"namespace": ["sec_a"], "name": "mover"},
                                                   "destination": {"namespace": ["alice_moved"], "name": "mover"}}).status_code == 204
    error_of(alice(gw, "POST", "/v1/namespaces/alice_moved/tables/mover", _commit(
        {"action": "set-properties", "updates": {"k": "v"}})), 403)
    assert alice(gw, "POST", "/v1/tables/rename", {"source": {"namespace": ["alice_moved"], "name": "mover"},
                                                   "destination": {"namespace": ["sec_a"], "name": "mover"}}).status_code == 204
    assert alice(gw, "POST", "/v1/namespaces/sec_a/tables/mover", _commit(
        {"action": "set-properties", "updates": {"k": "v"}})).status_code == 200


# --- 4. register through a re-pointed namespace ---------------------------------------------------

def test_register_through_a_re_pointed_namespace_is_refused(gw, world, untouched):
    alice = _as(ALICE)
    bob_folder = world["bob_dir"].as_uri()
    bob_metadata = world["bob"].load_table("sec_b.trips").metadata_location
    for location in (bob_folder, bob_folder + "/trips", world["wh"].as_uri() + "/sec_b.db/../sec_b.db"):
        answer = alice(gw, "POST", "/v1/namespaces", {"namespace": ["alice_x"], "properties": {"location": location}})
        assert error_of(answer)["code"] in (400, 403)
    assert alice(gw, "GET", "/v1/namespaces/alice_x").status_code == 404
    own = (world["wh"] / "alice_own").as_uri()
    assert alice(gw, "POST", "/v1/namespaces", {"namespace": ["alice_y"], "properties": {"location": own}}).status_code == 200
    error = error_of(alice(gw, "POST", "/v1/namespaces/alice_y/properties",
                           {"removals": [], "updates": {"location": bob_folder}}), 403)
    assert "sec_b" not in error["message"].replace(bob_folder, "")  # bob's namespace is not named to alice
    error_of(alice(gw, "POST", "/v1/namespaces/alice_y/register", {"name": "stolen", "metadata-location": bob_metadata}), 403)
    error_of(alice(gw, "POST", "/v1/namespaces/sec_a/register", {"name": "stolen", "metadata-location": bob_metadata}), 403)
    assert alice(gw, "GET", "/v1/namespaces/alice_y/tables/stolen").status_code == 404


def test_register_within_the_namespace_works(gw, world, untouched):
    table = world["alice"].create_table("sec_a.original", schema=SCHEMA)
    metadata = table.metadata_location
    assert _as(ALICE)(gw, "DELETE", "/v1/namespaces/sec_a/tables/original").status_code == 204
    answer = _as(ALICE)(gw, "POST", "/v1/namespaces/sec_a/register", {"name": "original", "metadata-location": metadata})
    assert answer.status_code == 200 and answer.json()["metadata-location"] == metadata


def test_register_reads_no_file_through_a_link_and_quotes_no_file(gw, world, tmp_path):
    """Register reads the file it is given with the gateway's authority: a symbolic link in the
    client's own folder to a file only the gateway may read is refused before it is read, and a
    JSON file that is not metadata is 400 naming what is wrong, never what it holds."""
    secret = tmp_path / "key.json"
    secret.write_text(json.dumps({"type": "service_account", "private_key": "R31-SECRET-KEY"}))
    folder = world["wh"] / "sec_a.db" / "imports"
    folder.mkdir(exist_ok=True)
    (folder / "linked.metadata.json").symlink_to(secret)
    (folder / "plain.metadata.json").write_text(json.dumps({"format-version": 2, "private_key": "R31-SECRET-KEY"}))
    alice = _as(ALICE)
    linked = alice(gw, "POST", "/v1/namespaces/sec_a/register",
                   {"name": "linked", "metadata-location": (folder / "linked.metadata.json").as_uri()})
    assert "symbolic link" in error_of(linked, 403)["message"]
    plain = alice(gw, "POST", "/v1/namespaces/sec_a/register",
                  {"name": "plain", "metadata-location": (folder / "plain.metadata.json").as_uri()})
    assert "not readable Iceberg table metadata" in error_of(plain, 400)["message"]
    assert "R31-SECRET-KEY" not in linked.text + plain.text + gw.log()
    os.mkfifo(folder / "fifo.metadata.json")  # read, it would hold a gateway thread forever
    fifo = alice(gw, "POST", "/v1/namespaces/sec_a/register",
                 {"name": "fifo", "metadata-location": (folder / "fifo.metadata.json").as_uri()})
    assert "not readable Iceberg table metadata" in error_of(fifo, 400)["message"]
