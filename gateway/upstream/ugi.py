"""One identity per upstream connection: the ``set_ugi`` handshake and the idle-connection LRU.

HMS (``hive.metastore.execute.setugi=true``, the default since Hive 2.3) acts, for the rest of
an unsecured binary connection, as the user named by the first ``set_ugi`` call
(``list<string> set_ugi(1:string user_name, 2:list<string> group_names)
throws (1:MetaException o1)``, MS-HMSHTTP Appendix A). So a connection is opened for one
identity, ``set_ugi`` is sent right after connecting, and the pool only hands the connection
to calls of that same identity. (Hive 4's HTTP transport takes the user from the
``x-actor-username`` header instead: :mod:`gateway.upstream.http`.)

The idle list is ordered by check-in time; at most ``pool_size`` connections and
``max_identities`` distinct identities are kept, the least recently used going first.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from gateway.providers.identity import Identity
from gateway.thrift.binary import EXCEPTION, REPLY, encode_binary_call, read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import TType
from gateway.thrift.walk import iter_fields, string_span
from gateway.upstream.errors import UpstreamError

#: What a connection is bound to: (user, sorted groups); None for the gateway's own calls
#: (readiness probe), which send no ``set_ugi``.
UgiKey = tuple[str, tuple[str, ...]] | None

SET_UGI = "set_ugi"


class UpstreamIdentityRefused(UpstreamError):
    """HMS answered ``set_ugi`` with an exception, or not as a ``set_ugi`` reply (502)."""

    status = 502
    outcome = "identity_refused"


class _Pooled(Protocol):
    ugi: UgiKey

    def usable(self) -> bool: ...

    def close(self) -> None: ...


def ugi_key(identity: Identity | None) -> UgiKey:
    """The pooling key of ``identity``: effective user and its groups, sorted."""
    if identity is None:
        return None
    return identity.user, tuple(sorted(identity.groups))


def set_ugi_call(key: tuple[str, tuple[str, ...]], seqid: int = 0) -> bytes:
    """The strict-binary ``set_ugi(user, groups)`` CALL for ``key``."""
    user, groups = key
    return encode_binary_call(SET_UGI, seqid, [(1, TType.STRING, user), (2, TType.LIST, groups)])


def check_set_ugi_reply(reply: bytes, upstream: str) -> None:
    """Return if ``reply`` is a successful ``set_ugi`` REPLY (result field 0 or empty).

    Raises :class:`UpstreamIdentityRefused` naming HMS's message for a ``MetaException``
    (result field 1) or a ``TApplicationException``, or when the reply is something else.
    """
    try:
        header, pos = read_message_header(reply)
    except ProtocolError as exc:
        reason = f"upstream {upstream} answered set_ugi with {exc.reason}"
        raise UpstreamIdentityRefused(reason) from None
    if header.name != SET_UGI or header.type not in (REPLY, EXCEPTION):
        raise UpstreamIdentityRefused(f"upstream {upstream} did not answer set_ugi")
    try:
        if header.type == REPLY:
            first = next(iter_fields(reply, pos), None)
            if first is None or first[0] == 0:  # void or success
                return
            if first[1] != TType.STRUCT:
                raise UpstreamIdentityRefused(f"upstream {upstream} refused set_ugi")
            pos = first[2]  # the MetaException struct
        message = _exception_message(reply, pos)
    except ProtocolError:
        raise UpstreamIdentityRefused(f"upstream {upstream} sent a malformed set_ugi reply") from None
    raise UpstreamIdentityRefused(f"upstream {upstream} refused set_ugi: {message[:200]}")


def _exception_message(data: bytes, pos: int) -> str:
    # MetaException and TApplicationException carry their message as string field 1.
    for fid, ftype, start, _ in iter_fields(data, pos):
        if fid == 1 and ftype == TType.STRING:
            first, last = string_span(data, start)
            return data[first:last].decode("utf-8", "replace")
    return "no message"


def take_idle(idle: list[_Pooled], key: UgiKey) -> _Pooled | None:
    """Remove and return the most recently checked-in usable connection bound to ``key``.

    Unusable connections of that key met on the way are closed and dropped. None if none.
    """
    for i in range(len(idle) - 1, -1, -1):
        conn = idle[i]
        if conn.ugi != key:
            continue
        del idle[i]
        if conn.usable():
            return conn
        conn.close()
    return None


def trim_idle(idle: list[_Pooled], pool_size: int, max_identities: int) -> list[_Pooled]:
    """Drop, and return for closing, what exceeds the bounds: whole identities least recently
    used first until at most ``max_identities`` remain, then the oldest connections down to
    ``pool_size``. ``idle`` is ordered oldest check-in first."""
    evicted: list[_Pooled] = []
    last_use: dict[UgiKey, int] = {}
    for i, conn in enumerate(idle):
        last_use[conn.ugi] = i
    if len(last_use) > max_identities:
        stale = set(sorted(last_use, key=last_use.__getitem__)[: len(last_use) - max_identities])
        evicted += [c for c in idle if c.ugi in stale]
        idle[:] = [c for c in idle if c.ugi not in stale]
    if len(idle) > pool_size:
        cut = len(idle) - pool_size
        evicted += idle[:cut]
        del idle[:cut]
    return evicted


__all__: Sequence[str] = (
    "Identity",
    "UgiKey",
    "UpstreamIdentityRefused",
    "ugi_key",
    "set_ugi_call",
    "check_set_ugi_reply",
    "take_idle",
    "trim_idle",
)
