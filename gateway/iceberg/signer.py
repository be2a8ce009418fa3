"""Remote signing of S3 requests (Iceberg's S3 signer API, ``s3-signer-open-api.yaml``; the
client is PyIceberg's ``S3V4RestSigner``, which POSTs ``{"method", "region", "uri", "headers"}``
and takes back ``{"uri", "headers"}``, then adds those headers to its request).

Each table gets its own signer endpoint, the spec's ``signRequest``
(``POST .../v1/{prefix}/namespaces/{ns}/tables/{table}/sign``, apache/iceberg#15450: where a
client without a signer endpoint in ``config`` signs), named in the table's
``s3.signer.endpoint`` for PyIceberg 0.12 and Iceberg Java 1.10; ``.../s3-sign`` (as Apache
Polaris names it, and as answers before issue 49 named it) is the same endpoint. A request is signed only
when all of these hold, else 403 (400 for a malformed one) and nothing is signed:

- the table's location is not a bucket root and is one the gateway could have created the
  table at (:func:`gateway.iceberg.locations.check_delegated`; a verdict is kept
  :data:`SIGNING_VERDICT_SECONDS`);
- the URL is on the warehouse's S3 endpoint (path style ``endpoint/bucket/key`` or virtual host
  ``bucket.endpoint/key``), in the table location's bucket, its key under the location's prefix
  (a listing: its ``prefix`` parameter under it), with no ``.``/``..`` key segment;
- its query has only the object and listing parameters S3 clients send for data files, never
  presigned-URL parameters (``X-Amz-*``);
- the method fits the access the policy grants on the table: GET/HEAD ``select``,
  PUT/POST/DELETE ``update``; and the table passes the rules of every route that hands out its
  storage: no column denied to the caller, no row filter or mask for the caller (else a
  trusted engine's signatures only), its storage identity (all declared on the route's row and
  judged before :func:`sign` runs, :mod:`gateway.iceberg.access`);
- a copy source (``x-amz-copy-source``) is an object under the location too, and no ACL or
  object-lock header is asked for (:func:`check_headers`); a client's ``Host`` header is never
  signed (the URL's host is);
- the region is the warehouse's, and there are at most 64 headers of at most 16 KiB in all.

The signature is botocore's SigV4 (``S3SigV4Auth``) with STS credentials scoped to the table's
location and the access (:meth:`~gateway.iceberg.vending.Vendor.signing_credentials`), never the
gateway's own key. The answer carries only the headers signing added (``Authorization``,
``X-Amz-Date``, ``X-Amz-Security-Token``, ``X-Amz-Content-SHA256`` unless the client sent it):
PyIceberg adds them to its request rather than replacing. The body is not sent, so the payload
is ``UNSIGNED-PAYLOAD`` unless the client declared its SHA-256.

Decisions are counted (``hms_gateway_s3_signings_total{decision}``); refusals are audited one
line each; allowed signings write one audit line per user, table and access per
:data:`~gateway.iceberg.service_state.SUMMARY_SECONDS`, whose reason counts the signings it stands for.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

from aiohttp import web
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pydantic import BaseModel, ConfigDict, Field

from gateway.iceberg import errors
from gateway.iceberg.bodies import parse
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.locations import check_delegated
from gateway.iceberg.paths import RouteMatch
from gateway.lakehouse.storage import split_location
from gateway.observability import metrics

#: The request key telling the service that this request's audit line is summarized.
SUMMARIZED = "iceberg.signing.summarized"
SIGNING_REASON = "iceberg.signing.reason"
MAX_HEADERS, MAX_HEADER_BYTES = 64, 16 * 1024
#: Seconds a table found where the gateway could have placed it is not checked again (each S3
#: request is signed on its own; the check lists the namespace's tables).
SIGNING_VERDICT_SECONDS = 60.0
ACCESS = {"GET": "select", "HEAD": "select", "PUT": "update", "POST": "update", "DELETE": "update"}
#: Query parameters of object reads/writes, multipart uploads and ListObjects(V2).
OBJECT_PARAMETERS = frozenset({"uploads", "uploadId", "partNumber", "versionId", "x-id"})
LIST_PARAMETERS = frozenset({"list-type", "prefix", "delimiter", "continuation-token", "max-keys",
                             "start-after", "encoding-type", "fetch-owner", "marker", "x-id"})
_UNSIGNED = "UNSIGNED-PAYLOAD"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
#: Headers the gateway sets itself: whatever the client sent for them is dropped.
_OWN = frozenset({"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"})
#: Client headers never signed: the gateway's own, and ``host``, which botocore would sign in
#: place of the URL's host (a virtual-host ``Host`` turns ``/bucket/key`` into another key).
_DROPPED = frozenset({"authorization", "x-amz-date", "x-amz-security-token", "host"})
#: Header name prefixes refused (403): object ACLs and object lock.
REFUSED_HEADERS = ("x-amz-acl", "x-amz-grant-", "x-amz-object-lock-")


class SignRequest(BaseModel):
    """The spec's ``RemoteSignRequest`` (the signer API's ``S3SignRequest``; ``properties`` and
    ``body`` are ignored; ``provider``, when given, must be ``s3``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    region: str = Field(max_length=64)
    uri: str = Field(max_length=8192)
    method: str = Field(max_length=16)
    headers: dict[str, list[str]] = Field(default_factory=dict)
    provider: str = Field(default="s3", max_length=16)

    @classmethod
    def from_request(cls, catalog: Catalog, request: web.BaseRequest, body: bytes) -> SignRequest:
        """The body read (:func:`~gateway.iceberg.bodies.parse`); one that does not read is an
        ``invalid`` signing too. Raises :class:`errors.BadRequest`."""
        try:
            return parse(cls, body)
        except errors.IcebergError:
            _count(catalog.service, "invalid")
            raise


