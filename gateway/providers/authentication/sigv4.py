"""AWS Signature Version 4 authentication (``Authorization: AWS4-HMAC-SHA256 Credential=…,
SignedHeaders=…, Signature=…``), as AWS services check it, for clients of AWS APIs (boto3's glue
client) pointed at the gateway.

Access key ids map to gateway users (``access_keys``); their secret keys come from a secret
reference (``secret_keys: file:…``/``env:…``) holding an AWS shared-credentials file (INI:
sections with ``aws_access_key_id`` and ``aws_secret_access_key``, as ``aws configure`` writes).
The signature is recomputed with botocore (``botocore.auth.SigV4Auth`` over an ``AWSRequest``
rebuilt from the incoming method, host, path, query, signed headers and body, with the request's
own ``X-Amz-Date``) and compared with ``hmac.compare_digest``. The credential scope must name the
date of ``X-Amz-Date``, the configured ``service`` and any region (or one of ``regions``); the
request time must be within ``clock_skew_seconds`` of the gateway's clock (AWS: 5 minutes).
Headers botocore never signs (``User-Agent``, ``Expect``…) cannot be among the signed ones.

The signature covers the body, so the service kind must read the body before authentication and
leave it under :data:`SIGNED_BODY` (the ``glue`` kind does); elsewhere this provider declines.
A refused signature is not an absent one: the provider leaves AWS's error (code, status,
message) under :data:`REFUSAL` and declines, so that a JSON API service can answer as AWS does
(403 ``InvalidSignatureException``, ``UnrecognizedClientException``…). Each check of a
well-formed signature spends the client address's budget of password checks (the failure
throttle), as Basic does; secrets never reach a log line. botocore's part is
:mod:`gateway.providers.authentication.sigv4_signature`, imported when the provider is built, so
a worker whose topologies do not name ``sigv4`` does not import botocore for it.
"""

from __future__ import annotations

import configparser
import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import ClassVar, Literal, NamedTuple

from aiohttp import hdrs, web
from pydantic import Field, field_validator, model_validator

from gateway.client_address import client_address
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import ProviderSettings
from gateway.providers.authentication.throttle import password_check
from gateway.registry import resolve

log = logging.getLogger(__name__)


ALGORITHM = "AWS4-HMAC-SHA256"
#: botocore's signature of a request (:func:`gateway.providers.authentication.sigv4_signature.signature`).
SIGNATURE = "gateway.providers.authentication.sigv4_signature:signature"
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.+=/-]{4,128}$")
_PART = re.compile(r"\s*(Credential|SignedHeaders|Signature)\s*=\s*([^,\s]*)\s*")
_MISMATCH = ("The request signature we calculated does not match the signature you provided. "
             "Check your AWS Secret Access Key and signing method. Consult the service "
             "documentation for details.")


class Refusal(NamedTuple):
    """AWS's answer to a refused signature: ``code`` (``__type``), HTTP ``status``, ``message``."""

    code: str
    status: int
    message: str


def _incomplete(message: str) -> Refusal:
    return Refusal("IncompleteSignatureException", 400, message)


def _invalid(message: str) -> Refusal:
    return Refusal("InvalidSignatureException", 403, message)


#: Request key: the request body, left by the service kind before authentication.
SIGNED_BODY = web.RequestKey("gateway.sigv4.body", bytes)
#: Request key: a :class:`Refusal` when a SigV4 signature was presented and refused.
REFUSAL = web.RequestKey("gateway.sigv4.refusal", Refusal)

UNRECOGNIZED = Refusal("UnrecognizedClientException", 403,
                       "The security token included in the request is invalid.")


