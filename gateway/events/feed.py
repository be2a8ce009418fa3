"""The change feed of one upstream service: one poller, one ring, any number of clients.

Every ``poll_interval`` seconds the gateway's notification-log poller
(:class:`~gateway.upstream.notification_poller.LogFollower`, this feed its subscriber) asks HMS
for its current notification id and reads what is new in batches of at most 1,000; clients read
from the shared :class:`~gateway.events.ring.EventRing` and wait on one shared future, so a
thousand subscribers cost one poll per interval. The ring keeps events as HMS logged them: what
a delivery adds (``details``, e.g. Iceberg commits read from their metadata files) is done for
the events a client is given (:meth:`ChangeFeed.detailed`), never for the whole log at start.

:class:`Resync` follows Kubernetes' watch semantics for an expired ``resourceVersion`` (HTTP 410
Gone): the client relists and follows from :attr:`ChangeFeed.latest_id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence

from gateway.events.ring import EventRing
from gateway.observability import metrics
from gateway.upstream.errors import UpstreamError
from gateway.upstream.notification_event import MetastoreEvent
from gateway.upstream.notification_log import Batch, Skip
from gateway.upstream.notification_poller import MAX_BATCH, LogFollower, LogSubscriber, NotificationPoller

__all__ = ["EVENT_TYPES", "ChangeFeed", "FeedUnavailable", "Resync"]

log = logging.getLogger(__name__)

#: HMS's notification event types (``NotificationEvent.eventType``): Hive 4's
#: ``MessageBuilder.*_EVENT`` strings, which include Hive 2.3's and 3's, and Hive 2's index
#: events. A feed also accepts any other type it has read from its HMS (:meth:`ChangeFeed.known_types`).
EVENT_TYPES: frozenset[str] = frozenset({
    "CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE",
    "CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE",
    "ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION",
    "INSERT", "CREATE_FUNCTION", "DROP_FUNCTION",
    "CREATE_INDEX", "ALTER_INDEX", "DROP_INDEX",
    "ADD_PRIMARYKEY", "ADD_FOREIGNKEY", "ADD_UNIQUECONSTRAINT", "ADD_NOTNULLCONSTRAINT",
    "ADD_DEFAULTCONSTRAINT", "ADD_CHECKCONSTRAINT", "DROP_CONSTRAINT",
    "CREATE_ISCHEMA", "ALTER_ISCHEMA", "DROP_ISCHEMA",
    "ADD_SCHEMA_VERSION", "ALTER_SCHEMA_VERSION", "DROP_SCHEMA_VERSION",
    "CREATE_CATALOG", "ALTER_CATALOG", "DROP_CATALOG",
    "OPEN_TXN", "COMMIT_TXN", "ABORT_TXN", "ALLOC_WRITE_ID_EVENT",
    "ACID_WRITE_EVENT", "BATCH_ACID_WRITE_EVENT",
    "UPDATE_TBL_COL_STAT_EVENT", "DELETE_TBL_COL_STAT_EVENT",
    "UPDATE_PART_COL_STAT_EVENT", "UPDATE_PART_COL_STAT_EVENT_BATCH", "DELETE_PART_COL_STAT_EVENT",
    "COMMIT_COMPACTION_EVENT",
    "CREATE_DATACONNECTOR", "ALTER_DATACONNECTOR", "DROP_DATACONNECTOR",
    "RELOAD",
})


class Resync(Exception):
    """Events after the client's id cannot be delivered: they were trimmed (HMS's time-to-live or
    the ring's size), or the id is ahead of HMS's (HMS was reset). ``reason`` is
    ``"trimmed"`` or ``"reset"``; ``latest_id`` is where to follow from after relisting."""

    def __init__(self, reason: str, detail: str, latest_id: int):
        super().__init__(detail)
        self.reason, self.detail, self.latest_id = reason, detail, latest_id


class FeedUnavailable(Exception):
    """The feed has not yet read HMS's notification log (HMS unreachable since start-up)."""


