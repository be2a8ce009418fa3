"""Every service kind through a gateway fronting a Kerberized Hive Metastore (issue 38): the
embedded HMS 2.3.10 with SASL on and a real KDC (tests/support/secure_hms.py), the gateway its
Hadoop proxy user (``hmsgw``) with ``upstream.sasl`` and delegation-token impersonation.

Each kind is driven by its real client (Apache Thrift's THttpClient with TJSON, PyIceberg,
boto3's glue client, a long-poll client of the change feed, Chromium on the explorer), and HMS's
own audit log (``HiveMetaStore.audit: ugi=...``) must show the end user for that user's calls,
never the gateway's principal. The change feed's follower reads the notification log as the
gateway (HMS 2.3 does not audit those calls); a change etl made reaches the feed's reader. A
direct Thrift call without Kerberos is refused by HMS.

One KDC, HMS and gateway for the module (HMS accepts the three QOPs; the services use
different ones: the end users' calls at each, and privacy with impersonation none).
"""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
import requests
from botocore.config import Config
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from thrift.protocol import TJSONProtocol
from thrift.transport import THttpClient

from demo.hms import probe_get_all_databases
from gateway.explorer import METHODS as EXPLORER_METHODS
from tests.support.gateway import htpasswd_provider, post, wait_for
from tests.support.iceberg.clients import rest_catalog
from tests.support.secure_hms import GATEWAY_PRINCIPAL, running_secure_hms
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

USERS = {"admin": "admin-password", "etl": "etl-password"}
GLUE_KEYS = {"etl": ("AKIAETL00000000001", "etl-secret-key")}
CATALOG_ID = "123456789012"
THRIFT_PATH = "hmshttpthrift/api/hms"
PRIVATE_PATH = "private/api/hms"
#: The end users' own DIGEST-MD5 connections at integrity and privacy.
PROTECTED_PATHS = {"integrity": "integrity/api/hms", "privacy": "users-private/api/hms"}
DB = "kerberized_etl"
METHODS = sorted({"get_all_databases", "get_database", "create_database", "get_all_tables", "get_table",
                  "show_locks", *EXPLORER_METHODS})


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    with running_secure_hms(tmp_path_factory.mktemp("kerberized-hms")) as running:
        yield running


@pytest.fixture(scope="module")
def gw(secure, tmp_path_factory, module_gateway_factory):
    workdir = tmp_path_factory.mktemp("kerberized-gateway")
    credentials = workdir / "glue-credentials"
    credentials.write_text("".join(f"[{user}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
                                   for user, (key, secret) in GLUE_KEYS.items()))

    def upstream(protection: str = "authentication", **more) -> dict:
        return {"urls": [secure.url], "sasl": secure.gateway_sasl(protection, **more)}

    topology = {
        "providers": {"authentication": [
            {"type": "sigv4", "access_keys": {key: user for user, (key, _) in GLUE_KEYS.items()},
             "secret_keys": f"file:{credentials}"},
            htpasswd_provider(),
        ]},
        "services": [
            {"kind": "hms-thrift", "path": THRIFT_PATH, "upstream": upstream(), "options": {"methods": METHODS}},
            # privacy with impersonation none: every call as the gateway, over GSSAPI
            {"kind": "hms-thrift", "path": PRIVATE_PATH, "upstream": upstream("privacy", impersonation="none"),
             "options": {"methods": METHODS}},
            *({"kind": "hms-thrift", "path": path, "upstream": upstream(protection), "options": {"methods": METHODS}}
              for protection, path in PROTECTED_PATHS.items()),
            {"kind": "iceberg-rest", "path": "iceberg", "upstream": upstream("authentication"),
             "options": {"lock_check_min_wait_seconds": 0.02}},
            {"kind": "glue", "path": "glue", "upstream": upstream(), "options": {"catalog_id": CATALOG_ID}},
            {"kind": "event-stream", "path": "events", "upstream": upstream("authentication"),
             "options": {"poll_interval_seconds": 0.2, "heartbeat_seconds": 5}},
            {"kind": "explorer", "path": "explorer", "options": {"thrift_service": THRIFT_PATH}},
        ],
    }
    return module_gateway_factory({"default": topology}, USERS, workdir=workdir, env=secure.env, timeout=60)


