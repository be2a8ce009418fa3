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

Frames: Cyrus cuts a message into packets no larger than the server's receive buffer (HMS's
``maxbuf``, 64 KiB), one SASL frame each; HMS reads a message across frames. On the way in a
frame must be whole to be checked, and DIGEST-MD5 bounds it at 16 MiB (RFC 2831's largest
``maxbuf``, which the gateway announces): HMS sends each reply in one frame, so at ``integrity``
and ``privacy`` a reply over 16 MiB fails with a 502 naming that limit.
"""

from __future__ import annotations

import base64
import logging
import re

from gateway.upstream.cyrus import MAX_BUFFER, ClientConnection, CyrusError, split_packets
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.sasl import PROTECTION_OF_QOP, QOP_OF_PROTECTION, StaleCredentials, UpstreamAuthFailed
from gateway.upstream.tokens import DelegationToken

log = logging.getLogger(__name__)

#: Hadoop's protection → the security strength Cyrus may choose (min, max): none, integrity
#: (ssf 1), a cipher (ssf > 1).
_SSF_OF_PROTECTION = {"authentication": (0, 0), "integrity": (1, 1), "privacy": (2, 256)}
_LENGTH_BYTES = 4


def offered_qops(challenge: bytes) -> list[str]:
    """The QOPs of a DIGEST-MD5 challenge's ``qop-options`` (``auth`` when absent, RFC 2831)."""
    found = re.search(rb'qop\s*=\s*"([^"]*)"', challenge, re.IGNORECASE) or \
        re.search(rb'qop\s*=\s*([^,]*)', challenge, re.IGNORECASE)
    if found is None:
        return ["auth"]
    return [part.strip().decode("ascii", "replace") for part in found.group(1).split(b",") if part.strip()]


class DigestMechanism:
    """SASL DIGEST-MD5 with ``token`` at ``protection`` (Hadoop's name) to the upstream
    ``label``; follows :class:`gateway.upstream.sasl.Mechanism`. Raises
    :class:`~gateway.upstream.cyrus.CyrusUnavailable` when Cyrus SASL is not installed."""

    name = "DIGEST-MD5"
    #: Cyrus keeps its packet, output and plain-text buffers at the largest frame's size.
    retains_frames = True

    def __init__(self, token: DelegationToken, protection: str, label: str):
        self.token, self.label, self.protection = token, label, protection
        self.wanted = QOP_OF_PROTECTION[protection]
        self.qop = "auth"
        self._user = base64.b64encode(token.identifier)
        low, high = _SSF_OF_PROTECTION[protection]
        self._conn = ClientConnection("null", "default", authname=self._user,
                                      password=base64.b64encode(token.password),
                                      min_ssf=low, max_ssf=high, max_buffer=MAX_BUFFER)
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
            raise UpstreamAuthFailed(f"DIGEST-MD5 with upstream {self.label} failed: "
                                     f"{self._scrub(exc)}") from None
        if self._conn.complete:
            self._check_layer()
        return response

    def _check_layer(self) -> None:
        ssf = self._conn.ssf
        self.qop = "auth" if ssf == 0 else "auth-int" if ssf == 1 else "auth-conf"
        if self.qop != self.wanted:  # Cyrus keeps to the asked strength; never run weaker
            raise UpstreamAuthFailed(f"DIGEST-MD5 with upstream {self.label} negotiated QOP "
                                     f"{self.qop}, not {self.wanted}")

    def wrap(self, data: bytes) -> list[bytes]:
        try:
            return list(split_packets(self._conn.encode(data)))
        except CyrusError as exc:
            raise UpstreamBadReply(f"DIGEST-MD5 cannot protect a request to upstream "
                                   f"{self.label}: {self._scrub(exc)}") from None

    def unwrap(self, data: bytes) -> bytes:
        if len(data) > MAX_BUFFER:
            raise UpstreamBadReply(
                f"upstream {self.label} sent a SASL frame of {len(data)} bytes: DIGEST-MD5's "
                f"{self.protection} layer carries at most {MAX_BUFFER} bytes per frame (a smaller "
                "reply, or protection authentication, or impersonation none)")
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
