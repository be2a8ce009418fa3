"""Storage access of the ``iceberg-rest`` kind against a real S3/STS/IAM API server (moto in
server mode with IAM authentication on, tests/support/s3.py): the gateway's key from a
credentials file, vended credentials from STS ``AssumeRole``, and remote signing with botocore,
each checked by the server itself. moto checks signatures, keys, session tokens and the role's
own policy; demo/moto_iam.py, which the server runs as, adds the session policy the
gateway sends, the credentials' expiry and a copy's source, so what a vended key or a signature
reaches is checked by the server too."""

from __future__ import annotations

import json
import signal
from functools import partial
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from gateway.iceberg.signer import check_url, headers_to_sign, signed
from gateway.lakehouse.storage import S3Options, load_storage
from gateway.iceberg.vending import Vendor, session_policy, vended_config
from tests.support.gateway import RunningGateway, in_workdir
from tests.support.hms import RunningHMS, start_hms
from tests.support.iceberg.clients import ETL_ALL_POLICY, call, rest_catalog
from tests.support.s3 import BUCKET, REGION, RunningS3, start_s3

pytestmark = pytest.mark.integration

TABLE = f"s3://{BUCKET}/lake/trips"
OTHER_TABLE = f"s3://{BUCKET}/lake/other"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningS3]:
    running = start_s3(tmp_path_factory.mktemp("s3") / "moto.log")
    try:
        gateway = running.client("s3")
        for key in ("lake/trips/data/a.parquet", "lake/other/data/b.parquet"):
            gateway.put_object(Bucket=BUCKET, Key=key, Body=b"parquet bytes")
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def vendor(s3: RunningS3, tmp_path_factory: pytest.TempPathFactory) -> Vendor:
    directory = tmp_path_factory.mktemp("gateway")
    s3.credentials_file(directory / "s3.ini")
    options = S3Options(endpoint=s3.endpoint, region=REGION, credentials_file="s3.ini",
                        role_arn=s3.role_arn, credentials_expiry_seconds=900)
    return Vendor(load_storage(options, directory))


