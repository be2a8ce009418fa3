"""hms_gateway_client (issue 13 item 4) against the real gateway and the real HMS: every value is
compared with a direct strict-binary call to the same HMS made with thriftpy2 and the same IDL
module, so objects compare with ``==``. Every authentication provider (Basic, JWT, client
certificate, Kerberos through the test KDC) runs in the tunnel tests' gateway (the
``tunnel_gateway`` fixture of tests/integration/conftest.py)."""

from __future__ import annotations

import uuid

import pytest
from thriftpy2.thrift import TApplicationException

from gateway.certs import write_client_certificate
from hms_gateway_client import (
    AccessDenied,
    AuthenticationFailed,
    BasicAuth,
    BearerAuth,
    ClientCertificateAuth,
    GatewayUnavailable,
    GatewayUnreachable,
    KerberosAuth,
    connect,
)
from gateway.hms_thrift.kind import SPEC_METHODS
from tests.support.tunnel import USERS as TUNNEL_USERS
from tests.support.tunnel import token as tunnel_token
from tests.support.gateway import MTLS, RunningGateway, htpasswd_provider, service
from tests.support.ports import reserve_port
from tests.support.spec_calls import DB, TABLE
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-password", "bob": "bob-password"}
BIG_TABLE = "events"  # 200 partitions in the session catalog (tests/support/hms.py)


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    providers = {"authentication": [{"type": "mtls"}, htpasswd_provider()]}
    topologies = {
        "default": {"providers": providers,
                    "services": [service([hms_url], methods=[*SPEC_METHODS, "get_table_objects_by_name_req"])]},
        "narrow": {"providers": providers, "services": [service([hms_url], methods=["get_all_databases"])]},
        "admins": {"providers": providers,
                   "services": [dict(service([hms_url]), authorization={"users": ["admin", "alice"]})]},
        "dead": {"providers": providers, "services": [service([f"thrift://127.0.0.1:{reserve_port()}"])]},
    }
    gw = module_gateway_factory(topologies, USERS, tls=MTLS)
    write_client_certificate(gw.workdir / "certs", "alice")  # signed by the gateway's CA
    return gw



def admin(gw: RunningGateway, topology: str = "default", **kwargs):
    return connect(gw.url(topology), auth=BasicAuth("admin", USERS["admin"]), ca=gw.ca_file, **kwargs)


@pytest.mark.parametrize("protocol", ["binary", "tjson"])
def test_calls_equal_direct_calls(gateway, direct_thriftpy, protocol):
    with admin(gateway, protocol=protocol) as hms:
        assert hms.get_all_databases() == direct_thriftpy.get_all_databases()
        assert DB in hms.get_all_databases()
        assert hms.get_database(DB) == direct_thriftpy.get_database(DB)
        assert hms.get_all_tables(DB) == direct_thriftpy.get_all_tables(DB)
        table = hms.get_table(DB, TABLE)
        assert table == direct_thriftpy.get_table(DB, TABLE)
        assert isinstance(table, hms.types.Table)
        assert [c.name for c in table.partitionKeys] == ["hair_color"]
        parts = hms.get_partitions(DB, TABLE, -1)
        assert parts == direct_thriftpy.get_partitions(DB, TABLE, -1)
        assert sorted(p.values for p in parts) == [["black"], ["brown"]]
        many = hms.get_partitions(DB, BIG_TABLE, -1)
        assert len(many) == 200
        assert many == direct_thriftpy.get_partitions(DB, BIG_TABLE, -1)
        request = hms.types.GetTablesRequest(dbName=DB, tblNames=[TABLE])
        assert hms.get_table_objects_by_name_req(request) == direct_thriftpy.get_table_objects_by_name_req(request)


@pytest.fixture(scope="module")
def skewed_table(hms):
    """A list-bucketed table (SkewedInfo with its map<list<string>,string>), made with Apache's
    generated client, whose tuples can be map keys."""
    _, t = hive_metastore_modules()
    db, location = f"pyclient_skew_{uuid.uuid4().hex[:6]}", f"file:{hms.warehouse_dir}/skew"
    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        client.create_database(t.Database(db, "", location, {}))
        skew = t.SkewedInfo(["name"], [["a"], ["b"]], {("a",): f"{location}/name=a", ("b",): f"{location}/name=b"})
        sd = t.StorageDescriptor(
            cols=[t.FieldSchema("name", "string", None)], location=location,
            inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", compressed=False,
            numBuckets=-1, serdeInfo=t.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
            bucketCols=[], sortCols=[], parameters={}, skewedInfo=skew, storedAsSubDirectories=True)
        client.create_table(t.Table(tableName="events", dbName=db, owner="admin", sd=sd, partitionKeys=[],
                                    parameters={}, tableType="MANAGED_TABLE"))
    finally:
        transport.close()
    return db, "events"


def test_a_skewed_table_reads_instead_of_failing(gateway, skewed_table):
    # thriftpy2 cannot hold the skew map's list keys: the client's IDL declares it
    # map<string,string> (gateway.thrift.lenient), so the binary protocol skips it. (TJSON
    # cannot carry it at all: Apache's TJSONProtocol writes list map keys as bare arrays, which
    # no JSON parser reads; the gateway writes what Apache writes.)
    db, name = skewed_table
    with admin(gateway, protocol="binary") as hms:
        table = hms.get_table(db, name)
        assert table.sd.skewedInfo.skewedColNames == ["name"]
        assert table.sd.skewedInfo.skewedColValues == [["a"], ["b"]]
        assert not table.sd.skewedInfo.skewedColValueLocationMaps
        assert [t.tableName for t in hms.get_table_objects_by_name_req(
            hms.types.GetTablesRequest(dbName=db, tblNames=[name])).tables] == [name]


