"""The scan planner's own threads (issue 50): planning reads and parses manifests for seconds,
so it runs on threads of its own rather than asyncio's default pool, which serves the gateway's
metadata reads and Kerberos set-up.

:class:`PlanExecutor` runs at most ``threads`` planning calls at once, at most
``threads_per_user`` of them for one user; calls wait in one queue per user, and a free thread
takes the next call of the user served longest ago (round robin; a user it has not served yet
first), so one user's many slow plans never hold back another user's. Its state is touched only on the event loop's thread; the threads
themselves are a :class:`~concurrent.futures.ThreadPoolExecutor`'s, started when first needed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["PlanExecutor"]

T = TypeVar("T")


class PlanExecutor:
    """Planning threads shared fairly between users (see the module docstring)."""

    def __init__(self, threads: int, threads_per_user: int, name: str = "iceberg-plan"):
        self.threads, self.threads_per_user = threads, threads_per_user
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._queues: dict[str, deque] = {}
        self._running: dict[str, int] = {}
        #: When each user with calls queued or running was last served (a count of calls started).
        self._served: dict[str, int] = {}
        self._started = 0

    @property
    def running(self) -> int:
        """Calls running now."""
        return sum(self._running.values())

    def queued(self, user: str | None = None) -> int:
        """Calls waiting for a thread (of ``user``; of anyone when None)."""
        if user is not None:
            return len(self._queues.get(user, ()))
        return sum(len(q) for q in self._queues.values())

    async def run(self, user: str, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` on one of the threads, in ``user``'s turn; what it returns or raises.
        Cancelled while waiting, it never runs; cancelled while running, it runs on (the caller
        stops it by its own flag)."""
        ticket: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queues.setdefault(user, deque()).append((ticket, call, args))
        self._start()
        return await ticket

    def _start(self) -> None:
        while self.running < self.threads:
            ready = [u for u in self._queues if self._running.get(u, 0) < self.threads_per_user]
            if not ready:
                return
            user = min(ready, key=lambda u: self._served.get(u, -1))
            queue = self._queues[user]
            ticket, call, args = queue.popleft()
            if not queue:
                del self._queues[user]
            if ticket.done():  # cancelled while waiting
                self._forget(user)
                continue
            self._running[user] = self._running.get(user, 0) + 1
            self._served[user], self._started = self._started, self._started + 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self._name)
            loop = asyncio.get_running_loop()
            done = self._pool.submit(call, *args)
            done.add_done_callback(lambda f, u=user, t=ticket: _back(loop, self._finished, u, t, f))

    def _finished(self, user: str, ticket: asyncio.Future, done: Future) -> None:
        self._running[user] -= 1
        if not self._running[user]:
            del self._running[user]
        self._forget(user)
        if not ticket.done():
            error = done.exception()
            if error is not None:
                ticket.set_exception(error)
            else:
                ticket.set_result(done.result())
        self._start()

    def _forget(self, user: str) -> None:
        if user not in self._queues and user not in self._running:
            self._served.pop(user, None)


def _back(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop closed while the call ran (shutdown): nobody waits for it
        pass
