"""The one reader of HMS's notification log (gateway.upstream.notification_log.read_new), over a
fake log: the first read, batches, a trimmed log, a gap, an id that went back, backfill, and a
reader resuming where a failed read stopped."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.upstream.errors import UpstreamUnavailable
from gateway.upstream.notification_log import Batch, Skip, read_new


@dataclass(frozen=True)
class Event:
    event_id: int


class Log:
    """HMS's log as a list of ids; ``floor``: ids at or below it were trimmed."""

    def __init__(self, ids, floor: int = 0, fail_after: int | None = None):
        self.ids, self.floor, self.fail_after = list(ids), floor, fail_after
        self.asked: list[tuple[int, int]] = []

    async def current_id(self) -> int:
        return max(self.ids, default=self.floor)

    async def next_events(self, after: int, max_events: int):
        self.asked.append((after, max_events))
        if self.fail_after is not None and len(self.asked) > self.fail_after:
            raise UpstreamUnavailable("HMS went away")
        return [Event(i) for i in self.ids if i > after and i > self.floor][:max_events]


async def steps(log: Log, after: int | None, **kw) -> list:
    return [s async for s in read_new(log, after, batch=kw.pop("batch", 3), **kw)]


def ids(step: Batch) -> list[int]:
    return [e.event_id for e in step.events]


async def test_the_first_read_starts_at_the_current_id():
    log = Log(range(1, 11))
    assert await steps(log, None) == [Skip("start", None, 10)]
    assert log.asked == []


async def test_the_first_read_backfills_up_to_backfill_events():
    out = await steps(Log(range(1, 11)), None, backfill=4)
    assert out[0] == Skip("start", None, 6)
    assert [ids(s) for s in out[1:]] == [[7, 8, 9], [10]]
    assert [s.position for s in out[1:]] == [9, 10]


async def test_new_events_come_in_batches_of_at_most_batch():
    log = Log(range(1, 8))
    out = await steps(log, 0, batch=3)
    assert [ids(s) for s in out] == [[1, 2, 3], [4, 5, 6], [7]]
    assert log.asked == [(0, 3), (3, 3), (6, 3)]
    assert await steps(log, 7) == []


async def test_an_empty_answer_below_the_current_id_is_a_trimmed_log():
    log = Log([20], floor=20)  # every event after 5 trimmed, HMS's current id 20
    assert await steps(log, 5) == [Skip("trimmed", 5, 20)]


async def test_a_gap_before_a_batch_is_reported_then_the_batch():
    out = await steps(Log([13, 14], floor=12), 7)
    assert out[0] == Skip("trimmed", 7, 12)
    assert out[0].describe() == "events 8..12 were trimmed"
    assert ids(out[1]) == [13, 14] and out[1].position == 14


async def test_an_id_that_went_back_is_a_reset():
    out = await steps(Log(range(1, 4)), 50)
    assert out == [Skip("reset", 50, 3)]
    assert out[0].describe() == "HMS event id went back from 50 to 3"
    assert (await steps(Log(range(1, 4)), 50, backfill=2))[:2] == [Skip("reset", 50, 1), Batch([Event(2), Event(3)], 3)]


async def test_a_repeated_id_is_passed_on_and_the_position_is_the_newest():
    class Repeating(Log):
        async def next_events(self, after, max_events):
            return [Event(2), Event(2), Event(3)] if after < 2 else []

    out = await steps(Repeating([3]), 1)
    assert ids(out[0]) == [2, 2, 3] and out[0].position == 3


async def test_a_failed_read_stops_between_steps_and_the_reader_resumes():
    log = Log(range(1, 8), fail_after=1)
    position, seen = 0, []
    with pytest.raises(UpstreamUnavailable):
        async for step in read_new(log, position, batch=3):
            seen += ids(step)
            position = step.position
    assert (seen, position) == ([1, 2, 3], 3)
    log.fail_after = None
    assert [ids(s) for s in await steps(log, position)] == [[4, 5, 6], [7]]
