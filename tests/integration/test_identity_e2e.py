"""Identity assertion, authorization, the real user reaching HMS, and the audit log, end to end.

A real HMS 2.3.10 (empty), the real gateway (``hms-gateway serve``) with htpasswd users, Apache
Thrift's ``THttpClient`` + ``TJSONProtocol`` + generated code as the client. Which user HMS
acts as is read from HMS's own audit log (``HiveMetaStore.audit: ugi=<user> ... cmd=...``):
HMS 2.3 leaves ``Database.ownerName`` as the client sent it (Hive 4 fills it from the same
``set_ugi`` user), so the audit line is where 2.3 shows the identity it acts as.
"""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.request
import uuid

import pytest
from thrift.protocol import TJSONProtocol
from thrift.transport import THttpClient

from tests.support.gateway import RunningGateway, audit_record, htpasswd_provider, service
from tests.support.hms import RunningHMS, start_hms
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = pytest.mark.integration

SPEC_READS = ["get_all_databases", "get_databases", "get_database", "get_all_tables", "get_tables",
              "get_table", "get_tables_by_type", "get_partition_names", "get_partitions"]
USERS = {"alice": "alice-secret-pw", "bob": "bob-secret-pw", "carol": "carol-secret-pw",
         "mary": "mary-secret-pw"}


