"""The Glue Data Catalog API (service kind ``glue``) through the real gateway and the real HMS:
boto3's own glue client, SigV4-signed with its own signer, gets answers filtered by a catalog
policy (alice in analysts, bob, and an engine ``trino`` trusted with GetUnfilteredTableMetadata
for users it impersonates); Glue's pagination; Glue's errors; curl with Basic on the same service."""

from __future__ import annotations

import json
import subprocess
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from jose import jwt

from tests.support.gateway import audit_record, htpasswd_provider, metric
from tests.support.policy import POLICY_FILE, POLICY_PATH

pytestmark = pytest.mark.integration

PASSWORD = "pw-123456"
JWT_KEY = "glue-test-hmac-key-0123456789abcdef"
CATALOG_ID = "123456789012"
KEYS = {"alice": ("AKIAALICE0000000001", "alice-secret-key"),
        "bob": ("AKIABOB00000000001", "bob-secret-key"),
        "trino": ("AKIATRINO000000001", "trino-secret-key")}
POLICY = """
policies:
  - id: 11
    name: analysts read sales
    resources:
      database: [sales]
      table: ["*"]
      column: ["*"]
    allow:
      - groups: [analysts]
        accesses: [select]
  - id: 12
    name: analysts never read where customers live
    resources:
      database: [sales]
      table: [customers]
      column: [country]
    deny:
      - groups: [analysts]
        accesses: [select]
  - id: 13
    name: bob reads the spec database
    resources:
      database: [hmshttptestdatabase]
      table: ["*"]
      column: ["*"]
    allow:
      - users: [bob]
        accesses: [select]
  - id: 14
    name: analysts see big orders only
    resources: {database: [sales], table: [orders]}
    row_filter: [{groups: [analysts], filter: "amount > 100"}]
  - id: 15
    name: analysts see customers of orders hashed
    resources: {database: [sales], table: [orders], column: [customer]}
    data_mask: [{groups: [analysts], mask: MASK_HASH}]
"""


@pytest.fixture(scope="module")
def gateway(hms, tmp_path_factory, module_gateway_factory):
    workdir = tmp_path_factory.mktemp("gateway-glue")  # the secrets' files need absolute paths
    credentials = workdir / "glue-credentials"
    credentials.write_text("".join(f"[{user}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
                                   for user, (key, secret) in KEYS.items()))
    (workdir / "jwt-key").write_text(JWT_KEY)
    topology = {
        "providers": {
            "authentication": [
                {"type": "sigv4", "access_keys": {key: user for user, (key, _) in KEYS.items()},
                 "secret_keys": f"file:{credentials}"},
                htpasswd_provider(),
                {"type": "jwt", "algorithms": ["HS256"], "issuer": "tests", "audience": "hms-gateway",
                 "hmac_key": f"file:{workdir / 'jwt-key'}"},
            ],
            "identity_assertion": {
                "group_mapping": {"alice": ["analysts"]},
                "impersonation": {"proxy_users": {"trino": {"users": ["*"], "hosts": ["127.0.0.0/8"]}}},
            },
        },
        "services": [{"kind": "glue", "path": "glue", "upstream": {"urls": [f"thrift://127.0.0.1:{hms.port}"]},
                      "policy_file": POLICY_PATH,
                      "options": {"catalog_id": CATALOG_ID, "trusted_engines": ["trino"]}}],
    }
    # the same service behind Basic only: a SigV4 request there is told what the topology accepts
    basic_only = {"providers": {"authentication": [htpasswd_provider()]}, "services": topology["services"]}
    return module_gateway_factory({"default": topology, "basic": basic_only}, {"alice": PASSWORD, "bob": PASSWORD},
                                  workdir=workdir, files={POLICY_FILE: POLICY})


def glue(gw, user: str, *, secret: str | None = None, query: str = "", topology: str = "default"):
    """boto3's glue client at the service, signing as ``user`` (with ``secret`` if given)."""
    key, real = KEYS[user]
    return boto3.client(
        "glue", endpoint_url=gw.url(topology, "glue") + query, region_name="eu-west-1",
        aws_access_key_id=key, aws_secret_access_key=secret or real, verify=str(gw.ca_file),
        config=Config(retries={"max_attempts": 1}))


