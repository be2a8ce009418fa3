"""SASL DIGEST-MD5 (RFC 2831) with an end user's Hive delegation token, at the three protections,
as Hadoop's ``SaslRpcClient`` with ``TOKEN`` auth (``HadoopThriftAuthBridge.Client``) speaks it
to HMS: user name the standard base64 of the token's identifier, password the standard base64
of its password, digest-uri ``null/default`` (protocol ``null``, server ``default``: HMS refuses
any other with "Mismatched URI").

The mechanism and its security layers are Cyrus SASL's (:mod:`gateway.upstream.cyrus`): QOP
``auth``, ``auth-int`` (HMAC-MD5 per message, sequence numbers) or ``auth-conf`` (Cyrus picks the
strongest cipher both sides have, RC4 with 128-bit keys against Java's server). The gateway asks
exactly the configured protection, as it does of GSSAPI (:mod:`gateway.upstream.kerberos`); an HMS
whose ``hadoop.rpc.protection`` does not offer it is refused before any credential is sent.

``privacy`` means a cipher of at least :data:`PRIVACY_MIN_SSF` bits (``3des``, ``rc4``): the
floor is Cyrus's own ``min_ssf`` security property, so Cyrus never chooses ``rc4-40``,
``rc4-56`` or ``des``. The cipher list in HMS's challenge is not covered by the digest (an
active attacker can strip the strong ones), so the floor is the defense: an HMS offering only
weaker ciphers is a 502 naming what it offered and what the gateway requires.

Frames: Cyrus cuts a message into packets no larger than the server's receive buffer (HMS's
``maxbuf``, 64 KiB), one SASL frame each; HMS reads a message across frames. On the way in a
frame must be whole to be checked, and DIGEST-MD5 bounds it at 16 MiB (RFC 2831's largest
``maxbuf``, which the gateway announces: :attr:`DigestMechanism.receive_buffer`): HMS sends each
reply in one frame, so at ``integrity`` and ``privacy`` a reply over 16 MiB fails with a 502
naming that limit, refused from the frame's length before its body is read
(:class:`gateway.upstream.sasl.SaslTransport`).
"""

from __future__ import annotations

import base64
import logging
import re

from gateway.upstream.cyrus import MAX_BUFFER, SASL_TOOWEAK, ClientConnection, CyrusError, split_packets
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.sasl import PROTECTION_OF_QOP, QOP_OF_PROTECTION, StaleCredentials, UpstreamAuthFailed
from gateway.upstream.tokens import DelegationToken

log = logging.getLogger(__name__)

#: The least key strength ``privacy`` accepts, in bits: NIST's floor for a cipher still in use
#: (SP 800-131A). Cyrus rates ``3des`` 112 and ``rc4`` 128; ``des`` 55, ``rc4-56``, ``rc4-40``.
PRIVACY_MIN_SSF = 112
#: Hadoop's protection → the security strength Cyrus may choose (min, max): none, integrity
#: (ssf 1), a cipher of at least PRIVACY_MIN_SSF bits.
_SSF_OF_PROTECTION = {"authentication": (0, 0), "integrity": (1, 1), "privacy": (PRIVACY_MIN_SSF, 256)}
_LENGTH_BYTES = 4


def _directive(challenge: bytes, name: bytes) -> list[str] | None:
    """The comma-separated values of directive ``name`` in a DIGEST-MD5 challenge (quoted or
    not), or None when it is absent."""
    found = re.search(rb'(?:^|,)\s*' + name + rb'\s*=\s*"([^"]*)"', challenge, re.IGNORECASE) or \
        re.search(rb'(?:^|,)\s*' + name + rb'\s*=\s*([^,]*)', challenge, re.IGNORECASE)
    if found is None:
        return None
    return [part.strip().decode("ascii", "replace") for part in found.group(1).split(b",") if part.strip()]


def offered_qops(challenge: bytes) -> list[str]:
    """The QOPs of a DIGEST-MD5 challenge's ``qop-options`` (``auth`` when absent, RFC 2831)."""
    found = _directive(challenge, b"qop")
    return ["auth"] if found is None else found


def offered_ciphers(challenge: bytes) -> list[str]:
    """The ciphers of a DIGEST-MD5 challenge's ``cipher-opts`` (none when absent)."""
    return _directive(challenge, b"cipher") or []


