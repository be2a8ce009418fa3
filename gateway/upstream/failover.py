"""High availability over a service's upstream HMS list (Knox HA dispatch semantics).

* Upstreams are tried in order (or round-robin), at most ``max_failover_attempts`` in one call,
  sleeping ``failover_sleep`` seconds between attempts.
* An upstream that fails is marked down, skipped, and probed in the background every
  ``probe_interval`` seconds until it answers again. When every upstream is down, all are tried.
* A call moves to another upstream only when that cannot repeat a change: when the request was
  never sent (the connection could not be opened), or when the method only reads (the caller's
  ``read_only``, from :func:`gateway.thrift.hive_methods.is_read_only`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Protocol

from gateway.observability.metrics import ORIGIN_CLIENT, ORIGIN_GATEWAY
from gateway.upstream.ugi import Identity
from gateway.thrift.translate import encode_binary_call
from gateway.upstream.errors import UpstreamBadReply, UpstreamConnectFailed, UpstreamError, set_up
from gateway.upstream.streaming import ReplySink

log = logging.getLogger(__name__)

_PROBE = encode_binary_call("get_all_databases", 0, [])

#: Called with the strict-binary message of every call that is not ``read_only``, after it was
#: sent (or failed) and before the caller gets the outcome: the metadata cache registers here
#: (``gateway.cache.writes``) to drop what a write touches, so this layer knows nothing of it.
CALL_OBSERVERS: list = []


class Dispatchable(Protocol):
    """One upstream endpoint (a TCP pool or an HTTP-mode client)."""

    label: str

    async def call(
        self,
        request: bytes,
        *,
        expect_reply: bool = True,
        identity: Identity | None = None,
        sink: ReplySink | None = None,
        origin: str = ORIGIN_CLIENT,
    ) -> bytes | None: ...

    async def close(self) -> None: ...


class Upstream:
    """The upstream list of one service; see the module docstring for the semantics."""

    def __init__(
        self,
        endpoints: list[Dispatchable],
        *,
        max_failover_attempts: int = 3,
        failover_sleep: float = 0.1,
        probe_interval: float = 5.0,
        round_robin: bool = False,
    ):
        self.endpoints = endpoints
        self.max_attempts = max(1, max_failover_attempts)
        self.failover_sleep = failover_sleep
        self.probe_interval = probe_interval
        self.round_robin = round_robin
        self._down: set[str] = set()
        self._probes: dict[str, asyncio.Task] = {}
        self._next = itertools.count()

    def _order(self) -> list[Dispatchable]:
        endpoints = self.endpoints
        if self.round_robin and len(endpoints) > 1:
            start = next(self._next) % len(endpoints)
            endpoints = endpoints[start:] + endpoints[:start]
        up = [e for e in endpoints if e.label not in self._down]
        return up or list(endpoints)  # all down: try them all rather than fail without trying

    async def call(
        self,
        request: bytes,
        *,
        expect_reply: bool = True,
        identity: Identity | None = None,
        read_only: bool = False,
        sink: ReplySink | None = None,
        origin: str = ORIGIN_CLIENT,
    ) -> bytes | None:
        """As ``UpstreamPool.call``, with failover. ``read_only`` allows retrying a call that
        was sent. Raises the last upstream's error when every attempt failed.

        Every :data:`CALL_OBSERVERS` sees a call that is not ``read_only`` before it returns or
        raises (the metadata cache drops what a write touches: its writer then reads it, on any
        worker)."""
        if read_only or not CALL_OBSERVERS:  # reads change nothing an observer tracks
            return await self._call(request, expect_reply=expect_reply, identity=identity,
                                    read_only=read_only, sink=sink, origin=origin)
        try:
            return await self._call(request, expect_reply=expect_reply, identity=identity,
                                    read_only=read_only, sink=sink, origin=origin)
        finally:
            for observe in CALL_OBSERVERS:
                observe(request)

    async def _call(self, request: bytes, *, expect_reply: bool, identity: Identity | None,
                    read_only: bool, sink: ReplySink | None, origin: str) -> bytes | None:
        last: UpstreamError | None = None
        for attempt, pool in enumerate(self._order()[: self.max_attempts]):
            if attempt and self.failover_sleep:
                await asyncio.sleep(self.failover_sleep)
            try:
                reply = await pool.call(request, expect_reply=expect_reply, identity=identity, sink=sink,
                                        origin=origin)
            except UpstreamBadReply:
                raise  # the upstream answered: another one would not answer better
            except UpstreamError as exc:
                self._mark_down(pool, exc)
                last = exc
                if not (read_only or isinstance(exc, UpstreamConnectFailed)):
                    raise
                continue
            self._down.discard(pool.label)
            return reply
        assert last is not None
        raise last

    def _mark_down(self, pool: Dispatchable, exc: Exception) -> None:
        if len(self.endpoints) < 2 or pool.label in self._down:
            return
        log.warning("upstream %s marked down: %s", pool.label, exc)
        self._down.add(pool.label)
        set_up(pool.label, 0)
        task = self._probes.get(pool.label)
        if task is None or task.done():
            self._probes[pool.label] = asyncio.get_running_loop().create_task(self._probe(pool))

    async def _probe(self, pool: Dispatchable) -> None:
        while pool.label in self._down:
            await asyncio.sleep(self.probe_interval)
            try:
                await pool.call(_PROBE, origin=ORIGIN_GATEWAY)
            except UpstreamError:
                continue
            self._down.discard(pool.label)
            set_up(pool.label, 1)
            log.info("upstream %s answers again", pool.label)

    async def close(self) -> None:
        for task in self._probes.values():
            task.cancel()
        await asyncio.gather(*self._probes.values(), return_exceptions=True)
        self._probes.clear()
        for pool in self.endpoints:
            await pool.close()
