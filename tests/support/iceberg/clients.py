"""Clients of a test gateway's ``iceberg-rest`` service, shared by the Iceberg integration tests:
PyIceberg's ``RestCatalog`` (:func:`rest_catalog`), one raw HTTP request (:func:`call`) and the
spec's error model of an answer (:func:`error_of`); and the catalog policy rule that lets one
user do everything (:func:`all_access_policy`). Both clients trust the gateway's CA and, unless
told otherwise, check every answer they receive against the Iceberg REST spec
(:func:`tests.support.iceberg.spec.validating`)."""

from __future__ import annotations

import json

import requests
from pyiceberg.catalog.rest import RestCatalog

from tests.support.gateway import RunningGateway
from tests.support.iceberg.spec import validating

__all__ = ["ETL_ALL_POLICY", "all_access_policy", "call", "error_of", "rest_catalog", "session"]

def all_access_policy(user: str) -> str:
    """A catalog policy's text whose first rule (``id: 1``) lets ``user`` do everything; a test
    module appends its own rules (from ``id: 2``) to it."""
    return f"""
policies:
  - id: 1
    name: {user} does everything
    resources: {{database: ["*"], table: ["*"], column: ["*"]}}
    allow: [{{users: [{user}], accesses: [all]}}]
"""


#: The Iceberg tests' usual first rule: user ``etl`` may do everything.
ETL_ALL_POLICY = all_access_policy("etl")


def rest_catalog(gw: RunningGateway, *, user: str | None = None, password: str | None = None, path: str = "iceberg",
                 validate: bool = True, name: str = "gw", **properties) -> RestCatalog:
    """PyIceberg's ``RestCatalog`` named ``name`` on the service at ``path`` of ``gw``.

    ``ssl.cabundle`` is the gateway's CA (an ``ssl`` entry of ``properties``, e.g. ``client``, is
    merged in). With ``user``, auth type ``basic`` as ``user``/``password``; without, the auth is
    what ``properties`` say (``credential``, ``token``, ``rest.sigv4-enabled``, a client
    certificate). With ``validate``, every answer after the catalog's first ``GET /v1/config`` is
    checked against the spec (``AssertionError`` where the spec does not allow it). Raises what
    PyIceberg raises when that first call fails (e.g. ``OAuthError``, ``UnauthorizedError``)."""
    ssl = {"cabundle": str(gw.ca_file), **properties.pop("ssl", {})}
    if user is not None:
        properties["auth"] = {"type": "basic", "basic": {"username": user, "password": password}}
    catalog = RestCatalog(name, **{"uri": gw.url(path=path), "ssl": ssl, **properties})
    if validate:
        validating(catalog._session)
    return catalog


def session(gw: RunningGateway, *, validate: bool = True) -> requests.Session:
    """A ``requests`` session that trusts the gateway's CA; with ``validate``, every answer it
    receives is checked against the spec (``AssertionError`` where the spec does not allow it)."""
    plain = requests.Session()
    plain.verify = str(gw.ca_file)
    return validating(plain) if validate else plain


def call(gw: RunningGateway, method: str, path: str, body: dict | list | bytes | None = None, *,
         auth: tuple[str, str] | requests.auth.AuthBase | None, service: str = "iceberg", headers: dict | None = None,
         validate: bool = True) -> requests.Response:
    """The answer to one request ``method`` ``path`` (``/v1/...``, with its query) below ``service``
    of ``gw``, over a ``requests`` session that trusts the gateway's CA. ``body`` is sent as it
    is (bytes) or as JSON, with ``Content-Type: application/json`` unless ``headers`` say
    otherwise; ``auth`` is ``(user, password)`` for Basic, any ``requests`` auth (e.g. SPNEGO),
    or None for no credentials. With ``validate``, the answer is checked against the spec
    (``AssertionError`` where it does not allow it): ``validate=False`` for what the spec has no
    operation for (another service kind, an unknown path or method, the S3 signer)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    with session(gw, validate=validate) as once:
        return once.request(method, gw.url(path=service) + path, data=data, auth=auth, timeout=60,
                            headers={"Content-Type": "application/json", **(headers or {})})


def error_of(response: requests.Response, status: int | None = None, kind: str | None = None) -> dict:
    """The ``error`` object of an error answer, checked to be the spec's error model: exactly
    ``message`` (a string), ``type`` and ``code`` (the answer's HTTP status); and, when given,
    the status is ``status`` and the type is ``kind``. Raises ``AssertionError`` otherwise."""
    assert status is None or response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"} and isinstance(error["message"], str), error
    assert error["code"] == response.status_code, error
    assert kind is None or error["type"] == kind, error
    return error
