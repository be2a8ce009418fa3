"""``POST /v1/namespaces/{namespace}/register`` (operationId ``registerTable``): an existing
metadata file becomes a table of the namespace (the spec's ``RegisterTableRequest``: ``name``,
``metadata-location``; ``overwrite`` is not offered: 406), answered with its ``LoadTableResult``.
``POST /v1/namespaces/{namespace}/register-view`` (``registerView``, ``RegisterViewRequest``)
does the same for a view metadata file, answered with its ``LoadViewResult``; the HMS table is
the one :mod:`gateway.iceberg.views` creates (``VIRTUAL_VIEW``, ``table_type=ICEBERG-VIEW``).

A registered table is written through the gateway afterwards, so both the metadata file and the
table ``location`` it names must lie below the namespace's location or one of the service's
``register_prefixes`` (else 403 with the reason): otherwise ``register`` would hand a user write
access to another namespace's files. Locations are compared as URIs (scheme, authority, path
normalised; a ``..`` segment is refused), never as bare strings, so ``/wh/db2`` is not below
``/wh/db``. The file must read as Iceberg table (or view) metadata (400), the name must be free of tables
and views (409). Access needed: ``create`` on the namespace, as for a new table. The file is
never deleted, whatever HMS answers: it is not the gateway's.
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
from gateway.iceberg.hive_tables import new_table, new_view_table
from gateway.iceberg.routes import Route, hms_name
from gateway.iceberg.tables import load_result
from gateway.iceberg.views import load_result as view_result


class RegisterTableRequest(BaseModel):
    """The spec's ``RegisterTableRequest``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    metadata_location: str = Field(alias="metadata-location", min_length=1, max_length=4096)
    overwrite: bool = False


class RegisterViewRequest(BaseModel):
    """The spec's ``RegisterViewRequest``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    metadata_location: str = Field(alias="metadata-location", min_length=1, max_length=4096)


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
    if ask.overwrite:
        raise errors.Unsupported("register with overwrite is not supported: drop the table first")
    return await _register(catalog, route, ask.name, ask.metadata_location, view=False)


async def register_view(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """Raises as :func:`register_table` (but for ``overwrite``, which views do not have)."""
    ask = parse(RegisterViewRequest, body)
    return await _register(catalog, route, ask.name, ask.metadata_location, view=True)


async def _register(catalog: Catalog, route: Route, name: str, location: str, *, view: bool) -> Reply:
    what = "view" if view else "table"
    db = route.namespace
    assert db is not None
    name = hms_name(name, what)
    catalog.named(db, name)
    catalog.require("create", db)
    database = await catalog.database(db)
    allowed = [p for p in (database.locationUri, *catalog.service.options.register_prefixes) if p]
    if not any(below(location, prefix) for prefix in allowed):
        raise errors.Forbidden(f"{location[:300]} is not below the location of namespace {db} "
                               f"nor below a register prefix of this service")
    await catalog.absent(db, name)
    try:
        metadata = await (catalog.files.read_view if view else catalog.files.read)(location)
    except (FileNotFoundError, IsADirectoryError, ValueError, ValidationError, IcebergValidationError,
            RecursionError, KeyError, TypeError, OSError) as exc:
        raise errors.BadRequest(f"{location[:300]} is not readable Iceberg {what} metadata: "
                                f"{type(exc).__name__}: {str(exc)[:300]}") from None
    if not any(below(metadata.location, prefix) for prefix in allowed):
        raise errors.Forbidden(f"the {what} location {metadata.location[:300]} of {location[:300]} is not "
                               f"below the location of namespace {db} nor below a register prefix")
    build = new_view_table if view else new_table
    table = build(catalog.idl, db, name, catalog.user, metadata, location, catalog.settings.hive2_compatible)
    await catalog.create(db, name, table, None, what=what.capitalize())
    return Reply(body=(view_result if view else load_result)(location, metadata))
