"""What a load or create table answer adds for storage access (the spec's
``X-Iceberg-Access-Delegation``), and the spec's ``loadCredentials`` operation.

The client lists the modes it accepts; the first one the service offers wins:

- ``vended-credentials``: STS credentials for the table's location
  (:mod:`gateway.iceberg.vending`), read-write when the policy grants ``update`` on the table,
  read-only when it grants ``select`` only, none otherwise; in ``config`` and in
  ``storage-credentials`` (``prefix``: the location);
- ``remote-signing``: ``s3.remote-signing-enabled`` (the spec's key), PyIceberg's ``s3.signer``
  and the table's signer endpoint on this service (:mod:`gateway.iceberg.signer`, the spec's
  ``signRequest`` path) in ``s3.signer.uri`` and ``s3.signer.endpoint``, the keys PyIceberg 0.12
  and Iceberg Java 1.10 read (the spec's deprecated ``signer.uri``/``signer.endpoint`` are not
  sent: without them a client of the current spec signs at that same default path), and
  ``py-io-impl`` the fsspec FileIO (PyIceberg signs only there).

A service without ``options.s3.role_arn``, a table not on S3, or a mode not asked for: nothing.
Both cover the table's location only, and only a location that is not a bucket root and is
one the gateway could have created the table at (inside the allowed locations, below its
namespace, over no other table or namespace: :func:`gateway.iceberg.locations.check_delegated`,
else 403).
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web
from pyiceberg.catalog.rest import LoadCredentialsResponse

from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.locations import check_delegated
from gateway.iceberg.paths import RouteMatch
from gateway.lakehouse.storage import on_s3
from gateway.iceberg.vending import HEADER, SIGNING, VENDED, requested, vended_config

#: The spec's ``signRequest`` path of a table, below the service (and its ``{prefix}``).
SIGNER_ENDPOINT = "v1/namespaces/{namespace}/tables/{table}/sign"
FSSPEC_FILE_IO = "pyiceberg.io.fsspec.FsspecFileIO"


async def delegated(catalog: Catalog, request: web.BaseRequest, db: str, table: str,
                    location: str) -> tuple[dict[str, str], list[dict]]:
    """``(config, storage-credentials)`` for a load or create answer of ``db.table`` at
    ``location``. Raises :class:`~gateway.iceberg.errors.ServiceFailure` when STS fails."""
    service = catalog.service
    vendor = service.vendor
    if vendor is None or not on_s3(location):
        return {}, []
    for mode in requested(request.headers.get(HEADER)):
        if mode == VENDED:
            found = await _vended(catalog, db, table, location)
            return (found[0]["config"], found) if found else ({}, [])
        if mode == SIGNING:
            await check_delegated(catalog, db, table, location)
            return {**service.storage.client_config(), "s3.remote-signing-enabled": "true",
                    "s3.signer": "S3V4RestSigner",
                    "s3.signer.uri": f"{request.scheme}://{request.host}{service.prefix}",
                    "s3.signer.endpoint": SIGNER_ENDPOINT.format(namespace=quote(db), table=quote(table)),
                    "py-io-impl": FSSPEC_FILE_IO}, []
    return {}, []


async def _vended(catalog: Catalog, db: str, table: str, location: str) -> list[dict]:
    write = catalog.view.may("update", db, table)
    if not write and not catalog.view.may("select", db, table):
        return []
    await check_delegated(catalog, db, table, location)
    service = catalog.service
    credentials = await service.vendor.credentials(location, write, catalog.user)
    return [{"prefix": location.rstrip("/") + "/", "config": vended_config(service.storage, credentials)}]


async def load_credentials(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """``GET /v1/namespaces/{ns}/tables/{table}/credentials``: ``{"storage-credentials": [...]}``
    for the table, judged by the policy now (a revoked grant gets 403). Empty on a service that
    does not vend credentials. Raises 404/403 as load table: the route's rules (``select``,
    denied columns, row filter and masks, storage identity: :mod:`gateway.iceberg.access`)
    were judged before."""
    db, table = route.db_table()
    hive = await catalog.judged(db, table)
    location = (hive.sd.location or "") if hive.sd else ""
    vendor = catalog.service.vendor
    if vendor is None or not on_s3(location):
        return Reply(body=LoadCredentialsResponse(**{"storage-credentials": []}))
    return Reply(body=LoadCredentialsResponse(**{"storage-credentials": await _vended(catalog, db, table, location)}))
