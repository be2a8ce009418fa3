"""Read HMS's notification log over Thrift: ``get_current_notificationEventId`` and
``get_next_notification`` (Hive metastore IDL, ``NotificationEventRequest``/``NotificationEvent``),
through the gateway's metastore client (:class:`~gateway.upstream.metastore.MetastoreClient`) on
the service's :class:`~gateway.upstream.failover.Upstream`, as the gateway's own identity (no
``set_ugi``) or a configured service user.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TypeVar

from gateway.events.messages import MessageFormatError, decode_message
from gateway.events.model import MetastoreEvent
from gateway.providers.identity import Identity
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.metastore import MetastoreClient, TException

__all__ = ["MAX_BATCH", "NotificationPoller"]

log = logging.getLogger(__name__)

#: The most events one ``get_next_notification`` asks for (the issue's bound; Hive's own
#: consumers use batches of this order, e.g. ``hive.repl.event.fetch.batch``-style settings).
MAX_BATCH = 1000

T = TypeVar("T")


def _event(item) -> MetastoreEvent:
    """A ``NotificationEvent`` (thriftpy2 object) as the feed keeps it, its message decoded."""
    fmt = item.messageFormat or "json-0.2"
    try:
        body = decode_message(item.message or "", fmt)
    except MessageFormatError as exc:
        # Never raw bytes to a client: the event is kept (ids stay contiguous), its body empty.
        log.warning("notification %s (%s): undecodable message: %s", item.eventId, item.eventType, exc)
        body = {}
    return MetastoreEvent(
        event_id=int(item.eventId), event_time=int(item.eventTime or 0), event_type=str(item.eventType),
        db=item.dbName, table=item.tableName, message=body, message_format=str(fmt),
    )


class NotificationPoller:
    """The two notification-log calls against one upstream.

    ``upstream`` is a :class:`~gateway.upstream.failover.Upstream` (anything with its ``call``);
    ``identity`` None means the gateway's own connections (no ``set_ugi``). Both methods raise
    :class:`~gateway.upstream.errors.UpstreamError` subclasses on transport trouble, and
    ``UpstreamBadReply`` when HMS answers with an exception (a ``MetaException`` when it
    refuses notification reads) or a reply that does not decode.
    """

    def __init__(self, upstream, schema: ServiceSchema, identity: Identity | None = None):
        self.client = MetastoreClient(upstream, schema, identity=identity)
        self.calls = 0  # upstream calls made, for tests and the polls metric

    async def _call(self, call: Awaitable[T]) -> T:
        self.calls += 1
        try:
            return await call
        except TException as exc:  # the feed reports upstream trouble once, without a traceback
            raise UpstreamBadReply(f"HMS answered {exc!r}"[:300]) from None

    async def current_id(self) -> int:
        """HMS's newest notification event id (``get_current_notificationEventId``), 0 when none."""
        return int(await self._call(self.client.current_notification_id()) or 0)

    async def next_events(self, after: int, max_events: int = MAX_BATCH) -> list[MetastoreEvent]:
        """Events with id > ``after``, at most ``max_events`` (≤ :data:`MAX_BATCH`), oldest first."""
        limit = max(1, min(max_events, MAX_BATCH))
        items = await self._call(self.client.next_notifications(int(after), limit))
        return [_event(item) for item in items]
