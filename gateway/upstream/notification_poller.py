"""The one poller of HMS's notification log, used by the metadata cache
(:mod:`gateway.cache.follower`) and the change feed (:mod:`gateway.events.feed`).

:class:`NotificationPoller` makes the two Thrift calls, ``get_current_notificationEventId`` and
``get_next_notification`` (Hive metastore IDL, ``NotificationEventRequest``/``NotificationEvent``),
through the gateway's metastore client (:class:`~gateway.upstream.metastore.MetastoreClient`) on
the service's :class:`~gateway.upstream.failover.Upstream`, as the gateway's own identity (no
``set_ugi``) or a configured service user.

:class:`LogFollower` follows the log for one :class:`LogSubscriber`: every ``interval`` it reads
what is new from the subscriber's position (:func:`~gateway.upstream.notification_log.read_new`)
and hands each step to it; it starts, closes, retries and reports failures the same way for every
subscriber. The cache and the feed each keep their own position (the cache follows from now,
the feed backfills its ring) and interval, and may poll as different users, so each has its own
follower; a subscriber does with the events what it alone knows (bump counters, fill a ring).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gateway.providers.identity import Identity
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.errors import UpstreamBadReply, UpstreamError
from gateway.upstream.metastore import MetastoreClient, TException
from gateway.upstream.notification_event import MetastoreEvent
from gateway.upstream.notification_log import Batch, NotificationSource, Skip, read_new
from gateway.upstream.notification_messages import MessageFormatError, decode_message

__all__ = ["MAX_BATCH", "LogFollower", "LogSubscriber", "LogUnavailable", "NotificationPoller"]

log = logging.getLogger(__name__)

#: The most events one ``get_next_notification`` asks for (the issue's bound; Hive's own
#: consumers use batches of this order, e.g. ``hive.repl.event.fetch.batch``-style settings).
MAX_BATCH = 1000

T = TypeVar("T")


def _event(item) -> MetastoreEvent:
    """A ``NotificationEvent`` (thriftpy2 object) as the feed keeps it, its message decoded."""
    fmt = item.messageFormat or "json-0.2"
    try:
        body = decode_message(item.message or "", fmt)
    except MessageFormatError as exc:
        # Never raw bytes to a client: the event is kept (ids stay contiguous), its body empty.
        log.warning("notification %s (%s): undecodable message: %s", item.eventId, item.eventType, exc)
        body = {}
    return MetastoreEvent(
        event_id=int(item.eventId), event_time=int(item.eventTime or 0), event_type=str(item.eventType),
        db=item.dbName, table=item.tableName, message=body, message_format=str(fmt),
    )


class NotificationPoller:
    """The two notification-log calls against one upstream.

    ``upstream`` is a :class:`~gateway.upstream.failover.Upstream` (anything with its ``call``);
    ``identity`` None means the gateway's own connections (no ``set_ugi``). Both methods raise
    :class:`~gateway.upstream.errors.UpstreamError` subclasses on transport trouble, and
    ``UpstreamBadReply`` when HMS answers with an exception (a ``MetaException`` when it
    refuses notification reads) or a reply that does not decode.
    """

    def __init__(self, upstream, schema: ServiceSchema, identity: Identity | None = None):
        self.client = MetastoreClient(upstream, schema, identity=identity)
        self.calls = 0  # upstream calls made, for tests and the polls metric

    async def _call(self, call: Awaitable[T]) -> T:
        self.calls += 1
        try:
            return await call
        except TException as exc:  # the feed reports upstream trouble once, without a traceback
            raise UpstreamBadReply(f"HMS answered {exc!r}"[:300]) from None

    async def current_id(self) -> int:
        """HMS's newest notification event id (``get_current_notificationEventId``), 0 when none."""
        return int(await self._call(self.client.current_notification_id()) or 0)

    async def next_events(self, after: int, max_events: int = MAX_BATCH) -> list[MetastoreEvent]:
        """Events with id > ``after``, at most ``max_events`` (≤ :data:`MAX_BATCH`), oldest first."""
        limit = max(1, min(max_events, MAX_BATCH))
        items = await self._call(self.client.next_notifications(int(after), limit))
        return [_event(item) for item in items]