def _code(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_the_server_checks_what_the_tests_rely_on(s3: RunningS3):
    assert _code(lambda: s3.client("s3", s3.access_key, "wrong").get_object(Bucket=BUCKET, Key="x")) \
        == "SignatureDoesNotMatch"
    assert _code(lambda: s3.client("s3", "AKIAUNKNOWNKEY000000", "s").list_buckets()) == "InvalidAccessKeyId"
    assert _code(lambda: s3.client("s3").create_bucket(Bucket="notallowed")) == "AccessDenied"


async def test_vended_credentials_read_the_table_and_are_not_the_gateways_key(s3: RunningS3, vendor: Vendor):
    found = await vendor.credentials(TABLE, write=False, user="analyst")
    assert found.access_key != s3.access_key and found.secret_key != s3.secret_key and found.token
    config = vended_config(vendor.storage, found)
    assert s3.access_key not in str(config) and s3.secret_key not in str(config)
    assert config["s3.endpoint"] == s3.endpoint and int(config["s3.session-token-expires-at-ms"]) > 0
    client = s3.client("s3", found.access_key, found.secret_key, found.token)
    body = client.get_object(Bucket=BUCKET, Key="lake/trips/data/a.parquet")["Body"].read()
    assert body == b"parquet bytes"
    # what the server enforces on them: the session token, and the role's own policy
    assert _code(lambda: s3.client("s3", found.access_key, found.secret_key, "forged").get_object(
        Bucket=BUCKET, Key="lake/trips/data/a.parquet")) == "InvalidToken"
    assert _code(lambda: client.create_bucket(Bucket="anotherbucket")) == "AccessDenied"


async def test_credentials_refresh_with_a_new_session(vendor: Vendor):
    first = await vendor.credentials(TABLE, write=False, user="analyst")
    second = await vendor.credentials(TABLE, write=False, user="analyst")
    assert first.access_key != second.access_key and second.expiration >= first.expiration


async def test_the_server_holds_vended_credentials_to_the_table_prefix(s3: RunningS3, vendor: Vendor):
    """moto alone let a key vended for lake/trips read, list, write and delete the whole bucket
    (it keeps the session policy without evaluating it); the server now refuses all of that."""
    s3.client("s3").put_object(Bucket=BUCKET, Key="lake/trips2/data/c.parquet", Body=b"sibling")

    async def client(write: bool):
        found = await vendor.credentials(TABLE, write=write, user="analyst")
        return s3.client("s3", found.access_key, found.secret_key, found.token)

    read, write = await client(False), await client(True)
    own, other, sibling = "lake/trips/data/a.parquet", "lake/other/data/b.parquet", "lake/trips2/data/c.parquet"
    assert read.get_object(Bucket=BUCKET, Key=own)["Body"].read() == b"parquet bytes"
    assert [o["Key"] for o in read.list_objects_v2(Bucket=BUCKET, Prefix="lake/trips/")["Contents"]] == [own]
    for key in (other, sibling):
        assert _code(lambda: read.get_object(Bucket=BUCKET, Key=key)) == "AccessDenied"
        assert _code(lambda: write.put_object(Bucket=BUCKET, Key=key, Body=b"x")) == "AccessDenied"
        assert _code(lambda: write.delete_object(Bucket=BUCKET, Key=key)) == "AccessDenied"
        assert _code(lambda: write.create_multipart_upload(Bucket=BUCKET, Key=key)) == "AccessDenied"
    for prefix in ({}, {"Prefix": "lake/"}, {"Prefix": "lake/trips"}):  # root, namespace, trips2 too
        assert _code(lambda: read.list_objects_v2(Bucket=BUCKET, **prefix)) == "AccessDenied"
    assert _code(lambda: read.put_object(Bucket=BUCKET, Key="lake/trips/data/n", Body=b"x")) == "AccessDenied"
    assert _code(lambda: read.delete_object(Bucket=BUCKET, Key=own)) == "AccessDenied"
    write.put_object(Bucket=BUCKET, Key="lake/trips/data/n", Body=b"x")
    write.copy_object(Bucket=BUCKET, Key="lake/trips/data/copy", CopySource=f"{BUCKET}/{own}")
    assert _code(lambda: write.copy_object(Bucket=BUCKET, Key="lake/trips/data/stolen",
                                           CopySource=f"{BUCKET}/{other}")) == "AccessDenied"
    gone = write.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": other}]})
    assert [e["Code"] for e in gone["Errors"]] == ["AccessDenied"]
    assert s3.client("s3").get_object(Bucket=BUCKET, Key=other)["Body"].read() == b"parquet bytes"
    for key in ("lake/trips/data/n", "lake/trips/data/copy"):
        write.delete_object(Bucket=BUCKET, Key=key)


def test_the_server_refuses_expired_temporary_credentials(s3: RunningS3):
    """STS's minimum lifetime is 900 s (botocore checks it): a session of 1 s asked for without
    botocore's validation expires while the test waits, and the server then refuses its key."""
    import botocore.session
    from botocore.config import Config

    sts = botocore.session.Session().create_client(
        "sts", endpoint_url=s3.endpoint, region_name=REGION, aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key, config=Config(parameter_validation=False))
    found = sts.assume_role(RoleArn=s3.role_arn, RoleSessionName="short", DurationSeconds=1,
                            Policy=json.dumps(session_policy(TABLE, write=False)))["Credentials"]
    client = s3.client("s3", found["AccessKeyId"], found["SecretAccessKey"], found["SessionToken"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client.get_object(Bucket=BUCKET, Key="lake/trips/data/a.parquet")
        except ClientError as error:
            assert error.response["Error"]["Code"] == "AccessDenied"
            return
        time.sleep(0.2)
    raise AssertionError("an expired session still read the table")


async def test_a_signed_request_is_accepted_by_the_server(s3: RunningS3, vendor: Vendor):
    url = f"{s3.endpoint}/{BUCKET}/lake/trips/data/a.parquet"
    check_url(url, "GET", TABLE, vendor.storage.options)
    credentials = await vendor.signing_credentials(TABLE, write=False)
    assert await vendor.signing_credentials(TABLE, write=False) is credentials  # reused
    answer = signed("GET", url, headers_to_sign({"User-Agent": ["test"]}), credentials, REGION)
    assert set(answer["headers"]) == {"Authorization", "X-Amz-Date", "X-Amz-Security-Token",
                                      "X-Amz-Content-SHA256"}
    assert s3.access_key not in str(answer)
    request = urllib.request.Request(answer["uri"], headers={"User-Agent": "test", **{
        name: values[0] for name, values in answer["headers"].items()}})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.read() == b"parquet bytes"
    # the same signature on another key is refused by the server
    tampered = urllib.request.Request(answer["uri"].replace("a.parquet", "b.parquet"), headers=request.headers)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(tampered, timeout=10)
    assert caught.value.code == 403


def test_missing_gateway_key_names_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    with pytest.raises(ValueError) as caught:
        load_storage(S3Options(), tmp_path)
    assert caught.value.args[0] == "s3.credentials_file"
    with pytest.raises(ValueError) as caught:
        load_storage(S3Options(credentials_file="missing.ini"), tmp_path)
    assert caught.value.args[0] == "s3.credentials_file" and "missing.ini" in caught.value.args[1]
    (tmp_path / "c.ini").write_text("[other]\naws_access_key_id = A\naws_secret_access_key = B\n")
    with pytest.raises(ValueError) as caught:
        load_storage(S3Options(credentials_file="c.ini"), tmp_path)
    assert caught.value.args[0] == "s3.profile"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
    assert "envsecret" not in repr(load_storage(S3Options(), tmp_path))


def test_the_gateway_s_file_io_never_replaces_an_s3_object_and_reads_with_its_own_key(
        s3: RunningS3, vendor: Vendor, monkeypatch: pytest.MonkeyPatch):
    """The gateway's FileIO (gateway/lakehouse/file_io.py, s3fs) with the service's key: a create
    of a taken name is refused by its existence check and, when a writer got past the check,
    by the server itself (``If-None-Match: *``); reads, ``s3a``/``s3n`` forms, deletes of one
    object and of a missing one (``FileNotFoundError``, as PyArrow's FileIO); a file read whole
    in one ``GetObject``; no pyarrow."""
    from gateway.lakehouse.file_io import ExclusiveOutputFile, GatewayFileIO, file_io

    location = f"s3://{BUCKET}/lake/trips/metadata/00001-file-io.metadata.json"
    io = file_io(vendor.storage.file_io(), location)
    assert isinstance(io, GatewayFileIO) and "pyarrow" not in type(io).__module__
    with io.new_output(location).create() as stream:
        stream.write(b"first commit")
    with pytest.raises(FileExistsError):
        io.new_output(location).create()
    monkeypatch.setattr(ExclusiveOutputFile, "exists", lambda self: False)  # past the check
    with pytest.raises(FileExistsError):
        with io.new_output(location).create() as stream:
            stream.write(b"second commit")
    monkeypatch.undo()
    key = "lake/trips/metadata/00001-file-io.metadata.json"
    assert s3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"first commit"
    for form in (location, location.replace("s3://", "s3a://"), location.replace("s3://", "s3n://")):
        found = file_io(vendor.storage.file_io(), form).new_input(form)
        assert found.exists() and len(found) == 12 and found.open().read() == b"first commit"
    # issue 50: a file read whole (manifests) takes one request, where a stream asks its size first
    calls: list[str] = []
    io.whole.new_input(location)._fs.s3.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    assert io.whole.new_input(location).open().read() == b"first commit" and calls == ["GetObject"]
    assert io.new_input(location).open().read() == b"first commit" and calls[1:] == ["HeadObject", "GetObject"]
    io.delete(location.replace("s3://", "s3n://"))
    with pytest.raises(FileNotFoundError):
        io.delete(location)
    with pytest.raises(FileNotFoundError):
        io.new_input(location).open()
    with pytest.raises(FileNotFoundError, match="00001-file-io"):
        io.whole.new_input(location).open()
    assert not io.new_input(location).exists()
    assert s3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=key)["KeyCount"] == 0
    wrong = file_io({**vendor.storage.file_io(), "s3.secret-access-key": "wrong"}, location)
    with pytest.raises(PermissionError):
        len(wrong.new_input(f"s3://{BUCKET}/lake/trips/data/a.parquet"))


# --- end to end: PyIceberg through the gateway, a real HMS, the S3 server -----------------------

USER, PASSWORD = "etl", "etl-password"
READER, READER_PASSWORD = "analyst", "analyst-password"
ENGINE, ENGINE_PASSWORD = "trino", "trino-password"  # a trusted engine of the service
POLICY = ETL_ALL_POLICY + f"""\
  - id: 3
    name: etl names locations in the bucket
    resources: {{url: {{values: ["s3://{BUCKET}/"], recursive: true}}}}
    allow: [{{users: [etl], accesses: [read, write]}}]
  - id: 2
    name: analyst reads lake
    resources: {{database: [lake], table: ["*"], column: ["*"]}}
    allow: [{{users: [analyst, trino], accesses: [select]}}]
  - id: 4
    name: analyst and trino see EU rows of lake.filtered
    resources: {{database: [lake], table: [filtered]}}
    row_filter: [{{users: [analyst, trino], filter: "name = 'EU'"}}]
  - id: 5
    name: trino sees only the last 4 characters of names
    resources: {{database: [lake], table: [filtered], column: [name]}}
    data_mask: [{{users: [trino], mask: MASK_SHOW_LAST_4}}]
"""
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


@pytest.fixture(scope="module", autouse=True)
def _gateway_ca(gw) -> Iterator[None]:
    """PyIceberg's remote signer posts with a plain ``requests`` session (no ``ssl.cabundle``):
    it trusts the gateway's CA through ``REQUESTS_CA_BUNDLE``, as RestCatalog then does too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REQUESTS_CA_BUNDLE", str(gw.ca_file))
        patch.delenv("CURL_CA_BUNDLE", raising=False)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            patch.delenv(name, raising=False)  # clients get S3 access from the gateway only
        yield


@pytest.fixture(scope="module")
def s3_hms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHMS]:
    """An HMS that takes ``s3://`` locations (listener/'s ObjectStorePaths: it has no S3 connector)."""
    running = start_hms(tmp_path_factory.mktemp("hms-s3"),
                        site={"fs.s3.impl": "io.hmsgateway.metastore.ObjectStorePaths"})
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def gw(s3: RunningS3, s3_hms: RunningHMS, module_gateway_factory) -> RunningGateway:
    service = {"path": "iceberg", "kind": "iceberg-rest", "upstream": {"urls": [s3_hms.uri]},
               "policy_file": in_workdir("policy.yaml"),
               "options": {"lock_check_min_wait_seconds": 0.02, "allowed_locations": [f"s3://{BUCKET}/"],
                           "trusted_engines": [ENGINE], "s3": {
                   "endpoint": s3.endpoint, "region": REGION, "credentials_file": in_workdir("s3.ini"),
                   "role_arn": s3.role_arn, "credentials_expiry_seconds": 900}}}
    key = f"[default]\naws_access_key_id = {s3.access_key}\naws_secret_access_key = {s3.secret_key}\n"
    return module_gateway_factory(services=[service], files={"policy.yaml": POLICY, "s3.ini": key},
                                  users={USER: PASSWORD, READER: READER_PASSWORD, ENGINE: ENGINE_PASSWORD},
                                  audit={"path": "audit.jsonl"})


def _catalog(gw: RunningGateway, user: str, password: str, delegation: str | None = None) -> RestCatalog:
    headers = {"header.X-Iceberg-Access-Delegation": delegation} if delegation else {}
    return rest_catalog(gw, user=user, password=password, name=f"gw-{user}-{delegation}", **headers)


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)], pa.string())})


