"""One HMS lock's life, for every lock the gateway takes (table and view commits, multi-table
transactions, the broker publisher's leader lock): ``lock`` → ``check_lock`` while ``WAITING`` →
``heartbeat`` while held → ``unlock`` on every exit path, and the recovery of locks whose holder
is dead. HMS 2.3's rules it relies on (``TxnHandler``):

* locks are granted in queue order: a ``WAITING`` request blocks every later one, so a request
  nobody checks any more blocks a table as surely as a held lock;
* ``check_lock`` and ``heartbeat`` set the request's ``hl_last_heartbeat`` to the database's
  clock; housekeeping (``performTimeOuts``, run by ``AcidHouseKeeperService`` when
  ``hive.compactor.initiator.on`` is true) deletes requests outside a transaction whose last
  heartbeat is older than ``hive.txn.timeout``, ``WAITING`` ones included;
* ``unlock`` takes any lock id outside a transaction, whoever asked for it.

**Marking.** Each request's ``agentInfo`` (``HIVE_LOCKS.HL_AGENT_INFO``, 128 characters) names
the gateway, the kind, and the process: ``hms-gateway iceberg-rest pid=42 start=<boot>.<pidns>.<ticks>
req=7 host=<name>``. ``start`` is the kernel's boot id (8 hex digits), the pid namespace's inode
and the process's start time in clock ticks since boot (``/proc/<pid>/stat``): a pid that
comes back (pid 1 of every container start, a recycled pid) is a different ``start``, so a
live process is never mistaken for its dead predecessor. ``req`` numbers the process's
requests: a ``lock`` call whose answer was lost is found again by its exact ``agentInfo``.

**Recovery** (:meth:`HmsLock.acquire`, and :func:`recover` at a process's first lock): a
request is released by another when

* it is the gateway's, made on this host in this boot and pid namespace, and its process is
  gone (no such pid, or one started at another time): ``reason="dead"``;
* it stands before ours in the queue, outside a transaction, and its last heartbeat is older
  than ``hive.txn.timeout`` (``timeout``) by HMS's own clock (our request's heartbeat, just
  set by ``check_lock``, is "now"): HMS's rule says it is dead, and its housekeeping deletes
  it at its next run: ``reason="expired"``.

Each release is logged and counted (``hms_gateway_hms_locks_released_total{reason}``).
docs/operations.md ("HMS locks") argues why neither can take a lock from a live holder.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache

from thriftpy2.thrift import TApplicationException

from gateway.observability import metrics
from gateway.upstream.errors import UpstreamConnectFailed, UpstreamError

log = logging.getLogger(__name__)

__all__ = ["Holder", "HmsLock", "LockNotGranted", "LockRefused", "Schedule", "recover", "this_process", "to_the_end"]

AGENT = "hms-gateway"
_AGENT_INFO_MAX = 128  # HIVE_LOCKS.HL_AGENT_INFO varchar(128)
_AGENT = re.compile(r"^hms-gateway (\S+) pid=(\d+) start=([0-9a-f]{1,8})\.(\d+)\.(\d+) req=\d+")



class LockRefused(Exception):
    """HMS refused the request (no transaction support, an aborted transaction) or answered a
    state other than ``ACQUIRED``/``WAITING``."""


class LockNotGranted(Exception):
    """The request was still ``WAITING`` when the wait ran out (it has been released)."""


# --- who holds a request ------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time, clock ticks since boot); None: no process."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    try:  # the command name (field 2) is in parentheses and may hold spaces
        return int(stat.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Holder:
    """A process as its requests name it: host name, pid, kernel boot id (8 hex digits), pid
    namespace inode, start time (clock ticks since boot)."""

    host: str
    pid: int
    boot: str
    pidns: int
    ticks: int

    def agent_info(self, kind: str, request: int) -> str:
        """The ``agentInfo`` of request number ``request`` of the service kind ``kind``, at most
        128 characters."""
        text = (f"{AGENT} {kind} pid={self.pid} start={self.boot}.{self.pidns}.{self.ticks} "
                f"req={request} host={self.host}")
        return text[:_AGENT_INFO_MAX]

    @classmethod
    def of(cls, agent_info: str | None, hostname: str | None) -> Holder | None:
        """The gateway process that made a request (``show_locks``' ``agentInfo`` and
        ``hostname``), or None when another client made it."""
        found = _AGENT.match(agent_info or "")
        if found is None or not hostname:
            return None
        return cls(hostname, int(found[2]), found[3], int(found[4]), int(found[5]))

    def dead(self) -> bool:
        """Whether this process has certainly ended: it ran on this host and this boot, in this
        pid namespace, and its pid is gone or belongs to a process started at another time.
        False when this process cannot tell (another host, container or boot is not judged:
        the heartbeat rule covers it)."""
        me = this_process()
        if (self.host, self.boot, self.pidns) != (me.host, me.boot, me.pidns):
            return False
        return _start_ticks(self.pid) != self.ticks


@cache
def this_process() -> Holder:
    """This process as its requests name it (computed once; a forked child calls
    :func:`this_process.cache_clear`)."""
    boot = (_read("/proc/sys/kernel/random/boot_id") or "0").strip().replace("-", "")[:8] or "0"
    try:
        pidns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pidns = 0
    pid = os.getpid()
    return Holder(socket.gethostname(), pid, boot, pidns, _start_ticks(pid) or 0)


os.register_at_fork(after_in_child=this_process.cache_clear)


# --- the schedule ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """Times, in seconds: ``check_min``/``check_max`` the first and the largest pause between
    ``check_lock`` calls while ``WAITING`` (doubling); ``wait`` how long a request may wait
    (None: until cancelled); ``heartbeat`` between heartbeats while held; ``timeout`` HMS's
    ``hive.txn.timeout``; ``recover_every`` between looks at the requests ahead while waiting."""

    check_min: float = 0.02
    check_max: float = 0.25
    wait: float | None = 60.0
    heartbeat: float = 60.0
    timeout: float = 300.0
    recover_every: float = 1.0


# --- one request ----------------------------------------------------------------------------

_requests = itertools.count(1)
#: unlock calls still running after their caller was cancelled (kept from the collector).
_background: set[asyncio.Task] = set()
#: upstreams whose dead requests this process already looked for (:func:`recover`).
_recovered: set[int] = set()


def _behind(coro) -> asyncio.Task:
    task = asyncio.ensure_future(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def to_the_end(task: asyncio.Future) -> None:
    """Await ``task`` to its end even if the caller is cancelled meanwhile (then re-raise the
    cancellation): an unlock must not be cut off by the cancellation it serves. ``task``'s
    own exception is raised."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller hears of
        raise asyncio.CancelledError
    task.result()


