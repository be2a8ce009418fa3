"""Strict TBinaryProtocol and TCompactProtocol clients over HTTPS, through the real gateway to the
real HMS (issue 3, point 3): what Hive 4's HTTP-mode client, Trino and Presto send.

The clients are Apache Thrift's own Python ``THttpClient`` with ``TBinaryProtocol`` /
``TCompactProtocol`` (pure and ``fastbinary``-accelerated) and the generated Hive Metastore code;
every result must equal a direct binary call to the same HMS.
"""

from __future__ import annotations

import base64

import pytest
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import THttpClient, TTransport

from tests.support.gateway import RunningGateway, post, service, upstream_calls
from tests.support.spec_calls import DB, TABLE, assert_spec_methods_match
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"

PROTOCOLS = {
    "binary": (lambda t: TBinaryProtocol.TBinaryProtocol(t, strictRead=True, strictWrite=True),
               "application/x-thrift"),
    "binary-accelerated": (TBinaryProtocol.TBinaryProtocolAccelerated, "application/x-thrift"),
    "compact": (TCompactProtocol.TCompactProtocol, "application/vnd.apache.thrift.compact"),
    "compact-accelerated": (TCompactProtocol.TCompactProtocolAccelerated,
                            "application/vnd.apache.thrift.compact"),
}


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    topologies = {
        "default": {"services": [service([hms_url])]},
        "narrow": {"services": [service([hms_url], methods=["get_all_databases"])]},
    }
    return module_gateway_factory(topologies, {USER: PASSWORD})


def http_client(gw: RunningGateway, protocol: str, topology: str = "default"):
    service_mod, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url(topology), ssl_context=gw.ssl_context())
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    transport.setCustomHeaders({"Authorization": f"Basic {token}"})
    factory, _ = PROTOCOLS[protocol]
    return service_mod.Client(factory(transport)), transport


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_nine_spec_methods_equal_direct_calls(gateway, direct, protocol):
    client, transport = http_client(gateway, protocol)
    try:
        assert_spec_methods_match(client, direct)
        assert transport.headers["Content-Type"] == PROTOCOLS[protocol][1]
    finally:
        transport.close()


@pytest.mark.parametrize("protocol", ["binary", "compact"])
def test_declared_hms_exception_comes_back_in_the_clients_protocol(gateway, protocol):
    _, ttypes = hive_metastore_modules()
    client, transport = http_client(gateway, protocol)
    try:
        with pytest.raises(ttypes.NoSuchObjectException) as info:
            client.get_database("no_such_database_here")
        assert "no_such_database_here" in info.value.message
    finally:
        transport.close()


@pytest.mark.parametrize("protocol", ["binary", "compact-accelerated"])
def test_method_not_exposed_is_a_tapplicationexception_in_the_clients_protocol(gateway, protocol):
    before = upstream_calls(gateway)
    client, transport = http_client(gateway, protocol, topology="narrow")
    try:
        assert "default" in client.get_all_databases()
        with pytest.raises(TApplicationException) as info:
            client.get_table(DB, TABLE)
        assert info.value.type == TApplicationException.UNKNOWN_METHOD
        assert "get_table" in info.value.message
        assert transport.headers["Content-Type"] == PROTOCOLS[protocol][1]
    finally:
        transport.close()
    assert upstream_calls(gateway) == before + 1  # only get_all_databases went upstream


def _message(factory, name: str, obj) -> bytes:
    buffer = TTransport.TMemoryBuffer()
    protocol = factory(buffer)
    protocol.writeMessageBegin(name, 1, 1)
    obj.write(protocol)
    protocol.writeMessageEnd()
    return buffer.getvalue()


def test_malformed_binary_and_compact_bodies_get_400_and_never_reach_hms(gateway):
    service_mod, _ = hive_metastore_modules()
    args = service_mod.get_table_args(DB, TABLE)
    strict = _message(PROTOCOLS["binary"][0], "get_table", args)
    compact = _message(TCompactProtocol.TCompactProtocol, "get_table", args)
    old_style = _message(lambda t: TBinaryProtocol.TBinaryProtocol(t, strictWrite=False), "get_table", args)
    before = upstream_calls(gateway)
    for body in (strict[:-1], strict + b"\x00", strict[:3] + b"\x02" + strict[4:], old_style,
                 compact[:-1], compact + b"\x00", compact[:8] + b"\xff" * 12):
        status, headers, text = post(gateway, body, headers={"Content-Type": "application/x-thrift"})
        assert status == 400, (body, text)
        assert text.startswith(b"malformed Thrift message: ")
    assert upstream_calls(gateway) == before
