"""A table with many partitions in a real HMS, and raw strict-binary calls to it.

Used by ``tests/integration/test_large_replies.py``, ``test_explorer.py`` and ``bench/run.py``.
Partitions are added over Thrift (``add_partitions_req`` in batches), which is much faster than
Spark SQL, over two connections (HMS works on both cores), into directories made here beforehand
(HMS would fork a ``chmod`` for each directory it makes; see ``metastore_client.add_partitions``).

Building 50,000 partitions costs HMS about four CPU-minutes, so the suite builds them once per
run (:func:`start_big_table_hms`) and every module that needs them starts its own HMS on a copy.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from demo import metastore_client
from gateway.thrift.binary import BinaryMessageScanner, encode_binary_call
from gateway.thrift.schema import TType
from tests.support.hms import RunningHMS, start_hms

if TYPE_CHECKING:
    import pytest


ADD_CONNECTIONS = 2  # one per core: HMS serves each connection on its own thread


def create_partitioned_table(uri: str, db: str, table: str, partitions: int) -> int:
    """Create ``db.table`` (one int column, one string partition key ``p``) with ``partitions``
    partitions ``p=00000…``; returns the number added. An existing database is kept.

    The metastore must share this host's filesystem (its warehouse is a local ``file:`` path)."""
    hms = metastore_client.load_idl()
    with metastore_client.connect(uri) as client:
        try:
            client.create_database(hms.Database(name=db, description="large replies", parameters={}))
        except hms.AlreadyExistsException:
            pass
        sd = hms.StorageDescriptor(
            cols=[hms.FieldSchema("x", "int", "a column")],
            location=None,
            inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            compressed=False, numBuckets=-1,
            serdeInfo=hms.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {"field.delim": ","}),
            bucketCols=[], sortCols=[], parameters={},
        )
        client.create_table(hms.Table(
            tableName=table, dbName=db, owner="bench", sd=sd, parameters={},
            partitionKeys=[hms.FieldSchema("p", "string", "")], tableType="MANAGED_TABLE",
        ))
    return metastore_client.add_partitions(
        uri, db, table, ([f"{i:05d}"] for i in range(partitions)), connections=ADD_CONNECTIONS, make_local_dirs=True,
    )


BIG_DB, BIG_TABLE, BIG_PARTITIONS = "bigdb", "big", 50_000


def _run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every xdist worker of this run shares (each worker's basetemp is one below it);
    without xdist, this session's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _big_table_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workdir of a stopped HMS holding ``bigdb.big`` with 50,000 partitions, built by the
    first worker that asks (the others wait on a file lock) and then only read."""
    root = _run_root(tmp_path_factory)
    snapshot = root / f"hms-{BIG_DB}-{BIG_PARTITIONS}"
    with open(root / f"{snapshot.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
        if not (snapshot / "ready").exists():
            shutil.rmtree(snapshot, ignore_errors=True)  # a build a dead or failed worker left
            running = start_hms(snapshot)
            try:
                added = create_partitioned_table(running.uri, BIG_DB, BIG_TABLE, BIG_PARTITIONS)
            finally:
                running.server.stop()
            assert added == BIG_PARTITIONS, f"{added} partitions added, not {BIG_PARTITIONS}"
            (snapshot / "ready").touch()
    return snapshot


def start_big_table_hms(tmp_path_factory: pytest.TempPathFactory, workdir: Path) -> RunningHMS:
    """Start an HMS in ``workdir`` whose catalog starts as a copy of the run's ``bigdb.big``
    (50,000 partitions ``p=00000…``), for the caller alone.

    The copy's partition locations are the snapshot's folders, which no test writes to; databases
    the caller creates live in its own warehouse. Raises what ``start_hms`` and
    ``create_partitioned_table`` raise."""
    snapshot = _big_table_snapshot(tmp_path_factory)
    shutil.copytree(snapshot / "metastore_db", Path(workdir) / "metastore_db")
    return start_hms(Path(workdir))


def get_partitions_call(db: str, table: str, seqid: int = 1) -> bytes:
    """The strict-binary CALL ``get_partitions(db, table, max_parts=-1)``."""
    return encode_binary_call("get_partitions", seqid, [(1, TType.STRING, db), (2, TType.STRING, table), (3, TType.I16, -1)])


def raw_call(sock: socket.socket, message: bytes, length: int | None = None) -> bytes:
    """Send ``message`` on a connected HMS socket and return the raw reply bytes.

    With ``length`` (a reply of known size) the reply is read without looking at it;
    otherwise :class:`BinaryMessageScanner` finds its end.
    """
    sock.sendall(message)
    chunks, size = [], 0
    scanner = None if length is not None else BinaryMessageScanner((1 << 31) - 1)
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("HMS closed the connection")
        chunks.append(chunk)
        size += len(chunk)
        if length is not None:
            if size >= length:
                return b"".join(chunks)
        elif scanner.feed(chunk) is not None:  # type: ignore[union-attr]
            return b"".join(chunks)
