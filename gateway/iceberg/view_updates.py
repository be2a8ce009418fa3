"""View commits' updates and requirements onto PyIceberg's ``ViewMetadata`` (PyIceberg 0.12
defines view metadata but no view updates).

The Iceberg REST spec (apache/iceberg ``open-api/rest-catalog-open-api.yaml``,
``components/schemas``: ``CommitViewRequest``, ``ViewUpdate``, ``ViewRequirement``) defines
the updates ``assign-uuid``, ``upgrade-format-version``, ``add-schema``, ``set-location``,
``set-properties``, ``remove-properties``, ``add-view-version``, ``set-current-view-version``
(``-1``: the version last added by this commit) and the requirement ``assert-view-uuid``. They
are applied as Java's ``ViewMetadata.Builder`` applies them (what Iceberg's REST server does,
``CatalogHandlers.updateView``):

* ``add-schema`` reuses an equal schema's id (fields and identifier fields, ignoring the id),
  else takes the highest id + 1; ``add-view-version`` reuses an equal version's id (summary,
  representations, default catalog and namespace, schema id), else the highest id + 1;
  ``schema-id`` ``-1`` is the schema last added by this commit; one SQL per dialect;
* building: a location and a version are required; the current version must not drop a SQL
  dialect of the previous one (unless ``replace.drop-dialect.allowed``); versions beyond
  ``version.history.num-entries`` (10) are expired, oldest first, keeping the current one and
  those added now; the ``version-log`` gets an entry when the current version changes.

:func:`apply` raises :class:`InvalidViewUpdate` (the client's mistake: 400) or
:class:`RequirementFailed` (a stale base: 409); :func:`new_view` builds a created view's metadata.
Unknown update actions or requirement types do not parse (:class:`CommitViewRequest`).
"""

from __future__ import annotations

import time
import uuid as uuids
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pyiceberg.schema import Schema
from pyiceberg.table.update import (
    AddSchemaUpdate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    UpgradeFormatVersionUpdate,
)
from pyiceberg.view.metadata import ViewHistoryEntry, ViewMetadata, ViewVersion

from gateway.iceberg.bodies import TableIdentifier

__all__ = ["CommitViewRequest", "CreateViewRequest", "InvalidViewUpdate", "RequirementFailed",
           "apply", "new_view"]

LAST_ADDED = -1
FORMAT_VERSION = 1  # Java's ViewMetadata.SUPPORTED_VIEW_FORMAT_VERSION
HISTORY_SIZE, HISTORY_SIZE_DEFAULT = "version.history.num-entries", 10
DROP_DIALECT = "replace.drop-dialect.allowed"
APPEND_DIALECT = "replace.append-dialect.allowed"


class InvalidViewUpdate(ValueError):
    """An update that cannot be applied (unknown schema or version, a dropped dialect...)."""


class RequirementFailed(Exception):
    """A requirement the base metadata does not meet."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, arbitrary_types_allowed=True)


# The updates a view shares with tables are PyIceberg's models; the two of views alone follow.
AssignUUID, UpgradeFormatVersion, AddSchema = AssignUUIDUpdate, UpgradeFormatVersionUpdate, AddSchemaUpdate
SetLocation, SetProperties, RemoveProperties = SetLocationUpdate, SetPropertiesUpdate, RemovePropertiesUpdate


class AddViewVersion(_Spec):
    action: Literal["add-view-version"]
    view_version: ViewVersion = Field(alias="view-version")


class SetCurrentViewVersion(_Spec):
    action: Literal["set-current-view-version"]
    view_version_id: int = Field(alias="view-version-id")


ViewUpdate = Annotated[AssignUUID | UpgradeFormatVersion | AddSchema | SetLocation | SetProperties
                       | RemoveProperties | AddViewVersion | SetCurrentViewVersion,
                       Field(discriminator="action")]


class AssertViewUUID(_Spec):
    """The spec's only ``ViewRequirement``: the view's UUID is ``uuid``."""

    type: Literal["assert-view-uuid"]
    uuid: str

    def validate_on(self, base: ViewMetadata) -> None:
        if self.uuid.lower() != base.view_uuid.lower():
            raise RequirementFailed(f"Requirement failed: view UUID does not match: expected "
                                    f"{base.view_uuid} != {self.uuid}")


class CommitViewRequest(_Spec):
    """The spec's ``CommitViewRequest``: optional ``identifier``, ``requirements``, ``updates``."""

    identifier: TableIdentifier | None = None  # the spec's TableIdentifier
    requirements: list[AssertViewUUID] = Field(default_factory=list)
    updates: list[ViewUpdate]


class CreateViewRequest(_Spec):
    """The spec's ``CreateViewRequest``: ``name``, ``location``, ``schema``, ``view-version``,
    ``properties``."""

    name: str
    location: str | None = None
    schema_: Schema = Field(alias="schema")
    view_version: ViewVersion = Field(alias="view-version")
    properties: dict[str, str] = Field(default_factory=dict)


