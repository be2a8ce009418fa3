"""Real servers for the integration tests: one Hive Metastore (with the demo catalog) per session,
and the gateway factories (:class:`tests.support.gateway.GatewayFactory`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.big_table import start_big_table_hms
from tests.support.feed import Catalog
from tests.support.gateway import GatewayFactory
from tests.support.hms import RunningHMS, start_hms
from tests.support.kdc import start_realm
from tests.support.thriftpy_client import direct_thriftpy_client
from tests.support.tunnel import start_tunnel_test_gateway
from tests.support.thrift_gen import hive_metastore_client


@pytest.fixture(scope="session")
def hms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHMS]:
    """The session's HMS, unframed, filled once by the demo pipeline (spec sample catalog and more)."""
    running = start_hms(tmp_path_factory.mktemp("hms"), catalog=True)
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture
def hms_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RunningHMS]]:
    """Start extra, independent metastores (empty unless ``catalog=True``); all stopped after the test.

    Call as ``hms_factory(framed=False, catalog=False)``.
    """
    started: list[RunningHMS] = []

    def factory(*, framed: bool = False, catalog: bool = False, **kwargs) -> RunningHMS:
        running = start_hms(tmp_path_factory.mktemp("hms-extra"), framed=framed, catalog=catalog, **kwargs)
        started.append(running)
        return running

    yield factory
    for running in started:
        running.server.stop()


@pytest.fixture
def gateway_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayFactory]:
    """Start real gateways for one test; all stopped after it.

    Call as ``gateway_factory(topologies, users, services=..., **gateway file keys)``
    (:meth:`GatewayFactory.__call__`).
    """
    factory = GatewayFactory(tmp_path_factory.mktemp)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def module_gateway_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayFactory]:
    """:func:`gateway_factory` for a module's gateways (module-scoped fixtures); all stopped
    after the module."""
    factory = GatewayFactory(tmp_path_factory.mktemp)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def big_table_hms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHMS]:
    """An HMS of this module's own whose catalog starts with ``bigdb.big``, 50,000 partitions
    (:func:`tests.support.big_table.start_big_table_hms`: built once per run, copied here)."""
    running = start_big_table_hms(tmp_path_factory, tmp_path_factory.mktemp("hms-big"))
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture(scope="session")
def direct(hms: RunningHMS):
    """A direct strict-binary client of the session HMS (Apache's generated code), for comparing."""
    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        yield client
    finally:
        transport.close()


@pytest.fixture(scope="module")
def feed_hms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHMS]:
    """An empty HMS of its own per test module, for the change-feed tests (its notification log
    holds only what the module does)."""
    running = start_hms(tmp_path_factory.mktemp("hms-feed"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def catalog(feed_hms: RunningHMS) -> Iterator[Catalog]:
    """DDL on ``feed_hms`` through Apache's generated client."""
    cat = Catalog(feed_hms)
    yield cat
    cat.close()


@pytest.fixture(scope="module")
def direct_thriftpy(hms: RunningHMS):
    """A :func:`direct_thriftpy_client` of the session HMS (``direct`` is Apache's)."""
    client = direct_thriftpy_client(hms)
    yield client
    client.close()


# The tunnel tests' world (tests/integration/test_tunnel.py, test_python_client.py), one per module.

@pytest.fixture(scope="module")
def kerberos_realm():
    """A Kerberos realm of the test KDC, one per module (tunnel, Kerberos and combined auth tests)."""
    realm = start_realm()
    yield realm
    realm.stop()


@pytest.fixture(scope="module")
def tunnel_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHMS]:
    """An empty HMS of the module's own: the tunnel tests create databases."""
    running = start_hms(tmp_path_factory.mktemp("hms-tunnel"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def tunnel_gateway(tunnel_metastore, kerberos_realm, module_gateway_factory, tmp_path_factory: pytest.TempPathFactory):
    """:func:`tests.support.tunnel.start_tunnel_test_gateway` on the two fixtures above."""
    return start_tunnel_test_gateway(module_gateway_factory, tmp_path_factory.mktemp("gw-tunnel"), tunnel_metastore,
                                     kerberos_realm)


@pytest.fixture(scope="module")
def tunnel_kerberos_env(kerberos_realm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of user dave with a ticket cache in ``kerberos_realm`` (password dave-password)."""
    return kerberos_realm.add_user("dave", "dave-password", tmp_path_factory.mktemp("ccache") / "dave")


@pytest.fixture(scope="module")
def module_hms(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[RunningHMS]:
    """An empty HMS (with lock support) of the test module's own, stopped after the module."""
    running = start_hms(tmp_path_factory.mktemp(f"hms-{request.module.__name__.rsplit('.', 1)[-1]}"))
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture(scope="module")
def hive_catalog(module_hms: RunningHMS):
    """PyIceberg's ``HiveCatalog`` straight on ``module_hms`` (no gateway), its warehouse the HMS's."""
    from pyiceberg.catalog.hive import HiveCatalog  # only the Iceberg modules need PyIceberg

    return HiveCatalog("hms", uri=module_hms.uri, warehouse=module_hms.warehouse_dir.as_uri())


@pytest.fixture(scope="module")
def pyiceberg_env() -> Iterator[None]:
    """``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` unset for the module: ``requests`` prefers them
    to PyIceberg's ``ssl.cabundle``, which must name the gateway's CA."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("REQUESTS_CA_BUNDLE", raising=False)
        patch.delenv("CURL_CA_BUNDLE", raising=False)
        yield
