"""``python -m demo --kerberos`` (``make run KERBEROS=1``) and the tests' Kerberized metastore:
a KDC (demo/realm.py), the principals and keytabs of HMS and of the gateway, and the
demo's topologies with SASL to the metastore.

Principals (realm ``GATEWAY.TEST``): ``hive/localhost`` is HMS's
(``hive.metastore.kerberos.principal``); ``hmsgw/localhost`` is the gateway's, a Hadoop proxy
user on HMS (``hadoop.proxyuser.hmsgw.hosts/groups=*``), so it may fetch delegation tokens for
end users. Keytabs live in one directory, mode 0600.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from demo.hms_kerberos import HMSKerberos
from demo.realm import REALM, Realm, start_kdc

__all__ = ["GATEWAY_PRINCIPAL", "GATEWAY_SHORT_NAME", "SERVICE_PRINCIPAL", "KerberosSetup", "kerberos_topologies",
           "start_kerberos"]

SERVICE_PRINCIPAL = f"hive/localhost@{REALM}"
#: What the gateway's topologies name as the HMS principal (``_HOST``: each upstream URL's host).
SERVICE_PRINCIPAL_PATTERN = f"hive/_HOST@{REALM}"
GATEWAY_SHORT_NAME = "hmsgw"
GATEWAY_PRINCIPAL = f"{GATEWAY_SHORT_NAME}/localhost@{REALM}"


def _keytab_name(principal: str) -> str:
    return principal.split("/", 1)[0].split("@", 1)[0] + ".keytab"


@dataclass
class KerberosSetup:
    """A running KDC with HMS's and the gateway's keytabs in ``keytabs``."""

    realm: Realm
    keytabs: Path

    def keytab(self, principal: str) -> Path:
        """The keytab of a principal made by :func:`start_kerberos` (``<first component>.keytab``)."""
        return self.keytabs / _keytab_name(principal)

    @property
    def service_keytab(self) -> Path:
        return self.keytab(SERVICE_PRINCIPAL)

    @property
    def gateway_keytab(self) -> Path:
        return self.keytab(GATEWAY_PRINCIPAL)

    def hms_settings(self, **options) -> HMSKerberos:
        """HMS's Kerberos settings (``options``: the other :class:`HMSKerberos` fields; by default
        the gateway is HMS's one proxy user)."""
        options.setdefault("proxy_users", (GATEWAY_SHORT_NAME,))
        return HMSKerberos(principal=SERVICE_PRINCIPAL, keytab=self.service_keytab, krb5_conf=self.realm.krb5_conf,
                           **options)

    def gateway_sasl(self, protection: str = "authentication") -> dict[str, str]:
        """The gateway's ``upstream.sasl`` settings (docs/operations.md, "Fronting a Kerberized
        metastore"): its principal and keytab, HMS's principal, the QOP."""
        return {"principal": GATEWAY_PRINCIPAL, "keytab": str(self.gateway_keytab),
                "service_principal": SERVICE_PRINCIPAL_PATTERN, "protection": protection}

    def stop(self) -> None:
        self.realm.stop()


def start_kerberos(keytabs: Path, extra_principals: tuple[str, ...] = (), *,
                   start: Callable[[], Realm] = start_kdc) -> KerberosSetup:
    """Start a KDC with ``start`` (the tests': on reserved ports) and write the keytabs of HMS,
    the gateway and ``extra_principals`` (full principal names) into ``keytabs`` (created; stale
    keytabs there are replaced). The KDC is stopped again if a step fails. Raises RuntimeError
    when MIT Kerberos or k5test is missing."""
    keytabs.mkdir(parents=True, exist_ok=True)
    realm = start()
    try:
        for principal in (SERVICE_PRINCIPAL, GATEWAY_PRINCIPAL, *extra_principals):
            path = keytabs / _keytab_name(principal)
            path.unlink(missing_ok=True)  # a keytab of an earlier realm holds keys this KDC does not know
            realm.add_service(principal, path)
            os.chmod(path, 0o600)
    except BaseException:
        realm.stop()
        raise
    return KerberosSetup(realm, keytabs)


def kerberos_topologies(source: Path, target: Path, sasl: dict[str, str]) -> Path:
    """Write every topology of ``source`` into ``target`` with ``upstream.sasl`` = ``sasl`` on each
    service that has a Thrift upstream; returns ``target``
    (:func:`demo.topologies.rewrite_topologies`)."""
    from demo.topologies import rewrite_topologies

    def edit(service: dict) -> None:
        upstream = service.get("upstream")
        if upstream and any(str(url).startswith("thrift://") for url in upstream.get("urls", ())):
            upstream["sasl"] = dict(sasl)

    return rewrite_topologies(source, target, edit, "SASL (Kerberos) to the demo's Kerberized metastore")
