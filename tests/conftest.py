"""Settings every test session shares.

config/topologies/default.yaml reads its ``gateway-token`` key from ``HMS_GATEWAY_TOKEN_KEY``,
which ``make run`` sets (gateway/demo/tokens.py); tests that load or serve the repository's
topologies get a fresh key for the session (gateways they start inherit it).
"""

import os
import secrets

from gateway.demo.tokens import KEY_ENV

os.environ.setdefault(KEY_ENV, secrets.token_urlsafe(64))
