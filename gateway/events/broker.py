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
for a receipt; only after the receipt is the batch's last event id written to
``offset_file`` (write to a temporary file, fsync, rename). After a restart, publishing resumes
after that id, so nothing is lost as long as the feed still holds it (the feed refills its ring
from HMS's log at start-up, ``ring_size`` events back); a batch that reached the broker but whose id was not yet
written (crash, lost receipt) is sent again: **consumers may see duplicates** and should
de-duplicate on ``eventId``. Events already trimmed when the publisher gets to them (HMS's
time-to-live, the ring's size) cannot be sent: that is logged as an error naming the lost ids,
and publishing goes on from the oldest event the feed holds; after an HMS reset (ids went
back), from the start of the new log. Two publishers on one offset file (a topology reload
overlaps the old service and the new) only add duplicates.

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
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from gateway.events import hcat
from gateway.events.feed import FeedUnavailable, Resync

if TYPE_CHECKING:
    from gateway.events.feed import ChangeFeed
    from gateway.events.model import MetastoreEvent

log = logging.getLogger(__name__)

__all__ = ["BrokerPublisher", "BrokerSettings", "broker_frame", "read_offset", "write_offset"]

_VERSION = re.compile(r"\d+(?:\.\d+)+")  # "0.2" of "json-0.2", "2.0" of "gzip(json-2.0)"
_SCHEMES = {"stomp": False, "stomp+ssl": True, "stomp+tls": True}


class BrokerSettings(BaseModel):
    """The ``broker:`` options of an event-stream service.

    ``url``: ``stomp://host:port`` or ``stomp+ssl://host:port`` (TLS with the system's CAs).
    ``login`` and ``passcode_file`` (a file holding the STOMP passcode, one line): optional.
    ``offset_file``: where the last published event id is kept (created with its directory).
    ``topic_prefix``: HCatalog's ``hcat.msgbus.topic.prefix`` (default ``hcat``).
    ``batch_size``: events per STOMP transaction. ``receipt_timeout_seconds``: how long a
    ``COMMIT`` may wait for its receipt. ``retry_seconds``: pause after a broker failure.
    Relative paths are resolved against ``context={"base_dir": …}`` when validated with one
    (the topology file's folder), else against the working directory.
    Raises pydantic's ``ValidationError`` naming the field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    login: str | None = None
    passcode_file: Path | None = None
    offset_file: Path
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

    ``feed`` is the service's :class:`~gateway.events.feed.ChangeFeed`. Without an offset file,
    publishing starts after the feed's newest id once the feed has read HMS (what happened
    before is not replayed). :attr:`published_id` is the last id the broker acknowledged (None
    before the first run knows where to start).
    """

    def __init__(self, feed: ChangeFeed, settings: BrokerSettings, *, wait_seconds: float = 5.0):
        self.feed = feed
        self.settings = settings
        self.published_id: int | None = None
        self._wait_seconds = wait_seconds
        self._task: asyncio.Task[None] | None = None
        self._connection: stomp.Connection12 | None = None
        self._receipts = _Receipts()
        self._ids = itertools.count(1)

    async def start(self) -> None:
        """Read the offset file and begin publishing in a background task.

        Raises ``ValueError`` when the offset file is corrupt (the operator decides, rather
        than the publisher guessing where to resume), OSError when it is unreadable.
        """
        self.published_id = await asyncio.to_thread(read_offset, self.settings.offset_file)
        self._task = asyncio.create_task(self._run(), name="broker-publisher")

    async def close(self) -> None:
        """Stop publishing and disconnect; the offset file keeps the last acknowledged id."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await asyncio.to_thread(self._disconnect)

    async def _run(self) -> None:
        if self.published_id is None:  # first run: from the feed's newest id once it has one
            await self._ready()
            await self._acknowledge(self.feed.latest_id)
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
                await self._deliver(batch)
                await self._acknowledge(batch[-1].event_id)

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

    async def _deliver(self, batch: Sequence[MetastoreEvent]) -> None:
        """Send ``batch`` until the broker acknowledges it, reconnecting after failures."""
        while True:
            try:
                return await asyncio.to_thread(self._send, batch)
            except (BrokerError, stomp.exception.StompException, OSError) as exc:
                log.warning("broker %s: %s; retrying in %g s", self.settings.url, exc, self.settings.retry_seconds)
                await asyncio.to_thread(self._disconnect)
                await asyncio.sleep(self.settings.retry_seconds)

    async def _acknowledge(self, event_id: int) -> None:
        await asyncio.to_thread(write_offset, self.settings.offset_file, event_id)
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
