"""Catalog policy on the Thrift API (Apache Ranger's Hive model, :mod:`gateway.policy`): each user
sees only the databases and tables a policy grants.

What HMS's own filter hook (``MetaStoreFilterHook``) does, done in front of HMS:

* listings keep only the names the user may see (Ranger's ``_any`` access: some access on the
  object or on something below it);
* a call naming an object the user may not see is answered exactly as HMS answers for a missing
  object (measured against HMS 2.3.10), so that a refusal cannot be told from absence and cannot
  be used to probe for names; nothing reaches HMS;
* any other method is refused while a policy is attached (fail closed): a ``MetaException``
  "does not have privileges" where the method declares one, else a ``TApplicationException``.

Per method, from the IDL's argument names (checked at start-up):

============================  =====================================================
method                        decision
============================  =====================================================
get_all_databases,            reply filtered: databases the user may see
get_databases
get_all_tables, get_tables,   reply filtered: tables of ``db_name`` the user may see
get_tables_by_type            (HMS answers ``[]`` for a missing database, so does this)
get_table_objects_by_name,    reply filtered: the tables (``Table``, ``TableMeta``) the
get_table_meta                user may see (HIVE-25680: HMS's own filter hook missed these)
get_database                  hidden → ``NoSuchObjectException(<name>)``
get_table, get_partitions     hidden → ``NoSuchObjectException("<db>.<table> table not found")``
get_partition_names           hidden → ``TApplicationException`` INTERNAL_ERROR
                              "Internal error processing get_partition_names"
create/drop/alter database    needs ``create``/``drop``/``alter`` on the database, else
create/drop/alter table,      ``MetaException`` "User <u> does not have privileges for
add/drop partition            <ACCESS> on <db>.<table>" (partitions: ``alter`` on the table)
============================  =====================================================

Columns are not filtered yet (issue 11 item 6).
"""

from __future__ import annotations

import logging

from gateway.observability import metrics
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Answered
from gateway.pipeline.reply import Reply
from gateway.pipeline.step import Step
from gateway.pipeline.thrift_objects import decode_args, encode_reply
from gateway.policy import PolicyEngine, Resource
from gateway.thrift.codec import BINARY
from gateway.thrift.schema import MethodSchema, ServiceSchema
from gateway.thrift.translate import INTERNAL_ERROR

log = logging.getLogger(__name__)

#: Listing methods → the argument naming the database of the tables listed (None: databases).
_LISTINGS: dict[str, str | None] = {
    "get_all_databases": None,
    "get_databases": None,
    "get_all_tables": "db_name",
    "get_tables": "db_name",
    "get_tables_by_type": "db_name",
}
#: Listings of table objects → the attributes naming each item's database and table.
_OBJECT_LISTINGS: dict[str, tuple[str, str]] = {
    "get_table_objects_by_name": ("dbName", "tableName"),
    "get_table_meta": ("dbName", "tableName"),
}
#: Methods naming one object → (database argument, table argument or None, how HMS says "missing").
_OBJECT_CALLS: dict[str, tuple[str, str | None, str]] = {
    "get_database": ("name", None, "no_such_database"),
    "get_table": ("dbname", "tbl_name", "no_such_table"),
    "get_partitions": ("db_name", "tbl_name", "no_such_table"),
    "get_partition_names": ("db_name", "tbl_name", "internal_error"),
}


#: Writes → (database argument path, table argument path or None, Ranger access type).
_WRITES: dict[str, tuple[str, str | None, str]] = {
    "create_database": ("database.name", None, "create"),
    "drop_database": ("name", None, "drop"),
    "alter_database": ("dbname", None, "alter"),
    "create_table": ("tbl.dbName", "tbl.tableName", "create"),
    "create_table_with_environment_context": ("tbl.dbName", "tbl.tableName", "create"),
    "drop_table": ("dbname", "name", "drop"),
    "drop_table_with_environment_context": ("dbname", "name", "drop"),
    "alter_table": ("dbname", "tbl_name", "alter"),
    "alter_table_with_environment_context": ("dbname", "tbl_name", "alter"),
    "alter_table_with_cascade": ("dbname", "tbl_name", "alter"),
    "add_partition": ("new_part.dbName", "new_part.tableName", "alter"),
    "drop_partition": ("db_name", "tbl_name", "alter"),
    "drop_partition_by_name": ("db_name", "tbl_name", "alter"),
}


def _argument(args, path: str):
    """``args.a.b`` for ``path`` ``"a.b"``; None when a part is missing."""
    value = args
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _declared(method: MethodSchema | None, struct_name: str) -> tuple[str, type] | None:
    """(result attribute, thriftpy2 class) of the exception ``struct_name`` that ``method``
    declares, or None."""
    if method is None or method.result_class is None:
        return None
    for spec in (method.result_class.thrift_spec or {}).values():
        if len(spec) > 2 and isinstance(spec[2], type) and spec[2].__name__ == struct_name:
            return spec[1], spec[2]
    return None