def error_of(call) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Message"]


def columns(table: dict) -> list[str]:
    return [c["Name"] for c in table["StorageDescriptor"]["Columns"]]


def test_boto3_get_tables_with_sigv4_is_filtered_by_the_policy(gateway, direct):
    alice = glue(gateway, "alice")
    assert [d["Name"] for d in alice.get_databases()["DatabaseList"]] == ["sales"]
    tables = {t["Name"]: t for t in alice.get_tables(DatabaseName="sales")["TableList"]}
    assert sorted(tables) == sorted(direct.get_all_tables("sales"))
    assert columns(tables["customers"]) == ["customer", "since"]  # country is denied to analysts
    assert tables["customers"]["IsRegisteredWithLakeFormation"] is True
    bob_tables = glue(gateway, "bob").get_tables(DatabaseName="hmshttptestdatabase")["TableList"]
    assert sorted(t["Name"] for t in bob_tables) == sorted(direct.get_all_tables("hmshttptestdatabase"))
    table = glue(gateway, "bob").get_table(DatabaseName="hmshttptestdatabase", Name="test_table")["Table"]
    assert columns(table) == ["name", "age"] and table["PartitionKeys"][0]["Name"] == "hair_color"
    assert table["StorageDescriptor"]["Location"] == direct.get_table("hmshttptestdatabase", "test_table").sd.location


def test_a_hidden_database_or_table_is_answered_as_a_missing_one(gateway):
    alice = glue(gateway, "alice")
    hidden = error_of(lambda: alice.get_table(DatabaseName="hmshttptestdatabase", Name="test_table"))
    assert hidden == ("EntityNotFoundException", 400, "Table test_table not found.")
    missing = error_of(lambda: alice.get_table(DatabaseName="sales", Name="no_such_table"))
    assert missing == ("EntityNotFoundException", 400, "Table no_such_table not found.")
    assert error_of(lambda: glue(gateway, "bob").get_tables(DatabaseName="sales"))[:2] == \
        ("EntityNotFoundException", 400)


def test_boto3_get_unfiltered_table_metadata_for_a_trusted_engine(gateway):
    trino_as_alice = glue(gateway, "trino", query="?doAs=alice")
    out = trino_as_alice.get_unfiltered_table_metadata(
        CatalogId=CATALOG_ID, DatabaseName="sales", Name="customers",
        SupportedPermissionTypes=["COLUMN_PERMISSION"],
        QuerySessionContext={"QueryId": "q-1", "QueryAuthorizationId": "qa-1"},
        AuditContext={"AdditionalAuditContext": "dashboards"}, SupportedDialect={"Dialect": "TRINO"})
    assert columns(out["Table"]) == ["customer", "country", "since"]  # whole, for the engine to filter
    assert out["AuthorizedColumns"] == ["customer", "since"]
    assert out["IsRegisteredWithLakeFormation"] is True and out["Permissions"] == ["SELECT"]
    assert out["CellFilters"][0]["RowFilterExpression"] == "TRUE"
    # alice herself is no trusted engine; trino for bob sees nothing of sales
    assert error_of(lambda: glue(gateway, "alice").get_unfiltered_table_metadata(
        CatalogId=CATALOG_ID, DatabaseName="sales", Name="customers",
        SupportedPermissionTypes=["COLUMN_PERMISSION"]))[:2] == ("AccessDeniedException", 400)
    assert error_of(lambda: glue(gateway, "trino", query="?doAs=bob").get_unfiltered_table_metadata(
        CatalogId=CATALOG_ID, DatabaseName="sales", Name="customers",
        SupportedPermissionTypes=["COLUMN_PERMISSION"]))[:2] == ("EntityNotFoundException", 400)


