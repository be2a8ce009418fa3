"""The spec check the Iceberg integration tests hook into every session: it passes what the
vendored spec allows and fails what it does not (so a passing integration test means something)."""

from __future__ import annotations

import json

import pytest

from tests.support.iceberg.spec import check, check_read_restrictions, spec_path

BASE = "https://gw:8443/gateway/default/iceberg"


def _error(code: int, kind: str) -> bytes:
    return json.dumps({"error": {"message": "m", "type": kind, "code": code}}).encode()


def test_paths_get_the_spec_s_prefix_but_config_and_tokens():
    assert spec_path(BASE + "/v1/namespaces/a/tables/b?snapshots=refs") == "/v1/prefix/namespaces/a/tables/b"
    assert spec_path(BASE + "/v1/config") == "/v1/config"
    assert spec_path(BASE + "/v1/oauth/tokens") == "/v1/oauth/tokens"


@pytest.mark.parametrize("method, path, status, body", [
    ("GET", "/v1/config", 200, json.dumps({"defaults": {}, "overrides": {}, "endpoints": []}).encode()),
    ("GET", "/v1/namespaces/a", 404, _error(404, "NoSuchNamespaceException")),
    ("POST", "/v1/transactions/commit", 204, b""),
    ("POST", "/v1/oauth/tokens", 401, json.dumps({"error": "invalid_client"}).encode()),
])
def test_what_the_spec_allows_passes(method, path, status, body):
    check(method, BASE + path, status, "application/json" if body else None, body)


@pytest.mark.parametrize("method, path, status, body, content_type", [
    ("GET", "/v1/namespaces/a", 404, json.dumps({"error": {"message": "m", "type": "X"}}).encode(), "application/json"),
    ("POST", "/v1/namespaces", 413, _error(413, "PayloadTooLargeException"), "application/json"),
    ("GET", "/v1/config", 200, json.dumps({"defaults": {}}).encode(), "application/json"),
    ("POST", "/v1/oauth/tokens", 401, _error(401, "NotAuthorizedException"), "application/json"),
    ("GET", "/v1/namespaces", 500, b"500 Internal Server Error", "text/plain"),
])
def test_what_the_spec_does_not_allow_fails(method, path, status, body, content_type):
    with pytest.raises(AssertionError, match="not what the spec allows"):
        check(method, BASE + path, status, content_type, body)


def test_a_view_error_is_checked_as_the_wrapped_error_model():
    # the spec types the view operations' 404 as a bare ErrorModel; clients read the wrapper
    check("GET", BASE + "/v1/namespaces/a/views/v", 404, "application/json", _error(404, "NoSuchViewException"))
    with pytest.raises(AssertionError, match="not what the spec allows"):
        check("GET", BASE + "/v1/namespaces/a/views/v", 404, "application/json",
              json.dumps({"error": {"message": "m", "type": "NoSuchViewException"}}).encode())
    with pytest.raises(AssertionError, match="not what the spec allows"):  # not for the others
        check("GET", BASE + "/v1/namespaces/a", 404, "application/json",
              json.dumps({"message": "m", "type": "NoSuchNamespaceException", "code": 404}).encode())


_EQ_US = {"type": "eq", "left": {"type": "reference", "id": 4}, "right": {"type": "literal", "value": "US"}}


def test_read_restrictions_the_spec_allows_pass():
    check_read_restrictions({"required-row-filter": _EQ_US,
                             "required-column-projections": [{"field-id": 3, "action": "show-last-4"}]})
    check_read_restrictions({"required-row-filter": False})
    check_read_restrictions({})


@pytest.mark.parametrize("restrictions, words", [
    ({"required-column-projections": [{"field-id": 3, "action": "apply-expression"}]}, "no action of the spec"),
    ({"required-column-projections": [{"field-id": 3}]}, "no action of the spec"),
    ({"required-column-projections": [{"action": "show-last-4"}]}, "'field-id' is a required property"),
    ({"required-column-projections": [{"field-id": 3, "action": "show-last-4"},
                                      {"field-id": 3, "action": "mask-alphanum"}]}, "projected twice"),
    ({"required-row-filter": {"type": "eq", "term": "location", "value": "US"}}, "other than by field id"),
    ({"required-row-filter": {"type": "not", "child": {**_EQ_US, "left": {"type": "reference", "name": "location"}}}},
     "other than by field id"),
    ({"required-row-filter": {"type": "eq", "left": {"type": "reference", "id": "4"}, "right": "US"}}, "not valid"),
])
def test_read_restrictions_the_spec_does_not_allow_fail(restrictions, words):
    with pytest.raises(AssertionError, match="not a ReadRestrictions the spec allows") as err:
        check_read_restrictions(restrictions)
    assert words in str(err.value)
