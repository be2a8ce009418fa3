"""Settings every test session shares.

config/topologies/default.yaml reads its ``gateway-token`` key from ``HMS_GATEWAY_TOKEN_KEY``,
which ``make run`` sets (gateway/demo/tokens.py); tests that load or serve the repository's
topologies get a fresh key for the session (gateways they start inherit it). Likewise
config/topologies/glue.yaml's ``sigv4`` provider reads the demo's AWS access keys from
``HMS_GATEWAY_DEMO_AWS_CREDENTIALS`` (gateway/demo/aws_keys.py): fresh secrets for the session.
"""

import os
import secrets

import pytest

from gateway.demo.aws_keys import CREDENTIALS_ENV, fresh_credentials
from gateway.demo.tokens import KEY_ENV

os.environ.setdefault(KEY_ENV, secrets.token_urlsafe(64))
os.environ.setdefault(CREDENTIALS_ENV, fresh_credentials())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``long`` first (stable otherwise): ``make test``'s two workers take
    modules in this order, so the short ones fill the time beside the long ones instead of one
    worker running a long module alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