async def _unlock(client, lockid: int, what: str) -> bool:
    """``unlock``; False (logged) when HMS could not be told: it expires the request itself."""
    idl = client.idl
    try:
        await client.unlock(lockid)
        return True
    except idl.NoSuchLockException:
        return True  # already gone (expired, or released by another)
    except Exception as exc:  # noqa: BLE001 - HMS down, a transaction's lock: HMS's timeout rules
        log.warning("HMS lock %d (%s): unlock failed: %s", lockid, what, exc)
        return False


async def _show_locks(client, db: str | None = None, table: str | None = None) -> list:
    request = client.idl.ShowLocksRequest(dbname=db, tablename=table)
    return (await client.call("show_locks", rqst=request)).locks or []


async def _release_others(client, elements, reason: str, why: Callable[[object], str]) -> int:
    released = 0
    for element in {e.lockid: e for e in elements}.values():
        log.warning("released HMS lock %d on %s.%s (%s, user %s, host %s, agent %r): %s",
                    element.lockid, element.dbname, element.tablename, element.state, element.user,
                    element.hostname, element.agentInfo, why(element))
        if await _unlock(client, element.lockid, f"{reason} holder"):
            metrics.child(metrics.HMS_LOCKS_RELEASED, reason).inc()
            released += 1
    return released


async def recover(client) -> int:
    """Release every request a dead gateway process of this host left (``reason="dead"``);
    how many. HMS errors are logged, not raised."""
    try:
        elements = await _show_locks(client)
    except Exception as exc:  # noqa: BLE001 - recovery is best effort; waiting covers the rest
        log.warning("looking for HMS locks of dead gateway processes failed: %s", exc)
        return 0
    dead = [e for e in elements if not e.txnid and (h := Holder.of(e.agentInfo, e.hostname)) and h.dead()]
    return await _release_others(client, dead, "dead", lambda e: "its gateway process is gone")