class SignResponse(BaseModel):
    """The signer API's ``S3SignResponse``: the ``uri`` to send and the ``headers`` signing adds."""

    uri: str
    headers: dict[str, list[str]]


def _count(service, decision: str) -> None:
    metrics.child(metrics.S3_SIGNINGS, service.topology, service.path, decision).inc()


class _Signer(S3SigV4Auth):
    """SigV4 for S3 with the payload hash the client declared (or ``UNSIGNED-PAYLOAD``)."""

    def __init__(self, credentials, region: str, payload: str):
        super().__init__(credentials, "s3", region)
        self._payload = payload

    def payload(self, request) -> str:
        return self._payload


async def sign(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: SignRequest) -> Reply:
    """Answer one signing request for the route's table (see the module docstring); the method's
    access (``select`` or ``update``), the denied columns, the row filter and masks and the
    storage identity were judged before, as the route declares (:mod:`gateway.iceberg.access`).
    Raises :class:`errors.BadRequest`, :class:`errors.Forbidden` (each counted by
    :func:`refused`), 404 for an unknown table."""
    service = catalog.service
    db, table = route.db_table()
    if ask.provider.lower() != "s3":
        raise errors.BadRequest(f"this catalog signs S3 requests only, not provider {ask.provider!r}")
    access = ACCESS[ask.method.upper()]
    headers = headers_to_sign(ask.headers)
    storage, vendor = service.storage, service.vendor
    if storage is None or vendor is None:
        raise errors.Forbidden("this service does not sign S3 requests (no options.s3.role_arn)")
    if ask.region != storage.options.region:
        raise errors.BadRequest(f"region {ask.region[:64]!r} is not the warehouse's")
    hive = await catalog.judged(db, table)
    location = (hive.sd.location or "").rstrip("/") if hive.sd else ""
    await check_delegated(catalog, db, table, location, remember=SIGNING_VERDICT_SECONDS)
    check_url(ask.uri, ask.method.upper(), location, storage.options)
    check_headers(headers, ask.method.upper(), location)
    credentials = await vendor.signing_credentials(location, access == "update")
    answer = signed(ask.method.upper(), ask.uri, headers, credentials, storage.options.region)
    _count(service, "allowed")
    skipped = service.signing_summaries.allowed((catalog.user, db, table, access))
    if skipped is None:
        request[SUMMARIZED] = True
    else:
        request[SUMMARIZED] = False
        request[SIGNING_REASON] = (f"S3 {access} signing allowed; {skipped} more allowed "
                                   "before this line since the previous one")
    return Reply(body=SignResponse(**answer))


def refused(catalog: Catalog, error: errors.IcebergError) -> None:
    """Count a refused signing (the route row's ``refused``: the enforcer's and :func:`sign`'s)."""
    _count(catalog.service, "invalid" if error.status == 400 else "denied")


def signed(method: str, uri: str, headers: dict[str, str], credentials, region: str) -> dict:
    """The signer API's answer ``{"uri", "headers"}`` for ``method`` on ``uri`` with the
    client's ``headers`` (lower-case names, :func:`headers_to_sign`), signed with ``credentials``
    (a :class:`~gateway.iceberg.vending.TemporaryCredentials`): only the headers signing adds."""
    headers = dict(headers)
    declared = headers.pop("x-amz-content-sha256", None)
    payload = declared if declared and (declared == _UNSIGNED or _SHA256.fullmatch(declared)) else _UNSIGNED
    request = AWSRequest(method=method, url=uri, headers={**headers, "X-Amz-Content-SHA256": payload})
    _Signer(Credentials(credentials.access_key, credentials.secret_key, credentials.token),
            region, payload).add_auth(request)
    added = {name: [value] for name, value in request.headers.items()
             if name.lower() in _OWN and not (name.lower() == "x-amz-content-sha256" and declared == payload)}
    return {"uri": request.url, "headers": added}


