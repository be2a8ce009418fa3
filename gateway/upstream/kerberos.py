"""The gateway's Kerberos login and the GSSAPI SASL mechanism (RFC 4752) to a Kerberized HMS.

:class:`KeytabLogin` holds the gateway principal's initiator credentials from its keytab, in a
``MEMORY:`` credential cache of MIT Kerberos (python-gssapi's ``client_keytab`` store): no
``kinit``, nothing on disk. Like Hadoop UGI's ``checkTGTAndReloginFromKeytab`` it logs in anew
once ``margin`` seconds are left of the TGT's lifetime (checked whenever a connection opens).
The realm and KDCs come from MIT's ``KRB5_CONFIG``.

:class:`GssapiMechanism` is RFC 4752 over that login: the GSS-API context with HMS's service
principal (``hive.metastore.kerberos.principal`` with ``_HOST`` replaced by the URL's host, as
Hive's ``SecurityUtil.getServerPrincipal`` does), then the security-layer exchange: HMS offers
its layers (``hadoop.rpc.protection``), the gateway picks the configured one and announces its
own receive buffer (16 MiB, RFC 4752's largest). At ``privacy`` the context must have
confidentiality, and every frame sent or received must come out of GSS-API encrypted (its
``conf_state``): one that does not is refused (502). GSS-API calls that may ask the KDC run in
a thread (blocking network I/O); ``wrap``/``unwrap`` are local.

Errors: :class:`KeytabError` (configuration: unreadable keytab, principal not in it),
:class:`KerberosUnavailable` (503: the KDC cannot be reached), and
:class:`~gateway.upstream.sasl.UpstreamAuthFailed` (502: unknown or mismatched service principal,
QOP not offered), each naming the settings on both sides.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import struct
import time
from pathlib import Path

import gssapi
from gssapi.exceptions import GSSError

from gateway.upstream.errors import UpstreamBadReply, UpstreamCredentialsUnavailable, UpstreamError
from gateway.upstream.sasl import PROTECTION_OF_QOP, QOP_OF_PROTECTION, UpstreamAuthFailed

log = logging.getLogger(__name__)

#: RFC 4752 security-layer bits.
_LAYER_BITS = {"auth": 1, "auth-int": 2, "auth-conf": 4}
_MAX_BUFFER = 0xFFFFFF
#: The context flag each wrapping QOP needs.
_FLAG_OF_QOP = {"auth-int": gssapi.RequirementFlag.integrity,
                "auth-conf": gssapi.RequirementFlag.confidentiality}
_FLAGS = [gssapi.RequirementFlag.mutual_authentication, gssapi.RequirementFlag.integrity,
          gssapi.RequirementFlag.confidentiality]
_ccache_names = itertools.count(1)


class KeytabError(ValueError):
    """A keytab that cannot serve ``principal``; ``key`` is the setting to fix."""

    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key = key


class KerberosUnavailable(UpstreamCredentialsUnavailable):
    """The gateway cannot get Kerberos tickets (the KDC is unreachable): 503."""


def _gss_reason(exc: GSSError) -> str:
    # GSSError's gen_message() joins major and minor texts; the minor one says what happened.
    return " ".join(exc.gen_message().split())


def check_keytab(principal: str, keytab: Path) -> None:
    """Return if ``keytab`` is readable and holds keys of ``principal`` (no KDC is asked).
    Raises :class:`KeytabError` naming the file (``key`` ``keytab``) or the principal
    (``key`` ``principal``)."""
    try:
        with open(keytab, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise KeytabError("keytab", f"cannot read keytab {keytab}: {exc.strerror or exc}") from None
    try:
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        gssapi.Credentials(name=name, usage="accept", store={"keytab": str(keytab)})
    except GSSError as exc:
        raise KeytabError("principal", f"keytab {keytab} holds no key of {principal}: "
                                       f"{_gss_reason(exc)}") from None


def service_principal(pattern: str, host: str) -> str:
    """``pattern`` with ``_HOST`` replaced by ``host`` lower-cased (Hadoop's
    ``SecurityUtil.getServerPrincipal``): ``hive/_HOST@R`` → ``hive/hms1.example.com@R``."""
    primary, slash, rest = pattern.partition("/")
    instance, at, realm = rest.partition("@")
    if slash and instance == "_HOST":
        return f"{primary}/{host.lower()}{at}{realm}"
    return pattern


class KeytabLogin:
    """Initiator credentials of ``principal`` from ``keytab``, renewed ``margin`` seconds
    before the TGT expires. One per (principal, keytab): :func:`keytab_login`."""

    def __init__(self, principal: str, keytab: Path, margin: float = 60.0):
        self.principal, self.keytab, self.margin = principal, keytab, margin
        self._name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        self._creds: gssapi.Credentials | None = None
        self._renew_at = 0.0  # time.time() after which a new login is due
        self.logins = 0

    def credentials(self) -> gssapi.Credentials:
        """The current credentials, logging in anew when due (blocking: may ask the KDC later,
        when a context is initiated)."""
        if self._creds is None or time.time() >= self._renew_at:
            store = {"client_keytab": str(self.keytab), "ccache": f"MEMORY:hms-gateway-{next(_ccache_names)}"}
            self._creds = gssapi.Credentials(name=self._name, usage="initiate", store=store)
            self._renew_at = float("inf")  # known once a ticket was got (see :meth:`obtained`)
            self.logins += 1
        return self._creds

    def obtained(self) -> None:
        """Note the TGT's lifetime after a context was established with the credentials."""
        if self._renew_at == float("inf") and self._creds is not None:
            try:
                lifetime = self._creds.lifetime
            except GSSError:
                return
            if lifetime:
                self._renew_at = time.time() + max(lifetime - self.margin, lifetime / 2)


