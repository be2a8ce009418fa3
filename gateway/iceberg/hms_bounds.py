"""What the Hive Metastore can hold, checked on a request before anything reaches HMS or storage:
a value too wide for its column makes HMS fail slowly (Derby's truncation error surfaces after
DataNucleus' retries, about 20 s, as a ``MetaException``), and two columns whose names differ only
in case collide in ``COLUMNS_V2``'s primary key (HMS lower-cases column names) the same way.

Widths are those of Hive 2.3.10's ``package.jdo`` (the mapping DataNucleus creates the
metastore's tables from; ``hive-metastore-2.3.10.jar``), in characters:

* ``TABLE_PARAMS``: key 256, value 32672 (Iceberg table and view properties; Java's
  ``iceberg.hive.table-property-max-size`` is the same 32672);
* ``DATABASE_PARAMS``: key 180, value 4000 (namespace properties); ``DBS.DESC`` 4000 (``comment``),
  ``DBS.DB_LOCATION_URI`` 4000;
* ``SDS.LOCATION`` 4000 (a table's or view's location);
* ``COLUMNS_V2``: ``COLUMN_NAME`` 767, ``TYPE_NAME`` 32672, ``COMMENT`` 256 (the top-level
  fields of the current schema, PyIceberg's ``SchemaToHiveConverter``).

Also PyIceberg's own reading of a table's properties: ``format-version`` must be one PyIceberg
writes (1 to ``SUPPORTED_TABLE_FORMAT_VERSION``; its models read v3 metadata, it cannot
upgrade to or write v3 tables), and a property PyIceberg reads as a boolean or an integer
(``TableProperties`` keys whose default is one) must parse as PyIceberg parses it
(``property_as_bool``, ``property_as_int``). Each check raises
:class:`~gateway.iceberg.errors.BadRequest` naming the bound.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyiceberg.catalog.hive import SchemaToHiveConverter
from pyiceberg.schema import Schema, visit
from pyiceberg.table import TableProperties
from pyiceberg.table.metadata import SUPPORTED_TABLE_FORMAT_VERSION
from pyiceberg.utils.properties import property_as_bool, property_as_int

from gateway.iceberg.errors import BadRequest

TABLE_PARAM_KEY, TABLE_PARAM_VALUE = 256, 32672
DATABASE_PARAM_KEY, DATABASE_PARAM_VALUE = 180, 4000
DESCRIPTION = LOCATION = 4000
COLUMN_NAME, COLUMN_TYPE, COLUMN_COMMENT = 767, 32672, 256
#: Most properties one table, view or namespace may have (one HMS row each; Iceberg tables
#: have tens, wide ones with per-column metrics settings a few hundred).
MAX_PROPERTIES = 1000
#: Most keys one namespace properties update may remove.
MAX_REMOVALS = MAX_PROPERTIES

FORMAT_VERSION = TableProperties.FORMAT_VERSION


def _typed_properties() -> dict[str, type]:
    """``TableProperties`` keys PyIceberg reads as ``bool`` or ``int`` (their ``*_DEFAULT`` is one)."""
    typed = {}
    for name, key in vars(TableProperties).items():
        default = getattr(TableProperties, f"{name}_DEFAULT", None)
        if isinstance(key, str) and isinstance(default, (bool, int)):
            typed[key] = bool if isinstance(default, bool) else int
    return typed


TYPED_PROPERTIES = _typed_properties()


def _clip(text: str) -> str:
    return text[:80] + ("..." if len(text) > 80 else "")


def _properties(properties: Mapping[str, str], what: str, key_width: int, value_width: int) -> None:
    if len(properties) > MAX_PROPERTIES:
        raise BadRequest(f"{what}: {len(properties)} properties, at most {MAX_PROPERTIES} are accepted")
    for key, value in properties.items():
        if not key:
            raise BadRequest(f"{what}: a property key is empty")
        if len(key) > key_width:
            raise BadRequest(f"{what}: property key {_clip(key)!r} is {len(key)} characters, the Hive "
                             f"Metastore holds at most {key_width}")
        if len(value) > value_width:
            raise BadRequest(f"{what}: the value of property {_clip(key)!r} is {len(value)} characters, "
                             f"the Hive Metastore holds at most {value_width}")


def table_properties(properties: Mapping[str, str], what: str = "table properties") -> None:
    """Check an Iceberg table's (or view's) properties as set by a request. Raises BadRequest."""
    _properties(properties, what, TABLE_PARAM_KEY, TABLE_PARAM_VALUE)
    if FORMAT_VERSION in properties:
        format_version(properties[FORMAT_VERSION])
    for key, kind in TYPED_PROPERTIES.items():
        try:
            if kind is bool:
                property_as_bool(dict(properties), key, False)
            else:
                property_as_int(dict(properties), key)
        except ValueError:
            raise BadRequest(f"{what}: {key} must be {'true or false' if kind is bool else 'an integer'}, "
                             f"got {_clip(properties[key])!r}") from None


def format_version(value: object) -> None:
    """Check a requested table format version (a property's string or an update's integer)."""
    text = str(value).strip()
    if not (text.isdigit() and 1 <= int(text) <= SUPPORTED_TABLE_FORMAT_VERSION):
        raise BadRequest(f"format-version {_clip(text)!r} is not supported: this catalog writes Iceberg "
                         f"format versions 1 to {SUPPORTED_TABLE_FORMAT_VERSION}")


def namespace_properties(properties: Mapping[str, str], what: str = "namespace properties") -> None:
    """Check a namespace's properties (``comment`` and ``location`` are database columns, every
    other key a database parameter). Raises BadRequest."""
    rest = {k: v for k, v in properties.items() if k not in ("comment", "location")}
    _properties(rest, what, DATABASE_PARAM_KEY, DATABASE_PARAM_VALUE)
    if len(properties.get("comment", "")) > DESCRIPTION:
        raise BadRequest(f"{what}: comment is over {DESCRIPTION} characters")
    if "location" in properties:
        location(properties["location"], what)


def location(value: str, what: str = "location") -> None:
    """Check a location's length (empty, relative or foreign locations are the confinement's
    business, :mod:`gateway.iceberg.locations`). Raises BadRequest."""
    if len(value) > LOCATION:
        raise BadRequest(f"{what}: the location is {len(value)} characters, the Hive Metastore holds at "
                         f"most {LOCATION}")


def schema(value: Schema, what: str = "schema") -> None:
    """Check a schema's top-level fields as HMS columns: names unique regardless of case, names,
    Hive types and comments within their widths. Raises BadRequest."""
    seen: dict[str, str] = {}
    converter = SchemaToHiveConverter(True)
    for field in value.fields:
        lower = field.name.lower()
        if lower in seen:
            raise BadRequest(f"{what}: columns {_clip(seen[lower])!r} and {_clip(field.name)!r} differ only in "
                             "case, and the Hive Metastore's column names are case-insensitive")
        seen[lower] = field.name
        if not field.name or len(field.name) > COLUMN_NAME:
            raise BadRequest(f"{what}: column name {_clip(field.name)!r} must have 1 to {COLUMN_NAME} characters")
        if field.doc is not None and len(field.doc) > COLUMN_COMMENT:
            raise BadRequest(f"{what}: the doc of column {_clip(field.name)!r} is {len(field.doc)} characters, "
                             f"the Hive Metastore holds at most {COLUMN_COMMENT}")
        try:
            hive_type = visit(field.field_type, converter)
        except (ValueError, TypeError, LookupError, AttributeError, NotImplementedError) as exc:
            raise BadRequest(f"{what}: column {_clip(field.name)!r} has no Hive type: {str(exc)[:200]}") from None
        if len(hive_type) > COLUMN_TYPE:
            raise BadRequest(f"{what}: the Hive type of column {_clip(field.name)!r} is {len(hive_type)} "
                             f"characters, the Hive Metastore holds at most {COLUMN_TYPE}")
