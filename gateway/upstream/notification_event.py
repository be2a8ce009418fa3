"""The metastore event value shared by the metadata cache, the change feed, the HTTP service and the
broker publisher, as :mod:`gateway.upstream.notification_poller` reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetastoreEvent:
    """One entry of HMS's notification log (Thrift ``NotificationEvent``), message decoded.

    ``event_id`` is HMS's ``eventId`` (strictly increasing in one metastore's log);
    ``event_time`` is HMS's ``eventTime`` in seconds since the epoch; ``event_type`` is HMS's
    type name, e.g. ``"CREATE_TABLE"``; ``db``/``table`` are ``dbName``/``tableName`` (None
    when HMS leaves them unset); ``message`` is HMS's message decoded to JSON
    (``json-0.2`` text, or Hive 4's ``gzip(json-2.0)``), never raw bytes; ``message_format``
    is HMS's ``messageFormat``, e.g. ``"json-0.2"``; ``iceberg`` is the Iceberg commit an
    ``ALTER_TABLE`` event records (:func:`gateway.events.iceberg.commit_body`), else None.
    """

    event_id: int
    event_time: int
    event_type: str
    db: str | None
    table: str | None
    message: dict
    message_format: str
    iceberg: dict | None = None
