"""The metadata cache under the Glue and Iceberg REST kinds (issue 24: "the Glue and Iceberg
kinds benefit without code of their own"), against a real HMS: their reads hit, their answers
equal fresh ones, a write through any kind is read at once through the others, an external
writer's change is seen after the follower's next poll, commits read HMS itself; and a proxied
call whose upstream call failed keeps nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog

from tests.support.gateway import audit_record, post, service, wait_for
from tests.support.iceberg.clients import call, rest_catalog
from tests.support.relay import TcpRelay

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

POLL = 0.5
USER, PASSWORD = "etl", "etl-password"
NS = "cached_kinds"
HIT = "hms-gateway; hit"


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory):
    cache = {"enabled": True, "poll_interval_seconds": POLL}
    upstream = {"urls": [module_hms.uri]}
    return module_gateway_factory(services=[
        {"kind": "glue", "path": "glue", "upstream": upstream, "options": {"cache": cache}},
        {"kind": "iceberg-rest", "path": "iceberg", "upstream": upstream,
         "options": {"cache": cache, "lock_check_min_wait_seconds": 0.02}},
    ], users={USER: PASSWORD})


@pytest.fixture(scope="module")
def rest(gw) -> RestCatalog:
    catalog = rest_catalog(gw, user=USER, password=PASSWORD)
    catalog.create_namespace(NS)
    table = catalog.create_table(f"{NS}.trips", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    return catalog


def _glue(gw, target: str, payload: dict) -> requests.Response:
    return call(gw, "POST", "", payload, service="glue", auth=(USER, PASSWORD), validate=False,  # not Iceberg
                headers={"X-Amz-Target": f"AWSGlue.{target}", "Content-Type": "application/x-amz-json-1.1"})


def _following(ask):
    """``ask()``'s answer once the cache follows HMS's log (before, it forwards: ``fwd=bypass``)."""
    def answered():
        answer = ask()
        return [answer] if answer.headers.get("Cache-Status") != "hms-gateway; fwd=bypass" else None
    return wait_for(answered)[0]  # in a list: an error answer is false


def _hit(ask):
    """``ask()``'s first answer served from the cache. Events of earlier writes still on their
    way through the notification log may drop an entry once more (``fwd=stale``: the cache errs
    on the side of HMS), so a hit is waited for, not assumed."""
    def hit():
        answer = ask()
        return [answer] if _headers(answer).get("Cache-Status") == HIT else None
    return wait_for(hit)[0]


def _headers(answer: requests.Response | tuple) -> dict:
    """The headers of an answer of :func:`call` or of a ``post`` triple ``(status, headers, body)``."""
    return answer.headers if isinstance(answer, requests.Response) else answer[1]


def _load(gw, table: str = "trips") -> requests.Response:
    return call(gw, "GET", f"/v1/namespaces/{NS}/tables/{table}", auth=(USER, PASSWORD))


def test_glue_reads_hit_and_equal_fresh_answers(gw, rest):
    first = _following(lambda: _glue(gw, "GetTable", {"DatabaseName": NS, "Name": "trips"}))
    assert first.status_code == 200
    again = _hit(lambda: _glue(gw, "GetTable", {"DatabaseName": NS, "Name": "trips"}))
    assert again.status_code == 200
    assert again.json() == first.json()
    assert audit_record(gw, again.headers["X-Request-Id"])["cache"] == "hit"
    # a missing table is Glue's error, and HMS's exception is not kept
    for _ in range(2):
        missing = _glue(gw, "GetTable", {"DatabaseName": NS, "Name": "nope"})
        assert missing.status_code == 400 and missing.json()["__type"] == "EntityNotFoundException"
        assert missing.headers["Cache-Status"] == "hms-gateway; fwd=miss"


def test_iceberg_loads_hit_and_a_commit_is_read_at_once_by_both_kinds(gw, rest):
    cached = _hit(lambda: _load(gw))
    assert cached.status_code == 200
    _hit(lambda: _glue(gw, "GetTables", {"DatabaseName": NS}))  # Glue's listing is cached too

    table = rest.load_table(f"{NS}.trips")
    table.append(pa.table({"id": [3]}))  # a commit through the gateway
    rest.create_table(f"{NS}.fares", schema=pa.schema([("id", pa.int64())]))

    answer = _load(gw)  # no wait: the commit dropped the entries before its reply
    assert answer.status_code == 200 and answer.headers["Cache-Status"].startswith("hms-gateway; fwd=")
    loaded = answer.json()
    assert loaded["metadata-location"] != cached.json()["metadata-location"]
    assert len(loaded["metadata"]["snapshots"]) == 2
    names = [t["Name"] for t in _glue(gw, "GetTables", {"DatabaseName": NS}).json()["TableList"]]
    assert sorted(names) == ["fares", "trips"]


def test_a_commit_reads_hms_itself(gw, rest):
    """A commit's reads never come from the cache: ``fwd=method``, whatever is cached."""
    _hit(lambda: _load(gw))
    table = rest.load_table(f"{NS}.trips")
    body = {"requirements": [{"type": "assert-current-schema-id",
                              "current-schema-id": table.metadata.current_schema_id}],
            "updates": [{"action": "set-properties", "updates": {"owner-team": "cache"}}]}
    answer = call(gw, "POST", f"/v1/namespaces/{NS}/tables/trips", body, auth=(USER, PASSWORD))
    assert answer.status_code == 200, answer.content
    assert answer.headers["Cache-Status"] == "hms-gateway; fwd=method"
    assert audit_record(gw, answer.headers["X-Request-Id"])["cache"] == "method"
    assert _load(gw).json()["metadata"]["properties"]["owner-team"] == "cache"


def test_an_external_commit_is_seen_after_the_next_poll(gw, rest, hive_catalog):
    before = _hit(lambda: _load(gw)).json()["metadata-location"]
    hive = hive_catalog
    hive.load_table(f"{NS}.trips").append(pa.table({"id": [4]}))  # straight to HMS
    after = hive.load_table(f"{NS}.trips").metadata_location
    assert after != before
    seen = wait_for(lambda: (lambda answer: answer.json()["metadata-location"] == after and answer.headers)(_load(gw)))
    assert seen["Cache-Status"].startswith("hms-gateway; fwd=")  # the entry was dropped, not served


def test_a_failed_upstream_call_keeps_nothing(module_hms, gateway_factory):
    relay = TcpRelay(("127.0.0.1", module_hms.port)).start()
    try:
        svc = service([f"thrift://127.0.0.1:{relay.port}"], ["get_all_tables", "get_all_databases"],
                      connect_timeout_seconds=2)
        # a long poll interval: the follower stays fresh while the relay is down
        svc["options"]["cache"] = {"enabled": True, "poll_interval_seconds": 60}
        gw = gateway_factory(services=[svc])
        body = '[1,"get_all_tables",1,0,{"1":{"str":"default"}}]'
        _hit(lambda: post(gw, body))
        relay.stop()
        listing = '[1,"get_all_databases",1,0,{}]'
        status, headers, _ = post(gw, listing)
        assert status >= 500
        assert headers["Cache-Status"] == "hms-gateway; fwd=miss"  # no "stored"
        relay.start()
        status, headers, _ = post(gw, listing)
        assert (status, headers["Cache-Status"]) == (200, "hms-gateway; fwd=miss; stored")  # nothing was kept
        assert post(gw, listing)[1]["Cache-Status"] == HIT
        assert post(gw, body)[1]["Cache-Status"] == HIT  # what was kept before the outage still is
    finally:
        relay.stop()
