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
from typing import Any

import aiohttp
from aiohttp import hdrs, web
from jose import jwt
from jose.exceptions import JOSEError

from gateway.client_address import client_address
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.settings import JwtProvider

log = logging.getLogger(__name__)

_KTY = {"RS": "RSA", "PS": "RSA", "ES": "EC"}
_MAX_TOKEN_BYTES = 16 * 1024
_MAX_JWKS_BYTES = 1024 * 1024


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
    """Bearer (RFC 6750) and KnoxSSO cookie; 401 challenge ``Bearer realm="<topology>"``."""

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
