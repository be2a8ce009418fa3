"""The one HMS lock helper (gateway/upstream/locks.py) and the gateway's table queue
(gateway/upstream/table_queue.py) against a fake HMS lock manager: queue order, the marks,
release on every exit path (errors, timeouts, cancellation while waiting and while the lock call
is in flight, a lost answer), and the release of requests whose holder is dead or expired. The
real HMS is in tests/integration/test_hms_locks.py and test_iceberg_crash.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from gateway.observability import metrics
from gateway.thrift.schema import load_schema
from gateway.upstream import locks, metastore, table_queue
from gateway.upstream.errors import UpstreamTimeout
from gateway.upstream.locks import Holder, HmsLock, LockNotGranted, Schedule, recover, this_process

IDL = metastore.idl_module(load_schema())
FAST = Schedule(check_min=0.001, check_max=0.002, wait=5.0, heartbeat=0.01, timeout=300.0, recover_every=0.0)


class FakeHMS:
    """HMS 2.3's lock queue in miniature: one EXCLUSIVE request per table granted in id order;
    ``check_lock`` and ``heartbeat`` set the request's heartbeat to ``now_ms``."""

    def __init__(self):
        self.upstream = object()
        self.idl = IDL
        self.identity = None
        self.now_ms = 10_000_000
        self.locks: dict[int, IDL.ShowLocksResponseElement] = {}
        self.next_id = 1
        self.calls: list[str] = []
        self.lock_gate: asyncio.Event | None = None  # holds lock() calls while cleared
        self.lose_answers = False

    def add(self, db: str, table: str, *, agent: str = "", host: str = "elsewhere", age_ms: int = 0,
            txnid: int = 0) -> int:
        lockid, self.next_id = self.next_id, self.next_id + 1
        self.locks[lockid] = IDL.ShowLocksResponseElement(
            lockid=lockid, dbname=db, tablename=table, state=IDL.LockState.WAITING, type=IDL.LockType.EXCLUSIVE,
            txnid=txnid, lastheartbeat=self.now_ms - age_ms, user="someone", hostname=host, agentInfo=agent)
        self._grant(lockid)
        return lockid

    def _grant(self, lockid: int):
        mine = self.locks[lockid]
        first = min(i for i, e in self.locks.items() if (e.dbname, e.tablename) == (mine.dbname, mine.tablename))
        if first == lockid:
            mine.state = IDL.LockState.ACQUIRED
        return mine.state

    async def lock(self, request):
        self.calls.append("lock")
        if self.lock_gate is not None:
            await self.lock_gate.wait()
        component = request.component[0]
        lockid = self.add(component.dbname, component.tablename, agent=request.agentInfo, host=request.hostname)
        self.locks[lockid].user = request.user
        state = self.locks[lockid].state
        if self.lose_answers:
            raise UpstreamTimeout("no answer")
        return IDL.LockResponse(lockid=lockid, state=state)

    async def check_lock(self, lockid):
        self.calls.append("check_lock")
        if lockid not in self.locks:
            raise IDL.NoSuchLockException(message=f"no lock {lockid}")
        self.locks[lockid].lastheartbeat = self.now_ms
        return IDL.LockResponse(lockid=lockid, state=self._grant(lockid))

    async def heartbeat(self, *, lockid):
        self.calls.append("heartbeat")
        if lockid not in self.locks:
            raise IDL.NoSuchLockException(message=f"no lock {lockid}")
        self.locks[lockid].lastheartbeat = self.now_ms

    async def unlock(self, lockid):
        self.calls.append(f"unlock {lockid}")
        if self.locks.pop(lockid, None) is None:
            raise IDL.NoSuchLockException(message=f"no lock {lockid}")

    async def call(self, method, rqst):
        assert method == "show_locks"
        self.calls.append("show_locks")
        return IDL.ShowLocksResponse(locks=[e for e in self.locks.values()
                                            if rqst.dbname in (None, e.dbname) and rqst.tablename in (None, e.tablename)])


def _lock(hms: FakeHMS, schedule: Schedule = FAST) -> HmsLock:
    return HmsLock(hms, [("db", "t")], kind="iceberg-rest", user="etl", schedule=schedule)


