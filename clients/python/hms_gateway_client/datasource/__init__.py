"""A PySpark data source (Spark 4 Python Data Source API, ``pyspark.sql.datasource``) of Hive
Metastore catalog metadata read through the gateway.

>>> from hms_gateway_client.datasource import register
>>> register(spark)
>>> (spark.read.format("hms").option("url", "https://gw:8443/gateway/default/hms")
...     .option("ca", "ca.pem").option("auth", "basic").option("user", "alice")
...     .option("password_env", "HMS_PASSWORD").load("tables"))

``load(view)``: ``databases``, ``tables``, ``partitions`` or ``columns`` (schemas in
:data:`hms_gateway_client.datasource.crawl.SCHEMAS`); ``spark.readStream.format("hms")…load("events")``
follows an ``event-stream`` service (``url`` is that service's; :class:`HMSEventStreamReader`,
options ``starting_after``, ``database``, ``table``, ``types`` as filters). The driver lists
databases and tables and deals them into ``partitions`` input partitions, each a contiguous,
near-equal share of the tables (or databases) in name order, cut into batches of up to
``batch_size`` tables of one database (one call each); an executor fetches its partition with up
to ``threads`` calls in flight, each thread over its own kept-alive HTTPS connection
(:func:`hms_gateway_client.datasource.crawl.plan_partitions`, :func:`~hms_gateway_client.datasource.crawl.partition_rows`).

Options (names as the tunnel's flags, ``_`` for ``-``): ``url`` (required), ``ca``, ``auth``
(``basic``, ``bearer``, ``kerberos``, ``cert``; absent: no credentials), ``user``,
``password_env``, ``password_file``, ``netrc`` (a path, or ``true`` for ``~/.netrc``),
``token_env``, ``token_file``, ``cert``, ``key``, ``service`` (Kerberos), ``protocol``
(``binary`` or ``tjson``), ``timeout`` (seconds), ``database`` and ``table`` (HMS name
patterns, default ``*``), ``batch_size`` (tables per ``get_table_objects_by_name`` call, default
100), ``partitions`` (input partitions, default 4: twice ``local[2]``'s executors; Spark spends
about 0.1 s per Python task, so a few large partitions beat many small ones), ``threads``
(calls in flight per input partition, default 2).
Secrets are read on the driver (from the environment, the netrc or the file, never from an
option's value) and travel to the executors inside the pickled reader, as Spark ships every
reader; ``ca``, ``cert`` and ``key`` are paths the executors must be able to read.
Bad options raise ``ValueError`` when the DataFrame is created.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition, SimpleDataSourceStreamReader

from hms_gateway_client.auth import Auth, auth_from_options, ssl_context
from hms_gateway_client.connection import PROTOCOLS, EventPoller, connect
from hms_gateway_client.datasource.crawl import SCHEMAS, VIEWS, Batch, partition_rows, plan_partitions

__all__ = ["EVENTS_SCHEMA", "HMSDataSource", "HMSEventStreamReader", "HMSReader", "register", "reader_options"]

#: Schema of the streaming view ``events`` (an ``event-stream`` service of the gateway).
EVENTS_SCHEMA = "event_id bigint, event_time bigint, event_type string, database string, table string, body string"

_TRUE = {"true", "1", "yes"}
#: whole-number options → default
_COUNTS = {"batch_size": "100", "partitions": "4", "threads": "2"}


def register(spark) -> None:
    """Register :class:`HMSDataSource` as format ``hms`` in ``spark`` (a SparkSession)."""
    spark.dataSource.register(HMSDataSource)


class HMSDataSource(DataSource):
    """Format ``hms``: catalog metadata through the gateway. See the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return "hms"

    def _view(self) -> str:
        view = self.options.get("path") or self.options.get("view") or "tables"
        if view not in VIEWS and view != "events":
            raise ValueError(f"hms data source: unknown view {view!r} (one of {', '.join(VIEWS)}, events)")
        return view

    def schema(self) -> str:
        view = self._view()
        return EVENTS_SCHEMA if view == "events" else SCHEMAS[view]

    def reader(self, schema) -> "HMSReader":
        view = self._view()
        if view == "events":
            raise ValueError("hms data source: 'events' is a stream: spark.readStream.format('hms')")
        return HMSReader(view, **reader_options(self.options))

    def simpleStreamReader(self, schema) -> "HMSEventStreamReader":
        if self._view() != "events":
            raise ValueError("hms data source: only the view 'events' can be read as a stream")
        options = reader_options(self.options)
        start = self.options.get("starting_after")
        return HMSEventStreamReader(
            url=options["url"], auth=options["auth"], ca=options["ca"], timeout=options["timeout"],
            starting_after=int(start) if start else None,
            db=self.options.get("database"), table=self.options.get("table"),
            types=[t for t in self.options.get("types", "").split(",") if t])


