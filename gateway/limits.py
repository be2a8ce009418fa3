"""Admission control: at most N requests of a service in flight at once."""

from __future__ import annotations


class ConcurrencyLimiter:
    """Counts requests in flight; ``try_acquire()`` refuses beyond ``limit`` (None: no limit).

    Single event loop, so plain integers suffice. The gateway handler answers a refusal with 503 and
    ``Retry-After`` (RFC 9110 §15.6.4) instead of queueing: a queue only hides overload.
    """

    def __init__(self, limit: int | None):
        self.limit = limit
        self.in_flight = 0

    def try_acquire(self) -> bool:
        if self.limit is not None and self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    def release(self) -> None:
        self.in_flight -= 1
