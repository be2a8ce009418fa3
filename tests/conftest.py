"""Settings every test session shares.

config/topologies/default.yaml reads its ``gateway-token`` key from ``HMS_GATEWAY_TOKEN_KEY``,
which ``make run`` sets (demo/tokens.py); tests that load or serve the repository's
topologies get a fresh key for the session (gateways they start inherit it). Likewise
config/topologies/glue.yaml's ``sigv4`` provider reads the demo's AWS access keys from
``HMS_GATEWAY_DEMO_AWS_CREDENTIALS`` (demo/aws_keys.py): fresh secrets for the session.

Every process the session starts inherits its tag (:data:`tests.support.orphans.SESSION_ENV`),
and a server still running when the session ends fails it (:func:`no_server_outlives_the_session`).
"""

import os
import secrets

import pytest

from demo.aws_keys import CREDENTIALS_ENV, fresh_credentials
from demo.tokens import KEY_ENV
from tests.support.orphans import SESSION_ENV, reap

os.environ.setdefault(KEY_ENV, secrets.token_urlsafe(64))
os.environ.setdefault(CREDENTIALS_ENV, fresh_credentials())
# Set here, in the process pytest starts in, before xdist starts its workers: they inherit it.
os.environ.setdefault(SESSION_ENV, secrets.token_hex(8))


@pytest.fixture(scope="session", autouse=True)
def no_server_outlives_the_session():
    """Set up first, torn down last: after every other fixture has stopped what it started,
    any process of this session (this xdist worker's) still running is killed, and the run
    fails at the last test's teardown naming each one."""
    yield
    left = reap(os.environ[SESSION_ENV], os.environ.get("PYTEST_XDIST_WORKER"))
    if left:
        pytest.fail("servers outlived the test session (killed now; a fixture did not stop them):\n"
                    + "\n".join(f"  {leftover}" for leftover in left), pytrace=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``long`` first (stable otherwise): ``make test``'s two workers take
    modules in this order, so the short ones fill the time beside the long ones instead of one
    worker running a long module alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
