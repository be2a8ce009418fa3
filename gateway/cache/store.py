"""The replies one service's cache holds: least recently used first out, bounded in bytes,
each entry with an expiry (the TTL safety net) and the generations it was filled under."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["Entry", "ReplyStore"]

#: Bytes counted per entry beyond its key and reply (the entry object and the dict slot).
OVERHEAD = 200


@dataclass(slots=True)
class Entry:
    """One cached reply: HMS's strict-binary ``reply``, the counter ``slots`` it depends on and
    their values ``generations`` when it was filled, ``expires`` (monotonic seconds) and
    ``size`` in bytes as counted against the bound."""

    reply: bytes
    slots: tuple[int, ...]
    generations: tuple[int, ...]
    expires: float
    size: int


class ReplyStore:
    """Entries by key, at most ``max_bytes`` in all (keys, replies and :data:`OVERHEAD`).

    ``on_evict(reason, count)`` is told of every removal but :meth:`clear`'s (reasons ``size``,
    ``expired``, ``stale``).
    """

    def __init__(self, max_bytes: int, on_evict=lambda reason, count: None):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[bytes, Entry] = OrderedDict()
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> Entry | None:
        """The entry of ``key``, now the most recently used; None when absent."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def remove(self, key: bytes, reason: str) -> None:
        """Drop ``key``'s entry, if any, counting it under ``reason``."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size
            self._on_evict(reason, 1)

    def put(self, key: bytes, entry: Entry) -> bool:
        """Store ``entry`` under ``key`` (replacing one), evicting the least recently used
        entries until the bound holds. False, and nothing stored, when ``entry`` alone would
        take more than a quarter of the bound."""
        entry.size = len(key) + len(entry.reply) + OVERHEAD
        if entry.size > self.max_bytes // 4:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self._entries[key] = entry
        self.bytes += entry.size
        evicted = 0
        while self.bytes > self.max_bytes:
            _, gone = self._entries.popitem(last=False)
            self.bytes -= gone.size
            evicted += 1
        if evicted:
            self._on_evict("size", evicted)
        return True

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
        self.bytes = 0
