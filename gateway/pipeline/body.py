"""Reading a request body whole, within the gateway's limits (one reader for every kind).

``limits.max_request_bytes`` bounds the body: a larger ``Content-Length`` is refused before a
byte is read, and a chunked body (no length) is counted while it arrives and refused at the
limit (:class:`~gateway.pipeline.outcomes.TooLarge`, 413). A body that is not whole within
``limits.client_body_timeout_seconds`` ends with :class:`~gateway.pipeline.outcomes.BodyTimeout`
(408). A body that came with the headers (the usual case) is taken without arming a timer.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from gateway.client_address import client_address
from gateway.config import Limits
from gateway.pipeline.outcomes import BodyTimeout, TooLarge

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024


def too_large(limits: Limits) -> TooLarge:
    """The 413 outcome for a body over ``limits.max_request_bytes``."""
    return TooLarge(f"request body larger than {limits.max_request_bytes} bytes")


def check_length(request: web.BaseRequest, limits: Limits) -> None:
    """Refuse a request whose ``Content-Length`` is over the limit (before authentication
    reads anything). Raises :class:`TooLarge`."""
    if request.content_length is not None and request.content_length > limits.max_request_bytes:
        raise too_large(limits)


async def read_body(request: web.BaseRequest, limits: Limits) -> bytes:
    """The whole request body, in bytes. Raises :class:`TooLarge` or :class:`BodyTimeout`."""
    check_length(request, limits)
    content = request.content
    if content.is_eof():
        body = content.read_nowait()
        if len(body) > limits.max_request_bytes:
            raise too_large(limits)
        return body
    chunks, size = [], 0
    try:
        async with asyncio.timeout(limits.client_body_timeout_seconds):
            async for chunk in content.iter_chunked(_CHUNK):
                size += len(chunk)
                if size > limits.max_request_bytes:
                    raise too_large(limits)
                chunks.append(chunk)
    except TimeoutError:
        log.info("408 %s from %s", request.path, client_address(request))
        raise BodyTimeout("request body not received in time") from None
    return b"".join(chunks)
