"""Writes through the gateway drop what they touch before their reply goes back.

:func:`note_write` is called by :meth:`gateway.upstream.failover.Upstream.call` after every
call that is not a read, whatever service or gateway-side client made it (an ``hms-thrift``
client's call, a Glue or Iceberg REST write through the metastore client), and before that
call's reply is handed back; it bumps the shared counters of the database or table the write
names (:mod:`gateway.cache.methods`), so every worker's later lookup misses. A write whose
outcome is unknown (a timeout) is treated as done.
"""

from __future__ import annotations

from gateway.cache.generations import generations
from gateway.cache.methods import NO_CATALOG_CHANGE, touched_by_write
from gateway.observability import metrics
from gateway.thrift.binary import read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.objects import decode_args
from gateway.thrift.schema import load_schema
from gateway.thrift.hive_methods import is_read_only
from gateway.upstream.failover import CALL_OBSERVERS

__all__ = ["activate", "invalidate", "note_write"]

def invalidate(slots, source: str) -> None:
    """Bump the shared counters ``slots`` (every worker's entries depending on them miss from
    now on) and count it in ``hms_gateway_cache_invalidations_total{source}`` (``event``,
    ``write``, ``resync``)."""
    generations().bump(slots)
    metrics.child(metrics.CACHE_INVALIDATIONS, source).inc()


def activate() -> None:
    """Start noting writes of every upstream call in this process (a service with a cache was
    built): registers :func:`note_write` with :data:`gateway.upstream.failover.CALL_OBSERVERS`."""
    if note_write not in CALL_OBSERVERS:
        CALL_OBSERVERS.append(note_write)


def note_write(request: bytes) -> None:
    """Bump the counters the strict-binary call ``request`` touches, unless its method only
    reads (told by its name, whatever the caller's ``read_only``)."""
    try:
        name = read_message_header(request)[0].name
    except ProtocolError:
        return  # never sent: the pool refuses what it cannot frame
    if is_read_only(name) or name in NO_CATALOG_CHANGE:
        return  # before decoding: locks and heartbeats come by the thousand
    method = load_schema().methods.get(name)
    try:
        args = decode_args(request, method) if method is not None else None
    except ProtocolError:
        args = None
    slots = touched_by_write(name, args)
    if slots:
        invalidate(slots, "write")
