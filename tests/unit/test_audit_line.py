"""The audit line written without ``json.dumps`` is the text ``json.dumps`` would write for the
documented fields, and
generated request ids are random UUID 4s (issue 14: the per-request cost of the audit line)."""

from __future__ import annotations

import json
import uuid

import pytest

from gateway.observability import audit
from gateway.observability.audit import AuditEvent


_KEYS = ("topology", "service", "user", "effective_user", "impersonator", "method", "database", "table")
_POLICY_KEYS = ("policy_decision", "policy_access", "policy_id", "policy_hidden", "policy_columns_hidden",
                "policy_restricted")


def _dumps_of(event: AuditEvent, detail: str, status: int, line: str) -> str:
    """``json.dumps`` of the line's fields as docs/security.md lists them, with the line's own
    time and duration: names clipped to 256 characters, policy keys only with a decision."""
    def clipped(value):
        return None if value is None else value[:256]

    parsed = json.loads(line)
    expected = {"time": parsed["time"], "request_id": event.request_id}
    expected.update({key: clipped(getattr(event, key)) for key in _KEYS[:2]})
    expected["client"] = event.client
    expected.update({key: clipped(getattr(event, key)) for key in _KEYS[2:]})
    expected.update(outcome=audit.audit_outcome(detail), detail=detail, status=status,
                    duration_ms=parsed["duration_ms"], reason=clipped(event.reason))
    if event.policy_decision is not None:
        expected.update({key: getattr(event, key) for key in _POLICY_KEYS})
    return json.dumps(expected, separators=(",", ":"))


@pytest.mark.parametrize("fields", [
    {},
    {"user": "", "reason": ""},
    {"topology": "default", "service": "hmshttpthrift/api/hms", "user": "alice", "effective_user": "bob",
     "impersonator": "alice", "method": "get_table", "database": "db", "table": "t"},
    {"user": "zoë \"quoted\" \\ back", "database": "\u65e5\u672c\n\t\x00\x1f", "table": "\U0001f600",
     "reason": "line1\r\nline2 </script>"},
    {"database": "d" * 300, "reason": "r" * 1000, "method": "m" * 257},
    {"policy_decision": "denied", "policy_access": "select", "policy_id": -1, "policy_hidden": None,
     "policy_columns_hidden": 0},
    {"policy_decision": "allowed", "policy_access": "_any", "policy_id": 12, "policy_hidden": 3,
     "policy_columns_hidden": None, "user": "\u00e9"},
    {"policy_decision": "allowed", "policy_access": "select", "policy_id": 3, "policy_hidden": 0,
     "policy_columns_hidden": 0, "policy_restricted": (102, 201)},
    {"policy_decision": "allowed", "policy_access": "select", "policy_id": 3, "policy_hidden": 0,
     "policy_columns_hidden": 0, "policy_restricted": ()},
])
@pytest.mark.parametrize("detail, status", [("ok", 200), ("forbidden", 403), ("bad_request", 400)])
def test_line_is_json_dumps_of_the_record(fields, detail, status):
    event = AuditEvent("rid-1", "127.0.0.1", **fields)
    line = event.line(detail, status)
    assert line == _dumps_of(event, detail, status, line)
    assert line.isascii() and "\n" not in line


def test_line_without_client():
    event = AuditEvent("rid-2", None)
    line = event.line("not_found", 404)
    assert json.loads(line)["client"] is None
    assert line == _dumps_of(event, "not_found", 404, line)


def test_time_is_rfc3339_utc_with_milliseconds(monkeypatch):
    monkeypatch.setattr(audit.time, "time", lambda: 1795377188.9876)
    clock = audit._Clock()
    assert clock.now() == "2026-11-22T19:53:08.987Z"
    monkeypatch.setattr(audit.time, "time", lambda: 1795377189.0004)
    assert clock.now() == "2026-11-22T19:53:09.000Z"


def test_generated_request_ids_are_distinct_uuid4s():
    pool = audit._RandomPool()
    ids = [pool.uuid4() for _ in range(1000)]  # several refills of the 4 KiB buffer
    assert len(set(ids)) == len(ids)
    for rid in ids:
        parsed = uuid.UUID(rid)
        assert str(parsed) == rid and parsed.version == 4 and parsed.variant == uuid.RFC_4122
