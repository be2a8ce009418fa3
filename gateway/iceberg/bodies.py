"""Request bodies and query parameters of the Iceberg REST Catalog, read into PyIceberg's models
where PyIceberg has them (``CreateTableRequest``, the ``TableRequirement`` and ``TableUpdate``
unions) and into the spec's shapes otherwise (``CreateNamespaceRequest``,
``UpdateNamespacePropertiesRequest``, ``RenameTableRequest``). Anything that does not parse is
:class:`~gateway.iceberg.errors.BadRequest`: bad JSON, a document nested too deep, an unknown
update or requirement ``type``/``action``, a wrong field type, whatever PyIceberg's own
validators raise (``TypeError``, ``AttributeError``... on a non-object ``properties``).

This is the one validation layer every route's body goes through (:func:`read`, with the
route's request model, :attr:`gateway.iceberg.routes.Route.request`, before its handler
runs; :func:`parse`, :func:`commit_request`, :func:`document`), before any file or HMS call: no string anywhere in
a body may hold U+0000 (HMS and paths cannot) or a lone surrogate (no UTF-8 encoder, Thrift's
included, can write one); what a parsed body asks HMS to hold is checked against HMS's widths,
and properties PyIceberg interprets against what it accepts (:mod:`gateway.iceberg.hms_bounds`).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_serializer
from pyiceberg.catalog.rest import CreateTableRequest as _PyIcebergCreateTable
from pyiceberg.catalog.rest import ListNamespaceResponse, ListTablesResponse, ListViewsResponse
from pyiceberg.exceptions import ResolveError, ValidationError as IcebergValidationError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate

from pyiceberg.schema import Schema
from pyiceberg.table.update import SetPropertiesUpdate, UpgradeFormatVersionUpdate

from gateway.iceberg import hms_bounds
from gateway.iceberg.errors import BadRequest

__all__ = ["CatalogConfig", "CommitRequest", "CreateNamespace", "CreateTableRequest", "ListNamespaces",
           "ListTables", "ListViews", "RenameTable", "UpdateNamespaceProperties", "page_params", "parse", "read",
           "validated"]

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

    def check(self) -> None:
        hms_bounds.namespace_properties(self.properties)


class UpdateNamespaceProperties(_Spec):
    """``UpdateNamespacePropertiesRequest``: keys to remove, keys to set."""

    removals: list[str] = Field(default_factory=list, max_length=hms_bounds.MAX_REMOVALS)
    updates: dict[str, str] = Field(default_factory=dict)

    def check(self) -> None:
        hms_bounds.namespace_properties(self.updates)


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

    @classmethod
    def from_request(cls, catalog: Any, request: Any, body: bytes) -> CommitRequest:
        return commit_request(body)


#: What PyIceberg's validators and builders raise on a client's bad value, besides pydantic's
#: ``ValidationError`` (a before-validator calling ``.items()`` on a list, ``next()`` over no
#: match, a lookup of a missing id...).
CLIENT_FAULTS = (ValidationError, IcebergValidationError, ResolveError, ValueError, TypeError, AttributeError,
                 LookupError, StopIteration, ArithmeticError, NotImplementedError)


def _check_strings(value: Any) -> None:
    """Refuse U+0000 and lone surrogates in any string (key or value) of a JSON document."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise BadRequest("a string of the request body holds U+0000")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BadRequest("a string of the request body holds a lone surrogate (not Unicode text)") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def check(value: Any) -> None:
    """Check a parsed body against what HMS can hold and what PyIceberg accepts, wherever its
    parts sit (nested models, lists of updates): schemas, table and view properties, locations,
    format versions; a model with a ``check()`` method (namespace bodies) checks itself.
    Raises :class:`BadRequest`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
            continue
        if not isinstance(item, BaseModel):
            continue
        if isinstance(item, Schema):
            hms_bounds.schema(item)
            continue
        if callable(getattr(item, "check", None)):
            item.check()
        elif isinstance(item, SetPropertiesUpdate):
            hms_bounds.table_properties(item.updates)
        elif isinstance(getattr(item, "properties", None), dict):
            hms_bounds.table_properties(item.properties)
        if isinstance(item, UpgradeFormatVersionUpdate):
            hms_bounds.format_version(item.format_version)
        if isinstance(getattr(item, "location", None), str):
            hms_bounds.location(item.location)
        stack.extend(getattr(item, name) for name in type(item).model_fields)


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def file_fault(exc: BaseException) -> str:
    """What is wrong with a file read as Iceberg metadata, never quoting what it holds (a
    register can name any file the gateway reads, a JSON key file too): the exception's type,
    and for a pydantic error the first field and rule."""
    if isinstance(exc, ValidationError):
        return f"{type(exc).__name__}: {_first_error(exc)[:300]}"
    if isinstance(exc, OSError):  # a path and a reason, no contents
        return f"{type(exc).__name__}: {exc.strerror or 'cannot be read'}"
    return type(exc).__name__


def document(body: bytes) -> dict:
    """The JSON object of ``body``. Raises :class:`BadRequest`."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json can read
        raise BadRequest("the request body is not a JSON document") from None
    if not isinstance(value, dict):
        raise BadRequest("the request body must be a JSON object")
    _check_strings(value)
    return value


