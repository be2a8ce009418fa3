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
throttle), as Basic does; secrets never reach a log line.

This module holds the settings and what the ``glue`` kind reads of a refusal; the check itself,
with botocore, is :mod:`gateway.providers.authentication.sigv4_authenticator`, imported only
when a topology names the provider.
"""

from __future__ import annotations

import configparser
import re
from typing import ClassVar, Literal, NamedTuple

from aiohttp import web
from pydantic import Field, field_validator, model_validator

from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import ProviderSettings


ALGORITHM = "AWS4-HMAC-SHA256"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.+=/-]{4,128}$")


class Refusal(NamedTuple):
    """AWS's answer to a refused signature: ``code`` (``__type``), HTTP ``status``, ``message``."""

    code: str
    status: int
    message: str


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

    authenticator: ClassVar[str] = "gateway.providers.authentication.sigv4_authenticator:SigV4Authenticator"
