"""Shared fixtures of the unit tests: Apache's generated code, the schema, both translation
implementations, a scripted change-feed server."""

from __future__ import annotations

import ssl
import threading
from http.server import ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from gateway.certs import write_dev_certificates
from gateway.thrift.schema import load_schema
from tests.support.fake_feed import FeedHandler
from tests.support.thrift_gen import fb303_service, hive_metastore_modules


@pytest.fixture(scope="session")
def apache_hms() -> SimpleNamespace:
    """Apache ``thrift --gen py`` code of the project IDL: ``.ttypes``, ``.service``, ``.fb303``."""
    service, ttypes = hive_metastore_modules()
    fb303 = fb303_service()
    return SimpleNamespace(ttypes=ttypes, service=service, fb303=fb303)


@pytest.fixture(scope="session")
def schema():
    return load_schema()


@pytest.fixture(params=["c", "python"])
def thrift_impl(request):
    """Runs a test on the C translation code and again on the pure-Python code."""
    from gateway.thrift import accel

    with accel.using(request.param):  # "c" fails loudly if the extension is not built
        yield request.param


@pytest.fixture
def feed_server(tmp_path):
    """A :class:`FeedHandler` over TLS: (events URL, CA file); ``FeedHandler.seen`` emptied."""
    certs = write_dev_certificates(tmp_path / "certs")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FeedHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.certificate, certs.private_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    FeedHandler.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://localhost:{server.server_address[1]}/gateway/default/events", certs.ca_certificate
    server.shutdown()
    server.server_close()
