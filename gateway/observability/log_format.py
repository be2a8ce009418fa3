"""The process log: JSON lines (``python-json-logger``) or plain text, each with the request id.

Separate from the audit log (``gateway.observability.audit``). The request id of the request
being handled is kept in a context variable, so every line logged while serving it carries it.
"""

from __future__ import annotations

import contextvars
import logging
import sys

from pythonjsonlogger.json import JsonFormatter

#: The id of the request the current task serves (``None`` outside requests).
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
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
