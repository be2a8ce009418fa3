"""Operations against real processes: hot reload, graceful shutdown, admission control,
slow-loris guard, and failover across two real Hive Metastores (one killed, then restarted)."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.gateway import post, readyz, service, wait_for, write_topology
from tests.support.relay import TcpRelay

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-password"}
GET_DBS = '[1,"get_all_databases",1,1,{}]'
GET_DB = '[1,"get_database",1,1,{"1":{"str":"default"}}]'


def status(gw, body=GET_DBS, topology="default") -> int:
    return post(gw, body, topology=topology)[0]


# --- hot reload ------------------------------------------------------------------------------


def test_topologies_added_changed_broken_and_removed_without_restart(hms, gateway_factory):
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    gw = gateway_factory(services=[service([hms_url])], users=USERS, reload={"interval_seconds": 0.2})
    assert status(gw, topology="extra") == 404
    write_topology(gw.workdir, "extra", {"services": [service([hms_url])]})
    wait_for(lambda: status(gw, topology="extra") == 200)

    # Changed: get_database is no longer exposed.
    write_topology(gw.workdir, "extra", {"services": [service([hms_url], methods=["get_all_databases"])]})
    wait_for(lambda: json.loads(post(gw, GET_DB, topology="extra")[2])[2] == 3)

    # Broken: logged with file and key; the previous version keeps serving.
    (gw.workdir / "topologies" / "extra.yaml").write_text("services: [{path: x, upstream: {urls: [nope]}}]\n")
    wait_for(lambda: "extra.yaml: providers" in gw.log() or "extra.yaml: services" in gw.log())
    assert status(gw, topology="extra") == 200
    assert json.loads(post(gw, GET_DB, topology="extra")[2])[2] == 3

    # Removed.
    (gw.workdir / "topologies" / "extra.yaml").unlink()
    wait_for(lambda: status(gw, topology="extra") == 404)
    assert status(gw) == 200


def test_sighup_forces_a_reload(hms, gateway_factory):
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    gw = gateway_factory(services=[service([hms_url])], users=USERS, reload={"interval_seconds": 3600})
    write_topology(gw.workdir, "late", {"services": [service([hms_url])]})
    time.sleep(0.5)
    assert status(gw, topology="late") == 404  # the poll is an hour away
    gw.process.send_signal(signal.SIGHUP)
    wait_for(lambda: status(gw, topology="late") == 200)


def test_reload_under_load_fails_no_request(hms, gateway_factory):
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    gw = gateway_factory(services=[service([hms_url])], users=USERS, reload={"interval_seconds": 0.1})
    stop = threading.Event()
    statuses: list[int] = []

    def client():
        while not stop.is_set():
            statuses.append(status(gw))

    try:
        with ThreadPoolExecutor(4) as pool:
            for _ in range(4):
                pool.submit(client)
            for i in range(15):  # each rewrite changes the config: the topology is rebuilt
                write_topology(gw.workdir, "default",
                               {"services": [service([hms_url], timeout_seconds=30 + i)]})
                # requests between rewrites, however slow the machine: counted, not timed
                seen = len(statuses)
                wait_for(lambda: len(statuses) >= seen + 3, timeout=60)
                time.sleep(0.2)
            stop.set()
        assert len(statuses) >= 45
        assert set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
        assert "reloaded" in gw.log()
    finally:
        stop.set()


# --- graceful shutdown and admission control --------------------------------------------------


@pytest.fixture
def slow_relay(hms):
    relay = TcpRelay(("127.0.0.1", hms.port), delay=1.5).start()
    yield relay
    relay.stop()


def test_sigterm_drains_in_flight_requests(slow_relay, gateway_factory):
    gw = gateway_factory(services=[service([f"thrift://127.0.0.1:{slow_relay.port}"])], users=USERS,
                         shutdown={"drain_delay_seconds": 1.0, "grace_seconds": 20})
    with ThreadPoolExecutor(4) as pool:
        in_flight = [pool.submit(status, gw) for _ in range(4)]
        time.sleep(0.5)  # the requests are now waiting on the slow upstream
        gw.process.send_signal(signal.SIGTERM)
        wait_for(lambda: readyz(gw) == 503, timeout=5, interval=0.05)
        assert [f.result(timeout=30) for f in in_flight] == [200] * 4
    assert gw.process.wait(30) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", gw.port), timeout=1).close()


def test_max_concurrent_requests_gets_503_with_retry_after(slow_relay, gateway_factory):
    svc = service([f"thrift://127.0.0.1:{slow_relay.port}"])
    svc["max_concurrent_requests"] = 1
    gw = gateway_factory(services=[svc], users=USERS)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: post(gw, GET_DBS), range(3)))
    codes = sorted(r[0] for r in results)
    assert codes[0] == 200 and 503 in codes
    refused = next(r for r in results if r[0] == 503)
    assert refused[1]["Retry-After"] == "1"


def test_connection_without_request_headers_is_closed(hms, gateway_factory):
    gw = gateway_factory(services=[service([f"thrift://127.0.0.1:{hms.port}"])], users=USERS,
                         limits={"client_header_timeout_seconds": 1.0})
    ctx = ssl.create_default_context(cafile=str(gw.ca_file))
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"POST /gateway/default/hmshttpthrift/api/hms HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            assert tls.recv(1024) == b""  # closed by the gateway, no response
            assert time.monotonic() - started < 8
    assert status(gw) == 200  # a well-behaved client is unaffected


# --- failover across two real HMS ------------------------------------------------------------


def test_failover_and_recovery_with_two_real_metastores(hms_factory, gateway_factory):
    with ThreadPoolExecutor(2) as pool:  # two JVMs start side by side
        first, second = pool.map(lambda _: hms_factory(), range(2))
    urls = [f"thrift://127.0.0.1:{first.port}", f"thrift://127.0.0.1:{second.port}"]
    svc = service(urls, probe_interval_seconds=0.5, failover_sleep_seconds=0, timeout_seconds=10)
    gw = gateway_factory(services=[svc], users=USERS)
    stop = threading.Event()
    statuses: list[int] = []

    def client():
        while not stop.is_set():
            statuses.append(status(gw))

    def up(port: int) -> float:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(gw.management_url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "hms_gateway_upstream_up" and sample.labels["upstream"] == f"127.0.0.1:{port}":
                    return sample.value
        return -1

    try:
        with ThreadPoolExecutor(3) as pool:
            for _ in range(3):
                pool.submit(client)
            wait_for(lambda: len(statuses) > 10)
            first.server.stop()  # killed mid-run
            wait_for(lambda: up(first.port) == 0)
            n = len(statuses)
            wait_for(lambda: len(statuses) > n + 20)
            first.server.start()  # back on the same port
            wait_for(lambda: up(first.port) == 1, timeout=60)
            second.server.stop()  # now the other one goes
            n = len(statuses)
            wait_for(lambda: len(statuses) > n + 20)
            stop.set()
        assert set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
    finally:
        stop.set()


# --- logs ------------------------------------------------------------------------------------


def test_json_logs_carry_the_clients_request_id(hms, gateway_factory):
    gw = gateway_factory(services=[service([f"thrift://127.0.0.1:{hms.port}"])], users=USERS,
                         logging={"format": "json", "level": "INFO"})
    code, headers, _ = post(gw, b"not thrift", headers={"X-Request-Id": "trace-4711"})
    assert code == 400 and headers["X-Request-Id"] == "trace-4711"
    code, headers, _ = post(gw, GET_DBS, auth=("admin", "wrong-secret"))
    assert code == 401 and len(headers["X-Request-Id"]) == 36  # a fresh UUID
    lines = [json.loads(line) for line in gw.log().splitlines() if line.startswith("{")]
    logged = [line for line in lines if "logger" in line]  # the rest are audit lines
    mine = [line for line in logged if line.get("request_id") == "trace-4711"]
    assert mine and all({"time", "level", "message"} <= line.keys() for line in mine)
    assert any(line["message"].startswith("400 ") for line in mine)
    assert "wrong-secret" not in gw.log()