class LogUnavailable(Exception):
    """Raised by :meth:`LogSubscriber.prepare` when the subscriber cannot follow this HMS's log
    (it keeps none): the follower logs ``str()`` as an error and stops polling."""


class LogSubscriber:
    """What one reader of the notification log does with it; :class:`LogFollower` calls these,
    in the poll's order, never two polls at once. Override what the reader needs.

    ``backfill``: on the first read and after a reset, how many events before HMS's current id
    to read (0: follow from now on).
    """

    backfill = 0

    def position(self) -> int | None:
        """The id to read after (the newest handled), None before the first read."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """Before each background poll: raise :class:`LogUnavailable` to stop following, or an
        :class:`~gateway.upstream.errors.UpstreamError` to retry at the next interval."""

    def skipped(self, step: Skip) -> None:
        """Events up to ``step.position`` cannot be read (first read, reset, trimmed)."""

    def received(self, batch: Batch[MetastoreEvent]) -> None:
        """Events read, oldest first; ``batch.position`` is the newest id read."""
        raise NotImplementedError

    def polled(self, started: float) -> None:
        """A poll that started at ``started`` (the event loop's clock) read HMS's current id."""


class LogFollower:
    """Follows one upstream's notification log for one ``subscriber``.

    ``source`` is a :class:`NotificationPoller` (or anything with its ``current_id`` and
    ``next_events``); ``interval`` seconds between polls in the background, the retry delay
    too; ``name`` (e.g. ``"change feed t/events"``) begins its log lines, and ``meanwhile``
    says what its subscriber does while HMS cannot be read (appended to the warning).
    ``counted(ok)`` is told the outcome of every background poll (metrics). ``poll`` is what
    the background runs each interval: :meth:`poll_once` unless the subscriber wraps it.
    """

    def __init__(self, source: NotificationSource[MetastoreEvent], subscriber: LogSubscriber, *,
                 interval: float, name: str, meanwhile: str = "",
                 counted: Callable[[bool], None] = lambda ok: None, batch: int = MAX_BATCH,
                 poll: Callable[[], Awaitable[None]] | None = None):
        self.source, self.subscriber = source, subscriber
        self._poll = poll or self.poll_once
        self.interval, self.name, self.meanwhile = interval, name, meanwhile
        self.batch = batch
        self.polls = 0  # polls begun, background or asked
        self._counted = counted
        self._task: asyncio.Task | None = None
        self._last_error: str | None = None
        self._polling = asyncio.Lock()  # the background poll and an asked one never interleave

    @property
    def running(self) -> bool:
        """Whether the background polling runs (started, not closed, not stopped by
        :class:`LogUnavailable`)."""
        return self._task is not None and not self._task.done()

    async def poll_once(self) -> None:
        """One poll: HMS's current id, then what is new in batches of at most ``batch``, each
        step handed to the subscriber. Raises :class:`~gateway.upstream.errors.UpstreamError`
        (the subscriber keeps the steps handed before it)."""
        async with self._polling:
            self.polls += 1
            started = asyncio.get_running_loop().time()
            subscriber = self.subscriber
            async for step in read_new(self.source, subscriber.position(), batch=self.batch,
                                       backfill=subscriber.backfill):
                if isinstance(step, Skip):
                    subscriber.skipped(step)
                else:
                    subscriber.received(step)
            subscriber.polled(started)

    async def start(self) -> None:
        """Poll in the background every ``interval`` (returns at once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def close(self) -> None:
        """Stop polling (waits for the background task to end)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.subscriber.prepare()
                await self._poll()
                self._counted(True)
                if self._last_error is not None:
                    log.info("%s reads HMS's notification log again", self.name)
                    self._last_error = None
            except LogUnavailable as exc:
                log.error("%s: %s", self.name, exc)
                return
            except UpstreamError as exc:
                self._failed(str(exc), lambda: log.warning("%s cannot read HMS's notification log%s: %s",
                                                           self.name, self.meanwhile, exc))
            except Exception as exc:  # a bug or an unreadable reply must not end the polling
                self._failed(repr(exc), lambda: log.exception("%s: poll failed", self.name))
            await asyncio.sleep(self.interval)

    def _failed(self, error: str, report: Callable[[], None]) -> None:
        """Count a failed poll; report it once per distinct failure, not once an interval."""
        self._counted(False)
        if error != self._last_error:
            report()
            self._last_error = error
