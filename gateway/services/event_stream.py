"""Service kind ``event-stream``: HMS's notification log followed over HTTPS (issue 12).

One :class:`~gateway.events.feed.ChangeFeed` per service polls the upstream; every client reads
from it. Requests (GET, after the service's authentication, identity assertion and ACL):

- **Long poll**: ``GET …?after=N&limit=L&wait=S`` → ``200 {"events": [...], "next": M}``;
  ``M`` is the id to pass as ``after`` next (it moves past events the filters dropped).
  ``after`` defaults to the newest id (follow from now); ``limit`` 1-1000 (default 1000)
  counts delivered events (the scan goes past filtered ones to the ring's newest);
  ``wait`` seconds, 0 (default) to ``max_wait_seconds``: wait that long for a first event.
- **Server-Sent Events** (``Accept: text/event-stream``, WHATWG HTML §9.2): one ``data:`` line
  of JSON per event, ``id:`` the event id; resumes after ``Last-Event-ID`` (else ``after``);
  a ``: ping`` comment every ``heartbeat_seconds`` (aiohttp-sse). When the client's position
  becomes unservable mid-stream, a last event ``event: resync`` (same JSON as the 410) ends it.
- **Filters**: ``db``, ``table`` (names, case-insensitive; ``table`` needs ``db``), ``types``
  (comma-separated HMS event types, :data:`gateway.events.feed.EVENT_TYPES`; another is 400),
  ``topic`` (a seed topic name: ``hcat``, ``hcat.<db>``, ``hcat.<db>.<table>`` or the
  table's ``hcat.msgbus.topic.name``; prefix ``topic_prefix``).
- **Bodies**: the seed's HCatalog JSON plus ``eventId`` for its six types
  (:func:`gateway.events.hcat.hcat_message`); for other types ``{"eventId", "eventTime",
  "eventType", "db", "table", "messageFormat", "message"}`` with HMS's message decoded.
  ``Accept: application/cloudevents+json`` (or ``format=cloudevents``): each event as a
  CloudEvents 1.0 structured JSON object (``cloudevents`` library), the body as ``data``.
  An ``ALTER_TABLE`` that commits an Iceberg table also has ``"iceberg"``
  (:mod:`gateway.events.iceberg`: snapshot id, operation, summary, metadata locations, user);
  ``types=ICEBERG_COMMIT`` selects those events.
- **Per-user delivery**: with a catalog policy (``policy_file``), a user gets only events on
  databases/tables their :class:`~gateway.policy.view.CatalogView` shows, and Thrift tables/partitions
  embedded in HMS messages (``tableObjJson``…) lose columns the user may not ``select``;
  partition-key → value maps lose denied partition keys.

Errors: 400 JSON ``{"error": "bad_request", "detail"}`` for bad query values; 405 for other
methods; 410 JSON ``{"error": "resync", "reason": "trimmed"|"reset", "detail", "latest": id}``
when events after ``after`` are gone (HMS's time-to-live, or the ring) or ``after`` is ahead of
HMS (reset), after Kubernetes' watch on an expired ``resourceVersion``: relist and follow from
``latest``; 503 JSON while the feed has not yet read HMS.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aiohttp import hdrs, web
from aiohttp_sse import sse_response
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.config import reported_error
from gateway.events import hcat
from gateway.events.feed import ChangeFeed, FeedUnavailable, Resync
from gateway.events.iceberg import (
    ICEBERG_COMMIT,
    IcebergCommitOptions,
    IcebergCommits,
    commit_locations,
    file_io_of,
    for_viewer,
)
from gateway.upstream.notification_event import MetastoreEvent
from gateway.upstream.notification_poller import MAX_BATCH, NotificationPoller
from gateway.observability import metrics
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import MethodNotAllowed
from gateway.policy.columns import filter_parameters
from gateway.policy.view import CatalogView
from gateway.providers.identity import Identity
from gateway.services.base import ServiceContext, key_path
from gateway.worker_role import current_worker

__all__ = ["EventStreamService"]

SSE_TYPE = "text/event-stream"
CLOUDEVENTS_TYPE = "application/cloudevents+json"
#: CloudEvents ``type`` prefix (reverse-DNS, CloudEvents 1.0 §3.1.1 recommends it).
CLOUDEVENTS_TYPE_PREFIX = "org.apache.hive.metastore."
#: How long a request waits for a feed that has not read HMS yet (just started) before a 503.
_READY_WAIT = 5.0


class EventStreamOptions(BaseModel):
    """``options:`` of an ``event-stream`` service (seconds for every ``*_seconds``).

    ``ring_size``: events kept in memory, the window clients can resume in;
    ``topic_prefix``: the seed's ``hcat.msgbus.topic.prefix``; ``service_user``/``service_groups``:
    who the poller is to HMS (``set_ugi``; default the gateway's own connection, no ``set_ugi``);
    ``broker``: :class:`gateway.events.broker.BrokerSettings`, to also publish to ActiveMQ;
    ``iceberg``: Iceberg commits on ``ALTER_TABLE`` events (:class:`IcebergCommitOptions`).
    """

    model_config = ConfigDict(extra="forbid")

    poll_interval_seconds: float = Field(1.0, gt=0, le=3600)
    ring_size: int = Field(10_000, ge=1, le=1_000_000)
    heartbeat_seconds: float = Field(15.0, gt=0, le=3600)
    max_wait_seconds: float = Field(60.0, gt=0, le=3600)
    topic_prefix: str = Field(hcat.DEFAULT_TOPIC_PREFIX, min_length=1)
    service_user: str | None = Field(None, min_length=1)
    service_groups: list[str] = Field(default_factory=list)
    broker: dict[str, Any] | None = None
    iceberg: IcebergCommitOptions = Field(default_factory=IcebergCommitOptions)


class BadQuery(ValueError):
    """A query value the service cannot use (400)."""


def _json(status: int, body: dict, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps(body, separators=(",", ":")),
                        content_type="application/json", headers=headers)


def _int(query, name: str, default: int | None, low: int, high: int) -> int | None:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text, 10)
    except ValueError:
        raise BadQuery(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise BadQuery(f"{name} must be between {low} and {high}")
    return value


class _Query:
    """The request's position, size, wait and filters, validated (raises :class:`BadQuery`)."""

    def __init__(self, request: web.BaseRequest, max_wait: float, sse: bool,
                 known_types: frozenset[str] | None = None, iceberg: bool = True):
        query = request.query
        self.iceberg = iceberg  # the service attaches Iceberg commits (types=ICEBERG_COMMIT selects them)
        last = request.headers.get("Last-Event-ID")
        self.after = _int({"after": last} if sse and last else query, "after", None, 0, 2**63 - 1)
        self.limit = _int(query, "limit", MAX_BATCH, 1, MAX_BATCH)
        wait = query.get("wait", "")
        try:
            self.wait = float(wait) if wait else 0.0
        except ValueError:
            raise BadQuery("wait must be a number of seconds") from None
        if not 0 <= self.wait <= max_wait:  # also refuses nan
            raise BadQuery(f"wait must be between 0 and {max_wait:g} seconds")
        self.db = (query.get("db") or "").lower() or None
        self.table = (query.get("table") or "").lower() or None
        types = query.get("types") or ""
        self.types = frozenset(t.strip().upper() for t in types.split(",") if t.strip()) or None
        self.topic = query.get("topic") or None
        if any(len(v) > 1024 for v in query.values()):
            raise BadQuery("query value too long")
        unknown = sorted(self.types - known_types) if self.types and known_types is not None else []
        if unknown:  # a typo would otherwise filter out every event, silently
            raise BadQuery(f"unknown event type {unknown[0]} in types; known types: "
                           + ", ".join(sorted(known_types or ())))
        if self.table is not None and self.db is None:
            raise BadQuery("table needs db: a table name is unique only within its database")
        accept = request.headers.get(hdrs.ACCEPT, "")
        self.cloudevents = CLOUDEVENTS_TYPE in accept or query.get("format") == "cloudevents"
        if query.get("format") not in (None, "", "cloudevents", "json"):
            raise BadQuery("format must be json or cloudevents")

    def matches(self, event: MetastoreEvent, prefix: str) -> bool:
        # A commit is known from the event alone (commit_locations): its metadata file is read
        # only for the events delivered (ChangeFeed.detailed).
        if self.types is not None and event.event_type not in self.types and not (
                ICEBERG_COMMIT in self.types and self.iceberg and commit_locations(event) is not None):
            return False
        if self.db is not None and (event.db or "").lower() != self.db:
            return False
        if self.table is not None and (event.table or "").lower() != self.table:
            return False
        return self.topic is None or self.topic in hcat.topics(event, prefix)


# --- per-user filtering of Thrift objects embedded in HMS messages (TJSON text) ------------------

# Field ids in hive_metastore.thrift: Table.sd 7, Table.parameters 9; Partition.sd 6,
# Partition.parameters 7; StorageDescriptor.cols 1; FieldSchema.name 1.
_TABLE_SD, _TABLE_PARAMS, _PART_SD, _PART_PARAMS = "7", "9", "6", "7"


def _filter_tjson_object(text: str, sd_field: str, params_field: str, keep) -> str | None:
    """The TJSON struct ``text`` with denied columns removed, or None when it cannot be read
    (the caller then drops it: fail closed)."""
    try:
        obj = json.loads(text)
        sd = obj.get(sd_field, {}).get("rec")
        if isinstance(sd, dict) and "1" in sd:
            tag, _count, *cols = sd["1"]["lst"]
            kept = [c for c in cols if keep(c.get("1", {}).get("str", ""))]
            sd["1"]["lst"] = [tag, len(kept), *kept]
        params = obj.get(params_field, {}).get("map")
        if isinstance(params, list) and len(params) == 4 and isinstance(params[3], dict):
            filtered = filter_parameters(params[3], keep) or {}
            obj[params_field]["map"] = [params[0], params[1], len(filtered), filtered]
        return json.dumps(obj, separators=(",", ":"))
    except (ValueError, AttributeError, KeyError, TypeError, IndexError):
        return None


#: Message keys holding partition-key → value maps (json-0.2: ADD/DROP_PARTITION ``partitions``,
#: ALTER_PARTITION ``keyValues``, INSERT ``partKeyVals``); partition keys are columns too.
_PARTITION_VALUE_KEYS = frozenset({"partitions", "keyValues", "partKeyVals"})


def _filter_partition_values(value, keep):
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if keep(k)}
    if isinstance(value, list):
        return [_filter_partition_values(v, keep) for v in value if isinstance(v, dict)]
    return None


