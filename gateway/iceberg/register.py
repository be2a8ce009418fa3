"""``POST /v1/namespaces/{namespace}/register`` (operationId ``registerTable``): an existing
metadata file becomes a table of the namespace (the spec's ``RegisterTableRequest``: ``name``,
``metadata-location``; ``overwrite`` is not offered: 406), answered with its ``LoadTableResult``.
``POST /v1/namespaces/{namespace}/register-view`` (``registerView``, ``RegisterViewRequest``)
does the same for a view metadata file, answered with its ``LoadViewResult``; the HMS table is
the one :mod:`gateway.iceberg.views` creates (``VIRTUAL_VIEW``, ``table_type=ICEBERG-VIEW``).

A registered table is written through the gateway afterwards, so the table ``location`` its
metadata names is checked as a new table's (:func:`gateway.iceberg.locations.check_table`:
inside the allowed locations, strictly below the namespace's location or one of the service's
``register_prefixes``, not overlapping another table of the namespace or another namespace, the
Ranger ``url`` permission unless it is the default location), and the metadata file must lie
below that table location (Polaris's ``ALLOW_EXTERNAL_METADATA_FILE_LOCATION`` off), both
before the file is read, and not through a symbolic link below them. The metadata may name
no property that loads code and no data or
metadata path outside the location. Otherwise ``register`` would hand a user another
namespace's files. Locations are compared as URIs (:mod:`gateway.iceberg.locations`), never as
bare strings, so ``/wh/db2`` is not below ``/wh/db``. The file must read as Iceberg table (or
view) metadata (400), the name must be free of tables and views (409). Access needed:
``create`` on the namespace, as for a new table. The file is
never deleted, whatever HMS answers: it is not the gateway's.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pyiceberg.exceptions import ValidationError as IcebergValidationError

from gateway.iceberg import errors
from gateway.iceberg.bodies import file_fault
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.local_paths import linked
from gateway.iceberg.locations import (
    allowed_roots, check_properties, check_references, check_table, inside, require_allowed,
)
from gateway.iceberg.locations import parse as parse_location
from gateway.iceberg.objects import TABLE, VIEW, CatalogObject
from gateway.iceberg.paths import RouteMatch, hms_name
from gateway.iceberg.tables import stored


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


async def register_table(catalog: Catalog, route: RouteMatch, request: web.BaseRequest,
                         ask: RegisterTableRequest) -> Reply:
    """Raises ``BadRequest`` (body, name, unreadable metadata), ``Forbidden`` (policy, location),
    ``NoSuchNamespace``, ``AlreadyExists``, ``Unsupported`` (``overwrite``)."""
    if ask.overwrite:
        raise errors.Unsupported("register with overwrite is not supported: drop the table first")
    return await _register(catalog, route, ask.name, ask.metadata_location, TABLE)


async def register_view(catalog: Catalog, route: RouteMatch, request: web.BaseRequest,
                        ask: RegisterViewRequest) -> Reply:
    """Raises as :func:`register_table` (but for ``overwrite``, which views do not have)."""
    return await _register(catalog, route, ask.name, ask.metadata_location, VIEW)


async def _register(catalog: Catalog, route: RouteMatch, name: str, location: str, object_type: CatalogObject) -> Reply:
    what = object_type.noun
    db = route.db()
    name = hms_name(name, what)
    database = await catalog.database(db)
    file = parse_location(location, "metadata-location")
    areas = [p for p in (database.locationUri, *catalog.service.register_prefixes) if p]
    require_allowed(file, await allowed_roots(catalog), "metadata-location", location)
    homes = [area for area in areas if inside(location, area)]  # checked again with the table's location
    if not homes:
        raise errors.Forbidden(f"{location[:300]} is not below the location of namespace {db} "
                               f"nor below a register prefix of this service")
    if any(linked(location, home) for home in homes):  # a client's link on a local warehouse
        raise errors.Forbidden(f"{location[:300]} is reached through a symbolic link")
    await catalog.absent(db, name)
    try:
        metadata = await object_type.read(catalog.files, location, fresh=True)
    except (FileNotFoundError, IsADirectoryError, ValueError, ValidationError, IcebergValidationError,
            RecursionError, KeyError, TypeError, OSError) as exc:
        raise errors.BadRequest(f"{location[:300]} is not readable Iceberg {what} metadata: "
                                f"{file_fault(exc)}") from None
    home = await check_table(catalog, db, name, metadata.location, database, what=what,
                             areas=catalog.service.register_prefixes)
    if not home.contains(file):
        raise errors.Forbidden(f"the metadata file {location[:300]} is not below the {what} location "
                               f"{metadata.location[:300]} it names")
    check_properties(metadata.location, metadata.properties, f"{what} {db}.{name}")
    check_references(None, metadata, what)
    await stored(catalog, db, name, metadata, location, object_type, written=True)
    return Reply(body=object_type.result(location, metadata))
