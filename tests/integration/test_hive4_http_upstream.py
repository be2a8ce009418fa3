"""A service whose upstream is a Hive 4 Metastore in HTTP mode (issue 3, point 4).

**Hive 4 is not available on this machine** (no Maven access; the only HMS here is 2.3.10 from
PySpark), so the upstream is a small relay written in this test that implements the Hive 4
HTTP-mode contract of ``HmsThriftHttpServlet`` in front of the real HMS 2.3:

* ``POST /metastore`` with a strict-binary Thrift message as the body, answered with the
  strict-binary reply (Apache Thrift's generated ``Processor`` reads the body, the call goes to
  the real HMS over TCP with Apache's generated ``Client``, the processor writes the reply);
* the acting user comes from the ``x-actor-username`` header; without it the answer is
  401 ``Authentication error: User header x-actor-username missing in request`` (Hive's text);
* the relay records every user it saw, so the test can check the gateway sent the asserted one.

Other paths make the relay answer 403, 500 or nothing in time, for the error mapping.
"""

from __future__ import annotations

import asyncio
import base64
import threading

import pytest
from aiohttp import web
from thrift.protocol import TBinaryProtocol, TJSONProtocol
from thrift.transport import THttpClient, TTransport

from gateway.config import ConfigError, load_topology_file
from tests.support.gateway import RunningGateway, post, service
from tests.support.ports import reserve_port
from tests.support.spec_calls import assert_spec_methods_match
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"


class Hive4HttpRelay:
    """Hive 4 HTTP-mode stand-in (see the module docstring) on ``127.0.0.1:port``."""

    def __init__(self, hms_host: str, hms_port: int):
        self.hms = (hms_host, hms_port)
        self.port = 0  # bound by start(): port 0, read back
        self.users: list[str | None] = []
        self.content_types: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        service_mod, _ = hive_metastore_modules()
        self._client, self._transport = hive_metastore_client(hms_host, hms_port)
        self._processor = service_mod.Processor(self._client)

    def _process(self, body: bytes) -> bytes:
        with self._lock:  # one HMS connection, one call at a time
            out = TTransport.TMemoryBuffer()
            self._processor.process(
                TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(body), strictRead=True),
                TBinaryProtocol.TBinaryProtocol(out, strictWrite=True),
            )
            return out.getvalue()

    async def _metastore(self, request: web.Request) -> web.Response:
        user = request.headers.get("x-actor-username")
        self.users.append(user)
        self.content_types.append(request.headers.get("Content-Type", ""))
        if not user:
            return web.Response(status=401, text="Authentication error: User header "
                                                  "x-actor-username missing in request\n")
        body = await request.read()
        reply = await asyncio.to_thread(self._process, body)
        return web.Response(body=reply, content_type="application/x-thrift")

    async def _forbidden(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=403, text="Forbidden: user is not allowed to impersonate\n")

    async def _broken(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=500, text="java.lang.NullPointerException\n")

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(5)  # longer than the service timeout of 1.5 s
        return web.Response(status=200)

    async def _garbage(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"<html>proxy error</html>", content_type="text/html")

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/metastore", self._metastore)
        app.router.add_post("/forbidden", self._forbidden)
        app.router.add_post("/broken", self._broken)
        app.router.add_post("/slow", self._slow)
        app.router.add_post("/garbage", self._garbage)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> "Hive4HttpRelay":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def url(self, path: str = "metastore") -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._transport.close()


@pytest.fixture(scope="module")
def relay(hms):
    r = Hive4HttpRelay("127.0.0.1", hms.port).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def gateway(relay, module_gateway_factory) -> RunningGateway:
    topologies = {
        "hive4": {"services": [service([relay.url()])]},
        "forbidden": {"services": [service([relay.url("forbidden")])]},
        "broken": {"services": [service([relay.url("broken")])]},
        "garbage": {"services": [service([relay.url("garbage")])]},
        "slow": {"services": [service([relay.url("slow")], timeout_seconds=1.5)]},
        "dead": {"services": [service([f"http://127.0.0.1:{reserve_port()}/metastore"])]},
    }
    return module_gateway_factory(topologies, {USER: PASSWORD, "bob": "bob-pw"})


def http_client(gw: RunningGateway, topology: str, protocol=TJSONProtocol.TJSONProtocol, user=USER,
                password=PASSWORD):
    service_mod, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url(topology), ssl_context=gw.ssl_context())
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    transport.setCustomHeaders({"Authorization": f"Basic {token}"})
    return service_mod.Client(protocol(transport)), transport


@pytest.mark.parametrize("protocol", [TJSONProtocol.TJSONProtocol, TBinaryProtocol.TBinaryProtocolAccelerated],
                         ids=["tjson", "binary"])
def test_nine_methods_through_the_http_mode_upstream_equal_direct_calls(gateway, relay, direct, protocol):
    client, transport = http_client(gateway, "hive4", protocol)
    seen = len(relay.users)
    try:
        calls = assert_spec_methods_match(client, direct)
    finally:
        transport.close()
    assert relay.users[seen:] == [USER] * calls
    assert set(relay.content_types[seen:]) == {"application/x-thrift"}


def test_the_asserted_user_goes_in_x_actor_username(gateway, relay):
    client, transport = http_client(gateway, "hive4", user="bob", password="bob-pw")
    seen = len(relay.users)
    try:
        client.get_all_databases()
    finally:
        transport.close()
    assert relay.users[seen:] == ["bob"]


def test_declared_exception_through_http_mode(gateway):
    _, ttypes = hive_metastore_modules()
    client, transport = http_client(gateway, "hive4")
    try:
        with pytest.raises(ttypes.NoSuchObjectException):
            client.get_database("no_such_database_here")
    finally:
        transport.close()


@pytest.mark.parametrize(
    "topology, status, reason",
    [
        ("forbidden", 502, b"HTTP 403: Forbidden: user is not allowed"),
        ("broken", 502, b"HTTP 500: java.lang.NullPointerException"),
        ("garbage", 502, b"bad binary message version"),
        ("dead", 502, b"cannot connect"),
        ("slow", 504, b"did not answer within 1.5 s"),
    ],
)
def test_upstream_http_failures_map_to_gateway_statuses(gateway, topology, status, reason):
    code, _, text = post(gateway, '[1,"get_all_databases",1,1,{}]', topology=topology)
    assert code == status, text
    assert reason in text


def test_upstream_url_validation(tmp_path):
    users = tmp_path / "users"
    users.write_text("")
    providers = f"providers:\n  authentication:\n  - type: htpasswd\n    users_file: {users}\n"
    good = tmp_path / "good.yaml"
    good.write_text(providers + "services:\n- path: p\n  upstream:\n    urls: [https://hms.example:9443/metastore,"
                    " 'thrift://h:9083']\n")
    assert load_topology_file(good).services[0].upstream.urls[0].startswith("https://")
    for url in ("ftp://h/x", "thrift://h", "http://user:pw@h/metastore", "http:///metastore"):
        bad = tmp_path / "bad.yaml"
        bad.write_text(providers + f"services:\n- path: p\n  upstream:\n    urls: ['{url}']\n")
        with pytest.raises(ConfigError) as info:
            load_topology_file(bad)
        assert "services[0].upstream.urls" in str(info.value) and url in str(info.value)
