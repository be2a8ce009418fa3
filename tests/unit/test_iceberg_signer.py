"""The remote signer's checks of what it is asked to sign (gateway.iceberg.signer): hostile
URLs and headers are 400/403, nothing raises anything else."""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.iceberg import errors
from gateway.iceberg.service_state import Summaries
from gateway.iceberg.signer import MAX_HEADERS, check_headers, check_url, headers_to_sign, signed
from gateway.iceberg.storage import S3Options, split_location
from gateway.iceberg.vending import TemporaryCredentials

OPTIONS = S3Options(endpoint="http://127.0.0.1:9000")
TABLE = "s3://warehouse/lake/trips"
BASE = "http://127.0.0.1:9000/warehouse"


@pytest.mark.parametrize("uri, method", [
    (f"{BASE}/lake/trips/data/a.parquet", "GET"),
    (f"{BASE}/lake/trips/metadata/x.avro", "HEAD"),
    (f"{BASE}/lake/trips/data/b.parquet?uploads", "POST"),
    (f"{BASE}/lake/trips/data/b.parquet?uploadId=1&partNumber=2", "PUT"),
    (f"{BASE}?list-type=2&prefix=lake/trips/data/", "GET"),
    ("http://warehouse.127.0.0.1:9000/lake/trips/data/a.parquet", "GET"),  # virtual host
])
def test_signs_objects_and_listings_under_the_table(uri, method):
    check_url(uri, method, TABLE, OPTIONS)


@pytest.mark.parametrize("uri, status", [
    ("http://127.0.0.1:9000/otherbucket/lake/trips/data/a.parquet", 403),     # another bucket
    (f"{BASE}/lake/other/data/a.parquet", 403),                               # another table
    (f"{BASE}/lake/trips2/data/a.parquet", 403),                              # same start, other table
    (f"{BASE}/lake/trips/../other/a.parquet", 400),                           # dot segments
    (f"{BASE}/lake/trips/%2E%2E/other/a.parquet", 400),                       # encoded dot segments
    (f"{BASE}/lake/trips/a?X-Amz-Signature=00&X-Amz-Credential=k", 400),      # presigned URL
    (f"{BASE}/lake/trips/a?x-amz-expires=604800", 400),
    (f"{BASE}/lake/trips/a?acl", 403),                                        # not an object read/write
    (f"{BASE}/lake/trips/a?uploadId=1&uploadId=2", 400),                      # repeated parameter
    (f"{BASE}?delete", 403),                                                  # multi-object delete
    (f"{BASE}?list-type=2&prefix=lake/", 403),                                # listing outside
    (f"{BASE}?list-type=2", 403),
    ("http://evil.example:9000/warehouse/lake/trips/a", 403),                 # another host
    ("http://127.0.0.1:9001/warehouse/lake/trips/a", 403),                    # another port
    ("http://user:pw@127.0.0.1:9000/warehouse/lake/trips/a", 400),
    ("ftp://127.0.0.1:9000/warehouse/lake/trips/a", 400),
    ("http://127.0.0.1:99999/warehouse/lake/trips/a", 400),
    (f"{BASE}/lake/trips/%ff", 400),
])
def test_refuses_what_is_not_under_the_table(uri, status):
    with pytest.raises(errors.IcebergError) as caught:
        check_url(uri, "GET", TABLE, OPTIONS)
    assert caught.value.status == status


@given(st.text(max_size=300), st.sampled_from(["GET", "PUT", "DELETE", "HEAD", "POST"]))
def test_any_uri_is_signed_or_refused_with_400_or_403(uri, method):
    try:
        check_url(uri, method, TABLE, OPTIONS)
    except errors.IcebergError as error:
        assert error.status in (400, 403)
    else:
        assert "/warehouse/lake/trips/" in uri or "warehouse.127.0.0.1:9000/lake/trips/" in uri


