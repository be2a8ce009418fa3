"""The url rule on the Thrift API: a write that sets a storage location needs Ranger's ``url``
permission (``read`` and ``write``) on it, as Ranger's HMS authorizer
(``HiveMetaStoreAuthorizer``) asks ``url`` rights on a location a create or alter sets. The
rule is the one the ``iceberg-rest`` service applies to a location a client chooses
(:meth:`gateway.policy.view.CatalogView.url_refusal`), so no protocol grants a place another
refuses.

Which arguments carry locations is data (:attr:`gateway.thrift.hive_methods.Write.locations`):
a database's ``locationUri`` (as the ``iceberg-rest`` service asks for a namespace's), a
table's and each partition's ``sd.location``, and Iceberg's ``metadata_location`` table
parameter (the file Iceberg's ``HiveCatalog`` and the ``iceberg-rest`` service load the table
from: a table naming another table's file would be served that table's data). An empty
location is HMS's default (below the database's or table's location), not one the client sets.

An alter (:data:`~gateway.thrift.hive_methods.ALTERS`) sends the whole object back, location
included: a location equal to the object's current one is not being set. The current object
is read from HMS, as the user, only for a location the user lacks the permission on (so
``url`` on ``*`` costs no call): ``get_database``, ``get_table``, or one ``get_partition`` per such partition.
"""

from __future__ import annotations

import logging
from typing import Any

from thriftpy2.thrift import TException

from gateway.policy.urls import normal_url
from gateway.policy.view import CatalogView
from gateway.thrift.hive_methods import ALTERS, Write, arguments

log = logging.getLogger(__name__)


async def placing_refusal(metastore: Any, method: str, write: Write, args: Any, view: CatalogView,
                          named: tuple[str, str | None], identity: Any) -> str | None:
    """None when every location the call of ``method`` (``write``, its thriftpy2 ``args``) sets
    may be placed by the user of ``view``; else the refusal's message. ``named``: the
    ``(database, table)`` the call writes; ``metastore``: the service's
    :class:`~gateway.upstream.metastore.MetastoreClient` (None: no current object can be read,
    so an alter's unchanged location is judged as a new one), called as ``identity``. Raises
    ``UpstreamError`` when HMS fails while the current object is read."""
    database, table = named
    read: dict[int, Any] = {}  # id(item) → its current state, read once per call
    for path in write.locations:
        items, inner = _owners(args, path)
        for item in items:
            what = _what(type(item).__name__, inner, database, table)
            for value in arguments(item, inner):
                location = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
                if not isinstance(location, str) or not location:
                    continue  # HMS's default location
                refusal = view.url_refusal(location, what)
                if refusal is None:
                    continue
                if method in ALTERS and await _unchanged(metastore, database, table, item, inner, location,
                                                         identity, read):
                    continue
                return refusal
    return None


#: The structs that own a location: what an alter's current state is read as.
_OWNERS = frozenset({"Database", "Table", "Partition"})


def _owners(args: Any, path: str) -> tuple[list, str]:
    """The objects along ``path`` that own its locations (the deepest Database, Table or
    Partition, one per item of a list) and the rest of the path within them."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        items = arguments(args, ".".join(parts[:cut]))
        if items and all(type(item).__name__ in _OWNERS for item in items):
            return items, ".".join(parts[cut:])
    return [args], path


def _what(struct: str, inner: str, database: str, table: str | None) -> str:
    """What a location places, for the refusal's message."""
    if struct == "Database":
        return f"database {database}"
    if inner.endswith("metadata_location"):
        return f"the Iceberg metadata of table {database}.{table}"
    return f"{'a partition of ' if struct == 'Partition' else ''}table {database}.{table}"


async def _unchanged(metastore: Any, database: str, table: str | None, item: Any, inner: str, location: str,
                     identity: Any, read: dict[int, Any]) -> bool:
    """Whether the current database, table (or partition, by ``item``'s values) has
    ``location`` at ``inner`` (both in :func:`~gateway.policy.urls.normal_url` form); ``read``
    keeps what was read for ``item``."""
    if id(item) not in read:
        read[id(item)] = await _current(metastore, database, table, item, identity)
    current = read[id(item)]
    wanted = normal_url(location)
    return current is not None and any(isinstance(v, str) and normal_url(v) == wanted
                                       for v in arguments(current, inner))


async def _current(metastore: Any, database: str, table: str | None, item: Any, identity: Any) -> Any:
    """The object ``item`` replaces, as HMS holds it now; None when it cannot be read."""
    struct = type(item).__name__
    if metastore is None or not database or (not table and struct != "Database"):
        return None
    try:
        if struct == "Database":
            current = await metastore.call("get_database", identity=identity, name=database)
        elif struct == "Partition":
            current = await metastore.call("get_partition", identity=identity, db_name=database, tbl_name=table,
                                           part_vals=list(item.values or ()))
        else:
            current = await metastore.call("get_table", identity=identity, dbname=database, tbl_name=table)
    except TException as exc:  # gone, or not readable: the location is a new one
        log.info("url rule: the current %s of %s.%s is not readable (%s): judged as new",
                 struct, database, table, type(exc).__name__)
        return None
    return current