class HmsLock:
    """One EXCLUSIVE request on the tables ``objects`` (``(db, table)`` pairs) made by ``client``
    (a :class:`~gateway.upstream.metastore.MetastoreClient`) for the service kind ``kind``
    (``iceberg-rest``, ``event-stream``), as user ``user``, timed by ``schedule``.

    Use :meth:`held` (acquire, heartbeat, release), or the steps :meth:`request`, :meth:`check`,
    :meth:`heartbeat`, :meth:`release` for a holder with its own loop (the broker publisher).
    ``lockid`` is the request's id while HMS has it."""

    def __init__(self, client, objects: Sequence[tuple[str, str]], *, kind: str, user: str,
                 schedule: Schedule = Schedule(), clock: Callable[[], float] = time.monotonic):
        self.client, self.objects, self.kind, self.user = client, list(objects), kind, user
        self.schedule = schedule
        self.lockid: int | None = None
        self._clock = clock
        self._looked = 0.0

    def __repr__(self) -> str:
        names = ",".join(f"{db}.{table}" for db, table in self.objects)
        return f"HmsLock({names}, {self.lockid})"

    def _lock_request(self, agent_info: str):
        idl = self.client.idl
        components = [idl.LockComponent(type=idl.LockType.EXCLUSIVE, level=idl.LockLevel.TABLE,
                                        dbname=db, tablename=table) for db, table in self.objects]
        return idl.LockRequest(component=components, user=self.user, hostname=this_process().host,
                               agentInfo=agent_info)

    async def request(self):
        """Send ``lock``; the ``LockState``. Raises :class:`LockRefused`, ``UpstreamError`` and
        HMS's ``MetaException``. Cancelled or failed with the answer unknown, the request HMS
        may have made is released when it is known (the answer, or its ``agentInfo``)."""
        idl = self.client.idl
        upstream = id(getattr(self.client, "upstream", self.client))
        if upstream not in _recovered:  # a process's first lock on this HMS
            _recovered.add(upstream)
            await recover(self.client)
        agent_info = this_process().agent_info(self.kind, next(_requests))
        self._looked = self._clock()
        call = asyncio.ensure_future(self.client.lock(self._lock_request(agent_info)))
        try:
            response = await asyncio.shield(call)
        except asyncio.CancelledError:
            call.add_done_callback(lambda done: self._orphaned(done, agent_info))
            raise
        except (idl.NoSuchTxnException, idl.TxnAbortedException, TApplicationException) as exc:
            raise LockRefused(f"HMS refused the lock of {self}: {getattr(exc, 'message', exc)}") from None
        except (UpstreamError, OSError, TimeoutError) as exc:
            if not isinstance(exc, UpstreamConnectFailed):  # sent: HMS may hold a request
                await to_the_end(_behind(self._sweep(agent_info)))
            raise
        self.lockid = response.lockid
        return response.state

    def _orphaned(self, call: asyncio.Future, agent_info: str) -> None:
        if call.cancelled() or call.exception() is not None:
            _behind(self._sweep(agent_info))
        else:
            _behind(_unlock(self.client, call.result().lockid, f"{self}, its caller cancelled"))

    async def _sweep(self, agent_info: str) -> None:
        """Release the request with ``agent_info`` if HMS made it (the answer was lost)."""
        db, table = self.objects[0]
        try:
            mine = [e for e in await _show_locks(self.client, db, table) if e.agentInfo == agent_info]
        except Exception as exc:  # noqa: BLE001 - HMS's timeout rules then
            log.warning("HMS lock request %r: looking for it after a lost answer failed: %s", agent_info, exc)
            return
        for lockid in {e.lockid for e in mine}:
            await _unlock(self.client, lockid, f"{agent_info}, answer lost")

    async def check(self):
        """``check_lock`` (HMS heartbeats a waiting request with it); the ``LockState``. While
        ``WAITING``, every ``recover_every`` s the requests ahead are examined and the dead or
        expired ones released (module docstring). Raises HMS's ``NoSuchLockException`` (our
        request expired: :attr:`lockid` is None then), ``UpstreamError``."""
        assert self.lockid is not None
        idl = self.client.idl
        try:
            state = (await self.client.check_lock(self.lockid)).state
        except (idl.NoSuchLockException, idl.NoSuchTxnException, idl.TxnAbortedException):
            self.lockid = None
            raise
        if state == idl.LockState.WAITING and self._clock() - self._looked >= self.schedule.recover_every:
            self._looked = self._clock()
            await self._release_blockers()
        return state

    async def _release_blockers(self) -> None:
        dead, expired = [], []
        for db, table in self.objects:
            try:
                elements = await _show_locks(self.client, db, table)
            except Exception as exc:  # noqa: BLE001 - keep waiting; HMS's own timeout still applies
                log.warning("%r: show_locks failed: %s", self, exc)
                return
            mine = [e for e in elements if e.lockid == self.lockid]
            if not mine:
                return
            now = max(e.lastheartbeat for e in mine)  # HMS's clock, set by our check_lock
            for element in elements:
                if element.lockid >= self.lockid or element.txnid:
                    continue  # behind us, or a transaction's (HMS times transactions out)
                holder = Holder.of(element.agentInfo, element.hostname)
                if holder is not None and holder.dead():
                    dead.append(element)
                elif element.lastheartbeat and now - element.lastheartbeat > self.schedule.timeout * 1000:
                    expired.append(element)
        await _release_others(self.client, dead, "dead", lambda e: "its gateway process is gone")
        await _release_others(
            self.client, [e for e in expired if e.lockid not in {d.lockid for d in dead}], "expired",
            lambda e: f"no heartbeat for more than hive.txn.timeout ({self.schedule.timeout:g} s)")

    async def heartbeat(self) -> None:
        """``heartbeat``. Raises HMS's ``NoSuchLockException`` (the lock expired: :attr:`lockid`
        is None then), ``UpstreamError``."""
        assert self.lockid is not None
        idl = self.client.idl
        try:
            await self.client.heartbeat(lockid=self.lockid)
        except (idl.NoSuchLockException, idl.NoSuchTxnException, idl.TxnAbortedException):
            self.lockid = None
            raise

    async def release(self) -> None:
        """``unlock``, completed even when the caller is cancelled meanwhile; no-op when HMS
        has no request of ours. Failures are logged (HMS's timeout then applies)."""
        lockid, self.lockid = self.lockid, None
        if lockid is not None:
            await to_the_end(_behind(_unlock(self.client, lockid, repr(self))))

    async def acquire(self) -> None:
        """Request, then check with back-off until ``ACQUIRED``. Raises :class:`LockNotGranted`
        after ``schedule.wait`` s, :class:`LockRefused`, ``UpstreamError``, HMS's exceptions; on
        every exception (cancellation included) the request is released first."""
        idl, schedule = self.client.idl, self.schedule
        started = self._clock()
        try:
            state = await self.request()
            pause = schedule.check_min
            while state == idl.LockState.WAITING:
                if schedule.wait is not None and self._clock() - started >= schedule.wait:
                    raise LockNotGranted(f"timed out after {self._clock() - started:.1f} s waiting "
                                         f"for the lock on {', '.join(f'{d}.{t}' for d, t in self.objects)}")
                await asyncio.sleep(pause)
                pause = min(pause * 2, schedule.check_max)
                state = await self.check()
            if state != idl.LockState.ACQUIRED:
                raise LockRefused(f"could not lock {self}: lock state {state}")
        except BaseException:
            await self.release()
            raise

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.schedule.heartbeat)
            try:
                await self.heartbeat()
            except Exception:  # noqa: BLE001 - the holder's own calls will tell whether HMS is gone
                log.warning("%r: heartbeat failed", self, exc_info=True)
                if self.lockid is None:
                    return

    @asynccontextmanager
    async def held(self) -> AsyncIterator[int]:
        """Acquire, heartbeat every ``schedule.heartbeat`` s while the body runs, release on
        every exit. Yields the lock id; raises as :meth:`acquire`."""
        await self.acquire()
        lockid = self.lockid
        assert lockid is not None
        keeper = asyncio.create_task(self._keep(), name=f"hms-lock-{lockid}")
        try:
            yield lockid
        finally:
            keeper.cancel()  # not awaited: a cancellation arriving here must not skip the unlock
            await self.release()
