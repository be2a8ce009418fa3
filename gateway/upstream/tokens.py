"""Hive delegation tokens for end users: the token string, SASL DIGEST-MD5 with a token, and
the per-user cache.

HMS's ``get_delegation_token(owner, renewer)`` answers Hadoop's ``Token.encodeToUrlString()``:
URL-safe base64 without padding of the ``Token`` Writable (vint length + identifier, vint
length + password, then ``Text`` kind and service; vints as Hadoop's ``WritableUtils``). The
identifier is an ``AbstractDelegationTokenIdentifier`` (version byte, owner, renewer and real
user as ``Text``, issue and max date as vlong milliseconds, sequence number, master key id).

A connection for that user then authenticates with DIGEST-MD5 and the token, at the configured
protection: :mod:`gateway.upstream.digest`.

:class:`DelegationTokens` holds one token per user: fetched on first use; when less than
``margin`` seconds are left before its renewal deadline (its issue date plus HMS's
``hive.cluster.delegation.token.renew-interval``, as configured for the gateway; then what a
renewal answered), renewed, or fetched anew when HMS will not renew it; fetched anew before its
max date; cancelled when it is replaced, when HMS refused it, when the user's connections were
evicted and at shutdown. A token HMS hands out that does not parse, or names another owner than
the user asked for, is refused (502) and cancelled. HMS 2.3 compares a renewer's full principal
name with the short name a token holds (``hmsgw/host@REALM tries to renew a token ... with
non-matching renewer hmsgw``), so a gateway principal with an instance or realm cannot renew:
after HMS refused to renew a live token the cache fetches anew instead, as Trino's token cache
does all along, and tries renewing again one renewal interval later (a refusal may also be
passing: HMS restarting, a token store failing over). A token's text never appears in
``repr``, logs or metrics.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from gateway.upstream.errors import UpstreamError
from gateway.upstream.sasl import UpstreamAuthFailed

log = logging.getLogger(__name__)


class TokenFormatError(ValueError):
    """A token string that is not Hadoop's ``Token`` Writable."""


def _vlong(data: bytes, pos: int) -> tuple[int, int]:
    """Hadoop ``WritableUtils.readVLong`` at ``pos``: (value, next position)."""
    if pos >= len(data):
        raise TokenFormatError("token ends inside a number")
    first = data[pos] - 256 if data[pos] > 127 else data[pos]
    if first >= -112:
        return first, pos + 1
    size = (-120 - first) if first < -120 else (-112 - first)  # bytes after the first
    if pos + 1 + size > len(data):
        raise TokenFormatError("token ends inside a number")
    value = int.from_bytes(data[pos + 1:pos + 1 + size], "big")
    return (value ^ -1 if first < -120 else value), pos + 1 + size


def _bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _vlong(data, pos)
    if size < 0 or pos + size > len(data):
        raise TokenFormatError("token ends inside a field")
    return data[pos:pos + size], pos + size


@dataclass(frozen=True, repr=False)
class DelegationToken:
    """One token: ``text`` (the URL string HMS gave), its ``identifier`` and ``password``
    bytes, and from the identifier ``owner``, ``renewer``, ``issue_date`` and ``max_date``
    (seconds since the epoch)."""

    text: str
    identifier: bytes
    password: bytes
    kind: str
    owner: str
    renewer: str
    issue_date: float
    max_date: float

    def __repr__(self) -> str:
        return f"DelegationToken(owner={self.owner!r}, kind={self.kind!r})"


