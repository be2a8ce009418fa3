"""Catalog policy on the Thrift API (Apache Ranger's Hive model, :mod:`gateway.policy`): each user
sees only the databases, tables and columns a policy grants.

What HMS's own filter hook (``MetaStoreFilterHook``) does, done in front of HMS, for every read
method of the Hive 2.3 IDL that lists or names a database, table, partition, index or function:

* listings keep only the names the user may see (Ranger's ``_any`` access: some access on the
  object or on something below it); functions follow their database;
* a call naming an object the user may not see is answered exactly as HMS 2.3.10 answers for a
  missing object (measured per method, :data:`gateway.thrift.hive_methods.READS`), so that a refusal cannot be told
  from absence and cannot be used to probe for names; nothing reaches HMS;
* columns the user may not ``select`` are removed from tables, partitions, indexes, field lists,
  column statistics, key constraints and the column-bearing table properties
  (:mod:`gateway.policy.columns`; a ``list<Partition>`` reply by splicing its bytes,
  :mod:`gateway.hms_thrift.partition_splice`); partition keys stay (partition values and names carry them);
* writes need the matching Ranger access; ``alter_table`` and ``alter_partition(s)`` by a user
  who does not see every column are refused too (they would write the filtered columns back);
* a write that sets a storage location (a table's or partition's, or Iceberg's
  ``metadata_location``) needs Ranger's ``url`` permission on it, as the ``iceberg-rest``
  service asks (:mod:`gateway.hms_thrift.steps.placing`);
* methods naming no catalog object (:data:`~gateway.thrift.hive_methods.NEUTRAL`) pass; any other method is refused while a
  policy is attached (fail closed): a ``MetaException`` "does not have privileges" where the
  method declares one, else a ``TApplicationException``.

Which argument names what is :mod:`gateway.thrift.hive_methods`; what the user sees is one
:class:`~gateway.policy.view.CatalogView` per request; the replies written in place of HMS's
are :mod:`gateway.thrift.refusals`. A call's arguments are decoded once per request and kept
on ``exchange.args``. docs/security.md lists every method and what is checked.
"""

from __future__ import annotations

import logging
import struct
from typing import NoReturn

from gateway.observability import metrics
from gateway.hms_thrift.exchange import ThriftExchange, call_args
from gateway.pipeline.outcomes import Answered
from gateway.hms_thrift.partition_splice import PartitionSplice
from gateway.hms_thrift.reply import ThriftReply
from gateway.hms_thrift.step import ThriftStep
from gateway.pipeline.step import StepContext
from gateway.thrift.objects import encode_reply
from gateway.policy import Decision, PolicyEngine
from gateway.policy.columns import filter_result
from gateway.thrift.hive_methods import (
    COLUMN_REPLIES,
    LISTINGS,
    NEUTRAL,
    OBJECT_LISTINGS,
    PARTITION_LISTS,
    READS,
    REPLY_METHODS,
    SECOND_TABLE,
    WRITE_BACKS,
    WRITES,
    argument,
    check_paths,
    renamed_into,
    written_objects,
)
from gateway.hms_thrift.steps.placing import placing_refusal
from gateway.policy.view import CatalogView
from gateway.thrift.refusals import exception_reply, missing_reply
from gateway.thrift.schema import MethodSchema, ServiceSchema

log = logging.getLogger(__name__)


