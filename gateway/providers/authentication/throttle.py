"""Per-client-address slow-down and refusal of repeated authentication failures.

Only requests that presented credentials and failed count (a client's first, credential-less
request that collects the 401 challenge is normal HTTP authentication, RFC 9110 §11.6.1).
Within a sliding window, failures beyond ``delay_after`` are answered late (doubling delay,
capped), and beyond ``refuse_after`` the address is answered 429 with ``Retry-After``
(RFC 6585 §4) without checking credentials. State is per address, so a valid user on another
address is never slowed down or locked out. The clock is injectable for tests.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from gateway.providers.authentication.settings import FailureThrottle


class AuthFailureThrottle:
    """Failure bookkeeping for one topology; addresses are strings (``request.remote``)."""

    def __init__(self, config: FailureThrottle, clock: Callable[[], float] = time.monotonic):
        self.config = config
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

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
