"""HCatalog notification messages and topic names (seed 002, HCatalog's ``NotificationListener``).

HCatalog sent six metastore events to a JMS bus (ActiveMQ): ``CREATE_DATABASE``,
``DROP_DATABASE``, ``CREATE_TABLE``, ``DROP_TABLE``, ``ADD_PARTITION`` and ``DROP_PARTITION``,
each a JSON text (``org.apache.hive.hcatalog.messaging.json.JSON*Message``, version ``0.1``,
format ``json``) on one topic:

* database events on ``HCAT_TOPIC_PREFIX`` (``hcat.msgbus.topic.prefix``, default ``hcat``);
* table events on ``HCAT_TOPIC_PREFIX.<db>``;
* partition events on the table's ``hcat.msgbus.topic.name`` property, which HCatalog's
  ``onCreateTable`` sets to ``HCAT_TOPIC_PREFIX.<db>.<table>`` (lower case) and a user may change
  with ``ALTER TABLE … SET TBLPROPERTIES``.

HMS's notification log (``DbNotificationListener``) carries the same events as
``org.apache.hadoop.hive.metastore.messaging.json.JSON*Message`` (``json-0.2``; Hive 4's
``gzip(json-2.0)`` has the same fields): ``server``, ``servicePrincipal``, ``db``, ``table``,
``timestamp`` (seconds), ``partitions`` (a list of partition-key → value maps, in the table's
key order), plus Thrift objects as TJSON strings (``tableObjJson``, ``partitionListJson``…).
This module rebuilds HCatalog's message from that, so HCatalog-era consumers keep working.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.upstream.notification_event import MetastoreEvent

#: HCatalog's event-type strings (``HCatConstants.HCAT_*_EVENT``); HMS uses the same names.
DATABASE_TYPES = frozenset({"CREATE_DATABASE", "DROP_DATABASE"})
TABLE_TYPES = frozenset({"CREATE_TABLE", "DROP_TABLE"})
PARTITION_TYPES = frozenset({"ADD_PARTITION", "DROP_PARTITION"})
HCAT_TYPES = DATABASE_TYPES | TABLE_TYPES | PARTITION_TYPES

#: Events of other types that concern a table's partitions or data: HCatalog's later listener
#: sent ALTER_PARTITION to the table's topic, as partition events; INSERT is data in a table.
_TABLE_TOPIC_TYPES = PARTITION_TYPES | {"ALTER_PARTITION", "INSERT"}

#: ``hcat.msgbus.topic.prefix``'s default (``HCatConstants.HCAT_DEFAULT_TOPIC_PREFIX``).
DEFAULT_TOPIC_PREFIX = "hcat"
#: The table property naming a table's topic (``HCatConstants.HCAT_MSGBUS_TOPIC_NAME``).
TOPIC_NAME_PROPERTY = "hcat.msgbus.topic.name"
#: HCatalog's ``JSONMessageFactory.getVersion()`` and ``getMessageFormat()``.
HCAT_MESSAGE_VERSION = "0.1"
HCAT_MESSAGE_FORMAT = "json"

# Thrift field id of Table.parameters (map<string,string>) in hive_metastore.thrift.
_TABLE_PARAMETERS_FIELD = "9"


def is_hcat_type(event_type: str) -> bool:
    """True for the seed's six HCatalog event types (``"ADD_PARTITION"``…), else False."""
    return event_type in HCAT_TYPES


def hcat_message(event: MetastoreEvent) -> dict[str, Any]:
    """The seed's HCatalog JSON for ``event``, plus ``eventId``.

    Shape: ``{"eventId": int, "timestamp": int seconds, "eventType": str, "server": str,
    "servicePrincipal": str, "db": str}``, plus ``"table": str`` for table and partition
    events and ``"partitions": [{key: value}, …]`` for partition events (seed 002, HCatalog's
    ``JSON{Create,Drop}{Database,Table}Message`` and ``JSON{Add,Drop}PartitionMessage``).
    Fields come from HMS's decoded message (Hive 2.3's ``JSON*Message``); ``timestamp`` falls
    back to the event's ``eventTime``, ``db``/``table`` to the event's ``dbName``/``tableName``,
    ``server``/``servicePrincipal`` to ``""`` (HCatalog's value when unset). Partition entries
    that are not maps are left out.

    Raises ``ValueError`` when ``event.event_type`` is not one of the six (see
    :func:`is_hcat_type`); other types keep HMS's own message.
    """
    kind = event.event_type
    if kind not in HCAT_TYPES:
        raise ValueError(f"{kind!r} is not an HCatalog event type")
    message = event.message if isinstance(event.message, dict) else {}
    timestamp = message.get("timestamp")
    body: dict[str, Any] = {
        "eventId": event.event_id,
        "timestamp": timestamp if isinstance(timestamp, int) else event.event_time,
        "eventType": kind,
        "server": _text(message.get("server")),
        "servicePrincipal": _text(message.get("servicePrincipal")),
        "db": message.get("db") or event.db,
    }
    if kind in DATABASE_TYPES:
        return body
    body["table"] = message.get("table") or event.table
    if kind in PARTITION_TYPES:
        partitions = message.get("partitions")
        body["partitions"] = [
            {str(key): str(value) for key, value in entry.items()}
            for entry in (partitions if isinstance(partitions, list) else ())
            if isinstance(entry, dict)
        ]
    return body


