"""MS-HMSHTTP end to end: real TLS, real HMS (seeded by PySpark), real Thrift clients.

The gateway runs as ``hms-gateway serve`` in a subprocess; every result is compared with a
direct strict-binary call to the same HMS made by Apache Thrift's own generated client.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from thrift.protocol import TJSONProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import THttpClient

from tests.support.gateway import (
    RunningGateway,
    metric,
    post,
    service,
    upstream_calls,
)
from tests.support.ports import reserve_port
from tests.support.relay import TcpRelay
from tests.support.spec_calls import DB, TABLE, assert_spec_methods_match
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"


class BlackHole:
    """A TCP listener that never accepts: connections complete in the kernel, replies never come."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def black_hole():
    bh = BlackHole()
    yield bh
    bh.close()


@pytest.fixture(scope="module")
def forwarder(hms):
    fw = TcpRelay(("127.0.0.1", hms.port))
    yield fw
    fw.stop()


@pytest.fixture(scope="module")
def gateway(hms, black_hole, forwarder, module_gateway_factory) -> RunningGateway:
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    topologies = {
        "default": {"services": [service([hms_url])]},
        "narrow": {"services": [service([hms_url], methods=["get_all_databases"])]},
        "dead": {"services": [service([f"thrift://127.0.0.1:{reserve_port()}"])]},
        "slow": {"services": [service([f"thrift://127.0.0.1:{black_hole.port}"], timeout_seconds=1.5)]},
        "relay": {"services": [service([f"thrift://127.0.0.1:{forwarder.port}"])]},
        "failover": {"services": [service([f"thrift://127.0.0.1:{reserve_port()}", hms_url])]},
    }
    return module_gateway_factory(topologies, {USER: PASSWORD, "bob": "bob-password"},
                                  limits={"max_request_bytes": 64 * 1024})


def http_client(gw: RunningGateway, topology: str = "default", auth=(USER, PASSWORD)):
    """Apache Thrift's own HTTP client: THttpClient + TJSONProtocol + generated code."""
    service_mod, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url(topology), ssl_context=gw.ssl_context())
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        transport.setCustomHeaders({"Authorization": f"Basic {token}"})
    return service_mod.Client(TJSONProtocol.TJSONProtocol(transport)), transport


# --- the nine methods, through Apache's THttpClient, equal to direct binary calls -------------


def test_all_nine_spec_methods_match_direct_binary_calls(gateway, direct):
    client, transport = http_client(gateway)
    try:
        assert_spec_methods_match(client, direct)
    finally:
        transport.close()


def test_hms_exceptions_come_back_as_declared_exception_fields(gateway, direct):
    _, ttypes = hive_metastore_modules()
    client, transport = http_client(gateway)
    try:
        with pytest.raises(ttypes.NoSuchObjectException) as via_gateway:
            client.get_database("no_such_database_xyz")
        with pytest.raises(ttypes.NoSuchObjectException) as via_direct:
            direct.get_database("no_such_database_xyz")
        assert via_gateway.value == via_direct.value
        with pytest.raises(ttypes.NoSuchObjectException):
            client.get_table(DB, "no_such_table")
    finally:
        transport.close()


# --- raw spec bodies (section 3.1.5, corrected where the PDF mangled them) ------------------


SPEC_BODIES = {
    "get_all_databases": '[1,"get_all_databases",1,1,{}]',
    "get_databases": '[1,"get_databases",1,1,{"1":{"str":"default*"}}]',
    "get_database": '[1,"get_database",1,1,{"1":{"str":"default"}}]',
    "get_all_tables": '[1,"get_all_tables",1,1,{"1":{"str":"default"}}]',
    "get_tables": '[1,"get_tables",1,1,{"1":{"str":"default"},"2":{"str":"*"}}]',
    "get_table": '[1,"get_table",1,1,{"1":{"str":"hmshttptestdatabase"},"2":{"str":"test_table"}}]',
    "get_tables_by_type": '[1,"get_tables_by_type",1,1,{"1":{"str":"hmshttptestdatabase"},'
                          '"2":{"str":"*"},"3":{"str":"MANAGED_TABLE"}}]',
    "get_partition_names": '[1,"get_partition_names",1,1,{"1":{"str":"hmshttptestdatabase"},'
                           '"2":{"str":"test_table"},"3":{"i16":-1}}]',
    "get_partitions": '[1,"get_partitions",1,1,{"1":{"str":"hmshttptestdatabase"},'
                      '"2":{"str":"test_table"},"3":{"i16":-1}}]',
}


@pytest.mark.parametrize("method", SPEC_BODIES)
def test_spec_example_bodies(gateway, method):
    status, headers, body = post(gateway, SPEC_BODIES[method].replace(",1,1,", ",1,7,", 1))
    assert status == 200, body
    assert headers["Content-Type"].startswith("application/vnd.apache.thrift.json")
    assert not re.search(rb"\s", re.sub(rb'"(?:[^"\\]|\\.)*"', b"", body))  # compact
    message = json.loads(body)
    assert message[:4] == [1, method, 2, 7]  # version, name, REPLY, the client's seqid
    assert "0" in message[4], message  # success field


