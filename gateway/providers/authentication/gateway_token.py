"""Short-lived bearer tokens the gateway issues itself (Knox: the KnoxToken service and the JWT
provider that accepts its tokens), for clients of the OAuth2 client-credentials grant: an
``iceberg-rest`` service's ``POST .../v1/oauth/tokens`` (:mod:`gateway.iceberg.oauth`) checks the
client id and secret with the topology's password providers and answers a token minted here; this
provider then authenticates ``Authorization: Bearer <token>`` on every service of the topology.

Tokens are JWTs (RFC 7519) signed HS256 (RFC 7518 §3.2) with ``signing_key``, python-jose's.
The gateway is both issuer and only verifier, so a symmetric key is enough: every replica must
verify every other replica's tokens, and one secret file mounted on all of them does that (an
RS256/ES256 pair would only matter if a third party verified the tokens; none does). The key is
never generated per process: a token from one replica would fail on the next. Claims: ``iss``,
``aud``, ``sub`` (the principal), ``groups`` (the password provider's groups), ``iat``, ``nbf``,
``exp`` (``lifetime_seconds`` later), ``jti``.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import ClassVar, Literal

from aiohttp import hdrs, web
from jose import jwt
from jose.exceptions import JOSEError
from pydantic import Field, field_validator

from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.jwt import JwtProvider, bearer_token
from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import ProviderSettings

ALGORITHM = "HS256"
#: RFC 7518 §3.2: an HS256 key at least as long as the hash output.
MIN_KEY_BYTES = 32


class GatewayTokenProvider(ProviderSettings):
    """Bearer tokens issued by the gateway (``POST .../v1/oauth/tokens`` of an ``iceberg-rest``
    service), HS256 with ``signing_key`` (a ``file:``/``env:`` reference, at least 32 bytes, the
    same on every replica), valid ``lifetime_seconds``. Topologies that share a key should use
    distinct ``audience`` values so that a token of one is refused by the other."""

    type: Literal["gateway-token"]
    signing_key: Secret
    issuer: str = "hms-gateway"
    audience: str = "hms-gateway"
    #: Seconds a token is valid (RFC 6749 ``expires_in``).
    lifetime_seconds: int = Field(default=3600, ge=60, le=86400)
    #: Allowed clock difference between replicas for ``exp``/``nbf`` (at most 5 minutes).
    clock_skew_seconds: int = Field(default=30, ge=0, le=300)

    @field_validator("signing_key")
    @classmethod
    def _long_enough(cls, key: Secret) -> Secret:
        if len(key.reveal().encode("utf-8")) < MIN_KEY_BYTES:
            raise ValueError(f"the key in {key.reference} is shorter than {MIN_KEY_BYTES} bytes "
                             "(RFC 7518 §3.2 for HS256); make one with: openssl rand -base64 48")
        return key

    authenticator: ClassVar[str] = "gateway.providers.authentication.gateway_token:GatewayTokenAuthenticator"


class GatewayTokenAuthenticator:
    """Verifies the tokens it mints (:meth:`mint`); 401 challenge ``Bearer realm="HMS Gateway"``."""

    name = "gateway-token"

    def __init__(self, config: GatewayTokenProvider, clock=time.time):
        self.config = config
        self.lifetime = config.lifetime_seconds
        self._key = config.signing_key.reveal()
        self._clock = clock
        # Verifying is the jwt provider's, limited to this issuer, audience, key and algorithm.
        self._verifier = JwtProvider(
            type="jwt", algorithms=[ALGORITHM], issuer=config.issuer, audience=config.audience,
            hmac_key=config.signing_key, cookie_name=None, groups_claim="groups",
            clock_skew_seconds=config.clock_skew_seconds).build()

    def challenge(self) -> str:
        return 'Bearer realm="HMS Gateway"'

    def mint(self, principal: Principal, now: float | None = None) -> str:
        """A token for ``principal`` valid from ``now`` (seconds since the epoch; None: the
        clock) for :attr:`lifetime` seconds."""
        issued = int(self._clock() if now is None else now)
        claims = {"iss": self.config.issuer, "aud": self.config.audience, "sub": principal.name,
                  "groups": sorted(principal.groups), "iat": issued, "nbf": issued,
                  "exp": issued + self.lifetime, "jti": uuid.uuid4().hex}
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    async def authenticate(self, request: web.Request) -> Principal | None:
        token = bearer_token(request.headers.get(hdrs.AUTHORIZATION))
        if not token:
            return None
        try:
            if jwt.get_unverified_header(token).get("alg") != ALGORITHM:
                return None  # not one of ours (another provider's token): quietly
        except JOSEError:
            return None
        principal = await self._verifier.authenticate(request)
        return None if principal is None else dataclasses.replace(principal, provider=self.name)
