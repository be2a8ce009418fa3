"""AWS Signature Version 4 of a request, as botocore computes it (``botocore.auth.SigV4Auth``
over an ``AWSRequest``), for the ``sigv4`` provider (:mod:`gateway.providers.authentication.sigv4`,
which checks everything else). The provider loads this module when it is built: botocore is
imported by a worker whose topologies name ``sigv4``, not by every worker that validates its
configuration."""

from __future__ import annotations

from collections.abc import Iterable

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

__all__ = ["signature"]


def signature(method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes, amz_date: str,
              key_id: str, secret: str, service: str, region: str) -> tuple[list[str], str]:
    """``(signed header names, signature)`` of the request ``method url`` with ``headers`` (the
    ones the client signed; a repeated name is signed with its values together) and ``body``,
    at ``amz_date`` (``X-Amz-Date``), under ``key_id``/``secret`` for ``service`` in ``region``:
    the lower-cased names botocore signs, sorted, and the signature in hex."""
    rebuilt = AWSRequest(method=method, url=url, data=body)
    for name, value in headers:
        rebuilt.headers[name] = value  # appends
    rebuilt.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(key_id, secret), service, region)
    signed = signer.signed_headers(signer.headers_to_sign(rebuilt)).split(";")
    return signed, signer.signature(signer.string_to_sign(rebuilt, signer.canonical_request(rebuilt)), rebuilt)