class _Builder:
    """Java's ``ViewMetadata.Builder``, on PyIceberg's models (which are frozen)."""

    def __init__(self, base: ViewMetadata | None):
        self.uuid = base.view_uuid if base else None
        self.format_version = base.format_version if base else FORMAT_VERSION
        self.location = base.location if base else None
        self.schemas: list[Schema] = list(base.schemas) if base else []
        self.versions: list[ViewVersion] = list(base.versions) if base else []
        self.history: list[ViewHistoryEntry] = list(base.version_log) if base else []
        self.properties = dict(base.properties) if base else {}
        self.current_version_id = base.current_version_id if base else None
        self.previous = _version_of(base.versions, base.current_version_id) if base else None
        self.changes = 0
        self.added_versions: set[int] = set()
        self.last_added_version: int | None = None
        self.last_added_schema: int | None = None
        self.history_entry: ViewHistoryEntry | None = None

    def assign_uuid(self, value: str) -> None:
        if self.uuid is not None and value != self.uuid:
            raise InvalidViewUpdate("Cannot reassign uuid")
        if value != self.uuid:
            self.uuid = value
            self.changes += 1

    def upgrade_format_version(self, version: int) -> None:
        if version < self.format_version:
            raise InvalidViewUpdate(f"Cannot downgrade v{self.format_version} view to v{version}")
        if version > FORMAT_VERSION:
            raise InvalidViewUpdate(f"Unsupported format version: {version}")
        if version != self.format_version:
            self.format_version = version
            self.changes += 1

    def set_location(self, location: str) -> None:
        if location != self.location:
            self.location = location
            self.changes += 1

    def set_properties(self, updates: dict[str, str]) -> None:
        if updates:
            self.properties.update(updates)
            self.changes += 1

    def remove_properties(self, removals: list[str]) -> None:
        if removals:
            for key in removals:
                self.properties.pop(key, None)
            self.changes += 1

    def add_schema(self, schema: Schema) -> int:
        new_id = 0
        for known in self.schemas:
            if known == schema:  # PyIceberg's equality ignores the id, as Java's sameSchema
                return known.schema_id
            new_id = max(new_id, known.schema_id + 1)
        if schema.schema_id != new_id:
            schema = Schema(*schema.fields, schema_id=new_id, identifier_field_ids=schema.identifier_field_ids)
        self.schemas.append(schema)
        self.last_added_schema = new_id
        self.changes += 1
        return new_id

    def add_version(self, version: ViewVersion) -> int:
        new_id = version.version_id
        for known in self.versions:
            if _same_version(known, version):
                new_id = known.version_id
                break
            if known.version_id >= new_id:
                new_id = known.version_id + 1
        if any(v.version_id == new_id for v in self.versions):
            self.last_added_version = new_id if new_id in self.added_versions else None
            return new_id
        schema_id = version.schema_id
        if schema_id == LAST_ADDED:
            if self.last_added_schema is None:
                raise InvalidViewUpdate("Cannot set last added schema: no schema has been added")
            schema_id = self.last_added_schema
        if not any(s.schema_id == schema_id for s in self.schemas):
            raise InvalidViewUpdate(f"Cannot add version with unknown schema: {schema_id}")
        dialects: set[str] = set()
        for representation in version.representations:
            dialect = representation.root.dialect.lower()
            if dialect in dialects:
                raise InvalidViewUpdate(f"Invalid view version: Cannot add multiple queries for dialect {dialect}")
            dialects.add(dialect)
        self.versions.append(version.model_copy(update={"version_id": new_id, "schema_id": schema_id}))
        self.added_versions.add(new_id)
        self.last_added_version = new_id
        self.changes += 1
        return new_id

    def set_current_version(self, version_id: int) -> None:
        if version_id == LAST_ADDED:
            if self.last_added_version is None:
                raise InvalidViewUpdate("Cannot set last version id: no current version id has been set")
            version_id = self.last_added_version
        if version_id == self.current_version_id:
            return
        version = _version_of(self.versions, version_id)
        if version is None:
            raise InvalidViewUpdate(f"Cannot set current version to unknown version: {version_id}")
        self.current_version_id = version_id
        self.changes += 1
        # a version added now keeps its own timestamp; one made current again is logged now
        when = version.timestamp_ms if version_id in self.added_versions else int(time.time() * 1000)
        self.history_entry = ViewHistoryEntry(**{"timestamp-ms": when, "version-id": version_id})

    def build(self) -> ViewMetadata:
        if self.location is None:
            raise InvalidViewUpdate("Invalid location: null")
        if not self.versions:
            raise InvalidViewUpdate("Invalid view: no versions were added")
        current = _version_of(self.versions, self.current_version_id)
        if current is None:
            raise InvalidViewUpdate(f"Cannot find current version {self.current_version_id} in view versions")
        history = self.history + ([self.history_entry] if self.history_entry else [])
        drop_allowed = _flag(self.properties, DROP_DIALECT)
        if drop_allowed and _flag(self.properties, APPEND_DIALECT):
            raise InvalidViewUpdate(f"Cannot set both {DROP_DIALECT} and {APPEND_DIALECT} to true")
        if self.previous is not None and not drop_allowed:
            lost = _dialects(self.previous) - _dialects(current)
            if lost:
                raise InvalidViewUpdate(f"Cannot replace view due to loss of view dialects ({DROP_DIALECT}=false): "
                                        f"{', '.join(sorted(lost))}")
        size = _history_size(self.properties)
        keep = max(len(self.added_versions | {current.version_id}), size)
        versions = self.versions
        if len(versions) > keep:
            newest = sorted((v for v in versions if v.version_id != current.version_id),
                            key=lambda v: v.version_id, reverse=True)
            versions = [current, *newest[:keep - 1]]
            kept = {v.version_id for v in versions}
            retained: list[ViewHistoryEntry] = []
            for entry in history:  # the log restarts after any version no longer kept
                retained = [*retained, entry] if entry.version_id in kept else []
            history = retained
        try:
            return ViewMetadata(**{
                "view-uuid": self.uuid or str(uuids.uuid4()), "format-version": self.format_version,
                "location": self.location, "schemas": self.schemas, "current-version-id": current.version_id,
                "versions": versions, "version-log": history, "properties": self.properties,
            })
        except ValidationError as exc:
            raise InvalidViewUpdate(f"invalid view metadata: {exc.errors()[0]['msg']}") from None


