"""A gateway killed (SIGKILL) in the middle of an Iceberg REST commit (issues 22 and 33): the table
stays consistent, and the next commit lands without waiting for HMS's lock timeout.

"In the middle" is made deterministic without a hook in the gateway: the gateway reaches HMS
through a TCP relay that holds the commit's ``alter_table_with_environment_context``, either
the call itself (HMS never sees it: the table must stay at the base, the new metadata file is
an unreferenced leftover) or HMS's reply (HMS applied it: the table must point at the new file,
which exists). While the relay holds, the gateway holds HMS's EXCLUSIVE table lock (``show_locks``
says so); then the gateway process is killed. HMS runs its housekeeping with the default
``hive.txn.timeout`` (300 s), longer than the new gateway's ``lock_wait_seconds`` (30 s): the next
commit lands only because the new gateway releases the orphaned lock itself, its holder being a
gateway process of this host that is gone (gateway/upstream/locks.py), and counts it
(``hms_gateway_hms_locks_released_total{reason="dead"}``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from tests.support.gateway import GatewayFactory, RunningGateway, metric
from tests.support.hms import RunningHMS, start_hms
from tests.support.iceberg.clients import rest_catalog
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = pytest.mark.integration

PATH = "iceberg"
USER, PASSWORD = "etl", "etl-password"
TXN_TIMEOUT_SECONDS = 300
#: hive-site: HMS's default lock timeout (housekeeping is on in every embedded HMS, demo/hms.py).
SITE = {"hive.txn.timeout": f"{TXN_TIMEOUT_SECONDS}s"}
COMMIT_CALL = b"alter_table_with_environment_context"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


class HoldingRelay:
    """A TCP relay to HMS that, once ``armed``, holds the first ``COMMIT_CALL`` it sees: the call
    (``hold="call"``: never forwarded) or HMS's reply to it (``hold="reply"``). ``reached`` is
    set when it holds; ``release()`` drops what it holds and closes that connection."""

    def __init__(self, target: tuple[str, int], hold: str):
        self.target, self.hold, self.port = target, hold, 0  # start(): port 0, read back
        self.armed = False
        self.reached, self._release = threading.Event(), threading.Event()
        self._server: socket.socket | None = None
        self._sockets: list[socket.socket] = []

    def start(self) -> "HoldingRelay":
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            self._sockets += [client, upstream]
            replies_held = threading.Event()
            threading.Thread(target=self._calls, args=(client, upstream, replies_held), daemon=True).start()
            threading.Thread(target=self._replies, args=(upstream, client, replies_held), daemon=True).start()

    def _calls(self, client: socket.socket, upstream: socket.socket, replies_held: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if self.armed and not self.reached.is_set() and COMMIT_CALL in data:
                    if self.hold == "call":
                        self._held(client, upstream)
                        return
                    replies_held.set()
                upstream.sendall(data)
        except OSError:
            pass
        self._close(client, upstream)

    def _replies(self, upstream: socket.socket, client: socket.socket, replies_held: threading.Event) -> None:
        try:
            while data := upstream.recv(65536):
                if replies_held.is_set():
                    self._held(client, upstream)
                    return
                client.sendall(data)
        except OSError:
            pass
        self._close(client, upstream)

    def _held(self, client: socket.socket, upstream: socket.socket) -> None:
        self.reached.set()
        self._release.wait()
        self._close(client, upstream)

    @staticmethod
    def _close(*sockets: socket.socket) -> None:
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def release(self) -> None:
        self.armed = False
        self._release.set()

    def stop(self) -> None:
        self.release()
        if self._server is not None:
            self._server.close()
        self._close(*self._sockets)


@pytest.fixture(scope="module")
def crash_hms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHMS]:
    running = start_hms(tmp_path_factory.mktemp("hms-iceberg-crash"), site=SITE)
    yield running
    running.server.stop()


def _gateway(factory: GatewayFactory, port: int) -> RunningGateway:
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [f"thrift://127.0.0.1:{port}"]},
               "options": {"lock_check_min_wait_seconds": 0.05, "lock_check_max_wait_seconds": 0.5,
                           "lock_wait_seconds": 30}}
    return factory(services=[service], users={USER: PASSWORD})


def _rest(gw: RunningGateway) -> RestCatalog:
    return rest_catalog(gw, user=USER, password=PASSWORD, path=PATH)


def _locks(hms: RunningHMS, db: str, table: str) -> list:
    """HMS's ``show_locks`` entries on the table."""
    _, ttypes = hive_metastore_modules()
    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        return [lock for lock in client.show_locks(ttypes.ShowLocksRequest()).locks or ()
                if (lock.dbname, lock.tablename) == (db, table)]
    finally:
        transport.close()