class ChangeFeed(LogSubscriber):
    """Polls one upstream's notification log and serves it to many readers.

    ``poll_interval`` in seconds; ``ring_size`` events are kept (the resume window);
    ``labels`` are the ``(topology, service)`` metric labels; ``details`` completes the events
    a client is given (:meth:`detailed`), None to give them as read.
    """

    def __init__(
        self, poller: NotificationPoller, *, poll_interval: float = 1.0, ring_size: int = 10_000,
        labels: tuple[str, str] = ("", ""),
        details: Callable[[Sequence[MetastoreEvent]], Awaitable[list[MetastoreEvent]]] | None = None,
    ):
        self.poller = poller
        self.poll_interval = poll_interval
        self.ring = EventRing(ring_size)
        self.labels = labels
        self.ready = False
        self.subscribers = 0
        self._details = details
        self._changed: asyncio.Future | None = None
        self._seen_types: set[str] = set()
        outcomes = {ok: metrics.child(metrics.FEED_POLLS, *labels, "ok" if ok else "error") for ok in (True, False)}
        # The background runs this feed's poll_once (looked up at each poll), as reach() does.
        self._follower = LogFollower(poller, self, interval=poll_interval,
                                     name="change feed {}/{}".format(*labels),
                                     counted=lambda ok: outcomes[ok].inc(), poll=lambda: self.poll_once())

    @property
    def polls(self) -> int:
        """Polls begun (background and :meth:`reach`'s)."""
        return self._follower.polls

    def known_types(self) -> frozenset[str]:
        """:data:`EVENT_TYPES` and every other event type this feed has read from HMS."""
        return EVENT_TYPES.union(self._seen_types)

    @property
    def latest_id(self) -> int:
        """Newest event id read from HMS (0 before the first poll or with an empty log)."""
        return self.ring.newest_id

    async def start(self) -> None:
        """Start polling in the background (returns at once; see :attr:`ready`)."""
        await self._follower.start()

    async def close(self) -> None:
        """Stop polling; readers waiting get what the ring holds."""
        await self._follower.close()
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)
        self._changed = None

    async def reach(self, after: int) -> None:
        """Poll HMS once now if ``after`` is ahead of what this feed has read.

        Another replica may have handed out the position (an SSE ``Last-Event-ID``, a long
        poll's ``next``, the broker publisher's offset) before this one polled. Without this,
        :meth:`events_after` would call such a position a reset. After the poll only a position
        ahead of HMS itself is one. An HMS that cannot be reached is left to
        :meth:`events_after`'s verdict.
        """
        if self.ready and after > self.ring.newest_id:
            with contextlib.suppress(UpstreamError):
                await self.poll_once()

    async def poll_once(self) -> None:
        """One poll: current id, then the new events in batches. Raises UpstreamError."""
        await self._follower.poll_once()

    async def detailed(self, events: Sequence[MetastoreEvent]) -> list[MetastoreEvent]:
        """``events`` as a client is given them: completed by ``details`` (e.g. an Iceberg
        commit's ``iceberg`` member), read now for these events only."""
        if self._details is None or not events:
            return list(events)
        return await self._details(events)

    # --- as the poller's subscriber ----------------------------------------------------------

    @property
    def backfill(self) -> int:  # type: ignore[override]
        # Until ready, and after a reset, the ring is backfilled so that clients that resume
        # after a gateway restart find their ids.
        return self.ring.capacity

    def position(self) -> int | None:
        return self.ring.newest_id if self.ready else None

    def skipped(self, step: Skip) -> None:
        if step.reason == "reset":
            log.warning("change feed %s/%s: %s (HMS reset)", *self.labels, step.describe())
        # After a gap (events HMS trimmed before this feed read them) nobody may resume
        # across it: the ring starts after it.
        self.ring.reset(step.position)

    def received(self, batch: Batch[MetastoreEvent]) -> None:
        self.ring.extend(self._increasing(batch.events))
        self._seen_types.update(event.event_type for event in batch.events)
        self._wake()

    def polled(self, started: float) -> None:
        if not self.ready:
            self.ready = True
            self._wake()
        metrics.child(metrics.FEED_LAST_EVENT_ID, *self.labels).set(self.ring.newest_id)
        newest = self.ring.newest_time
        if newest is not None:
            metrics.child(metrics.FEED_LAG, *self.labels).set(max(0.0, time.time() - newest))

    def _increasing(self, batch: Sequence[MetastoreEvent]) -> list[MetastoreEvent]:
        """``batch`` without events at or below an id already kept: HMS 2.3 can give two events
        the same id when they commit on concurrent connections (HIVE-16886, fixed in Hive 3 by
        locking NOTIFICATION_SEQUENCE); only the first of them can be delivered."""
        kept, newest = [], self.ring.newest_id
        for event in batch:
            if event.event_id > newest:
                kept.append(event)
                newest = event.event_id
            else:
                log.warning("change feed %s/%s: HMS repeated event id %d (%s %s.%s); only the first "
                            "one is delivered (HIVE-16886)", *self.labels, event.event_id,
                            event.event_type, event.db, event.table)
        return kept

    async def _changed_within(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for new events or readiness (one future shared by all waiters)."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._changed), seconds)
        except TimeoutError:
            return False
        return True

    def events_after(self, after: int, limit: int) -> list[MetastoreEvent]:
        """Up to ``limit`` events with id > ``after``, oldest first; [] when none yet.

        Raises :class:`Resync` when events after ``after`` are gone or ``after`` is ahead of
        HMS, :class:`FeedUnavailable` before the first successful poll.
        """
        if not self.ready:
            raise FeedUnavailable("the change feed has not read HMS yet")
        latest = self.ring.newest_id
        if after > latest:
            raise Resync("reset", f"event id {after} is ahead of the metastore's {latest}: HMS was reset", latest)
        if after < self.ring.floor:
            raise Resync("trimmed", f"events after {after} were trimmed; the oldest kept follows {self.ring.floor}",
                         latest)
        return self.ring.after(after, limit)

    def select(self, after: int, limit: int,
               accept: Callable[[MetastoreEvent], bool]) -> tuple[list[MetastoreEvent], int]:
        """Up to ``limit`` events with id > ``after`` that ``accept``, oldest first, and the
        position to continue from (the ``after`` of the next call).

        ``limit`` counts delivered events: the scan goes past refused ones up to the ring's
        newest event. The position is the id of the last event scanned: the last delivered one
        when ``limit`` was reached, else the ring's newest (``after`` when nothing is new). So a
        client that continues from it never misses an event and never scans one twice.
        Raises as :meth:`events_after`.
        """
        self.events_after(after, 0)  # the position checks: Resync, FeedUnavailable
        selected: list[MetastoreEvent] = []
        position = after
        while batch := self.ring.after(position, MAX_BATCH):
            for event in batch:
                position = event.event_id
                if accept(event):
                    selected.append(event)
                    if len(selected) == limit:
                        return selected, position
        return selected, position

    async def wait_select(self, after: int, timeout: float, limit: int,
                          accept: Callable[[MetastoreEvent], bool]) -> tuple[list[MetastoreEvent], int]:
        """As :meth:`select`, waiting up to ``timeout`` seconds for at least one accepted event,
        the events :meth:`detailed`.

        Returns ``([], position)`` on timeout (the position moves past refused events). Raises
        :class:`Resync`, and :class:`FeedUnavailable` when the feed is still not ready after
        ``timeout``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        position = after
        while True:
            try:
                events, position = self.select(position, limit, accept)
            except FeedUnavailable:
                if loop.time() >= deadline:
                    raise
                events = []
            if events:
                return await self.detailed(events), position
            remaining = deadline - loop.time()
            if remaining <= 0:
                return [], position
            if not await self._changed_within(remaining):
                if not self.ready:
                    raise FeedUnavailable("the change feed has not read HMS yet")
                return [], position

    async def wait_after(self, after: int, timeout: float, limit: int = MAX_BATCH) -> list[MetastoreEvent]:
        """As :meth:`events_after`, waiting up to ``timeout`` seconds for at least one event, the
        events :meth:`detailed`.

        Returns [] on timeout. Raises :class:`Resync`, and :class:`FeedUnavailable` when the
        feed is still not ready after ``timeout``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                events = self.events_after(after, limit)
            except FeedUnavailable:
                if loop.time() >= deadline:
                    raise
                events = []
            if events:
                return await self.detailed(events)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            if not await self._changed_within(remaining):
                if not self.ready:
                    raise FeedUnavailable("the change feed has not read HMS yet")
                return []

    async def wait_ready(self, timeout: float) -> None:
        """Return once the feed has read HMS; raise :class:`FeedUnavailable` after ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.ready:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise FeedUnavailable("the change feed has not read HMS yet")
            await self._changed_within(remaining)

    @contextlib.contextmanager
    def subscribed(self) -> Iterator[None]:
        """Count one client (long poll or stream) for the subscribers metric while inside."""
        gauge = metrics.child(metrics.FEED_SUBSCRIBERS, *self.labels)
        self.subscribers += 1
        gauge.inc()
        try:
            yield
        finally:
            self.subscribers -= 1
            gauge.dec()
