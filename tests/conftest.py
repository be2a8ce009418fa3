"""Settings every test session shares.

config/topologies/default.yaml reads its ``gateway-token`` key from ``HMS_GATEWAY_TOKEN_KEY``,
which ``make run`` sets (gateway/demo/tokens.py); tests that load or serve the repository's
topologies get a fresh key for the session (gateways they start inherit it).
"""

import os
import secrets

import pytest

from gateway.demo.tokens import KEY_ENV

os.environ.setdefault(KEY_ENV, secrets.token_urlsafe(64))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``long`` first (stable otherwise): ``make test``'s two workers take
    modules in this order, so the short ones fill the time beside the long ones instead of one
    worker running a long module alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