def event_body(event: MetastoreEvent, message: dict | None = None) -> dict[str, Any]:
    """An event as the feed delivers it (HTTP and broker alike).

    The six HCatalog types: :func:`hcat_message`. Others: ``{"eventId", "eventTime",
    "eventType", "db", "table", "messageFormat", "message"}`` with HMS's decoded message, or
    ``message`` when given (e.g. with the user's denied columns removed), plus ``"iceberg"``
    when the event is an Iceberg commit (:func:`gateway.events.iceberg.commit_body`).
    """
    if event.event_type in HCAT_TYPES:
        return hcat_message(event)
    body = {
        "eventId": event.event_id, "eventTime": event.event_time, "eventType": event.event_type,
        "db": event.db, "table": event.table, "messageFormat": event.message_format,
        "message": event.message if message is None else message,
    }
    if event.iceberg is not None:
        body["iceberg"] = event.iceberg
    return body


def topics(
    event: MetastoreEvent,
    prefix: str = DEFAULT_TOPIC_PREFIX,
    table_params: dict[str, str] | None = None,
) -> list[str]:
    """The topic names ``event`` is published on, in the seed's scheme (one name today).

    ``prefix`` is ``hcat.msgbus.topic.prefix``. Database-level events (no table: the two
    database events, functions) → ``[prefix]``; table events (``CREATE_TABLE``, ``DROP_TABLE``,
    ``ALTER_TABLE``…) → ``[prefix.<db>]``; partition events (``ADD_PARTITION``,
    ``DROP_PARTITION``, ``ALTER_PARTITION``, ``INSERT``) → the table's
    ``hcat.msgbus.topic.name`` property, else ``prefix.<db>.<table>``, with db and table lower
    case as HCatalog's ``onCreateTable`` writes them. The property is read from
    ``table_params`` when given, else from the table object embedded in HMS's message
    (``tableObjJson``, TJSON or already decoded). A list, so a topic filter is a membership test.
    """
    message = event.message if isinstance(event.message, dict) else {}
    db = event.db or _str_or_none(message.get("db"))
    table = event.table or _str_or_none(message.get("table"))
    if not db or not table:
        return [prefix]
    if event.event_type not in _TABLE_TOPIC_TYPES:
        return [f"{prefix}.{db.lower()}"]
    params = table_params if table_params is not None else _embedded_table_params(message)
    named = params.get(TOPIC_NAME_PROPERTY) if params else None
    if isinstance(named, str) and named:
        return [named]
    return [f"{prefix}.{db.lower()}.{table.lower()}"]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _embedded_table_params(message: Any) -> dict[str, str] | None:
    """Table.parameters of the message's ``tableObjJson`` (or ``tableObjAfterJson``), or None."""
    if not isinstance(message, dict):
        return None
    return table_parameters(message.get("tableObjJson") or message.get("tableObjAfterJson"))


def table_parameters(table: Any) -> dict[str, str] | None:
    """``Table.parameters`` of a table embedded in an HMS message (``tableObjJson``,
    ``tableObjBeforeJson``, ``tableObjAfterJson``), or None.

    HMS writes the table with Thrift's TJSONProtocol (``JSONMessageFactory.createTableObjJson``):
    ``{"9":{"map":["str","str",n,{k:v…}]}}``. A decoded form (a dict with ``parameters``) is
    accepted too. Anything else, including unparsable text, gives None.
    """
    if isinstance(table, str):
        try:
            table = json.loads(table)
        except ValueError:
            return None
    if not isinstance(table, dict):
        return None
    decoded = table.get("parameters")
    if isinstance(decoded, dict):
        return decoded
    field = table.get(_TABLE_PARAMETERS_FIELD)
    if isinstance(field, dict):
        encoded = field.get("map")
        if isinstance(encoded, list) and len(encoded) == 4 and isinstance(encoded[3], dict):
            return encoded[3]
    return None
