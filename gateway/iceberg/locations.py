"""Where the ``iceberg-rest`` service lets tables, views and namespaces live: every path the
gateway writes, deletes, signs or vends for lies inside what the warehouse and the policy grant.

After Apache Polaris's storage rules (``allowed-locations`` of a catalog, its sibling-overlap
check, ``ALLOW_UNSTRUCTURED_TABLE_LOCATION`` and ``ALLOW_EXTERNAL_METADATA_FILE_LOCATION`` off)
and Ranger Hive's ``url`` resource (Hive asks it for ``CREATE TABLE ... LOCATION``):

* **Form** (:func:`parse`; else 400): absolute (a scheme of :data:`SCHEMES`, or a bare ``/path``,
  which is ``file``), at most :data:`MAX_LENGTH` characters, no control character, backslash,
  query, fragment, user info, host of a ``file`` location (``file://localhost/x``, which
  PyIceberg's FileIOs read as the relative path ``localhost/x``), empty, ``.`` or
  ``..`` segment (also percent-encoded), ``*`` or ``$``
  (an S3 session policy reads them as a wildcard and a variable: a location ``s3://b/ns/*``
  would be vended the whole namespace, :mod:`gateway.iceberg.vending`). Locations
  are compared in one form (:class:`Location`): ``file:/x``, ``file:///x`` and ``/x`` alike;
  ``s3a``/``s3n`` as ``s3``; no trailing ``/``.
* **Allowed locations** (:func:`allowed_roots`): the HMS warehouse
  (``hive.metastore.warehouse.dir``) and the service's ``options.allowed_locations``. Every
  namespace, table and view location lies inside one of them.
* **Namespaces** (:func:`check_namespace`): a location a client names does not overlap (equal,
  contain or lie inside) another namespace's. A namespace whose location is an allowed location
  itself (Hive's ``default`` at the warehouse root) may hold others, but not over its own tables.
* **Tables and views** (:func:`check_table`): strictly below the namespace's location (or a
  ``register_prefixes`` area, for register); not overlapping a table or view of the namespace
  (Polaris's sibling check), nor another namespace's location; ``write.data.path``,
  ``write.metadata.path`` (and the older ``write.object-storage.path``,
  ``write.folder-storage.path``, in any case) below the table's location (:func:`check_properties`).
* **Tables already there** (:func:`check_in_place`): the gateway writes (a commit), deletes (a
  purge), vends credentials or signs for an existing table only when its location is one it
  could have created the table at, so a table placed by other means (a Thrift ``create_table``
  naming any metadata file, a table renamed out of its namespace) cannot steer it elsewhere.
* **Files a table refers to** (:func:`check_references`): a commit (or a staged create, a
  register) that adds a snapshot, a statistics file or a partition-statistics file names its
  ``manifest-list`` or ``statistics-path`` below the table's location, as Polaris confines a
  table's files; else another table's files would become this table's (read through it, vended
  for it, dropped from it).
* **The url permission**: a location a client chose (anything but the default
  ``<namespace location>/<name>``) needs Ranger's ``url`` ``read`` and ``write`` on it.

Refusals are 400 ``BadRequestException`` (a malformed location) or 403 ``ForbiddenException``
(outside what is allowed, overlapping, no url permission). Messages never name a namespace or
table the user may not see.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from gateway.iceberg import errors
from gateway.iceberg.local_paths import anchor
from gateway.iceberg.implementations import refuse_reserved
from gateway.policy.urls import SAME_SCHEME

log = logging.getLogger(__name__)

#: Longest location accepted, characters (HMS keeps ``SDS.LOCATION`` in 4,000).
MAX_LENGTH = 1024
#: Schemes PyIceberg's FileIOs serve; anything else is refused before any IO.
SCHEMES = frozenset({"file", "s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "hdfs", "viewfs", "oss"})
#: Schemes whose authority is ``container@account``.
CONTAINER_AT_ACCOUNT = frozenset({"abfs", "abfss", "wasb", "wasbs"})
#: Table properties naming where a writer puts data or metadata files (Iceberg's
#: ``TableProperties``; the last two are the deprecated spellings).
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path",
                   "write.folder-storage.path")
WAREHOUSE_KEY = "hive.metastore.warehouse.dir"
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")
_POLICY_SPECIAL = re.compile(r"[*$]")  # an IAM wildcard, the start of an IAM policy variable
_DB_FETCHES = 8  # concurrent get_database calls of an overlap check


@dataclass(frozen=True)
class Location:
    """A location in the one form compared: ``scheme`` (aliases folded), ``authority``,
    ``path`` (absolute, ``/`` for a root, no trailing ``/``)."""

    scheme: str
    authority: str
    path: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.path if self.path != '/' else ''}" or "/"

    def contains(self, other: Location) -> bool:
        """Whether ``other`` is this location or lies below it."""
        if (self.scheme, self.authority) != (other.scheme, other.authority):
            return False
        return self.path == "/" or other.path == self.path or other.path.startswith(self.path + "/")

    def overlaps(self, other: Location) -> bool:
        return self.contains(other) or other.contains(self)


def parse(value: object, what: str = "location") -> Location:
    """``value`` as a :class:`Location`. Raises :class:`~errors.BadRequest` saying why it is
    refused (see the module docstring)."""
    if not isinstance(value, str) or not value.strip():
        raise errors.BadRequest(f"{what} must be a non-empty string")
    if len(value) > MAX_LENGTH:
        raise errors.BadRequest(f"{what} is longer than {MAX_LENGTH} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.BadRequest(f"{what} is not valid Unicode") from None
    if _CONTROL.search(value):
        raise errors.BadRequest(f"{what} holds a control character or a backslash")
    if _POLICY_SPECIAL.search(value):
        raise errors.BadRequest(f"{what} holds '*' or '$', which storage policies read as a wildcard or a variable")
    try:
        parts = urlsplit(value)
    except ValueError:
        raise errors.BadRequest(f"{what} is not a URI") from None
    scheme = parts.scheme.lower()
    if not scheme:
        if not value.startswith("/"):
            raise errors.BadRequest(f"{what} {value[:200]!r} is relative: give an absolute URI")
        scheme = "file"
    if scheme not in SCHEMES:
        raise errors.BadRequest(f"{what} has scheme {scheme[:20]!r}; served: {', '.join(sorted(SCHEMES))}")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise errors.BadRequest(f"{what} must not have a query or a fragment")
    authority = parts.netloc
    # Azure's URIs name the container before '@' (abfss://container@account.dfs.core.windows.net);
    # anywhere else, and with a ':' (a password), it is user information.
    user = authority.rpartition("@")[0]
    if user and (scheme not in CONTAINER_AT_ACCOUNT or "@" in user or ":" in user):
        raise errors.BadRequest(f"{what} must not carry user information")
    if scheme == "file":
        if authority:  # PyIceberg's FileIOs read file://localhost/x as the relative path localhost/x
            raise errors.BadRequest(f"{what}: a file location names no host (write file:///path)")
        authority = ""
    elif not authority:
        raise errors.BadRequest(f"{what} names no bucket or host")
    path = parts.path or "/"
    if not path.startswith("/"):
        raise errors.BadRequest(f"{what} {value[:200]!r} is relative: give an absolute URI")
    segments = path.rstrip("/").split("/")[1:]
    for segment in segments:
        decoded = unquote(segment)
        if segment == "" or decoded in (".", "..") or "\0" in decoded or "/" in decoded:
            raise errors.BadRequest(f"{what} {value[:200]!r} has an empty, '.' or '..' segment")
    return Location(SAME_SCHEME.get(scheme, scheme), authority.lower() if scheme != "file" else "",
                    "/" + "/".join(segments) if segments else "/")


def checked(value: str) -> Location:
    """``value`` as :func:`parse` takes it, for configuration: raises ``ValueError`` saying why."""
    try:
        return parse(value, "location")
    except errors.IcebergError as exc:
        raise ValueError(exc.message) from None


def stored(value: str | None) -> Location | None:
    """A location HMS holds (a namespace's, another table's), or None when it is missing or
    not one :func:`parse` accepts (then it confines nothing and overlaps nothing)."""
    if not value:
        return None
    try:
        return parse(value)
    except errors.IcebergError:
        return None


def inside(location: str, root: str) -> bool:
    """Whether ``location`` lies at or below ``root`` (both as :func:`parse` takes them; False
    when either is refused)."""
    inner, outer = stored(location), stored(root)
    return inner is not None and outer is not None and outer.contains(inner)


def check_properties(location: str, properties: Mapping[str, str], what: str) -> Location:
    """Check what a table's or view's own metadata says (no HMS call): its ``location``'s form,
    no property naming code or configuring a storage client (:mod:`gateway.iceberg.implementations`), the
    :data:`PATH_PROPERTIES` below the location. Returns the location. Raises
    :class:`~errors.BadRequest`, :class:`~errors.Forbidden`."""
    refuse_reserved(properties, what)
    root = parse(location, f"the location of {what}")
    for key, value in properties.items():
        # any case and spacing: Iceberg reads the exact key, but a reader that folds it must not escape
        if key.strip().lower() in PATH_PROPERTIES and not root.contains(parse(value, f"{key} of {what}")):
            raise errors.Forbidden(f"{key[:100]} of {what} must lie below the location {location[:300]}")
    return root


# --- allowed locations ---------------------------------------------------------------------------

_WAREHOUSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ROOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def warehouse(catalog) -> Location | None:
    """HMS's warehouse (``hive.metastore.warehouse.dir``, asked once per service with
    ``get_config_value``), None when HMS does not tell."""
    service = catalog.service
    if service not in _WAREHOUSES:
        try:
            found = await catalog.client.call("get_config_value", name=WAREHOUSE_KEY, defaultValue="")
        except catalog.idl.ConfigValSecurityException:
            found = ""
        _WAREHOUSES[service] = stored(found)
    return _WAREHOUSES[service]


async def allowed_roots(catalog) -> tuple[Location, ...]:
    """The service's allowed locations: HMS's warehouse and ``options.allowed_locations``
    (worked out once per service)."""
    service = catalog.service
    if service not in _ROOTS:
        found = tuple(r for r in (await warehouse(catalog), *map(stored, service.allowed_locations)) if r is not None)
        for root in found:
            anchor(str(root))  # no symbolic link below them is followed (gateway.iceberg.local_paths.linked)
        _ROOTS[service] = found
    return _ROOTS[service]


def require_allowed(location: Location, roots: Iterable[Location], what: str, text: str) -> None:
    """Raise :class:`~errors.Forbidden` unless ``location`` (``text`` as given) lies in ``roots``."""
    if not any(root.contains(location) for root in roots):
        raise errors.Forbidden(f"{what} {text[:300]} is outside the service's allowed locations "
                               "(the warehouse and options.allowed_locations)")


def _url_permission(catalog, location: Location, what: str) -> None:
    """The url rule of every protocol (:meth:`gateway.policy.view.CatalogView.url_refusal`) as a 403."""
    refusal = catalog.view.url_refusal(str(location), what)
    if refusal is not None:
        raise errors.Forbidden(refusal)


# --- HMS listings for the overlap checks --------------------------------------------------------

async def _namespace_locations(catalog, skip: str) -> list[tuple[str, Location]]:
    """``(name, location)`` of every HMS database but ``skip`` (policy-hidden ones too: an
    overlap is one whoever can see it)."""
    names = [n for n in await catalog.client.get_all_databases() if n.lower() != skip.lower()]
    gate = asyncio.Semaphore(_DB_FETCHES)

    async def one(name: str):
        async with gate:
            try:
                return name, stored((await catalog.client.get_database(name)).locationUri)
            except catalog.idl.NoSuchObjectException:  # dropped meanwhile
                return name, None
    return [(n, loc) for n, loc in await asyncio.gather(*(one(n) for n in names)) if loc is not None]


async def _table_locations(catalog, db: str, skip: str | None = None) -> list[tuple[str, Location]]:
    """``(name, location)`` of the tables and views of ``db`` but ``skip``."""
    names = [n for n in await catalog.client.call("get_all_tables", db_name=db)
             if skip is None or n.lower() != skip.lower()]
    tables = await catalog.client.call("get_table_objects_by_name", dbname=db, tbl_names=names) if names else []
    out = []
    for table in tables:
        where = stored(table.sd.location if table.sd else None)
        if where is not None:
            out.append((table.tableName, where))
    return out


def _name(catalog, db: str, table: str | None = None) -> str:
    """``db[.table]`` when the user may see it, else a phrase that names nothing."""
    if not catalog.view.visible(db, table):
        return "a table of another namespace" if table else "another namespace"
    return f"{db}.{table}" if table else f"namespace {db}"


# --- the checks --------------------------------------------------------------------------------

async def check_namespace(catalog, db: str, location: str | None) -> Location | None:
    """Check a location a client names for namespace ``db`` (create, or ``location`` set on an
    existing one): its form, an allowed location, the url permission, no overlap with another
    namespace (nor with the tables of a namespace at an allowed location that holds it).
    ``location`` None: the one HMS will give a new namespace (``<warehouse>/<db>.db``) is
    checked for overlaps only. Returns it. Raises :class:`~errors.BadRequest`,
    :class:`~errors.Forbidden`."""
    roots = await allowed_roots(catalog)
    if location is None:
        root = await warehouse(catalog)
        if root is None:
            return None
        location = f"{root}/{db.lower()}.db"
        where = parse(location)
    else:
        where = parse(location, "namespace location")
        require_allowed(where, roots, "namespace location", location)
        _url_permission(catalog, where, f"namespace {db}")
    for other, at in await _namespace_locations(catalog, db):
        if not at.overlaps(where):
            continue
        if at.contains(where) and at != where and at in roots:  # a warehouse-root namespace
            for table, spot in await _table_locations(catalog, other):
                if spot.overlaps(where):
                    raise errors.Forbidden(f"namespace location {location[:300]} overlaps the location "
                                           f"of {_name(catalog, other, table)}")
            continue
        raise errors.Forbidden(f"namespace location {location[:300]} overlaps the location of "
                               f"{_name(catalog, other)}")
    return where


def default_location(database, name: str) -> str:
    """Where a table or view ``name`` of the HMS ``database`` goes unless told:
    ``<namespace location>/<name>``."""
    return f"{(database.locationUri or '').rstrip('/')}/{name}"


async def check_table(catalog, db: str, name: str, location: str, database, *, what: str = "table",
                      areas: Iterable[str] = (), placing: bool = True, siblings: bool = True) -> Location:
    """Check the location of table (or view) ``db.name`` in the HMS ``database`` before the
    gateway writes there: its form, an allowed location, strictly below the namespace's
    location (or one of ``areas``, register's prefixes), the url permission unless it is the
    default location, no overlap with a table or view of the namespace, nor with another
    namespace's location. ``placing`` False: the table is already there (a purge), so the url
    permission, which is about choosing a place, is not asked. ``siblings`` False: no overlap
    checks (no HMS listing). Returns it. Raises
    :class:`~errors.BadRequest`, :class:`~errors.Forbidden`."""
    where = parse(location, f"{what} location")
    roots = await allowed_roots(catalog)
    require_allowed(where, roots, f"{what} location", location)
    namespace = stored(database.locationUri)
    homes = [h for h in (namespace, *(stored(a) for a in areas)) if h is not None]
    if not any(home.contains(where) and home != where for home in homes):
        raise errors.Forbidden(f"{what} location {location[:300]} must lie below the location of namespace {db}")
    chosen = where != stored(default_location(database, name))
    if chosen and placing:
        _url_permission(catalog, where, f"{what} {db}.{name}")
    if not siblings:
        return where
    for other, at in await _table_locations(catalog, db, skip=name):
        if at.overlaps(where):
            raise errors.Forbidden(f"{what} location {location[:300]} overlaps the location of "
                                   f"{_name(catalog, db, other)}")
    # Another namespace can sit below this one only when this one is at an allowed location
    # (Hive's default) or the location is not the default: only then is the listing needed.
    if chosen or namespace in roots or namespace is None:
        for other, at in await _namespace_locations(catalog, db):
            if at.overlaps(where) and not (namespace is not None and at.contains(namespace)):
                raise errors.Forbidden(f"{what} location {location[:300]} overlaps the location of "
                                       f"{_name(catalog, other)}")
    return where


async def check_in_place(catalog, db: str, name: str, location: str, doing: str, *, what: str = "table",
                         siblings: bool = True, hint: str = "") -> Location:
    """Before the gateway acts with its own authority for the existing table (or view) ``db.name``
    at ``location`` (``doing``: "purge", "commit", "storage access"): the location must be one
    the gateway could have created it at (:func:`check_table` without the url permission, which
    is about choosing a place; ``siblings`` False: without the overlap checks and their HMS
    listings, for commits, which only add files). A table placed by other means (a Thrift
    ``create_table`` naming any metadata file, a table renamed into another namespace) cannot
    steer a purge, a commit's files, credentials or signatures into another table's files or
    outside the allowed locations. Returns the location. Raises :class:`~errors.Forbidden`
    (``hint`` ends its message)."""
    try:
        return await check_table(catalog, db, name, location, await catalog.database(db), what=what,
                                 areas=catalog.service.register_prefixes, placing=False, siblings=siblings)
    except errors.IcebergError as exc:
        log.warning("%s of %s %s.%s refused: %s", doing, what, db, name, exc)
        raise errors.Forbidden(f"{doing} of {db}.{name} refused: its location is not one the gateway "
                               f"could have placed the {what} at{hint}") from None


async def check_purge(catalog, db: str, name: str, metadata) -> None:
    """Before a purge (:func:`check_in_place`): purge deletes, with the gateway's authority,
    whatever the metadata references below its location. Raises :class:`~errors.Forbidden`."""
    await check_in_place(catalog, db, name, metadata.location, "purge", hint=" (drop it without purgeRequested)")


#: The updates that name a file of the table, and how to find what they added in the metadata.
_REFERENCES = (
    ("add-snapshot manifest-list", "snapshots", "manifest_list"),
    ("set-statistics statistics-path", "statistics", "statistics_path"),
    ("set-partition-statistics statistics-path", "partition_statistics", "statistics_path"),
)


def check_references(base, new, what: str = "table") -> None:
    """The files ``new`` (a table's metadata after updates) refers to that ``base`` (None: a
    new table) did not lie below ``new``'s location: each added snapshot's manifest list, each
    added statistics and partition-statistics file. Views refer to no file. Raises
    :class:`~errors.BadRequest` (a malformed path), :class:`~errors.Forbidden` (outside)."""
    for update, field, attribute in _REFERENCES:
        known = {getattr(item, attribute) for item in getattr(base, field, None) or ()}
        for item in getattr(new, field, None) or ():
            path = getattr(item, attribute)
            if path is None or path in known:
                continue
            parse(path, update)
            if not inside(path, new.location):
                raise errors.Forbidden(f"{update} {path[:300]} is not below the {what} location "
                                       f"{new.location[:300]}: a {what} refers only to files of its own")


async def check_moved(catalog, db: str, name: str, base, new, what: str = "table") -> None:
    """After a commit's updates, before its file is written: the files they add lie below the
    table (:func:`check_references`); when they move ``db.name`` (``set-location``), check the
    new location as :func:`check_table` does; else the table's location as
    :func:`check_in_place` does without the overlap checks (one ``get_database``).
    Raises :class:`~errors.Forbidden`, :class:`~errors.BadRequest`."""
    check_references(base, new, what)
    if new.location != base.location:
        await check_table(catalog, db, name, new.location, await catalog.database(db), what=what)
    else:
        await check_in_place(catalog, db, name, base.location, "commit", what=what, siblings=False)


async def check_delegated(catalog, db: str, name: str, location: str, *, remember: float = 0.0) -> None:
    """The location of table ``db.name`` vended credentials or signatures are for: not a bucket
    root, and one the gateway could have created the table at (:func:`check_in_place`, with
    the overlap checks: credentials for a location over another table's would read its files).
    ``remember`` > 0: a location found fine is not checked again for that many seconds
    (:func:`_placed`). Raises :class:`~errors.Forbidden`."""
    where = stored(location)
    if where is None or where.path == "/":
        raise errors.Forbidden("the table's location is not one the gateway delegates access to")
    await _placed(catalog, db, name, location, "storage access", remember)


#: Seconds a table found in place by :func:`check_identity` is not listed again.
IDENTITY_VERDICT_SECONDS = 60.0
_IDENTITY = " (the storage-identity rule)"


async def check_identity(catalog, db: str, name: str, hive, *, remember: float = IDENTITY_VERDICT_SECONDS) -> None:
    """The storage-identity rule: the Iceberg table ``db.name`` (``hive``, its HMS ``Table``) is
    served only when (1) its metadata file (``metadata_location``) lies strictly below its own
    location (``sd.location``); (2) that location lies strictly below its namespace's location
    (or a register prefix), or else inside the service's allowed locations (a table renamed
    out of its namespace keeps its location); and (3) it overlaps no other table's location nor
    another namespace's (Polaris's overlap check). Else a table made by other means (a Thrift
    ``create_table`` naming another table's ``metadata_location``, or its location) would be
    an alias of another table's files, read, planned, vended and signed through its own name.

    (2) and (3) are :func:`check_in_place`'s checks for a table inside its namespace; for one
    outside it, the tables of its own namespace and of every namespace whose location holds it
    are listed (a table placed outside every namespace is compared with its own namespace's
    only: the gateway never places one there).

    Cost: (1) is checked on every call without HMS; (2) and (3) list tables (and perhaps the
    namespaces), so a verdict found fine is kept ``remember`` seconds per table and location
    (:func:`_placed`): a location moved is a new key, checked at once; a refusal is never
    kept. What a kept verdict can miss for that long is a namespace moved, or another table
    placed over this one, through Thrift.

    Raises :class:`~errors.Forbidden` naming the rule, never the other table."""
    location = hive.sd.location if hive.sd else None
    file = (hive.parameters or {}).get("metadata_location")
    where, metadata = stored(location), stored(file)
    if where is None or metadata is None or where.path == "/" or where == metadata or not where.contains(metadata):
        log.warning("table %s.%s refused: its metadata file %s is not below its location %s", db, name,
                    (file or "")[:300], (location or "")[:300])
        raise errors.Forbidden(f"serving of {db}.{name} refused: its metadata file does not lie below its own "
                               f"location{_IDENTITY}")
    await _placed(catalog, db, name, location, "serving", remember, hint=_IDENTITY, moved=_apart)


async def _apart(catalog, db: str, name: str, where: Location) -> None:
    """(2) and (3) of :func:`check_identity` for a table outside its namespace's location."""
    refused = errors.Forbidden(f"serving of {db}.{name} refused: its location lies outside its namespace and "
                               f"overlaps another table or namespace, or the allowed locations{_IDENTITY}")
    if not any(root.contains(where) for root in await allowed_roots(catalog)):
        raise refused
    holders = [db]
    for other, at in await _namespace_locations(catalog, db):
        if where.contains(at):  # over a whole namespace
            raise refused
        if at.contains(where):
            holders.append(other)
    for holder in holders:
        for _, at in await _table_locations(catalog, holder, skip=name if holder == db else None):
            if at.overlaps(where):
                log.warning("table %s.%s refused: its location %s overlaps a table of %s", db, name, where, holder)
                raise refused


async def _placed(catalog, db: str, name: str, location: str, doing: str, remember: float, hint: str = "",
                  moved=None) -> None:
    """:func:`check_in_place` (with the overlap checks) of ``db.name`` at ``location``, a verdict
    found fine kept ``remember`` seconds (0: not kept) per service, table and location: the
    signer checks each S3 request and every storage route the storage identity, and a table
    found in place stays so unless its namespace moves or a table is placed over it through
    Thrift. ``moved``: awaited instead, ``(catalog, db, name, location)``, for a location
    outside the table's namespace (and its register prefixes)."""
    verdicts = _PLACED.setdefault(catalog.service, {})
    key = (db.lower(), name.lower(), location, moved is None)
    if remember and time.monotonic() - verdicts.get(key, -math.inf) < remember:
        return
    where = stored(location)
    homes = [] if moved is None else [h for h in (stored((await catalog.database(db)).locationUri),
                                                  *map(stored, catalog.service.register_prefixes)) if h is not None]
    if moved is not None and where is not None and not any(h.contains(where) and h != where for h in homes):
        await moved(catalog, db, name, where)
    else:
        await check_in_place(catalog, db, name, location, doing, hint=hint)
    if remember:
        if len(verdicts) > 10_000:  # bounded: one entry per table and rule
            verdicts.clear()
        verdicts[key] = time.monotonic()


#: service → {(db, table, location): when it was found in place (time.monotonic())}
_PLACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