class CatalogPolicy(Step):
    """Enforces ``engine`` on one ``hms-thrift`` service (see the module docstring)."""

    name = "catalog-policy"
    reply_methods = frozenset(_LISTINGS) | frozenset(_OBJECT_LISTINGS)

    def __init__(self, topology: str, service: str, engine: PolicyEngine, schema: ServiceSchema):
        self.topology, self.service, self.engine, self.schema = topology, service, engine, schema
        for name, arguments in {**{m: (a,) for m, a in _LISTINGS.items()},
                                **{m: a[:2] for m, a in {**_OBJECT_CALLS, **_WRITES}.items()}}.items():
            spec = schema.methods[name].args_class.thrift_spec  # type: ignore[union-attr]
            known = {field[1] for field in spec.values()}
            missing = [a for a in arguments if a is not None and a.split(".")[0] not in known]
            if missing:  # the IDL is not the one this table was written for
                raise ValueError(f"{name} has no argument {missing[0]} in this IDL")
        self._decisions = {
            outcome: metrics.POLICY_DECISIONS.labels(topology=topology, service=service, outcome=outcome)
            for outcome in ("allowed", "denied", "hidden", "unjudged")
        }

    @staticmethod
    def _who(exchange: Exchange) -> tuple[str, frozenset[str]]:
        identity = exchange.identity
        assert identity is not None, "identity assertion runs first"
        return identity.user, identity.groups

    async def on_call(self, exchange: Exchange) -> None:
        header = exchange.header
        assert header is not None
        if header.name in _LISTINGS or header.name in _OBJECT_LISTINGS:
            return  # judged on the reply
        method = self.schema.methods.get(header.name)
        target = _OBJECT_CALLS.get(header.name)
        user, groups = self._who(exchange)
        if header.name in _WRITES and method is not None:
            self._check_write(exchange, method, user, groups)
            return
        if target is None or method is None:
            self._decisions["unjudged"].inc()
            log.info("catalog policy of %s/%s cannot judge %s: refused for %s",
                     self.topology, self.service, header.name[:100], user)
            raise Answered(f"catalog policy: {header.name[:100]} is not allowed under a policy",
                           self._refusal(method, header.name, header.seqid, user))
        args = decode_args(exchange.call, method)
        db_arg, table_arg, missing = target
        database = _argument(args, db_arg) or ""
        table = _argument(args, table_arg) if table_arg else None
        if self.engine.visible(user, groups, database, table or None):
            self._decisions["allowed"].inc()
            return
        self._decisions["denied"].inc()
        name = database if table is None else f"{database}.{table}"
        log.info("catalog policy of %s/%s hides %s from %s (%s)",
                 self.topology, self.service, name[:200], user, header.name)
        raise Answered(f"catalog policy: {name} not visible to {user}",
                       self._missing(method, header.name, header.seqid, missing, database, table))

    def _check_write(self, exchange: Exchange, method: MethodSchema, user: str, groups: frozenset[str]) -> None:
        header = exchange.header
        assert header is not None
        db_path, table_path, access = _WRITES[header.name]
        args = decode_args(exchange.call, method)
        database = _argument(args, db_path) or ""
        table = _argument(args, table_path) if table_path else None
        decision = self.engine.evaluate(user, groups, Resource(database, table or None), access)
        if decision.allowed:
            self._decisions["allowed"].inc()
            return
        self._decisions["denied"].inc()
        name = database if table is None else f"{database}.{table}"
        log.info("catalog policy of %s/%s denies %s %s to %s (%s)",
                 self.topology, self.service, access, name[:200], user, decision.reason)
        message = f"User {user} does not have privileges for {access.upper()} on {name}"
        raise Answered(f"catalog policy: {access} on {name} denied to {user} ({decision.reason})",
                       _exception_reply(method, header.name, header.seqid, "MetaException", message))

    async def on_reply(self, exchange: Exchange, reply: Reply) -> None:
        if reply.is_exception:
            return
        result = reply.result
        if result.success is None:
            return  # HMS answered with a declared exception
        user, groups = self._who(exchange)
        if reply.header.name in _OBJECT_LISTINGS:
            db_attr, table_attr = _OBJECT_LISTINGS[reply.header.name]
            items = list(result.success)
            shown = [item for item in items if self.engine.visible(
                user, groups, getattr(item, db_attr) or "", getattr(item, table_attr) or "")]
            self._hide(exchange, reply, result, items, shown)
            return
        db_arg = _LISTINGS[reply.header.name]
        names = list(result.success)
        if db_arg is None:
            visible = self.engine.visible_databases(user, groups, names)
        else:
            method = self.schema.methods[reply.header.name]
            database = getattr(decode_args(exchange.call, method), db_arg) or ""
            visible = self.engine.visible_tables(user, groups, database, names)
        self._hide(exchange, reply, result, names, visible)

    def _hide(self, exchange: Exchange, reply: Reply, result, items: list, shown: list) -> None:
        """Replace the listing ``items`` by ``shown`` in the reply, counting what was hidden."""
        hidden = len(items) - len(shown)
        if hidden:
            self._decisions["hidden"].inc(hidden)
            exchange.event.reason = f"catalog policy hid {hidden} of {len(items)}"
            result.success = shown
            reply.replace(result)

    def _missing(self, method: MethodSchema, name: str, seqid: int, how: str,
                 database: str, table: str | None) -> bytes:
        """HMS 2.3's own answer for a missing object (see the module docstring)."""
        if how == "internal_error":
            return BINARY.application_exception(name, seqid, f"Internal error processing {name}", INTERNAL_ERROR)
        message = database if how == "no_such_database" else f"{database}.{table} table not found"
        return _exception_reply(method, name, seqid, "NoSuchObjectException", message)

    def _refusal(self, method: MethodSchema | None, name: str, seqid: int, user: str) -> bytes:
        message = f"User {user} does not have privileges for {name}: the catalog policy of this service cannot judge it"
        return _exception_reply(method, name, seqid, "MetaException", message)


def _exception_reply(method: MethodSchema | None, name: str, seqid: int, struct_name: str,
                     message: str) -> bytes:
    """A REPLY carrying the declared exception ``struct_name`` with ``message``; a
    ``TApplicationException`` (INTERNAL_ERROR) when the method declares none."""
    declared = _declared(method, struct_name)
    if declared is None:
        return BINARY.application_exception(name, seqid, message, INTERNAL_ERROR)
    field, cls = declared
    result = method.result_class()  # type: ignore[union-attr, misc]
    setattr(result, field, cls(message=message))
    return encode_reply(name, seqid, result)
