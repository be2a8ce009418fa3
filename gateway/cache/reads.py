"""The metadata cache of one ``hms-thrift`` service: what its handler asks before and after
the upstream call (:mod:`gateway.services.thrift_rpc`).

It holds HMS's strict-binary replies to the reads of :data:`gateway.cache.methods.CACHED`,
keyed by method and argument bytes (the seqid left out; with ``per_user``, the user and groups
the call acts as too). It sits at the upstream call, below the catalog policy: a cached reply
goes through the same reply steps as a fresh one. Only successful replies are kept.

Every response of a caching service carries ``Cache-Status`` (RFC 9211 section 2) naming the
cache ``hms-gateway``: ``hit``; ``fwd=miss`` or ``fwd=stale`` (an entry whose table changed),
with ``stored`` when the reply was kept; ``fwd=bypass`` while the cache is not following the
notification log; ``fwd=method`` for methods it never caches (writes and the rest).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from gateway.cache.follower import NotificationFollower
from gateway.cache.generations import generations
from gateway.cache.methods import CACHED, check_paths, dependencies
from gateway.cache.settings import CacheOptions
from gateway.cache.store import Entry, ReplyStore
from gateway.cache.writes import activate, invalidate
from gateway.config import ConfigError
from gateway.upstream.notification_poller import NotificationPoller
from gateway.observability import metrics
from gateway.pipeline.exchange import Exchange, call_args
from gateway.providers.authentication.base import add_response_header
from gateway.providers.identity import Identity
from gateway.thrift.binary import read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema
from gateway.thrift.walk import reply_succeeded
from gateway.upstream.errors import UpstreamError

__all__ = ["CACHE_STATUS", "Lookup", "MetadataCache", "status_value"]

log = logging.getLogger(__name__)

#: The response header (RFC 9211) and this cache's name in it.
CACHE_STATUS = "Cache-Status"
_NAME = "hms-gateway"


def status_value(result: str, stored: bool = False) -> str:
    """This cache's ``Cache-Status`` value (RFC 9211 section 2) for a lookup ``result``:
    ``hit``, else ``fwd=<result>`` (``miss``, ``stale``, ``bypass``, ``method``), with
    ``stored`` when the reply was kept."""
    if result == "hit":
        return f"{_NAME}; hit"
    return f"{_NAME}; fwd={result}" + ("; stored" if stored else "")


@dataclass(slots=True)
class Lookup:
    """One cached read's lookup: its ``key``, the counter ``slots`` it depends on and their
    ``generations`` read before the upstream call, the cached ``reply`` on a hit, and
    ``result`` (``hit``, ``miss``, ``stale``)."""

    key: bytes
    slots: tuple[int, ...]
    generations: tuple[int, ...]
    reply: bytes | None
    result: str


class MetadataCache:
    """The cache of one service: ``options`` its ``cache:`` settings, ``upstream`` its HMS
    list (the follower polls it), ``labels`` (topology, service) for metrics and logs,
    ``config_error(reason)`` the :class:`ConfigError` naming ``options.cache``, raised here
    when ``schema``'s IDL lacks a method or argument the cache names."""

    def __init__(self, options: CacheOptions, upstream, schema: ServiceSchema, labels: tuple[str, str],
                 config_error=lambda reason: ConfigError("", "options.cache", reason)):
        self.options, self.schema, self.labels = options, schema, labels
        self._config_error = config_error
        try:
            check_paths(schema)
        except ValueError as exc:  # another IDL than Hive 2.3's
            raise config_error(f"the metadata cache cannot work with this IDL: {exc}") from None
        ttl = options.ttl_seconds
        if options.max_staleness_seconds is not None:
            ttl = min(ttl, options.max_staleness_seconds)
        self.ttl = ttl
        self.store = ReplyStore(options.max_bytes, self._evicted)
        self.follower: NotificationFollower | None = NotificationFollower(
            NotificationPoller(upstream, schema), options.poll_interval_seconds, invalidate,
            self.store.clear, labels)
        self._bytes = metrics.child(metrics.CACHE_BYTES, *labels)
        self._entries = metrics.child(metrics.CACHE_ENTRIES, *labels)
        self._results = {r: metrics.child(metrics.CACHE_LOOKUPS, *labels, r)
                         for r in ("hit", "miss", "stale", "bypass")}
        activate()

    # --- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Check that HMS keeps a notification log and follow it. Raises :class:`ConfigError`
        when it keeps none and ``max_staleness_seconds`` is not set (then the cache runs on
        its TTL alone). When HMS cannot be reached the follower checks later; the cache
        forwards every call until it has."""
        assert self.follower is not None
        try:
            has_log = await self.follower.check_log()
        except UpstreamError as exc:
            log.warning("metadata cache %s/%s: HMS not reachable (%s); the cache forwards every "
                        "call until it reads HMS's notification log", *self.labels, exc)
            has_log = True  # decided by the follower once HMS answers
        if not has_log:
            if self.options.max_staleness_seconds is None:
                raise self._config_error(
                    "HMS keeps no readable notification log (no listener in "
                    "hive.metastore.transactional.event.listeners or hive.metastore.event.listeners, "
                    "and no event logged), so cached replies could not be kept exact; configure "
                    "DbNotificationListener on HMS, or set cache.max_staleness_seconds to cache by "
                    "TTL alone")
            log.warning("metadata cache %s/%s: HMS keeps no notification log; entries live at most "
                        "%s s (max_staleness_seconds)", *self.labels, self.ttl)
            self.follower = None
            return
        await self.follower.start()

    async def close(self) -> None:
        if self.follower is not None:
            await self.follower.close()
        self.store.clear()
        self._gauges()

    # --- the request path --------------------------------------------------------------------

    def consult(self, method: str, args, arguments, identity: Identity | None) -> tuple[Lookup | None, str]:
        """Before the upstream call of ``method``: ``(lookup, result)`` for a cached read (with
        its reply when ``result`` is ``hit``; ``miss`` or ``stale`` otherwise), or ``(None,
        why)`` when the call goes upstream without the cache: ``method`` (never cached) or
        ``bypass`` (not following the notification log, or arguments it cannot place).
        ``args`` is the decoded ``<method>_args`` (a thriftpy2 object), ``arguments`` the
        strict-binary argument bytes (the key, seqid left out), ``identity`` the user the call
        acts as (the key's with ``per_user``). Counts the lookup."""
        if method not in CACHED:
            return None, "method"
        now = asyncio.get_running_loop().time()
        if self.follower is not None and not self.follower.fresh(now):
            self._results["bypass"].inc()
            return None, "bypass"
        slots = dependencies(method, args)
        if slots is None:
            return None, "bypass"
        key = self._key(method, identity, arguments)
        current = generations().read(slots)
        entry = self.store.get(key)
        result = "miss"
        if entry is not None:
            if entry.expires <= now:
                self.store.remove(key, "expired")
            elif entry.generations != current:
                self.store.remove(key, "stale")
                result = "stale"
            else:
                self._results["hit"].inc()
                return Lookup(key, slots, current, entry.reply, "hit"), "hit"
        self._results[result].inc()
        self._gauges()
        return Lookup(key, slots, current, None, result), result

    def keep(self, lookup: Lookup, reply: bytes) -> bool:
        """After a miss: keep HMS's strict-binary ``reply`` when it succeeded; True when kept."""
        kept = reply_succeeded(reply) and self.store.put(lookup.key, Entry(
            reply, lookup.slots, lookup.generations, asyncio.get_running_loop().time() + self.ttl, 0))
        self._gauges()
        return kept

    def lookup(self, exchange: Exchange) -> Lookup | None:
        """:meth:`consult` for a proxied call: the :class:`Lookup` of a cached read (with its
        reply on a hit), or None when the call is forwarded without the cache (``Cache-Status``
        and the audit event say why). Sets ``Cache-Status`` for every outcome but a miss (see
        :meth:`stored`)."""
        header = exchange.header
        assert header is not None
        method = header.name
        if method not in CACHED:
            return self._forward(exchange, "method")
        try:
            args = call_args(exchange, self.schema.methods[method])
            offset = read_message_header(exchange.call)[1]
        except ProtocolError:
            return self._forward(exchange, "bypass")
        found, result = self.consult(method, args, memoryview(exchange.call)[offset:], exchange.identity)
        if found is None:
            return self._forward(exchange, result)
        if result == "hit":
            exchange.event.cache = "hit"
            add_response_header(exchange.request, CACHE_STATUS, status_value("hit"))
        return found

    def stored(self, exchange: Exchange, lookup: Lookup, reply: bytes) -> None:
        """After a miss: keep HMS's ``reply`` when it succeeded, and say so (``Cache-Status``,
        the audit event)."""
        kept = self.keep(lookup, reply)
        exchange.event.cache = lookup.result
        add_response_header(exchange.request, CACHE_STATUS,
                            status_value(lookup.result, kept))

    def forwarded(self, exchange: Exchange, lookup: Lookup) -> None:
        """After a miss whose upstream call failed: say so (nothing kept)."""
        exchange.event.cache = lookup.result
        add_response_header(exchange.request, CACHE_STATUS, status_value(lookup.result))

    def _forward(self, exchange: Exchange, why: str) -> None:
        exchange.event.cache = why
        add_response_header(exchange.request, CACHE_STATUS, status_value(why))
        return None

    def _key(self, method: str, identity: Identity | None, args) -> bytes:
        parts = [method.encode(), b"\0"]
        if self.options.per_user:
            if identity is not None:
                parts += [identity.user.encode("utf-8", "surrogatepass"), b"\0",
                          "\0".join(sorted(identity.groups)).encode("utf-8", "surrogatepass")]
            parts.append(b"\1")
        parts.append(args)
        return b"".join(parts)

    # --- invalidation and metrics ------------------------------------------------------------

    def _evicted(self, reason: str, count: int) -> None:
        metrics.child(metrics.CACHE_EVICTIONS, *self.labels, reason).inc(count)

    def _gauges(self) -> None:
        self._bytes.set(self.store.bytes)
        self._entries.set(len(self.store))
