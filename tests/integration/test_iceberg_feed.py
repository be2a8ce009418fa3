"""Iceberg commits on the change feed (issue 22 item 7), end to end: a real HMS 2.3 with the
project's listener (which adds the acting user to each message), the real gateway serving an
``iceberg-rest`` and an ``event-stream`` service, commits through the gateway (PyIceberg's
``RestCatalog`` as etl) and directly (PyIceberg's ``HiveCatalog`` with ``ugi``), then the feed
read by long poll: each commit's ``ALTER_TABLE`` carries the snapshot the table now has."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from tests.support.feed import EVENTS_PATH, PASSWORD, POLICY, auth, events_service
from tests.support.gateway import RunningGateway
from tests.support.iceberg.clients import rest_catalog
from tests.support.policy import POLICY_FILE, POLICY_PATH

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory) -> RunningGateway:
    """The REST catalog (no policy) and the feed under the feed tests' policy: alice sees feeddb
    only, admin everything."""
    feed = {**events_service(module_hms), "policy_file": POLICY_PATH}
    rest = {"path": "iceberg", "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
            "options": {"lock_check_min_wait_seconds": 0.02}}
    return module_gateway_factory(services=[rest, feed], files={POLICY_FILE: POLICY},
                                  users={"etl": PASSWORD, "alice": PASSWORD, "admin": PASSWORD})


def _poll(gw: RunningGateway, user: str, **query) -> dict:
    url = gw.url(path=EVENTS_PATH) + "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(urllib.request.Request(url, headers=auth(user)), context=gw.ssl_context(),
                                timeout=60) as response:
        return json.loads(response.read())


def _commits(gw: RunningGateway, user: str, after: int, count: int) -> list[dict]:
    """The Iceberg commit events after ``after`` the user receives, waiting for ``count``."""
    found: list[dict] = []
    deadline = time.monotonic() + 60
    while len(found) < count and time.monotonic() < deadline:
        page = _poll(gw, user, after=after, types="ICEBERG_COMMIT", wait=2)
        found += page["events"]
        after = page["next"]
    return found


def test_commits_through_the_gateway_and_directly_appear_with_snapshot_operation_and_user(gw, module_hms):
    start = _poll(gw, "admin")["next"]  # follow from now
    rest = rest_catalog(gw, user="etl", password=PASSWORD)
    rest.create_namespace("feeddb")
    through_gateway = rest.create_table("feeddb.rest_t", schema=SCHEMA)
    through_gateway.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    through_gateway = rest.load_table("feeddb.rest_t")

    hive = HiveCatalog("hms", uri=module_hms.uri, warehouse=module_hms.warehouse_dir.as_uri(), ugi="spark_job:etl")
    hive.create_namespace("lake")
    direct = hive.create_table("lake.direct_t", schema=SCHEMA)
    direct.append(pa.table({"id": pa.array([4, 5], pa.int64())}))
    direct.refresh()

    events = _commits(gw, "admin", start, 2)
    assert [(e["eventType"], e["db"], e["table"]) for e in events] == [
        ("ALTER_TABLE", "feeddb", "rest_t"), ("ALTER_TABLE", "lake", "direct_t")]
    for event, table, user in ((events[0], through_gateway, "etl"), (events[1], direct, "spark_job")):
        commit = event["iceberg"]
        snapshot = table.current_snapshot()
        assert commit["identifier"] == {"namespace": [event["db"]], "name": event["table"]}
        assert commit["snapshot-id"] == snapshot.snapshot_id and commit["new-snapshot"] is True
        assert commit["operation"] == "append" == commit["summary"]["operation"]
        assert commit["summary"]["added-records"] == snapshot.summary["added-records"]
        assert commit["metadata-location"] == table.metadata_location
        assert commit["previous-metadata-location"] == table.metadata.metadata_log[-1].metadata_file
        assert commit["user"] == user and "error" not in commit

    # Per-user delivery: alice sees feeddb only, so only the commit through the gateway.
    assert [e["table"] for e in _commits(gw, "alice", start, 1)] == ["rest_t"]
    # CloudEvents carry the same member in data.
    cloud = _poll(gw, "admin", after=start, types="ICEBERG_COMMIT", format="cloudevents")["events"]
    assert [c["data"]["iceberg"]["snapshot-id"] for c in cloud] == [e["iceberg"]["snapshot-id"] for e in events]
    assert cloud[0]["type"] == "org.apache.hive.metastore.ALTER_TABLE"


def test_a_restarted_gateway_reads_the_metadata_of_past_commits_only_when_a_client_asks(
        gw, module_hms, module_gateway_factory):
    """Issue 41: start-up does no work proportional to the log's history. A commit of a table
    whose metadata files are gone since (purged) is still in HMS's log; a gateway started after
    it reads no metadata file for it until a client asks for that event."""
    hive = HiveCatalog("hms", uri=module_hms.uri, warehouse=module_hms.warehouse_dir.as_uri(), ugi="spark_job:etl")
    hive.create_namespace("purged")
    table = hive.create_table("purged.gone_t", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    metadata = Path(urllib.parse.urlsplit(table.metadata_location).path).parent
    gone = metadata.with_name("metadata-gone")
    metadata.rename(gone)
    try:
        before = len(gw.log())
        again = module_gateway_factory.restart(gw)
        _poll(again, "admin")  # answers once the feed has read HMS's log (history backfilled)
        assert "metadata file unreadable" not in again.log()[before:]
        commits = [e for e in _poll(again, "admin", after=0, types="ICEBERG_COMMIT")["events"]
                   if e["table"] == "gone_t"]
        assert commits and all(e["iceberg"]["error"].startswith("metadata file unreadable") for e in commits)
        assert again.log()[before:].count("metadata file unreadable") == len(commits)  # once each, when asked
    finally:
        gone.rename(metadata)