def _refusal(what: str, exc: BaseException) -> BadRequest:
    if isinstance(exc, ValidationError):
        detail = _first_error(exc)
    elif isinstance(exc, (TypeError, AttributeError, LookupError, StopIteration)):
        detail = "a value has the wrong type or refers to nothing"  # Python's own words would mislead
    else:
        detail = str(exc)[:500] or "a value is not valid"
    return BadRequest(f"invalid {what}: {detail}")


def parse(model: type[M], body: bytes) -> M:
    """``body`` read as ``model`` and :func:`check`-ed. Raises :class:`BadRequest` naming the
    first bad field."""
    return validated(model, document(body))


def validated(model: type[M], value: dict) -> M:
    """A body's JSON object ``value`` (:func:`document`) read as ``model`` and :func:`check`-ed.
    Raises :class:`BadRequest` naming the first bad field."""
    try:
        parsed = model.model_validate(value)
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    except CLIENT_FAULTS as exc:
        raise _refusal(model.__name__, exc) from None
    check(parsed)
    return parsed


def commit_request(body: bytes) -> CommitRequest:
    """A table commit's body, its requirements and updates as PyIceberg objects.
    Raises :class:`BadRequest`."""
    raw = document(body)
    try:
        shell = CommitRequest.model_validate({"identifier": raw.get("identifier")})
        requirements = _REQUIREMENTS.validate_python(raw.get("requirements") or ())
        updates = _UPDATES.validate_python(raw.get("updates") or ())
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    except CLIENT_FAULTS as exc:  # pydantic's, and PyIceberg's own validators
        raise _refusal("CommitTableRequest", exc) from None
    check(updates)
    return CommitRequest(identifier=shell.identifier, requirements=requirements, updates=updates)


def read(model: Any, catalog: Any, request: Any, body: bytes) -> Any:
    """A route's request body read as its request ``model`` (None: the route takes no body,
    whatever was sent): :func:`parse`, or the model's own ``from_request(catalog, request,
    body)`` when it has one (a form, several parts, a refusal the route counts). Raises
    :class:`BadRequest` (or the route's own refusal)."""
    if model is None:
        return None
    reader = getattr(model, "from_request", None)
    return reader(catalog, request, body) if reader is not None else parse(model, body)


class _Paged(BaseModel):
    """A listing's page: ``next-page-token`` is always written, null on the last page (the
    spec's ``PageToken`` is nullable; PyIceberg's models leave a null out)."""

    @model_serializer(mode="wrap")
    def _token_always(self, handler):
        written = handler(self)
        written.setdefault("next-page-token", None)
        return written


class ListNamespaces(_Paged, ListNamespaceResponse):
    """PyIceberg's ``ListNamespaceResponse``, its token always written."""


class ListTables(_Paged, ListTablesResponse):
    """PyIceberg's ``ListTablesResponse``, its token always written."""


class ListViews(_Paged, ListViewsResponse):
    """PyIceberg's ``ListViewsResponse``, its token always written."""


class CatalogConfig(_Spec):
    """The spec's ``CatalogConfig``, ``endpoints`` as the spec writes them (``"GET /v1/..."``;
    PyIceberg's ``ConfigResponse`` reads them into a set of its ``Endpoint`` objects, which do
    not write back so)."""

    defaults: dict[str, str] = Field(default_factory=dict)
    overrides: dict[str, str] = Field(default_factory=dict)
    endpoints: list[str] = Field(default_factory=list)


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
