"""Every authentication provider of a topology on the ``iceberg-rest`` routes (issue 22 item 5),
against the real gateway, a real HMS and a real KDC: PyIceberg's ``RestCatalog`` with auth type
``basic``, with ``token`` (a Bearer JWT), with a client certificate (``ssl.client``) and with
``rest.sigv4-enabled``; ``requests-gssapi`` and ``curl --negotiate`` for Kerberos/SPNEGO, which
PyIceberg does not speak. Each client creates a namespace and a table and appends to it; HMS
records the authenticated user as their owner (the gateway calls HMS as the user, ``set_ugi``)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pyarrow as pa
import pytest
import requests
from jose import jwt
from pyiceberg.catalog.rest import ConfigResponse, RestCatalog, TableResponse
from pyiceberg.exceptions import ForbiddenError, UnauthorizedError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from requests_gssapi import REQUIRED, HTTPSPNEGOAuth

from gateway.certs import write_client_certificate
from tests.support.gateway import MTLS, RunningGateway, htpasswd_provider
from tests.support.hms import RunningHMS
from tests.support.iceberg.clients import all_access_policy, call, error_of, rest_catalog
from tests.support.iceberg.spec import check_read_restrictions
from tests.support.policy import POLICY_FILE, POLICY_PATH
from tests.support.thrift_gen import hive_metastore_client

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

PATH = "iceberg"
JWT_KEY = "iceberg-auth-test-hmac-key-0123456789"
SIGNING_REGION = "eu-west-1"
#: user → (access key id, secret key) of the sigv4 provider
AWS_KEYS = {"sam": ("AKIASAM00000000001", "sam-secret-key")}
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
GUARDED = "iceberg-guarded"  # the same HMS with a catalog policy and a trusted engine
POLICY = all_access_policy("bea") + """\
  - id: 2
    name: analysts read shop
    resources: {database: [shop], table: ["*"], column: ["*"]}
    allow: [{groups: [analysts], accesses: [select]}]
  - id: 3
    name: analysts do not see who ordered
    resources: {database: [shop], table: [orders], column: [customer]}
    deny: [{groups: [analysts], accesses: [select]}]
  - id: 4
    name: analysts see orders above 10
    resources: {database: [shop], table: [orders]}
    row_filter: [{groups: [analysts], filter: "total > 10"}]
  - id: 5
    name: analysts see the last 4 of a card
    resources: {database: [shop], table: [orders], column: [card]}
    data_mask: [{groups: [analysts], mask: MASK_SHOW_LAST_4}]