def _filter_message(message: dict, keep) -> dict:
    """HMS's decoded message with embedded tables and partitions column-filtered; other
    embedded Thrift objects (``…Json`` keys this code does not know) are dropped."""
    out: dict = {}
    for key, value in message.items():
        if key in _PARTITION_VALUE_KEYS:
            out[key] = _filter_partition_values(value, keep)
            continue
        if not key.endswith("Json"):
            out[key] = value
            continue
        if key.startswith("table"):
            fields = (_TABLE_SD, _TABLE_PARAMS)
        elif key.startswith("partition"):
            fields = (_PART_SD, _PART_PARAMS)
        else:
            continue
        if isinstance(value, list):
            kept = [_filter_tjson_object(v, *fields, keep) for v in value if isinstance(v, str)]
            out[key] = [v for v in kept if v is not None]
        elif isinstance(value, str):
            filtered = _filter_tjson_object(value, *fields, keep)
            if filtered is not None:
                out[key] = filtered
    return out


def _visible(view: CatalogView, event: MetastoreEvent) -> bool:
    """Whether the user of ``view`` gets ``event``: its database (and table) visible; an event
    naming no database has nothing to judge it by (fail closed)."""
    return bool(event.db) and view.visible(event.db, event.table or None)  # type: ignore[arg-type]


