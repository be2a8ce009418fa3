"""A scripted ``event-stream`` service for unit tests of the client side of the change feed
(``hms_gateway_client.events``, the data source's streaming reader): plain ``http.server`` over TLS."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

__all__ = ["FeedHandler"]


class FeedHandler(BaseHTTPRequestHandler):
    """The long-poll contract of an ``event-stream`` service (gateway/events/kind.py):
    503 until ready, then pages of events, then a 410 resync."""

    protocol_version = "HTTP/1.1"
    seen: list[dict] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        type(self).seen.append({**query, "authorization": self.headers.get("Authorization")})
        after = query.get("after")
        if len(self.seen) == 1:
            self.reply(503, {"error": "unavailable"}, {"Retry-After": "0"})
        elif after is None:
            self.reply(200, {"events": [], "next": 5})
        elif after == "5":
            self.reply(200, {"events": [{"eventId": 6, "eventType": "CREATE_TABLE"},
                                        {"eventId": 7, "eventType": "DROP_TABLE"}], "next": 7})
        elif after == "7":
            self.reply(200, {"events": [], "next": 9})  # filtered events move the position on
        else:
            self.reply(410, {"error": "resync", "reason": "trimmed", "detail": "events after 9 are gone",
                             "latest": 12})

    def reply(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                           **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass
