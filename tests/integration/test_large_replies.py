"""Large replies stream: 50,000 partitions through the real gateway from a real HMS.

Checks, on one ``get_partitions`` of 50,000 partitions (about 8 MB of strict binary):

* the reply equals the direct binary call's (count, and every partition's values and location);
* the gateway starts the HTTP response before it has read the whole upstream reply: a relay
  between gateway and HMS holds back the rest of the reply until the client has received
  response bytes (a gateway that buffers the reply would never send any, and the relay's
  wait would run out);
* the gateway process's peak RSS (``VmHWM``) grows by less than one copy of the binary reply
  plus a constant;
* for a strict-binary client (Hive 4's HTTP client, Trino, ``hms-gateway-tunnel``) HMS's own
  bytes stream through the same way, with the client's seqid.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
from pathlib import Path

import pytest

from gateway.thrift.codec import BinaryCodec
from gateway.thrift.translate import binary_reply_to_tjson
from gateway.thrift.schema import load_schema
from tests.support.big_table import BIG_DB, BIG_PARTITIONS, BIG_TABLE, get_partitions_call, raw_call
from tests.support.gateway import service
from tests.support.thrift_gen import hive_metastore_client

pytestmark = [pytest.mark.integration, pytest.mark.long]

PARTITIONS = BIG_PARTITIONS
DB, TABLE = BIG_DB, BIG_TABLE
USER, PASSWORD = "admin", "admin-password"
HOLD_AFTER = 2 << 20  # reply bytes the relay forwards before holding the rest
MEMORY_SLACK = 32 << 20  # the "constant" of the memory bound


class HoldingRelay:
    """TCP relay gateway → HMS that, on a connection, forwards ``hold_after`` reply bytes and
    then waits (at most ``wait`` s) for :attr:`client_saw_bytes` before forwarding the rest."""

    def __init__(self, target: tuple[str, int], hold_after: int, wait: float = 120.0):
        self.target, self.hold_after, self.wait = target, hold_after, wait
        self.client_saw_bytes = threading.Event()
        self.held = threading.Event()  # set once a reply was actually held back
        self.released_in_time: bool | None = None
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, hold: bool) -> None:
        sent = 0
        try:
            while data := src.recv(65536):
                if hold and sent < self.hold_after <= sent + len(data) and not self.held.is_set():
                    head = self.hold_after - sent
                    dst.sendall(data[:head])
                    sent, data = sent + head, data[head:]
                    self.held.set()
                    self.released_in_time = self.client_saw_bytes.wait(self.wait)
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def vm_hwm(pid: int) -> int:
    """Peak resident set size of process ``pid`` in bytes (``/proc/<pid>/status`` VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def tjson_call(name: str, args: str) -> bytes:
    return f'[1,"{name}",1,7,{args}]'.encode()


@pytest.mark.timeout(1800)
def test_fifty_thousand_partitions_stream_in_bounded_memory(big_table_hms, gateway_factory):
    hms = big_table_hms
    with socket.create_connection(("127.0.0.1", hms.port)) as sock:
        binary_reply = raw_call(sock, get_partitions_call(DB, TABLE, seqid=7))
    client, transport = hive_metastore_client("127.0.0.1", hms.port)
    try:
        direct = client.get_partitions(DB, TABLE, -1)
    finally:
        transport.close()
    assert len(direct) == PARTITIONS

    relay = HoldingRelay(("127.0.0.1", hms.port), HOLD_AFTER)
    gw = gateway_factory(services=[service([f"thrift://127.0.0.1:{relay.port}"], timeout_seconds=600)],
                         users={USER: PASSWORD})
    try:
        auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/vnd.apache.thrift.json"}
        conn = http.client.HTTPSConnection("localhost", gw.port, context=gw.ssl_context(), timeout=600)
        path = gw.url().split(str(gw.port), 1)[1]
        # Warm up (imports, TLS, the upstream connection), then take the baseline peak RSS.
        conn.request("POST", path, tjson_call("get_all_databases", "{}"), headers)
        warm = conn.getresponse()
        assert warm.status == 200, warm.read()
        warm.read()
        before = vm_hwm(gw.process.pid)

        args = f'{{"1":{{"str":"{DB}"}},"2":{{"str":"{TABLE}"}},"3":{{"i16":-1}}}}'
        conn.request("POST", path, tjson_call("get_partitions", args), headers)
        response = conn.getresponse()
        assert response.status == 200
        first = response.read1(65536)
        assert first.startswith(b'[1,"get_partitions",2,7,{"0":{"lst":["rec",50000,')
        relay.client_saw_bytes.set()
        body = first + response.read()
        after = vm_hwm(gw.process.pid)
        conn.close()
    finally:
        gw.stop()
        relay.close()

    # Streaming: the relay held the reply back, and response bytes arrived during the hold.
    assert relay.held.is_set(), "the reply was smaller than the relay's hold point"
    assert relay.released_in_time is True, "no response bytes arrived before the whole reply was read"

    # Memory: peak RSS grew by less than one copy of the binary reply plus a constant.
    growth = after - before
    assert growth < len(binary_reply) + MEMORY_SLACK, (
        f"peak RSS grew {growth / 2**20:.1f} MiB for a {len(binary_reply) / 2**20:.1f} MiB binary reply")

    # Same result as the direct call: exact TJSON of the direct raw reply, and the parsed values.
    assert body == binary_reply_to_tjson(binary_reply, load_schema(), seqid=7)
    parts = json.loads(body)[4]["0"]["lst"]
    assert parts[:2] == ["rec", PARTITIONS] and len(parts) == PARTITIONS + 2
    for direct_part, part in zip(direct, parts[2:]):
        assert part["1"]["lst"][2:] == direct_part.values
        assert part["6"]["rec"]["2"]["str"] == direct_part.sd.location

    # A strict-binary client: the same reply streams through as HMS's own bytes.
    relay = HoldingRelay(("127.0.0.1", hms.port), HOLD_AFTER)
    gw = gateway_factory(services=[service([f"thrift://127.0.0.1:{relay.port}"], timeout_seconds=600)],
                         users={USER: PASSWORD})
    try:
        headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/x-thrift"}
        conn = http.client.HTTPSConnection("localhost", gw.port, context=gw.ssl_context(), timeout=600)
        conn.request("POST", path, get_partitions_call(DB, TABLE, seqid=9), headers)
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type") == "application/x-thrift"
        first = response.read1(65536)
        relay.client_saw_bytes.set()
        body = first + response.read()
        conn.close()
    finally:
        gw.stop()
        relay.close()
    assert relay.held.is_set() and relay.released_in_time is True
    assert body == BinaryCodec().encode_reply(binary_reply, load_schema(), 9)
