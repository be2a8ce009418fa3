"""Warehouses: one ``iceberg-rest`` service serving several catalogs under the spec's
``{prefix}`` (``/v1/{prefix}/namespaces/...``), each a group of HMS databases.

A client names the one it wants with ``warehouse`` (PyIceberg's and Java's catalog property,
iceberg-js's option): ``GET /v1/config?warehouse=<name>`` answers ``overrides.prefix = <name>``
and the client then sends every catalog call below that prefix. Without ``warehouse`` the
service answers no prefix and its unprefixed routes serve every database (the policy still
decides). A ``warehouse`` the service does not have is 400, naming the ones it has: a client
silently sent to the whole catalog would write where its user did not mean to.

Below a prefix only the warehouse's databases exist: the others are hidden as the policy hides
what a user may not see (404 on reads, absent from listings, 403 on create), by
:class:`WarehouseView` around the user's :class:`~gateway.policy.view.CatalogView`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Annotated

from pydantic import AfterValidator, Field

from gateway.iceberg import errors
from gateway.iceberg.paths import RESERVED_PREFIXES
from gateway.policy.view import CatalogView
from gateway.settings_model import SettingsModel

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _warehouse_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"warehouse name {name!r}: letters, digits, '_' and '-' only (1 to 64), "
                         "as it is a path segment")
    if name in RESERVED_PREFIXES:
        raise ValueError(f"warehouse name {name!r} is a path segment of the API itself "
                         f"({', '.join(sorted(RESERVED_PREFIXES))})")
    return name


def _pattern(pattern: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_*?]{1,128}", pattern):
        raise ValueError(f"database pattern {pattern!r}: HMS names ([A-Za-z0-9_]) with '*' and '?' wildcards")
    return pattern.lower()


class Warehouse(SettingsModel):
    """One warehouse: ``databases``, the HMS databases it serves as shell-style patterns
    (``*``, ``?``; matched case-insensitively, as HMS names are)."""

    databases: tuple[Annotated[str, AfterValidator(_pattern)], ...] = Field(min_length=1)

    def serves(self, database: str) -> bool:
        name = database.lower()
        return any(fnmatchcase(name, pattern) for pattern in self.databases)


#: The ``warehouses`` option: prefix name → :class:`Warehouse`.
Warehouses = dict[Annotated[str, AfterValidator(_warehouse_name)], Warehouse]


def config_overrides(warehouses: Mapping[str, Warehouse], requested: str | None) -> dict[str, str]:
    """``GET /v1/config``'s ``overrides`` for the ``warehouse`` a client asked for (None: it
    named none). Raises :class:`~errors.BadRequest` for a warehouse the service does not have."""
    if requested is None:
        return {}
    if requested not in warehouses:
        have = ", ".join(sorted(warehouses)) or "none (leave warehouse unset)"
        raise errors.BadRequest(f"this catalog has no warehouse {requested[:200]!r}; its warehouses: {have}")
    return {"prefix": requested}


class WarehouseView(CatalogView):
    """``view`` (the user's policy view) limited to the databases of ``warehouse``."""

    __slots__ = ("warehouse",)

    def __init__(self, view: CatalogView, warehouse: Warehouse):
        super().__init__(view.engine, view.user, view.groups)
        self.warehouse = warehouse

    def may(self, access: str, database: str, table: str | None = None) -> bool:
        return self.warehouse.serves(database) and super().may(access, database, table)

    def visible(self, database: str, table: str | None = None) -> bool:
        return self.warehouse.serves(database) and super().visible(database, table)

    def visible_databases(self, names: Sequence[str]) -> list[str]:
        served = [name for name in names if self.warehouse.serves(name)]
        self.hidden += len(names) - len(served)
        return super().visible_databases(served)

    def visible_tables(self, database: str, names: Sequence[str]) -> list[str]:
        if not self.warehouse.serves(database):
            self.hidden += len(names)
            return []
        return super().visible_tables(database, names)

    def listing_verdict(self, database: str | None = None) -> bool | None:
        if database is None:
            return None  # depends on the names
        return super().listing_verdict(database) if self.warehouse.serves(database) else False
