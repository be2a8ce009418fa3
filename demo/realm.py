"""A throw-away MIT Kerberos realm (PyPI ``k5test`` driving Debian's ``krb5kdc``) for the demo's
Kerberized metastore (``make run KERBEROS=1``) and the tests.

One realm per call, in its own temp dir, its KDC on a free port range. Principals are added with
:meth:`Realm.add_service` (a keytab) or :meth:`Realm.add_user` (a password and a credential
cache). ``k5test`` is in the ``demo-kerberos`` and ``test`` extras; the KDC binaries come from
``scripts/install-system-deps.sh`` (krb5-kdc, krb5-admin-server, krb5-user).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REALM", "Realm", "start_kdc"]

REALM = "GATEWAY.TEST"


def _unused_port_base(span: int = 10) -> int:
    # Above Linux's ephemeral range (no outgoing connection takes them) and outside the band the
    # tests hand out (tests/support/ports.py).
    for _ in range(50):
        base = random.randrange(61000, 65500 - span)
        try:
            for port in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range for the KDC")


@dataclass
class Realm:
    """A running KDC of realm :data:`REALM`; ``realm`` is the k5test ``K5Realm``."""

    realm: object

    @property
    def name(self) -> str:
        return REALM

    @property
    def directory(self) -> Path:
        """The realm's temp dir (krb5.conf, kdc.conf, the KDC's database and log)."""
        return Path(self.realm.tmpdir)

    @property
    def krb5_conf(self) -> Path:
        """The realm's ``krb5.conf`` (``KRB5_CONFIG``, the JVM's ``java.security.krb5.conf``)."""
        return Path(self.realm.env["KRB5_CONFIG"])

    @property
    def env(self) -> dict[str, str]:
        """Client environment: the realm's krb5.conf (no default keytab for clients)."""
        return {k: v for k, v in self.realm.env.items() if k != "KRB5_KTNAME"}

    def add_service(self, principal: str, keytab: Path) -> Path:
        """Create ``principal`` (``name/host`` or ``name``; ``@REALM`` is added when missing) with a
        random key and append it to ``keytab``; returns ``keytab``."""
        full = principal if "@" in principal else f"{principal}@{REALM}"
        self.realm.addprinc(full)
        self.realm.extract_keytab(full, str(keytab))
        return keytab

    def add_user(self, name: str, password: str, ccache: Path) -> dict[str, str]:
        """Create ``name@REALM`` and kinit it into ``ccache``; the env for a client using it."""
        self.realm.addprinc(f"{name}@{REALM}", password)
        env = {**self.env, "KRB5CCNAME": f"FILE:{ccache}"}
        self.realm.kinit(f"{name}@{REALM}", password, env=env)
        return env

    def stop(self) -> None:
        """Stop the KDC and delete the realm's directory."""
        self.realm.stop()


def start_kdc(portbase: int | None = None) -> Realm:
    """Start a KDC on ``portbase`` and the next nine ports (None: a free range above the
    ephemeral ports). Raises RuntimeError when MIT Kerberos or k5test is not installed, and
    what k5test raises when the KDC does not start (a port in use)."""
    for cmd in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit"):
        if not (shutil.which(cmd) or shutil.which(cmd, path="/usr/sbin:/usr/bin")):
            raise RuntimeError(f"{cmd} not found: run scripts/install-system-deps.sh (krb5-kdc ...)")
    try:
        from k5test import K5Realm
    except ImportError as exc:
        raise RuntimeError("k5test is not installed: pip install -e '.[demo,demo-kerberos]'") from exc
    if "/usr/sbin" not in os.environ.get("PATH", "").split(":"):
        os.environ["PATH"] += ":/usr/sbin"
    return Realm(K5Realm(realm=REALM, portbase=_unused_port_base() if portbase is None else portbase,
                         start_kadmind=False, create_host=False, create_user=False, get_creds=False))
