"""Request bodies and query parameters of the Iceberg REST Catalog, read into PyIceberg's models
where PyIceberg has them (``CreateTableRequest``, the ``TableRequirement`` and ``TableUpdate``
unions) and into the spec's shapes otherwise (``CreateNamespaceRequest``,
``UpdateNamespacePropertiesRequest``, ``RenameTableRequest``). Anything that does not parse is
:class:`~gateway.iceberg.errors.BadRequest`: bad JSON, a document nested too deep, an unknown
update or requirement ``type``/``action``, a wrong field type.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pyiceberg.catalog.rest import CreateTableRequest as _PyIcebergCreateTable
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate

from gateway.iceberg.errors import BadRequest

__all__ = ["CommitRequest", "CreateNamespace", "CreateTableRequest", "RenameTable",
           "UpdateNamespaceProperties", "page_params", "parse"]

M = TypeVar("M", bound=BaseModel)
_REQUIREMENTS = TypeAdapter(tuple[TableRequirement, ...])
_UPDATES = TypeAdapter(tuple[TableUpdate, ...])
#: Largest ``pageSize`` honoured; larger asks get pages this long.
MAX_PAGE_SIZE = 1000


class _Spec(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class CreateNamespace(_Spec):
    """``CreateNamespaceRequest``: ``namespace`` (levels) and string ``properties``."""

    namespace: list[str]
    properties: dict[str, str] = Field(default_factory=dict)


class UpdateNamespaceProperties(_Spec):
    """``UpdateNamespacePropertiesRequest``: keys to remove, keys to set."""

    removals: list[str] = Field(default_factory=list)
    updates: dict[str, str] = Field(default_factory=dict)


class CreateTableRequest(_PyIcebergCreateTable):
    """PyIceberg's ``CreateTableRequest`` with the spec's optional fields optional (PyIceberg's
    client always sends them; the spec requires only ``name`` and ``schema``)."""

    location: str | None = Field(default=None)
    partition_spec: PartitionSpec | None = Field(alias="partition-spec", default=None)
    write_order: SortOrder | None = Field(alias="write-order", default=None)


class TableIdentifier(_Spec):
    namespace: list[str]
    name: str


class RenameTable(_Spec):
    """``RenameTableRequest``: ``source`` and ``destination`` table identifiers."""

    source: TableIdentifier
    destination: TableIdentifier


class CommitRequest(_Spec):
    """``CommitTableRequest`` of ``POST .../tables/{table}``: ``identifier`` is optional there
    (Java's client sends none), ``requirements`` and ``updates`` are PyIceberg's unions."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    identifier: TableIdentifier | None = None
    requirements: tuple[Any, ...] = ()
    updates: tuple[Any, ...] = ()


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def document(body: bytes) -> dict:
    """The JSON object of ``body``. Raises :class:`BadRequest`."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json can read
        raise BadRequest("the request body is not a JSON document") from None
    if not isinstance(value, dict):
        raise BadRequest("the request body must be a JSON object")
    return value


def parse(model: type[M], body: bytes) -> M:
    """``body`` read as ``model``. Raises :class:`BadRequest` naming the first bad field."""
    try:
        return model.model_validate(document(body))
    except ValidationError as exc:
        raise BadRequest(f"invalid {model.__name__}: {_first_error(exc)}") from None
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None


def commit_request(body: bytes) -> CommitRequest:
    """A table commit's body, its requirements and updates as PyIceberg objects.
    Raises :class:`BadRequest`."""
    raw = document(body)
    try:
        shell = CommitRequest.model_validate({"identifier": raw.get("identifier")})
        requirements = _REQUIREMENTS.validate_python(raw.get("requirements") or ())
        updates = _UPDATES.validate_python(raw.get("updates") or ())
    except ValidationError as exc:
        raise BadRequest(f"invalid CommitTableRequest: {_first_error(exc)}") from None
    except (RecursionError, TypeError, ValueError) as exc:  # PyIceberg's own validators
        raise BadRequest(f"invalid CommitTableRequest: {str(exc)[:500]}") from None
    return CommitRequest(identifier=shell.identifier, requirements=requirements, updates=updates)


def page_params(query) -> tuple[str | None, int | None]:
    """``(pageToken, pageSize)`` of a listing's query (``None`` when absent). ``pageSize`` must
    be a positive integer (capped at :data:`MAX_PAGE_SIZE`). Raises :class:`BadRequest`."""
    token = query.get("pageToken")
    size = query.get("pageSize")
    if size is None:
        return token, None
    if not size.isdigit() or int(size) < 1 or len(size) > 9:
        raise BadRequest(f"pageSize must be a positive integer, got {size[:40]!r}")
    return token, min(int(size), MAX_PAGE_SIZE)
