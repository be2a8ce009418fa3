"""Keyset paging tokens (gateway.paging), which Glue's NextToken and Iceberg REST's pageToken
both use: pages follow each other without repeats, resume after their key when the listing
changed, and a token that does not decode or names another listing is InvalidPageToken."""

from __future__ import annotations

import base64
import json

import pytest

from gateway.paging import InvalidPageToken, page


def test_pages_follow_each_other_without_repeats_and_the_last_has_no_token():
    names = [f"t{i:03d}" for i in range(25)][::-1]
    seen, token = [], None
    while True:
        chosen, token = page(names, str.lower, operation="GetTables", scope=["db"], token=token, limit=10)
        seen += chosen
        if token is None:
            break
    assert seen == sorted(names)


def test_a_page_resumes_after_its_key_when_the_listing_changed():
    chosen, token = page(["a", "b", "c", "d"], str.lower, operation="GetTables", scope=[], token=None, limit=2)
    assert chosen == ["a", "b"]
    assert page(["b", "c", "d", "aa"], str.lower, operation="GetTables", scope=[], token=token, limit=2)[0] == ["c", "d"]


def test_partition_values_are_keys_too():
    parts = [["2024", "02"], ["2024", "01"], ["2023", "12"]]
    chosen, token = page(parts, list, operation="GetPartitions", scope=["db", "t"], token=None, limit=2)
    assert chosen == [["2023", "12"], ["2024", "01"]]
    assert page(parts, list, operation="GetPartitions", scope=["db", "t"], token=token, limit=2) == ([["2024", "02"]], None)


def _forged(after) -> str:
    raw = json.dumps({"op": "GetTables", "scope": [], "after": after}).encode()
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.parametrize("token", ["", "%%%", "bm90IGpzb24=", 7, "x" * 9000, _forged(["a", "list"]), "é"])
def test_tokens_that_do_not_decode_are_invalid(token):
    with pytest.raises(InvalidPageToken, match="^invalid page token$"):
        page(["a"], str.lower, operation="GetTables", scope=[], token=token, limit=1)


def test_a_token_of_another_listing_is_invalid():
    _, token = page(["a", "b"], str.lower, operation="GetTables", scope=["sales"], token=None, limit=1)
    with pytest.raises(InvalidPageToken, match="another request"):
        page(["a", "b"], str.lower, operation="GetTables", scope=["finance"], token=token, limit=1)
    with pytest.raises(InvalidPageToken, match="another request"):
        page(["a", "b"], str.lower, operation="GetDatabases", scope=["sales"], token=token, limit=1)