def test_spec_get_all_databases_reply_shape(gateway):
    status, _, body = post(gateway, SPEC_BODIES["get_all_databases"])
    assert status == 200
    reply = json.loads(body)
    tag, count, *names = reply[4]["0"]["lst"]
    assert tag == "str" and count == len(names) and {"default", DB} <= set(names)


def test_curl_as_in_the_readme(gateway):
    out = subprocess.run(
        ["curl", "-sS", "--cacert", str(gateway.ca_file), "-u", f"{USER}:{PASSWORD}",
         "-H", "Content-Type: application/vnd.apache.thrift.json",
         "--data", SPEC_BODIES["get_partition_names"], gateway.url()],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout
    assert json.loads(out)[4]["0"]["lst"] == ["str", 2, "hair_color=black", "hair_color=brown"]


def test_content_type_is_only_a_hint(gateway):
    for ctype in ("application/x-thrift", "application/json", "text/plain"):
        status, _, body = post(gateway, SPEC_BODIES["get_all_databases"], headers={"Content-Type": ctype})
        assert status == 200 and json.loads(body)[2] == 2


# --- authentication --------------------------------------------------------------------------


def test_missing_credentials_get_401_with_basic_challenge(gateway):
    status, headers, _ = post(gateway, SPEC_BODIES["get_all_databases"], auth=None)
    assert status == 401
    assert headers.get_all("WWW-Authenticate") == ['Basic realm="HMS Gateway", charset="UTF-8"']


def test_wrong_password_and_unknown_user_look_the_same(gateway):
    a = post(gateway, SPEC_BODIES["get_all_databases"], auth=(USER, "wrong"))
    b = post(gateway, SPEC_BODIES["get_all_databases"], auth=("nobody", "wrong"))
    assert a[0] == b[0] == 401
    assert a[2] == b[2]
    assert a[1]["WWW-Authenticate"] == b[1]["WWW-Authenticate"]


def test_thrift_http_client_without_credentials_fails(gateway):
    client, transport = http_client(gateway, auth=None)
    with pytest.raises(Exception):
        client.get_all_databases()
    transport.close()


def test_second_user_authenticates(gateway):
    status, _, _ = post(gateway, SPEC_BODIES["get_all_databases"], auth=("bob", "bob-password"))
    assert status == 200


# --- routing and bad input -------------------------------------------------------------------


def test_unknown_topology_or_path_404(gateway):
    assert post(gateway, SPEC_BODIES["get_all_databases"], topology="nope")[0] == 404
    assert post(gateway, SPEC_BODIES["get_all_databases"], path="hmshttpthrift/api/other")[0] == 404


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_other_http_methods_405(gateway, method):
    status, headers, _ = post(gateway, "", method=method)
    assert status == 405 and headers["Allow"] == "POST"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1,\"get_all_databases\",1,1,{}",                   # truncated
        b"[1,\"get_all_databases\",1,1,{}]garbage",           # trailing garbage
        b"{\"a\":1}",                                         # wrong envelope
        b"[2,\"get_all_databases\",1,1,{}]",                  # wrong version
        b"[1,\"get_database\",1,1,{\"1\":{\"zzz\":\"x\"}}]",  # unknown type tag
        b"[1,\"get_partition_names\",1,1,{\"3\":{\"i16\":99999}}]",  # out of range
        b"[1,\"get_all_databases\",1,1,{\"1\":{\"lst\":[\"str\",3,\"a\"]}}]",  # count disagrees
        b"\xff\xfe",                                           # not UTF-8
        b"",
    ],
)
def test_malformed_bodies_get_400_and_never_reach_hms(gateway, body):
    before = upstream_calls(gateway)
    status, headers, text = post(gateway, body)
    assert status == 400, text
    assert headers["Content-Type"].startswith("text/plain")
    assert text.startswith(b"malformed Thrift message: ")
    assert upstream_calls(gateway) == before


def test_oversized_body_413(gateway):
    big = '[1,"get_databases",1,1,{"1":{"str":"' + "x" * (70 * 1024) + '"}}]'
    status, _, text = post(gateway, big)
    assert status == 413, text


def test_oversized_chunked_body_413(gateway):
    big = ('[1,"get_databases",1,1,{"1":{"str":"' + "x" * (70 * 1024) + '"}}]').encode()
    out = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(gateway.ca_file),
         "-u", f"{USER}:{PASSWORD}", "-H", "Transfer-Encoding: chunked", "--data-binary", "@-", gateway.url()],
        input=big, capture_output=True, timeout=30,
    )
    assert out.stdout == b"413"


def test_method_not_exposed_is_a_tapplicationexception(gateway):
    before = upstream_calls(gateway)
    status, _, body = post(gateway, SPEC_BODIES["get_database"].replace(",1,1,", ",1,5,"), topology="narrow")
    assert status == 200
    msg = json.loads(body)
    assert msg[:4] == [1, "get_database", 3, 5]
    assert "get_database" in msg[4]["1"]["str"] and msg[4]["2"]["i32"] == TApplicationException.UNKNOWN_METHOD
    client, transport = http_client(gateway, "narrow")
    with pytest.raises(TApplicationException) as info:
        client.get_table(DB, TABLE)
    transport.close()
    assert info.value.type == TApplicationException.UNKNOWN_METHOD and "get_table" in info.value.message
    assert upstream_calls(gateway) == before
    # A write method is not exposed by the default topology either.
    status, _, body = post(gateway, '[1,"drop_database",1,1,{"1":{"str":"default"},"2":{"tf":1},"3":{"tf":1}}]')
    assert status == 200 and json.loads(body)[2] == 3