def _keep(view: CatalogView | None, event: MetastoreEvent):
    """None when every column of the event's table stays, else a predicate on column names."""
    return view.keep(event.db, event.table) if view is not None and event.table else None


class EventStreamService:
    """Serves one ``event-stream`` service: its :class:`ChangeFeed` and optional broker publisher."""

    kind = "event-stream"
    roles = ("authentication", "identity-assertion", "authorization")
    Options = EventStreamOptions

    def __init__(self, ctx: ServiceContext):
        options: EventStreamOptions = ctx.options or EventStreamOptions()
        self.options = options
        self.topology, self.path = ctx.topology, ctx.config.path
        self.chain, self.policy = ctx.chain, ctx.policy
        self.upstream = ctx.upstream()
        # The configured service user, when HMS authorizes notification reads
        # (hive.metastore.event.db.notification.api.auth, Hive 3+); no principal: the gateway's own.
        identity = (Identity(options.service_user, None, frozenset(options.service_groups))
                    if options.service_user else None)
        poller = NotificationPoller(self.upstream, ctx.schema, identity)
        details = None
        if options.iceberg.enabled:
            try:
                file_io = file_io_of(options.iceberg, Path(ctx.source).parent if ctx.source else Path.cwd())
            except ValueError as exc:
                key, reason = exc.args
                raise ctx.error(f"options.iceberg.{key}", reason) from None
            details = IcebergCommits(options.iceberg, file_io).detailed
        self.feed = ChangeFeed(
            poller,
            poll_interval=options.poll_interval_seconds, ring_size=options.ring_size,
            labels=(ctx.topology, ctx.config.path), details=details,
        )
        self.source = f"/gateway/{ctx.topology}/{ctx.config.path}"
        self.publisher = None
        if options.broker is not None:
            from gateway.events.broker import BrokerPublisher, BrokerSettings
            from gateway.upstream.metastore import MetastoreClient

            try:
                settings = BrokerSettings.model_validate(
                    options.broker, context={"base_dir": Path(ctx.source).parent})
            except ValidationError as exc:  # named as validate_options names the others
                loc, reason = reported_error(BrokerSettings, exc)
                raise ctx.error(f"options.broker{key_path(loc)}", reason) from None
            # Without offset_file, the offset and the one-publisher lock are HMS's (leader.py).
            self.publisher = BrokerPublisher(
                self.feed, settings, client=MetastoreClient(self.upstream, ctx.schema, identity=identity),
                name=f"{ctx.topology}/{ctx.config.path}")
        self._delivered = metrics.child(metrics.FEED_EVENTS_DELIVERED, ctx.topology, ctx.config.path)
        self._streams: set[asyncio.Task] = set()

    @classmethod
    def build(cls, ctx: ServiceContext) -> "EventStreamService":
        """The handler of one ``event-stream`` service. Raises ``ConfigError`` without
        ``upstream`` or with bad ``options.broker``."""
        return cls(ctx)

    async def start(self) -> None:
        """Start the poller (and the broker publisher, when configured: in worker 0 only; across
        replicas, only the holder of the service's HMS lock publishes, see gateway/events/leader.py)."""
        await self.feed.start()
        if self.publisher is not None and current_worker() in (None, 0):
            await self.publisher.start()

    async def close(self) -> None:
        """Stop publishing and polling, end open streams, close the upstream pools."""
        if self.publisher is not None:
            await self.publisher.close()
        await self.feed.close()
        for task in list(self._streams):
            task.cancel()
        await self.upstream.close()

    # --- requests ------------------------------------------------------------------------------

    async def handle(self, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """The long-poll or SSE response and its outcome label. Raises pipeline outcomes."""
        request = exchange.request
        if request.method != hdrs.METH_GET:
            raise MethodNotAllowed("only GET is allowed", {hdrs.ALLOW: hdrs.METH_GET})
        await self.chain.on_request(exchange)
        sse = SSE_TYPE in request.headers.get(hdrs.ACCEPT, "")
        try:
            query = _Query(request, self.options.max_wait_seconds, sse,
                           self.feed.known_types() | {ICEBERG_COMMIT}, self.options.iceberg.enabled)
        except BadQuery as exc:
            exchange.event.reason = str(exc)
            return _json(400, {"error": "bad_request", "detail": str(exc)}), "bad_request"
        viewer = None
        if self.policy is not None and exchange.identity is not None:
            viewer = CatalogView(self.policy, exchange.identity.user, exchange.identity.groups)
            exchange.view = viewer
        try:
            return await self._serve(exchange, query, viewer, sse)
        finally:
            if viewer is not None:  # the stream is served, filtered: what the policy hid from it
                exchange.event.record_policy(viewer, "allowed")

    async def _serve(self, exchange: Exchange, query: _Query, viewer: CatalogView | None,
                     sse: bool) -> tuple[web.StreamResponse, str]:
        with self.feed.subscribed():
            try:
                if query.after is None or sse:
                    await self.feed.wait_ready(timeout=_READY_WAIT)
                if query.after is None:
                    query.after = self.feed.latest_id
                await self.feed.reach(query.after)  # a position from a replica that polled sooner
                if sse:
                    self.feed.events_after(query.after, 1)  # a position already gone: 410, no stream
                    return await self._stream(exchange, query, viewer), "ok"
                return await self._long_poll(query, viewer), "ok"
            except Resync as exc:
                return self._resync(exc), "resync"
            except FeedUnavailable as exc:
                return _json(503, {"error": "unavailable", "detail": str(exc)},
                             {hdrs.RETRY_AFTER: "1"}), "unavailable"

    def _resync(self, exc: Resync) -> web.Response:
        return _json(410, self._resync_body(exc))

    @staticmethod
    def _resync_body(exc: Resync) -> dict:
        return {"error": "resync", "reason": exc.reason, "detail": exc.detail, "latest": exc.latest_id}

    def _accepts(self, query: _Query, viewer: CatalogView | None):
        """The predicate on events this client receives: its filters and the catalog policy."""
        prefix = self.options.topic_prefix

        def accepts(event: MetastoreEvent) -> bool:
            if not query.matches(event, prefix):
                return False
            if viewer is None or _visible(viewer, event):
                return True
            viewer.hidden += 1  # an event the client asked for, hidden by the policy
            return False

        return accepts

    def _deliverable(self, events: list[MetastoreEvent], query: _Query, viewer: CatalogView | None) -> list[dict]:
        accepts = self._accepts(query, viewer)
        return [self.body(event, viewer, query.cloudevents) for event in events if accepts(event)]

    def body(self, event: MetastoreEvent, viewer: CatalogView | None = None, cloudevents: bool = False) -> dict:
        """An event as sent to a client (see the module docstring)."""
        keep = _keep(viewer, event)
        hcat_type = hcat.is_hcat_type(event.event_type)
        data = hcat.event_body(event, _filter_message(event.message, keep)
                               if keep is not None and not hcat_type else None)
        if keep is not None and "partitions" in data:
            data["partitions"] = _filter_partition_values(data["partitions"], keep)
        if keep is not None and "iceberg" in data:
            data["iceberg"] = for_viewer(data["iceberg"], keep)
        if not cloudevents:
            return data
        attributes = {
            "id": str(event.event_id), "source": self.source,
            "type": CLOUDEVENTS_TYPE_PREFIX + event.event_type,
            "time": datetime.fromtimestamp(event.event_time, timezone.utc),
            "datacontenttype": "application/json",
        }
        if event.db:
            attributes["subject"] = f"{event.db}.{event.table}" if event.table else event.db
        return json.loads(JSONFormat().write(CloudEvent(attributes, data)))

    async def _long_poll(self, query: _Query, viewer: CatalogView | None) -> web.Response:
        """``limit`` counts delivered events; ``next`` follows the last event scanned
        (:meth:`ChangeFeed.select`), so paging with ``next`` never misses one."""
        assert query.after is not None
        events, cursor = await self.feed.wait_select(query.after, query.wait, query.limit,
                                                     self._accepts(query, viewer))
        bodies = [self.body(event, viewer, query.cloudevents) for event in events]
        self._delivered.inc(len(bodies))
        return _json(200, {"events": bodies, "next": cursor})

    async def _stream(self, exchange: Exchange, query: _Query, viewer: CatalogView | None) -> web.StreamResponse:
        request = exchange.request
        # sse_response prepares the response on entry: its headers go in now
        async with sse_response(request, ping_interval=self.options.heartbeat_seconds,
                                headers=exchange.response_headers()) as response:
            task = asyncio.current_task()
            assert task is not None
            self._streams.add(task)
            cursor = query.after
            assert cursor is not None
            try:
                while response.is_connected():
                    try:
                        events = await self.feed.wait_after(cursor, self.options.heartbeat_seconds, query.limit)
                    except Resync as exc:
                        await response.send(json.dumps(self._resync_body(exc), separators=(",", ":")),
                                            event="resync")
                        break
                    except FeedUnavailable:
                        continue  # HMS unreachable since start-up: the pings keep the stream open
                    for event in events:
                        bodies = self._deliverable([event], query, viewer)
                        cursor = event.event_id
                        if bodies:
                            await response.send(json.dumps(bodies[0], separators=(",", ":")),
                                                id=str(event.event_id))
                            self._delivered.inc()
            except ConnectionError:
                pass  # the client left
            finally:
                self._streams.discard(task)
        return response