@pytest.fixture(scope="module")
def trips(gw) -> str:
    """Table ``lake.trips`` on S3, created and appended to by ``etl`` with vended credentials."""
    writer = _catalog(gw, USER, PASSWORD)
    writer.create_namespace("lake", {"location": f"s3://{BUCKET}/lake"})
    table = writer.create_table("lake.trips", schema=SCHEMA)
    assert table.location() == TABLE
    table.append(_rows(0, 3))
    writer.create_table("lake.other", schema=SCHEMA).append(_rows(100, 1))
    return "lake.trips"


def _answer(gw: RunningGateway, method: str, path: str, user: str, password: str,
            body: dict | None = None, delegation: str | None = None) -> tuple[int, dict]:
    # the S3 signer's endpoint is not in the REST catalog's spec (it has one of its own)
    response = call(gw, method, path, body, auth=(user, password), validate=not path.endswith("/s3-sign"),
                    headers={"X-Iceberg-Access-Delegation": delegation} if delegation else None)
    ANSWERS.append(response.content)
    return response.status_code, response.json()


ANSWERS: list[bytes] = []


def test_update_user_appends_and_select_user_reads_with_vended_credentials(gw, trips):
    writer = _catalog(gw, USER, PASSWORD).load_table(trips)
    writer.append(_rows(3, 2))
    status, loaded = _answer(gw, "GET", "/v1/namespaces/lake/tables/trips", READER, READER_PASSWORD,
                             delegation="vended-credentials")
    assert status == 200
    (credential,) = loaded["storage-credentials"]
    assert credential["prefix"] == TABLE + "/" and credential["config"] == loaded["config"]
    assert loaded["config"]["s3.session-token"]
    reader = _catalog(gw, READER, READER_PASSWORD).load_table(trips)
    assert sorted(reader.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_credentials_endpoint_refreshes(gw, trips):
    first = _answer(gw, "GET", "/v1/namespaces/lake/tables/trips/credentials", READER, READER_PASSWORD)
    second = _answer(gw, "GET", "/v1/namespaces/lake/tables/trips/credentials", READER, READER_PASSWORD)
    assert first[0] == second[0] == 200
    keys = [a[1]["storage-credentials"][0]["config"]["s3.access-key-id"] for a in (first, second)]
    assert keys[0] != keys[1]
    # they expire after the configured credentials_expiry_seconds (900)
    expires = int(second[1]["storage-credentials"][0]["config"]["s3.session-token-expires-at-ms"]) / 1000
    assert 800 < expires - time.time() <= 901
    # PyIceberg's own refresh call
    found = _catalog(gw, READER, READER_PASSWORD).load_credentials(trips, TABLE + "/metadata/x")
    assert found["s3.access-key-id"] not in keys and found["s3.secret-access-key"]


def test_a_scan_planned_by_the_gateway_carries_the_table_prefix_s_credentials(gw, trips):
    """Issue 42: the gateway reads the manifests on S3 with its own key; the plan answer vends
    what a load vends (the table's prefix, read-only for a reader), only when asked for."""
    path = "/v1/namespaces/lake/tables/trips/plan"
    status, planned = _answer(gw, "POST", path, READER, READER_PASSWORD, body={}, delegation="vended-credentials")
    assert status == 200 and planned["status"] == "completed", planned
    (credential,) = planned["storage-credentials"]
    assert credential["prefix"] == TABLE + "/" and credential["config"]["s3.session-token"]
    assert planned["file-scan-tasks"] and all(
        t["data-file"]["file-path"].startswith(TABLE + "/") for t in planned["file-scan-tasks"])
    assert "storage-credentials" not in _answer(gw, "POST", path, READER, READER_PASSWORD, body={})[1]
    server = rest_catalog(gw, user=READER, password=READER_PASSWORD, name="gw-reader-server-planning",
                          **{"scan-planning-mode": "server", "header.X-Iceberg-Access-Delegation": "vended-credentials"})
    local = _catalog(gw, READER, READER_PASSWORD, "vended-credentials").load_table(trips).scan().to_arrow()
    assert sorted(server.load_table(trips).scan().to_arrow()["id"].to_pylist()) == sorted(local["id"].to_pylist())


def test_remote_signing_reads_and_appends_and_refuses_a_read_only_write(gw, s3, trips):
    status, loaded = _answer(gw, "GET", "/v1/namespaces/lake/tables/trips", READER, READER_PASSWORD,
                             delegation="remote-signing")
    assert status == 200 and "storage-credentials" not in loaded
    config = loaded["config"]
    assert config["s3.remote-signing-enabled"] == "true" and "s3.access-key-id" not in config
    assert config["s3.signer.endpoint"] == "v1/namespaces/lake/tables/trips/sign"  # the spec's signRequest
    writer = _catalog(gw, USER, PASSWORD, "remote-signing").load_table(trips)
    writer.append(_rows(5, 1))
    reader = _catalog(gw, READER, READER_PASSWORD, "remote-signing").load_table(trips)
    assert sorted(reader.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4, 5]
    url = f"{s3.endpoint}/{BUCKET}/lake/trips/data/new.parquet"
    refused = _answer(gw, "POST", "/v1/namespaces/lake/tables/trips/s3-sign", READER, READER_PASSWORD,
                      {"method": "PUT", "region": REGION, "uri": url, "headers": {}})
    assert refused[0] == 403 and refused[1]["error"]["type"] == "ForbiddenException"
    outside = _answer(gw, "POST", "/v1/namespaces/lake/tables/trips/s3-sign", READER, READER_PASSWORD,
                      {"method": "GET", "region": REGION, "headers": {},
                       "uri": f"{s3.endpoint}/{BUCKET}/lake/other/data/x.parquet"})
    assert outside[0] == 403
    hostile = _answer(gw, "POST", "/v1/namespaces/lake/tables/trips/s3-sign", READER, READER_PASSWORD,
                      {"method": "GET", "region": REGION, "headers": {},
                       "uri": f"{s3.endpoint}/{BUCKET}/lake/trips/../other/data/x.parquet"})
    assert hostile[0] == 400
    allowed = _answer(gw, "POST", "/v1/namespaces/lake/tables/trips/s3-sign", READER, READER_PASSWORD,
                      {"method": "GET", "region": REGION, "headers": {"Host": ["x"]},
                       "uri": f"{s3.endpoint}/{BUCKET}/lake/trips/metadata/x"})
    assert allowed[0] == 200 and allowed[1]["uri"].endswith("/lake/trips/metadata/x")
    # the spec's signRequest (checked against the spec), where PyIceberg signed above
    spec = {"method": "GET", "region": REGION, "headers": {}, "provider": "s3",
            "uri": f"{s3.endpoint}/{BUCKET}/lake/trips/metadata/x"}
    assert _answer(gw, "POST", "/v1/namespaces/lake/tables/trips/sign", READER, READER_PASSWORD, spec)[0] == 200
    other = _answer(gw, "POST", "/v1/namespaces/lake/tables/trips/sign", READER, READER_PASSWORD,
                    {**spec, "provider": "gcs"})
    assert other[0] == 400 and "provider 'gcs'" in other[1]["error"]["message"]


SCAN_REPORT = {"report-type": "scan-report", "table-name": "lake.filtered", "snapshot-id": 1, "filter": True,
               "schema-id": 0, "projected-field-ids": [1], "projected-field-names": ["id"],
               "metrics": {"total-planning-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 5}}}


def test_a_filtered_table_gets_no_storage_access_but_a_trusted_engines(gw, s3, trips):
    """Issue 39: analyst has a row filter on lake.filtered: PyIceberg's load is 403 saying why,
    and neither the credentials endpoint, the signer nor a scan report answers her; trino, a
    trusted engine, loads it with vended credentials and the filter and mask as the spec's
    ``read-restrictions`` (issue 49)."""
    from pyiceberg.exceptions import ForbiddenError

    _catalog(gw, USER, PASSWORD).create_table("lake.filtered", schema=SCHEMA).append(_rows(0, 2))
    with pytest.raises(ForbiddenError, match=r"row filter \"name = 'EU'\" \(policy 4\).*analyst is not one"):
        _catalog(gw, READER, READER_PASSWORD, "vended-credentials").load_table("lake.filtered")
    base = "/v1/namespaces/lake/tables/filtered"
    for method, path, body in (
            ("GET", base, None),
            ("GET", f"{base}/credentials", None),
            ("POST", f"{base}/s3-sign", {"method": "GET", "region": REGION, "headers": {},
                                          "uri": f"{s3.endpoint}/{BUCKET}/lake/filtered/metadata/x"}),
            ("POST", f"{base}/metrics", SCAN_REPORT)):
        for delegation in ("vended-credentials", "remote-signing"):
            status, answer = _answer(gw, method, path, READER, READER_PASSWORD, body, delegation)
            assert status == 403, (path, answer)
            assert "row filter" in answer["error"]["message"] and "storage-credentials" not in answer
    engine = _catalog(gw, ENGINE, ENGINE_PASSWORD, "vended-credentials").load_table("lake.filtered")
    config = engine.io.properties
    assert config["scan-planning-mode"] == "server"
    assert config["s3.session-token"]  # a trusted engine's storage access, to enforce them itself
    status, loaded = _answer(gw, "GET", base, ENGINE, ENGINE_PASSWORD, delegation="vended-credentials")
    name = {"type": "reference", "id": 2}
    assert (status, loaded["read-restrictions"]) == (200, {
        "required-row-filter": {"type": "and", "left": {"type": "not-null", "child": name},
                                "right": {"type": "eq", "left": name, "right": {"type": "literal", "value": "EU"}}},
        "required-column-projections": [{"field-id": 2, "action": "show-last-4"}]})
    assert sorted(engine.scan().to_arrow()["id"].to_pylist()) == [0, 1]
    deadline = time.monotonic() + 10  # audit lines are written in batches (every 0.1 s)
    while not any(line.get("policy_restricted") == [4, 5] and line["effective_user"] == ENGINE for line in
                  (json.loads(text) for text in (gw.workdir / "audit.jsonl").read_text().splitlines())):
        assert time.monotonic() < deadline, "no audit line of trino's load naming policies 4 and 5"
        time.sleep(0.1)


def test_a_revoked_grant_is_refused_at_the_next_refresh(gw, trips):
    """The topology is pointed at a policy without analyst's grant (a changed topology file is
    reloaded, and its policy with it)."""
    path = "/v1/namespaces/lake/tables/trips/credentials"
    assert _answer(gw, "GET", path, READER, READER_PASSWORD)[0] == 200
    (gw.workdir / "revoked.yaml").write_text(POLICY.split("  - id: 2")[0])
    topology = gw.workdir / "topologies" / "default.yaml"
    topology.write_text(topology.read_text().replace(in_workdir("policy.yaml"), in_workdir("revoked.yaml")))
    gw.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 60
    while (status := _answer(gw, "GET", path, READER, READER_PASSWORD)[0]) == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert status == 404  # the table is not even visible to analyst now
    assert _answer(gw, "GET", path, USER, PASSWORD)[0] == 200


def test_the_gateways_key_is_in_no_answer_log_line_or_metric(gw, s3, trips):
    assert ANSWERS  # the tests above kept every raw answer
    metrics_text = urllib.request.urlopen(gw.management_url + "/metrics", timeout=10).read().decode()
    signings = {line.split('decision="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
                for line in metrics_text.splitlines() if line.startswith("hms_gateway_s3_signings_total{")}
    assert signings["allowed"] > 3 and signings["denied"] >= 2 and signings["invalid"] >= 1
    audit = (gw.workdir / "audit.jsonl").read_text()
    for secret in (s3.access_key, s3.secret_key):
        assert all(secret.encode() not in answer for answer in ANSWERS)
        assert secret not in gw.log() and secret not in audit and secret not in metrics_text
    # refusals are audited; allowed signings are summarized, not one line each
    lines = [json.loads(line) for line in audit.splitlines() if '"signS3Request"' in line or '"signRequest"' in line]
    assert any(line["status"] == 403 for line in lines)
    assert sum(1 for line in lines if line["status"] == 200) < 10


def test_no_table_reaches_another_tables_prefix_so_neither_do_its_credentials(gw, trips):
    """Issue 31: a new namespace over lake's folder, a table at trips' location, a bucket root or
    a set-location onto trips are refused; what is vended for lake.other covers its own prefix."""
    answer = partial(_answer, gw, user=USER, password=PASSWORD)
    assert answer("POST", "/v1/namespaces", body={"namespace": ["lake2"], "properties": {"location": f"s3://{BUCKET}/lake"}})[0] == 403
    assert answer("POST", "/v1/namespaces", body={"namespace": ["lake3"], "properties": {"location": f"s3://{BUCKET}/lake3"}})[0] == 200
    table = {"schema": {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}}
    for location in (TABLE, f"s3://{BUCKET}", f"s3://{BUCKET}/lake3"):
        status, body = answer("POST", "/v1/namespaces/lake3/tables", body={"name": "t", "location": location, **table},
                              delegation="vended-credentials")
        assert status == 403, body
    status, body = answer("POST", "/v1/namespaces/lake/tables/other",
                          body={"requirements": [], "updates": [{"action": "set-location", "location": TABLE}]})
    assert status == 403, body
    status, loaded = answer("GET", "/v1/namespaces/lake/tables/other", delegation="vended-credentials")
    assert status == 200 and [c["prefix"] for c in loaded["storage-credentials"]] == [OTHER_TABLE + "/"]


def test_a_table_renamed_out_of_its_namespace_gets_no_credentials_or_signatures(gw, s3, trips):
    """A renamed table keeps its location (under lake's folder, not lake4's): where the gateway
    would not have placed it, it vends no credentials and signs nothing (a table placed by a
    Thrift client over another's location is the same case); and a location holding an IAM
    wildcard is refused before any session policy names it."""
    answer = partial(_answer, gw, user=USER, password=PASSWORD)
    assert answer("POST", "/v1/namespaces", body={"namespace": ["lake4"], "properties": {"location": f"s3://{BUCKET}/lake4"}})[0] == 200
    _catalog(gw, USER, PASSWORD).create_table("lake.moving", schema=SCHEMA)
    rename = {"source": {"namespace": ["lake"], "name": "moving"}, "destination": {"namespace": ["lake4"], "name": "moving"}}
    renamed = partial(call, gw, "POST", "/v1/tables/rename", auth=(USER, PASSWORD))  # 204: no body
    assert renamed(rename).status_code == 204
    for delegation in ("vended-credentials", "remote-signing"):
        status, body = answer("GET", "/v1/namespaces/lake4/tables/moving", delegation=delegation)
        assert status == 403 and "storage access of lake4.moving refused" in body["error"]["message"], body
    assert answer("GET", "/v1/namespaces/lake4/tables/moving/credentials")[0] == 403
    assert answer("POST", "/v1/namespaces/lake4/tables/moving/plan", body={}, delegation="vended-credentials")[0] == 403
    sign = {"method": "GET", "region": REGION, "uri": f"{s3.endpoint}/{BUCKET}/lake/moving/metadata/x", "headers": {}}
    assert answer("POST", "/v1/namespaces/lake4/tables/moving/s3-sign", body=sign)[0] == 403
    assert answer("GET", "/v1/namespaces/lake4/tables/moving")[0] == 200  # a plain load reads it
    table = {"schema": {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}}
    status, body = answer("POST", "/v1/namespaces/lake4/tables", body={"name": "w", "location": f"s3://{BUCKET}/lake4/*", **table})
    assert status == 400 and "wildcard" in body["error"]["message"]
    assert renamed({"source": rename["destination"], "destination": rename["source"]}).status_code == 204
    status, loaded = answer("GET", "/v1/namespaces/lake/tables/moving", delegation="vended-credentials")
    assert status == 200 and [c["prefix"] for c in loaded["storage-credentials"]] == [f"s3://{BUCKET}/lake/moving/"]


def test_the_signer_refuses_headers_that_leave_the_table_and_forgets_a_dropped_one(gw, s3, trips):
    """Found on make run S3=1: the signer signed a PUT under the table with an
    x-amz-copy-source of another table (the server copied it in), an x-amz-acl public-read,
    and a client Host header (a virtual-host Host made the path-style /warehouse/lake/trips/x
    write key warehouse/lake/trips/x, outside every table)."""
    answer = partial(_answer, gw, user=USER, password=PASSWORD)
    path = "/v1/namespaces/lake/tables/trips/s3-sign"
    url = f"{s3.endpoint}/{BUCKET}/lake/trips/data/copied.parquet"
    other_key = [o["Key"] for o in s3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="lake/other/data/")["Contents"]][0]
    for headers in ({"x-amz-copy-source": [f"/{BUCKET}/{other_key}"]}, {"x-amz-copy-source": [f"{BUCKET}/lake/trips2/x"]},
                    {"x-amz-acl": ["public-read"]}, {"x-amz-grant-read": ["uri=http://acs.amazonaws.com/groups/global/AllUsers"]},
                    {"x-amz-object-lock-mode": ["COMPLIANCE"]}):
        status, body = answer("POST", path, body={"method": "PUT", "region": REGION, "uri": url, "headers": headers})
        assert status == 403 and body["error"]["type"] == "ForbiddenException", (headers, body)
    own_key = [o["Key"] for o in s3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="lake/trips/data/")["Contents"]][0]
    status, body = answer("POST", path, body={"method": "PUT", "region": REGION, "uri": url,
                                              "headers": {"x-amz-copy-source": [f"/{BUCKET}/{own_key}"]}})
    assert status == 200
    sent = urllib.request.Request(body["uri"], method="PUT", headers={
        "x-amz-copy-source": f"/{BUCKET}/{own_key}", **{k: v[0] for k, v in body["headers"].items()}})
    with urllib.request.urlopen(sent, timeout=10) as response:
        assert response.status == 200  # a copy inside the table is signed, and the server takes it
    s3.client("s3").delete_object(Bucket=BUCKET, Key="lake/trips/data/copied.parquet")
    # a Host header is not signed: the signature holds for the URL's host only
    virtual = f"{BUCKET}.localhost:{s3.port}"
    status, body = answer("POST", path, body={"method": "PUT", "region": REGION, "headers": {"host": [virtual]},
                                              "uri": f"{s3.endpoint}/{BUCKET}/lake/trips/data/x"})
    assert status == 200 and "host" not in body["headers"]
    sent = urllib.request.Request(body["uri"], data=b"escaped", method="PUT", headers={
        "Host": virtual, **{k: v[0] for k, v in body["headers"].items()}})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(sent, timeout=10)
    assert caught.value.code == 403 and b"SignatureDoesNotMatch" in caught.value.read()  # not the session policy's AccessDenied
    assert "Contents" not in s3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=f"{BUCKET}/")
    # a dropped table: no signature, no credentials (the name answers 404)
    _catalog(gw, USER, PASSWORD).create_table("lake.dropped", schema=SCHEMA)
    assert call(gw, "DELETE", "/v1/namespaces/lake/tables/dropped", auth=(USER, PASSWORD)).status_code == 204
    sign = {"method": "GET", "region": REGION, "uri": f"{s3.endpoint}/{BUCKET}/lake/dropped/metadata/x", "headers": {}}
    assert answer("POST", "/v1/namespaces/lake/tables/dropped/s3-sign", body=sign)[0] == 404
    assert answer("GET", "/v1/namespaces/lake/tables/dropped/credentials")[0] == 404