def thrift_client(gw, user: str, path: str = THRIFT_PATH):
    """Apache Thrift's THttpClient + TJSONProtocol + generated code, as ``user`` (Basic)."""
    service, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url("default", path), ssl_context=gw.ssl_context())
    token = base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
    transport.setCustomHeaders({"Authorization": f"Basic {token}"})
    return service.Client(TJSONProtocol.TJSONProtocol(transport)), transport


def audited(secure, user: str, cmd: str) -> bool:
    """True once HMS's audit log has a line ``ugi=user`` whose command contains ``cmd``."""
    return any(ugi == user and cmd in command for ugi, command in secure.audit())


def wait_audited(secure, user: str, cmd: str) -> None:
    try:
        wait_for(lambda: audited(secure, user, cmd), timeout=20)
    except AssertionError:
        raise AssertionError(f"HMS audit has no ugi={user} cmd~{cmd!r}; its lines for it: "
                             f"{[a for a in secure.audit() if cmd in a[1]][-5:]}") from None


@pytest.fixture(scope="module")
def etl_database(gw, secure):
    """``DB``, created by etl through the Thrift service (TJSON over HTTPS)."""
    client, transport = thrift_client(gw, "etl")
    _, ttypes = hive_metastore_modules()
    transport.open()
    try:
        client.create_database(ttypes.Database(name=DB, description="made by etl through the gateway",
                                               locationUri=(secure.hms.warehouse_dir / f"{DB}.db").as_uri(),
                                               parameters={}))
    finally:
        transport.close()
    return DB


def test_a_direct_call_without_kerberos_is_refused(secure):
    with pytest.raises(ConnectionError):
        probe_get_all_databases("127.0.0.1", secure.port, timeout=10)
    wait_for(lambda: "TSaslNegotiationException: Invalid status -128" in secure.log(), timeout=10)
    secure.probe()  # the same call with Kerberos is answered


def test_thrift_tjson_calls_reach_hms_as_the_end_user(gw, secure, etl_database):
    wait_audited(secure, "etl", f"create_database: Database(name:{DB}")
    client, transport = thrift_client(gw, "admin")
    transport.open()
    try:
        assert DB in client.get_all_databases()
        assert client.get_database(DB).description == "made by etl through the gateway"
    finally:
        transport.close()
    wait_audited(secure, "admin", f"get_database: {DB}")
    # the end users' calls never ran as the gateway's own principal
    assert not audited(secure, GATEWAY_PRINCIPAL, f"create_database: Database(name:{DB}")
    assert not audited(secure, GATEWAY_PRINCIPAL, f"get_database: {DB}")


@pytest.mark.parametrize("path,user,ugi,connection", [
    (PRIVATE_PATH, "admin", GATEWAY_PRINCIPAL, f"GSSAPI at QOP auth-conf as {GATEWAY_PRINCIPAL}"),
    (PROTECTED_PATHS["integrity"], "etl", "etl", "DIGEST-MD5 at QOP auth-int as etl"),
    (PROTECTED_PATHS["privacy"], "etl", "etl", "DIGEST-MD5 at QOP auth-conf as etl"),
], ids=["privacy-as-the-gateway", "integrity-as-the-user", "privacy-as-the-user"])
def test_signed_and_encrypted_calls_reach_hms_as_the_mode_says(gw, secure, etl_database, path, user, ugi,
                                                                connection):
    """``protection: privacy`` with ``impersonation: none`` (GSSAPI, every frame encrypted):
    HMS sees the gateway's principal, not the user. ``integrity``/``privacy`` with delegation
    tokens: the user's own DIGEST-MD5 connection at auth-int/auth-conf (the gateway logs each
    new connection's mechanism and QOP), and HMS sees the user, not the gateway."""
    call = f"get_all_tables: db={DB}"
    other = GATEWAY_PRINCIPAL if ugi == user else user

    def count(name: str) -> int:
        return sum(ugi == name and call in command for ugi, command in secure.audit())

    before = {name: count(name) for name in (ugi, other)}
    client, transport = thrift_client(gw, user, path)
    transport.open()
    try:
        assert client.get_database(DB).description == "made by etl through the gateway"
        client.get_all_tables(DB)
    finally:
        transport.close()
    wait_for(lambda: count(ugi) > before[ugi], timeout=20)
    assert count(other) == before[other]
    assert f"SASL {connection}" in gw.log()


