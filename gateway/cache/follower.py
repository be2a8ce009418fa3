"""Follows one upstream's notification log for the metadata cache: every event bumps the
counters of its database or table (:func:`gateway.cache.methods.touched_by_event`); a trimmed
log, an id that went back (HMS reset or another database) drop everything.

It is a :class:`~gateway.upstream.notification_poller.LogSubscriber` of the gateway's one
notification-log poller (:class:`~gateway.upstream.notification_poller.LogFollower`), which
polls every half ``interval``; :meth:`NotificationFollower.fresh` is true while the last
successful poll started less than ``interval`` ago, and the cache answers from memory only then:
a change committed before a poll started is dropped before that poll ends, so a hit is never
older than ``interval``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gateway.cache.methods import ALL, touched_by_event
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.metastore import TException
from gateway.upstream.notification_event import MetastoreEvent
from gateway.upstream.notification_log import Batch, Skip
from gateway.upstream.notification_poller import LogFollower, LogSubscriber, LogUnavailable, NotificationPoller

__all__ = ["LISTENER_KEYS", "NotificationFollower"]

log = logging.getLogger(__name__)

#: HMS settings that name the listener filling the notification log (``DbNotificationListener``;
#: docs/change-feed.md, "Production HMS settings").
LISTENER_KEYS = ("hive.metastore.transactional.event.listeners", "hive.metastore.event.listeners")


class NotificationFollower(LogSubscriber):
    """Follows ``poller``'s log every ``interval`` / 2 seconds and calls ``bump(slots)`` for what
    each event touches and ``bump(ALL)`` plus ``on_resync()`` when events were lost.

    ``labels`` (topology, service) name it in logs. :attr:`last_id` is the newest event id
    read (None before the first poll).
    """

    def __init__(self, poller: NotificationPoller, interval: float, bump: Callable[[tuple[int, ...], str], None],
                 on_resync: Callable[[], None] = lambda: None, labels: tuple[str, str] = ("", "")):
        self.poller, self.interval, self.labels = poller, interval, labels
        self._bump, self._on_resync = bump, on_resync
        self.last_id: int | None = None
        self.has_log: bool | None = None
        self._fresh_since: float | None = None
        self._follower = LogFollower(poller, self, interval=interval / 2,
                                     name="metadata cache {}/{}".format(*labels),
                                     meanwhile=" (the cache forwards every call meanwhile)")

    async def check_log(self) -> bool:
        """Whether HMS keeps a readable notification log: a listener named in its settings
        (``get_config_value`` of :data:`LISTENER_KEYS`) or events already logged. Raises
        :class:`UpstreamError` when HMS cannot be reached."""
        client = self.poller.client
        for key in LISTENER_KEYS:
            try:
                value = await client.call("get_config_value", name=key, defaultValue="")
            except TException:  # an HMS that refuses the setting (ConfigValSecurityException)
                continue
            if "notification" in str(value or "").lower():
                self.has_log = True
                return True
        try:
            self.has_log = await self.poller.current_id() > 0
        except UpstreamBadReply:  # HMS refuses notification reads (3.x without the API auth off)
            self.has_log = False
        return self.has_log

    def fresh(self, now: float) -> bool:
        """True while the last successful poll started less than ``interval`` before ``now``
        (the event loop's clock)."""
        return self._fresh_since is not None and now - self._fresh_since < self.interval

    async def poll_once(self) -> None:
        """One poll: the current id, then the new events in batches. Raises UpstreamError."""
        await self._follower.poll_once()

    async def start(self) -> None:
        """Poll in the background (returns at once)."""
        await self._follower.start()

    async def close(self) -> None:
        await self._follower.close()

    # --- as the poller's subscriber ----------------------------------------------------------

    def position(self) -> int | None:
        # The first read starts at the current id: entries are filled from now on, nothing older to drop.
        return self.last_id

    async def prepare(self) -> None:
        if self.has_log is None and not await self.check_log():
            raise LogUnavailable("HMS keeps no readable notification log; the cache forwards every "
                                 "call (set cache.max_staleness_seconds to cache by TTL alone)")

    def skipped(self, step: Skip) -> None:
        if step.reason != "start":
            log.warning("metadata cache %s/%s: %s; every entry dropped", *self.labels, step.describe())
            self._bump(ALL, "resync")
            self._on_resync()
        self.last_id = step.position

    def received(self, batch: Batch[MetastoreEvent]) -> None:
        for event in batch.events:
            slots = touched_by_event(event.event_type, event.db, event.table, event.message)
            if slots:
                self._bump(slots, "event")
        self.last_id = batch.position

    def polled(self, started: float) -> None:
        self._fresh_since = started
