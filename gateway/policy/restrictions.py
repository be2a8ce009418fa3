"""Row filters and column masks (Ranger's row-filter and data-mask policies) as they concern one
caller on one table, and the checks every policy source runs on such policies at load.

``table_restrictions(engine, user, groups, database, table, columns)`` gives a
:class:`TableRestrictions`: the row filter (Hive SQL, with the deciding policy id) and each
masked column's mask (type, Hive expression, policy id). The protocols read it: Glue's
``GetUnfilteredTableMetadata`` (``CellFilters``), the Iceberg load (trusted engines only), the
audit line, ``hms-gateway policy check`` and the explorer.

:func:`check_policy` is the one place that says what the gateway evaluates of such a policy;
both loaders call it and turn its :class:`Unsupported` into a ``ConfigError`` naming the file,
the policy and the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.policy.engine import DataMaskResult, PolicyEngine, RowFilterResult
from gateway.policy.model import (
    COLUMN_TOKEN, COLUMN_TYPE_TOKEN, MASK_CUSTOM, MASK_NULL, POLICY_DATAMASK, SELECT, MaskType, Policy,
)

__all__ = ["ColumnMask", "TableRestrictions", "Unsupported", "check_policy", "mask_expression",
           "table_restrictions"]

#: Ranger's user/group attribute macros (``${{USER.dept}}``, ``${{UGNAMES}}``...), expanded by
#: Ranger's ``RangerRequestExprResolver`` from usersync's attributes, which the gateway lacks.
_MACRO = re.compile(r"\$\{\{")


class Unsupported(ValueError):
    """A row-filter or data-mask policy the gateway does not evaluate: ``key`` the policy's key
    below the policy (``dataMaskPolicyItems[0].dataMaskInfo.valueExpr``), ``reason`` why."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason


def check_policy(policy: Policy, mask_types: Mapping[str, MaskType], *, wildcards: bool = False) -> None:
    """Raise :class:`Unsupported` when ``policy`` (a data-mask or row-filter policy) holds what
    the gateway does not evaluate: a resource other than database/table(/column), a wildcard
    value where the service definition matches literally (``wildcards`` False, Hive's
    default), a mask type the service definition lacks, a ``CUSTOM`` mask without
    ``valueExpr``, an item granting other than ``select``, or a ``${{...}}`` attribute macro.
    Keys are Ranger JSON's (``dataMaskPolicyItems[0].dataMaskInfo.valueExpr``)."""
    mask_key, filter_key, resources_key = "dataMaskPolicyItems", "rowFilterPolicyItems", "resources"
    depth = 3 if policy.policy_type == POLICY_DATAMASK else 2
    if len(policy.resources) != depth or policy.url is not None:
        levels = "database, table and column" if depth == 3 else "database and table"
        raise Unsupported(resources_key, f"a {_kind(policy)} policy names exactly {levels}")
    if not wildcards:
        for name, spec in zip(("database", "table", "column"), policy.resources):
            for value in spec.values:
                if "*" in value or "?" in value:
                    raise Unsupported(
                        f"{resources_key}.{name}.values",
                        f"{value!r}: Hive's {_kind(policy)} resources match without wildcards "
                        "(the service definition's matcherOptions wildCard is false): name the object")
    items = policy.data_mask if policy.policy_type == POLICY_DATAMASK else policy.row_filter
    key = mask_key if policy.policy_type == POLICY_DATAMASK else filter_key
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        if item.who.accesses - {SELECT}:
            raise Unsupported(f"{where}.accesses", f"Hive's {_kind(policy)} items grant select only")
        if policy.policy_type == POLICY_DATAMASK:
            if item.mask_type not in mask_types:
                raise Unsupported(f"{where}.dataMaskInfo.dataMaskType",
                                  f"{item.mask_type!r} is not a mask type of the service definition "
                                  f"(known: {', '.join(mask_types)})")
            if item.mask_type == MASK_CUSTOM and not item.value_expr:
                raise Unsupported(f"{where}.dataMaskInfo.valueExpr", "a CUSTOM mask needs valueExpr")
            if item.value_expr and _MACRO.search(item.value_expr):
                raise Unsupported(f"{where}.dataMaskInfo.valueExpr",
                                  "user or group attribute macros (${{...}}) are not evaluated")
        elif _MACRO.search(item.filter_expr):
            raise Unsupported(f"{where}.rowFilterInfo.filterExpr",
                              "user or group attribute macros (${{...}}) are not evaluated")


def _kind(policy: Policy) -> str:
    return "data-mask" if policy.policy_type == POLICY_DATAMASK else "row-filter"


