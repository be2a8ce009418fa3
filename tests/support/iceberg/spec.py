"""Answers of an ``iceberg-rest`` service checked against the Iceberg REST Catalog spec
(``rest-catalog-open-api.yaml`` beside this file, vendored from apache/iceberg) with
openapi-core: status, content type and body schema of the operation the request names.

:func:`validating` hooks a ``requests`` session (PyIceberg's ``RestCatalog._session`` or a
plain one) so that every response it receives is checked, and a response the spec does not
allow fails the test where it was received.

The view operations' error answers are typed in the spec as a bare ``ErrorModel`` where every
other operation has ``IcebergErrorResponse``, while the spec's own examples for them, Java's
``ErrorResponseParser`` and PyIceberg all use the ``{"error": ErrorModel}`` wrapper (see
apache/iceberg#8914, which fixed the same slip elsewhere): an error answer is therefore also
accepted when its ``error`` object is what the spec's schema asks for.

The spec's ``PrimitiveTypeValue`` (a partition value, a bound, a filter's literal) is a
``oneOf`` of sixteen forms of which several accept the same JSON (every integer is an
``IntegerTypeValue`` and a ``LongTypeValue``, every string a ``StringTypeValue`` and a
``BinaryTypeValue``...), so no value at all would pass it: it is read as the ``anyOf`` it means.

:func:`check_read_restrictions` checks a ``read-restrictions`` object alone against the spec's
``ReadRestrictions`` schema, each projection against the schema its ``action`` names in the
``Action`` discriminator's mapping (the schema itself takes any string as an action, so a reader
can meet a newer spec's; a server sends only the spec's own), and what the schema cannot say but
its text does: the row filter's columns are field ids (``IdReference``, not a name or the
deprecated ``term``), and no field id is projected twice.

Paths are checked as the spec's ``/v1/{prefix}/...``: a request without a prefix (the service
without ``warehouses``) gets a placeholder one, a request under a warehouse's prefix keeps it;
``/v1/config`` and ``/v1/oauth/tokens`` have none in the spec either.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import requests
import yaml
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_schema_validator import OAS31Validator

SPEC_FILE = Path(__file__).with_name("rest-catalog-open-api.yaml")
_UNPREFIXED = ("/v1/config", "/v1/oauth/tokens")
#: The first segment after ``/v1/{prefix}/`` of every prefixed operation in the spec.
_OPERATIONS = {"namespaces", "tables", "views", "transactions"}


@cache
def _document() -> dict:
    document = _string_keys(yaml.safe_load(SPEC_FILE.read_text()))
    primitive = document["components"]["schemas"]["PrimitiveTypeValue"]
    primitive["anyOf"] = primitive.pop("oneOf")
    return document


@cache
def openapi() -> OpenAPI:
    return OpenAPI.from_dict(_document(), base_uri=SPEC_FILE.as_uri())


def _schema_errors(name: str, value) -> list[str]:
    components = _document()["components"]
    validator = OAS31Validator({"$ref": f"#/components/schemas/{name}", "components": components})
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)]


def check_read_restrictions(value) -> None:
    """Raise ``AssertionError`` when ``value`` is not a ``ReadRestrictions`` of the spec, or a
    projection names an action the spec does not define."""
    errors = _schema_errors("ReadRestrictions", value)
    mapping = _document()["components"]["schemas"]["Action"]["discriminator"]["mapping"]
    for i, projection in enumerate(value.get("required-column-projections") or ()):
        action = projection.get("action") if isinstance(projection, dict) else None
        if action not in mapping:
            errors.append(f"required-column-projections/{i}: {action!r} is no action of the spec")
        else:
            errors += [f"required-column-projections/{i}/{e}"
                       for e in _schema_errors(mapping[action].rsplit("/", 1)[1], projection)]
    ids = [p.get("field-id") for p in value.get("required-column-projections") or () if isinstance(p, dict)]
    errors += [f"field id {i} is projected twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    errors += [f"required-row-filter: {n} names a column other than by field id"
               for n in _names_not_ids(value.get("required-row-filter"))]
    if errors:
        raise AssertionError(f"not a ReadRestrictions the spec allows: {'; '.join(errors)}\n{json.dumps(value)[:500]}")


def _string_keys(value):
    """YAML reads the responses' ``200:`` keys as integers; OpenAPI's are strings."""
    if isinstance(value, dict):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


def spec_path(url: str) -> str:
    """The spec path of a request URL below an ``iceberg-rest`` service (``.../v1/...``)."""
    path = urlsplit(url).path
    path = path[path.index("/v1/"):]
    if path in _UNPREFIXED:
        return path
    rest = path[len("/v1/"):]
    return path if rest.split("/", 1)[0] not in _OPERATIONS else "/v1/prefix/" + rest


def check(method: str, url: str, status: int, content_type: str | None, body: bytes) -> None:
    """Raise ``AssertionError`` when the spec does not allow this answer to this request."""
    request = MockRequest("https://localhost", method.lower(), spec_path(url),
                          args=dict(parse_qsl(urlsplit(url).query)))
    media = (content_type or "").split(";")[0].strip() or "application/json"
    try:
        _validate(request, body, status, media)
    except Exception as exc:  # openapi-core's many validation errors
        causes = "; ".join(str(e) for e in getattr(exc, "schema_errors", ()) or [exc.__cause__] if e)
        raise AssertionError(f"{method} {url} -> {status} is not what the spec allows: {exc!r} {causes}\n"
                             f"{body[:500]!r}") from None


def _validate(request: MockRequest, body: bytes, status: int, media: str) -> None:
    body = _without_null_page_token(body)
    try:
        openapi().validate_response(request, MockResponse(body, status_code=status, content_type=media))
    except Exception:
        inner = _wrapped_error(body) if status >= 400 else None
        if inner is None:
            raise
        try:  # an operation whose error schema is the bare ErrorModel (the view operations)
            openapi().validate_response(request, MockResponse(inner, status_code=status, content_type=media))
        except Exception:
            pass
        else:
            return
        raise


def _names_not_ids(node) -> list[str]:
    """The parts of a predicate that name a column other than as ``{"type": "reference", "id"}``."""
    if isinstance(node, list):
        return [found for item in node for found in _names_not_ids(item)]
    if not isinstance(node, dict):
        return []
    found = [json.dumps(node)[:80]] if "term" in node or (node.get("type") == "reference" and "id" not in node) else []
    return found + [f for key, child in node.items() if key != "term" for f in _names_not_ids(child)]


def _without_null_page_token(body: bytes) -> bytes:
    """``body`` without a ``"next-page-token": null``: the spec's ``PageToken`` asks for null on a
    last page but says so with 3.0's ``nullable``, which a validator of its 3.1 document ignores."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if isinstance(document, dict) and "next-page-token" in document and document["next-page-token"] is None:
        del document["next-page-token"]
        return json.dumps(document).encode()
    return body


def _wrapped_error(body: bytes) -> bytes | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if isinstance(document, dict) and set(document) == {"error"} and isinstance(document["error"], dict):
        return json.dumps(document["error"]).encode()
    return None


def _hook(response: requests.Response, *args, **kwargs) -> None:
    request = response.request
    check(request.method or "GET", request.url or "", response.status_code,
          response.headers.get("Content-Type"), response.content)


def validating(session: requests.Session) -> requests.Session:
    """``session`` with every response checked against the spec (a ``requests`` response hook)."""
    session.hooks["response"].append(_hook)
    return session
