"""gateway.client.connection without a network: URL and option checks, and how HTTP statuses
become GatewayError subclasses."""

from __future__ import annotations

import pytest
from urllib3 import HTTPHeaderDict

from gateway.client import BasicAuth, connect
from gateway.client.connection import (
    AccessDenied,
    AuthenticationFailed,
    GatewayError,
    GatewayUnavailable,
    _error_for,
)

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
