"""Read HMS's notification log over Thrift: ``get_current_notificationEventId`` and
``get_next_notification`` (Hive metastore IDL, ``NotificationEventRequest``/``NotificationEvent``).

Calls are encoded and replies decoded with the gateway's own Thrift translation (TJSON ⇄ strict
binary), and dispatched through the service's :class:`~gateway.upstream.failover.Upstream`
as the gateway's service identity (no ``set_ugi``) or a configured service user.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass

from gateway.events.messages import MessageFormatError, decode_message
from gateway.events.model import MetastoreEvent
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary
from gateway.upstream.errors import UpstreamBadReply

__all__ = ["MAX_BATCH", "NotificationPoller", "ServiceIdentity"]

log = logging.getLogger(__name__)

#: The most events one ``get_next_notification`` asks for (the issue's bound; Hive's own
#: consumers use batches of this order, e.g. ``hive.repl.event.fetch.batch``-style settings).
MAX_BATCH = 1000

_REPLY, _EXCEPTION = 2, 3


@dataclass(frozen=True)
class ServiceIdentity:
    """The user the poller acts as (``set_ugi``), when the HMS authorizes notification reads
    (``hive.metastore.event.db.notification.api.auth``, Hive 3+)."""

    user: str
    groups: frozenset[str] = frozenset()


def _event(fields: dict) -> MetastoreEvent:
    def value(fid: str, tag: str, default=None):
        item = fields.get(fid)
        return item.get(tag, default) if isinstance(item, dict) else default

    event_id, event_type = value("1", "i64"), value("3", "str")
    message, fmt = value("6", "str", ""), value("7", "str", "json-0.2")
    try:
        body = decode_message(message, fmt)
    except MessageFormatError as exc:
        # Never raw bytes to a client: the event is kept (ids stay contiguous), its body empty.
        log.warning("notification %s (%s): undecodable message: %s", event_id, event_type, exc)
        body = {}
    return MetastoreEvent(
        event_id=int(event_id), event_time=int(value("2", "i32", 0)), event_type=str(event_type),
        db=value("4", "str"), table=value("5", "str"), message=body, message_format=str(fmt),
    )


class NotificationPoller:
    """The two notification-log calls against one upstream.

    ``upstream`` is a :class:`~gateway.upstream.failover.Upstream` (anything with its ``call``);
    ``identity`` None means the gateway's own connections (no ``set_ugi``). Both methods raise
    :class:`~gateway.upstream.errors.UpstreamError` subclasses on transport trouble and
    ``UpstreamBadReply`` on a Thrift exception or an undecodable reply.
    """

    def __init__(self, upstream, schema: ServiceSchema, identity: ServiceIdentity | None = None):
        self.upstream = upstream
        self.schema = schema
        self.identity = identity
        self._seqids = itertools.count(1)
        self.calls = 0  # upstream calls made, for tests and the polls metric

    async def _call(self, name: str, args: dict) -> dict:
        seqid = next(self._seqids) & 0x7FFFFFFF
        body = json.dumps([1, name, 1, seqid, args], separators=(",", ":")).encode()
        _, request = tjson_call_to_binary(body, self.schema)
        self.calls += 1
        reply = await self.upstream.call(request, identity=self.identity, read_only=True)
        try:
            message = json.loads(binary_reply_to_tjson(reply, self.schema))
        except (ProtocolError, ValueError) as exc:
            raise UpstreamBadReply(f"{name} reply undecodable: {exc}") from None
        mtype, result = message[2], message[4]
        if mtype == _EXCEPTION or "0" not in result:
            raise UpstreamBadReply(f"{name} answered with an exception: {json.dumps(result)[:300]}")
        return result["0"]["rec"]

    async def current_id(self) -> int:
        """HMS's newest notification event id (``get_current_notificationEventId``), 0 when none."""
        rec = await self._call("get_current_notificationEventId", {})
        return int(rec.get("1", {}).get("i64", 0))

    async def next_events(self, after: int, max_events: int = MAX_BATCH) -> list[MetastoreEvent]:
        """Events with id > ``after``, at most ``max_events`` (≤ :data:`MAX_BATCH`), oldest first."""
        limit = max(1, min(max_events, MAX_BATCH))
        rec = await self._call(
            "get_next_notification", {"1": {"rec": {"1": {"i64": int(after)}, "2": {"i32": limit}}}},
        )
        items = rec.get("1", {}).get("lst", ["rec", 0])[2:]
        return [_event(item) for item in items]
