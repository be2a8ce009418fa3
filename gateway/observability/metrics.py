"""Prometheus metrics of the gateway, named by Prometheus conventions (``_total``, ``_seconds``).

All live in :data:`REGISTRY`, served by the management listener at ``/metrics``. Label values are
bounded: ``method`` is an IDL method or ``other`` (see :func:`method_label`).

With ``workers: N`` each worker process writes its values to files in ``PROMETHEUS_MULTIPROC_DIR``
(prometheus-client's multiprocess mode, set by the supervisor before this module is imported)
and the supervisor's management listener serves their aggregate: counters and histograms are
summed; every Gauge therefore names its ``multiprocess_mode`` (how workers' values combine; the
``live`` modes drop a worker's values when it exits).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway import __version__

REGISTRY = CollectorRegistry(auto_describe=True)

# From 1 ms to about 1 min: HMS calls range from sub-millisecond to tens of seconds.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

REQUESTS = Counter(
    "hms_gateway_requests", "Requests handled, by outcome.",
    ["topology", "service", "method", "outcome"], registry=REGISTRY,
)
REQUEST_DURATION = Histogram(
    "hms_gateway_request_duration_seconds", "Time from request received to response sent.",
    ["topology", "service", "method", "outcome"], buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)
#: ``origin`` label values: a client's call proxied to HMS, or the gateway's own (change-feed
#: pollers, the Glue and Iceberg REST kinds' calls, probes), so an operator can tell what
#: clients cost HMS.
ORIGIN_CLIENT, ORIGIN_GATEWAY = "client", "gateway"
UPSTREAM_REQUESTS = Counter(
    "hms_gateway_upstream_requests", "Calls dispatched to an upstream HMS, by origin (client: "
    "proxied, gateway: the gateway's own) and outcome.",
    ["upstream", "origin", "outcome"], registry=REGISTRY,
)
UPSTREAM_DURATION = Histogram(
    "hms_gateway_upstream_duration_seconds", "Time of one upstream call, request sent to reply "
    "read, by origin (client: proxied, gateway: the gateway's own).",
    ["upstream", "origin"], buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)
UPSTREAM_UP = Gauge(
    "hms_gateway_upstream_up", "1 when the last call or probe of the upstream succeeded.",
    ["upstream"], multiprocess_mode="livemostrecent", registry=REGISTRY,
)
UPSTREAM_POOL = Gauge(
    "hms_gateway_upstream_pool_connections", "Upstream connections by state.",
    ["upstream", "state"], multiprocess_mode="livesum", registry=REGISTRY,
)
REQUEST_BYTES = Counter(
    "hms_gateway_request_bytes", "Request body bytes received.",
    ["topology", "service"], registry=REGISTRY,
)
RESPONSE_BYTES = Counter(
    "hms_gateway_response_bytes", "Response body bytes sent.",
    ["topology", "service"], registry=REGISTRY,
)
AUTHENTICATION = Counter(
    "hms_gateway_authentication", "Authentication attempts by provider and outcome.",
    ["topology", "provider", "outcome"], registry=REGISTRY,
)
PASSWORD_CHECKS = Counter(
    "hms_gateway_password_checks", "Password checks (bcrypt, LDAP bind) by outcome; "
    "refused: not run, the client address had spent its budget (429).",
    ["topology", "outcome"], registry=REGISTRY,
)
POLICY_DECISIONS = Counter(
    "hms_gateway_policy_decisions", "Catalog-policy decisions: calls allowed or denied, objects "
    "hidden from listings, columns removed from replies, calls refused because the policy "
    "cannot judge the method.",
    ["topology", "service", "outcome"], registry=REGISTRY,
)
S3_SIGNINGS = Counter(
    "hms_gateway_s3_signings", "Remote-signing requests of the iceberg-rest kind, by decision: "
    "allowed (signed), denied (403) or invalid (400).",
    ["topology", "service", "decision"], registry=REGISTRY,
)
HMS_LOCKS_RELEASED = Counter(
    "hms_gateway_hms_locks_released", "HMS lock requests of others the gateway released: "
    "dead (a gateway process on this host that no longer runs) or expired (no heartbeat for "
    "HMS's hive.txn.timeout).", ["reason"], registry=REGISTRY,
)
CONFIG_RELOADS = Counter(
    "hms_gateway_config_reloads", "Topology reloads by outcome.", ["outcome"], registry=REGISTRY,
)
CERTIFICATE_EXPIRY = Gauge(
    "hms_gateway_tls_certificate_expiry_timestamp_seconds",
    "Expiry of the listener's TLS certificate, Unix time.", ["listener"],
    multiprocess_mode="livemax", registry=REGISTRY,
)
FEED_LAST_EVENT_ID = Gauge(
    "hms_gateway_feed_last_event_id", "Newest HMS notification event id the change feed has read.",
    ["topology", "service"], multiprocess_mode="livemax", registry=REGISTRY,
)
FEED_LAG = Gauge(
    "hms_gateway_feed_lag_seconds", "Now minus the eventTime of the newest notification event read.",
    ["topology", "service"], multiprocess_mode="livemin", registry=REGISTRY,
)
FEED_POLLS = Counter(
    "hms_gateway_feed_polls", "Change-feed poll cycles against HMS (one per interval, whatever "
    "the number of subscribers), by outcome.", ["topology", "service", "outcome"], registry=REGISTRY,
)
FEED_EVENTS_DELIVERED = Counter(
    "hms_gateway_feed_events_delivered", "Events sent to change-feed clients (long poll and SSE).",
    ["topology", "service"], registry=REGISTRY,
)
FEED_SUBSCRIBERS = Gauge(
    "hms_gateway_feed_subscribers", "Change-feed clients currently waiting or streaming.",
    ["topology", "service"], multiprocess_mode="livesum", registry=REGISTRY,
)
BROKER_PUBLISHER_LEADING = Gauge(
    "hms_gateway_broker_publisher_leading", "1 while this gateway publishes the service's change "
    "feed to the broker (it holds the HMS lock, or has an offset_file), else 0.",
    ["topology", "service"], multiprocess_mode="livemax", registry=REGISTRY,
)
CACHE_LOOKUPS = Counter(
    "hms_gateway_cache_lookups", "Metadata-cache lookups of cached read methods, by result: hit, "
    "miss (no entry), stale (an entry whose table changed since) or bypass (the cache is not "
    "following HMS's notification log right now).", ["topology", "service", "result"], registry=REGISTRY,
)
CACHE_EVICTIONS = Counter(
    "hms_gateway_cache_evictions", "Metadata-cache entries removed, by reason: size (least "
    "recently used, over max_bytes), expired (ttl_seconds), stale (found changed).",
    ["topology", "service", "reason"], registry=REGISTRY,
)
CACHE_INVALIDATIONS = Counter(
    "hms_gateway_cache_invalidations", "Metadata-cache invalidations, by source: event (a "
    "notification-log event), write (a write through the gateway), resync (everything dropped: "
    "a trimmed log, an id that went back).", ["source"], registry=REGISTRY,
)
CACHE_BYTES = Gauge(
    "hms_gateway_cache_bytes", "Bytes of HMS replies the metadata cache holds.",
    ["topology", "service"], multiprocess_mode="livesum", registry=REGISTRY,
)
CACHE_ENTRIES = Gauge(
    "hms_gateway_cache_entries", "Replies the metadata cache holds.",
    ["topology", "service"], multiprocess_mode="livesum", registry=REGISTRY,
)
#: ``report``: ``scan-report`` or ``commit-report`` (the spec's ``report-type``; others are refused).
ICEBERG_METRICS_REPORTS = Counter(
    "hms_gateway_iceberg_metrics_reports", "Iceberg REST metrics reports received "
    "(POST .../tables/{table}/metrics), by report type.",
    ["topology", "service", "report"], registry=REGISTRY,
)
ICEBERG_MANIFEST_CACHE_LOOKUPS = Counter(
    "hms_gateway_iceberg_manifest_cache_lookups", "Lookups of parsed manifest lists and manifests "
    "in the iceberg-rest kind's manifest cache (server-side scan planning), by result: hit or miss.",
    ["topology", "service", "result"], registry=REGISTRY,
)
ICEBERG_MANIFEST_CACHE_BYTES = Gauge(
    "hms_gateway_iceberg_manifest_cache_bytes", "Estimated bytes of parsed manifests the "
    "iceberg-rest kind's manifest cache holds (bounded by planning.manifest_cache_mib).",
    ["topology", "service"], multiprocess_mode="livesum", registry=REGISTRY,
)
ICEBERG_PLAN_CACHE_LOOKUPS = Counter(
    "hms_gateway_iceberg_plan_cache_lookups", "Lookups of identical scan plans' answers in the "
    "iceberg-rest kind's plan cache (server-side scan planning), by result: hit or miss.",
    ["topology", "service", "result"], registry=REGISTRY,
)
ICEBERG_PLAN_CACHE_BYTES = Gauge(
    "hms_gateway_iceberg_plan_cache_bytes", "Bytes of answers (JSON text) the iceberg-rest kind's "
    "plan cache holds (bounded by planning.plan_cache_mib).",
    ["topology", "service"], multiprocess_mode="livesum", registry=REGISTRY,
)
ICEBERG_PLAN_FLIGHTS = Counter(
    "hms_gateway_iceberg_plan_flights", "Scan plans and plan tasks of the iceberg-rest kind planned "
    "(started) or joined to an identical one in progress (joined).",
    ["topology", "service", "result"], registry=REGISTRY,
)
BUILD_INFO = Gauge(
    "hms_gateway_build_info", "Always 1; labels describe the build.", ["version"],
    multiprocess_mode="livemax", registry=REGISTRY,
)
BUILD_INFO.labels(version=__version__).set(1)
WORKER_CONNECTIONS = Counter(
    "hms_gateway_worker_connections", "Client connections accepted on the gateway port, by "
    "worker process (its index from 0; always 0 with workers: 1).", ["worker"], registry=REGISTRY,
)


def method_label(name: str, known: frozenset[str]) -> str:
    """``name`` when the IDL defines it, else ``"other"``: a client cannot grow the label set."""
    return name if name in known else "other"


_CHILDREN: dict[tuple, object] = {}


def child(metric, *labels: str):
    """``metric.labels(*labels)`` (positional, in the metric's label order), remembered.

    prometheus_client validates the values and takes a lock on every ``labels()`` call; the
    request path needs about eight children per request, so it looks them up in a plain dict.
    Label values are bounded (see the module docstring), so is the dict.
    """
    key = (id(metric), labels)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*labels)
    return found


def store_function_gauges() -> None:
    """Write the value of every gauge read from a function (``Gauge.set_function``) to this
    process's metric file.

    In multiprocess mode the supervisor reads files only, and a function gauge is evaluated
    only when its own process collects; a worker calls this when the supervisor scrapes
    (gateway/workers.py), so such gauges stay read at scrape time.
    """
    for gauge in [m for m in globals().values() if isinstance(m, Gauge)]:
        with gauge._lock:
            children = list(gauge._metrics.values())
        for child in children:
            if "_child_samples" in vars(child):  # set_function replaced the sampler
                for sample in child._child_samples():
                    child._value.set(sample.value)
