"""hms_gateway_client.connection without the gateway: URL and option checks, how HTTP statuses
become GatewayError subclasses, and events() against a local HTTPS server that follows the
event-stream service's documented long-poll contract."""

from __future__ import annotations

import pytest
from urllib3 import HTTPHeaderDict

from hms_gateway_client import BasicAuth, ResyncRequired, connect, events
from hms_gateway_client.connection import (
    AccessDenied,
    AuthenticationFailed,
    GatewayError,
    GatewayUnavailable,
    _error_for,
)
from tests.support.fake_feed import FeedHandler

URL = "https://gw.example:8443/gateway/default/hms"


def test_error_for_401_carries_every_challenge():
    headers = HTTPHeaderDict()
    headers.add("WWW-Authenticate", 'Basic realm="HMS Gateway"')
    headers.add("WWW-Authenticate", "Negotiate")
    error = _error_for(401, "no valid credentials", URL, headers)
    assert type(error) is AuthenticationFailed
    assert error.challenges == ['Basic realm="HMS Gateway"', "Negotiate"]
    assert str(error) == f"HTTP 401 from {URL}: no valid credentials"


@pytest.mark.parametrize("status, cls", [(403, AccessDenied), (502, GatewayUnavailable), (504, GatewayUnavailable),
                                         (404, GatewayError), (429, GatewayError)])
def test_error_for_status_classes(status, cls):
    error = _error_for(status, "why", URL, HTTPHeaderDict())
    assert type(error) is cls and error.status == status and error.reason == "why"
    assert error.retry_after is None


def test_retry_after_seconds_are_kept_and_a_date_is_ignored():
    assert _error_for(503, "busy", URL, HTTPHeaderDict({"Retry-After": "2"})).retry_after == 2.0
    dated = _error_for(503, "busy", URL, HTTPHeaderDict({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}))
    assert dated.retry_after is None


@pytest.mark.parametrize("url, reason", [
    ("http://gw.example/gateway/default/hms", "expected an https:// gateway URL"),
    ("https://alice:secret@gw.example/gateway/default/hms", "credentials do not belong in the URL"),
    ("thrift://gw.example:9083", "expected an https:// gateway URL"),
])
def test_bad_urls_are_refused(url, reason):
    with pytest.raises(ValueError, match=reason) as info:
        connect(url, auth=BasicAuth("alice", "pw"))
    assert "secret" not in str(info.value)


def test_unknown_protocol_is_refused():
    with pytest.raises(ValueError, match="protocol must be one of binary, tjson"):
        connect(URL, protocol="compact")


def test_client_is_typed_from_the_bundled_idl_and_sends_nothing_before_a_call():
    with connect(URL, auth=BasicAuth("alice", "pw")) as client:
        assert "get_table" in dir(client) and "get_partitions" in dir(client)
        assert client.types.Table.__name__ == "Table"
        assert client.transport._pool.num_connections == 0


def test_events_follow_the_long_poll_until_a_resync(feed_server):
    url, ca = feed_server
    got = []
    with pytest.raises(ResyncRequired) as info:
        for event in events(url, auth=BasicAuth("alice", "pw"), ca=ca, wait=2, db="sales", types=["CREATE_TABLE"]):
            got.append(event["eventId"])
    assert got == [6, 7]
    assert (info.value.status, info.value.cause, info.value.latest) == (410, "trimmed", 12)
    assert info.value.reason == "events after 9 are gone"
    positions = [q.get("after") for q in FeedHandler.seen]
    assert positions == [None, None, "5", "7", "9"]  # the 503 was retried, then next after next
    assert all(q["wait"] == "2" and q["db"] == "sales" and q["types"] == "CREATE_TABLE" for q in FeedHandler.seen)
    assert FeedHandler.seen[0]["authorization"].startswith("Basic ")


def test_events_resume_after_a_given_id(feed_server):
    url, ca = feed_server
    FeedHandler.seen = [{}]  # ready at once
    stream = events(url, ca=ca, after=5)
    assert [next(stream)["eventId"], next(stream)["eventId"]] == [6, 7]
    stream.close()
    assert FeedHandler.seen[1]["after"] == "5" and FeedHandler.seen[1]["authorization"] is None
