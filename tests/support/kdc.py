"""The test KDC (gateway/demo/realm.py) with a service principal ``HTTP/localhost@REALM`` in a
keytab for the gateway's SPNEGO, and user principals with their own credential caches for
clients (``curl --negotiate``, ``requests-gssapi``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gateway.demo.realm import REALM, Realm, start_kdc

__all__ = ["REALM", "SERVICE", "TestRealm", "start_realm"]

SERVICE = "HTTP/localhost"


@dataclass
class TestRealm(Realm):
    keytab: Path | None = None
    principal: str = ""


def start_realm() -> TestRealm:
    """Start the KDC with ``HTTP/localhost``'s keytab; raises RuntimeError when MIT Kerberos is not installed."""
    kdc = start_kdc()
    try:
        keytab = kdc.add_service(SERVICE, kdc.directory / "gateway.keytab")
    except BaseException:
        kdc.stop()
        raise
    return TestRealm(kdc.realm, keytab, f"{SERVICE}@{REALM}")
