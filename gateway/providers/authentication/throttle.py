"""Per-client-address budget of password checks: slow-down, then refusal, of guessing.

It throttles password *checks*, not people. A check (a bcrypt comparison, an LDAP bind) is
counted against the client address when it starts, so concurrent guesses cannot overrun the
budget; a check that succeeds is given back, one that fails stays counted for the window.
Within a sliding window, failures beyond ``delay_after`` are answered late (doubling delay,
capped), and once failures plus checks in flight reach ``refuse_after`` a further check is
refused: 429 with ``Retry-After`` (RFC 6585 §4), without checking. Credentials the provider
already verified (its credential cache) need no check, so a user whose credentials were verified
before still gets in from a throttled address: behind a NAT or a Kubernetes NodePort that
rewrites client addresses, one guesser cannot lock everybody out (Apache ``mod_authn_socache``
and Knox's LDAP cache behave alike). The address is :func:`gateway.client_address.client_address`.
The clock is injectable for tests.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from aiohttp import web

from gateway.client_address import client_address
from gateway.observability import metrics
from gateway.providers.authentication.settings import FailureThrottle

T = TypeVar("T")

#: Request key: the throttle of the request's topology (the authentication step sets it).
THROTTLE = "gateway.authentication.throttle"


class Throttled(Exception):
    """A password check refused: the client address spent its budget (429, ``Retry-After``)."""

    def __init__(self, retry_after: int):
        super().__init__(f"too many failed authentications; retry after {retry_after} s")
        self.retry_after = retry_after


async def password_check(request: web.BaseRequest, check: Callable[[], Awaitable[T]]) -> T:
    """Run one password check (``check()``; a falsy result means the credentials failed) under
    the budget of the request's client address.

    Raises :class:`Throttled` without running ``check`` when the budget is spent. Providers call
    this only on a credential-cache miss.
    """
    throttle: AuthFailureThrottle | None = request.get(THROTTLE)
    if throttle is None:
        return await check()
    return await throttle.run(client_address(request), check)


class SharedBudgets(Protocol):
    """Where a worker process's throttles keep their budgets (gateway.workers: the supervisor)."""

    async def begin(self, throttle: "AuthFailureThrottle", address: str) -> None: ...

    async def end(self, throttle: "AuthFailureThrottle", address: str, ok: bool) -> float: ...


_shared_budgets: SharedBudgets | None = None


def share_budgets(budgets: SharedBudgets | None) -> None:
    """Keep every throttle's budgets in ``budgets`` from now on (None: in this process).

    Called once by a worker process at start-up, so that N workers refuse after
    ``refuse_after`` failures of an address in all, not N times as many.
    """
    global _shared_budgets
    _shared_budgets = budgets


class AuthFailureThrottle:
    """Failure bookkeeping for one topology; addresses are strings (``request.remote``)."""

    def __init__(
        self, config: FailureThrottle, clock: Callable[[], float] = time.monotonic, topology: str = ""
    ):
        self.config, self.topology = config, topology
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        #: Password checks running now, per address (entries removed when back to 0).
        self._in_flight: dict[str, int] = {}
        self._checks = {
            outcome: metrics.PASSWORD_CHECKS.labels(topology=topology, outcome=outcome)
            for outcome in ("success", "failure", "refused")
        }

    async def run(self, address: str, check: Callable[[], Awaitable[T]]) -> T:
        """Run ``check()`` for ``address`` within its budget (see :func:`password_check`).

        Raises :class:`Throttled` when failures plus checks in flight reach ``refuse_after``.
        After a failed check, waits the slow-down delay before returning. In a worker process
        (:func:`share_budgets`) the budget is the supervisor's, shared by every worker.
        """
        if not self.config.enabled:
            return await check()
        shared = _shared_budgets
        try:
            if shared is None:
                self.begin(address)
            else:
                await shared.begin(self, address)
        except Throttled:
            self._checks["refused"].inc()
            raise
        ok = False
        try:
            result = await check()
            ok = bool(result)
        finally:
            self._checks["success" if ok else "failure"].inc()
            if shared is None:
                delay = self.end(address, ok)
            else:
                delay = await shared.end(self, address, ok)
        if delay:
            await asyncio.sleep(delay)
        return result

    def begin(self, address: str) -> None:
        """Count a password check of ``address`` as started; :class:`Throttled` (nothing
        counted) when failures plus checks in flight have reached ``refuse_after``."""
        times = self._recent(address)
        in_flight = self._in_flight.get(address, 0)
        if (len(times) if times else 0) + in_flight >= self.config.refuse_after:
            raise Throttled(self.retry_after(address) or 1)
        self._in_flight[address] = in_flight + 1  # counted before the check starts

    def end(self, address: str, ok: bool) -> float:
        """The check :meth:`begin` counted has finished; a failure stays counted for the
        window. Returns the slow-down delay in seconds (0 for none)."""
        left = self._in_flight.get(address, 0) - 1
        if left > 0:
            self._in_flight[address] = left
        else:
            self._in_flight.pop(address, None)
        return 0.0 if ok else self.record_failure(address)

    def _recent(self, address: str) -> deque[float] | None:
        times = self._failures.get(address)
        if times is None:
            return None
        horizon = self._clock() - self.config.window_seconds
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[address]
            return None
        return times

    def _sweep(self) -> None:
        """Forget addresses whose last failure has left the window, even if never seen again.

        ``_failures`` is in order of last failure (``record_failure`` moves an address to the
        end), so the expired ones are at the front: O(1) amortised per recorded failure.
        """
        horizon = self._clock() - self.config.window_seconds
        failures = self._failures
        while failures:
            address, times = next(iter(failures.items()))
            if times and times[-1] > horizon:
                return
            del failures[address]

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until ``address`` may try again, when it is refused now; else None."""
        if not self.config.enabled:
            return None
        times = self._recent(address)
        if times is None or len(times) < self.config.refuse_after:
            return None
        # Refused until enough failures leave the window to drop below refuse_after.
        release = times[len(times) - self.config.refuse_after] + self.config.window_seconds
        return max(1, math.ceil(release - self._clock()))

    def record_failure(self, address: str) -> float:
        """Count one failure; the delay in seconds to apply before answering it (0 for none)."""
        if not self.config.enabled:
            return 0.0
        self._sweep()
        times = self._recent(address)
        if times is None:
            times = self._failures[address] = deque(maxlen=self.config.refuse_after)
        times.append(self._clock())
        self._failures.move_to_end(address)
        while len(self._failures) > self.config.max_clients:
            self._failures.popitem(last=False)
        excess = len(times) - self.config.delay_after
        if excess <= 0 or self.config.delay_seconds == 0:
            return 0.0
        return min(self.config.delay_seconds * 2 ** min(excess - 1, 30), self.config.max_delay_seconds)
