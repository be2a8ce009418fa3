"""The ``iceberg-rest`` service as its handlers see it: :class:`ServiceState`, one typed,
frozen record of the service-wide state every request may use (names, options, storage,
vending, the token issuer's authentication step), built once per service when its topology is
built and reached by handlers as ``catalog.service``
(:class:`~gateway.iceberg.catalog.Catalog`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gateway.iceberg.manifest_cache import ManifestCache
from gateway.iceberg.plan_cache import PlanCache
from gateway.iceberg.plan_executor import PlanExecutor
from gateway.iceberg.plan_flights import Flights
from gateway.iceberg.plan_store import PendingPlans, PlanningOptions
from gateway.lakehouse.storage import S3Storage
from gateway.iceberg.vending import Vendor
from gateway.iceberg.warehouses import Warehouse
from gateway.pipeline.steps.authentication import Authentication
from gateway.upstream.locks import Schedule

#: Seconds between ``heartbeat`` calls while a commit holds HMS's lock (Java's 4 minutes).
LOCK_HEARTBEAT_SECONDS = 240.0
#: Seconds one audit line of allowed S3 signings stands for (per user, table and access).
SUMMARY_SECONDS = 60.0


class Summaries:
    """Per (user, table, access): when the last audit line of allowed signings was written and
    how many allowed signings went unwritten since."""

    def __init__(self) -> None:
        self._state: dict[tuple[str, str, str, str], tuple[float, int]] = {}

    def allowed(self, key: tuple[str, str, str, str]) -> int | None:
        """None: leave this signing out of the audit log; else write its line, which stands
        for itself and the returned number of signings left out before it."""
        now = time.monotonic()
        started, skipped = self._state.get(key, (float("-inf"), 0))
        if now - started < SUMMARY_SECONDS:
            self._state[key] = (started, skipped + 1)
            return None
        if len(self._state) > 10_000:
            self._state.clear()
        self._state[key] = (now, 0)
        return skipped


@dataclass(frozen=True, eq=False)
class ServiceState:
    """What the handlers use of the serving service (from the kind's options unless said);
    identity-hashed: per-service caches key on it (:func:`gateway.iceberg.locations.warehouse`)."""

    #: The topology's name and the service's path (metric labels), and the service's URL path
    #: ``/gateway/{topology}/{path}`` (the remote signer's URI).
    topology: str = ""
    path: str = ""
    prefix: str = ""
    #: Hive 2 column types for the HMS copy of the schema (``timestamp`` for ``timestamptz``).
    hive2_compatible: bool = True
    #: A commit's HMS table lock: ``check_lock`` back-off, how long a commit waits before 409
    #: (``wait``), heartbeats while held (Java's 4 minutes), HMS's ``hive.txn.timeout``.
    lock: Schedule = Schedule(heartbeat=LOCK_HEARTBEAT_SECONDS)
    #: Principals that may load tables with columns denied to the user (:mod:`gateway.iceberg.trusted`).
    trusted_engines: frozenset[str] = frozenset()
    #: Locations below which ``register`` may take metadata files (:mod:`gateway.iceberg.register`).
    register_prefixes: tuple[str, ...] = ()
    #: Locations inside which objects may lie besides HMS's warehouse (:mod:`gateway.iceberg.locations`).
    allowed_locations: tuple[str, ...] = ()
    #: Catalogs under a ``{prefix}``: name → its databases (:mod:`gateway.iceberg.warehouses`).
    warehouses: Mapping[str, Warehouse] = field(default_factory=lambda: MappingProxyType({}))
    #: The S3 warehouse (the gateway's key), and the vendor of credentials when it has a role.
    storage: S3Storage | None = None
    vendor: Vendor | None = None
    #: The remote signer's audit summaries (:mod:`gateway.iceberg.signer`).
    signing_summaries: Summaries = field(default_factory=Summaries)
    #: The chain's authentication step (its providers and failure throttle), for the token
    #: endpoint, which checks credentials itself (:mod:`gateway.iceberg.oauth`); None without one.
    authentication: Authentication | None = None
    #: Server-side scan planning: its settings, the parsed manifests, this worker's plans in
    #: progress, the planner's threads, identical plans' answers and plannings in progress
    #: (:mod:`gateway.iceberg.scan_plans`).
    planning: PlanningOptions = field(default_factory=PlanningOptions)
    manifests: ManifestCache = field(default_factory=lambda: ManifestCache(0))
    pending: PendingPlans = field(default_factory=PendingPlans)
    planner: PlanExecutor = field(default_factory=lambda: PlanExecutor(4, 2))
    answers: PlanCache = field(default_factory=lambda: PlanCache(0, 1.0))
    flights: Flights = field(default_factory=Flights)
