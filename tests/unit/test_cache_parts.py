"""The metadata cache's parts (issue 24): byte bound, TTL, generations shared through a file,
per-user keys, invalidation by events, by writes and by a resync, the refusal without a
notification log. The HMS is a fake answering the notification calls through the real
metastore client; lookups and stores are the service's own calls."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.cache import generations as gens
from gateway.cache.methods import ALL, CACHED, UNLOGGED_WRITES, check_paths, touched_by_event, touched_by_write
from gateway.cache.reads import MetadataCache
from gateway.cache.settings import CacheOptions
from gateway.cache.store import OVERHEAD, Entry, ReplyStore
from gateway.cache.writes import note_write
from gateway.config import ConfigError
from gateway.observability.audit import AuditEvent
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.providers.authentication.base import RESPONSE_HEADERS
from gateway.providers.identity import Identity
from gateway.thrift.binary import CALL, MessageHeader, read_message_header
from gateway.thrift.objects import decode_args, encode_reply
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import encode_call, idl_module

SCHEMA = load_schema()
IDL = idl_module(SCHEMA)


class FakeHMS:
    """Answers get_config_value, get_current_notificationEventId and get_next_notification
    from ``events`` (NotificationEvent objects); ``current`` overrides the newest id."""

    def __init__(self, listener: str = "io.hmsgateway.listener.NotificationLogListener"):
        self.listener, self.events, self.current = listener, [], None

    def add(self, event_type: str, db: str | None, table: str | None, event_id: int | None = None) -> None:
        event_id = event_id or (self.events[-1].eventId + 1 if self.events else 1)
        self.events.append(IDL.NotificationEvent(eventId=event_id, eventTime=0, eventType=event_type,
                                                 dbName=db, tableName=table, message="{}"))

    async def call(self, request: bytes, **_) -> bytes:
        header, _ = read_message_header(request)
        method = SCHEMA.methods[header.name]
        args = decode_args(request, method)
        if header.name == "get_config_value":
            value = self.listener if "listeners" in args.name else ""
        elif header.name == "get_current_notificationEventId":
            newest = self.current if self.current is not None else (self.events[-1].eventId if self.events else 0)
            value = IDL.CurrentNotificationEventId(eventId=newest)
        elif header.name == "get_next_notification":
            value = IDL.NotificationEventResponse(
                events=[e for e in self.events if e.eventId > args.rqst.lastEvent][: args.rqst.maxEvents])
        else:
            raise AssertionError(header.name)
        return encode_reply(header.name, header.seqid, method.result_class(success=value))


def exchange(method: str, user: str = "alice", groups=(), **args) -> ThriftExchange:
    call = encode_call(SCHEMA, method, args, seqid=7)
    return ThriftExchange(make_mocked_request("POST", "/"), AuditEvent("r", None),
                    identity=Identity(user, None, frozenset(groups)),
                    header=MessageHeader(method, CALL, 7), call=call)


def table_reply(name: str = "t") -> bytes:
    result = SCHEMA.methods["get_table"].result_class(success=IDL.Table(tableName=name, dbName="d"))
    return encode_reply("get_table", 0, result)


def status(ex: ThriftExchange) -> str:
    return dict(ex.request[RESPONSE_HEADERS])["Cache-Status"]


async def started(hms: FakeHMS, **options) -> MetadataCache:
    cache = MetadataCache(CacheOptions(enabled=True, **options), hms, SCHEMA, ("t", "s"))
    assert await cache.follower.check_log()
    await cache.follower.poll_once()
    return cache


def read(cache: MetadataCache, **kw):
    ex = exchange("get_table", **{"dbname": "d", "tbl_name": "t", **kw})
    return ex, cache.lookup(ex)


def test_the_paths_the_cache_names_are_in_the_idl():
    check_paths(SCHEMA)
    assert {"get_all_databases", "get_databases", "get_table", "get_table_objects_by_name",
            "get_all_tables", "get_tables", "get_partition_names", "get_partitions",
            "get_partitions_by_names"} <= set(CACHED)


def test_no_cached_read_is_changed_by_a_write_hms_logs_no_event_for():
    """The follower learns of other pods' and clients' writes from HMS's log only: a reply that
    an unlogged write (``alter_database``, column statistics) changes would outlive it."""
    changed = {read for reads in UNLOGGED_WRITES.values() for read in reads}
    assert changed, UNLOGGED_WRITES
    assert not changed & set(CACHED), changed & set(CACHED)
    assert set(UNLOGGED_WRITES) <= set(SCHEMA.methods)
    assert changed <= set(SCHEMA.methods)


def test_store_is_bounded_in_bytes_least_recently_used_first():
    evicted = []
    store = ReplyStore(64 * 1024, lambda reason, count: evicted.append((reason, count)))
    reply = bytes(10_000)
    for key in (b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"):
        assert store.put(key, Entry(reply, (), (), 1e9, 0))
        store.get(b"a")  # a stays the most recently used
    assert store.bytes <= store.max_bytes
    assert store.get(b"a") is not None and store.get(b"b") is None
    assert store.bytes == len(store) * (1 + 10_000 + OVERHEAD)
    assert evicted and all(reason == "size" for reason, _ in evicted)
    assert not store.put(b"big", Entry(bytes(20_000), (), (), 1e9, 0))  # over a quarter of the bound


def test_generations_are_shared_through_the_file(tmp_path):
    path = gens.create_shared(tmp_path)
    first, second = gens.attach_shared(path), gens.attach_shared(path)
    try:
        slot = gens.table_slot("D", "T")
        assert slot == gens.table_slot("d", "t")  # HMS's names are case-insensitive
        first.bump([slot, gens.EPOCH])
        assert second.read((slot, gens.EPOCH)) == (1, 1)
    finally:
        gens._current.clear()
        first.close()
        second.close()


def test_what_writes_and_events_touch():
    args = decode_args(encode_call(SCHEMA, "alter_table", {
        "dbname": "d", "tbl_name": "old", "new_tbl": IDL.Table(tableName="new", dbName="e")}),
        SCHEMA.methods["alter_table"])
    slots = set(touched_by_write("alter_table", args))
    assert {gens.table_slot("d", "old"), gens.listing_slot("d"), gens.table_slot("e", "new"),
            gens.listing_slot("e")} == slots
    assert touched_by_write("lock", None) == ()
    assert touched_by_write("exchange_partition", object()) == ALL  # cannot tell: everything
    assert set(touched_by_event("DROP_DATABASE", "d", None, {})) == {
        gens.database_slot("d"), gens.listing_slot("d"), gens.DATABASES}
    assert touched_by_event("OPEN_TXN", None, None, {}) == ()
    assert touched_by_event("CREATE_FUNCTION", None, None, {}) == ALL
    renamed = set(touched_by_event("ALTER_TABLE", "d", "new", {"db": "d", "table": "old"}))
    assert gens.table_slot("d", "old") in renamed and gens.table_slot("d", "new") in renamed


async def test_hit_then_stale_after_an_event_of_its_table_only():
    hms = FakeHMS()
    hms.add("CREATE_TABLE", "d", "t")
    cache = await started(hms)
    ex, lookup = read(cache)
    assert lookup.reply is None and lookup.result == "miss"
    cache.stored(ex, lookup, table_reply())
    assert status(ex) == "hms-gateway; fwd=miss; stored" and ex.event.cache == "miss"
    ex, lookup = read(cache)
    assert lookup.reply == table_reply() and status(ex) == "hms-gateway; hit" and ex.event.cache == "hit"
    other_ex, other = read(cache, tbl_name="u")
    cache.stored(other_ex, other, table_reply("u"))
    hms.add("ADD_PARTITION", "d", "t")
    await cache.follower.poll_once()
    ex, lookup = read(cache)
    assert lookup.reply is None and lookup.result == "stale"
    assert read(cache, tbl_name="u")[1].result == "hit"


async def test_an_id_that_went_back_or_a_gap_drops_everything():
    hms = FakeHMS()
    hms.add("CREATE_TABLE", "d", "t")
    cache = await started(hms)
    for change in ("reset", "trimmed"):
        ex, lookup = read(cache)
        cache.stored(ex, lookup, table_reply())
        assert read(cache)[1].result == "hit"
        if change == "reset":
            hms.events, hms.current = [], 0
        else:
            hms.current = None
            hms.add("CREATE_TABLE", "other", "x", event_id=5)  # 1..4 are gone
        await cache.follower.poll_once()
        assert read(cache)[1].result == "miss"  # the resync emptied the store


async def test_a_write_through_the_gateway_drops_its_table_at_once():
    cache = await started(FakeHMS())
    ex, lookup = read(cache)
    cache.stored(ex, lookup, table_reply())
    note_write(encode_call(SCHEMA, "add_partitions_req", {
        "request": IDL.AddPartitionsRequest(dbName="D", tblName="T", parts=[], ifNotExists=False)}))
    assert read(cache)[1].result == "stale"
    note_write(encode_call(SCHEMA, "get_table", {"dbname": "d", "tbl_name": "t"}))  # a read: nothing
    ex, lookup = read(cache)
    cache.stored(ex, lookup, table_reply())
    assert read(cache)[1].result == "hit"


async def test_ttl_is_a_safety_net():
    cache = await started(FakeHMS(), ttl_seconds=0.05, poll_interval_seconds=60)
    ex, lookup = read(cache)
    cache.stored(ex, lookup, table_reply())
    await asyncio.sleep(0.1)
    assert read(cache)[1].result == "miss"


async def test_no_hit_while_the_log_is_not_followed():
    # A long interval and then none, not a short one and a sleep: on a loaded machine 50 ms
    # passed between the first poll and the store, and nothing was stored.
    cache = await started(FakeHMS(), poll_interval_seconds=60)
    ex, lookup = read(cache)
    cache.stored(ex, lookup, table_reply())
    assert read(cache)[1].result == "hit"
    cache.follower.interval = 0  # the last poll is now older than the bound: it could not be kept
    ex, lookup = read(cache)
    assert lookup is None and status(ex) == "hms-gateway; fwd=bypass"
    cache.follower.interval = 60
    await cache.follower.poll_once()
    assert read(cache)[1].result == "hit"


@pytest.mark.parametrize("per_user", [False, True])
async def test_per_user_keys(per_user):
    cache = await started(FakeHMS(), per_user=per_user)
    ex, lookup = read(cache, user="alice")
    cache.stored(ex, lookup, table_reply())
    assert read(cache, user="alice")[1].result == "hit"
    assert read(cache, user="bob")[1].result == ("miss" if per_user else "hit")


async def test_without_a_notification_log_it_refuses_unless_staleness_is_allowed():
    hms = FakeHMS(listener="")
    cache = MetadataCache(CacheOptions(enabled=True), hms, SCHEMA, ("t", "s"),
                          lambda reason: ConfigError("topologies/t.yaml", "services[0].options.cache", reason))
    with pytest.raises(ConfigError, match="no readable notification log.*max_staleness_seconds"):
        await cache.start()
    cache = MetadataCache(CacheOptions(enabled=True, max_staleness_seconds=5, ttl_seconds=600), hms, SCHEMA,
                          ("t", "s"))
    await cache.start()
    assert cache.follower is None and cache.ttl == 5
    ex, lookup = read(cache)
    cache.stored(ex, lookup, table_reply())
    assert read(cache)[1].result == "hit"
    await cache.close()


async def test_methods_it_never_caches_are_forwarded_and_said_so():
    cache = await started(FakeHMS())
    ex = exchange("get_config_value", name="x", defaultValue="")
    assert cache.lookup(ex) is None and status(ex) == "hms-gateway; fwd=method"


def test_the_audit_line_says_hit_or_miss_only_on_a_caching_service():
    import json

    event = AuditEvent("r", "10.0.0.1", method="get_table")
    assert "cache" not in json.loads(event.line("ok", 200))
    event.cache = "hit"
    assert json.loads(event.line("ok", 200))["cache"] == "hit"


class TableHMS:
    """Answers ``get_table`` with a table named as asked, counting calls; ``fail`` raises."""

    def __init__(self):
        self.calls, self.fail = 0, None

    async def call(self, request: bytes, **_) -> bytes:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        args = decode_args(request, SCHEMA.methods["get_table"])
        return table_reply(args.tbl_name)


async def test_a_gateway_client_reads_through_a_cache_session():
    """The Glue and Iceberg REST kinds' path: MetastoreClient asks the request's session."""
    from gateway.cache.session import CacheSession, cache_status
    from gateway.upstream.errors import UpstreamUnavailable
    from gateway.upstream.metastore import MetastoreClient

    hms = FakeHMS()
    cache = await started(hms)
    upstream = TableHMS()
    alice = Identity("alice", None, frozenset())
    first = CacheSession(cache)
    client = MetastoreClient(upstream, SCHEMA, identity=alice, reads=first)
    assert (await client.get_table("d", "t")).tableName == "t"
    assert (await client.acting_as(alice).get_table("d", "t")).tableName == "t"  # the session follows
    assert upstream.calls == 1 and first.results == ["miss", "hit"]
    assert (first.summary(), cache_status(first)) == ("miss", "hms-gateway; fwd=miss; stored")
    second = CacheSession(cache)
    assert (await MetastoreClient(upstream, SCHEMA, reads=second).get_table("d", "t")).tableName == "t"
    assert upstream.calls == 1 and cache_status(second) == "hms-gateway; hit"
    # a failed upstream call keeps nothing and raises as without the cache
    upstream.fail = UpstreamUnavailable("down")
    failed = CacheSession(cache)
    with pytest.raises(UpstreamUnavailable):
        await MetastoreClient(upstream, SCHEMA, reads=failed).get_table("d", "u")
    assert cache_status(failed) == "hms-gateway; fwd=miss" and len(cache.store) == 1
    # no cached read at all (the token endpoint, a write's session): bypass; no session: method
    assert cache_status(CacheSession(cache)) == "hms-gateway; fwd=bypass"
    assert cache_status(None) == "hms-gateway; fwd=method"
