"""The one reader of HMS's notification log: from a position, the events logged since, in
batches, and where the log cannot be followed (HMS trims events older than
``hive.metastore.event.db.listener.timetolive`` and can commit ids out of order under HA,
HIVE-24468; docs/change-feed.md, "Production HMS settings"; Hive metastore IDL
``get_current_notificationEventId``/``get_next_notification``).

:func:`read_new` is one poll of :class:`gateway.upstream.notification_poller.LogFollower`, for the
metadata cache (:mod:`gateway.cache.follower`) and the change feed (:mod:`gateway.events.feed`)
alike: ask for the current id, then read what is new in batches. It yields :class:`Batch` for events and :class:`Skip` where events cannot be
read: the first read (nothing to follow from), an id that went back (HMS reset, or another
database behind the same address), or events trimmed by HMS's time-to-live
(``hive.metastore.event.db.listener.timetolive``) before they were read. Doris and StarRocks
answer such a gap with a full refresh; the cache drops everything, the feed tells its
clients to relist. Each step carries the position to follow from after it, which the reader
keeps: this module keeps no state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["Batch", "LoggedEvent", "NotificationSource", "Skip", "read_new"]


class LoggedEvent(Protocol):
    """An entry of the log: only its ``event_id`` (``NotificationEvent.eventId``) matters here."""

    @property
    def event_id(self) -> int: ...


E = TypeVar("E", bound=LoggedEvent)


class NotificationSource(Protocol[E]):
    """The two notification-log calls against one upstream (e.g.
    :class:`gateway.upstream.notification_poller.NotificationPoller`); both raise
    :class:`~gateway.upstream.errors.UpstreamError` subclasses."""

    async def current_id(self) -> int:
        """HMS's newest event id, 0 when the log is empty."""
        ...

    async def next_events(self, after: int, max_events: int) -> Sequence[E]:
        """Events with id > ``after``, at most ``max_events``, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class Skip:
    """Events up to ``position`` cannot be read: the reader follows from ``position`` on.

    ``reason`` is ``"start"`` (first read: ``previous`` is None), ``"reset"`` (HMS's current
    id is below ``previous``) or ``"trimmed"`` (events after ``previous`` up to ``position``
    are gone from the log).
    """

    reason: str
    previous: int | None
    position: int

    def describe(self) -> str:
        """One line for a log, e.g. ``events 8..12 were trimmed``."""
        if self.reason == "reset":
            return f"HMS event id went back from {self.previous} to {self.position}"
        if self.reason == "trimmed":
            return f"events {(self.previous or 0) + 1}..{self.position} were trimmed"
        return f"following HMS's notification log from event {self.position}"


@dataclass(frozen=True, slots=True)
class Batch(Generic[E]):
    """Events read, oldest first as HMS gave them (HMS 2.3 may repeat an id, HIVE-16886), and
    ``position``: the newest id read so far."""

    events: Sequence[E]
    position: int


async def read_new(source: NotificationSource[E], after: int | None, *, batch: int,
                   backfill: int = 0) -> AsyncIterator[Skip | Batch[E]]:
    """The steps from ``after`` (None: never read) to HMS's current id, read once at the start.

    On the first read and after a reset, reading starts ``backfill`` events before the current
    id (0: from the current id, nothing older); each ``get_next_notification`` asks for at most
    ``batch`` events. Raises what ``source`` raises, between steps: a reader that keeps each
    step's ``position`` resumes where it stopped.
    """
    current = await source.current_id()
    if after is None or current < after:
        position = max(0, current - backfill)
        yield Skip("start" if after is None else "reset", after, position)
    else:
        position = after
    while position < current:
        events = await source.next_events(position, batch)
        if not events:  # HMS's time-to-live removed everything up to ``current``
            yield Skip("trimmed", position, current)
            return
        first = events[0].event_id
        if first > position + 1:
            yield Skip("trimmed", position, first - 1)
        position = max(position, max(event.event_id for event in events))
        yield Batch(events, position)
