"""A PySpark data source (Spark 4 Python Data Source API, ``pyspark.sql.datasource``) of Hive
Metastore catalog metadata read through the gateway.

>>> from gateway.datasource import register
>>> register(spark)
>>> (spark.read.format("hms").option("url", "https://gw:8443/gateway/default/hms")
...     .option("ca", "ca.pem").option("auth", "basic").option("user", "alice")
...     .option("password_env", "HMS_PASSWORD").load("tables"))

``load(view)``: ``databases``, ``tables``, ``partitions`` or ``columns`` (schemas in
:data:`gateway.datasource.crawl.SCHEMAS`). The driver lists databases and tables; each input
partition is one database (``databases``) or a batch of ``batch_size`` tables of one database,
fetched by an executor over its own HTTPS connection.

Options (names as the tunnel's flags, ``_`` for ``-``): ``url`` (required), ``ca``, ``auth``
(``basic``, ``bearer``, ``kerberos``, ``cert``; absent: no credentials), ``user``,
``password_env``, ``password_file``, ``netrc`` (a path, or ``true`` for ``~/.netrc``),
``token_env``, ``token_file``, ``cert``, ``key``, ``service`` (Kerberos), ``protocol``
(``binary`` or ``tjson``), ``timeout`` (seconds), ``database`` and ``table`` (HMS name
patterns, default ``*``), ``batch_size`` (tables per input partition, default 100).
Secrets are read on the driver (from the environment, the netrc or the file, never from an
option's value) and travel to the executors inside the pickled reader, as Spark ships every
reader; ``ca``, ``cert`` and ``key`` are paths the executors must be able to read.
Bad options raise ``ValueError`` when the DataFrame is created.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from gateway.client.auth import Auth, auth_from_options
from gateway.client.connection import PROTOCOLS, connect
from gateway.datasource.crawl import SCHEMAS, VIEWS, Batch, plan, rows

__all__ = ["HMSDataSource", "HMSReader", "register", "reader_options"]

_TRUE = {"true", "1", "yes"}


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
        if view not in VIEWS:
            raise ValueError(f"hms data source: unknown view {view!r} (one of {', '.join(VIEWS)})")
        return view

    def schema(self) -> str:
        return SCHEMAS[self._view()]

    def reader(self, schema) -> "HMSReader":
        return HMSReader(self._view(), **reader_options(self.options))


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
        batch_size = int(options.get("batch_size", "100"))
        timeout = float(options.get("timeout", "60"))
    except ValueError:
        raise ValueError("hms data source: options 'batch_size' and 'timeout' are numbers") from None
    if batch_size < 1 or timeout <= 0:
        raise ValueError("hms data source: 'batch_size' must be at least 1 and 'timeout' positive")
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
        "batch_size": batch_size,
    }


class _BatchPartition(InputPartition):
    """An input partition carrying one :class:`~gateway.datasource.crawl.Batch`."""

    def __init__(self, batch: Batch):
        super().__init__(batch)
        self.batch = batch


class HMSReader(DataSourceReader):
    """Batch reader of one view. Pickled to the executors: holds only plain values and the
    auth object (no connection; each :meth:`read` opens its own)."""

    def __init__(self, view: str, *, url: str, auth: Auth | None, ca: str | None, protocol: str,
                 timeout: float, database: str, table: str, batch_size: int):
        self.view, self.url, self.auth, self.ca = view, url, auth, ca
        self.protocol, self.timeout = protocol, timeout
        self.database, self.table, self.batch_size = database, table, batch_size

    def _connect(self):
        return connect(self.url, auth=self.auth, ca=self.ca, protocol=self.protocol, timeout=self.timeout)

    def partitions(self) -> list[InputPartition]:
        """On the driver: plan the crawl (one ``get_databases``, one ``get_tables`` per database)."""
        with self._connect() as client:
            batches = plan(client, self.view, database=self.database, table=self.table,
                           batch_size=self.batch_size)
        # Spark needs at least one input partition; an empty batch of no database yields nothing.
        return [_BatchPartition(b) for b in batches] or [_BatchPartition(Batch(""))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        """On an executor: the rows of one batch, over one HTTPS connection."""
        batch = partition.batch  # type: ignore[attr-defined]
        if not batch.database:
            return
        with self._connect() as client:
            yield from rows(client, self.view, batch)
