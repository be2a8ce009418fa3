"""Change-feed test helpers: an ``event-stream`` gateway on a given HMS, DDL through Apache's
generated client (:class:`Catalog`), a minimal SSE reader, and the feed's figures from a
running gateway's ``/metrics`` in one scrape. The ``feed_hms`` and ``catalog`` fixtures are in
``tests/integration/conftest.py``."""

from __future__ import annotations

import asyncio
import base64
import urllib.request
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway import GatewayFactory, RunningGateway, metric
from tests.support.policy import POLICY_FILE, POLICY_PATH
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

__all__ = ["EVENTS_PATH", "PASSWORD", "POLICY", "SSE", "Catalog", "SSEReader", "auth", "events_service",
           "feed_metrics", "publisher_leading", "start_feed_gateway"]

PASSWORD = "pw-123456"
EVENTS_PATH = "catalog/events"
SSE = {"Accept": "text/event-stream"}
POLICY = """
policies:
  - id: 1
    name: alice reads feeddb
    resources: {database: [feeddb], table: ["*"], column: ["*"]}
    allow: [{users: [alice], accesses: [select]}]
  - id: 2
    name: alice does not see secrets
    resources: {database: [feeddb], table: ["*"], column: [secret]}
    deny: [{users: [alice], accesses: [select]}]
  - id: 3
    name: admin reads everything
    resources: {database: ["*"], table: ["*"], column: ["*"]}
    allow: [{users: [admin], accesses: [select]}]
"""


def auth(user: str = "alice") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()}


def events_service(hms, **options) -> dict:
    return {"path": EVENTS_PATH, "kind": "event-stream", "upstream": {"urls": [hms.uri]},
            "options": {"poll_interval_seconds": 0.2, "heartbeat_seconds": 1, **options}}


def start_feed_gateway(start: GatewayFactory, hms, *, policy: bool = False, workdir: Path | None = None,
                       **options) -> RunningGateway:
    """A gateway started by ``start`` (in ``workdir`` if given) serving :func:`events_service`
    of ``hms`` with ``options``, users alice, bob and admin (:data:`PASSWORD`); with ``policy``,
    under :data:`POLICY`."""
    svc = events_service(hms, **options)
    if policy:
        svc["policy_file"] = POLICY_PATH
    return start(services=[svc], users={"alice": PASSWORD, "bob": PASSWORD, "admin": PASSWORD},
                 workdir=workdir, files={POLICY_FILE: POLICY} if policy else None)


class Catalog:
    """DDL on the HMS through Apache's generated client (what the PySpark pipeline calls)."""

    def __init__(self, hms):
        self.hms = hms
        self.client, self.transport = hive_metastore_client(hms.host, hms.port)
        _, self.t = hive_metastore_modules()

    def close(self) -> None:
        self.transport.close()

    def create_database(self, db: str) -> None:
        self.client.create_database(self.t.Database(
            name=db, description="", locationUri=(self.hms.warehouse_dir / f"{db}.db").as_uri(), parameters={}))

    def _sd(self, db: str, table: str, cols, suffix: str = ""):
        t = self.t
        return t.StorageDescriptor(
            cols=[t.FieldSchema(c, "string", "") for c in cols],
            location=(self.hms.warehouse_dir / f"{db}.db" / table).as_uri() + suffix,
            inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            serdeInfo=t.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}), parameters={})

    def create_table(self, db: str, table: str, cols=("name", "age"), params=None) -> None:
        t = self.t
        self.client.create_table(t.Table(
            tableName=table, dbName=db, owner="alice", sd=self._sd(db, table, cols),
            partitionKeys=[t.FieldSchema("hair_color", "string", "")], parameters=dict(params or {}),
            tableType="MANAGED_TABLE"))

    def add_partitions(self, db: str, table: str, values) -> None:
        t = self.t
        self.client.add_partitions([
            t.Partition(values=[v], dbName=db, tableName=table, parameters={},
                        sd=self._sd(db, table, ("name", "age"), f"/hair_color={v}")) for v in values])

    def drop_partition(self, db: str, table: str, value: str) -> None:
        self.client.drop_partition(db, table, [value], True)

    def alter_table(self, db: str, table: str, cols) -> None:
        tbl = self.client.get_table(db, table)
        tbl.sd.cols = [self.t.FieldSchema(c, "string", "") for c in cols]
        self.client.alter_table(db, table, tbl)

    def drop_table(self, db: str, table: str) -> None:
        self.client.drop_table(db, table, True)

    def drop_database(self, db: str) -> None:
        self.client.drop_database(db, True, True)

    def current_id(self) -> int:
        return self.client.get_current_notificationEventId().eventId


class SSEReader:
    """A minimal text/event-stream reader (WHATWG HTML §9.2.6) over an aiohttp response."""

    def __init__(self, response: aiohttp.ClientResponse):
        self.response = response
        self.comments = 0

    async def next(self, timeout: float = 30.0) -> dict[str, str]:
        """The next event's fields; raises TimeoutError after ``timeout`` s (comments do not count)."""
        async with asyncio.timeout(timeout):
            return await self._next()

    async def _next(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        while True:
            line = await self.response.content.readline()
            if not line:
                raise EOFError("stream ended")
            text = line.decode().rstrip("\r\n")
            if not text:
                if "data" in fields:
                    return fields
                fields = {}
            elif text.startswith(":"):
                self.comments += 1
            else:
                name, _, value = text.partition(":")
                value = value[1:] if value.startswith(" ") else value
                fields[name] = fields[name] + "\n" + value if name == "data" and name in fields else value


_NAMES = {
    "hms_gateway_feed_polls_total": "polls",
    "hms_gateway_upstream_requests_total": "upstream",
    "hms_gateway_feed_events_delivered_total": "delivered",
    "hms_gateway_feed_subscribers": "subscribers",
}


def feed_metrics(gw: RunningGateway) -> dict[str, float]:
    """``polls`` (poll cycles, any outcome), ``upstream`` (calls dispatched to HMS), ``delivered``
    (events sent to clients) and ``subscribers`` (clients now), each summed over its labels,
    all from the same scrape so they can be compared."""
    with urllib.request.urlopen(gw.management_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = dict.fromkeys(_NAMES.values(), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _NAMES:
                out[_NAMES[sample.name]] += sample.value
    return out


def publisher_leading(gw: RunningGateway) -> bool:
    """Whether the gateway says its broker publisher leads (``hms_gateway_broker_publisher_leading``);
    a gateway that is gone (or dying: killed, not yet reaped) does not."""
    try:
        return gw.process.poll() is None and metric(gw, "hms_gateway_broker_publisher_leading") == 1
    except OSError:
        return False
