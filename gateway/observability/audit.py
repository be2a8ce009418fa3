"""The audit log: one JSON object per line per request, after Knox's gateway audit log.

Fields of every line (``null`` when not known at the point the request ended):

``time`` (RFC 3339 UTC, milliseconds), ``request_id``, ``topology``, ``service``, ``client``
(remote IP address), ``user`` (authenticated principal), ``effective_user`` (after principal
mapping and ``doAs``), ``impersonator`` (the user that asked for ``doAs``), ``method`` (Thrift
method), ``database``, ``table`` (when the call names them), ``outcome`` (``allowed``, ``denied``
or ``failed``), ``detail`` (the metrics outcome: ``ok``, ``exception``, ``forbidden`` ...),
``status`` (HTTP), ``duration_ms``, ``reason`` (why denied or failed; never a secret).

On a service with a catalog policy (``policy_file``), also: ``policy_decision`` (``allowed`` or
``denied``), ``policy_access`` (the Ranger access checked: ``select``, ``alter``… or ``_any``
for visibility), ``policy_id`` (the deciding policy, ``-1`` when none decided, as Ranger
reports; ``null`` when the request was judged object by object), ``policy_hidden`` (objects a
listing, or events a change feed, hid), ``policy_columns_hidden`` (columns removed from the
reply) and ``policy_restricted`` (the ids, ascending, of the Ranger row-filter and data-mask
policies that filtered or masked what the request answered: ``[]`` when none); these fields are left out of lines of services without a policy. Every kind with a
policy fills them from the request's :class:`~gateway.policy.view.CatalogView`
(:meth:`AuditEvent.record_policy`).

Nothing secret is written: no header values, no passwords or tokens, no request bodies; names
are truncated to 256 characters. ``audit.path`` in the gateway file sends the lines to a file
(reopened when rotated away, ``logging.handlers.WatchedFileHandler``), else to stderr;
``audit.enabled: false`` turns the log off. Lines are written in batches by a background thread
(every 0.1 s, see :class:`AuditLog`), so a slow disk never stalls the event loop.

The request id is the client's ``X-Request-Id`` when it is 1 to 128 characters of
``[A-Za-z0-9._:-]``, else a new UUID 4; the response echoes it in ``X-Request-Id``.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from json.encoder import encode_basestring_ascii as _json_string
from typing import AbstractSet, Protocol

from aiohttp import web

from gateway.client_address import client_address
from gateway.observability.settings import AuditConfig



class PolicyCounts(Protocol):
    """What an audit line reads of a request's catalog view
    (:class:`gateway.policy.view.CatalogView` meets it). Stated here, not imported: the audit
    log sits below every policy."""

    @property
    def hidden(self) -> int: ...

    @property
    def hidden_columns(self) -> AbstractSet[object]: ...

    @property
    def restricting(self) -> AbstractSet[int]: ...

REQUEST_ID_HEADER = "X-Request-Id"

_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_MAX_NAME = 256

__all__ = [
    "REQUEST_ID_HEADER",
    "AuditEvent",
    "AuditLog",
    "audit_outcome",
    "audit_event",
    "request_id",
]

#: Metrics outcomes (see docs/architecture.md) that count as a refusal; the rest but
#: ``ok``/``exception`` are failures.
_ALLOWED = frozenset({"ok", "exception"})
_DENIED = frozenset({"unauthenticated", "forbidden", "not_exposed", "throttled"})


class _RandomPool:
    """Random bytes drawn from ``os.urandom`` 4 KiB at a time: ``uuid.uuid4()`` makes a
    ``getrandom`` system call per id (docs/performance.md, issue 14)."""

    __slots__ = ("_buffer", "_at")

    def __init__(self) -> None:
        self._buffer, self._at = b"", 0

    def uuid4(self) -> str:
        """A random UUID (RFC 9562 §5.4: version 4, variant 10), as ``str(uuid.uuid4())``."""
        at = self._at
        if at + 16 > len(self._buffer):
            self._buffer, at = os.urandom(4096), 0
        self._at = at + 16
        h = self._buffer[at:at + 16].hex()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_random = _RandomPool()
if hasattr(os, "register_at_fork"):  # a forked worker must not repeat its parent's ids
    os.register_at_fork(after_in_child=_random.__init__)


def new_request_id() -> str:
    """A new request id (UUID 4), for an answer given before a request could be read."""
    return _random.uuid4()


def request_id(request: web.Request) -> str:
    """The client's ``X-Request-Id`` if sane, else a new UUID 4."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _SANE_REQUEST_ID.fullmatch(given) else _random.uuid4()