_logins: dict[tuple[str, Path], KeytabLogin] = {}


def keytab_login(principal: str, keytab: Path, margin: float = 60.0) -> KeytabLogin:
    """The process's one :class:`KeytabLogin` of ``principal`` in ``keytab``."""
    login = _logins.get((principal, keytab))
    if login is None:
        login = _logins[(principal, keytab)] = KeytabLogin(principal, keytab, margin)
    return login


class GssapiMechanism:
    """SASL GSSAPI (RFC 4752) as ``login``'s principal to ``target`` (a full principal name),
    asking for ``protection`` (Hadoop's name). :meth:`prepare` must run before negotiation."""

    name = "GSSAPI"
    retains_frames = False
    #: The receive buffer the gateway announces in its security-layer choice (RFC 4752's
    #: largest), bytes.
    receive_buffer = _MAX_BUFFER

    def __init__(self, login: KeytabLogin, target: str, protection: str, label: str):
        self.login, self.target, self.label = login, target, label
        self.protection = protection
        self.wanted = QOP_OF_PROTECTION[protection]
        self.complete = False
        self.qop = "auth"
        self._context: gssapi.SecurityContext | None = None
        self._first = b""

    async def prepare(self) -> None:
        """Create the context and its first token (asks the KDC for a ticket: in a thread).
        Raises :class:`KerberosUnavailable` or :class:`UpstreamAuthFailed`."""
        await asyncio.to_thread(self._prepare)

    def _prepare(self) -> None:
        try:
            creds = self.login.credentials()
            self._context = gssapi.SecurityContext(
                name=gssapi.Name(self.target, gssapi.NameType.kerberos_principal),
                creds=creds, usage="initiate", flags=_FLAGS)
            self._first = self._context.step() or b""
        except GSSError as exc:
            raise self._kerberos_error(exc) from None

    def _kerberos_error(self, exc: GSSError) -> UpstreamError:
        reason = _gss_reason(exc)
        log.warning("Kerberos for upstream %s as %s to %s failed: %s",
                    self.label, self.login.principal, self.target, reason)
        lowered = reason.lower()
        if "cannot contact any kdc" in lowered or "cannot find kdc" in lowered or "resolving" in lowered:
            return KerberosUnavailable(f"Kerberos: cannot reach the KDC to log in as "
                                       f"{self.login.principal} for upstream {self.label}: {reason}")
        if re.search(r"server \S+ not found in kerberos database", lowered):
            return UpstreamAuthFailed(
                f"Kerberos: the KDC does not know the service principal {self.target} "
                f"(upstream.sasl.service_principal) for upstream {self.label}; it must be HMS's "
                "hive.metastore.kerberos.principal")
        return UpstreamAuthFailed(f"Kerberos: cannot get a ticket to {self.target} as "
                                  f"{self.login.principal} for upstream {self.label}: {reason}")

    def initial_response(self) -> bytes:
        return self._first

    def step(self, challenge: bytes) -> bytes:
        context = self._context
        assert context is not None, "prepare() first"
        try:
            if not context.complete:
                token = context.step(challenge) or b""
                if context.complete:
                    self.login.obtained()
                return token
            return self._choose_layer(context, challenge)
        except GSSError as exc:
            raise UpstreamAuthFailed(
                f"GSSAPI with upstream {self.label} failed: {_gss_reason(exc)} (service principal "
                f"{self.target}: is it HMS's hive.metastore.kerberos.principal?)") from None

    def _choose_layer(self, context: gssapi.SecurityContext, challenge: bytes) -> bytes:
        offer = context.unwrap(challenge).message
        if len(offer) != 4:
            raise UpstreamAuthFailed(f"upstream {self.label} sent a GSSAPI security-layer offer "
                                     f"of {len(offer)} bytes, not 4")
        (word,) = struct.unpack("!I", offer)
        offered = [qop for qop, bit in _LAYER_BITS.items() if (word >> 24) & bit]
        if self.wanted not in offered:
            theirs = ",".join(PROTECTION_OF_QOP[q] for q in offered) or "none"
            raise UpstreamAuthFailed(
                f"upstream {self.label} offers hadoop.rpc.protection={theirs} but the gateway's "
                f"upstream.sasl.protection is {self.protection}: make them agree")
        needed = _FLAG_OF_QOP.get(self.wanted)
        if needed is not None and needed not in context.actual_flags:
            raise UpstreamAuthFailed(f"GSSAPI with upstream {self.label}: the Kerberos context "
                                     f"has no {needed.name} for protection {self.protection}")
        self.qop = self.wanted
        reply = struct.pack("!I", _LAYER_BITS[self.wanted] << 24 | self.receive_buffer)
        self.complete = True
        return context.wrap(reply, False).message

    def wrap(self, data: bytes) -> list[bytes]:
        assert self._context is not None
        privacy = self.qop == "auth-conf"
        result = self._context.wrap(data, privacy)
        if privacy and not result.encrypted:  # never send in the clear what privacy promises
            raise UpstreamBadReply(f"GSSAPI did not encrypt a request to upstream {self.label} "
                                   "at privacy")
        return [result.message]

    def unwrap(self, data: bytes) -> bytes:
        assert self._context is not None
        try:
            result = self._context.unwrap(data)
        except GSSError as exc:
            raise UpstreamBadReply(f"upstream {self.label} sent a SASL frame that does not "
                                   f"unwrap: {_gss_reason(exc)}") from None
        if self.qop == "auth-conf" and not result.encrypted:
            raise UpstreamBadReply(f"upstream {self.label} sent an unencrypted frame at privacy")
        return result.message

    def refused(self, reason: str) -> UpstreamAuthFailed:
        log.warning("upstream %s refused GSSAPI from %s: %s", self.label, self.login.principal, reason)
        return UpstreamAuthFailed(
            f"upstream {self.label} refused GSSAPI from {self.login.principal} for service "
            f"principal {self.target} (upstream.sasl.service_principal; HMS's is "
            "hive.metastore.kerberos.principal), protection "
            f"{self.protection} (HMS's hadoop.rpc.protection): see the gateway's log for HMS's reason")