def headers_to_sign(given: dict[str, list[str]]) -> dict[str, str]:
    """The client's headers to sign, one value each, lower-case names; the gateway's own
    dropped. Raises :class:`errors.BadRequest` for too many, too large or malformed ones."""
    if len(given) > MAX_HEADERS:
        raise errors.BadRequest(f"more than {MAX_HEADERS} headers to sign")
    size, headers = 0, {}
    for name, values in given.items():
        size += len(name) + sum(len(v) for v in values)
        if size > MAX_HEADER_BYTES:
            raise errors.BadRequest(f"the headers to sign exceed {MAX_HEADER_BYTES} bytes")
        if not _TOKEN.fullmatch(name) or any(c in v for v in values for c in "\r\n\0"):
            raise errors.BadRequest("a header to sign has a malformed name or value")
        if name.lower() not in _DROPPED:
            headers[name.lower()] = ", ".join(values)
    return headers


def check_headers(headers: dict[str, str], method: str, location: str) -> None:
    """Raise :class:`errors.Forbidden` for headers (:func:`headers_to_sign`'s) that would take a
    signed request outside the table ``location`` or past its access: a copy source
    (``x-amz-copy-source``, ``CopyObject``/``UploadPartCopy``) that is not an object under the
    location, or an ACL or object-lock header (:data:`REFUSED_HEADERS`: public or undeletable
    objects are not a table's to decide)."""
    refused = sorted(name for name in headers if name.startswith(REFUSED_HEADERS))
    if refused:
        raise errors.Forbidden(f"the signer does not sign header {refused[0][:64]!r}")
    source = headers.get("x-amz-copy-source")
    if source is None:
        return
    bucket, prefix = split_location(location)
    path = urlsplit(source).path if method == "PUT" else ""
    try:
        key = unquote(path.lstrip("/"), errors="strict")
    except UnicodeDecodeError:
        key = ""
    source_bucket, _, source_key = key.partition("/")
    if source_bucket != bucket or not source_key.startswith(prefix) \
            or any(segment in (".", "..") for segment in source_key.split("/")):
        raise errors.Forbidden("the copy source is not an object under the table's location")


def check_url(uri: str, method: str, location: str, options) -> None:
    """Raise :class:`errors.Forbidden` unless ``uri`` is an object (or a listing) under the
    table ``location``, :class:`errors.BadRequest` for a malformed or tricky URL."""
    try:
        bucket, prefix = split_location(location)
    except ValueError:
        raise errors.Forbidden("the table is not stored on S3") from None
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        raise errors.BadRequest("the URI to sign is malformed") from None
    endpoint = urlsplit(options.s3_endpoint)
    if parts.scheme not in ("http", "https") or parts.username is not None or parts.password is not None \
            or parts.fragment:
        raise errors.BadRequest("the URI to sign must be a plain http(s) URL")
    host, where = (parts.hostname or "").lower(), (endpoint.hostname or "").lower()
    same_port = (port or _default_port(parts.scheme)) == (endpoint.port or _default_port(endpoint.scheme))
    raw_path = parts.path
    if host == where and same_port:  # path style: /bucket/key
        url_bucket, _, raw_key = raw_path.lstrip("/").partition("/")
    elif host == f"{bucket}.{where}" and same_port:  # virtual host: bucket.endpoint/key
        url_bucket, raw_key = bucket, raw_path.lstrip("/")
    else:
        raise errors.Forbidden("the URI is not on the warehouse's S3 endpoint")
    if unquote(url_bucket) != bucket:
        raise errors.Forbidden("the URI names another bucket than the table's")
    try:
        key = unquote(raw_key, errors="strict")
    except UnicodeDecodeError:
        raise errors.BadRequest("the URI's key is not UTF-8") from None
    if any(segment in (".", "..") for segment in key.split("/")) or "\\" in key or "\0" in key:
        raise errors.BadRequest("the URI's key has a '.' or '..' segment")
    try:
        query = parse_qsl(parts.query, keep_blank_values=True, errors="strict")
    except ValueError:
        raise errors.BadRequest("the URI's query is malformed") from None
    names = [name for name, _ in query]
    if any(name.lower().startswith("x-amz-") for name in names) or len(names) != len(set(names)):
        raise errors.BadRequest("the URI has presigned-URL or repeated query parameters")
    if key:
        if any(name not in OBJECT_PARAMETERS for name in names):
            raise errors.Forbidden("the URI has query parameters the signer does not sign")
        if not key.startswith(prefix):
            raise errors.Forbidden("the URI is outside the table's location")
        return
    listed = dict(query).get("prefix")
    if method != "GET" or listed is None or any(name not in LIST_PARAMETERS for name in names) \
            or not listed.startswith(prefix) or any(s in (".", "..") for s in listed.split("/")):
        raise errors.Forbidden("only listings of the table's location are signed on the bucket")


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80