class CatalogPolicy(ThriftStep):
    """Enforces ``engine`` on one ``hms-thrift`` service (see the module docstring). Raises
    ``ValueError`` when ``schema``'s IDL lacks a method or argument the policy names."""

    name = "catalog-policy"
    reply_methods = REPLY_METHODS

    def __init__(self, topology: str, service: str, engine: PolicyEngine, schema: ServiceSchema):
        self.topology, self.service, self.engine, self.schema = topology, service, engine, schema
        check_paths(schema)
        self._splice = PartitionSplice(schema)
        #: The reply filter of each method whose reply the policy filters, by method family.
        self._reply_filters = {
            **{name: self._filter_result for name in (*OBJECT_LISTINGS, *COLUMN_REPLIES)},
            **{name: self._filter_names for name in LISTINGS},
            **{name: self._filter_partitions for name in PARTITION_LISTS},
        }
        self._decisions = {
            outcome: metrics.POLICY_DECISIONS.labels(topology=topology, service=service, outcome=outcome)
            for outcome in ("allowed", "denied", "hidden", "unjudged", "columns_hidden")
        }

    @classmethod
    def build(cls, ctx: StepContext) -> "CatalogPolicy | None":
        """The step of a service with ``policy_file`` (``ctx.policy``), None without one."""
        if ctx.policy is None:
            return None
        return cls(ctx.topology, ctx.config.path, ctx.policy, ctx.schema)

    def _view(self, exchange: ThriftExchange) -> CatalogView:
        if exchange.view is None:  # once per request: its decisions are cached for the request
            identity = exchange.identity
            assert identity is not None, "identity assertion runs first"
            exchange.view = CatalogView(self.engine, identity.user, identity.groups)
        return exchange.view  # type: ignore[return-value]

    def _args(self, exchange: ThriftExchange):
        assert exchange.header is not None
        return call_args(exchange, self.schema.methods[exchange.header.name])

    @staticmethod
    def _audit(exchange: ThriftExchange, view: CatalogView, decision: Decision, allowed: bool, access: str) -> None:
        """The audit line's policy fields, from the request's view (its counts so far)."""
        exchange.event.record_policy(view, "allowed" if allowed else "denied", access, decision.policy_id)

    def wants_reply(self, exchange: ThriftExchange) -> bool:
        """Whether this request's reply needs :meth:`on_reply`, from the request alone: False
        for a read of a table whose every column the user may see (the reply then streams).
        Asked after :meth:`on_call` (:meth:`Step.wants_reply`)."""
        header = exchange.header
        assert header is not None
        read = READS.get(header.name)
        if read is None or read.table is None or header.name in SECOND_TABLE:
            return header.name in self.reply_methods
        view = exchange.view  # on_call judged this read, and built the view, first
        if not isinstance(view, CatalogView):
            return True  # judged nothing: filter the reply rather than trust it
        args = call_args(exchange, self.schema.methods[header.name])
        return not view.all_columns(argument(args, read.db) or "", argument(args, read.table) or "")

    async def on_call(self, exchange: ThriftExchange) -> None:
        header = exchange.header
        assert header is not None
        name = header.name
        if name in LISTINGS or (name in OBJECT_LISTINGS and name not in READS) or name in NEUTRAL:
            return  # listings are judged on the reply
        method = self.schema.methods.get(name)
        view = self._view(exchange)
        if name in WRITES and method is not None:
            await self._check_write(exchange, method, view)
            return
        read = READS.get(name)
        user = view.user
        if read is None or method is None:
            self._decisions["unjudged"].inc()
            exchange.event.policy_decision = "denied"
            log.info("catalog policy of %s/%s cannot judge %s: refused for %s",
                     self.topology, self.service, name[:100], user)
            message = (f"User {user} does not have privileges for {name}: "
                       "the catalog policy of this service cannot judge it")
            raise Answered(f"catalog policy: {name[:100]} is not allowed under a policy",
                           exception_reply(method, name, header.seqid, "MetaException", message))
        args = call_args(exchange, method)
        database = argument(args, read.db) or ""
        table = (argument(args, read.table) or "") if read.table else None
        decision = view.decide("", database, table)
        assert decision is not None
        second = SECOND_TABLE.get(name)
        if decision.allowed and second is not None:
            other_db, other_table = (argument(args, p) for p in second)
            if other_db is not None or other_table is not None:
                decision = view.decide("", other_db or "", other_table or "")
                assert decision is not None
                if not decision.allowed:
                    database, table = other_db or "", other_table or ""
        self._audit(exchange, view, decision, decision.allowed, "_any")
        if decision.allowed:
            column = argument(args, read.column) if read.column else None
            if column is None or view.columns(database, table, [column]):
                self._decisions["allowed"].inc()
                return
            # a denied column's statistics: HMS's answer when it has none (an empty result)
            self._decisions["columns_hidden"].inc()
            exchange.event.policy_hidden = 1
            raise Answered(f"catalog policy: column {column[:100]} not visible to {user}",
                           encode_reply(name, header.seqid, method.result_class()))  # type: ignore[misc]
        self._decisions["denied"].inc()
        shown = database if table is None else f"{database}.{table}"
        log.info("catalog policy of %s/%s hides %s from %s (%s)",
                 self.topology, self.service, shown[:200], user, name)
        raise Answered(f"catalog policy: {shown} not visible to {user}", missing_reply(
            method, name, header.seqid, read.missing, database=database, table=table,
            index=argument(args, "index_name"), function=argument(args, "funcName")))

    async def _check_write(self, exchange: ThriftExchange, method: MethodSchema, view: CatalogView) -> None:
        header = exchange.header
        assert header is not None
        write = WRITES[header.name]
        args = call_args(exchange, method)
        objects = written_objects(write, args)
        for database, table in objects:
            decision = view.decide(write.access, database, table or None)
            assert decision is not None
            name = database if not table else f"{database}.{table}"
            allowed = decision.allowed
            message = f"User {view.user} does not have privileges for {write.access.upper()} on {name}"
            if allowed and header.name in WRITE_BACKS and not view.all_columns(database, table or ""):
                allowed = False  # what they would send back lacks the columns they cannot see
                message += ": some of its columns are hidden from this user"
            self._audit(exchange, view, decision, allowed, write.access)
            if not allowed:
                self._refuse(exchange, method, f"{write.access} on {name} denied to {view.user} ({decision.reason})",
                             message)
        target = renamed_into(write, args, objects[0])
        if target is not None:  # a rename: the target database receives a table
            decision = view.decide("create", target, None)
            assert decision is not None
            self._audit(exchange, view, decision, decision.allowed, "create")
            if not decision.allowed:
                self._refuse(exchange, method, f"create on {target} denied to {view.user} ({decision.reason})",
                             f"User {view.user} does not have privileges for CREATE on {target}")
        refusal = await placing_refusal(exchange.metastore, header.name, write, args, view, objects[0],
                                        exchange.identity)
        if refusal is not None:
            exchange.event.record_policy(view, "denied", "url")
            self._refuse(exchange, method, f"url rule: {refusal}", refusal)
        self._decisions["allowed"].inc()

    def _refuse(self, exchange: ThriftExchange, method: MethodSchema, reason: str, message: str) -> NoReturn:
        """Answer a refused write with the ``MetaException`` HMS's own authorizer raises."""
        header = exchange.header
        assert header is not None
        self._decisions["denied"].inc()
        log.info("catalog policy of %s/%s refuses %s: %s", self.topology, self.service, header.name, reason[:500])
        raise Answered(f"catalog policy: {reason[:500]}",
                       exception_reply(method, header.name, header.seqid, "MetaException", message))

    async def on_reply(self, exchange: ThriftExchange, reply: ThriftReply) -> None:
        if reply.is_exception:
            return
        name = reply.header.name
        if name in READS and not self.wants_reply(exchange):
            return  # every column visible: the reply is not even decoded
        filter_reply = self._reply_filters.get(name)
        if filter_reply is not None:
            filter_reply(exchange, reply, self._view(exchange))

    def _filter_partitions(self, exchange: ThriftExchange, reply: ThriftReply, view: CatalogView) -> None:
        """A ``list<Partition>`` reply loses the columns ``view`` hides by splicing its bytes
        (:mod:`gateway.hms_thrift.partition_splice`); decoded when it cannot be spliced."""
        spliced = self._splice.filter(reply.message, view)
        if spliced is None:
            self._filter_result(exchange, reply, view)
        elif view.hidden_columns:
            self._columns_hidden(exchange, view)
            reply.message = spliced

    def _filter_result(self, exchange: ThriftExchange, reply: ThriftReply, view: CatalogView) -> None:
        """A decoded reply keeps the objects (:data:`OBJECT_LISTINGS`) and the columns
        (:data:`COLUMN_REPLIES`) ``view`` shows."""
        name = reply.header.name
        result = reply.result
        if result.success is None:
            return  # HMS answered with a declared exception
        changed = False
        if name in OBJECT_LISTINGS:
            changed = self._filter_objects(exchange, result, view)
        if name in COLUMN_REPLIES:
            read = READS.get(name)
            named = (None, None)
            if read is not None:
                args = self._args(exchange)
                named = (argument(args, read.db), argument(args, read.table) if read.table else None)
            result.success = filter_result(view, result.success, named)
            if view.hidden_columns:
                self._columns_hidden(exchange, view)
                changed = True
        if changed:
            reply.replace(result)

    def _columns_hidden(self, exchange: ThriftExchange, view: CatalogView) -> None:
        self._decisions["columns_hidden"].inc(len(view.hidden_columns))
        exchange.event.policy_columns_hidden = len(view.hidden_columns)

    def _filter_names(self, exchange: ThriftExchange, reply: ThriftReply, view: CatalogView) -> None:
        """A name listing (``list<string>``) keeps the names the user may see, in order. When the
        policies decide alike for every name (:meth:`CatalogView.listing_verdict`), the reply is
        not decoded: kept as it is, or answered with an empty list. A name that is not UTF-8
        (thriftpy2 gives it as bytes) is judged as its surrogate-escaped text."""
        name = reply.header.name
        db_arg = LISTINGS[name]
        database = None if db_arg is None else (getattr(self._args(exchange), db_arg) or "")
        verdict = view.listing_verdict(database)
        count = None if verdict is None else _listing_count(reply.message)
        if count is not None:
            if self._count_hidden(exchange, count, 0 if verdict else count):
                reply.replace(self.schema.methods[name].result_class(success=[]))  # type: ignore[misc]
            return
        result = reply.result
        if result.success is None:
            return  # HMS answered with a declared exception

        def visible(names: list) -> list:
            if database is None:
                return view.visible_databases(names)
            return view.visible_tables(database, names)
        names = result.success
        try:
            shown = visible(names)
        except TypeError:  # a bytes name: the engine joins text
            text = [n.decode("utf-8", "surrogateescape") if isinstance(n, bytes) else n for n in names]
            original = dict(zip(text, names))
            shown = [original[n] for n in visible(text)]
        if self._hide(exchange, result, "success", names, shown):
            reply.replace(result)

    def _filter_objects(self, exchange: ThriftExchange, result, view: CatalogView) -> bool:
        path, db_attr, table_attr = OBJECT_LISTINGS[exchange.header.name]  # type: ignore[union-attr]
        holder_path, _, attr = path.rpartition(".")
        holder = argument(result, holder_path) if holder_path else result
        if holder is None or getattr(holder, attr) is None:
            return False
        items = list(getattr(holder, attr))
        if table_attr is None:
            shown = [i for i in items if view.visible(getattr(i, db_attr) or "")]
        else:
            shown = [i for i in items if view.visible(getattr(i, db_attr) or "", getattr(i, table_attr) or "")]
        return self._hide(exchange, holder, attr, items, shown)

    def _hide(self, exchange: ThriftExchange, holder, attr: str, items: list, shown: list) -> bool:
        """Replace the listing ``items`` (``holder.attr``) by ``shown``, counting what was hidden."""
        if not self._count_hidden(exchange, len(items), len(items) - len(shown)):
            return False
        setattr(holder, attr, shown)
        return True

    def _count_hidden(self, exchange: ThriftExchange, total: int, hidden: int) -> bool:
        """Record on the audit event and the metrics that a listing of ``total`` items loses
        ``hidden``; whether it loses any."""
        exchange.event.record_policy(self._view(exchange), "allowed")
        exchange.event.policy_hidden = hidden  # a listing decided whole is not counted by the view
        if not hidden:
            return False
        self._decisions["hidden"].inc(hidden)
        exchange.event.reason = f"catalog policy hid {hidden} of {total}"
        return True


def _listing_count(message: bytes) -> int | None:
    """How many names a strict-binary REPLY of a name listing carries, read from the header of
    its ``success`` field (0, ``list<string>``) without decoding them; None when the result
    holds something else (a declared exception)."""
    at = 12 + struct.unpack_from("!i", message, 4)[0]  # version and type, name, seqid
    if message[at:at + 4] != b"\x0f\x00\x00\x0b" or len(message) < at + 8:
        return None
    count = struct.unpack_from("!i", message, at + 4)[0]
    return count if count >= 0 else None
