"""A throw-away MIT Kerberos realm for tests (PyPI ``k5test`` driving Debian's ``krb5kdc``).

One realm per call, in its own temp dir, with its KDC on reserved ports (k5test's ``portbase``
and the next ones, :mod:`tests.support.ports`): a service principal
``HTTP/localhost@REALM`` in a keytab for the gateway, and user principals with their own
credential caches for clients (``curl --negotiate``, ``requests-gssapi``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from k5test import K5Realm

from tests.support.ports import start_with_retry

REALM = "GATEWAY.TEST"
SERVICE = "HTTP/localhost"


@dataclass
class TestRealm:
    realm: K5Realm
    keytab: Path
    principal: str

    @property
    def env(self) -> dict[str, str]:
        """Client environment: the realm's krb5.conf (no default keytab for clients)."""
        return {k: v for k, v in self.realm.env.items() if k != "KRB5_KTNAME"}

    def add_user(self, name: str, password: str, ccache: Path) -> dict[str, str]:
        """Create ``name@REALM`` and kinit it into ``ccache``; the env for a client using it."""
        self.realm.addprinc(f"{name}@{REALM}", password)
        env = {**self.env, "KRB5CCNAME": f"FILE:{ccache}"}
        self.realm.kinit(f"{name}@{REALM}", password, env=env)
        return env

    def stop(self) -> None:
        self.realm.stop()


def start_realm() -> TestRealm:
    """Start the KDC; raises RuntimeError when MIT Kerberos is not installed."""
    for cmd in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit"):
        if not (shutil.which(cmd) or shutil.which(cmd, path="/usr/sbin:/usr/bin")):
            raise RuntimeError(f"{cmd} not found: run scripts/install-system-deps.sh (krb5-kdc ...)")
    if "/usr/sbin" not in os.environ.get("PATH", ""):
        os.environ["PATH"] += ":/usr/sbin"
    realm = start_with_retry(lambda portbase: K5Realm(
        realm=REALM, portbase=portbase, start_kadmind=False, create_host=False, create_user=False,
        get_creds=False), span=10)
    keytab = Path(realm.tmpdir) / "gateway.keytab"
    principal = f"{SERVICE}@{REALM}"
    realm.addprinc(principal)
    realm.extract_keytab(principal, str(keytab))
    return TestRealm(realm, keytab, principal)