def test_boto3_gets_a_row_filter_and_a_mask_leaves_the_column_out(gateway):
    """Issue 39: Ranger's row filter for alice on sales.orders comes in CellFilters; the masked
    column is left out of AuthorizedColumns (Lake Formation has no masks: fail closed); an engine
    offering only COLUMN_PERMISSION gets PermissionTypeMismatchException, as the seed says."""
    trino_as_alice = glue(gateway, "trino", query="?doAs=alice")
    out = trino_as_alice.get_unfiltered_table_metadata(
        CatalogId=CATALOG_ID, DatabaseName="sales", Name="orders",
        SupportedPermissionTypes=["COLUMN_PERMISSION", "CELL_FILTER_PERMISSION"])
    assert columns(out["Table"]) == ["order_id", "customer", "amount", "order_date"]
    assert out["AuthorizedColumns"] == ["order_id", "amount", "order_date"]
    assert out["CellFilters"] == [{"ColumnName": c, "RowFilterExpression": "amount > 100"}
                                  for c in ["order_id", "amount", "order_date"]]
    code, status, message = error_of(lambda: trino_as_alice.get_unfiltered_table_metadata(
        CatalogId=CATALOG_ID, DatabaseName="sales", Name="orders", SupportedPermissionTypes=["COLUMN_PERMISSION"]))
    assert (code, status) == ("PermissionTypeMismatchException", 400)
    assert "row filter (policy 14)" in message and "CELL_FILTER_PERMISSION" in message
    deadline = time.monotonic() + 10  # audit lines are written in batches
    while not (found := [json.loads(line) for line in gateway.log().splitlines()
                         if line.startswith("{") and '"method":"GetUnfilteredTableMetadata"' in line
                         and '"table":"orders"' in line and '"outcome":"allowed"' in line]):
        assert time.monotonic() < deadline, "no audit line"
        time.sleep(0.1)
    assert found[0]["policy_restricted"] == [14, 15]