@pytest.fixture(scope="module")
def metastore(tmp_path_factory) -> RunningHMS:
    running = start_hms(tmp_path_factory.mktemp("hms-identity"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def gateway(metastore, module_gateway_factory) -> RunningGateway:
    url = f"thrift://127.0.0.1:{metastore.port}"
    writable = service([url], methods=SPEC_READS + ["create_database"])
    identity = {
        "principal_mapping": "mary=marie",
        "group_mapping": "alice=analysts;*=staff",
        "impersonation": {"proxy_users": {
            "alice": {"users": ["bob"], "hosts": ["127.0.0.0/8"]},
            "carol": {"users": ["bob"], "hosts": ["10.0.0.0/8"]},
        }},
    }

    def topo(authorization: dict | None = None) -> dict:
        svc = dict(writable, authorization=authorization) if authorization else writable
        return {"providers": {"authentication": [htpasswd_provider()], "identity_assertion": identity},
                "services": [svc]}

    topologies = {
        "owners": topo(),
        "acl-and": topo({"users": ["alice", "bob"], "groups": ["analysts"], "ips": ["127.0.0.1"]}),
        "acl-ip": topo({"ips": ["10.0.0.0/8"]}),
        "acl-or": topo({"users": ["bob"], "groups": ["nobody"], "ips": ["10.0.0.0/8"], "mode": "OR"}),
        "acl-or-ip": topo({"users": ["nobody"], "ips": ["127.0.0.0/8"], "mode": "OR"}),
    }
    return module_gateway_factory(topologies, USERS, audit={"path": "audit.jsonl"})


def client(gw: RunningGateway, topology: str, user: str, query: str = ""):
    service_mod, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url(topology) + query, ssl_context=gw.ssl_context())
    token = base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
    transport.setCustomHeaders({"Authorization": f"Basic {token}"})
    return service_mod.Client(TJSONProtocol.TJSONProtocol(transport)), transport


def post(gw: RunningGateway, topology: str, user: str, body: str, query: str = "",
         headers: dict | None = None):
    token = base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
    req = urllib.request.Request(gw.url(topology) + query, data=body.encode(), method="POST",
                                 headers={"Authorization": f"Basic {token}", **(headers or {})})
    try:
        with urllib.request.urlopen(req, context=gw.ssl_context(), timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def create_database_body(name: str) -> str:
    return f'[1,"create_database",1,1,{{"1":{{"rec":{{"1":{{"str":"{name}"}}}}}}}}]'


def hms_audit_user(metastore: RunningHMS, command: str, timeout: float = 10.0) -> list[str]:
    """Users HMS's own audit log shows for ``cmd=... <command>`` lines (waits for at least one)."""
    pattern = re.compile(r"HiveMetaStore\.audit: ugi=(\S+)\s.*cmd=.*" + re.escape(command))
    deadline = time.monotonic() + timeout
    while True:
        users = pattern.findall(metastore.server.log_path.read_text(errors="replace"))
        if users or time.monotonic() > deadline:
            return users
        time.sleep(0.2)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_each_user_reaches_hms_as_itself_over_the_same_upstream(gateway, metastore):
    _, ttypes = hive_metastore_modules()
    names = {}
    for user in ("alice", "bob", "alice"):
        name = unique(f"db_{user}")
        names[name] = user
        c, t = client(gateway, "owners", user)
        try:
            c.create_database(ttypes.Database(name=name, description=f"made by {user}"))
        finally:
            t.close()
    direct, transport = hive_metastore_client(metastore.host, metastore.port)
    try:
        for name, user in names.items():
            db = direct.get_database(name)
            assert db.name == name  # created, really, in HMS
            assert db.ownerName == user and db.ownerType == ttypes.PrincipalType.USER  # owner assertion
            assert hms_audit_user(metastore, f"create_database: Database(name:{name},") == [user]
    finally:
        transport.close()


def test_principal_mapping_changes_the_user_hms_sees(gateway, metastore):
    name = unique("db_mary")
    status, _, body = post(gateway, "owners", "mary", create_database_body(name))
    assert status == 200, body
    assert hms_audit_user(metastore, f"create_database: Database(name:{name},") == ["marie"]


def test_doas_allowed_by_proxy_user_rule_acts_as_the_target(gateway, metastore):
    name = unique("db_doas")
    status, _, body = post(gateway, "owners", "alice", create_database_body(name), "?doAs=bob")
    assert status == 200, body
    assert hms_audit_user(metastore, f"create_database: Database(name:{name},") == ["bob"]
    direct, transport = hive_metastore_client(metastore.host, metastore.port)
    try:
        assert direct.get_database(name).ownerName == "bob"
    finally:
        transport.close()


@pytest.mark.parametrize("user, query, reason", [
    ("carol", "?doAs=bob", "not allowed to impersonate from 127.0.0.1"),  # hosts rule
    ("alice", "?doAs=carol", "alice is not allowed to impersonate carol"),  # users rule
    ("bob", "?doAs=alice", "bob is not a proxy user"),
])
def test_doas_refused_is_403_and_nothing_reaches_hms(gateway, metastore, user, query, reason):
    name = unique("db_refused")
    status, _, body = post(gateway, "owners", user, create_database_body(name), query)
    assert status == 403
    assert reason in body.decode()
    time.sleep(0.5)
    assert hms_audit_user(metastore, f"Database(name:{name},", timeout=0) == []


@pytest.mark.parametrize("topology, user, status, reason", [
    ("acl-and", "alice", 200, None),  # user, group (analysts) and address all match
    ("acl-and", "bob", 403, "bob is in none of the service ACL groups"),
    ("acl-and", "carol", 403, "user carol is not in the service ACL"),
    ("acl-ip", "alice", 403, "client address 127.0.0.1 is not in the service ACL"),
    ("acl-or", "bob", 200, None),  # the user part matches: enough in OR mode
    ("acl-or", "alice", 403, "matches none of the service ACL entries"),
    ("acl-or-ip", "carol", 200, None),  # the address part matches
])
def test_service_acl(gateway, metastore, topology, user, status, reason):
    name = unique(f"db_acl_{user}")
    got, _, body = post(gateway, topology, user, create_database_body(name))
    assert got == status, body
    if reason:
        assert reason in body.decode()
        time.sleep(0.5)
        assert hms_audit_user(metastore, f"Database(name:{name},", timeout=0) == []
    else:
        assert hms_audit_user(metastore, f"Database(name:{name},") == [user]


def test_audit_log_one_json_line_per_request(gateway):
    name = unique("db_audit")
    rid = unique("req")
    status, headers, _ = post(gateway, "owners", "alice", create_database_body(name), "?doAs=bob",
                              headers={"X-Request-Id": rid})
    assert status == 200 and headers["X-Request-Id"] == rid
    record = audit_record(gateway, rid, path=gateway.workdir / "audit.jsonl")
    assert record["topology"] == "owners" and record["service"] == "hmshttpthrift/api/hms"
    assert (record["user"], record["effective_user"], record["impersonator"]) == ("alice", "bob", "alice")
    assert (record["method"], record["database"], record["table"]) == ("create_database", name, None)
    assert (record["outcome"], record["status"], record["client"]) == ("allowed", 200, "127.0.0.1")
    assert record["duration_ms"] > 0 and record["time"].endswith("Z")

    status, _, _ = post(gateway, "owners", "alice",
                        '[1,"get_table",1,1,{"1":{"str":"nodb"},"2":{"str":"notable"}}]',
                        headers={"X-Request-Id": rid + "-t"})
    assert status == 200
    record = audit_record(gateway, rid + "-t", path=gateway.workdir / "audit.jsonl")
    assert (record["database"], record["table"], record["outcome"]) == ("nodb", "notable", "allowed")
    assert record["detail"] == "exception"  # NoSuchObjectException from HMS: served, not denied

    status, _, _ = post(gateway, "acl-ip", "alice", create_database_body(name),
                        headers={"X-Request-Id": rid + "-d"})
    record = audit_record(gateway, rid + "-d", path=gateway.workdir / "audit.jsonl")
    assert (status, record["status"], record["outcome"]) == (403, 403, "denied")
    assert "not in the service ACL" in record["reason"]

    bad = urllib.request.Request(gateway.url("owners"), data=b"[]", method="POST", headers={
        "Authorization": "Basic " + base64.b64encode(b"alice:wrong-password-xyz").decode(),
        "X-Request-Id": "not a sane id; <x>" * 3})
    try:
        urllib.request.urlopen(bad, context=gateway.ssl_context(), timeout=30)
    except urllib.error.HTTPError as err:
        assert err.code == 401
        generated = err.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", generated)  # an insane id is replaced by a UUID
    record = audit_record(gateway, generated, path=gateway.workdir / "audit.jsonl")
    assert (record["outcome"], record["status"], record["user"]) == ("denied", 401, None)

    text = (gateway.workdir / "audit.jsonl").read_text()
    for secret in [*USERS.values(), "wrong-password-xyz", "Basic "]:
        assert secret not in text
        assert secret not in gateway.log()
