"""A small direct Thrift client for the demo's Hive Metastore: bulk ``add_partitions`` and a catalog check.

Uses thriftpy2 (a runtime dependency) with the project's IDL, strict TBinaryProtocol over a
buffered or framed socket, as HMS 2.3 expects on its Thrift port. Calls follow the Hive 2.3
``ThriftHiveMetastore`` service (``add_partitions_req``, ``get_database``, ``get_table``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "CATALOG_MARKER",
    "add_partitions",
    "catalog_exists",
    "connect",
    "load_idl",
    "parse_metastore_uri",
]

IDL_PATH = Path(__file__).resolve().parent.parent / "thrift" / "idl" / "hive_metastore.thrift"
# Database property the pipeline sets on `sales` as its very last step (see pipeline.py).
CATALOG_MARKER = ("sales", "hms_gateway.demo.catalog", "complete")
_BATCH = 1000  # partitions per add_partitions_req call: keeps each message a few MB at most


@functools.lru_cache(maxsize=1)
def load_idl():
    """Parse the project's Hive Metastore IDL with thriftpy2 (once) and return the module."""
    import thriftpy2

    return thriftpy2.load(str(IDL_PATH), module_name="hive_metastore_demo_thrift")


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


def add_partitions(metastore_uri: str, db: str, table: str, values: Iterable[Sequence[str]]) -> int:
    """Add one partition per item of ``values`` (one string per partition key) to an existing table.

    Existing partitions are kept (``ifNotExists``); each new one gets the table's storage descriptor
    with no location, so HMS derives ``<table location>/<key>=<escaped value>`` and creates it.
    Returns the number of partitions actually added. Raises the IDL's MetaException /
    InvalidObjectException / NoSuchObjectException as thriftpy2 exceptions.
    """
    hms = load_idl()
    added = 0
    with connect(metastore_uri) as client:
        tbl = client.get_table(db, table)
        nkeys = len(tbl.partitionKeys or [])
        batch: list = []

        def flush() -> int:
            if not batch:
                return 0
            req = hms.AddPartitionsRequest(dbName=db, tblName=table, parts=batch, ifNotExists=True, needResult=True)
            result = client.add_partitions_req(req)
            batch.clear()
            return len(result.partitions or [])

        for vals in values:
            vals = [str(v) for v in vals]
            if len(vals) != nkeys:
                raise ValueError(f"{db}.{table} has {nkeys} partition keys, got values {vals!r}")
            sd = hms.StorageDescriptor(
                cols=tbl.sd.cols, location=None, inputFormat=tbl.sd.inputFormat,
                outputFormat=tbl.sd.outputFormat, compressed=tbl.sd.compressed, numBuckets=tbl.sd.numBuckets,
                serdeInfo=tbl.sd.serdeInfo, bucketCols=tbl.sd.bucketCols, sortCols=tbl.sd.sortCols,
                parameters={}, skewedInfo=tbl.sd.skewedInfo, storedAsSubDirectories=tbl.sd.storedAsSubDirectories,
            )
            batch.append(hms.Partition(values=vals, dbName=db, tableName=table, sd=sd, parameters={}))
            if len(batch) >= _BATCH:
                added += flush()
        added += flush()
    return added


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
