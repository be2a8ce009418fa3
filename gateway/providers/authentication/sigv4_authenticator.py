"""The ``sigv4`` provider's run-time check (:mod:`gateway.providers.authentication.sigv4`: the
scheme, the settings, the refusals): the signature recomputed with botocore and compared in
constant time; imported only when a topology names the provider."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone

from aiohttp import hdrs, web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.client_address import client_address
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.sigv4 import (
    ALGORITHM,
    REFUSAL,
    SIGNED_BODY,
    UNRECOGNIZED,
    Refusal,
    SigV4Provider,
    parse_credentials_file,
)
from gateway.providers.authentication.throttle import password_check

log = logging.getLogger(__name__)

_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_PART = re.compile(r"\s*(Credential|SignedHeaders|Signature)\s*=\s*([^,\s]*)\s*")
_MISMATCH = ("The request signature we calculated does not match the signature you provided. "
             "Check your AWS Secret Access Key and signing method. Consult the service "
             "documentation for details.")


def _incomplete(message: str) -> Refusal:
    return Refusal("IncompleteSignatureException", 400, message)


def _invalid(message: str) -> Refusal:
    return Refusal("InvalidSignatureException", 403, message)


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
        rebuilt = AWSRequest(method=request.method, url=f"https://{request.host}{request.raw_path}",
                             data=body)
        for name, value in request.headers.items():
            if name.lower() in wanted:
                rebuilt.headers[name] = value  # appends: repeated headers are signed together
        rebuilt.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials(key_id, secret), self.config.service, region)
        signer_headers = signer.signed_headers(signer.headers_to_sign(rebuilt)).split(";")
        if signer_headers != sorted(wanted):
            return _invalid(_MISMATCH)  # a signed header missing, or one botocore never signs
        expected = signer.signature(signer.string_to_sign(rebuilt, signer.canonical_request(rebuilt)),
                                    rebuilt)
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            return _invalid(_MISMATCH)
        return None