def test_pagination_with_boto3s_paginators(gateway, direct):
    bob = glue(gateway, "bob")
    pages = list(bob.get_paginator("get_tables").paginate(
        DatabaseName="hmshttptestdatabase", PaginationConfig={"PageSize": 2}))
    names = [t["Name"] for p in pages for t in p["TableList"]]
    assert names == sorted(direct.get_all_tables("hmshttptestdatabase"))
    assert len(pages) == (len(names) + 1) // 2 and all("NextToken" in p for p in pages[:-1])
    table = next(n for n in names if len(direct.get_partition_names("hmshttptestdatabase", n, -1)) > 100)
    parts = list(bob.get_paginator("get_partitions").paginate(
        DatabaseName="hmshttptestdatabase", TableName=table, PaginationConfig={"PageSize": 60}))
    values = [tuple(p["Values"]) for page in parts for p in page["Partitions"]]
    expected = direct.get_partitions("hmshttptestdatabase", table, -1)
    assert len(parts) == -(-len(expected) // 60) and sorted(values) == sorted(tuple(p.values) for p in expected)


def test_errors_are_glues(gateway):
    alice = glue(gateway, "alice")
    code, status, _ = error_of(lambda: alice.delete_table(DatabaseName="sales", Name="orders"))
    assert (code, status) == ("UnknownOperationException", 400)
    assert error_of(lambda: alice.get_tables(DatabaseName="sales", NextToken="forged"))[:2] == \
        ("InvalidInputException", 400)
    assert error_of(lambda: alice.get_databases(CatalogId="999999999999"))[:2] == ("EntityNotFoundException", 400)
    bob = glue(gateway, "bob")
    assert error_of(lambda: bob.get_partitions(DatabaseName="hmshttptestdatabase", TableName="test_table",
                                               Expression="hair_color = "))[:2] == ("InvalidInputException", 400)


def test_expressions_are_hms_patterns_and_filters(gateway):
    assert [t["Name"] for t in glue(gateway, "alice").get_tables(DatabaseName="sales", Expression="cust*")["TableList"]] \
        == ["customers"]
    parts = glue(gateway, "bob").get_partitions(DatabaseName="hmshttptestdatabase", TableName="test_table",
                                                Expression="hair_color = 'black'")["Partitions"]
    assert [p["Values"] for p in parts] == [["black"]]


def test_a_wrong_secret_or_an_unknown_key_is_403_as_aws_answers(gateway):
    code, status, message = error_of(lambda: glue(gateway, "alice", secret="not-her-secret").get_databases())
    assert (code, status) == ("InvalidSignatureException", 403) and "does not match" in message
    stranger = boto3.client("glue", endpoint_url=gateway.url("default", "glue"), region_name="eu-west-1",
                            aws_access_key_id="AKIANOBODY00000001", aws_secret_access_key="x",
                            verify=str(gateway.ca_file), config=Config(retries={"max_attempts": 1}))
    assert error_of(stranger.get_databases)[:2] == ("UnrecognizedClientException", 403)


def curl(gateway, target: str, body: str, *auth: str, topology: str = "default") -> tuple[int, dict[str, list[str]], dict]:
    out = subprocess.run(
        ["curl", "-sS", "--cacert", str(gateway.ca_file), "-D", "-", "-X", "POST", *auth,
         "-H", f"X-Amz-Target: AWSGlue.{target}", "-H", "Content-Type: application/x-amz-json-1.1",
         "--data-binary", body, gateway.url(topology, "glue")],
        check=True, capture_output=True, text=True, timeout=60).stdout
    head, _, payload = out.partition("\n\n")  # text mode reads CRLF as LF
    lines = head.split("\n")
    headers: dict[str, list[str]] = {}
    for name, _, value in (line.partition(":") for line in lines[1:]):
        headers.setdefault(name.lower(), []).append(value.strip())
    return int(lines[0].split()[1]), headers, json.loads(payload)


def test_curl_with_basic_on_the_same_service(gateway):
    status, headers, body = curl(gateway, "GetDatabases", "{}", "-u", f"alice:{PASSWORD}")
    assert status == 200 and [d["Name"] for d in body["DatabaseList"]] == ["sales"]
    record = audit_record(gateway, headers["x-amzn-requestid"][0])
    assert record["method"] == "GetDatabases" and record["user"] == "alice"
    assert record["policy_decision"] == "allowed" and record["policy_hidden"] >= 2
    assert metric(gateway, "hms_gateway_policy_decisions_total", service="glue", outcome="hidden") >= 2
    status, headers, body = curl(gateway, "GetDatabases", "{}")
    assert status == 401 and body["__type"] == "MissingAuthenticationTokenException"
    assert headers["www-authenticate"] == ["AWS4-HMAC-SHA256", 'Basic realm="HMS Gateway", charset="UTF-8"',
                                           'Bearer realm="HMS Gateway"']
    status, _, body = curl(gateway, "GetTables", '{"DatabaseName": "sales", "MaxResults": 0}', "-u", f"alice:{PASSWORD}")
    assert status == 400 and body["__type"] == "InvalidInputException"
    for junk in ("[1, 2]", "[" * 100_000, '{"DatabaseName": "\xff'):
        status, _, body = curl(gateway, "GetTables", junk, "-u", f"alice:{PASSWORD}")
        assert status == 400 and body["__type"] == "SerializationException"


def test_sigv4_on_a_topology_without_a_sigv4_provider_is_told_which_schemes_it_accepts(gateway):
    """Issue 40: boto3 against a Basic-only Glue topology got a bare "Missing Authentication Token"."""
    code, status, message = error_of(lambda: glue(gateway, "alice", topology="basic").get_databases())
    assert (code, status) == ("MissingAuthenticationTokenException", 401)
    assert message == ("Missing Authentication Token: this service does not accept AWS Signature Version 4 "
                       "(AWS4-HMAC-SHA256; its topology has no sigv4 provider). It accepts: Basic.")
    status, _, body = curl(gateway, "GetDatabases", "{}", "-u", f"bob:{PASSWORD}", topology="basic")
    assert status == 200 and "hmshttptestdatabase" in [d["Name"] for d in body["DatabaseList"]]


def test_a_bearer_token_on_the_same_service(gateway, direct):
    now = int(time.time())
    token = jwt.encode({"sub": "bob", "iss": "tests", "aud": "hms-gateway", "nbf": now - 5, "exp": now + 300},
                       JWT_KEY, algorithm="HS256")
    status, _, body = curl(gateway, "GetTables", '{"DatabaseName": "hmshttptestdatabase"}',
                           "-H", f"Authorization: Bearer {token}")
    assert status == 200
    assert sorted(t["Name"] for t in body["TableList"]) == sorted(direct.get_all_tables("hmshttptestdatabase"))