"""


@pytest.fixture(scope="module")
def clients(kerberos_realm, tmp_path_factory) -> dict[str, dict[str, str]]:
    """Kerberos client environments (krb5.conf and a ticket cache) by user."""
    d = tmp_path_factory.mktemp("iceberg-ccaches")
    return {"kim": kerberos_realm.add_user("kim", "kim-password", d / "kim")}


@pytest.fixture(scope="module")
def gw(module_hms, kerberos_realm, clients, tmp_path_factory, module_gateway_factory) -> RunningGateway:
    """One ``iceberg-rest`` service behind every provider: mTLS, Basic, JWT, SigV4, Kerberos."""
    workdir = tmp_path_factory.mktemp("gw-iceberg-auth")  # secrets need absolute paths
    credentials = workdir / "aws-credentials"
    credentials.write_text("".join(f"[{user}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
                                   for user, (key, secret) in AWS_KEYS.items()))
    (workdir / "jwt-key").write_text(JWT_KEY)
    providers = [
        {"type": "mtls"},
        htpasswd_provider(),
        {"type": "jwt", "algorithms": ["HS256"], "issuer": "tests", "audience": "hms-gateway",
         "hmac_key": f"file:{workdir / 'jwt-key'}"},
        {"type": "sigv4", "access_keys": {key: user for user, (key, _) in AWS_KEYS.items()},
         "secret_keys": f"file:{credentials}", "service": "glue"},
        {"type": "kerberos", "principal": kerberos_realm.principal, "keytab": str(kerberos_realm.keytab)},
    ]
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
               "options": {"lock_check_min_wait_seconds": 0.02}}
    guarded = {**service, "path": GUARDED, "policy_file": POLICY_PATH,
               "options": {**service["options"], "trusted_engines": ["trino"]}}
    topology = {"providers": {"authentication": providers, "identity_assertion": {
                    "group_mapping": {"ana": ["analysts"]},
                    "impersonation": {"proxy_users": {"trino": {"users": ["*"], "hosts": ["127.0.0.0/8"]}}}}},
                "services": [service, guarded]}
    gw = module_gateway_factory({"default": topology}, {user: f"{user}-password" for user in ("bea", "ana", "trino")},
                                workdir=workdir, tls=MTLS, files={POLICY_FILE: POLICY},
                                env={**kerberos_realm.env, "KRB5_KTNAME": None})
    write_client_certificate(gw.workdir / "certs", "cora")
    return gw


def _token(sub: str, **claims) -> str:
    now = int(time.time())
    return jwt.encode({"iss": "tests", "aud": "hms-gateway", "sub": sub, "exp": now + 300, "nbf": now, **claims},
                      JWT_KEY, algorithm="HS256")


def _owners(hms: RunningHMS, db: str, table: str) -> tuple[str, str]:
    """(database owner, table owner) as HMS stored them."""
    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        return client.get_database(db).ownerName, client.get_table(db, table).owner
    finally:
        transport.close()


def _round_trip(catalog: RestCatalog, ns: str) -> None:
    """Create a namespace and a table, append twice, read back through the same catalog."""
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    catalog.load_table(f"{ns}.t").append(pa.table({"id": pa.array([3], pa.int64())}))
    loaded = catalog.load_table(f"{ns}.t")
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert len(loaded.snapshots()) == 2
    assert (ns,) in catalog.list_namespaces() and (ns, "t") in catalog.list_tables(ns)


def test_basic(gw, module_hms):
    catalog = rest_catalog(gw, user="bea", password="bea-password")
    _round_trip(catalog, "by_basic")
    assert _owners(module_hms, "by_basic", "t") == ("bea", "bea")


def test_bearer_jwt_token(gw, module_hms):
    _round_trip(rest_catalog(gw, token=_token("tom")), "by_token")
    assert _owners(module_hms, "by_token", "t") == ("tom", "tom")
    expired = call(gw, "GET", "/v1/config", auth=None,
                   headers={"Authorization": f"Bearer {_token('tom', exp=int(time.time()) - 60)}"})
    error_of(expired, 401, "NotAuthorizedException")


def test_client_certificate(gw, module_hms):
    certs = gw.workdir / "certs"
    catalog = rest_catalog(gw, ssl={"client": {"cert": str(certs / "cora.crt"), "key": str(certs / "cora.key")}})
    _round_trip(catalog, "by_mtls")
    assert _owners(module_hms, "by_mtls", "t") == ("cora", "cora")


def test_sigv4(gw, module_hms):
    key, secret = AWS_KEYS["sam"]
    signed = {"rest.sigv4-enabled": "true", "rest.signing-name": "glue", "rest.signing-region": SIGNING_REGION,
              "client.access-key-id": key, "client.region": SIGNING_REGION}
    _round_trip(rest_catalog(gw, **signed, **{"client.secret-access-key": secret}), "by_sigv4")
    assert _owners(module_hms, "by_sigv4", "t") == ("sam", "sam")
    with pytest.raises(UnauthorizedError):  # a wrong secret: the signature does not match
        rest_catalog(gw, **signed, **{"client.secret-access-key": "not-the-secret"})


def _spnego(gw: RunningGateway, method: str, path: str, body: dict | None = None) -> requests.Response:
    return call(gw, method, path, body, service=PATH, auth=HTTPSPNEGOAuth(mutual_authentication=REQUIRED))


def test_kerberos_spnego_with_requests_gssapi_and_curl(gw, module_hms, clients):
    saved = dict(os.environ)
    os.environ.update(clients["kim"])
    try:
        config = _spnego(gw, "GET", "/v1/config")
        assert config.status_code == 200, gw.log()[-2000:]
        assert config.headers["WWW-Authenticate"].startswith("Negotiate ")  # mutual authentication
        ConfigResponse.model_validate_json(config.content)
        created = _spnego(gw, "POST", "/v1/namespaces", {"namespace": ["by_kerberos"], "properties": {}})
        assert created.status_code == 200, created.text
        table = _spnego(gw, "POST", "/v1/namespaces/by_kerberos/tables",
                        {"name": "t", "schema": json.loads(SCHEMA.model_dump_json())})
        assert table.status_code == 200, table.text
        TableResponse.model_validate_json(table.content)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert _owners(module_hms, "by_kerberos", "t") == ("kim", "kim")
    out = subprocess.run(["curl", "-sS", "--negotiate", "-u", ":", "--cacert", str(gw.ca_file), "-o", "-",
                          "-w", "\n%{http_code}", gw.url(path=PATH) + "/v1/namespaces/by_kerberos/tables"],
                         env={**os.environ, **clients["kim"]}, capture_output=True, text=True, timeout=60)
    body, _, code = out.stdout.rpartition("\n")
    assert code == "200", out.stderr
    assert json.loads(body)["identifiers"] == [{"namespace": ["by_kerberos"], "name": "t"}]


def test_without_credentials_every_challenge_in_the_error_model(gw):
    answer = call(gw, "GET", "/v1/config", service=PATH, auth=None)
    error_of(answer, 401, "NotAuthorizedException")
    challenges = [c.split()[0] for c in answer.raw.headers.getlist("WWW-Authenticate")]
    assert challenges == ["Basic", "Bearer", "AWS4-HMAC-SHA256", "Negotiate"]


def test_a_table_with_denied_columns_loads_only_for_a_trusted_engine(gw):
    """As Glue's GetUnfilteredTableMetadata: trino (trusted) acting for ana gets the whole table
    with ana's read restrictions (issue 49: her denied column, row filter and mask) as the spec's
    ``read-restrictions``, checked against the vendored spec; ana herself gets 403 saying why."""
    bea = rest_catalog(gw, user="bea", password="bea-password", path=GUARDED)
    bea.create_namespace("shop")
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "customer", StringType(), required=False),
                    NestedField(3, "total", LongType(), required=False),
                    NestedField(4, "card", StringType(), required=False))
    bea.create_table("shop.orders", schema=schema)
    bea.create_table("shop.items", schema=SCHEMA)

    ana = rest_catalog(gw, user="ana", password="ana-password", path=GUARDED)
    assert ana.load_table("shop.items").schema() == SCHEMA  # no column denied: loads for anyone
    with pytest.raises(ForbiddenError, match="ana may not read every column of shop.orders: .*trusted engine"):
        ana.load_table("shop.orders")

    def load(user: str, table: str, headers: dict | None = None) -> requests.Response:
        return call(gw, "GET", f"/v1/namespaces/shop/tables/{table}?doAs=ana", service=GUARDED,
                    auth=(user, f"{user}-password"), headers=headers)

    answer = load("trino", "orders")
    assert answer.status_code == 200, answer.text
    result = TableResponse.model_validate_json(answer.content)
    assert [f.name for f in result.metadata.schema().fields] == ["id", "customer", "total", "card"]  # whole
    assert result.config == {"scan-planning-mode": "server"}
    total = {"type": "reference", "id": 3}
    restrictions = answer.json()["read-restrictions"]
    assert restrictions == {  # Hive's total > 10, nulls never kept; customer denied; card masked
        "required-row-filter": {"type": "and", "left": {"type": "not-null", "child": total},
                                "right": {"type": "gt", "left": total, "right": {"type": "literal", "value": 10}}},
        "required-column-projections": [{"field-id": 2, "action": "replace-with-null"},
                                        {"field-id": 4, "action": "show-last-4"}]}
    check_read_restrictions(restrictions)  # and call() checked the whole answer against the spec
    assert load("trino", "orders", {"If-None-Match": answer.headers["ETag"]}).status_code == 304
    items = load("trino", "items")
    assert "read-restrictions" not in items.json() and items.json()["config"] == {}
    # bea may impersonate nobody; trino acting as itself reads everything (no denied column)
    assert load("bea", "orders").status_code == 403
    as_itself = call(gw, "GET", "/v1/namespaces/shop/tables/orders", service=GUARDED, auth=("trino", "trino-password"))
    assert as_itself.status_code == 404  # trino has no grant of its own on shop
