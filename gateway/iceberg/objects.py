"""Tables and views as one type of catalog object: :class:`CatalogObject` says what makes an HMS
table one or the other, and :data:`TABLE` and :data:`VIEW` are its two instances. Java's
``HiveCatalog`` stores both alike (``HiveTableOperations``, ``HiveViewOperations``): an HMS
table whose ``table_type`` parameter names the type (``ICEBERG``; ``ICEBERG-VIEW`` on a
``VIRTUAL_VIEW``) and whose ``metadata_location`` is the current metadata file
(:mod:`gateway.iceberg.hive_tables`). What differs is described here, once:

* the metadata model: PyIceberg's ``TableMetadata`` or ``ViewMetadata``, read and written by
  :class:`~gateway.iceberg.files.MetadataFiles`;
* the not-found error: ``NoSuchTableException`` or ``NoSuchViewException`` (404);
* the update applier: PyIceberg's ``update_table_metadata`` with the requirements checked first,
  or :func:`gateway.iceberg.view_updates.apply`;
* the load result: PyIceberg's ``TableResponse`` (``LoadTableResult``) or ``ViewResponse``
  (``LoadViewResult``).

The one lookup, drop and policy check of both are :class:`~gateway.iceberg.catalog.Catalog`'s,
the one commit under HMS's lock :func:`gateway.iceberg.commit.commit_object`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_serializer
from pyiceberg.catalog.rest import TableResponse, ViewResponse
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import update_table_metadata

from gateway.iceberg import errors
from gateway.iceberg.bodies import CLIENT_FAULTS, ListTables, ListViews
from gateway.iceberg.files import MetadataFiles, next_metadata_location, next_view_metadata_location
from gateway.iceberg.hive_tables import (
    committed_table, committed_view_table, is_iceberg, is_iceberg_view, new_table, new_view_table,
)
from gateway.iceberg.locations import check_properties
from gateway.iceberg.view_updates import RequirementFailed, apply as apply_view_updates

__all__ = ["TABLE", "VIEW", "CatalogObject", "LoadTableResult", "apply_updates"]


class LoadTableResult(TableResponse):
    """PyIceberg's ``TableResponse``, the spec's ``LoadTableResult``, written as the spec's
    examples write it: ``metadata-location`` left out for a staged table (it has none yet),
    ``storage-credentials`` left out when there are none; with the spec's ``read-restrictions``
    (which PyIceberg 0.12 lacks: a JSON object, :mod:`gateway.iceberg.trusted`), left out when
    nothing restricts the read."""

    read_restrictions: dict | None = Field(default=None, alias="read-restrictions")

    @model_serializer(mode="wrap")
    def _without_empty_credentials(self, handler):
        written = handler(self)
        for key in ("storage-credentials", "read-restrictions"):
            if not written.get(key):
                written.pop(key, None)
        return written


def apply_updates(request, base_location: str, base, subject: str = ""):
    """The table metadata after ``request``'s updates on ``base`` (PyIceberg's
    ``update_table_metadata``), its requirements checked first (``subject``, a table's name,
    prefixes the messages of a multi-table commit). Raises :class:`~errors.CommitFailed` (a
    requirement failed), :class:`~errors.BadRequest` (an update PyIceberg refuses, a property
    or path the gateway refuses)."""
    try:
        for requirement in request.requirements:
            requirement.validate(base)
        new = update_table_metadata(base, request.updates, metadata_location=base_location)
    except CommitFailedException as exc:
        raise errors.CommitFailed(f"{subject}: {str(exc)[:1000]}" if subject else str(exc)[:1000]) from None
    except CLIENT_FAULTS as exc:  # PyIceberg's checks of an update
        what = f"invalid update of {subject}" if subject else "invalid update"
        raise errors.BadRequest(f"{what}: {str(exc)[:500]}") from None
    check_properties(new.location, new.properties, subject or "the table")  # no code, paths confined
    return new


def _table_commit(request, base_location: str, base, subject: str):
    new = apply_updates(request, base_location, base)
    return None if new == base else new


def _view_commit(request, base_location: str, base, subject: str):
    try:
        new = apply_view_updates(base, request.requirements, request.updates)
        if new is not None:
            check_properties(new.location, new.properties, subject)
    except RequirementFailed as exc:
        raise errors.CommitFailed(str(exc)[:1000]) from None
    except CLIENT_FAULTS as exc:
        raise errors.BadRequest(f"invalid view update: {str(exc)[:500]}") from None
    return new


def _next_view_location(metadata, base_location: str | None) -> str:
    try:
        return next_view_metadata_location(metadata, base_location)
    except ValueError as exc:  # a compression codec the view's properties name
        raise errors.BadRequest(f"invalid view update: {str(exc)[:500]}") from None


@dataclass(frozen=True)
class CatalogObject:
    """What one type of catalog object is (see the module docstring)."""

    #: ``table`` or ``view``, in messages and in what the policy checks are about.
    noun: str
    #: The object type's 404.
    missing: type[errors.IcebergError]
    #: Whether an HMS ``Table`` is of this type (its ``metadata_location`` aside), of the other.
    matches: Callable[[Any], bool]
    matches_other: Callable[[Any], bool]
    other: str
    #: The message of an HMS table that is neither (fields ``db``, ``name``, ``tableType``, ``table_type``).
    neither: str
    #: The :class:`~gateway.iceberg.files.MetadataFiles` methods that read and write its metadata
    #: files (unbound: called with the request's files); the name of the next one after a commit
    #: (:mod:`gateway.iceberg.files`; raises :class:`~errors.BadRequest` for a name the
    #: properties make impossible).
    reader: Callable[[MetadataFiles, str, bool], Awaitable[Any]]
    writer: Callable[[MetadataFiles, Any, str], Awaitable[None]]
    next_location: Callable[[Any, str | None], str]
    #: ``(request, base location, base, subject) → new metadata``, None when nothing changes;
    #: raises :class:`~errors.CommitFailed` (a requirement) or :class:`~errors.BadRequest`.
    apply: Callable[[Any, str, Any, str], Any]
    #: The HMS ``Table`` of a new object, and the one read under the lock after a commit
    #: (:mod:`gateway.iceberg.hive_tables`).
    created: Callable[..., Any]
    committed: Callable[..., Any]
    #: The load result's model; the listing's operationId (its paging tokens' scope) and model.
    result_model: type[TableResponse] | type[ViewResponse]
    list_operation: str
    list_model: type[ListTables] | type[ListViews]

    @property
    def label(self) -> str:
        """What messages put before ``db.name``: ``""`` for a table, ``"view "`` for a view."""
        return "" if self is TABLE else f"{self.noun} "

    def subject(self, db: str, name: str) -> str:
        """Whose properties a commit's messages name."""
        return "the table" if self is TABLE else f"{self.noun} {db}.{name}"

    def not_found(self, db: str, name: str) -> errors.IcebergError:
        return self.missing(f"{self.noun.capitalize()} does not exist: {db}.{name}")

    def result(self, location: str | None, metadata, config: dict | None = None,
               credentials: list | None = None) -> TableResponse | ViewResponse:
        """The load result: ``metadata-location`` (None: a staged table's, left out),
        ``metadata``, ``config``, and for tables ``storage-credentials``
        (:mod:`gateway.iceberg.delegation`)."""
        fields: dict[str, Any] = {"metadata-location": location, "metadata": metadata, "config": config or {}}
        if credentials:
            fields["storage-credentials"] = credentials
        return self.result_model(**fields)

    async def read(self, files: MetadataFiles, location: str, fresh: bool = False):
        """The metadata file at ``location`` (``fresh``: read now, not taken from memory)."""
        return await self.reader(files, location, fresh)

    async def write(self, files: MetadataFiles, metadata, location: str) -> None:
        await self.writer(files, metadata, location)


TABLE = CatalogObject(
    noun="table", missing=errors.NoSuchTable, matches=is_iceberg, matches_other=is_iceberg_view, other="view",
    neither="Table {db}.{name} is not an Iceberg table (table_type {table_type!r})",
    reader=MetadataFiles.read, writer=MetadataFiles.write, next_location=next_metadata_location,
    apply=_table_commit, created=new_table, committed=committed_table, result_model=LoadTableResult,
    list_operation="listTables", list_model=ListTables,
)
VIEW = CatalogObject(
    noun="view", missing=errors.NoSuchView, matches=is_iceberg_view, matches_other=is_iceberg, other="table",
    neither="{db}.{name} is not an Iceberg view (tableType {tableType!r}, table_type {table_type!r})",
    reader=MetadataFiles.read_view, writer=MetadataFiles.write_view, next_location=_next_view_location,
    apply=_view_commit, created=new_view_table, committed=committed_view_table, result_model=ViewResponse,
    list_operation="listViews", list_model=ListViews,
)
