"""The gateway's own metastore client (``gateway.upstream.metastore``) against a fake HMS on a
loopback port: Apache Thrift's generated ``Processor`` (``thrift --gen py``, nothing of the
gateway's) answering over the gateway's real pool and failover, so typed results, declared
exceptions, ``set_ugi``, seqid checks, deadlines and the ``origin`` metric label are all those
of the real path. The change feed's poller over the same client is at the end."""

from __future__ import annotations

import struct

import pytest
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException as ApacheApplicationException
from thrift.transport import TTransport

from gateway.upstream.notification_poller import NotificationPoller
from gateway.observability import metrics
from gateway.thrift.objects import encode_reply
from gateway.providers.identity import Identity
from gateway.thrift.binary import BinaryMessageScanner
from gateway.thrift.schema import load_schema
from gateway.upstream import metastore
from gateway.upstream.errors import UpstreamBadReply, UpstreamTimeout
from gateway.upstream.failover import Upstream
from gateway.upstream.metastore import (
    AlreadyExistsException,
    MetastoreClient,
    NoSuchLockException,
    NoSuchObjectException,
    TApplicationException,
    encode_call,
)
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import ScriptedServer

SCHEMA = load_schema()
IDL = metastore.idl_module(SCHEMA)


class Handler:
    """What the fake HMS does per method, in Apache's generated types; records every call as
    ``(connection number, method, arguments…)``."""

    def __init__(self, ttypes):
        self.t = ttypes
        self.calls: list[tuple] = []
        self.connection = 0
        self.locks: dict[int, str] = {}

    def set_ugi(self, user_name, group_names):
        self.calls.append((self.connection, "set_ugi", user_name, list(group_names)))
        return list(group_names)

    def get_all_databases(self):
        self.calls.append((self.connection, "get_all_databases"))
        return ["default", "sales"]

    def get_table(self, dbname, tbl_name):
        self.calls.append((self.connection, "get_table", dbname, tbl_name))
        if (dbname, tbl_name) != ("sales", "orders"):
            raise self.t.NoSuchObjectException(f"{dbname}.{tbl_name} table not found")
        cols = [self.t.FieldSchema("id", "bigint", None)]
        sd = self.t.StorageDescriptor(cols=cols, location="file:/w/orders", parameters={})
        return self.t.Table(tableName="orders", dbName="sales", owner="etl", sd=sd,
                            partitionKeys=[], parameters={"metadata_location": "s3://m/1.json"})

    def create_database(self, database):
        self.calls.append((self.connection, "create_database", database.name))
        raise self.t.AlreadyExistsException(f"Database {database.name} already exists")

    def alter_table_with_environment_context(self, dbname, tbl_name, new_tbl, environment_context):
        self.calls.append((self.connection, "alter_table_with_environment_context", dbname, tbl_name,
                           new_tbl.parameters, environment_context.properties))

    def lock(self, rqst):
        self.calls.append((self.connection, "lock", rqst.user, [(c.type, c.level, c.dbname, c.tablename)
                                                               for c in rqst.component]))
        if rqst.component[0].dbname == "broken":
            raise RuntimeError("no transaction tables")  # Apache's processor: INTERNAL_ERROR
        lockid = len(self.locks) + 1
        self.locks[lockid] = "held"
        return self.t.LockResponse(lockid=lockid, state=self.t.LockState.ACQUIRED)

    def check_lock(self, rqst):
        self.calls.append((self.connection, "check_lock", rqst.lockid))
        if rqst.lockid not in self.locks:
            raise self.t.NoSuchLockException(f"No such lock lockid:{rqst.lockid}")
        return self.t.LockResponse(lockid=rqst.lockid, state=self.t.LockState.ACQUIRED)

    def heartbeat(self, ids):
        self.calls.append((self.connection, "heartbeat", ids.lockid, ids.txnid))

    def unlock(self, rqst):
        self.calls.append((self.connection, "unlock", rqst.lockid))
        if self.locks.pop(rqst.lockid, None) is None:
            raise self.t.NoSuchLockException(f"No such lock lockid:{rqst.lockid}")

    def shutdown(self):
        self.calls.append((self.connection, "shutdown"))

    def get_current_notificationEventId(self):
        self.calls.append((self.connection, "get_current_notificationEventId"))
        raise RuntimeError("User etl is not allowed to perform this API call")