def test_iceberg_rest_commit_under_an_hms_lock_runs_as_the_end_user(gw, secure):
    catalog = rest_catalog(gw, user="etl", password=USERS["etl"], validate=False)
    catalog.create_namespace("kerberized_ice")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(),
                                                                                   required=False))
    table = catalog.create_table("kerberized_ice.trips", schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["a", "b"], pa.string())}))
    table.append(pa.table({"id": pa.array([3], pa.int64()), "name": pa.array(["c"], pa.string())}))
    assert catalog.load_table("kerberized_ice.trips").scan().to_arrow().num_rows == 3
    assert len(catalog.load_table("kerberized_ice.trips").history()) == 2
    wait_audited(secure, "etl", "create_table: Table(tableName:trips, dbName:kerberized_ice")
    # each append is an alter_table under an HMS lock (Iceberg's HiveTableOperations)
    wait_audited(secure, "etl", "alter_table: db=kerberized_ice tbl=trips")
    client, transport = thrift_client(gw, "admin")
    _, ttypes = hive_metastore_modules()
    transport.open()
    try:  # no lock outlives its commit
        locks = client.show_locks(ttypes.ShowLocksRequest()).locks or []
        assert [lock for lock in locks if lock.dbname == "kerberized_ice"] == []
    finally:
        transport.close()


def test_glue_through_boto3_runs_as_the_end_user(gw, secure, etl_database):
    key, secret = GLUE_KEYS["etl"]
    glue = boto3.client("glue", endpoint_url=gw.url("default", "glue"), region_name="eu-west-1",
                        aws_access_key_id=key, aws_secret_access_key=secret, verify=str(gw.ca_file),
                        config=Config(retries={"max_attempts": 1}))
    database = glue.get_database(Name=DB)["Database"]
    assert database["Name"] == DB and database["Description"] == "made by etl through the gateway"
    assert DB in [d["Name"] for d in glue.get_databases()["DatabaseList"]]
    wait_audited(secure, "etl", f"get_database: {DB}")


def test_the_change_feed_shows_the_end_users_change(gw, secure, etl_database):
    url = gw.url("default", "events")
    found = None
    after = 0
    deadline = time.monotonic() + 60
    while found is None and time.monotonic() < deadline:
        answer = requests.get(url, params={"after": after, "wait": 5, "db": DB}, auth=("admin", USERS["admin"]),
                              verify=str(gw.ca_file), timeout=30)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found = next((e for e in body["events"] if e["eventType"] == "CREATE_DATABASE"), None)
        after = body["next"]
    assert found is not None and found["db"] == DB


def test_the_explorer_in_chromium_browses_as_the_end_user(gw, secure, etl_database):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_context(ignore_https_errors=True, http_credentials={
                "username": "etl", "password": USERS["etl"]}).new_page()
            page.set_default_timeout(120_000)
            page.goto(f"https://localhost:{gw.port}/gateway/default/explorer#/db/{DB}")
            expect(page.locator("#view")).to_contain_text(DB, timeout=120_000)
        finally:
            browser.close()
    wait_audited(secure, "etl", f"get_database: {DB}")


def test_kdc_unreachable_fails_readiness_and_calls_get_503_with_the_reason(secure, gateway_factory, tmp_path):
    """A gateway whose krb5.conf names a KDC nobody answers (port 9): start-up works (the keytab
    is read without the KDC), ``/readyz`` is 503 and says why, and a call gets 503 with the
    reason."""
    dead = tmp_path / "krb5.conf"
    dead.write_text(re.sub(r"kdc = [^\n]+", "kdc = 127.0.0.1:9", Path(secure.env["KRB5_CONFIG"]).read_text()))
    upstream = {"urls": [secure.url], "sasl": secure.gateway_sasl("authentication")}
    gw = gateway_factory(services=[{"kind": "hms-thrift", "path": THRIFT_PATH, "upstream": upstream}],
                         env={**secure.env, "KRB5_CONFIG": str(dead)}, name="gw-no-kdc")
    try:
        urllib.request.urlopen(gw.management_url + "/readyz", timeout=30)
        raise AssertionError("/readyz answered 200 without a KDC")
    except urllib.error.HTTPError as answer:
        ready = answer.code, answer.read().decode()
    status, _, body = post(gw, '[1,"get_all_databases",1,0,{}]', path=THRIFT_PATH)
    gw.stop()
    assert ready[0] == 503 and "KDC" in ready[1], ready
    assert status == 503 and b"KDC" in body, (status, body)
