"""The Kerberized mode of the embedded Hive Metastore (``EmbeddedHMS(kerberos=HMSKerberos(...))``).

What a secured cluster's metastore runs with (``/work/shared/NOTES.md`` §16, Hive 2.3
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

Readiness on a Kerberized HMS is :func:`probe_get_all_databases_sasl`: a plain binary call makes
HMS log ``TSaslNegotiationException: Invalid status -128``.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["PROTECTIONS", "HMSKerberos", "probe_get_all_databases_sasl", "site_xml"]

#: ``hadoop.rpc.protection`` values → SASL QOP names (RFC 4752 security-layer bits).
PROTECTIONS = {"authentication": ("auth", 1), "integrity": ("auth-int", 2), "privacy": ("auth-conf", 4)}

# TSaslTransport negotiation status bytes (Thrift's TSaslTransport.NegotiationStatus).
_START, _OK, _BAD, _ERROR, _COMPLETE = 1, 2, 3, 4, 5
_MAX_NEGOTIATION_PAYLOAD = 1 << 20
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
    day, seven days). ``probe_principal``/``probe_keytab``: who the readiness probe logs in as
    (default: HMS's own principal from its keytab). Raises ValueError on an unknown protection.
    """

    principal: str
    keytab: Path
    krb5_conf: Path
    proxy_users: tuple[str, ...] = ()
    protection: str = "authentication"
    token_renew_interval_ms: int = 86_400_000
    token_max_lifetime_ms: int = 604_800_000
    probe_principal: str | None = None
    probe_keytab: Path | None = None
    extra_core_site: dict[str, str] = field(default_factory=dict)

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
        props.update(self.extra_core_site)
        return site_xml(props)

    def jvm_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def probe(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        """:func:`probe_get_all_databases_sasl` as the probe principal, HMS's host from its principal."""
        service, _, rest = self.principal.partition("/")
        service_host = rest.split("@", 1)[0] or host
        probe_get_all_databases_sasl(
            host, port, principal=self.probe_principal or self.principal,
            keytab=self.probe_keytab or self.keytab, krb5_conf=self.krb5_conf,
            service=service, service_host=service_host, timeout=timeout,
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


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the metastore")
        buf += chunk
    return bytes(buf)


def _send_negotiation(sock: socket.socket, status: int, payload: bytes) -> None:
    sock.sendall(struct.pack("!BI", status, len(payload)) + payload)


def _recv_negotiation(sock: socket.socket) -> tuple[int, bytes]:
    status, length = struct.unpack("!BI", _recv_exact(sock, 5))
    if length > _MAX_NEGOTIATION_PAYLOAD:
        raise ValueError(f"SASL negotiation message of {length} bytes")
    payload = _recv_exact(sock, length)
    if status in (_BAD, _ERROR):
        raise ConnectionError(f"the metastore refused SASL: {payload.decode(errors='replace')[:200]}")
    if status not in (_OK, _COMPLETE):
        raise ValueError(f"unexpected SASL negotiation status {status}")
    return status, payload


def probe_get_all_databases_sasl(
    host: str, port: int, *, principal: str, keytab: Path, krb5_conf: Path, service: str = "hive",
    service_host: str = "localhost", timeout: float = 5.0,
) -> None:
    """One ``get_all_databases`` CALL over Thrift's SASL transport with GSSAPI (RFC 4752),
    logged in as ``principal`` from ``keytab`` (an in-memory credential cache: no ``kinit``).

    Negotiation: START ``GSSAPI``, the Kerberos context tokens, then the server's wrapped
    security-layer offer, answered with the strongest layer offered (its frames wrapped and
    unwrapped by GSSAPI for integrity and privacy). Raises OSError/ConnectionError on network
    trouble or a refused negotiation, ``gssapi.exceptions.GSSError`` on Kerberos failures (no
    ticket, unknown principal), ValueError on an unexpected reply.
    """
    import gssapi

    from gateway.demo.hms import check_reply_header, get_all_databases_call

    with _krb5_config(krb5_conf):
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        creds = gssapi.Credentials(name=name, usage="initiate", store={
            "client_keytab": str(keytab), "ccache": f"MEMORY:hms-probe-{os.getpid()}-{threading.get_ident()}"})
        target = gssapi.Name(f"{service}@{service_host}", gssapi.NameType.hostbased_service)
        flags = [gssapi.RequirementFlag.mutual_authentication, gssapi.RequirementFlag.integrity,
                 gssapi.RequirementFlag.confidentiality]
        ctx = gssapi.SecurityContext(name=target, creds=creds, usage="initiate", mech=gssapi.MechType.kerberos,
                                     flags=flags)
        with socket.create_connection((host, port), timeout=timeout) as sock:
            _send_negotiation(sock, _START, b"GSSAPI")
            _send_negotiation(sock, _OK, ctx.step() or b"")
            layer = None
            while True:
                status, payload = _recv_negotiation(sock)
                if status == _COMPLETE and layer is not None:
                    break
                if not ctx.complete:
                    _send_negotiation(sock, _OK, ctx.step(payload) or b"")
                    continue
                if layer is not None:
                    raise ValueError("the metastore sent a SASL message after the security layer was chosen")
                # RFC 4752 3.1: the server's offer is wrapped: 1 byte of layers, 3 bytes max buffer.
                offer = ctx.unwrap(payload).message
                if len(offer) != 4:
                    raise ValueError(f"SASL GSSAPI security-layer offer of {len(offer)} bytes")
                layer = next((bit for bit in (4, 2, 1) if offer[0] & bit), None)
                if layer is None:
                    raise ValueError(f"the metastore offers no SASL security layer (0x{offer[0]:02x})")
                max_buffer = 0 if layer == 1 else _MAX_FRAME - 1
                choice = bytes([layer]) + max_buffer.to_bytes(3, "big")
                _send_negotiation(sock, _COMPLETE, ctx.wrap(choice, False).message)
            message = get_all_databases_call()
            if layer != 1:
                message = ctx.wrap(message, layer == 4).message
            sock.sendall(struct.pack("!I", len(message)) + message)
            (length,) = struct.unpack("!I", _recv_exact(sock, 4))
            if length > _MAX_FRAME:
                raise ValueError(f"SASL frame of {length} bytes")
            reply = _recv_exact(sock, length)
            if layer != 1:
                reply = ctx.unwrap(reply).message
    check_reply_header(reply)
