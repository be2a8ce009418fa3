"""Iceberg commits recognised in ALTER_TABLE events and described from the metadata files
(PyIceberg writes real metadata files into a temporary folder; the events are json-0.2 as Hive
2.3's ``JSONAlterTableMessage`` writes them, tables in TJSON)."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from pathlib import Path

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.io import load_file_io
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate, update_table_metadata
from pyiceberg.types import LongType, NestedField

from gateway.events import hcat
from gateway.events.iceberg import (
    IcebergCommitOptions,
    IcebergCommits,
    SnapshotReader,
    commit_body,
    commit_locations,
    for_viewer,
)
from gateway.upstream.notification_event import MetastoreEvent
from tests.unit.test_events_hcat import table_tjson


def _write(metadata, path: Path, compress: bool = False) -> str:
    location = path.as_uri()
    if compress:
        path.write_bytes(gzip.compress(metadata.model_dump_json().encode()))
    else:
        ToOutputFile.table_metadata(metadata, load_file_io({}, location).new_output(location))
    return location


@pytest.fixture
def files(tmp_path):
    """(first file without snapshot, second file with an append snapshot)."""
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    base = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, tmp_path.as_uri(), {})
    snapshot = Snapshot(**{"snapshot-id": 7, "sequence-number": 1, "timestamp-ms": 1_700_000_000_000,
                           "manifest-list": (tmp_path / "snap-7.avro").as_uri(),
                           "summary": Summary(Operation.APPEND, **{"added-records": "3",
                                                                  "partitions.day=2026-01-01": "x"})})
    new = update_table_metadata(base, (AddSnapshotUpdate(snapshot=snapshot),
                                       SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=7)))
    return _write(base, tmp_path / "00000-a.metadata.json"), _write(new, tmp_path / "00001-b.metadata.json")


def alter(before: dict, after: dict, user: str | None = "etl", event_id: int = 5) -> MetastoreEvent:
    message = {"server": "", "servicePrincipal": "", "db": "sales", "table": "t", "timestamp": 1,
               "tableObjBeforeJson": table_tjson("sales", "t", before),
               "tableObjAfterJson": table_tjson("sales", "t", after)}
    if user is not None:
        message["user"] = user
    return MetastoreEvent(event_id, 1, "ALTER_TABLE", "sales", "t", message, "json-0.2")


def iceberg(location: str, previous: str | None = None) -> dict:
    params = {"table_type": "ICEBERG", "metadata_location": location}
    if previous:
        params["previous_metadata_location"] = previous
    return params


def test_only_alter_table_moving_an_iceberg_metadata_location_is_a_commit():
    assert commit_locations(alter(iceberg("a"), iceberg("b", "a"))) == ("b", "a")
    assert commit_locations(alter({}, iceberg("b", "a"))) == ("b", "a")  # previous from the after-table
    assert commit_locations(alter(iceberg("a"), iceberg("a"))) is None  # rename, Hive statistics…
    assert commit_locations(alter({"metadata_location": "a"}, {"metadata_location": "b"})) is None
    event = alter(iceberg("a"), iceberg("b"))
    assert commit_locations(MetastoreEvent(1, 1, "CREATE_TABLE", "d", "t", event.message, "json-0.2")) is None
    assert commit_locations(MetastoreEvent(1, 1, "ALTER_TABLE", "d", "t", {"tableObjAfterJson": "{"}, "j")) is None


def test_commit_body_has_the_new_snapshot_operation_summary_and_user(files):
    first, second = files
    reader = SnapshotReader(IcebergCommitOptions())
    body = asyncio.run(commit_body(alter(iceberg(first), iceberg(second, first)), reader))
    assert body == {
        "identifier": {"namespace": ["sales"], "name": "t"},
        "metadata-location": second, "previous-metadata-location": first, "user": "etl",
        "snapshot-id": 7, "parent-snapshot-id": None, "sequence-number": 1, "timestamp-ms": 1_700_000_000_000,
        "operation": "append",
        "summary": {"operation": "append", "added-records": "3", "partitions.day=2026-01-01": "x"},
        "new-snapshot": True,
    }
    # A stock DbNotificationListener writes no user; the same file is not read twice.
    again = asyncio.run(commit_body(alter(iceberg(first), iceberg(second, first), user=None), reader))
    assert again["user"] is None and again["snapshot-id"] == 7 and reader.reads == 2
    # A file that does not exist: an error member, nothing raised.
    same = asyncio.run(commit_body(alter(iceberg(second), iceberg(second.replace("00001-b", "00009-z"), second)), reader))
    assert same["error"].startswith("metadata file unreadable")


def test_a_missing_file_is_logged_as_information_any_other_fault_as_a_warning(files, tmp_path, caplog):
    """Replaying the log meets a missing file for each commit of a table purged since: expected,
    so not a warning at every start; a file that exists and cannot be read is a warning."""
    first, second = files
    junk = tmp_path / "00005-f.metadata.json"
    junk.write_text("{")
    reader = SnapshotReader(IcebergCommitOptions())
    with caplog.at_level(logging.INFO, logger="gateway.events.iceberg"):
        asyncio.run(commit_body(alter(iceberg(first), iceberg(second.replace("00001-b", "00009-z"), first)), reader))
        asyncio.run(commit_body(alter(iceberg(first), iceberg(junk.as_uri(), first)), reader))
    levels = [(r.levelno, "FileNotFoundError" in r.getMessage()) for r in caplog.records]
    assert levels == [(logging.INFO, True), (logging.WARNING, False)]


def test_unchanged_snapshot_and_gzip_metadata(files, tmp_path):
    first, second = files
    from pyiceberg.serializers import FromInputFile
    metadata = FromInputFile.table_metadata(load_file_io({}, second).new_input(second))
    third = _write(metadata, tmp_path / "00002-c.gz.metadata.json", compress=True)
    body = asyncio.run(commit_body(alter(iceberg(second), iceberg(third, second)), SnapshotReader(IcebergCommitOptions())))
    assert body["snapshot-id"] == 7 and body["new-snapshot"] is False and "error" not in body


def test_unreadable_and_oversized_files_give_an_error_member_never_an_exception(files, tmp_path):
    first, second = files
    big = tmp_path / "00003-d.metadata.json"
    big.write_bytes(b" " * 2048 + Path(second[len("file://"):]).read_bytes())
    reader = SnapshotReader(IcebergCommitOptions(max_metadata_bytes=1024))
    body = asyncio.run(commit_body(alter(iceberg(first), iceberg(big.as_uri(), first)), reader))
    assert "max_metadata_bytes 1024" in body["error"] and body["snapshot-id"] is None
    junk = tmp_path / "00004-e.metadata.json"
    junk.write_text(json.dumps({"format-version": 2}))
    body = asyncio.run(commit_body(alter(iceberg(first), iceberg(junk.as_uri(), first)), SnapshotReader(IcebergCommitOptions())))
    assert body["error"].startswith("metadata file unreadable") and body["metadata-location"] == junk.as_uri()


def test_partition_summaries_are_withheld_from_users_with_denied_columns(files):
    first, second = files
    body = asyncio.run(commit_body(alter(iceberg(first), iceberg(second, first)), SnapshotReader(IcebergCommitOptions())))
    assert for_viewer(body, None) == body
    assert for_viewer(body, lambda column: column != "day")["summary"] == {"operation": "append", "added-records": "3"}


class History:
    """A notification log (``current_id``/``next_events``) of ``commits`` Iceberg commits of a
    table purged since (each new metadata file missing), a database event, and a last commit
    whose files exist."""

    def __init__(self, first: str, second: str, commits: int):
        gone = [second.replace("00001-b", f"{9000 + i}-gone") for i in range(commits + 1)]
        self.events = [alter(iceberg(gone[i]), iceberg(gone[i + 1], gone[i]), event_id=i + 1) for i in range(commits)]
        self.events.append(MetastoreEvent(commits + 1, 1, "CREATE_DATABASE", "sales", None, {"db": "sales"}, "json-0.2"))
        self.events.append(alter(iceberg(first), iceberg(second, first), event_id=commits + 2))

    async def current_id(self):
        return self.events[-1].event_id

    async def next_events(self, after, limit):
        return [e for e in self.events if e.event_id > after][:limit]


@pytest.fixture
def opened(monkeypatch):
    """Every metadata file the change feed opens, through a FileIO that counts (the real one
    reads)."""
    from gateway.events import iceberg as module

    names: list[str] = []
    real = module.file_io

    class Counting:
        def __init__(self, io):
            self.io = io

        def new_input(self, location):
            names.append(location)
            return self.io.new_input(location)

    monkeypatch.setattr(module, "file_io", lambda properties, location: Counting(real(properties, location)))
    return names


def test_start_up_reads_no_metadata_file_of_the_logs_history(files, opened):
    """Issue 41: the feed keeps events as HMS logged them; a commit's metadata is read when a
    client is given the event, once, not for the whole log when the gateway starts."""
    from gateway.events.feed import ChangeFeed

    first, second = files
    log = History(first, second, commits=200)
    commits = IcebergCommits(IcebergCommitOptions())
    feed = ChangeFeed(log, ring_size=1000, details=commits.detailed)  # type: ignore[arg-type]

    async def scenario():
        await feed.poll_once()  # what start-up does: the whole history into the ring
        assert feed.ready and feed.latest_id == 202 and opened == []
        newest = await feed.wait_after(201, 0)  # a client following from now: the last commit only
        assert [e.event_id for e in newest] == [202] and newest[0].iceberg["snapshot-id"] == 7
        assert sorted(opened) == sorted([second, first])
        again, _ = await feed.wait_select(200, 0, 10, lambda e: True)  # a second client: remembered
        assert [e.iceberg is None for e in again] == [True, False] and again[1].iceberg == newest[0].iceberg
        assert len(opened) == 2
        replay = await feed.wait_after(0, 0, limit=5)  # a client replaying history asks for it
        assert [e.iceberg["error"].startswith("metadata file unreadable") for e in replay] == [True] * 5
        assert len(opened) == 2 + 5  # each commit's new file once (missing: no previous file read)

    asyncio.run(scenario())
    assert hcat.event_body(feed.ring.after(201, 1)[0]).get("iceberg") is None  # the ring holds the log as read


def test_concurrent_deliveries_of_a_commit_share_one_read(files, opened):
    first, second = files
    commits = IcebergCommits(IcebergCommitOptions())
    event = alter(iceberg(first), iceberg(second, first))
    plain = MetastoreEvent(6, 1, "CREATE_DATABASE", "sales", None, {"db": "sales"}, "json-0.2")

    async def deliveries():
        return await asyncio.gather(*(commits.detailed([event, plain]) for _ in range(8)))

    delivered = asyncio.run(deliveries())
    assert all(d[0].iceberg["snapshot-id"] == 7 and d[1].iceberg is None for d in delivered)
    assert sorted(opened) == sorted([second, first])
    assert hcat.event_body(delivered[0][0])["iceberg"] == delivered[0][0].iceberg
    assert "iceberg" not in hcat.event_body(delivered[0][1])


def test_the_service_body_filters_partition_summaries_per_user_and_types_selects_commits(files, tmp_path):
    from aiohttp.test_utils import make_mocked_request

    from gateway.policy import load_policy_file
    from gateway.policy.view import CatalogView
    from gateway.events.kind import EventStreamOptions, EventStreamService, _Query
    from tests.unit.test_events_stream import POLICY

    first, second = files
    commit = alter(iceberg(first), iceberg(second, first))
    commit = MetastoreEvent(commit.event_id, 1, "ALTER_TABLE", "sales", "orders", commit.message, "json-0.2",
                            asyncio.run(commit_body(commit, SnapshotReader(IcebergCommitOptions()))))
    service = object.__new__(EventStreamService)
    service.options, service.source = EventStreamOptions(), "/gateway/t/events"
    (tmp_path / "p.yaml").write_text(POLICY)
    alice = CatalogView(load_policy_file(tmp_path / "p.yaml"), "alice", frozenset())  # orders.customer denied
    assert service.body(commit)["iceberg"] == commit.iceberg
    filtered = service.body(commit, alice)["iceberg"]
    assert filtered["summary"] == {"operation": "append", "added-records": "3"} and filtered["snapshot-id"] == 7
    cloud = service.body(commit, None, cloudevents=True)
    assert cloud["data"]["iceberg"]["snapshot-id"] == 7 and cloud["type"].endswith("ALTER_TABLE")

    def query(types):
        request = make_mocked_request("GET", f"/gateway/t/events?types={types}")
        return _Query(request, 60, False, frozenset({"ALTER_TABLE", "CREATE_TABLE", "ICEBERG_COMMIT"}))

    plain_alter = MetastoreEvent(9, 1, "ALTER_TABLE", "sales", "orders", {}, "json-0.2")
    assert query("ICEBERG_COMMIT").matches(commit, "hcat") and not query("ICEBERG_COMMIT").matches(plain_alter, "hcat")
    assert query("alter_table").matches(commit, "hcat") and not query("CREATE_TABLE").matches(commit, "hcat")


def test_s3_metadata_files_are_read_with_the_gateways_key_from_a_file(tmp_path):
    """``options.iceberg.s3``: the key from a credentials file (never inline), ``file_io`` wins."""
    from gateway.events.iceberg import file_io_of
    from gateway.lakehouse.storage import S3Options

    (tmp_path / "s3.ini").write_text("[default]\naws_access_key_id = AKIAFEED\naws_secret_access_key = feed-secret\n")
    options = IcebergCommitOptions(s3=S3Options(endpoint="http://127.0.0.1:9000", credentials_file="s3.ini"),
                                   file_io={"s3.region": "eu-west-1"})
    props = file_io_of(options, tmp_path)
    assert (props["s3.access-key-id"], props["s3.secret-access-key"]) == ("AKIAFEED", "feed-secret")
    assert (props["s3.endpoint"], props["s3.region"]) == ("http://127.0.0.1:9000", "eu-west-1")
    assert "feed-secret" not in repr(options) and "feed-secret" not in repr(SnapshotReader(options, props).options)
    missing = IcebergCommitOptions(s3=S3Options(credentials_file="nope.ini"))
    with pytest.raises(ValueError) as refused:
        file_io_of(missing, tmp_path)
    assert refused.value.args[0] == "s3.credentials_file"
    assert file_io_of(IcebergCommitOptions(file_io={"a": "b"}), tmp_path) == {"a": "b"}
