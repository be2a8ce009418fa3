"""Plan ids and plan tasks of server-side scan planning, and the service's planning settings.

A plan id and a plan task carry what they stand for rather than pointing at state: the caller,
the table, when they expire and the request with its snapshot pinned (a plan id also a random
nonce, so that two plans are two ids; a plan task the slice of manifests, or of one manifest's
entries, it plans), compressed JSON in base64url (:func:`encode`, :func:`decode`). Planning is
deterministic given these and the table's metadata, so any worker process of any replica answers
them, planning again through its plan cache and manifest cache when it does not hold the plan
(issue 50: a client behind a balancer polls a stranger about half the time). They are not
capabilities and carry no MAC: every call is judged by the policy as a load is, for the caller
who sends it, and one naming another user or another table, expired, or not one at all is the
spec's 404 (``NoSuchPlanIdException``/``NoSuchPlanTaskException``). A client that edits one gets
at most the plan it could have asked for itself.

Every plan in progress is held by :class:`PendingPlans` (process memory) under its id from its
start: at most ``planning.max_pending_per_user`` per user and ``planning.max_pending`` per
worker, beyond which a plan is refused (:class:`Full`: 503 with ``Retry-After``) after dropping
the oldest finished plan nobody fetched. A plan that completes within ``planning.wait_seconds``
is answered and let go at once; one that does not is answered ``submitted``, and held until its
outcome is fetched (``completed`` or ``failed``: nothing is held after), it is cancelled (its
work stops at the next manifest) or it expires. A worker that does not hold a plan it is asked
about plans it again the same way, under the same id. A cancel is recorded by the worker that
takes it (:meth:`PendingPlans.cancel`, bounded): that worker answers 404 for the id after; a
worker or replica that never saw the cancel still answers the id.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

from gateway.settings_model import SettingsModel
from pydantic import Field, model_validator

__all__ = ["Full", "Pending", "PendingPlans", "PlanningOptions", "decode", "encode"]

PLAN, TASK = "plan", "task"
#: Cancelled plan ids a worker remembers at most (32-byte digests; the oldest forgotten first).
MAX_CANCELLED = 10_000
#: Largest decompressed token, bytes.
MAX_TOKEN_BYTES = 256 * 1024
#: The most ``max_filter_bytes`` may be: a token holds the filter (within MAX_TOKEN_BYTES).
MAX_FILTER_BYTES = 192 * 1024
#: The most ``max_filter_depth`` may be: PyIceberg binds, evaluates and writes filters recursively,
#: a few frames a level, within Python's recursion limit (1000 frames).
MAX_FILTER_DEPTH = 128


class PlanningOptions(SettingsModel):
    """The ``iceberg-rest`` kind's ``options.planning``: server-side scan planning."""

    #: Estimated memory of parsed manifests kept per service (MiB; 0: none kept).
    manifest_cache_mib: float = Field(default=256, ge=0, le=64 * 1024)
    #: How long a plan is waited for before the answer is ``submitted`` (seconds).
    wait_seconds: float = Field(default=10.0, gt=0, le=600)
    #: How many live data files one answer plans at most (as manifest lists count them); more
    #: become plan tasks, a manifest of more cut into parts of its entries.
    files_per_task: int = Field(default=5000, ge=1, le=1_000_000)
    #: How long plan ids and plan tasks stay valid (seconds).
    expiry_seconds: float = Field(default=3600.0, gt=0, le=7 * 86400)
    #: Plans in progress or unfetched held at once per worker, and per user; more are refused
    #: (503 with ``Retry-After``).
    max_pending: int = Field(default=64, ge=1, le=10_000)
    max_pending_per_user: int = Field(default=8, ge=1, le=10_000)
    #: The planner's own threads per worker, and how many of them one user's plans take at once.
    threads: int = Field(default=4, ge=1, le=256)
    threads_per_user: int = Field(default=2, ge=1, le=256)
    #: A request's ``filter``: its JSON's nesting depth, size (bytes) and literal values (400 beyond).
    max_filter_depth: int = Field(default=64, ge=2, le=MAX_FILTER_DEPTH)
    max_filter_bytes: int = Field(default=32 * 1024, ge=64, le=MAX_FILTER_BYTES)
    max_filter_literals: int = Field(default=1000, ge=1, le=100_000)
    #: Residual filters written in one answer (bytes of JSON); tasks beyond carry none, and the
    #: client applies the request's filter, as the spec says.
    max_residual_bytes: int = Field(default=1024 * 1024, ge=0, le=1024 * 1024 * 1024)
    #: Answers of identical plans kept per service (MiB of JSON; 0: none kept), and for how long
    #: (seconds; below ``expiry_seconds``, the life of the plan tasks they hold).
    plan_cache_mib: float = Field(default=64, ge=0, le=64 * 1024)
    plan_cache_seconds: float = Field(default=300.0, gt=0, le=86400)

    @model_validator(mode="after")
    def _shares(self) -> PlanningOptions:
        if self.max_pending_per_user > self.max_pending:
            raise ValueError("max_pending_per_user must not be above max_pending")
        if self.threads_per_user > self.threads:
            raise ValueError("threads_per_user must not be above threads")
        if self.plan_cache_seconds >= self.expiry_seconds:
            raise ValueError("plan_cache_seconds must be below expiry_seconds")
        if self.expiry_seconds <= self.wait_seconds:  # a plan would expire while its request waits
            raise ValueError("expiry_seconds must be above wait_seconds")
        return self