class ApacheHMS(ScriptedServer):
    """Strict-binary calls on a TCP port, answered by Apache's ``Processor`` over
    :class:`Handler`. ``mode``: ``ok``; ``wrong-seqid`` (replies carry another seqid); ``silent``
    (never answers anything but ``set_ugi``)."""

    def __init__(self, apache_hms, mode: str = "ok"):
        self.handler = Handler(apache_hms.ttypes)
        self.processor = apache_hms.service.Processor(self.handler)
        self.mode = mode
        self.writers = []
        self.connections = 0
        self.message_types: list[int] = []

    async def _serve(self, reader, writer):
        self.writers.append(writer)
        self.connections += 1
        number = self.connections
        buffered = b""
        try:
            while True:
                scanner = BinaryMessageScanner(1 << 20)
                end = scanner.feed(buffered) if buffered else None
                while end is None:
                    chunk = await reader.read(65536)
                    if not chunk:
                        return
                    buffered += chunk
                    end = scanner.feed(chunk)
                call, buffered = buffered[:end], buffered[end:]
                self.message_types.append(call[3])
                name_end = 12 + struct.unpack_from("!i", call, 4)[0]
                if self.mode == "silent" and call[8:name_end - 4] != b"set_ugi":
                    continue
                out = TTransport.TMemoryBuffer()
                self.handler.connection = number
                self.processor.process(TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(call)),
                                       TBinaryProtocol.TBinaryProtocol(out))
                reply = out.getvalue()
                if self.mode == "wrong-seqid" and reply:
                    seqid = struct.unpack_from("!i", reply, name_end - 4)[0]
                    reply = reply[:name_end - 4] + struct.pack("!i", seqid ^ 1) + reply[name_end:]
                writer.write(reply)
                await writer.drain()
        except ConnectionError:
            pass


def client_of(server: ApacheHMS, *, timeout: float = 10.0, identity=None) -> MetastoreClient:
    pool = UpstreamPool(server.url, timeout=timeout, connect_timeout=5)
    return MetastoreClient(Upstream([pool], max_failover_attempts=1), SCHEMA, identity=identity)


def count(label: str, origin: str, outcome: str) -> float:
    return metrics.REGISTRY.get_sample_value(
        "hms_gateway_upstream_requests_total",
        {"upstream": label, "origin": origin, "outcome": outcome}) or 0.0