def audit_outcome(detail: str) -> str:
    """``allowed``, ``denied`` or ``failed`` for a metrics outcome label."""
    if detail in _ALLOWED:
        return "allowed"
    return "denied" if detail in _DENIED else "failed"


def _json_clip(value: str | None) -> str:
    """``value`` clipped to ``_MAX_NAME`` characters as a JSON string (the stdlib's C string
    encoder, ASCII with escapes), or ``null``."""
    return "null" if value is None else _json_string(value[:_MAX_NAME])


def _json_value(value: str | int | None) -> str:
    if value is None:
        return "null"
    return _json_string(value) if isinstance(value, str) else str(int(value))


class _Clock:
    """RFC 3339 UTC time with milliseconds (``2026-11-22T19:51:14.123Z``); the part up to the
    seconds is formatted once a second."""

    __slots__ = ("_second", "_prefix")

    def __init__(self) -> None:
        self._second, self._prefix = -1, ""

    def now(self) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._prefix = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
        return f"{self._prefix}{int((now - second) * 1000):03d}Z"


_clock = _Clock()


@dataclass(slots=True)
class AuditEvent:
    """What is known about one request so far; the gateway handler fills it in as it goes.

    ``objects``, when set, gives ``(database, table)`` on demand: the line is written after the
    response was sent, so the call is walked for them then, off the request's path.
    """

    request_id: str
    client: str | None
    topology: str | None = None
    service: str | None = None
    user: str | None = None
    effective_user: str | None = None
    impersonator: str | None = None
    method: str | None = None
    database: str | None = None
    table: str | None = None
    reason: str | None = None
    policy_decision: str | None = None
    policy_access: str | None = None
    policy_id: int | None = None
    policy_hidden: int | None = None
    policy_columns_hidden: int | None = None
    policy_restricted: tuple[int, ...] | None = None
    cache: str | None = None
    started: float = field(default_factory=time.perf_counter)
    objects: Callable[[], tuple[str | None, str | None]] | None = None
    #: True: no line for this request (a service summarizes such requests in a later line).
    summarized: bool = False

    def record_policy(self, view: PolicyCounts, decision: str, access: str = "_any",
                      policy_id: int | None = None) -> None:
        """The policy fields of the line from the request's ``view``: ``decision`` (``allowed``
        or ``denied``) on ``access``, the deciding ``policy_id`` when one policy decided the
        request, and what ``view`` hid (``policy_hidden``: objects or events; and
        ``policy_columns_hidden``: distinct columns; ``policy_restricted``: the row-filter and
        data-mask policies that applied)."""
        self.policy_decision, self.policy_access, self.policy_id = decision, access, policy_id
        self.policy_hidden, self.policy_columns_hidden = view.hidden, len(view.hidden_columns)
        self.policy_restricted = tuple(sorted(view.restricting))

    def _resolve_objects(self) -> None:
        if self.objects is not None:
            self.database, self.table = self.objects()
            self.objects = None

    def line(self, detail: str, status: int) -> str:
        """The audit line of a request that ended with ``status`` / ``detail`` (the metrics
        outcome): compact JSON with the keys in the order docs/security.md lists them, ASCII
        with ``\\u`` escapes, the same text ``json.dumps(..., separators=(",", ":"))`` gives for
        them, written without building a dict: this runs once per request. Names are clipped
        to 256 characters; the policy keys come only on a service with a catalog policy, and
        ``cache`` (its ``Cache-Status`` result: ``hit``, ``miss``, ``stale``, ``bypass``,
        ``method``) only on a service with a metadata cache."""
        self._resolve_objects()
        text = (
            f'{{"time":"{_clock.now()}","request_id":{_json_string(self.request_id)},'
            f'"topology":{_json_clip(self.topology)},"service":{_json_clip(self.service)},'
            f'"client":{_json_value(self.client)},"user":{_json_clip(self.user)},'
            f'"effective_user":{_json_clip(self.effective_user)},"impersonator":{_json_clip(self.impersonator)},'
            f'"method":{_json_clip(self.method)},"database":{_json_clip(self.database)},'
            f'"table":{_json_clip(self.table)},"outcome":"{audit_outcome(detail)}",'
            f'"detail":{_json_string(detail)},"status":{int(status)},'
            f'"duration_ms":{round((time.perf_counter() - self.started) * 1000, 3)!r},'
            f'"reason":{_json_clip(self.reason)}'
        )
        if self.cache is not None:  # only on a service with a metadata cache
            text += f',"cache":"{self.cache}"'
        if self.policy_decision is None:
            return text + "}"
        return (
            f'{text},"policy_decision":{_json_value(self.policy_decision)},'
            f'"policy_access":{_json_value(self.policy_access)},"policy_id":{_json_value(self.policy_id)},'
            f'"policy_hidden":{_json_value(self.policy_hidden)},'
            f'"policy_columns_hidden":{_json_value(self.policy_columns_hidden)},'
            f'"policy_restricted":{_json_ids(self.policy_restricted)}}}'
        )


