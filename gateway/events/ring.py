"""A bounded, id-ordered window of recent metastore events, shared by every subscriber."""

from __future__ import annotations

from bisect import bisect_right

from gateway.upstream.notification_event import MetastoreEvent

__all__ = ["EventRing"]


class EventRing:
    """The newest ``capacity`` events, with ``floor``: the ring holds every event whose id is in
    ``(floor, newest]``, so a reader at ``after >= floor`` misses nothing.

    Events are appended in increasing ``event_id``; the oldest fall out past ``capacity`` (and
    ``floor`` rises to the last one dropped). Memory is O(capacity). Not thread-safe: one event
    loop owns it.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("ring capacity must be at least 1")
        self.capacity = capacity
        self.floor = 0
        self._events: list[MetastoreEvent] = []
        self._ids: list[int] = []
        self._start = 0  # dropped entries are trimmed from the lists in blocks (amortised O(1))

    def __len__(self) -> int:
        return len(self._ids) - self._start

    @property
    def newest_id(self) -> int:
        """Id of the newest event held, else ``floor``."""
        return self._ids[-1] if len(self) else self.floor

    @property
    def newest_time(self) -> int | None:
        """``event_time`` of the newest event held (seconds since the epoch), or None."""
        return self._events[-1].event_time if len(self) else None

    def reset(self, floor: int) -> None:
        """Drop everything; the ring is complete after ``floor`` from now on."""
        self._events, self._ids, self._start = [], [], 0
        self.floor = floor

    def extend(self, events: list[MetastoreEvent]) -> None:
        """Append ``events`` (ids above ``newest_id``, increasing). Raises ValueError otherwise."""
        for event in events:
            if event.event_id <= self.newest_id:
                raise ValueError(f"event id {event.event_id} not above {self.newest_id}")
            self._events.append(event)
            self._ids.append(event.event_id)
        excess = len(self) - self.capacity
        if excess > 0:
            self._start += excess
            self.floor = self._ids[self._start - 1]
            if self._start >= self.capacity:
                del self._events[: self._start], self._ids[: self._start]
                self._start = 0

    def after(self, after: int, limit: int) -> list[MetastoreEvent]:
        """Up to ``limit`` events with id > ``after``, oldest first (the caller checks ``floor``)."""
        i = max(bisect_right(self._ids, after, self._start), self._start)
        return self._events[i : i + limit]