async def test_a_call_returns_the_idl_s_typed_object(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        client = client_of(hms)
        table = await client.call("get_table", dbname="sales", tbl_name="orders")
        assert isinstance(table, IDL.Table)
        assert (table.dbName, table.tableName, table.sd.cols[0].name) == ("sales", "orders", "id")
        assert table.parameters == {"metadata_location": "s3://m/1.json"}
        assert await client.get_all_databases() == ["default", "sales"]
        assert (await client.get_table("sales", "orders")).owner == "etl"
        # the gateway's own connections: no set_ugi
        assert [c[1] for c in hms.handler.calls] == ["get_table", "get_all_databases", "get_table"]
        await client.upstream.close()


async def test_declared_exceptions_are_raised_as_the_idl_s_classes(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        client = client_of(hms)
        with pytest.raises(NoSuchObjectException) as missing:
            await client.get_table("sales", "nope")
        assert missing.value.message == "sales.nope table not found"
        assert isinstance(missing.value, IDL.NoSuchObjectException)
        with pytest.raises(AlreadyExistsException, match="sales already exists"):
            await client.call("create_database", database=IDL.Database(name="sales"))
        with pytest.raises(NoSuchLockException):
            await client.check_lock(99)
        await client.upstream.close()


async def test_an_internal_error_is_a_tapplicationexception(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        client = client_of(hms)
        component = IDL.LockComponent(type=IDL.LockType.EXCLUSIVE, level=IDL.LockLevel.TABLE,
                                      dbname="broken", tablename="t")
        with pytest.raises(TApplicationException) as caught:
            await client.lock(IDL.LockRequest(component=[component], user="etl", hostname="gw"))
        assert caught.value.type == ApacheApplicationException.INTERNAL_ERROR
        await client.upstream.close()


async def test_hive_catalog_s_commit_calls(apache_hms):
    """lock, check_lock, heartbeat, alter_table_with_environment_context, unlock: what
    Iceberg's HiveCatalog sends for one commit, with the structs it sends."""
    async with ApacheHMS(apache_hms) as hms:
        client = client_of(hms)
        component = IDL.LockComponent(type=IDL.LockType.EXCLUSIVE, level=IDL.LockLevel.TABLE,
                                      dbname="sales", tablename="orders")
        locked = await client.lock(IDL.LockRequest(component=[component], user="etl", hostname="gw"))
        assert (locked.lockid, locked.state) == (1, IDL.LockState.ACQUIRED)
        assert (await client.check_lock(1)).state == IDL.LockState.ACQUIRED
        assert await client.heartbeat(lockid=1) is None
        table = await client.get_table("sales", "orders")
        table.parameters["metadata_location"] = "s3://m/2.json"
        await client.alter_table("sales", "orders", table, {"DO_NOT_UPDATE_STATS": "true"})
        await client.unlock(1)
        with pytest.raises(NoSuchLockException):
            await client.unlock(1)
        assert [c[1:] for c in hms.handler.calls] == [
            ("lock", "etl", [(IDL.LockType.EXCLUSIVE, IDL.LockLevel.TABLE, "sales", "orders")]),
            ("check_lock", 1), ("heartbeat", 1, None), ("get_table", "sales", "orders"),
            ("alter_table_with_environment_context", "sales", "orders",
             {"metadata_location": "s3://m/2.json"}, {"DO_NOT_UPDATE_STATS": "true"}),
            ("unlock", 1), ("unlock", 1)]
        await client.upstream.close()


async def test_calls_act_as_the_given_user_by_set_ugi(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        own = client_of(hms)
        alice = Identity("alice", None, frozenset({"b", "a"}))
        await own.acting_as(alice).get_all_databases()
        await own.acting_as(alice).get_all_databases()  # the same pooled connection
        await own.get_all_databases()  # the gateway's own: another connection, no set_ugi
        await own.call("get_all_databases", identity=Identity("bob", None))
        as_alice = client_of(hms, identity=alice)
        await as_alice.call("get_all_databases", identity=None)  # the gateway's own again
        assert hms.handler.calls[:5] == [
            (1, "set_ugi", "alice", ["a", "b"]), (1, "get_all_databases"), (1, "get_all_databases"),
            (2, "get_all_databases"),
            (3, "set_ugi", "bob", [])]
        assert hms.handler.calls[6][1:] == ("get_all_databases",)
        assert not any(c[1] == "set_ugi" for c in hms.handler.calls[6:])
        await own.upstream.close()
        await as_alice.upstream.close()


async def test_a_reply_with_another_seqid_is_refused(apache_hms):
    async with ApacheHMS(apache_hms, mode="wrong-seqid") as hms:
        client = client_of(hms)
        with pytest.raises(UpstreamBadReply, match="another call"):
            await client.get_all_databases()
        await client.upstream.close()


async def test_a_silent_hms_is_a_timeout(apache_hms):
    async with ApacheHMS(apache_hms, mode="silent") as hms:
        client = client_of(hms, timeout=0.2)
        with pytest.raises(UpstreamTimeout, match="within 0.2 s"):
            await client.get_all_databases()
        await client.upstream.close()


async def test_calls_are_counted_as_the_gateway_s_own(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        client = client_of(hms)
        label = client.upstream.endpoints[0].label
        before = count(label, "gateway", "ok"), count(label, "client", "ok")
        await client.get_all_databases()
        with pytest.raises(NoSuchObjectException):  # HMS answered: the call itself went well
            await client.get_table("sales", "nope")
        await client.upstream.call(encode_call(SCHEMA, "get_all_databases", {}))  # as the handler does
        assert count(label, "gateway", "ok") == before[0] + 2
        assert count(label, "client", "ok") == before[1] + 1
        await client.upstream.close()


async def test_a_oneway_method_is_sent_as_oneway_and_not_awaited(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        client = client_of(hms)
        assert SCHEMA.methods["shutdown"].oneway
        assert await client.call("shutdown") is None
        assert await client.get_all_databases() == ["default", "sales"]  # a new connection
        assert hms.message_types == [4, 1]  # ONEWAY, then CALL
        await client.upstream.close()


class Never:
    async def call(self, *args, **kwargs):
        raise AssertionError("nothing may be sent")


async def test_a_call_the_idl_does_not_declare_is_refused_before_sending():
    client = MetastoreClient(Never(), SCHEMA)
    with pytest.raises(ValueError, match="no method 'get_tabel'"):
        await client.call("get_tabel", dbname="sales")
    with pytest.raises(TypeError):
        await client.call("get_table", dbname="sales", table="orders")


def test_no_idl_method_has_an_argument_named_identity():
    """``MetastoreClient.call``'s ``identity`` keyword can never hide an IDL argument."""
    assert not [m.name for m in SCHEMA.methods.values()
                if any(f.name == "identity" for f in m.args.fields.values())]


async def test_fields_an_hms_3_or_4_adds_are_skipped():
    """A newer HMS's ``Table`` carries fields the 2.3 IDL does not know (3.x ``catName`` is
    field 17); thriftpy2 skips them and the rest decodes."""
    result = SCHEMA.methods["get_table"].result_class
    table = IDL.Table(tableName="orders", dbName="sales", parameters={})
    reply = encode_reply("get_table", 0, result(success=table))
    # the Table struct's STOP is the byte before the result struct's own
    extra = b"\x0b\x00\x11" + struct.pack("!i", 4) + b"hive" + b"\x0c\x00\x63\x00"
    newer = reply[:-2] + extra + reply[-2:]

    got = await MetastoreClient(Replying(newer), SCHEMA).get_table("sales", "orders")
    assert (got.dbName, got.tableName) == ("sales", "orders")


async def test_the_poller_reads_through_the_client_and_reports_a_refusal(apache_hms):
    async with ApacheHMS(apache_hms) as hms:
        pool = UpstreamPool(hms.url, timeout=10)
        poller = NotificationPoller(Upstream([pool]), SCHEMA)
        # Apache's processor answers an exception the IDL does not declare for the method
        # as HMS does: a TApplicationException
        with pytest.raises(UpstreamBadReply, match="TApplicationException"):
            await poller.current_id()
        assert poller.calls == 1
        await pool.close()


class Replying:
    """An upstream that answers every call with ``reply``."""

    def __init__(self, reply: bytes):
        self.reply = reply

    async def call(self, message, **_):
        return self.reply


async def test_a_reply_without_result_or_exception_is_missing_result():
    empty = encode_reply("get_table", 0, SCHEMA.methods["get_table"].result_class())
    with pytest.raises(TApplicationException) as caught:
        await MetastoreClient(Replying(empty), SCHEMA).get_table("sales", "orders")
    assert caught.value.type == ApacheApplicationException.MISSING_RESULT
    # a void method's empty reply is its success
    void = encode_reply("unlock", 0, SCHEMA.methods["unlock"].result_class())
    assert await MetastoreClient(Replying(void), SCHEMA).unlock(1) is None


async def test_bytes_that_do_not_decode_are_a_bad_reply():
    with pytest.raises(UpstreamBadReply, match="get_table reply that does not decode"):
        await MetastoreClient(Replying(b"\x80\x01\x00\x02garbage"), SCHEMA).get_table("s", "t")
