"""A small direct Thrift client for the demo's Hive Metastore: bulk ``add_partitions`` and a catalog check.

Uses thriftpy2 (a runtime dependency) with the project's IDL, strict TBinaryProtocol over a
buffered or framed socket, as HMS 2.3 expects on its Thrift port. Calls follow the Hive 2.3
``ThriftHiveMetastore`` service (``add_partitions_req``, ``get_database``, ``get_table``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from gateway.thrift.schema import DEFAULT_IDL
from hms_gateway_client.partition_names import partition_name

__all__ = [
    "CATALOG_MARKER",
    "add_partitions",
    "catalog_exists",
    "connect",
    "load_idl",
    "parse_metastore_uri",
]

# Database property the pipeline sets on `sales` as its very last step (see pipeline.py).
CATALOG_MARKER = ("sales", "hms_demo.catalog", "complete")
_BATCH = 1000  # partitions per add_partitions_req call: keeps each message a few MB at most


@functools.lru_cache(maxsize=1)
def load_idl():
    """Parse the project's Hive Metastore IDL with thriftpy2 (once) and return the module."""
    import thriftpy2

    return thriftpy2.load(str(DEFAULT_IDL), module_name="hive_metastore_demo_thrift")


def parse_metastore_uri(uri: str) -> tuple[str, int]:
    """``thrift://host:port`` → ``(host, port)``; raises ValueError for anything else."""
    parts = urlsplit(uri)
    if parts.scheme != "thrift" or not parts.hostname or parts.port is None:
        raise ValueError(f"expected thrift://host:port, got {uri!r}")
    return parts.hostname, parts.port


@contextlib.contextmanager
def connect(metastore_uri: str, *, framed: bool = False, timeout: float = 120.0) -> Iterator:
    """Yield a thriftpy2 ``ThriftHiveMetastore`` client; ``timeout`` in seconds per socket operation.

    Raises thriftpy2's TTransportException when the metastore is unreachable.
    """
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.rpc import make_client
    from thriftpy2.transport import TBufferedTransportFactory, TFramedTransportFactory

    host, port = parse_metastore_uri(metastore_uri)
    client = make_client(
        load_idl().ThriftHiveMetastore, host, port,
        proto_factory=TBinaryProtocolFactory(strict_read=True, strict_write=True),
        trans_factory=TFramedTransportFactory() if framed else TBufferedTransportFactory(),
        timeout=int(timeout * 1000),  # thriftpy2 takes milliseconds
    )
    try:
        yield client
    finally:
        client.close()


def add_partitions(
    metastore_uri: str, db: str, table: str, values: Iterable[Sequence[str]], *,
    connections: int = 1, make_local_dirs: bool = False,
) -> int:
    """Add one partition per item of ``values`` (one string per partition key) to an existing table.

    Existing partitions are kept (``ifNotExists``); each new one gets the table's storage descriptor
    with no location, so HMS derives ``<table location>/<key>=<escaped value>``. Partitions go in
    ``add_partitions_req`` batches of 1,000 over ``connections`` parallel connections (HMS serves
    each connection on its own thread). With ``make_local_dirs`` and a ``file:`` table location,
    the partition directories are created on this host first: HMS then finds them instead of
    making each one, which Hadoop's local filesystem follows with a ``chmod`` child process when
    its native library is absent (as with the pyspark jars). Use it only when this host shares
    the metastore's filesystem. Returns the number of partitions actually added. Raises the IDL's
    MetaException / InvalidObjectException / NoSuchObjectException as thriftpy2 exceptions, and
    ValueError for a value count that does not match the partition keys.
    """
    if connections < 1:
        raise ValueError(f"connections must be at least 1, got {connections}")
    hms = load_idl()
    with connect(metastore_uri) as client:
        tbl = client.get_table(db, table)
    keys = [key.name.lower() for key in tbl.partitionKeys or []]
    location = urlsplit(tbl.sd.location or "")
    local_root = Path(location.path) if make_local_dirs and location.scheme == "file" else None

    def partitions() -> Iterator[list]:
        batch: list = []
        for vals in values:
            vals = [str(v) for v in vals]
            if len(vals) != len(keys):
                raise ValueError(f"{db}.{table} has {len(keys)} partition keys, got values {vals!r}")
            if local_root is not None:
                (local_root / partition_name(keys, vals)).mkdir(parents=True, exist_ok=True)
            sd = hms.StorageDescriptor(
                cols=tbl.sd.cols, location=None, inputFormat=tbl.sd.inputFormat,
                outputFormat=tbl.sd.outputFormat, compressed=tbl.sd.compressed, numBuckets=tbl.sd.numBuckets,
                serdeInfo=tbl.sd.serdeInfo, bucketCols=tbl.sd.bucketCols, sortCols=tbl.sd.sortCols,
                parameters={}, skewedInfo=tbl.sd.skewedInfo, storedAsSubDirectories=tbl.sd.storedAsSubDirectories,
            )
            batch.append(hms.Partition(values=vals, dbName=db, tableName=table, sd=sd, parameters={}))
            if len(batch) >= _BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    batches = partitions()
    take = threading.Lock()  # one generator, several sending threads
    failed = threading.Event()  # a failed batch stops the other connections after their current one

    def send() -> int:
        added = 0
        try:
            with connect(metastore_uri) as conn:
                while not failed.is_set():
                    with take:
                        batch = next(batches, None)
                    if batch is None:
                        break
                    req = hms.AddPartitionsRequest(dbName=db, tblName=table, parts=batch, ifNotExists=True, needResult=True)
                    added += len(conn.add_partitions_req(req).partitions or [])
        except BaseException:
            failed.set()
            raise
        return added

    if connections == 1:
        return send()
    with ThreadPoolExecutor(connections, thread_name_prefix="add-partitions") as pool:
        futures = [pool.submit(send) for _ in range(connections)]
        return sum(future.result() for future in futures)


def catalog_exists(metastore_uri: str, *, framed: bool = False) -> bool:
    """True when a complete demo catalog is in the metastore (the pipeline's final marker is set).

    Raises thriftpy2's TTransportException if the metastore is unreachable: that is not "absent".
    """
    db_name, key, value = CATALOG_MARKER
    hms = load_idl()
    with connect(metastore_uri, framed=framed) as client:
        try:
            db = client.get_database(db_name)
        except hms.NoSuchObjectException:
            return False
    return (db.parameters or {}).get(key) == value
