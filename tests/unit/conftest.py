"""Shared fixtures for the Thrift unit tests."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from gateway.thrift.schema import load_schema
from tests.support.thrift_gen import hive_metastore_modules


@pytest.fixture(scope="session")
def apache_hms() -> SimpleNamespace:
    """Apache ``thrift --gen py`` code of the project IDL: ``.ttypes``, ``.service``, ``.fb303``."""
    service, ttypes = hive_metastore_modules()
    fb303 = importlib.import_module("fb303.FacebookService")
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
