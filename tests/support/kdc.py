"""The test KDC (demo/realm.py) on reserved ports (k5test's ``portbase`` and the next
ones, :mod:`tests.support.ports`), with a service principal ``HTTP/localhost@REALM`` in a keytab
for the gateway's SPNEGO, and user principals with their own credential caches for clients
(``curl --negotiate``, ``requests-gssapi``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from demo.realm import REALM, Realm, start_kdc
from tests.support.ports import start_with_retry

__all__ = ["REALM", "SERVICE", "TestRealm", "start_realm", "start_test_kdc"]

SERVICE = "HTTP/localhost"


@dataclass
class TestRealm(Realm):
    keytab: Path | None = None
    principal: str = ""


def start_test_kdc() -> Realm:
    """A KDC on reserved ports, retried on others when one is taken."""
    return start_with_retry(start_kdc, span=10)


def start_realm() -> TestRealm:
    """Start the KDC with ``HTTP/localhost``'s keytab; raises RuntimeError when MIT Kerberos is not installed."""
    kdc = start_test_kdc()
    try:
        keytab = kdc.add_service(SERVICE, kdc.directory / "gateway.keytab")
    except BaseException:
        kdc.stop()
        raise
    return TestRealm(kdc.realm, keytab, f"{SERVICE}@{REALM}")
