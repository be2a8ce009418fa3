"""What every Iceberg REST operation shares for one request: the caller's HMS client (calls as
the authenticated user, ``set_ugi``), the caller's catalog view (policy), metadata files, the
service's state (:class:`~gateway.iceberg.service_state.ServiceState`); and the lookups that turn HMS's answers and the policy into the spec's
errors.

Policy (Ranger's Hive model, :class:`~gateway.policy.view.CatalogView`): what the user cannot
see at all is 404, as if it did not exist; what the user sees but may not do is 403.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from gateway.iceberg import errors
from gateway.iceberg.bodies import file_fault
from gateway.iceberg.files import MetadataFiles
from gateway.iceberg.hive_tables import is_iceberg_view, metadata_location
from gateway.iceberg.objects import TABLE, CatalogObject
from gateway.iceberg.service_state import ServiceState
from gateway.policy.view import CatalogView
from gateway.upstream.errors import UpstreamError

log = logging.getLogger(__name__)


@dataclass
class Catalog:
    """One request's catalog: ``client`` a :class:`~gateway.upstream.metastore.MetastoreClient`
    acting as ``user``, ``view`` the user's policy view, ``files`` metadata file IO, ``service``
    the serving service's state (options, storage, vending, names)."""

    client: Any
    view: CatalogView
    files: MetadataFiles
    service: ServiceState
    user: str
    #: (database, table) the request named, for the audit line.
    objects: tuple[str | None, str | None] = field(default=(None, None))
    #: The policy's decision on the request for the audit line (``allowed``, ``denied``; None:
    #: none asked).
    decision: str | None = None
    #: (db, name, noun) → the HMS table :meth:`judged` read.
    _judged: dict = field(default_factory=dict, repr=False)

    @property
    def idl(self):
        return self.client.idl

    def named(self, db: str, table: str | None = None) -> None:
        self.objects = (db, table)

    # --- policy -----------------------------------------------------------------------------

    def require(self, access: str, db: str, table: str | None = None, object_type: CatalogObject = TABLE,
                *, seen: bool = True) -> None:
        """Raise 404 when the user cannot see the object (the namespace's, or ``object_type``'s: a view
        is a table resource to the policy), 403 when ``access`` is denied. ``seen`` False: an
        object the request creates, which need not be visible (403 only). Called by the one
        enforcer of the route rows' declared access (:mod:`gateway.iceberg.access`)."""
        self.decision = "denied"
        if seen and not self.view.visible(db, table):
            if table is None:
                raise errors.NoSuchNamespace(f"Namespace does not exist: {db}")
            raise object_type.not_found(db, table)
        if access and not self.view.may(access, db, table):
            what = db if table is None else f"{db}.{table}"
            raise errors.Forbidden(f"{self.user} may not {access} {what}")
        self.decision = "allowed"

    async def judged(self, db: str, name: str, object_type: CatalogObject = TABLE):
        """The HMS ``Table`` of ``db.name`` as the route's rules read and judged it for this
        request (:mod:`gateway.iceberg.access`: row filter, storage identity), else looked up
        now (:meth:`lookup`, which names the errors raised). One read per request; a commit
        reads the table again under the lock."""
        key = (db, name, object_type.noun)
        found = self._judged.get(key)
        if found is None:
            found = self._judged[key] = await self.lookup(db, name, object_type)
        return found

    def visible_databases(self, names: list[str]) -> list[str]:
        """The databases of ``names`` the user sees (the view counts the hidden ones)."""
        self.decision = "allowed"
        return self.view.visible_databases(names)

    # --- HMS lookups ------------------------------------------------------------------------

    async def database(self, db: str):
        """The HMS ``Database``. Raises :class:`~errors.NoSuchNamespace`."""
        try:
            return await self.client.get_database(db)
        except self.idl.NoSuchObjectException:
            raise errors.NoSuchNamespace(f"Namespace does not exist: {db}") from None

    async def absent(self, db: str, table: str,
                     conflict: type[errors.IcebergError] = errors.AlreadyExists) -> None:
        """Return when HMS has no table ``db.table`` (any type). Raises ``conflict`` (Iceberg's
        409, naming a view as one) when it has one, visible to the user or not: the name
        collision a user who may create in ``db`` learns (docs/security.md)."""
        try:
            found = await self.client.get_table(db, table)
        except self.idl.NoSuchObjectException:
            return
        raise conflict(f"{'View' if is_iceberg_view(found) else 'Table'} already exists: {db}.{table}")

    async def rename(self, found, dst_db: str, dst: str, object_type: CatalogObject = TABLE) -> None:
        """Rename ``found`` (the HMS ``Table`` of a table or view, the policy on both ends
        checked) to ``dst_db.dst``, as HMS's ``alter_table`` does for tables and views alike.
        Raises :class:`~errors.NoSuchNamespace` (the target's), :class:`~errors.AlreadyExists`
        (a table or view has the name, or HMS refused)."""
        src_db, src = found.dbName, found.tableName
        await self.database(dst_db)
        await self.absent(dst_db, dst)
        found.dbName, found.tableName = dst_db, dst
        idl = self.idl
        try:
            await self.client.call("alter_table", dbname=src_db, tbl_name=src, new_tbl=found)
        except (idl.InvalidOperationException, idl.MetaException) as exc:
            raise errors.AlreadyExists(errors.hms_refused(
                exc, f"renaming {object_type.label}{src_db}.{src} to {dst_db}.{dst}")) from None

    async def lookup(self, db: str, name: str, object_type: CatalogObject = TABLE):
        """The HMS ``Table`` of the Iceberg table (or view, ``object_type``) ``db.name``. Raises the
        object type's 404 (also for an object of the other type or an HMS table of neither, saying so),
        :class:`~errors.NoSuchNamespace`."""
        try:
            found = await self.client.get_table(db, name)
        except self.idl.NoSuchObjectException:
            await self.database(db)  # 404 for the namespace when that is what is missing
            raise object_type.not_found(db, name) from None
        if object_type.matches(found) and metadata_location(found) is not None:
            return found
        if object_type.matches_other(found):
            raise object_type.missing(f"{db}.{name} is an Iceberg {object_type.other}, not a {object_type.noun}")
        raise object_type.missing(object_type.neither.format(db=db, name=name, tableType=found.tableType,
                                               table_type=(found.parameters or {}).get("table_type")))

    async def metadata(self, hive_table, object_type: CatalogObject = TABLE) -> tuple[str, Any]:
        """``(metadata_location, metadata)`` of an Iceberg HMS table or view (``object_type``: PyIceberg's
        ``TableMetadata`` or ``ViewMetadata``). Raises :class:`~errors.ServiceFailure` when the
        file cannot be read."""
        location = metadata_location(hive_table)
        assert location is not None
        try:
            return location, await object_type.read(self.files, location)
        except Exception as exc:  # FileIO and PyIceberg raise many kinds; none is the client's fault
            what = f"{object_type.label}{hive_table.dbName}.{hive_table.tableName}"
            log.warning("cannot read the metadata file %s of %s: %s", location, what, file_fault(exc))
            raise errors.ServiceFailure(f"cannot read the metadata file of {what}") from None

    async def drop(self, db: str, name: str, object_type: CatalogObject = TABLE) -> None:
        """HMS's ``drop_table`` of ``db.name`` (its files stay). Raises the object type's 404."""
        try:
            await self.client.call("drop_table", dbname=db, name=name, deleteData=False)
        except self.idl.NoSuchObjectException:
            raise object_type.not_found(db, name) from None

    async def create(self, db: str, name: str, table, location: str | None, *, what: str = "Table",
                     conflict: type[errors.IcebergError] = errors.AlreadyExists, unknown=None) -> None:
        """HMS's ``create_table`` of ``table`` (an HMS ``Table``) whose first metadata file, just
        written by the gateway, is at ``location`` (None: a file the gateway did not write, as
        for ``register``, never deleted). The file is deleted only when HMS surely created
        nothing: a name taken raises ``conflict`` ("<what> already exists", 409), a table HMS
        refuses :class:`~errors.BadRequest`. When the outcome is unknown (an ``UpstreamError``)
        the file stays: ``await unknown(exc)`` settles it, or the error is raised."""
        idl = self.idl
        try:
            await self.client.call("create_table", tbl=table)
        except UpstreamError as exc:
            if unknown is None:
                raise
            await unknown(exc)
        except idl.AlreadyExistsException:
            if location is not None:
                await self.files.delete(location)
            raise conflict(f"{what} already exists: {db}.{name}") from None
        except (idl.InvalidObjectException, idl.MetaException, idl.NoSuchObjectException) as exc:
            if location is not None:
                await self.files.delete(location)
            raise errors.BadRequest(errors.hms_refused(exc, f"{what.lower()} {db}.{name}")) from None


@dataclass(frozen=True)
class Reply:
    """An operation's success: ``status`` (200, 204, 304), the JSON ``body`` (None: empty),
    extra ``headers`` (``ETag``)."""

    status: int = 200
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
