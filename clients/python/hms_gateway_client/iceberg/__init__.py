"""Reading an Iceberg table through the gateway's ``iceberg-rest`` service with its
``read-restrictions`` applied, as the Iceberg REST spec says, before PyIceberg does it itself
(apache/iceberg-python#3967): the row filter first, on raw values, then each column's action.

>>> from pyiceberg.catalog.rest import RestCatalog
>>> catalog = RestCatalog("gw", uri="https://gw:8443/gateway/default/iceberg", ...)
>>> restricted = load_table(catalog, "lakehouse.trips")
>>> restricted.read_restrictions          # the load's read-restrictions (dict), or None
>>> restricted.to_arrow()                 # pyarrow.Table: only the rows and values allowed

:func:`apply_read_restrictions` is the same over an Arrow table already read. Whatever the
reader cannot apply (an unknown action, a filter node, an action on a type the spec does not
apply it to, a duplicate field id, a nested field) fails the read with
:class:`ReadRestrictionError` naming it. Needs the ``iceberg`` extra (PyIceberg, pyarrow).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from hms_gateway_client.iceberg.actions import apply_action
from hms_gateway_client.iceberg.errors import ReadRestrictionError
from hms_gateway_client.iceberg.row_filter import rows_kept

__all__ = ["ReadRestrictionError", "RestrictedTable", "apply_read_restrictions", "load_table"]

ROW_FILTER, PROJECTIONS = "required-row-filter", "required-column-projections"


def apply_read_restrictions(table: pa.Table, schema: Schema, restrictions: dict | None) -> pa.Table:
    """``table`` (raw values of ``schema``'s top-level columns, by name) with ``restrictions``
    (the load's ``read-restrictions``) applied: the rows the row filter keeps, then each
    projection's action on its column, a new ``sha-256-query-local`` salt per call (one call is
    one query). Raises :class:`ReadRestrictionError`."""
    if not restrictions:
        return table
    if not isinstance(restrictions, dict) or set(restrictions) - {ROW_FILTER, PROJECTIONS}:
        raise ReadRestrictionError(f"cannot apply read-restrictions {json.dumps(restrictions)[:300]}: only "
                                   f"{ROW_FILTER} and {PROJECTIONS} are known to this reader")
    projections = _projections(restrictions.get(PROJECTIONS) or [], schema)
    if restrictions.get(ROW_FILTER) is not None:
        table = table.filter(rows_kept(restrictions[ROW_FILTER], schema, table))
    salt = secrets.token_bytes(32)
    for field_id, action in projections:
        field = schema.find_field(field_id)
        if field.name not in table.column_names:
            continue  # the spec: projections on columns not read do not apply
        index = table.column_names.index(field.name)
        table = table.set_column(index, table.schema.field(index), apply_action(action, table.column(index), field, salt))
    return table


def _projections(written: object, schema: Schema) -> list[tuple[int, str]]:
    """``(field id, action)`` of each projection on a column of ``schema``; duplicates and
    nested fields refused, as the spec requires of a reader that cannot combine them."""
    if not isinstance(written, list):
        raise ReadRestrictionError(f"cannot apply {PROJECTIONS} {json.dumps(written)[:300]}: not a list")
    top = {f.field_id for f in schema.fields}
    seen: set[int] = set()
    found = []
    for projection in written:
        field_id = projection.get("field-id") if isinstance(projection, dict) else None
        if not isinstance(field_id, int) or isinstance(field_id, bool):
            raise ReadRestrictionError(f"cannot apply the projection {json.dumps(projection)[:300]}: no field-id")
        if field_id in seen:
            raise ReadRestrictionError(f"cannot apply {PROJECTIONS}: field id {field_id} appears twice")
        seen.add(field_id)
        if field_id not in top:
            try:
                schema.find_field(field_id)
            except ValueError:
                continue  # no column of the schema read: the spec says it does not apply
            raise ReadRestrictionError(f"cannot apply the projection on field id {field_id}: a nested field, "
                                       "which this reader does not mask")
        found.append((field_id, projection.get("action")))
    return found


@dataclass(frozen=True)
class RestrictedTable:
    """A table as loaded for the caller: PyIceberg's ``table`` and the load's
    ``read_restrictions`` (None: none)."""

    table: Table
    read_restrictions: dict | None

    def to_arrow(self, selected_fields: Sequence[str] = ("*",)) -> pa.Table:
        """The current snapshot's rows of the current schema with the restrictions applied, then
        the ``selected_fields`` (top-level column names; ``*`` all). Raises
        :class:`ReadRestrictionError`."""
        raw = self.table.scan().to_arrow()  # every column: the filter may name one not selected
        restricted = apply_read_restrictions(raw, self.table.schema(), self.read_restrictions)
        return restricted if "*" in selected_fields else restricted.select(list(selected_fields))


def load_table(catalog: RestCatalog, identifier: str | tuple[str, ...]) -> RestrictedTable:
    """``identifier`` loaded by ``catalog`` (PyIceberg's ``RestCatalog`` on the gateway), with
    the ``read-restrictions`` of the very load answer PyIceberg built the table from (PyIceberg
    0.12 does not keep them): a ``requests`` response hook on the catalog's session reads that
    answer, matched by metadata location and table UUID. Raises PyIceberg's errors."""
    answers: list[dict] = []

    def keep(response, *args, **kwargs):
        if response.request.method == "GET" and response.status_code == 200:
            try:
                answers.append(response.json())
            except ValueError:
                pass

    hooks = catalog._session.hooks["response"]  # PyIceberg's requests session, the catalog's auth
    hooks.append(keep)
    try:
        table = catalog.load_table(identifier)
    finally:
        hooks.remove(keep)
    for answer in reversed(answers):
        if (isinstance(answer, dict) and answer.get("metadata-location") == table.metadata_location
                and (answer.get("metadata") or {}).get("table-uuid") == str(table.metadata.table_uuid)):
            return RestrictedTable(table, answer.get("read-restrictions"))
    raise ReadRestrictionError(f"the load answer of {identifier} was not seen: its read-restrictions are unknown")
