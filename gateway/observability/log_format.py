"""The process log: JSON lines (``python-json-logger``) or plain text, each with the request id.

Separate from the audit log (``gateway.observability.audit``). The request id of the request
being handled is kept in a context variable, so every line logged while serving it carries it.
"""

from __future__ import annotations

import contextvars
import logging
import sys

from aiohttp.http_exceptions import HttpProcessingError
from pythonjsonlogger.json import JsonFormatter

#: The id of the request the current task serves (``None`` outside requests).
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class _MalformedHttpFilter(logging.Filter):
    """aiohttp logs a request it cannot parse at ERROR with the offending line, which may hold an
    ``Authorization`` value or a cookie. Such a request already got its 400 from aiohttp: keep one
    INFO line naming the error class, without the bytes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "refused a malformed HTTP request: %s (status %s)", (
                type(exc).__name__, exc.code)
            record.exc_info = record.exc_text = None
        return True


def configure_logging(fmt: str = "json", level: str = "INFO") -> None:
    """Send the root logger to stderr as ``fmt`` (``json`` or ``text``) at ``level``.

    JSON lines carry ``time``, ``level``, ``logger``, ``message``, ``request_id`` (and
    ``exc_info`` when an exception is logged).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    if fmt == "json":
        handler.setFormatter(JsonFormatter(
            "{asctime}{levelname}{name}{message}{request_id}",
            style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            datefmt="%Y-%m-%dT%H:%M:%S%z",
        ))
    else:
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
        ))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.server").addFilter(_MalformedHttpFilter())
