"""The broker publisher's HMS lock and offset (gateway/events/leader.py) against a scripted fake
client (the real HMS is in tests/integration/test_replicas.py): acquisition through a WAITING
standby, loss on NoSuchLockException, loss when no heartbeat succeeds within the lease (counted
from when the last good heartbeat was sent), and the offset parameter."""

from __future__ import annotations

import asyncio

import pytest

from gateway.events.leader import LockLost, OffsetStore, PublisherLock, lock_name
from gateway.thrift.schema import load_schema
from gateway.upstream import metastore
from gateway.upstream.errors import UpstreamUnavailable

IDL = metastore.idl_module(load_schema())


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeClient:
    """Answers lock/check_lock from ``states``; heartbeat runs ``beats`` (a list of callables or
    exceptions, consumed in order), then raises ``failing`` if set, else succeeds;
    ``get_database``/``create_database``/``alter_database`` on ``db``."""

    idl = IDL
    identity = None

    def __init__(self, clock: Clock, states=(), beats=()):
        self.upstream = object()
        self.clock, self.states, self.beats = clock, list(states), list(beats)
        self.calls: list[str] = []
        self.db = None
        self.failing: Exception | None = None

    async def lock(self, request):
        self.calls.append("lock")
        assert request.component[0].type == IDL.LockType.EXCLUSIVE
        return IDL.LockResponse(lockid=7, state=self.states.pop(0))

    async def check_lock(self, lockid):
        self.calls.append("check_lock")
        return IDL.LockResponse(lockid=lockid, state=self.states.pop(0))

    async def heartbeat(self, *, lockid):
        self.calls.append("heartbeat")
        if self.beats:
            beat = self.beats.pop(0)
            if isinstance(beat, Exception):
                raise beat
            beat()
        elif self.failing is not None:
            raise self.failing

    async def unlock(self, lockid):
        self.calls.append("unlock")

    async def get_database(self, name):
        if self.db is None:
            raise IDL.NoSuchObjectException(message=name)
        return self.db

    async def call(self, method, **args):
        self.calls.append(method)
        if method == "show_locks":  # the helper's look for requests of dead gateway processes
            return IDL.ShowLocksResponse(locks=[])
        self.db = args["database"] if method == "create_database" else args["db"]


def _lock(client, clock, **times) -> PublisherLock:
    settings = {"heartbeat_seconds": 0.01, "lease_seconds": 0.05, "check_seconds": 0.001, **times}
    return PublisherLock(client, "hms_gateway", "publisher_x", clock=clock, **settings)


async def test_a_standby_waits_then_acquires_with_heartbeats_meanwhile():
    clock = Clock()
    client = FakeClient(clock, [IDL.LockState.WAITING, IDL.LockState.WAITING, IDL.LockState.ACQUIRED])
    lock = _lock(client, clock)
    await lock.acquire()
    assert lock.valid() and lock.lockid == 7
    assert client.calls == ["show_locks", "lock", "check_lock", "check_lock"]  # check_lock heartbeats
    clock.now += 0.05
    assert not lock.valid()  # the lease counts from before the acquiring call


async def test_a_lock_hms_no_longer_knows_is_lost_at_once():
    clock = Clock()
    client = FakeClient(clock, [IDL.LockState.ACQUIRED], beats=[IDL.NoSuchLockException(message="gone")])
    lock = _lock(client, clock, heartbeat_seconds=0.001, lease_seconds=60)
    await lock.acquire()
    with pytest.raises(LockLost, match="no longer holds"):
        await lock.keep()
    assert not lock.valid() and lock.lockid is None


async def test_failed_heartbeats_end_the_lease_counted_from_the_last_good_send():
    clock = Clock()

    def slow_success():
        clock.now += 5  # the reply took 5 s: the lease still counts from the send

    client = FakeClient(clock, [IDL.LockState.ACQUIRED], beats=[slow_success])
    client.failing = UpstreamUnavailable("HMS unreachable")
    lock = _lock(client, clock, heartbeat_seconds=0.001, lease_seconds=8)
    await lock.acquire()
    sent = clock.now
    keeper = asyncio.ensure_future(lock.keep())
    while client.calls.count("heartbeat") < 4:  # the good one (valid until sent + 8), then failures
        await asyncio.sleep(0.001)
    assert lock.valid() and clock.now == sent + 5
    clock.now = sent + 8
    with pytest.raises(LockLost, match="within 8 s"):
        await asyncio.wait_for(keeper, 5)
    assert not lock.valid()


async def test_a_cancelled_standby_releases_its_waiting_request():
    clock = Clock()
    client = FakeClient(clock, [IDL.LockState.WAITING] * 1000)
    lock = _lock(client, clock)
    standby = asyncio.ensure_future(lock.acquire())
    while "check_lock" not in client.calls:
        await asyncio.sleep(0.001)
    standby.cancel()
    with pytest.raises(asyncio.CancelledError):
        await standby
    assert client.calls.count("unlock") == 1 and lock.lockid is None


async def test_release_unlocks_once():
    clock = Clock()
    client = FakeClient(clock, [IDL.LockState.ACQUIRED])
    lock = _lock(client, clock)
    await lock.acquire()
    await lock.release()
    await lock.release()
    assert client.calls.count("unlock") == 1 and not lock.valid()


async def test_offset_is_a_database_parameter_created_on_first_use():
    client = FakeClient(Clock())
    store = OffsetStore(client, "hms_gateway", "hms-gateway.publisher.default/events.offset")
    assert await store.read() is None
    assert client.calls == ["create_database"]
    await store.write(42)
    assert await store.read() == 42
    client.db.parameters["hms-gateway.publisher.default/events.offset"] = "4x"
    with pytest.raises(ValueError, match="hms_gateway parameter hms-gateway.publisher.default/events.offset"):
        await store.read()


def test_lock_names_are_hms_names_and_distinct():
    a, b = lock_name("default", "a/b"), lock_name("default", "a_b")
    assert a != b and a.startswith("publisher_default_a_b_")
    assert all(c.isalnum() or c == "_" for c in a) and a == a.lower()
