"""``POST /v1/namespaces/{namespace}/register`` (operationId ``registerTable``): an existing
metadata file becomes a table of the namespace (the spec's ``RegisterTableRequest``: ``name``,
``metadata-location``; ``overwrite`` is not offered: 406), answered with its ``LoadTableResult``.

A registered table is written through the gateway afterwards, so both the metadata file and the
table ``location`` it names must lie below the namespace's location or one of the service's
``register_prefixes`` (else 403 with the reason): otherwise ``register`` would hand a user write
access to another namespace's files. Locations are compared as URIs (scheme, authority, path
normalised; a ``..`` segment is refused), never as bare strings, so ``/wh/db2`` is not below
``/wh/db``. The file must read as Iceberg table metadata (400), the name must be free (409).
Access needed: ``create`` on the namespace, as for a new table.
"""

from __future__ import annotations

import posixpath
from urllib.parse import urlsplit

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pyiceberg.exceptions import ValidationError as IcebergValidationError

from gateway.iceberg import errors
from gateway.iceberg.bodies import parse
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.hive_tables import new_table
from gateway.iceberg.routes import Route, hms_name
from gateway.iceberg.tables import load_result
from gateway.upstream.errors import UpstreamError


class RegisterTableRequest(BaseModel):
    """The spec's ``RegisterTableRequest``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    metadata_location: str = Field(alias="metadata-location", min_length=1, max_length=4096)
    overwrite: bool = False


def _parts(location: str) -> tuple[str, str, str] | None:
    """``(scheme, authority, normalised path)`` of a location (a bare path is ``file``), or None
    for one with a ``..`` segment, a query or a fragment."""
    parts = urlsplit(location)
    if parts.query or parts.fragment or ".." in parts.path.split("/"):
        return None
    scheme = (parts.scheme or "file").lower()
    return scheme, parts.netloc, posixpath.normpath(parts.path or "/")


def below(location: str, prefix: str) -> bool:
    """Whether ``location`` is ``prefix`` or lies below it (same scheme and authority, path
    below the prefix's path at a ``/`` boundary; ``file:/x``, ``file:///x`` and ``/x`` alike)."""
    inner, outer = _parts(location), _parts(prefix)
    if inner is None or outer is None or inner[:2] != outer[:2]:
        return False
    path, root = inner[2], outer[2]
    return path == root or path.startswith(root.rstrip("/") + "/")


async def register_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """Raises ``BadRequest`` (body, name, unreadable metadata), ``Forbidden`` (policy, location),
    ``NoSuchNamespace``, ``AlreadyExists``, ``Unsupported`` (``overwrite``)."""
    ask = parse(RegisterTableRequest, body)
    db = route.namespace
    assert db is not None
    name = hms_name(ask.name, "table")
    catalog.named(db, name)
    if ask.overwrite:
        raise errors.Unsupported("register with overwrite is not supported: drop the table first")
    catalog.require("create", db)
    database = await catalog.database(db)
    allowed = [p for p in (database.locationUri, *catalog.service.options.register_prefixes) if p]
    location = ask.metadata_location
    if not any(below(location, prefix) for prefix in allowed):
        raise errors.Forbidden(f"{location[:300]} is not below the location of namespace {db} "
                               f"nor below a register prefix of this service")
    idl = catalog.idl
    await catalog.absent(db, name)
    try:
        metadata = await catalog.files.read(location)
    except (FileNotFoundError, IsADirectoryError, ValueError, ValidationError, IcebergValidationError,
            RecursionError, KeyError, TypeError) as exc:
        raise errors.BadRequest(f"{location[:300]} is not readable Iceberg table metadata: "
                                f"{type(exc).__name__}: {str(exc)[:300]}") from None
    if not any(below(metadata.location, prefix) for prefix in allowed):
        raise errors.Forbidden(f"the table location {metadata.location[:300]} of {location[:300]} is not "
                               f"below the location of namespace {db} nor below a register prefix")
    table = new_table(idl, db, name, catalog.user, metadata, location, catalog.settings.hive2_compatible)
    try:
        await catalog.client.call("create_table", tbl=table)
    except UpstreamError:
        raise
    except idl.AlreadyExistsException:
        raise errors.AlreadyExists(f"Table already exists: {db}.{name}") from None
    except (idl.InvalidObjectException, idl.MetaException, idl.NoSuchObjectException) as exc:
        raise errors.BadRequest(f"the Hive Metastore refused table {db}.{name}: {exc.message}") from None
    return Reply(body=load_result(location, metadata))