def reader_options(options) -> dict:
    """Check the data source ``options`` (a case-insensitive mapping of strings) and turn them
    into :class:`HMSReader` keyword arguments; the auth object is built here, on the driver.

    Raises ValueError naming the option that is wrong (never a secret).
    """
    url = options.get("url")
    if not url:
        raise ValueError("hms data source: option 'url' (https://host:port/gateway/<topology>/<path>) is required")
    protocol = options.get("protocol", "binary")
    if protocol not in PROTOCOLS:
        raise ValueError(f"hms data source: option 'protocol' must be one of {', '.join(PROTOCOLS)}")
    try:
        counts = {name: int(options.get(name, default)) for name, default in _COUNTS.items()}
        timeout = float(options.get("timeout", "60"))
    except ValueError:
        raise ValueError(f"hms data source: options {', '.join(map(repr, _COUNTS))} and 'timeout' are numbers") from None
    if min(counts.values()) < 1 or timeout <= 0:
        raise ValueError(f"hms data source: {', '.join(map(repr, _COUNTS))} must be at least 1 and 'timeout' positive")
    auth = None
    method = options.get("auth")
    if method:
        netrc = options.get("netrc")
        if netrc is not None and netrc.lower() in _TRUE:
            netrc = True
        auth = auth_from_options(
            method, user=options.get("user"), password_env=options.get("password_env"),
            password_file=options.get("password_file"), netrc=netrc, token_env=options.get("token_env"),
            token_file=options.get("token_file"), cert=options.get("cert"), key=options.get("key"),
            service=options.get("service", "HTTP"), host=urlsplit(url).hostname,
        )
    return {
        "url": url, "auth": auth, "ca": options.get("ca"), "protocol": protocol, "timeout": timeout,
        "database": options.get("database", "*"), "table": options.get("table", "*"),
        **counts,
    }


class _BatchPartition(InputPartition):
    """An input partition carrying a tuple of :class:`~hms_gateway_client.datasource.crawl.Batch`."""

    def __init__(self, batches: tuple[Batch, ...]):
        super().__init__(batches)
        self.batches = batches


class HMSReader(DataSourceReader):
    """Batch reader of one view. Pickled to the executors: holds only plain values and the
    auth object (no connection; each :meth:`read` opens its own)."""

    def __init__(self, view: str, *, url: str, auth: Auth | None, ca: str | None, protocol: str,
                 timeout: float, database: str, table: str, batch_size: int, partitions: int = 4,
                 threads: int = 2):
        self.view, self.url, self.auth, self.ca = view, url, auth, ca
        self.protocol, self.timeout = protocol, timeout
        self.database, self.table, self.batch_size = database, table, batch_size
        self.partition_count, self.threads = partitions, threads

    def _connect(self):
        return connect(self.url, auth=self.auth, ca=self.ca, protocol=self.protocol, timeout=self.timeout)

    def partitions(self) -> list[InputPartition]:
        """On the driver: plan the crawl (one ``get_databases``, one ``get_tables`` per database)."""
        with self._connect() as client:
            shares = plan_partitions(client, self.view, database=self.database, table=self.table,
                                     partitions=self.partition_count, batch_size=self.batch_size)
        # Spark needs at least one input partition; an empty one yields nothing.
        return [_BatchPartition(s) for s in shares] or [_BatchPartition(())]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        """On an executor: the rows of one input partition, ``threads`` calls in flight."""
        yield from partition_rows(self._connect, self.view, partition.batches,  # type: ignore[attr-defined]
                                  threads=self.threads)


def _event_row(event: dict) -> tuple:
    time = event.get("timestamp", event.get("eventTime"))
    return (event["eventId"], time, event.get("eventType"), event.get("db"), event.get("table"),
            json.dumps(event, separators=(",", ":")))


class HMSEventStreamReader(SimpleDataSourceStreamReader):
    """Streaming reader of view ``events``: HMS's notification log through an ``event-stream``
    service (``url``), on the driver (Spark's simple stream reader). Offsets are
    ``{"after": <last event id read>}``; a new query starts at ``starting_after`` or, without
    it, at the newest event (events from then on). A log trimmed past the query's offset
    raises ``ResyncRequired`` (the query fails: restart it from a fresh catalog read).
    """

    def __init__(self, *, url: str, auth: Auth | None, ca: str | None, timeout: float,
                 starting_after: int | None, db: str | None, table: str | None, types: list[str]):
        self.url, self.auth, self.ca, self.timeout = url, auth, ca, timeout
        self.starting_after = starting_after
        self.filters = {"db": None if db in (None, "*") else db,
                        "table": None if table in (None, "*") else table, "types": types or None}
        self._poller: EventPoller | None = None

    def _poll(self, after: int | None) -> tuple[list[dict], int]:
        if self._poller is None:  # made here: a reader is pickled before it is used
            self._poller = EventPoller(self.url, auth=self.auth, context=ssl_context(self.ca, self.auth),
                                       timeout=self.timeout, **self.filters)
        return self._poller.poll(after, 0.0)

    def initialOffset(self) -> dict:
        if self.starting_after is not None:
            return {"after": self.starting_after}
        return {"after": self._poll(None)[1]}

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        """The events available after ``start`` (one poll, up to 1,000 events)."""
        page, after = self._poll(start["after"])
        return iter([_event_row(e) for e in page]), {"after": after}

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        """Replay of a batch (recovery): the events after ``start`` up to ``end``, both ids."""
        after = start["after"]
        while after < end["after"]:
            page, following = self._poll(after)
            yield from (_event_row(e) for e in page if e["eventId"] <= end["after"])
            if following == after:
                break  # nothing more on the gateway: the log no longer reaches ``end``
            after = following

    def commit(self, end: dict) -> None:
        """Nothing to release: the gateway keeps no per-reader state."""
