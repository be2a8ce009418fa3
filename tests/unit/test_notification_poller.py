"""The one notification-log poller (issue 41): :class:`LogFollower` reads the log for a
:class:`LogSubscriber` (the metadata cache's follower and the change feed are two), starts,
closes, retries and reports failures the same way for both."""

from __future__ import annotations

import asyncio
import logging

from gateway.upstream.errors import UpstreamUnavailable
from gateway.upstream.notification_event import MetastoreEvent
from gateway.upstream.notification_log import Batch, Skip
from gateway.upstream.notification_poller import LogFollower, LogSubscriber, LogUnavailable


def event(i: int) -> MetastoreEvent:
    return MetastoreEvent(i, 1, "CREATE_DATABASE", f"d{i}", None, {}, "json-0.2")


class Log:
    """A notification log whose ``current_id`` fails with the next of ``failures`` first."""

    def __init__(self, newest: int, failures=()):
        self.newest, self.failures, self.calls = newest, list(failures), 0

    async def current_id(self):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.newest

    async def next_events(self, after, limit):
        return [event(i) for i in range(after + 1, min(self.newest, after + limit) + 1)]


class Recorder(LogSubscriber):
    def __init__(self, backfill=0, unavailable=False):
        self.backfill, self.unavailable = backfill, unavailable
        self.steps: list = []
        self.last: int | None = None
        self.polled_at: list[float] = []
        self.done = asyncio.Event()

    def position(self):
        return self.last

    async def prepare(self):
        if self.unavailable:
            raise LogUnavailable("no log kept")

    def skipped(self, step: Skip):
        self.steps.append(step)
        self.last = step.position

    def received(self, batch: Batch):
        self.steps.append([e.event_id for e in batch.events])
        self.last = batch.position

    def polled(self, started):
        self.polled_at.append(started)
        self.done.set()


async def test_a_poll_hands_the_subscriber_each_step_from_its_position():
    log, sub = Log(5), Recorder(backfill=2)
    follower = LogFollower(log, sub, interval=60, name="test t/s", batch=2)
    await follower.poll_once()
    assert sub.steps == [Skip("start", None, 3), [4, 5]] and follower.polls == 1
    log.newest = 8
    await follower.poll_once()
    assert sub.steps[2:] == [[6, 7], [8]] and len(sub.polled_at) == 2 and not follower.running


async def test_failures_are_reported_once_each_counted_every_time_and_recovery_said(caplog):
    outcomes: list[bool] = []
    down = UpstreamUnavailable("connection refused")
    log, sub = Log(3, [down, UpstreamUnavailable("connection refused"), RuntimeError("bug")]), Recorder()
    follower = LogFollower(log, sub, interval=0.001, name="change feed t/events", counted=outcomes.append,
                           meanwhile=" (meanwhile: nothing)")
    with caplog.at_level(logging.INFO, logger="gateway.upstream.notification_poller"):
        await follower.start()
        assert follower.running
        await asyncio.wait_for(sub.done.wait(), 10)
        await follower.close()
    assert not follower.running and outcomes[:4] == [False, False, False, True]
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert lines[0] == (logging.WARNING, "change feed t/events cannot read HMS's notification log "
                                         "(meanwhile: nothing): connection refused")
    assert lines[1] == (logging.ERROR, "change feed t/events: poll failed") and caplog.records[1].exc_info
    assert lines[2] == (logging.INFO, "change feed t/events reads HMS's notification log again")
    assert len(lines) == 3  # the second identical failure is not repeated


async def test_a_subscriber_without_a_log_ends_the_polling(caplog):
    log, sub = Log(3), Recorder(unavailable=True)
    follower = LogFollower(log, sub, interval=0.001, name="metadata cache t/s")
    with caplog.at_level(logging.ERROR, logger="gateway.upstream.notification_poller"):
        await follower.start()
        for _ in range(100):
            if not follower.running:
                break
            await asyncio.sleep(0.01)
    assert not follower.running and log.calls == 0
    assert caplog.records[0].getMessage() == "metadata cache t/s: no log kept"
    await follower.close()
