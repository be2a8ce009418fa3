"""Plan ids and plan tasks of server-side scan planning, and the service's planning settings.

A plan id of a completed plan and a plan task carry what they stand for rather than pointing at
state: the caller, the table, when they expire and the request with its snapshot pinned (a plan
task also the slice of manifests it plans), compressed JSON in base64url (:func:`encode`,
:func:`decode`). Any worker process answers them, nothing is held for them, and a fetch plans
again from immutable manifests, through the manifest cache. They are not capabilities: every
fetch is judged by the policy as a load is, for the caller who sends it, and one naming another
user or another table, expired, or not one at all is the spec's 404
(``NoSuchPlanIdException``/``NoSuchPlanTaskException``). A client that edits one gets at most
the plan it could have asked for itself.

A plan that does not complete within ``planning.wait_seconds`` is answered ``submitted`` with an
id of :class:`PendingPlans` (process memory: the worker that took it answers it; another answers
404, which the spec lets a client take as "plan again"), until it is fetched, cancelled or
expires.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import secrets
import time
import zlib
from dataclasses import dataclass, field

from gateway.settings_model import SettingsModel
from pydantic import Field

__all__ = ["PendingPlans", "PlanningOptions", "decode", "encode"]

PLAN, TASK = "plan", "task"
_PENDING_PREFIX = "pending-"
#: Largest decompressed token, bytes.
MAX_TOKEN_BYTES = 256 * 1024


class PlanningOptions(SettingsModel):
    """The ``iceberg-rest`` kind's ``options.planning``: server-side scan planning."""

    #: Estimated memory of parsed manifests kept per service (MiB; 0: none kept).
    manifest_cache_mib: float = Field(default=256, ge=0, le=64 * 1024)
    #: How long a plan is waited for before the answer is ``submitted`` (seconds).
    wait_seconds: float = Field(default=10.0, gt=0, le=600)
    #: About how many live data files one answer plans; more become plan tasks.
    files_per_task: int = Field(default=5000, ge=1, le=1_000_000)
    #: How long plan ids and plan tasks stay valid (seconds).
    expiry_seconds: float = Field(default=3600.0, gt=0, le=7 * 86400)
    #: Submitted plans held at once per worker; more are refused (503).
    max_pending: int = Field(default=64, ge=1, le=10_000)


def encode(payload: dict) -> str:
    """``payload`` (JSON-able) as a token."""
    raw = zlib.compress(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode(), 6)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str, kind: str) -> dict | None:
    """The payload of a token of ``kind`` (:data:`PLAN` or :data:`TASK`), None when ``token``
    is not one (bad base64, compression or JSON, larger than :data:`MAX_TOKEN_BYTES`)."""
    if token.startswith(_PENDING_PREFIX):
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        inflater = zlib.decompressobj()
        text = inflater.decompress(raw, MAX_TOKEN_BYTES)
        if inflater.unconsumed_tail:
            return None
        payload = json.loads(text)
    except (binascii.Error, zlib.error, ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.get("k") != kind:
        return None
    return payload


def owned(payload: dict | None, user: str, db: str, table: str, now: float | None = None) -> bool:
    """Whether a decoded token is the caller's, for ``db.table``, and not expired."""
    if payload is None:
        return False
    expires = payload.get("x")
    return (payload.get("u") == user and payload.get("ns") == db and payload.get("t") == table
            and isinstance(expires, (int, float)) and (now or time.time()) < expires)


@dataclass
class Pending:
    """A plan answered ``submitted``: whose, for which table, its running ``work``."""

    user: str
    db: str
    table: str
    expires: float
    work: asyncio.Future
    cancelled: bool = False


@dataclass
class PendingPlans:
    """This worker's submitted plans by id."""

    plans: dict[str, Pending] = field(default_factory=dict)

    def add(self, pending: Pending, limit: int) -> str | None:
        """A new id for ``pending``, None when ``limit`` plans are held already."""
        self.expire()
        if len(self.plans) >= limit:
            return None
        plan_id = _PENDING_PREFIX + secrets.token_urlsafe(18)
        self.plans[plan_id] = pending
        return plan_id

    def get(self, plan_id: str, user: str, db: str, table: str) -> Pending | None:
        """The caller's pending plan ``plan_id`` of ``db.table``, None otherwise."""
        self.expire()
        found = self.plans.get(plan_id)
        if found is None or (found.user, found.db, found.table) != (user, db, table):
            return None
        return found

    def drop(self, plan_id: str) -> None:
        found = self.plans.pop(plan_id, None)
        if found is not None and not found.work.done():
            found.work.cancel()

    def expire(self) -> None:
        now = time.time()
        for plan_id in [k for k, p in self.plans.items() if p.expires <= now]:
            self.drop(plan_id)