# --- upstream failures -----------------------------------------------------------------------


def test_dead_upstream_502(gateway):
    status, headers, text = post(gateway, SPEC_BODIES["get_all_databases"], topology="dead")
    assert status == 502 and b"cannot connect" in text
    assert headers["Content-Type"].startswith("text/plain")


def test_slow_upstream_504(gateway):
    started = time.monotonic()
    status, _, text = post(gateway, SPEC_BODIES["get_all_databases"], topology="slow")
    assert status == 504 and b"did not answer" in text
    assert time.monotonic() - started < 20  # bounded by the configured 1.5 s, not hanging


def test_failover_to_the_next_upstream_when_the_first_refuses(gateway):
    status, _, body = post(gateway, SPEC_BODIES["get_all_databases"], topology="failover")
    assert status == 200 and json.loads(body)[2] == 2


def test_recovers_by_itself_when_hms_returns(gateway, forwarder):
    assert post(gateway, SPEC_BODIES["get_all_databases"], topology="relay")[0] == 502
    forwarder.start()
    assert post(gateway, SPEC_BODIES["get_all_databases"], topology="relay")[0] == 200
    forwarder.stop()  # pooled connections now point at a dead relay
    assert post(gateway, SPEC_BODIES["get_all_databases"], topology="relay")[0] == 502
    forwarder.start()
    statuses = [post(gateway, SPEC_BODIES["get_all_databases"], topology="relay")[0] for _ in range(3)]
    assert statuses[-1] == 200 and statuses.count(200) >= 2
    forwarder.stop()


def test_concurrent_clients_never_see_each_others_replies(gateway, direct):
    from concurrent.futures import ThreadPoolExecutor

    expected = {seq: (DB if seq % 2 else "default") for seq in range(1, 41)}

    def call(seq: int):
        body = f'[1,"get_database",1,{seq},{{"1":{{"str":"{expected[seq]}"}}}}]'
        status, _, out = post(gateway, body)
        msg = json.loads(out)
        return status, msg[3], msg[4]["0"]["rec"]["1"]["str"]

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(call, expected))
    for seq, (status, seqid, name) in zip(expected, results):
        assert status == 200 and seqid == seq and name == expected[seq]


# --- management listener ---------------------------------------------------------------------


def metrics_text(gw: RunningGateway) -> str:
    with urllib.request.urlopen(gw.management_url + "/metrics", timeout=10) as r:
        return r.read().decode()


def test_metrics_count_requests_and_auth_failures(gateway):
    labels = dict(topology="default", service="hmshttpthrift/api/hms", method="get_all_databases")
    before_ok = metric(gateway, "hms_gateway_requests_total", outcome="ok", **labels)
    before_fail = metric(gateway, "hms_gateway_authentication_total", provider="htpasswd", outcome="failure")
    for _ in range(3):
        assert post(gateway, SPEC_BODIES["get_all_databases"])[0] == 200
    assert post(gateway, SPEC_BODIES["get_all_databases"], auth=(USER, "bad"))[0] == 401
    assert metric(gateway, "hms_gateway_requests_total", outcome="ok", **labels) == before_ok + 3
    assert metric(gateway, "hms_gateway_authentication_total", provider="htpasswd",
                  outcome="failure") == before_fail + 1
    assert metric(gateway, "hms_gateway_request_duration_seconds_count", **labels) >= 3
    assert metric(gateway, "hms_gateway_tls_certificate_expiry_timestamp_seconds") > time.time()
    text = metrics_text(gateway)
    assert 'hms_gateway_upstream_duration_seconds_bucket' in text


def test_healthz_and_readyz(gateway, gateway_factory):
    with urllib.request.urlopen(gateway.management_url + "/healthz", timeout=5) as r:
        assert r.status == 200
    with urllib.request.urlopen(gateway.management_url + "/readyz", timeout=10) as r:
        assert r.status == 200
    lonely = gateway_factory({"dead": {"services": [service([f"thrift://127.0.0.1:{reserve_port()}"])]}},
                             {USER: PASSWORD})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(lonely.management_url + "/readyz", timeout=10)
    assert info.value.code == 503 and b"cannot connect" in info.value.read()


def test_tls_1_1_is_refused(gateway):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(gateway.ca_file)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, OSError)):
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as sock:
            with ctx.wrap_socket(sock, server_hostname="localhost"):
                pass


def test_no_password_in_gateway_log(gateway):
    post(gateway, SPEC_BODIES["get_all_databases"], auth=(USER, "a-wrong-secret"))
    log = gateway.log()
    assert PASSWORD not in log and "a-wrong-secret" not in log