def _parameters(hms: RunningHMS, db: str, table: str) -> dict[str, str]:
    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        return dict(client.get_table(db, table).parameters)
    finally:
        transport.close()


def _local(location: str) -> Path:
    return Path(location.removeprefix("file:").removeprefix("//"))


@pytest.mark.parametrize("hold", ["call", "reply"])
def test_a_gateway_killed_during_a_commit_leaves_the_table_consistent_and_the_lock_expires(
        hold, crash_hms, gateway_factory, monkeypatch):
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    db = f"crash_{hold}"
    relay = HoldingRelay((crash_hms.host, crash_hms.port), hold).start()
    try:
        doomed = _gateway(gateway_factory, relay.port)
        rest = _rest(doomed)
        rest.create_namespace(db)
        rest.create_table(f"{db}.t", schema=SCHEMA).append(pa.table({"id": pa.array([1], pa.int64())}))
        base = _parameters(crash_hms, db, "t")["metadata_location"]

        relay.armed = True
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                rest.load_table(f"{db}.t").append(pa.table({"id": pa.array([2], pa.int64())}))
                outcome.append(None)
            except BaseException as exc:  # the gateway dies under it
                outcome.append(exc)

        writer = threading.Thread(target=commit)
        writer.start()
        assert relay.reached.wait(60), doomed.log()[-3000:]
        held = _locks(crash_hms, db, "t")
        _, ttypes = hive_metastore_modules()
        assert [(lock.user, lock.type, lock.state) for lock in held] == [
            (USER, ttypes.LockType.EXCLUSIVE, ttypes.LockState.ACQUIRED)]
        doomed.process.kill()  # SIGKILL: no unlock, no cleanup
        doomed.process.wait()
        killed_at = time.monotonic()
        writer.join(60)
        assert outcome and outcome[0] is not None  # the client never got a success
        assert [lock.lockid for lock in _locks(crash_hms, db, "t")] == [held[0].lockid]  # orphaned
        relay.release()

        # consistent: HMS points at a metadata file that exists, the base or the new one
        parameters = _parameters(crash_hms, db, "t")
        current = parameters["metadata_location"]
        assert _local(current).is_file()
        hive = HiveCatalog("hms", uri=crash_hms.uri)
        expected = [1] if hold == "call" else [1, 2]
        assert sorted(hive.load_table(f"{db}.t").scan().to_arrow()["id"].to_pylist()) == expected
        if hold == "call":
            assert current == base  # HMS never saw the alter; the new file is a leftover
        else:
            assert current != base and parameters["previous_metadata_location"] == base

        # a new gateway releases the dead gateway's lock (it waits 30 s at most; HMS's timeout is 300 s)
        successor = _gateway(gateway_factory, crash_hms.port)
        again = _rest(successor)
        again.load_table(f"{db}.t").append(pa.table({"id": pa.array([3], pa.int64())}))
        waited = time.monotonic() - killed_at
        print(f"\n{hold}: the next commit landed {waited:.1f} s after the kill (hive.txn.timeout {TXN_TIMEOUT_SECONDS} s)")
        assert metric(successor, "hms_gateway_hms_locks_released_total", reason="dead") >= 1
        table = again.load_table(f"{db}.t")
        assert sorted(table.scan().to_arrow()["id"].to_pylist()) == expected + [3]
        assert len(table.snapshots()) == len(expected) + 1
        assert _locks(crash_hms, db, "t") == []
    finally:
        relay.stop()