def test_headers_are_bounded_and_the_clients_credentials_dropped():
    given_headers = {"Host": ["h"], "Authorization": ["AWS4 forged"], "X-Amz-Security-Token": ["t"],
                     "X-Amz-Date": ["d"], "Range": ["bytes=0-9"]}
    assert headers_to_sign(given_headers) == {"range": "bytes=0-9"}  # Host too: the URL's host is signed
    for hostile in ({f"h{i}": ["v"] for i in range(MAX_HEADERS + 1)}, {"h": ["v" * 20_000]},
                    {"bad name": ["v"]}, {"h": ["a\r\nInjected: 1"]}):
        with pytest.raises(errors.IcebergError) as caught:
            headers_to_sign(hostile)
        assert caught.value.status == 400


def test_allowed_signings_write_one_line_per_window():
    summaries = Summaries()
    key = ("analyst", "lake", "trips", "select")
    assert summaries.allowed(key) == 0
    assert [summaries.allowed(key) for _ in range(5)] == [None] * 5
    assert summaries.allowed(("analyst", "lake", "other", "select")) == 0


def test_split_location():
    assert split_location("s3://b/a/t/") == ("b", "a/t/")
    assert split_location("s3a://b") == ("b", "")
    with pytest.raises(ValueError):
        split_location("file:///tmp/x")


_KEY_CHARS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@given(_KEY_CHARS, st.sampled_from(["GET", "PUT", "DELETE", "HEAD"]),
       st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,20}", fullmatch=True),
                       st.lists(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30),
                                min_size=1, max_size=2), max_size=5))
def test_whatever_passes_the_checks_is_signed_without_error(name, method, given_headers):
    uri = f"{BASE}/lake/trips/data/{quote(name, safe='')}"
    try:
        check_url(uri, method, TABLE, OPTIONS)
        headers = headers_to_sign(given_headers)
    except errors.IcebergError as error:
        assert error.status in (400, 403)
        return
    credentials = TemporaryCredentials("ASIATEMP", "secret", "token", datetime.now(timezone.utc))
    answer = signed(method, uri, headers, credentials, "us-east-1")
    assert answer["uri"] == uri and answer["headers"]["Authorization"][0].startswith("AWS4-HMAC-SHA256 ")
    assert "secret" not in str(answer["headers"])  # the uri is the client's own (a key may be named so)


@pytest.mark.parametrize("source", [
    "/warehouse/lake/trips/data/a.parquet", "warehouse/lake/trips/data/a.parquet",
    "/warehouse/lake/trips/data/a.parquet?versionId=3", "/warehouse/lake/trips/data/a%20b.parquet",
])
def test_a_copy_inside_the_table_is_signed(source):
    check_headers(headers_to_sign({"x-amz-copy-source": [source]}), "PUT", TABLE)


@pytest.mark.parametrize("source, method", [
    ("/warehouse/lake/other/data/a.parquet", "PUT"),       # another table
    ("/warehouse/lake/trips2/data/a.parquet", "PUT"),      # same start, other table
    ("/otherbucket/lake/trips/data/a.parquet", "PUT"),     # another bucket
    ("/warehouse/lake/trips/../other/a.parquet", "PUT"),   # dot segments
    ("/warehouse/lake/trips/%2E%2E/other/a", "PUT"),
    ("/warehouse/lake/trips/a%FF", "PUT"),                 # not UTF-8
    ("/warehouse/lake/trips/data/a.parquet", "POST"),      # a copy is a PUT
    ("", "PUT"),
])
def test_a_copy_from_outside_the_table_is_refused(source, method):
    with pytest.raises(errors.Forbidden):
        check_headers(headers_to_sign({"x-amz-copy-source": [source]}), method, TABLE)


@pytest.mark.parametrize("name", ["x-amz-acl", "X-Amz-Grant-Read", "x-amz-grant-full-control",
                                  "x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date"])
def test_acl_and_object_lock_headers_are_refused(name):
    with pytest.raises(errors.Forbidden):
        check_headers(headers_to_sign({name: ["public-read"]}), "PUT", TABLE)


def test_a_clients_host_header_is_not_signed():
    """botocore signs a Host header it is given in place of the URL's: a virtual-host Host made
    a path-style signature for /warehouse/lake/trips/x valid for key warehouse/lake/trips/x."""
    assert headers_to_sign({"Host": ["warehouse.127.0.0.1:9000"], "User-Agent": ["t"]}) == {"user-agent": "t"}