def mask_expression(mask: DataMaskResult, column: str, column_type: str | None = None) -> str | None:
    """The Hive expression replacing ``column`` under ``mask``, as Ranger's Hive plugin builds
    it: ``NULL`` for ``MASK_NULL``, ``valueExpr`` for ``CUSTOM``, else the type's
    ``transformer``, with ``{col}`` the column and ``{colType}`` its Hive type (``string`` when
    unknown, as the plugin falls back). The column itself for ``MASK_NONE`` or no mask. None
    when the type has no transformer (a service definition's own type): not representable."""
    if not mask.masked:
        return column
    kind = (mask.mask_type or "").upper()
    if kind == MASK_NULL:
        return "NULL"
    text = mask.value_expr if kind == MASK_CUSTOM else (mask.mask.transformer if mask.mask else None)
    if not text:
        return "NULL" if kind == MASK_CUSTOM else None
    return text.replace(COLUMN_TOKEN, column).replace(COLUMN_TYPE_TOKEN, column_type or "string")


@dataclass(frozen=True)
class ColumnMask:
    """A mask on one column: Ranger's ``mask_type``, the Hive ``expression`` replacing the
    column (None: the type has no transformer the gateway can state) and the ``policy_id``."""

    mask_type: str
    expression: str | None
    policy_id: int


@dataclass(frozen=True)
class TableRestrictions:
    """What row filter and which masks apply to one caller on one table. ``row_filter`` the
    Hive SQL filter (None: none) and ``row_filter_policy`` its policy id (``-1``: none);
    ``masks`` column name -> :class:`ColumnMask`, masked columns only (not ``MASK_NONE``);
    ``complete`` False when a mask policy names columns by exclusion and ``columns`` were not
    given (then :attr:`applies` is True: fail closed)."""

    row_filter: str | None = None
    row_filter_policy: int = -1
    masks: dict[str, ColumnMask] = field(default_factory=dict)
    complete: bool = True

    @property
    def applies(self) -> bool:
        """Whether a row filter or a mask applies to the caller."""
        return self.row_filter is not None or bool(self.masks) or not self.complete

    @property
    def policy_ids(self) -> tuple[int, ...]:
        """The ids of the policies that filtered or masked, ascending."""
        ids = {m.policy_id for m in self.masks.values()}
        if self.row_filter is not None:
            ids.add(self.row_filter_policy)
        return tuple(sorted(ids))

    def describe(self) -> str:
        """One line for an error or a log: the filter and masked columns with policy ids."""
        parts = []
        if self.row_filter is not None:
            parts.append(f"row filter {self.row_filter!r} (policy {self.row_filter_policy})")
        for column, mask in self.masks.items():
            parts.append(f"mask {mask.mask_type} on {column} (policy {mask.policy_id})")
        if not self.complete:
            parts.append("a mask on columns named by exclusion")
        return "; ".join(parts) or "no row filter and no mask"


NONE = TableRestrictions()


def table_restrictions(engine: PolicyEngine | None, user: str, groups: Iterable[str], database: str,
                       table: str, columns: Sequence[str] | None = None,
                       column_types: Mapping[str, str] | None = None) -> TableRestrictions:
    """The row filter and masks that apply to ``user`` (in ``groups``) reading
    ``database.table``; ``columns`` the table's column names (None: the columns the mask
    policies name), ``column_types`` their Hive types for ``{colType}``. ``engine`` None (no
    catalog policy): nothing applies. Never raises."""
    if engine is None or not engine.has_restrictions:
        return NONE
    groups = groups if isinstance(groups, frozenset) else frozenset(groups)
    rf: RowFilterResult = engine.row_filter(user, groups, database, table)
    complete = True
    named = engine.masked_column_names(user, groups, database, table)
    if columns is None:
        complete = named is not None
        columns = named or ()
    elif named is not None:  # only the columns a mask policy names can be masked
        names = frozenset(named)
        columns = [c for c in columns if c.lower() in names]
    masks: dict[str, ColumnMask] = {}
    types = {k.lower(): v for k, v in (column_types or {}).items()}
    for column in columns:
        result = engine.data_mask(user, groups, database, table, column)
        if result.masked:
            masks[column] = ColumnMask(result.mask_type, mask_expression(result, column, types.get(column.lower())),
                                       result.policy_id)
    if rf.filter_expr is None and not masks and complete:
        return NONE
    return TableRestrictions(rf.filter_expr, rf.policy_id if rf.filter_expr is not None else -1, masks, complete)
