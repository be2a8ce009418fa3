"""Publish the change feed to ActiveMQ over STOMP, as HCatalog's ``NotificationListener`` did.

Each event becomes one JMS ``TextMessage`` (a STOMP ``SEND`` without ``content-length``, which
ActiveMQ maps to a TextMessage) on the topic :func:`gateway.events.hcat.topics` names, with
the string properties HCatalog consumers select on (seed 002, ``HCatConstants``):
``HCAT_EVENT`` (the event type), ``HCAT_MESSAGE_VERSION`` and ``HCAT_MESSAGE_FORMAT``, plus
``HCAT_FORMAT``, the name the seed's text uses for the last. The body is the seed's HCatalog
JSON plus ``eventId`` for the six HCatalog types, else HMS's decoded message in the feed's
envelope: the body the HTTP feed sends (:func:`gateway.events.hcat.event_body`). Messages
are ``persistent``, so JMS durable subscribers get what was sent while they were away.

Delivery is **at least once**. A batch is sent in one STOMP transaction whose ``COMMIT`` asks
for a receipt; only after the receipt is the batch's last event id stored as the offset. After
a restart or a takeover, publishing resumes after that id, so nothing is lost as long as the
feed still holds it (the feed refills its ring from HMS's log at start-up, ``ring_size`` events
back); a batch that reached the broker but whose id was not yet stored (crash, lost receipt) is
sent again: **consumers may see duplicates** and should de-duplicate on ``eventId``. A clean
stop (SIGTERM, a reload) finishes the batch in flight, offset included, so a rolling update
sends nothing twice. Events
already trimmed when the publisher gets to them (HMS's time-to-live, the ring's size) cannot be
sent: that is logged as an error naming the lost ids, and publishing goes on from the oldest
event the feed holds; after an HMS reset (ids went back), from the start of the new log.

Where the offset lives, and who publishes (see ``docs/change-feed.md`` and the Replicas section
of ``docs/operations.md``):

* by default, in HMS, and only the replica holding the service's HMS lock publishes
  (:mod:`gateway.events.leader`): exactly one publisher across every replica and every process,
  which stops before its lock can have passed to another;
* with ``offset_file``, in that file (write to a temporary file, fsync, rename), with no lock:
  for one replica, or an HMS without transactions. Two publishers on one file (a topology
  reload overlaps the old service and the new) only add duplicates; two replicas each with
  their own file publish every event twice.

stomp.py is a threaded client; its blocking calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import stomp
import stomp.exception
from pydantic import Field, ValidationInfo, field_validator, model_validator

from gateway.events import hcat
from gateway.events.feed import FeedUnavailable, Resync
from gateway.observability import metrics
from gateway.events.leader import LockLost, OffsetStore, PublisherLock, lock_name
from gateway.settings_model import SettingsModel
from gateway.upstream.locks import to_the_end
from gateway.upstream.errors import UpstreamError

if TYPE_CHECKING:
    from gateway.events.feed import ChangeFeed
    from gateway.upstream.notification_event import MetastoreEvent

log = logging.getLogger(__name__)

__all__ = ["BrokerPublisher", "BrokerSettings", "broker_frame", "read_offset", "write_offset"]

_VERSION = re.compile(r"\d+(?:\.\d+)+")  # "0.2" of "json-0.2", "2.0" of "gzip(json-2.0)"
_SCHEMES = {"stomp": False, "stomp+ssl": True, "stomp+tls": True}


class BrokerSettings(SettingsModel):
    """The ``broker:`` options of an event-stream service.

    ``url``: ``stomp://host:port`` or ``stomp+ssl://host:port`` (TLS with the system's CAs).
    ``login`` and ``passcode_file`` (a file holding the STOMP passcode, one line): optional.
    ``offset_file``: where the last published event id is kept (created with its directory),
    without any lock: for a single replica. Without it (the default) the offset is a parameter
    of the HMS database ``state_database`` (default ``hms_gateway``) and only the holder of the
    service's HMS lock publishes (:mod:`gateway.events.leader`): ``lock_heartbeat_seconds``
    between heartbeats, ``lock_lease_seconds`` the holder's own lease after a heartbeat (keep it
    below ``lock_timeout_seconds``, HMS's ``hive.txn.timeout``, 300 s by default),
    ``lock_check_seconds`` between a standby's checks.
    ``topic_prefix``: HCatalog's ``hcat.msgbus.topic.prefix`` (default ``hcat``).
    ``batch_size``: events per STOMP transaction. ``receipt_timeout_seconds``: how long a
    ``COMMIT`` may wait for its receipt. ``retry_seconds``: pause after a broker failure.
    Relative paths are resolved against ``context={"base_dir": …}`` when validated with one
    (the topology file's folder), else against the working directory.
    Raises pydantic's ``ValidationError`` naming the field.
    """

    url: str
    login: str | None = None
    passcode_file: Path | None = None
    offset_file: Path | None = None
    state_database: str = Field("hms_gateway", pattern=r"^[a-z0-9_]+$", max_length=128)
    lock_heartbeat_seconds: float = Field(60.0, gt=0)
    lock_lease_seconds: float = Field(240.0, gt=0)
    lock_check_seconds: float = Field(5.0, gt=0)
    lock_timeout_seconds: float = Field(300.0, gt=0)
    topic_prefix: str = Field(hcat.DEFAULT_TOPIC_PREFIX, min_length=1)
    batch_size: int = Field(100, ge=1, le=1000)
    receipt_timeout_seconds: float = Field(10.0, gt=0)
    retry_seconds: float = Field(1.0, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in _SCHEMES:
            raise ValueError(f"scheme must be one of {sorted(_SCHEMES)}, not {parts.scheme!r}")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if not parts.hostname or port is None:
            raise ValueError("needs a host and a port, e.g. stomp://broker:61613")
        return value

    @model_validator(mode="after")
    def _lease(self) -> "BrokerSettings":
        if self.lock_heartbeat_seconds * 2 > self.lock_lease_seconds:
            raise ValueError("lock_lease_seconds must be at least twice lock_heartbeat_seconds "
                             "(one lost heartbeat must not end the lease)")
        if self.lock_lease_seconds >= self.lock_timeout_seconds:
            raise ValueError("lock_lease_seconds must be below lock_timeout_seconds (HMS's hive.txn.timeout)")
        return self

    @field_validator("passcode_file", "offset_file")
    @classmethod
    def _path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        base = (info.context or {}).get("base_dir")
        if value is None or value.is_absolute() or base is None:
            return value
        return Path(base) / value

    @field_validator("passcode_file")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file")
        return value

    @property
    def address(self) -> tuple[str, int, bool]:
        """``(host, port, tls)`` from ``url``."""
        parts = urlsplit(self.url)
        return parts.hostname or "", parts.port or 0, _SCHEMES[parts.scheme]

    def passcode(self) -> str:
        """The passcode file's first line ("" without a file). Raises OSError if unreadable."""
        if self.passcode_file is None:
            return ""
        text = self.passcode_file.read_text(encoding="utf-8")
        return text.splitlines()[0] if text else ""


def read_offset(path: Path) -> int | None:
    """The event id stored in ``path``, or None when the file does not exist.

    Raises ``ValueError`` naming the file when it holds anything but a non-negative integer.
    """
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        text = "<not ASCII>"
    if not text.isdigit():
        raise ValueError(f"{path}: not an event id: {text[:40]!r}")
    return int(text)


def write_offset(path: Path, event_id: int) -> None:
    """Store ``event_id`` in ``path`` atomically: a crash leaves the old or the new id, whole.

    Writes a temporary file beside it, fsyncs it, renames it over ``path`` (POSIX ``rename``
    is atomic) and fsyncs the folder so the rename itself survives a power loss.
    Raises OSError.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="ascii") as file:
        file.write(f"{event_id}\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def broker_frame(event: MetastoreEvent, prefix: str = hcat.DEFAULT_TOPIC_PREFIX) -> tuple[str, dict[str, str], str]:
    """``(destination, headers, body)`` of the STOMP ``SEND`` for ``event``.

    ``destination`` is ActiveMQ's ``/topic/<name>`` for the event's HCatalog topic; headers
    carry ``HCAT_EVENT``, ``HCAT_MESSAGE_VERSION`` (``0.1`` for the HCatalog types, else the
    version in HMS's ``messageFormat``, e.g. ``0.2`` of ``json-0.2``), ``HCAT_MESSAGE_FORMAT``
    and ``HCAT_FORMAT`` (``json``), ``persistent:true`` and ``content-type``; ``body`` is
    compact JSON text (never holds a NUL, as STOMP's frame end requires without
    ``content-length``).
    """
    if hcat.is_hcat_type(event.event_type):
        version = hcat.HCAT_MESSAGE_VERSION
    else:
        found = _VERSION.search(event.message_format)
        version = found.group(0) if found else event.message_format
    headers = {
        "HCAT_EVENT": event.event_type,
        "HCAT_MESSAGE_VERSION": version,
        "HCAT_MESSAGE_FORMAT": hcat.HCAT_MESSAGE_FORMAT,
        "HCAT_FORMAT": hcat.HCAT_MESSAGE_FORMAT,
        "persistent": "true",
        "content-type": "application/json;charset=utf-8",
    }
    text = json.dumps(hcat.event_body(event), separators=(",", ":"), ensure_ascii=False)
    return f"/topic/{hcat.topics(event, prefix)[0]}", headers, text


class BrokerError(Exception):
    """The broker refused a frame, dropped the connection or sent no receipt in time."""


class _Receipts(stomp.ConnectionListener):
    """Waits for ``RECEIPT`` frames; an ``ERROR`` frame or a disconnect fails every waiter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, threading.Event] = {}
        self._failure: str | None = None

    def expect(self, receipt: str) -> threading.Event:
        with self._lock:
            self._failure = None
            event = self._waiting[receipt] = threading.Event()
            return event

    def wait(self, receipt: str, event: threading.Event, timeout: float) -> None:
        arrived = event.wait(timeout)
        with self._lock:
            self._waiting.pop(receipt, None)
            failure = self._failure
        if failure is not None:
            raise BrokerError(failure)
        if not arrived:
            raise BrokerError(f"no receipt within {timeout:g} s")

    def _fail(self, reason: str) -> None:
        with self._lock:
            self._failure = reason
            for event in self._waiting.values():
                event.set()

    def on_receipt(self, frame: Any) -> None:
        with self._lock:
            event = self._waiting.get(frame.headers.get("receipt-id", ""))
        if event is not None:
            event.set()

    def on_error(self, frame: Any) -> None:
        self._fail(f"broker error: {frame.headers.get('message', '')}")

    def on_disconnected(self) -> None:
        self._fail("disconnected")


class BrokerPublisher:
    """Publishes every event of ``feed`` to ActiveMQ, at least once, in id order.

    ``feed`` is the service's :class:`~gateway.events.feed.ChangeFeed`. ``client`` (a
    :class:`~gateway.upstream.metastore.MetastoreClient`) and ``name`` (``topology/path``) are
    needed unless ``settings.offset_file`` is set: the lock and the offset are then HMS's
    (:mod:`gateway.events.leader`). Without a stored offset, publishing starts after the feed's
    newest id once the feed has read HMS (what happened before is not replayed).
    :attr:`published_id` is the last id the broker acknowledged (None before a run knows where
    to start); :attr:`leading` whether this publisher holds the lock (always, with a file).
    """

    def __init__(self, feed: ChangeFeed, settings: BrokerSettings, *, client=None, name: str = "",
                 wait_seconds: float = 5.0):
        self.feed = feed
        self.settings = settings
        self.published_id: int | None = None
        self.lock: PublisherLock | None = None
        self._offsets: OffsetStore | None = None
        if settings.offset_file is None:
            if client is None:
                raise ValueError("a publisher without offset_file needs an HMS client")
            topology, _, path = name.partition("/")
            self.lock = PublisherLock(
                client, settings.state_database, lock_name(topology, path),
                heartbeat_seconds=settings.lock_heartbeat_seconds, lease_seconds=settings.lock_lease_seconds,
                check_seconds=settings.lock_check_seconds, timeout_seconds=settings.lock_timeout_seconds)
            self._offsets = OffsetStore(client, settings.state_database, f"hms-gateway.publisher.{name}.offset")
        self._leading = metrics.child(metrics.BROKER_PUBLISHER_LEADING, *name.split("/", 1)) if "/" in name else None
        self._wait_seconds = wait_seconds
        self._task: asyncio.Task[None] | None = None
        self._connection: stomp.Connection12 | None = None
        self._receipts = _Receipts()
        self._ids = itertools.count(1)

    @property
    def leading(self) -> bool:
        return self.lock is None or self.lock.valid()

    async def start(self) -> None:
        """Begin publishing in a background task (with the HMS lock: once acquired).

        Raises ``ValueError`` when the offset file is corrupt (the operator decides, rather
        than the publisher guessing where to resume), OSError when it is unreadable. A corrupt
        offset in HMS is logged and retried (another replica may be the one to fix).
        """
        if self.settings.offset_file is not None:
            self.published_id = await asyncio.to_thread(read_offset, self.settings.offset_file)
        self._task = asyncio.create_task(self._run(), name="broker-publisher")

    async def close(self) -> None:
        """Stop publishing, release the lock and disconnect; the last acknowledged id stays stored."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await asyncio.to_thread(self._disconnect)

    async def _run(self) -> None:
        if self.lock is None:
            self._show_leading(1)
            try:
                return await self._publish()
            finally:
                self._show_leading(0)
        while True:
            await self.lock.acquire()
            self._show_leading(1)
            try:
                self.published_id = await self._offsets.read()  # type: ignore[union-attr]
                await self._lead()
            except LockLost as exc:
                log.warning("broker %s: publishing stopped: %s", self.settings.url, exc)
            except Exception as exc:  # noqa: BLE001 - HMS unreachable, HMS's exceptions, a corrupt offset
                log.error("broker %s: publisher state in HMS: %s; retrying in %g s",
                          self.settings.url, exc, self.settings.retry_seconds)
                await asyncio.sleep(self.settings.retry_seconds)
            finally:
                self._show_leading(0)
                await asyncio.to_thread(self._disconnect)
                await self.lock.release()

    def _show_leading(self, value: int) -> None:
        if self._leading is not None:
            self._leading.set(value)

    async def _lead(self) -> None:
        """Publish while heartbeating the lock; whichever ends first ends the other."""
        assert self.lock is not None
        keeper = asyncio.create_task(self.lock.keep(), name="broker-publisher-lock")
        publisher = asyncio.create_task(self._publish(), name="broker-publisher-batches")
        try:
            done, _ = await asyncio.wait({keeper, publisher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (keeper, publisher):
                task.cancel()
            await asyncio.gather(keeper, publisher, return_exceptions=True)
        for task in done:
            task.result()  # LockLost, or what made publishing fail

    async def _publish(self) -> None:
        if self.published_id is None:  # first run: from the feed's newest id once it has one
            await self._ready()
            await self._acknowledge(self.feed.latest_id)
        else:  # an offset stored by another replica may be ahead of this feed's last poll
            await self._ready()
            await self.feed.reach(self.published_id)
        while True:
            after = self.published_id or 0
            try:
                events = await self.feed.wait_after(after, self._wait_seconds)
            except FeedUnavailable:
                continue  # HMS unreachable since start-up; the feed logs it
            except Resync as exc:
                await self._resync(after, exc)
                continue
            size = self.settings.batch_size
            for start in range(0, len(events), size):
                batch = events[start : start + size]
                sent = [event for event in batch if not self._own(event)]
                if not sent:  # only the publisher's own offset writes: nothing to store either
                    self.published_id = batch[-1].event_id
                    continue
                # Stopped meanwhile (SIGTERM, a reload), the batch is still sent and its offset
                # stored (within the lease): else the next leader would send it again.
                await to_the_end(asyncio.ensure_future(self._deliver_acknowledged(sent, batch[-1].event_id)))

    async def _deliver_acknowledged(self, batch: Sequence[MetastoreEvent], last_id: int) -> None:
        await self._deliver(batch)
        await self._acknowledge(last_id)

    def _own(self, event: MetastoreEvent) -> bool:
        """An offset write of this gateway (Hive 3+ logs ``alter_database``): not published."""
        return (self._offsets is not None and event.event_type == "ALTER_DATABASE"
                and (event.db or "").lower() == self.settings.state_database)

    async def _ready(self) -> None:
        while True:
            try:
                return await self.feed.wait_ready(self._wait_seconds)
            except FeedUnavailable:
                continue

    async def _resync(self, after: int, exc: Resync) -> None:
        """Publish what is left: from the oldest event the feed keeps (trimmed), or from the
        start of the new log (HMS reset). What was lost is logged, never silently skipped."""
        resume = self.feed.ring.floor if exc.reason == "trimmed" else 0
        log.error(
            "broker %s: %s; publishing resumes after event %d%s",
            self.settings.url, exc.detail, resume,
            f" (events {after + 1} to {resume} are lost)" if resume > after else "",
        )
        await self._acknowledge(resume)

    def _check_lease(self) -> None:
        if not self.leading:
            raise LockLost("the lock's lease ran out")

    async def _deliver(self, batch: Sequence[MetastoreEvent]) -> None:
        """Send ``batch`` until the broker acknowledges it, reconnecting after failures.
        Raises :class:`LockLost` when the lock's lease runs out first."""
        while True:
            self._check_lease()
            try:
                return await asyncio.to_thread(self._send, batch)
            except (BrokerError, stomp.exception.StompException, OSError) as exc:
                log.warning("broker %s: %s; retrying in %g s", self.settings.url, exc, self.settings.retry_seconds)
                await asyncio.to_thread(self._disconnect)
                await asyncio.sleep(self.settings.retry_seconds)

    async def _acknowledge(self, event_id: int) -> None:
        """Store ``event_id`` as the offset (in HMS: retried until stored or the lease runs out)."""
        if self._offsets is None:
            await asyncio.to_thread(write_offset, self.settings.offset_file, event_id)  # type: ignore[arg-type]
        else:
            while True:
                self._check_lease()
                try:
                    await self._offsets.write(event_id)
                    break
                except (UpstreamError, self._offsets.client.idl.MetaException,
                        self._offsets.client.idl.InvalidOperationException) as exc:
                    log.warning("broker %s: storing offset %d in HMS: %s; retrying in %g s",
                                self.settings.url, event_id, exc, self.settings.retry_seconds)
                    await asyncio.sleep(self.settings.retry_seconds)
        self.published_id = event_id

    def _connect(self) -> stomp.Connection12:
        if self._connection is not None and self._connection.is_connected():
            return self._connection
        host, port, tls = self.settings.address
        connection = stomp.Connection12(
            [(host, port)], auto_content_length=False, reconnect_attempts_max=1, heartbeats=(0, 0)
        )
        if tls:
            connection.set_ssl(for_hosts=[(host, port)])
        connection.set_listener("receipts", self._receipts)
        connection.connect(self.settings.login or "", self.settings.passcode(), wait=True)
        self._connection = connection
        return connection

    def _send(self, batch: Sequence[MetastoreEvent]) -> None:
        connection = self._connect()
        number = next(self._ids)
        transaction, receipt = f"tx-{number}", f"commit-{number}"
        connection.begin(transaction=transaction)
        for event in batch:
            destination, headers, body = broker_frame(event, self.settings.topic_prefix)
            connection.send(destination, body, headers={**headers, "transaction": transaction})
        if not self.leading:  # the lease ran out while sending: another replica may lead now
            connection.abort(transaction=transaction)
            raise LockLost("the lock's lease ran out before COMMIT")
        arrived = self._receipts.expect(receipt)
        connection.commit(transaction=transaction, headers={"receipt": receipt})
        self._receipts.wait(receipt, arrived, self.settings.receipt_timeout_seconds)

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and connection.is_connected():
            try:
                connection.disconnect()
            except (stomp.exception.StompException, OSError):
                pass
