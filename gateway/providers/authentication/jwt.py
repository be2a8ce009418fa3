"""JWT bearer authentication (RFC 7519 tokens, RFC 6750 ``Authorization: Bearer``, KnoxSSO cookie).

Verification is python-jose's. What this module decides is *which key* a token may be checked
with: the token's ``alg`` must be in the configured list, and the family of the algorithm picks
the key source (HS* only the HMAC key, RS/PS/ES only public keys of the matching type). So
``alg: none`` and the HS256-signed-with-the-RSA-public-key confusion never verify.
``iss``, ``aud``, ``exp`` and ``nbf`` are required, with ``clock_skew_seconds`` of leeway.

Keys: a PEM file read at start-up and/or a JWKS URL (RFC 7517) fetched on first use, kept
``jwks_cache_seconds``, and refetched when a token names an unknown ``kid`` (at most once per
``jwks_min_refresh_seconds``, so junk ``kid`` values cannot make the gateway hammer the issuer).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import aiohttp
from aiohttp import hdrs, web
from jose import jwt
from jose.exceptions import JOSEError
from pydantic import Field, field_validator, model_validator

from gateway.client_address import client_address
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import ProviderSettings

log = logging.getLogger(__name__)

_KTY = {"RS": "RSA", "PS": "RSA", "ES": "EC"}
_MAX_TOKEN_BYTES = 16 * 1024
_MAX_JWKS_BYTES = 1024 * 1024
_ASYMMETRIC = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
)
_HMAC = ("HS256", "HS384", "HS512")


class JwtProvider(ProviderSettings):
    """JWT (RFC 7519) from ``Authorization: Bearer`` (RFC 6750) or the KnoxSSO cookie.

    Keys come from ``public_key_file`` (PEM) and/or ``jwks_url`` (RFC 7517) for the asymmetric
    ``algorithms``, from ``hmac_key`` for HS*. A token's ``alg`` must be listed, and picks the key
    family, so ``none`` and HS/RS key confusion cannot verify.
    """

    type: Literal["jwt"]
    algorithms: list[Literal[_ASYMMETRIC + _HMAC]] = Field(min_length=1)  # type: ignore[valid-type]
    issuer: str
    audience: str
    public_key_file: Path | None = None
    jwks_url: str | None = None
    #: CA bundle for the JWKS URL's TLS certificate; None: system CAs.
    jwks_ca_file: Path | None = None
    #: Seconds a fetched JWKS is used before it is fetched again.
    jwks_cache_seconds: float = Field(default=3600.0, gt=0)
    #: At most one refetch per this many seconds when a token names an unknown ``kid``.
    jwks_min_refresh_seconds: float = Field(default=30.0, ge=0)
    hmac_key: Secret | None = None
    cookie_name: str | None = "hadoop-jwt"
    #: Allowed clock difference for ``exp``/``nbf``/``iat`` (bounded: at most 5 minutes).
    clock_skew_seconds: int = Field(default=30, ge=0, le=300)
    user_claim: str = "sub"
    groups_claim: str | None = None

    path_fields: ClassVar[tuple[str, ...]] = ("public_key_file", "jwks_ca_file")

    @field_validator("jwks_url")
    @classmethod
    def _https(cls, url: str | None) -> str | None:
        if url is None:
            return url
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"{url!r} is not an https:// URL")
        return url

    @model_validator(mode="after")
    def _keys_for_algorithms(self) -> JwtProvider:
        asym = [a for a in self.algorithms if a in _ASYMMETRIC]
        hmac = [a for a in self.algorithms if a in _HMAC]
        if asym and self.public_key_file is None and self.jwks_url is None:
            raise ValueError(f"{asym[0]} needs public_key_file or jwks_url")
        if hmac and self.hmac_key is None:
            raise ValueError(f"{hmac[0]} needs hmac_key")
        if self.hmac_key is not None and not hmac:
            raise ValueError("hmac_key is set but no HS* algorithm is allowed")
        return self

    authenticator: ClassVar[str] = "gateway.providers.authentication.jwt:JwtAuthenticator"


def bearer_token(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (RFC 6750 §2.1), else None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class JwksCache:
    """The keys of one JWKS URL, by ``kid``; fetched lazily, refreshed on expiry or unknown kid."""

    def __init__(self, url: str, *, ca_file: str | None, ttl: float, min_refresh: float):
        self.url = url
        self._ssl = ssl.create_default_context(cafile=ca_file)
        self._ttl, self._min_refresh = ttl, min_refresh
        self._keys: list[dict[str, Any]] = []
        self._fetched = float("-inf")
        self._lock = asyncio.Lock()

    async def keys(self, kid: str | None) -> list[dict[str, Any]]:
        """JWKs matching ``kid`` (all keys when None), refetching the set when it is stale or
        when ``kid`` is unknown. A failed fetch is logged and the previous keys are kept."""
        now = time.monotonic()
        stale = now - self._fetched > self._ttl
        unknown = kid is not None and not self._match(kid)
        if stale or (unknown and now - self._fetched >= self._min_refresh):
            async with self._lock:
                if self._fetched < now:  # nobody refreshed while we waited
                    await self._fetch()
        return self._match(kid)

    def _match(self, kid: str | None) -> list[dict[str, Any]]:
        return [k for k in self._keys if kid is None or k.get("kid") == kid]

    async def _fetch(self) -> None:
        self._fetched = time.monotonic()
        try:
            timeout = aiohttp.ClientTimeout(total=10)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.get(self.url, ssl=self._ssl) as resp:
                    if resp.status != 200:
                        raise ValueError(f"HTTP {resp.status}")
                    body = await resp.content.read(_MAX_JWKS_BYTES + 1)
                    if len(body) > _MAX_JWKS_BYTES:
                        raise ValueError("JWKS larger than 1 MiB")
            keys = json.loads(body)["keys"]
            if not isinstance(keys, list):
                raise ValueError("'keys' is not a list")
            self._keys = [k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig"]
            log.info("fetched %d signing keys from %s", len(self._keys), self.url)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as exc:
            log.warning("cannot fetch JWKS %s: %s; keeping %d known keys",
                        self.url, exc or type(exc).__name__, len(self._keys))


class JwtAuthenticator:
    """Bearer (RFC 6750) and KnoxSSO cookie; 401 challenge ``Bearer realm="HMS Gateway"``."""

    name = "jwt"

    def __init__(self, config: JwtProvider):
        self.config = config
        self._algorithms = frozenset(config.algorithms)
        self._pem = config.public_key_file.read_text() if config.public_key_file else None
        self._hmac = config.hmac_key.reveal() if config.hmac_key else None
        self._jwks = (
            JwksCache(
                config.jwks_url,
                ca_file=str(config.jwks_ca_file) if config.jwks_ca_file else None,
                ttl=config.jwks_cache_seconds,
                min_refresh=config.jwks_min_refresh_seconds,
            )
            if config.jwks_url
            else None
        )
        self._options = {
            "leeway": config.clock_skew_seconds,
            "require_iss": True,
            "require_aud": True,
            "require_exp": True,
            "require_nbf": True,
        }

    def challenge(self) -> str:
        return 'Bearer realm="HMS Gateway"'

    def _token(self, request: web.Request) -> str | None:
        token = bearer_token(request.headers.get(hdrs.AUTHORIZATION))
        if token is None and self.config.cookie_name:
            token = request.cookies.get(self.config.cookie_name)
        return token

    async def _candidate_keys(self, alg: str, kid: str | None) -> list[Any]:
        if alg.startswith("HS"):
            return [self._hmac] if self._hmac else []
        keys: list[Any] = []
        if self._pem is not None:
            keys.append(self._pem)
        if self._jwks is not None:
            for jwk in await self._jwks.keys(kid):
                if jwk.get("kty") == _KTY[alg[:2]] and jwk.get("alg", alg) == alg:
                    keys.append(jwk)
        return keys

    async def authenticate(self, request: web.Request) -> Principal | None:
        token = self._token(request)
        if not token or len(token) > _MAX_TOKEN_BYTES:
            return None
        try:
            header = jwt.get_unverified_header(token)
        except JOSEError:
            log.info("jwt: malformed token from %s", client_address(request))
            return None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self._algorithms:
            log.info("jwt: algorithm %r not allowed (from %s)", str(alg)[:20], client_address(request))
            return None
        if kid is not None and not isinstance(kid, str):
            return None
        claims = None
        reason = "no key for this token"
        for key in await self._candidate_keys(alg, kid):
            try:
                claims = jwt.decode(
                    token, key, algorithms=[alg], audience=self.config.audience,
                    issuer=self.config.issuer, options=self._options,
                )
                break
            except JOSEError as exc:
                reason = str(exc) or type(exc).__name__
        if claims is None:
            log.info("jwt: token from %s refused: %s", client_address(request), reason)
            return None
        user = claims.get(self.config.user_claim)
        if not isinstance(user, str) or not user:
            log.info("jwt: token from %s has no %r claim", client_address(request), self.config.user_claim)
            return None
        groups: frozenset[str] = frozenset()
        if self.config.groups_claim:
            value = claims.get(self.config.groups_claim)
            if isinstance(value, list):
                groups = frozenset(g for g in value if isinstance(g, str))
        return Principal(name=user, provider=self.name, groups=groups)