def parse_credentials_file(text: str) -> dict[str, str]:
    """Access key id → secret key from an AWS shared-credentials file's text (INI).

    Raises ``ValueError`` naming the section (never a secret) for a section that lacks one of
    the two keys, for a duplicated access key id, or for text that is not INI."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise ValueError(f"not an AWS credentials file (INI): {type(exc).__name__}") from None
    out: dict[str, str] = {}
    for section in parser.sections():
        key_id = parser.get(section, "aws_access_key_id", fallback="").strip()
        secret = parser.get(section, "aws_secret_access_key", fallback="").strip()
        if not key_id or not secret:
            raise ValueError(f"section [{section}] needs aws_access_key_id and aws_secret_access_key")
        if key_id in out:
            raise ValueError(f"access key id {key_id} appears twice")
        out[key_id] = secret
    return out


class SigV4Provider(ProviderSettings):
    """AWS SigV4 (``AWS4-HMAC-SHA256``): ``access_keys`` maps access key ids to users,
    ``secret_keys`` references their secrets (AWS shared-credentials format)."""

    type: Literal["sigv4"]
    #: Access key id → gateway user (the principal's name).
    access_keys: dict[str, str] = Field(min_length=1)
    #: ``file:/path`` or ``env:NAME`` holding an AWS shared-credentials file.
    secret_keys: Secret
    #: The service name credential scopes must carry (botocore's signing name).
    service: str = "glue"
    #: Regions a credential scope may name; None: any.
    regions: list[str] | None = None
    #: Allowed difference between ``X-Amz-Date`` and the gateway's clock (AWS: 300 s).
    clock_skew_seconds: int = Field(default=300, ge=0, le=900)

    @field_validator("access_keys")
    @classmethod
    def _key_ids(cls, keys: dict[str, str]) -> dict[str, str]:
        for key_id, user in keys.items():
            if not _KEY_ID.match(key_id):
                raise ValueError(f"{key_id!r} is not an access key id (4 to 128 of A-Z a-z 0-9 _.+=/-)")
            if not user or not user.strip():
                raise ValueError(f"access key {key_id} maps to an empty user")
        return keys

    @model_validator(mode="after")
    def _every_key_has_a_secret(self) -> SigV4Provider:
        secrets = parse_credentials_file(self.secret_keys.reveal())
        missing = sorted(set(self.access_keys) - set(secrets))
        if missing:
            raise ValueError(f"no secret key in {self.secret_keys.reference} for access key id "
                             f"{', '.join(missing)}")
        return self

    authenticator: ClassVar[str] = "gateway.providers.authentication.sigv4:SigV4Authenticator"


class SigV4Authenticator:
    """Checks ``Authorization: AWS4-HMAC-SHA256 …``. AWS defines no ``WWW-Authenticate``
    challenge; the scheme's name is offered so that a 401 always carries one (RFC 9110 §11.6.1).
    ``clock`` gives the time in seconds since the epoch (injectable)."""

    name = "sigv4"

    def __init__(self, config: SigV4Provider, clock: Callable[[], float] = time.time):
        self.config = config
        self._users = dict(config.access_keys)
        self._secrets = {k: v for k, v in parse_credentials_file(config.secret_keys.reveal()).items()
                         if k in self._users}
        self._regions = frozenset(config.regions) if config.regions is not None else None
        self._clock = clock
        self._signature = resolve(SIGNATURE)

    def challenge(self) -> str:
        return ALGORITHM

    async def authenticate(self, request: web.Request) -> Principal | None:
        header = request.headers.get(hdrs.AUTHORIZATION, "")
        if not header.startswith(ALGORITHM + " "):
            return None
        result = self._parse(request, header[len(ALGORITHM) + 1:])
        if isinstance(result, Refusal):
            return self._refuse(request, result)
        key_id, region, signed, signature, amz_date = result
        body = request.get(SIGNED_BODY)
        if body is None:
            log.warning("sigv4: %s/%s does not read the body before authentication: declined",
                        request.method, request.path)
            return None
        outcome: list[Refusal | None] = [None]

        async def check() -> bool:
            outcome[0] = self._verify(request, key_id, region, signed, signature, amz_date, body)
            return outcome[0] is None

        if not await password_check(request, check):
            return self._refuse(request, outcome[0] or UNRECOGNIZED)
        return Principal(name=self._users[key_id], provider=self.name)

    def _refuse(self, request: web.Request, refusal: Refusal) -> None:
        request[REFUSAL] = refusal
        log.info("sigv4: refused from %s: %s", client_address(request), refusal.code)
        return None

    def _parse(self, request: web.Request, value: str):
        """(key id, region, signed header names, signature, X-Amz-Date) or a :class:`Refusal`."""
        parts: dict[str, str] = {}
        for item in value.split(","):
            match = _PART.fullmatch(item)
            if match is None:
                return _incomplete(f"Authorization header is malformed: {item.strip()[:64]!r}")
            parts[match.group(1)] = match.group(2)
        for name in ("Credential", "SignedHeaders", "Signature"):
            if not parts.get(name):
                return _incomplete(f"Authorization header requires '{name}' parameter.")
        scope = parts["Credential"].split("/")
        if len(scope) != 5 or scope[4] != "aws4_request":
            return _incomplete("Credential must have exactly 5 slash-delimited elements, e.g. "
                               "keyid/date/region/service/aws4_request")
        key_id, date, region, service, _ = scope
        amz_date = request.headers.get("X-Amz-Date", "")
        try:
            when = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=timezone.utc)
        except ValueError:
            return _incomplete("Authorization header requires existence of a valid 'X-Amz-Date' header.")
        if date != amz_date[:8]:
            return _invalid(f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version "
                            f"of date from HTTP: '{date[:8]}' != '{amz_date[:8]}', from '{amz_date}'.")
        if service != self.config.service:
            return _invalid(f"Credential should be scoped to correct service: '{self.config.service}'. ")
        if not region or (self._regions is not None and region not in self._regions):
            return _invalid("Credential should be scoped to a valid region. ")
        signed = parts["SignedHeaders"].lower().split(";")
        if "host" not in signed:
            return _invalid("'Host' must be a signed header.")
        skew = self.config.clock_skew_seconds
        now = self._clock()
        stamp = when.timestamp()
        if abs(now - stamp) > skew:
            now_text = time.strftime(_AMZ_DATE, time.gmtime(now))
            minutes = f"{skew // 60} min." if skew % 60 == 0 else f"{skew} s"
            if stamp < now:
                edge = time.strftime(_AMZ_DATE, time.gmtime(now - skew))
                return _invalid(f"Signature expired: {amz_date} is now earlier than {edge} "
                                f"({now_text} - {minutes})")
            edge = time.strftime(_AMZ_DATE, time.gmtime(now + skew))
            return _invalid(f"Signature not yet current: {amz_date} is still later than {edge} "
                            f"({now_text} + {minutes})")
        return key_id, region, signed, parts["Signature"], amz_date

    def _verify(self, request: web.Request, key_id: str, region: str, signed: list[str],
                signature: str, amz_date: str, body: bytes) -> Refusal | None:
        secret = self._secrets.get(key_id)
        if secret is None:
            return UNRECOGNIZED
        declared = request.headers.get("X-Amz-Content-SHA256")
        if declared is not None and declared != hashlib.sha256(body).hexdigest():
            return _invalid("The provided 'x-amz-content-sha256' header does not match what was computed.")
        wanted = set(signed)
        # appended in order: repeated headers are signed together
        headers = [(name, value) for name, value in request.headers.items() if name.lower() in wanted]
        signer_headers, expected = self._signature(
            request.method, f"https://{request.host}{request.raw_path}", headers, body, amz_date,
            key_id, secret, self.config.service, region)
        if signer_headers != sorted(wanted):
            return _invalid(_MISMATCH)  # a signed header missing, or one botocore never signs
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            return _invalid(_MISMATCH)
        return None