@pytest.mark.parametrize("protocol", ["binary", "tjson"])
def test_declared_thrift_exception_is_the_idl_type(gateway, protocol):
    with admin(gateway, protocol=protocol) as hms:
        with pytest.raises(hms.types.NoSuchObjectException) as info:
            hms.get_database("no_such_database_here")
        assert "no_such_database_here" in info.value.message
        assert hms.get_database(DB).name == DB  # the connection is still usable


def test_one_kept_alive_connection_for_many_calls(gateway):
    with admin(gateway) as hms:
        for _ in range(20):
            hms.get_database(DB)
        pool = hms.transport._pool
        assert pool.num_connections == 1
        assert pool.num_requests == 20


def test_connection_survives_a_gateway_restart(hms, gateway_factory):
    gw = gateway_factory(services=[service([f"thrift://127.0.0.1:{hms.port}"])], users=USERS)
    with admin(gw) as hms_client:
        assert DB in hms_client.get_all_databases()
        gw = gateway_factory.restart(gw)  # the kept-alive connection is now closed by the old process
        assert DB in hms_client.get_all_databases()


def test_wrong_password_is_authentication_failed_without_the_password(gateway):
    with connect(gateway.url(), auth=BasicAuth("admin", "not-the-password-42"), ca=gateway.ca_file) as hms:
        with pytest.raises(AuthenticationFailed) as info:
            hms.get_all_databases()
    error = info.value
    assert error.status == 401
    assert 'Basic realm="HMS Gateway", charset="UTF-8"' in error.challenges
    assert "not-the-password-42" not in str(error) and "not-the-password-42" not in repr(error.args)
    assert str(error).startswith("HTTP 401 from " + gateway.url())


def test_service_acl_refusal_is_access_denied_with_the_reason(gateway):
    with connect(gateway.url("admins"), auth=BasicAuth("bob", USERS["bob"]), ca=gateway.ca_file) as hms:
        with pytest.raises(AccessDenied) as info:
            hms.get_all_databases()
    assert info.value.status == 403
    assert "bob is not in the service ACL" in info.value.reason


def test_client_certificate_authenticates(gateway, direct_thriftpy):
    certs = gateway.workdir / "certs"
    auth = ClientCertificateAuth(str(certs / "alice.crt"), str(certs / "alice.key"))
    with connect(gateway.url("admins"), auth=auth, ca=gateway.ca_file) as hms:  # ACL: admin, alice
        assert hms.get_all_databases() == direct_thriftpy.get_all_databases()


def test_method_not_exposed_is_a_tapplicationexception(gateway):
    with admin(gateway, "narrow") as hms:
        assert DB in hms.get_all_databases()
        with pytest.raises(TApplicationException) as info:
            hms.get_database(DB)
    assert info.value.type == TApplicationException.UNKNOWN_METHOD


def test_upstream_down_is_gateway_unavailable(gateway):
    with admin(gateway, "dead") as hms:
        with pytest.raises(GatewayUnavailable) as info:
            hms.get_all_databases()
    assert info.value.status == 502


def test_untrusted_gateway_certificate_is_refused(gateway, tmp_path):
    other_ca = tmp_path / "other"
    write_client_certificate(other_ca, "x")
    with connect(gateway.url(), auth=BasicAuth("admin", USERS["admin"]), ca=other_ca / "ca.crt") as hms:
        with pytest.raises(GatewayUnreachable) as info:
            hms.get_all_databases()
    assert info.value.status is None
    assert "TLS failed" in info.value.reason and "certificate verify failed" in info.value.reason


# Every authentication provider, in the tunnel test's gateway (tests/integration/test_tunnel.py:
# htpasswd, JWT, Kerberos through the test KDC, client certificates; its own empty HMS).
@pytest.mark.parametrize("provider", ["basic", "jwt", "cert", "kerberos"])
def test_each_provider_acts_as_its_user(tunnel_gateway, tunnel_kerberos_env, provider, tmp_path, monkeypatch):
    if provider == "basic":
        auth, user = BasicAuth("etl", TUNNEL_USERS["etl"]), "etl"
    elif provider == "jwt":
        auth, user = BearerAuth(tunnel_token("carol")), "carol"
    elif provider == "cert":
        certs = tunnel_gateway.client_certs
        auth, user = ClientCertificateAuth(str(certs / "alice.crt"), str(certs / "alice.key")), "alice"
    else:
        for key, value in tunnel_kerberos_env.items():  # the realm's krb5.conf and dave's ticket cache
            monkeypatch.setenv(key, value)
        auth, user = KerberosAuth(), "dave"
    with connect(tunnel_gateway.url("spark", "hive/rw"), auth=auth, ca=tunnel_gateway.ca_file) as hms:
        assert "default" in hms.get_all_databases()
        name = f"client_{provider}_{uuid.uuid4().hex[:8]}"
        hms.create_database(hms.types.Database(name=name, description="via hms_gateway_client", ownerName="admin",
                                               parameters={}))
        assert hms.get_database(name).ownerName == user  # HMS acted as the authenticated user
