"""The gateway's own metastore client: typed calls to HMS with thriftpy2 objects.

Every call the gateway makes to HMS for itself (the change feed's poller, the Glue kind, the
Iceberg REST kind's commit protocol) goes through :class:`MetastoreClient`, over the service's
:class:`~gateway.upstream.failover.Upstream`: the same pools, deadlines, failover, ``set_ugi``
identities and seqid checks as a client's proxied call, counted with ``origin="gateway"`` in
``hms_gateway_upstream_requests_total``. Arguments are the IDL's (:mod:`gateway.thrift.schema`,
thriftpy2 objects for structs); a call is encoded as a strict-binary ``CALL`` and its ``REPLY``
decoded as thriftpy2's ``<method>_result``, the way thriftpy2's own ``TClient`` does
(``thriftpy2/thrift.py`` ``_recv``):

* the success value is returned (None for ``void``);
* a declared exception (``NoSuchObjectException``, ``MetaException``…) is raised as the IDL's
  thriftpy2 exception object; the bundled IDL's classes are importable from this module
  (``from gateway.upstream.metastore import NoSuchObjectException``), another IDL's are
  attributes of :attr:`MetastoreClient.idl`;
* a ``TApplicationException`` (HMS's ``Internal error processing <method>``), or a reply with
  neither a success value nor an exception, is raised as thriftpy2's ``TApplicationException``;
* transport trouble is an :class:`~gateway.upstream.errors.UpstreamError`, and a reply that does
  not decode with the IDL's classes an :class:`~gateway.upstream.errors.UpstreamBadReply`.

Replies from HMS 3.x/4.x decode too: thriftpy2 skips fields the 2.3 IDL does not know. A
list-bucketed table's ``skewedColValueLocationMaps`` (which thriftpy2 cannot hold, see
:mod:`gateway.thrift.lenient`) is left out: such a reply is read with the lenient classes.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TApplicationException, TException, TMessageType
from thriftpy2.transport import TMemoryBuffer

from gateway.observability.metrics import ORIGIN_GATEWAY
from gateway.thrift.objects import decode_struct, lenient_class
from gateway.providers.identity import Identity
from gateway.thrift.binary import EXCEPTION, read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import MethodSchema, SchemaKeyed, ServiceSchema, load_schema
from gateway.upstream.errors import UpstreamBadReply
from gateway.thrift.hive_methods import is_read_only

#: The exception classes the bundled Hive 2.3 IDL declares, importable from this module.
IDL_EXCEPTIONS = (
    "AlreadyExistsException", "ConfigValSecurityException", "IndexAlreadyExistsException",
    "InvalidInputException", "InvalidObjectException", "InvalidOperationException",
    "InvalidPartitionException", "MetaException", "NoSuchLockException", "NoSuchObjectException",
    "NoSuchTxnException", "TxnAbortedException", "TxnOpenException", "UnknownDBException",
    "UnknownPartitionException", "UnknownTableException",
)

__all__ = ["MetastoreClient", "TApplicationException", "TException", "decode_result",
           "encode_call", "idl_module", *IDL_EXCEPTIONS]

_OWN = object()  # MetastoreClient.call without ``identity``: the client's own


def _find_module(schema: ServiceSchema) -> ModuleType:
    for method in schema.methods.values():  # fb303's come first, from the included IDL's module
        module = sys.modules[method.args_class.__module__]  # type: ignore[union-attr]
        if hasattr(module, schema.name):
            return module
    raise KeyError(f"no thriftpy2 module defines {schema.name}")


#: The thriftpy2 module ``schema`` was loaded from: its structs and exception classes.
idl_module: SchemaKeyed[ModuleType] = SchemaKeyed(_find_module)


def __getattr__(name: str) -> type:
    # The bundled IDL's exception classes, loaded on first use rather than at import (~0.3 s).
    if name in IDL_EXCEPTIONS:
        return getattr(idl_module(load_schema()), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _method(schema: ServiceSchema, method: str) -> MethodSchema:
    found = schema.methods.get(method)
    if found is None:
        raise ValueError(f"the IDL has no method {method!r}")
    return found


def encode_call(schema: ServiceSchema, method: str, args: dict[str, Any], seqid: int = 0) -> bytes:
    """The strict-binary ``CALL`` (``ONEWAY`` for a oneway method) of ``method`` with ``args``
    (IDL argument name → value, thriftpy2 objects for structs).

    Raises ``ValueError`` for a method the IDL does not have, ``TypeError`` for an argument it
    does not declare, and thriftpy2's errors (``TypeError``, ``struct.error``…) for a value
    that does not fit its declared type.
    """
    spec = _method(schema, method)
    return _encode(spec, method, spec.args_class(**args), seqid)  # type: ignore[misc]


def _encode(spec: MethodSchema, method: str, call_args: Any, seqid: int) -> bytes:
    buffer = TMemoryBuffer()
    proto = TBinaryProtocol(buffer, strict_write=True)
    proto.write_message_begin(method, TMessageType.ONEWAY if spec.oneway else TMessageType.CALL, seqid)
    call_args.write(proto)
    proto.write_message_end()
    return buffer.getvalue()


def decode_result(schema: ServiceSchema, method: str, reply: bytes) -> Any:
    """The success value of the strict-binary ``reply`` to ``method`` (None for ``void``).

    Raises the declared exception the reply carries (a thriftpy2 object of ``schema``'s IDL),
    ``TApplicationException`` for an EXCEPTION message or a reply without a result, and
    :class:`UpstreamBadReply` for bytes that do not decode.
    """
    spec = _method(schema, method)
    try:
        header, _ = read_message_header(reply)
        if header.type == EXCEPTION:
            raise decode_struct(reply, TApplicationException)
        try:
            result = decode_struct(reply, spec.result_class)  # type: ignore[arg-type]
        except ProtocolError:  # a list-bucketed table: read without its skew location maps
            result = decode_struct(reply, lenient_class(spec.result_class))  # type: ignore[arg-type]
    except ProtocolError as exc:
        raise UpstreamBadReply(f"HMS sent a {method} reply that does not decode: {exc.reason}") from None
    declared = result.thrift_spec
    for fid in sorted(declared):
        value = getattr(result, declared[fid][1])
        if fid and value is not None:
            raise value  # never from the lenient classes: only a success value needs them
    if 0 not in declared:
        return None
    if result.success is None:
        raise TApplicationException(TApplicationException.MISSING_RESULT,
                                    f"{method} failed: unknown result")
    return result.success


class MetastoreClient:
    """Typed HMS calls through ``upstream`` (a :class:`~gateway.upstream.failover.Upstream`),
    as ``identity`` (``set_ugi`` user and groups; None: the gateway's own connections, which
    send no ``set_ugi``) unless a call names another.

    ``schema`` defaults to the bundled Hive 2.3 IDL. Calls of methods that only read
    (:func:`~gateway.thrift.hive_methods.is_read_only`) may be retried on another upstream after
    a failure; the others only when they were never sent.
    """

    def __init__(self, upstream, schema: ServiceSchema | None = None, *,
                 identity: Identity | None = None, origin: str = ORIGIN_GATEWAY, reads=None):
        self.upstream = upstream
        self.schema = schema or load_schema()
        self.identity = identity
        self.origin = origin
        #: The request's :class:`~gateway.cache.session.CacheSession` reads are asked of
        #: (None: every call goes to HMS).
        self.reads = reads
        #: The thriftpy2 module of the IDL: its structs (``client.idl.LockRequest``) and
        #: exception classes.
        self.idl = idl_module(self.schema)

    def acting_as(self, identity: Identity | None) -> MetastoreClient:
        """A client on the same upstream and IDL whose calls act as ``identity``."""
        return MetastoreClient(self.upstream, self.schema, identity=identity, origin=self.origin,
                               reads=self.reads)

    async def call(self, method: str, /, *, identity: Any = _OWN, **args: Any) -> Any:
        """``method(**args)`` as the IDL declares it; its success value (None for ``void``).

        ``identity`` (keyword, never an IDL argument name: a test checks) overrides the
        client's for this call; None means the gateway's own connections. With :attr:`reads`
        set, a cached read is answered from the metadata cache (decoded as HMS's reply). Raises what
        :func:`encode_call` and :func:`decode_result` raise, and ``UpstreamError`` subclasses
        (unavailable, timeout, bad or mismatched reply, identity refused) from the upstream.
        """
        spec = _method(self.schema, method)
        call_args = spec.args_class(**args)  # type: ignore[misc]
        message = _encode(spec, method, call_args, 0)
        oneway = spec.oneway
        acting_as = self.identity if identity is _OWN else identity

        def forward():
            return self.upstream.call(message, expect_reply=not oneway, identity=acting_as,
                                      read_only=is_read_only(method), origin=self.origin)

        if oneway:
            await forward()
            return None
        if self.reads is not None:
            arguments = memoryview(message)[read_message_header(message)[1]:]
            reply = await self.reads.call(method, call_args, arguments, acting_as, forward)
        else:
            reply = await forward()
        return decode_result(self.schema, method, reply)

    # --- thin typed helpers for what the gateway's kinds call ----------------------------------

    async def get_all_databases(self) -> list[str]:
        """The names of all databases."""
        return await self.call("get_all_databases")

    async def get_database(self, name: str):
        """The ``Database``; raises ``NoSuchObjectException``, ``MetaException``."""
        return await self.call("get_database", name=name)

    async def get_table(self, db: str, table: str):
        """The ``Table``; raises ``NoSuchObjectException``, ``MetaException``."""
        return await self.call("get_table", dbname=db, tbl_name=table)

    async def alter_table(self, db: str, table: str, new_table, properties: dict[str, str] | None = None) -> None:
        """``alter_table_with_environment_context``: replace ``db.table`` by ``new_table`` (a
        ``Table``), with ``properties`` as the ``EnvironmentContext`` (Iceberg's HiveCatalog
        sends ``DO_NOT_UPDATE_STATS=true``). Raises ``InvalidOperationException``,
        ``MetaException``."""
        context = self.idl.EnvironmentContext(properties=dict(properties)) if properties is not None else None
        await self.call("alter_table_with_environment_context", dbname=db, tbl_name=table,
                        new_tbl=new_table, environment_context=context)

    async def lock(self, request):
        """``lock(LockRequest)`` → ``LockResponse`` (``lockid``, ``state``: ``LockState``).
        Raises ``NoSuchTxnException``, ``TxnAbortedException``; an HMS without transaction
        support answers ``TApplicationException``."""
        return await self.call("lock", rqst=request)

    async def check_lock(self, lockid: int):
        """``check_lock`` → ``LockResponse``. Raises ``NoSuchLockException``,
        ``NoSuchTxnException``, ``TxnAbortedException``."""
        return await self.call("check_lock", rqst=self.idl.CheckLockRequest(lockid=lockid))

    async def unlock(self, lockid: int) -> None:
        """Release ``lockid``. Raises ``NoSuchLockException``, ``TxnOpenException``."""
        await self.call("unlock", rqst=self.idl.UnlockRequest(lockid=lockid))

    async def heartbeat(self, *, lockid: int | None = None, txnid: int | None = None) -> None:
        """Keep a lock (or transaction) alive. Raises ``NoSuchLockException``,
        ``NoSuchTxnException``, ``TxnAbortedException``."""
        await self.call("heartbeat", ids=self.idl.HeartbeatRequest(lockid=lockid, txnid=txnid))

    async def current_notification_id(self) -> int:
        """HMS's newest notification event id (``get_current_notificationEventId``)."""
        return (await self.call("get_current_notificationEventId")).eventId

    async def next_notifications(self, after: int, max_events: int) -> list:
        """``NotificationEvent`` objects with id > ``after``, at most ``max_events``, oldest
        first (``get_next_notification``)."""
        request = self.idl.NotificationEventRequest(lastEvent=after, maxEvents=max_events)
        return (await self.call("get_next_notification", rqst=request)).events or []
