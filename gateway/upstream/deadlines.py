"""Deadlines of the upstream calls in flight on one pool, kept by one timer rather than one per call.

``asyncio.timeout()`` arms an event-loop timer on entry and cancels it on exit: on uvloop, a
libuv timer created, started, stopped and closed per call, about 32,000 instructions of a small
call's 640,000 (docs/performance.md, issue 14). Every call of a pool has the same timeout, so
deadlines come in the order calls start: the oldest call in flight always has the earliest
deadline. :class:`Deadlines` keeps the calls in that order and arms one timer for the oldest;
when it fires, calls past their deadline are cancelled and the timer is armed again for the
oldest one left. A call that ends before its deadline costs a dict insertion and a deletion;
under steady load the timer fires about once per ``timeout``.

A call past its deadline ends as under ``asyncio.timeout()``: its task is cancelled, and the
:class:`Watch` around it raises ``TimeoutError`` in place of the ``CancelledError`` when the
cancellation was its own (the same ``cancelling()`` / ``uncancel()`` bookkeeping as
:class:`asyncio.Timeout`, so a cancellation from elsewhere, such as the client's request being
cancelled, still propagates as ``CancelledError``). A plain ``with``, not ``async with``:
entering and leaving wait for nothing.
"""

from __future__ import annotations

import asyncio

__all__ = ["Deadlines", "Watch"]


class Watch:
    """One call's deadline (loop time, seconds) and its task; ``with`` it around the call."""

    __slots__ = ("deadlines", "task", "deadline", "cancelling", "expired")

    def __init__(self, deadlines: "Deadlines", task: asyncio.Task, deadline: float):
        self.deadlines, self.task, self.deadline = deadlines, task, deadline
        self.cancelling = task.cancelling()
        self.expired = False

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        self.deadlines._calls.pop(self, None)
        # The CancelledError is this deadline's alone: as asyncio.Timeout.__aexit__ decides it.
        if kind is asyncio.CancelledError and self.expired and self.task.uncancel() <= self.cancelling:
            raise TimeoutError from exc
        return False


class Deadlines:
    """The calls in flight of one pool, each to end within ``timeout`` seconds of its start::

        with deadlines.watch():  # in the task making the call
            reply = await ...    # raises TimeoutError at the deadline
    """

    def __init__(self, timeout: float):
        self.timeout = timeout
        #: Calls in flight, oldest first (a dict keeps insertion order; deletion is O(1)).
        self._calls: dict[Watch, None] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._calls)

    def watch(self) -> Watch:
        """Watch the current task's call from now (use it in a ``with``). Raises
        ``RuntimeError`` outside a task."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Deadlines.watch() must be called from a task")
        loop = task.get_loop()
        if loop is not self._loop:  # the first call, or a pool used on another loop than before:
            self._loop, self._timer = loop, None  # a timer of a closed loop would never fire
            self._calls.clear()
        watch = Watch(self, task, loop.time() + self.timeout)
        self._calls[watch] = None
        if self._timer is None:
            self._timer = loop.call_at(watch.deadline, self._fire)
        return watch

    def _fire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None  # armed by watch()
        now = loop.time()
        for watch in list(self._calls):
            if watch.deadline > now:  # the oldest call still in time: wake up at its deadline
                self._timer = loop.call_at(watch.deadline, self._fire)
                return
            del self._calls[watch]
            watch.expired = True
            watch.task.cancel()