class DigestMechanism:
    """SASL DIGEST-MD5 with ``token`` at ``protection`` (Hadoop's name) to the upstream
    ``label``; follows :class:`gateway.upstream.sasl.Mechanism`. Raises
    :class:`~gateway.upstream.cyrus.CyrusUnavailable` when Cyrus SASL is not installed."""

    name = "DIGEST-MD5"
    #: Cyrus keeps its packet, output and plain-text buffers at the largest frame's size.
    retains_frames = True
    #: The receive buffer the gateway announces (``maxbuf``), bytes.
    receive_buffer = MAX_BUFFER

    def __init__(self, token: DelegationToken, protection: str, label: str):
        self.token, self.label, self.protection = token, label, protection
        self.wanted = QOP_OF_PROTECTION[protection]
        self.qop = "auth"
        #: The negotiated layer's strength (Cyrus's SSF: 0, 1, or the cipher's key bits).
        self.ssf = 0
        self._user = base64.b64encode(token.identifier)
        self._ssf_range = _SSF_OF_PROTECTION[protection]
        self._conn = ClientConnection("null", "default", authname=self._user,
                                      password=base64.b64encode(token.password),
                                      min_ssf=self._ssf_range[0], max_ssf=self._ssf_range[1],
                                      max_buffer=self.receive_buffer)
        self._started = False

    @property
    def complete(self) -> bool:
        return self._conn.complete

    def initial_response(self) -> bytes:
        self._start()
        return b""  # DIGEST-MD5 is server-first

    def _start(self) -> None:
        if not self._started:
            try:
                self._conn.start(self.name)
            except CyrusError as exc:
                raise UpstreamAuthFailed(f"DIGEST-MD5 for upstream {self.label} cannot start: "
                                         f"{self._scrub(exc)} (is Debian's libsasl2-modules installed?)") from None
            self._started = True

    def step(self, challenge: bytes) -> bytes:
        self._start()
        if not challenge.startswith(b"rspauth="):
            offered = offered_qops(challenge)
            if self.wanted not in offered:
                theirs = ",".join(PROTECTION_OF_QOP.get(q, q) for q in offered) or "none"
                raise UpstreamAuthFailed(
                    f"upstream {self.label} offers hadoop.rpc.protection={theirs} to DIGEST-MD5 "
                    f"(delegation tokens) but the gateway's upstream.sasl.protection is "
                    f"{self.protection}: make them agree")
        try:
            response = self._conn.step(challenge)
        except CyrusError as exc:
            if exc.code == SASL_TOOWEAK:
                raise self._too_weak(challenge) from None
            raise UpstreamAuthFailed(f"DIGEST-MD5 with upstream {self.label} failed: "
                                     f"{self._scrub(exc)}") from None
        if self._conn.complete:
            self._check_layer()
        return response

    def _too_weak(self, challenge: bytes) -> UpstreamAuthFailed:
        offered = ",".join(offered_ciphers(challenge)) or "none"
        log.warning("upstream %s offers DIGEST-MD5 ciphers %s only; privacy needs %d bits or more",
                    self.label, offered, PRIVACY_MIN_SSF)
        return UpstreamAuthFailed(
            f"upstream {self.label} offers DIGEST-MD5 (delegation tokens) the ciphers {offered} "
            f"but the gateway's upstream.sasl.protection privacy requires one of at least "
            f"{PRIVACY_MIN_SSF} bits (3des or rc4): HMS's JVM offers both unless its security "
            "providers lack them, so a challenge without them may have been altered on the way")

    def _check_layer(self) -> None:
        self.ssf = ssf = self._conn.ssf
        self.qop = "auth" if ssf == 0 else "auth-int" if ssf == 1 else "auth-conf"
        low, high = self._ssf_range
        if self.qop != self.wanted or not low <= ssf <= high:  # Cyrus keeps to the asked range
            raise UpstreamAuthFailed(f"DIGEST-MD5 with upstream {self.label} negotiated QOP "
                                     f"{self.qop} of strength {ssf}, not {self.wanted}")

    def wrap(self, data: bytes) -> list[bytes]:
        try:
            return list(split_packets(self._conn.encode(data)))
        except CyrusError as exc:
            raise UpstreamBadReply(f"DIGEST-MD5 cannot protect a request to upstream "
                                   f"{self.label}: {self._scrub(exc)}") from None

    def unwrap(self, data: bytes) -> bytes:
        try:
            return self._conn.decode(len(data).to_bytes(_LENGTH_BYTES, "big") + data)
        except CyrusError as exc:
            raise UpstreamBadReply(f"upstream {self.label} sent a SASL frame that does not verify "
                                   f"(DIGEST-MD5 {self.qop}): {self._scrub(exc)}") from None

    def _scrub(self, exc: CyrusError) -> str:
        # Cyrus names the user in some errors: here the token's identifier, kept out of logs.
        return str(exc).replace(self._user.decode("ascii"), "<token>")[:300]

    def refused(self, reason: str) -> UpstreamAuthFailed:
        log.info("upstream %s refused the delegation token of %s: %s", self.label, self.token.owner,
                 reason.replace(self.token.text, "<token>").replace(self._user.decode("ascii"), "<token>")[:300])
        return StaleCredentials(f"upstream {self.label} refused the delegation token of "
                                f"{self.token.owner}")