def _dead_gateway() -> str:
    """The agentInfo of a gateway process of this host that has exited."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    return replace(this_process(), pid=int(child.stdout)).agent_info("iceberg-rest", 1)


def _released(reason: str) -> float:
    return metrics.child(metrics.HMS_LOCKS_RELEASED, reason)._value.get()


def test_the_mark_names_the_process_within_hms_128_characters():
    me = this_process()
    text = me.agent_info("iceberg-rest", 7)
    assert text.startswith(f"hms-gateway iceberg-rest pid={os.getpid()} start=") and " req=7 " in text
    assert Holder.of(text, me.host) == me
    assert len(replace(me, host="h" * 300).agent_info("event-stream", 10**9)) == 128
    assert Holder.of("Iceberg HiveCatalog", me.host) is None and Holder.of(text, "") is None


def test_only_a_gone_process_of_this_host_and_pid_namespace_is_dead():
    me = this_process()
    assert not me.dead()
    assert replace(me, ticks=me.ticks + 1).dead()  # the pid came back as another process
    assert Holder.of(_dead_gateway(), me.host).dead()
    assert not replace(me, pid=1, host="another-pod").dead()  # cannot tell: the heartbeat rule applies
    assert not replace(me, pid=999_999_999, pidns=me.pidns + 1).dead()


async def test_a_request_waits_its_turn_then_holds_heartbeats_and_unlocks():
    hms = FakeHMS()
    first = hms.add("db", "t", agent="Iceberg", host="other")  # a live foreign holder

    async def commit():
        async with _lock(hms).held():
            while "heartbeat" not in hms.calls:
                await asyncio.sleep(0.001)

    task = asyncio.ensure_future(commit())
    while hms.calls.count("check_lock") < 3:
        await asyncio.sleep(0.001)
    assert not task.done()
    await hms.unlock(first)
    await task
    assert hms.locks == {}


async def test_held_releases_on_errors_and_on_cancellation():
    hms = FakeHMS()
    with pytest.raises(RuntimeError):
        async with _lock(hms).held():
            raise RuntimeError("the commit failed")
    assert hms.locks == {}
    body = asyncio.Event()

    async def commit():
        async with _lock(hms).held():
            body.set()
            await asyncio.sleep(3600)

    task = asyncio.ensure_future(commit())
    await body.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert hms.locks == {}


async def test_a_waiting_request_is_released_when_cancelled_or_when_its_wait_runs_out():
    hms = FakeHMS()
    holder = hms.add("db", "t", host="other")
    waiter = asyncio.ensure_future(_lock(hms).acquire())
    while "check_lock" not in hms.calls:
        await asyncio.sleep(0.001)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert list(hms.locks) == [holder]
    with pytest.raises(LockNotGranted, match="timed out"):
        await _lock(hms, replace(FAST, wait=0.01)).acquire()
    assert list(hms.locks) == [holder]


async def test_a_lock_call_cancelled_in_flight_is_unlocked_when_its_answer_comes():
    hms = FakeHMS()
    hms.lock_gate = asyncio.Event()
    waiter = asyncio.ensure_future(_lock(hms).acquire())
    while "lock" not in hms.calls:
        await asyncio.sleep(0.001)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    hms.lock_gate.set()  # HMS makes the request after all
    while hms.locks or not any(c.startswith("unlock") for c in hms.calls):
        await asyncio.sleep(0.001)
    assert hms.locks == {}


async def test_a_request_whose_answer_was_lost_is_found_by_its_mark_and_released():
    hms = FakeHMS()
    other = hms.add("db", "t", agent=this_process().agent_info("iceberg-rest", 10**6), host=this_process().host)
    hms.lose_answers = True
    with pytest.raises(UpstreamTimeout):
        await _lock(hms).acquire()
    assert list(hms.locks) == [other]  # only the request with the lost answer's exact mark


async def test_requests_ahead_whose_holder_is_dead_or_expired_are_released_and_counted():
    hms = FakeHMS()
    dead, expired = _released("dead"), _released("expired")
    hms.add("db", "t", agent=_dead_gateway(), host=this_process().host)  # SIGKILLed gateway of this host
    hms.add("db", "t", agent="Iceberg", host="other", age_ms=301_000)  # silent for more than 300 s
    await _lock(hms).acquire()
    assert [e.agentInfo.split(" pid=")[0] for e in hms.locks.values()] == ["hms-gateway iceberg-rest"]
    assert (_released("dead"), _released("expired")) == (dead + 1, expired + 1)


async def test_live_holders_transactions_and_requests_behind_are_never_released():
    hms = FakeHMS()
    fresh = hms.add("db", "t", agent="Iceberg", host="other", age_ms=299_000)  # heard of within the timeout
    in_txn = hms.add("db", "t", agent="Hive", host="other", age_ms=10**9, txnid=5)  # HMS times those out
    live = hms.add("db", "t", agent=this_process().agent_info("iceberg-rest", 1), host=this_process().host)
    with pytest.raises(LockNotGranted):
        await _lock(hms, replace(FAST, wait=0.05)).acquire()
    assert list(hms.locks) == [fresh, in_txn, live]


async def test_recover_releases_only_the_requests_of_dead_gateway_processes_of_this_host():
    hms = FakeHMS()
    hms.add("db", "a", agent=_dead_gateway(), host=this_process().host)
    live = hms.add("db", "b", agent=this_process().agent_info("iceberg-rest", 2), host=this_process().host)
    foreign = hms.add("db", "c", agent=_dead_gateway(), host="another-pod")
    assert await recover(hms) == 1
    assert sorted(hms.locks) == [live, foreign]


async def test_the_table_queue_is_first_come_first_served_within_a_process():
    order, waited = [], []

    async def commit(n: int):
        async with table_queue.queued("db", "t") as behind:
            order.append(n)
            waited.append(behind)
            await asyncio.sleep(0)

    await asyncio.gather(*(commit(n) for n in range(20)))
    assert order == list(range(20))
    assert waited == [False] + [True] * 19  # all but the first had a commit ahead of them
    assert table_queue._local == {}


async def test_the_table_queue_spans_processes_and_dies_with_its_holder(tmp_path, monkeypatch):
    monkeypatch.setattr(table_queue, "_shared", [])
    table_queue.share(tmp_path)
    path = tmp_path / "table-queue" / table_queue._key("db", "t")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(3600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        entered = asyncio.Event()

        async def commit():
            async with table_queue.queued("db", "t") as behind:
                assert behind  # another worker's commit was ahead
                entered.set()

        waiter = asyncio.ensure_future(commit())
        cancelled = asyncio.ensure_future(table_queue.queued("db", "t").__aenter__())
        await asyncio.sleep(0.05)
        assert not entered.is_set()  # another worker holds the table's turn
        cancelled.cancel()
        holder.kill()  # the kernel drops a dead process's flock
        holder.wait()
        await asyncio.wait_for(waiter, 30)
        assert entered.is_set()
    finally:
        holder.kill()
        holder.wait()
