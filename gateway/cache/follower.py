"""Follows one upstream's notification log for the metadata cache: every event bumps the
counters of its database or table (:func:`gateway.cache.methods.touched_by_event`); a trimmed
log, an id that went back (HMS reset or another database) drop everything.

The calls are :class:`gateway.events.poller.NotificationPoller`'s, through the service's
upstream, read as :func:`gateway.upstream.notification_log.read_new` reads the log. Polls start
every half ``interval``; :meth:`NotificationFollower.fresh` is true while the last successful
poll started less than ``interval`` ago, and the cache answers from memory only then: a change
committed before a poll started is dropped before that poll ends, so a hit is never older than
``interval``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from gateway.cache.methods import ALL, touched_by_event
from gateway.events.poller import MAX_BATCH, NotificationPoller
from gateway.upstream.errors import UpstreamBadReply, UpstreamError
from gateway.upstream.metastore import TException
from gateway.upstream.notification_log import Skip, read_new

__all__ = ["LISTENER_KEYS", "NotificationFollower"]

log = logging.getLogger(__name__)

#: HMS settings that name the listener filling the notification log (``DbNotificationListener``;
#: docs/change-feed.md, "Production HMS settings").
LISTENER_KEYS = ("hive.metastore.transactional.event.listeners", "hive.metastore.event.listeners")


class NotificationFollower:
    """Polls ``poller`` every ``interval`` / 2 seconds and calls ``bump(slots)`` for what each
    event touches and ``bump(ALL)`` plus ``on_resync()`` when events were lost.

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
        self._task: asyncio.Task | None = None
        self._last_error: str | None = None

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

    def _resync(self, why: str) -> None:
        log.warning("metadata cache %s/%s: %s; every entry dropped", *self.labels, why)
        self._bump(ALL, "resync")
        self._on_resync()

    async def poll_once(self) -> None:
        """One poll: the current id, then the new events in batches
        (:func:`~gateway.upstream.notification_log.read_new`). Raises UpstreamError."""
        started = asyncio.get_running_loop().time()
        # The first read starts at the current id: entries are filled from now on, nothing older to drop.
        async for step in read_new(self.poller, self.last_id, batch=MAX_BATCH):
            if isinstance(step, Skip):
                if step.reason != "start":
                    self._resync(step.describe())
            else:
                for event in step.events:
                    slots = touched_by_event(event.event_type, event.db, event.table, event.message)
                    if slots:
                        self._bump(slots, "event")
            self.last_id = step.position
        self._fresh_since = started

    async def start(self) -> None:
        """Poll in the background (returns at once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="cache-follower")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                if self.has_log is None:
                    await self.check_log()
                    if not self.has_log:
                        log.error("metadata cache %s/%s: HMS keeps no readable notification log; the "
                                  "cache forwards every call (set cache.max_staleness_seconds to cache "
                                  "by TTL alone)", *self.labels)
                        return
                await self.poll_once()
                if self._last_error is not None:
                    log.info("metadata cache %s/%s follows HMS's notification log again", *self.labels)
                    self._last_error = None
            except UpstreamError as exc:
                if str(exc) != self._last_error:
                    log.warning("metadata cache %s/%s cannot read HMS's notification log (the cache "
                                "forwards every call meanwhile): %s", *self.labels, exc)
                    self._last_error = str(exc)
            except Exception as exc:  # a bug or an unreadable reply must not end the follower
                if repr(exc) != self._last_error:
                    log.exception("metadata cache %s/%s: poll failed", *self.labels)
                    self._last_error = repr(exc)
            await asyncio.sleep(self.interval / 2)