def _version_of(versions: list[ViewVersion], version_id: int | None) -> ViewVersion | None:
    return next((v for v in versions if v.version_id == version_id), None)


def _same_version(one: ViewVersion, two: ViewVersion) -> bool:
    """Java's ``sameViewVersion``: alike but for id, timestamp and operation."""
    return (one.summary == two.summary and one.representations == two.representations
            and one.default_catalog == two.default_catalog and one.default_namespace == two.default_namespace
            and one.schema_id == two.schema_id)


def _dialects(version: ViewVersion) -> set[str]:
    return {r.root.dialect.lower() for r in version.representations}


def _flag(properties: dict[str, str], key: str) -> bool:
    return properties.get(key, "false").strip().lower() == "true"


def _history_size(properties: dict[str, str]) -> int:
    raw = properties.get(HISTORY_SIZE, str(HISTORY_SIZE_DEFAULT))
    try:
        size = int(raw)
    except ValueError:
        raise InvalidViewUpdate(f"{HISTORY_SIZE} must be an integer, got {raw[:40]!r}") from None
    if size <= 0:
        raise InvalidViewUpdate(f"{HISTORY_SIZE} must be positive but was {size}")
    return size


#: Each ``ViewUpdate`` of the spec → how the builder applies it.
_APPLY: dict[type, Callable[[_Builder, Any], object]] = {
    AssignUUID: lambda b, u: b.assign_uuid(str(u.uuid)),
    UpgradeFormatVersion: lambda b, u: b.upgrade_format_version(u.format_version),
    AddSchema: lambda b, u: b.add_schema(u.schema_),
    SetLocation: lambda b, u: b.set_location(u.location),
    SetProperties: lambda b, u: b.set_properties(u.updates),
    RemoveProperties: lambda b, u: b.remove_properties(u.removals),
    AddViewVersion: lambda b, u: b.add_version(u.view_version),
    SetCurrentViewVersion: lambda b, u: b.set_current_version(u.view_version_id),
}


def _apply_one(builder: _Builder, update) -> None:
    step = _APPLY.get(type(update))
    if step is None:  # the request model admits no other; a new one must be added above
        raise InvalidViewUpdate(f"unsupported view update {type(update).__name__}")
    step(builder, update)


def apply(base: ViewMetadata, requirements: list[AssertViewUUID], updates: list) -> ViewMetadata | None:
    """``base`` after ``updates``, the ``requirements`` checked first; None when the updates
    change nothing (Java's no-op commit). Raises :class:`RequirementFailed`,
    :class:`InvalidViewUpdate`."""
    for requirement in requirements:
        requirement.validate_on(base)
    builder = _Builder(base)
    for update in updates:
        _apply_one(builder, update)
    if not builder.changes:
        return None
    return builder.build()


def new_view(request: CreateViewRequest, location: str) -> ViewMetadata:
    """A created view's metadata, as Java's view builder makes it: a new UUID, the schema (id 0),
    ``location``, the properties, and the request's version as version 1 (its ``schema-id``
    the schema's), current. Raises :class:`InvalidViewUpdate`."""
    builder = _Builder(None)
    builder.assign_uuid(str(uuids.uuid4()))
    builder.set_properties(request.properties)
    builder.set_location(location)
    schema_id = builder.add_schema(request.schema_)
    version = request.view_version.model_copy(update={"version_id": 1, "schema_id": schema_id})
    builder.set_current_version(builder.add_version(version))
    return builder.build()