def _json_ids(ids: tuple[int, ...] | None) -> str:
    return "null" if ids is None else "[" + ",".join(str(int(i)) for i in ids) + "]"


def audit_event(request: web.BaseRequest) -> AuditEvent:
    """The audit event of ``request``: its request id and client address, started now."""
    return AuditEvent(request_id(request), client_address(request))


class AuditLog:
    """Writes audit lines as configured by ``audit`` in the gateway file. ``close()`` flushes.

    Lines are batched: the event loop only appends each line to a buffer, and one writer thread
    writes the buffer every ``flush_seconds`` or once it holds ``flush_bytes``, one write per
    batch. Handing every line to a thread cost each request a thread wake-up and a share of the
    GIL (about 0.1 ms on a 2-core machine, docs/performance.md). Outside an event loop every
    line is handed over at once. ``close()`` writes what is left; a gateway killed with SIGKILL
    loses at most the last ``flush_seconds`` of lines.
    """

    def __init__(self, config: AuditConfig | None = None, *, flush_seconds: float = 0.1,
                 flush_bytes: int = 256 * 1024):
        config = config or AuditConfig()
        self.enabled = config.enabled
        self._flush_seconds, self._flush_bytes = flush_seconds, flush_bytes
        self._lines: list[str] = []
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None
        self._handler: logging.Handler | None = None
        self._writer: ThreadPoolExecutor | None = None
        if not self.enabled:
            return
        if config.path is not None:
            config.path.parent.mkdir(parents=True, exist_ok=True)
            self._handler = logging.handlers.WatchedFileHandler(config.path, encoding="utf-8")
        else:
            self._handler = logging.StreamHandler(sys.stderr)
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-writer")

    def write(self, event: AuditEvent, detail: str, status: int) -> None:
        """Buffer one line for ``event``, which ended with ``status`` (metrics outcome ``detail``)."""
        if not self.enabled or event.summarized:
            return
        line = event.line(detail, status)
        self._lines.append(line)
        self._size += len(line)
        if self._size >= self._flush_bytes:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer = loop.call_later(self._flush_seconds, self.flush)

    def flush(self) -> None:
        """Hand the buffered lines to the writer thread now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._lines or self._writer is None:
            return
        batch, self._lines, self._size = "\n".join(self._lines), [], 0
        self._writer.submit(self._emit, batch)

    def _emit(self, batch: str) -> None:
        # One record for the whole batch: the handler adds the final newline, reopens a rotated
        # file (WatchedFileHandler) and reports write errors on stderr (Handler.handleError).
        assert self._handler is not None
        self._handler.handle(logging.makeLogRecord({"msg": batch, "levelno": logging.INFO}))

    def close(self) -> None:
        """Write what is buffered and release the file. Idempotent."""
        if not self.enabled:
            return
        self.flush()
        self.enabled = False
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None
        if self._handler is not None:
            self._handler.close()
            self._handler = None
