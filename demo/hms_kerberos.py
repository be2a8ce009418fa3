"""The Kerberized mode of the embedded Hive Metastore (``EmbeddedHMS(kerberos=HMSKerberos(...))``).

What a secured cluster's metastore runs with (docs/operations.md, "Fronting a Kerberized metastore"; Hive 2.3
``HiveMetaStore.startMetaStore`` and ``HadoopThriftAuthBridge.Server``):

- ``hive-site.xml``: ``hive.metastore.sasl.enabled=true``, ``hive.metastore.kerberos.principal``
  and ``hive.metastore.kerberos.keytab.file``; the delegation-token secret manager's
  ``hive.cluster.delegation.token.renew-interval`` / ``.max-lifetime`` (milliseconds, as Hive 2.3
  reads them with ``Configuration.getLong``);
- ``core-site.xml`` beside it: ``hadoop.security.authentication=kerberos``,
  ``hadoop.rpc.protection`` (the SASL QOPs HMS accepts) and one
  ``hadoop.proxyuser.<short name>.hosts`` / ``.groups`` pair per proxy user (Hadoop's
  ``ProxyUsers.authorize``: who may ask a delegation token for another user);
- the JVM finds the realm through ``-Djava.security.krb5.conf``.

Readiness on a Kerberized HMS is :func:`probe_get_all_databases_sasl`, through the gateway's own
SASL client: a plain binary call makes HMS log ``TSaslNegotiationException: Invalid status -128``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from demo.hms_probe import check_reply_header, get_all_databases_call
from gateway.upstream.sasl import QOP_OF_PROTECTION

__all__ = ["PROTECTIONS", "HMSKerberos", "probe_get_all_databases_sasl", "site_xml"]

#: ``hadoop.rpc.protection``'s values.
PROTECTIONS = tuple(QOP_OF_PROTECTION)

_MAX_FRAME = 16 << 20


def site_xml(props: dict[str, str]) -> str:
    """A Hadoop ``*-site.xml`` body holding ``props`` (name → value)."""
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


@dataclass(frozen=True)
class HMSKerberos:
    """How a Kerberized embedded HMS runs.

    ``principal``/``keytab``: HMS's service principal (``hive/localhost@REALM``) and its keytab.
    ``krb5_conf``: the realm's ``krb5.conf`` (the JVM's ``java.security.krb5.conf``; the readiness
    probe's ``KRB5_CONFIG``). ``proxy_users``: short names allowed to impersonate, each with
    ``hosts=*`` and ``groups=*``; an empty tuple makes an HMS that refuses every proxy user.
    ``protection``: ``hadoop.rpc.protection``, one or more of authentication, integrity, privacy
    joined by commas (HMS accepts any listed). ``token_renew_interval_ms`` /
    ``token_max_lifetime_ms``: delegation-token lifetimes in milliseconds (Hive's defaults: one
    day, seven days). The readiness probe logs in as HMS's own principal from its keytab. Raises
    ValueError on an unknown protection.
    """

    principal: str
    keytab: Path
    krb5_conf: Path
    proxy_users: tuple[str, ...] = ()
    protection: str = "authentication"
    token_renew_interval_ms: int = 86_400_000
    token_max_lifetime_ms: int = 604_800_000

    def __post_init__(self) -> None:
        unknown = [p for p in self.protections if p not in PROTECTIONS]
        if unknown or not self.protections:
            raise ValueError(f"hadoop.rpc.protection {self.protection!r}: expected a comma-separated list of "
                             f"{', '.join(PROTECTIONS)}")

    @property
    def protections(self) -> list[str]:
        return [p.strip() for p in self.protection.split(",") if p.strip()]

    def hive_site(self) -> dict[str, str]:
        """The ``hive-site.xml`` properties of SASL on the metastore."""
        return {
            "hive.metastore.sasl.enabled": "true",
            "hive.metastore.kerberos.principal": self.principal,
            "hive.metastore.kerberos.keytab.file": str(self.keytab),
            "hive.cluster.delegation.token.renew-interval": str(self.token_renew_interval_ms),
            "hive.cluster.delegation.token.max-lifetime": str(self.token_max_lifetime_ms),
        }

    def core_site(self) -> str:
        """The ``core-site.xml`` body: Kerberos authentication, QOP, the proxy users."""
        props = {"hadoop.security.authentication": "kerberos", "hadoop.rpc.protection": ",".join(self.protections)}
        for user in self.proxy_users:
            props[f"hadoop.proxyuser.{user}.hosts"] = "*"
            props[f"hadoop.proxyuser.{user}.groups"] = "*"
        return site_xml(props)

    def jvm_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def probe(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        """:func:`probe_get_all_databases_sasl` as HMS's own principal, at the first protection it accepts."""
        probe_get_all_databases_sasl(
            host, port, principal=self.principal, keytab=self.keytab, krb5_conf=self.krb5_conf,
            service_principal=self.principal, protection=self.protections[0], timeout=timeout,
        )


_ENV_LOCK = threading.Lock()


@contextmanager
def _krb5_config(path: Path) -> Iterator[None]:
    # MIT Kerberos reads KRB5_CONFIG for each new library context; restore the caller's value.
    with _ENV_LOCK:
        saved = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = str(path)
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = saved


def probe_get_all_databases_sasl(
    host: str, port: int, *, principal: str, keytab: Path, krb5_conf: Path, service_principal: str,
    protection: str = "authentication", timeout: float = 5.0,
) -> None:
    """One ``get_all_databases`` CALL over Thrift's SASL transport with GSSAPI, logged in as
    ``principal`` from ``keytab`` (in memory: no ``kinit``), to ``service_principal`` at
    ``protection`` (Hadoop's name): the gateway's own client (:mod:`gateway.upstream.sasl`,
    :mod:`gateway.upstream.kerberos`), run to completion here. Raises OSError (TimeoutError;
    ConnectionError when the connection closes or Kerberos or the negotiation fails, with the
    gateway's reason) and ValueError on an unexpected reply."""
    from gateway.upstream.errors import UpstreamError
    from gateway.upstream.kerberos import KeytabLogin

    with _krb5_config(krb5_conf):
        try:
            reply = asyncio.run(asyncio.wait_for(
                _call(host, port, KeytabLogin(principal, keytab), service_principal, protection), timeout))
        except asyncio.IncompleteReadError:
            raise ConnectionError("connection closed by the metastore") from None
        except UpstreamError as exc:
            raise ConnectionError(str(exc)) from None

    check_reply_header(reply)


async def _call(host: str, port: int, login, service_principal: str, protection: str) -> bytes:
    from gateway.upstream.kerberos import GssapiMechanism
    from gateway.upstream.sasl import SaslTransport, negotiate

    label = f"{host}:{port}"
    mechanism = GssapiMechanism(login, service_principal, protection, label)
    await mechanism.prepare()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        await negotiate(reader, writer, mechanism, label)
        transport = SaslTransport(reader, writer, label, mechanism, _MAX_FRAME)
        transport.write(get_all_databases_call())
        await writer.drain()
        reply = b""
        while True:  # the message header: version and type, name length, name
            reply += await transport.chunk()
            if len(reply) >= 8:
                name_length = int.from_bytes(reply[4:8], "big", signed=True)
                if not 0 <= name_length < 256 or len(reply) >= 8 + name_length:
                    return reply
    finally:
        writer.close()
