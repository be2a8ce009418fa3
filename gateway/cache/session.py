"""One request's reads through the metadata cache, for kinds that call HMS with the gateway's
own client (Glue, Iceberg REST): the :class:`~gateway.upstream.metastore.MetastoreClient` of the
request asks :meth:`CacheSession.call` instead of the upstream for every read, and the service
answers with one ``Cache-Status`` (RFC 9211 section 2) summing the request's reads.

A kind opens a session only for requests that change nothing (Glue's reads, Iceberg REST's
``GET``/``HEAD`` and the signer): a commit's reads must see HMS itself, since it compares the
table it read with the table under HMS's lock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.cache.reads import CACHE_STATUS, MetadataCache, status_value
from gateway.providers.authentication.base import add_response_header
from gateway.providers.identity import Identity

__all__ = ["CACHE_STATUS", "CacheSession", "cache_status", "report"]

# When reads of one request differ, the summary names the one furthest from a hit.
_RANK = {"hit": 0, "miss": 1, "stale": 2, "bypass": 3}


class CacheSession:
    """The reads of one request through ``cache``; :attr:`results` the outcome of each
    (``hit``, ``miss``, ``stale``, ``bypass``), :attr:`stored` how many replies were kept."""

    def __init__(self, cache: MetadataCache):
        self.cache = cache
        self.results: list[str] = []
        self.stored = 0

    async def call(self, method: str, args, arguments: memoryview, identity: Identity | None,
                   forward: Callable[[], Awaitable[bytes]]) -> bytes:
        """HMS's strict-binary reply to ``method``: the cached one on a hit, else
        ``await forward()`` (the upstream call), kept when it succeeded. ``args`` the decoded
        ``<method>_args``, ``arguments`` its strict-binary bytes, ``identity`` the user the call
        acts as. Raises what ``forward`` raises."""
        lookup, result = self.cache.consult(method, args, arguments, identity)
        if result != "method":
            self.results.append(result)
        if lookup is not None and lookup.reply is not None:
            return lookup.reply
        reply = await forward()
        if lookup is not None and self.cache.keep(lookup, reply):
            self.stored += 1
        return reply

    def summary(self) -> str:
        """The audit token of the request: ``hit`` when every read hit, else the result
        furthest from a hit; ``bypass`` when it made no cached read."""
        if not self.results:
            return "bypass"
        return max(self.results, key=_RANK.__getitem__)


def cache_status(session: CacheSession | None) -> str:
    """The ``Cache-Status`` value of a request of a caching service: ``hit``; ``fwd=miss``,
    ``fwd=stale`` (with ``stored`` when a reply was kept) or ``fwd=bypass`` (the request's reads
    did not use the cache, or it made none); ``fwd=method`` for a request that may change the
    catalog (``session`` None: its reads go to HMS)."""
    if session is None:
        return status_value("method")
    return status_value(session.summary(), bool(session.stored))


def report(request, event, session: CacheSession | None) -> None:
    """Say what the cache did for a request of a caching service: ``Cache-Status`` on its
    response (:func:`cache_status`) and the audit ``event``'s ``cache`` (the session's
    :meth:`~CacheSession.summary`, or ``method`` without a session)."""
    event.cache = session.summary() if session is not None else "method"
    add_response_header(request, CACHE_STATUS, cache_status(session))
