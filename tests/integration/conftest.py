"""Real servers for the integration tests: one Hive Metastore (with the demo catalog) per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.hms import RunningHMS, start_hms
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


@pytest.fixture(scope="session")
def direct(hms: RunningHMS):
    """A direct strict-binary client of the session HMS (Apache's generated code), for comparing."""
    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        yield client
    finally:
        transport.close()
