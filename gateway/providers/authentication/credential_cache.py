"""A short-lived cache of verified credentials, so a burst of requests costs one slow check.

Entries are keyed by a keyed BLAKE2b digest (RFC 7693 §2.5, keyed mode: a MAC, which Python's
``hashlib`` documents as a faster replacement for HMAC) of user and password under a per-process
random key: the password itself is never stored (the approach of Apache ``mod_authn_socache`` and
Knox's LDAP authentication cache). BLAKE2b costs about a third of the instructions of
OpenSSL's one-shot HMAC-SHA256, and the lookup runs on every request (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable


def _monotonic() -> float:
    return time.monotonic()  # looked up per call, so tests may patch time.monotonic


class CredentialCache:
    """``ttl_seconds`` lifetime, at most ``max_entries``; ``clock`` gives seconds (monotonic).

    Entries are kept in the order they were stored, which, with one lifetime for all, is the
    order they expire in: each ``put`` first drops the expired entries at the front (so
    credentials never presented again do not stay), then, when full, the entry closest to
    expiry. Both cost O(1) amortised per ``put``.
    """

    def __init__(self, ttl_seconds: float = 300.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = _monotonic):
        #: Keyed once: each digest copies it (hashlib's copy() skips hashing the key block again).
        self._keyed = hashlib.blake2b(key=secrets.token_bytes(32), digest_size=32)
        self._ttl = ttl_seconds
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, object]] = OrderedDict()
        #: Checks in flight by credentials digest, shared by identical concurrent requests.
        self._pending: dict[bytes, asyncio.Future] = {}

    def __len__(self) -> int:
        """Entries held, expired ones not yet dropped included."""
        return len(self._entries)

    def _digest(self, user: str, password: str) -> bytes:
        digest = self._keyed.copy()
        digest.update(f"{user}\x00{password}".encode())
        return digest.digest()

    def key(self, user: str, password: str) -> bytes:
        """The keyed digest that stands for these credentials (safe to hold; not reversible)."""
        return self._digest(user, password)

    def get(self, user: str, password: str) -> object | None:
        """The value stored for these credentials if still fresh, else None."""
        if self._ttl <= 0:
            return None
        key = self._digest(user, password)
        hit = self._entries.get(key)
        if hit is None:
            return None
        expires, value = hit
        if expires < self._clock():
            del self._entries[key]
            return None
        return value

    def put(self, user: str, password: str, value: object) -> None:
        """Remember that these credentials verified, with ``value`` (e.g. the principal)."""
        if self._ttl <= 0:
            return
        now = self._clock()
        self._sweep(now)
        key = self._digest(user, password)
        self._entries[key] = (now + self._ttl, value)
        self._entries.move_to_end(key)  # a refreshed entry now expires last
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def _sweep(self, now: float) -> None:
        """Drop expired entries from the front (the soonest to expire)."""
        entries = self._entries
        while entries:
            key, (expires, _) = next(iter(entries.items()))
            if expires >= now:
                return
            del entries[key]

    def clear(self) -> None:
        self._entries.clear()

    async def verified(self, user: str, password: str,
                       check: Callable[[], Awaitable[object | None]]) -> object | None:
        """The value for these credentials: cached, else the result of the check already in
        flight for the same credentials, else ``check()``'s (stored when not None).

        A burst of identical first requests (a client opening many connections at once) thus
        costs one password check and one unit of the throttle's budget, as Apache's
        ``mod_authn_socache`` and Knox's LDAP cache intend. Only results are shared: when the
        check raises (``Throttled``: the budget of *that* request's client address) or its
        request is cancelled, each waiting request runs its own check, under its own address.
        """
        while True:
            cached = self.get(user, password)
            if cached is not None:
                return cached
            key = self._digest(user, password)
            pending = self._pending.get(key)
            if pending is None:
                break
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this request itself was cancelled
        future = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            value = await check()
        except BaseException:  # cancelled, or Throttled: waiters check for themselves
            future.cancel()
            raise
        finally:
            self._pending.pop(key, None)
        future.set_result(value)
        if value is not None:
            self.put(user, password, value)
        return value
