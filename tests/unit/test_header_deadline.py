"""The header deadline's timer lives as long as the connection, not as long as the timeout."""

from __future__ import annotations

import asyncio

from gateway.server import _HeaderDeadline


class _Handler:
    def __init__(self):
        self.transport, self._request_count, self.lost = None, 0, []

    def connection_lost(self, exc):
        self.lost.append(exc)


async def test_the_timer_is_cancelled_when_the_connection_is_lost():
    handlers: list[_Handler] = []

    def server() -> _Handler:
        handlers.append(_Handler())
        return handlers[-1]

    deadline = _HeaderDeadline(server, timeout=3600)  # type: ignore[arg-type]
    protocol = deadline()
    timer = protocol.deadline
    assert timer is not None and not timer.cancelled()
    assert timer.when() - asyncio.get_running_loop().time() > 3500
    protocol.connection_lost(None)
    assert timer.cancelled() and protocol.deadline is None
    assert handlers[0].lost == [None]  # aiohttp's handler still sees the loss
    protocol.connection_lost(None)  # a second loss (never expected) does not fail
    assert handlers[0].lost == [None, None]
