"""The demo's AWS access keys: ``make run``'s ``glue`` topology has a ``sigv4`` provider (so that
boto3's glue client, which only signs with SigV4, works against the demo) whose ``access_keys``
name one key id per demo user (:data:`ACCESS_KEYS`) and whose ``secret_keys`` is
``env:HMS_GATEWAY_DEMO_AWS_CREDENTIALS``.

The demo writes the secrets once per working directory, as an AWS shared-credentials file
(``<workdir>/aws-credentials``, mode 0600, one profile per user, 40 random characters each,
never committed nor printed: clients read the file, as ``aws configure``'s is read), and puts
the file's text in that variable before it loads the topologies. Keys survive a restart of the
demo on the same working directory.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from gateway.providers.authentication.sigv4 import parse_credentials_file

#: The variable config/topologies/glue.yaml's ``sigv4`` provider reads its secrets from.
CREDENTIALS_ENV = "HMS_GATEWAY_DEMO_AWS_CREDENTIALS"
#: The file in the demo's working directory (``var/demo`` for ``make run``).
CREDENTIALS_FILE = "aws-credentials"
#: Demo user (the profile's name) → access key id, as config/topologies/glue.yaml maps them.
ACCESS_KEYS = {"admin": "AKIAHMSGATEWAYADMIN1", "etl": "AKIAHMSGATEWAYETL001"}


def credentials_text(keys: dict[str, tuple[str, str]]) -> str:
    """An AWS shared-credentials file: profile → (access key id, secret key)."""
    return "".join(f"[{profile}]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n\n"
                   for profile, (key_id, secret) in keys.items())


def fresh_credentials() -> str:
    """:func:`credentials_text` for every demo user of :data:`ACCESS_KEYS`, with new random secrets."""
    return credentials_text({user: (key_id, secrets.token_urlsafe(30)) for user, key_id in ACCESS_KEYS.items()})


def demo_aws_credentials(workdir: Path) -> Path:
    """Set :data:`CREDENTIALS_ENV` from ``workdir/aws-credentials``, written first when missing
    (or when it lacks a demo key id, as a file from an older demo would). Returns the file.
    Raises ``OSError``; ``ValueError`` when the file is not a credentials file."""
    path = workdir / CREDENTIALS_FILE
    if path.exists() and not set(ACCESS_KEYS.values()) <= set(parse_credentials_file(path.read_text())):
        path.unlink()
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(fresh_credentials())
    os.environ[CREDENTIALS_ENV] = path.read_text()
    return path
