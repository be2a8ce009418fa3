"""A Kerberized Hive Metastore for tests: a KDC (demo/realm.py) and an embedded HMS
2.3.10 with SASL on (demo/hms_kerberos.py), one per test module (each takes ~20 s).

Principals, all ``@GATEWAY.TEST``, keytabs in ``<workdir>/keytabs``:

- ``hive/localhost``: HMS's service principal (``hive.metastore.kerberos.principal``);
- ``hmsgw/localhost``: the gateway, a Hadoop proxy user (``hadoop.proxyuser.hmsgw.*=*``), so
  it may ask delegation tokens for end users;
- ``outsider/localhost``: a principal HMS authenticates but that is no proxy user (the
  "refused proxy user" case);
- users added with :meth:`SecureHMS.add_user` (a password and a credential cache).

HMS accepts all three QOPs by default (``hadoop.rpc.protection=authentication,integrity,privacy``).
Its log (:attr:`SecureHMS.log_path`) carries the audit lines ``ugi=<user> ip=... cmd=...``
(:meth:`SecureHMS.audit_users`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from demo.hms_kerberos import HMSKerberos
from demo.kerberos import GATEWAY_PRINCIPAL, SERVICE_PRINCIPAL, KerberosSetup, start_kerberos
from demo.realm import REALM, Realm
from tests.support.hms import RunningHMS, start_hms
from tests.support.kdc import start_test_kdc

__all__ = ["GATEWAY_PRINCIPAL", "OUTSIDER_PRINCIPAL", "SERVICE_PRINCIPAL", "SecureHMS", "running_secure_hms",
           "start_secure_hms"]

OUTSIDER_PRINCIPAL = f"outsider/localhost@{REALM}"
ALL_PROTECTIONS = "authentication,integrity,privacy"
_AUDIT = re.compile(r"HiveMetaStore\.audit: ugi=(\S+)\s+ip=\S+\s+cmd=(.*?)\s*$")


@dataclass
class SecureHMS:
    """A running KDC and Kerberized HMS. ``url`` is ``thrift://localhost:PORT`` (the host that
    ``hive/_HOST`` resolves to); ``service_principal`` is HMS's; ``gateway_principal`` /
    ``gateway_keytab`` the proxy-user principal for the gateway; ``outsider_principal`` /
    ``outsider_keytab`` one that is no proxy user."""

    setup: KerberosSetup
    hms: RunningHMS
    kerberos: HMSKerberos

    service_principal: str = SERVICE_PRINCIPAL
    gateway_principal: str = GATEWAY_PRINCIPAL
    outsider_principal: str = OUTSIDER_PRINCIPAL

    @property
    def url(self) -> str:
        return f"thrift://localhost:{self.hms.port}"

    @property
    def port(self) -> int:
        return self.hms.port

    @property
    def realm(self) -> Realm:
        return self.setup.realm

    @property
    def gateway_keytab(self) -> Path:
        return self.setup.gateway_keytab

    @property
    def outsider_keytab(self) -> Path:
        return self.setup.keytab(OUTSIDER_PRINCIPAL)

    @property
    def service_keytab(self) -> Path:
        return self.setup.service_keytab

    def gateway_sasl(self, protection: str = "authentication", **more) -> dict:
        """The gateway's ``upstream.sasl`` for this HMS (``more``: e.g. ``impersonation``)."""
        return {**self.setup.gateway_sasl(protection), **more}

    @property
    def krb5_conf(self) -> Path:
        return self.realm.krb5_conf

    @property
    def env(self) -> dict[str, str]:
        """``KRB5_CONFIG`` of the realm, for a gateway subprocess."""
        return self.realm.env

    @property
    def log_path(self) -> Path:
        """HMS's log (stdout and stderr of the JVM)."""
        return self.hms.server.log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def audit(self) -> list[tuple[str, str]]:
        """HMS's audit lines so far, as ``(ugi, cmd)`` pairs (``HiveMetaStore.audit``)."""
        return [(m.group(1), m.group(2)) for line in self.log().splitlines() if (m := _AUDIT.search(line))]

    def audit_users(self, cmd_contains: str = "") -> set[str]:
        """The ``ugi=`` of every audit line whose command contains ``cmd_contains``."""
        return {ugi for ugi, cmd in self.audit() if cmd_contains in cmd}

    def add_user(self, name: str, password: str, ccache: Path) -> dict[str, str]:
        """A user principal ``name@REALM`` with a ticket in ``ccache``; the client env for it."""
        return self.realm.add_user(name, password, ccache)

    def probe(self) -> None:
        """One GSSAPI ``get_all_databases`` as ``hive/localhost`` (raises as the readiness probe does)."""
        self.kerberos.probe(self.hms.host, self.hms.port)

    def stop(self) -> None:
        """Stop HMS, then the KDC. Idempotent."""
        try:
            self.hms.server.stop()
        finally:
            self.setup.stop()


def start_secure_hms(
    workdir: Path, *, protection: str = ALL_PROTECTIONS, proxy_users: tuple[str, ...] = ("hmsgw",),
    token_renew_interval_ms: int = 86_400_000, token_max_lifetime_ms: int = 604_800_000,
    site: dict[str, str] | None = None,
) -> SecureHMS:
    """Start a KDC and a Kerberized HMS under ``workdir``; everything started is stopped again if a
    step fails. ``protection``: ``hadoop.rpc.protection`` (all three by default).
    ``proxy_users``: short names HMS lets impersonate (``()``: none, so the gateway is refused).
    ``token_*_ms``: delegation-token lifetimes in milliseconds. ``site``: more hive-site
    properties. Raises RuntimeError (no KDC or Java) or HMSStartError."""
    workdir = Path(workdir)
    setup = start_kerberos(workdir / "keytabs", (OUTSIDER_PRINCIPAL,), start=start_test_kdc)
    try:
        kerberos = setup.hms_settings(proxy_users=proxy_users, protection=protection,
                                      token_renew_interval_ms=token_renew_interval_ms,
                                      token_max_lifetime_ms=token_max_lifetime_ms)
        hms = start_hms(workdir / "hms", kerberos=kerberos, site=site)
    except BaseException:
        setup.stop()
        raise
    return SecureHMS(setup, hms, kerberos)


@contextlib.contextmanager
def running_secure_hms(workdir: Path, **options) -> Iterator[SecureHMS]:
    """:func:`start_secure_hms` as a context manager (for a module-scoped fixture)."""
    secure = start_secure_hms(workdir, **options)
    try:
        yield secure
    finally:
        secure.stop()
