"""The demo's token signing key: ``make run``'s topology has a ``gateway-token`` provider (so
OAuth2 client credentials, ``credential=etl:etl-password``, work for Spark, Trino, DuckDB and
PyIceberg as their own docs show) whose ``signing_key`` is ``env:HMS_GATEWAY_TOKEN_KEY``.

The demo makes the key once per working directory (``<workdir>/gateway-token.key``, mode 0600,
64 random bytes, never committed nor printed) and puts it in that variable before it loads the
topologies; a key already in the environment is used as it is. Tokens survive a restart of the
demo on the same working directory.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

#: The variable config/topologies/default.yaml's ``gateway-token`` provider reads.
KEY_ENV = "HMS_GATEWAY_TOKEN_KEY"


def demo_signing_key(workdir: Path) -> Path | None:
    """Set :data:`KEY_ENV` from ``workdir/gateway-token.key``, made first when missing.
    Returns the file, or None when the environment already had a key. Raises ``OSError``."""
    if os.environ.get(KEY_ENV):
        return None
    path = workdir / "gateway-token.key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(64) + "\n")
    os.environ[KEY_ENV] = path.read_text().strip()
    return path