def parse_token(text: str) -> DelegationToken:
    """Read HMS's token string. Raises :class:`TokenFormatError`."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise TokenFormatError("not URL-safe base64") from None
    identifier, pos = _bytes(raw, 0)
    password, pos = _bytes(raw, pos)
    kind, pos = _bytes(raw, pos)
    _service, pos = _bytes(raw, pos)
    if pos != len(raw):
        raise TokenFormatError("bytes after the token's service")
    if not identifier:
        raise TokenFormatError("empty identifier")
    # AbstractDelegationTokenIdentifier: version byte, then owner, renewer, real user, dates.
    owner, at = _bytes(identifier, 1)
    renewer, at = _bytes(identifier, at)
    _real, at = _bytes(identifier, at)
    issue, at = _vlong(identifier, at)
    max_date, at = _vlong(identifier, at)
    return DelegationToken(text, identifier, password, kind.decode("utf-8", "replace"),
                           owner.decode("utf-8", "replace"), renewer.decode("utf-8", "replace"),
                           issue / 1000, max_date / 1000)


Fetch = Callable[[str], Awaitable[str]]
Renew = Callable[[str], Awaitable[int]]
Cancel = Callable[[str], Awaitable[None]]


@dataclass(repr=False)
class _Held:
    token: DelegationToken
    renew_by: float  # seconds since the epoch: HMS's renewal deadline


@dataclass
class DelegationTokens:
    """One token per user (see the module docstring). ``fetch(user)`` returns a token
    string, ``renew(text)`` the new renewal deadline in ms since the epoch, ``cancel(text)``
    cancels; all three raise :class:`UpstreamError`. ``renew_interval`` and ``margin`` are
    seconds."""

    fetch: Fetch
    renew: Renew
    cancel: Cancel
    renew_interval: float = 86400.0
    margin: float = 60.0
    clock: Callable[[], float] = time.time
    #: Seconds since the epoch before which no renewal is tried: one ``renew_interval`` after HMS
    #: refused to renew a live token (tokens are fetched anew meanwhile).
    renew_after: float = 0.0
    _held: dict[str, _Held] = field(default_factory=dict, repr=False)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict, repr=False)
    _cancels: set[asyncio.Task] = field(default_factory=set, repr=False)
    #: Counts for tests and docs: tokens fetched, renewed, cancelled; renewals refused.
    fetched: int = 0
    renewed: int = 0
    cancelled: int = 0
    renewals_refused: int = 0

    async def get(self, user: str) -> DelegationToken:
        """``user``'s token, fetched or renewed as needed. Raises what ``fetch``/``renew`` raise
        (``UpstreamError``), and :class:`UpstreamAuthFailed` for a token that does not parse or
        names another owner (cancelled)."""
        lock = self._locks.setdefault(user, asyncio.Lock())
        async with lock:
            held = self._held.get(user)
            now = self.clock()
            if held is not None and now < held.token.max_date - self.margin:
                if now < held.renew_by - self.margin:
                    return held.token
                if now >= self.renew_after:
                    try:
                        held.renew_by = await self.renew(held.token.text) / 1000
                        self.renewed += 1
                        return held.token
                    except UpstreamError as exc:
                        self.renewals_refused += 1
                        if now < held.renew_by:  # refused while live: fetch instead for a while
                            self.renew_after = now + self.renew_interval
                        log.info("renewing the delegation token of %s failed (%s): fetching a new one",
                                 user, exc)
            if held is not None:  # near its max date, or not renewed
                old = self._held.pop(user).token
                self._cancel_later(old.text, old.owner)
            token = self._accept(user, await self.fetch(user))
            self.fetched += 1
            renew_by = min(token.issue_date + self.renew_interval, token.max_date)
            self._held[user] = _Held(token, renew_by)
            return token

    def _accept(self, user: str, text: str) -> DelegationToken:
        """``text`` as ``user``'s token. Raises :class:`UpstreamAuthFailed`, after cancelling
        it, for one that does not parse or that HMS issued to another owner."""
        try:
            token = parse_token(text)
        except TokenFormatError as exc:
            self._cancel_later(text, user)
            raise UpstreamAuthFailed(f"HMS sent a delegation token for {user} that does not "
                                     f"parse: {exc}") from None
        if token.owner != user:  # the calls would run as someone else
            self._cancel_later(text, user)
            raise UpstreamAuthFailed(f"HMS sent a delegation token for {user} that names "
                                     f"another owner ({token.owner})")
        return token

    def invalidate(self, user: str, token: DelegationToken) -> None:
        """Drop ``user``'s ``token`` (HMS refused it) and cancel it in the background, unless it
        was replaced meanwhile: the next :meth:`get` fetches anew. HMS refuses an expired or
        cancelled token, but also one it cannot check (a token store failing over): cancelled,
        no token lives on unused."""
        held = self._held.get(user)
        if held is not None and held.token is token:
            del self._held[user]
            self._cancel_later(token.text, token.owner)

    def release(self, user: str) -> None:
        """Cancel ``user``'s token in the background (its connections were evicted)."""
        held = self._held.pop(user, None)
        lock = self._locks.get(user)
        if lock is not None and not lock.locked():
            del self._locks[user]
        if held is not None:
            self._cancel_later(held.token.text, user)

    def holds(self, user: str) -> bool:
        return user in self._held

    def _cancel_later(self, text: str, owner: str) -> None:
        task = asyncio.get_running_loop().create_task(self._cancel(text, owner))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel(self, text: str, owner: str) -> None:
        try:
            await self.cancel(text)
            self.cancelled += 1
        except (UpstreamError, Exception) as exc:  # a token left expires at its max date anyway
            log.warning("cancelling the delegation token of %s failed: %s", owner,
                        type(exc).__name__ if not isinstance(exc, UpstreamError) else exc)

    async def close(self) -> None:
        """Cancel every token held and wait for every cancellation."""
        for user in list(self._held):
            self.release(user)
        if self._cancels:
            await asyncio.gather(*self._cancels, return_exceptions=True)