def encode(payload: dict) -> str:
    """``payload`` (JSON-able) as a token."""
    raw = zlib.compress(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode(), 6)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str, kind: str) -> dict | None:
    """The payload of a token of ``kind`` (:data:`PLAN` or :data:`TASK`), None when ``token``
    is not one (bad base64, compression or JSON, larger than :data:`MAX_TOKEN_BYTES`)."""
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


class Full(Exception):
    """A plan refused: ``limit`` (the setting's name) plans are held already."""

    def __init__(self, limit: str, value: int):
        super().__init__(limit)
        self.limit, self.value = limit, value


@dataclass
class Pending:
    """A plan in progress or unfetched: whose, for which table, its ``work`` (None until
    started: the caller's hold on its planning, :meth:`gateway.iceberg.plan_flights.Flights.join`,
    whose cancelling stops the planning at its next manifest when nobody else waits for it)."""

    user: str
    db: str
    table: str
    expires: float
    work: asyncio.Future | None = None
    #: Its key in the plan cache (:func:`gateway.iceberg.plan_cache.key`).
    cached: tuple[str, ...] | None = None

    def finished(self) -> bool:
        return self.work is not None and self.work.done()


@dataclass
class PendingPlans:
    """This worker's plans by id, in the order they started, and the ids cancelled here."""

    plans: dict[str, Pending] = field(default_factory=dict)
    #: SHA-256 of a cancelled plan id → when the id expires (epoch seconds), oldest first.
    cancelled: OrderedDict[bytes, float] = field(default_factory=OrderedDict)

    def add(self, plan_id: str, pending: Pending, per_user: int, total: int) -> None:
        """Hold ``pending`` as ``plan_id`` (not held yet). Raises :class:`Full` when ``per_user``
        plans of its user or ``total`` plans are held, after dropping the oldest finished one of
        the user (or of anyone, for ``total``)."""
        self.expire()
        mine = [k for k, p in self.plans.items() if p.user == pending.user]
        if len(mine) >= per_user and not self._drop_finished(mine):
            raise Full("max_pending_per_user", per_user)
        if len(self.plans) >= total and not self._drop_finished(list(self.plans)):
            raise Full("max_pending", total)
        self.plans[plan_id] = pending

    def _drop_finished(self, ids: list[str]) -> bool:
        oldest = next((k for k in ids if self.plans[k].finished()), None)
        if oldest is not None:
            self.drop(oldest)
        return oldest is not None

    def get(self, plan_id: str, user: str, db: str, table: str) -> Pending | None:
        """The caller's pending plan ``plan_id`` of ``db.table``, None otherwise."""
        self.expire()
        found = self.plans.get(plan_id)
        if found is None or (found.user, found.db, found.table) != (user, db, table):
            return None
        return found

    def drop(self, plan_id: str) -> None:
        """Let ``plan_id`` go: its work is let go (stopped at its next manifest if nobody else
        waits for it) if it runs."""
        found = self.plans.pop(plan_id, None)
        if found is not None:
            if found.work is not None and not found.work.done():
                found.work.cancel()

    def cancel(self, plan_id: str, expires: float) -> None:
        """Let ``plan_id`` go (:meth:`drop`) and remember it cancelled until ``expires`` (epoch
        seconds), or until :data:`MAX_CANCELLED` later cancels push it out."""
        self.drop(plan_id)
        digest = hashlib.sha256(plan_id.encode()).digest()
        self.cancelled.pop(digest, None)
        self.cancelled[digest] = expires
        while len(self.cancelled) > MAX_CANCELLED:
            self.cancelled.popitem(last=False)

    def was_cancelled(self, plan_id: str) -> bool:
        """Whether ``plan_id`` was cancelled on this worker (and has not expired since)."""
        self.expire()
        expires = self.cancelled.get(hashlib.sha256(plan_id.encode()).digest())
        return expires is not None and time.time() < expires

    def expire(self) -> None:
        now = time.time()
        for plan_id in [k for k, p in self.plans.items() if p.expires <= now]:
            self.drop(plan_id)
        # ids expire about in the order they were cancelled: the oldest go first, and the count cap bounds the rest
        while self.cancelled and next(iter(self.cancelled.values())) <= now:
            self.cancelled.popitem(last=False)
